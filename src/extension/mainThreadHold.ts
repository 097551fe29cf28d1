import * as fs from 'node:fs';
import { createHistogram, monitorEventLoopDelay, type ELDHistogram, type RecordableHistogram } from 'node:perf_hooks';
import { OwnWorkProfiler } from './ownWork';

/** The environment variable that names a file for the hold report (the editor tests set it). */
export const MAIN_THREAD_REPORT_VARIABLE = 'SW4RM_MAIN_THREAD_REPORT';
/** How often a window of the report is written. */
export const REPORT_WINDOW_MS = 2_000;
/** The sampling timer's interval: every delay sample is at least this; the hold is what a sample has beyond it. */
const RESOLUTION_MS = 5;

/** A delay sample of the histogram (ns) as a hold in ms: beyond the timer's interval, never below 0. */
const holdMs = (ns: number) => Math.max(0, ns / 1e6 - RESOLUTION_MS);

/** This thread's CPU time (Node ≥ 23.9; the extension host of VS Code ≥ 1.101 runs Node 22+, 1.139 Node 24). */
const threadCpu = (process as unknown as { threadCpuUsage?: () => { user: number; system: number } }).threadCpuUsage;

/**
 * One window of the report, in milliseconds. `p99` / `max`: how late the sampling timer (every 5 ms) came, the wall
 * figure, which also counts the time the thread waited for a core that other processes held. `cpuP99` / `cpuMax`: the
 * CPU time this thread spent between two ticks, the extension host's own work (ours and other extensions'), which is
 * what the product bounds (undefined where Node cannot measure a thread's CPU).
 */
export interface HoldWindow {
  /** The window's end, ms since the epoch. */
  readonly at: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly cpuP99?: number;
  readonly cpuMax?: number;
  /**
   * The extension's own holds of the thread (OwnWorkProfiler: stretches of its code on the stack in the thread's CPU
   * profile), only when the tests ask for the report: their p99, the longest, how many.
   */
  readonly ownP99?: number;
  readonly ownMax?: number;
  readonly ownCount?: number;
  /** The holds of 1 ms or more (the rest are shorter), for a p99 over several windows; where the longest began. */
  readonly ownLong?: number[];
  readonly ownLongestAt?: string;
  /** Samples in the window. */
  readonly count: number;
}

/**
 * How long the extension host's main thread is held, from activation on, in windows of REPORT_WINDOW_MS. With
 * SW4RM_MAIN_THREAD_REPORT set, each window is appended to that file as a JSON line (the e2e suite prints them), and a
 * line says how long activation took to a listening coordinator. The coordinator itself runs in a worker
 * (server/worker): what this sees is the editor's part (views, panels, commands, the proxy) and other extensions'.
 */
export class MainThreadHold {
  private readonly loop: ELDHistogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  /** CPU µs between ticks of `ticker`. */
  private readonly cpu: RecordableHistogram = createHistogram();
  private lastCpu = threadCpu?.();
  private readonly ticker: NodeJS.Timeout;
  private readonly timer: NodeJS.Timeout;
  /** Over every window so far: the largest window p99 (a bound on the p99 of all samples), the largest hold, samples. */
  private worst = { p99: 0, max: 0, cpuP99: 0, cpuMax: 0, samples: 0 };

  /** With a report: the extension's own work, from the thread's CPU profile. */
  private readonly ownWork: OwnWorkProfiler | undefined;

  /** `ownScript`: this extension's bundle, whose frames are its own work in the profile (with a report only). */
  constructor(
    ownScript?: string,
    private readonly reportFile: string | undefined = process.env[MAIN_THREAD_REPORT_VARIABLE] || undefined,
  ) {
    this.ownWork = reportFile && ownScript ? new OwnWorkProfiler(ownScript) : undefined;
    this.loop.enable();
    this.ticker = setInterval(() => this.tick(), RESOLUTION_MS);
    this.ticker.unref();
    this.timer = setInterval(() => this.window(), REPORT_WINDOW_MS);
    this.timer.unref();
  }

  /**
   * Since activation, in ms: each p99 bounds the p99 of every sample (no window has more than 1% of its samples above
   * it, so neither has the whole); each max is the longest hold.
   */
  summary(): { readonly p99: number; readonly max: number; readonly cpuP99: number; readonly cpuMax: number } {
    this.window();
    return { ...this.worst };
  }

  /** Activation to a listening coordinator took `ms` (written to the report). */
  started(ms: number): void {
    this.append({ activationToListeningMs: Math.round(ms) });
  }

  dispose(): void {
    clearInterval(this.ticker);
    clearInterval(this.timer);
    this.window();
    this.loop.disable();
    this.ownWork?.dispose();
  }

  private tick(): void {
    if (!threadCpu || !this.lastCpu) return;
    const now = threadCpu();
    const us = now.user - this.lastCpu.user + now.system - this.lastCpu.system;
    this.lastCpu = now;
    this.cpu.record(Math.max(1, Math.round(us)));
  }

  private window(): void {
    if (this.loop.count === 0) return;
    const measured = threadCpu !== undefined && this.cpu.count > 0;
    const window: HoldWindow = {
      at: Date.now(),
      p50: holdMs(this.loop.percentile(50)),
      p99: holdMs(this.loop.percentile(99)),
      max: holdMs(this.loop.max),
      cpuP99: measured ? this.cpu.percentile(99) / 1000 : undefined,
      cpuMax: measured ? this.cpu.max / 1000 : undefined,
      count: this.loop.count,
    };
    this.loop.reset();
    this.cpu.reset();
    this.worst = {
      p99: Math.max(this.worst.p99, window.p99),
      max: Math.max(this.worst.max, window.max),
      cpuP99: Math.max(this.worst.cpuP99, window.cpuP99 ?? 0),
      cpuMax: Math.max(this.worst.cpuMax, window.cpuMax ?? 0),
      samples: this.worst.samples + window.count,
    };
    if (!this.ownWork) return this.append(window);
    void this.ownWork.take().then(
      ({ holds, longestAt }) =>
        this.append({
          ...window,
          ownP99: holds.length ? holds[Math.floor(holds.length * 0.01)] : 0,
          ownMax: holds[0] ?? 0,
          ownCount: holds.length,
          ownLong: holds.filter((ms) => ms >= 1),
          ownLongestAt: longestAt,
        }),
      () => this.append(window),
    );
  }

  private append(record: object): void {
    if (!this.reportFile) return;
    try {
      fs.appendFileSync(this.reportFile, `${JSON.stringify(record)}\n`);
    } catch {
      // A report the tests asked for and cannot be written: the tests say so when they read it.
    }
  }
}
