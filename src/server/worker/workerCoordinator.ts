import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { CoordinatorApi } from '../../core/api';
import { Emitter, type Event } from '../../core/events';
import { RemoteConnection } from '../../core/api/remote';
import type { BridgeEndpoints } from '../bridge/model';
import { API_TARGET, HOST_TARGET, isFatalNotice, type WorkerHostControl, type WorkerHostOptions } from './model';

/** The worker's heap limit by default: far above what the coordinator uses, far below what would starve the editor. */
export const DEFAULT_WORKER_HEAP_MIB = 1024;

export interface WorkerCoordinatorOptions {
  /** dist/coordinatorWorker.js. */
  readonly script: string;
  readonly host: WorkerHostOptions;
  /** The worker's `resourceLimits.maxOldGenerationSizeMb` (default DEFAULT_WORKER_HEAP_MIB): a runaway heap ends the worker. */
  readonly maxHeapMiB?: number;
  /** Every coordinator event as its log line (the Output channel), a batch at a time. */
  readonly onLog?: (lines: readonly string[]) => void;
}

/** Why the worker ended without being stopped: an exception, its heap limit, or `terminate`. */
export interface WorkerExit {
  readonly reason: string;
  /** ERR_WORKER_OUT_OF_MEMORY when the heap limit ended it. */
  readonly code?: string;
}

/**
 * Why a start failed, rebuilt from the worker's error: a port in use (with a free one), a store that would not open,
 * a setting the host refused, or anything else.
 */
export type StartFailureKind = 'port_in_use' | 'store_open' | 'configuration' | 'failed';

export class CoordinatorStartError extends Error {
  constructor(
    readonly kind: StartFailureKind,
    message: string,
    /** For `port_in_use`: the port asked for and one that is free. */
    readonly port?: number,
    readonly freePort?: number,
  ) {
    super(message);
    this.name = 'CoordinatorStartError';
  }
}

/** A prewarmed worker that no `start` takes within this is ended. */
const PREWARM_UNUSED_MS = 60_000;

/** A worker started by `prewarm` and not taken by a `start` yet. */
let prewarmed: { script: string; maxHeapMiB: number; worker: Worker; began: number; beganAt: number } | undefined;

function spawnWorker(script: string, maxHeapMiB: number, protosDir?: string): Worker {
  return new Worker(script, {
    // A prewarmed worker parses the protos while it waits for its `start`.
    workerData: { protosDir },
    resourceLimits: { maxOldGenerationSizeMb: maxHeapMiB },
    // The worker's stdout/stderr go to the extension host's, as the coordinator's did on its thread.
    stdout: false,
    stderr: false,
  });
}

function startErrorOf(err: unknown): CoordinatorStartError {
  const e = (err instanceof Error ? err : new Error(String(err))) as Error & Record<string, unknown>;
  const kind: StartFailureKind =
    e.name === 'PortInUseError'
      ? 'port_in_use'
      : e.name === 'StoreOpenError'
        ? 'store_open'
        : e.name === 'ConfigurationError'
          ? 'configuration'
          : 'failed';
  const number = (value: unknown) => (typeof value === 'number' ? value : undefined);
  return new CoordinatorStartError(kind, e.message, number(e.port), number(e.freePort));
}

/**
 * The editor's coordinator in a worker thread of the extension host: the same CoordinatorHost the CLI runs, started in
 * `dist/coordinatorWorker.js` with a heap limit, reached through one generic proxy (core/api/remote): `api` is the
 * CoordinatorApi, the rest are the host's controls. The worker owns the store, the gRPC server and the MCP bridge; the
 * editor's thread only passes calls, answers and batched events.
 *
 * A worker that ends without `stop` (an uncaught exception, its heap limit, `terminate`) fires `onDidExit`: its calls
 * reject with CoordinatorApiError `stopped`, and its owner starts a new one, which recovers from the store.
 */
