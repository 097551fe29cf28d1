// The entry of the editor's coordinator thread (dist/coordinatorWorker.js): a worker_threads Worker of the extension
// host runs the same CoordinatorHost the headless CLI runs on its main thread, and serves the CoordinatorApi and the
// host's controls to the editor over its parentPort (core/api/remote). No `vscode` here.
import { performance } from 'node:perf_hooks';
import * as v8 from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import { formatEvent } from '../../core/api';
import { InProcessCoordinatorApi } from '../../core/api/inProcessApi';
import { Emitter } from '../../core/events';
import { RemoteServer } from '../../core/api/remote';
import { CoordinatorHost } from '../host';
import { loadPackageDefinition } from '../protos';
import {
  API_TARGET,
  COALESCED_EVENTS,
  FATAL_EXIT_CODE,
  HEAP_WATCH_MS,
  HEAP_WATCH_SHARE,
  HOST_TARGET,
  type FatalNotice,
  type WorkerHostControl,
  type WorkerHostOptions,
} from './model';

if (!parentPort) throw new Error('coordinatorWorker.js runs as a worker thread of the extension host');
const port = parentPort;
const server = new RemoteServer(port, COALESCED_EVENTS);
const logged = new Emitter<readonly string[]>();
const failed = new Emitter<{ readonly message: string }>();
let lines: string[] = [];
let host: CoordinatorHost | undefined;
let api: InProcessCoordinatorApi | undefined;

function log(line: string): void {
  if (lines.length === 0)
    setImmediate(() => {
      const batch = lines;
      lines = [];
      logged.fire(batch);
    });
  lines.push(line);
}

function running(): CoordinatorHost {
  if (!host) throw new Error('the coordinator is not running in this worker');
  return host;
}

/**
 * Ends this thread on a fatal error, safely: every agent connection first (a thread torn down while HTTP/2 reads
 * arrive aborts the whole process: nodejs/node#38418), then why, then the exit. What the store took stays in the
 * file; the editor starts a new worker from it.
 */
function fatal(message: string, code?: string): never {
  try {
    host?.abort();
  } catch {
    // Ending the connections is all that matters here; the thread goes either way.
  }
  try {
    port.postMessage({ t: 'fatal', message, code } satisfies FatalNotice);
  } catch {
    // The editor sees the exit code instead.
  }
  process.exit(FATAL_EXIT_CODE);
}

process.on('uncaughtException', (err) =>
  fatal(`an uncaught exception: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`),
);
// As on the extension host's own thread, where it ran before: a rejection nobody handled is reported, not fatal.
process.on('unhandledRejection', (err) =>
  log(
    `SW4RM: an unhandled rejection in the coordinator: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
  ),
);

// The heap limit (resourceLimits) ends the thread at once, connections and all; a heap that grows towards it ends it
// here first, safely. Allocations in one synchronous run the watchdog never sees are left to the limit.
const heapWatch = setInterval(() => {
  const { used_heap_size: used, heap_size_limit: limit } = v8.getHeapStatistics();
  if (used > limit * HEAP_WATCH_SHARE)
    fatal(
      `its heap reached ${Math.round(used / 2 ** 20)} MiB of its ${Math.round(limit / 2 ** 20)} MiB limit`,
      'ERR_WORKER_OUT_OF_MEMORY',
    );
}, HEAP_WATCH_MS);
heapWatch.unref();

const control: WorkerHostControl = {
  async start(options: WorkerHostOptions) {
    if (host) throw new Error('the coordinator already runs in this worker');
    const began = performance.now();
    host = await CoordinatorHost.start({ ...options, onEvent: (event) => log(formatEvent(event)) });
    host.onDidFail((err) => failed.fire({ message: err.message }));
    api = new InProcessCoordinatorApi(host.coordinator);
    server.add(API_TARGET, api);
    return {
      port: host.port,
      bridgeEndpoints: host.bridgeEndpoints,
      storeLocation: await api.storeLocation(),
      loadedAt,
      hostMs: Math.round(performance.now() - began),
    };
  },
  environment: async () => running().environment(),
  terminalEnvironment: async () => running().terminalEnvironment(),
  rotateEnrolment: async (by: string) => running().rotateEnrolment(by),
  async stop(graceMs: number) {
    const stopping = host;
    host = undefined;
    api?.dispose();
    api = undefined;
    clearInterval(heapWatch);
    await stopping?.stop(graceMs);
    // The answer goes first; then nothing is left to keep this thread's event loop alive but the port.
    setImmediate(() => {
      server.dispose();
      port.close();
    });
  },
  async crash(why: string) {
    setImmediate(() => fatal(why));
  },
  memory: async () => {
    const { heapUsed, heapTotal, rss } = process.memoryUsage();
    return { heapUsed, heapTotal, rss };
  },
  onDidLog: logged.event,
  onDidFail: failed.event,
};
server.add(HOST_TARGET, control);
/** When this thread's script had loaded (ms since the epoch: worker threads share the process's time origin). */
const loadedAt = Date.now();

// A worker started ahead of its `start` (WorkerCoordinator.prewarm) parses the protos meanwhile: most of a server's start.
const preload = (workerData as { protosDir?: unknown } | undefined)?.protosDir;
if (typeof preload === 'string')
  setImmediate(() => {
    try {
      loadPackageDefinition(preload);
    } catch {
      // `start` loads them again and says what is wrong.
    }
  });
