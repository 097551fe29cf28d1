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

/** The store folder and the clock of a fixture, and its lifecycle: open, closed and opened again, disposed. */
abstract class FixtureBase implements Disposable {
  readonly dataDir: string;
  readonly clock: ManualClock;
  private readonly ownsDir: boolean;
  private readonly storeOptions: CoordinatorStoreOptions | undefined;
  private isOpen = false;

  constructor(options: StoreFixtureOptions) {
    this.ownsDir = options.dataDir === undefined;
    this.dataDir = options.dataDir ?? makeTempDir(options.prefix ?? 'sw4rm-unit-');
    this.clock = new ManualClock(options.now);
    this.storeOptions = options.store;
  }

  dispose(): void {
    try {
      this.close();
    } finally {
      if (this.ownsDir) removeTempDir(this.dataDir);
    }
  }

  /** What opening the fixture opens, and what closing it closes. */
  protected abstract openParts(): void;
  protected abstract closeParts(): void;

  protected openStore(): CoordinatorStore {
    return CoordinatorStore.open(this.dataDir, this.storeOptions);
  }

  protected open(): void {
    this.openParts();
    this.isOpen = true;
  }

  /** Closes and opens again (a restart); `between` runs while closed. */
  protected cycle(between?: () => void): void {
    this.close();
    between?.();
    this.open();
  }

  /** Closes unless closed (a `between` that failed left it so). */
  private close(): void {
    if (!this.isOpen) return;
    this.isOpen = false;
    this.closeParts();
  }
}

/**
 * A real store file, a ManualClock and the structured event log over them, for an area a test builds by hand (the
 * test disposes the area before the fixture).
 */
export class StoreFixture extends FixtureBase {
  store!: CoordinatorStore;
  log!: EventLog;

  constructor(options: StoreFixtureOptions = {}) {
    super(options);
    this.open();
  }

  /** Closes the store and opens it again with a new event log (a restart); `whileClosed` runs between. */
  reopen(whileClosed?: () => void): void {
    this.cycle(whileClosed);
  }

  protected openParts(): void {
    this.store = this.openStore();
    this.log = new EventLog(this.store, this.clock);
  }

  protected closeParts(): void {
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
export class CoordinatorFixture extends FixtureBase {
  store!: CoordinatorStore;
  coordinator!: Coordinator;
  /** What each (re)started coordinator gets besides the store and the clock; a test may replace them before `restart`. */
  coordinatorOptions: Partial<CoordinatorOptions>;
  private readonly owned: Disposable[] = [];
  private readonly started: ((fixture: CoordinatorFixture) => void) | undefined;

  constructor(options: CoordinatorFixtureOptions = {}) {
    super(options);
    this.coordinatorOptions = options.coordinator ?? {};
    this.started = options.started;
    this.open();
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
    this.cycle(whileStopped);
  }

  protected openParts(): void {
    this.store = this.openStore();
    this.coordinator = new Coordinator({ ...this.coordinatorOptions, store: this.store, clock: this.clock });
    this.started?.(this);
  }

  protected closeParts(): void {
    for (const disposable of this.owned.splice(0).reverse()) disposable.dispose();
    this.coordinator.dispose();
  }
}
