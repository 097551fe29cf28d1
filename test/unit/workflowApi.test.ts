import { strict as assert } from 'node:assert';
import { type WorkflowsChange } from '../../src/core/api';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { ANSWER_NODES } from '../../src/core/workflow/workflows';
import { rejection } from '../support/apiErrors';
import { WorkflowHarness } from '../support/workflowHarness';

const YAML = `workflow_id: review-flow
nodes:
  draft:
    agent_id: writer
    output_mapping:
      text: draft.text
  review:
    agent_id: reviewer
    dependencies: [draft]
    input_mapping:
      draft.text: text
    output_mapping:
      score: review.score
    metadata:
      route: "score > 0.5 ? 'publish' : 'rework'"
  publish:
    agent_id: writer
    dependencies: [review]
    trigger_type: MANUAL
  rework:
    agent_id: writer
    dependencies: [review]
`;

const CYCLIC = `{
  "workflow_id": "cyclic",
  "nodes": {
    "start": { "agent_id": "w" },
    "a": { "agent_id": "w", "dependencies": ["start", "b"] },
    "b": { "agent_id": "w", "dependencies": ["a"] }
  }
}
`;

describe('CoordinatorApi: the workflow section (what the Workflows view uses)', () => {
  let h: WorkflowHarness;
  let api: InProcessCoordinatorApi;

  beforeEach(() => {
    h = new WorkflowHarness();
    api = new InProcessCoordinatorApi(h.coordinator);
  });

  afterEach(() => {
    api.dispose();
    h.dispose();
  });

  it('creates from a YAML file, starts, shows nodes with inputs and outputs, runs a MANUAL node, with live changes', async () => {
    h.agent('writer');
    h.agent('reviewer');
    const changes: WorkflowsChange[] = [];
    api.onDidChangeWorkflows((c) => changes.push(c));
    const created = await api.createWorkflowFromText(YAML, 'review.yaml', 'editor:me');
    assert.deepEqual(created, { ok: true, workflowId: 'review-flow', warnings: [] });
    assert.deepEqual(
      (await api.workflows()).map((w) => [w.workflowId, w.state, w.nodeCount]),
      [['review-flow', 'DEFINED', 4]],
    );
    const started = await api.startWorkflow('review-flow', '{"topic": "parsers"}', 'editor:me');
    assert.equal(started.summary.state, 'RUNNING');
    await h.finish('writer', { text: 'a draft' });
    const detail = await api.workflow('review-flow');
    assert.equal(detail?.nodes.find((n) => n.definition.nodeId === 'review')?.state.status, 'RUNNING');
    const review = await api.workflowNode('review-flow', 'review');
    assert.deepEqual(JSON.parse(review?.node.inputs ?? ''), { text: 'a draft' }, 'the inputs it was given');
    assert.deepEqual(
      JSON.parse((await api.workflowNode('review-flow', 'publish'))?.node.inputs ?? ''),
      { topic: 'parsers', draft: { text: 'a draft' } },
      'the inputs it would be given now',
    );
    await h.finish('reviewer', { score: 0.8 });
    const waiting = await api.workflow('review-flow');
    assert.equal(waiting?.summary.state, 'WAITING');
    assert.deepEqual(
      waiting?.nodes.map((n) => [n.definition.nodeId, n.state.status]),
      [
        ['draft', 'COMPLETED'],
        ['review', 'COMPLETED'],
        ['publish', 'READY'],
        ['rework', 'SKIPPED'],
      ],
    );
    const ran = await api.runWorkflowNode('review-flow', 'publish', 'editor:me');
    assert.equal(ran.summary.state, 'RUNNING');
    await h.finish('writer');
    assert.equal((await api.workflow('review-flow'))?.summary.state, 'COMPLETED');
    assert.ok(
      changes.some((c) => c.workflowId === 'review-flow' && c.nodeId === 'publish'),
      'node changes are announced',
    );
    assert.ok(
      changes.some((c) => c.workflowId === 'review-flow' && c.nodeId === undefined && c.state === 'COMPLETED'),
      'workflow changes are announced',
    );
    assert.deepEqual(
      structuredClone(await api.workflow('review-flow')),
      await api.workflow('review-flow'),
      'plain data',
    );
  });

  it('answers a refused file with every issue placed in it, never throws; the same id with another definition is refused in place', async () => {
    const refused = await api.createWorkflowFromText(CYCLIC, 'cyclic.json', 'editor:me');
    assert.equal(refused.ok, false);
    const cycle = !refused.ok ? refused.issues.find((i) => i.code === 'workflow_cycle_detected') : undefined;
    assert.ok(cycle, JSON.stringify(refused));
    assert.ok(cycle.line > 0, 'placed in the file');
    assert.equal(await api.workflow('cyclic'), undefined);
    assert.ok((await api.createWorkflowFromText(YAML, 'review.yaml', 'editor:me')).ok);
    const again = await api.createWorkflowFromText(YAML, 'review.yaml', 'editor:me');
    assert.ok(again.ok, 'the same definition again: created (idempotent)');
    const other = await api.createWorkflowFromText(
      YAML.replace('agent_id: reviewer', 'agent_id: someone'),
      'review.yaml',
      'editor:me',
    );
    assert.equal(other.ok, false);
    assert.equal(!other.ok && other.issues[0].code, 'ALREADY_EXISTS');
    const broken = await api.createWorkflowFromText('nodes: [unclosed', 'broken.yaml', 'editor:me');
    assert.equal(broken.ok, false);
  });

  it('refuses with CoordinatorApiError: not_found, invalid data, refused states; resume and cancel', async () => {
    assert.equal((await rejection(api.startWorkflow('nope', '', 'editor:me'))).code, 'not_found');
    await api.createWorkflowFromText(YAML, 'review.yaml', 'editor:me');
    const invalid = await rejection(api.startWorkflow('review-flow', '[1, 2]', 'editor:me'));
    assert.equal(invalid.code, 'invalid');
    assert.equal(invalid.sw4rmCode, 'VALIDATION_ERROR');
    assert.equal((await rejection(api.runWorkflowNode('review-flow', 'publish', 'editor:me'))).code, 'refused');
    assert.equal((await rejection(api.resumeWorkflow('review-flow', 'draft', '', 'editor:me'))).code, 'refused');
    h.agent('writer');
    await api.startWorkflow('review-flow', '', 'editor:me');
    assert.equal((await rejection(api.startWorkflow('review-flow', '', 'editor:me'))).sw4rmCode, 'FAILED_PRECONDITION');
    await h.failRun('writer');
    assert.equal((await api.workflow('review-flow'))?.summary.state, 'FAILED');
    const resumed = await api.resumeWorkflow('review-flow', 'draft', '{"hint": "shorter"}', 'editor:me');
    assert.equal(resumed.summary.state, 'RUNNING');
    assert.deepEqual(JSON.parse(resumed.data), { hint: 'shorter' });
    const cancelled = await api.cancelWorkflow('review-flow', 'enough', 'editor:me');
    assert.equal(cancelled.summary.state, 'CANCELLED');
    assert.equal((await rejection(api.cancelWorkflow('review-flow', '', 'editor:me'))).code, 'refused');
  });

  it('stops announcing once disposed', async () => {
    const seen: WorkflowsChange[] = [];
    api.onDidChangeWorkflows((c) => seen.push(c));
    api.dispose();
    h.workflows.create(
      {
        workflowId: 'later',
        nodes: [
          {
            nodeId: 'a',
            agentId: 'w',
            dependencies: [],
            trigger: 'DEPENDENCY',
            inputMapping: {},
            outputMapping: {},
            metadata: {},
          },
        ],
        metadata: {},
      },
      'operator',
      { correlationId: 'c' },
    );
    assert.deepEqual(seen, []);
    assert.equal((await rejection(api.workflows())).code, 'stopped');
  });
});

