// The Workflows view's rows, its documents and Create Workflow from File's problems (src/extension/workflowsModel.ts),
// and the menus of package.json against the rows' context values.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  NODE_STATUSES,
  type HandoffView,
  type NodeStatus,
  type WorkflowDetail,
  type WorkflowFileIssue,
  type WorkflowNodeDetail,
  type WorkflowNodeView,
  type WorkflowSummary,
} from '../../src/core/api';
import type { NodeRecord, TriggerType, WorkflowState } from '../../src/core/api';
import { Commands, Views, WORKFLOW_DIAGNOSTICS } from '../../src/extension/contributions';
import {
  NODES_SHOWN,
  NODE_ICONS,
  createdText,
  dataProblem,
  definitionFileName,
  formatDuration,
  handoffContextValue,
  handoffDetailText,
  handoffRow,
  handoffTarget,
  isDefinitionDocument,
  issueMessage,
  issueRange,
  moreNodesRow,
  nodeContextValue,
  nodeDetailText,
  nodeDocumentKey,
  nodeDuration,
  nodeRow,
  parseNodeDocumentKey,
  reasonProblem,
  cancelReasonProblem,
  refusalText,
  sectionDescription,
  shownNodes,
  sortHandoffs,
  workflowActionText,
  workflowRow,
} from '../../src/extension/workflowsModel';

const T0 = Date.UTC(2026, 0, 1);
const MARKUP = '[click](command:sw4rm.stop) <img src=x>';

function counts(partial: Partial<Record<NodeStatus, number>> = {}): Record<NodeStatus, number> {
  return { PENDING: 0, READY: 0, RUNNING: 0, COMPLETED: 0, FAILED: 0, SKIPPED: 0, ...partial };
}

function summary(overrides: Partial<WorkflowSummary> = {}): WorkflowSummary {
  return {
    workflowId: 'release',
    state: 'RUNNING',
    reason: '',
    nodeCount: 5,
    counts: counts({ COMPLETED: 2, RUNNING: 1, PENDING: 2 }),
    createdAt: T0,
    startedAt: T0 + 1000,
    completedAt: null,
    updatedAt: T0 + 5000,
    ...overrides,
  };
}

function nodeView(
  nodeId: string,
  state: Partial<NodeRecord> = {},
  trigger: TriggerType = 'DEPENDENCY',
  dependencies: string[] = [],
): WorkflowNodeView {
  return {
    definition: {
      nodeId,
      agentId: 'builder-1',
      dependencies,
      trigger,
      inputMapping: { 'src.path': 'path' },
      outputMapping: { score: 'review.score' },
      metadata: {},
    },
    state: {
      nodeId,
      status: 'PENDING',
      startedAt: null,
      completedAt: null,
      output: '',
      error: '',
      waiting: '',
      taskId: '',
      runs: 0,
      readyAt: null,
      fireAt: null,
      loops: 0,
      invocationId: '',
      retries: 0,
      inputs: '',
      ...state,
    },
    inputs: '',
  };
}

function handoff(overrides: Partial<HandoffView> = {}): HandoffView {
  return {
    requestId: 'h-1',
    fromAgent: 'planner',
    requestedTo: 'coder',
    toAgent: 'coder',
    reason: 'needs a TypeScript expert',
    context: { contentType: 'application/json', bytes: 13, text: '{"step":3}', binary: false, truncated: false },
    contextContentType: 'application/json',
    contextBytes: 13,
    capabilitiesRequired: ['typescript'],
    priority: 0,
    timeoutMs: 60_000,
    budget: null,
    delegationPolicy: null,
    taskId: '',
    correlationId: 'c-1',
    parentRequestId: '',
    carryWorktree: false,
    worktree: null,
    requestDigest: 'd',
    state: 'PENDING',
    awaitingOperator: false,
    attempts: [],
    acceptedBy: '',
    rejectionReason: '',
    rejectionCode: '',
    endReason: '',
    completedBy: '',
    expiresAt: T0 + 90_000,
    requestedAt: T0,
    updatedAt: T0,
    endedAt: null,
    ...overrides,
  };
}

