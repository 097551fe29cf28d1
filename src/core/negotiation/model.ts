import type { Event } from '../events';
import type { EffectivePolicy } from '../policy/model';
import type { Transactions } from '../store/store';

export { DEBATE_INTENSITIES, type DebateIntensity } from '../policy/model';

/**
 * open: rounds may be proposed and evaluated; paused: a HITL gate or a deadlock waits for a human (`pending`);
 * decided / aborted: terminal.
 */
export type NegotiationState = 'open' | 'paused' | 'decided' | 'aborted';

/** policy.proto DecisionReport.stop_reason, plus `decided` for a Decide that ended it. */
export type StopReason =
  'threshold_met' | 'max_rounds' | 'oscillation' | 'budget' | 'timeout' | 'decided' | 'hitl' | 'aborted';

/** The seven §17.1 event kinds, in the order they were fanned out. */
export type NegotiationEventKind = 'open' | 'policy' | 'propose' | 'counter' | 'evaluate' | 'decide' | 'abort';

export interface DeltaSummary {
  /** 0..1: changed leaves (added, removed, modified) / leaves of the larger version (text: changed lines / lines of the longer text). */
  readonly magnitude: number;
  /** JSON Pointer paths of the changed leaves, sorted, at most 1,000 (DELTA_LIMITS.maxPaths); text: `/lines/<n>`. */
  readonly changedPaths: readonly string[];
  /** How many paths changed in all (changedPaths may hold fewer). */
  readonly pathCount: number;
  /**
   * How it was computed: `json` (jsondiffpatch), `text` (line diff), `none` (round 1); `json-coarse` / `text-coarse`:
   * too large to diff within bounds (DELTA_LIMITS), so magnitude 1 (0 when equal) and the one path `/`.
   */
  readonly method: 'json' | 'text' | 'none' | 'json-coarse' | 'text-coarse';
}

/** An evaluation of one round by a participant (Evaluate) or a report (SubmitEvaluation). */
export interface RoundEvaluation {
  readonly from: string;
  /** 0..1 (Evaluate.confidence_score / EvaluationReport.deterministic_score, clamped). */
  readonly score: number;
  /** EvaluationReport.llm_confidence when a report gave one; null otherwise. */
  readonly llmConfidence: number | null;
  readonly notes: string;
  readonly source: 'evaluate' | 'report';
  readonly at: number;
}

/** Round N = contract_vN: a proposal (round 1) or a counter-proposal, and what it was scored. */
export interface RoundRecord {
  readonly negotiationId: string;
  /** 1-based. */
  readonly n: number;
  readonly kind: 'propose' | 'counter';
  readonly from: string;
  readonly contentType: string;
  /** The proposal's bytes exactly as sent. */
  readonly payload: Buffer;
  /** ⌈bytes / 4⌉. */
  readonly tokens: number;
  readonly at: number;
  /** Against round n-1 (round 1: against nothing, magnitude 1, no paths). */
  readonly delta: DeltaSummary;
  readonly evaluations: readonly RoundEvaluation[];
  /** Mean of the evaluations' scores; null while none. */
  readonly deterministicScore: number | null;
  /** The inference engine's confidence (vN-1 vs vN) when asked and answered, else the mean of the reports' llm_confidence; null when neither. */
  readonly llmConfidence: number | null;
  /** Blended per llm_weight; null while no evaluation. */
  readonly score: number | null;
  /**
   * The inference engine's part: `none` (llm_weight 0 or no engine), `pending` (asked; the score is the deterministic one
   * until it answers), `answered`, `failed` (the deterministic score stands; llmNotes says why).
   */
  readonly llm: 'none' | 'pending' | 'answered' | 'failed';
  readonly llmNotes: string;
  /** Round n's contract equals round n-2's (A→B→A). */
  readonly oscillation: boolean;
}

export interface NegotiationDecision {
  /** consensus | hitl | policy */
  readonly decidedBy: string;
  readonly contentType: string;
  readonly result: Buffer;
  /** The round whose contract was chosen, 0 when the result came from elsewhere (Decide's bytes, a modify payload). */
  readonly round: number;
  readonly finalScore: number;
  readonly rationale: string;
  readonly stopReason: StopReason;
  readonly policyVersion: string;
  /** Set when a fallback decided (RFC §15.4 audit): the policy applied and why. */
  readonly fallback: { readonly policy: string; readonly trigger: string } | null;
  readonly at: number;
}

