import type { PolicyReader, PolicySet, Speaker } from '../policy/model';
import { voteReadRefusal } from './access';
import { aggregate } from './aggregate';
import { denied, invalid, notFound } from './checks';
import type {
  ProposalRecord,
  RoomArtifactDetail,
  RoomArtifactSummary,
  RoomDecision,
  RoomRepository,
  VoteRecord,
} from './model';
import { policyVersionOf } from './state';

/** What the reads use: the room's tables and the policy versions. */
export interface RoomReadDeps {
  readonly room: Pick<RoomRepository, 'latest' | 'revision' | 'votes' | 'decision' | 'listLatest'>;
  readonly policies: Pick<PolicyReader, 'current' | 'version'>;
}

/**
 * The policy version a revision is decided under: the one recorded on it at submission (its vote timeout came from
 * it too), so that the decision records exactly the version it used; the current one only if that is unreadable.
 */
export function policyOf(policies: RoomReadDeps['policies'], proposal: ProposalRecord): PolicySet {
  const n = policyVersionOf(proposal);
  return (n !== undefined ? policies.version(n) : undefined) ?? policies.current();
}

/** The room's reads: an artifact's current revision, its votes and decision (as the reader may see them), the views' rows. */
export class RoomReads {
  constructor(private readonly deps: RoomReadDeps) {}

  /** The artifact's newest revision; NOT_FOUND when unknown or in another room. */
  current(artifactId: string, roomId: string): ProposalRecord {
    if (artifactId === '') throw invalid('artifact_id is required');
    const proposal = this.deps.room.latest(artifactId);
    if (!proposal || (roomId !== '' && proposal.roomId !== roomId)) {
      throw notFound(`no artifact '${artifactId}'${roomId !== '' ? ` in negotiation room '${roomId}'` : ''}`);
    }
    return proposal;
  }

  /** See NegotiationRoom.getVotes. */
  getVotes(artifactId: string, roomId: string, reader?: Speaker): VoteRecord[] {
    const proposal = this.current(artifactId, roomId);
    const refusal = reader === undefined ? undefined : voteReadRefusal(proposal, reader);
    if (refusal !== undefined) throw denied(refusal);
    return this.deps.room.votes(proposal.artifactId, proposal.revision);
  }

  /** See NegotiationRoom.getDecision. */
  getDecision(artifactId: string, roomId: string, reader?: Speaker): RoomDecision | undefined {
    const proposal = this.current(artifactId, roomId);
    const decision = this.deps.room.decision(proposal.artifactId, proposal.revision);
    if (decision && !decision.final && reader !== undefined && voteReadRefusal(proposal, reader) !== undefined) {
      return { ...decision, votes: [] };
    }
    return decision;
  }

  listArtifacts(limit = 200): RoomArtifactSummary[] {
    return this.deps.room.listLatest(limit).map((p) => {
      const decision = this.deps.room.decision(p.artifactId, p.revision);
      return {
        roomId: p.roomId,
        artifactId: p.artifactId,
        revision: p.revision,
        artifactType: p.artifactType,
        producerId: p.producerId,
        state: p.state,
        votes: this.deps.room.votes(p.artifactId, p.revision).length,
        requested: p.requestedCritics.length,
        outcome: decision?.outcome ?? null,
        invocationId: p.invocationId,
        updatedAt: p.updatedAt,
      };
    });
  }

  artifactDetail(artifactId: string): RoomArtifactDetail | undefined {
    const proposal = this.deps.room.latest(artifactId);
    if (!proposal) return undefined;
    const votes = this.deps.room.votes(artifactId, proposal.revision);
    return {
      proposal,
      previous: proposal.revision > 1 ? this.deps.room.revision(artifactId, proposal.revision - 1) : undefined,
      votes,
      aggregate: votes.length > 0 ? aggregate(votes) : null,
      thresholds: policyOf(this.deps.policies, proposal).room,
      decision: this.deps.room.decision(artifactId, proposal.revision) ?? null,
    };
  }
}
