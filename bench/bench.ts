/**
 * Router benchmark: the coordinator's RouterService ("routed") against a bare grpc-js router ("bare") that
 * forwards envelopes with no validation and no storage. Both run in child processes; this process is the load
 * generator. It prints figures and ratios; it exits non-zero only when a message fails or is lost.
 *
 * Environment: BENCH_MESSAGES (10000), BENCH_CONCURRENCY (32), BENCH_REPEATS (3), BENCH_LATENCY_SECONDS (5),
 * BENCH_WARMUP_SECONDS (5), BENCH_THROUGHPUT_MAX_SECONDS (15), BENCH_PAYLOAD_BYTES (100), BENCH_CAPACITY (100000),
 * BENCH_ACK_DELIVERY (0), BENCH_STALL_SECONDS (15), BENCH_SERVERS (bare,routed), BENCH_ROUTED_CLI (dist/cli.js),
 * BENCH_BEFORE_CLI (unset: with it, a third server 'before' runs that build, interleaved with the others),
 * BENCH_KEEP_FILES (0: 1 keeps each server's folder, its store and stderr, and prints where).
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { AgentPair, BenchError, emptyCounters, RouterUnimplementedError, type PairCounters } from './agents';
import { closedLoop, median, openLoop, percentile, PhaseResult } from './phases';
import { createRoleClients, RoleClients } from './protocol';
import { ServerHandle, startBareServer, startRoutedServer } from './servers';

export interface BenchConfig {
  readonly messages: number;
  readonly concurrency: number;
  readonly repeats: number;
  readonly latencySeconds: number;
  readonly warmupSeconds: number;
  readonly throughputMaxSeconds: number;
  readonly payloadBytes: number;
  readonly capacity: number;
  readonly ackDelivery: boolean;
  readonly stallMs: number;
  readonly servers: readonly ServerName[];
  readonly routedCli: string | undefined;
  /** Another coordinator build measured as 'before' in the same run (BENCH_BEFORE_CLI). */
  readonly beforeCli: string | undefined;
  /** Keep every server's folder (its store and stderr) at the end (BENCH_KEEP_FILES=1). */
  readonly keepFiles: boolean;
}

type ServerName = 'bare' | 'routed' | 'before';

const THROUGHPUT_TARGET = 0.75;
const WARMUP_CHUNK = 1000;
/** Share of one core other processes may use during a phase before its figures are flagged. */
const FOREIGN_CPU_LIMIT = 0.15;
const NOT_IMPLEMENTED = 'RouterService not implemented in this build';
const P99_TARGET = 2.0;

