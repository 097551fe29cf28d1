import type { CallContext } from '../context';
import type { Guard } from '../kernel/guard';
import type { Transition, Transitions } from '../kernel/transitions';
import type { EventRecorder } from '../log/model';
import { step } from './delivery';
import type { Ends } from './ends';
import { ACTOR, type Journal } from './journal';
import type { NegotiationRecord, NegotiationRepository, RoundRecord } from './model';
import { engineScored, noteBest } from './state';

/** The reasoning proxy (InferenceEngine): asked only when an engine agent is online and llm_weight > 0. */
export interface DebateInference {
  engineAgent(): string | undefined;
  evaluateDebate(
    request: { negotiationId: string; proposalA: string; proposalB: string; intensity: string },
    ctx: CallContext,
  ): Promise<{ confidence: number; notes: string }>;
}

export interface DebateEngineDeps {
  readonly store: { readonly negotiation: NegotiationRepository };
  readonly transitions: Transitions;
  readonly log: EventRecorder;
  readonly guard: Guard;
  readonly inference: DebateInference;
  readonly journal: Journal;
  readonly ends: Pick<Ends, 'judge'>;
  readonly settle: (rec: NegotiationRecord, tx: Transition) => void;
}

/**
 * The inference engine's part of a score: a fully evaluated round asked about (vN-1 against vN), its answer blended in
 * and the round judged; a failure, no engine (any more) or a later round leaves the deterministic score standing.
 */
export class DebateEngine {
  constructor(private readonly deps: DebateEngineDeps) {}

  ask(rec: NegotiationRecord, round: RoundRecord, ctx: CallContext): void {
    // No engine (e.g. none registered again after a restart): the round is judged on its deterministic score; a built-in
    // heuristic's answer is never recorded as the engine's.
    if (this.deps.inference.engineAgent() === undefined) {
      this.answered(
        rec.id,
        round.n,
        null,
        'no inference engine is registered (any more): the deterministic score stands',
        ctx,
      );
      return;
    }
    const rounds = this.deps.store.negotiation.rounds(rec.id);
    const previous = rounds.find((r) => r.n === round.n - 1);
    let answer: Promise<{ confidence: number; notes: string }>;
    try {
      answer = this.deps.inference.evaluateDebate(
        {
          negotiationId: rec.id,
          proposalA: previous ? previous.payload.toString('utf8') : '',
          proposalB: round.payload.toString('utf8'),
          intensity: rec.intensity,
        },
        ctx,
      );
    } catch (err) {
      answer = Promise.reject(err);
    }
    answer
      .then(
        (verdict) => this.answered(rec.id, round.n, verdict.confidence, verdict.notes, ctx),
        (err: unknown) =>
          this.answered(
            rec.id,
            round.n,
            null,
            `the inference engine failed: ${err instanceof Error ? err.message : String(err)}`,
            ctx,
          ),
      )
      .catch((err: unknown) => this.deps.log.internalError(ACTOR, rec.id, err));
  }

  /** The engine's answer (null: none) for round `n`, if it is still the pending current round of an open debate. */
  private answered(id: string, n: number, confidence: number | null, notes: string, ctx: CallContext): void {
    if (this.deps.guard.isStopped) return;
    const { negotiation } = this.deps.store;
    const rec = negotiation.get(id);
    if (!rec || rec.state !== 'open') return;
    const current = negotiation.rounds(id).at(-1);
    if (!current || current.n !== n || current.llm !== 'pending') return;
    const round = engineScored(rec, current, confidence, notes);
    this.deps.transitions.run((tx) => {
      negotiation.putRound(round);
      noteBest(rec, negotiation.rounds(rec.id), round);
      this.deps.journal.record(
        rec,
        'negotiation.scored',
        {
          round: n,
          deterministic_score: round.deterministicScore,
          llm_confidence: round.llmConfidence,
          llm_weight: rec.effective.policy.scoring.llmWeight,
          score: round.score,
          llm: round.llm,
          notes: round.llmNotes || undefined,
        },
        ctx,
        round.llm === 'answered' ? 'INFO' : 'WARN',
      );
      this.deps.ends.judge(rec, round, step(ctx, tx, false));
      negotiation.put(rec);
      this.deps.settle(rec, tx);
    }, rec.id);
  }
}
