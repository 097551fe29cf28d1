import {
  TERMINAL_HANDOFF_STATES,
  type HandoffAttempt,
  type HandoffBudget,
  type HandoffRecord,
  type HandoffState,
  type HandoffWorktree,
  type TransferredEntry,
} from './model';

/**
 * The handoff area's pure state: the open record, the transfers memory keeps, and every transition of a handoff as a
 * function over plain data (a draft: `draftOf`). No store, no timers, no emitters, no log: times come in as `now`.
 * The parts that decide (request.ts, accept.ts, …) apply these to a draft inside a transition (changes.ts) and write it.
 */

export const EMPTY = Buffer.alloc(0);

/** An in-memory record: everything but the context bytes (read from the store when needed). */
export type OpenRecord = HandoffRecord;
export type Ended = Extract<HandoffState, 'REJECTED' | 'EXPIRED' | 'CANCELLED' | 'COMPLETED'>;
/**
 * Why the current target is replaced: it rejected, its answer window passed, it left (deregistered or FAILED) — or the
 * agent that had accepted it left (the handoff went back to PENDING).
 */
export type Trigger = 'rejected' | 'expired' | 'left' | 'acceptor_left';
/** What a target became the target by, in an attempt. */
export type Via = NonNullable<HandoffAttempt['via']>;
/** What became of a worktree carry at the acceptance. */
export type CarryOutcome = Pick<HandoffWorktree, 'outcome' | 'detail' | 'invocationId'>;

export function withoutContext(record: HandoffRecord): OpenRecord {
  return { ...record, context: EMPTY };
}

/** A copy whose mutable parts (attempts, the worktree carry) are its own: a transaction changes the copy, never memory. */
export function draftOf(record: OpenRecord): OpenRecord {
  return {
    ...record,
    attempts: record.attempts.map((a) => ({ ...a })),
    worktree: record.worktree && { ...record.worktree },
  };
}

export function currentAttempt(record: HandoffRecord): HandoffAttempt | undefined {
  const last = record.attempts[record.attempts.length - 1];
  return last && last.outcome === '' ? last : undefined;
}

export function isOpen(record: HandoffRecord): boolean {
  return !TERMINAL_HANDOFF_STATES.has(record.state);
}

/** PENDING, offered to `agentId` and waiting for its answer (not for a person). */
export function waitsFor(record: HandoffRecord, agentId: string): boolean {
  return record.state === 'PENDING' && !record.awaitingOperator && record.toAgent === agentId;
}

/** Who carries an open handoff: its PENDING target or the agent that ACCEPTED it ('' for none). */
export function holderOf(record: HandoffRecord): string {
  return record.state === 'PENDING' ? record.toAgent : record.acceptedBy;
}

// ---------------------------------------------------------------- times

/** The budget's deadline: deadline_epoch_ms, or the request time plus wall_time_remaining_ms, whichever is sooner. */
export function deadlineOf(budget: HandoffBudget | null, requestedAt: number): number | null {
  if (!budget) return null;
  const candidates = [
    budget.deadlineEpochMs > 0 ? budget.deadlineEpochMs : Infinity,
    budget.wallTimeRemainingMs > 0 ? requestedAt + budget.wallTimeRemainingMs : Infinity,
  ];
  const deadline = Math.min(...candidates);
  return Number.isFinite(deadline) ? deadline : null;
}

/** When a wait that starts at `from` ends: the timeout from then, cut to the budget's deadline. */
export function expiryOf(record: HandoffRecord, from: number): number {
  const deadline = deadlineOf(record.budget, record.requestedAt);
  return deadline === null ? from + record.timeoutMs : Math.min(from + record.timeoutMs, deadline);
}

/**
 * When the current target (or the operator) must have answered: the target's answer window (`answerWindowMs` from when
 * it was offered the handoff) or, once that passed with nobody else to offer it to, the end of the requester's wait —
 * never past it. null when not PENDING. The handoff's timer is armed for it.
 */
export function answerBy(record: HandoffRecord, answerWindowMs: number): number | null {
  if (record.state !== 'PENDING' || record.expiresAt === null) return null;
  const attempt = currentAttempt(record);
  if (record.awaitingOperator || !attempt || attempt.windowEndedAt !== undefined) return record.expiresAt;
  return Math.min(attempt.at + answerWindowMs, record.expiresAt);
}

