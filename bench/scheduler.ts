/**
 * Scheduler benchmark (`npm run bench:scheduler`, also run at the end of `npm run bench`): the cost of one scheduling
 * operation on the core directly (no gRPC), with a real store file and group commit, as the queue and the agents grow.
 *
 * One operation = a SubmitTask (its task joins the queue) plus a dispatch (a running agent ACKs its task FULFILLED, the
 * scheduler completes it and sends that agent the next task of the queue as a CONTROL `run`). The queue stays at its
 * size: one in, one out. Agents are driven as over the wire: their inbox is attached to the router and they answer
 * with ACKNOWLEDGEMENT envelopes (RECEIVED untimed when the run arrives, FULFILLED timed as part of the operation).
 *
 * Scenarios: 1,000 and 100,000 queued tasks for one agent (random priorities); and 1,000 queued for `type:<name>` with
 * one agent of that type and with 1,000. It prints the median per operation, the ratio 100,000 / 1,000 and the ratio
 * of log n (log 100,000 / log 1,000 = 1.67): the goal is a ratio no larger than that (grows no faster than log n); and
 * the ratio 1,000 agents / 1 agent, both for the type (the same path, only the agents differ).
 *
 * The scheduler dispatches from a microtask queued by the ACK: the timed window ends after one microtask turn, and
 * every timed operation checks that the next `run` was handed to the outbox inside it (counted sends to agents).
 *
 * Each operation waits (untimed) for the next run to reach the agent, which takes one group commit of the store; so a
 * scenario takes about 20 ms per operation of wall time, most of it idle.
 *
 * Environment: BENCH_SCHEDULER_OPS (operations timed per scenario after 100 untimed ones, default 500), BENCH_SCHEDULER_LARGE (the large
 * queue, default 100000), BENCH_KEEP_STORE=1 keeps the store folders.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { v4 as uuidv4 } from 'uuid';
import { Coordinator } from '../src/core/coordinator';
import { CoordinatorStore } from '../src/core/coordinatorStore';
import type { Envelope } from '../src/core/router/envelope';
import type { InboxSink } from '../src/core/router/router';
import { prng } from '../test/support/prng';

const ctx = { correlationId: 'scheduler-bench' };
const AGENT_TYPE = 'bench-worker';

function envNumber(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!(Number.isInteger(value) && value >= 1)) throw new Error(`${name} must be a whole number ≥ 1`);
  return value;
}

const OPS = envNumber('BENCH_SCHEDULER_OPS', 500);
/** Untimed operations first in every scenario (JIT and caches warm, as in a coordinator that has been running). */
const WARMUP_OPS = 100;
const LARGE = envNumber('BENCH_SCHEDULER_LARGE', 100_000);

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

interface Agent {
  readonly id: string;
  sequence: number;
  /** The CONTROL `run` envelope of the task it is running (its ACKs move the task). */
  run?: Envelope;
  runs: number;
  /** Resolved when the next `run` arrived and was ACKed RECEIVED. */
  started?: () => void;
}

interface Scenario {
  readonly name: string;
  readonly agents: number;
  readonly queued: number;
  /** Tasks target `type:<AGENT_TYPE>` instead of the one agent's id. */
  readonly byType: boolean;
}

interface Figures {
  readonly scenario: Scenario;
  readonly medianUs: number;
  readonly p99Us: number;
  readonly setupS: number;
}

function ackEnvelope(agent: Agent, run: Envelope, stage: 'RECEIVED' | 'FULFILLED'): Envelope {
  const payload = Buffer.from(
    JSON.stringify({ ack_for_message_id: run.messageId, ack_stage: stage, note: stage === 'FULFILLED' ? 'done' : '' }),
  );
  return {
    messageId: uuidv4(),
    idempotencyToken: '',
    producerId: agent.id,
    correlationId: run.correlationId,
    sequenceNumber: String(++agent.sequence),
    retryCount: 0,
    messageType: 'ACKNOWLEDGEMENT',
    contentType: 'application/json',
    contentLength: String(payload.byteLength),
    repoId: '',
    worktreeId: '',
    hlcTimestamp: '',
    ttlMs: 0,
    timestampMs: Date.now(),
    payload,
    parentCorrelationId: '',
  };
}

