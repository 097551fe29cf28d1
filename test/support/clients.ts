import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { HEALTH_PROTO } from '../../src/server/health';
import { LOADER_OPTIONS, loadPackageDefinition, serviceDefinition } from '../../src/server/protos';
import { PROTOS_DIR } from './paths';

export interface RegisterAgentResponse {
  accepted: boolean;
  reason: string;
}
export interface OkResponse {
  ok: boolean;
}
export interface HealthCheckResponse {
  status: string;
}
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

/** A generated grpc-js client: its methods by their proto names. */
export type ServiceClient = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

function clientConstructor(definition: protoLoader.PackageDefinition, fullName: string): grpc.ServiceClientConstructor {
  let node: unknown = grpc.loadPackageDefinition(definition);
  for (const part of fullName.split('.')) node = (node as Record<string, unknown>)[part];
  assert.equal(typeof node, 'function', `${fullName} is not a service in the loaded protos`);
  return node as grpc.ServiceClientConstructor;
}

/** The generated client of one canonical service (e.g. `sw4rm.tool.ToolService`) at `address`, over plain TCP. */
export function serviceClient(address: string, fullName: string, options?: grpc.ClientOptions): ServiceClient {
  return new (clientConstructor(canonicalDefinition(), fullName))(
    address,
    grpc.credentials.createInsecure(),
    options,
  ) as ServiceClient;
}

/** Metadata with `authorization: Bearer <token>` (none when token is undefined) and any further keys. */
export function bearer(token: string | undefined, extra: Record<string, string> = {}): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
  for (const [key, value] of Object.entries(extra)) metadata.set(key, value);
  return metadata;
}

/**
 * Real @grpc/grpc-js clients for the services the walking skeleton implements, with the metadata agents send:
 * `authorization: Bearer <token>` and, when given, `x-correlation-id`.
 */
export class CoordinatorClients {
  readonly registry: ServiceClient;
  readonly logging: ServiceClient;
  readonly health: ServiceClient;

  constructor(
    readonly address: string,
    private readonly token: string | undefined,
  ) {
    const credentials = grpc.credentials.createInsecure();
    this.registry = new (clientConstructor(canonicalDefinition(), 'sw4rm.registry.RegistryService'))(
      address,
      credentials,
    ) as ServiceClient;
    this.logging = new (clientConstructor(canonicalDefinition(), 'sw4rm.logging.LoggingService'))(
      address,
      credentials,
    ) as ServiceClient;
    this.health = new (clientConstructor(healthDefinition(), 'grpc.health.v1.Health'))(
      address,
      credentials,
    ) as ServiceClient;
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

  heartbeat(
    agentId: string,
    state = 'RUNNABLE',
    health: Record<string, string> = {},
    options?: CallOptions,
  ): Promise<OkResponse> {
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
    return (
      this.health.Watch as (request: unknown, metadata: grpc.Metadata) => grpc.ClientReadableStream<HealthCheckResponse>
    ).call(this.health, { service }, new grpc.Metadata());
  }

  close(): void {
    this.registry.close();
    this.logging.close();
    this.health.close();
  }
}

/** A unary call's response and the trailer that came with its status. */
export interface UnaryAnswer<T> {
  readonly response: T;
  readonly trailer: grpc.Metadata;
}

/**
 * One service of the canonical protos over a plain grpc-js channel with one bearer token: unary calls by method name
 * (10 s deadline unless given, further metadata when given), answered with the trailer (which says why a call was
 * refused).
 */
export class ServiceCaller<Method extends string> {
  private readonly client: grpc.Client;
  private readonly methods: Record<Method, grpc.MethodDefinition<unknown, unknown>>;

  constructor(
    address: string,
    private readonly token: string | undefined,
    private readonly service: string,
    private readonly deadlineMs = 10_000,
  ) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
    this.methods = serviceDefinition(canonicalDefinition(), service) as unknown as Record<
      Method,
      grpc.MethodDefinition<unknown, unknown>
    >;
  }

  call<T>(method: Method, request: unknown, extra: Record<string, string> = {}): Promise<UnaryAnswer<T>> {
    const definition = this.methods[method];
    assert.ok(definition, `no method ${method} in ${this.service}`);
    const metadata = new grpc.Metadata();
    if (this.token) metadata.set('authorization', `Bearer ${this.token}`);
    for (const [key, value] of Object.entries(extra)) metadata.set(key, value);
    return new Promise((resolve, reject) => {
      // grpc-js calls back before it emits 'status' (which carries the trailer): answer once both came.
      let answered: { response: T } | undefined;
      let trailer: grpc.Metadata | undefined;
      const settle = () => {
        if (answered && trailer) resolve({ response: answered.response, trailer });
      };
      const call = this.client.makeUnaryRequest(
        definition.path,
        definition.requestSerialize,
        definition.responseDeserialize,
        request,
        metadata,
        { deadline: Date.now() + this.deadlineMs },
        (err, response) => {
          if (err) return reject(err);
          answered = { response: response as T };
          settle();
        },
      );
      call.on('status', (status: grpc.StatusObject) => {
        trailer = status.metadata;
        settle();
      });
    });
  }

  close(): void {
    this.client.close();
  }
}

/** sw4rm.worktree.WorktreeService as an agent (or the operator) calls it: the canonical proto, a bearer token. */
export class WorktreeClient {
  private readonly service: ServiceCaller<string>;

  constructor(address: string, token: string | undefined, deadlineMs = 10_000) {
    this.service = new ServiceCaller(address, token, 'sw4rm.worktree.WorktreeService', deadlineMs);
  }

  async call<T>(method: string, request: Record<string, unknown>): Promise<T> {
    return (await this.service.call<T>(method, request)).response;
  }

  close(): void {
    this.service.close();
  }
}

/** One unary call with a 10 s deadline, as a promise. */
export function unary<T>(client: ServiceClient, method: string, request: unknown, metadata: grpc.Metadata): Promise<T> {
  const fn = client[method] as unknown as (
    request: unknown,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: (err: grpc.ServiceError | null, response: T) => void,
  ) => void;
  assert.equal(typeof fn, 'function', `no method ${method} on this client`);
  return new Promise<T>((resolve, reject) => {
    fn.call(client, request, metadata, { deadline: Date.now() + 10_000 }, (err, response) =>
      err ? reject(err) : resolve(response),
    );
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
    assert.equal(
      error.code,
      code,
      `expected status ${grpc.status[code]}, got ${grpc.status[error.code]}: ${error.details}`,
    );
    return error;
  }
}
