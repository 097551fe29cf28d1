import type { HitlInvocation } from '../hitl/model';
import { aggregate, type Verdict } from './aggregate';
import type { ArtifactType, ProposalRecord, RoomDecision, RoomHitlOutcome, VoteRecord } from './model';

/**
 * The room's state (pure): a revision of an artifact (ProposalRecord) goes voting → decided, or voting → escalated →
 * decided; its votes (VoteRecord) and its decisions (RoomDecision) are plain records. Each function here answers the
 * next record and never touches the store, the clock or the log: the room's operations persist what it answers.
 */

export type { ProposalRecord, RoomDecision, VoteRecord } from './model';

/** The key of a revision in the room's memory (vote timers, waiters): `<revision>#<artifactId>`. */
export function revisionKey(artifactId: string, revision: number): string {
  return `${revision}#${artifactId}`;
}

/** The artifact id of a revisionKey. */
export function artifactOfKey(key: string): string {
  return key.slice(key.indexOf('#') + 1);
}

export function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** What a new revision is made of (the checks were made: SubmitProposal). */
export interface RevisionInput {
  readonly roomId: string;
  readonly artifactId: string;
  readonly artifactType: ArtifactType;
  readonly producerId: string;
  readonly contentType: string;
  readonly artifact: Buffer;
  readonly requestedCritics: readonly string[];
  /** The producer's created_at (ms), null when absent. */
  readonly createdAt: number | null;
}

/**
 * The next revision of an artifact, voting: revision 1 without `latest`, else latest's + 1 (in its room). The vote
 * deadline is `now + voteTimeoutMs` (0: none); the policy version is recorded as `v<n>`.
 */
export function newRevision(
  input: RevisionInput,
  latest: Pick<ProposalRecord, 'revision'> | undefined,
  policy: { readonly version: number; readonly voteTimeoutMs: number },
  now: number,
): ProposalRecord {
  return {
    roomId: input.roomId,
    artifactId: input.artifactId,
    revision: (latest?.revision ?? 0) + 1,
    artifactType: input.artifactType,
    producerId: input.producerId,
    contentType: input.contentType,
    artifact: Buffer.from(input.artifact),
    requestedCritics: input.requestedCritics,
    createdAt: input.createdAt ?? now,
    submittedAt: now,
    voteDeadlineAt: policy.voteTimeoutMs > 0 ? now + policy.voteTimeoutMs : 0,
    policyVersion: `v${policy.version}`,
    state: 'voting',
    closed: false,
    invocationId: null,
    updatedAt: now,
  };
}

/** Whether a submission repeats `latest` exactly (a retry whose answer was lost): the same type, content type, bytes and critics. */
export function repeatsRevision(
  latest: ProposalRecord,
  input: Pick<RevisionInput, 'artifactType' | 'contentType' | 'artifact' | 'requestedCritics'>,
): boolean {
  return (
    latest.artifactType === input.artifactType &&
    latest.contentType === input.contentType &&
    latest.artifact.equals(input.artifact) &&
    sameList([...latest.requestedCritics].sort(), [...input.requestedCritics].sort())
  );
}

/**
 * Why a new revision may not follow `latest` (whose newest decision is `decision`), undefined when it may: a closed
 * artifact, one still voting or escalated, an approved one, or a change of artifact_type. `kind` is the refusal's.
 */
export function revisionRefusal(
  latest: ProposalRecord,
  decision: Pick<RoomDecision, 'outcome'> | undefined,
  artifactType: ArtifactType,
): { readonly kind: 'precondition' | 'invalid'; readonly message: string } | undefined {
  if (latest.closed)
    return {
      kind: 'precondition',
      message: `artifact '${latest.artifactId}' was rejected by a person (revision ${latest.revision}): no further revision is accepted`,
    };
  if (latest.state !== 'decided') {
    return {
      kind: 'precondition',
      message: `revision ${latest.revision} of artifact '${latest.artifactId}' is still ${latest.state === 'voting' ? 'being voted on' : 'escalated to a human'}: wait for its decision before submitting another`,
    };
  }
  if (decision?.outcome === 'APPROVED')
    return {
      kind: 'precondition',
      message: `artifact '${latest.artifactId}' was approved (revision ${latest.revision}): submit a new artifact_id for new work`,
    };
  if (latest.artifactType !== artifactType)
    return {
      kind: 'invalid',
      message: `artifact '${latest.artifactId}' is a ${latest.artifactType}; a revision may not change its artifact_type`,
    };
  return undefined;
}

/** What a vote says (its texts checked), as SubmitVote compares it with an earlier one. */
export type VoteContent = Pick<
  VoteRecord,
  'score' | 'confidence' | 'passed' | 'strengths' | 'weaknesses' | 'recommendations'
>;

/** Whether `v` says exactly `content` (a retry of the same vote). */
export function sameVote(v: VoteRecord | undefined, content: VoteContent): boolean {
  return (
    v !== undefined &&
    v.score === content.score &&
    v.confidence === content.confidence &&
    v.passed === content.passed &&
    sameList(v.strengths, content.strengths) &&
    sameList(v.weaknesses, content.weaknesses) &&
    sameList(v.recommendations, content.recommendations)
  );
}

/** The critic's vote on the revision; `previous` is the critic's vote it replaces (counted in `replaced`). */
export function newVote(
  proposal: ProposalRecord,
  criticId: string,
  content: VoteContent,
  votedAt: number | null,
  previous: VoteRecord | undefined,
  now: number,
): VoteRecord {
  return {
    roomId: proposal.roomId,
    artifactId: proposal.artifactId,
    revision: proposal.revision,
    criticId,
    score: content.score,
    confidence: content.confidence,
    passed: content.passed,
    strengths: content.strengths,
    weaknesses: content.weaknesses,
    recommendations: content.recommendations,
    votedAt: votedAt ?? now,
    replaced: previous ? previous.replaced + 1 : 0,
  };
}