describe('CoordinatorApi: reading large workflows (the Workflows view, Show Node Inputs and Outputs)', () => {
  let h: WorkflowHarness;
  let api: InProcessCoordinatorApi;

  beforeEach(() => {
    h = new WorkflowHarness();
    api = new InProcessCoordinatorApi(h.coordinator);
  });

  afterEach(() => {
    api.dispose();
    h.dispose();
  });

  it("the view reads the first N nodes and the counts, without working out any node's inputs", async () => {
    h.agent('w');
    const n = 500;
    const nodes = Object.fromEntries(
      Array.from({ length: n }, (_, i) => [`n${i}`, { agent_id: 'w', input_mapping: { topic: 'topic' } }]),
    );
    const created = await api.createWorkflowFromText(
      JSON.stringify({ workflow_id: 'wide', nodes }),
      'wide.json',
      'editor:me',
    );
    assert.ok(created.ok, JSON.stringify(created));
    await api.startWorkflow('wide', '{"topic": "t"}', 'editor:me');
    const detail = await api.workflow('wide', 200);
    assert.ok(detail);
    assert.equal(detail.nodes.length, 200, 'the first 200 nodes');
    assert.equal(detail.nodes[0].definition.nodeId, 'n0', "in the author's order");
    assert.equal(detail.summary.nodeCount, n, 'the counts cover every node');
    assert.equal(detail.summary.counts.RUNNING + detail.summary.counts.READY + detail.summary.counts.PENDING, n);
    assert.ok(
      detail.nodes.every((v) => v.inputs === ''),
      "no node's inputs are worked out for a refresh (O(nodes × workflow_data))",
    );
  });

  it('workflowNode answers one node with its inputs: given at its start (kept after the scheduler forgot its task), would be given now, none when SKIPPED', async () => {
    h.agent('writer');
    h.agent('reviewer');
    const yaml = `workflow_id: one-node
nodes:
  draft:
    agent_id: writer
    input_mapping: { topic: subject }
    output_mapping: { text: draft.text }
    metadata: { route: "'review'" }
  review:
    agent_id: reviewer
    dependencies: [draft]
    input_mapping: { draft.text: text }
  skipped:
    agent_id: writer
    dependencies: [draft]
`;
    assert.ok((await api.createWorkflowFromText(yaml, 'one.yaml', 'editor:me')).ok);
    await api.startWorkflow('one-node', '{"topic": "parsers"}', 'editor:me');
    const pending = await api.workflowNode('one-node', 'review');
    assert.ok(pending);
    assert.equal(pending.node.state.status, 'PENDING');
    assert.deepEqual(JSON.parse(pending.node.inputs), {}, 'what it would be given now');
    assert.deepEqual(JSON.parse(pending.data), { topic: 'parsers' });
    assert.equal(pending.summary.workflowId, 'one-node');
    const running = await api.workflowNode('one-node', 'draft');
    assert.deepEqual(JSON.parse(running!.node.inputs), { subject: 'parsers' });
    assert.match(running!.node.state.waiting, /^its task wf:one-node:draft:1 on writer/);
    await h.finish('writer', { text: 'v1' });
    assert.deepEqual(JSON.parse((await api.workflowNode('one-node', 'review'))!.node.inputs), { text: 'v1' });
    assert.equal((await api.workflowNode('one-node', 'skipped'))!.node.state.status, 'SKIPPED');
    assert.equal((await api.workflowNode('one-node', 'skipped'))!.node.inputs, '', 'a SKIPPED node was given nothing');
    await h.finish('reviewer');
    // The scheduler forgets finished tasks (pruned): the inputs a node was given stay with the node.
    h.restart(() => {
      const store = CoordinatorStore.open(h.dataDir);
      try {
        (store as unknown as { engine: { database: { exec(sql: string): void } } }).engine.database.exec(
          "DELETE FROM scheduler_tasks WHERE task_id LIKE 'wf:one-node:%'",
        );
      } finally {
        store.close();
      }
    });
    api.dispose();
    api = new InProcessCoordinatorApi(h.coordinator);
    assert.deepEqual(JSON.parse((await api.workflowNode('one-node', 'draft'))!.node.inputs), { subject: 'parsers' });
    assert.deepEqual(JSON.parse((await api.workflowNode('one-node', 'review'))!.node.inputs), { text: 'v1' });
    assert.equal(await api.workflowNode('one-node', 'nope'), undefined);
    assert.equal(await api.workflowNode('nope', 'draft'), undefined);
  });

  it('Start (and Run Node, Resume, Cancel) answer the nodes that are not PENDING, at most ANSWER_NODES', async () => {
    h.agent('w');
    const nodes = Object.fromEntries([
      ['root', { agent_id: 'w' }],
      ...Array.from({ length: 499 }, (_, i) => [`n${i}`, { agent_id: 'w', dependencies: ['root'] }]),
    ]);
    assert.ok(
      (await api.createWorkflowFromText(JSON.stringify({ workflow_id: 'answers', nodes }), 'answers.json', 'editor:me'))
        .ok,
    );
    const started = await api.startWorkflow('answers', '', 'editor:me');
    assert.deepEqual(
      started.nodes.map((n) => [n.definition.nodeId, n.state.status]),
      [['root', 'RUNNING']],
      'only what moved',
    );
    assert.equal(started.summary.nodeCount, 500);
    await h.finish('w');
    const cancelled = await api.cancelWorkflow('answers', 'enough', 'editor:me');
    assert.equal(cancelled.nodes.length, Math.min(ANSWER_NODES, 500));
    assert.equal(cancelled.summary.counts.SKIPPED, 499);
  });
});