export function readConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  const int = (name: string, fallback: number, min: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number ≥ ${min}, not '${raw}'`);
    return value;
  };
  const beforeCli = env.BENCH_BEFORE_CLI || undefined;
  const servers = (env.BENCH_SERVERS ?? (beforeCli === undefined ? 'bare,routed' : 'bare,before,routed'))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const name of servers) {
    if (name !== 'bare' && name !== 'routed' && name !== 'before')
      throw new Error(`BENCH_SERVERS lists '${name}'; use bare, routed and/or before`);
    if (name === 'before' && beforeCli === undefined)
      throw new Error(`BENCH_SERVERS lists 'before' but BENCH_BEFORE_CLI is not set`);
  }
  return {
    messages: Math.round(int('BENCH_MESSAGES', 10_000, 1)),
    concurrency: Math.round(int('BENCH_CONCURRENCY', 32, 1)),
    repeats: Math.round(int('BENCH_REPEATS', 3, 1)),
    latencySeconds: int('BENCH_LATENCY_SECONDS', 5, 0.1),
    warmupSeconds: int('BENCH_WARMUP_SECONDS', 5, 0),
    throughputMaxSeconds: int('BENCH_THROUGHPUT_MAX_SECONDS', 15, 0.1),
    payloadBytes: Math.round(int('BENCH_PAYLOAD_BYTES', 100, 0)),
    capacity: Math.round(int('BENCH_CAPACITY', 100_000, 1)),
    ackDelivery: env.BENCH_ACK_DELIVERY === '1' || env.BENCH_ACK_DELIVERY === 'true',
    stallMs: int('BENCH_STALL_SECONDS', 15, 1) * 1000,
    servers: servers as ServerName[],
    routedCli: env.BENCH_ROUTED_CLI || undefined,
    beforeCli,
    keepFiles: env.BENCH_KEEP_FILES === '1',
  };
}

/** One server under test and everything measured on it. */
interface Subject {
  readonly name: ServerName;
  server: ServerHandle | undefined;
  clients: { producer: RoleClients; consumer: RoleClients } | undefined;
  /** Why this server is no longer measured, if it is not. */
  stopped: string | undefined;
  readonly throughput: PhaseResult[];
  readonly halfLoad: PhaseResult[];
  halfRate: number;
  /** Summed over every phase's agent pair. */
  readonly totals: PairCounters;
}

export async function runBench(config: BenchConfig): Promise<number> {
  const began = performance.now();
  let exitCode = 0;
  const notes = new Set<string>();
  const subjects = config.servers.map((name): Subject => ({
    name,
    server: undefined,
    clients: undefined,
    stopped: undefined,
    throughput: [],
    halfLoad: [],
    halfRate: NaN,
    totals: emptyCounters(),
  }));

  console.log(
    `SW4RM router benchmark: node ${process.version}, ${os.cpus().length} CPUs; ${config.messages} messages at ${config.concurrency} in flight, ` +
      `${config.repeats} repeats, ${config.warmupSeconds} s warm-up, ${config.latencySeconds} s at half load, ${config.payloadBytes}-byte payloads, AckDelivery ${config.ackDelivery ? 'on' : 'off'}`,
  );

  const [load1] = os.loadavg();
  if (load1 > 0.5)
    console.log(`note: load average ${load1.toFixed(2)} at start: other processes are busy on this machine`);

  await Promise.all(
    subjects.map(async (subject) => {
      try {
        if (subject.name === 'bare') {
          subject.server = await startBareServer();
        } else {
          const cliPath = subject.name === 'before' ? config.beforeCli : config.routedCli;
          const started = await startRoutedServer({ capacity: config.capacity, cliPath, name: subject.name });
          subject.server = started.server;
          for (const note of started.notes) notes.add(note);
        }
        subject.clients = {
          producer: createRoleClients(subject.server.address, 'producer'),
          consumer: createRoleClients(subject.server.address, 'consumer'),
        };
        console.log(`${subject.name}: serving on ${subject.server.address}`);
      } catch (err) {
        subject.stopped = `failed to start: ${(err as Error).message}`;
        console.log(`${subject.name}: ${subject.stopped}`);
        exitCode = 1;
      }
    }),
  );

  /** Runs one phase on a fresh agent pair; a failure stops further measurement of that server. */
  const phase = async (
    subject: Subject,
    label: string,
    run: (server: ServerHandle, pair: AgentPair) => Promise<PhaseResult>,
  ): Promise<PhaseResult | undefined> => {
    if (subject.stopped !== undefined || subject.server === undefined || subject.clients === undefined)
      return undefined;
    let pair: AgentPair | undefined;
    try {
      pair = await AgentPair.open({
        server: subject.server,
        producer: subject.clients.producer,
        consumer: subject.clients.consumer,
        label,
        payloadBytes: config.payloadBytes,
        ackDelivery: config.ackDelivery,
      });
      return await run(subject.server, pair);
    } catch (err) {
      if (err instanceof RouterUnimplementedError) {
        subject.stopped = NOT_IMPLEMENTED;
        console.log(`${subject.name}: ${NOT_IMPLEMENTED}`);
      } else {
        subject.stopped = (err as Error).message;
        console.log(`${subject.name} ${label}: ERROR ${(err as Error).message}`);
        if (!(err instanceof BenchError)) console.log((err as Error).stack);
        console.log(
          `${subject.name} server stderr (last lines, full log kept in ${subject.server.stderrPath}):\n${subject.server.stderrTail()}`,
        );
        exitCode = 1;
      }
      return undefined;
    } finally {
      if (pair !== undefined) {
        await pair.close();
        for (const key of Object.keys(subject.totals) as Array<keyof PairCounters>)
          subject.totals[key] += pair.counters[key];
        if (pair.ackDeliveryUnimplemented)
          notes.add(`${subject.name}: AckDelivery answered UNIMPLEMENTED; switched off`);
      }
    }
  };

  try {
    // grpc-js and the servers need some 15-20 thousand messages before the JIT settles; until then rates climb.
    if (config.warmupSeconds > 0) {
      for (const subject of subjects) {
        const result = await phase(subject, 'warmup', async (server, pair) => {
          const until = performance.now() + config.warmupSeconds * 1000;
          let total = 0;
          let last: PhaseResult;
          do {
            last = await closedLoop(server, pair, WARMUP_CHUNK, config.concurrency, config.stallMs);
            total += last.messages;
          } while (performance.now() < until);
          console.log(
            `${pad(subject.name, 7)} warm-up       ${total} msgs in ${config.warmupSeconds} s; last ${WARMUP_CHUNK}: ${describe(last)}`,
          );
          return last;
        });
        if (result === undefined && subject.stopped === undefined) subject.stopped = 'warm-up failed';
      }
    }

    for (let rep = 1; rep <= config.repeats; rep++) {
      for (const subject of interleaved(subjects, rep)) {
        const result = await phase(subject, `tput${rep}`, (server, pair) =>
          closedLoop(
            server,
            pair,
            config.messages,
            config.concurrency,
            config.stallMs,
            config.throughputMaxSeconds * 1000,
          ),
        );
        if (result) {
          subject.throughput.push(result);
          const capped = result.capped ? ` (stopped sending at the ${config.throughputMaxSeconds} s limit)` : '';
          console.log(`${pad(subject.name, 7)} throughput #${rep} ${describe(result)}${capped}`);
        }
      }
    }

    for (const subject of subjects) subject.halfRate = median(subject.throughput.map((r) => r.rate)) / 2;

    for (let rep = 1; rep <= config.repeats; rep++) {
      for (const subject of interleaved(subjects, rep)) {
        if (!(subject.halfRate > 0)) continue;
        const result = await phase(subject, `half${rep}`, (server, pair) =>
          openLoop(server, pair, subject.halfRate, config.latencySeconds, config.stallMs),
        );
        if (result) {
          subject.halfLoad.push(result);
          console.log(
            `${pad(subject.name, 7)} half load #${rep}  ${describe(result)}, offered ${subject.halfRate.toFixed(0)} msg/s, max send lag ${result.maxSendLagMs.toFixed(1)} ms`,
          );
        }
      }
    }
  } finally {
    for (const subject of subjects) {
      subject.clients?.producer.close();
      subject.clients?.consumer.close();
      await subject.server?.stop(exitCode !== 0 || config.keepFiles);
      if (config.keepFiles && subject.server)
        console.log(`${subject.name}: files kept in ${path.dirname(subject.server.stderrPath)}`);
    }
  }

  console.log('');
  printReport(subjects, notes);
  console.log(`\ntotal time ${((performance.now() - began) / 1000).toFixed(1)} s; exit ${exitCode}`);
  return exitCode;
}

