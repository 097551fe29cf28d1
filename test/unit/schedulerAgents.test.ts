import { strict as assert } from 'node:assert';
import { DEFAULT_SCHEDULER_OPTIONS } from '../../src/core/scheduler/model';
import { pathTo } from '../../src/core/registry/lifecycle';
import { SchedulerHarness } from '../support/schedulerHarness';
import { ctx, settle } from '../support/routerHarness';

const MAX_NP = DEFAULT_SCHEDULER_OPTIONS.maxNonPreemptibleMs;
const GRACE = DEFAULT_SCHEDULER_OPTIONS.terminateGraceMs;

describe('Scheduler: agents that re-register, fail or wander (RFC §8)', () => {
  let h: SchedulerHarness;

  beforeEach(() => {
    h = new SchedulerHarness();
  });

  afterEach(() => h.dispose());

  describe('an agent holding a slot in FAILED or INITIALIZING', () => {
    it('re-registered while running: its task ends FAILED AGENT_UNAVAILABLE, the slot is freed, the next task goes to it once RUNNABLE', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      h.submitted('a1', 0, { taskId: 't2' });
      const run = h.command('a1', 'run');
      await h.answer('a1', run.messageId, 'RECEIVED');
      assert.equal(h.task('t1').state, 'RUNNING');
      h.register('a1', { name: 'coder' });
      await settle();
      assert.equal(h.task('t1').state, 'FAILED');
      assert.equal(h.task('t1').errorCode, 'AGENT_UNAVAILABLE');
      assert.ok(h.registry.heartbeat('a1', 'RUNNABLE', {}, ctx('hb')));
      await settle();
      assert.equal(h.task('t2').state, 'DISPATCHED');
      assert.equal(h.task('t2').assignedAgentId, 'a1');
    });

    it('re-registered before it started its run: the task goes back to the queue and is dispatched again', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      h.commands('a1');
      h.register('a1', { name: 'coder' });
      await settle();
      assert.equal(h.task('t1').state, 'QUEUED');
      assert.ok(h.registry.heartbeat('a1', 'RUNNABLE', {}, ctx('hb')));
      await settle();
      assert.equal(h.task('t1').state, 'DISPATCHED');
      assert.equal(h.task('t1').dispatches, 2);
      assert.equal(h.command('a1', 'run').command.task_id, 't1');
    });

    it('FAILED mid-task (heartbeat FAILED): the task ends FAILED, the slot is freed; recovered, the agent takes work again', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'RECEIVED');
      assert.ok(h.registry.heartbeat('a1', 'FAILED', {}, ctx('hb')));
      await settle();
      assert.equal(h.agentState('a1'), 'FAILED_STATE');
      assert.equal(h.task('t1').state, 'FAILED');
      assert.equal(h.task('t1').errorCode, 'AGENT_UNAVAILABLE');
      h.submitted('a1', 0, { taskId: 't2' });
      assert.ok(h.registry.heartbeat('a1', 'RECOVERING', {}, ctx('hb')));
      assert.ok(h.registry.heartbeat('a1', 'RUNNABLE', {}, ctx('hb')));
      await settle();
      assert.equal(h.task('t2').state, 'DISPATCHED');
    });

    it('FAILED by resource_timeout: the task ends FAILED resource_timeout', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'RECEIVED');
      assert.ok(h.registry.heartbeat('a1', 'WAITING_RESOURCES', {}, ctx('hb')));
      await h.advance(300_001);
      assert.equal(h.agentState('a1'), 'FAILED_STATE');
      assert.equal(h.task('t1').state, 'FAILED');
      assert.equal(h.task('t1').errorCode, 'resource_timeout');
    });
  });

  describe('agent moves follow the lifecycle table', () => {
    it('pathTo walks the table and never through FAILED, RECOVERING or SHUTTING_DOWN on the way', () => {
      assert.deepEqual(pathTo('WAITING', 'FAILED'), ['RUNNING', 'FAILED_STATE']);
      assert.deepEqual(pathTo('SCHEDULED', 'FAILED_STATE'), ['RUNNING', 'FAILED_STATE']);
      assert.deepEqual(pathTo('SUSPENDED', 'RUNNABLE'), ['RESUMED', 'RUNNING', 'COMPLETED', 'RUNNABLE']);
      assert.deepEqual(pathTo('RESUMED', 'SUSPENDED'), ['RUNNING', 'SUSPENDED']);
      assert.deepEqual(pathTo('RUNNING', 'RUNNING'), []);
      assert.equal(pathTo('FAILED_STATE', 'RUNNABLE'), undefined);
    });

    it('forced preemption of an agent in WAITING: task FAILED forced_preemption, the agent FAILED (WAITING → RUNNING → FAILED)', async () => {
      h.agent('a1');
      h.submitted('a1', 5, { taskId: 'low' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'RECEIVED');
      assert.ok(h.registry.heartbeat('a1', 'WAITING', {}, ctx('hb')));
      h.submitted('a1', -5, { taskId: 'high' });
      h.command('a1', 'preempt_request');
      await h.advance(MAX_NP + 1);
      h.command('a1', 'terminate');
      await h.advance(GRACE + 1);
      assert.equal(h.task('low').state, 'FAILED');
      assert.equal(h.task('low').errorCode, 'forced_preemption');
      assert.equal(h.agentState('a1'), 'FAILED_STATE');
      assert.equal(h.events('task.agent_transition_refused').length, 0);
    });

    it('a task finished while the agent reported SUSPENDED: the agent walks back to RUNNABLE and takes the next task', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      h.submitted('a1', 0, { taskId: 't2' });
      const run = h.command('a1', 'run');
      await h.answer('a1', run.messageId, 'RECEIVED');
      assert.ok(h.registry.heartbeat('a1', 'SUSPENDED', {}, ctx('hb')));
      await h.answer('a1', run.messageId, 'FULFILLED');
      assert.equal(h.task('t1').state, 'COMPLETED');
      assert.equal(h.events('task.agent_transition_refused').length, 0);
      assert.equal(h.task('t2').state, 'DISPATCHED');
    });
  });

  describe('cancel and shutdown across a restart (store closed and reopened)', () => {
    it('a terminate FULFILLED for a task cancelled before the restart frees the agent, which takes the next task', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'RECEIVED');
      h.scheduler.cancel('t1', 'not needed', ctx());
      const term = h.command('a1', 'terminate');
      h.restart();
      h.reconnect('a1');
      h.submitted('a1', 0, { taskId: 't2' });
      assert.equal(h.task('t2').state, 'QUEUED', 'the agent is still busy with the cancelled task');
      await h.answer('a1', term.messageId, 'FULFILLED', { note: 'terminated' });
      assert.equal(h.task('t1').state, 'CANCELLED');
      assert.equal(h.task('t2').state, 'DISPATCHED');
      assert.equal(h.task('t1').deadline, null, 'nothing left to restore');
    });

    it('the cancel grace runs on from the stored deadline: past it the agent is FAILED forced_preemption', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 't1' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'RECEIVED');
      h.scheduler.cancel('t1', 'not needed', ctx());
      await h.advance(GRACE - 1_000);
      h.restart();
      h.reconnect('a1');
      await h.advance(999);
      assert.equal(h.agentState('a1'), 'RUNNING');
      await h.advance(1);
      assert.equal(h.agentState('a1'), 'FAILED_STATE');
      const failed = h.events('agent.state_changed').find((e) => e.details.to === 'FAILED_STATE');
      assert.equal(failed?.details.error_code, 'forced_preemption');
    });

    it('a shutdown FULFILLED after a restart deregisters the agent at once (shut down); its running task FAILED agent_shutdown', async () => {
      h.agent('a1');
      h.submitted('a1', 0, { taskId: 'run1' });
      await h.answer('a1', h.command('a1', 'run').messageId, 'RECEIVED');
      h.scheduler.shutdownAgent('a1', 30_000, 'maintenance', ctx());
      const down = h.command('a1', 'shutdown');
      assert.equal(down.correlationId, 'shutdown:a1');
      h.restart();
      h.reconnect('a1');
      await h.answer('a1', down.messageId, 'FULFILLED');
      await settle();
      assert.equal(h.registry.get('a1'), undefined, 'deregistered');
      assert.equal(h.task('run1').state, 'FAILED');
      assert.equal(h.task('run1').errorCode, 'agent_shutdown');
    });
  });
});

