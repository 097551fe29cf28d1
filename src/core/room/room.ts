import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import { HitlStateError, type HitlService } from '../hitl/hitlService';
import type { HitlInvocation, InvocationRequest } from '../hitl/model';
import { applyFallback } from '../hitl/policy';
import { HitlRequestError, MAX_INVOCATION_BYTES, parseInvocationRequest } from '../hitl/request';
import type { IdSource } from '../ids';
import type { EventLog } from '../log/eventLog';
import type { PolicySet, RoomThresholds } from '../policy/model';
import type { NegotiationPolicies } from '../policy/policies';
import { NegotiationError, type Speaker } from '../policy/speaker';
import type { AgentDirectory } from '../registry/model';
import { modalityAccepts } from '../router/envelope';
import type { CoordinatorOutbox } from '../router/model';
import { aggregate, verdict, type Verdict } from './aggregate';
import {
  ARTIFACT_TYPES,
  type ArtifactType, type ProposalRecord, type RoomArtifactDetail, type RoomArtifactSummary, type RoomChange, type RoomDecision,
  type RoomHitlOutcome, type RoomQueries, type RoomStorage, type VoteRecord,
} from './model';

export interface RoomProposalInput {
  /** '' = ARTIFACT_TYPE_UNSPECIFIED (refused). */
  readonly artifactType: ArtifactType | '';
  /** '' = the coordinator assigns one. */
  readonly artifactId: string;
  readonly producerId: string;
  readonly artifact: Buffer;
  readonly contentType: string;
  readonly requestedCritics: readonly string[];
  /** '' = the coordinator assigns one. */
  readonly roomId: string;
  /** ms since epoch, null when absent. */
  readonly createdAt: number | null;
}

/** SubmitVote: a vote as the critic sends it (the revision is the one current when it arrives). */
export type VoteInput = Omit<VoteRecord, 'revision' | 'replaced' | 'votedAt' | 'roomId'> & {
  /** '' = the artifact's room. */
  readonly roomId: string;
  readonly votedAt: number | null;
};

export interface RoomDeps {
  readonly store: RoomStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly agents: AgentDirectory;
  readonly outbox: CoordinatorOutbox;
  readonly hitl: HitlService;
  readonly policies: NegotiationPolicies;
}

/** The component name of the room's HITL invocations (origin `internal`). */
export const ROOM_COMPONENT = 'room';
/** What the critics' notification envelopes carry (message type NEGOTIATION). */
export const REVIEW_REQUEST_CONTENT_TYPE = 'application/json';
export const REVIEW_REQUEST_KIND = 'review_request';
/** The actions the escalation offers, with their meaning for the room (the negotiation webview renders exactly these). */
export const ROOM_HITL_ACTIONS = ['approve', 'modify', 'deny'] as const;
/** WaitForDecision without timeout_seconds waits this long; a longer timeout is cut to the maximum. */
export const DEFAULT_WAIT_MS = 300_000;
export const MAX_WAIT_MS = 3_600_000;
/** At most this many WaitForDecision calls wait on one artifact at once; one more is refused RESOURCE_EXHAUSTED (BUFFER_FULL). */
export const MAX_WAITERS_PER_ARTIFACT = 64;
/** An artifact shown in the HITL context as text: at most this many characters. */
const CONTEXT_EXCERPT_CHARS = 16_384;

interface ContextCut { readonly entries: number; readonly chars: number; readonly excerpt: number; readonly diffs: boolean }
/** How much of the votes' texts, the excerpt and the diff the HITL context holds: the first that fits MAX_INVOCATION_BYTES. */
const CONTEXT_CUTS: readonly ContextCut[] = [
  { entries: 5, chars: 200, excerpt: CONTEXT_EXCERPT_CHARS, diffs: true },
  { entries: 3, chars: 100, excerpt: CONTEXT_EXCERPT_CHARS, diffs: true },
  { entries: 1, chars: 100, excerpt: CONTEXT_EXCERPT_CHARS, diffs: true },
  { entries: 0, chars: 0, excerpt: 4_096, diffs: true },
  { entries: 0, chars: 0, excerpt: 1_024, diffs: false },
  { entries: 0, chars: 0, excerpt: 0, diffs: false },
];
const LIMITS = FIELD_LIMITS.room;
const ACTOR = 'room';

interface Waiter {
  readonly resolve: (d: RoomDecision) => void;
  readonly reject: (e: Error) => void;
  dispose(): void;
}

function invalid(message: string): NegotiationError {
  return new NegotiationError('invalid', 'VALIDATION_ERROR', message);
}

function notFound(message: string): NegotiationError {
  return new NegotiationError('not_found', 'NOT_FOUND', message);
}

function precondition(message: string): NegotiationError {
  return new NegotiationError('precondition', 'FAILED_PRECONDITION', message);
}

function denied(message: string): NegotiationError {
  return new NegotiationError('permission', 'PERMISSION_DENIED', message);
}

function mayActAs(speaker: Speaker, agentId: string): boolean {
  return speaker.kind !== 'agent' || speaker.mayActAs(agentId);
}

function speakerName(speaker: Speaker): string {
  return speaker.kind === 'coordinator' ? 'coordinator' : speaker.label;
}

function identifier(field: string, value: string, max: number): string {
  const refusal = identifierRefusal(field, value, max);
  if (refusal !== undefined) throw invalid(refusal);
  return value;
}

