/**
 * Workflow run benchmark (`npm run bench:workflow-run`, also run by `npm run bench`): what the workflow engine adds per
 * node to the scheduler, on the core directly (no gRPC), with a real store file and group commit.
 *
 * The same work twice, interleaved: N tasks for `type:bench-worker`, run by 8 in-process agents that answer each
 * CONTROL `run` at once (ACK RECEIVED and FULFILLED with a small `result`, in a later turn, as over the network):
 * - plain: N scheduler tasks submitted by the bench in the same waves a workflow would run them (layer by layer, each
 *   layer when the one before it completed), no workflow;
 * - workflow: one workflow of N nodes in layers of 8, each node depending on two nodes of the layer before (about 2N
 *   edges), reading their outputs (input_mapping `out.n<dep>`) and writing its own under a key of its own
 *   (output_mapping `value` → `out.n<i>`: workflow_data grows to N keys, as a real workflow's does — the per-node cost
 *   must not grow with it); CreateWorkflow and StartWorkflow included, so validation counts too.
 * It prints the wall time and CPU per node (task), the ratio workflow / plain (the per-node overhead of a running
 * workflow), and the ratio of the per-node cost at the largest size to that at the smallest (goal: about 1, a node costs the
 * same whatever the size of its workflow).
 *
 * Environment: BENCH_WORKFLOW_SIZES (default "100,500": a definition has at most WORKFLOW_LIMITS.maxNodes, 500, nodes), BENCH_WORKFLOW_REPEATS (runs per variant, the median is
 * printed, default 3), BENCH_KEEP_STORE=1 keeps the store folders.
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
import type { WorkflowDefinition, WorkflowNodeDefinition } from '../src/core/workflow/model';

const ctx = { correlationId: 'workflow-bench' };
const AGENT_TYPE = 'bench-worker';
const AGENTS = 8;
const WIDTH = 8;

const SIZES = (process.env.BENCH_WORKFLOW_SIZES ?? '100,500').split(',').map((s) => Number(s.trim()));
if (SIZES.some((n) => !(Number.isInteger(n) && n >= WIDTH)))
  throw new Error(`BENCH_WORKFLOW_SIZES: whole numbers ≥ ${WIDTH}`);
const REPEATS = Number(process.env.BENCH_WORKFLOW_REPEATS ?? 3);

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

interface Figures {
  readonly wallMs: number;
  readonly cpuMs: number;
}

interface Agent {
  readonly id: string;
  sequence: number;
}

function ackEnvelope(agent: Agent, run: Envelope, stage: 'RECEIVED' | 'FULFILLED', result?: unknown): Envelope {
  const payload = Buffer.from(
    JSON.stringify({
      ack_for_message_id: run.messageId,
      ack_stage: stage,
      ...(result === undefined ? {} : { result }),
    }),
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

/** Node `i` of a workflow of `n`: layers of WIDTH, each node after two nodes of the layer before. */
function layeredNodes(n: number): WorkflowNodeDefinition[] {
  return Array.from({ length: n }, (_, i) => {
    const layer = Math.floor(i / WIDTH);
    const k = i % WIDTH;
    const dependencies =
      layer === 0
        ? []
        : [...new Set([(layer - 1) * WIDTH + k, (layer - 1) * WIDTH + ((k + 1) % WIDTH)])]
            .filter((d) => d < n)
            .map((d) => `n${d}`);
    return {
      nodeId: `n${i}`,
      agentId: `type:${AGENT_TYPE}`,
      dependencies,
      trigger: 'DEPENDENCY' as const,
      inputMapping: Object.fromEntries(dependencies.map((d, j) => [`out.${d}`, `in${j}`])),
      outputMapping: { value: `out.n${i}` },
      metadata: {},
    };
  });
}

/** A coordinator with AGENTS agents that complete every run they get at once. */
function open(dir: string, total: number): { coordinator: Coordinator; store: CoordinatorStore; failures: Error[] } {
  const store = CoordinatorStore.open(dir, { groupCommit: true });
  const coordinator = new Coordinator({
    store,
    router: { capacity: 1_000_000, heartbeatIntervalMs: 0 },
    scheduler: { maxQueuedTasks: total * 2, keepFinishedTasks: 1_000 },
    activity: { maxEntries: total * 2, maxPerAgent: total * 2 },
  });
  const failures: Error[] = [];
  for (let i = 0; i < AGENTS; i++) {
    const agent: Agent = { id: `${AGENT_TYPE}-${i}`, sequence: Date.now() * 1000 };
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
        setImmediate(() => coordinator.router.ackDelivery(agent.id, seq, delivered.messageId, 'DELIVERED', ctx));
        if (delivered.messageType !== 'CONTROL' || delivered.producerId !== 'coordinator') return;
        const command = JSON.parse(Buffer.from(delivered.payload).toString('utf8')) as {
          command: string;
          params: { run?: number } | null;
        };
        if (command.command !== 'run') return;
        setImmediate(() => {
          for (const [stage, result] of [
            ['RECEIVED', undefined],
            ['FULFILLED', { value: 1, run: command.params?.run ?? 0 }],
          ] as const) {
            const answer = coordinator.router.send(ackEnvelope(agent, delivered, stage, result), ctx);
            if (!answer.accepted) failures.push(new Error(`ACK ${stage} refused: ${answer.reason}`));
          }
        });
      },
      close: () => undefined,
    };
    coordinator.router.attach(agent.id, sink, ctx);
  }
  return { coordinator, store, failures };
}

