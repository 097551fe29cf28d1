import type { Event } from '../events';
import type { RoomThresholds } from '../policy/model';
import type { Transactions } from '../store/store';

/** RFC §17.5 artifact types (negotiation_room.proto ArtifactType, without UNSPECIFIED). */
export type ArtifactType = 'REQUIREMENTS' | 'PLAN' | 'CODE' | 'DEPLOYMENT';
export const ARTIFACT_TYPES: readonly ArtifactType[] = ['REQUIREMENTS', 'PLAN', 'CODE', 'DEPLOYMENT'];

export type DecisionOutcome = 'APPROVED' | 'REVISION_REQUESTED' | 'ESCALATED_TO_HITL';

/**
 * voting: waiting for the requested critics; escalated: a HITL invocation is pending; decided: a final outcome
 * (APPROVED or REVISION_REQUESTED); a producer may submit the same artifact_id again after REVISION_REQUESTED
 * (a new revision), unless a human rejected it (`closed`).
 */
export type ArtifactState = 'voting' | 'escalated' | 'decided';

/** One revision of an artifact submitted by its producer. */
export interface ProposalRecord {
  readonly roomId: string;
  readonly artifactId: string;
  /** 1-based; a resubmission after REVISION_REQUESTED is the next revision. */
  readonly revision: number;
  readonly artifactType: ArtifactType;
  readonly producerId: string;
  readonly contentType: string;
  readonly artifact: Buffer;
  readonly requestedCritics: readonly string[];
  /** The producer's created_at (ms) when given, else the submission time. */
  readonly createdAt: number;
  readonly submittedAt: number;
  /** submittedAt + RoomThresholds.voteTimeoutMs. */
  readonly voteDeadlineAt: number;
  readonly policyVersion: string;
  state: ArtifactState;
  /** A human rejected it: no further revision is accepted. */
  closed: boolean;
  /** The HITL invocation while escalated. */
  invocationId: string | null;
  updatedAt: number;
}

/** A revision without its bytes (what listing and lookups read). */
export type ProposalSummary = Omit<ProposalRecord, 'artifact'>;

export interface VoteRecord {
  readonly roomId: string;
  readonly artifactId: string;
  readonly revision: number;
  readonly criticId: string;
  /** 0..10 */
  readonly score: number;
  /** 0..1 */
  readonly confidence: number;
  readonly passed: boolean;
  readonly strengths: readonly string[];
  readonly weaknesses: readonly string[];
  readonly recommendations: readonly string[];
  /** The critic's voted_at (ms) when given, else the time it was received. */
  readonly votedAt: number;
  /** How many earlier votes of this critic on this revision it replaced. */
  readonly replaced: number;
}

export interface AggregatedScore {
  readonly mean: number;
  readonly minScore: number;
  readonly maxScore: number;
  /** Population standard deviation. */
  readonly stdDev: number;
  /** Σ score·confidence / Σ confidence (the mean when every confidence is 0). */
  readonly weightedMean: number;
  readonly voteCount: number;
}

/** One threshold as the decision checked it (shown pass/fail in the webview). */
export interface ThresholdCheck {
  readonly name: 'min_score_threshold' | 'min_confidence_threshold' | 'min_pass_ratio' | 'max_std_dev';
  readonly value: number;
  readonly threshold: number;
  readonly pass: boolean;
}

export interface RoomDecision {
  readonly roomId: string;
  readonly artifactId: string;
  readonly revision: number;
  readonly outcome: DecisionOutcome;
  readonly votes: readonly VoteRecord[];
  readonly aggregate: AggregatedScore;
  readonly checks: readonly ThresholdCheck[];
  /** Why it escalated (each condition that held), empty otherwise. */
  readonly escalation: readonly string[];
  readonly policyVersion: string;
  /** Human-readable: which thresholds passed/failed, who decided and their rationale. */
  readonly reason: string;
  /**
   * policy: the thresholds (or an operator's HITL auto rule); hitl: a person; fallback: the HITL fallback policy (RFC
   * §15.4: deadline passed, no human available), a cancelled invocation, or an escalation that could not be opened.
   */
  readonly decidedBy: 'policy' | 'hitl' | 'fallback';
  /** APPROVED / REVISION_REQUESTED; ESCALATED_TO_HITL is not final. */
  readonly final: boolean;
  /** A person rejected it (HITL deny): no further revision of the artifact is accepted. */
  readonly closed: boolean;
  /** The HITL invocation of an escalation, and (once settled) how it was answered. */
  readonly hitl: RoomHitlOutcome | null;
  readonly decidedAt: number;
}

