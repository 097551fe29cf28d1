import * as grpc from '@grpc/grpc-js';
import { bearer, serviceClient } from './clients';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type ServiceClient = grpc.Client & Record<string, any>;

/** handoff.proto HandoffRequest as proto-loader hands it over (canonical options: longs as strings, enums as names). */
export interface WireHandoffRequest {
  request_id: string;
  from_agent: string;
  to_agent: string;
  reason: string;
  context_snapshot: Buffer;
  capabilities_required: string[];
  priority: number;
  timeout: { seconds: string; nanos: number } | null;
  budget: Record<string, unknown> | null;
  delegation_policy: Record<string, unknown> | null;
}

/** A real grpc-js client of sw4rm.handoff.HandoffService: the canonical protos, a bearer token, call metadata. */
export class HandoffClient {
  private readonly client: ServiceClient;

  constructor(
    address: string,
    private readonly token: string | undefined,
  ) {
    this.client = serviceClient(address, 'sw4rm.handoff.HandoffService');
  }

  call<T>(
    method: string,
    request: unknown,
    options: { token?: string; metadata?: Record<string, string> } = {},
  ): Promise<T> {
    const md = bearer((options.token ?? this.token) || undefined, options.metadata);
    return new Promise((resolve, reject) => {
      this.client[method](
        request,
        md,
        { deadline: Date.now() + 20_000 },
        (err: grpc.ServiceError | null, response: T) => (err ? reject(err) : resolve(response)),
      );
    });
  }

  request(
    request: Record<string, unknown>,
    metadata: Record<string, string> = {},
    token?: string,
  ): Promise<Record<string, never>> {
    return this.call('RequestHandoff', request, { metadata, token });
  }

  accept(requestId: string, agentId: string, token?: string): Promise<Record<string, never>> {
    return this.call('AcceptHandoff', { request_id: requestId, accepted: true, accepting_agent: agentId }, { token });
  }

  reject(
    requestId: string,
    agentId: string,
    extra: Record<string, unknown> = {},
    token?: string,
  ): Promise<Record<string, never>> {
    return this.call(
      'RejectHandoff',
      { request_id: requestId, accepted: false, accepting_agent: agentId, ...extra },
      { token },
    );
  }

  pending(agentId: string, token?: string): Promise<{ pending_requests: WireHandoffRequest[] }> {
    return this.call('GetPendingHandoffs', { agent_id: agentId }, { token });
  }

  /** GetPendingHandoffs with the answer's trailing metadata (README, "Handoffs": sw4rm-pending-handoffs, sw4rm-pending-more). */
  pendingWithTrailer(
    agentId: string,
    token?: string,
  ): Promise<{ response: { pending_requests: WireHandoffRequest[] }; trailer: grpc.Metadata }> {
    const md = new grpc.Metadata();
    const bearer = token ?? this.token;
    if (bearer) md.set('authorization', `Bearer ${bearer}`);
    return new Promise((resolve, reject) => {
      let response: { pending_requests: WireHandoffRequest[] } | undefined;
      let trailer: grpc.Metadata | undefined;
      const done = () => {
        if (response && trailer) resolve({ response, trailer });
      };
      const call = this.client.GetPendingHandoffs(
        { agent_id: agentId },
        md,
        { deadline: Date.now() + 20_000 },
        (err: grpc.ServiceError | null, res: { pending_requests: WireHandoffRequest[] }) => {
          if (err) reject(err);
          else {
            response = res;
            done();
          }
        },
      ) as grpc.ClientUnaryCall;
      call.on('status', (status: grpc.StatusObject) => {
        trailer = status.metadata;
        done();
      });
    });
  }

  complete(requestId: string, status = 'COMPLETED', token?: string): Promise<{ success: boolean; message: string }> {
    return this.call('CompleteHandoff', { request_id: requestId, status }, { token });
  }

  cancel(
    correlationId: string,
    reason: string,
    gracePeriodMs = 0,
    token?: string,
  ): Promise<{ acknowledged: boolean; message: string }> {
    return this.call(
      'CancelDelegation',
      { correlation_id: correlationId, reason, grace_period_ms: gracePeriodMs },
      { token },
    );
  }

  close(): void {
    this.client.close();
  }
}
