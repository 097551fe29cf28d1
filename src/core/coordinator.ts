import { systemClock, type Clock } from './clock';
import type { Disposable } from './events';
import { bindHitlToRouter } from './hitl/envelopeBridge';
import { HitlService } from './hitl/hitlService';
import { DEFAULT_HITL_POLICY, type HitlPolicy } from './hitl/policy';
import { randomIds, type IdSource } from './ids';
import { EventLog } from './log/eventLog';
import { DEFAULT_REGISTRY_OPTIONS, Registry, type RegistryOptions } from './registry/registry';
import { schedulePruning } from './retention';
import { DEFAULT_ROUTER_OPTIONS, Router, type RouterOptions } from './router/router';
import type { Store, StoredEvent } from './store/store';

/** About a million events: the last few hours of a busy coordinator, some hundred MB at most. */
export const DEFAULT_MAX_EVENTS = 1_000_000;
const EVENT_RETENTION_INTERVAL_MS = 60_000;
/** Events deleted per run at most: ~3 ms of work, ~20 ms when the commit also checkpoints. */
const EVENT_PRUNE_BATCH = 5_000;

export interface CoordinatorOptions {
  readonly store: Store;
  readonly clock?: Clock;
  readonly ids?: IdSource;
  readonly registry?: Partial<RegistryOptions>;
  readonly router?: Partial<RouterOptions>;
  /** Human-in-the-loop policy: deadlines, fallbacks per reason type, auto rules, pause. */
  readonly hitl?: HitlPolicy;
  /** Structured events kept in the store; older ones are pruned every minute. */
  readonly maxEvents?: number;
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
  readonly hitl: HitlService;
  private readonly hitlBinding: Disposable;
  private readonly retentionTimer: Disposable;

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
    this.hitl = new HitlService(this.store, this.log, this.clock, this.ids, options.hitl ?? DEFAULT_HITL_POLICY);
    this.hitlBinding = bindHitlToRouter(this.hitl, this.router, this.clock);
    this.retentionTimer = this.scheduleEventRetention(options.maxEvents ?? DEFAULT_MAX_EVENTS);
  }

  /**
   * Bounds the event log: every minute, the oldest events beyond the newest `maxEvents` are deleted, at most
   * EVENT_PRUNE_BATCH per run; a backlog is worked off every CATCH_UP_MS.
   */
  private scheduleEventRetention(maxEvents: number): Disposable {
    return schedulePruning(this.clock, EVENT_RETENTION_INTERVAL_MS, () => {
      try {
        const pruned = this.store.transaction(() => this.store.events.prune(maxEvents, EVENT_PRUNE_BATCH));
        if (pruned.deleted > 0) {
          this.log.record({ correlationId: this.ids.uuid(), actor: 'coordinator', eventType: 'events.pruned', details: { pruned: pruned.deleted, kept: maxEvents } });
        }
        return pruned.more;
      } catch (err) {
        // A timer must not throw into the event loop (it would end the CLI); the next run tries again.
        this.log.internalError('coordinator', this.ids.uuid(), err, { during: 'event retention' });
        return false;
      }
    });
  }

  /** Stops timers and closes the store. The coordinator cannot be used afterwards. */
  dispose(): void {
    this.retentionTimer.dispose();
    this.hitlBinding.dispose();
    this.hitl.dispose();
    this.router.dispose();
    this.registry.dispose();
    this.log.record({ correlationId: this.ids.uuid(), actor: 'coordinator', eventType: 'coordinator.stopped', details: {} });
    this.log.dispose();
    this.store.close();
  }
}
