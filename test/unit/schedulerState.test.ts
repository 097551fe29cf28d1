import { strict as assert } from 'node:assert';
import { classify } from '../../src/core/kernel/errors';
import type { TaskRecord } from '../../src/core/scheduler/model';
import { SchedulerError } from '../../src/core/scheduler/scheduler';
import {
  MAX_WITHDRAWN_DISPATCHES,
  agentFailureCode,
  declaredSection,
  dispatched,
  doneWay,
  ended,
  leftCode,
  msUntilDeadline,
  nonPreemptible,
  notStarted,
  preempting,
  queuedTask,
  requeued,
  sameWaiting,
  settled,
  started,
  targetType,
  terminateSent,
  terminateUnsent,
  waitingAtSubmit,
  waitingFor,
  withdrawWay,
  withdrawnOnce,
  withdrawnTooOften,
} from '../../src/core/scheduler/state';

const SCOPE = { repoId: 'r1', worktreeId: '', paths: ['src/**'], resources: [] };

/** A fresh QUEUED task at t=1000, frozen so that a transition changing its argument throws. */
function task(overrides: Partial<Parameters<typeof queuedTask>[0]> = {}): TaskRecord {
  return Object.freeze(
    queuedTask(
      {
        taskId: 't1',
        target: 'a1',
        priority: 0,
        seq: 7,
        params: Buffer.from('{}'),
        contentType: 'application/json',
        scopeText: 'repo:r1/src/**',
        scope: SCOPE,
        jobKey: 'job',
        submittedBy: 'operator',
        ...overrides,
      },
      1000,
    ),
  ) as TaskRecord;
}

