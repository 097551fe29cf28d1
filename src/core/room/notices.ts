import { isoUtc } from '../clock';
import { FIELD_LIMITS } from '../fieldLimits';
import { type InvocationRequest, MAX_INVOCATION_BYTES, parseInvocationRequest } from '../hitl/model';
import type { RoomThresholds } from '../policy/model';
import type { Verdict } from './aggregate';
import type { ProposalRecord, RoomDecision, VoteRecord } from './model';

/**
 * What the room sends and shows (pure): the critics' review requests (NEGOTIATION envelopes), the HITL invocation of
 * an escalation (its context within MAX_INVOCATION_BYTES), and the JSON of an aggregate and of thresholds.
 */

/** What the critics' notification envelopes carry (message type NEGOTIATION). */
export const REVIEW_REQUEST_CONTENT_TYPE = 'application/json';
export const REVIEW_REQUEST_KIND = 'review_request';
/** The actions the escalation offers, with their meaning for the room (the negotiation webview renders exactly these). */
export const ROOM_HITL_ACTIONS = ['approve', 'modify', 'deny'] as const;
/** An artifact shown in the HITL context as text: at most this many characters. */
const CONTEXT_EXCERPT_CHARS = 16_384;

interface ContextCut {
  readonly entries: number;
  readonly chars: number;
  readonly excerpt: number;
  readonly diffs: boolean;
}
/** How much of the votes' texts, the excerpt and the diff the HITL context holds: the first that fits MAX_INVOCATION_BYTES. */
const CONTEXT_CUTS: readonly ContextCut[] = [
  { entries: 5, chars: 200, excerpt: CONTEXT_EXCERPT_CHARS, diffs: true },
  { entries: 3, chars: 100, excerpt: CONTEXT_EXCERPT_CHARS, diffs: true },
  { entries: 1, chars: 100, excerpt: CONTEXT_EXCERPT_CHARS, diffs: true },
  { entries: 0, chars: 0, excerpt: 4_096, diffs: true },
  { entries: 0, chars: 0, excerpt: 1_024, diffs: false },
  { entries: 0, chars: 0, excerpt: 0, diffs: false },
];

/** The UTF-8 text of an artifact when it is text (no U+FFFD, no NUL), else undefined. */
function textOf(bytes: Buffer): string | undefined {
  const text = bytes.toString('utf8');
  return text.includes('\uFFFD') || text.includes('\u0000') ? undefined : text;
}

/** The JSON payload of a critic's NEGOTIATION envelope (README, "Negotiation rooms"). */
export function reviewRequest(p: ProposalRecord, critic: string): Record<string, unknown> {
  return {
    kind: REVIEW_REQUEST_KIND,
    ts: isoUtc(p.submittedAt),
    negotiation_room_id: p.roomId,
    artifact_id: p.artifactId,
    revision: p.revision,
    artifact_type: p.artifactType,
    producer_id: p.producerId,
    critic_id: critic,
    requested_critics: p.requestedCritics,
    ct: p.contentType,
    size: p.artifact.byteLength,
    payload_b64: p.artifact.toString('base64'),
    vote_deadline: p.voteDeadlineAt > 0 ? isoUtc(p.voteDeadlineAt) : null,
  };
}

/** The revision to decide, the verdict on its votes and what the HITL context reads besides. */
export interface EscalationFacts {
  readonly proposal: ProposalRecord;
  /** The previous revision, for the diff (undefined for revision 1). */
  readonly previous: ProposalRecord | undefined;
  readonly votes: readonly VoteRecord[];
  readonly verdict: Verdict;
  readonly thresholds: RoomThresholds;
  readonly policyVersion: string;
  readonly missing: readonly string[];
}

/**
 * The HITL DEBATE_DEADLOCK invocation of an escalation (README, "Negotiation rooms": the context JSON). Its context is
 * kept within a HITL invocation's MAX_INVOCATION_BYTES, measured as UTF-8 JSON: the votes' texts are cut first, then
 * the excerpt and the diff (`context_trimmed` says so); the editor shows the votes and the artifact whole.
 */
export function escalationRequest(f: EscalationFacts, now: number): InvocationRequest {
  const text = textOf(f.proposal.artifact);
  const previousText = f.previous ? textOf(f.previous.artifact) : undefined;
  let request: InvocationRequest | undefined;
  for (const [level, cut] of CONTEXT_CUTS.entries()) {
    request = escalationRequestCut(f, text, previousText, cut, level > 0, now);
    if (Buffer.byteLength(JSON.stringify(request.context)) <= MAX_INVOCATION_BYTES) return request;
  }
  return request!;
}

