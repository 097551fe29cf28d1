import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable } from '../events';
import type { HitlInvocations } from '../hitl/model';
import type { IdSource } from '../ids';
import { Guard } from '../kernel/guard';
import { KeyedTimers } from '../kernel/timers';
import { CommitEmitter, Transitions, type AfterCommit } from '../kernel/transitions';
import type { EventRecorder } from '../log/model';
import type { PolicyReader, Speaker } from '../policy/model';
import type { AgentDirectory } from '../registry/model';
import type { CoordinatorOutbox } from '../router/model';
import { Decisions } from './decide';
import { Escalations } from './escalations';
import { ACTOR, RoomJournal } from './journal';
import type {
  RoomArtifactDetail,
  RoomArtifactSummary,
  RoomChange,
  RoomDecision,
  RoomQueries,
  RoomStorage,
  VoteRecord,
} from './model';
import { RoomReads } from './queries';
import { restoreRoom } from './restore';
import { Submissions, type RoomProposalInput } from './submit';
import { VoteTimeouts } from './timeouts';
import { Votes, type VoteInput } from './vote';
import { DecisionWaiters } from './waiters';

export { ROOM_COMPONENT } from './decide';
export {
  REVIEW_REQUEST_CONTENT_TYPE,
  REVIEW_REQUEST_KIND,
  ROOM_HITL_ACTIONS,
  aggregateJson,
  thresholdsJson,
} from './notices';
export type { RoomProposalInput } from './submit';
export type { VoteInput } from './vote';
export { DEFAULT_WAIT_MS, MAX_WAITERS_PER_ARTIFACT, MAX_WAIT_MS } from './waiters';

export interface RoomDeps {
  readonly store: RoomStorage;
  readonly log: EventRecorder;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly agents: AgentDirectory;
  readonly outbox: CoordinatorOutbox;
  readonly hitl: HitlInvocations;
  readonly policies: PolicyReader;
}

/**
 * The negotiation room (RFC §17.5, advanced-patterns §3.11.1): producers submit artifacts, the requested critics are
 * notified by a NEGOTIATION envelope and vote, the coordinator aggregates the votes and decides by the policy's
 * thresholds — escalation to a human first (HITL DEBATE_DEADLOCK), then auto-approval, else a revision request.
 * Everything is persisted with its event before it is answered; vote timers and escalations survive a restart.
 *
 * The facade of the room's parts (README.md): each state change is one transition (kernel/transitions.ts).
 */
export class NegotiationRoom implements RoomQueries, Disposable {
  private readonly changed = new CommitEmitter<RoomChange>();
  readonly onDidChange: AfterCommit<RoomChange> = this.changed.event;
  /** Each final decision, told after the change (the waiters listen). */
  private readonly decisions = new CommitEmitter<RoomDecision>();
  private readonly guard: Guard;
  private readonly voteTimers: KeyedTimers<string>;
  private readonly reads: RoomReads;
  private readonly deciding: Decisions;
  private readonly escalations: Escalations;
  private readonly timeouts: VoteTimeouts;
  private readonly submissions: Submissions;
  private readonly votes: Votes;
  private readonly waiters: DecisionWaiters;
  private readonly transitions: Transitions;

  constructor(protected readonly deps: RoomDeps) {
    const { store, log, clock, hitl, policies } = deps;
    const room = store.room;
    this.guard = new Guard((context, err) => log.internalError(ACTOR, context, err));
    this.transitions = new Transitions(store, this.guard);
    this.voteTimers = new KeyedTimers<string>(clock, this.guard);
    const journal = new RoomJournal(log);
    this.reads = new RoomReads({ room, policies });
    this.deciding = new Decisions({
      room,
      policies,
      journal,
      clock,
      hitl,
      voteTimers: this.voteTimers,
      changed: this.changed,
      decisions: this.decisions,
      watch: (invocationId) => this.escalations.watch(invocationId),
    });
    this.escalations = new Escalations({
      room,
      hitl,
      transitions: this.transitions,
      guard: this.guard,
      decisions: this.deciding,
    });
    this.timeouts = new VoteTimeouts({
      room,
      clock,
      journal,
      transitions: this.transitions,
      guard: this.guard,
      timers: this.voteTimers,
      decisions: this.deciding,
    });
    this.submissions = new Submissions({
      room,
      agents: deps.agents,
      outbox: deps.outbox,
      policies,
      clock,
      ids: deps.ids,
      journal,
      transitions: this.transitions,
      timeouts: this.timeouts,
      changed: this.changed,
    });
    this.votes = new Votes({
      room,
      reads: this.reads,
      clock,
      journal,
      transitions: this.transitions,
      decisions: this.deciding,
      changed: this.changed,
    });
    this.waiters = new DecisionWaiters({ clock, guard: this.guard, room, decisions: this.decisions.event });
  }

