import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import type { Disposable } from '../../src/core/events';
import type { HostOptions } from '../../src/server/host';
import { CliProcess, useCliProcesses } from '../support/cli';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { firstCommand, SchedulerClient, TaskTestAgent, type ReceivedCommand } from '../support/taskAgents';
import { makeTempDir, removeTempDir } from '../support/tempDir';
import type { CoordinatorHost } from '../../src/server/host';

/**
 * SchedulerService end to end (README "Tasks, priorities and preemption"): a real server on port 0, real grpc-js test
 * agents that receive CONTROL commands on their inbox streams and answer them with ACKNOWLEDGEMENT envelopes.
 */
describe('SchedulerService over gRPC (tasks, priorities, preemption)', function () {
  this.timeout(30_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let operator: Disposable;
  let scheduler: SchedulerClient;
  const agents: TaskTestAgent[] = [];

  async function start(overrides: Partial<HostOptions> = {}): Promise<void> {
    host = await startHost(dataDir, overrides);
    // An operator is there: HITL invocations wait for the test's decision instead of their no-operator fallback.
    operator = host.coordinator.hitl.attachOperator('editor:test');
    scheduler = new SchedulerClient(`127.0.0.1:${host.port}`, host.token);
  }

  async function agent(agentId: string, type = 'worker', token = host.token): Promise<TaskTestAgent> {
    const a = new TaskTestAgent(`127.0.0.1:${host.port}`, token, agentId, type);
    agents.push(a);
    await a.start();
    await pollUntil(`${agentId} RUNNABLE`, () =>
      host.coordinator.registry.get(agentId)?.state === 'RUNNABLE' ? true : undefined,
    );
    return a;
  }

  function state(agentId: string): string | undefined {
    return host.coordinator.registry.get(agentId)?.state;
  }

  function waitState(agentId: string, expected: string): Promise<true> {
    return pollUntil(
      `${agentId} ${expected} (it is ${state(agentId)})`,
      () => (state(agentId) === expected ? true : undefined),
      5_000,
    );
  }

  function waitTask(taskId: string, expected: string): Promise<true> {
    return pollUntil(
      `task ${taskId} ${expected} (it is ${host.coordinator.scheduler.task(taskId)?.state})`,
      () => (host.coordinator.scheduler.task(taskId)?.state === expected ? true : undefined),
      5_000,
    );
  }

  /** The agent's lifecycle as logged: one `agent.state_changed` per transition, oldest first. */
  function transitions(agentId: string): string[] {
    return host.coordinator.log
      .query({ eventType: 'agent.state_changed', limit: 1000 })
      .filter((e) => e.details.agent_id === agentId)
      .sort((a, b) => a.id - b.id)
      .map((e) => `${String(e.details.from)}>${String(e.details.to)}`);
  }

  async function submit(
    request: Parameters<SchedulerClient['submit']>[0],
  ): Promise<{ accepted: boolean; reason: string }> {
    return scheduler.submit({ scope: `resource:${request.task_id ?? 'any'}`, ...request });
  }

  async function accepted(request: Parameters<SchedulerClient['submit']>[0]): Promise<string> {
    const answer = await submit(request);
    assert.equal(answer.accepted, true, `${request.task_id} refused: ${answer.reason}`);
    return answer.reason;
  }

  /** The agent takes its next `run` (for `taskId` when given), ACKs RECEIVED and then FULFILLED with `note`. */
  async function runToCompletion(a: TaskTestAgent, taskId?: string, note = 'done'): Promise<ReceivedCommand> {
    const run = await a.command('run', taskId);
    await a.ack(run, 'RECEIVED');
    await a.ack(run, 'FULFILLED', { note });
    return run;
  }

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-scheduler-');
  });

  afterEach(async () => {
    for (const a of agents.splice(0)) a.close();
    scheduler?.close();
    operator?.dispose();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  describe('with the default options', () => {
    beforeEach(() => start());

    it('sends a task as CONTROL run; the ACKs move it to COMPLETED and the agent RUNNABLE → SCHEDULED → RUNNING → COMPLETED → RUNNABLE', async () => {
      const w1 = await agent('w1');
      const before = transitions('w1').length;
      assert.equal(
        await accepted({
          agent_id: 'w1',
          task_id: 't1',
          priority: 3,
          params: { title: 'fix the build' },
          scope: 'repo:app/src/**',
        }),
        '',
      );
      const run = await w1.command('run', 't1');
      assert.deepEqual(run.command, {
        command: 'run',
        task_id: 't1',
        params: { title: 'fix the build' },
        content_type: 'application/json',
        scope: { repo_id: 'app', worktree_id: '', paths: ['src/**'], resources: [] },
        priority: 3,
      });
      assert.equal(run.item.msg.correlation_id, 't1', 'the task id is the correlation id of its CONTROL envelopes');
      assert.equal(run.item.msg.content_type, 'application/json');
      await waitState('w1', 'SCHEDULED');

      await w1.ack(run, 'RECEIVED');
      await waitState('w1', 'RUNNING');
      await waitTask('t1', 'RUNNING');
      // The activity entry exists while the task runs (RFC §10), as PollActivityBuffer shows it.
      const { response: polled } = await scheduler.call<{ entries: Record<string, string>[] }>('PollActivityBuffer', {
        agent_id: 'w1',
      });
      assert.equal(polled.entries.length, 1);
      assert.equal(polled.entries[0].task_id, 't1');
      assert.equal(polled.entries[0].repo_id, 'app');
      assert.match(polled.entries[0].timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

      await w1.ack(run, 'FULFILLED', { note: 'built' });
      await waitTask('t1', 'COMPLETED');
      assert.equal(host.coordinator.scheduler.task('t1')!.note, 'built', 'the FULFILLED note is the task result');
      await waitState('w1', 'RUNNABLE');
      assert.deepEqual(transitions('w1').slice(before), [
        'RUNNABLE>SCHEDULED',
        'SCHEDULED>RUNNING',
        'RUNNING>COMPLETED',
        'COMPLETED>RUNNABLE',
      ]);
      const { response: after } = await scheduler.call<{ entries: unknown[] }>('PollActivityBuffer', {
        agent_id: 'w1',
      });
      assert.deepEqual(after.entries, [], 'the entry left the buffer when the task ended');
    });

    it('an ACK FAILED fails the task with its error code; the agent is offered the next task', async () => {
      const w1 = await agent('w1');
      await accepted({ agent_id: 'w1', task_id: 'bad', params: { n: 1 } });
      await accepted({ agent_id: 'w1', task_id: 'next', params: { n: 2 } });
      const run = await w1.command('run', 'bad');
      await w1.ack(run, 'RECEIVED');
      await w1.ack(run, 'FAILED', { error_code: 'INTERNAL_ERROR', note: 'compiler crashed' });
      await waitTask('bad', 'FAILED');
      assert.equal(host.coordinator.scheduler.task('bad')!.errorCode, 'INTERNAL_ERROR');
      await runToCompletion(w1, 'next');
      await waitTask('next', 'COMPLETED');
    });

    it('dispatches queued tasks by priority, then arrival (FIFO within a priority)', async () => {
      const w1 = await agent('w1');
      // The first one holds the agent at the highest priority, so that nothing submitted later preempts it.
      await accepted({ agent_id: 'w1', task_id: 'hold', priority: -19, params: { n: 0 } });
      const hold = await w1.command('run', 'hold');
      await w1.ack(hold, 'RECEIVED');
      const submitted: [string, number][] = [
        ['a', 10],
        ['b', 5],
        ['c', 10],
        ['d', -3],
        ['e', 5],
        ['f', 20],
        ['g', -3],
      ];
      for (const [taskId, priority] of submitted)
        await accepted({ agent_id: 'w1', task_id: taskId, priority, params: { taskId } });
      await w1.ack(hold, 'FULFILLED');
      const order: string[] = [];
      for (let i = 0; i < submitted.length; i++) order.push(String((await runToCompletion(w1)).command.task_id));
      assert.deepEqual(order, ['d', 'g', 'b', 'e', 'a', 'c', 'f']);
      assert.ok(!w1.commands().includes('preempt_request hold'), 'less urgent arrivals never preempt');
    });

    it('refuses a priority outside -19..20, a missing scope and an unknown agent, saying why', async () => {
      await agent('w1');
      for (const [priority, pattern] of [
        [-20, /VALIDATION_ERROR: .*-19.*20/],
        [21, /VALIDATION_ERROR: .*-19.*20/],
      ] as const) {
        const answer = await scheduler.submit({
          agent_id: 'w1',
          task_id: `p${priority}`,
          priority,
          scope: 'resource:x',
        });
        assert.equal(answer.accepted, false);
        assert.match(answer.reason, pattern);
      }
      const noScope = await scheduler.submit({ agent_id: 'w1', task_id: 'ns', scope: '' });
      assert.equal(noScope.accepted, false);
      assert.match(noScope.reason, /^VALIDATION_ERROR: scope is required/);
      const noAgent = await scheduler.submit({ agent_id: 'nobody', task_id: 'na', scope: 'resource:x' });
      assert.equal(noAgent.accepted, false);
      assert.match(noAgent.reason, /^NO_ROUTE: /);
      const noTarget = await scheduler.submit({ agent_id: '', task_id: 'nt', scope: 'resource:x' });
      assert.deepEqual(noTarget, {
        accepted: false,
        reason: 'VALIDATION_ERROR: agent_id is required: an agent id or type:<agent type>',
      });
      const longId = await scheduler.submit({ agent_id: 'w1', task_id: 't'.repeat(129), scope: 'resource:x' });
      assert.match(longId.reason, /^VALIDATION_ERROR: task_id is longer than 128 characters/);
      const refused = host.coordinator.log.query({ eventType: 'task.refused', limit: 100 });
      assert.ok(
        refused.some((e) => e.details.task_id === 'nt' && e.details.code === 'VALIDATION_ERROR'),
        'a refusal the service passes on is logged like any other',
      );
      assert.ok(refused.some((e) => String(e.details.task_id).length === 129));
      const twice = await scheduler.submit({ agent_id: 'w1', task_id: 'ns2', scope: 'resource:x' });
      assert.equal(twice.accepted, true);
      const again = await scheduler.submit({
        agent_id: 'w1',
        task_id: 'ns2',
        scope: 'resource:y',
        params: { other: true },
      });
      assert.equal(again.accepted, false);
      assert.match(again.reason, /^DUPLICATE_DETECTED: /);
    });

    it('C.4: a more urgent arrival sends preempt_request; the agent yields and its task returns to the queue; equal priority never preempts', async () => {
      const w1 = await agent('w1');
      await accepted({ agent_id: 'w1', task_id: 'low', priority: 10, params: { n: 'low' } });
      const low = await w1.command('run', 'low');
      await w1.ack(low, 'RECEIVED');
      await waitState('w1', 'RUNNING');
      const before = transitions('w1').length;

      await accepted({ agent_id: 'w1', task_id: 'same', priority: 10, params: { n: 'same' } });
      await accepted({ agent_id: 'w1', task_id: 'urgent', priority: -5, params: { n: 'urgent' } });
      const preempt = await w1.command('preempt_request', 'low');
      assert.equal(preempt.command.by_task_id, 'urgent');
      assert.equal(preempt.command.by_priority, -5);
      assert.equal(preempt.item.msg.correlation_id, 'low');
      await waitTask('low', 'PREEMPTING');
      await w1.ack(preempt, 'FULFILLED', { note: 'yielded' });

      const urgent = await w1.command('run', 'urgent');
      await waitTask('low', 'QUEUED');
      await w1.ack(urgent, 'RECEIVED');
      await w1.ack(urgent, 'FULFILLED');
      // The yielded task kept its place: before `same`, submitted later at the same priority.
      const again = await runToCompletion(w1);
      assert.equal(again.command.task_id, 'low');
      await waitTask('low', 'COMPLETED');
      assert.equal(host.coordinator.scheduler.task('low')!.dispatches, 2);
      await runToCompletion(w1, 'same');
      await waitTask('same', 'COMPLETED');
      assert.equal(
        w1.commands().filter((c) => c.startsWith('preempt_request')).length,
        1,
        'only the more urgent arrival preempted',
      );
      const moves = transitions('w1').slice(before);
      for (const step of ['RUNNING>SUSPENDED', 'SUSPENDED>RESUMED', 'RESUMED>RUNNING'])
        assert.ok(moves.includes(step), `${step} in ${moves.join(', ')}`);
    });

    it('RequestPreemption asks the running agent to yield; with nothing running it answers enqueued=false with the reason in sw4rm-reason', async () => {
      const w1 = await agent('w1');
      const idle = await scheduler.call<{ enqueued: boolean }>('RequestPreemption', {
        agent_id: 'w1',
        task_id: '',
        reason: 'test',
      });
      assert.equal(idle.response.enqueued, false);
      assert.ok(String(idle.trailer.get('sw4rm-reason')[0] ?? '').length > 0, 'the trailer says why');

      await accepted({ agent_id: 'w1', task_id: 'job', priority: 0, params: { n: 1 } });
      const run = await w1.command('run', 'job');
      await w1.ack(run, 'RECEIVED');
      await waitTask('job', 'RUNNING');
      const asked = await scheduler.call<{ enqueued: boolean }>('RequestPreemption', {
        agent_id: 'w1',
        task_id: 'job',
        reason: 'maintenance',
      });
      assert.equal(asked.response.enqueued, true);
      const preempt = await w1.command('preempt_request', 'job');
      assert.equal(preempt.command.reason, 'maintenance');
      await w1.ack(preempt, 'FULFILLED', { note: 'yielded' });
      // Back in the queue, it runs again (here on the same agent, the only one).
      await runToCompletion(w1, 'job');
      await waitTask('job', 'COMPLETED');
    });

    it('ShutdownAgent: SHUTTING_DOWN, CONTROL shutdown, no new task; its queued tasks fail agent_shutdown; the ACK ends it', async () => {
      const w1 = await agent('w1');
      await accepted({ agent_id: 'w1', task_id: 'running', priority: -19, params: { n: 1 } });
      const run = await w1.command('run', 'running');
      await w1.ack(run, 'RECEIVED');
      await accepted({ agent_id: 'w1', task_id: 'queued', priority: 0, params: { n: 2 } });

      const answer = await scheduler.call<{ ok: boolean }>('ShutdownAgent', {
        agent_id: 'w1',
        grace_period: { seconds: 20, nanos: 0 },
      });
      assert.equal(answer.response.ok, true);
      await waitState('w1', 'SHUTTING_DOWN');
      const shutdown = await w1.command('shutdown');
      assert.equal(shutdown.command.drain_timeout_seconds, 20);
      await waitTask('queued', 'FAILED');
      assert.equal(host.coordinator.scheduler.task('queued')!.errorCode, 'agent_shutdown');
      const refused = await scheduler.submit({ agent_id: 'w1', task_id: 'late', scope: 'resource:late' });
      assert.equal(refused.accepted, false);
      assert.match(refused.reason, /^AGENT_SHUTDOWN: /);
      const twice = await scheduler.call<{ ok: boolean }>('ShutdownAgent', { agent_id: 'w1' });
      assert.equal(twice.response.ok, false);
      assert.ok(twice.trailer.get('sw4rm-reason').length === 1);

      await w1.ack(run, 'FULFILLED', { note: 'finished in the grace' });
      await w1.ack(shutdown, 'FULFILLED');
      await pollUntil('w1 deregistered', () => (host.coordinator.registry.get('w1') === undefined ? true : undefined));
      await waitTask('running', 'COMPLETED');
      assert.ok(!w1.commands().includes('run queued'), 'nothing more was dispatched to it');
      const unknown = await scheduler.call<{ ok: boolean }>('ShutdownAgent', { agent_id: 'w1' });
      assert.equal(unknown.response.ok, false);
    });

    it('refuses a negative grace_period and an empty agent_id with INVALID_ARGUMENT', async () => {
      await assert.rejects(
        scheduler.call('ShutdownAgent', { agent_id: 'w1', grace_period: { seconds: -1, nanos: 0 } }),
        (err: grpc.ServiceError) =>
          err.code === grpc.status.INVALID_ARGUMENT &&
          /^VALIDATION_ERROR: grace_period may not be negative/.test(err.details),
      );
      for (const method of ['PollActivityBuffer', 'PurgeActivity', 'RequestPreemption', 'ShutdownAgent'] as const) {
        await assert.rejects(
          scheduler.call(method, { agent_id: '' }),
          (err: grpc.ServiceError) =>
            err.code === grpc.status.INVALID_ARGUMENT && err.details === 'VALIDATION_ERROR: agent_id is required',
          method,
        );
      }
    });

    it("PollActivityBuffer answers only that agent's active entries (ISO-8601 UTC timestamps); PurgeActivity removes the ones named", async () => {
      const ctx = { correlationId: 'test' };
      const at = Date.UTC(2026, 10, 23, 6, 0, 0, 123);
      for (const [agentId, taskId] of [
        ['w1', 'a'],
        ['w1', 'b'],
        ['w2', 'c'],
      ]) {
        host.coordinator.activity.begin(
          {
            agentId,
            taskId,
            repoId: 'app',
            worktreeId: `wt-${agentId}`,
            branch: `sw4rm/${agentId}`,
            timestamp: at,
            description: `task ${taskId}`,
          },
          ctx,
        );
      }
      const { response } = await scheduler.call<{ entries: Record<string, string>[] }>('PollActivityBuffer', {
        agent_id: 'w1',
      });
      assert.deepEqual(response.entries.map((e) => e.task_id).sort(), ['a', 'b']);
      assert.deepEqual(
        response.entries.find((e) => e.task_id === 'a'),
        {
          task_id: 'a',
          repo_id: 'app',
          worktree_id: 'wt-w1',
          branch: 'sw4rm/w1',
          description: 'task a',
          timestamp: '2026-11-23T06:00:00.123Z',
        },
      );
      assert.equal(
        (await scheduler.call<{ purged: number }>('PurgeActivity', { agent_id: 'w1', task_ids: ['a', 'zzz'] })).response
          .purged,
        1,
      );
      assert.deepEqual(
        (
          await scheduler.call<{ entries: Record<string, string>[] }>('PollActivityBuffer', { agent_id: 'w1' })
        ).response.entries.map((e) => e.task_id),
        ['b'],
      );
      assert.equal(
        (await scheduler.call<{ purged: number }>('PurgeActivity', { agent_id: 'w1', task_ids: [] })).response.purged,
        1,
        "no task ids: all of the agent's",
      );
      assert.equal(host.coordinator.activity.entries({ agentId: 'w2' }).length, 1, "another agent's entries stay");
      await assert.rejects(
        scheduler.call('PurgeActivity', { agent_id: 'w1', task_ids: ['x'.repeat(300)] }),
        (err: grpc.ServiceError) =>
          err.code === grpc.status.INVALID_ARGUMENT &&
          /^VALIDATION_ERROR: task_ids entry is longer than 128 characters/.test(err.details),
      );
    });

    it("PurgeActivity removes the agent's entries and answers how many", async () => {
      const w1 = await agent('w1');
      await accepted({ agent_id: 'w1', task_id: 'p1', params: { n: 1 }, scope: 'repo:app/x' });
      const run = await w1.command('run', 'p1');
      await w1.ack(run, 'RECEIVED');
      await waitTask('p1', 'RUNNING');
      const none = await scheduler.call<{ purged: number }>('PurgeActivity', { agent_id: 'w1', task_ids: ['other'] });
      assert.equal(none.response.purged, 0);
      const purged = await scheduler.call<{ purged: number }>('PurgeActivity', { agent_id: 'w1', task_ids: ['p1'] });
      assert.equal(purged.response.purged, 1);
      const { response } = await scheduler.call<{ entries: unknown[] }>('PollActivityBuffer', { agent_id: 'w1' });
      assert.deepEqual(response.entries, []);
      // Advisory: the task itself runs on.
      await w1.ack(run, 'FULFILLED');
      await waitTask('p1', 'COMPLETED');
    });

    it('an agent credential submits only for its own agent id (PERMISSION_DENIED for another agent or a type)', async () => {
      const ctx = { correlationId: 'test' };
      const tokenA = host.coordinator.credentials.mintAgent('a1', 'test', 'agent a1', ctx).token;
      host.coordinator.credentials.mintAgent('b1', 'test', 'agent b1', ctx);
      await agent('a1', 'worker', tokenA);
      const asA = new SchedulerClient(`127.0.0.1:${host.port}`, tokenA);
      try {
        const own = await asA.submit({ agent_id: 'a1', task_id: 'mine', scope: 'resource:mine' });
        assert.equal(own.accepted, true, own.reason);
        assert.equal(host.coordinator.scheduler.task('mine')!.submittedBy, 'a1');
        await assert.rejects(
          asA.submit({ agent_id: 'b1', task_id: 'theirs', scope: 'resource:theirs' }),
          (err: grpc.ServiceError) => err.code === grpc.status.PERMISSION_DENIED,
        );
        await assert.rejects(
          asA.submit({ agent_id: 'type:worker', task_id: 'any', scope: 'resource:any' }),
          (err: grpc.ServiceError) => err.code === grpc.status.PERMISSION_DENIED,
        );
        await assert.rejects(
          asA.call('ShutdownAgent', { agent_id: 'b1' }),
          (err: grpc.ServiceError) => err.code === grpc.status.PERMISSION_DENIED,
        );
        assert.equal(host.coordinator.scheduler.task('theirs'), undefined);
      } finally {
        asA.close();
      }
    });
  });

  describe('concurrency (RFC §9)', () => {
    it('max_parallel_instances per type: an extra task waits, the submitter is told why, and it runs when one ends', async () => {
      await start({ scheduler: { maxParallelInstances: { worker: 1 } } });
      const w1 = await agent('w1');
      const w2 = await agent('w2');
      await accepted({ agent_id: 'type:worker', task_id: 'first', params: { n: 1 } });
      const { agent: firstAgent, received: first } = await firstCommand([w1, w2], 'run', 'first');
      const reason = await accepted({ agent_id: 'type:worker', task_id: 'second', params: { n: 2 } });
      assert.match(reason, /max_parallel_instances/);
      const waiting = host.coordinator.scheduler.task('second')!;
      assert.equal(waiting.state, 'QUEUED');
      assert.equal(waiting.waiting?.kind, 'max_parallel_instances');
      const other = firstAgent === w1 ? w2 : w1;
      assert.ok(!other.commands().some((c) => c === 'run second'), 'the idle agent of the same type did not get it');
      await firstAgent.ack(first, 'RECEIVED');
      await firstAgent.ack(first, 'FULFILLED');
      await pollUntil('second dispatched', () =>
        ['DISPATCHED', 'RUNNING'].includes(host.coordinator.scheduler.task('second')!.state) ? true : undefined,
      );
    });

    it('the same job twice waits for a human (TASK_ESCALATION); denied, it ends FAILED DUPLICATE_DETECTED at once and never runs', async () => {
      await start();
      const w1 = await agent('w1');
      await accepted({
        agent_id: 'w1',
        task_id: 'job-1',
        priority: -19,
        params: { build: 'main' },
        scope: 'resource:ci',
      });
      const run = await w1.command('run', 'job-1');
      await w1.ack(run, 'RECEIVED');
      await accepted({
        agent_id: 'w1',
        task_id: 'job-2',
        priority: 0,
        params: { build: 'main' },
        scope: 'resource:ci2',
      });
      const invocation = await pollUntil('a TASK_ESCALATION invocation', () =>
        host.coordinator.hitl.list({ pendingOnly: true }).find((i) => i.reasonType === 'TASK_ESCALATION'),
      );
      host.coordinator.hitl.decide(invocation.id, { action: 'deny', rationale: 'one build at a time' }, 'editor:test', {
        correlationId: 'test',
      });
      // The denial ends the duplicate at once: its agent is still busy with job-1, which has not been acknowledged yet.
      await waitTask('job-2', 'FAILED');
      assert.equal(host.coordinator.scheduler.task('job-2')!.errorCode, 'DUPLICATE_DETECTED');
      assert.equal(
        host.coordinator.scheduler.task('job-1')!.state,
        'RUNNING',
        'job-1 is still running: no ACK FULFILLED yet',
      );
      await w1.ack(run, 'FULFILLED');
      await waitTask('job-1', 'COMPLETED');
      assert.ok(!w1.commands().includes('run job-2'), 'the denied duplicate never ran');
    });

    it('a duplicate whose original ends before anyone answers is no longer a duplicate: its question is withdrawn and it runs', async () => {
      await start();
      const w1 = await agent('w1');
      await accepted({
        agent_id: 'w1',
        task_id: 'job-1',
        priority: -19,
        params: { build: 'main' },
        scope: 'resource:ci',
      });
      const run = await w1.command('run', 'job-1');
      await w1.ack(run, 'RECEIVED');
      await accepted({
        agent_id: 'w1',
        task_id: 'job-2',
        priority: 0,
        params: { build: 'main' },
        scope: 'resource:ci',
      });
      const invocation = await pollUntil('a TASK_ESCALATION invocation', () =>
        host.coordinator.hitl.list({ pendingOnly: true }).find((i) => i.reasonType === 'TASK_ESCALATION'),
      );
      await w1.ack(run, 'FULFILLED');
      await waitTask('job-1', 'COMPLETED');
      const run2 = await w1.command('run', 'job-2');
      assert.equal(host.coordinator.hitl.get(invocation.id)!.state, 'cancelled');
      await w1.ack(run2, 'RECEIVED');
      await w1.ack(run2, 'FULFILLED');
      await waitTask('job-2', 'COMPLETED');
    });

    for (const [action, parallel] of [
      ['approve', true],
      ['deny', false],
    ] as const) {
      it(`overlapping scopes escalate a CONFLICT through HITL end to end; ${action} → ${parallel ? 'run in parallel' : 'serialised'}`, async () => {
        await start();
        const w1 = await agent('w1');
        const w2 = await agent('w2');
        await accepted({ agent_id: 'w1', task_id: 'edit-all', params: { n: 1 }, scope: 'repo:app/src/**' });
        const run1 = await w1.command('run', 'edit-all');
        await w1.ack(run1, 'RECEIVED');
        await waitTask('edit-all', 'RUNNING');
        await accepted({ agent_id: 'w2', task_id: 'edit-one', params: { n: 2 }, scope: 'repo:app/src/main.ts' });
        const invocation = await pollUntil('a CONFLICT invocation', () =>
          host.coordinator.hitl.list({ pendingOnly: true }).find((i) => i.reasonType === 'CONFLICT'),
        );
        const queued = host.coordinator.scheduler.task('edit-one')!;
        assert.equal(queued.state, 'QUEUED');
        assert.equal(queued.waiting?.kind, 'conflict_decision');
        assert.ok(!w2.commands().includes('run edit-one'), 'nothing runs before the decision');

        host.coordinator.hitl.decide(invocation.id, { action, rationale: `test: ${action}` }, 'editor:test', {
          correlationId: 'test',
        });
        if (parallel) {
          // The scheduler follows the decision: the second runs while the first still runs.
          await w2.command('run', 'edit-one');
          assert.equal(host.coordinator.scheduler.task('edit-all')!.state, 'RUNNING');
        } else {
          await pollUntil('edit-one serialised', () =>
            host.coordinator.scheduler.task('edit-one')!.waiting?.kind === 'serialised_after' ? true : undefined,
          );
          // Nothing was sent: the task is still queued, never dispatched (a dispatch marks it DISPATCHED and counts it).
          const held = host.coordinator.scheduler.task('edit-one')!;
          assert.deepEqual([held.state, held.dispatches, held.assignedAgentId], ['QUEUED', 0, '']);
          assert.equal(host.coordinator.scheduler.task('edit-all')!.state, 'RUNNING');
          assert.ok(!w2.commands().includes('run edit-one'));
          await w1.ack(run1, 'FULFILLED');
          await w2.command('run', 'edit-one');
        }
      });
    }
  });
});

describe('SchedulerService across a restart of the headless coordinator', function () {
  this.timeout(60_000);
  const cli = useCliProcesses('sw4rm-scheduler-cli-');
  const agents: TaskTestAgent[] = [];
  const clients: SchedulerClient[] = [];

  afterEach(() => {
    for (const a of agents.splice(0)) a.close();
    for (const c of clients.splice(0)) c.close();
  });

  async function startCli(): Promise<{ process: CliProcess; address: string; token: string }> {
    const process = cli.run(
      '--port',
      '0',
      '--data-dir',
      cli.dataDir(),
      '--max-parallel',
      'worker=1',
      '--conflict-threshold',
      '0.5',
    );
    const env = await process.environment();
    return { process, address: env.SW4RM_SCHEDULER_ADDR, token: env.SW4RM_TOKEN };
  }

  it('kill -9 with queued tasks: after the restart the queue and its order are kept (and --max-parallel still holds)', async () => {
    const first = await startCli();
    const scheduler = new SchedulerClient(first.address, first.token);
    clients.push(scheduler);
    const w1 = new TaskTestAgent(first.address, first.token, 'w1', 'worker');
    const w2 = new TaskTestAgent(first.address, first.token, 'w2', 'worker');
    agents.push(w1, w2);
    await w1.start();
    await w2.start();
    const submit = async (taskId: string, priority: number): Promise<string> => {
      const answer = await scheduler.submit({
        agent_id: 'type:worker',
        task_id: taskId,
        priority,
        params: { taskId },
        scope: `resource:${taskId}`,
      });
      assert.equal(answer.accepted, true, `${taskId}: ${answer.reason}`);
      return answer.reason;
    };
    await submit('running', -19);
    const started = await firstCommand([w1, w2], 'run', 'running');
    const holder = { agent: started.agent, run: started.received };
    await holder.agent.ack(holder.run, 'RECEIVED');
    // --max-parallel worker=1: the other agent of the type stays idle, and the submitter is told why.
    assert.match(await submit('q-10', 10), /max_parallel_instances/);
    await submit('q-0', 0);
    await submit('q-5a', 5);
    await submit('q-5b', 5);
    await submit('q-neg', -7);

    first.process.signal('SIGKILL');
    await first.process.exit();
    assert.equal(first.process.exitSignal, 'SIGKILL');
    for (const a of agents.splice(0)) a.close();

    const second = await startCli();
    const scheduler2 = new SchedulerClient(second.address, second.token);
    clients.push(scheduler2);
    // Both agents come back on the new port: their inbox streams and a presence heartbeat, no new registration.
    const back = [
      new TaskTestAgent(second.address, second.token, 'w1', 'worker'),
      new TaskTestAgent(second.address, second.token, 'w2', 'worker'),
    ];
    agents.push(...back);
    for (const a of back) {
      a.inbox = a.wire.openInbox();
      assert.equal((await a.heartbeat('AGENT_STATE_UNSPECIFIED')).ok, true, `the registry kept ${a.agentId}`);
    }
    // The holder finishes the task it was running before the crash; the queue then runs in order, one at a time.
    const holderBack = back.find((a) => a.agentId === holder.agent.agentId)!;
    await holderBack.ackMessage(holder.run.item.msg.message_id, 'FULFILLED', { note: 'finished across the restart' });
    const order: string[] = [];
    for (let i = 0; i < 5; i++) {
      const next = await firstCommand(back, 'run', undefined, 10_000);
      order.push(String(next.received.command.task_id));
      await next.agent.ack(next.received, 'RECEIVED');
      await next.agent.ack(next.received, 'FULFILLED');
    }
    assert.deepEqual(order, ['q-neg', 'q-0', 'q-5a', 'q-5b', 'q-10']);
    second.process.signal('SIGTERM');
    assert.equal(await second.process.exit(), 0);
  });
});
