import { ManualClock } from '../../src/core/clock';
import { Coordinator, type CoordinatorOptions } from '../../src/core/coordinator';
import { CoordinatorStore, type CoordinatorStoreOptions } from '../../src/core/coordinatorStore';
import type { Disposable } from '../../src/core/events';
import { EventLog } from '../../src/core/log/eventLog';
import { makeTempDir, removeTempDir } from './tempDir';

/**
 * Unit-test fixtures on real store files: a CoordinatorStore in a fresh temp folder (or a folder the test gives) and a
 * ManualClock, with the event log (StoreFixture) or a whole Coordinator (CoordinatorFixture) over them. `dispose`
 * closes what is open and removes the temp folder.
 */

export interface StoreFixtureOptions {
  /** The name of the fresh temp folder the store is in (`<prefix>…`), removed by `dispose`. */
  readonly prefix?: string;
  /** A folder of the test's own for the store instead (the test removes it). */
  readonly dataDir?: string;
  /** The ManualClock's start (default: ManualClock's). */
  readonly now?: number;
  /** How each (re)opened store is opened (group commit, …). */
  readonly store?: CoordinatorStoreOptions;
}

/** The store folder and the clock of a fixture. */
class FixtureBase {
  readonly dataDir: string;
  readonly clock: ManualClock;
  private readonly ownsDir: boolean;

  private readonly storeOptions: CoordinatorStoreOptions | undefined;

  constructor(options: StoreFixtureOptions) {
    this.ownsDir = options.dataDir === undefined;
    this.dataDir = options.dataDir ?? makeTempDir(options.prefix ?? 'sw4rm-unit-');
    this.clock = new ManualClock(options.now);
    this.storeOptions = options.store;
  }

  protected openStore(): CoordinatorStore {
    return CoordinatorStore.open(this.dataDir, this.storeOptions);
  }

  protected removeDir(): void {
    if (this.ownsDir) removeTempDir(this.dataDir);
  }
}

/**
 * A real store file, a ManualClock and the structured event log over them, for an area a test builds by hand (the
 * test disposes the area before the fixture).
 */
export class StoreFixture extends FixtureBase implements Disposable {
  store!: CoordinatorStore;
  log!: EventLog;
  private open = false;

  constructor(options: StoreFixtureOptions = {}) {
    super(options);
    this.openAll();
  }

  /** Closes the store and opens it again with a new event log (a restart); `whileClosed` runs between. */
  reopen(whileClosed?: () => void): void {
    this.close();
    whileClosed?.();
    this.openAll();
  }

  dispose(): void {
    try {
      this.close();
    } finally {
      this.removeDir();
    }
  }

  private openAll(): void {
    this.store = this.openStore();
    this.log = new EventLog(this.store, this.clock);
    this.open = true;
  }

  /** Closes the store unless it is closed (a `whileClosed` that failed left it so). */
  private close(): void {
    if (!this.open) return;
    this.open = false;
    this.log.dispose();
    this.store.close();
  }
}

export interface CoordinatorFixtureOptions extends StoreFixtureOptions {
  /** What each (re)started coordinator gets besides the store and the clock (`coordinatorOptions`, replaceable). */
  readonly coordinator?: Partial<CoordinatorOptions>;
  /** Runs after each (re)start: what the test attaches to the coordinator (an API, an operator, endpoints). */
  readonly started?: (fixture: CoordinatorFixture) => void;
}

/** A real store file, a ManualClock and a Coordinator over them, which the test may restart on the same store. */
export class CoordinatorFixture extends FixtureBase implements Disposable {
  store!: CoordinatorStore;
  coordinator!: Coordinator;
  /** What each (re)started coordinator gets besides the store and the clock; a test may replace them before `restart`. */
  coordinatorOptions: Partial<CoordinatorOptions>;
  private readonly owned: Disposable[] = [];
  private readonly started: ((fixture: CoordinatorFixture) => void) | undefined;
  private running = false;

  constructor(options: CoordinatorFixtureOptions = {}) {
    super(options);
    this.coordinatorOptions = options.coordinator ?? {};
    this.started = options.started;
    this.openCoordinator();
  }

  /** Disposes `disposable` (an API, an operator, a subscription) when this coordinator stops, before it; answers it. */
  own<T extends Disposable>(disposable: T): T {
    this.owned.push(disposable);
    return disposable;
  }

  /**
   * Stops this coordinator and starts a new one over the same store (a coordinator restart), with the
   * `coordinatorOptions` the test may have replaced; `whileStopped` runs between.
   */
  restart(whileStopped?: () => void): void {
    this.closeCoordinator();
    whileStopped?.();
    this.openCoordinator();
  }

  dispose(): void {
    try {
      this.closeCoordinator();
    } finally {
      this.removeDir();
    }
  }

  private openCoordinator(): void {
    this.store = this.openStore();
    this.coordinator = new Coordinator({ ...this.coordinatorOptions, store: this.store, clock: this.clock });
    this.running = true;
    this.started?.(this);
  }

  /** Stops the coordinator unless it is stopped (a `whileStopped` that failed left it so). */
  private closeCoordinator(): void {
    if (!this.running) return;
    this.running = false;
    for (const disposable of this.owned.splice(0).reverse()) disposable.dispose();
    this.coordinator.dispose();
  }
}
