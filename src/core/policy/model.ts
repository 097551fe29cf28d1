import type { Transactions } from '../store/store';

export { COORDINATOR_SPEAKER, NegotiationError, type NegotiationErrorKind, type Speaker } from './speaker';

/**
 * Negotiation policy (RFC §17.2, policy.proto) as the core keeps it: plain numbers, proto field names in camelCase.
 * The scheduler (this coordinator) is the source of truth; agents only state preferences, clamped to guardrails.
 */
/** RFC §17 debate intensities (common.proto DebateIntensity): each names a profile. */
export type DebateIntensity = 'LOWEST' | 'LOW' | 'MEDIUM' | 'HIGH' | 'HIGHEST';
export const DEBATE_INTENSITIES: readonly DebateIntensity[] = ['LOWEST', 'LOW', 'MEDIUM', 'HIGH', 'HIGHEST'];

export type HitlGate = 'None' | 'PauseBetweenRounds' | 'PauseOnFinalAccept';
export const HITL_GATES: readonly HitlGate[] = ['None', 'PauseBetweenRounds', 'PauseOnFinalAccept'];

export interface NegotiationPolicy {
  readonly maxRounds: number;
  /** 0..1 */
  readonly scoreThreshold: number;
  /** 0..1: the largest DeltaSummary magnitude between the last two rounds that still counts as converged. */
  readonly diffTolerance: number;
  readonly roundTimeoutMs: number;
  /** Tokens estimated as ⌈UTF-8 bytes / 4⌉ of a proposal's payload (README, "Debates"). */
  readonly tokenBudgetPerRound: number;
  /** 0 = unset. */
  readonly totalTokenBudget: number;
  readonly oscillationLimit: number;
  readonly hitl: HitlGate;
  readonly scoring: {
    readonly requireSchemaValid: boolean;
    readonly requireExamplesPass: boolean;
    /** 0..1: weight of the inference engine's confidence in the blended score. */
    readonly llmWeight: number;
  };
}

/** The numeric policy fields an agent may state a preference for, and the guardrails bound (policy.proto AgentPreferences). */
export type PreferenceField =
  | 'maxRounds'
  | 'scoreThreshold'
  | 'diffTolerance'
  | 'roundTimeoutMs'
  | 'tokenBudgetPerRound'
  | 'totalTokenBudget'
  | 'oscillationLimit';

/** Advisory per-agent values (policy.proto AgentPreferences); 0 = no preference for that field. */
export type AgentPreferences = Pick<NegotiationPolicy, PreferenceField>;

/** The scheduler's bounds on what a preference may move a field to (inclusive). */
export type Guardrails = { readonly [F in PreferenceField]: { readonly min: number; readonly max: number } };

export interface PolicyProfile {
  /** LOWEST, LOW, MEDIUM, HIGH, HIGHEST (the debate intensities) or any other name set by SetPolicyProfiles. */
  readonly name: string;
  readonly policy: NegotiationPolicy;
}

/** What a negotiation runs under (policy.proto EffectivePolicy), persisted with the negotiation. */
export interface EffectivePolicy {
  readonly policy: NegotiationPolicy;
  /** Per agent: the preferences as clamped (only agents that stated any). */
  readonly applied: Readonly<Record<string, AgentPreferences>>;
  /** The profile the base came from (the intensity's, or a hint), '' when the base policy itself. */
  readonly profile: string;
  /** The PolicySet version it was derived from (`v<N>`). */
  readonly policyVersion: string;
  /** The debate time limit (Open's debate_timeout, else the profile's), ms. */
  readonly debateTimeoutMs: number;
}

/** §17.5 room thresholds (RFC defaults 7.0 / 0.7 / 0.8 / 2.0) and the escalation bounds. */
export interface RoomThresholds {
  readonly minScoreThreshold: number;
  readonly minConfidenceThreshold: number;
  readonly minPassRatio: number;
  readonly maxStdDev: number;
  /** Auto-escalation: any vote's confidence below this (RFC: 0.3). */
  readonly escalateBelowConfidence: number;
  /** Auto-escalation: std_dev above this (RFC: 3.0). */
  readonly escalateAboveStdDev: number;
  /** Auto-escalation: votes not all in within this many ms of the proposal (the "policy timeout"). */
  readonly voteTimeoutMs: number;
  /** false: no auto-approval; a decision that is not escalated is REVISION_REQUESTED unless a human approves. */
  readonly autoApprove: boolean;
}

/** How a debate that cannot conclude ends (RFC §17 "tie-breaking rules or escalating"). */
export type TieBreak = 'hitl' | 'highest_score' | 'abort';

/**
 * Everything negotiations are governed by, versioned as a whole: each change (SetNegotiationPolicy, SetPolicyProfiles,
 * the editor's settings) writes a new version `v<N>`; every decision records the version it used.
 */
export interface PolicySet {
  readonly version: number;
  readonly base: NegotiationPolicy;
  /** By name; always holds the five intensities (LOWEST…HIGHEST). */
  readonly profiles: readonly PolicyProfile[];
  /** Debate time limit per profile name, ms (Open's debate_timeout overrides); a profile without one uses baseDebateTimeoutMs. */
  readonly debateTimeoutMs: Readonly<Record<string, number>>;
  /** The debate time limit when the base policy itself applies (no intensity, no hint), ms. */
  readonly baseDebateTimeoutMs: number;
  readonly guardrails: Guardrails;
  readonly room: RoomThresholds;
  readonly tieBreak: TieBreak;
  /** JSON Schemas (as text) proposals must satisfy, by topic glob (picomatch); the first match applies. */
  readonly proposalSchemas: readonly { readonly topic: string; readonly schema: string }[];
  /** Who wrote this version: `settings`, `rpc:<principal>`, `default`. */
  readonly setBy: string;
  readonly setAt: number;
}

export interface PolicyRepository {
  /** The newest version, or undefined on a fresh store. */
  latest(): PolicySet | undefined;
  get(version: number): PolicySet | undefined;
  put(set: PolicySet): void;
}

export interface PolicyStorage extends Transactions {
  readonly policy: PolicyRepository;
}

export interface EffectiveInput {
  readonly intensity: DebateIntensity | '';
  /** A profile name hint from the opener ('' = none): it wins over the intensity when it names a profile. */
  readonly profileHint: string;
  /** Per agent, what it asked for (0 = no preference); clamped to the guardrails. */
  readonly preferences: Readonly<Record<string, Partial<AgentPreferences>>>;
  /** Open's debate_timeout, 0 = the profile's. */
  readonly debateTimeoutMs: number;
  /** The topic whose proposal schema is looked up (an opener's own schema does not replace it); undefined = no lookup. */
  readonly topic?: string;
}

/** The shortest debate time limit, ms (an Open asking for less gets this). */
export const MIN_DEBATE_TIMEOUT_MS = 1_000;

/**
 * What the engines read of the negotiation policy (NegotiationPolicies implements it; the composition root hands in
 * the instance): the set in force, an older version for audit, and what a negotiation runs under.
 */
export interface PolicyReader {
  current(): PolicySet;
  version(n: number): PolicySet | undefined;
  effectiveFor(input: EffectiveInput): { readonly effective: EffectivePolicy; readonly schema: string };
}
