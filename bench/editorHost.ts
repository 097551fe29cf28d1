// The extension host's stand-in for `bench/mainThread.ts`: runs the editor's coordinator the way the extension does
// (`--mode worker`: a WorkerCoordinator on dist/coordinatorWorker.js; `--mode thread`: the CoordinatorHost on this
// thread, as before issue 32), with the views' reads on this thread (the Messages, Agents and status bar queries
// after each change, throttled like the views), and measures how long this thread is held. It takes the CLI's
// flags that bench/servers.ts passes and prints the environment lines it waits for, so it starts like dist/cli.js.
// On SIGTERM it writes the hold (ms beyond the 5 ms sampling interval) to $BENCH_HOLD_FILE and exits.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import { formatEvent, type CoordinatorApi } from '../src/core/api';
import { InProcessCoordinatorApi } from '../src/core/api/inProcessApi';
import { CoordinatorHost } from '../src/server/host';
import { WorkerCoordinator } from '../src/server/worker/workerCoordinator';
import { PROTOS_DIR, REPO_ROOT } from './protocol';

const RESOLUTION_MS = 5;
/** The views refresh at most this often after a change (views/liveTree.ts throttles alike). */
const VIEW_REFRESH_MS = 250;

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  if (process.argv.includes('--help')) {
    console.log('editorHost.js --mode worker|thread --port N --auth token|none --capacity N --data-dir DIR');
    return;
  }
  const mode = flag('--mode') ?? process.env.BENCH_EDITOR_MODE ?? 'worker';
  const options = {
    dataDir: flag('--data-dir') ?? fs.mkdtempSync('/tmp/sw4rm-bench-editor-'),
    protosDir: PROTOS_DIR,
    host: '127.0.0.1',
    port: Number(flag('--port') ?? 0),
    auth: (flag('--auth') ?? 'token') as 'token' | 'none',
    bridge: false,
    router: { capacity: Number(flag('--capacity') ?? 100_000) },
  };
  let lines = 0;
  let api: CoordinatorApi;
  let env: Record<string, string>;
  let stop: () => Promise<void>;
  if (mode === 'worker') {
    const coordinator = await WorkerCoordinator.start({
      script: path.join(REPO_ROOT, 'dist', 'coordinatorWorker.js'),
      host: options,
      // The Output channel: one append per batch.
      onLog: (batch) => void (lines += batch.join('\n').length > 0 ? batch.length : 0),
    });
    api = coordinator.api;
    env = await coordinator.environment();
    stop = () => coordinator.stop(500);
  } else {
    const host = await CoordinatorHost.start({
      ...options,
      onEvent: (event) => void (lines += formatEvent(event) ? 1 : 0),
    });
    const inProcess = new InProcessCoordinatorApi(host.coordinator);
    api = inProcess;
    env = host.environment();
    stop = async () => {
      inProcess.dispose();
      await host.stop(500);
    };
  }
  // The views: after a change, their queries, at most every VIEW_REFRESH_MS.
  let scheduled = false;
  const refresh = (): void => {
    if (scheduled) return;
    scheduled = true;
    setTimeout(() => {
      scheduled = false;
      void Promise.all([api.messages({ limit: 200 }), api.agentCounts(), api.agents()]).catch(() => undefined);
    }, VIEW_REFRESH_MS);
  };
  api.onDidChangeInbox(refresh);
  api.onDidChangeAgents(refresh);
  const loop = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  loop.enable();
  // This thread's own work between two ticks (its CPU time), beside the wall figure that also counts waits for a core.
  const threadCpu = (process as unknown as { threadCpuUsage: () => { user: number; system: number } }).threadCpuUsage;
  const cpu = createHistogram();
  let last = threadCpu();
  const ticker = setInterval(() => {
    const now = threadCpu();
    cpu.record(Math.max(1, Math.round(now.user - last.user + now.system - last.system)));
    last = now;
  }, RESOLUTION_MS);
  for (const [name, value] of Object.entries(env)) console.log(`export ${name}=${value}`);
  process.once('SIGTERM', () => {
    loop.disable();
    clearInterval(ticker);
    const hold = (ns: number) => Math.max(0, ns / 1e6 - RESOLUTION_MS);
    const report = {
      mode,
      p50: hold(loop.percentile(50)),
      p99: hold(loop.percentile(99)),
      max: hold(loop.max),
      cpuP99: cpu.percentile(99) / 1000,
      cpuMax: cpu.max / 1000,
      samples: loop.count,
      logLines: lines,
    };
    if (process.env.BENCH_HOLD_FILE) fs.writeFileSync(process.env.BENCH_HOLD_FILE, JSON.stringify(report));
    void stop().finally(() => process.exit(0));
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
