import { strict as assert } from 'node:assert';
import { CoordinatorClients } from '../support/clients';
import { ExactlyOnceWorker, exactlyOnceProblems, OperationLedger, retryAnswer, tally } from '../support/routerAgents';
import { registerRouterAgent, retryTransport, RouterClient, type Inbox } from '../support/routerClient';
import { runPool } from '../support/routerFuzz';
import {
  describeHoldSummary,
  disposeAfter,
  holdSummary,
  poll,
  startWithCoordinator,
  type CodeServerHarness,
} from './harness';

const PRODUCER = 'e2e-load-producer';
const CONSUMER = 'e2e-load-consumer';
/** The bound the product promises for its own work on the extension host's main thread (issue 32). */
const HOLD_P99_MS = 5;
const HOLD_MAX_MS = 20;

/**
 * The coordinator runs in a worker thread of the extension host (src/server/worker): under load the editor's main
 * thread stays free, and a crash of the worker (SW4RM: Simulate a Coordinator Crash) is recovered from the store with
 * nothing accepted lost, while the views follow.
 */
describe('the coordinator in its worker thread, in a real editor (code-server + Chromium)', function () {
  let harness: CodeServerHarness | undefined;
  const closers: Array<{ close(): void }> = [];
  let address: string;
  let token: string | undefined;
  let registry: CoordinatorClients;
  let producer: RouterClient;
  let consumer: RouterClient;
  let producerInbox: Inbox;
  let consumerInbox: Inbox;

  before(async function () {
    // Room in the consumer's inbox for what a slow machine lets pile up (the default capacity answers BUFFER_FULL).
    ({ harness } = await startWithCoordinator({
      name: 'sw4rm-worker-e2e',
      userSettings: { 'sw4rm.inboxCapacity': 10_000 },
    }));
    const env = await harness.terminalEnvironment();
    address = env.SW4RM_ROUTER_ADDR;
    token = env.SW4RM_TOKEN;
    registry = new CoordinatorClients(address, token);
    await registerRouterAgent(registry, PRODUCER);
    await registerRouterAgent(registry, CONSUMER);
    producer = new RouterClient(address, token, PRODUCER);
    consumer = new RouterClient(address, token, CONSUMER);
    consumerInbox = consumer.openInbox(CONSUMER, { reconnect: true });
    producerInbox = producer.openInbox(PRODUCER, { reconnect: true });
    closers.push(registry, producer, consumer, consumerInbox, producerInbox);
    await harness.openViewContainer('SW4RM');
    await harness.waitForText(
      (t) => t.includes(PRODUCER) && t.includes(CONSUMER),
      20_000,
      () => harness!.viewText('Agents'),
    );
  });

  after(async function () {
    consumerInbox?.stopReconnecting();
    producerInbox?.stopReconnecting();
    for (const closer of closers) closer.close();
    await disposeAfter(harness, this.currentTest, 'worker-crash');
  });

  it(`holds the extension host's main thread at most ${HOLD_P99_MS} ms at p99 and ${HOLD_MAX_MS} ms at worst while agents load the coordinator`, async function () {
    this.timeout(120_000);
    const deadline = Date.now() + 60_000;
    const worker = new ExactlyOnceWorker(consumer, consumerInbox, PRODUCER, deadline);
    const ledger = new OperationLedger(producer, CONSUMER, producerInbox, deadline);
    const operations = ledger.create(3_000, (i) => `${PRODUCER}:hold:${String(i).padStart(4, '0')}`);
    // The windows that end within the load (and the one after it, which holds its tail).
    const started = Date.now();
    await runPool(operations, 8, async (op) => {
      await ledger.sendUntilAnswered(op);
    });
    await ledger.settleAll(deadline);
    const ended = Date.now();
    const seconds = (ended - started) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const windows = harness!.mainThreadReport().windows.filter((w) => w.at > started && w.at <= ended + 2_500);
    const hold = holdSummary(windows);
    console.log(
      `      ${operations.length} messages in ${seconds.toFixed(1)} s (${Math.round(operations.length / seconds)} msg/s, ` +
        `8 in flight, the Agents view open); the extension host's main thread over ${windows.length} windows: ` +
        describeHoldSummary(hold),
    );
    const longest = windows.reduce((a, w) => ((w.ownMax ?? 0) > (a.ownMax ?? 0) ? w : a), windows[0]);
    console.log(`      the extension's longest hold began in ${longest?.ownLongestAt ?? '—'} (dist/extension.js)`);
    assert.deepEqual(exactlyOnceProblems(operations, ledger, worker), []);
    assert.ok(windows.length >= 2, `the report has windows for the load (${windows.length})`);
    // What the product bounds is the extension's own work on the thread (its code on the stack of the thread's CPU
    // profile). The thread's CPU also counts other extensions' and the editor's work (code-server's port finder, the
    // git extension, the renderer protocol's compression), the wall figure also the waits for a core other processes
    // (this test's load generator, code-server, Chromium) hold on a 2-core machine: printed, not asserted.
    assert.ok(hold.ownMax !== undefined, 'the extension profiled its own work');
    const p99 = hold.ownP99!;
    const max = hold.ownMax;
    // A p99 needs enough holds to mean one: of about 100 (the views refresh at most every 250 ms), it is the second
    // longest. Below 200 holds it is printed, and the bound at worst is what is asserted.
    if (hold.ownCount >= 200) assert.ok(p99 <= HOLD_P99_MS, `p99 ${p99.toFixed(1)} ms > ${HOLD_P99_MS} ms`);
    assert.ok(max <= HOLD_MAX_MS, `max ${max.toFixed(1)} ms > ${HOLD_MAX_MS} ms`);
  });

  it('survives a crash of its worker mid-load: it restarts from the store, the views recover, nothing accepted is lost', async function () {
    this.timeout(240_000);
    const deadline = Date.now() + 150_000;
    const worker = new ExactlyOnceWorker(consumer, consumerInbox, PRODUCER, deadline);
    const ledger = new OperationLedger(producer, CONSUMER, producerInbox, deadline);
    const operations = ledger.create(1_500, (i) => `${PRODUCER}:crash:${String(i).padStart(4, '0')}`);
    let accepted = 0;
    let crash: Promise<void> | undefined;
    let crashedAt: number | undefined;
    let restarted = Infinity;
    await runPool(operations, 8, async (op) => {
      const attempt = await ledger.send(op);
      if (attempt.answer === 'accepted' && ++accepted === 300) {
        restarted = Date.now();
        crash = harness!.runCommand('SW4RM: Simulate a Coordinator Crash').then(() => void (crashedAt = accepted));
      }
    });
    await crash;
    assert.ok(crashedAt !== undefined && crashedAt < operations.length, 'the worker ended while the load ran');
    await harness!.waitForText(
      (t) => t.includes('coordinator restarted'),
      60_000,
      async () => harness!.outputLog(),
    );
    await harness!.waitForText(
      (t) => /SW4RM :\d+/.test(t),
      30_000,
      () => harness!.statusBarText(),
    );
    for (const agent of [PRODUCER, CONSUMER])
      await retryTransport(`re-registering ${agent}`, () => registerRouterAgent(registry, agent), deadline);
    await poll(
      () =>
        [consumerInbox, producerInbox].every((inbox) => inbox.openedAt !== undefined && inbox.openedAt >= restarted),
      { timeoutMs: 30_000, description: 'both inbox streams reopened against the new worker' },
    );
    await runPool(operations, 8, async (op) => {
      await ledger.sendUntilAnswered(op);
    });
    await ledger.settleAll(deadline);
    const problems = [...exactlyOnceProblems(operations, ledger, worker), ...ledger.problems.slice(0, 10)];
    console.log(
      `      the worker ended after ${crashedAt} of ${operations.length} first attempts were accepted; retries answered ` +
        `${tally(operations.map((op) => retryAnswer(op)))}; settled ${tally(operations.map((op) => ledger.settlement(op)?.kind ?? 'UNSETTLED'))}`,
    );
    assert.deepEqual(problems, []);
    // The views follow the new worker: the agents are listed again, the log says what happened.
    await harness!.waitForText(
      (t) => t.includes(PRODUCER) && t.includes(CONSUMER),
      20_000,
      () => harness!.viewText('Agents'),
    );
    const log = harness!.outputLog();
    assert.match(log, /SW4RM coordinator worker ended: the worker was ended on request/);
    assert.match(log, /restarting the coordinator from its store \(restart 1 of at most 3 in 5 minutes/);
    await harness!.screenshot('worker-restarted');
  });
});
