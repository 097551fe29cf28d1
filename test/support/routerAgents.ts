import * as grpc from '@grpc/grpc-js';
import { pollUntil } from './poll';
import {
  ackPayload,
  backoff,
  duplicateDetail,
  isTransportFailure,
  reasonCode,
  retryTransport,
  type DuplicateDetail,
  type Envelope,
  type Inbox,
  type RouterClient,
  type StreamItem,
} from './routerClient';

/**
 * The two agents of the router crash test, written the way an agent author following the README would:
 * a worker that executes what it is sent at least once but deduplicates by message_id only, and a producer
 * that keeps a ledger of its logical operations (one idempotency_token each) and of every attempt.
 */

/**
 * Codes after which the README says a retry is delivered ("after a TIMED_OUT (or another retryable failure)
 * the retry is delivered"). Any other NACK means the message was dead-lettered (RFC §21.1).
 */
export const RETRYABLE_CODES: ReadonlySet<string> = new Set([
  'BUFFER_FULL',
  'ACK_TIMEOUT',
  'AGENT_UNAVAILABLE',
  'OVERLOADED',
  'TOOL_TIMEOUT',
]);

/** NACKs that only repeat the answer to a retry (README: a refusal also NACKs a sender with a live stream). */
const ECHO_CODES: ReadonlySet<string> = new Set(['DUPLICATE_DETECTED', 'ALREADY_IN_PROGRESS']);

const TERMINAL_FAILURES: ReadonlySet<string> = new Set(['REJECTED', 'FAILED']);

/**
 * The consumer: for every DATA envelope from `producerId` whose message_id it has not executed, it records one
 * execution for the envelope's idempotency_token; then (also for a redelivery, whose earlier ACKs may have been
 * lost with the coordinator) it sends ACK RECEIVED and ACK FULFILLED and confirms the delivery with
 * AckDelivery. It never deduplicates by token: exactly-once per token is the router's job.
 */
export class ExactlyOnceWorker {
  /** idempotency_token → how many times this worker executed it. */
  readonly executions = new Map<string, number>();
  readonly problems: string[] = [];
  /** Refusals of its ACKs by error code (diagnostics: a late ACK after a restart may be refused). */
  readonly ackRefusals = new Map<string, number>();
  deliveries = 0;
  redeliveries = 0;
  private readonly executed = new Set<string>();
  private readonly waiting: StreamItem[] = [];
  private active = 0;

  constructor(
    private readonly router: RouterClient,
    inbox: Inbox,
    private readonly producerId: string,
    private readonly deadline: number,
    private readonly concurrency = 16,
  ) {
    inbox.onItem((item) => {
      this.waiting.push(item);
      this.pump();
    });
  }

  /** Items received and not yet handled. */
  get busy(): boolean {
    return this.active > 0 || this.waiting.length > 0;
  }

  private pump(): void {
    while (this.active < this.concurrency && this.waiting.length > 0) {
      const item = this.waiting.shift()!;
      this.active++;
      this.handle(item)
        .catch((err: unknown) => {
          this.problems.push(`handling seq ${item.seq} (${item.msg.message_id}): ${(err as Error).message}`);
        })
        .finally(() => {
          this.active--;
          this.pump();
        });
    }
  }

  private async handle(item: StreamItem): Promise<void> {
    const { msg } = item;
    if (msg.message_type === 'DATA' && msg.producer_id === this.producerId) {
      this.deliveries++;
      if (this.executed.has(msg.message_id)) {
        this.redeliveries++;
      } else {
        this.executed.add(msg.message_id);
        this.executions.set(msg.idempotency_token, (this.executions.get(msg.idempotency_token) ?? 0) + 1);
      }
      await this.acknowledge(msg, 'RECEIVED');
      await this.acknowledge(msg, 'FULFILLED', 'done');
    }
    await retryTransport(
      `AckDelivery seq ${item.seq}`,
      () => this.router.ackDelivery(this.router.agentId, item.seq, msg.message_id),
      this.deadline,
    );
  }

  /** An ACK to the producer, echoing the message's correlation_id (message-types.txt rule 6). */
  private async acknowledge(msg: Envelope, stage: 'RECEIVED' | 'FULFILLED', note?: string): Promise<void> {
    let wait = 50;
    for (;;) {
      const result = await retryTransport(
        `ACK ${stage} for ${msg.message_id}`,
        () => this.router.ack(msg.message_id, stage, { to: this.producerId, note, correlation_id: msg.correlation_id }),
        this.deadline,
      );
      if (result.accepted) return;
      const code = reasonCode(result.reason) ?? `(no code) ${result.reason}`;
      if ((code === 'BUFFER_FULL' || code === 'OVERLOADED') && Date.now() + wait < this.deadline) {
        await backoff(wait);
        wait = Math.min(wait * 2, 1000);
        continue;
      }
      this.ackRefusals.set(`${stage} ${code}`, (this.ackRefusals.get(`${stage} ${code}`) ?? 0) + 1);
      return;
    }
  }
}