  // ---------------------------------------------------------------- changes

  submitProposal(
    input: RoomProposalInput,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly artifactId: string; readonly roomId: string; readonly revision: number } {
    return this.submissions.submitProposal(input, speaker, ctx);
  }

  submitVote(
    input: VoteInput,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly artifactId: string; readonly criticId: string } {
    return this.votes.submitVote(input, speaker, ctx);
  }

  /**
   * SchedulerPolicyService.HitlAction for a room: decides its one pending escalation (the room id, or an artifact id)
   * through HITL as the operator. approve → APPROVED; modify → REVISION_REQUESTED; deny → rejected (closed). Only the
   * operator may decide (a person: RFC §15); the rationale is required.
   */
  hitlAction(
    roomId: string,
    action: string,
    rationale: string,
    speaker: Speaker,
    ctx: CallContext,
  ): { readonly ok: boolean; readonly reason: string } {
    return this.escalations.hitlAction(roomId, action, rationale, speaker, ctx);
  }

  // ---------------------------------------------------------------- reads and waiting

  /**
   * The current revision's votes. With a `reader` (an RPC's caller): only the producer, the operator and, once the
   * revision is decided, its requested critics may read them (a critic may not read the others' votes before the
   * decision); PERMISSION_DENIED naming why otherwise. Without one (the editor): everything.
   */
  getVotes(artifactId: string, roomId: string, reader?: Speaker): VoteRecord[] {
    return this.reads.getVotes(artifactId, roomId, reader);
  }

  /**
   * The current revision's newest decision (ESCALATED_TO_HITL while a human decides), undefined while voting. A final
   * decision is answered whole; while it is not final, a `reader` that may not read the votes (getVotes) gets it
   * without them.
   */
  getDecision(artifactId: string, roomId: string, reader?: Speaker): RoomDecision | undefined {
    return this.reads.getDecision(artifactId, roomId, reader);
  }

  /**
   * Resolves with the current revision's final decision (at once when there is one); NegotiationError 'deadline' after
   * timeoutMs (0 = DEFAULT_WAIT_MS; at most MAX_WAIT_MS), on the injected clock; 'unavailable' when the signal aborts
   * or the coordinator stops (call again: the decision is persisted, or the wait continues on the persisted state).
   */
  waitForDecision(artifactId: string, roomId: string, timeoutMs: number, signal?: AbortSignal): Promise<RoomDecision> {
    let proposal;
    try {
      proposal = this.reads.current(artifactId, roomId);
    } catch (err) {
      return Promise.reject(err);
    }
    const decided = this.deps.store.room.decision(proposal.artifactId, proposal.revision);
    if (decided?.final) return Promise.resolve(decided);
    return this.waiters.wait(proposal, timeoutMs, signal);
  }

  /** How many WaitForDecision calls wait on the artifact now (any revision): the cap's count, and what tests check. */
  waiterCount(artifactId: string): number {
    return this.waiters.count(artifactId);
  }

  listArtifacts(limit = 200): RoomArtifactSummary[] {
    return this.reads.listArtifacts(limit);
  }

  artifactDetail(artifactId: string): RoomArtifactDetail | undefined {
    return this.reads.artifactDetail(artifactId);
  }

  // ---------------------------------------------------------------- restart

  /** At start: vote timers re-armed (a passed deadline decides now), escalations decided while stopped applied. */
  restore(ctx: CallContext): void {
    restoreRoom(
      {
        room: this.deps.store.room,
        hitl: this.deps.hitl,
        clock: this.deps.clock,
        log: this.deps.log,
        transitions: this.transitions,
        guard: this.guard,
        decisions: this.deciding,
        timeouts: this.timeouts,
        escalations: this.escalations,
      },
      ctx,
    );
  }

  dispose(): void {
    this.guard.stop();
    this.voteTimers.clear();
    this.waiters.dispose();
    this.changed.dispose();
    this.decisions.dispose();
  }
}
