import type { Clock } from '../clock';
import type { PolicyReader, TieBreak } from '../policy/model';
import type { Delivery, Step } from './delivery';
import type { Journal } from './journal';
import type { NegotiationDecision, NegotiationRecord, NegotiationRepository, RoundRecord, StopReason } from './model';
import { abortArtifact, decisionArtifact } from './notices';
import { aborted, decided, policyVersionNumber, tieBreakOutcome, verdictOn, type PauseWhy } from './state';

export interface EndsDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly clock: Clock;
  readonly policies: Pick<PolicyReader, 'version' | 'current'>;
  readonly journal: Journal;
  readonly delivery: Pick<Delivery, 'fanout'>;
  /** A person decides: the HITL gate's pause (hitl.ts). */
  readonly pause: (rec: NegotiationRecord, why: PauseWhy, stopReason: StopReason, step: Step) => void;
}

/**
 * How a debate ends or stops to ask: acceptance once a round is fully evaluated, the stop rules' deadlock and its
 * tie-break, and the two ends (decided, aborted) with their log event, `decide` / `abort` event and decision artifact.
 * Each writes inside the caller's transition; the record is put.
 */
export class Ends {
  constructor(private readonly deps: EndsDeps) {}

  /** Every other participant evaluated `round` and its score is final: accept, pause, or stop on max_rounds. */
  judge(rec: NegotiationRecord, round: RoundRecord, step: Step): void {
    const verdict = verdictOn(rec, round, this.deps.clock.now());
    switch (verdict.kind) {
      case 'confirm':
        this.deps.pause(rec, 'final_accept', 'threshold_met', step);
        return;
      case 'accept':
        this.finish(rec, verdict.decision, 'coordinator', step);
        return;
      case 'stop':
        this.stop(rec, 'max_rounds', step);
        return;
      case 'pause':
        this.deps.pause(rec, 'pause_between_rounds', 'hitl', step);
        return;
      case 'continue':
        return;
    }
  }

  /** A stop without acceptance is a deadlock: the tie-break of the policy version the negotiation runs under. */
  stop(rec: NegotiationRecord, reason: StopReason, step: Step): void {
    const outcome = tieBreakOutcome(
      rec,
      reason,
      this.tieBreakOf(rec),
      () => this.deps.store.negotiation.rounds(rec.id),
      this.deps.clock.now(),
    );
    switch (outcome.kind) {
      case 'hitl':
        this.deps.pause(rec, 'deadlock', reason, step);
        return;
      case 'decide':
        this.finish(rec, outcome.decision, 'coordinator', step);
        return;
      case 'abort':
        this.abort(rec, outcome.reason, reason, 'coordinator', reason, step);
        return;
    }
  }

  finish(rec: NegotiationRecord, decision: NegotiationDecision, by: string, step: Step): void {
    decided(rec, decision);
    this.deps.journal.record(
      rec,
      'negotiation.decided',
      {
        decided_by: decision.decidedBy,
        by,
        round: decision.round,
        final_score: decision.finalScore,
        stop_reason: decision.stopReason,
        policy_version: decision.policyVersion,
        fallback: decision.fallback ?? undefined,
        content_type: decision.contentType,
        bytes: decision.result.byteLength,
      },
      step.ctx,
      decision.fallback ? 'WARN' : 'INFO',
    );
    this.deps.delivery.fanout(rec, { kind: 'decide' }, step);
    this.deps.journal.artifact(rec, 'decision', 'final', 'application/json', decisionArtifact(rec, decision), step.ctx);
    this.deps.store.negotiation.put(rec);
  }

  abort(
    rec: NegotiationRecord,
    reason: string,
    errorCode: string,
    by: string,
    stopReason: StopReason,
    step: Step,
    fallback: { readonly policy: string; readonly trigger: string } | null = null,
  ): void {
    aborted(rec, reason, errorCode, by, stopReason, fallback, this.deps.clock.now());
    this.deps.journal.record(
      rec,
      'negotiation.aborted',
      { reason, error_code: errorCode, by, stop_reason: stopReason, fallback: fallback ?? undefined },
      step.ctx,
      by === 'coordinator' || fallback ? 'WARN' : 'INFO',
    );
    this.deps.delivery.fanout(rec, { kind: 'abort' }, step);
    this.deps.journal.artifact(rec, 'decision', 'final', 'application/json', abortArtifact(rec), step.ctx);
    this.deps.store.negotiation.put(rec);
  }

  private tieBreakOf(rec: NegotiationRecord): TieBreak {
    const version = policyVersionNumber(rec);
    const set = Number.isFinite(version) ? this.deps.policies.version(version) : undefined;
    return (set ?? this.deps.policies.current()).tieBreak;
  }
}
