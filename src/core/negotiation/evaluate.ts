import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { FIELD_LIMITS } from '../fieldLimits';
import type { Transition, Transitions } from '../kernel/transitions';
import type { Speaker } from '../policy/model';
import { mustSpeakAs } from './access';
import { checkText, fail, LIMITS } from './checks';
import { step, type Delivery } from './delivery';
import type { DebateEngine, DebateInference } from './engine';
import type { Ends } from './ends';
import type { EvaluationInput, EvaluationReportInput } from './inputs';
import type { Journal } from './journal';
import type { NegotiationRecord, NegotiationRepository, RoundEvaluation } from './model';
import { scoreArtifact } from './notices';
import type { NegotiationReads } from './queries';
import { clampScore } from './scoring';
import { checkEvaluation, noteBest, withEvaluation } from './state';

export interface EvaluateDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly transitions: Transitions;
  readonly clock: Clock;
  readonly inference: Pick<DebateInference, 'engineAgent'>;
  readonly reads: Pick<NegotiationReads, 'known' | 'live'>;
  readonly journal: Journal;
  readonly delivery: Pick<Delivery, 'fanout'>;
  readonly ends: Pick<Ends, 'judge'>;
  readonly engine: Pick<DebateEngine, 'ask'>;
  readonly settle: (rec: NegotiationRecord, tx: Transition) => void;
}

/**
 * Evaluate and SubmitEvaluation: another participant's score of the current round (a report may bring its own
 * llm_confidence); once every other participant evaluated it, the engine is asked or the round judged.
 */
export class Evaluations {
  constructor(private readonly deps: EvaluateDeps) {}

  /** NegotiationService.Evaluate. */
  evaluate(input: EvaluationInput, speaker: Speaker, ctx: CallContext): void {
    if (!Number.isFinite(input.confidenceScore) || input.confidenceScore < 0 || input.confidenceScore > 1) {
      throw fail('invalid', 'VALIDATION_ERROR', `confidence_score must be in [0, 1], not ${input.confidenceScore}`);
    }
    this.evaluation(
      input.negotiationId,
      {
        from: input.fromAgent,
        score: input.confidenceScore,
        llmConfidence: null,
        notes: input.notes,
        source: 'evaluate',
        at: this.deps.clock.now(),
      },
      speaker,
      ctx,
    );
  }

  /** SchedulerPolicyService.SubmitEvaluation: an EvaluationReport counts as the agent's evaluation of the current round. */
  report(negotiationId: string, report: EvaluationReportInput, speaker: Speaker, ctx: CallContext): void {
    for (const [field, value] of [
      ['deterministic_score', report.deterministicScore],
      ['llm_confidence', report.llmConfidence],
    ] as const) {
      if (!Number.isFinite(value) || value < 0 || value > 1)
        throw fail('invalid', 'VALIDATION_ERROR', `report.${field} must be in [0, 1], not ${value}`);
    }
    this.evaluation(
      negotiationId,
      {
        from: report.fromAgent,
        score: report.deterministicScore,
        llmConfidence: report.llmConfidence > 0 ? report.llmConfidence : null,
        notes: report.notes,
        source: 'report',
        at: this.deps.clock.now(),
      },
      speaker,
      ctx,
    );
  }

  private evaluation(negotiationId: string, evaluation: RoundEvaluation, speaker: Speaker, ctx: CallContext): void {
    const { negotiation } = this.deps.store;
    // The same evaluation of the latest round again (a retry) is answered OK whatever the state (it may have ended it).
    const known = this.deps.reads.known(negotiationId);
    if (known) {
      mustSpeakAs(known, evaluation.from, speaker);
      const same = negotiation.latestRound(known.id)?.evaluations.find((e) => e.from === evaluation.from);
      if (
        same &&
        same.score === clampScore(evaluation.score) &&
        same.notes === evaluation.notes &&
        same.llmConfidence === evaluation.llmConfidence
      )
        return;
    }
    const rec = this.deps.reads.live(negotiationId, false);
    mustSpeakAs(rec, evaluation.from, speaker);
    checkText('notes', evaluation.notes, LIMITS.notes);
    const current = negotiation.rounds(rec.id).at(-1);
    checkEvaluation(rec, current, evaluation.from);
    const { round, complete, askEngine } = withEvaluation(
      rec,
      current,
      evaluation,
      () => this.deps.inference.engineAgent() !== undefined,
    );
    this.deps.transitions.run((tx) => {
      const s = step(ctx, tx, true);
      negotiation.putRound(round);
      noteBest(rec, negotiation.rounds(rec.id), round);
      this.deps.journal.record(
        rec,
        'negotiation.evaluated',
        {
          round: round.n,
          from: evaluation.from,
          source: evaluation.source,
          score: evaluation.score,
          deterministic_score: round.deterministicScore,
          score_now: round.score,
          complete,
          llm: round.llm,
        },
        ctx,
      );
      this.deps.delivery.fanout(rec, { kind: 'evaluate', round: round.n, from: evaluation.from }, s, round);
      this.deps.journal.artifact(
        rec,
        'score',
        `v${round.n}:${evaluation.from}`.slice(0, FIELD_LIMITS.activity.artifact_version),
        'application/json',
        scoreArtifact(rec, round, evaluation),
        ctx,
      );
      if (complete && !askEngine) this.deps.ends.judge(rec, round, s);
      negotiation.put(rec);
      if (askEngine) tx.after(() => this.deps.engine.ask(rec, round, ctx));
      this.deps.settle(rec, tx);
    }, rec.id);
  }
}
