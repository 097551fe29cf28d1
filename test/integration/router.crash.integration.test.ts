import { strict as assert } from 'node:assert';
import { findFreePort } from '../../src/server/server';
import { useCliProcesses } from '../support/cli';
import { CoordinatorClients } from '../support/clients';
import { pollUntil } from '../support/poll';
import {
  ExactlyOnceWorker,
  exactlyOnceProblems,
  OperationLedger,
  RETRYABLE_CODES,
  retryAnswer,
  tally,
} from '../support/routerAgents';
import { registerRouterAgent, retryTransport, RouterClient } from '../support/routerClient';
import { runPool } from '../support/routerFuzz';

const OPERATIONS = 1_000;
const CONCURRENCY = 16;
/** The coordinator is killed once this many first attempts were accepted, with the rest still in flight. */
const KILL_AFTER_ACCEPTED = 400;
const CAPACITY = 5_000;
/** Everything up to the final SIGTERM must be done by then (the test's budget is 90 s). */
const SETTLE_BUDGET_MS = 75_000;

const PRODUCER = 'crash-producer';
const CONSUMER = 'crash-consumer';

describe('router exactly-once across a coordinator crash (kill -9 and restart)', () => {
  const coordinators = useCliProcesses('sw4rm-int-router-crash-');

  /** Starts dist/cli.js on `port`; a port still held by the killed process is retried until it is free. */
  const startCoordinator = (port: number) => coordinators.serve(port, ['--capacity', String(CAPACITY)], 15_000);

  it(`settles ${OPERATIONS} operations exactly once although the coordinator is killed mid-flight`, async function () {
    this.timeout(120_000);
    const started = Date.now();
    const deadline = started + SETTLE_BUDGET_MS;
    const timeline: string[] = [];
    const mark = (what: string): void => {
      timeline.push(`${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s  ${what}`);
    };
    const problems: string[] = [];

    const port = await findFreePort('127.0.0.1');
    const first = await startCoordinator(port);
    const address = first.env.SW4RM_ROUTER_ADDR;
    const token = first.env.SW4RM_TOKEN;
    mark(`coordinator 1 serving on ${address} (--capacity ${CAPACITY})`);

    const registry = new CoordinatorClients(address, token);
    coordinators.closeAfter(registry);
    await registerRouterAgent(registry, PRODUCER);
    await registerRouterAgent(registry, CONSUMER);
    const producer = new RouterClient(address, token, PRODUCER);
    const consumer = new RouterClient(address, token, CONSUMER);
    coordinators.closeAfter(producer, consumer);
    const consumerInbox = consumer.openInbox(CONSUMER, { reconnect: true });
    const producerInbox = producer.openInbox(PRODUCER, { reconnect: true });
    coordinators.closeAfter(consumerInbox, producerInbox);
    const worker = new ExactlyOnceWorker(consumer, consumerInbox, PRODUCER, deadline);
    const ledger = new OperationLedger(producer, CONSUMER, producerInbox, deadline);
    const operations = ledger.create(OPERATIONS, (i) => `${PRODUCER}:op:${String(i).padStart(4, '0')}`);

    // Phase 1: one attempt per operation; SIGKILL once KILL_AFTER_ACCEPTED were accepted. Attempts after the
    // kill fail UNAVAILABLE at once, so every operation has one attempt and the next one is a retry.
    let accepted = 0;
    let killedAt: number | undefined;
    const kill = (why: string): void => {
      first.cli.signal('SIGKILL');
      killedAt = Date.now();
      mark(
        `SIGKILL (${why}): ${accepted} accepted, ${worker.executions.size} executed, ` +
          `${operations.filter((op) => ledger.settlement(op)).length} settled as the producer sees it`,
      );
    };
    await runPool(operations, CONCURRENCY, async (op) => {
      const attempt = await ledger.send(op);
      if (attempt.answer === 'accepted' && killedAt === undefined && ++accepted >= KILL_AFTER_ACCEPTED)
        kill(`after ${KILL_AFTER_ACCEPTED} accepted`);
    });
    if (killedAt === undefined) {
      kill('after every first attempt was answered');
      problems.push(
        `only ${accepted} first attempts were accepted, so the kill did not happen mid-flight ` +
          `(answers: ${tally(operations.map((op) => op.attempts[0]?.answer ?? 'none'))})`,
      );
    }
    await first.cli.exit();
    assert.equal(
      first.cli.exitSignal,
      'SIGKILL',
      `coordinator 1 should have died of SIGKILL, it exited with ${first.cli.exitCode}`,
    );
    mark(`phase 1 answers: ${tally(operations.map((op) => op.attempts[0].answer))}`);

    // Restart on the same port and data folder; the agents' channels and inbox streams reconnect by themselves.
    const second = await startCoordinator(port);
    const restartedAt = Date.now();
    assert.equal(second.env.SW4RM_TOKEN, token, 'the token survives the crash');
    mark(`coordinator 2 serving on port ${port}`);
    for (const agent of [PRODUCER, CONSUMER]) {
      await retryTransport(`re-registering ${agent}`, () => registerRouterAgent(registry, agent), deadline);
    }
    await pollUntil(
      'both inbox streams reopened against coordinator 2 (or refused for good)',
      () => {
        const settled = [consumerInbox, producerInbox].every(
          (inbox) => inbox.final || (inbox.openedAt !== undefined && inbox.openedAt >= restartedAt),
        );
        return settled ? true : undefined;
      },
      15_000,
    );
    for (const inbox of [consumerInbox, producerInbox]) {
      if (inbox.final) problems.push(`${inbox.agentId}'s inbox stream was refused: ${inbox.describe()}`);
    }
    mark(
      `agents re-registered; inbox streams: ${[consumerInbox, producerInbox]
        .map((inbox) => `${inbox.agentId} ${inbox.final ? 'refused' : `reopened (opened ${inbox.opens} times)`}`)
        .join(', ')}`,
    );

    // Phase 2: every operation again, as a retry (new message_id, same token, retry_count + 1).
    await runPool(operations, CONCURRENCY, async (op) => {
      await ledger.sendUntilAnswered(op);
    });
    mark(`phase 2 answers: ${tally(operations.map((op) => retryAnswer(op)))}`);
    const acceptedTwice = operations.filter(
      (op) =>
        op.attempts[0].answer === 'accepted' &&
        op.attempts[1]?.answer === 'accepted' &&
        !op.attempts[0].nacks.some((code) => RETRYABLE_CODES.has(code)),
    );
    if (acceptedTwice.length) {
      problems.push(
        `${acceptedTwice.length} retries were accepted although their first attempt had been accepted and was not NACKed ` +
          `retryably (expected ALREADY_IN_PROGRESS or DUPLICATE_DETECTED); e.g.\n      ${acceptedTwice
            .slice(0, 3)
            .map((op) => ledger.history(op))
            .join('\n      ')}`,
      );
    }

    // Phase 3: wait (polling, with a deadline) until the producer sees an outcome for every operation.
    await ledger.settleAll(deadline);
    await pollUntil(
      'the consumer to finish what it received',
      () => (worker.busy ? undefined : true),
      Math.max(0, deadline - Date.now()),
    ).catch(() => undefined);
    mark(
      `settlement: ${tally(operations.map((op) => ledger.settlement(op)?.kind ?? 'UNSETTLED'))}; ` +
        `${worker.deliveries} deliveries to the consumer (${worker.redeliveries} redeliveries)`,
    );

    problems.push(...exactlyOnceProblems(operations, ledger, worker));
    problems.push(...ledger.problems.slice(0, 10), ...worker.problems.slice(0, 10));
    if (worker.ackRefusals.size)
      mark(`consumer ACKs refused: ${[...worker.ackRefusals].map(([k, n]) => `${k} ×${n}`).join(', ')}`);
    const internalErrors = (first.cli.stderr + second.cli.stderr)
      .split('\n')
      .filter((line) => /internal_error/i.test(line));
    if (internalErrors.length)
      problems.push(
        `${internalErrors.length} coordinator log lines mention INTERNAL_ERROR, e.g. ${internalErrors[0].slice(0, 300)}`,
      );

    // Finally the coordinator drains and exits 0 on SIGTERM, with the agents' streams still open.
    consumerInbox.stopReconnecting();
    producerInbox.stopReconnecting();
    second.cli.signal('SIGTERM');
    const code = await second.cli.exit(15_000);
    if (code !== 0)
      problems.push(
        `coordinator 2 exited with ${code} (signal ${second.cli.exitSignal}) on SIGTERM, not 0:\n${second.cli.stderr.slice(-2000)}`,
      );
    mark(`SIGTERM: coordinator 2 exited with ${code}`);

    const elapsed = (Date.now() - started) / 1000;
    if (elapsed > 90) problems.push(`the test took ${elapsed.toFixed(1)} s (budget 90 s)`);
    console.log(`      ${timeline.join('\n      ')}`);
    assert.equal(
      problems.length,
      0,
      `exactly-once across the crash did not hold:\n  - ${problems.join('\n  - ')}\n\ntimeline:\n  ${timeline.join('\n  ')}`,
    );
  });
});
