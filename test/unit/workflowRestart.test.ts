import { strict as assert } from 'node:assert';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { ctx } from '../support/routerHarness';
import { WorkflowHarness, definition } from '../support/workflowHarness';

/** Restart: a new Coordinator over the same store file (RouterHarness.restart), the agents reconnecting their streams. */
describe('Workflows across a restart (the store is the truth)', () => {
  let h: WorkflowHarness;

  beforeEach(() => {
    h = new WorkflowHarness();
  });

  afterEach(() => h.dispose());

  const diamond = (id: string) =>
    definition(id, [
      { nodeId: 'a', agentId: 'x' },
      { nodeId: 'b', agentId: 'y', dependencies: ['a'] },
      { nodeId: 'c', agentId: 'z', dependencies: ['a'] },
      { nodeId: 'd', agentId: 'x', dependencies: ['b', 'c'] },
    ]);

  it('goes on where it was: running nodes keep their task (answered after the restart), no COMPLETED node runs twice, no node gets a second task', async () => {
    for (const a of ['x', 'y', 'z']) h.agent(a);
    const id = h.create(diamond('wf'));
    h.start(id, { n: 1 });
    await h.finish('x', { a: 1 });
    const b = h.run('y');
    await h.answer('y', b.messageId, 'RECEIVED');
    const c = h.run('z');
    h.restart();
    for (const a of ['x', 'y', 'z']) h.reconnect(a);
    assert.deepEqual(h.statuses(id), { a: 'COMPLETED', b: 'RUNNING', c: 'RUNNING', d: 'PENDING' });
    assert.equal(h.detail(id).summary.state, 'RUNNING');
    // The agents answer the runs they got before the restart.
    await h.answer('y', b.messageId, 'FULFILLED', { result: { b: 2 } });
    await h.answer('z', c.messageId, 'RECEIVED');
    await h.answer('z', c.messageId, 'FULFILLED', { result: { c: 3 } });
    const d = await h.finish('x');
    assert.deepEqual(d.inputs, { n: 1 });
    assert.equal(h.detail(id).summary.state, 'COMPLETED');
    for (const node of ['a', 'b', 'c', 'd'])
      assert.deepEqual(h.tasksOf(id, node), [`wf:${id}:${node}:1`], `${node}: one task, one run`);
    assert.equal(h.events('workflow.restored').length, 2);
    assert.equal(h.events('workflow.restored')[1].details.running_nodes, 2);
  });

  it('a task that COMPLETED while the engine did not see it: its output is applied at start; a task gone from the store: the node FAILS with the reason', async () => {
    for (const a of ['x', 'y', 'z']) h.agent(a);
    const id = h.create(diamond('reconcile'));
    h.start(id);
    await h.finish('x');
    h.run('y');
    h.run('z');
    h.restart(() => {
      // While stopped: b's task reads COMPLETED with a result (as if its end and the node's were not one commit), c's task is gone.
      const store = CoordinatorStore.open(h.dataDir);
      try {
        const b = store.scheduler.get(`wf:${id}:b:1`)!;
        store.transaction(() => {
          store.scheduler.put({
            ...b,
            state: 'COMPLETED',
            result: JSON.stringify({ b: 'done' }),
            endedAt: h.clock.now(),
            updatedAt: h.clock.now(),
          });
        });
        (store as unknown as { engine: { database: { exec(sql: string): void } } }).engine.database.exec(
          `DELETE FROM scheduler_tasks WHERE task_id = 'wf:${id}:c:1'`,
        );
      } finally {
        store.close();
      }
    });
    for (const a of ['x', 'y', 'z']) h.reconnect(a);
    assert.equal(h.statuses(id).b, 'COMPLETED');
    assert.deepEqual(JSON.parse(h.nodeOf(id, 'b').state.output), { b: 'done' });
    assert.equal(h.statuses(id).c, 'FAILED');
    assert.match(
      h.nodeOf(id, 'c').state.error,
      /its task wf:reconcile:c:1 is gone \(pruned or lost while the coordinator was stopped\)/,
    );
    assert.equal(h.statuses(id).d, 'SKIPPED');
    assert.equal(h.detail(id).summary.state, 'FAILED');
    assert.deepEqual(h.tasksOf(id, 'b'), [`wf:${id}:b:1`], 'b was not run again');
  });

  it('re-arms a SCHEDULE timer and keeps a READY MANUAL node; a DEPENDENCY node READY without a task is submitted at start', async () => {
    h.agent('x');
    const id = h.create(
      definition('timers', [
        { nodeId: 'cron', agentId: 'x', trigger: 'SCHEDULE', metadata: { schedule: '30 2 * * *' } },
        { nodeId: 'button', agentId: 'x', trigger: 'MANUAL' },
      ]),
    );
    h.start(id);
    h.restart();
    h.reconnect('x');
    assert.deepEqual(h.statuses(id), { cron: 'READY', button: 'READY' });
    assert.equal(h.detail(id).summary.state, 'WAITING');
    await h.advance(Date.UTC(2026, 0, 1, 2, 30) - h.clock.now() - 1);
    assert.deepEqual(h.commands('x'), []);
    await h.advance(1);
    assert.equal(h.run('x').params.node_id, 'cron', 'the timer armed again from the stored fire time');

    // A DEPENDENCY node stored READY (a crash between the commit that made it READY and its submission).
    const id2 = h.create(definition('ready-no-task', [{ nodeId: 'solo', agentId: 'y' }]));
    h.restart(() => {
      const store = CoordinatorStore.open(h.dataDir);
      try {
        const record = store.workflows.get(id2)!;
        const node = record.nodes.get('solo')!;
        store.transaction(() => {
          store.workflows.putNode(id2, { ...node, status: 'READY', readyAt: h.clock.now() });
          record.state = 'RUNNING';
          record.startedAt = h.clock.now();
          store.workflows.putWorkflow(record, {
            PENDING: 0,
            READY: 1,
            RUNNING: 0,
            COMPLETED: 0,
            FAILED: 0,
            SKIPPED: 0,
          });
        });
      } finally {
        store.close();
      }
    });
    h.reconnect('x');
    h.agent('y');
    await h.settled();
    assert.equal(h.run('y').params.node_id, 'solo');
    assert.deepEqual(h.tasksOf(id2, 'solo'), [`wf:${id2}:solo:1`]);
  });

  it('a HITL question still pending at the restart is watched again: its answer applies after the restart', async () => {
    h.agent('x');
    h.coordinator.hitl.attachOperator('tester');
    const id = h.create(definition('asked', [{ nodeId: 'f', agentId: 'x', metadata: { on_failure: 'hitl' } }]));
    h.start(id);
    await h.failRun('x');
    const invocationId = h.nodeOf(id, 'f').state.invocationId;
    h.restart();
    h.reconnect('x');
    h.coordinator.hitl.attachOperator('tester');
    assert.equal(h.detail(id).summary.state, 'WAITING');
    h.coordinator.hitl.decide(invocationId, { action: 'approve', rationale: 'retry after restart' }, 'tester', ctx());
    await h.settled();
    assert.equal(h.run('x').params.run, 2);
  });
});
