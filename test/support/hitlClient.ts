import * as grpc from '@grpc/grpc-js';
import { canonicalDefinition } from './clients';

export interface DecideRequest {
  reason_type?: string | number;
  context?: Record<string, unknown> | Buffer;
  proposed_actions?: string[];
  priority?: number;
}

export interface DecideOutcome {
  action: string;
  rationale: string;
  payload: unknown;
  /** From the call's initial metadata: the id of the invocation the call waits on. */
  invocationId: string | undefined;
  trailers: Record<string, string>;
}

/** A real grpc-js client of sw4rm.hitl.HitlService, as an agent would use it. */
export class HitlClient {
  private readonly client: grpc.Client;
  private readonly method: grpc.MethodDefinition<unknown, unknown>;
  /** The invocation id of the latest call, known as soon as the server sent its initial metadata. */
  lastInvocationId: string | undefined;

  constructor(
    address: string,
    private readonly token: string | undefined,
  ) {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const service = (grpc.loadPackageDefinition(canonicalDefinition()) as any).sw4rm.hitl
      .HitlService as grpc.ServiceClientConstructor;
    this.client = new service(address, grpc.credentials.createInsecure());
    this.method = service.service.Decide as grpc.MethodDefinition<unknown, unknown>;
  }

  decide(request: DecideRequest, options: { agentId?: string; deadlineMs?: number } = {}): Promise<DecideOutcome> {
    const metadata = new grpc.Metadata();
    if (this.token) metadata.set('authorization', `Bearer ${this.token}`);
    if (options.agentId) metadata.set('sw4rm-agent-id', options.agentId);
    const context = Buffer.isBuffer(request.context)
      ? request.context
      : Buffer.from(JSON.stringify(request.context ?? {}));
    return new Promise((resolve, reject) => {
      let invocationId: string | undefined;
      let trailers: Record<string, string> = {};
      let response: { action: string; rationale: string; decision_payload: Buffer } | undefined;
      let error: grpc.ServiceError | undefined;
      let pending = 2;
      const done = () => {
        if (--pending > 0) return;
        if (error) reject(error);
        else {
          const bytes = response!.decision_payload;
          resolve({
            action: response!.action,
            rationale: response!.rationale,
            payload: bytes && bytes.length > 0 ? JSON.parse(bytes.toString('utf8')) : null,
            invocationId,
            trailers,
          });
        }
      };
      const call = this.client.makeUnaryRequest(
        this.method.path,
        this.method.requestSerialize,
        this.method.responseDeserialize,
        { ...request, context },
        metadata,
        { deadline: Date.now() + (options.deadlineMs ?? 30_000) },
        (err, value) => {
          error = err ?? undefined;
          response = value as typeof response;
          done();
        },
      );
      call.on('metadata', (md: grpc.Metadata) => {
        const id = md.get('sw4rm-hitl-invocation-id')[0];
        if (typeof id === 'string') invocationId = this.lastInvocationId = id;
      });
      call.on('status', (status: grpc.StatusObject) => {
        trailers = Object.fromEntries(Object.entries(status.metadata.getMap()).map(([k, v]) => [k, String(v)]));
        done();
      });
    });
  }

  close(): void {
    this.client.close();
  }
}
