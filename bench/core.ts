/**
 * The router core without gRPC (`npm run bench:core`): a producer and a consumer agent on a real store with
 * group commit, in this process. The producer keeps `inFlight` DATA messages outstanding; the consumer answers
 * each with a FULFILLED ACK, which the router forwards back. It prints the rate and the CPU per logical message
 * (a DATA and its ACK), which is the coordinator's own share of what `npm run bench` measures: use it to see
 * what a change to the core or the store costs, without the noise of two processes and the network.
 *
 * Usage: node out/bench/core.js [messages=30000] [inFlight=32]. BENCH_KEEP_STORE=1 keeps the store folder.
 * BENCH_VIEW_REFRESH_MS=250 adds what an open Messages view costs: its query (the newest 200) every 250 ms while
 * the messages flow; BENCH_VIEW_FILTER=miss makes it a filter nothing matches (the whole scan window is read).
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

const PRODUCER = 'core-bench-producer';
const CONSUMER = 'core-bench-consumer';

function envelope(producerId: string, sequence: number, messageType: string, payload: Uint8Array): Envelope {
  return {
    messageId: uuidv4(),
    idempotencyToken: '',
    producerId,
    correlationId: uuidv4(),
    sequenceNumber: String(sequence),
    retryCount: 0,
    messageType,
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

async function main(): Promise<void> {
  const total = Number(process.argv[2] ?? 30_000);
  const inFlight = Number(process.argv[3] ?? 32);
  if (!(total >= 1 && inFlight >= 1)) throw new Error('usage: node out/bench/core.js [messages ≥ 1] [inFlight ≥ 1]');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-core-bench-'));
  const store = CoordinatorStore.open(dir, { groupCommit: true });
  const coordinator = new Coordinator({ store, router: { capacity: total + inFlight, heartbeatIntervalMs: 0 } });
  const ctx = { correlationId: 'core-bench' };
  for (const agentId of [PRODUCER, CONSUMER]) {
    const registered = coordinator.registry.register(
      { agentId, name: agentId, communicationClass: 'STANDARD', modalitiesSupported: ['application/json'] },
      ctx,
    );
    if (!registered.accepted) throw new Error(registered.reason);
    coordinator.registry.heartbeat(agentId, 'RUNNABLE', {}, ctx);
  }

  let producerSeq = 0;
  let consumerSeq = 0;
  let sent = 0;
  let completed = 0;
  let failure: Error | undefined;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const fail = (err: Error): void => {
    failure ??= err;
    finish();
  };
  const sendData = (): void => {
    if (sent >= total || failure) return;
    sent++;
    producerSeq++;
    const payload = Buffer.from(JSON.stringify({ seq: producerSeq, body: 'x'.repeat(80) }));
    const result = coordinator.router.send(envelope(PRODUCER, producerSeq, 'DATA', payload), ctx, { to: CONSUMER });
    if (!result.accepted) fail(new Error(`DATA refused: ${result.reason}`));
  };
  const consumer: InboxSink = {
    deliver: (_seq, delivered) => {
      if (delivered.messageType !== 'DATA') return;
      // As over the network: the answer comes in a later turn of the event loop.
      setImmediate(() => {
        const ack = Buffer.from(JSON.stringify({ ack_for_message_id: delivered.messageId, ack_stage: 'FULFILLED' }));
        const result = coordinator.router.send(envelope(CONSUMER, ++consumerSeq, 'ACKNOWLEDGEMENT', ack), ctx);
        if (!result.accepted) fail(new Error(`ACK refused: ${result.reason}`));
      });
    },
    close: () => undefined,
  };
  const producer: InboxSink = {
    deliver: (_seq, delivered) => {
      if (delivered.messageType !== 'ACKNOWLEDGEMENT') return;
      completed++;
      if (completed === total) finish();
      else setImmediate(sendData);
    },
    close: () => undefined,
  };
  coordinator.router.attach(CONSUMER, consumer, ctx);
  coordinator.router.attach(PRODUCER, producer, ctx);

  const refreshMs = Number(process.env.BENCH_VIEW_REFRESH_MS ?? 0);
  const viewQuery = process.env.BENCH_VIEW_FILTER === 'miss' ? { agentId: 'nobody', limit: 200 } : { limit: 200 };
  const view = { queries: 0, ms: 0, maxMs: 0, rows: 0 };
  const viewTimer =
    refreshMs > 0
      ? setInterval(() => {
          const t = performance.now();
          view.rows = coordinator.router.messages(viewQuery).length;
          const ms = performance.now() - t;
          view.queries++;
          view.ms += ms;
          view.maxMs = Math.max(view.maxMs, ms);
        }, refreshMs)
      : undefined;

  const cpuBefore = process.cpuUsage();
  const began = performance.now();
  for (let i = 0; i < inFlight; i++) sendData();
  await finished;
  if (viewTimer) clearInterval(viewTimer);
  const cpu = process.cpuUsage(cpuBefore);
  const elapsedMs = performance.now() - began;
  coordinator.dispose();
  store.close();
  if (process.env.BENCH_KEEP_STORE === '1') console.log(`store kept in ${dir}`);
  else fs.rmSync(dir, { recursive: true, force: true });
  if (failure) throw failure;
  console.log(
    `${total} messages at ${inFlight} in flight in ${(elapsedMs / 1000).toFixed(2)} s = ${Math.round((total * 1000) / elapsedMs)} msg/s; ` +
      `CPU ${Math.round((cpu.user + cpu.system) / total)} µs per message (user ${Math.round(cpu.user / total)}, system ${Math.round(cpu.system / total)})`,
  );
  if (viewTimer) {
    console.log(
      `Messages view query (${process.env.BENCH_VIEW_FILTER === 'miss' ? 'a filter nothing matches' : 'the newest 200'}) every ${refreshMs} ms: ` +
        `${view.queries} queries, mean ${(view.ms / Math.max(1, view.queries)).toFixed(2)} ms, max ${view.maxMs.toFixed(2)} ms, ${view.rows} rows`,
    );
  }
}

main().catch((err: unknown) => {
  console.error((err as Error).message ?? err);
  process.exit(1);
});
