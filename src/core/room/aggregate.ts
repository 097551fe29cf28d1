import type { RoomThresholds } from '../policy/model';
import type { AggregatedScore, ThresholdCheck } from './model';

/** What aggregation reads of a vote. */
export interface ScoredVote {
  readonly criticId: string;
  readonly score: number;
  readonly confidence: number;
  readonly passed: boolean;
  readonly recommendations: readonly string[];
}

/**
 * Comparisons against thresholds allow this much floating-point error: a confidence-weighted mean of 7, 7, 7 can come
 * out as 6.999999999999999, which must still meet a 7.0 threshold.
 */
export const THRESHOLD_EPSILON = 1e-9;

/**
 * A recommendation that contains the word "escalate" anywhere, in any case ("Please escalate to a human", "ESCALATE",
 * "Escalate: needs a security review") asks for a human. Other words do not: "escalated", "escalates", "escalation",
 * and "de-escalate" / "deescalate" (the word preceded by a letter, digit, _ or -).
 */
export const ESCALATION_REQUEST = /(?<![\w-])escalate\b/i;

/**
 * RFC §17.5 AggregatedScore (pure): arithmetic mean, min, max, population standard deviation (divided by n, not n − 1:
 * the votes are the whole population of requested critics), confidence-weighted mean Σ score·confidence / Σ confidence
 * (the plain mean when every confidence is 0: no vote outweighs another), and the count. No votes: all zero.
 */
export function aggregate(votes: readonly Pick<ScoredVote, 'score' | 'confidence'>[]): AggregatedScore {
  const n = votes.length;
  if (n === 0) return { mean: 0, minScore: 0, maxScore: 0, stdDev: 0, weightedMean: 0, voteCount: 0 };
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  let weighted = 0;
  let weights = 0;
  for (const v of votes) {
    sum += v.score;
    min = Math.min(min, v.score);
    max = Math.max(max, v.score);
    weighted += v.score * v.confidence;
    weights += v.confidence;
  }
  const mean = sum / n;
  let squares = 0;
  for (const v of votes) squares += (v.score - mean) ** 2;
  const stdDev = Math.sqrt(squares / n);
  const weightedMean = weights > 0 ? weighted / weights : mean;
  return { mean, minScore: min, maxScore: max, stdDev, weightedMean, voteCount: n };
}

/** The mean confidence of the votes (0 without votes). */
export function meanConfidence(votes: readonly Pick<ScoredVote, 'confidence'>[]): number {
  return votes.length === 0 ? 0 : votes.reduce((s, v) => s + v.confidence, 0) / votes.length;
}

/** The proportion of votes with passed = true (0 without votes). */
export function passRatio(votes: readonly Pick<ScoredVote, 'passed'>[]): number {
  return votes.length === 0 ? 0 : votes.filter((v) => v.passed).length / votes.length;
}

/**
 * The four RFC §17.5 auto-approval checks, each with its value and whether it passed: weighted_mean ≥
 * min_score_threshold, mean confidence ≥ min_confidence_threshold, pass ratio ≥ min_pass_ratio, std_dev ≤ max_std_dev.
 * Without votes every check fails.
 */
export function thresholdChecks(
  votes: readonly ScoredVote[],
  agg: AggregatedScore,
  t: RoomThresholds,
): ThresholdCheck[] {
  const none = votes.length === 0;
  const atLeast = (value: number, threshold: number) => !none && value >= threshold - THRESHOLD_EPSILON;
  const confidence = meanConfidence(votes);
  const ratio = passRatio(votes);
  return [
    {
      name: 'min_score_threshold',
      value: agg.weightedMean,
      threshold: t.minScoreThreshold,
      pass: atLeast(agg.weightedMean, t.minScoreThreshold),
    },
    {
      name: 'min_confidence_threshold',
      value: confidence,
      threshold: t.minConfidenceThreshold,
      pass: atLeast(confidence, t.minConfidenceThreshold),
    },
    { name: 'min_pass_ratio', value: ratio, threshold: t.minPassRatio, pass: atLeast(ratio, t.minPassRatio) },
    {
      name: 'max_std_dev',
      value: agg.stdDev,
      threshold: t.maxStdDev,
      pass: !none && agg.stdDev <= t.maxStdDev + THRESHOLD_EPSILON,
    },
  ];
}