describe('scheduler state (the pure task transitions, no store)', () => {
  it('a new task is QUEUED, never dispatched, with its arrival seq and time', () => {
    const t = task();
    assert.equal(t.state, 'QUEUED');
    assert.equal(t.seq, 7);
    assert.equal(t.submittedAt, 1000);
    assert.equal(t.updatedAt, 1000);
    assert.deepEqual(
      [t.assignedAgentId, t.runMessageId, t.dispatches, t.withdrawals, t.deadline, t.startedAt, t.endedAt],
      ['', '', 0, 0, null, null, null],
    );
  });

  it('QUEUED → DISPATCHED → RUNNING → PREEMPTING → back to QUEUED keeps its priority, seq and counts, and leaves each record as it was', () => {
    const q = task();
    const d = Object.freeze(dispatched(q, 'a1', 'coder', 'm-run', 2000));
    assert.deepEqual(
      [d.state, d.assignedAgentId, d.agentType, d.runMessageId, d.dispatches, d.waiting, d.updatedAt],
      ['DISPATCHED', 'a1', 'coder', 'm-run', 1, null, 2000],
    );
    assert.equal(q.state, 'QUEUED', 'the argument is left as it is');
    const r = Object.freeze(started(d, 3000));
    assert.deepEqual([r.state, r.startedAt], ['RUNNING', 3000]);
    assert.equal(
      started({ ...r, state: 'DISPATCHED' }, 9000).startedAt,
      3000,
      'a second start keeps the first start time',
    );
    const p = Object.freeze(preempting(r, 'm-pre', 'urgent', 3000 + 300_000, 3000));
    assert.deepEqual(
      [p.state, p.preemptMessageId, p.preemptedBy, p.deadline],
      ['PREEMPTING', 'm-pre', 'urgent', 303_000],
    );
    const n = nonPreemptible(p, 5000, 4000);
    assert.deepEqual([n.nonPreemptibleUntil, n.deadline, n.state], [9000, 9000, 'PREEMPTING']);
    const back = requeued(n, { kind: 'preempted', byTaskId: 'urgent' }, 5000);
    assert.equal(back.state, 'QUEUED');
    assert.deepEqual(back.waiting, { kind: 'preempted', byTaskId: 'urgent' });
    assert.deepEqual(
      [
        back.runMessageId,
        back.preemptMessageId,
        back.terminateMessageId,
        back.preemptedBy,
        back.nonPreemptibleUntil,
        back.deadline,
        back.assignedAgentId,
        back.agentType,
      ],
      ['', '', '', '', null, null, '', ''],
    );
    assert.deepEqual(
      [back.priority, back.seq, back.dispatches, back.startedAt],
      [0, 7, 1, 3000],
      'priority, seq, dispatches and the first start stay',
    );
  });

  it('a withdrawn dispatch counts; MAX_WITHDRAWN_DISPATCHES of them end the task', () => {
    let t = task();
    for (let i = 1; i < MAX_WITHDRAWN_DISPATCHES; i++) {
      t = withdrawnOnce(t);
      assert.equal(withdrawnTooOften(t), false, `after ${i}`);
    }
    t = withdrawnOnce(t);
    assert.equal(t.withdrawals, MAX_WITHDRAWN_DISPATCHES);
    assert.equal(withdrawnTooOften(t), true);
  });

  it('ended: only a completed task keeps a result, only one that did not complete an error code; the note is bounded', () => {
    const r = started(dispatched(task(), 'a1', 'coder', 'm', 2000), 2500);
    const done = ended({ ...r, deadline: 99 }, 'COMPLETED', 'ignored', 'ok', '{"v":1}', 3000);
    assert.deepEqual(
      [done.state, done.errorCode, done.result, done.endedAt, done.deadline, done.waiting],
      ['COMPLETED', '', '{"v":1}', 3000, null, null],
    );
    const failed = ended(r, 'FAILED', 'forced_preemption', 'x'.repeat(5000), '{"v":1}', 3000);
    assert.deepEqual(
      [failed.state, failed.errorCode, failed.result, failed.note.length],
      ['FAILED', 'forced_preemption', '', 4096],
    );
    assert.equal(ended(task(), 'CANCELLED', 'cancelled', 'not needed', '', 3000).errorCode, 'cancelled');
  });

  it('terminate: sent arms a deadline and is stored; unsent ends at once in memory, its updatedAt kept; settled clears the deadline', () => {
    const c = ended(dispatched(task(), 'a1', 'coder', 'm', 2000), 'CANCELLED', 'cancelled', '', '', 3000);
    const sent = terminateSent(c, 'm-term', 6000, 3000);
    assert.deepEqual([sent.terminateMessageId, sent.deadline, sent.updatedAt], ['m-term', 6000, 3000]);
    const unsent = terminateUnsent({ ...c, updatedAt: 42 }, 3000);
    assert.deepEqual([unsent.terminateMessageId, unsent.deadline, unsent.updatedAt], ['unsent', 3000, 42]);
    assert.equal(settled(sent).deadline, null);
    assert.equal(msUntilDeadline(sent, 4000), 2000);
    assert.equal(msUntilDeadline(sent, 7000), 0, 'a deadline past is due at once');
    assert.equal(msUntilDeadline(settled(sent), 4000), undefined);
  });

  it('the waiting reason at submission follows what is known of the target', () => {
    assert.deepEqual(
      waitingAtSubmit('type:coder', { idleOfType: 0, busy: false, agentState: undefined, idle: false }),
      { kind: 'no_agent_of_type', agentType: 'coder' },
    );
    assert.equal(
      waitingAtSubmit('type:coder', { idleOfType: 2, busy: false, agentState: undefined, idle: false }),
      null,
    );
    assert.deepEqual(waitingAtSubmit('a1', { idleOfType: 0, busy: true, agentState: 'RUNNING', idle: false }), {
      kind: 'agent_busy',
      agentId: 'a1',
    });
    assert.deepEqual(waitingAtSubmit('a1', { idleOfType: 0, busy: false, agentState: 'INITIALIZING', idle: false }), {
      kind: 'agent_not_runnable',
      agentId: 'a1',
      state: 'INITIALIZING',
    });
    assert.equal(waitingAtSubmit('a1', { idleOfType: 0, busy: false, agentState: 'RUNNABLE', idle: true }), null);
    const w = waitingFor(task(), { kind: 'serialised_after', taskId: 't0' }, 5000);
    assert.deepEqual([w.waiting, w.updatedAt], [{ kind: 'serialised_after', taskId: 't0' }, 5000]);
    assert.equal(sameWaiting({ kind: 'agent_busy', agentId: 'a1' }, { kind: 'agent_busy', agentId: 'a1' }), true);
    assert.equal(sameWaiting({ kind: 'agent_busy', agentId: 'a1' }, null), false);
  });

  it('reads the ACK note of a non-preemptible section and the target type', () => {
    assert.equal(declaredSection('non_preemptible:1500'), 1500);
    assert.equal(declaredSection('non_preemptible:'), undefined);
    assert.equal(declaredSection('yielded'), undefined);
    assert.equal(targetType('type:coder'), 'coder');
    assert.equal(targetType('a1'), undefined);
  });

  it('the agent’s way after its task, and the code a task ends with when its agent leaves', () => {
    assert.deepEqual(doneWay('RUNNING'), ['COMPLETED', 'RUNNABLE']);
    assert.deepEqual(doneWay('RUNNABLE'), ['RUNNABLE']);
    assert.deepEqual(withdrawWay('SCHEDULED'), ['RUNNABLE']);
    assert.deepEqual(withdrawWay('RESUMED'), ['SUSPENDED']);
    assert.deepEqual(withdrawWay('RUNNING'), ['COMPLETED', 'RUNNABLE']);
    assert.equal(notStarted('SCHEDULED'), true);
    assert.equal(notStarted('RUNNING'), false);
    assert.equal(agentFailureCode('no such state'), undefined);
    assert.equal(leftCode('heartbeat timeout', false), 'AGENT_UNAVAILABLE');
    assert.equal(leftCode('heartbeat timeout', true), 'agent_shutdown');
    assert.equal(leftCode('shut down', false), 'agent_shutdown');
    assert.equal(leftCode('agent_shutdown_timeout after 30000 ms', true), 'agent_shutdown_timeout');
  });
});

describe('SchedulerError (a SwarmError)', () => {
  it('has the kind and SW4RM code SchedulerService answered, and keeps its own fields', () => {
    const cases: Array<[SchedulerError, string, string]> = [
      [new SchedulerError('not_found', 'no task'), 'not_found', 'NO_ROUTE'],
      [new SchedulerError('refused', 'ended'), 'precondition', 'VALIDATION_ERROR'],
      [new SchedulerError('invalid', 'bad'), 'invalid', 'VALIDATION_ERROR'],
      [new SchedulerError('invalid', 'bad limit', 'OVERSIZE_PAYLOAD'), 'invalid', 'OVERSIZE_PAYLOAD'],
    ];
    for (const [err, kind, code] of cases) {
      assert.deepEqual([err.errorKind, err.errorCode], [kind, code], err.message);
      assert.deepEqual(classify(err), { kind, code, message: err.message });
      assert.equal(err.name, 'SchedulerError');
      assert.ok(err instanceof Error);
    }
    assert.equal(cases[3][0].code, 'invalid');
    assert.equal(cases[3][0].sw4rmCode, 'OVERSIZE_PAYLOAD');
  });
});
