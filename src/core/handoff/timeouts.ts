import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import type { Guard } from '../kernel/guard';
import type { EventRecorder } from '../log/model';
import { ACTOR, type HandoffChanges } from './changes';
import type { HandoffRepository } from './model';
import type { MoveOn } from './moveOn';
import { EXPIRY_RETRY_MS } from './options';
import { attemptExpired, deadlineOf, keepsOffer, type HandoffMemory, type OpenRecord } from './state';

export interface TimeoutDeps {
  readonly clock: Clock;
  readonly log: EventRecorder;
  readonly guard: Guard;
  readonly handoffs: Pick<HandoffRepository, 'put'>;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  readonly moveOn: MoveOn;
  readonly answerBy: (record: OpenRecord) => number | null;
  /** HandoffOptions.answerWindowMs (named in the event). */
  readonly answerWindowMs: number;
}

/** When time runs out: the requester's wait (EXPIRED) or the current target's answer window (the next candidate). */
export class HandoffTimeouts {
  constructor(private readonly deps: TimeoutDeps) {}

  /** A timer fired: the timeout decided; when its transaction fails (rolled back: memory is untouched) it is tried again a moment later. */
  timeUp(requestId: string): void {
    const { guard, memory, changes } = this.deps;
    if (guard.isStopped) return;
    try {
      this.expire(requestId);
    } catch (err) {
      this.deps.log.internalError(ACTOR, memory.get(requestId)?.correlationId ?? requestId, err, {
        during: 'timeout',
        request_id: requestId,
        retry_in_ms: EXPIRY_RETRY_MS,
      });
      if (guard.isStopped || !memory.has(requestId)) return;
      changes.retry(requestId);
    }
  }

  /**
   * A time that has run out is decided before an answer is taken: with a real clock the timer's callback may still be
   * queued behind this call. Then the answer finds the handoff rerouted or ended (and is refused).
   */
  catchUp(requestId: string): void {
    const record = this.deps.memory.get(requestId);
    const due = record ? this.deps.answerBy(record) : null;
    if (due !== null && due <= this.deps.clock.now()) this.timeUp(requestId);
  }

  /**
   * The handoff's timer fired. The requester's wait ended: EXPIRED. Only the current target's answer window passed: the
   * next candidate, or — nobody else — the target keeps it until the wait ends (its attempt's windowEndedAt). Early: re-armed.
   */
  private expire(requestId: string): void {
    const { memory, changes, moveOn } = this.deps;
    const record = memory.get(requestId);
    const due = record ? this.deps.answerBy(record) : null;
    if (!record || due === null || record.expiresAt === null) return;
    const now = this.deps.clock.now();
    if (due > now) {
      changes.arm(record);
      return;
    }
    const ctx: CallContext = { correlationId: record.correlationId };
    if (record.expiresAt <= now) {
      changes.change(
        record,
        (draft) => {
          const attempt = attemptExpired(draft, now);
          const who = draft.awaitingOperator ? 'the operator' : `'${attempt?.agentId ?? ''}'`;
          const deadline = deadlineOf(draft.budget, draft.requestedAt);
          const cut = deadline !== null && deadline <= now ? `; the budget's deadline ${isoUtc(deadline)} passed` : '';
          moveOn.end(
            draft,
            'EXPIRED',
            ACTOR,
            `${who} did not answer in time: the requester's wait of ${draft.timeoutMs} ms ended at ${isoUtc(record.expiresAt!)}${cut}`,
            ctx,
            {
              trigger: 'expired',
              waited_for: draft.awaitingOperator ? 'operator' : (attempt?.agentId ?? ''),
              timeout_ms: draft.timeoutMs,
            },
          );
        },
        'timeout',
      );
      return;
    }
    // The target's answer window passed (the wait goes on).
    changes.change(
      record,
      (draft) => {
        const attempt = attemptExpired(draft, now)!;
        const details = { timed_out: attempt.agentId, answer_window_ms: this.deps.answerWindowMs };
        if (moveOn.next(draft, 'expired', ACTOR, ctx, details)) return;
        keepsOffer(draft, attempt, now);
        this.deps.handoffs.put(draft);
        changes.event(
          draft,
          ACTOR,
          'handoff.answer_window_ended',
          {
            ...details,
            to_agent: draft.toAgent,
            keeps_it_until: isoUtc(draft.expiresAt!),
            why: 'no other agent can be offered it now; the target may still answer',
          },
          'WARN',
        );
      },
      'timeout',
    );
  }
}