// ---------------------------------------------------------------- transitions (each changes a draft)

/** PENDING → ACCEPTED by `by`; the carry's outcome (null: nobody to bind, the operator). Answers the attempt that ended. */
export function accepted(
  draft: OpenRecord,
  by: string,
  now: number,
  carry: CarryOutcome | null,
): HandoffAttempt | undefined {
  const attempt = currentAttempt(draft);
  if (attempt) {
    attempt.outcome = 'accepted';
    attempt.endedAt = now;
  }
  draft.state = 'ACCEPTED';
  draft.acceptedBy = by;
  draft.awaitingOperator = false;
  draft.expiresAt = null;
  draft.updatedAt = now;
  if (draft.worktree)
    Object.assign(
      draft.worktree,
      carry ?? { outcome: 'not_applicable', detail: `accepted by ${by}: no agent to bind`, invocationId: '' },
    );
  return attempt;
}

/** The current target rejected (RejectHandoff's fields kept); what comes next is moveOn's. */
export function rejected(
  draft: OpenRecord,
  answer: { reason: string; code: string; retryAfterMs: number; redirectTo: string },
  now: number,
): HandoffAttempt {
  const attempt = currentAttempt(draft)!;
  attempt.outcome = 'rejected';
  attempt.reason = answer.reason;
  attempt.code = answer.code;
  attempt.endedAt = now;
  if (answer.retryAfterMs > 0) attempt.retryAfterMs = answer.retryAfterMs;
  if (answer.redirectTo !== '') attempt.redirectTo = answer.redirectTo;
  draft.rejectionReason = answer.reason;
  draft.rejectionCode = answer.code;
  return attempt;
}

/** Offered to the next target (a rejection followed by a redirect is `redirected`). Answers the previous attempt. */
export function rerouted(
  draft: OpenRecord,
  next: { agentId: string; via: Via },
  now: number,
): HandoffAttempt | undefined {
  const previous = draft.attempts[draft.attempts.length - 1];
  if (previous?.outcome === 'rejected' && next.via === 'redirect') previous.outcome = 'redirected';
  draft.attempts.push({
    agentId: next.agentId,
    at: now,
    outcome: '',
    reason: '',
    code: '',
    endedAt: null,
    via: next.via,
  });
  draft.toAgent = next.agentId;
  draft.updatedAt = now;
  return previous;
}

/** No agent can take it: it waits for a person. */
export function toOperator(draft: OpenRecord, now: number): void {
  draft.toAgent = '';
  draft.awaitingOperator = true;
  draft.updatedAt = now;
}

/** The handoff ends (REJECTED, EXPIRED, CANCELLED); `why` is kept as its end reason but for REJECTED. */
export function ended(draft: OpenRecord, state: Exclude<Ended, 'COMPLETED'>, why: string, now: number): void {
  draft.state = state;
  draft.expiresAt = null;
  draft.updatedAt = now;
  draft.endedAt = now;
  if (state !== 'REJECTED') draft.endReason = why.slice(0, 4096);
}

/** The current attempt's time ran out (the requester's wait or the target's window). */
export function attemptExpired(draft: OpenRecord, now: number): HandoffAttempt | undefined {
  const attempt = currentAttempt(draft);
  if (attempt) {
    attempt.outcome = 'expired';
    attempt.endedAt = now;
  }
  return attempt;
}

/** The target's window passed with nobody else to offer it to: the attempt goes on until the wait ends (windowEndedAt). */
export function keepsOffer(draft: OpenRecord, attempt: HandoffAttempt, now: number): void {
  attempt.outcome = '';
  attempt.endedAt = null;
  attempt.windowEndedAt = now;
  draft.updatedAt = now;
}

/** The current target left (deregistered or FAILED). */
export function targetLeft(draft: OpenRecord, why: string, now: number): HandoffAttempt {
  const attempt = currentAttempt(draft)!;
  attempt.outcome = 'left';
  attempt.reason = why.slice(0, 500);
  attempt.endedAt = now;
  return attempt;
}

/**
 * The accepting agent left: back to PENDING with a new wait (`timeout` from now), its attempt ends `left`, a carried
 * worktree is to be carried afresh into the next acceptor.
 */
