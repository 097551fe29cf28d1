import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { CoordinatorApiError } from '../../src/core/api';
import { findFreePort } from '../../src/server/server';
import { CoordinatorStartError, WorkerCoordinator, type WorkerExit } from '../../src/server/worker/workerCoordinator';
import type { WorkerHostOptions } from '../../src/server/worker/model';
import { CoordinatorClients } from '../support/clients';
import { PROTOS_DIR, REPO_ROOT, requireBundles } from '../support/paths';
import { pollUntil } from '../support/poll';
import { ExactlyOnceWorker, exactlyOnceProblems, OperationLedger, retryAnswer, tally } from '../support/routerAgents';
import { registerRouterAgent, retryTransport, RouterClient } from '../support/routerClient';
import { runPool } from '../support/routerFuzz';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const WORKER_BUNDLE = path.join(REPO_ROOT, 'dist', 'coordinatorWorker.js');

/**
 * The editor's coordinator in a worker thread (server/worker): the same host the CLI runs, reached through the one
 * generic proxy, ended as a crash would end it and started again from its store, in this thread (the extension host's
 * stand-in).
 */
describe('the coordinator in a worker thread', function () {
  this.timeout(60_000);
  requireBundles(WORKER_BUNDLE);
  let dataDir: string;
  const running: WorkerCoordinator[] = [];
  const closers: Array<{ close(): void }> = [];

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-int-worker-');
  });
  afterEach(async () => {
    for (const closer of closers.splice(0)) closer.close();
    for (const coordinator of running.splice(0)) await coordinator.stop(200);
    removeTempDir(dataDir);
  });

  const options = (port = 0, overrides: Partial<WorkerHostOptions> = {}): WorkerHostOptions => ({
    dataDir,
    protosDir: PROTOS_DIR,
    host: '127.0.0.1',
    port,
    auth: 'token',
    bridgePort: 0,
    ...overrides,
  });
  const start = async (port = 0, log?: string[], maxHeapMiB?: number): Promise<WorkerCoordinator> => {
    const coordinator = await WorkerCoordinator.start({
      script: WORKER_BUNDLE,
      // Room for every operation in the consumer's inbox (the default capacity would answer BUFFER_FULL first).
      host: options(port, { router: { capacity: 5_000 } }),
      maxHeapMiB,
      onLog: log ? (lines) => log.push(...lines) : undefined,
    });
    running.push(coordinator);
    return coordinator;
  };

  it('serves the CoordinatorApi through the proxy: calls, events, errors and the log lines', async () => {
    const log: string[] = [];
    const coordinator = await start(0, log);
    assert.notEqual(coordinator.threadId, 0, 'the coordinator runs on a thread of its own');
    const env = await coordinator.environment();
    assert.equal(env.SW4RM_ROUTER_ADDR, `127.0.0.1:${coordinator.port}`);
    const changes: unknown[] = [];
    const subscription = coordinator.api.onDidChangeAgents((change) => changes.push(change));
    const clients = new CoordinatorClients(env.SW4RM_ROUTER_ADDR, env.SW4RM_TOKEN);
    closers.push(clients);
    await registerRouterAgent(clients, 'worker-agent-1');
    await pollUntil('the agent to show in the API', async () =>
      (await coordinator.api.agents()).some((agent) => agent.descriptor.agentId === 'worker-agent-1')
        ? true
        : undefined,
    );
    await pollUntil('onDidChangeAgents to cross the thread', () => (changes.length > 0 ? true : undefined));
    subscription.dispose();
    assert.equal((await coordinator.api.agentCounts()).registered, 1);
    // A refusal keeps its class and its code across the thread.
    await assert.rejects(
      coordinator.api.decideApproval('no-such-invocation', { action: 'APPROVE', rationale: 'a test' }, 'tester'),
      (err: unknown) => err instanceof CoordinatorApiError && err.code === 'not_found',
    );
    await pollUntil('the events as log lines', () =>
      log.some((line) => line.includes('worker-agent-1')) ? true : undefined,
    );
    await coordinator.stop(200);
    await assert.rejects(
      coordinator.api.agentCounts(),
      (err: unknown) => err instanceof CoordinatorApiError && err.code === 'stopped',
    );
    // The store's lock and the port went with the worker: a new one opens the same store.
    const again = await start();
    assert.equal((await again.api.agents()).filter((agent) => agent.descriptor.agentId === 'worker-agent-1').length, 1);
  });

  it('answers a port in use as CoordinatorStartError port_in_use with a free port', async () => {
    const blocker = net.createServer();
    const port = await findFreePort('127.0.0.1');
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve));
    closers.push(blocker);
    await assert.rejects(start(port), (err: unknown) => {
      assert.ok(err instanceof CoordinatorStartError, String(err));
      assert.equal(err.kind, 'port_in_use');
      assert.equal(err.port, port);
      assert.ok(typeof err.freePort === 'number' && err.freePort !== port);
      return true;
    });
  });

  it('ends the worker, not this thread, when its heap reaches its limit', async function () {
    // A heap limit the coordinator cannot even start in: the worker ends with ERR_WORKER_OUT_OF_MEMORY and this
    // thread goes on.
    const failure = await start(0, undefined, 4).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    assert.ok(failure, 'the start failed');
    assert.match(failure.message, /memory|heap/i, failure.message);
    assert.ok(fs.existsSync(dataDir));
  });

  it('survives being terminated mid-load: nothing accepted is lost, every operation settles exactly once', async function () {
    this.timeout(120_000);
    const OPERATIONS = 600;
    const KILL_AFTER_ACCEPTED = 250;
    const deadline = Date.now() + 80_000;
    const problems: string[] = [];
    const port = await findFreePort('127.0.0.1');
    const first = await start(port);
    const exits: WorkerExit[] = [];
    first.onDidExit((exit) => exits.push(exit));
    const env = await first.environment();
    const address = env.SW4RM_ROUTER_ADDR;
    const token = env.SW4RM_TOKEN;
    const registry = new CoordinatorClients(address, token);
    closers.push(registry);
    await registerRouterAgent(registry, 'wk-producer');
    await registerRouterAgent(registry, 'wk-consumer');
    const producer = new RouterClient(address, token, 'wk-producer');
    const consumer = new RouterClient(address, token, 'wk-consumer');
    const consumerInbox = consumer.openInbox('wk-consumer', { reconnect: true });
    const producerInbox = producer.openInbox('wk-producer', { reconnect: true });
    closers.push(producer, consumer, consumerInbox, producerInbox);
    const worker = new ExactlyOnceWorker(consumer, consumerInbox, 'wk-producer', deadline);
    const ledger = new OperationLedger(producer, 'wk-consumer', producerInbox, deadline);
    const operations = ledger.create(OPERATIONS, (i) => `wk-producer:op:${String(i).padStart(4, '0')}`);

    let accepted = 0;
    let terminated: Promise<void> | undefined;
    await runPool(operations, 16, async (op) => {
      const attempt = await ledger.send(op);
      if (attempt.answer === 'accepted' && terminated === undefined && ++accepted >= KILL_AFTER_ACCEPTED)
        terminated = first.terminate();
    });
    if (!terminated) {
      problems.push(`only ${accepted} first attempts were accepted: the worker was not ended mid-load`);
      terminated = first.terminate();
    }
    await terminated;
    await pollUntil('onDidExit', () => (exits.length ? true : undefined));
    assert.match(exits[0].reason, /simulated crash/);
    await assert.rejects(
      first.api.agentCounts(),
      (err: unknown) => err instanceof CoordinatorApiError && err.code === 'stopped',
    );

    const second = await start(port);
    const restartedAt = Date.now();
    assert.equal((await second.environment()).SW4RM_TOKEN, token, 'the token survives the crash');
    for (const agent of ['wk-producer', 'wk-consumer'])
      await retryTransport(`re-registering ${agent}`, () => registerRouterAgent(registry, agent), deadline);
    await pollUntil(
      'both inbox streams reopened against the new worker',
      () =>
        [consumerInbox, producerInbox].every(
          (inbox) => inbox.final || (inbox.openedAt !== undefined && inbox.openedAt >= restartedAt),
        )
          ? true
          : undefined,
      15_000,
    );
    await runPool(operations, 16, async (op) => {
      await ledger.sendUntilAnswered(op);
    });
    await ledger.settleAll(deadline);
    await pollUntil('the consumer to finish', () => (worker.busy ? undefined : true), 20_000).catch(() => undefined);
    problems.push(...exactlyOnceProblems(operations, ledger, worker));
    problems.push(...ledger.problems.slice(0, 10), ...worker.problems.slice(0, 10));
    console.log(
      `      worker ended after ${accepted} accepted; retries answered ${tally(operations.map((op) => retryAnswer(op)))}; ` +
        `settled ${tally(operations.map((op) => ledger.settlement(op)?.kind ?? 'UNSETTLED'))}`,
    );
    consumerInbox.stopReconnecting();
    producerInbox.stopReconnecting();
    assert.deepEqual(problems, []);
  });
});
