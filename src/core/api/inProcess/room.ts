import type { ProposalRecord, RoomArtifactSummary } from '../../room/model';
import type { ProposalView, RoomApi, RoomArtifactDetailView } from '../sections/room';
import type { InProcessHost } from './host';
import { boundedLimit, DEFAULT_LIST, payloadText, withoutKey } from './views';

/** CoordinatorApi's room section over a coordinator in this thread (its changes arrive through the negotiation section). */
export function roomSection(host: InProcessHost): RoomApi {
  return {
    roomArtifacts(limit = DEFAULT_LIST): Promise<RoomArtifactSummary[]> {
      return host.run((c) => c.room.listArtifacts(boundedLimit(limit)));
    },

    roomArtifactDetail(artifactId: string): Promise<RoomArtifactDetailView | undefined> {
      return host.run((c) => {
        const detail = c.room.artifactDetail(artifactId);
        if (!detail) return undefined;
        return {
          proposal: proposalView(detail.proposal),
          previous: detail.previous && proposalView(detail.previous),
          votes: detail.votes,
          aggregate: detail.aggregate,
          thresholds: detail.thresholds,
          decision: detail.decision,
        };
      });
    },
  };
}

function proposalView(proposal: ProposalRecord): ProposalView {
  return { ...withoutKey(proposal, 'artifact'), artifact: payloadText(proposal.artifact, proposal.contentType) };
}