export class WorkerCoordinator {
  private readonly exited = new Emitter<WorkerExit>();
  private readonly failed = new Emitter<{ readonly message: string }>();
  /** The worker ended without being asked (`onDidExit`). */
  readonly onDidExit: Event<WorkerExit> = this.exited.event;
  /** The store could not commit (CoordinatorHost.onDidFail). */
  readonly onDidFail: Event<{ readonly message: string }> = this.failed.event;
  private stopping = false;
  private ended = false;
  private lastError: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    private readonly connection: RemoteConnection,
    private readonly control: WorkerHostControl,
    readonly api: CoordinatorApi,
    readonly options: WorkerHostOptions,
    readonly port: number,
    readonly bridgeEndpoints: BridgeEndpoints | undefined,
    readonly storeLocation: string,
    /** The worker's thread id (for the log). */
    readonly threadId: number,
    /** How long the start took in all, the worker's script to load, the host to listen (for the log). */
    readonly startTimings: { readonly totalMs: number; readonly loadedMs: number; readonly hostMs: number },
  ) {}

  /**
   * Starts a worker thread on `script` now, for the next `start` with the same script and heap limit to use: its script
   * loads and it parses the protos in `protosDir` while the editor's thread does the rest of its activation. Unused, it
   * ends after a minute.
   */
  static prewarm(script: string, protosDir: string, maxHeapMiB = DEFAULT_WORKER_HEAP_MIB): void {
    if (prewarmed?.script === script && prewarmed.maxHeapMiB === maxHeapMiB) return;
    const worker = spawnWorker(script, maxHeapMiB, protosDir);
    worker.unref();
    const entry = { script, maxHeapMiB, worker, began: performance.now(), beganAt: Date.now() };
    prewarmed = entry;
    // Not taken soon (no folder open after all): ended, it holds no socket or store yet.
    setTimeout(() => {
      if (prewarmed !== entry) return;
      prewarmed = undefined;
      void worker.terminate();
    }, PREWARM_UNUSED_MS).unref();
  }

  static async start(options: WorkerCoordinatorOptions): Promise<WorkerCoordinator> {
    const maxHeapMiB = options.maxHeapMiB ?? DEFAULT_WORKER_HEAP_MIB;
    const warm = prewarmed?.script === options.script && prewarmed.maxHeapMiB === maxHeapMiB ? prewarmed : undefined;
    prewarmed = undefined;
    const began = warm?.began ?? performance.now();
    const beganAt = warm?.beganAt ?? Date.now();
    const worker = warm?.worker ?? spawnWorker(options.script, maxHeapMiB);
    worker.ref();
    const connection = new RemoteConnection(worker);
    const control = connection.remote<WorkerHostControl>(HOST_TARGET);
    let early: Error | undefined;
    const onEarlyError = (err: Error) => (early = err);
    worker.on('error', onEarlyError);
    const exitedEarly = new Promise<never>((_, reject) =>
      worker.once('exit', (code) =>
        reject(early ?? new Error(`the coordinator's worker thread ended at start (exit code ${code})`)),
      ),
    );
    exitedEarly.catch(() => undefined);
    const logSubscription = options.onLog ? control.onDidLog(options.onLog) : undefined;
    const failed = new Emitter<{ readonly message: string }>();
    const failSubscription = control.onDidFail((failure) => failed.fire(failure));
    let started;
    try {
      started = await Promise.race([control.start(options.host), exitedEarly]);
    } catch (err) {
      logSubscription?.dispose();
      failSubscription.dispose();
      connection.close();
      await worker.terminate();
      throw startErrorOf(err);
    }
    worker.off('error', onEarlyError);
    const coordinator = new WorkerCoordinator(
      worker,
      connection,
      control,
      connection.remote<CoordinatorApi>(API_TARGET),
      options.host,
      started.port,
      started.bridgeEndpoints,
      started.storeLocation,
      worker.threadId,
      {
        totalMs: Math.round(performance.now() - began),
        loadedMs: started.loadedAt - beganAt,
        hostMs: started.hostMs,
      },
    );
    failed.event((failure) => coordinator.failed.fire(failure));
    coordinator.watch();
    return coordinator;
  }

  /** Calls posted and not answered yet (a test's view of the traffic). */
  get pendingCalls(): number {
    return this.connection.pendingCalls;
  }

  environment(): Promise<Record<string, string>> {
    return this.control.environment();
  }

  terminalEnvironment(): Promise<Record<string, string>> {
    return this.control.terminalEnvironment();
  }

  rotateEnrolment(by: string): Promise<Record<string, string>> {
    return this.control.rotateEnrolment(by);
  }

  memory(): Promise<{ readonly heapUsed: number; readonly heapTotal: number; readonly rss: number }> {
    return this.control.memory();
  }

  /** Drains the server and closes the store in the worker, then ends the worker (at once, if it does not answer). */
  async stop(graceMs = 2000): Promise<void> {
    if (this.ended || this.stopping) return;
    this.stopping = true;
    try {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.control.stop(graceMs),
        new Promise((resolve) => (timer = setTimeout(resolve, graceMs + 3000))),
      ]);
      clearTimeout(timer);
    } catch {
      // A worker that ended meanwhile has nothing left to drain.
    }
    this.connection.close();
    await this.worker.terminate();
  }

  /**
   * Ends the worker now, as a crash would (`onDidExit` fires): what the store took stays, the rest of the
   * coordinator's memory goes. The worker ends its connections and itself (`crash`); one that does not within
   * `timeoutMs` (stuck in a loop) is terminated. SW4RM: Simulate Coordinator Crash and the tests use it.
   */
  async terminate(why = 'the worker was ended on request (a simulated crash)', timeoutMs = 2000): Promise<void> {
    if (this.ended) return;
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.control.crash(why).catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
    const outcome = await Promise.race([exited, late]);
    clearTimeout(timer);
    if (outcome === 'late') {
      this.lastError = new Error(`${why}; it did not end itself within ${timeoutMs} ms and was terminated`);
      await this.worker.terminate();
    }
  }

  private watch(): void {
    this.worker.on('error', (err) => (this.lastError = err));
    this.worker.on('message', (value: unknown) => {
      if (isFatalNotice(value)) this.lastError = Object.assign(new Error(value.message), { code: value.code });
    });
    this.worker.once('exit', (code) => {
      this.ended = true;
      this.connection.close();
      if (this.stopping) return;
      const err = this.lastError as (Error & { code?: unknown }) | undefined;
      this.exited.fire({
        reason: err ? err.message : `the worker thread exited with code ${code}`,
        code: typeof err?.code === 'string' ? err.code : undefined,
      });
      this.exited.dispose();
    });
  }
}
