import * as grpc from '@grpc/grpc-js';
import * as net from 'node:net';
import type { Coordinator } from '../core/coordinator';
import { TRANSPORT_MAX_MESSAGE_BYTES } from '../core/limits';
import { REFUSED_BEFORE_DECODE, type RefusedRequest, definitionRefusal } from './services/workflowDefinitionScan';
import { authInterceptor, type AuthMode } from './auth';
import { callContext } from './callContext';
import {
  ConnectionGuard,
  DEFAULT_CONNECTION_LIMITS,
  requestBodyInterceptor,
  type ConnectionLimits,
} from './connections';
import { exposeDuplicateAuthorization } from './duplicateHeaders';
import { IdentityGuard } from './guard';
import { HealthService } from './health';
import { identityRule, IDENTITY_RULES, type IdentityRule } from './identity';
import { CANONICAL_SERVICES, loadPackageDefinition, serviceDefinition } from './protos';
import { ActivityServiceAdapter } from './services/activityService';
import { ConnectorServiceAdapter } from './services/connectorService';
import { ReasoningServiceAdapter } from './services/reasoningService';
import {
  CREDENTIALS_RULES,
  CREDENTIALS_SERVICE,
  CredentialsServiceAdapter,
  loadCredentialsDefinition,
} from './services/credentialsService';
import { HandoffServiceAdapter } from './services/handoffService';
import { HitlServiceAdapter } from './services/hitlService';
import { LoggingServiceAdapter } from './services/loggingService';
import { NegotiationRoomServiceAdapter } from './services/negotiationRoomService';
import { RegistryServiceAdapter } from './services/registryService';
import { RouterServiceAdapter } from './services/routerService';
import { SchedulerPolicyServiceAdapter } from './services/schedulerPolicyService';
import { NegotiationServiceAdapter } from './services/negotiationService';
import { SchedulerServiceAdapter } from './services/schedulerService';
import { ToolServiceAdapter } from './services/toolService';
import { unimplementedHandler } from './services/unimplemented';
import { WorktreeServiceAdapter } from './services/worktreeService';
import { WorkflowServiceAdapter } from './services/workflowService';
import { isLoopback } from './agentEnvironment';

export interface ServerOptions {
  readonly coordinator: Coordinator;
  /** Folder holding the canonical .proto files (shipped beside the bundle). */
  readonly protosDir: string;
  readonly host: string;
  /** 0 picks any free port. */
  readonly port: number;
  readonly auth: AuthMode;
  /** The operator token (acts for any agent); required when auth is `token`. */
  readonly token?: string;
  /** Bounds on connections and request arrival (connections.ts); defaults DEFAULT_CONNECTION_LIMITS. */
  readonly connections?: Partial<ConnectionLimits>;
}

/** The requested port is taken. `freePort` is one that was free a moment ago, to offer the user. */
export class PortInUseError extends Error {
  constructor(
    readonly host: string,
    readonly port: number,
    readonly freePort: number,
  ) {
    super(
      `Port ${port} on ${host} is already in use (another SW4RM coordinator or another program). ` +
        `Port ${freePort} is free: use it (setting sw4rm.port or --port ${freePort}), or 0 for any free port.`,
    );
    this.name = 'PortInUseError';
  }
}

export class ConfigurationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigurationError';
  }
}

/** Channel options set deliberately (see ARCHITECTURE.md): message size, stream memory, keepalive. */
export const SERVER_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': TRANSPORT_MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': TRANSPORT_MAX_MESSAGE_BYTES,
  // The 10 MB default makes many concurrent inbox streams fail with RESOURCE_EXHAUSTED.
  'grpc-node.max_session_memory': 256,
  'grpc.max_concurrent_streams': 1000,
  // Agents may ping to keep idle inbox streams alive; allow it without calls in flight, at most every 10 s.
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.http2.min_ping_interval_without_data_ms': 10_000,
  'grpc.keepalive_time_ms': 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
};

