import { strict as assert } from 'node:assert';
import type { HandoffRecord } from '../../src/core/handoff/model';
import {
  accepted,
  answerBy,
  attemptExpired,
  backToPending,
  cancelling,
  completed,
  currentAttempt,
  deadlineOf,
  draftOf,
  ended,
  expiryOf,
  HandoffMemory,
  keepsOffer,
  rejected,
  rerouted,
  rerouteLimits,
  switchDecided,
  targetLeft,
  toOperator,
  transferRefusal,
  withoutContext,
} from '../../src/core/handoff/state';

/**
 * The handoff area's pure state (src/core/handoff/state.ts): the record's transitions as functions over plain data and
 * the memory of open handoffs and transfers — no store, no clock, no timers: times are arguments.
 */
const T0 = 1_700_000_000_000;
const WINDOW = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

function pending(extra: Partial<HandoffRecord> = {}): HandoffRecord {
  return {
    requestId: 'h1',
    fromAgent: 'a',
    requestedTo: '',
    toAgent: 'b',
    reason: 'review',
    context: Buffer.from('{}'),
    contextBytes: 2,
    contextContentType: '',
    capabilitiesRequired: ['review'],
    priority: 0,
    timeoutMs: 300_000,
    budget: null,
    delegationPolicy: null,
    taskId: '',
    correlationId: 'c1',
    parentRequestId: '',
    carryWorktree: false,
    worktree: null,
    requestDigest: 'd',
    state: 'PENDING',
    awaitingOperator: false,
    attempts: [{ agentId: 'b', at: T0, outcome: '', reason: '', code: '', endedAt: null, via: 'capability' }],
    acceptedBy: '',
    rejectionReason: '',
    rejectionCode: '',
    endReason: '',
    completedBy: '',
    expiresAt: T0 + 300_000,
    requestedAt: T0,
    updatedAt: T0,
    endedAt: null,
    ...extra,
  };
}

const carried = () => ({ repoId: 'r', worktreeId: 'w', outcome: '' as const, detail: '', invocationId: '' });