function within<T>(what: string, ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function measure(run: (coordinator: Coordinator) => Promise<void>, n: number): Promise<Figures> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-workflow-bench-'));
  const { coordinator, store, failures } = open(dir, n);
  try {
    await store.whenDurable();
    const cpu = process.cpuUsage();
    const start = performance.now();
    await within(`${n} nodes`, 600_000, run(coordinator));
    await store.whenDurable();
    const wallMs = performance.now() - start;
    const used = process.cpuUsage(cpu);
    if (failures.length) throw failures[0];
    return { wallMs, cpuMs: (used.user + used.system) / 1000 };
  } finally {
    coordinator.dispose();
    if (process.env.BENCH_KEEP_STORE === '1') console.log(`store kept in ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** N plain tasks in the waves the workflow runs them: a layer submitted when the one before it completed. */
function plain(n: number): (coordinator: Coordinator) => Promise<void> {
  return (coordinator) =>
    new Promise((resolve, reject) => {
      const nodes = layeredNodes(n);
      const layers = Math.ceil(n / WIDTH);
      let layer = 0;
      let open = 0;
      const submitLayer = (): void => {
        const first = layer * WIDTH;
        for (const node of nodes.slice(first, first + WIDTH)) {
          open++;
          const result = coordinator.scheduler.submit(
            {
              taskId: `plain:${node.nodeId}`,
              target: node.agentId,
              priority: 0,
              params: Buffer.from(JSON.stringify({ node_id: node.nodeId, run: 1, inputs: {} })),
              contentType: 'application/json',
              scope: JSON.stringify({ resources: [`plain/${node.nodeId}`] }),
              submittedBy: 'bench',
            },
            ctx,
          );
          if (!result.accepted) reject(new Error(`${node.nodeId}: ${result.reason}`));
        }
      };
      coordinator.scheduler.onDidEndTask((task) => {
        if (task.state !== 'COMPLETED') reject(new Error(`${task.taskId} ${task.state}: ${task.note}`));
        if (--open > 0) return;
        layer++;
        // As the workflow engine does: the next submissions after the scheduler finished ending the task.
        if (layer < layers) queueMicrotask(submitLayer);
        else resolve();
      });
      submitLayer();
    });
}

/** One workflow of N nodes: created, started and run to COMPLETED. */
function workflow(n: number): (coordinator: Coordinator) => Promise<void> {
  return (coordinator) =>
    new Promise((resolve, reject) => {
      const definition: WorkflowDefinition = { workflowId: `bench-${n}`, nodes: layeredNodes(n), metadata: {} };
      coordinator.workflows.onDidChange((change) => {
        if (change.nodeId !== undefined) return;
        if (change.state === 'COMPLETED') resolve();
        else if (change.state === 'FAILED' || change.state === 'CANCELLED')
          reject(
            new Error(
              `the workflow ended ${change.state}: ${coordinator.workflows.state(definition.workflowId)?.summary.reason}`,
            ),
          );
      });
      const created = coordinator.workflows.create(definition, 'bench', ctx);
      if (!created.ok) return reject(new Error(JSON.stringify(created.issues.slice(0, 3))));
      coordinator.workflows.start(definition.workflowId, '{}', 'bench', ctx);
    });
}

async function main(): Promise<void> {
  console.log(
    `Workflow run: per-node cost of a running workflow against plain scheduler tasks (${AGENTS} agents answering at once, layers of ${WIDTH}, median of ${REPEATS})`,
  );
  const perNode: number[] = [];
  for (const n of SIZES) {
    const plains: Figures[] = [];
    const flows: Figures[] = [];
    for (let r = 0; r < REPEATS; r++) {
      plains.push(await measure(plain(n), n));
      flows.push(await measure(workflow(n), n));
    }
    const p = { wall: median(plains.map((f) => f.wallMs)) / n, cpu: median(plains.map((f) => f.cpuMs)) / n };
    const w = { wall: median(flows.map((f) => f.wallMs)) / n, cpu: median(flows.map((f) => f.cpuMs)) / n };
    perNode.push(w.cpu);
    const us = (ms: number) => `${(ms * 1000).toFixed(0).padStart(5)} µs`;
    console.log(
      `  ${n.toLocaleString('en-US').padStart(7)} nodes: plain tasks ${us(p.wall)} wall, ${us(p.cpu)} CPU per task; workflow ${us(w.wall)} wall, ${us(w.cpu)} CPU per node; ` +
        `ratio workflow / plain ${(w.wall / p.wall).toFixed(2)} wall, ${(w.cpu / p.cpu).toFixed(2)} CPU (overhead ${((w.cpu - p.cpu) * 1000).toFixed(0)} µs CPU per node)`,
    );
  }
  if (perNode.length >= 2) {
    const ratio = perNode[perNode.length - 1] / perNode[0];
    console.log(
      `  per-node CPU, ${SIZES[SIZES.length - 1].toLocaleString('en-US')} / ${SIZES[0].toLocaleString('en-US')} nodes: ${ratio.toFixed(2)} (goal ≤ 1.5: a node costs the same in a larger workflow: ${ratio <= 1.5 ? 'PASS' : 'MISS'})`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(`bench:workflow-run: ${(err as Error).stack ?? String(err)}`);
  process.exit(1);
});
