import type { BridgeEndpoints } from '../bridge/model';
import type { HostOptions } from '../host';

/**
 * The host's options as they cross into the worker: everything but what cannot be copied (the clock, the id
 * source, the event callback: the worker's coordinator uses the real ones and sends its events as log lines).
 */
export type WorkerHostOptions = Omit<HostOptions, 'clock' | 'ids' | 'onEvent'>;

/** What a started coordinator in the worker answers. */
export interface WorkerStarted {
  readonly port: number;
  readonly bridgeEndpoints: BridgeEndpoints | undefined;
  readonly storeLocation: string;
  /** When the thread's script had loaded (ms since the epoch); then CoordinatorHost.start took `hostMs`. */
  readonly loadedAt: number;
  readonly hostMs: number;
}

/**
 * The host's controls, served in the worker beside the CoordinatorApi (as `host`; the API as `api`): what the editor
 * does with the host itself rather than with the coordinator's state.
 */
export interface WorkerHostControl {
  /** Starts the host (CoordinatorHost.start); the `api` target is served from then on. Rejects with why not. */
  start(options: WorkerHostOptions): Promise<WorkerStarted>;
  /** CoordinatorHost.environment: the operator's environment. */
  environment(): Promise<Record<string, string>>;
  /** CoordinatorHost.terminalEnvironment: the integrated terminals' environment (the enrolment credential). */
  terminalEnvironment(): Promise<Record<string, string>>;
  /** CoordinatorHost.rotateEnrolment. */
  rotateEnrolment(by: string): Promise<Record<string, string>>;
  /** Drains the server and closes the store; the worker then ends. */
  stop(graceMs: number): Promise<void>;
  /**
   * Ends the worker as a crash would, but safely: every connection is ended first, then the thread exits with
   * FATAL_EXIT_CODE after posting `why` as a FatalNotice. The editor's Simulate Coordinator Crash.
   */
  crash(why: string): Promise<void>;
  /** The worker's memory (process.memoryUsage of its heap; rss is the whole process's). */
  memory(): Promise<{ readonly heapUsed: number; readonly heapTotal: number; readonly rss: number }>;
  /** The coordinator's events as the Output channel's lines (formatEvent), a turn's worth at a time. */
  readonly onDidLog: (listener: (lines: readonly string[]) => void) => { dispose(): void };
  /** The store could not commit (CoordinatorHost.onDidFail): the host serves nothing it cannot store. */
  readonly onDidFail: (listener: (failure: { readonly message: string }) => void) => { dispose(): void };
}

/** Names of the served objects. */
export const API_TARGET = 'api';
export const HOST_TARGET = 'host';
/** Events whose listeners only need to hear that something changed (the API says "listeners coalesce"). */
export const COALESCED_EVENTS: ReadonlySet<string> = new Set(['onDidChangeInbox']);

/** The exit code of a worker that ended itself on a fatal error (an exception, its heap watchdog, `crash`). */
export const FATAL_EXIT_CODE = 70;

/** Posted on the port, outside the proxy's protocol, just before the worker ends itself: why. */
export interface FatalNotice {
  readonly t: 'fatal';
  readonly message: string;
  /** ERR_WORKER_OUT_OF_MEMORY when the heap watchdog ended it. */
  readonly code?: string;
}

export function isFatalNotice(value: unknown): value is FatalNotice {
  return typeof value === 'object' && value !== null && (value as { t?: unknown }).t === 'fatal';
}

/** The heap watchdog's look (ms) and its bound: a heap used above this share of its limit ends the worker itself. */
export const HEAP_WATCH_MS = 500;
export const HEAP_WATCH_SHARE = 0.9;
