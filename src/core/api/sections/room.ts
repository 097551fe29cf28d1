import type { RoomThresholds } from '../../policy/model';
import type { AggregatedScore, ProposalRecord, RoomArtifactSummary, RoomDecision, VoteRecord } from '../../room/model';
import type { PayloadText } from './payloadText';

/**
 * The negotiation room (RFC §17.5): artifacts, their votes and decisions; their changes arrive as
 * `onDidChangeNegotiations` (NegotiationsApi). Part of CoordinatorApi (coordinatorApi.ts).
 */
export interface RoomApi {
  /** Room artifacts (their newest revision): voting and escalated first, then the most recently updated; at most `limit` (100; 1,000 at most). */
  roomArtifacts(limit?: number): Promise<RoomArtifactSummary[]>;
  /** An artifact's newest revision, the previous one (for the diff), its votes, aggregate, thresholds and decision; undefined when unknown. */
  roomArtifactDetail(artifactId: string): Promise<RoomArtifactDetailView | undefined>;
}

export type ProposalView = Omit<ProposalRecord, 'artifact'> & { readonly artifact: PayloadText };

export interface RoomArtifactDetailView {
  readonly proposal: ProposalView;
  readonly previous: ProposalView | undefined;
  readonly votes: readonly VoteRecord[];
  readonly aggregate: AggregatedScore | null;
  readonly thresholds: RoomThresholds;
  readonly decision: RoomDecision | null;
}