describe('Scheduler: tasks the gate holds', () => {
  let h: SchedulerHarness;

  beforeEach(() => {
    h = new SchedulerHarness();
  });

  afterEach(() => h.dispose());

  it('34 tasks held for a conflict decision do not block an unrelated task queued behind them', async () => {
    h.agent('a1');
    h.agent('a2');
    const first = h.submitted('a2', 0, { taskId: 'first', params: { job: 'migrate' }, scope: 'resource:db' });
    await settle();
    await h.answer('a2', h.command('a2', 'run').messageId, 'RECEIVED');
    assert.equal(h.task(first.taskId).state, 'RUNNING');
    for (let i = 0; i < 34; i++) {
      const held = h.submit('a1', 0, { taskId: `held-${i}`, params: { job: i }, scope: 'resource:db' });
      assert.ok(held.accepted, held.accepted ? '' : held.reason);
    }
    await settle();
    for (let i = 0; i < 34; i++) assert.equal(h.task(`held-${i}`).waiting?.kind, 'conflict_decision');
    h.submitted('a1', 5, { taskId: 'other', params: { job: 'cache' }, scope: 'resource:cache' });
    await settle();
    assert.equal(h.task('other').state, 'DISPATCHED');
    assert.equal(h.task('other').assignedAgentId, 'a1');
  });

  it('after a restart a duplicate still waiting is held again: denied, it ends FAILED DUPLICATE_DETECTED at once', async () => {
    h.agent('a1');
    h.submitted('a1', 0, { taskId: 'first', params: { job: 'same' } });
    const dup = h.submit('a1', 0, { taskId: 'dup', params: { job: 'same' } });
    const invocationId =
      dup.accepted && dup.task.waiting?.kind === 'conflict_decision' ? dup.task.waiting.invocationId : '';
    assert.notEqual(invocationId, '');
    h.restart();
    h.reconnect('a1');
    h.coordinator.hitl.decide(invocationId, { action: 'deny', rationale: 'not twice' }, 'editor:alice', ctx());
    await settle();
    assert.equal(h.task('dup').state, 'FAILED');
    assert.equal(h.task('dup').errorCode, 'DUPLICATE_DETECTED');
  });
});