function issue(overrides: Partial<WorkflowFileIssue> = {}): WorkflowFileIssue {
  return {
    severity: 'error',
    code: 'unknown_dependency',
    path: 'nodes.b.dependencies[0]',
    message: 'node b depends on x, which is not defined',
    line: 7,
    column: 9,
    endLine: 7,
    endColumn: 10,
    ...overrides,
  };
}

describe('Workflows view rows (no vscode)', () => {
  it('says durations in words that fit a row', () => {
    assert.equal(formatDuration(850), '850 ms');
    assert.equal(formatDuration(12_400), '12 s');
    assert.equal(formatDuration(184_000), '3 min 4 s');
    assert.equal(formatDuration(120_000), '2 min');
    assert.equal(formatDuration(7_500_000), '2 h 5 min');
    assert.equal(formatDuration(3 * 86_400_000 + 4 * 3_600_000), '3 d 4 h');
    assert.equal(formatDuration(-5), '0 ms', 'a clock step back is not a negative duration');
  });

  it('shows a workflow: id, then state · n/m done · what runs, and the reason it waits or failed', () => {
    const running = workflowRow(summary());
    assert.equal(running.label, 'release');
    assert.equal(running.description, 'RUNNING · 2/5 done · 1 running');
    assert.equal(running.icon, 'sync~spin');
    assert.equal(running.contextValue, 'workflow+RUNNING');
    assert.ok(!running.needsYou);
    assert.match(running.tooltip, /nodes: 5 \(2 PENDING, 1 RUNNING, 2 COMPLETED\)/);

    const failed = workflowRow(
      summary({
        state: 'FAILED',
        reason: 'node build failed: exit 2',
        counts: counts({ COMPLETED: 1, FAILED: 1, SKIPPED: 3 }),
        completedAt: T0 + 61_000,
      }),
    );
    assert.equal(failed.description, 'FAILED · 5/5 done · 1 failed, 3 skipped · node build failed: exit 2');
    assert.equal(failed.tone, 'failed');
    assert.match(failed.tooltip, /ended 2026-01-01T00:01:01.000Z \(after 1 min\)/);

    const waiting = workflowRow(
      summary({
        state: 'WAITING',
        reason: 'waiting for a person: Run Node approve',
        counts: counts({ COMPLETED: 3, READY: 1, SKIPPED: 1 }),
      }),
    );
    assert.ok(waiting.needsYou);
    assert.equal(waiting.icon, 'person');
    assert.equal(
      waiting.description,
      'WAITING · needs you · 4/5 done · 1 ready, 1 skipped · waiting for a person: Run Node approve',
    );
    assert.match(waiting.tooltip, /\nwaiting for a person: Run Node approve\n/);
    assert.match(
      waiting.tooltip,
      /Run Node on a node marked needs you, or decide on a failed node in the Approvals view/,
    );

    const defined = workflowRow(summary({ state: 'DEFINED', counts: counts({ PENDING: 5 }), startedAt: null }));
    assert.equal(defined.description, 'DEFINED · 0/5 done · not started');
    assert.equal(defined.contextValue, 'workflow+DEFINED');
  });

  it('gives every node status its icon, and shows agent, trigger, duration and why a node waits or failed', () => {
    assert.deepEqual(Object.keys(NODE_ICONS).sort(), [...NODE_STATUSES].sort());
    assert.equal(new Set(Object.values(NODE_ICONS)).size, NODE_STATUSES.length, 'each status has an icon of its own');
    const now = T0 + 100_000;
    const pending = nodeRow(
      nodeView('test', { waiting: 'dependencies: build, lint' }, 'DEPENDENCY', ['build', 'lint']),
      'RUNNING',
      now,
    );
    assert.equal(pending.description, 'PENDING · builder-1 · waiting for dependencies: build, lint');
    assert.equal(pending.icon, 'circle-large-outline');
    assert.match(pending.tooltip, /depends on: build, lint/);
    assert.match(pending.tooltip, /waiting for dependencies: build, lint/);

    const running = nodeRow(
      nodeView('build', {
        status: 'RUNNING',
        startedAt: now - 12_000,
        runs: 1,
        taskId: 'wf:release:build:1',
        waiting: 'its task wf:release:build:1 on builder-1 (RUNNING)',
      }),
      'RUNNING',
      now,
    );
    assert.equal(
      running.description,
      'RUNNING · builder-1 · 12 s so far',
      'the row says RUNNING: its task on its agent is in the tooltip',
    );
    assert.match(running.tooltip, /waiting for its task wf:release:build:1 on builder-1 \(RUNNING\)/);
    const queued = nodeRow(
      nodeView('build', {
        status: 'RUNNING',
        startedAt: now - 2_000,
        runs: 1,
        taskId: 'wf:release:build:1',
        waiting: 'its task wf:release:build:1, queued: waiting for agent builder-1 to finish its current task',
      }),
      'RUNNING',
      now,
    );
    assert.equal(
      queued.description,
      'RUNNING · builder-1 · 2 s so far · waiting for its task wf:release:build:1, queued: waiting for agent builder-1 to finish its current task',
    );

    const done = nodeRow(
      nodeView('lint', { status: 'COMPLETED', startedAt: T0, completedAt: T0 + 2_500, runs: 2, waiting: 'stale' }),
      'RUNNING',
      now,
    );
    assert.equal(
      done.description,
      'COMPLETED · builder-1 · run 2 · 2 s',
      'a COMPLETED node says nothing about waiting',
    );
    assert.equal(done.tone, 'passed');

    const failed = nodeRow(
      nodeView('deploy', {
        status: 'FAILED',
        startedAt: T0,
        completedAt: T0 + 500,
        error: 'task FAILED: AGENT_UNAVAILABLE',
      }),
      'FAILED',
      now,
    );
    assert.equal(failed.description, 'FAILED · builder-1 · 500 ms · task FAILED: AGENT_UNAVAILABLE');
    assert.equal(failed.icon, 'error');
    assert.match(failed.tooltip, /failed: task FAILED: AGENT_UNAVAILABLE/);

    const skipped = nodeRow(
      nodeView('docs', { status: 'SKIPPED', error: "not chosen by review's route" }),
      'COMPLETED',
      now,
    );
    assert.equal(skipped.description, "SKIPPED · builder-1 · not chosen by review's route");
    assert.equal(skipped.icon, 'debug-step-over');
  });

  it("marks a READY MANUAL node of an active workflow as needing you, with the menus' context value", () => {
    const manual = nodeView('approve', { status: 'READY', waiting: 'a person: Run Node' }, 'MANUAL', ['build']);
    const row = nodeRow(manual, 'RUNNING', T0);
    assert.ok(row.needsYou);
    assert.equal(row.icon, 'person');
    assert.equal(row.description, 'READY · builder-1 · MANUAL · needs you: Run Node');
    assert.equal(row.contextValue, 'workflowNode+READY+MANUAL+RUNNING');
    assert.ok(!nodeRow(manual, 'CANCELLED', T0).needsYou, 'not in a workflow that is over');
    assert.ok(!nodeRow(nodeView('b', { status: 'READY' }), 'RUNNING', T0).needsYou, 'a DEPENDENCY node runs by itself');
  });

  it('keeps agent text as text: markup in reasons stays in the plain tooltip, cut in the row', () => {
    const row = nodeRow(nodeView('x', { status: 'FAILED', error: `${MARKUP} ${'y'.repeat(400)}` }), 'FAILED', T0);
    assert.ok(row.tooltip.includes(MARKUP));
    assert.ok(row.description.length < 220, 'a long reason is cut in the row');
    assert.ok(row.description.endsWith('…'));
  });

  it('shows at most NODES_SHOWN nodes of a large workflow, and a row saying how many there are (from the counts: the view reads no more)', () => {
    const nodes = Array.from({ length: NODES_SHOWN + 1234 }, (_, i) => nodeView(`n${i}`));
    const total = summary({ nodeCount: NODES_SHOWN + 1234 });
    // What the view gets: the first NODES_SHOWN nodes and the summary counting all of them.
    const { nodes: shown, hidden } = shownNodes({ nodes: nodes.slice(0, NODES_SHOWN), summary: total });
    assert.equal(shown.length, NODES_SHOWN);
    assert.equal(shown[0].definition.nodeId, 'n0', "the author's order");
    assert.equal(hidden, 1234);
    assert.equal(moreNodesRow(shown.length, total.nodeCount).label, `first ${NODES_SHOWN} of 1,734 nodes`);
    assert.deepEqual(shownNodes({ nodes, summary: total }).nodes.length, NODES_SHOWN, 'a full detail is cut too');
    assert.equal(shownNodes({ nodes: nodes.slice(0, 3), summary: summary({ nodeCount: 3 }) }).hidden, 0);
  });

  it('counts the sections: active workflows, those that need you; pending handoffs and those routed to you', () => {
    const workflows = [
      summary(),
      summary({ workflowId: 'b', state: 'WAITING' }),
      summary({ workflowId: 'c', state: 'COMPLETED' }),
    ];
    assert.equal(sectionDescription('workflows', workflows, []), '3 (2 active, 1 needs you)');
    const handoffs = [
      handoff(),
      handoff({ requestId: 'h-2', awaitingOperator: true, toAgent: '' }),
      handoff({ requestId: 'h-3', state: 'COMPLETED' }),
    ];
    assert.equal(sectionDescription('handoffs', [], handoffs), '3 (2 pending, 1 needs you)');
    assert.equal(sectionDescription('workflows', [], handoffs), '0');
  });

  it("orders handoffs: pending (yours first), accepted, completed, then expired / rejected / cancelled, keeping the core's order within", () => {
    const list = [
      handoff({ requestId: 'expired', state: 'EXPIRED' }),
      handoff({ requestId: 'done', state: 'COMPLETED' }),
      handoff({ requestId: 'p1' }),
      handoff({ requestId: 'acc', state: 'ACCEPTED' }),
      handoff({ requestId: 'rej', state: 'REJECTED' }),
      handoff({ requestId: 'mine', awaitingOperator: true }),
      handoff({ requestId: 'p2' }),
      handoff({ requestId: 'cancelled', state: 'CANCELLED' }),
    ];
    assert.deepEqual(
      sortHandoffs(list).map((h) => h.requestId),
      ['mine', 'p1', 'p2', 'acc', 'done', 'expired', 'rej', 'cancelled'],
    );
  });

  it('shows a handoff: request id, then from → to · state · time left · reason; one routed to a person needs you', () => {
    const now = T0 + 30_000;
    const pending = handoffRow(handoff(), now);
    assert.equal(pending.label, 'h-1');
    assert.equal(pending.description, 'planner → coder · PENDING · expires in 1 min · needs a TypeScript expert');
    assert.equal(pending.contextValue, 'handoff+PENDING');
    assert.ok(!pending.needsYou);

    const mine = handoffRow(
      handoff({
        requestedTo: '',
        toAgent: '',
        awaitingOperator: true,
        attempts: [
          { agentId: 'coder', at: T0, outcome: 'rejected', reason: 'busy', code: 'OVERLOADED', endedAt: T0 + 1 },
        ],
      }),
      now,
    );
    assert.ok(mine.needsYou);
    assert.equal(mine.icon, 'person');
    assert.equal(
      mine.description,
      'planner → you · PENDING · needs you · expires in 1 min · needs a TypeScript expert',
    );
    assert.equal(mine.contextValue, 'handoff+PENDING+operator');
    assert.match(mine.tooltip, /from planner to \(by capability\)/);
    assert.match(mine.tooltip, /targets tried: coder \(rejected: busy\)/);

    const rejected = handoffRow(
      handoff({
        state: 'REJECTED',
        rejectionReason: 'out of scope',
        rejectionCode: 'CAPABILITY_MISMATCH',
        expiresAt: null,
        endedAt: now,
      }),
      now,
    );
    assert.equal(rejected.description, 'planner → coder · REJECTED CAPABILITY_MISMATCH · out of scope');
    assert.equal(
      handoffContextValue({ state: 'REJECTED', awaitingOperator: true }),
      'handoff+REJECTED',
      'an ended handoff offers no Accept',
    );
    assert.equal(
      handoffTarget({ toAgent: '', requestedTo: '', awaitingOperator: true, acceptedBy: 'operator:ana' }),
      'operator:ana',
    );
    assert.equal(
      handoffTarget({ toAgent: '', requestedTo: '', awaitingOperator: true, acceptedBy: '' }),
      'you',
      'rejected by the operator too',
    );
    assert.equal(
      handoffTarget({ toAgent: '', requestedTo: '', awaitingOperator: false, acceptedBy: '' }),
      '(no agent found)',
    );
  });

  it("writes a handoff's details with its context as text, JSON pretty-printed, binary by size only", () => {
    const text = handoffDetailText(
      handoff({
        attempts: [{ agentId: 'coder', at: T0, outcome: '', reason: '', code: '', endedAt: null, via: 'requested' }],
        carryWorktree: true,
        worktree: { repoId: 'app', worktreeId: 'planner', outcome: 'bound', detail: '', invocationId: '' },
      }),
    );
    assert.match(text, /^Handoff h-1\n/);
    assert.match(text, /requested to {4}coder/);
    assert.match(text, /coder \(requested\) \(current\)/);
    assert.match(text, /worktree {8}app\/planner \(bound\)/);
    assert.ok(text.includes('{\n  "step": 3\n}'));
    const binary = handoffDetailText(
      handoff({ context: { contentType: '', bytes: 5, text: '', binary: true, truncated: false } }),
    );
    assert.match(binary, /\(5 bytes, not UTF-8 text\)/);
  });
});