/**
 * Requests measured on their bytes before protobuf decodes them (decoding is synchronous and grows with the message):
 * a refused one reaches its handler as a RefusedRequest, which answers INVALID_ARGUMENT with the reason.
 */
const PRE_DECODE_REFUSALS: Readonly<Record<string, (bytes: Buffer) => string | undefined>> = {
  '/sw4rm.workflow.WorkflowService/CreateWorkflow': definitionRefusal,
};

function withPreDecodeRefusals(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [method, m] of Object.entries(definition) as [string, grpc.MethodDefinition<unknown, unknown>][]) {
    const refusal = PRE_DECODE_REFUSALS[m.path];
    out[method] = !refusal
      ? m
      : {
          ...m,
          requestDeserialize: (bytes: Buffer) => {
            const why = refusal(bytes);
            return why === undefined
              ? m.requestDeserialize(bytes)
              : ({ [REFUSED_BEFORE_DECODE]: why } satisfies RefusedRequest);
          },
        };
  }
  return out as grpc.ServiceDefinition;
}

/**
 * One gRPC server hosting all 15 canonical SW4RM services plus grpc.health.v1.Health. Services that are
 * built translate to the core; every other RPC answers UNIMPLEMENTED.
 */
export class CoordinatorServer {
  private readonly server: grpc.Server;
  private readonly health = new HealthService(CANONICAL_SERVICES);
  private readonly guard: IdentityGuard;
  private readonly connections: ConnectionGuard;
  private boundPort = 0;
  private state: 'new' | 'serving' | 'draining' | 'stopped' = 'new';

  constructor(private readonly options: ServerOptions) {
    if (options.auth === 'token' && !options.token) throw new ConfigurationError('auth "token" needs a token');
    if (options.auth !== 'token' && !isLoopback(options.host)) {
      throw new ConfigurationError(
        `Binding to ${options.host} (not loopback) requires auth "token"; auth "none" is only allowed on 127.0.0.1 / ::1.`,
      );
    }
    const { coordinator } = options;
    const limits: ConnectionLimits = { ...DEFAULT_CONNECTION_LIMITS, ...options.connections };
    this.connections = new ConnectionGuard(limits, coordinator.clock);
    this.server = new grpc.Server({
      ...SERVER_CHANNEL_OPTIONS,
      // The request-body deadline first (nearest the transport), so that its timer also covers calls auth refuses.
      interceptors: [
        requestBodyInterceptor(limits.requestBodyMs, coordinator.clock),
        authInterceptor(options.auth, {
          operatorToken: options.token ?? '',
          credentials: coordinator.credentials,
          onRefused: (path, reason, metadata) =>
            coordinator.credentials.recordUnauthenticated(path, reason, callContext({ metadata }, coordinator.ids)),
          onAuthenticated: (connection) => this.connections.markAuthenticated(connection),
        }),
      ],
    });
    this.guard = new IdentityGuard(coordinator);
    this.addServices();
    this.health.addToServer(this.server, options.protosDir);
  }

