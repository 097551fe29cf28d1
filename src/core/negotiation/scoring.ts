import type { RoundEvaluation, RoundRecord } from './model';

/** Tokens of a proposal, as the budgets count them: ⌈bytes / 4⌉ (README, "Debates"). */
export function tokensOf(payload: Uint8Array): number {
  return Math.ceil(payload.byteLength / 4);
}

/** A score as kept: a finite number in [0, 1] (NaN and absent → 0). */
export function clampScore(x: number): number {
  return Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0;
}

/** The deterministic score of a round: the mean of its evaluations' scores, null while none. */
export function deterministicScore(evaluations: readonly RoundEvaluation[]): number | null {
  if (evaluations.length === 0) return null;
  return evaluations.reduce((sum, e) => sum + e.score, 0) / evaluations.length;
}

/**
 * The mean of the reports' llm_confidence (only reports that gave one), null when none did: an EvaluationReport may bring
 * its own inference confidence, used when the coordinator's engine is not asked.
 */
export function reportedConfidence(evaluations: readonly RoundEvaluation[]): number | null {
  const given = evaluations.filter((e) => e.llmConfidence !== null).map((e) => e.llmConfidence as number);
  return given.length === 0 ? null : given.reduce((a, b) => a + b, 0) / given.length;
}

/** RFC §17.3: deterministic first, then `(1 - w)·det + w·llm` when an inference confidence is there. */
export function blend(det: number, llm: number | null, llmWeight: number): number {
  if (llm === null || llmWeight <= 0) return clampScore(det);
  const w = Math.min(1, llmWeight);
  return clampScore((1 - w) * det + w * llm);
}

/** The best-scored round (highest score; the later one on a tie), or undefined when no round has a score. */
export function bestRound(rounds: readonly RoundRecord[]): RoundRecord | undefined {
  let best: RoundRecord | undefined;
  for (const r of rounds) {
    if (r.score === null) continue;
    if (!best || r.score >= (best.score ?? -1)) best = r;
  }
  return best;
}