describe('Show Node Inputs and Outputs (no vscode)', () => {
  function detail(state: WorkflowState = 'RUNNING', node: Partial<NodeRecord> = {}): WorkflowNodeDetail {
    const review = nodeView(
      'review',
      {
        status: 'COMPLETED',
        startedAt: T0,
        completedAt: T0 + 3_000,
        runs: 1,
        output: '{"score":0.8,"notes":"ok"}',
        taskId: 'wf:release:review:1',
        ...node,
      },
      'DEPENDENCY',
      ['build'],
    );
    return {
      summary: summary({ state }),
      data: '{"review":{"score":0.8}}',
      node: {
        ...review,
        definition: { ...review.definition, metadata: { route: "score > 0.5 ? 'ship' : 'fix'" } },
        inputs: node.status === 'SKIPPED' ? '' : '{"path":"src"}',
      },
    };
  }

  it("shows the definition in the file's field names, inputs and output pretty-printed, runs and times", () => {
    const text = nodeDetailText(detail(), T0 + 10_000);
    assert.match(text, /^Workflow release · node review\n/);
    assert.match(text, /status {10}COMPLETED/);
    assert.match(text, /runs {12}1/);
    assert.match(text, /duration {8}3 s/);
    assert.ok(text.includes('"node_id": "review"'));
    assert.ok(text.includes('"trigger_type": "DEPENDENCY"'));
    assert.ok(text.includes('"route": "score > 0.5 ? \'ship\' : \'fix\'"'));
    assert.ok(text.includes('Inputs (from workflow_data by input_mapping):\n{\n  "path": "src"\n}'));
    assert.ok(
      text.includes('Output (written to workflow_data by output_mapping):\n{\n  "score": 0.8,\n  "notes": "ok"\n}'),
    );
    assert.ok(text.indexOf('Inputs') < text.indexOf('Definition:'), 'what the command is named for comes first');
    assert.match(
      nodeDetailText(detail('RUNNING', { status: 'READY', output: '' }), T0),
      /Inputs \(from workflow_data by input_mapping, as it would be given them now\):/,
    );
    const skipped = nodeDetailText(
      detail('RUNNING', { status: 'SKIPPED', output: '', error: "dependency 'build' SKIPPED" }),
      T0,
    );
    assert.match(skipped, /Inputs: none \(SKIPPED: it was not run\)\n\nOutput/);
  });

  it('keys documents by both ids, whatever characters they hold', () => {
    for (const [w, n] of [
      ['release', 'review'],
      ['a/b+c', 'x y/z'],
      ['%', '+'],
    ]) {
      const key = nodeDocumentKey(w, n);
      assert.ok(!key.includes('/'));
      assert.deepEqual(parseNodeDocumentKey(key), { workflowId: w, nodeId: n });
    }
    assert.equal(parseNodeDocumentKey('only-one'), undefined);
  });

  it('says how long a node ran, runs so far, or nothing', () => {
    assert.equal(nodeDuration({ startedAt: null, completedAt: null, status: 'PENDING' }, T0), '');
    assert.equal(
      nodeDuration({ startedAt: T0, completedAt: null, status: 'RUNNING' }, T0 + 65_000),
      '1 min 5 s so far',
    );
    assert.equal(
      nodeDuration({ startedAt: T0, completedAt: null, status: 'READY' }, T0 + 65_000),
      '',
      'a node reset for a resume',
    );
  });
});

