import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * The longest hold of this process's event loop while `work` runs (issue 30, item 1), two ways: `wallMs`, what
 * monitorEventLoopDelay saw (1 ms resolution), and `cpuMs`, the most CPU time the main thread spent between two ticks
 * of a 1 ms timer (process.threadCpuUsage, Node ≥ 23.9; undefined before). On a quiet machine the two agree; on one
 * whose cores other processes share, the wall figure also counts the time the thread waited for a core, which no code
 * of ours can remove, so tests assert the CPU figure (and print both).
 */
export interface Hold {
  readonly wallMs: number;
  readonly cpuMs: number | undefined;
  readonly ms: number;
}

const threadCpu = (process as unknown as { threadCpuUsage?: () => { user: number; system: number } }).threadCpuUsage;

/** The garbage collector, where the test process runs with --expose-gc (the mocharc files give it). */
const collectGarbage = (globalThis as { gc?: () => void }).gc;

export async function measureHold<T>(work: () => Promise<T>): Promise<{ value: T; hold: Hold }> {
  // The garbage of the tests run before (one mocha process runs them all) collected first, so that a pause the
  // measure sees is the work's own garbage, not theirs.
  collectGarbage?.();
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  let cpuMax = 0;
  let last = threadCpu ? threadCpu() : undefined;
  const tick = setInterval(() => {
    if (!threadCpu || !last) return;
    const now = threadCpu();
    cpuMax = Math.max(cpuMax, (now.user - last.user + now.system - last.system) / 1000);
    last = now;
  }, 1);
  histogram.enable();
  // A first sample before the work, and one more turn after it, so a hold at either end is seen.
  await new Promise((r) => setTimeout(r, 5));
  last = threadCpu ? threadCpu() : undefined;
  const t0 = performance.now();
  try {
    const value = await work();
    const ms = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 5));
    return { value, hold: { wallMs: histogram.max / 1e6, cpuMs: threadCpu ? cpuMax : undefined, ms } };
  } finally {
    histogram.disable();
    clearInterval(tick);
  }
}

/** "event loop held 12.3 ms (CPU 8.1 ms)". */
export function describeHold(hold: Hold): string {
  return `event loop held ${hold.wallMs.toFixed(1)} ms (main-thread CPU in one turn ${hold.cpuMs === undefined ? 'not measured' : `${hold.cpuMs.toFixed(1)} ms`})`;
}

/** The figure a test asserts: the CPU one where it is measured, the wall one otherwise. */
export function heldMs(hold: Hold): number {
  return hold.cpuMs ?? hold.wallMs;
}
