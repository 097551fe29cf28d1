import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Guard } from '../kernel/guard';
import type { Transition, Transitions } from '../kernel/transitions';
import type { HitlInvocation, HitlInvocations } from '../hitl/model';
import type { EventRecorder } from '../log/model';
import type { Speaker } from '../policy/model';
import { hitlActionRefusal, speakerName } from './access';
import { LIMITS } from './checks';
import { step, type Step } from './delivery';
import type { Ends } from './ends';
import { ACTOR, type Journal } from './journal';
import type { NegotiationRecord, NegotiationRepository, StopReason } from './model';
import { hitlRequest, NEGOTIATION_HITL_COMPONENT } from './notices';
import { hitlOutcome, paused, resumed, type PauseWhy } from './state';

export interface HitlGateDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly transitions: Transitions;
  readonly clock: Clock;
  readonly log: EventRecorder;
  readonly guard: Guard;
  readonly hitl: Pick<HitlInvocations, 'open' | 'get' | 'cancel' | 'decide' | 'whenSettled'>;
  readonly journal: Journal;
  readonly ends: Pick<Ends, 'finish' | 'abort'>;
  /** The end of every transition of a debate: its timers and its change (negotiations.ts). */
  readonly settle: (rec: NegotiationRecord, tx: Transition) => void;
}

/**
 * A debate and a person: the HITL invocation a deadlock or a gate opens (the debate pauses), waiting for it to settle,
 * its answer applied (approve / modify / deny, a rule's or a fallback's recorded as such), a pending one withdrawn when
 * Decide or Abort ends the debate, and SchedulerPolicyService.HitlAction.
 */
export class HitlGate {
  /** The invocations waited on (negotiation, invocation): one waiter each. */
  private readonly waiting = new Set<string>();

  constructor(private readonly deps: HitlGateDeps) {}

  /** Opens the invocation and pauses the debate (the caller puts the record); none could be opened: aborted, as with no human. */
  pause(rec: NegotiationRecord, why: PauseWhy, stopReason: StopReason, s: Step): void {
    const request = hitlRequest(rec, this.deps.store.negotiation.rounds(rec.id), why, stopReason);
    let invocation: HitlInvocation;
    try {
      invocation = this.deps.hitl.open(
        request,
        { kind: 'internal', component: NEGOTIATION_HITL_COMPONENT },
        s.ctx,
      ).invocation;
    } catch (err) {
      // No invocation could be opened (e.g. too many pending): as with no human available, deny by default.
      this.deps.ends.abort(
        rec,
        `no HITL invocation could be opened: ${(err as Error).message}`,
        'hitl_unavailable',
        'coordinator',
        stopReason,
        s,
      );
      return;
    }
    paused(rec, invocation.id, why, stopReason);
    this.deps.journal.record(
      rec,
      'negotiation.paused',
      {
        why,
        stop_reason: stopReason,
        invocation_id: invocation.id,
        reason_type: request.reasonType,
        best_round: rec.bestRound,
      },
      s.ctx,
    );
    s.tx.after(() => this.waitFor(rec.id, invocation.id));
  }

  /** Applies the invocation's answer once it settles (one waiter per invocation). */
  waitFor(id: string, invocationId: string): void {
    const key = `${id}\u0000${invocationId}`;
    if (this.waiting.has(key)) return;
    this.waiting.add(key);
    this.deps.hitl.whenSettled(invocationId).then(
      (invocation) => {
        this.waiting.delete(key);
        this.apply(id, invocation);
      },
      (err: unknown) => {
        this.waiting.delete(key);
        if (!this.deps.guard.isStopped) this.deps.log.internalError(ACTOR, id, err);
      },
    );
  }

  /** A settled HITL invocation of a paused negotiation: approve / modify / deny, a rule's or a fallback's answer recorded as such. */
  apply(id: string, invocation: HitlInvocation): void {
    if (this.deps.guard.isStopped) return;
    const rec = this.deps.store.negotiation.get(id);
    if (!rec || rec.state !== 'paused' || rec.pending?.invocationId !== invocation.id || !invocation.decision) return;
    const pending = rec.pending;
    const decision = invocation.decision;
    const ctx: CallContext = { correlationId: rec.id };
    const now = this.deps.clock.now();
    try {
      this.deps.transitions.run((tx) => {
        const s = step(ctx, tx, false);
        rec.pending = null;
        const outcome = hitlOutcome(rec, pending, decision, this.deps.store.negotiation.rounds(rec.id), now);
        switch (outcome.kind) {
          case 'resume':
            resumed(rec, now);
            this.deps.journal.record(
              rec,
              'negotiation.resumed',
              {
                invocation_id: invocation.id,
                how: outcome.how,
                rationale: decision.rationale,
                fallback: outcome.fallback ?? undefined,
              },
              ctx,
            );
            this.deps.store.negotiation.put(rec);
            break;
          case 'decide':
            this.deps.ends.finish(rec, outcome.decision, outcome.by, s);
            break;
          case 'abort':
            this.deps.ends.abort(
              rec,
              outcome.reason,
              outcome.errorCode,
              outcome.by,
              outcome.stopReason,
              s,
              outcome.fallback,
            );
            break;
        }
        this.deps.settle(rec, tx);
      }, rec.id);
    } catch (err) {
      this.deps.log.internalError(ACTOR, rec.id, err);
    }
  }

  /** Decide or Abort while a HITL invocation waits: it is withdrawn. */
  cancelPending(id: string | undefined, by: string, why: string, ctx: CallContext): void {
    if (id === undefined) return;
    if (this.deps.hitl.get(id)?.state === 'pending') this.deps.hitl.cancel(id, by, `negotiation ${why}`, ctx);
  }

  /** SchedulerPolicyService.HitlAction: decides the pending HITL invocation of this negotiation (the operator only). */
  action(
    negotiationId: string,
    action: string,
    rationale: string,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly ok: boolean; readonly reason: string } {
    const rec = this.deps.store.negotiation.get(negotiationId);
    if (!rec)
      return { ok: false, reason: `NOT_FOUND: no negotiation '${negotiationId.slice(0, LIMITS.negotiation_id)}'` };
    const refusal = hitlActionRefusal(speaker);
    if (refusal) return { ok: false, reason: refusal };
    if (!rec.pending)
      return {
        ok: false,
        reason: `FAILED_PRECONDITION: negotiation '${negotiationId}' waits on no HITL invocation (state ${rec.state})`,
      };
    if (action.trim().toLowerCase() === 'modify') {
      return {
        ok: false,
        reason:
          'VALIDATION_ERROR: modify needs the payload the person gives: decide the invocation in the editor or through HitlService',
      };
    }
    try {
      this.deps.hitl.decide(rec.pending.invocationId, { action, rationale }, speakerName(speaker), ctx);
      return { ok: true, reason: '' };
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'FAILED_PRECONDITION';
      return { ok: false, reason: `${code}: ${(err as Error).message}` };
    }
  }
}
