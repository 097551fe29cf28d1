import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import type { StoredEvent } from '../../src/core/log/model';
import type { CoordinatorHost } from '../../src/server/host';
import { canonicalDefinition, type CoordinatorClients } from '../support/clients';
import { clientsFor, startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import {
  ackPayload,
  describeOutcome,
  isTransportFailure,
  reasonCode,
  registerRouterAgent,
  RouterClient,
  type CallOutcome,
  type Inbox,
  type SendResult,
  type StreamItem,
} from '../support/routerClient';
import {
  caseMetadata,
  FuzzGenerator,
  fuzzSeed,
  Prng,
  responseDecoder,
  runPool,
  TARGET_PATHS,
  type FuzzCase,
  type FuzzContext,
} from '../support/routerFuzz';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const REQUESTS = 5_000;
const CONCURRENCY = 32;
const CALL_DEADLINE_MS = 10_000;
/** Inbox streams legitimately stay open: a stream case is watched this long and may end DEADLINE_EXCEEDED. */
const STREAM_WATCH_MS = 1_500;

const PRODUCER = 'fuzz-producer';
const CONSUMER = 'fuzz-consumer';

/**
 * Statuses a call may end with. A handler that throws makes grpc-js answer UNKNOWN ("Server method handler
 * threw error …"), and a rejected promise leaves the call hanging until its deadline (DEADLINE_EXCEEDED) or
 * takes the process down: neither is acceptable.
 *
 * INTERNAL is acceptable only as grpc-js's own answer to request bytes that do not parse. grpc-js 1.14.7
 * (server-interceptors.js, decompressAndMaybePush) catches the deserializer's exception before any handler
 * runs and ends the call with INTERNAL and details exactly "Error deserializing request" (with the protobufjs
 * message appended only when GRPC_NODE_DEBUG_SEND_ERROR_DETAILS=true). It never says "Failed to parse".
 */
const ACCEPTABLE_CODES = new Set<grpc.status>([
  grpc.status.OK,
  grpc.status.INVALID_ARGUMENT,
  grpc.status.RESOURCE_EXHAUSTED,
  grpc.status.UNIMPLEMENTED,
  grpc.status.PERMISSION_DENIED,
  grpc.status.FAILED_PRECONDITION,
  grpc.status.NOT_FOUND,
  grpc.status.UNAUTHENTICATED,
]);
const GRPC_DESERIALIZE_FAILURE = /^Error deserializing request\b/;
/** UNIMPLEMENTED is fine only as the skeleton's own "not implemented yet" answer while the router is missing. */
const NOT_IMPLEMENTED_YET = /is not implemented yet by this SW4RM coordinator/;

const INTERNAL_ERROR = /internal_error/i;

/** The error code names of common.proto's ErrorCode: every refusal's reason starts with one of them. */
function errorCodeNames(): Set<string> {
  const definition = canonicalDefinition()['sw4rm.common.ErrorCode'] as unknown as {
    type: { value: Array<{ name: string }> };
  };
  return new Set(definition.type.value.map((v) => v.name).filter((name) => name !== 'ERROR_CODE_UNSPECIFIED'));
}

interface Finding {
  readonly fuzzCase: FuzzCase;
  readonly outcome: CallOutcome;
  readonly problem: string;
}

describe('RouterService under fuzzed requests', () => {
  let dataDir: string;
  let host: CoordinatorHost | undefined;
  let clients: CoordinatorClients | undefined;
  const routers: RouterClient[] = [];
  const inboxes: Inbox[] = [];
  const internalErrorEvents: StoredEvent[] = [];

  before(async () => {
    dataDir = makeTempDir('sw4rm-int-router-fuzz-');
    host = await startHost(dataDir, {
      // Every event, from the first one on: the log query answers at most 100,000 events.
      // Case-insensitive: the router logs a caught fault as `router.internal_error`.
      onEvent: (event) => {
        if (INTERNAL_ERROR.test(JSON.stringify(event))) internalErrorEvents.push(event);
      },
    });
    clients = clientsFor(host);
  });

  after(async () => {
    for (const inbox of inboxes) inbox.close();
    for (const router of routers) router.close();
    clients?.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  it(`answers ${REQUESTS} random, mutated and raw requests with a response or a proper status, and keeps serving`, async function () {
    this.timeout(120_000);
    const started = Date.now();
    const seed = fuzzSeed();
    console.log(`      router fuzz seed ${seed} (reproduce with FUZZ_SEED=${seed})`);
    const codes = errorCodeNames();
    const address = `127.0.0.1:${host!.port}`;
    const token = host!.token!;

    await registerRouterAgent(clients!, PRODUCER);
    await registerRouterAgent(clients!, CONSUMER, {
      modalities_supported: ['application/json', 'text/plain; charset=utf-8'],
    });
    const producer = new RouterClient(address, token, PRODUCER);
    const consumer = new RouterClient(address, token, CONSUMER);
    routers.push(producer, consumer);

    // The consumer works like an agent: it fulfils every message delivered to it and confirms the delivery,
    // so its inbox (capacity 10 not yet READ) keeps room. The producer confirms the NACKs it is sent.
    const workerFindings: string[] = [];
    const checkWorkerResult = (what: string, result: SendResult): void => {
      if (!result.accepted && !codes.has(reasonCode(result.reason) ?? ''))
        workerFindings.push(`${what}: reason without an error code: ${result.reason}`);
    };
    const confirm = (router: RouterClient, agentId: string, item: StreamItem): void => {
      router.ackDelivery(agentId, item.seq, item.msg.message_id).catch((err: unknown) => {
        if (!isTransportFailure(err))
          workerFindings.push(`AckDelivery(${agentId}, ${item.seq}): ${(err as Error).message}`);
      });
    };
    const consumerInbox = consumer.openInbox(CONSUMER);
    const producerInbox = producer.openInbox(PRODUCER);
    inboxes.push(consumerInbox, producerInbox);
    consumerInbox.onItem((item) => {
      if (item.msg.message_type !== 'ACKNOWLEDGEMENT' && item.msg.producer_id !== 'coordinator') {
        consumer
          .ack(item.msg.message_id, 'FULFILLED', { note: 'fuzz consumer' })
          .then((result) => checkWorkerResult(`ACK FULFILLED for ${item.msg.message_id}`, result))
          .catch((err: unknown) => {
            if (!isTransportFailure(err))
              workerFindings.push(`ACK for ${item.msg.message_id}: ${(err as Error).message}`);
          });
      }
      confirm(consumer, CONSUMER, item);
    });
    const nackProblems: string[] = [];
    producerInbox.onItem((item) => {
      const ack = ackPayload(item.msg);
      if (item.msg.producer_id === 'coordinator' && item.msg.message_type === 'ACKNOWLEDGEMENT') {
        if (!ack || typeof ack.ack_for_message_id !== 'string' || !ack.stage || !codes.has(String(ack.error_code))) {
          nackProblems.push(
            `a NACK whose payload is not {ack_for_message_id, ack_stage, error_code, note}: ${Buffer.from(item.msg.payload).toString('utf8').slice(0, 200)}`,
          );
        }
      }
      confirm(producer, PRODUCER, item);
    });

    // Generate every request up front from the seed, then fire them with bounded concurrency.
    const ctx: FuzzContext = {
      producer: PRODUCER,
      consumer: CONSUMER,
      consumerTypes: ['application/json', 'text/plain'],
    };
    const generator = new FuzzGenerator(new Prng(seed), ctx);
    const cases = generator.generate(REQUESTS);
    const raw = new RouterClient(address, token, PRODUCER);
    routers.push(raw);

    const findings: Finding[] = [];
    const tally = new Map<string, number>();
    const byOutcome = new Map<string, number>();
    const count = (fuzzCase: FuzzCase, outcome: string): void => {
      const key = `${fuzzCase.kind.padEnd(7)} ${fuzzCase.target.padEnd(15)}${outcome}`;
      tally.set(key, (tally.get(key) ?? 0) + 1);
      byOutcome.set(outcome, (byOutcome.get(outcome) ?? 0) + 1);
    };

    await runPool(cases, CONCURRENCY, async (fuzzCase) => {
      const metadata = caseMetadata(fuzzCase, token);
      const path = TARGET_PATHS[fuzzCase.target];
      let outcome: CallOutcome;
      if (fuzzCase.target === 'StreamIncoming') {
        const end = await raw.rawServerStream(path, fuzzCase.body, metadata, STREAM_WATCH_MS);
        outcome = { kind: 'status', code: end.code, details: end.details };
      } else {
        outcome = await raw.rawUnary(path, fuzzCase.body, metadata, responseDecoder(fuzzCase.target), CALL_DEADLINE_MS);
      }
      const problem = judge(fuzzCase, outcome, codes);
      count(fuzzCase, summarize(outcome));
      if (problem) findings.push({ fuzzCase, outcome, problem });
    });
    const fuzzSeconds = (Date.now() - started) / 1000;

    const table = [...tally.entries()].sort().map(([key, n]) => `${String(n).padStart(5)}  ${key}`);
    console.log(
      `      ${cases.length} requests in ${fuzzSeconds.toFixed(1)} s (${generator.unencodable.length} more refused by the proto encoder, not sent): ` +
        [...byOutcome]
          .sort((a, b) => b[1] - a[1])
          .map(([outcome, n]) => `${outcome} ×${n}`)
          .join(', '),
    );
    if (process.env.FUZZ_VERBOSE) console.log(`        ${table.join('\n        ')}`);

    // Afterwards the coordinator still serves: health, and one valid envelope end to end.
    const problems: string[] = [];
    const health = await clients!
      .healthCheck('')
      .catch((err: grpc.ServiceError) => ({ status: `failed: ${err.message}` }));
    if (health.status !== 'SERVING') problems.push(`health Check answered ${health.status}, not SERVING`);
    try {
      await endToEnd(producer, consumerInbox, generator);
    } catch (err) {
      problems.push(`end to end after the fuzz: ${(err as Error).message}`);
    }
    for (const inbox of [consumerInbox, producerInbox]) {
      if (inbox.final) problems.push(`${inbox.agentId}'s inbox stream ended: ${inbox.describe()}`);
    }
    if (internalErrorEvents.length) {
      const examples = internalErrorEvents
        .slice(0, 4)
        .map((e) => `${e.eventType} [${e.actor}] ${JSON.stringify(e.details).slice(0, 240)}`);
      problems.push(
        `${internalErrorEvents.length} events in the coordinator's log mention INTERNAL_ERROR:\n      ${examples.join('\n      ')}`,
      );
    }
    const logged = host!.coordinator.log
      .query({ limit: 100_000 })
      .filter((e) => INTERNAL_ERROR.test(JSON.stringify(e)));
    if (logged.length && !internalErrorEvents.length)
      problems.push(`the event log holds ${logged.length} INTERNAL_ERROR events`);
    problems.push(...workerFindings.slice(0, 10), ...nackProblems.slice(0, 10));
    if (fuzzSeconds > 60) problems.push(`the ${cases.length} requests took ${fuzzSeconds.toFixed(1)} s (budget 60 s)`);

    const report = [
      ...findings
        .slice(0, 25)
        .map(
          (f) =>
            `#${f.fuzzCase.index} ${f.fuzzCase.kind} ${f.fuzzCase.target} [${f.fuzzCase.description.slice(0, 160)}] ` +
            `auth=${f.fuzzCase.auth}: ${f.problem}; got ${describeOutcome(f.outcome).slice(0, 300)}`,
        ),
      ...(findings.length > 25 ? [`… and ${findings.length - 25} more findings`] : []),
      ...problems,
    ];
    assert.equal(
      report.length,
      0,
      `seed ${seed} (FUZZ_SEED=${seed}): ${findings.length} findings, ${problems.length} other problems:\n  ${report.join('\n  ')}` +
        `\n\noutcomes by kind and method:\n  ${table.join('\n  ')}`,
    );
  });
});

/** The first problem with one call's outcome, or undefined when it is an acceptable answer. */
function judge(fuzzCase: FuzzCase, outcome: CallOutcome, codes: ReadonlySet<string>): string | undefined {
  const badAuth = fuzzCase.auth !== 'valid' && fuzzCase.auth !== 'lowercase';
  if (outcome.kind === 'status') {
    if (outcome.code === grpc.status.DEADLINE_EXCEEDED) {
      return fuzzCase.target === 'StreamIncoming' ? undefined : 'no answer before the deadline (the call hung)';
    }
    if (outcome.code === grpc.status.INTERNAL) {
      if (
        GRPC_DESERIALIZE_FAILURE.test(outcome.details) &&
        (fuzzCase.kind === 'raw' || fuzzCase.kind === 'wire' || fuzzCase.kind === 'stream')
      )
        return undefined;
      return 'INTERNAL (not grpc\'s own "Error deserializing request")';
    }
    if (outcome.code === grpc.status.UNIMPLEMENTED && !NOT_IMPLEMENTED_YET.test(outcome.details))
      return 'UNIMPLEMENTED from something other than the skeleton';
    if (!ACCEPTABLE_CODES.has(outcome.code)) return `status ${grpc.status[outcome.code]} is not acceptable`;
    if (badAuth && outcome.code !== grpc.status.UNAUTHENTICATED)
      return `auth "${fuzzCase.auth}" must end UNAUTHENTICATED`;
    return undefined;
  }
  if (badAuth) return `auth "${fuzzCase.auth}" must end UNAUTHENTICATED, not answer`;
  const response = outcome.response as Partial<SendResult>;
  if ((fuzzCase.target === 'SendMessage' || fuzzCase.target === 'RegisterAgent') && response.accepted === false) {
    const code = reasonCode(response.reason ?? '');
    if (code === undefined) return 'a refusal whose reason does not start with an error code name and ":"';
    if (!codes.has(code)) return `a refusal with ${code}, which is not an ErrorCode name`;
    if (code === 'INTERNAL_ERROR') return 'INTERNAL_ERROR: a fault in the coordinator';
  }
  if (fuzzCase.target === 'SendMessage' && response.accepted === true && fuzzCase.mustRefuse)
    return `accepted, but must be refused: ${fuzzCase.mustRefuse}`;
  return undefined;
}

/** A short outcome class for the tally: the status code, or accepted / the refusal's error code. */
function summarize(outcome: CallOutcome): string {
  if (outcome.kind === 'status') {
    return outcome.code === grpc.status.INTERNAL && GRPC_DESERIALIZE_FAILURE.test(outcome.details)
      ? 'INTERNAL (not deserializable)'
      : grpc.status[outcome.code];
  }
  const response = outcome.response as Record<string, unknown>;
  if ('accepted' in response)
    return response.accepted ? 'OK accepted' : `OK refused ${reasonCode(String(response.reason)) ?? '(no code)'}`;
  return `OK ${JSON.stringify(response).slice(0, 40)}`;
}

/**
 * One valid DATA envelope from the producer reaches the consumer's stream. BUFFER_FULL is retried (same token,
 * new message_id, retry_count+1) until the consumer has worked its inbox down.
 */
async function endToEnd(producer: RouterClient, consumerInbox: Inbox, generator: FuzzGenerator): Promise<void> {
  const token = `${PRODUCER}:final:${generator.rng.uint32().toString(16)}`;
  let retry = 0;
  const accepted = await pollUntil(
    'the final envelope to be accepted (BUFFER_FULL is retried)',
    async () => {
      const msg = producer.envelope({
        sequence_number: generator.nextSequence(),
        idempotency_token: token,
        retry_count: retry++,
        payload: { task: 'after the fuzz' },
      });
      const result = await producer.send(msg, { to: CONSUMER });
      if (result.accepted) return msg;
      if (reasonCode(result.reason) === 'BUFFER_FULL') return undefined;
      throw new Error(`a valid envelope was refused: ${result.reason}`);
    },
    15_000,
    100,
  ).catch((err: grpc.ServiceError) => {
    throw new Error(
      err.code !== undefined ? `SendMessage failed with ${grpc.status[err.code]}: ${err.details}` : err.message,
    );
  });
  await consumerInbox.waitFor(
    (item) => item.msg.message_id === accepted.message_id,
    10_000,
    `the final envelope ${accepted.message_id}`,
  );
}