describe('Create Workflow from File: problems on the file, data fields (no vscode)', () => {
  const lines = ['workflow_id: release', 'nodes:', '  a:', '    agent_id: builder', '    dependencies: [c]'];
  const lineLength = (line: number) => lines[line]?.length ?? 0;

  it('places an issue 0-based, widening an empty or unknown end to the rest of the line', () => {
    assert.deepEqual(issueRange(issue({ line: 5, column: 20, endLine: 5, endColumn: 23 }), lineLength), {
      startLine: 4,
      startColumn: 19,
      endLine: 4,
      endColumn: 22,
    });
    assert.deepEqual(issueRange(issue({ line: 3, column: 3, endLine: 0, endColumn: 0 }), lineLength), {
      startLine: 2,
      startColumn: 2,
      endLine: 2,
      endColumn: 4,
    });
    assert.deepEqual(
      issueRange(issue({ line: 0, column: 0, endLine: 0, endColumn: 0 }), lineLength),
      { startLine: 0, startColumn: 0, endLine: 0, endColumn: 20 },
      'an issue without a place goes on the first line',
    );
    assert.deepEqual(issueRange(issue({ line: 4, column: 5, endLine: 5, endColumn: 3 }), lineLength), {
      startLine: 3,
      startColumn: 4,
      endLine: 4,
      endColumn: 2,
    });
  });

  it("names a cycle's nodes in the problem unless the message does, and the path it is about", () => {
    const cycle = issue({
      code: 'workflow_cycle_detected',
      message: 'dependency cycle',
      path: 'nodes.a.dependencies[0]',
      cycle: ['a', 'b', 'c'],
    });
    assert.equal(issueMessage(cycle), 'dependency cycle (cycle: a → b → c → a) (at nodes.a.dependencies[0])');
    assert.equal(
      issueMessage({ ...cycle, message: 'workflow_cycle_detected: a → b → c → a at nodes.a.dependencies[0]' }),
      'workflow_cycle_detected: a → b → c → a at nodes.a.dependencies[0]',
    );
  });

  it('names the first error, its place and how many more in the refusal, and offers to start a created workflow', () => {
    const issues = [
      issue({ severity: 'warning', code: 'unreachable_node', message: 'node z is unreachable', line: 30 }),
      issue(),
      issue({ code: 'self_dependency', line: 9 }),
    ];
    assert.equal(
      refusalText('release.yaml', issues),
      'Workflow not created: release.yaml:7:9: unknown_dependency: node b depends on x, which is not defined ' +
        '(and 1 more error: see Problems)',
    );
    assert.equal(
      refusalText('w.json', [issue({ line: 0, column: 0, path: '' })]),
      'Workflow not created: w.json: unknown_dependency: node b depends on x, which is not defined',
    );
    assert.doesNotMatch(
      refusalText('w.json', [issue({ message: 'see [this](http://x)' })]),
      /\[|\]/,
      'notification text: no links',
    );
    assert.equal(createdText('release', 0), 'Workflow release created. Start it now?');
    assert.equal(createdText('release', 2), 'Workflow release created with 2 warnings (see Problems). Start it now?');
  });

  it('tells the core YAML from JSON by the file name, or by the language of an untitled document', () => {
    assert.equal(definitionFileName('release.yml', 'yaml'), 'release.yml');
    assert.equal(definitionFileName('Untitled-1', 'json'), 'Untitled-1.json');
    assert.equal(definitionFileName('Untitled-1', 'yaml'), 'Untitled-1.yaml');
    assert.ok(isDefinitionDocument('/w/flow.YAML', 'plaintext'));
    assert.ok(isDefinitionDocument('Untitled-2', 'yaml'));
    assert.ok(!isDefinitionDocument('/w/main.ts', 'typescript'));
  });

  it('accepts empty or a JSON object as workflow data, and requires a reason to reject', () => {
    assert.equal(dataProblem(''), undefined);
    assert.equal(dataProblem(' {"branch": "main"} '), undefined);
    assert.match(dataProblem('[1]') ?? '', /JSON object/);
    assert.match(dataProblem('null') ?? '', /JSON object/);
    assert.match(dataProblem('{branch') ?? '', /^Not valid JSON/);
    assert.match(reasonProblem('  ') ?? '', /Say why/);
    assert.equal(reasonProblem('not mine'), undefined);
    assert.match(cancelReasonProblem('') ?? '', /the workflow keeps/);
  });

  it('says what Start, Run Node, Resume and Cancel did', () => {
    const d: WorkflowDetail = {
      summary: summary(),
      definition: { workflowId: 'release', nodes: [], metadata: {} },
      warnings: [],
      data: '{}',
      nodes: [],
    };
    assert.equal(workflowActionText('start', d), 'Workflow release started: RUNNING, 2/5 nodes done.');
    assert.equal(
      workflowActionText('run', d, 'approve'),
      'Node approve of workflow release runs: the workflow is RUNNING, 2/5 nodes done.',
    );
    assert.equal(
      workflowActionText('cancel', { ...d, summary: summary({ state: 'CANCELLED', reason: 'by ana' }) }),
      'Workflow release cancelled: CANCELLED (by ana).',
    );
  });
});