/** Alternates which server goes first, so that drift over the run does not favour one of them. */
function interleaved(subjects: readonly Subject[], rep: number): Subject[] {
  return rep % 2 === 1 ? [...subjects] : [...subjects].reverse();
}

function describe(result: PhaseResult): string {
  const cpu = (seconds: number): string =>
    Number.isNaN(seconds)
      ? '?'
      : `${((seconds * 1e6) / result.messages).toFixed(0)} µs/msg (${((seconds * 1e5) / result.elapsedMs).toFixed(0)}% of a core)`;
  return (
    `${result.messages} msgs in ${(result.elapsedMs / 1000).toFixed(2)} s = ${result.rate.toFixed(0)} msg/s; ` +
    `latency p50 ${percentile(result.latencies, 50).toFixed(2)} ms, p99 ${percentile(result.latencies, 99).toFixed(2)} ms; ` +
    `CPU server ${cpu(result.serverCpuS)}, load generator ${cpu(result.loadCpuS)}, other processes ${share(result)}% of a core` +
    (busy(result) ? ' [DISTURBED]' : '')
  );
}

/** Other processes' CPU during a phase, in percent of one core. */
function share(result: PhaseResult): string {
  return Number.isNaN(result.foreignCpuS) ? '?' : ((result.foreignCpuS * 1e5) / result.elapsedMs).toFixed(0);
}

/** Whether other processes used enough CPU during a phase to distort it on a two-core machine. */
function busy(result: PhaseResult): boolean {
  return (result.foreignCpuS * 1000) / result.elapsedMs > FOREIGN_CPU_LIMIT;
}