async function runScenario(scenario: Scenario): Promise<Figures> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-scheduler-bench-'));
  const store = CoordinatorStore.open(dir, { groupCommit: true });
  const total = scenario.queued + scenario.agents + OPS + 10;
  const coordinator = new Coordinator({
    store,
    router: { capacity: 1_000_000, heartbeatIntervalMs: 0 },
    scheduler: { maxQueuedTasks: total * 2, keepFinishedTasks: 100 },
    activity: { maxEntries: total * 2, maxPerAgent: total * 2 },
  });
  const random = prng(42);
  let failure: Error | undefined;
  const agents = new Map<string, Agent>();
  try {
    const setupStart = performance.now();
    for (let i = 0; i < scenario.agents; i++) {
      const agent: Agent = { id: `${AGENT_TYPE}-${i}`, sequence: Date.now() * 1000, runs: 0 };
      agents.set(agent.id, agent);
      const registered = coordinator.registry.register(
        {
          agentId: agent.id,
          name: AGENT_TYPE,
          communicationClass: 'STANDARD',
          modalitiesSupported: ['application/json'],
        },
        ctx,
      );
      if (!registered.accepted) throw new Error(registered.reason);
      coordinator.registry.heartbeat(agent.id, 'RUNNABLE', {}, ctx);
      const sink: InboxSink = {
        deliver: (seq, delivered) => {
          if (delivered.messageType !== 'CONTROL' || delivered.producerId !== 'coordinator') return;
          const command = JSON.parse(Buffer.from(delivered.payload).toString('utf8')) as { command: string };
          if (command.command !== 'run') {
            // A preempt_request (a task of a better priority was queued) is not acted on, but its delivery is confirmed,
            // as an agent would: unconfirmed, they fill the inbox's delivery window and the next run is never delivered.
            setImmediate(() => coordinator.router.ackDelivery(agent.id, seq, delivered.messageId, 'DELIVERED', ctx));
            return;
          }
          agent.run = delivered;
          agent.runs++;
          // As over the network, the agent answers in a later turn: ACK RECEIVED (untimed: the dispatch ended when the run was sent).
          setImmediate(() => {
            const result = coordinator.router.send(ackEnvelope(agent, delivered, 'RECEIVED'), ctx);
            if (!result.accepted) failure ??= new Error(`ACK RECEIVED refused: ${result.reason}`);
            agent.started?.();
          });
        },
        close: () => undefined,
      };
      coordinator.router.attach(agent.id, sink, ctx);
    }
    // Count the runs handed to the outbox (the router): a timed operation must include its dispatch.
    let sends = 0;
    const router = coordinator.router;
    const sendToAgent = router.sendToAgent.bind(router);
    router.sendToAgent = (...args: Parameters<typeof sendToAgent>) => {
      sends++;
      return sendToAgent(...args);
    };
    const target = scenario.byType ? `type:${AGENT_TYPE}` : `${AGENT_TYPE}-0`;
    /** Waits until `agent` was sent a run since it had `runsBefore` and answered it RECEIVED. */
    const started = (agent: Agent, runsBefore: number): Promise<void> =>
      new Promise((resolve, reject) => {
        if (agent.runs > runsBefore) return setImmediate(resolve);
        const timer = setTimeout(() => reject(new Error(`${agent.id} was not sent its next task within 10 s`)), 10_000);
        agent.started = () => {
          clearTimeout(timer);
          agent.started = undefined;
          resolve();
        };
      });
    let submitted = 0;
    const submit = (priority: number): void => {
      const n = submitted++;
      const result = coordinator.scheduler.submit(
        {
          taskId: `t${n}`,
          target,
          priority,
          params: Buffer.from(`{"n":${n}}`),
          contentType: 'application/json',
          scope: `resource:bench-${n}`,
          submittedBy: 'operator',
        },
        ctx,
      );
      if (!result.accepted) throw new Error(`task ${n} refused: ${result.code}: ${result.reason}`);
    };
    // Every agent gets a first task (priority -19: nothing queued later preempts it), then the queue fills behind them.
    for (let i = 0; i < scenario.agents; i++) submit(-19);
    for (let i = 0; i < scenario.queued; i++) submit(Math.floor(random() * 39) - 18);
    await store.whenDurable();
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (failure) throw failure;
    const busy = [...agents.values()].filter((a) => a.run !== undefined);
    if (busy.length !== scenario.agents)
      throw new Error(`${busy.length} of ${scenario.agents} agents got their first task`);
    const setupS = (performance.now() - setupStart) / 1000;

    const times: number[] = [];
    for (let op = -WARMUP_OPS; op < OPS; op++) {
      const agent = busy[(op + WARMUP_OPS) % busy.length];
      const run = agent.run!;
      const runsBefore = agent.runs;
      const sendsBefore = sends;
      const start = performance.now();
      submit(Math.floor(random() * 39) - 18);
      const result = coordinator.router.send(ackEnvelope(agent, run, 'FULFILLED'), ctx);
      // The dispatch runs in the microtask the ACK queued: let it run inside the timed window.
      await Promise.resolve();
      if (op >= 0) times.push(performance.now() - start);
      if (!result.accepted) throw new Error(`ACK FULFILLED refused: ${result.reason}`);
      if (sends === sendsBefore) throw new Error('the next run was not sent inside the timed window');
      await started(agent, runsBefore);
      if (failure) throw failure;
    }
    await store.whenDurable();
    return { scenario, medianUs: median(times) * 1000, p99Us: percentile(times, 0.99) * 1000, setupS };
  } finally {
    coordinator.dispose();
    store.close();
    if (process.env.BENCH_KEEP_STORE === '1') console.log(`store kept in ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const scenarios: Scenario[] = [
    { name: '1,000 queued tasks, 1 agent', agents: 1, queued: 1_000, byType: false },
    { name: `${LARGE.toLocaleString('en-US')} queued tasks, 1 agent`, agents: 1, queued: LARGE, byType: false },
    { name: '1,000 queued for the type, 1 agent', agents: 1, queued: 1_000, byType: true },
    { name: '1,000 queued for the type, 1,000 agents', agents: 1_000, queued: 1_000, byType: true },
  ];
  console.log(
    `Scheduler: one submit + dispatch (a task queued, a task completed and the next one sent), ${OPS} operations per scenario after ${WARMUP_OPS} untimed`,
  );
  const figures: Figures[] = [];
  for (const scenario of scenarios) {
    const f = await runScenario(scenario);
    figures.push(f);
    console.log(
      `  ${scenario.name.padEnd(42)} median ${f.medianUs.toFixed(0).padStart(6)} µs, p99 ${f.p99Us.toFixed(0).padStart(6)} µs (setup ${f.setupS.toFixed(1)} s)`,
    );
  }
  const [small, large, oneOfType, manyAgents] = figures;
  const logRatio = Math.log(large.scenario.queued) / Math.log(small.scenario.queued);
  const ratio = large.medianUs / small.medianUs;
  const agentsRatio = manyAgents.medianUs / oneOfType.medianUs;
  console.log(
    `  ratio ${large.scenario.queued.toLocaleString('en-US')} / 1,000 queued: ${ratio.toFixed(2)} (log n ratio ${logRatio.toFixed(2)}: ${ratio <= logRatio ? 'PASS' : 'MISS'}, grows no faster than log n)`,
  );
  console.log(
    `  ratio 1,000 agents / 1 agent (1,000 queued for the type): ${agentsRatio.toFixed(2)} (goal ≤ ${logRatio.toFixed(2)} as for the queue: ${agentsRatio <= logRatio ? 'PASS' : 'MISS'})`,
  );
}

main().catch((err: unknown) => {
  console.error(`bench:scheduler: ${(err as Error).stack ?? String(err)}`);
  process.exit(1);
});
