import { strict as assert } from 'node:assert';
import { DEFAULT_SCHEDULER_OPTIONS } from '../../src/core/scheduler/model';
import { SchedulerHarness } from '../support/schedulerHarness';
import { ctx, settle } from '../support/routerHarness';

const MAX_NP = DEFAULT_SCHEDULER_OPTIONS.maxNonPreemptibleMs;
const GRACE = DEFAULT_SCHEDULER_OPTIONS.terminateGraceMs;

describe('Scheduler (RFC §7, §7.1, §7.2, §8.4; App. D C.4, C.5)', () => {
  let h: SchedulerHarness;

  beforeEach(() => {
    h = new SchedulerHarness();
  });

  afterEach(() => h.dispose());

  describe('submit', () => {
    it('refuses a priority outside -19..20 naming the range, a missing scope, unknown agents and a task id given twice', () => {
      h.agent('a1');
      for (const p of [-20, 21, 0.5]) {
        const r = h.submit('a1', p);
        assert.equal(r.accepted, false);
        assert.equal(!r.accepted && r.code, 'VALIDATION_ERROR');
        assert.match(!r.accepted ? r.reason : '', /-19 \(highest\) to 20 \(lowest\)/);
      }
      const noScope = h.submit('a1', 0, { scope: '  ' });
      assert.equal(!noScope.accepted && noScope.code, 'VALIDATION_ERROR');
      assert.match(!noScope.accepted ? noScope.reason : '', /scope is required/);
      const unknown = h.submit('ghost');
      assert.equal(!unknown.accepted && unknown.code, 'NO_ROUTE');
      h.submitted('a1', 0, { taskId: 't1' });
      const again = h.submit('a1', 0, { taskId: 't1' });
      assert.equal(!again.accepted && again.code, 'DUPLICATE_DETECTED');
      assert.equal(h.events('task.refused').length, 6);
    });

    it('refuses params whose run command would not fit a CONTROL envelope (OVERSIZE_PAYLOAD)', () => {
      h.agent('a1');
      const r = h.submit('a1', 0, { params: { blob: 'x'.repeat(64 * 1024) } });
      assert.equal(!r.accepted && r.code, 'OVERSIZE_PAYLOAD');
    });

    it('dispatches to a RUNNABLE agent as CONTROL run (correlation_id = task_id); RECEIVED → RUNNING; FULFILLED → COMPLETED, agent back to RUNNABLE', async () => {
      h.agent('a1');
      const task = h.submitted('a1', 3, { taskId: 'task-1', params: { description: 'fix the parser' } });
      assert.equal(task.state, 'DISPATCHED');
      assert.equal(h.agentState('a1'), 'SCHEDULED');
      const run = h.command('a1', 'run');
      assert.equal(run.correlationId, 'task-1');
      assert.deepEqual(run.command, {
        command: 'run',
        task_id: 'task-1',
        params: { description: 'fix the parser' },
        content_type: 'application/json',
        scope: { repo_id: 'myrepo', worktree_id: '', paths: ['path'], resources: [] },
        priority: 3,
      });
      assert.deepEqual(
        h.coordinator.activity.entries({ taskId: 'task-1' }).map((e) => [e.agentId, e.repoId, e.description]),
        [['a1', 'myrepo', 'fix the parser']],
      );

      await h.answer('a1', run.messageId, 'RECEIVED');
      assert.equal(h.task('task-1').state, 'RUNNING');
      assert.equal(h.agentState('a1'), 'RUNNING');
      await h.answer('a1', run.messageId, 'FULFILLED', { note: 'done: 3 files' });
      const done = h.task('task-1');
      assert.equal(done.state, 'COMPLETED');
      assert.equal(done.note, 'done: 3 files');
      assert.equal(h.agentState('a1'), 'RUNNABLE');
      assert.deepEqual(
        h.coordinator.activity.entries({ taskId: 'task-1' }),
        [],
        'the activity entry ended with the task',
      );
      const states = h
        .events('task.state_changed')
        .filter((e) => e.correlationId === 'task-1')
        .map((e) => `${e.details.from}→${e.details.to}`);
      assert.deepEqual(states, ['QUEUED→DISPATCHED', 'DISPATCHED→RUNNING', 'RUNNING→COMPLETED']);
      const agentMoves = h
        .events('agent.state_changed')
        .filter((e) => e.details.agent_id === 'a1' || e.actor === 'a1')
        .map((e) => `${e.details.from}→${e.details.to}`);
      assert.deepEqual(agentMoves.slice(-4), [
        'RUNNABLE→SCHEDULED',
        'SCHEDULED→RUNNING',
        'RUNNING→COMPLETED',
        'COMPLETED→RUNNABLE',
      ]);
    });

    it("keeps the FULFILLED ACK payload's `result` (any JSON) on the task as JSON text, across a restart; none → ''", async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 'with-result' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'FULFILLED', {
        note: 'ok',
        result: { verdict: 'approve', score: 0.9, tags: ['a'] },
      });
      assert.deepEqual(JSON.parse(h.task('with-result').result), { verdict: 'approve', score: 0.9, tags: ['a'] });
      h.submitted('a1', 0, { taskId: 'without' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'FULFILLED', { note: 'plain note' });
      assert.equal(h.task('without').result, '');
      assert.equal(h.task('without').note, 'plain note');
      h.submitted('a1', 0, { taskId: 'failed' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'FAILED', {
        error_code: 'VALIDATION_ERROR',
        result: { partial: true },
      });
      assert.equal(h.task('failed').result, '', 'only a completed task keeps a result');
      h.restart();
      assert.deepEqual(JSON.parse(h.task('with-result').result), { verdict: 'approve', score: 0.9, tags: ['a'] });
    });

    it('onDidEndTask fires once per ended task (COMPLETED, FAILED, CANCELLED) inside the transaction that records the end', async () => {
      h.agent('a1');
      const depth = () => (h.store as unknown as { engine: { depth: number } }).engine.depth;
      const seen: Array<[string, string, string, number]> = [];
      h.scheduler.onDidEndTask((task) =>
        seen.push([task.taskId, task.state, h.store.scheduler.get(task.taskId)?.state ?? '', depth()]),
      );
      h.submitted('a1', 0, { taskId: 'done' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'FULFILLED', { result: 1 });
      h.submitted('a1', 0, { taskId: 'bad' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'FAILED', { error_code: 'VALIDATION_ERROR' });
      h.submitted('a1', 0, { taskId: 'running' });
      h.submitted('a1', 0, { taskId: 'queued' });
      h.scheduler.cancel('queued', 'not needed', ctx('cancel'));
      assert.deepEqual(seen, [
        ['done', 'COMPLETED', 'COMPLETED', 1],
        ['bad', 'FAILED', 'FAILED', 1],
        ['queued', 'CANCELLED', 'CANCELLED', 1],
      ]);
    });

    it('ACK FAILED ends the task FAILED with the ACK error_code; the agent is fine (COMPLETED → RUNNABLE) and takes the next task', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      h.submitted('a1', 0, { taskId: 't2' });
      assert.equal(h.task('t2').state, 'QUEUED', 'one task at a time per agent');
      assert.deepEqual(h.task('t2').waiting, { kind: 'agent_busy', agentId: 'a1' });
      const run = h.command('a1', 'run');
      await h.answer('a1', run.messageId, 'FAILED', { error_code: 'VALIDATION_ERROR', note: 'cannot parse' });
      assert.equal(h.task('t1').state, 'FAILED');
      assert.equal(h.task('t1').errorCode, 'VALIDATION_ERROR');
      assert.equal(h.task('t2').state, 'DISPATCHED');
      assert.equal(h.command('a1', 'run').command.task_id, 't2');
    });

    it('dispatches type:<name> to an idle agent of that type, and queues while none is idle', async () => {
      h.agent('r1', 'reviewer');
      const a = h.submitted('type:coder', 0, { taskId: 'ta' });
      assert.equal(a.state, 'QUEUED');
      assert.deepEqual(a.waiting, { kind: 'no_agent_of_type', agentType: 'coder' });
      h.agent('c1', 'coder');
      await settle();
      assert.equal(h.task('ta').state, 'DISPATCHED');
      assert.equal(h.task('ta').assignedAgentId, 'c1');
      assert.equal(h.commands('r1').length, 0);
    });

    it('a run refused (REJECTED) goes back to the queue (dispatches+1), the agent SCHEDULED → RUNNABLE; after 3 withdrawn dispatches FAILED with the code', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      for (let i = 1; i <= 3; i++) {
        assert.equal(h.task('t1').state, 'DISPATCHED', `dispatch ${i}`);
        assert.equal(h.task('t1').dispatches, i);
        await h.answer('a1', h.command('a1', 'run').messageId, 'REJECTED', { error_code: 'OVERLOADED', note: 'busy' });
      }
      assert.equal(h.task('t1').state, 'FAILED');
      assert.equal(h.task('t1').errorCode, 'OVERLOADED');
      assert.equal(h.agentState('a1'), 'RUNNABLE');
    });

    it('no router ACK deadline on scheduler commands: a run first RECEIVED after 10 s runs once (not withdrawn and sent again)', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      const run = h.command('a1', 'run');
      await h.advance(11_000);
      assert.equal(h.task('t1').state, 'DISPATCHED');
      assert.deepEqual(h.commands('a1'), [], 'not sent again');
      await h.answer('a1', run.messageId, 'RECEIVED');
      assert.equal(h.task('t1').state, 'RUNNING');
      await h.answer('a1', run.messageId, 'FULFILLED');
      assert.equal(h.task('t1').state, 'COMPLETED');
      assert.equal(h.task('t1').dispatches, 1);
      assert.equal(h.events('task.dispatched').length, 1);
    });
  });

  describe('advisory activity, the gate, housekeeping', () => {
    it('a full activity buffer is logged WARN activity_buffer_full and the task runs anyway; reconciliation purges entries of unknown tasks', async () => {
      h.agent('a1');
      for (let i = 0; i < 100; i++) {
        h.coordinator.activity.begin(
          {
            agentId: 'a1',
            taskId: `stale-${i}`,
            repoId: 'r',
            worktreeId: '',
            branch: '',
            timestamp: h.clock.now(),
            description: 'x',
          },
          ctx(),
        );
      }
      const task = h.submitted('a1', 0, { taskId: 't1' });
      assert.equal(task.state, 'DISPATCHED');
      const [warn] = h.events('task.activity_buffer_full');
      assert.equal(warn.level, 'WARN');
      assert.equal(warn.details.code, 'activity_buffer_full');
      await h.answer('a1', h.command('a1', 'run').messageId, 'RECEIVED');
      assert.equal(h.task('t1').state, 'RUNNING');
      await h.advance(60_000);
      assert.deepEqual(
        h.coordinator.activity.entries({ agentId: 'a1' }),
        [],
        'the stale entries of unknown tasks are purged every minute',
      );
    });

    it('follows the gate: queued behind max_parallel_instances (the submitter is told), dispatched once a slot frees', async () => {
      h.coordinator.concurrency.setMaxParallelInstances({ coder: 1 }, 0);
      h.agent('c1');
      h.agent('c2');
      h.submitted('type:coder', 0, { taskId: 'one' });
      const two = h.submit('type:coder', 0, { taskId: 'two' });
      assert.ok(two.accepted);
      assert.equal(two.task.state, 'QUEUED');
      assert.equal(two.task.waiting?.kind, 'max_parallel_instances');
      assert.match(two.reason, /queued behind max_parallel_instances/);
      const owner = h.task('one').assignedAgentId;
      const run = h.command(owner, 'run');
      await h.answer(owner, run.messageId, 'FULFILLED');
      assert.equal(h.task('two').state, 'DISPATCHED');
    });

    it('the same job twice waits for a human; denied, it ends FAILED DUPLICATE_DETECTED at once, even while the agent is busy', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 'first', params: { job: 'same' } });
      const dup = h.submit('a1', 0, { taskId: 'dup', params: { job: 'same' } });
      assert.ok(dup.accepted, dup.accepted ? '' : dup.reason);
      assert.equal(dup.task.waiting?.kind, 'conflict_decision');
      const invocationId = dup.task.waiting?.kind === 'conflict_decision' ? dup.task.waiting.invocationId : '';
      h.coordinator.hitl.decide(invocationId, { action: 'deny', rationale: 'not twice' }, 'editor:alice', ctx());
      await settle();
      assert.equal(h.task('dup').state, 'FAILED');
      assert.equal(h.task('dup').errorCode, 'DUPLICATE_DETECTED');
      assert.equal(h.task('first').state, 'DISPATCHED', 'the first one is untouched');
    });

    it('prunes finished tasks beyond keepFinishedTasks every minute', async () => {
      h.agent('a1');
      for (let i = 0; i < 3; i++) {
        h.submitted('a1', 0, { taskId: `f${i}` });
        const run = h.command('a1', 'run');
        await h.answer('a1', run.messageId, 'FULFILLED');
        h.clock.advance(1);
      }
      h.restart();
      // A small keep for this coordinator: the option as the composition root passes it.
      (h.scheduler as unknown as { options: { keepFinishedTasks: number } }).options.keepFinishedTasks = 1;
      await h.advance(60_000);
      assert.deepEqual(
        h.scheduler.tasks().map((t) => t.taskId),
        ['f2'],
      );
      assert.equal(h.events('task.pruned').at(-1)?.details.pruned, 2);
    });
  });

  describe('preemption (RFC §7.1, §7.2)', () => {
    async function running(agentId: string, taskId: string, priority: number): Promise<string> {
      h.submitted(agentId, priority, { taskId });
      const run = h.command(agentId, 'run');
      await h.answer(agentId, run.messageId, 'RECEIVED');
      assert.equal(h.task(taskId).state, 'RUNNING');
      return run.messageId;
    }

    it('equal or lower priority never preempts', async () => {
      h.agent('a1');
      await running('a1', 'low', 5);
      h.submitted('a1', 5, { taskId: 'same' });
      h.submitted('a1', 10, { taskId: 'lower' });
      assert.deepEqual(h.commands('a1'), []);
      assert.equal(h.task('low').state, 'RUNNING');
      assert.equal(h.events('task.preempt_requested').length, 0);
    });

    it('C.4: a higher-priority arrival sends preempt_request; the agent yields; the task goes back at its priority and seq; SUSPENDED → RESUMED → RUNNING', async () => {
      h.agent('a1');
      await running('a1', 'low', 5);
      const lowSeq = h.task('low').seq;
      h.submitted('a1', -3, { taskId: 'high' });
      const pre = h.command('a1', 'preempt_request');
      assert.deepEqual(pre.command, {
        command: 'preempt_request',
        task_id: 'low',
        reason: 'task high of priority -3 is waiting',
        by_task_id: 'high',
        by_priority: -3,
      });
      assert.equal(pre.correlationId, 'low');
      assert.equal(h.task('low').state, 'PREEMPTING');

      await h.answer('a1', pre.messageId, 'FULFILLED', { note: 'yielded' });
      const low = h.task('low');
      assert.equal(low.state, 'QUEUED');
      assert.equal(low.seq, lowSeq, 'its original seq');
      assert.deepEqual(low.waiting, { kind: 'preempted', byTaskId: 'high' });
      assert.equal(h.task('high').state, 'DISPATCHED');
      assert.equal(h.agentState('a1'), 'RESUMED');
      const run = h.command('a1', 'run');
      assert.equal(run.command.task_id, 'high');
      await h.answer('a1', run.messageId, 'RECEIVED');
      assert.equal(h.agentState('a1'), 'RUNNING');
      await h.answer('a1', run.messageId, 'FULFILLED');
      assert.equal(h.task('low').state, 'DISPATCHED', 'the yielded task runs next');
      assert.equal(h.command('a1', 'run').command.task_id, 'low');
      const moves = h
        .events('agent.state_changed')
        .filter((e) => e.details.agent_id === 'a1' || e.actor === 'a1')
        .map((e) => `${e.details.from}→${e.details.to}`);
      for (const m of ['RUNNING→SUSPENDED', 'SUSPENDED→RESUMED', 'RESUMED→RUNNING'])
        assert.ok(moves.includes(m), `${m} in ${moves.join(', ')}`);
    });

    it('C.5: a declared non-preemptible section defers; past it terminate with the grace; FULFILLED terminated → FAILED forced_preemption, agent freed', async () => {
      h.agent('a1');
      await running('a1', 'low', 5);
      h.submitted('a1', 0, { taskId: 'high' });
      const pre = h.command('a1', 'preempt_request');
      await h.answer('a1', pre.messageId, 'RECEIVED', { note: 'non_preemptible:20000' });
      assert.equal(h.task('low').nonPreemptibleUntil, h.clock.now() + 20_000);
      await h.advance(19_999);
      assert.deepEqual(h.commands('a1'), [], 'deferred while the section lasts');
      await h.advance(1);
      const term = h.command('a1', 'terminate');
      assert.deepEqual(term.command, {
        command: 'terminate',
        task_id: 'low',
        grace_ms: GRACE,
        reason: 'no yield within the declared non-preemptible section',
      });
      await h.answer('a1', term.messageId, 'FULFILLED', { note: 'terminated' });
      assert.equal(h.task('low').state, 'FAILED');
      assert.equal(h.task('low').errorCode, 'forced_preemption');
      assert.equal(h.task('high').state, 'DISPATCHED');
      assert.equal(h.command('a1', 'run').command.task_id, 'high');
    });

    it('C.5: a declared section is cut to maxNonPreemptibleMs; no answer to terminate within the grace → task FAILED forced_preemption and the agent FAILED', async () => {
      h.agent('a1');
      await running('a1', 'low', 5);
      h.submitted('a1', 0, { taskId: 'high' });
      const pre = h.command('a1', 'preempt_request');
      await h.answer('a1', pre.messageId, 'RECEIVED', { note: `non_preemptible:${MAX_NP * 10}` });
      await h.advance(MAX_NP - 1);
      assert.deepEqual(h.commands('a1'), []);
      await h.advance(1);
      h.command('a1', 'terminate');
      await h.advance(GRACE);
      assert.equal(h.task('low').state, 'FAILED');
      assert.equal(h.task('low').errorCode, 'forced_preemption');
      assert.equal(h.agentState('a1'), 'FAILED_STATE');
      const failed = h.events('agent.state_changed').find((e) => e.details.to === 'FAILED_STATE');
      assert.equal(failed?.details.error_code, 'forced_preemption');
      assert.equal(h.task('high').state, 'QUEUED', 'a FAILED agent takes nothing');
    });

    it('without a declared section the scheduler waits maxNonPreemptibleMs for the yield, then escalates the same way', async () => {
      h.agent('a1');
      await running('a1', 'low', 5);
      h.submitted('a1', 0, { taskId: 'high' });
      h.command('a1', 'preempt_request');
      await h.advance(MAX_NP - 1);
      assert.deepEqual(h.commands('a1'), []);
      await h.advance(1);
      assert.equal(h.command('a1', 'terminate').command.task_id, 'low');
    });

    it('a run preempted before the agent ever acknowledged it, then refused, goes back to the queue (not FAILED)', async () => {
      h.agent('a1');
      h.submitted('a1', 5, { taskId: 'low' });
      const run = h.command('a1', 'run');
      h.submitted('a1', 0, { taskId: 'high' });
      assert.equal(h.task('low').state, 'PREEMPTING');
      await h.answer('a1', run.messageId, 'REJECTED', { error_code: 'OVERLOADED' });
      assert.equal(h.task('low').state, 'QUEUED');
      assert.equal(h.task('high').state, 'DISPATCHED', 'the agent, back to RUNNABLE, takes the urgent one');
    });

    it('a yield answered late (FULFILLED yielded 11 s after preempt_request, no RECEIVED first) is taken: the task is queued again, not FAILED', async () => {
      h.agent('a1');
      await running('a1', 'low', 5);
      h.submitted('a1', 0, { taskId: 'high' });
      const pre = h.command('a1', 'preempt_request');
      await h.advance(11_000);
      await h.answer('a1', pre.messageId, 'FULFILLED', { note: 'yielded' });
      assert.equal(h.task('low').state, 'QUEUED');
      assert.equal(h.task('high').state, 'DISPATCHED');
      await h.advance(MAX_NP + GRACE + 1);
      assert.equal(h.task('low').state, 'QUEUED', 'no forced preemption later');
    });

    it('yields are not withdrawals: a task yielded twice, then refused once, is queued again (withdrawals 1), not FAILED', async () => {
      h.agent('a1');
      await running('a1', 't1', 0);
      for (let i = 0; i < 2; i++) {
        h.scheduler.preempt('a1', 't1', 'operator asked', ctx());
        await h.answer('a1', h.command('a1', 'preempt_request').messageId, 'FULFILLED', { note: 'yielded' });
        assert.equal(h.task('t1').state, 'DISPATCHED');
        await h.answer('a1', h.command('a1', 'run').messageId, 'RECEIVED');
      }
      h.scheduler.preempt('a1', 't1', 'operator asked', ctx());
      await h.answer('a1', h.command('a1', 'preempt_request').messageId, 'FULFILLED', { note: 'yielded' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'REJECTED', { error_code: 'OVERLOADED' });
      assert.equal(h.task('t1').state, 'DISPATCHED', 'queued again and, the agent idle, sent again');
      assert.equal(h.task('t1').withdrawals, 1);
      assert.equal(h.task('t1').dispatches, 5);
    });

    it('RequestPreemption (preempt) asks the agent to yield without a replacement; the yielded task is queued again and runs again', async () => {
      h.agent('a1');
      await running('a1', 't1', 0);
      assert.deepEqual(h.scheduler.preempt('a1', '', 'operator asked', ctx()), { enqueued: true, reason: '' });
      const pre = h.command('a1', 'preempt_request');
      assert.equal(pre.command.by_task_id, '');
      await h.answer('a1', pre.messageId, 'FULFILLED', { note: 'yielded' });
      assert.equal(h.task('t1').state, 'DISPATCHED', 'back in the queue, and the only task: dispatched again');
      assert.equal(h.agentState('a1'), 'RESUMED');
      assert.equal(h.scheduler.preempt('a1', 'nope', 'x', ctx()).enqueued, false);
    });
  });

  describe('cancel', () => {
    it('cancels a queued task at once; a running one gets terminate and ends CANCELLED at once, the agent freed on the ACK', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      h.submitted('a1', 0, { taskId: 't2' });
      h.submitted('a1', 0, { taskId: 't3' });
      const run = h.command('a1', 'run');
      assert.equal(h.scheduler.cancel('t2', 'not needed', ctx()).state, 'CANCELLED');
      assert.equal(h.scheduler.cancel('t1', 'wrong', ctx()).state, 'CANCELLED');
      const term = h.command('a1', 'terminate');
      assert.equal(term.command.task_id, 't1');
      assert.equal(h.task('t3').state, 'QUEUED', 'the agent is still busy until it answers terminate');
      await h.answer('a1', run.messageId, 'RECEIVED');
      await h.answer('a1', term.messageId, 'FULFILLED', { note: 'terminated' });
      assert.equal(h.task('t3').state, 'DISPATCHED', 'freed by the terminate ACK, the agent takes the next task');
      assert.equal(h.agentState('a1'), 'SCHEDULED');
      const moves = h
        .events('agent.state_changed')
        .filter((e) => e.details.task_id === 't1')
        .map((e) => `${e.details.from}→${e.details.to}`);
      assert.deepEqual(moves, ['RUNNABLE→SCHEDULED', 'SCHEDULED→RUNNING', 'RUNNING→COMPLETED', 'COMPLETED→RUNNABLE']);
      assert.throws(() => h.scheduler.cancel('t1', 'again', ctx()), /already ended CANCELLED/);
    });
  });

  describe('shutdown (RFC §8.4)', () => {
    it('SHUTTING_DOWN, CONTROL shutdown, no new tasks; FULFILLED deregisters; its running task and its queue FAILED agent_shutdown; type: tasks stay', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 'run1' });
      h.submitted('a1', 0, { taskId: 'q1' });
      h.submitted('type:coder', 9, { taskId: 'typed' });
      h.command('a1', 'run');
      assert.deepEqual(h.scheduler.shutdownAgent('a1', 5_000, 'maintenance', ctx()), { ok: true, reason: '' });
      assert.equal(h.agentState('a1'), 'SHUTTING_DOWN');
      const down = h.command('a1', 'shutdown');
      assert.deepEqual(down.command, { command: 'shutdown', reason: 'maintenance', drain_timeout_seconds: 5 });
      assert.equal(h.task('q1').state, 'FAILED');
      assert.equal(h.task('q1').errorCode, 'agent_shutdown');
      const refused = h.submit('a1');
      assert.equal(!refused.accepted && refused.code, 'AGENT_SHUTDOWN');
      await h.answer('a1', down.messageId, 'FULFILLED');
      await settle();
      assert.equal(h.registry.get('a1'), undefined, 'deregistered');
      assert.equal(h.task('run1').state, 'FAILED');
      assert.equal(h.task('run1').errorCode, 'agent_shutdown');
      assert.equal(h.task('typed').state, 'QUEUED');
    });

    it('past the grace: the agent FAILED agent_shutdown_timeout and deregistered; its running task FAILED agent_shutdown_timeout', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 'run1' });
      h.scheduler.shutdownAgent('a1', 2_000, 'maintenance', ctx());
      await h.advance(2_000);
      await settle();
      assert.equal(h.registry.get('a1'), undefined);
      assert.equal(h.task('run1').state, 'FAILED');
      assert.equal(h.task('run1').errorCode, 'agent_shutdown_timeout');
    });
  });

  describe('restart', () => {
    it('keeps the queue, the running task and the order; seq keeps increasing; a running task completes after the restart', async () => {
      h.agent('a1');
      h.submitted('a1', -5, { taskId: 'r' });
      const run = h.command('a1', 'run');
      await h.answer('a1', run.messageId, 'RECEIVED');
      for (const [id, p] of [
        ['q1', 5],
        ['q2', -2],
        ['q3', 5],
        ['q4', -2],
      ] as const)
        h.submitted('a1', p, { taskId: id });
      const expected = [
        ['r', 'RUNNING'],
        ['q2', 'QUEUED'],
        ['q4', 'QUEUED'],
        ['q1', 'QUEUED'],
        ['q3', 'QUEUED'],
      ];
      assert.deepEqual(
        h.scheduler.tasks({ includeFinished: false }).map((t) => [t.taskId, t.state]),
        expected,
      );
      h.restart();
      h.reconnect('a1');
      h.registry.heartbeat('a1', 'RUNNING', {}, ctx('hb'));
      assert.deepEqual(
        h.scheduler.tasks({ includeFinished: false }).map((t) => [t.taskId, t.state]),
        expected,
      );
      const next = h.submitted('a1', 0, { taskId: 'after' });
      assert.ok(next.seq > h.task('q4').seq, 'seq strictly increasing across the restart');
      await h.answer('a1', run.messageId, 'FULFILLED');
      assert.equal(h.task('r').state, 'COMPLETED');
      assert.equal(h.task('q2').state, 'DISPATCHED', 'then the queue in order');
    });

    it('a task restored on an agent no longer registered ends FAILED at start', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 'orphan' });
      h.coordinator.scheduler.dispose();
      h.registry.deregister('a1', 'gone while the scheduler was down', ctx());
      h.restart();
      assert.equal(h.task('orphan').state, 'FAILED');
      assert.equal(h.task('orphan').errorCode, 'AGENT_UNAVAILABLE');
    });

    it('re-arms a preemption deadline from the stored time', async () => {
      h.agent('a1');
      h.submitted('a1', 5, { taskId: 'low' });
      const run = h.command('a1', 'run');
      await h.answer('a1', run.messageId, 'RECEIVED');
      h.submitted('a1', 0, { taskId: 'high' });
      h.command('a1', 'preempt_request');
      await h.advance(MAX_NP / 2);
      h.restart();
      h.reconnect('a1');
      h.registry.heartbeat('a1', 'RUNNING', {}, ctx('hb'));
      await h.advance(MAX_NP / 2 - 1);
      assert.deepEqual(
        h.commands('a1').map((c) => c.command.command),
        [],
      );
      await h.advance(1);
      assert.deepEqual(
        h.commands('a1').map((c) => c.command.command),
        ['terminate'],
      );
    });
  });

  describe('the gate is given the running-task index, not every running task', () => {
    it('with 40 busy agents, mayStart sees a count per type and only the running tasks of the same repository or resource', async () => {
      for (let i = 0; i < 40; i++) {
        h.agent(`a${i}`);
        h.submitted(`a${i}`, 0, { taskId: `run-${i}`, scope: i === 7 ? 'repo:r7/src, resource:db' : `repo:r${i}/src` });
      }
      await settle();
      const asked: Array<{ taskId: string; overlap: string[]; coders: number }> = [];
      const gate = h.coordinator.concurrency;
      const original = gate.mayStart.bind(gate);
      gate.mayStart = (task, agentType, running, callCtx) => {
        asked.push({
          taskId: task.taskId,
          overlap: running.mayOverlap(task.scope).map((t) => t.taskId),
          coders: running.countOfType('coder', task.taskId),
        });
        return original(task, agentType, running, callCtx);
      };
      h.agent('free');
      h.submitted('type:coder', 0, { taskId: 'next', scope: 'repo:other/x, resource:db' });
      await settle();
      const seen = asked.find((a) => a.taskId === 'next');
      assert.ok(seen, 'the gate was asked about the new task');
      assert.deepEqual(seen.overlap, ['run-7'], 'only the task sharing the resource db');
      assert.equal(seen.coders, 40);
    });
  });
});