/** One attempt of an operation: one message_id, and everything heard about it. */
export interface Attempt {
  readonly messageId: string;
  readonly retryCount: number;
  /** 'pending', 'accepted', the refusal's error code, or `status <CODE>` for a failed call. */
  answer: string;
  reason?: string;
  duplicate?: DuplicateDetail;
  /** Stages of the consumer's ACKs forwarded to the producer. */
  readonly consumerStages: string[];
  /** Error codes of the coordinator's NACKs. */
  readonly nacks: string[];
}

/** One logical operation of the producer: one idempotency_token, any number of attempts. */
export interface Operation {
  readonly index: number;
  readonly token: string;
  readonly correlationId: string;
  readonly attempts: Attempt[];
  inFlight: boolean;
  /** Attempts whose retryable NACK already led to a retry (one retry per NACKed attempt). */
  readonly retriedAfter: Set<string>;
}

export interface Settlement {
  readonly kind: 'FULFILLED' | 'DLQ';
  readonly via: string;
}

/**
 * The producer's view: it sends attempts, reads forwarded ACKs and NACKs from its own inbox, confirms those
 * deliveries, and says for each operation whether it is settled and whether it needs another attempt.
 */
export class OperationLedger {
  readonly operations: Operation[] = [];
  readonly problems: string[] = [];
  /** Items on the producer's stream that refer to no attempt it made. */
  unknownItems = 0;
  private readonly byMessageId = new Map<string, { op: Operation; attempt: Attempt }>();

  constructor(
    private readonly router: RouterClient,
    private readonly consumerId: string,
    inbox: Inbox,
    private readonly deadline: number,
  ) {
    inbox.onItem((item) => this.observe(item));
  }

  create(count: number, token: (index: number) => string): Operation[] {
    for (let index = 0; index < count; index++) {
      this.operations.push({
        index,
        token: token(index),
        correlationId: this.router.uuid(),
        attempts: [],
        inFlight: false,
        retriedAfter: new Set(),
      });
    }
    return this.operations;
  }

  /** One attempt: a new message_id, the same token, retry_count = attempts so far, the next sequence_number. */
  async send(op: Operation): Promise<Attempt> {
    const msg = this.router.envelope({
      idempotency_token: op.token,
      retry_count: op.attempts.length,
      correlation_id: op.correlationId,
      payload: { operation: op.index, token: op.token },
    });
    const attempt: Attempt = {
      messageId: msg.message_id,
      retryCount: msg.retry_count,
      answer: 'pending',
      consumerStages: [],
      nacks: [],
    };
    op.attempts.push(attempt);
    // Registered before the call: the consumer's ACK may arrive before the answer does.
    this.byMessageId.set(msg.message_id, { op, attempt });
    try {
      const result = await this.router.send(msg, { to: this.consumerId });
      if (result.accepted) {
        attempt.answer = 'accepted';
      } else {
        attempt.answer = reasonCode(result.reason) ?? '(no code)';
        attempt.reason = result.reason;
        if (attempt.answer === 'DUPLICATE_DETECTED') {
          attempt.duplicate = duplicateDetail(result.reason);
          if (!attempt.duplicate?.original_status)
            this.problems.push(
              `op ${op.index}: DUPLICATE_DETECTED without JSON {original_message_id, original_status}: ${result.reason}`,
            );
        } else if (attempt.answer !== 'ALREADY_IN_PROGRESS' && !RETRYABLE_CODES.has(attempt.answer)) {
          this.problems.push(`op ${op.index} attempt ${attempt.retryCount}: unexpected refusal ${result.reason}`);
        }
      }
    } catch (err) {
      const code = (err as grpc.ServiceError).code;
      attempt.answer = `status ${grpc.status[code] ?? code}`;
      attempt.reason = (err as grpc.ServiceError).details ?? (err as Error).message;
    }
    return attempt;
  }

  /** Attempts until one gets an answer other than a transport failure or a retryable refusal (or the deadline). */
  async sendUntilAnswered(op: Operation): Promise<Attempt> {
    op.inFlight = true;
    let wait = 50;
    try {
      for (;;) {
        const attempt = await this.send(op);
        const retry = attempt.answer.startsWith('status ')
          ? TRANSPORT_ANSWERS.has(attempt.answer)
          : RETRYABLE_CODES.has(attempt.answer);
        if (!retry || Date.now() + wait > this.deadline) return attempt;
        await backoff(wait);
        wait = Math.min(wait * 2, 1000);
      }
    } finally {
      op.inFlight = false;
    }
  }

