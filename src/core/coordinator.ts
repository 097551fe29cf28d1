import { systemClock, type Clock } from './clock';
import { randomIds, type IdSource } from './ids';
import { EventLog } from './log/eventLog';
import { DEFAULT_REGISTRY_OPTIONS, Registry, type RegistryOptions } from './registry/registry';
import { DEFAULT_ROUTER_OPTIONS, Router, type RouterOptions } from './router/router';
import type { Store, StoredEvent } from './store/store';

export interface CoordinatorOptions {
  readonly store: Store;
  readonly clock?: Clock;
  readonly ids?: IdSource;
  readonly registry?: Partial<RegistryOptions>;
  readonly router?: Partial<RouterOptions>;
  /** Subscribed before anything is recorded, so that start-up and restore events are seen too. */
  readonly onEvent?: (event: StoredEvent) => void;
}

/**
 * The coordinator's core: every service of the SW4RM model over one store, one log, one clock.
 * It knows nothing of gRPC or the editor; src/server and src/extension wrap it.
 */
export class Coordinator {
  readonly store: Store;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly log: EventLog;
  readonly registry: Registry;
  readonly router: Router;

  constructor(options: CoordinatorOptions) {
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? randomIds;
    this.log = new EventLog(this.store, this.clock);
    if (options.onEvent) this.log.onDidRecord(options.onEvent);
    this.log.record({
      correlationId: this.ids.uuid(), actor: 'coordinator', eventType: 'coordinator.started',
      details: { store: this.store.location, schema_version: this.store.schemaVersion },
    });
    this.registry = new Registry(this.store, this.log, this.clock, { ...DEFAULT_REGISTRY_OPTIONS, ...options.registry });
    this.router = new Router(this.store, this.registry, this.log, this.clock, this.ids, { ...DEFAULT_ROUTER_OPTIONS, ...options.router });
  }

  /** Stops timers and closes the store. The coordinator cannot be used afterwards. */
  dispose(): void {
    this.router.dispose();
    this.registry.dispose();
    this.log.record({ correlationId: this.ids.uuid(), actor: 'coordinator', eventType: 'coordinator.stopped', details: {} });
    this.log.dispose();
    this.store.close();
  }
}