/** How the escalation's HITL invocation was answered (RFC §15.4: a fallback says which policy and why). */
export interface RoomHitlOutcome {
  readonly invocationId: string;
  /** pending while escalated; then decided, timed_out (a fallback) or cancelled. */
  readonly state: 'pending' | 'decided' | 'timed_out' | 'cancelled';
  /** approve / modify / deny / defer; '' while pending. */
  readonly action: string;
  /** human, rule, fallback, cancel; '' while pending. */
  readonly origin: string;
  /** The operator, or `policy`. */
  readonly by: string;
  readonly rationale: string;
  /** For a fallback: DENY_BY_DEFAULT, AUTO_DECIDE_THRESHOLD, EXTEND_TIMEOUT; and why it applied (deadline, hitl_unavailable). */
  readonly fallbackPolicy?: string;
  readonly trigger?: string;
}

/** A row of the Negotiations view. */
export interface RoomArtifactSummary {
  readonly roomId: string;
  readonly artifactId: string;
  readonly revision: number;
  readonly artifactType: ArtifactType;
  readonly producerId: string;
  readonly state: ArtifactState;
  readonly votes: number;
  readonly requested: number;
  readonly outcome: DecisionOutcome | null;
  readonly invocationId: string | null;
  readonly updatedAt: number;
}

/** What the negotiation webview shows of a room's artifact. */
export interface RoomArtifactDetail {
  readonly proposal: ProposalRecord;
  /** The previous revision, for the diff; undefined for revision 1. */
  readonly previous: ProposalRecord | undefined;
  readonly votes: readonly VoteRecord[];
  readonly aggregate: AggregatedScore | null;
  readonly thresholds: RoomThresholds;
  readonly decision: RoomDecision | null;
}

export interface RoomChange {
  readonly roomId: string;
  readonly artifactId: string;
  readonly state: ArtifactState;
}

export interface RoomQueries {
  /** Voting and escalated first, then by updatedAt descending; at most `limit` (default 200). */
  listArtifacts(limit?: number): RoomArtifactSummary[];
  artifactDetail(artifactId: string): RoomArtifactDetail | undefined;
  readonly onDidChange: Event<RoomChange>;
}

/** The room area's tables (schema v14, v15). */
export interface RoomRepository {
  putProposal(proposal: ProposalRecord): void;
  /** The newest revision of an artifact. */
  latest(artifactId: string): ProposalRecord | undefined;
  revision(artifactId: string, revision: number): ProposalRecord | undefined;
  /** Each artifact's newest revision without its bytes: unfinished first, then by updatedAt descending. */
  listLatest(limit: number): ProposalSummary[];
  /** The escalated revisions (without bytes) of a room, or of an artifact, by its id. */
  escalatedFor(id: string): ProposalSummary[];
  /** How many revisions (of any artifact) the room holds. */
  countInRoom(roomId: string): number;
  /** Artifacts voting or escalated (restore). */
  listUnfinished(): ProposalRecord[];
  /** Insert or replace (artifact, revision, critic). */
  putVote(vote: VoteRecord): void;
  votes(artifactId: string, revision: number): VoteRecord[];
  putDecision(decision: RoomDecision): void;
  /** The newest decision for the revision (ESCALATED_TO_HITL, then the final one). */
  decision(artifactId: string, revision: number): RoomDecision | undefined;
}

export interface RoomStorage extends Transactions {
  readonly room: RoomRepository;
}