  private addServices(): void {
    const { coordinator, protosDir } = this.options;
    const packageDefinition = loadPackageDefinition(protosDir);
    const built: Record<string, grpc.UntypedServiceImplementation> = {
      [RegistryServiceAdapter.serviceName]: new RegistryServiceAdapter(coordinator).handlers(),
      [LoggingServiceAdapter.serviceName]: new LoggingServiceAdapter(coordinator).handlers(),
      [RouterServiceAdapter.serviceName]: new RouterServiceAdapter(coordinator).handlers(),
      [HitlServiceAdapter.serviceName]: new HitlServiceAdapter(coordinator).handlers(),
      [WorktreeServiceAdapter.serviceName]: new WorktreeServiceAdapter(coordinator).handlers(),
      [ToolServiceAdapter.serviceName]: new ToolServiceAdapter(coordinator).handlers(),
      [ConnectorServiceAdapter.serviceName]: new ConnectorServiceAdapter(coordinator).handlers(),
      [SchedulerServiceAdapter.serviceName]: new SchedulerServiceAdapter(coordinator).handlers(),
      [SchedulerPolicyServiceAdapter.serviceName]: new SchedulerPolicyServiceAdapter(coordinator).handlers(),
      [ActivityServiceAdapter.serviceName]: new ActivityServiceAdapter(coordinator).handlers(),
      [ReasoningServiceAdapter.serviceName]: new ReasoningServiceAdapter(coordinator).handlers(),
      [NegotiationRoomServiceAdapter.serviceName]: new NegotiationRoomServiceAdapter(coordinator).handlers(),
      [WorkflowServiceAdapter.serviceName]: new WorkflowServiceAdapter(coordinator).handlers(),
      [NegotiationServiceAdapter.serviceName]: new NegotiationServiceAdapter(coordinator).handlers(),
      [HandoffServiceAdapter.serviceName]: new HandoffServiceAdapter(coordinator).handlers(),
    };
    // Every handler, built or not, runs behind the identity check of its rule (identity.ts).
    const add = (
      original: grpc.ServiceDefinition,
      implementation: grpc.UntypedServiceImplementation | undefined,
      rules: Readonly<Record<string, IdentityRule>>,
    ) => {
      const guarded: grpc.UntypedServiceImplementation = {};
      const definition = withPreDecodeRefusals(original);
      for (const [method, methodDefinition] of Object.entries(definition)) {
        const handler =
          implementation?.[method] ??
          unimplementedHandler(methodDefinition.path, methodDefinition as grpc.MethodDefinition<unknown, unknown>);
        guarded[method] = this.guard.wrap(
          methodDefinition.path,
          methodDefinition,
          identityRule(methodDefinition.path, rules),
          handler,
        );
      }
      this.server.addService(definition, guarded);
    };
    for (const name of CANONICAL_SERVICES) add(serviceDefinition(packageDefinition, name), built[name], IDENTITY_RULES);
    add(
      serviceDefinition(loadCredentialsDefinition(protosDir), CREDENTIALS_SERVICE),
      new CredentialsServiceAdapter(coordinator).handlers(),
      CREDENTIALS_RULES,
    );
  }

  /** Binds and starts serving; resolves with the port actually bound. */
  async start(): Promise<number> {
    const { host, port } = this.options;
    const address = host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
    this.boundPort = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, bound) => {
        if (err) reject(err);
        else resolve(bound);
      });
    }).catch(async (err: Error) => {
      if (port !== 0 && /EADDRINUSE/.test(err.message)) {
        throw new PortInUseError(host, port, await findFreePort(host));
      }
      throw err;
    });
    exposeDuplicateAuthorization(this.server);
    this.connections.attach(this.server);
    this.state = 'serving';
    this.health.setStatus('SERVING');
    return this.boundPort;
  }

  get port(): number {
    return this.boundPort;
  }

  /** Connections open and not yet authenticated (they are closed after the idle timeout). */
  get unauthenticatedConnections(): number {
    return this.connections.unauthenticated;
  }

  get servingStatus(): string {
    return this.health.current;
  }

  /**
   * Drains: health turns NOT_SERVING, new calls are refused, calls in flight get `graceMs` to finish,
   * then whatever is left (long-lived streams) is cancelled.
   */
  async drain(graceMs = 2000): Promise<void> {
    if (this.state === 'stopped' || this.state === 'draining') return;
    this.state = 'draining';
    this.health.setStatus('NOT_SERVING');
    this.health.endWatches();
    this.guard.dispose();
    this.connections.dispose();
    this.options.coordinator.router.closeStreams('the coordinator is stopping');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    this.state = 'stopped';
  }

  /**
   * Ends every connection now, synchronously, without draining or answering: the first step of a crash of the worker
   * thread it runs in, so that no HTTP/2 read reaches a thread being torn down (server/worker/README.md).
   */
  abort(): void {
    this.state = 'stopped';
    this.connections.destroyAll();
    this.server.forceShutdown();
  }
}

/** A port that is free on `host` right now (the OS picks it). */
export async function findFreePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen({ host, port: 0 }, () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
