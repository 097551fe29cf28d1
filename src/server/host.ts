import * as path from 'node:path';
import { loadOrMintEnrolment, rotateEnrolment } from '../core/auth/enrolment';
import { loadOrCreateToken } from '../core/auth/token';
import type { Clock } from '../core/clock';
import { Coordinator } from '../core/coordinator';
import type { HitlPolicy } from '../core/hitl/policy';
import type { IdSource } from '../core/ids';
import type { RouterOptions } from '../core/router/router';
import { createGit } from '../core/worktree/git';
import { discoverRepositories, type Repository } from '../core/worktree/repositories';
import type { WorktreeOperationsOptions } from '../core/worktree/operations';
import type { SchedulerOptions } from '../core/scheduler/model';
import type { PolicySettings } from '../core/policy/policies';
import type { HandoffOptions } from '../core/handoff/handoffs';
import type { LaunchesOptions } from '../core/launch/launches';
import type { ProcessProviderOptions } from '../core/tools/processProvider';
import { PAYLOAD_FOLDER_NAME } from '../core/router/payloadFiles';
import type { Event } from '../core/events';
import { CoordinatorStore } from '../core/coordinatorStore';
import type { StoredEvent } from '../core/log/model';
import type { StoreFailedError } from '../core/store/store';
import type { MintedCredential } from '../core/credentials/model';
import { removeEndpoint, writeEndpoint } from './endpoint';
import { agentEnvironment } from './agentEnvironment';
import type { AuthMode } from './auth';
import type { ConnectionLimits } from './connections';
import { CoordinatorServer } from './server';
import { BridgeServer, DEFAULT_BRIDGE_PORT } from './bridge/bridgeServer';
import type { BridgeEndpoints } from './bridge/model';
import { BRIDGE_TOOLS } from './bridge/tools';
import { HOOK_ROUTES } from './bridge/hookRoute';

export interface HostOptions {
  readonly dataDir: string;
  readonly protosDir: string;
  readonly host: string;
  readonly port: number;
  readonly auth: AuthMode;
  readonly heartbeatDebounceMs?: number;
  readonly router?: Partial<RouterOptions>;
  /** Connection bounds (connections.ts); defaults DEFAULT_CONNECTION_LIMITS. */
  readonly connections?: Partial<ConnectionLimits>;
  readonly hitl?: HitlPolicy;
  readonly clock?: Clock;
  readonly ids?: IdSource;
  /** Sees every event from the first one on (the Output channel, the CLI's stderr). */
  readonly onEvent?: (event: StoredEvent) => void;
  /** How long to wait for the store's lock while a previous owner is closing (see CoordinatorStore.open). */
  readonly lockWaitMs?: number;
  /** The workspace folders (the editor's, the CLI's `--workspace`): their git repositories are the repo_ids agents bind in. */
  readonly workspaceFolders?: readonly string[];
  /** The repositories already discovered in them (the CLI prints them first); else the host discovers them. */
  readonly repositories?: readonly Repository[];
  /** Where agent worktrees go: `<folder>/<repo_id>/<worktree_id>`; default the sibling `<repo>.sw4rm-worktrees` (sw4rm.worktrees.folder, --worktrees-folder). */
  readonly worktreesFolder?: string;
  /** Worktree setup (copy globs, command), whether a repository's own setup command may run, snapshot retention. */
  readonly worktreeOperations?: Partial<WorktreeOperationsOptions>;
  /** The scheduler: max_parallel_instances per agent type, the conflict threshold (--max-parallel, --conflict-threshold). */
  readonly scheduler?: Partial<SchedulerOptions>;
  /** Built-in tool providers: the `process` provider on or off, unenforced network policy accepted (--process-tools, --accept-unenforced-network). */
  readonly tools?: { readonly process?: Partial<ProcessProviderOptions> };
  /** Negotiation policy (sw4rm.negotiation.*, --negotiation-policy), laid over the store's newest version at start. */
  readonly negotiation?: PolicySettings;
  /** Handoffs: default timeout, rerouting, routing to the operator, retention (sw4rm.handoffs.*, --handoff-*). */
  readonly handoffs?: Partial<HandoffOptions>;
  /**
   * Launched agents: the ACK timeout of messages to those that pull their inbox through the bridge
   * (sw4rm.agents.inboxAckTimeoutMinutes, --inbox-ack-timeout-minutes; default 30 min).
   */
  readonly launches?: Partial<Pick<LaunchesOptions, 'bridgedAckTimeoutMs'>>;
  /** The MCP bridge's port on 127.0.0.1 (sw4rm.bridge.port, --bridge-port): default 50052; 0 = any free port; a busy port falls back to a free one. */
  readonly bridgePort?: number;
  /** `false`: no MCP bridge (bridgeEndpoints undefined). */
  readonly bridge?: boolean;
  /** Where the bundled sw4rm-mcp.js and sw4rm-hook.js are (BridgeEndpoints); default the running bundle's directory. */
  readonly distDir?: string;
}

