import type { Clock } from '../clock';
import type { CallContext } from '../context';
import {
  type HitlInvocation,
  type HitlInvocations,
  HitlRequestError,
  type InvocationRequest,
  applyFallback,
} from '../hitl/model';
import type { CommitEmitter, Transition } from '../kernel/transitions';
import type { KeyedTimers } from '../kernel/timers';
import { verdict, type Verdict } from './aggregate';
import { ACTOR, type RoomJournal } from './journal';
import type { ProposalRecord, RoomChange, RoomDecision, RoomRepository, VoteRecord } from './model';
import { aggregateJson, escalationRequest } from './notices';
import { policyOf, type RoomReadDeps } from './queries';
import { decided, decisionOf, escalated, hitlDecision, revisionKey } from './state';

/** The component name of the room's HITL invocations (origin `internal`). */
export const ROOM_COMPONENT = 'room';

/** What deciding uses: the room's tables, the log, the clock, HITL (to open an escalation), and the room's memory. */
export interface DecideDeps {
  readonly room: Pick<RoomRepository, 'putProposal' | 'putDecision' | 'decision' | 'votes' | 'revision'>;
  readonly policies: RoomReadDeps['policies'];
  readonly journal: RoomJournal;
  readonly clock: Pick<Clock, 'now'>;
  readonly hitl: Pick<HitlInvocations, 'open' | 'policy'>;
  readonly voteTimers: KeyedTimers<string>;
  readonly changed: CommitEmitter<RoomChange>;
  /** Each final decision, after the change: the WaitForDecision waiters. */
  readonly decisions: CommitEmitter<RoomDecision>;
  /** Applies the invocation's answer once it settles (after the commit that opened it). */
  readonly watch: (invocationId: string) => void;
}

/**
 * Deciding a revision, inside its transition: the policy's verdict on the votes (approve, request a revision, or
 * escalate to a person through HITL DEBATE_DEADLOCK, opened in the same transaction), the fallback when HITL refuses
 * to open, a settled escalation's answer; each decision persisted with its event, the views and waiters told after.
 */
export class Decisions {
  constructor(private readonly deps: DecideDeps) {}

  /**
   * The policy's verdict on a revision's votes, persisted with its event; an escalation opens the HITL invocation in
   * the same transaction. `missing`: the critics that did not vote (the vote timeout).
   */
  decide(
    tx: Transition,
    proposal: ProposalRecord,
    votes: VoteRecord[],
    missing: readonly string[],
    ctx: CallContext,
  ): void {
    const policy = policyOf(this.deps.policies, proposal);
    const thresholds = policy.room;
    const result = verdict(votes, thresholds, missing);
    const now = this.deps.clock.now();
    const policyVersion = `v${policy.version}`;
    tx.disarm(this.deps.voteTimers, revisionKey(proposal.artifactId, proposal.revision));
    if (result.outcome !== 'ESCALATED_TO_HITL') {
      const decision = decisionOf(proposal, votes, result, policyVersion, {
        outcome: result.outcome,
        reason: result.reason,
        decidedBy: 'policy',
        final: true,
        closed: false,
        hitl: null,
        decidedAt: now,
      });
      this.finish(tx, proposal, decision);
      return;
    }
    let invocation: HitlInvocation;
    const previous =
      proposal.revision > 1 ? this.deps.room.revision(proposal.artifactId, proposal.revision - 1) : undefined;
    const request = escalationRequest(
      { proposal, previous, votes, verdict: result, thresholds, policyVersion, missing },
      this.deps.clock.now(),
    );
    try {
      invocation = this.deps.hitl.open(request, { kind: 'internal', component: ROOM_COMPONENT }, ctx).invocation;
    } catch (err) {
      // Only HITL's refusal to open (e.g. BUFFER_FULL: the producer already has too many pending invocations) is
      // decided here; anything else is rethrown so that the transaction (the deciding vote with it) rolls back.
      if (!(err instanceof HitlRequestError)) throw err;
      this.escalationFallback(tx, proposal, votes, result, policyVersion, request, err, now);
      return;
    }
    const decision = decisionOf(proposal, votes, result, policyVersion, {
      outcome: 'ESCALATED_TO_HITL',
      reason: result.reason,
      decidedBy: 'policy',
      final: false,
      closed: false,
      decidedAt: now,
      hitl: { invocationId: invocation.id, state: 'pending', action: '', origin: '', by: '', rationale: '' },
    });
    const next = escalated(proposal, invocation.id, now);
    this.deps.room.putProposal(next);
    this.deps.room.putDecision(decision);
    this.deps.journal.record(
      next.roomId,
      ACTOR,
      'room.escalated',
      {
        room_id: next.roomId,
        artifact_id: next.artifactId,
        revision: next.revision,
        invocation_id: invocation.id,
        reasons: result.escalation,
        aggregate: aggregateJson(result.aggregate),
        policy_version: policyVersion,
      },
      'WARN',
    );
    // An operator's auto rule may have decided it inside open().
    if (invocation.state !== 'pending') {
      this.applyHitl(tx, next, invocation);
      return;
    }
    tx.notify<RoomChange>(this.deps.changed, { roomId: next.roomId, artifactId: next.artifactId, state: 'escalated' });
    const invocationId = invocation.id;
    tx.after(() => this.deps.watch(invocationId));
  }