function textList(field: string, list: readonly string[]): string[] {
  if (list.length > LIMITS.vote_list_entries) throw invalid(`${field} holds ${list.length} entries; at most ${LIMITS.vote_list_entries}`);
  list.forEach((entry, i) => {
    if (entry.length > LIMITS.vote_list_entry) throw invalid(`${field}[${i}] is longer than ${LIMITS.vote_list_entry} characters`);
    if (entry.includes('\u0000')) throw invalid(`${field}[${i}] contains NUL`);
  });
  return [...list];
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function key(artifactId: string, revision: number): string {
  return `${revision}#${artifactId}`;
}

/** The UTF-8 text of an artifact when it is text (no U+FFFD, no NUL), else undefined. */
function textOf(bytes: Buffer): string | undefined {
  const text = bytes.toString('utf8');
  return text.includes('\uFFFD') || text.includes('\u0000') ? undefined : text;
}

/**
 * The negotiation room (RFC §17.5, advanced-patterns §3.11.1): producers submit artifacts, the requested critics are
 * notified by a NEGOTIATION envelope and vote, the coordinator aggregates the votes and decides by the policy's
 * thresholds — escalation to a human first (HITL DEBATE_DEADLOCK), then auto-approval, else a revision request.
 * Everything is persisted with its event before it is answered; vote timers and escalations survive a restart.
 */
export class NegotiationRoom implements RoomQueries, Disposable {
  private readonly changed = new Emitter<RoomChange>();
  readonly onDidChange: Event<RoomChange> = this.changed.event;
  private readonly timers = new Map<string, Disposable>();
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly watched = new Set<string>();
  private disposed = false;

  constructor(protected readonly deps: RoomDeps) {}

  // ---------------------------------------------------------------- SubmitProposal

  submitProposal(input: RoomProposalInput, speaker: Speaker, ctx: CallContext): { readonly artifactId: string; readonly roomId: string; readonly revision: number } {
    if (input.artifactType === '' || !ARTIFACT_TYPES.includes(input.artifactType)) {
      throw invalid(`artifact_type must be one of ${ARTIFACT_TYPES.join(', ')} (ARTIFACT_TYPE_UNSPECIFIED is refused)`);
    }
    const producerId = identifier('producer_id', input.producerId.trim(), LIMITS.agent_id);
    if (producerId === '') throw invalid('producer_id is required');
    if (!mayActAs(speaker, producerId)) throw denied(`${speakerName(speaker)} may not submit as producer '${producerId}'`);
    if (this.deps.agents.get(producerId) === undefined) throw notFound(`producer_id '${producerId}' is not a registered agent`);
    if (input.artifactId !== '') identifier('artifact_id', input.artifactId, LIMITS.artifact_id);
    if (input.roomId !== '') identifier('negotiation_room_id', input.roomId, LIMITS.negotiation_room_id);
    const contentType = identifier('artifact_content_type', input.contentType.trim(), LIMITS.artifact_content_type) || 'application/octet-stream';
    if (input.artifact.byteLength === 0) throw invalid('artifact is empty');
    if (input.artifact.byteLength > LIMITS.artifact_bytes) throw invalid(`artifact is ${input.artifact.byteLength} bytes; at most ${LIMITS.artifact_bytes}`);
    const critics = this.checkCritics(input.requestedCritics, producerId);

    const latest = input.artifactId === '' ? undefined : this.deps.store.room.latest(input.artifactId);
    if (latest) {
      if (input.roomId !== '' && input.roomId !== latest.roomId) {
        throw precondition(`artifact '${latest.artifactId}' is in room '${latest.roomId}', not '${input.roomId}'`);
      }
      if (latest.producerId !== producerId) throw denied(`artifact '${latest.artifactId}' was submitted by '${latest.producerId}', not '${producerId}'`);
      // A retry of the latest submission (its answer was lost) answers that revision, in every state: no new revision.
      const identical = latest.artifactType === input.artifactType && latest.contentType === contentType &&
        latest.artifact.equals(input.artifact) && sameList([...latest.requestedCritics].sort(), [...critics].sort());
      if (identical) return { artifactId: latest.artifactId, roomId: latest.roomId, revision: latest.revision };
      if (latest.closed) throw precondition(`artifact '${latest.artifactId}' was rejected by a person (revision ${latest.revision}): no further revision is accepted`);
      if (latest.state !== 'decided') {
        throw precondition(`revision ${latest.revision} of artifact '${latest.artifactId}' is still ${latest.state === 'voting' ? 'being voted on' : 'escalated to a human'}: wait for its decision before submitting another`);
      }
      const decision = this.deps.store.room.decision(latest.artifactId, latest.revision);
      if (decision?.outcome === 'APPROVED') throw precondition(`artifact '${latest.artifactId}' was approved (revision ${latest.revision}): submit a new artifact_id for new work`);
      if (latest.artifactType !== input.artifactType) throw invalid(`artifact '${latest.artifactId}' is a ${latest.artifactType}; a revision may not change its artifact_type`);
    }

    const policy = this.deps.policies.current();
    const now = this.deps.clock.now();
    const artifactId = latest?.artifactId ?? (input.artifactId || this.deps.ids.uuid());
    const roomId = latest?.roomId ?? (input.roomId || this.deps.ids.uuid());
    const revision = (latest?.revision ?? 0) + 1;
    const voteTimeoutMs = policy.room.voteTimeoutMs;
    const proposal: ProposalRecord = {
      roomId, artifactId, revision, artifactType: input.artifactType, producerId, contentType, artifact: Buffer.from(input.artifact),
      requestedCritics: critics, createdAt: input.createdAt ?? now, submittedAt: now,
      voteDeadlineAt: voteTimeoutMs > 0 ? now + voteTimeoutMs : 0, policyVersion: `v${policy.version}`,
      state: 'voting', closed: false, invocationId: null, updatedAt: now,
    };
    const roomCtx: CallContext = { ...ctx, correlationId: roomId };
    this.deps.store.transaction(() => {
      this.deps.store.room.putProposal(proposal);
      const notified: Array<{ critic_id: string; message_id: string }> = [];
      const refused: Array<{ critic_id: string; code: string; reason: string }> = [];
      for (const critic of critics) {
        const sent = this.deps.outbox.sendToAgent({
          to: critic, messageType: 'NEGOTIATION', contentType: REVIEW_REQUEST_CONTENT_TYPE, correlationId: roomId,
          payload: Buffer.from(JSON.stringify(this.reviewRequest(proposal, critic)), 'utf8'),
        }, roomCtx);
        if (sent.accepted) notified.push({ critic_id: critic, message_id: sent.messageId });
        else refused.push({ critic_id: critic, code: sent.code, reason: sent.reason.slice(0, 500) });
      }
      // Nothing was admitted: the transaction rolls back whole (the router holds none of these messages).
      if (notified.length === 0) {
        const first = refused[0];
        throw new NegotiationError(first.code === 'BUFFER_FULL' ? 'exhausted' : first.code === 'OVERSIZE_PAYLOAD' || first.code === 'VALIDATION_ERROR' ? 'invalid' : 'unavailable',
          first.code, `no requested critic could be notified: ${refused.map((r) => `${r.critic_id}: ${r.reason}`).join('; ')}`);
      }
      this.record(roomId, producerId, 'room.proposal_submitted', {
        room_id: roomId, artifact_id: artifactId, revision, artifact_type: proposal.artifactType, producer_id: producerId,
        content_type: contentType, bytes: proposal.artifact.byteLength, requested_critics: critics, notified,
        vote_deadline: proposal.voteDeadlineAt > 0 ? isoUtc(proposal.voteDeadlineAt) : null, policy_version: proposal.policyVersion,
        submitted_by: speakerName(speaker), principal: ctx.principal,
      });
      // A critic whose notification was refused (its inbox is full…) can still vote; the vote timeout escalates otherwise.
      for (const r of refused) this.record(roomId, ACTOR, 'room.critic_not_notified', { room_id: roomId, artifact_id: artifactId, revision, ...r }, 'WARN');
    });
    this.armVoteTimer(proposal);
    this.changed.fire({ roomId, artifactId, state: 'voting' });
    return { artifactId, roomId, revision };
  }

  private checkCritics(list: readonly string[], producerId: string): string[] {
    if (list.length === 0) throw invalid('requested_critics must name at least one critic');
    if (list.length > LIMITS.requested_critics) throw invalid(`requested_critics names ${list.length} critics; at most ${LIMITS.requested_critics}`);
    const seen = new Set<string>();
    list.forEach((raw, i) => {
      const critic = identifier(`requested_critics[${i}]`, raw.trim(), LIMITS.agent_id);
      if (critic === '') throw invalid(`requested_critics[${i}] is empty`);
      if (seen.has(critic)) throw invalid(`requested_critics names '${critic}' twice`);
      if (critic === producerId) throw invalid(`the producer '${producerId}' may not critique its own artifact`);
      const agent = this.deps.agents.get(critic);
      if (!agent) throw notFound(`requested critic '${critic}' is not a registered agent`);
      if (!modalityAccepts(agent.descriptor.modalitiesSupported, REVIEW_REQUEST_CONTENT_TYPE)) {
        throw invalid(`requested critic '${critic}' does not accept ${REVIEW_REQUEST_CONTENT_TYPE} (its modalities_supported), so it cannot be sent the artifact`);
      }
      seen.add(critic);
    });
    return [...seen];
  }

  /** The JSON payload of a critic's NEGOTIATION envelope (README, "Negotiation rooms"). */
  private reviewRequest(p: ProposalRecord, critic: string): Record<string, unknown> {
    return {
      kind: REVIEW_REQUEST_KIND, ts: isoUtc(p.submittedAt), negotiation_room_id: p.roomId, artifact_id: p.artifactId, revision: p.revision,
      artifact_type: p.artifactType, producer_id: p.producerId, critic_id: critic, requested_critics: p.requestedCritics,
      ct: p.contentType, size: p.artifact.byteLength, payload_b64: p.artifact.toString('base64'),
      vote_deadline: p.voteDeadlineAt > 0 ? isoUtc(p.voteDeadlineAt) : null,
    };
  }

  // ---------------------------------------------------------------- SubmitVote

  submitVote(input: VoteInput, speaker: Speaker, ctx: CallContext): { readonly artifactId: string; readonly criticId: string } {
    const artifactId = identifier('artifact_id', input.artifactId, LIMITS.artifact_id);
    if (artifactId === '') throw invalid('artifact_id is required');
    const criticId = identifier('critic_id', input.criticId.trim(), LIMITS.agent_id);
    if (criticId === '') throw invalid('critic_id is required');
    if (!mayActAs(speaker, criticId)) throw denied(`${speakerName(speaker)} may not vote as critic '${criticId}'`);
    if (input.roomId !== '') identifier('negotiation_room_id', input.roomId, LIMITS.negotiation_room_id);
    const proposal = this.current(artifactId, input.roomId);
    if (typeof input.score !== 'number' || !Number.isFinite(input.score) || input.score < 0 || input.score > 10) {
      throw invalid(`score must be a number from 0 to 10, not ${String(input.score)}`);
    }
    if (typeof input.confidence !== 'number' || !Number.isFinite(input.confidence) || input.confidence < 0 || input.confidence > 1) {
      throw invalid(`confidence must be a number from 0 to 1, not ${String(input.confidence)}`);
    }
    const strengths = textList('strengths', input.strengths);
    const weaknesses = textList('weaknesses', input.weaknesses);
    const recommendations = textList('recommendations', input.recommendations);
    const passed = input.passed === true;
    const same = (v: VoteRecord | undefined): boolean => v !== undefined && v.score === input.score && v.confidence === input.confidence &&
      v.passed === passed && sameList(v.strengths, strengths) && sameList(v.weaknesses, weaknesses) && sameList(v.recommendations, recommendations);
    const previous = this.deps.store.room.votes(artifactId, proposal.revision).find((v) => v.criticId === criticId);
    // A retry of the same vote (its answer was lost) changes nothing, whatever the revision's state.
    if (same(previous)) return { artifactId, criticId };
    // A retry of the critic's vote on the previous revision (the producer resubmitted meanwhile) changes nothing either:
    // a vote counts for the revision current when it arrives, so it is not carried over to this one. A vote whose
    // voted_at is at or after this revision's submission was cast for it, however like the earlier one it is.
    if (previous === undefined && proposal.revision > 1 && (input.votedAt === null || input.votedAt < proposal.submittedAt) &&
      same(this.deps.store.room.votes(artifactId, proposal.revision - 1).find((v) => v.criticId === criticId))) {
      return { artifactId, criticId };
    }
    if (!proposal.requestedCritics.includes(criticId)) {
      throw denied(`'${criticId}' is not a requested critic of revision ${proposal.revision} of artifact '${artifactId}' (requested: ${proposal.requestedCritics.join(', ')})`);
    }
    if (input.votedAt !== null && input.votedAt < proposal.submittedAt) {
      throw precondition(`the vote was cast for an earlier revision: its voted_at ${isoUtc(input.votedAt)} is before revision ${proposal.revision} of artifact '${artifactId}' was submitted (${isoUtc(proposal.submittedAt)}); read the revision again and vote on it`);
    }
    if (proposal.state !== 'voting') {
      const decision = this.deps.store.room.decision(artifactId, proposal.revision);
      throw precondition(`revision ${proposal.revision} of artifact '${artifactId}' is ${proposal.state === 'escalated' ? 'escalated to a human' : `decided (${decision?.outcome ?? 'final'})`}: votes are closed`);
    }
    const now = this.deps.clock.now();
    const vote: VoteRecord = {
      roomId: proposal.roomId, artifactId, revision: proposal.revision, criticId, score: input.score, confidence: input.confidence,
      passed, strengths, weaknesses, recommendations, votedAt: input.votedAt ?? now,
      replaced: previous ? previous.replaced + 1 : 0,
    };
    const after: Array<() => void> = [];
    this.deps.store.transaction(() => {
      this.deps.store.room.putVote(vote);
      const details = {
        room_id: proposal.roomId, artifact_id: artifactId, revision: proposal.revision, critic_id: criticId, score: vote.score,
        confidence: vote.confidence, passed: vote.passed, principal: ctx.principal,
      };
      if (previous) {
        this.record(proposal.roomId, criticId, 'room.vote_replaced', {
          ...details, replaced: vote.replaced, previous: { score: previous.score, confidence: previous.confidence, passed: previous.passed, voted_at: isoUtc(previous.votedAt) },
        });
      } else {
        this.record(proposal.roomId, criticId, 'room.vote', details);
      }
      proposal.updatedAt = now;
      const votes = this.deps.store.room.votes(artifactId, proposal.revision);
      if (proposal.requestedCritics.every((c) => votes.some((v) => v.criticId === c))) {
        after.push(this.decide(proposal, votes, [], { correlationId: proposal.roomId, principal: ctx.principal }));
      } else {
        this.deps.store.room.putProposal(proposal);
      }
    });
    for (const fn of after) fn();
    if (after.length === 0) this.changed.fire({ roomId: proposal.roomId, artifactId, state: proposal.state });
    return { artifactId, criticId };
  }

  // ---------------------------------------------------------------- deciding

  /**
   * Inside a transaction: the policy's verdict on a revision's votes, persisted with its event; an escalation opens the
   * HITL invocation in the same transaction. Answers what to run after the commit (waiters, listeners, watching).
   */
  private decide(proposal: ProposalRecord, votes: VoteRecord[], missing: readonly string[], ctx: CallContext): () => void {
    const policy = this.policyOf(proposal);
    const thresholds = policy.room;
    const result = verdict(votes, thresholds, missing);
    const now = this.deps.clock.now();
    const policyVersion = `v${policy.version}`;
    this.clearTimer(proposal);
    if (result.outcome !== 'ESCALATED_TO_HITL') {
      const decision = this.decisionOf(proposal, votes, result, policyVersion, {
        outcome: result.outcome, reason: result.reason, decidedBy: 'policy', final: true, closed: false, hitl: null, decidedAt: now,
      });
      return this.finish(proposal, decision);
    }
    let invocation: HitlInvocation;
    const request = this.escalationRequest(proposal, votes, result, thresholds, policyVersion, missing);
    try {
      invocation = this.deps.hitl.open(request, { kind: 'internal', component: ROOM_COMPONENT }, ctx).invocation;
    } catch (err) {
      // Only HITL's refusal to open (e.g. BUFFER_FULL: the producer already has too many pending invocations) is
      // decided here; anything else is rethrown so that the transaction (the deciding vote with it) rolls back.
      if (!(err instanceof HitlRequestError)) throw err;
      return this.escalationFallback(proposal, votes, result, policyVersion, request, err, now);
    }
    const escalated = this.decisionOf(proposal, votes, result, policyVersion, {
      outcome: 'ESCALATED_TO_HITL', reason: result.reason, decidedBy: 'policy', final: false, closed: false, decidedAt: now,
      hitl: { invocationId: invocation.id, state: 'pending', action: '', origin: '', by: '', rationale: '' },
    });
    proposal.state = 'escalated';
    proposal.invocationId = invocation.id;
    proposal.updatedAt = now;
    this.deps.store.room.putProposal(proposal);
    this.deps.store.room.putDecision(escalated);
    this.record(proposal.roomId, ACTOR, 'room.escalated', {
      room_id: proposal.roomId, artifact_id: proposal.artifactId, revision: proposal.revision, invocation_id: invocation.id,
      reasons: result.escalation, aggregate: aggregateJson(result.aggregate), policy_version: policyVersion,
    }, 'WARN');
    // An operator's auto rule may have decided it inside open().
    if (invocation.state !== 'pending') return this.applyHitl(proposal, invocation);
    return () => {
      this.changed.fire({ roomId: proposal.roomId, artifactId: proposal.artifactId, state: 'escalated' });
      this.watch(invocation.id);
    };
  }

  private decisionOf(p: ProposalRecord, votes: VoteRecord[], v: Verdict, policyVersion: string,
    rest: Pick<RoomDecision, 'outcome' | 'reason' | 'decidedBy' | 'final' | 'closed' | 'hitl' | 'decidedAt'>): RoomDecision {
    return {
      roomId: p.roomId, artifactId: p.artifactId, revision: p.revision, votes, aggregate: v.aggregate, checks: v.checks,
      escalation: v.escalation, policyVersion, ...rest,
    };
  }

  /**
   * Inside a transaction: an escalation HITL refused to open, decided as if no human were available (RFC §15.4): the
   * HITL policy's DEBATE_DEADLOCK fallback (DENY_BY_DEFAULT → REVISION_REQUESTED; AUTO_DECIDE_THRESHOLD approves when
   * weighted_mean / 10 reaches its threshold; EXTEND_TIMEOUT cannot extend what is not open → REVISION_REQUESTED).
   */
  private escalationFallback(proposal: ProposalRecord, votes: VoteRecord[], result: Verdict, policyVersion: string,
    request: InvocationRequest, err: HitlRequestError, now: number): () => void {
    const setting = this.deps.hitl.policy.fallbacks.DEBATE_DEADLOCK;
    const probe: HitlInvocation = {
      id: '', reasonType: request.reasonType, requester: request.requester, correlationId: request.correlationId, subject: request.subject,
      context: request.context, proposedActions: request.proposedActions, suggestedAction: request.suggestedAction, priority: request.priority,
      requestedFallback: request.requestedFallback, origin: { kind: 'internal', component: ROOM_COMPONENT }, createdAt: now, deadlineAt: now,
      originalDeadlineAt: now, extensions: 0, state: 'pending', decision: null, updatedAt: now,
    };
    const fallback = applyFallback(probe, setting, 'hitl_unavailable', now);
    const approve = fallback.kind === 'decide' && fallback.action === 'approve';
    const why = `${err.code}: ${err.message}`.slice(0, 300);
    this.record(proposal.roomId, ACTOR, 'room.escalation_failed', {
      room_id: proposal.roomId, artifact_id: proposal.artifactId, revision: proposal.revision, error: why, reasons: result.escalation,
      fallback_policy: setting.policy, outcome: approve ? 'APPROVED' : 'REVISION_REQUESTED',
    }, 'WARN');
    const decision = this.decisionOf(proposal, votes, result, policyVersion, {
      outcome: approve ? 'APPROVED' : 'REVISION_REQUESTED', decidedBy: 'fallback', final: true, closed: false, hitl: null, decidedAt: now,
      reason: `${result.reason} The escalation could not be opened (${why}): decided by the HITL fallback ${setting.policy} (no human could be asked), ` +
        `${approve ? 'approved' : fallback.kind === 'extend' ? 'revision requested (nothing is open to extend)' : 'revision requested'} — ${fallback.rationale} No person decided.`,
    });
    return this.finish(proposal, decision);
  }

  /**
   * The policy version a revision is decided under: the one recorded on it at submission (its vote timeout came from
   * it too), so that the decision records exactly the version it used; the current one only if that is unreadable.
   */
  private policyOf(proposal: ProposalRecord): PolicySet {
    const n = /^v(\d+)$/.exec(proposal.policyVersion)?.[1];
    return (n !== undefined ? this.deps.policies.version(Number(n)) : undefined) ?? this.deps.policies.current();
  }

  /** Inside a transaction: a final decision persisted with its event; answers what to run after the commit. */
  private finish(proposal: ProposalRecord, decision: RoomDecision): () => void {
    proposal.state = 'decided';
    proposal.closed = decision.closed;
    proposal.updatedAt = decision.decidedAt;
    this.deps.store.room.putProposal(proposal);
    this.deps.store.room.putDecision(decision);
    this.record(proposal.roomId, decision.decidedBy === 'hitl' ? (decision.hitl?.by || ACTOR) : ACTOR, 'room.decided', {
      room_id: proposal.roomId, artifact_id: proposal.artifactId, revision: proposal.revision, outcome: decision.outcome,
      decided_by: decision.decidedBy, closed: decision.closed, policy_version: decision.policyVersion, aggregate: aggregateJson(decision.aggregate),
      checks: decision.checks.map((c) => ({ name: c.name, value: c.value, threshold: c.threshold, pass: c.pass })),
      escalation: decision.escalation, hitl: decision.hitl ?? undefined, reason: decision.reason.slice(0, 2000),
    }, decision.decidedBy === 'fallback' ? 'WARN' : 'INFO');
    return () => {
      this.changed.fire({ roomId: proposal.roomId, artifactId: proposal.artifactId, state: 'decided' });
      const list = this.waiters.get(key(proposal.artifactId, proposal.revision));
      this.waiters.delete(key(proposal.artifactId, proposal.revision));
      for (const w of list ?? []) {
        w.dispose();
        w.resolve(decision);
      }
    };
  }

  /** Inside a transaction: a settled escalation becomes the revision's final decision. */
  private applyHitl(proposal: ProposalRecord, invocation: Pick<HitlInvocation, 'id' | 'state' | 'decision'>): () => void {
    const escalated = this.deps.store.room.decision(proposal.artifactId, proposal.revision);
    const d = invocation.decision;
    const action = d?.action ?? 'deny';
    const origin = d?.origin.kind ?? 'cancel';
    const human = origin === 'human';
    const decidedBy: RoomDecision['decidedBy'] = human ? 'hitl' : origin === 'rule' ? 'policy' : 'fallback';
    const outcome = action === 'approve' ? 'APPROVED' : 'REVISION_REQUESTED';
    // Only a person's deny closes the artifact; a fallback's deny (nobody looked at it) asks for a revision.
    const closed = human && action === 'deny';
    const hitl: RoomHitlOutcome = {
      invocationId: invocation.id, state: invocation.state === 'pending' ? 'cancelled' : invocation.state, action, origin, by: d?.origin.by ?? '', rationale: d?.rationale ?? '',
      ...(origin === 'fallback' ? { fallbackPolicy: d?.origin.policy ?? '', trigger: d?.origin.trigger ?? '' } : {}),
    };
    const who = human ? `${hitl.by} (a person)` : origin === 'rule' ? `the HITL auto rule '${d?.origin.rule ?? ''}'` :
      origin === 'fallback' ? `the HITL fallback ${hitl.fallbackPolicy} (${hitl.trigger === 'hitl_unavailable' ? 'no human was available' : 'the decision deadline passed'}), not a person` :
        `nobody: the invocation was cancelled`;
    const meaning = action === 'approve' ? 'approved' : action === 'modify' ? 'revision requested' : action === 'defer' ? 'deferred: revision requested' :
      closed ? 'rejected: no further revision is accepted' : 'denied: revision requested';
    const votes = escalated?.votes ? [...escalated.votes] : this.deps.store.room.votes(proposal.artifactId, proposal.revision);
    const agg = escalated?.aggregate ?? aggregate(votes);
    const decision: RoomDecision = {
      roomId: proposal.roomId, artifactId: proposal.artifactId, revision: proposal.revision, outcome, votes, aggregate: agg,
      checks: escalated?.checks ?? [], escalation: escalated?.escalation ?? [], policyVersion: escalated?.policyVersion ?? proposal.policyVersion,
      reason: `${escalated?.reason ?? 'Escalated to a human.'} Decided by ${who}: ${meaning}${hitl.rationale ? ` — ${hitl.rationale.slice(0, 1000)}` : ''}.`,
      decidedBy, final: true, closed, hitl, decidedAt: d?.decidedAt ?? this.deps.clock.now(),
    };
    return this.finish(proposal, decision);
  }

  /** Applies the invocation's answer when it settles (whenever: the same call restore() makes after a restart). */
  private watch(invocationId: string): void {
    if (this.watched.has(invocationId)) return;
    this.watched.add(invocationId);
    this.deps.hitl.whenSettled(invocationId).then((invocation) => {
      this.watched.delete(invocationId);
      this.settled(invocation);
    }, () => { this.watched.delete(invocationId); /* the coordinator is stopping: restore() applies it at the next start */ });
  }

  private settled(invocation: HitlInvocation): void {
    if (this.disposed) return;
    const artifactId = typeof invocation.context.facts.artifact_id === 'string' ? invocation.context.facts.artifact_id : '';
    const proposal = artifactId === '' ? undefined : this.deps.store.room.latest(artifactId);
    if (!proposal || proposal.state !== 'escalated' || proposal.invocationId !== invocation.id) return;
    try {
      const after = this.deps.store.transaction(() => this.applyHitl(proposal, invocation));
      after();
    } catch (err) {
      this.deps.log.internalError(ACTOR, proposal.roomId, err);
    }
  }

  /**
   * The HITL DEBATE_DEADLOCK invocation of an escalation (README, "Negotiation rooms": the context JSON). Its context is
   * kept within a HITL invocation's MAX_INVOCATION_BYTES, measured as UTF-8 JSON: the votes' texts are cut first, then
   * the excerpt and the diff (`context_trimmed` says so); the editor shows the votes and the artifact whole.
   */
  private escalationRequest(p: ProposalRecord, votes: readonly VoteRecord[], v: Verdict, t: RoomThresholds, policyVersion: string, missing: readonly string[]): InvocationRequest {
    const text = textOf(p.artifact);
    const previous = p.revision > 1 ? this.deps.store.room.revision(p.artifactId, p.revision - 1) : undefined;
    const previousText = previous ? textOf(previous.artifact) : undefined;
    let request: InvocationRequest | undefined;
    for (const [level, cut] of CONTEXT_CUTS.entries()) {
      request = this.escalationRequestCut(p, votes, v, t, policyVersion, missing, text, previousText, cut, level > 0);
      if (Buffer.byteLength(JSON.stringify(request.context)) <= MAX_INVOCATION_BYTES) return request;
    }
    return request!;
  }

  private escalationRequestCut(p: ProposalRecord, votes: readonly VoteRecord[], v: Verdict, t: RoomThresholds, policyVersion: string,
    missing: readonly string[], text: string | undefined, previousText: string | undefined, c: ContextCut, trimmed: boolean): InvocationRequest {
    const cut = (list: readonly string[]) => list.slice(0, c.entries).map((s) => s.slice(0, c.chars));
    const excerpt = text !== undefined && c.excerpt > 0 ? { artifact_excerpt: text.slice(0, c.excerpt), artifact_excerpt_cut: text.length > c.excerpt } : {};
    const facts = {
      negotiation_room_id: p.roomId, artifact_id: p.artifactId, revision: p.revision, artifact_type: p.artifactType, producer_id: p.producerId,
      content_type: p.contentType, artifact_bytes: p.artifact.byteLength,
      aggregate: aggregateJson(v.aggregate),
      thresholds: thresholdsJson(t),
      checks: v.checks.map((x) => ({ name: x.name, value: x.value, threshold: x.threshold, pass: x.pass })),
      escalation_reasons: v.escalation,
      votes: votes.map((x) => ({
        critic_id: x.criticId, score: x.score, confidence: x.confidence, passed: x.passed,
        strengths: cut(x.strengths), weaknesses: cut(x.weaknesses), recommendations: cut(x.recommendations),
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
    const diffs = c.diffs && text !== undefined && previousText !== undefined && text.length <= CONTEXT_EXCERPT_CHARS / 2 && previousText.length <= CONTEXT_EXCERPT_CHARS / 2
      ? [{ title: `${p.artifactId}: revision ${p.revision - 1} → ${p.revision}`, before: previousText, after: text }] : [];
    const summary = `Negotiation room ${p.roomId.slice(0, 80)}: ${p.artifactType} artifact ${p.artifactId.slice(0, 80)} (revision ${p.revision}, by ${p.producerId}) needs a person: ${v.escalation.map((r) => r.split(':')[0]).join(', ')}.`;
    return parseInvocationRequest({
      reason_type: 'DEBATE_DEADLOCK',
      summary: summary.slice(0, FIELD_LIMITS.hitl.summary),
      facts,
      diffs,
      risk_notes: ['approve → APPROVED; modify → REVISION_REQUESTED (Request Revision); deny → rejected (closed: no further revision). A fallback (no answer in time, no human available) is recorded as a fallback, never as a person\'s approval.'],
      proposed_actions: [...ROOM_HITL_ACTIONS],
      suggested_action: '',
      // AUTO_DECIDE_THRESHOLD reads a score in [0,1]: the weighted mean on the 0–10 scale, divided by 10.
      score: Math.min(1, Math.max(0, v.aggregate.weightedMean / 10)),
    }, { requester: p.producerId, correlationId: p.roomId, now: this.deps.clock.now() });
  }

  // ---------------------------------------------------------------- reads and waiting

  /**
   * The current revision's votes. With a `reader` (an RPC's caller): only the producer, the operator and, once the
   * revision is decided, its requested critics may read them (a critic may not read the others' votes before the
   * decision); PERMISSION_DENIED naming why otherwise. Without one (the editor): everything.
   */
  getVotes(artifactId: string, roomId: string, reader?: Speaker): VoteRecord[] {
    const proposal = this.current(artifactId, roomId);
    const refusal = reader === undefined ? undefined : this.voteReadRefusal(proposal, reader);
    if (refusal !== undefined) throw denied(refusal);
    return this.deps.store.room.votes(proposal.artifactId, proposal.revision);
  }

  /**
   * The current revision's newest decision (ESCALATED_TO_HITL while a human decides), undefined while voting. A final
   * decision is answered whole; while it is not final, a `reader` that may not read the votes (getVotes) gets it
   * without them.
   */
  getDecision(artifactId: string, roomId: string, reader?: Speaker): RoomDecision | undefined {
    const proposal = this.current(artifactId, roomId);
    const decision = this.deps.store.room.decision(proposal.artifactId, proposal.revision);
    if (decision && !decision.final && reader !== undefined && this.voteReadRefusal(proposal, reader) !== undefined) {
      return { ...decision, votes: [] };
    }
    return decision;
  }

  /** Why `reader` may not read the revision's votes, undefined when it may. */
  private voteReadRefusal(proposal: ProposalRecord, reader: Speaker): string | undefined {
    if (reader.kind !== 'agent' || reader.mayActAs(proposal.producerId)) return undefined;
    const critic = proposal.requestedCritics.find((c) => reader.mayActAs(c));
    if (critic !== undefined) {
      return proposal.state === 'decided' ? undefined
        : `${speakerName(reader)} (critic '${critic}') may not read the other critics' votes on revision ${proposal.revision} of artifact '${proposal.artifactId}' before the revision is decided`;
    }
    return `only the producer, the operator and (once the revision is decided) the requested critics may read the votes of artifact '${proposal.artifactId}'; ${speakerName(reader)} is none of them`;
  }

  /**
   * Resolves with the current revision's final decision (at once when there is one); NegotiationError 'deadline' after
   * timeoutMs (0 = DEFAULT_WAIT_MS; at most MAX_WAIT_MS), on the injected clock; 'unavailable' when the signal aborts
   * or the coordinator stops (call again: the decision is persisted, or the wait continues on the persisted state).
   */
  waitForDecision(artifactId: string, roomId: string, timeoutMs: number, signal?: AbortSignal): Promise<RoomDecision> {
    let proposal: ProposalRecord;
    try {
      proposal = this.current(artifactId, roomId);
    } catch (err) {
      return Promise.reject(err);
    }
    const decided = this.deps.store.room.decision(proposal.artifactId, proposal.revision);
    if (decided?.final) return Promise.resolve(decided);
    if (this.disposed) return Promise.reject(new NegotiationError('unavailable', 'UNAVAILABLE', 'the coordinator is stopping'));
    const waiting = this.waiterCount(proposal.artifactId);
    if (waiting >= MAX_WAITERS_PER_ARTIFACT) {
      return Promise.reject(new NegotiationError('exhausted', 'BUFFER_FULL',
        `${waiting} WaitForDecision calls already wait on artifact '${proposal.artifactId}' (at most ${MAX_WAITERS_PER_ARTIFACT}); poll GetDecision or wait again later`));
    }
    const waitMs = timeoutMs > 0 ? Math.min(timeoutMs, MAX_WAIT_MS) : DEFAULT_WAIT_MS;
    const k = key(proposal.artifactId, proposal.revision);
    return new Promise<RoomDecision>((resolve, reject) => {
      const set = this.waiters.get(k) ?? new Set<Waiter>();
      this.waiters.set(k, set);
      const onAbort = () => {
        waiter.dispose();
        set.delete(waiter);
        if (set.size === 0 && this.waiters.get(k) === set) this.waiters.delete(k);
        reject(new NegotiationError('unavailable', 'CANCELLED', 'the wait was cancelled'));
      };
      const timer = this.deps.clock.setTimer(waitMs, () => {
        waiter.dispose();
        set.delete(waiter);
        if (set.size === 0 && this.waiters.get(k) === set) this.waiters.delete(k);
        reject(new NegotiationError('deadline', 'DEADLINE_EXCEEDED',
          `no final decision on revision ${proposal.revision} of artifact '${proposal.artifactId}' within ${Math.round(waitMs / 1000)} s (it is ${this.deps.store.room.revision(proposal.artifactId, proposal.revision)?.state ?? proposal.state}); call WaitForDecision again`));
      });
      const waiter: Waiter = {
        resolve, reject,
        dispose: () => {
          timer.dispose();
          signal?.removeEventListener('abort', onAbort);
        },
      };
      set.add(waiter);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** How many WaitForDecision calls wait on the artifact now (any revision): the cap's count, and what tests check. */
  waiterCount(artifactId: string): number {
    let n = 0;
    for (const [k, set] of this.waiters) if (k.slice(k.indexOf('#') + 1) === artifactId) n += set.size;
    return n;
  }

  /**
   * SchedulerPolicyService.HitlAction for a room: decides its one pending escalation (the room id, or an artifact id)
   * through HITL as the operator. approve → APPROVED; modify → REVISION_REQUESTED; deny → rejected (closed). Only the
   * operator may decide (a person: RFC §15); the rationale is required.
   */
  hitlAction(roomId: string, action: string, rationale: string, speaker: Speaker, ctx: CallContext): { readonly ok: boolean; readonly reason: string } {
    if (speaker.kind === 'agent') throw denied(`only the operator may decide a room's escalation (${speaker.label} is an agent)`);
    const name = action.trim().toLowerCase();
    if (!(ROOM_HITL_ACTIONS as readonly string[]).includes(name)) throw invalid(`action must be one of ${ROOM_HITL_ACTIONS.join(', ')}, not ${JSON.stringify(action)}`);
    const why = rationale.trim();
    if (why === '') throw invalid('rationale is required: say why (it is recorded in the audit trail and the decision)');
    if (why.length > LIMITS.rationale) throw invalid(`rationale is longer than ${LIMITS.rationale} characters`);
    const pending = this.deps.store.room.escalatedFor(roomId);
    if (pending.length === 0) {
      if (!this.deps.store.room.latest(roomId) && this.deps.store.room.countInRoom(roomId) === 0) throw notFound(`no negotiation room or artifact '${roomId}'`);
      return { ok: false, reason: `FAILED_PRECONDITION: room '${roomId}' has no escalation waiting for a person` };
    }
    if (pending.length > 1) {
      return { ok: false, reason: `FAILED_PRECONDITION: room '${roomId}' has ${pending.length} escalations waiting (${pending.map((p) => p.artifactId).join(', ')}); name the artifact_id instead` };
    }
    const proposal = pending[0];
    const invocationId = proposal.invocationId ?? '';
    let invocation: HitlInvocation;
    try {
      invocation = this.deps.hitl.decide(invocationId, {
        action: name, rationale: why, payload: name === 'modify' ? { outcome: 'REVISION_REQUESTED', artifact_id: proposal.artifactId } : undefined,
      }, speakerName(speaker), ctx);
    } catch (err) {
      if (err instanceof HitlStateError) return { ok: false, reason: `FAILED_PRECONDITION: ${err.message}` };
      if (err instanceof HitlRequestError) throw new NegotiationError(err.code === 'BUFFER_FULL' ? 'exhausted' : 'invalid', err.code, err.message);
      throw err;
    }
    this.settled(invocation);
    const outcome = name === 'approve' ? 'APPROVED' : name === 'modify' ? 'REVISION_REQUESTED' : 'REVISION_REQUESTED (rejected, closed)';
    return { ok: true, reason: `artifact '${proposal.artifactId}' revision ${proposal.revision}: ${outcome}` };
  }

  listArtifacts(limit = 200): RoomArtifactSummary[] {
    return this.deps.store.room.listLatest(limit).map((p) => {
      const decision = this.deps.store.room.decision(p.artifactId, p.revision);
      return {
        roomId: p.roomId, artifactId: p.artifactId, revision: p.revision, artifactType: p.artifactType, producerId: p.producerId,
        state: p.state, votes: this.deps.store.room.votes(p.artifactId, p.revision).length, requested: p.requestedCritics.length,
        outcome: decision?.outcome ?? null, invocationId: p.invocationId, updatedAt: p.updatedAt,
      };
    });
  }

  artifactDetail(artifactId: string): RoomArtifactDetail | undefined {
    const proposal = this.deps.store.room.latest(artifactId);
    if (!proposal) return undefined;
    const votes = this.deps.store.room.votes(artifactId, proposal.revision);
    return {
      proposal,
      previous: proposal.revision > 1 ? this.deps.store.room.revision(artifactId, proposal.revision - 1) : undefined,
      votes,
      aggregate: votes.length > 0 ? aggregate(votes) : null,
      thresholds: this.policyOf(proposal).room,
      decision: this.deps.store.room.decision(artifactId, proposal.revision) ?? null,
    };
  }

  // ---------------------------------------------------------------- restart

  /** At start: vote timers re-armed (a passed deadline decides now), escalations decided while stopped applied. */
  restore(ctx: CallContext): void {
    const unfinished = this.deps.store.room.listUnfinished();
    let voting = 0;
    let escalated = 0;
    for (const proposal of unfinished) {
      try {
        if (proposal.state === 'voting') {
          voting++;
          const votes = this.deps.store.room.votes(proposal.artifactId, proposal.revision);
          if (proposal.requestedCritics.every((c) => votes.some((v) => v.criticId === c))) {
            const after = this.deps.store.transaction(() => this.decide(proposal, votes, [], { correlationId: proposal.roomId }));
            after();
          } else if (proposal.voteDeadlineAt > 0 && proposal.voteDeadlineAt <= this.deps.clock.now()) {
            // The deadline passed while the coordinator was stopped: decided now, not at the clock's next tick.
            this.voteTimedOut(proposal);
          } else {
            this.armVoteTimer(proposal);
          }
        } else if (proposal.state === 'escalated') {
          escalated++;
          const invocation = proposal.invocationId ? this.deps.hitl.get(proposal.invocationId) : undefined;
          if (invocation && invocation.state === 'pending') this.watch(invocation.id);
          else if (invocation) this.settled(invocation);
          else {
            // The invocation is gone (retention): decided as a fallback, never as a person's approval.
            const after = this.deps.store.transaction(() => this.applyHitl(proposal, { id: proposal.invocationId ?? '', state: 'cancelled', decision: null }));
            after();
          }
        }
      } catch (err) {
        this.deps.log.internalError(ACTOR, proposal.roomId, err);
      }
    }
    if (unfinished.length > 0) {
      this.deps.log.record({ correlationId: ctx.correlationId, actor: ACTOR, eventType: 'room.restored', details: { voting, escalated } });
    }
  }

  dispose(): void {
    this.disposed = true;
    for (const timer of this.timers.values()) timer.dispose();
    this.timers.clear();
    for (const set of this.waiters.values()) {
      for (const w of set) {
        w.dispose();
        w.reject(new NegotiationError('unavailable', 'UNAVAILABLE', 'the coordinator is stopping; call WaitForDecision again after it restarts'));
      }
    }
    this.waiters.clear();
    this.changed.dispose();
  }

  // ---------------------------------------------------------------- internals

  /** The artifact's newest revision; NOT_FOUND when unknown or in another room. */
  private current(artifactId: string, roomId: string): ProposalRecord {
    if (artifactId === '') throw invalid('artifact_id is required');
    const proposal = this.deps.store.room.latest(artifactId);
    if (!proposal || (roomId !== '' && proposal.roomId !== roomId)) {
      throw notFound(`no artifact '${artifactId}'${roomId !== '' ? ` in negotiation room '${roomId}'` : ''}`);
    }
    return proposal;
  }

  private armVoteTimer(proposal: ProposalRecord): void {
    if (proposal.voteDeadlineAt <= 0 || this.disposed) return;
    const k = key(proposal.artifactId, proposal.revision);
    this.timers.get(k)?.dispose();
    this.timers.set(k, this.deps.clock.setTimer(Math.max(0, proposal.voteDeadlineAt - this.deps.clock.now()), () => {
      this.timers.delete(k);
      this.voteTimedOut(proposal);
    }));
  }

  /** The vote deadline passed: decided on the votes there are (the missing critics named: vote_timeout escalates). */
  private voteTimedOut(proposal: ProposalRecord): void {
    if (this.disposed) return;
    try {
      const current = this.deps.store.room.revision(proposal.artifactId, proposal.revision);
      if (!current || current.state !== 'voting') return;
      const votes = this.deps.store.room.votes(current.artifactId, current.revision);
      const missing = current.requestedCritics.filter((c) => !votes.some((v) => v.criticId === c));
      const after = this.deps.store.transaction(() => {
        this.record(current.roomId, ACTOR, 'room.vote_timeout', {
          room_id: current.roomId, artifact_id: current.artifactId, revision: current.revision, missing, deadline: isoUtc(current.voteDeadlineAt),
        }, 'WARN');
        return this.decide(current, votes, missing, { correlationId: current.roomId });
      });
      after();
    } catch (err) {
      this.deps.log.internalError(ACTOR, proposal.roomId, err);
    }
  }

  private clearTimer(proposal: ProposalRecord): void {
    const k = key(proposal.artifactId, proposal.revision);
    this.timers.get(k)?.dispose();
    this.timers.delete(k);
  }

  private record(correlationId: string, actor: string, eventType: string, details: Record<string, unknown>, level: 'INFO' | 'WARN' = 'INFO'): void {
    this.deps.log.record({ correlationId, actor, eventType, level, details });
  }
}

export function aggregateJson(a: RoomDecision['aggregate']): Record<string, number> {
  return { mean: a.mean, min_score: a.minScore, max_score: a.maxScore, std_dev: a.stdDev, weighted_mean: a.weightedMean, vote_count: a.voteCount };
}

export function thresholdsJson(t: RoomThresholds): Record<string, unknown> {
  return {
    min_score_threshold: t.minScoreThreshold, min_confidence_threshold: t.minConfidenceThreshold, min_pass_ratio: t.minPassRatio,
    max_std_dev: t.maxStdDev, escalate_below_confidence: t.escalateBelowConfidence, escalate_above_std_dev: t.escalateAboveStdDev,
    vote_timeout_ms: t.voteTimeoutMs, auto_approve: t.autoApprove,
  };
}
