import { strict as assert } from 'node:assert';
import { classify } from '../../src/core/kernel/errors';
import { WorkflowError } from '../../src/core/workflow/errors';
import type {
  NodeStatus,
  WorkflowDefinition,
  WorkflowNodeDefinition,
  WorkflowRecord,
} from '../../src/core/workflow/model';
import {
  applyWrites,
  automaticRetryDelay,
  buildLive,
  canonical,
  clearRun,
  downstream,
  MAX_WORKFLOW_DATA_BYTES,
  moveNode,
  moveWorkflow,
  nextForPending,
  nodeOf,
  pendingNode,
  reindex,
  settledState,
  taskIdOf,
  type LiveWorkflow,
} from '../../src/core/workflow/state';
import { validateDefinition } from '../../src/core/workflow/validate';

/** The pure state part of the workflow engine (src/core/workflow/state.ts): plain records, no store, no clock, no log. */

type NodeInput = Partial<WorkflowNodeDefinition> & { readonly nodeId: string };

function definitionOf(workflowId: string, nodes: readonly NodeInput[]): WorkflowDefinition {
  return {
    workflowId,
    metadata: {},
    nodes: nodes.map((n) => ({
      nodeId: n.nodeId,
      agentId: n.agentId ?? 'x',
      dependencies: n.dependencies ?? [],
      trigger: n.trigger ?? 'DEPENDENCY',
      inputMapping: n.inputMapping ?? {},
      outputMapping: n.outputMapping ?? {},
      metadata: n.metadata ?? {},
    })),
  };
}

function liveOf(nodes: readonly NodeInput[], data = '{}'): LiveWorkflow {
  const definition = definitionOf('wf', nodes);
  const validated = validateDefinition(definition);
  assert.ok(validated.ok, JSON.stringify(validated.issues));
  const record: WorkflowRecord = {
    workflowId: 'wf',
    definition,
    warnings: [],
    state: 'RUNNING',
    data,
    nodes: new Map(definition.nodes.map((n) => [n.nodeId, pendingNode(n.nodeId)])),
    createdAt: 0,
    createdBy: 'operator',
    startedAt: 0,
    completedAt: null,
    startedBy: 'operator',
    reason: '',
    updatedAt: 0,
  };
  return buildLive(record, validated.dependents, validated.routes, { seq: 1, chars: 0 });
}

/** Moves a node as the engine does (moveNode), collecting the nodes it unblocks. */
function move(live: LiveWorkflow, nodeId: string, to: NodeStatus, now = 1, unblocked: string[] = []): void {
  moveNode(live, nodeOf(live, nodeId), to, now, (id) => unblocked.push(id));
}

const diamond: readonly NodeInput[] = [
  { nodeId: 'a' },
  { nodeId: 'b', dependencies: ['a'] },
  { nodeId: 'c', dependencies: ['a'] },
  { nodeId: 'd', dependencies: ['b', 'c'] },
];