describe('handoff state (pure: no store, no timers)', () => {
  it('draftOf: a draft has its own attempts and carry, so changing it leaves the memory record as it was', () => {
    const record = pending({ worktree: carried() });
    const draft = draftOf(record);
    accepted(draft, 'b', T0 + 5, { outcome: 'bound', detail: 'bound', invocationId: '' });
    assert.equal(record.state, 'PENDING');
    assert.equal(record.attempts[0].outcome, '');
    assert.equal(record.worktree!.outcome, '');
    assert.equal(draft.attempts[0].outcome, 'accepted');
    assert.equal(draft.worktree!.outcome, 'bound');
    assert.equal(withoutContext(record).context.byteLength, 0);
  });

  it("answerBy: the target's window, never past the wait; the wait once the window ended, for the operator, or with no attempt; null unless PENDING", () => {
    assert.equal(answerBy(pending(), WINDOW), T0 + WINDOW);
    assert.equal(answerBy(pending({ expiresAt: T0 + 10_000 }), WINDOW), T0 + 10_000);
    const ended = pending();
    ended.attempts[0].windowEndedAt = T0 + WINDOW;
    assert.equal(answerBy(ended, WINDOW), T0 + 300_000);
    assert.equal(answerBy(pending({ awaitingOperator: true, toAgent: '', attempts: [] }), WINDOW), T0 + 300_000);
    assert.equal(answerBy(pending({ state: 'ACCEPTED', expiresAt: null }), WINDOW), null);
  });

  it("deadlineOf / expiryOf: the budget's deadline (the sooner of deadline_epoch_ms and wall time) cuts the wait", () => {
    const budget = {
      tokenBudgetRemaining: 0,
      wallTimeRemainingMs: 50_000,
      deadlineEpochMs: T0 + 80_000,
      currentDepth: 0,
      maxDelegationDepth: 0,
    };
    assert.equal(deadlineOf(null, T0), null);
    assert.equal(deadlineOf({ ...budget, wallTimeRemainingMs: 0, deadlineEpochMs: 0 }, T0), null);
    assert.equal(deadlineOf(budget, T0), T0 + 50_000);
    assert.equal(deadlineOf({ ...budget, wallTimeRemainingMs: 0 }, T0), T0 + 80_000);
    assert.equal(expiryOf(pending(), T0 + 1_000), T0 + 301_000);
    assert.equal(expiryOf(pending({ budget }), T0 + 1_000), T0 + 50_000);
  });

  it('accepted: the attempt ends accepted, the wait is over; a carry with no agent to bind (the operator) is not_applicable', () => {
    const draft = draftOf(pending({ worktree: carried(), awaitingOperator: true }));
    const attempt = accepted(draft, 'operator:o', T0 + 7, null);
    assert.equal(attempt?.outcome, 'accepted');
    assert.equal(attempt?.endedAt, T0 + 7);
    assert.deepEqual(
      [draft.state, draft.acceptedBy, draft.awaitingOperator, draft.expiresAt, draft.updatedAt],
      ['ACCEPTED', 'operator:o', false, null, T0 + 7],
    );
    assert.deepEqual(draft.worktree, {
      ...carried(),
      outcome: 'not_applicable',
      detail: 'accepted by operator:o: no agent to bind',
      invocationId: '',
    });
  });

  it('rejected then rerouted: the reason, code, retry and redirect kept; a redirect followed marks the rejection redirected', () => {
    const draft = draftOf(pending());
    rejected(draft, { reason: 'busy', code: 'OVERLOADED', retryAfterMs: 500, redirectTo: 'c' }, T0 + 10);
    assert.deepEqual([draft.rejectionReason, draft.rejectionCode], ['busy', 'OVERLOADED']);
    assert.equal(currentAttempt(draft), undefined, 'no current attempt after the rejection');
    const previous = rerouted(draft, { agentId: 'c', via: 'redirect' }, T0 + 11);
    assert.equal(previous?.outcome, 'redirected');
    assert.equal(previous?.retryAfterMs, 500);
    assert.equal(previous?.redirectTo, 'c');
    assert.equal(draft.toAgent, 'c');
    assert.deepEqual(currentAttempt(draft), {
      agentId: 'c',
      at: T0 + 11,
      outcome: '',
      reason: '',
      code: '',
      endedAt: null,
      via: 'redirect',
    });

    const other = draftOf(pending());
    rejected(other, { reason: 'no', code: '', retryAfterMs: 0, redirectTo: '' }, T0 + 10);
    assert.equal(other.attempts[0].retryAfterMs, undefined);
    rerouted(other, { agentId: 'd', via: 'capability' }, T0 + 11);
    assert.equal(other.attempts[0].outcome, 'rejected', 'a capability reroute leaves the rejection as it was');
  });

  it('toOperator and ended: REJECTED keeps no end reason, EXPIRED and CANCELLED keep theirs (cut to 4096)', () => {
    const draft = draftOf(pending());
    toOperator(draft, T0 + 1);
    assert.deepEqual([draft.toAgent, draft.awaitingOperator], ['', true]);
    ended(draft, 'REJECTED', 'nobody', T0 + 2);
    assert.deepEqual([draft.state, draft.expiresAt, draft.endedAt, draft.endReason], ['REJECTED', null, T0 + 2, '']);
    const expired = draftOf(pending());
    ended(expired, 'EXPIRED', 'x'.repeat(5000), T0 + 3);
    assert.equal(expired.endReason.length, 4096);
  });

  it('attemptExpired then keepsOffer: the target whose window passed keeps the offer until the wait ends', () => {
    const draft = draftOf(pending());
    const attempt = attemptExpired(draft, T0 + WINDOW)!;
    assert.equal(attempt.outcome, 'expired');
    keepsOffer(draft, attempt, T0 + WINDOW);
    assert.deepEqual(currentAttempt(draft), { ...pending().attempts[0], windowEndedAt: T0 + WINDOW });
    assert.equal(answerBy(draft, WINDOW), draft.expiresAt);
  });

  it('targetLeft and backToPending: an acceptor that left sends it back to PENDING with a new wait and a fresh carry', () => {
    const left = draftOf(pending());
    assert.equal(targetLeft(left, 'left '.repeat(200), T0 + 1).reason.length, 500);
    const acceptedRecord = draftOf(
      pending({ worktree: { ...carried(), outcome: 'switch_pending', detail: 'asked', invocationId: 'inv' } }),
    );
    accepted(acceptedRecord, 'b', T0 + 5, { outcome: 'switch_pending', detail: 'asked', invocationId: 'inv' });
    const draft = draftOf(acceptedRecord);
    backToPending(draft, 'failed', T0 + 1_000);
    assert.deepEqual([draft.state, draft.acceptedBy, draft.expiresAt], ['PENDING', '', T0 + 1_000 + 300_000]);
    assert.deepEqual(
      [draft.attempts[0].outcome, draft.attempts[0].reason, draft.attempts[0].endedAt],
      ['left', 'failed', T0 + 1_000],
    );
    assert.deepEqual(draft.worktree, carried());
    assert.equal(acceptedRecord.state, 'ACCEPTED', 'the copy changed, not the record it was drafted from');
  });

  it('switchDecided, completed and cancelling', () => {
    const draft = draftOf(
      pending({ worktree: { ...carried(), outcome: 'switch_pending', detail: '', invocationId: 'inv' } }),
    );
    accepted(draft, 'b', T0, { outcome: 'switch_pending', detail: '', invocationId: 'inv' });
    assert.equal(switchDecided(draftOf(draft), true, 'works there', T0 + 1).outcome, 'switched');
    assert.equal(switchDecided(draftOf(draft), false, 'denied', T0 + 1).outcome, 'switch_refused');
    const done = draftOf(draft);
    completed(done, 'a', T0 + 2);
    assert.deepEqual(
      [done.state, done.completedBy, done.endedAt, done.attempts[0].outcome],
      ['COMPLETED', 'a', T0 + 2, 'completed'],
    );
    const cancelled = draftOf(draft);
    assert.equal(cancelling(cancelled, T0 + 3), 'inv');
    assert.equal(cancelled.worktree!.outcome, 'withdrawn');
    const plain = draftOf(pending());
    assert.equal(cancelling(plain, T0 + 3), undefined);
    assert.equal(plain.attempts[0].outcome, 'cancelled');
  });

  it("rerouteLimits: the wait, the policy, the attempts and the budget's deadline, each named", () => {
    assert.deepEqual(rerouteLimits(pending(), T0, 32, iso), { mayReroute: true, waitLeft: true, notes: [] });
    const policy = {
      maxRetriesOnOverloaded: 0,
      initialBackoffMs: 0,
      backoffMultiplier: 0,
      maxBackoffMs: 0,
      allowSpilloverRouting: false,
      maxRedirects: 0,
    };
    const limited = rerouteLimits(pending({ delegationPolicy: policy, expiresAt: T0 }), T0, 1, iso);
    assert.equal(limited.mayReroute, false);
    assert.equal(limited.waitLeft, false);
    assert.deepEqual(limited.notes, [
      `the requester's wait ended at ${iso(T0)}`,
      'delegation_policy.allow_spillover_routing is false',
      '1 targets tried',
    ]);
  });

  it('HandoffMemory: open records without context, counts per agent, the pending order, transfers evicted oldest first', () => {
    const memory = new HandoffMemory(2);
    memory.apply(pending({ requestId: 'h1', priority: 5, requestedAt: T0 }));
    memory.apply(pending({ requestId: 'h2', priority: -3, requestedAt: T0 + 1 }));
    memory.apply(pending({ requestId: 'h3', state: 'ACCEPTED', acceptedBy: 'b', expiresAt: null }));
    memory.apply(pending({ requestId: 'h4', awaitingOperator: true, toAgent: '' }));
    assert.equal(memory.size, 4);
    assert.equal(memory.get('h1')!.context.byteLength, 0);
    assert.deepEqual(
      memory.waitingList('b').map((r) => r.requestId),
      ['h1', 'h2'],
      'opened order',
    );
    assert.deepEqual(
      memory.pendingFor('b').map((r) => r.requestId),
      ['h2', 'h1'],
      'by priority',
    );
    assert.equal(memory.waitingFor('b'), 2);
    assert.equal(memory.loadOf('b'), 3);
    assert.deepEqual([...memory.loads().carried], [['b', 3]]);
    assert.deepEqual([...memory.loads().waiting], [['b', 2]]);
    assert.equal(memory.openOf('a'), 4);
    memory.apply(pending({ requestId: 'h1', state: 'EXPIRED' }));
    assert.equal(memory.has('h1'), false, 'an ended handoff leaves memory');

    assert.equal(memory.transfersHeld, 0);
    const entry = (n: number) => ({ requestId: `t${n}`, fromAgent: 'a', correlationId: `c${n}`, acceptedBy: 'b' });
    memory.addTransfer(entry(1));
    memory.addTransfer(entry(2));
    assert.equal(memory.beyondMemory, false);
    memory.addTransfer(entry(3));
    assert.equal(memory.transfersHeld, 2);
    assert.equal(memory.beyondMemory, true, 'once one was evicted, a miss asks the store');
    assert.equal(memory.transfer('a', 'c1'), undefined, 'the oldest left memory');
    assert.match(transferRefusal(memory.transfer('a', 'c3')!), /handoff t3 completed: b owns this work/);
    memory.dropTransfer('t2');
    assert.equal(memory.transfer('a', 'c2'), undefined);
    assert.equal(memory.transfersHeld, 1);
  });
});