/**
 * One running coordinator: store, core and gRPC server together. The editor and the headless CLI both
 * start it this way, so they behave the same.
 */
export class CoordinatorHost {
  private constructor(
    readonly coordinator: Coordinator,
    readonly server: CoordinatorServer,
    readonly options: HostOptions,
    readonly port: number,
    readonly token: string | undefined,
    private enrolmentToken: string | undefined,
    /** The MCP bridge (README, "The MCP bridge"); undefined with `bridge: false`. */
    readonly bridge: BridgeServer | undefined,
  ) {}

  /** Where launched agents reach the MCP bridge; undefined when the bridge is off. */
  get bridgeEndpoints(): BridgeEndpoints | undefined {
    return this.bridge?.endpoints();
  }

  static async start(options: HostOptions): Promise<CoordinatorHost> {
    let repositories = options.repositories;
    let unreadable: string | undefined;
    if (repositories === undefined) {
      try {
        repositories = await discoverRepositories(createGit(), options.workspaceFolders ?? []);
      } catch (err) {
        // The coordinator still runs; Bind answers worktree_not_found, and the log says why.
        unreadable = err instanceof Error ? err.message : String(err);
        repositories = [];
      }
    }
    const store = CoordinatorStore.open(options.dataDir, { lockWaitMs: options.lockWaitMs, groupCommit: true });
    let coordinator: Coordinator | undefined;
    let serving: CoordinatorServer | undefined;
    try {
      const token = options.auth === 'token' ? loadOrCreateToken(options.dataDir) : undefined;
      coordinator = new Coordinator({
        store,
        clock: options.clock,
        ids: options.ids,
        onEvent: options.onEvent,
        registry: options.heartbeatDebounceMs ? { heartbeatDebounceMs: options.heartbeatDebounceMs } : undefined,
        // Payloads of 1 MiB or more are files in <data folder>/payloads (router/payloadFiles.ts).
        router: { payloadDir: path.join(options.dataDir, PAYLOAD_FOLDER_NAME), ...options.router },
        hitl: options.hitl,
        repositories,
        worktreesFolder: options.worktreesFolder,
        worktreeOperations: options.worktreeOperations,
        scheduler: options.scheduler,
        // A DENY_ALL run_command under bubblewrap never sees the data folder (the store, the tokens, the payloads).
        tools: {
          ...options.tools,
          process: {
            ...options.tools?.process,
            hiddenFolders: [options.dataDir, ...(options.tools?.process?.hiddenFolders ?? [])],
          },
        },
        negotiation: options.negotiation,
        handoffs: options.handoffs,
        launches: options.launches,
      });
      if (unreadable !== undefined) {
        coordinator.log.record({
          correlationId: coordinator.ids.uuid(),
          actor: 'coordinator',
          eventType: 'worktree.repositories_unreadable',
          level: 'WARN',
          details: { workspace_folders: options.workspaceFolders ?? [], error: unreadable },
        });
      }
      const enrolment =
        options.auth === 'token'
          ? loadOrMintEnrolment(options.dataDir, coordinator.credentials, { correlationId: coordinator.ids.uuid() })
          : undefined;
      const server = new CoordinatorServer({
        coordinator,
        protosDir: options.protosDir,
        host: options.host,
        port: options.port,
        auth: options.auth,
        token,
        connections: options.connections,
      });
      const port = await server.start();
      serving = server;
      coordinator.log.record({
        correlationId: coordinator.ids.uuid(),
        actor: 'coordinator',
        eventType: 'server.serving',
        details: { host: options.host, port, auth: options.auth },
      });
      let bridge: BridgeServer | undefined;
      if (options.bridge !== false) {
        bridge = new BridgeServer({
          coordinator,
          tools: BRIDGE_TOOLS,
          routes: HOOK_ROUTES,
          port: options.bridgePort ?? DEFAULT_BRIDGE_PORT,
          grpcAddress: agentEnvironment(options.host, port, undefined).SW4RM_ROUTER_ADDR,
          distDir: options.distDir,
        });
        await bridge.start();
        // Launched agents are wired to where it actually listens (a busy port falls back to a free one).
        coordinator.launches.setEndpoints(bridge.endpoints());
      }
      writeEndpoint(options.dataDir, options.host, port);
      return new CoordinatorHost(coordinator, server, options, port, token, enrolment, bridge);
    } catch (err) {
      // The gRPC server is serving when the bridge could not start: it stops too.
      if (serving) await serving.drain(0).catch(() => undefined);
      if (coordinator) coordinator.dispose();
      else store.close();
      throw err;
    }
  }