export function backToPending(draft: OpenRecord, why: string, now: number): void {
  const acceptor = draft.acceptedBy;
  if (draft.worktree) Object.assign(draft.worktree, { outcome: '', detail: '', invocationId: '' });
  const accept = [...draft.attempts].reverse().find((a) => a.outcome === 'accepted' && a.agentId === acceptor);
  if (accept) {
    accept.outcome = 'left';
    accept.reason = why.slice(0, 500);
    accept.endedAt = now;
  }
  draft.state = 'PENDING';
  draft.acceptedBy = '';
  draft.expiresAt = expiryOf(draft, now);
  draft.updatedAt = now;
}

/** A carried worktree's pending switch was decided: `switched` or `switch_refused`. */
export function switchDecided(draft: OpenRecord, switched: boolean, detail: string, now: number): HandoffWorktree {
  const w = draft.worktree!;
  w.outcome = switched ? 'switched' : 'switch_refused';
  w.detail = detail;
  draft.updatedAt = now;
  return w;
}

/** ACCEPTED → COMPLETED by `party` (the work is transferred). */
export function completed(draft: OpenRecord, party: string, now: number): void {
  draft.state = 'COMPLETED';
  draft.completedBy = party;
  draft.updatedAt = now;
  draft.endedAt = now;
  const accept = draft.attempts.find((a) => a.outcome === 'accepted');
  if (accept) accept.outcome = 'completed';
}

/**
 * CancelDelegation's part before the end: the current attempt is `cancelled`, a pending switch `withdrawn`. Answers the
 * invocation of the switch to withdraw, if any.
 */
export function cancelling(draft: OpenRecord, now: number): string | undefined {
  const attempt = currentAttempt(draft);
  if (attempt) {
    attempt.outcome = 'cancelled';
    attempt.endedAt = now;
  }
  if (draft.worktree?.outcome !== 'switch_pending') return undefined;
  const invocationId = draft.worktree.invocationId;
  Object.assign(draft.worktree, {
    outcome: 'withdrawn',
    detail: `the switch into it (HITL WORKTREE_OVERRIDE ${invocationId}) was withdrawn: the handoff was cancelled`,
  });
  return invocationId;
}

/**
 * Whether the handoff may go to another agent now, as far as the record says (the requester's wait, the delegation
 * policy, the attempts, the budget's deadline), with why not; `waitLeft`: the requester still waits.
 */
export function rerouteLimits(
  record: HandoffRecord,
  now: number,
  maxAttempts: number,
  iso: (ms: number) => string,
): { readonly mayReroute: boolean; readonly waitLeft: boolean; readonly notes: string[] } {
  const policy = record.delegationPolicy;
  const deadline = deadlineOf(record.budget, record.requestedAt);
  const notes: string[] = [];
  let mayReroute = true;
  const waitLeft = (record.expiresAt === null || record.expiresAt > now) && (deadline === null || deadline > now);
  if (record.expiresAt !== null && record.expiresAt <= now) {
    mayReroute = false;
    notes.push(`the requester's wait ended at ${iso(record.expiresAt)}`);
  }
  if (policy && !policy.allowSpilloverRouting) {
    mayReroute = false;
    notes.push('delegation_policy.allow_spillover_routing is false');
  }
  if (record.attempts.length >= maxAttempts) {
    mayReroute = false;
    notes.push(`${maxAttempts} targets tried`);
  }
  if (deadline !== null && deadline <= now) {
    mayReroute = false;
    notes.push(`the budget's deadline ${iso(deadline)} passed`);
  }
  return { mayReroute, waitLeft, notes };
}

// ---------------------------------------------------------------- memory

export function transferKey(fromAgent: string, correlationId: string): string {
  return `${fromAgent}\u0000${correlationId}`;
}

export function transferRefusal(entry: TransferredEntry): string {
  return `handoff ${entry.requestId} completed: ${entry.acceptedBy} owns this work (correlation_id '${entry.correlationId}'; RFC §17.6: the origin may not act on it)`;
}

/**
 * What the area keeps in memory: the open (PENDING or ACCEPTED) handoffs by request id without their context bytes,
 * and the newest `maxTransfers` COMPLETED handoffs by (from_agent, correlation_id) for the router's refusal. Changed only
 * by the install effects of a transition (changes.ts), so it is always what the store committed.
 */
