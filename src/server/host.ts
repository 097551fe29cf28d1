import { loadOrCreateToken } from '../core/auth/token';
import type { Clock } from '../core/clock';
import { Coordinator } from '../core/coordinator';
import type { HitlPolicy } from '../core/hitl/policy';
import type { IdSource } from '../core/ids';
import type { RouterOptions } from '../core/router/router';
import type { Event } from '../core/events';
import { CoordinatorStore } from '../core/coordinatorStore';
import type { StoredEvent } from '../core/log/model';
import type { StoreFailedError } from '../core/store/store';
import { agentEnvironment } from './agentEnvironment';
import type { AuthMode } from './auth';
import { CoordinatorServer } from './server';

export interface HostOptions {
  readonly dataDir: string;
  readonly protosDir: string;
  readonly host: string;
  readonly port: number;
  readonly auth: AuthMode;
  readonly heartbeatDebounceMs?: number;
  readonly router?: Partial<RouterOptions>;
  readonly hitl?: HitlPolicy;
  readonly clock?: Clock;
  readonly ids?: IdSource;
  /** Sees every event from the first one on (the Output channel, the CLI's stderr). */
  readonly onEvent?: (event: StoredEvent) => void;
  /** How long to wait for the store's lock while a previous owner is closing (see CoordinatorStore.open). */
  readonly lockWaitMs?: number;
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
  ) {}

  static async start(options: HostOptions): Promise<CoordinatorHost> {
    const store = CoordinatorStore.open(options.dataDir, { lockWaitMs: options.lockWaitMs, groupCommit: true });
    let coordinator: Coordinator | undefined;
    try {
      const token = options.auth === 'token' ? loadOrCreateToken(options.dataDir) : undefined;
      coordinator = new Coordinator({
        store,
        clock: options.clock,
        ids: options.ids,
        onEvent: options.onEvent,
        registry: options.heartbeatDebounceMs ? { heartbeatDebounceMs: options.heartbeatDebounceMs } : undefined,
        router: options.router,
        hitl: options.hitl,
      });
      const server = new CoordinatorServer({
        coordinator, protosDir: options.protosDir, host: options.host, port: options.port, auth: options.auth, token,
      });
      const port = await server.start();
      coordinator.log.record({
        correlationId: coordinator.ids.uuid(), actor: 'coordinator', eventType: 'server.serving',
        details: { host: options.host, port, auth: options.auth },
      });
      return new CoordinatorHost(coordinator, server, options, port, token);
    } catch (err) {
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

  /** The environment an agent needs to reach this coordinator, with the port actually bound. */
  environment(): Record<string, string> {
    return agentEnvironment(this.options.host, this.port, this.token);
  }

  /** Drains the server, then closes the core and its store. */
  async stop(graceMs = 2000): Promise<void> {
    this.coordinator.log.record({
      correlationId: this.coordinator.ids.uuid(), actor: 'coordinator', eventType: 'server.draining', details: { grace_ms: graceMs },
    });
    await this.server.drain(graceMs);
    this.coordinator.dispose();
  }
}
