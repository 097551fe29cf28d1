import * as fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { AgentPair, BenchError } from './agents';
import { ServerHandle } from './servers';

export interface PhaseResult {
  readonly messages: number;
  /** From the first send to the last completion. */
  readonly elapsedMs: number;
  /** Completed messages per second. */
  readonly rate: number;
  /** Per-message latencies in ms, ascending. */
  readonly latencies: Float64Array;
  /** CPU seconds the server process used during the phase (NaN without /proc). */
  readonly serverCpuS: number;
  /** CPU seconds the load generator (this process) used during the phase. */
  readonly loadCpuS: number;
  /** CPU seconds every other process on the machine used during the phase (NaN without /proc). */
  readonly foreignCpuS: number;
  /** For paced phases: the largest delay of a send behind its schedule, in ms. */
  readonly maxSendLagMs: number;
  /** For closed loops: sending stopped at the time limit before all messages were sent. */
  readonly capped: boolean;
}

/**
 * Sends `messages` messages keeping `concurrency` of them outstanding at all times. After `maxMs` no new
 * message is sent; the outstanding ones are still waited for and the rate counts completed messages only.
 */
export async function closedLoop(
  server: ServerHandle,
  pair: AgentPair,
  messages: number,
  concurrency: number,
  stallMs: number,
  maxMs = Infinity,
): Promise<PhaseResult> {
  const latencies = new Float64Array(messages);
  const meter = startMeters(server);
  const deadline = meter.start + maxMs;
  let issued = 0;
  let completed = 0;
  let capped = false;
  let lastCompletion = meter.start;
  await withStallWatchdog(
    pair,
    () => issued,
    stallMs,
    () => completed,
    (resolve, reject) => {
      const launch = (): void => {
        if (!capped && issued < messages && performance.now() > deadline) capped = true;
        const limit = capped ? issued : messages;
        while (issued - completed < concurrency && issued < limit) {
          issued += 1;
          pair.send().then((latency) => {
            latencies[completed++] = latency;
            lastCompletion = performance.now();
            launch();
          }, reject);
        }
        if (completed === issued && issued === limit) resolve();
      };
      launch();
    },
  );
  return meter.finish(completed, lastCompletion, latencies.subarray(0, completed), 0, capped);
}

/** Sends at a fixed rate for `seconds`, independent of completions (open loop), and waits for every completion. */
export async function openLoop(
  server: ServerHandle,
  pair: AgentPair,
  ratePerSecond: number,
  seconds: number,
  stallMs: number,
): Promise<PhaseResult> {
  const messages = Math.max(1, Math.round(ratePerSecond * seconds));
  const intervalMs = 1000 / ratePerSecond;
  const latencies = new Float64Array(messages);
  const meter = startMeters(server);
  let issued = 0;
  let completed = 0;
  let maxLag = 0;
  let lastCompletion = meter.start;
  let timer: NodeJS.Timeout | undefined;
  try {
    await withStallWatchdog(
      pair,
      () => issued,
      stallMs,
      () => completed,
      (resolve, reject) => {
        const tick = (): void => {
          const now = performance.now();
          const due = Math.min(messages, Math.floor((now - meter.start) / intervalMs) + 1);
          if (due > issued) maxLag = Math.max(maxLag, now - (meter.start + issued * intervalMs));
          while (issued < due) {
            issued += 1;
            pair.send().then((latency) => {
              latencies[completed++] = latency;
              lastCompletion = performance.now();
              if (completed === messages) resolve();
            }, reject);
          }
          if (issued < messages) {
            timer = setTimeout(tick, Math.max(0, meter.start + issued * intervalMs - performance.now()));
          }
        };
        tick();
      },
    );
  } finally {
    clearTimeout(timer);
  }
  return meter.finish(messages, lastCompletion, latencies, maxLag, false);
}

interface Meters {
  readonly start: number;
  finish(messages: number, end: number, latencies: Float64Array, maxSendLagMs: number, capped: boolean): PhaseResult;
}

function startMeters(server: ServerHandle): Meters {
  const machineCpu = machineBusySeconds();
  const serverCpu = server.cpuSeconds();
  const loadCpu = process.cpuUsage();
  const start = performance.now();
  return {
    start,
    finish: (messages, end, latencies, maxSendLagMs, capped) => {
      const used = process.cpuUsage(loadCpu);
      const serverCpuS = server.cpuSeconds() - serverCpu;
      const loadCpuS = (used.user + used.system) / 1e6;
      const elapsedMs = end - start;
      return {
        messages,
        elapsedMs,
        rate: (messages * 1000) / elapsedMs,
        latencies: latencies.sort(),
        serverCpuS,
        loadCpuS,
        foreignCpuS: Math.max(0, machineBusySeconds() - machineCpu - serverCpuS - loadCpuS),
        maxSendLagMs,
        capped,
      };
    },
  };
}

/**
 * Runs `body` and fails the pair (which rejects every outstanding send) when no message completes for
 * `stallMs`: a message that is never acknowledged is a lost message.
 */
function withStallWatchdog(
  pair: AgentPair,
  total: () => number,
  stallMs: number,
  completed: () => number,
  body: (resolve: () => void, reject: (err: Error) => void) => void,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let last = completed();
    let lastProgress = performance.now();
    const watchdog = setInterval(() => {
      const now = performance.now();
      if (completed() !== last) {
        last = completed();
        lastProgress = now;
      } else if (now - lastProgress > stallMs) {
        pair.fail(
          new BenchError(
            `lost messages: ${total() - completed()} of ${total()} not completed after ${Math.round(stallMs / 1000)} s without progress ` +
              `(${pair.outstanding} sent and waiting for an accepted reply and a FULFILLED ACK)`,
          ),
        );
      }
    }, 250);
    const settle = (err?: Error): void => {
      clearInterval(watchdog);
      if (err) reject(err);
      else resolve();
    };
    body(
      () => settle(),
      (err) => settle(err),
    );
  });
}

/** Linux reports /proc/stat times in clock ticks; USER_HZ is 100 on every mainstream kernel. */
const CLOCK_TICKS_PER_SECOND = 100;

/** CPU seconds all processes on the machine have been busy (the aggregate `cpu` line of /proc/stat), or NaN. */
function machineBusySeconds(): number {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0];
    const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}
