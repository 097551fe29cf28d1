import * as grpc from '@grpc/grpc-js';
import { serviceClient } from './clients';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type ServiceClient = grpc.Client & Record<string, any>;

export interface WireVote {
  artifact_id: string;
  critic_id: string;
  score: number;
  confidence: number;
  passed: boolean;
  strengths: string[];
  weaknesses: string[];
  recommendations: string[];
  negotiation_room_id: string;
}

export interface WireDecision {
  artifact_id: string;
  outcome: string;
  votes: WireVote[];
  aggregated_score: {
    mean: number;
    min_score: number;
    max_score: number;
    std_dev: number;
    weighted_mean: number;
    vote_count: number;
  };
  policy_version: string;
  reason: string;
  negotiation_room_id: string;
  decided_at: { seconds: string; nanos: number } | null;
}

/** A real grpc-js client of sw4rm.negotiation_room.NegotiationRoomService, with the token and `sw4rm-agent-id` agents send. */
export class RoomClient {
  private readonly client: ServiceClient;

  constructor(
    address: string,
    private readonly token: string | undefined,
  ) {
    this.client = serviceClient(address, 'sw4rm.negotiation_room.NegotiationRoomService');
  }

  private metadata(agentId?: string, token = this.token): grpc.Metadata {
    const md = new grpc.Metadata();
    if (token) md.set('authorization', `Bearer ${token}`);
    if (agentId) md.set('sw4rm-agent-id', agentId);
    return md;
  }

  call<T>(
    method: string,
    request: unknown,
    options: {
      agentId?: string;
      token?: string;
      deadlineMs?: number;
      onCall?: (call: grpc.ClientUnaryCall) => void;
    } = {},
  ): Promise<T> {
    return new Promise((resolve, reject) => {
      const call = this.client[method](
        request,
        this.metadata(options.agentId, options.token),
        { deadline: Date.now() + (options.deadlineMs ?? 10_000) },
        (err: grpc.ServiceError | null, response: T) => (err ? reject(err) : resolve(response)),
      ) as grpc.ClientUnaryCall;
      options.onCall?.(call);
    });
  }

  submitProposal(
    proposal: Record<string, unknown>,
    token?: string,
  ): Promise<{ artifact_id: string; negotiation_room_id: string }> {
    return this.call('SubmitProposal', { proposal }, { agentId: String(proposal.producer_id ?? ''), token });
  }

  submitVote(vote: Partial<WireVote>, token?: string): Promise<{ artifact_id: string; critic_id: string }> {
    return this.call('SubmitVote', { vote }, { agentId: vote.critic_id, token });
  }

  getVotes(artifactId: string, roomId = ''): Promise<{ votes: WireVote[]; vote_count: number }> {
    return this.call('GetVotes', { artifact_id: artifactId, negotiation_room_id: roomId });
  }

  getDecision(artifactId: string, roomId = ''): Promise<{ decision: WireDecision | null }> {
    return this.call('GetDecision', { artifact_id: artifactId, negotiation_room_id: roomId });
  }

  waitForDecision(
    artifactId: string,
    timeoutSeconds = 0,
    options: { deadlineMs?: number; onCall?: (call: grpc.ClientUnaryCall) => void } = {},
  ): Promise<{ decision: WireDecision }> {
    return this.call(
      'WaitForDecision',
      { artifact_id: artifactId, timeout_seconds: timeoutSeconds },
      { deadlineMs: options.deadlineMs ?? 60_000, onCall: options.onCall },
    );
  }

  close(): void {
    this.client.close();
  }
}
