import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import type { Disposable } from '../../src/core/events';
import type { CoordinatorHost } from '../../src/server/host';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { TaskTestAgent } from '../support/taskAgents';
import { makeTempDir, removeTempDir } from '../support/tempDir';
import { WorkflowClient, type NodeMessage, type WorkflowStateMessage } from '../support/workflowClient';

/** What a node's agent finds in its CONTROL run's params (README, "Workflows: what a node's agent receives"). */
interface NodeParams {
  workflow_id: string;
  node_id: string;
  run: number;
  inputs: Record<string, unknown>;
}

/**
 * WorkflowService end to end: a real server on port 0, real grpc-js agents that register, stream their inbox, take the
 * CONTROL `run` of their node and ACK it FULFILLED with a `result`; an EVENT node started by a NOTIFICATION envelope.
 */
describe('WorkflowService over gRPC (a workflow run by real agents)', function () {
  this.timeout(60_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let operator: Disposable;
  let workflows: WorkflowClient;
  const agents: TaskTestAgent[] = [];

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-workflow-');
    host = await startHost(dataDir);
    operator = host.coordinator.hitl.attachOperator('editor:test');
    workflows = new WorkflowClient(`127.0.0.1:${host.port}`, host.token);
  });

  afterEach(async () => {
    for (const a of agents.splice(0)) a.close();
    workflows.close();
    operator.dispose();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  async function agent(agentId: string): Promise<TaskTestAgent> {
    const a = new TaskTestAgent(`127.0.0.1:${host.port}`, host.token, agentId, 'worker');
    agents.push(a);
    await a.start();
    await pollUntil(`${agentId} RUNNABLE`, () =>
      host.coordinator.registry.get(agentId)?.state === 'RUNNABLE' ? true : undefined,
    );
    return a;
  }

  /** The agent takes the run of its node and completes it with `result`; answers the params it got. */
  async function runNode(a: TaskTestAgent, taskId: string, result: unknown): Promise<NodeParams> {
    const run = await a.command('run', taskId);
    await a.ack(run, 'RECEIVED');
    await a.ack(run, 'FULFILLED', { result });
    return (run.command as unknown as { params: NodeParams }).params;
  }

  async function waitFor(
    workflowId: string,
    what: string,
    check: (s: WorkflowStateMessage) => boolean,
  ): Promise<WorkflowStateMessage> {
    return pollUntil(
      what,
      async () => {
        const answer = await workflows.state(workflowId);
        return answer.state && check(answer.state) ? answer.state : undefined;
      },
      10_000,
    );
  }

  const statuses = (s: WorkflowStateMessage) =>
    Object.fromEntries(Object.entries(s.node_states).map(([id, n]) => [id, n.status]));

  const NODES: Record<string, NodeMessage> = {
    draft: { agent_id: 'writer', output_mapping: { text: 'draft.text' } },
    review: {
      agent_id: 'reviewer',
      dependencies: ['draft'],
      input_mapping: { 'draft.text': 'text' },
      output_mapping: { score: 'review.score' },
      metadata: { route: "score > 0.5 ? 'ship' : 'rework'" },
    },
    rework: { agent_id: 'writer', dependencies: ['review'] },
    ship: {
      agent_id: 'writer',
      dependencies: ['review'],
      trigger_type: 'EVENT',
      metadata: { event: 'approved' },
      input_mapping: { 'events.approved.by': 'approver' },
    },
  };

  it('creates, starts and runs a workflow to COMPLETED through the RPCs; a conditional edge SKIPS a branch; an EVENT envelope starts a node', async () => {
    const writer = await agent('writer');
    const reviewer = await agent('reviewer');
    const created = await workflows.create('wf-review', NODES, { owner: 'test' });
    assert.deepEqual(created, { workflow_id: 'wf-review', success: true, error: '' });

    const started = await workflows.start('wf-review', { topic: 'parsers' });
    assert.equal(started.success, true, started.error);
    assert.equal(started.state?.metadata.state, 'RUNNING');
    assert.equal(started.state?.node_states.draft.status, 'RUNNING');

    const draft = await runNode(writer, 'wf:wf-review:draft:1', { text: 'first draft' });
    assert.deepEqual(draft, { workflow_id: 'wf-review', node_id: 'draft', run: 1, inputs: { topic: 'parsers' } });
    const review = await runNode(reviewer, 'wf:wf-review:review:1', { score: 0.9, notes: 'good' });
    assert.deepEqual(review.inputs, { text: 'first draft' });
    const waiting = await waitFor('wf-review', 'ship READY', (s) => s.node_states.ship.status === 'READY');
    assert.deepEqual(statuses(waiting), { draft: 'COMPLETED', review: 'COMPLETED', rework: 'SKIPPED', ship: 'READY' });
    assert.match(
      waiting.node_states.ship.error,
      /^waiting for event 'approved'/,
      'what a READY node waits for shows in `error`',
    );
    assert.deepEqual(JSON.parse(waiting.node_states.review.output), { score: 0.9, notes: 'good' });
    assert.match(waiting.node_states.rework.error, /not chosen by the route of 'review'/);

    // The EVENT trigger: a NOTIFICATION to `coordinator` with correlation_id = the workflow id.
    const wrong = await reviewer.wire.send(
      reviewer.wire.envelope({
        message_type: 'NOTIFICATION',
        correlation_id: 'wf-review',
        payload: { workflow_event: 'rejected' },
      }),
      'coordinator',
    );
    assert.equal(wrong.accepted, false);
    assert.match(wrong.reason, /^NO_ROUTE: no EVENT node of workflow 'wf-review' waits for 'rejected'/);
    const event = await reviewer.wire.send(
      reviewer.wire.envelope({
        message_type: 'NOTIFICATION',
        correlation_id: 'wf-review',
        payload: { workflow_event: 'approved', data: { by: 'reviewer' } },
      }),
      'coordinator',
    );
    assert.equal(event.accepted, true, event.reason);
    const ship = await runNode(writer, 'wf:wf-review:ship:1', { shipped: true });
    assert.deepEqual(ship.inputs, { approver: 'reviewer' });

    const done = await waitFor('wf-review', 'COMPLETED', (s) => s.metadata.state === 'COMPLETED');
    assert.deepEqual(statuses(done), { draft: 'COMPLETED', review: 'COMPLETED', rework: 'SKIPPED', ship: 'COMPLETED' });
    assert.deepEqual(JSON.parse(done.workflow_data), {
      topic: 'parsers',
      draft: { text: 'first draft' },
      review: { score: 0.9 },
      events: { approved: { by: 'reviewer' } },
    });
    assert.ok(done.started_at && done.completed_at);

    // ResumeWorkflow: from review again with new data; draft is not run again.
    const resumed = await workflows.resume('wf-review', 'review', { strict: true });
    assert.equal(resumed.success, true, resumed.error);
    const again = await runNode(reviewer, 'wf:wf-review:review:2', { score: 0.1 });
    assert.deepEqual(again.inputs, { text: 'first draft' });
    await runNode(writer, 'wf:wf-review:rework:1', { reworked: true });
    const reworked = await waitFor('wf-review', 'COMPLETED again', (s) => s.metadata.state === 'COMPLETED');
    assert.deepEqual(statuses(reworked), {
      draft: 'COMPLETED',
      review: 'COMPLETED',
      rework: 'COMPLETED',
      ship: 'SKIPPED',
    });
    assert.ok(!writer.commands().includes('run wf:wf-review:draft:2'), 'draft ran once');
  });

  it('answers a workflow at the node limit: StartWorkflow only the nodes that moved, GetWorkflowState every node (the 4 MiB cut: workflowStateMessage.test)', async () => {
    const n = 500;
    const id = (i: number) => `${'n'.repeat(110)}-${i}`;
    const nodes: Record<string, NodeMessage> = {};
    for (let i = 0; i < n; i++) nodes[id(i)] = { agent_id: 'absent', dependencies: i ? [id(i - 1)] : [] };
    assert.equal((await workflows.create('long-ids', nodes)).success, true);
    const started = await workflows.start('long-ids');
    assert.equal(started.success, true, started.error);
    assert.deepEqual(Object.keys(started.state!.node_states), [id(0)], 'only the node that moved');
    assert.equal(started.state!.metadata.node_states_omitted, String(n - 1));
    // All of them fit (500 nodes with 115-character ids: well under 4 MiB).
    const answer = await workflows.state('long-ids');
    assert.equal(answer.success, true, answer.error);
    assert.equal(Object.keys(answer.state!.node_states).length, n);
    assert.equal(answer.state!.node_states[id(0)].status, 'READY');
    assert.equal(answer.state!.metadata.node_states_omitted, undefined);
    assert.deepEqual(JSON.parse(answer.state!.metadata.counts), {
      PENDING: n - 1,
      READY: 1,
      RUNNING: 0,
      COMPLETED: 0,
      FAILED: 0,
      SKIPPED: 0,
    });
  });

  it('authorises by credential: an agent creates only for agents it may act as, starts and reads its own; outsiders get PERMISSION_DENIED, their events too', async () => {
    const mint = (agentId: string) =>
      host.coordinator.credentials.mintAgent(agentId, 'test', `workflow tests: ${agentId}`, { correlationId: 'test' })
        .token;
    const tokens = { self: mint('self'), outsider: mint('outsider') };
    const address = `127.0.0.1:${host.port}`;
    const self = new WorkflowClient(address, tokens.self);
    const outsider = new WorkflowClient(address, tokens.outsider);
    const code = async (promise: Promise<unknown>) =>
      promise.then(
        () => 'answered',
        (err: grpc.ServiceError) => `${grpc.status[err.code]}: ${err.details}`,
      );
    try {
      const selfAgent = new TaskTestAgent(address, tokens.self, 'self');
      const outsiderAgent = new TaskTestAgent(address, tokens.outsider, 'outsider');
      agents.push(selfAgent, outsiderAgent);
      await selfAgent.start();
      await outsiderAgent.start();
      assert.match(
        await code(
          self.create('not-mine', { a: { agent_id: 'self' }, b: { agent_id: 'victim', dependencies: ['a'] } }),
        ),
        /^PERMISSION_DENIED: PERMISSION_DENIED: agent:self may not act as agent 'victim' \(node b\)/,
      );
      assert.match(
        await code(self.create('typed', { a: { agent_id: 'type:worker' } })),
        /^PERMISSION_DENIED: .*only the operator/,
      );
      const nodes: Record<string, NodeMessage> = {
        a: { agent_id: 'self' },
        wait: { agent_id: 'self', dependencies: ['a'], trigger_type: 'EVENT', metadata: { event: 'go' } },
      };
      assert.deepEqual(await self.create('mine', nodes), { workflow_id: 'mine', success: true, error: '' });
      assert.match(
        await code(outsider.start('mine')),
        /^PERMISSION_DENIED: .*only its creator \(agent:self\) or the operator may start/,
      );
      assert.match(await code(outsider.state('mine')), /^PERMISSION_DENIED: /);
      assert.equal((await self.start('mine')).success, true);
      assert.equal((await self.state('mine')).success, true);
      assert.equal((await workflows.state('mine')).success, true, 'the operator reads any');
      await runNode(selfAgent, 'wf:mine:a:1', { done: true });
      await waitFor('mine', 'wait READY', (st) => st.node_states.wait.status === 'READY');
      const event = (a: TaskTestAgent) =>
        a.wire.send(
          a.wire.envelope({ message_type: 'NOTIFICATION', correlation_id: 'mine', payload: { workflow_event: 'go' } }),
          'coordinator',
        );
      const refused = await event(outsiderAgent);
      assert.equal(refused.accepted, false);
      assert.match(
        refused.reason,
        /^PERMISSION_DENIED: outsider neither created workflow 'mine' nor is named by one of its nodes/,
      );
      assert.equal((await event(selfAgent)).accepted, true);
      await selfAgent.command('run', 'wf:mine:wait:1');
      assert.ok(
        host.coordinator.log.query({ eventType: 'workflow.permission_denied' }).length >= 4,
        'each refusal logged',
      );
    } finally {
      self.close();
      outsider.close();
    }
  });

  it('answers domain refusals as success=false with the code first, and malformed requests with INVALID_ARGUMENT', async () => {
    const cyclic = await workflows.create('cyclic', {
      root: { agent_id: 'w' },
      a: { agent_id: 'w', dependencies: ['root', 'c'] },
      b: { agent_id: 'w', dependencies: ['a'] },
      c: { agent_id: 'w', dependencies: ['b'] },
    });
    assert.equal(cyclic.success, false);
    assert.match(cyclic.error, /^workflow_cycle_detected: /);
    for (const id of ['a', 'b', 'c']) assert.ok(cyclic.error.includes(id));
    const several = await workflows.create('several', { a: { agent_id: 'w', dependencies: ['a', 'ghost'] } });
    assert.equal(several.success, false);
    assert.match(
      several.error,
      /self_dependency: .*; .*unknown_dependency: |unknown_dependency: .*; .*self_dependency: /,
      several.error,
    );
    assert.equal((await workflows.state('cyclic')).success, false, 'a refused definition was not stored');

    // A warning (a node no route ever chooses) does not refuse the definition: it comes in the trailer.
    const warned = await workflows.call<{ workflow_id: string; success: boolean; error: string }>('CreateWorkflow', {
      definition: {
        workflow_id: 'warned',
        nodes: {
          a: { agent_id: 'w', metadata: { route: "'b'" } },
          b: { agent_id: 'w', dependencies: ['a'] },
          c: { agent_id: 'w', dependencies: ['a'] },
        },
      },
    });
    assert.deepEqual(warned.response, { workflow_id: 'warned', success: true, error: '' });
    assert.match(
      String(warned.trailer.get('sw4rm-warning')[0]),
      /^unreachable_node: node "c" can never run/,
      JSON.stringify(warned.trailer.getMap()),
    );
    assert.equal((await workflows.create('ok', { a: { agent_id: 'w' } })).success, true);
    const clash = await workflows.create('ok', { a: { agent_id: 'someone-else' } });
    assert.equal(clash.success, false);
    assert.match(clash.error, /^ALREADY_EXISTS: /);
    const unknown = await workflows.state('nope');
    assert.deepEqual([unknown.success, unknown.error.split(':')[0]], [false, 'NOT_FOUND']);
    assert.equal((await workflows.start('ok')).success, true);
    const twice = await workflows.start('ok');
    assert.equal(twice.success, false);
    assert.match(twice.error, /^FAILED_PRECONDITION: .*ResumeWorkflow/);
    const unknownNode = await workflows.resume('ok', 'zzz');
    assert.match(unknownNode.error, /^NOT_FOUND: /);

    const status = async (promise: Promise<unknown>) => {
      try {
        await promise;
      } catch (err) {
        return (err as grpc.ServiceError).code;
      }
      return 'answered';
    };
    assert.equal(await status(workflows.call('CreateWorkflow', {})), grpc.status.INVALID_ARGUMENT);
    assert.equal(await status(workflows.start('')), grpc.status.INVALID_ARGUMENT);
    assert.equal(
      await status(workflows.create('data', { a: { agent_id: 'w' } }).then(() => workflows.start('data', '[1, 2]'))),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.equal(await status(workflows.resume('ok', '')), grpc.status.INVALID_ARGUMENT);
  });
});