describe('workflow state (state.ts, no store)', () => {
  it('a new run: every node PENDING and counted, each dependent knows how many dependencies are open', () => {
    const live = liveOf(diamond);
    assert.deepEqual(live.counts, { PENDING: 4, READY: 0, RUNNING: 0, COMPLETED: 0, FAILED: 0, SKIPPED: 0 });
    assert.deepEqual(
      [...live.openDeps],
      [
        ['b', 1],
        ['c', 1],
        ['d', 2],
      ],
    );
    assert.equal(live.dirty, false);
    assert.deepEqual(nextForPending(live, 'a'), { ready: 'a root: no dependencies' });
    assert.equal(nextForPending(live, 'd'), undefined, 'its dependencies have not run');
  });

  it("a dependency COMPLETED touches only its dependents' counts; a node is READY once all of its dependencies COMPLETED", () => {
    const live = liveOf(diamond);
    for (const to of ['READY', 'RUNNING', 'COMPLETED'] as const) move(live, 'a', to, 5);
    assert.equal(live.record.updatedAt, 5);
    assert.equal(live.dirty, true, 'the workflow row is due');
    assert.deepEqual(nextForPending(live, 'b'), { ready: 'dependencies COMPLETED: a' });
    for (const to of ['READY', 'RUNNING', 'COMPLETED'] as const) move(live, 'b', to);
    assert.equal(live.openDeps.get('d'), 1, 'c is still open');
    assert.equal(nextForPending(live, 'd'), undefined);
    for (const to of ['READY', 'RUNNING', 'COMPLETED'] as const) move(live, 'c', to);
    assert.deepEqual(nextForPending(live, 'd'), { ready: 'dependencies COMPLETED: b, c' });
    assert.deepEqual(live.counts, { PENDING: 1, READY: 0, RUNNING: 0, COMPLETED: 3, FAILED: 0, SKIPPED: 0 });
  });

  it('a dependency SKIPPED or FAILED for good makes its dependent SKIPPED, naming it; one a person is asked about does not', () => {
    const live = liveOf(diamond);
    move(live, 'a', 'READY');
    move(live, 'a', 'RUNNING');
    const a = nodeOf(live, 'a');
    a.invocationId = 'hitl-1';
    move(live, 'a', 'FAILED');
    assert.deepEqual([...live.asking], ['a']);
    assert.equal(live.failed.size, 0);
    assert.equal(nextForPending(live, 'b'), undefined, 'asked about: not yet final');
    a.invocationId = '';
    reindex(live, a, () => undefined);
    assert.deepEqual([...live.failed], ['a']);
    assert.equal(live.asking.size, 0);
    assert.deepEqual(nextForPending(live, 'b'), { skip: "dependency 'a' FAILED" });
  });

  it('the indexes follow a READY node by its trigger; leaving READY unblocks it and it is no longer held', () => {
    const live = liveOf([
      { nodeId: 'm', trigger: 'MANUAL' },
      { nodeId: 'e', trigger: 'EVENT', metadata: { event: 'go' } },
      { nodeId: 's', trigger: 'SCHEDULE', metadata: { schedule: '0 * * * *' } },
    ]);
    move(live, 'm', 'READY');
    move(live, 'e', 'READY');
    nodeOf(live, 's').fireAt = 3_600_000;
    move(live, 's', 'READY');
    assert.deepEqual([...live.manual], ['m']);
    assert.deepEqual([...live.events.get('go')!], ['e']);
    assert.deepEqual([...live.due], ['s']);
    live.blocked.set('m', '');
    live.held.add('m');
    const unblocked: string[] = [];
    move(live, 'm', 'RUNNING', 2, unblocked);
    assert.deepEqual(unblocked, ['m']);
    assert.equal(live.manual.size, 0);
    assert.equal(live.held.size, 0);
  });

  it("the workflow's state from its nodes: WAITING for a person, RUNNING saying what it waits for, FAILED once nothing runs, COMPLETED", () => {
    const manual = liveOf([{ nodeId: 'm', trigger: 'MANUAL' }, { nodeId: 'n' }]);
    move(manual, 'm', 'READY');
    assert.deepEqual(
      settledState(manual, () => 'never asked'),
      { to: 'WAITING', reason: 'waiting for a person: Run Node m' },
    );

    const two = liveOf([{ nodeId: 'a' }, { nodeId: 'b' }]);
    move(two, 'a', 'READY');
    assert.deepEqual(
      settledState(two, () => 'waiting for the scheduler'),
      { to: 'RUNNING', reason: 'waiting for the scheduler' },
    );
    move(two, 'a', 'RUNNING');
    move(two, 'b', 'READY');
    move(two, 'b', 'RUNNING');
    nodeOf(two, 'b').error = 'boom';
    move(two, 'b', 'FAILED');
    assert.deepEqual(
      settledState(two, () => ''),
      { to: 'RUNNING', reason: 'node b FAILED: boom; 1 running node(s) finish first, then the workflow ends FAILED' },
    );
    move(two, 'a', 'COMPLETED');
    assert.deepEqual(
      settledState(two, () => ''),
      { to: 'FAILED', reason: 'node b FAILED: boom' },
    );

    const one = liveOf([{ nodeId: 'a' }, { nodeId: 'b' }]);
    move(one, 'a', 'COMPLETED');
    move(one, 'b', 'SKIPPED');
    assert.deepEqual(
      settledState(one, () => ''),
      { to: 'COMPLETED', reason: '' },
    );
    assert.equal(moveWorkflow(one, 'COMPLETED', '', 9), 'RUNNING');
    assert.equal(one.record.state, 'COMPLETED');
    assert.equal(one.record.updatedAt, 9);
  });

  it('workflow_data writes are all or none, bounded in size, and undone on request', () => {
    const live = liveOf([{ nodeId: 'a' }], JSON.stringify({ keep: 1, list: [1] }));
    const written = applyWrites(live, [
      ['out.a', { v: 1 }],
      [['top'], 'x'],
    ]);
    assert.ok(!('error' in written));
    assert.deepEqual(live.data, { keep: 1, list: [1], out: { a: { v: 1 } }, top: 'x' });
    assert.deepEqual(
      written.writes.map(([path]) => path),
      [['out', 'a'], ['top']],
    );
    written.undo();
    assert.deepEqual(live.data, { keep: 1, list: [1] });

    const refused = applyWrites(live, [
      ['fresh', 1],
      ['keep.deeper', 2],
    ]);
    assert.ok('error' in refused && refused.kind === 'path', 'a path through a number');
    assert.deepEqual(live.data, { keep: 1, list: [1] }, 'the write before it undone');

    const big = applyWrites(live, [['big', 'x'.repeat(MAX_WORKFLOW_DATA_BYTES)]]);
    assert.ok('error' in big && big.kind === 'size');
    assert.deepEqual(live.data, { keep: 1, list: [1] });
  });

  it('a reset clears a run; downstream walks dependents once each, the given node first', () => {
    const live = liveOf(diamond);
    const a = nodeOf(live, 'a');
    Object.assign(a, {
      taskId: 't',
      error: 'e',
      inputs: '{}',
      startedAt: 1,
      completedAt: 2,
      loops: 2,
      retries: 1,
      invocationId: 'h',
    });
    clearRun(a, false);
    assert.deepEqual(
      [a.taskId, a.error, a.inputs, a.startedAt, a.completedAt, a.invocationId, a.loops, a.retries],
      ['', '', '', null, null, '', 2, 1],
    );
    clearRun(a, true);
    assert.deepEqual([a.loops, a.retries], [0, 0]);
    assert.deepEqual(downstream(live, ['a']), ['a', 'b', 'c', 'd']);
    assert.deepEqual(downstream(live, ['c']), ['c', 'd']);
  });

  it('definitions compare in canonical form; task ids stay within 128 characters; retries back off', () => {
    const one = definitionOf('wf', [
      { nodeId: 'a', metadata: { y: '1', x: '2' } },
      { nodeId: 'b', dependencies: ['a'] },
    ]);
    const other = definitionOf('wf', [
      { nodeId: 'b', dependencies: ['a'] },
      { nodeId: 'a', metadata: { x: '2', y: '1' } },
    ]);
    assert.equal(canonical(one), canonical(other));
    assert.notEqual(canonical(one), canonical(definitionOf('wf', [{ nodeId: 'a' }])));
    assert.equal(taskIdOf('wf', 'a', 3), 'wf:wf:a:3');
    const long = taskIdOf('w'.repeat(100), 'n'.repeat(100), 1);
    assert.match(long, /^wf:[0-9a-f]{40}:1$/);
    assert.deepEqual([1, 2, 3, 10].map(automaticRetryDelay), [1_000, 2_000, 4_000, 60_000]);
  });

  it('WorkflowError is a SwarmError: its kind as the kernel names it, its code as the SW4RM code, its own fields kept', () => {
    const kinds = [
      ['refused', 'precondition'],
      ['exists', 'exists'],
      ['permission', 'permission'],
      ['not_found', 'not_found'],
      ['invalid', 'invalid'],
    ] as const;
    for (const [kind, errorKind] of kinds) {
      const err = new WorkflowError(kind, 'SOME_CODE', 'why');
      assert.equal(err.errorKind, errorKind);
      assert.equal(err.errorCode, 'SOME_CODE');
      assert.equal(err.kind, kind);
      assert.equal(err.code, 'SOME_CODE');
      assert.equal(err.name, 'WorkflowError');
      assert.deepEqual(classify(err), { kind: errorKind, code: 'SOME_CODE', message: 'why' });
    }
  });
});
