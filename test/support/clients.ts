import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { HEALTH_PROTO } from '../../src/server/health';
import { LOADER_OPTIONS, loadPackageDefinition } from '../../src/server/protos';
import { PROTOS_DIR } from './paths';

export interface RegisterAgentResponse { accepted: boolean; reason: string }
export interface OkResponse { ok: boolean }
export interface HealthCheckResponse { status: string }
export interface LogEventMessage {
  ts?: { seconds: string | number; nanos: number } | null;
  correlation_id?: string;
  agent_id?: string;
  event_type?: string;
  level?: string;
  details_json?: string;
}

/** How one call authenticates and correlates. Omitted fields fall back to the clients' defaults. */
export interface CallOptions {
  /** Bearer token; null sends no authorization header at all. */
  readonly token?: string | null;
  /** A raw authorization header value, sent instead of `Bearer <token>`. */
  readonly authorization?: string;
  readonly correlationId?: string;
}

let cachedCanonical: protoLoader.PackageDefinition | undefined;
let cachedHealth: protoLoader.PackageDefinition | undefined;

/** The canonical package definition, parsed once per test process through the server's own loader. */
export function canonicalDefinition(): protoLoader.PackageDefinition {
  cachedCanonical ??= loadPackageDefinition(PROTOS_DIR);
  return cachedCanonical;
}

export function healthDefinition(): protoLoader.PackageDefinition {
  cachedHealth ??= protoLoader.loadSync(HEALTH_PROTO, { ...LOADER_OPTIONS, includeDirs: [PROTOS_DIR] });
  return cachedHealth;
}

type ServiceClient = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

function clientConstructor(definition: protoLoader.PackageDefinition, fullName: string): grpc.ServiceClientConstructor {
  let node: unknown = grpc.loadPackageDefinition(definition);
  for (const part of fullName.split('.')) node = (node as Record<string, unknown>)[part];
  assert.equal(typeof node, 'function', `${fullName} is not a service in the loaded protos`);
  return node as grpc.ServiceClientConstructor;
}

/**
 * Real @grpc/grpc-js clients for the services the walking skeleton implements, with the metadata agents send:
 * `authorization: Bearer <token>` and, when given, `x-correlation-id`.
 */
export class CoordinatorClients {
  readonly registry: ServiceClient;
  readonly logging: ServiceClient;
  readonly health: ServiceClient;

  constructor(readonly address: string, private readonly token: string | undefined) {
    const credentials = grpc.credentials.createInsecure();
    this.registry = new (clientConstructor(canonicalDefinition(), 'sw4rm.registry.RegistryService'))(address, credentials) as ServiceClient;
    this.logging = new (clientConstructor(canonicalDefinition(), 'sw4rm.logging.LoggingService'))(address, credentials) as ServiceClient;
    this.health = new (clientConstructor(healthDefinition(), 'grpc.health.v1.Health'))(address, credentials) as ServiceClient;
  }

  metadata(options: CallOptions = {}): grpc.Metadata {
    const metadata = new grpc.Metadata();
    const token = options.token === undefined ? this.token : options.token;
    if (options.authorization !== undefined) metadata.set('authorization', options.authorization);
    else if (token !== null && token !== undefined) metadata.set('authorization', `Bearer ${token}`);
    if (options.correlationId !== undefined) metadata.set('x-correlation-id', options.correlationId);
    return metadata;
  }

  registerAgent(agent: Record<string, unknown>, options?: CallOptions): Promise<RegisterAgentResponse> {
    return unary(this.registry, 'RegisterAgent', { agent }, this.metadata(options));
  }

  heartbeat(agentId: string, state = 'RUNNABLE', health: Record<string, string> = {}, options?: CallOptions): Promise<OkResponse> {
    return unary(this.registry, 'Heartbeat', { agent_id: agentId, state, health }, this.metadata(options));
  }

  deregisterAgent(agentId: string, reason: string, options?: CallOptions): Promise<OkResponse> {
    return unary(this.registry, 'DeregisterAgent', { agent_id: agentId, reason }, this.metadata(options));
  }

  ingest(event: LogEventMessage, options?: CallOptions): Promise<OkResponse> {
    return unary(this.logging, 'Ingest', event, this.metadata(options));
  }

  /** Health probes carry no credentials, as load balancers and the editor's status check send them. */
  healthCheck(service: string): Promise<HealthCheckResponse> {
    return unary(this.health, 'Check', { service }, new grpc.Metadata());
  }

  healthWatch(service: string): grpc.ClientReadableStream<HealthCheckResponse> {
    return (this.health.Watch as (request: unknown, metadata: grpc.Metadata) => grpc.ClientReadableStream<HealthCheckResponse>)
      .call(this.health, { service }, new grpc.Metadata());
  }

  close(): void {
    this.registry.close();
    this.logging.close();
    this.health.close();
  }
}

/** One unary call with a 10 s deadline, as a promise. */
export function unary<T>(client: ServiceClient, method: string, request: unknown, metadata: grpc.Metadata): Promise<T> {
  const fn = client[method] as unknown as (
    request: unknown, metadata: grpc.Metadata, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response: T) => void,
  ) => void;
  assert.equal(typeof fn, 'function', `no method ${method} on this client`);
  return new Promise<T>((resolve, reject) => {
    fn.call(client, request, metadata, { deadline: Date.now() + 10_000 }, (err, response) => (err ? reject(err) : resolve(response)));
  });
}

/** Awaits a call that must fail and answers its error after checking the status code. */
export async function expectStatus(call: Promise<unknown>, code: grpc.status): Promise<grpc.ServiceError> {
  try {
    const response = await call;
    assert.fail(`expected status ${grpc.status[code]}, got a response: ${JSON.stringify(response)}`);
  } catch (err) {
    if (err instanceof assert.AssertionError) throw err;
    const error = err as grpc.ServiceError;
    assert.equal(error.code, code, `expected status ${grpc.status[code]}, got ${grpc.status[error.code]}: ${error.details}`);
    return error;
  }
}