function printReport(subjects: readonly Subject[], notes: ReadonlySet<string>): void {
  const bare = subjects.find((s) => s.name === 'bare');
  const routed = subjects.find((s) => s.name === 'routed');
  const before = subjects.find((s) => s.name === 'before');
  const figure = (subject: Subject | undefined, pick: (s: Subject) => number, digits: number): string => {
    if (subject === undefined) return 'n/a';
    if (subject.stopped !== undefined && Number.isNaN(pick(subject))) return '—';
    const value = pick(subject);
    return Number.isNaN(value) ? '—' : value.toFixed(digits);
  };
  const tput = (s: Subject): number => median(s.throughput.map((r) => r.rate));
  const half =
    (p: number) =>
    (s: Subject): number =>
      median(s.halfLoad.map((r) => percentile(r.latencies, p)));
  const cpu = (s: Subject): number => median(s.throughput.map((r) => (r.serverCpuS * 1e6) / r.messages));
  const loadCpu = (s: Subject): number => median(s.throughput.map((r) => (r.loadCpuS * 1e6) / r.messages));
  const ratioOf =
    (subject: Subject | undefined) =>
    (pick: (s: Subject) => number): number =>
      bare !== undefined && subject !== undefined ? pick(subject) / pick(bare) : NaN;
  const ratio = ratioOf(routed);
  const beforeRatio = ratioOf(before);

  interface Row {
    label: string;
    pick: (s: Subject) => number;
    digits: number;
    target: string;
    ok?: (v: number) => boolean;
  }
  const rows: Row[] = [
    {
      label: 'throughput, msg/s (median)',
      pick: tput,
      digits: 0,
      target: `≥ ${THROUGHPUT_TARGET}`,
      ok: (v) => v >= THROUGHPUT_TARGET,
    },
    { label: 'p50 at half load, ms', pick: half(50), digits: 2, target: '' },
    { label: 'p90 at half load, ms', pick: half(90), digits: 2, target: '' },
    { label: 'p99 at half load, ms', pick: half(99), digits: 2, target: `≤ ${P99_TARGET}`, ok: (v) => v <= P99_TARGET },
    { label: 'server CPU per message, µs', pick: cpu, digits: 0, target: '' },
    { label: 'load-gen CPU per message, µs', pick: loadCpu, digits: 0, target: '' },
  ];
  const verdict = (value: number, ok: ((v: number) => boolean) | undefined): string =>
    ok === undefined ? '' : Number.isNaN(value) ? 'n/a' : ok(value) ? 'PASS' : 'MISS';
  const q = (value: number): string => (Number.isNaN(value) ? '—' : value.toFixed(2));

  // With a 'before' build in the run, its column and its ratio to bare sit beside the routed ones.
  const header = [
    '',
    'bare',
    ...(before ? ['before'] : []),
    'routed',
    ...(before ? ['before/bare'] : []),
    'routed/bare',
    'target',
    '',
  ];
  const widths = [28, 10, ...(before ? [10] : []), 10, ...(before ? [12] : []), 12, 8, 6];
  const line = (cells: string[]): string =>
    cells.map((cell, i) => (i === 0 ? pad(cell, widths[i]) : padStart(cell, widths[i]))).join('  ');
  console.log(line(header));
  for (const row of rows) {
    const r = ratio(row.pick);
    const cells = [
      row.label,
      figure(bare, row.pick, row.digits),
      ...(before ? [figure(before, row.pick, row.digits)] : []),
      figure(routed, row.pick, row.digits),
      ...(before ? [q(beforeRatio(row.pick))] : []),
      q(r),
      row.target,
      verdict(r, row.ok),
    ];
    console.log(line(cells));
  }
  console.log('');
  for (const subject of subjects) {
    if (subject.stopped === NOT_IMPLEMENTED) {
      console.log(`${subject.name}: ${NOT_IMPLEMENTED}`);
      continue;
    }
    const { sent, completed, redeliveredData, duplicateAcks, heartbeats, otherItems, ackDeliveries } = subject.totals;
    const lost = sent - completed;
    const status = subject.stopped === undefined ? '' : ` (stopped: ${subject.stopped})`;
    console.log(
      `${subject.name}: ${completed}/${sent} messages acknowledged FULFILLED, ${lost === 0 ? 'none lost' : `${lost} NOT COMPLETED`}; ` +
        `redelivered DATA ${redeliveredData}, duplicate ACKs ${duplicateAcks}, coordinator heartbeats ${heartbeats}, ` +
        `other items ${otherItems}, AckDelivery calls ${ackDeliveries}${status}`,
    );
  }
  for (const note of notes) console.log(note);
  const disturbed = subjects.flatMap((s) => [...s.throughput, ...s.halfLoad]).filter(busy).length;
  if (disturbed > 0) {
    console.log(
      `WARNING: in ${disturbed} phase(s) other processes used more than ${FOREIGN_CPU_LIMIT * 100}% of a core ([DISTURBED] above); ` +
        'on two cores that distorts the figures: rerun on a quiet machine.',
    );
  }
}

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

function padStart(text: string, width: number): string {
  return text.length >= width ? text : ' '.repeat(width - text.length) + text;
}

if (require.main === module) {
  let config: BenchConfig;
  try {
    config = readConfig();
  } catch (err) {
    console.error(`bench: ${(err as Error).message}`);
    process.exit(2);
  }
  runBench(config).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`bench: ${(err as Error).stack ?? String(err)}`);
      process.exit(1);
    },
  );
}
