import type { DebateIntensity, Guardrails, NegotiationPolicy, PolicyProfile, RoomThresholds, TieBreak } from './model';

/**
 * The negotiation policy's defaults (README, "Negotiation policy (for agent authors)": keep the tables there in step
 * with these). A fresh store starts with exactly these as version 1.
 */

const MINUTE = 60_000;

function policy(
  maxRounds: number,
  scoreThreshold: number,
  diffTolerance: number,
  roundTimeoutMs: number,
  tokenBudgetPerRound: number,
  totalTokenBudget: number,
  oscillationLimit: number,
  llmWeight: number,
): NegotiationPolicy {
  return {
    maxRounds,
    scoreThreshold,
    diffTolerance,
    roundTimeoutMs,
    tokenBudgetPerRound,
    totalTokenBudget,
    oscillationLimit,
    hitl: 'None',
    scoring: { requireSchemaValid: true, requireExamplesPass: false, llmWeight },
  };
}

/** Debate intensity → limits: more intensity, more rounds and time, a higher bar to accept, less drift tolerated. */
export const DEFAULT_PROFILES: readonly PolicyProfile[] = [
  { name: 'LOWEST', policy: policy(1, 0.5, 0.2, 1 * MINUTE, 2_000, 4_000, 1, 0) },
  { name: 'LOW', policy: policy(2, 0.6, 0.15, 2 * MINUTE, 4_000, 16_000, 1, 0) },
  { name: 'MEDIUM', policy: policy(3, 0.7, 0.1, 5 * MINUTE, 8_000, 48_000, 2, 0.2) },
  { name: 'HIGH', policy: policy(5, 0.8, 0.05, 10 * MINUTE, 16_000, 160_000, 2, 0.3) },
  { name: 'HIGHEST', policy: policy(8, 0.9, 0.02, 15 * MINUTE, 32_000, 512_000, 3, 0.4) },
];

/** The base policy (a negotiation opened without an intensity or a hint): MEDIUM's values. */
export const DEFAULT_BASE_POLICY: NegotiationPolicy = DEFAULT_PROFILES[2].policy;

/** The debate time limit per intensity profile (Open's debate_timeout overrides it). */
export const DEFAULT_DEBATE_TIMEOUT_MS: Readonly<Record<DebateIntensity, number>> = {
  LOWEST: 2 * MINUTE,
  LOW: 5 * MINUTE,
  MEDIUM: 15 * MINUTE,
  HIGH: 30 * MINUTE,
  HIGHEST: 60 * MINUTE,
};
export const DEFAULT_BASE_DEBATE_TIMEOUT_MS = 15 * MINUTE;

/** How far an agent's preference may move each field (inclusive); policies and profiles must lie within them too. */
export const DEFAULT_GUARDRAILS: Guardrails = {
  maxRounds: { min: 1, max: 20 },
  scoreThreshold: { min: 0.3, max: 1 },
  diffTolerance: { min: 0, max: 0.5 },
  roundTimeoutMs: { min: 5_000, max: 60 * MINUTE },
  tokenBudgetPerRound: { min: 256, max: 131_072 },
  totalTokenBudget: { min: 1_024, max: 2_097_152 },
  oscillationLimit: { min: 1, max: 10 },
};

/** RFC §17.5 recommended defaults, and its escalation bounds (confidence < 0.3, std_dev > 3.0). */
export const DEFAULT_ROOM_THRESHOLDS: RoomThresholds = {
  minScoreThreshold: 7.0,
  minConfidenceThreshold: 0.7,
  minPassRatio: 0.8,
  maxStdDev: 2.0,
  escalateBelowConfidence: 0.3,
  escalateAboveStdDev: 3.0,
  voteTimeoutMs: 15 * MINUTE,
  autoApprove: true,
};

export const DEFAULT_TIE_BREAK: TieBreak = 'hitl';
export const TIE_BREAKS: readonly TieBreak[] = ['hitl', 'highest_score', 'abort'];

/**
 * The outer bounds nothing may pass: what the guardrails themselves may be set to, and Open's debate_timeout's
 * maximum (a longer one is clamped to it).
 */
export const HARD_BOUNDS: Guardrails = {
  maxRounds: { min: 1, max: 1_000 },
  scoreThreshold: { min: 0, max: 1 },
  diffTolerance: { min: 0, max: 1 },
  roundTimeoutMs: { min: 1_000, max: 24 * 60 * MINUTE },
  tokenBudgetPerRound: { min: 1, max: 100_000_000 },
  totalTokenBudget: { min: 1, max: 1_000_000_000 },
  oscillationLimit: { min: 1, max: 1_000 },
};
export { MIN_DEBATE_TIMEOUT_MS } from './model';
export const MAX_DEBATE_TIMEOUT_MS = 24 * 60 * MINUTE;
export const MIN_VOTE_TIMEOUT_MS = 1_000;
export const MAX_VOTE_TIMEOUT_MS = 7 * 24 * 60 * MINUTE;

/** Profile names: 1–64 of these characters (the intensities included); `__proto__` is not a name. */
export const PROFILE_NAME = /^(?!__proto__$)[A-Za-z0-9_.:-]{1,64}$/;
export const MAX_PROFILES = 64;
export const MAX_PROPOSAL_SCHEMAS = 64;
export const MAX_TOPIC_GLOB_CHARS = 256;