  /** FULFILLED, DLQ, or undefined while the operation has no outcome yet. */
  settlement(op: Operation): Settlement | undefined {
    const outcomes = this.outcomes(op);
    return outcomes.find((o) => o.kind === 'FULFILLED') ?? outcomes[0];
  }

  /** Both a FULFILLED and a dead-letter outcome for one operation. */
  conflict(op: Operation): string | undefined {
    const outcomes = this.outcomes(op);
    const kinds = new Set(outcomes.map((o) => o.kind));
    return kinds.size > 1 ? outcomes.map((o) => `${o.kind} via ${o.via}`).join(' and ') : undefined;
  }

  /**
   * Not settled, and either the latest attempt failed in a way a retry fixes, or an attempt the coordinator
   * took was NACKed with a retryable code (ACK_TIMEOUT …) and no retry followed that NACK yet.
   */
  needsRetry(op: Operation): boolean {
    if (op.inFlight || this.settlement(op)) return false;
    const latest = op.attempts.at(-1);
    if (!latest) return true;
    if (latest.answer.startsWith('status ')) return TRANSPORT_ANSWERS.has(latest.answer);
    if (RETRYABLE_CODES.has(latest.answer)) return true;
    return this.retryableNacks(op).length > 0;
  }

  /** Retries an operation that needs it, once per retryable NACK. */
  async retry(op: Operation): Promise<void> {
    for (const attempt of this.retryableNacks(op)) op.retriedAfter.add(attempt.messageId);
    await this.sendUntilAnswered(op);
  }

  private retryableNacks(op: Operation): Attempt[] {
    return op.attempts.filter(
      (a) =>
        (a.answer === 'accepted' || a.answer.startsWith('status ')) &&
        !op.retriedAfter.has(a.messageId) &&
        a.nacks.some((code) => RETRYABLE_CODES.has(code)),
    );
  }

  /** Not settled, nothing in flight, and nothing the coordinator could still do would settle it. */
  hopeless(op: Operation): boolean {
    if (op.inFlight || this.settlement(op) || this.needsRetry(op)) return false;
    const latest = op.attempts.at(-1);
    return (
      latest !== undefined &&
      latest.answer !== 'accepted' &&
      latest.answer !== 'ALREADY_IN_PROGRESS' &&
      latest.answer !== 'pending'
    );
  }

  /**
   * Polls until every operation is settled, retrying those that need it, until `deadline`; answers early when
   * the operations left are hopeless (the coordinator refused them for good), so the caller can report them.
   */
  async settleAll(deadline: number): Promise<void> {
    await pollUntil(
      'every operation settled',
      () => {
        const open = this.operations.filter((op) => !this.settlement(op));
        for (const op of open) {
          if (this.needsRetry(op))
            this.retry(op).catch((err: unknown) => {
              this.problems.push(`retrying op ${op.index}: ${(err as Error).message}`);
            });
        }
        return open.every((op) => this.hopeless(op)) ? true : undefined;
      },
      Math.max(0, deadline - Date.now()),
      50,
    ).catch(() => undefined);
  }

  /** One line about an operation's attempts, for failure messages. */
  history(op: Operation): string {
    return (
      `op ${op.index} (${op.token}): ` +
      op.attempts
        .map(
          (a) =>
            `#${a.retryCount} ${a.messageId.slice(0, 8)} ${a.answer}${a.consumerStages.length ? ` acks[${a.consumerStages.join(',')}]` : ''}` +
            `${a.nacks.length ? ` nacks[${a.nacks.join(',')}]` : ''}${a.duplicate ? ` dup${JSON.stringify(a.duplicate)}` : ''}`,
        )
        .join('; ')
    );
  }

  private outcomes(op: Operation): Settlement[] {
    const outcomes: Settlement[] = [];
    for (const a of op.attempts) {
      if (a.consumerStages.includes('FULFILLED'))
        outcomes.push({ kind: 'FULFILLED', via: `ACK FULFILLED for attempt #${a.retryCount}` });
      if (a.duplicate?.original_status === 'FULFILLED')
        outcomes.push({ kind: 'FULFILLED', via: `DUPLICATE_DETECTED of ${a.duplicate.original_message_id}` });
      if (a.duplicate && TERMINAL_FAILURES.has(String(a.duplicate.original_status))) {
        outcomes.push({
          kind: 'DLQ',
          via: `DUPLICATE_DETECTED ${a.duplicate.original_status} ${JSON.stringify(a.duplicate.cached_error ?? '')}`,
        });
      }
      // A NACK settles only an attempt the coordinator took (or may have taken): for a refused one it is an echo.
      const taken = a.answer === 'accepted' || a.answer.startsWith('status ');
      const final = a.nacks.find((code) => !RETRYABLE_CODES.has(code) && !ECHO_CODES.has(code));
      if (taken && final) outcomes.push({ kind: 'DLQ', via: `NACK ${final} for attempt #${a.retryCount}` });
    }
    return outcomes;
  }

