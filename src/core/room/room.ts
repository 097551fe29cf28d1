import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { HitlService } from '../hitl/hitlService';
import type { IdSource } from '../ids';
import type { EventLog } from '../log/eventLog';
import type { NegotiationPolicies } from '../policy/policies';
import type { Speaker } from '../policy/speaker';
import type { AgentDirectory } from '../registry/model';
import type { CoordinatorOutbox } from '../router/model';
import type { ArtifactType, RoomArtifactDetail, RoomArtifactSummary, RoomChange, RoomDecision, RoomQueries, RoomStorage, VoteRecord } from './model';

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

export interface VoteInput {
  readonly artifactId: string;
  readonly criticId: string;
  readonly score: number;
  readonly confidence: number;
  readonly passed: boolean;
  readonly strengths: readonly string[];
  readonly weaknesses: readonly string[];
  readonly recommendations: readonly string[];
  /** '' = the artifact's room. */
  readonly roomId: string;
  readonly votedAt: number | null;
}

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

/**
 * The negotiation room (RFC §17.5): proposals, critics' votes, aggregation, auto-approval and auto-escalation,
 * decisions, WaitForDecision. Skeleton on the base branch: part R builds it.
 */
export class NegotiationRoom implements RoomQueries, Disposable {
  private readonly changed = new Emitter<RoomChange>();
  readonly onDidChange: Event<RoomChange> = this.changed.event;

  constructor(protected readonly deps: RoomDeps) {}

  submitProposal(input: RoomProposalInput, speaker: Speaker, ctx: CallContext): { readonly artifactId: string; readonly roomId: string; readonly revision: number } { void input; void speaker; void ctx; throw new Error('not built yet'); }
  submitVote(input: VoteInput, speaker: Speaker, ctx: CallContext): { readonly artifactId: string; readonly criticId: string } { void input; void speaker; void ctx; throw new Error('not built yet'); }
  /** The current revision's votes. */
  getVotes(artifactId: string, roomId: string): VoteRecord[] { void artifactId; void roomId; throw new Error('not built yet'); }
  /** The current revision's newest decision (ESCALATED_TO_HITL while a human decides), undefined while voting. */
  getDecision(artifactId: string, roomId: string): RoomDecision | undefined { void artifactId; void roomId; throw new Error('not built yet'); }
  /** Resolves with the current revision's final decision; NegotiationError 'deadline' after timeoutMs (0 = the default). */
  waitForDecision(artifactId: string, roomId: string, timeoutMs: number, signal?: AbortSignal): Promise<RoomDecision> { void artifactId; void roomId; void timeoutMs; void signal; throw new Error('not built yet'); }
  /** SchedulerPolicyService.HitlAction for a room id: decides its one pending escalation. */
  hitlAction(roomId: string, action: string, rationale: string, speaker: Speaker, ctx: CallContext): { readonly ok: boolean; readonly reason: string } { void roomId; void action; void rationale; void speaker; void ctx; throw new Error('not built yet'); }
  listArtifacts(limit?: number): RoomArtifactSummary[] { void limit; return []; }
  artifactDetail(artifactId: string): RoomArtifactDetail | undefined { void artifactId; return undefined; }
  /** At start: vote timers re-armed, escalations decided while stopped applied. */
  restore(ctx: CallContext): void { void ctx; }

  dispose(): void {
    this.changed.dispose();
  }
}