/**
 * The RFC §17.5 auto-escalation conditions that hold, each as `<code>: <why>`: `low_confidence` (a vote's confidence
 * below escalateBelowConfidence, 0.3), `disagreement` (std_dev above escalateAboveStdDev, 3.0), `critic_requested` (a
 * recommendation containing the word "escalate"), `vote_timeout` (the vote timeout passed before every requested
 * critic voted; `missing` names who did not).
 */
export function escalationReasons(
  votes: readonly ScoredVote[],
  agg: AggregatedScore,
  t: RoomThresholds,
  missing: readonly string[],
): string[] {
  const reasons: string[] = [];
  const unsure = votes.filter((v) => v.confidence < t.escalateBelowConfidence - THRESHOLD_EPSILON);
  if (unsure.length > 0) {
    reasons.push(
      `low_confidence: ${unsure.map((v) => `${v.criticId} voted with confidence ${round(v.confidence)}`).join(', ')} (below ${t.escalateBelowConfidence})`,
    );
  }
  if (votes.length > 0 && agg.stdDev > t.escalateAboveStdDev + THRESHOLD_EPSILON) {
    reasons.push(`disagreement: the scores' standard deviation ${round(agg.stdDev)} is above ${t.escalateAboveStdDev}`);
  }
  const asking = votes.filter((v) => v.recommendations.some((r) => ESCALATION_REQUEST.test(r)));
  if (asking.length > 0)
    reasons.push(`critic_requested: ${asking.map((v) => v.criticId).join(', ')} recommended escalation`);
  if (missing.length > 0)
    reasons.push(`vote_timeout: the vote timeout passed without votes from ${missing.join(', ')}`);
  return reasons;
}

/** What the thresholds and escalation rules make of a revision's votes (before any human). */
export interface Verdict {
  readonly outcome: 'APPROVED' | 'REVISION_REQUESTED' | 'ESCALATED_TO_HITL';
  readonly aggregate: AggregatedScore;
  readonly checks: readonly ThresholdCheck[];
  /** The escalation conditions that held (empty unless escalated). */
  readonly escalation: readonly string[];
  readonly reason: string;
}

/**
 * The decision rule (pure): escalation first (any condition holds → ESCALATED_TO_HITL); else APPROVED when all four
 * checks pass and autoApprove is on; when they all pass but autoApprove is off, ESCALATED_TO_HITL (`approval_required`:
 * only a person can approve then); else REVISION_REQUESTED.
 */
export function verdict(votes: readonly ScoredVote[], t: RoomThresholds, missing: readonly string[]): Verdict {
  const agg = aggregate(votes);
  const checks = thresholdChecks(votes, agg, t);
  const escalation = escalationReasons(votes, agg, t, missing);
  const failed = checks.filter((c) => !c.pass);
  const summary = `weighted mean ${round(agg.weightedMean)}, mean ${round(agg.mean)}, std dev ${round(agg.stdDev)} over ${agg.voteCount} vote(s)`;
  if (escalation.length > 0) {
    return {
      outcome: 'ESCALATED_TO_HITL',
      aggregate: agg,
      checks,
      escalation,
      reason: `Escalated to a human: ${escalation.join('; ')} (${summary}).`,
    };
  }
  if (failed.length === 0) {
    if (t.autoApprove) {
      return {
        outcome: 'APPROVED',
        aggregate: agg,
        checks,
        escalation,
        reason: `Approved by policy: all four thresholds hold (${describeChecks(checks)}; ${summary}).`,
      };
    }
    const why = ['approval_required: every threshold holds but auto-approval is off; only a person can approve'];
    return {
      outcome: 'ESCALATED_TO_HITL',
      aggregate: agg,
      checks,
      escalation: why,
      reason: `Escalated to a human: ${why[0]} (${summary}).`,
    };
  }
  return {
    outcome: 'REVISION_REQUESTED',
    aggregate: agg,
    checks,
    escalation,
    reason: `Revision requested by policy: ${failed.map(describe).join('; ')} (${summary}).`,
  };
}

export function describeChecks(checks: readonly ThresholdCheck[]): string {
  return checks.map(describe).join('; ');
}

/** e.g. `min_score_threshold 5.457 < 7 (failed)`, `max_std_dev 0.5 ≤ 2 (passed)`. */
function describe(c: ThresholdCheck): string {
  const upper = c.name === 'max_std_dev';
  const op = c.pass ? (upper ? '≤' : '≥') : upper ? '>' : '<';
  return `${c.name} ${round(c.value)} ${op} ${c.threshold} (${c.pass ? 'passed' : 'failed'})`;
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}