  /** A settled escalation becomes the revision's final decision. */
  applyHitl(
    tx: Transition,
    proposal: ProposalRecord,
    invocation: Pick<HitlInvocation, 'id' | 'state' | 'decision'>,
  ): void {
    const escalation = this.deps.room.decision(proposal.artifactId, proposal.revision);
    const decision = hitlDecision(
      proposal,
      escalation,
      invocation,
      () => this.deps.room.votes(proposal.artifactId, proposal.revision),
      this.deps.clock.now(),
    );
    this.finish(tx, proposal, decision);
  }

  /**
   * An escalation HITL refused to open, decided as if no human were available (RFC §15.4): the HITL policy's
   * DEBATE_DEADLOCK fallback (DENY_BY_DEFAULT → REVISION_REQUESTED; AUTO_DECIDE_THRESHOLD approves when
   * weighted_mean / 10 reaches its threshold; EXTEND_TIMEOUT cannot extend what is not open → REVISION_REQUESTED).
   */
  private escalationFallback(
    tx: Transition,
    proposal: ProposalRecord,
    votes: VoteRecord[],
    result: Verdict,
    policyVersion: string,
    request: InvocationRequest,
    err: HitlRequestError,
    now: number,
  ): void {
    const setting = this.deps.hitl.policy.fallbacks.DEBATE_DEADLOCK;
    const probe: HitlInvocation = {
      id: '',
      reasonType: request.reasonType,
      requester: request.requester,
      correlationId: request.correlationId,
      subject: request.subject,
      context: request.context,
      proposedActions: request.proposedActions,
      suggestedAction: request.suggestedAction,
      priority: request.priority,
      requestedFallback: request.requestedFallback,
      origin: { kind: 'internal', component: ROOM_COMPONENT },
      createdAt: now,
      deadlineAt: now,
      originalDeadlineAt: now,
      extensions: 0,
      state: 'pending',
      decision: null,
      updatedAt: now,
    };
    const fallback = applyFallback(probe, setting, 'hitl_unavailable', now);
    const approve = fallback.kind === 'decide' && fallback.action === 'approve';
    const why = `${err.code}: ${err.message}`.slice(0, 300);
    this.deps.journal.record(
      proposal.roomId,
      ACTOR,
      'room.escalation_failed',
      {
        room_id: proposal.roomId,
        artifact_id: proposal.artifactId,
        revision: proposal.revision,
        error: why,
        reasons: result.escalation,
        fallback_policy: setting.policy,
        outcome: approve ? 'APPROVED' : 'REVISION_REQUESTED',
      },
      'WARN',
    );
    const decision = decisionOf(proposal, votes, result, policyVersion, {
      outcome: approve ? 'APPROVED' : 'REVISION_REQUESTED',
      decidedBy: 'fallback',
      final: true,
      closed: false,
      hitl: null,
      decidedAt: now,
      reason:
        `${result.reason} The escalation could not be opened (${why}): decided by the HITL fallback ${setting.policy} (no human could be asked), ` +
        `${approve ? 'approved' : fallback.kind === 'extend' ? 'revision requested (nothing is open to extend)' : 'revision requested'} — ${fallback.rationale} No person decided.`,
    });
    this.finish(tx, proposal, decision);
  }

  /** A final decision persisted with its event; the views, then the waiters, told after the commit. */
  private finish(tx: Transition, proposal: ProposalRecord, decision: RoomDecision): void {
    const next = decided(proposal, decision);
    this.deps.room.putProposal(next);
    this.deps.room.putDecision(decision);
    this.deps.journal.record(
      next.roomId,
      decision.decidedBy === 'hitl' ? decision.hitl?.by || ACTOR : ACTOR,
      'room.decided',
      {
        room_id: next.roomId,
        artifact_id: next.artifactId,
        revision: next.revision,
        outcome: decision.outcome,
        decided_by: decision.decidedBy,
        closed: decision.closed,
        policy_version: decision.policyVersion,
        aggregate: aggregateJson(decision.aggregate),
        checks: decision.checks.map((c) => ({ name: c.name, value: c.value, threshold: c.threshold, pass: c.pass })),
        escalation: decision.escalation,
        hitl: decision.hitl ?? undefined,
        reason: decision.reason.slice(0, 2000),
      },
      decision.decidedBy === 'fallback' ? 'WARN' : 'INFO',
    );
    tx.notify<RoomChange>(this.deps.changed, { roomId: next.roomId, artifactId: next.artifactId, state: 'decided' });
    tx.notify(this.deps.decisions, decision);
  }
}