  private observe(item: StreamItem): void {
    const ack = ackPayload(item.msg);
    const target = ack?.ack_for_message_id ? this.byMessageId.get(ack.ack_for_message_id) : undefined;
    if (ack && target) {
      if (item.msg.producer_id === this.consumerId) target.attempt.consumerStages.push(ack.stage);
      else if (item.msg.producer_id === 'coordinator')
        target.attempt.nacks.push(String(ack.error_code ?? `(no error_code, stage ${ack.stage})`));
    } else if (item.msg.message_type !== 'HEARTBEAT' && item.msg.message_type !== 'NOTIFICATION') {
      this.unknownItems++;
    }
    retryTransport(
      `AckDelivery seq ${item.seq}`,
      () => this.router.ackDelivery(this.router.agentId, item.seq, item.msg.message_id),
      this.deadline,
    ).catch((err: unknown) => {
      if (!isTransportFailure(err)) this.problems.push(`AckDelivery seq ${item.seq}: ${(err as Error).message}`);
    });
  }
}

/** Failed calls that say nothing about the message: the coordinator was not reachable. */
const TRANSPORT_ANSWERS: ReadonlySet<string> = new Set([
  'status UNAVAILABLE',
  'status DEADLINE_EXCEEDED',
  'status CANCELLED',
]);

/** "accepted ×600, DUPLICATE_DETECTED ×400". */
export function tally(values: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return [...counts]
    .sort((a, b) => b[1] - a[1])
    .map(([value, n]) => `${value} ×${n}`)
    .join(', ');
}

/** The answer to the phase-2 retry: the last attempt's, with the original status of a DUPLICATE_DETECTED. */
export function retryAnswer(op: Operation): string {
  const attempt = op.attempts.at(-1)!;
  return attempt.duplicate ? `${attempt.answer}(${String(attempt.duplicate.original_status)})` : attempt.answer;
}

/**
 * Every token settled; a FULFILLED token executed exactly once by the consumer, a dead-lettered one never;
 * the consumer executed no token the producer did not send.
 */
export function exactlyOnceProblems(
  operations: readonly Operation[],
  ledger: OperationLedger,
  worker: ExactlyOnceWorker,
): string[] {
  const problems: string[] = [];
  const unsettled = operations.filter((op) => !ledger.settlement(op));
  if (unsettled.length) {
    const reason = unsettled.every((op) => ledger.hopeless(op))
      ? 'the coordinator refused them for good'
      : 'no FULFILLED ACK, DUPLICATE_DETECTED(FULFILLED) or dead-letter NACK reached the producer before the deadline';
    problems.push(
      `${unsettled.length} of ${operations.length} operations never settled (${reason}); e.g.\n      ` +
        unsettled
          .slice(0, 5)
          .map((op) => ledger.history(op))
          .join('\n      '),
    );
  }
  const twice: string[] = [];
  const dlqExecuted: string[] = [];
  const fulfilledNotExecuted: string[] = [];
  for (const op of operations) {
    const settlement = ledger.settlement(op);
    const count = worker.executions.get(op.token) ?? 0;
    if (count > 1) twice.push(`${op.token} ×${count}`);
    if (settlement?.kind === 'DLQ' && count > 0) dlqExecuted.push(`${op.token} (${settlement.via})`);
    if (settlement?.kind === 'FULFILLED' && count === 0) fulfilledNotExecuted.push(`${op.token} (${settlement.via})`);
    const conflict = ledger.conflict(op);
    if (conflict) problems.push(`${op.token} has two outcomes: ${conflict}`);
  }
  if (twice.length)
    problems.push(`${twice.length} tokens were executed more than once: ${twice.slice(0, 10).join(', ')}`);
  if (dlqExecuted.length)
    problems.push(`${dlqExecuted.length} dead-lettered tokens were executed: ${dlqExecuted.slice(0, 10).join(', ')}`);
  if (fulfilledNotExecuted.length)
    problems.push(
      `${fulfilledNotExecuted.length} tokens are FULFILLED but were never executed: ${fulfilledNotExecuted.slice(0, 10).join(', ')}`,
    );
  const known = new Set(operations.map((op) => op.token));
  const strangers = [...worker.executions.keys()].filter((token) => !known.has(token));
  if (strangers.length)
    problems.push(
      `the consumer executed ${strangers.length} tokens the producer never sent: ${strangers.slice(0, 5).join(', ')}`,
    );
  return problems;
}