function escalationRequestCut(
  f: EscalationFacts,
  text: string | undefined,
  previousText: string | undefined,
  c: ContextCut,
  trimmed: boolean,
  now: number,
): InvocationRequest {
  const { proposal: p, votes, verdict: v, thresholds: t, policyVersion, missing } = f;
  const cut = (list: readonly string[]) => list.slice(0, c.entries).map((s) => s.slice(0, c.chars));
  const excerpt =
    text !== undefined && c.excerpt > 0
      ? { artifact_excerpt: text.slice(0, c.excerpt), artifact_excerpt_cut: text.length > c.excerpt }
      : {};
  const facts = {
    negotiation_room_id: p.roomId,
    artifact_id: p.artifactId,
    revision: p.revision,
    artifact_type: p.artifactType,
    producer_id: p.producerId,
    content_type: p.contentType,
    artifact_bytes: p.artifact.byteLength,
    aggregate: aggregateJson(v.aggregate),
    thresholds: thresholdsJson(t),
    checks: v.checks.map((x) => ({ name: x.name, value: x.value, threshold: x.threshold, pass: x.pass })),
    escalation_reasons: v.escalation,
    votes: votes.map((x) => ({
      critic_id: x.criticId,
      score: x.score,
      confidence: x.confidence,
      passed: x.passed,
      strengths: cut(x.strengths),
      weaknesses: cut(x.weaknesses),
      recommendations: cut(x.recommendations),
    })),
    missing_critics: missing,
    policy_version: policyVersion,
    actions: {
      approve: 'APPROVED: the producer proceeds',
      modify: 'REVISION_REQUESTED: the producer submits a new revision (Request Revision)',
      deny: 'REVISION_REQUESTED and closed: rejected, no further revision of this artifact is accepted',
    },
    ...excerpt,
    ...(trimmed ? { context_trimmed: true } : {}),
  };
  const diffs =
    c.diffs &&
    text !== undefined &&
    previousText !== undefined &&
    text.length <= CONTEXT_EXCERPT_CHARS / 2 &&
    previousText.length <= CONTEXT_EXCERPT_CHARS / 2
      ? [{ title: `${p.artifactId}: revision ${p.revision - 1} → ${p.revision}`, before: previousText, after: text }]
      : [];
  const summary = `Negotiation room ${p.roomId.slice(0, 80)}: ${p.artifactType} artifact ${p.artifactId.slice(0, 80)} (revision ${p.revision}, by ${p.producerId}) needs a person: ${v.escalation.map((r) => r.split(':')[0]).join(', ')}.`;
  return parseInvocationRequest(
    {
      reason_type: 'DEBATE_DEADLOCK',
      summary: summary.slice(0, FIELD_LIMITS.hitl.summary),
      facts,
      diffs,
      risk_notes: [
        "approve → APPROVED; modify → REVISION_REQUESTED (Request Revision); deny → rejected (closed: no further revision). A fallback (no answer in time, no human available) is recorded as a fallback, never as a person's approval.",
      ],
      proposed_actions: [...ROOM_HITL_ACTIONS],
      suggested_action: '',
      // AUTO_DECIDE_THRESHOLD reads a score in [0,1]: the weighted mean on the 0–10 scale, divided by 10.
      score: Math.min(1, Math.max(0, v.aggregate.weightedMean / 10)),
    },
    { requester: p.producerId, correlationId: p.roomId, now },
  );
}

export function aggregateJson(a: RoomDecision['aggregate']): Record<string, number> {
  return {
    mean: a.mean,
    min_score: a.minScore,
    max_score: a.maxScore,
    std_dev: a.stdDev,
    weighted_mean: a.weightedMean,
    vote_count: a.voteCount,
  };
}

export function thresholdsJson(t: RoomThresholds): Record<string, unknown> {
  return {
    min_score_threshold: t.minScoreThreshold,
    min_confidence_threshold: t.minConfidenceThreshold,
    min_pass_ratio: t.minPassRatio,
    max_std_dev: t.maxStdDev,
    escalate_below_confidence: t.escalateBelowConfidence,
    escalate_above_std_dev: t.escalateAboveStdDev,
    vote_timeout_ms: t.voteTimeoutMs,
    auto_approve: t.autoApprove,
  };
}