describe('the Workflows view in package.json', () => {
  const root = path.resolve(__dirname, '../../..');
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const context: Array<{ command: string; when: string; group: string }> =
    manifest.contributes.menus['view/item/context'];
  const matcher = (command: string) => {
    const entries = context.filter((e) => e.command === command && e.when.includes(`view == ${Views.workflows}`));
    assert.ok(entries.length, `${command} is in no context menu of the Workflows view`);
    const regexes = entries.map((e) => new RegExp(/viewItem =~ \/(.*)\//.exec(e.when)![1]));
    return (value: string) => {
      const answers = regexes.map((r) => r.test(value));
      assert.ok(
        answers.every((a) => a === answers[0]),
        `${command}: its menu entries disagree on ${value}`,
      );
      return answers[0];
    };
  };

  it('is a view of the SW4RM container next to Negotiations', () => {
    const views: Array<{ id: string; name: string }> = manifest.contributes.views[Views.container];
    const at = views.findIndex((v) => v.id === Views.workflows);
    assert.equal(views[at]?.name, 'Workflows');
    assert.equal(views[at - 1]?.id, Views.negotiations);
    const welcome = manifest.contributes.viewsWelcome
      .filter((w: { view: string }) => w.view === Views.workflows)
      .map((w: { contents: string }) => w.contents)
      .join('\n');
    assert.ok(welcome.includes(`(command:${Commands.createWorkflowFromFile})`));
    assert.equal(WORKFLOW_DIAGNOSTICS, 'sw4rm-workflows');
  });

  it('offers Start on DEFINED workflows and Cancel on those not over', () => {
    const start = matcher(Commands.startWorkflow);
    const cancel = matcher(Commands.cancelWorkflow);
    const value = (state: WorkflowState) => workflowRow(summary({ state })).contextValue;
    assert.ok(start(value('DEFINED')) && !start(value('RUNNING')));
    for (const state of ['DEFINED', 'RUNNING', 'WAITING'] as const) assert.ok(cancel(value(state)), state);
    for (const state of ['COMPLETED', 'FAILED', 'CANCELLED'] as const) assert.ok(!cancel(value(state)), state);
  });

  it('offers Run Node only on READY MANUAL nodes of an active workflow, Resume from Node on nodes of a started one, Show on every node', () => {
    const run = matcher(Commands.runWorkflowNode);
    const resume = matcher(Commands.resumeWorkflowFromNode);
    const show = matcher(Commands.showWorkflowNode);
    const manualReady = nodeView('approve', { status: 'READY' }, 'MANUAL');
    assert.ok(run(nodeContextValue(manualReady, 'RUNNING')));
    assert.ok(run(nodeContextValue(manualReady, 'WAITING')));
    assert.ok(!run(nodeContextValue(manualReady, 'CANCELLED')));
    assert.ok(!run(nodeContextValue(nodeView('a', { status: 'READY' }, 'DEPENDENCY'), 'RUNNING')));
    assert.ok(!run(nodeContextValue(nodeView('a', { status: 'PENDING' }, 'MANUAL'), 'RUNNING')));
    assert.ok(resume(nodeContextValue(nodeView('a', { status: 'COMPLETED' }), 'COMPLETED')));
    assert.ok(resume(nodeContextValue(nodeView('a', { status: 'FAILED' }), 'FAILED')));
    assert.ok(
      resume(nodeContextValue(nodeView('a', { status: 'SKIPPED' }), 'CANCELLED')),
      'a cancelled workflow may be resumed',
    );
    assert.ok(!resume(nodeContextValue(nodeView('a'), 'DEFINED')), 'a workflow not started is started, not resumed');
    assert.ok(show(nodeContextValue(nodeView('a'), 'DEFINED')));
    assert.ok(!show(workflowRow(summary()).contextValue));
  });

  it('offers Accept and Reject only on handoffs routed to a person', () => {
    const accept = matcher(Commands.acceptHandoff);
    const reject = matcher(Commands.rejectHandoff);
    assert.ok(accept(handoffContextValue({ state: 'PENDING', awaitingOperator: true })));
    assert.ok(reject(handoffContextValue({ state: 'PENDING', awaitingOperator: true })));
    assert.ok(!accept(handoffContextValue({ state: 'PENDING', awaitingOperator: false })));
    assert.ok(!reject(handoffContextValue({ state: 'ACCEPTED', awaitingOperator: false })));
    assert.ok(matcher(Commands.showHandoff)(handoffContextValue({ state: 'COMPLETED', awaitingOperator: false })));
  });

  it('shows every workflow and handoff command in the palette only while the coordinator runs', () => {
    const palette: Array<{ command: string; when: string }> = manifest.contributes.menus.commandPalette;
    for (const [key, id] of Object.entries(Commands)) {
      if (!/Workflow|Handoff/.test(key)) continue;
      assert.equal(palette.find((e) => e.command === id)?.when, 'sw4rm.running', id);
    }
  });
});
