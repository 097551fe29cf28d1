import { strict as assert } from 'node:assert';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { findFreePort } from '../../src/server/server';
import { useCliProcesses, type CliProcess } from '../support/cli';
import { pollUntil } from '../support/poll';
import { retryAfterRestart } from '../support/routerClient';
import { TaskTestAgent, type ReceivedCommand } from '../support/taskAgents';
import { WorkflowClient, type WorkflowStateMessage } from '../support/workflowClient';

/**
 * A workflow in progress survives kill -9 of the headless coordinator: after the restart it goes on from the store,
 * the running node's task is the same task (its agent answers the run it got before the crash), and no COMPLETED node's
 * task is dispatched again.
 */
describe('workflows across a coordinator crash (kill -9) and restart (dist/cli.js)', function () {
  this.timeout(90_000);
  const coordinators = useCliProcesses('sw4rm-int-workflow-crash-');

  async function start(
    port: number,
  ): Promise<{ cli: CliProcess; env: Record<string, string>; workflows: WorkflowClient }> {
    const { cli, env } = await coordinators.serve(port);
    const workflows = new WorkflowClient(env.SW4RM_WORKFLOW_ADDR, env.SW4RM_TOKEN);
    coordinators.closeAfter(workflows);
    return { cli, env, workflows };
  }

  /** A registered agent coming back after the coordinator restarted: a new inbox stream and a heartbeat, no new registration. */
  async function reconnect(env: Record<string, string>, agentId: string, state: string): Promise<TaskTestAgent> {
    const agent = new TaskTestAgent(env.SW4RM_ROUTER_ADDR, env.SW4RM_TOKEN, agentId);
    coordinators.closeAfter(agent);
    await retryAfterRestart(`${agentId} heartbeat`, () => agent.heartbeat(state));
    agent.inbox = agent.wire.openInbox();
    return agent;
  }

  async function complete(agent: TaskTestAgent, run: ReceivedCommand, result: unknown): Promise<void> {
    await agent.ack(run, 'RECEIVED');
    await agent.ack(run, 'FULFILLED', { result });
  }

  async function state(
    workflows: WorkflowClient,
    id: string,
    what: string,
    check: (s: WorkflowStateMessage) => boolean,
  ): Promise<WorkflowStateMessage> {
    return pollUntil(
      what,
      async () => {
        const answer = await retryAfterRestart('GetWorkflowState', () => workflows.state(id));
        return answer.state && check(answer.state) ? answer.state : undefined;
      },
      15_000,
    );
  }

  it('kill -9 while a node runs: after the restart the workflow finishes, the running node keeps its task, no COMPLETED node runs twice', async () => {
    const port = await findFreePort('127.0.0.1');
    const first = await start(port);
    const w1 = new TaskTestAgent(first.env.SW4RM_ROUTER_ADDR, first.env.SW4RM_TOKEN, 'w1');
    const w2 = new TaskTestAgent(first.env.SW4RM_ROUTER_ADDR, first.env.SW4RM_TOKEN, 'w2');
    coordinators.closeAfter(w1, w2);
    await w1.start();
    await w2.start();
    const created = await first.workflows.create('crash', {
      a: { agent_id: 'w1', output_mapping: { a: 'a' } },
      b: { agent_id: 'w2', dependencies: ['a'], output_mapping: { b: 'b' } },
      c: { agent_id: 'w1', dependencies: ['a'], output_mapping: { c: 'c' } },
      d: { agent_id: 'w2', dependencies: ['b', 'c'] },
    });
    assert.equal(created.success, true, created.error);
    assert.equal((await first.workflows.start('crash', { n: 0 })).success, true);
    await complete(w1, await w1.command('run', 'wf:crash:a:1'), { a: 1 });
    const b = await w2.command('run', 'wf:crash:b:1');
    await w2.ack(b, 'RECEIVED');
    await complete(w1, await w1.command('run', 'wf:crash:c:1'), { c: 3 });
    const before = await state(
      first.workflows,
      'crash',
      'a, c COMPLETED; b RUNNING',
      (s) => s.node_states.c.status === 'COMPLETED',
    );
    assert.deepEqual(Object.fromEntries(Object.entries(before.node_states).map(([id, n]) => [id, n.status])), {
      a: 'COMPLETED',
      b: 'RUNNING',
      c: 'COMPLETED',
      d: 'PENDING',
    });

    first.cli.signal('SIGKILL');
    await first.cli.exit();
    assert.equal(first.cli.exitSignal, 'SIGKILL');
    w1.close();
    w2.close();

    const second = await start(port);
    const after = await state(second.workflows, 'crash', 'the workflow read back', () => true);
    assert.equal(after.metadata.state, 'RUNNING');
    assert.equal(after.node_states.b.status, 'RUNNING', 'b still waits for its task');
    const w1b = await reconnect(second.env, 'w1', 'RUNNABLE');
    const w2b = await reconnect(second.env, 'w2', 'RUNNING');
    // w2 answers the run it got before the crash: the same message, the same task.
    await retryAfterRestart('ACK FULFILLED of b', () =>
      w2b.ackMessage(b.item.msg.message_id, 'FULFILLED', { result: { b: 2 } }),
    );
    const d = await w2b.command('run', 'wf:crash:d:1', 10_000);
    assert.deepEqual((d.command as unknown as { params: { inputs: unknown } }).params.inputs, {
      n: 0,
      a: 1,
      c: 3,
      b: 2,
    });
    await complete(w2b, d, { done: true });
    const done = await state(second.workflows, 'crash', 'COMPLETED', (s) => s.metadata.state === 'COMPLETED');
    assert.deepEqual(JSON.parse(done.workflow_data), { n: 0, a: 1, c: 3, b: 2 });
    assert.deepEqual(
      w1b.commands().filter((c) => c.startsWith('run')),
      [],
      'w1 was sent no run after the restart (a and c were COMPLETED)',
    );

    second.cli.signal('SIGTERM');
    assert.equal(await second.cli.exit(), 0);
    const store = CoordinatorStore.open(coordinators.dataDir());
    try {
      const tasks = store.scheduler
        .listFinished(100)
        .map((t) => [t.taskId, t.state, t.dispatches])
        .sort();
      assert.deepEqual(
        tasks,
        [
          ['wf:crash:a:1', 'COMPLETED', 1],
          ['wf:crash:b:1', 'COMPLETED', 1],
          ['wf:crash:c:1', 'COMPLETED', 1],
          ['wf:crash:d:1', 'COMPLETED', 1],
        ],
        'one task per node, each dispatched once',
      );
      assert.deepEqual(store.scheduler.listOpen(), []);
    } finally {
      store.close();
    }
  });

  /** From the store of a stopped coordinator: every task of `workflowId`, as [node, run] with how many tasks each has. */
  function tasksByRun(workflowId: string): {
    readonly runs: Map<string, number>;
    readonly nodes: Map<string, { status: string; taskId: string; runs: number }>;
  } {
    const store = CoordinatorStore.open(coordinators.dataDir());
    try {
      const runs = new Map<string, number>();
      for (const t of [...store.scheduler.listOpen(), ...store.scheduler.listFinished(100_000)]) {
        const m = new RegExp(`^wf:${workflowId}:(.+):(\\d+)$`).exec(t.taskId);
        if (m) runs.set(`${m[1]}:${m[2]}`, (runs.get(`${m[1]}:${m[2]}`) ?? 0) + 1);
      }
      const record = store.workflows.get(workflowId);
      const nodes = new Map(
        [...(record?.nodes.values() ?? [])].map((n) => [
          n.nodeId,
          { status: n.status, taskId: n.taskId, runs: n.runs },
        ]),
      );
      return { runs, nodes };
    } finally {
      store.close();
    }
  }

  it('kill -9 right after an agent sent FULFILLED (before anyone looked): the node is COMPLETED once, its dependents get one task each', async () => {
    const port = await findFreePort('127.0.0.1');
    const first = await start(port);
    const w1 = new TaskTestAgent(first.env.SW4RM_ROUTER_ADDR, first.env.SW4RM_TOKEN, 'w1');
    coordinators.closeAfter(w1);
    await w1.start();
    const created = await first.workflows.create('acked', {
      a: { agent_id: 'w1', output_mapping: { a: 'a' } },
      b: { agent_id: 'w1', dependencies: ['a'] },
      c: { agent_id: 'w1', dependencies: ['a'] },
      d: { agent_id: 'w1', dependencies: ['b', 'c'] },
    });
    assert.equal(created.success, true, created.error);
    assert.equal((await first.workflows.start('acked', {})).success, true);
    const a = await w1.command('run', 'wf:acked:a:1');
    await w1.ack(a, 'RECEIVED');
    await w1.ack(a, 'FULFILLED', { result: { a: 1 } });
    // No look at the state: the ACK was answered (durable), the node's end and its dependents' submissions may or may
    // not be committed when the process dies.
    first.cli.signal('SIGKILL');
    await first.cli.exit();
    assert.equal(first.cli.exitSignal, 'SIGKILL');
    w1.close();

    const second = await start(port);
    const after = await state(second.workflows, 'acked', 'the workflow read back', () => true);
    assert.equal(after.node_states.a.status, 'COMPLETED', 'the ACK answered before the kill counts');
    const w1b = await reconnect(second.env, 'w1', 'RUNNABLE');
    // Run whatever is sent until the workflow is COMPLETED (b, c, d: in some order, each once).
    const ran: string[] = [];
    const done = await pollUntil(
      'COMPLETED',
      async () => {
        const answer = await retryAfterRestart('GetWorkflowState', () => second.workflows.state('acked'));
        if (answer.state?.metadata.state === 'COMPLETED') return answer.state;
        const next = ['b', 'c', 'd'].map((n) => `wf:acked:${n}:1`).find((id) => w1b.has('run', id));
        if (next) {
          const run = await w1b.command('run', next);
          await w1b.ack(run, 'RECEIVED');
          await w1b.ack(run, 'FULFILLED', { result: {} });
          ran.push(next);
        }
        return undefined;
      },
      20_000,
    );
    assert.equal(done.metadata.state, 'COMPLETED');
    assert.deepEqual([...ran].sort(), ['wf:acked:b:1', 'wf:acked:c:1', 'wf:acked:d:1']);
    second.cli.signal('SIGTERM');
    assert.equal(await second.cli.exit(), 0);
    const { runs } = tasksByRun('acked');
    assert.deepEqual(
      Object.fromEntries([...runs].sort()),
      { 'a:1': 1, 'b:1': 1, 'c:1': 1, 'd:1': 1 },
      'one task per (node, run), and one run each',
    );
  });

  /**
   * StartWorkflow of 300 roots and kill -9 at `moment`: as soon as the request is sent (the start may not have been read
   * or committed), or as soon as it was answered (committed: the roots RUNNING, their tasks submitted in the same group
   * commit). After the restart the workflow is DEFINED (started again then) or RUNNING, and every root has exactly one
   * task, for its one run, from the store.
   */
  async function killDuringStart(moment: 'sent' | 'answered'): Promise<void> {
    const port = await findFreePort('127.0.0.1');
    const first = await start(port);
    const roots = Object.fromEntries(
      Array.from({ length: 300 }, (_, i) => [`r${i}`, { agent_id: 'type:crash-worker' }]),
    );
    assert.equal((await first.workflows.create('many', roots)).success, true);
    const started = first.workflows.start('many', {}).then(
      () => 'answered',
      () => 'not answered',
    );
    if (moment === 'answered') assert.equal(await started, 'answered');
    else await new Promise((resolve) => setImmediate(resolve));
    first.cli.signal('SIGKILL');
    await first.cli.exit();
    const outcome = await started;

    const second = await start(port);
    const after = await state(second.workflows, 'many', 'the workflow read back', () => true);
    const was = after.metadata.state;
    assert.ok(was === 'DEFINED' || was === 'RUNNING', `${was} (the start was ${outcome})`);
    if (outcome === 'answered') assert.equal(was, 'RUNNING', 'an answered start was committed');
    if (was === 'DEFINED')
      assert.equal((await retryAfterRestart('StartWorkflow', () => second.workflows.start('many', {}))).success, true);
    await state(
      second.workflows,
      'many',
      'every root RUNNING',
      (st) => Object.values(st.node_states).filter((n) => n.status === 'RUNNING').length === 300,
    );
    second.cli.signal('SIGTERM');
    assert.equal(await second.cli.exit(), 0);
    const { runs, nodes } = tasksByRun('many');
    assert.equal(runs.size, 300, `one task per root (${was} after the kill; the start was ${outcome})`);
    for (const [key, count] of runs) assert.equal(count, 1, `${key}: one task`);
    for (const [nodeId, node] of nodes)
      assert.deepEqual([node.status, node.runs, node.taskId], ['RUNNING', 1, `wf:many:${nodeId}:1`], nodeId);
  }

  it('kill -9 as the start of a workflow of 300 roots is sent: after the restart every root has one task for its one run', () =>
    killDuringStart('sent'));

  it('kill -9 as soon as the start of a workflow of 300 roots is answered: the restart submits none of them again', () =>
    killDuringStart('answered'));
});