export class HandoffMemory {
  private readonly openById = new Map<string, OpenRecord>();
  /** By transfer key; `transferKeys` by request id, oldest first (eviction, retention). */
  private readonly transferred = new Map<string, TransferredEntry>();
  private readonly transferKeys = new Map<string, string>();
  /** More were ever completed than memory keeps: a miss asks the store. */
  private beyond = false;

  constructor(private readonly maxTransfers: number) {}

  get(requestId: string): OpenRecord | undefined {
    return this.openById.get(requestId);
  }

  has(requestId: string): boolean {
    return this.openById.has(requestId);
  }

  get size(): number {
    return this.openById.size;
  }

  records(): IterableIterator<OpenRecord> {
    return this.openById.values();
  }

  /** A committed record: an ended one leaves memory, an open one replaces its memory record (without its context). */
  apply(record: HandoffRecord): void {
    if (isOpen(record)) this.openById.set(record.requestId, withoutContext(record));
    else this.openById.delete(record.requestId);
  }

  remove(requestId: string): void {
    this.openById.delete(requestId);
  }

  /** PENDING handoffs offered to `agentId` (waiting for its answer). */
  waitingFor(agentId: string): number {
    let n = 0;
    for (const r of this.openById.values()) if (waitsFor(r, agentId)) n++;
    return n;
  }

  /** Handoffs an agent is the PENDING target of or has ACCEPTED. */
  loadOf(agentId: string): number {
    let n = 0;
    for (const r of this.openById.values()) if (holderOf(r) === agentId) n++;
    return n;
  }

  /** Every agent's load and waiting count in one pass over the open handoffs (not one per agent). */
  loads(): { readonly carried: ReadonlyMap<string, number>; readonly waiting: ReadonlyMap<string, number> } {
    const carried = new Map<string, number>();
    const waiting = new Map<string, number>();
    for (const r of this.openById.values()) {
      const holder = holderOf(r);
      if (holder !== '') carried.set(holder, (carried.get(holder) ?? 0) + 1);
      if (r.state === 'PENDING' && holder !== '' && !r.awaitingOperator)
        waiting.set(holder, (waiting.get(holder) ?? 0) + 1);
    }
    return { carried, waiting };
  }

  /** Open handoffs `fromAgent` requested. */
  openOf(fromAgent: string): number {
    let n = 0;
    for (const r of this.openById.values()) if (r.fromAgent === fromAgent) n++;
    return n;
  }

  /** The PENDING handoffs waiting for `agentId`'s answer, in the order they were opened. */
  waitingList(agentId: string): OpenRecord[] {
    return [...this.openById.values()].filter((r) => waitsFor(r, agentId));
  }

  /** The PENDING handoffs waiting for `agentId`'s answer, by priority (-19 first), then age, then request id. */
  pendingFor(agentId: string): OpenRecord[] {
    return this.waitingList(agentId).sort(
      (a, b) => a.priority - b.priority || a.requestedAt - b.requestedAt || (a.requestId < b.requestId ? -1 : 1),
    );
  }

  // transfers

  get transfersHeld(): number {
    return this.transferred.size;
  }

  get beyondMemory(): boolean {
    return this.beyond;
  }

  set beyondMemory(value: boolean) {
    this.beyond = value;
  }

  transfer(fromAgent: string, correlationId: string): TransferredEntry | undefined {
    return this.transferred.get(transferKey(fromAgent, correlationId));
  }

  /** A completed transfer into memory; beyond `maxTransfers` the oldest leaves it (and misses ask the store from then on). */
  addTransfer(entry: TransferredEntry): void {
    const k = transferKey(entry.fromAgent, entry.correlationId);
    this.transferred.set(k, entry);
    this.transferKeys.delete(entry.requestId);
    this.transferKeys.set(entry.requestId, k);
    while (this.transferKeys.size > this.maxTransfers) {
      const oldest = this.transferKeys.keys().next().value!;
      this.dropTransfer(oldest);
      this.beyond = true;
    }
  }

  dropTransfer(requestId: string): void {
    const k = this.transferKeys.get(requestId);
    if (k !== undefined && this.transferred.get(k)?.requestId === requestId) this.transferred.delete(k);
    this.transferKeys.delete(requestId);
  }
}