  /**
   * Fires when the store could not commit. The host keeps serving nothing it cannot store (every write is
   * refused from then on); its owner stops it and starts a new one, which recovers from the store.
   */
  get onDidFail(): Event<StoreFailedError> {
    return this.coordinator.store.onDidFail;
  }

  /**
   * The operator's environment: the addresses, with the port actually bound, and SW4RM_TOKEN = the operator token,
   * which may act for any agent (the CLI prints it for the terminal that started the coordinator).
   */
  environment(): Record<string, string> {
    return agentEnvironment(this.options.host, this.port, this.token);
  }

  /**
   * What the editor's integrated terminals get: the addresses and SW4RM_TOKEN = the data folder's enrolment
   * credential (never the operator token). An agent started there registers an agent id nobody holds and acts as
   * the agents it enrolled (README, "Security model"). Without auth, the addresses only.
   */
  terminalEnvironment(): Record<string, string> {
    return agentEnvironment(this.options.host, this.port, this.enrolmentToken);
  }

  /**
   * Mints a credential for `agentId` and answers the environment of that one agent: the addresses, SW4RM_AGENT_ID
   * and SW4RM_TOKEN = its credential (shown this once). Without auth nothing is minted: no SW4RM_TOKEN.
   * Throws CredentialError `invalid` for an agent id the registry would refuse.
   */
  mintAgentEnvironment(
    agentId: string,
    by: string,
    label?: string,
  ): { env: Record<string, string>; minted: MintedCredential | undefined } {
    const minted =
      this.options.auth === 'token'
        ? this.coordinator.credentials.mintAgent(agentId, by, label ?? `environment for agent ${agentId}, by ${by}`, {
            correlationId: this.coordinator.ids.uuid(),
          })
        : undefined;
    return {
      env: { ...agentEnvironment(this.options.host, this.port, minted?.token), SW4RM_AGENT_ID: agentId },
      minted,
    };
  }

  /**
   * Revokes the enrolment credential and mints a new one (also written to the data folder): terminals opened from
   * now on get the new one; agents the old one enrolled keep acting only with their own credentials.
   */
  rotateEnrolment(by: string): Record<string, string> {
    if (this.options.auth !== 'token') return this.terminalEnvironment();
    this.enrolmentToken = rotateEnrolment(this.options.dataDir, this.coordinator.credentials, by, {
      correlationId: this.coordinator.ids.uuid(),
    });
    return this.terminalEnvironment();
  }

  /**
   * Ends every agent's connection (gRPC and the MCP bridge) now, synchronously, and nothing else: what the store took
   * is in the file, and the next host starts from it. The worker thread calls it before it ends on a fatal error.
   */
  abort(): void {
    this.server.abort();
    this.bridge?.abort();
  }

  /** Drains the server, then closes the core and its store. */
  async stop(graceMs = 2000): Promise<void> {
    this.coordinator.log.record({
      correlationId: this.coordinator.ids.uuid(),
      actor: 'coordinator',
      eventType: 'server.draining',
      details: { grace_ms: graceMs },
    });
    removeEndpoint(this.options.dataDir, this.port);
    this.coordinator.launches.setEndpoints(undefined);
    await this.bridge?.close();
    await this.server.drain(graceMs);
    this.coordinator.dispose();
  }
}