/** The requested critics with no vote among `votes`. */
export function missingCritics(
  proposal: Pick<ProposalRecord, 'requestedCritics'>,
  votes: readonly Pick<VoteRecord, 'criticId'>[],
): string[] {
  return proposal.requestedCritics.filter((c) => !votes.some((v) => v.criticId === c));
}

/** Whether every requested critic voted: the revision is decided then. */
export function allVoted(
  proposal: Pick<ProposalRecord, 'requestedCritics'>,
  votes: readonly Pick<VoteRecord, 'criticId'>[],
): boolean {
  return proposal.requestedCritics.every((c) => votes.some((v) => v.criticId === c));
}

/** The revision changed at `now` (a vote arrived). */
export function touched(proposal: ProposalRecord, now: number): ProposalRecord {
  return { ...proposal, updatedAt: now };
}

/** The revision escalated to a person through the HITL invocation `invocationId`. */
export function escalated(proposal: ProposalRecord, invocationId: string, now: number): ProposalRecord {
  return { ...proposal, state: 'escalated', invocationId, updatedAt: now };
}

/** The revision decided by `decision` (closed when a person rejected it). */
export function decided(
  proposal: ProposalRecord,
  decision: Pick<RoomDecision, 'closed' | 'decidedAt'>,
): ProposalRecord {
  return { ...proposal, state: 'decided', closed: decision.closed, updatedAt: decision.decidedAt };
}

/** The policy version a revision was submitted under, as a number (`v7` → 7), undefined when unreadable. */
export function policyVersionOf(proposal: Pick<ProposalRecord, 'policyVersion'>): number | undefined {
  const n = /^v(\d+)$/.exec(proposal.policyVersion)?.[1];
  return n !== undefined ? Number(n) : undefined;
}

/** A decision on the revision's votes as the verdict made it, with the rest given. */
export function decisionOf(
  p: ProposalRecord,
  votes: VoteRecord[],
  v: Verdict,
  policyVersion: string,
  rest: Pick<RoomDecision, 'outcome' | 'reason' | 'decidedBy' | 'final' | 'closed' | 'hitl' | 'decidedAt'>,
): RoomDecision {
  return {
    roomId: p.roomId,
    artifactId: p.artifactId,
    revision: p.revision,
    votes,
    aggregate: v.aggregate,
    checks: v.checks,
    escalation: v.escalation,
    policyVersion,
    ...rest,
  };
}

/**
 * The final decision of an escalated revision once its HITL invocation settled (`escalation`: the revision's
 * ESCALATED_TO_HITL decision; `votes`: the revision's votes, read when it holds none). approve → APPROVED, anything
 * else → REVISION_REQUESTED; only a person's deny closes the artifact (a fallback's deny: nobody looked at it). An
 * invocation without a decision (cancelled, or gone) is decided as a cancelled deny, never as a person's approval.
 */
export function hitlDecision(
  proposal: ProposalRecord,
  escalation: RoomDecision | undefined,
  invocation: Pick<HitlInvocation, 'id' | 'state' | 'decision'>,
  votes: () => VoteRecord[],
  now: number,
): RoomDecision {
  const d = invocation.decision;
  const action = d?.action ?? 'deny';
  const origin = d?.origin.kind ?? 'cancel';
  const human = origin === 'human';
  const decidedBy: RoomDecision['decidedBy'] = human ? 'hitl' : origin === 'rule' ? 'policy' : 'fallback';
  const outcome = action === 'approve' ? 'APPROVED' : 'REVISION_REQUESTED';
  // Only a person's deny closes the artifact; a fallback's deny (nobody looked at it) asks for a revision.
  const closed = human && action === 'deny';
  const hitl: RoomHitlOutcome = {
    invocationId: invocation.id,
    state: invocation.state === 'pending' ? 'cancelled' : invocation.state,
    action,
    origin,
    by: d?.origin.by ?? '',
    rationale: d?.rationale ?? '',
    ...(origin === 'fallback' ? { fallbackPolicy: d?.origin.policy ?? '', trigger: d?.origin.trigger ?? '' } : {}),
  };
  const who = human
    ? `${hitl.by} (a person)`
    : origin === 'rule'
      ? `the HITL auto rule '${d?.origin.rule ?? ''}'`
      : origin === 'fallback'
        ? `the HITL fallback ${hitl.fallbackPolicy} (${hitl.trigger === 'hitl_unavailable' ? 'no human was available' : 'the decision deadline passed'}), not a person`
        : `nobody: the invocation was cancelled`;
  const meaning =
    action === 'approve'
      ? 'approved'
      : action === 'modify'
        ? 'revision requested'
        : action === 'defer'
          ? 'deferred: revision requested'
          : closed
            ? 'rejected: no further revision is accepted'
            : 'denied: revision requested';
  const voted = escalation?.votes ? [...escalation.votes] : votes();
  const agg = escalation?.aggregate ?? aggregate(voted);
  return {
    roomId: proposal.roomId,
    artifactId: proposal.artifactId,
    revision: proposal.revision,
    outcome,
    votes: voted,
    aggregate: agg,
    checks: escalation?.checks ?? [],
    escalation: escalation?.escalation ?? [],
    policyVersion: escalation?.policyVersion ?? proposal.policyVersion,
    reason: `${escalation?.reason ?? 'Escalated to a human.'} Decided by ${who}: ${meaning}${hitl.rationale ? ` — ${hitl.rationale.slice(0, 1000)}` : ''}.`,
    decidedBy,
    final: true,
    closed,
    hitl,
    decidedAt: d?.decidedAt ?? now,
  };
}