export interface NegotiationRecord {
  readonly id: string;
  readonly correlationId: string;
  readonly topic: string;
  readonly participants: readonly string[];
  /** The profile that applied (EffectivePolicy.profile: the intensity's, or the one a hint named); '' = the base policy. */
  readonly intensity: string;
  readonly openedBy: string;
  /** The participant an agent opener acted as (absent when the operator opened it): MAX_OPEN_PER_OPENER counts these. */
  readonly openedByAgent?: string;
  /** The requester of the HITL invocations it opens: the opener agent's id or the operator's label (older records: `negotiation`). */
  readonly hitlRequester?: string;
  readonly openedAt: number;
  /** openedAt + the effective debate timeout. */
  readonly deadlineAt: number;
  readonly effective: EffectivePolicy;
  /** The JSON Schema (text) proposals are checked against, '' when none. */
  readonly schema: string;
  /** The policy's schema for the topic when the opener also gave one (`schema`): a draft must satisfy both. Absent otherwise. */
  readonly policySchema?: string;
  /** sha256 of the Open as asked (topic, participants, intensity, debate_timeout, profile hint, preferences, schema): a repeat is the same Open. */
  readonly openDigest: string;
  state: NegotiationState;
  /** Rounds so far (their records: NegotiationRepository.rounds). */
  rounds: number;
  tokensUsed: number;
  oscillations: number;
  /** When the current round started (its timeout runs from here). */
  roundStartedAt: number;
  /** The HITL invocation it waits on while paused. */
  pending: {
    readonly invocationId: string;
    readonly why: 'deadlock' | 'pause_between_rounds' | 'final_accept';
    readonly stopReason: StopReason;
  } | null;
  decision: NegotiationDecision | null;
  abort: {
    readonly reason: string;
    readonly errorCode: string;
    readonly by: string;
    readonly at: number;
    readonly fallback: { readonly policy: string; readonly trigger: string } | null;
  } | null;
  /** Events fanned out so far (the next event's sequence number). */
  events: number;
  /** The best-scored round so far (0 = none) and its score. */
  bestRound: number;
  bestScore: number | null;
  /** Why it stopped (a stop rule, a decision, an abort); null while it runs. */
  stopReason: StopReason | null;
  /**
   * Event copies the router refused for a participant after other copies of the same event were already accepted (so the
   * call could not be refused as a whole), in order: retried every second; later events to that participant wait behind
   * them so that order holds. Empty in the normal case.
   */
  undelivered: UndeliveredEvent[];
  updatedAt: number;
}

export interface UndeliveredEvent {
  readonly to: string;
  readonly seq: number;
  readonly kind: NegotiationEventKind;
  /** When the event was first sent (its `ts`): with kind, seq, round and from, its bytes are rebuilt from the record. */
  readonly at: number;
  /** propose / counter / evaluate: the round it reports. */
  readonly round?: number;
  /** evaluate: the evaluator. */
  readonly from?: string;
  readonly firstRefusedAt: number;
  code: string;
  /** Attempts when last written (the running count is kept in memory). */
  attempts: number;
}

/** A row of the Negotiations view. */
export interface NegotiationSummary {
  readonly id: string;
  readonly topic: string;
  readonly participants: readonly string[];
  /** The profile that applied; '' = the base policy (no intensity, no hint). */
  readonly intensity: string;
  readonly state: NegotiationState;
  readonly rounds: number;
  readonly bestScore: number | null;
  readonly stopReason: StopReason | null;
  readonly pendingInvocationId: string | null;
  readonly openedAt: number;
  readonly updatedAt: number;
}

/** What the negotiation webview shows of a debate. */
export interface NegotiationDetail {
  readonly record: NegotiationRecord;
  readonly rounds: readonly RoundRecord[];
}

export interface NegotiationChange {
  readonly negotiationId: string;
  readonly state: NegotiationState;
}

/** What the editor reads (CoordinatorApi). */
export interface NegotiationQueries {
  /** Open first, then the most recently updated; at most `limit` (default 200). */
  list(limit?: number): NegotiationSummary[];
  detail(id: string): NegotiationDetail | undefined;
  readonly onDidChange: Event<NegotiationChange>;
}

/** The negotiation area's tables (schema v13). */
export interface NegotiationRepository {
  put(record: NegotiationRecord): void;
  get(id: string): NegotiationRecord | undefined;
  /** Open and paused ones first, then by updatedAt descending; at most `limit`. */
  list(limit: number): NegotiationRecord[];
  /**
   * Deletes at most `limit` finished (decided or aborted) negotiations with their rounds: those last updated before
   * `updatedBefore`, then those beyond the newest `keep` finished ones (oldest first). `more`: a full batch was deleted.
   */
  pruneFinished(
    updatedBefore: number,
    keep: number,
    limit: number,
  ): { readonly deleted: number; readonly more: boolean; readonly rounds: number };
  /** Negotiations not decided or aborted that this agent opened (openedByAgent). */
  countOpenBy(agentId: string): number;
  /** Every negotiation not decided or aborted (restore). */
  listUnfinished(): NegotiationRecord[];
  putRound(round: RoundRecord): void;
  rounds(negotiationId: string): RoundRecord[];
  /** The latest round only (one row), undefined when none. */
  latestRound(negotiationId: string): RoundRecord | undefined;
}

export interface NegotiationStorage extends Transactions {
  readonly negotiation: NegotiationRepository;
}
