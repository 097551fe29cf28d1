import { isoUtc, type Clock } from '../clock';
import { Emitter, type Disposable, type Event } from '../events';
import type { IdSource } from '../ids';
import { PAYLOAD_LIMITS } from '../limits';
import type { EventLog } from '../log/eventLog';
import type { CallContext } from '../context';
import type { AgentDirectory } from '../registry/model';
import { schedulePruning } from '../retention';
import {
  checkEnvelope, jsonObject, modalityAccepts, payloadExcerpt, type Envelope, type ErrorCode, type Refusal,
} from './envelope';
import { DEFAULT_LANE_OPTIONS, LaneQueues, PrivilegedRateLimiter, type LaneOptions } from './lanes';
import {
  RETRYABLE_CODES, advances, isTerminal, nackPayload, parseAck, type AckPayload, type MessageState,
} from './lifecycle';
import { emptyMetrics, metricsText, observe, type AgentRouterMetrics } from './metrics';
import type {
  CoordinatorHandler, CoordinatorMailbox, DeadLetter, DeadLetterFilter, DedupEntry, MessageRecord, RouterRepository, RouterStorage,
} from './model';
export type { CoordinatorHandler };
import { OutcomeCache, SETTLED_OUTCOMES_IN_MEMORY } from './outcomeCache';

/** Forwarded ACKs and NACKs held per agent for redelivery when the client never confirms them (AckDelivery). */
const MAX_UNCONFIRMED_UNTRACKED = 256;

/** The coordinator's own address and producer id. */
export const COORDINATOR_ID = 'coordinator';

/**
 * The error code recorded when the recipient ends a message without naming one (a REJECTED/FAILED ACK with no
 * error_code, or AckDelivery PERMANENT_FAILURE). INTERNAL_ERROR is kept for the coordinator's own faults.
 */
export const UNSPECIFIED_ERROR = 'ERROR_CODE_UNSPECIFIED';

export interface RouterOptions {
  /** RFC §13: messages admitted to an inbox and not yet READ. */
  readonly capacity: number;
  /** RFC §11/§20: time to RECEIVED before TIMED_OUT. */
  readonly ackTimeoutMs: number;
  /** A delivery not confirmed within the lease is sent again. */
  readonly leaseMs: number;
  readonly maxDeliveryAttempts: number;
  /** RFC §11.2: how long outcomes stay in the idempotency cache. */
  readonly dedupWindowMs: number;
  /** Settled outcomes also kept in memory (the store keeps all of them for the window). */
  readonly outcomesInMemory: number;
  /** RFC §14: interval of the coordinator's HEARTBEAT envelopes to streaming agents; 0 turns them off. */
  readonly heartbeatIntervalMs: number;
  /** RFC §5.5: deliveries remembered per agent for stream resumption. */
  readonly resumeBacklog: number;
  /** Tracked deliveries a stream may have unconfirmed at once; the rest wait in their lanes. */
  readonly deliveryWindow: number;
  readonly payloadLimits: Readonly<Record<string, number>>;
  readonly lanes: LaneOptions;
  readonly dlqMaxEntries: number;
  readonly dlqRetentionMs: number;
  /**
   * Finished messages (terminal and delivered) stay in the store, queryable, for this long after their last
   * change, and never less than the deduplication window (retries and late ACKs look their attempts up).
   */
  readonly messageRetentionMs: number;
}

export const DEFAULT_ROUTER_OPTIONS: RouterOptions = {
  capacity: 10,
  ackTimeoutMs: 10_000,
  leaseMs: 30_000,
  maxDeliveryAttempts: 5,
  dedupWindowMs: 3_600_000,
  outcomesInMemory: SETTLED_OUTCOMES_IN_MEMORY,
  heartbeatIntervalMs: 10_000,
  resumeBacklog: 1000,
  deliveryWindow: 64,
  payloadLimits: PAYLOAD_LIMITS,
  lanes: DEFAULT_LANE_OPTIONS,
  dlqMaxEntries: 10_000,
  dlqRetentionMs: 7 * 24 * 3_600_000,
  messageRetentionMs: 24 * 3_600_000,
};

/** The longest message retention the settings and the CLI accept: a year. */
export const MAX_MESSAGE_RETENTION_HOURS = 365 * 24;

/**
 * Retention of finished messages runs every RETENTION_INTERVAL_MS and looks at up to RETENTION_SCAN_PER_RUN
 * stored messages: about 7 ms of work (deleting is ~7 µs per message). With a backlog it runs again
 * after CATCH_UP_MS (retention.ts), which keeps up with ~10,000 finished messages a second.
 */
const RETENTION_INTERVAL_MS = 10_000;
const RETENTION_SCAN_PER_RUN = 1_000;
/**
 * Housekeeping (expired outcomes, dead-letter retention) runs every HOUSEKEEPING_INTERVAL_MS; one run deletes at
 * most DEDUP_PRUNE_BATCH expired outcomes (~2 µs each, ~8 ms a run), and a backlog is worked off every CATCH_UP_MS.
 */
const HOUSEKEEPING_INTERVAL_MS = 60_000;
const DEDUP_PRUNE_BATCH = 4_000;

/** Where an agent's inbox goes while it streams. The gRPC adapter implements it. */
export interface InboxSink {
  deliver(seq: number, envelope: Envelope): void;
  /** Ends the stream: a newer stream replaced it, the agent left, or the coordinator stops. */
  close(reason: 'superseded' | 'deregistered' | 'shutdown', detail: string): void;
}

export type SendResult =
  | { readonly accepted: true; readonly messageId: string }
  | { readonly accepted: false; readonly code: ErrorCode; readonly reason: string };

export class StreamRefusal extends Error {
  constructor(readonly code: 'not_registered' | 'resume_out_of_range' | 'resume_expired', message: string) {
    super(message);
  }
}

export interface InboxStats {
  readonly agentId: string;
  readonly queueDepth: number;
  readonly capacity: number;
  readonly inFlight: number;
  readonly queued: number;
  readonly streaming: boolean;
  readonly lastDeliveryAt: number | null;
}

export interface SendOptions {
  /** The recipient from call metadata `sw4rm-to`. */
  readonly to?: string;
  /** When the request arrived, for the enqueue latency metric. */
  readonly receivedAt?: number;
}


/** Deliveries written to a stream and not yet confirmed, by seq, counting tracked ones as they come and go. */
class Inflight extends Map<number, MessageRecord> {
  tracked = 0;

  override set(seq: number, record: MessageRecord): this {
    const previous = super.get(seq);
    if (previous?.tracked) this.tracked--;
    if (record.tracked) this.tracked++;
    return super.set(seq, record);
  }

  override delete(seq: number): boolean {
    const previous = super.get(seq);
    if (previous?.tracked) this.tracked--;
    return super.delete(seq);
  }

  override clear(): void {
    this.tracked = 0;
    super.clear();
  }

  get untracked(): number {
    return this.size - this.tracked;
  }
}

interface Inbox {
  readonly agentId: string;
  readonly queue: LaneQueues<MessageRecord>;
  readonly inflight: Inflight;
  sink: InboxSink | undefined;
  lastSeq: number;
  /** Tracked messages admitted and not yet READ (the capacity count), by message id. */
  readonly notRead: Set<string>;
  readonly metrics: AgentRouterMetrics;
}

interface Timers {
  ack?: Disposable;
  ttl?: Disposable;
  lease?: Disposable;
}

const NOT_READ: ReadonlySet<MessageState> = new Set(['SENT', 'RECEIVED']);

/**
 * The router (RFC §11–§13, §21): admits envelopes durably, routes them to the recipient's inbox stream in
 * lane order, follows their lifecycle through protocol ACKs, deduplicates retries, applies back-pressure,
 * times out, expires and dead-letters. Everything it accepts reaches a terminal state or the DLQ.
 */
export class Router implements CoordinatorMailbox, Disposable {
  private readonly repo: RouterRepository;
  private readonly live = new Map<string, MessageRecord>();
  private readonly inboxes = new Map<string, Inbox>();
  private readonly timers = new Map<string, Timers>();
  private readonly dedup: OutcomeCache;
  /** Recent live-only envelopes (id → recipient), so that agents may acknowledge them. */
  private readonly ephemeral = new Map<string, string>();
  private readonly limiter: PrivilegedRateLimiter;
  private readonly changed = new Emitter<{ agentId: string }>();
  private readonly subscriptions: Disposable[] = [];
  private readonly coordinatorHandlers = new Map<string, CoordinatorHandler>();
  private heartbeatTimer: Disposable | undefined;
  private readonly housekeepingTimer: Disposable;
  private readonly retentionTimer: Disposable;
  private disposed = false;
  /** Fires when an inbox's counts change (views refresh from `inboxStats`). */
  readonly onDidChange: Event<{ agentId: string }> = this.changed.event;
  private readonly deadLettersChanged = new Emitter<{ kind: 'added' | 'requeued' | 'pruned'; id?: number }>();
  /** Fires after a dead letter was added, requeued, or pruned by retention (the change is committed). */
  readonly onDidChangeDeadLetters: Event<{ kind: 'added' | 'requeued' | 'pruned'; id?: number }> = this.deadLettersChanged.event;

  constructor(
    private readonly store: RouterStorage,
    private readonly registry: AgentDirectory,
    private readonly log: EventLog,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    readonly options: RouterOptions = DEFAULT_ROUTER_OPTIONS,
  ) {
    this.repo = store.router;
    this.dedup = new OutcomeCache(options.outcomesInMemory);
    this.limiter = new PrivilegedRateLimiter(options.lanes);
    this.recover();
    this.subscriptions.push(registry.onDidChange((change) => {
      if (change.kind === 'left') this.agentLeft(change.agentId, change.reason);
      else if (change.kind === 'joined') this.broadcast('agent.joined', change.agent.descriptor.agentId, { name: change.agent.descriptor.name });
    }));
    this.scheduleHeartbeat();
    this.housekeepingTimer = this.pruningTimer(HOUSEKEEPING_INTERVAL_MS, (now) => this.housekeeping(now));
    this.retentionTimer = this.pruningTimer(RETENTION_INTERVAL_MS, (now) => this.pruneMessages(now));
  }

  // ---------------------------------------------------------------- admission

  /** SendMessage: answers accepted only after the message is committed to the store. */
  send(envelope: Envelope, ctx: CallContext, options: SendOptions = {}): SendResult {
    const now = this.clock.now();
    const refused = (code: ErrorCode, detail: string, extra: Record<string, unknown> = {}, inboxId?: string): SendResult =>
      this.refuse(envelope, code, detail, ctx, extra, inboxId);

    const invalid = checkEnvelope(envelope, this.options.payloadLimits);
    if (invalid) return refused(invalid.code, invalid.detail);
    const producer = this.registry.get(envelope.producerId);
    if (!producer) return refused('PERMISSION_DENIED', `producer_id '${envelope.producerId}' is not a registered agent; RegisterAgent first`);
    const same = this.message(envelope.messageId);
    if (same) {
      // The same attempt sent twice (a transport-level resend): message_id is unique per attempt.
      const terminal = same.tracked ? isTerminal(same.state) : same.delivery === 'done';
      return refused(terminal ? 'DUPLICATE_DETECTED' : 'ALREADY_IN_PROGRESS', JSON.stringify({
        original_message_id: same.envelope.messageId, original_status: same.state, cached_at: isoUtc(same.updatedAt),
      }), { original_message_id: same.envelope.messageId, original_status: same.state });
    }

    const json = jsonObject(envelope);
    const to = (options.to ?? '').trim() || (typeof json?.to === 'string' ? json.to.trim() : '');

    // The producer is heard from: every message it sends counts as a sign of life.
    if (envelope.messageType === 'HEARTBEAT' && (to === '' || to === COORDINATOR_ID)) {
      this.registry.recordLiveness(envelope.producerId, ctx);
      return { accepted: true, messageId: envelope.messageId };
    }

    let ack: AckPayload | undefined;
    let target: MessageRecord | undefined;
    let recipient = to;
    if (envelope.messageType === 'ACKNOWLEDGEMENT') {
      const parsed = parseAck(json);
      if (typeof parsed === 'string') return refused('VALIDATION_ERROR', parsed);
      ack = parsed;
      target = this.message(ack.ackForMessageId);
      if (!target && this.ephemeral.get(ack.ackForMessageId) === envelope.producerId) {
        // An ACK of a heartbeat or notice: a sign of life, nothing to forward.
        this.registry.recordLiveness(envelope.producerId, ctx);
        return { accepted: true, messageId: envelope.messageId };
      }
      if (!target) return refused('NO_ROUTE', `ack_for_message_id '${ack.ackForMessageId.slice(0, 80)}' is not a message this coordinator routed`);
      if (target.recipientId !== envelope.producerId) {
        return refused('PERMISSION_DENIED', `only the recipient of ${target.envelope.messageId} may acknowledge it`);
      }
      if (recipient === '') {
        recipient = target.envelope.producerId;
        if (recipient !== COORDINATOR_ID && !this.registry.get(recipient)) recipient = COORDINATOR_ID;
      }
    } else if (recipient === COORDINATOR_ID && !this.coordinatorHandlers.has(envelope.messageType)) {
      const takes = ['HEARTBEAT replies', 'ACKNOWLEDGEMENTs', ...this.coordinatorHandlers.keys()].join(', ');
      return refused('UNSUPPORTED_MESSAGE_TYPE', `the coordinator takes ${takes}, not ${envelope.messageType}`);
    }
    if (recipient === '') return refused('NO_ROUTE', 'no recipient: set call metadata sw4rm-to or a top-level "to" in the JSON payload');
    if (recipient === envelope.producerId) return refused('NO_ROUTE', 'a producer never receives its own message');
    const recipientAgent = recipient === COORDINATOR_ID ? undefined : this.registry.get(recipient);
    if (!recipientAgent && recipient !== COORDINATOR_ID) return refused('NO_ROUTE', `no agent '${recipient.slice(0, 128)}' is registered`);
    if (recipientAgent && !ack && !modalityAccepts(recipientAgent.descriptor.modalitiesSupported, envelope.contentType)) {
      return refused('UNSUPPORTED_MESSAGE_TYPE',
        `${recipient} accepts ${recipientAgent.descriptor.modalitiesSupported.join(', ')}, not ${envelope.contentType}`);
    }
    const expiresAt = envelope.ttlMs > 0 ? (envelope.timestampMs ?? now) + envelope.ttlMs : null;
    if (expiresAt !== null && expiresAt <= now) return refused('TTL_EXPIRED', `ttl_ms ${envelope.ttlMs} had passed on arrival`);

    // Deduplication (RFC §11.2): by token when present, else by (producer_id, sequence_number).
    const dedupKey = envelope.idempotencyToken ? `t:${envelope.idempotencyToken}` : `s:${envelope.sequenceNumber}`;
    const previous = this.dedupEntry(envelope.producerId, dedupKey, now);
    if (previous?.status === 'in_progress') {
      const latest = this.message(previous.latestMessageId);
      this.log.record({
        correlationId: envelope.correlationId, actor: 'router', eventType: 'dedup.already_in_progress',
        details: { message_id: envelope.messageId, producer_id: envelope.producerId, key: dedupKey, original_message_id: previous.originalMessageId, latest_message_id: previous.latestMessageId },
      });
      return refused('ALREADY_IN_PROGRESS', `the operation is under way as ${previous.latestMessageId} (${latest?.state ?? 'unknown'})`, {
        original_message_id: previous.originalMessageId, latest_message_id: previous.latestMessageId, original_status: latest?.state ?? '',
      });
    }
    if (previous?.status === 'done') {
      const cached: Record<string, unknown> = {
        original_message_id: previous.originalMessageId, original_status: previous.outcomeState, cached_at: isoUtc(previous.cachedAt),
      };
      if (previous.outcomeState === 'FULFILLED') cached.cached_result = previous.result;
      else cached.cached_error = { error_code: previous.errorCode, ...(previous.result ?? {}) };
      this.log.record({
        correlationId: envelope.correlationId, actor: 'router', eventType: 'dedup.duplicate_detected',
        details: { message_id: envelope.messageId, producer_id: envelope.producerId, key: dedupKey, ...cached },
      });
      return refused('DUPLICATE_DETECTED', JSON.stringify(cached), cached);
    }

    if (target && ack) return this.acceptAck(envelope, ack, target, recipient, dedupKey, previous, ctx, now, options);
    if (recipient === COORDINATOR_ID) return this.acceptAtCoordinator(envelope, json, dedupKey, previous, ctx, now, expiresAt);

    const inbox = this.inbox(recipient);
    const tracked = true;
    if (inbox.notRead.size >= this.options.capacity) {
      return refused('BUFFER_FULL', `the inbox of ${recipient} holds ${inbox.notRead.size} messages not yet READ (capacity ${this.options.capacity})`, {}, recipient);
    }
    const { lane, demoted } = this.limiter.admit(envelope.producerId, producer.descriptor.communicationClass, now);
    const record: MessageRecord = {
      envelope, recipientId: recipient, dedupKey, tracked, lane, ackFor: '', acceptedAt: now,
      state: 'SENT', errorCode: '', updatedAt: now,
      ackDeadline: now + this.options.ackTimeoutMs, expiresAt,
      delivery: 'queued', deliverySeq: null, deliveredAt: null, leaseUntil: null, deliveryAttempts: 0,
      history: [{ at: now, event: 'accepted', detail: previous ? `retry of ${previous.originalMessageId}` : undefined }],
    };
    const entry: DedupEntry = previous
      ? { ...previous, latestMessageId: envelope.messageId, attempts: [...previous.attempts, envelope.messageId], status: 'in_progress', outcomeState: '', errorCode: '', result: null, cachedAt: now, expiresAt: now + this.options.dedupWindowMs }
      : { producerId: envelope.producerId, key: dedupKey, originalMessageId: envelope.messageId, latestMessageId: envelope.messageId, attempts: [envelope.messageId], status: 'in_progress', outcomeState: '', errorCode: '', result: null, cachedAt: now, expiresAt: now + this.options.dedupWindowMs };
    const retrying = previous ? previous.attempts.map((id) => this.message(id)).filter((m): m is MessageRecord => m?.state === 'TIMED_OUT') : [];

    this.store.transaction(() => {
      this.repo.insertMessage(record);
      this.putDedup(entry);
      for (const earlier of retrying) {
        this.setState(earlier, 'RETRYING');
        earlier.updatedAt = now;
        earlier.history.push({ at: now, event: 'retrying', detail: `retry ${envelope.messageId}` });
        this.repo.updateMessage(earlier);
        this.live.set(earlier.envelope.messageId, earlier);
        this.transition(earlier, 'TIMED_OUT', 'RETRYING', ctx.correlationId, { retry_message_id: envelope.messageId });
      }
      this.log.record({
        correlationId: envelope.correlationId, actor: envelope.producerId, eventType: 'message.accepted',
        details: {
          message_id: envelope.messageId, to: recipient, message_type: envelope.messageType, lane, state: 'SENT',
          retry_of: previous?.originalMessageId, lane_demoted_from: demoted ? 'PRIVILEGED' : undefined,
        },
      });
    });
    if (demoted) inbox.metrics.rejects.privileged_demoted = (inbox.metrics.rejects.privileged_demoted ?? 0) + 1;
    this.live.set(envelope.messageId, record);
    this.setState(record, 'SENT');
    observe(inbox.metrics.enqueueLatency, Math.max(0, this.clock.now() - (options.receivedAt ?? now)) / 1000);
    this.armTimers(record);
    inbox.queue.push(lane, record);
    this.dispatch(inbox);
    this.changed.fire({ agentId: recipient });
    return { accepted: true, messageId: envelope.messageId };
  }

  // ---------------------------------------------------------------- messages to the coordinator itself

  /** Lets a component take messages of `messageType` addressed to `coordinator` (e.g. HITL_INVOCATION). */
  handleAtCoordinator(messageType: string, handler: CoordinatorHandler): Disposable {
    this.coordinatorHandlers.set(messageType, handler);
    return { dispose: () => this.coordinatorHandlers.delete(messageType) };
  }

  /**
   * A message to the coordinator: the component's handler takes it in the same transaction as the message,
   * which is READ at once (the coordinator has it) and FULFILLED when the component replies.
   */
  private acceptAtCoordinator(envelope: Envelope, json: Record<string, unknown> | undefined, dedupKey: string,
    previous: DedupEntry | undefined, ctx: CallContext, now: number, expiresAt: number | null): SendResult {
    const handler = this.coordinatorHandlers.get(envelope.messageType)!;
    const record: MessageRecord = {
      envelope, recipientId: COORDINATOR_ID, dedupKey, tracked: true, lane: 'STANDARD', ackFor: '', acceptedAt: now,
      state: 'READ', errorCode: '', updatedAt: now, ackDeadline: null, expiresAt: null,
      delivery: 'done', deliverySeq: null, deliveredAt: now, leaseUntil: null, deliveryAttempts: 0,
      history: [{ at: now, event: 'accepted', detail: previous ? `retry of ${previous.originalMessageId}` : undefined }, { at: now, event: 'read', detail: 'taken by the coordinator' }],
    };
    const entry: DedupEntry = {
      producerId: envelope.producerId, key: dedupKey, originalMessageId: previous?.originalMessageId ?? envelope.messageId,
      latestMessageId: envelope.messageId, attempts: [...(previous?.attempts ?? []), envelope.messageId], status: 'in_progress',
      outcomeState: '', errorCode: '', result: null, cachedAt: now, expiresAt: now + this.options.dedupWindowMs,
    };
    // The message is written first, so that a component answering at once (an auto rule) finds it.
    const rollback = new Error('refused by the coordinator handler');
    let refusal: Refusal | undefined;
    const undo = () => {
      this.live.delete(envelope.messageId);
      if (previous) this.dedup.set(previous);
      else this.dedup.delete(OutcomeCache.key(entry.producerId, entry.key));
    };
    try {
      this.store.transaction(() => {
        this.repo.insertMessage(record);
        this.live.set(envelope.messageId, record);
        this.putDedup(entry);
        refusal = handler(envelope, json, ctx, expiresAt);
        if (refusal) throw rollback;
        this.log.record({
          correlationId: envelope.correlationId, actor: envelope.producerId, eventType: 'message.accepted',
          details: { message_id: envelope.messageId, to: COORDINATOR_ID, message_type: envelope.messageType, state: 'READ', retry_of: previous?.originalMessageId },
        });
      });
    } catch (err) {
      // Rolled back: memory must not keep what the store no longer has, whether refused or faulty.
      undo();
      if (err !== rollback) throw err;
    }
    if (refusal) return this.refuse(envelope, refusal.code, refusal.detail, ctx, refusal.extra ?? {});
    return { accepted: true, messageId: envelope.messageId };
  }

  /**
   * The coordinator's answer to a message addressed to it: the message becomes FULFILLED with `reply` as the
   * cached result (a retry with the same token gets it as DUPLICATE_DETECTED), and `reply` goes to the producer
   * as a persisted envelope correlated to the message. Call inside the component's transaction.
   */
  replyFromCoordinator(messageId: string, messageType: string, reply: Record<string, unknown>, ctx: CallContext): void {
    const record = this.message(messageId);
    if (!record || record.recipientId !== COORDINATOR_ID || isTerminal(record.state)) return;
    const now = this.clock.now();
    this.store.transaction(() => {
      const from = record.state;
      this.setState(record, 'FULFILLED');
      record.updatedAt = now;
      record.history.push({ at: now, event: 'fulfilled', detail: 'answered by the coordinator' });
      this.repo.updateMessage(record);
      this.transition(record, from, 'FULFILLED', ctx.correlationId, {});
      this.reconcileSuccess(record, { ackForMessageId: messageId, stage: 'FULFILLED', errorCode: '', note: '', raw: reply }, now, ctx);
      // A producer that has deregistered finds the answer in the outcome cache when it retries.
      if (this.registry.get(record.envelope.producerId)) {
        const envelope = this.coordinatorEnvelope(messageType, record.envelope.correlationId, reply);
        this.persistCoordinatorMessage(record.envelope.producerId, envelope, messageId, `${messageType} answering ${messageId}`, now);
      }
    });
    this.retire(record);
  }

  /** An ACKNOWLEDGEMENT from a recipient: moves the acknowledged message and forwards the ACK to its producer. */
  private acceptAck(envelope: Envelope, ack: AckPayload, target: MessageRecord, recipient: string, dedupKey: string,
    previous: DedupEntry | undefined, ctx: CallContext, now: number, options: SendOptions): SendResult {
    const forward: MessageRecord | undefined = recipient === COORDINATOR_ID ? undefined : {
      envelope, recipientId: recipient, dedupKey, tracked: false, lane: 'PRIVILEGED', ackFor: ack.ackForMessageId, acceptedAt: now,
      state: 'SENT', errorCode: '', updatedAt: now, ackDeadline: null, expiresAt: null,
      delivery: 'queued', deliverySeq: null, deliveredAt: null, leaseUntil: null, deliveryAttempts: 0,
      history: [{ at: now, event: 'accepted', detail: `ACK ${ack.stage} for ${ack.ackForMessageId}` }],
    };
    const entry: DedupEntry = {
      producerId: envelope.producerId, key: dedupKey, originalMessageId: previous?.originalMessageId ?? envelope.messageId,
      latestMessageId: envelope.messageId, attempts: [...(previous?.attempts ?? []), envelope.messageId], status: 'done',
      outcomeState: 'FULFILLED', errorCode: '', result: { forwarded_to: recipient }, cachedAt: now, expiresAt: now + this.options.dedupWindowMs,
    };
    this.store.transaction(() => {
      this.applyAck(target, ack, ctx, now);
      this.putDedup(entry);
      if (forward) {
        this.repo.insertMessage(forward);
        this.log.record({
          correlationId: envelope.correlationId, actor: envelope.producerId, eventType: 'message.accepted',
          details: { message_id: envelope.messageId, to: recipient, message_type: 'ACKNOWLEDGEMENT', ack_for: ack.ackForMessageId, ack_stage: ack.stage },
        });
      }
    });
    if (forward) {
      this.live.set(envelope.messageId, forward);
      const inbox = this.inbox(recipient);
      observe(inbox.metrics.enqueueLatency, Math.max(0, this.clock.now() - (options.receivedAt ?? now)) / 1000);
      inbox.queue.push(forward.lane, forward);
      this.dispatch(inbox);
    }
    this.dispatch(this.inbox(target.recipientId));
    return { accepted: true, messageId: envelope.messageId };
  }

  /** Applies one protocol ACK to the acknowledged message (RFC §11, §11.1). Runs inside a store transaction. */
  private applyAck(target: MessageRecord, ack: AckPayload, ctx: CallContext, now: number): void {
    const id = target.envelope.messageId;
    this.confirmDelivery(target, now, `protocol ACK ${ack.stage}`);
    const from = target.state;
    target.history.push({ at: now, event: `ack_${ack.stage.toLowerCase()}`, detail: ack.errorCode || undefined });
    if (!target.tracked) {
      target.updatedAt = now;
      this.repo.updateMessage(target);
      return;
    }
    if (isTerminal(from)) {
      // Rule 1 (TIMED_OUT) and rule 3 (other terminal states): recorded and logged, never changing the state.
      const timedOutAt = target.history.find((h) => h.event === 'timed_out')?.at;
      this.log.record({
        correlationId: target.envelope.correlationId, actor: 'router',
        eventType: from === 'TIMED_OUT' ? 'message.late_ack_after_timeout' : 'message.late_ack_ignored', level: 'WARN',
        details: {
          message_id: id, state: from, ack_stage: ack.stage,
          timed_out_at: timedOutAt === undefined ? undefined : isoUtc(timedOutAt), late_ack_at: isoUtc(now),
        },
      });
      target.updatedAt = now;
      this.repo.updateMessage(target);
      if (from === 'TIMED_OUT' && ack.stage === 'FULFILLED') this.reconcileSuccess(target, ack, now, ctx);
      return;
    }
    if (from === 'RETRYING') {
      // Rule 2: record the late ACK; cancel the retry if it has not been delivered, else track both.
      const entry = this.dedupEntry(target.envelope.producerId, target.dedupKey, now);
      const retry = entry && entry.latestMessageId !== id ? this.message(entry.latestMessageId) : undefined;
      const retryUndelivered = retry !== undefined && retry.delivery === 'queued' && retry.deliveryAttempts === 0 && !isTerminal(retry.state);
      this.log.record({
        correlationId: target.envelope.correlationId, actor: 'router', eventType: 'message.late_ack_while_retrying', level: 'WARN',
        details: {
          message_id: id, ack_stage: ack.stage, retry_message_id: retry?.envelope.messageId, late_ack_at: isoUtc(now),
          decision: retryUndelivered ? 'retry cancelled, original attempt continues' : 'both attempts tracked, deduplicated by token',
        },
      });
      if (retryUndelivered && retry && entry) {
        this.finish(retry, 'REJECTED', 'DUPLICATE_DETECTED', `cancelled: the original attempt ${id} was acknowledged late`, ctx, now, { dlq: false, nack: false, settleDedup: false });
        entry.latestMessageId = id;
        this.putDedup(entry);
      }
    }
    if (!advances(from === 'RETRYING' ? 'SENT' : from, ack.stage)) {
      this.log.record({
        correlationId: target.envelope.correlationId, actor: 'router', eventType: 'message.ack_stale', level: 'WARN',
        details: { message_id: id, state: from, ack_stage: ack.stage },
      });
      target.updatedAt = now;
      this.repo.updateMessage(target);
      return;
    }
    if (ack.stage === 'REJECTED' || ack.stage === 'FAILED') {
      this.finish(target, ack.stage, ack.errorCode || UNSPECIFIED_ERROR, ack.note || `the recipient answered ${ack.stage}`, ctx, now,
        { dlq: !RETRYABLE_CODES.has(ack.errorCode), nack: false, settleDedup: true });
      return;
    }
    const to = ack.stage as MessageState;
    this.setState(target, to);
    target.updatedAt = now;
    this.clearTimer(id, 'ack');
    this.clearTimer(id, 'ttl');
    target.ackDeadline = null;
    this.repo.updateMessage(target);
    this.transition(target, from, to, ctx.correlationId, {});
    if (to === 'FULFILLED') {
      this.reconcileSuccess(target, ack, now, ctx);
      this.retire(target);
    }
    this.changed.fire({ agentId: target.recipientId });
  }

  /** Rule 4: the outcome cache reflects the earliest successful completion of the operation. */
  private reconcileSuccess(target: MessageRecord, ack: AckPayload, now: number, ctx: CallContext): void {
    if (!target.dedupKey) return;
    const entry = this.dedupEntry(target.envelope.producerId, target.dedupKey, now);
    if (!entry || (entry.status === 'done' && entry.outcomeState === 'FULFILLED')) return;
    entry.status = 'done';
    entry.outcomeState = 'FULFILLED';
    entry.errorCode = '';
    entry.result = { ...ack.raw, fulfilled_message_id: target.envelope.messageId };
    entry.cachedAt = now;
    entry.expiresAt = now + this.options.dedupWindowMs;
    this.putDedup(entry);
    this.log.record({
      correlationId: target.envelope.correlationId, actor: 'router', eventType: 'dedup.outcome_cached',
      details: { producer_id: entry.producerId, key: entry.key, original_message_id: entry.originalMessageId, fulfilled_by: target.envelope.messageId },
    });
    this.settleSiblings(entry, now, ctx);
  }

  /** Once an operation is settled, attempts left RETRYING take their truthful terminal state. */
  private settleSiblings(entry: DedupEntry, now: number, ctx: CallContext): void {
    for (const id of entry.attempts) {
      const sibling = this.message(id);
      const revived = sibling !== undefined && entry.status === 'done' && !isTerminal(sibling.state) && sibling.state !== 'RETRYING'
        && sibling.history.some((h) => h.event === 'timed_out');
      if (sibling && (sibling.state === 'RETRYING' || revived)) {
        const from = sibling.state;
        this.setState(sibling, 'TIMED_OUT');
        sibling.updatedAt = now;
        sibling.history.push({ at: now, event: 'settled', detail: `operation settled as ${entry.outcomeState}` });
        this.repo.updateMessage(sibling);
        this.transition(sibling, from, 'TIMED_OUT', ctx.correlationId, { settled_as: entry.outcomeState });
        this.retire(sibling);
      }
    }
  }

  /**
   * Ends a message in an error state: off the queue, the producer told (NACK), the operation's cache updated,
   * and into the DLQ when the failure is not one a retry can mend.
   */
  private finish(record: MessageRecord, state: 'REJECTED' | 'FAILED' | 'TIMED_OUT', code: string, note: string, ctx: CallContext,
    now: number, how: { dlq: boolean; nack: boolean; settleDedup: boolean }): void {
    const from = record.state;
    this.setState(record, state);
    record.errorCode = code;
    record.updatedAt = now;
    record.ackDeadline = null;
    record.history.push({ at: now, event: state.toLowerCase(), detail: `${code}: ${note}` });
    if (record.delivery !== 'done') this.takeOffQueue(record);
    this.clearAllTimers(record.envelope.messageId);
    this.repo.updateMessage(record);
    this.transition(record, from, state, ctx.correlationId, { error_code: code, note });
    if (how.settleDedup && record.dedupKey && record.tracked) {
      const entry = this.dedupEntry(record.envelope.producerId, record.dedupKey, now);
      if (entry && !(entry.status === 'done' && entry.outcomeState === 'FULFILLED')) {
        entry.status = RETRYABLE_CODES.has(code) ? 'retryable' : 'done';
        entry.outcomeState = state;
        entry.errorCode = code;
        entry.result = { note };
        entry.cachedAt = now;
        entry.expiresAt = now + this.options.dedupWindowMs;
        this.putDedup(entry);
        this.settleSiblings(entry, now, ctx);
      }
    }
    if (how.nack && record.tracked && record.envelope.producerId !== COORDINATOR_ID) {
      this.persistNack(record, state, code, note, now);
    }
    if (how.dlq) this.deadLetter(record, note, now);
    this.retire(record);
    this.changed.fire({ agentId: record.recipientId });
  }

  /**
   * Refuses an admission. The reject is counted against the inbox it concerns (the recipient's for BUFFER_FULL,
   * else the producer's); refusals from unregistered producers are counted under `(unregistered)`.
   */
  private refuse(envelope: Envelope, code: ErrorCode, detail: string, ctx: CallContext, extra: Record<string, unknown>, inboxId?: string): SendResult {
    const reason = `${code}: ${detail}`;
    const producer = this.registry.get(envelope.producerId ?? '');
    const rejects = this.inbox(inboxId ?? producer?.descriptor.agentId ?? '(unregistered)').metrics.rejects;
    rejects[code] = (rejects[code] ?? 0) + 1;
    this.log.record({
      correlationId: ctx.correlationId, actor: 'router', eventType: 'message.refused', level: 'WARN',
      details: { message_id: String(envelope.messageId ?? '').slice(0, 64), producer_id: String(envelope.producerId ?? '').slice(0, 128), error_code: code, reason: detail.slice(0, 500) },
    });
    // A NACK goes to the sender's stream when it has one (not persisted: the answer already carries the refusal).
    if (producer) {
      const inbox = this.inboxes.get(producer.descriptor.agentId);
      if (inbox?.sink) {
        inbox.metrics.nacks[code] = (inbox.metrics.nacks[code] ?? 0) + 1;
        const stage = code === 'DUPLICATE_DETECTED' && extra.original_status === 'FULFILLED' ? 'FULFILLED' : 'REJECTED';
        this.sendEphemeral(inbox, 'ACKNOWLEDGEMENT', envelope.correlationId || ctx.correlationId,
          { ...nackPayload(String(envelope.messageId ?? ''), 'REJECTED', code, detail), ack_stage: stage, status: code, ...extra });
      }
    }
    return { accepted: false, code, reason };
  }

  // ---------------------------------------------------------------- delivery

  /**
   * Opens an agent's inbox stream. A newer stream replaces an older one. With `resumeAfter`, deliveries up to
   * that seq count as processed; anything else not yet confirmed is delivered again.
   */
  attach(agentId: string, sink: InboxSink, ctx: CallContext, resumeAfter?: number): Disposable {
    if (!this.registry.get(agentId)) throw new StreamRefusal('not_registered', `agent '${agentId.slice(0, 128)}' is not registered; RegisterAgent first`);
    const inbox = this.inbox(agentId);
    const now = this.clock.now();
    if (resumeAfter !== undefined) {
      if (resumeAfter > inbox.lastSeq) {
        throw new StreamRefusal('resume_out_of_range', `sw4rm-resume-after ${resumeAfter} is beyond the last delivered seq ${inbox.lastSeq}`);
      }
      const oldest = this.repo.oldestDeliverySeq(agentId);
      if (resumeAfter < inbox.lastSeq && oldest > 0 && resumeAfter + 1 < oldest) {
        throw new StreamRefusal('resume_expired', `resume position ${resumeAfter} has expired: deliveries before seq ${oldest} are no longer kept ` +
          `(window ${this.options.resumeBacklog}). Recover by opening the stream without sw4rm-resume-after: every message not yet acknowledged is delivered again.`);
      }
    }
    if (inbox.sink) {
      inbox.sink.close('superseded', `a newer stream for ${agentId} replaced this one`);
      this.log.record({ correlationId: ctx.correlationId, actor: 'router', eventType: 'stream.superseded', level: 'WARN', details: { agent_id: agentId } });
    }
    const requeue: MessageRecord[] = [];
    this.store.transaction(() => {
      for (const [seq, record] of [...inbox.inflight.entries()].sort((a, b) => a[0] - b[0])) {
        inbox.inflight.delete(seq);
        this.clearTimer(record.envelope.messageId, 'lease');
        if (resumeAfter !== undefined && seq <= resumeAfter) {
          this.confirmDelivery(record, now, `resumed after seq ${resumeAfter}`);
          this.repo.updateMessage(record);
          if (!record.tracked) this.retire(record);
        } else {
          record.delivery = 'queued';
          record.leaseUntil = null;
          record.history.push({ at: now, event: 'redelivery_scheduled', detail: 'new stream' });
          this.repo.updateMessage(record);
          requeue.push(record);
        }
      }
      this.log.record({
        correlationId: ctx.correlationId, actor: agentId, eventType: 'stream.opened',
        details: { agent_id: agentId, resume_after: resumeAfter, redeliver: requeue.length, queued: inbox.queue.size },
      });
    });
    for (const record of requeue.reverse()) inbox.queue.unshift(record.lane, record);
    inbox.sink = sink;
    this.registry.recordLiveness(agentId, ctx);
    this.dispatch(inbox);
    this.changed.fire({ agentId });
    return {
      dispose: () => {
        if (inbox.sink !== sink) return;
        inbox.sink = undefined;
        if (!this.disposed) {
          this.log.record({ correlationId: ctx.correlationId, actor: agentId, eventType: 'stream.closed', details: { agent_id: agentId, unconfirmed: inbox.inflight.size } });
          this.changed.fire({ agentId });
        }
      },
    };
  }

  /** AckDelivery: confirms (or permanently fails) the delivery with this seq. Answers whether it was recorded. */
  ackDelivery(agentId: string, seq: number, messageId: string, outcome: 'DELIVERED' | 'PERMANENT_FAILURE', ctx: CallContext): boolean {
    const inbox = this.inboxes.get(agentId);
    const id = inbox?.inflight.get(seq)?.envelope.messageId ?? this.repo.deliveryAt(agentId, seq);
    if (!id || (messageId && messageId !== id)) return false;
    const record = this.message(id);
    if (!record) return true;
    if (outcome === 'DELIVERED' && (record.delivery === 'done' || record.deliverySeq !== seq)) return false;
    const now = this.clock.now();
    this.store.transaction(() => {
      if (outcome === 'PERMANENT_FAILURE' && !isTerminal(record.state)) {
        this.confirmDelivery(record, now, 'AckDelivery PERMANENT_FAILURE');
        this.finish(record, 'FAILED', UNSPECIFIED_ERROR, `${agentId} reported a permanent delivery failure (AckDelivery PERMANENT_FAILURE)`, ctx, now,
          { dlq: true, nack: true, settleDedup: true });
        return;
      }
      if (record.delivery === 'inflight' && record.deliverySeq === seq) {
        this.confirmDelivery(record, now, 'AckDelivery');
        this.repo.updateMessage(record);
        if (!record.tracked) this.retire(record);
      }
    });
    this.dispatch(inbox ?? this.inbox(agentId));
    this.changed.fire({ agentId });
    return true;
  }

  private dispatch(inbox: Inbox): void {
    if (!inbox.sink || this.disposed) return;
    const batch: MessageRecord[] = [];
    let trackedInflight = inbox.inflight.tracked;
    const now = this.clock.now();
    const failed: MessageRecord[] = [];
    while (inbox.queue.size > 0) {
      const next = inbox.queue.shift();
      if (!next) break;
      const record = next.item;
      if (record.delivery !== 'queued' || (record.tracked && isTerminal(record.state))) continue;
      if (record.tracked && trackedInflight >= this.options.deliveryWindow) {
        inbox.queue.unshift(next.lane, record);
        break;
      }
      if (record.deliveryAttempts >= this.options.maxDeliveryAttempts) {
        if (record.tracked) failed.push(record);
        else {
          // An ACK or NACK written to the stream this often without confirmation has reached the agent.
          record.history.push({ at: now, event: 'delivery_unconfirmed', detail: `written ${record.deliveryAttempts} times` });
          this.confirmDelivery(record, now, 'delivery attempts exhausted');
          this.repo.updateMessage(record);
          this.retire(record);
        }
        continue;
      }
      if (record.tracked) trackedInflight++;
      batch.push(record);
    }
    if (batch.length === 0 && failed.length === 0) return;
    const ctx = { correlationId: `dispatch:${inbox.agentId}` };
    const firstSeq = inbox.lastSeq + 1;
    this.store.transaction(() => {
      for (const record of failed) {
        this.finish(record, 'FAILED', 'AGENT_UNAVAILABLE', `delivery to ${inbox.agentId} not confirmed after ${record.deliveryAttempts} attempts`, ctx, now,
          { dlq: true, nack: true, settleDedup: true });
      }
      for (const record of batch) {
        const seq = ++inbox.lastSeq;
        record.delivery = 'inflight';
        record.deliverySeq = seq;
        record.deliveredAt = now;
        record.leaseUntil = now + this.options.leaseMs;
        record.deliveryAttempts++;
        record.updatedAt = now;
        record.history.push({ at: now, event: 'delivered', detail: `seq ${seq}, attempt ${record.deliveryAttempts}` });
        this.repo.updateMessage(record);
        this.repo.recordDelivery(inbox.agentId, seq, record.envelope.messageId, now);
        inbox.inflight.set(seq, record);
        this.log.record({
          correlationId: record.envelope.correlationId, actor: 'router', eventType: 'message.delivered',
          details: {
            message_id: record.envelope.messageId, to: inbox.agentId, seq, attempt: record.deliveryAttempts, lane: record.lane,
            urgent: record.lane === 'PRIVILEGED' ? true : undefined,
          },
        });
      }
      this.pruneDeliveriesIfDue(inbox, firstSeq);
    });
    const sink = inbox.sink;
    const items: Array<[number, Envelope]> = [];
    for (const record of batch) {
      inbox.metrics.delivered++;
      inbox.metrics.lastDeliveryAt = now;
      if (record.lane === 'PRIVILEGED' && record.tracked) inbox.metrics.urgentDispatches++;
      observe(inbox.metrics.dequeueLatency, Math.max(0, now - record.acceptedAt) / 1000);
      if (record.tracked) this.armLease(record);
      items.push([record.deliverySeq!, record.envelope]);
    }
    // Nothing reaches a stream before it is durable: a crash can never show an agent a message the store lost.
    if (sink && items.length) this.store.afterCommit(() => { for (const [seq, envelope] of items) sink.deliver(seq, envelope); });
    this.boundUnconfirmed(inbox, now);
    this.changed.fire({ agentId: inbox.agentId });
  }

  private pruneDeliveriesIfDue(inbox: Inbox, firstSeq: number): void {
    if (Math.floor(inbox.lastSeq / 100) > Math.floor((firstSeq - 1) / 100)) this.repo.pruneDeliveries(inbox.agentId, this.options.resumeBacklog);
  }

  /**
   * Forwarded ACKs and NACKs are confirmed only by AckDelivery, which not every client calls. They are kept
   * for redelivery on the next stream, but at most MAX_UNCONFIRMED_UNTRACKED per agent: older ones written to a
   * live stream count as delivered (recorded as unconfirmed), so memory and redelivery stay bounded.
   */
  private boundUnconfirmed(inbox: Inbox, now: number): void {
    const untracked = inbox.inflight.untracked;
    if (untracked <= MAX_UNCONFIRMED_UNTRACKED) return;
    let excess = untracked - MAX_UNCONFIRMED_UNTRACKED;
    this.store.transaction(() => {
      // Oldest first; confirming removes the record from the map, which iteration tolerates.
      for (const record of inbox.inflight.values()) {
        if (excess === 0) break;
        if (record.tracked) continue;
        record.history.push({ at: now, event: 'delivery_unconfirmed', detail: `written to a live stream; more than ${MAX_UNCONFIRMED_UNTRACKED} unconfirmed` });
        this.confirmDelivery(record, now, 'bounded without AckDelivery');
        this.repo.updateMessage(record);
        this.retire(record);
        excess--;
      }
    });
  }

  private confirmDelivery(record: MessageRecord, now: number, how: string): void {
    if (record.delivery === 'done') return;
    if (record.deliverySeq !== null) this.inboxes.get(record.recipientId)?.inflight.delete(record.deliverySeq);
    if (record.delivery === 'queued') this.takeOffQueue(record);
    record.delivery = 'done';
    record.leaseUntil = null;
    record.updatedAt = now;
    record.history.push({ at: now, event: 'delivery_confirmed', detail: how });
    this.clearTimer(record.envelope.messageId, 'lease');
    if (!record.tracked && record.state === 'SENT') this.setState(record, 'FULFILLED');
  }

  private takeOffQueue(record: MessageRecord): void {
    const inbox = this.inboxes.get(record.recipientId);
    if (!inbox) return;
    inbox.queue.remove((item) => item === record);
    if (record.deliverySeq !== null && inbox.inflight.get(record.deliverySeq) === record) inbox.inflight.delete(record.deliverySeq);
    record.delivery = 'done';
  }

  // ---------------------------------------------------------------- timers

  private armTimers(record: MessageRecord): void {
    const id = record.envelope.messageId;
    const now = this.clock.now();
    if (record.tracked && record.ackDeadline !== null && NOT_READ.has(record.state) && record.state === 'SENT') {
      this.setTimer(id, 'ack', record.ackDeadline - now, () => this.ackTimedOut(id));
    }
    if (record.tracked && record.expiresAt !== null && record.state === 'SENT') {
      this.setTimer(id, 'ttl', record.expiresAt - now, () => this.ttlExpired(id));
    }
  }

  private armLease(record: MessageRecord): void {
    const id = record.envelope.messageId;
    this.setTimer(id, 'lease', this.options.leaseMs, () => this.leaseExpired(id));
  }

  private ackTimedOut(id: string): void {
    const record = this.live.get(id);
    if (!record || record.state !== 'SENT') return;
    const now = this.clock.now();
    this.store.transaction(() => {
      this.finish(record, 'TIMED_OUT', 'ACK_TIMEOUT', `not RECEIVED within ${this.options.ackTimeoutMs} ms`, { correlationId: record.envelope.correlationId }, now,
        { dlq: false, nack: true, settleDedup: true });
    });
    this.dispatch(this.inbox(record.recipientId));
  }

  private ttlExpired(id: string): void {
    const record = this.live.get(id);
    if (!record || record.state !== 'SENT') return;
    const now = this.clock.now();
    this.store.transaction(() => {
      this.finish(record, 'FAILED', 'TTL_EXPIRED', `ttl_ms ${record.envelope.ttlMs} passed before it was received`, { correlationId: record.envelope.correlationId }, now,
        { dlq: true, nack: true, settleDedup: true });
    });
    this.dispatch(this.inbox(record.recipientId));
  }

  private leaseExpired(id: string): void {
    const record = this.live.get(id);
    if (!record || record.delivery !== 'inflight') return;
    const inbox = this.inbox(record.recipientId);
    const now = this.clock.now();
    if (record.deliverySeq !== null) inbox.inflight.delete(record.deliverySeq);
    record.delivery = 'queued';
    record.leaseUntil = null;
    record.history.push({ at: now, event: 'lease_expired', detail: `seq ${record.deliverySeq} not confirmed within ${this.options.leaseMs} ms` });
    this.store.transaction(() => {
      this.repo.updateMessage(record);
      this.log.record({
        correlationId: record.envelope.correlationId, actor: 'router', eventType: 'message.redelivery_scheduled', level: 'WARN',
        details: { message_id: id, to: record.recipientId, seq: record.deliverySeq, attempts: record.deliveryAttempts },
      });
    });
    inbox.queue.unshift(record.lane, record);
    this.dispatch(inbox);
  }

  private setTimer(id: string, kind: keyof Timers, ms: number, fn: () => void): void {
    const timers = this.timers.get(id) ?? {};
    timers[kind]?.dispose();
    timers[kind] = this.clock.setTimer(Math.max(0, ms), () => {
      const current = this.timers.get(id);
      if (current) delete current[kind];
      if (!this.disposed) this.safely(fn);
    });
    this.timers.set(id, timers);
  }

  private clearTimer(id: string, kind: keyof Timers): void {
    const timers = this.timers.get(id);
    timers?.[kind]?.dispose();
    if (timers) delete timers[kind];
  }

  private clearAllTimers(id: string): void {
    const timers = this.timers.get(id);
    if (!timers) return;
    timers.ack?.dispose();
    timers.ttl?.dispose();
    timers.lease?.dispose();
    this.timers.delete(id);
  }

  /** Timer work must never take the coordinator down; a fault is logged as INTERNAL_ERROR. */
  private safely(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.internalError('router', this.ids.uuid(), err);
    }
  }

  // ---------------------------------------------------------------- coordinator-originated messages

  /** A NACK for an accepted message that failed later: persisted, so the producer learns of it even offline. */
  private persistNack(record: MessageRecord, stage: 'REJECTED' | 'FAILED' | 'TIMED_OUT', code: string, note: string, now: number): void {
    const producerId = record.envelope.producerId;
    if (!this.registry.get(producerId)) return;
    const envelope = this.coordinatorEnvelope('ACKNOWLEDGEMENT', record.envelope.correlationId, nackPayload(record.envelope.messageId, stage, code, note));
    const inbox = this.persistCoordinatorMessage(producerId, envelope, record.envelope.messageId, `NACK ${code} for ${record.envelope.messageId}`, now);
    inbox.metrics.nacks[code] = (inbox.metrics.nacks[code] ?? 0) + 1;
  }

  /** A coordinator-originated envelope that must reach `recipientId` even across a restart (untracked, leased). */
  private persistCoordinatorMessage(recipientId: string, envelope: Envelope, ackFor: string, detail: string, now: number): Inbox {
    const message: MessageRecord = {
      envelope, recipientId, dedupKey: '', tracked: false, lane: 'PRIVILEGED', ackFor, acceptedAt: now,
      state: 'SENT', errorCode: '', updatedAt: now, ackDeadline: null, expiresAt: null,
      delivery: 'queued', deliverySeq: null, deliveredAt: null, leaseUntil: null, deliveryAttempts: 0,
      history: [{ at: now, event: 'accepted', detail }],
    };
    this.repo.insertMessage(message);
    this.live.set(envelope.messageId, message);
    const inbox = this.inbox(recipientId);
    inbox.queue.push('PRIVILEGED', message);
    queueMicrotask(() => this.dispatch(inbox));
    return inbox;
  }

  /** Live-only envelopes (heartbeats, join/leave notices, admission NACKs): written to an open stream, not stored. */
  private sendEphemeral(inbox: Inbox, messageType: 'HEARTBEAT' | 'NOTIFICATION' | 'ACKNOWLEDGEMENT', correlationId: string, payload: Record<string, unknown>): void {
    if (!inbox.sink) return;
    const envelope = this.coordinatorEnvelope(messageType, correlationId, payload);
    const seq = ++inbox.lastSeq;
    this.repo.recordDelivery(inbox.agentId, seq, envelope.messageId, this.clock.now());
    this.pruneDeliveriesIfDue(inbox, seq);
    this.ephemeral.set(envelope.messageId, inbox.agentId);
    if (this.ephemeral.size > 10_000) this.ephemeral.delete(this.ephemeral.keys().next().value!);
    // Through the commit queue too, so that seqs reach the stream in order.
    const sink = inbox.sink;
    this.store.afterCommit(() => sink.deliver(seq, envelope));
  }

  private coordinatorEnvelope(messageType: string, correlationId: string, payload: Record<string, unknown>): Envelope {
    const bytes = Buffer.from(JSON.stringify(payload));
    return {
      messageId: this.ids.uuid(), idempotencyToken: '', producerId: COORDINATOR_ID, correlationId: correlationId || this.ids.uuid(),
      sequenceNumber: '0', retryCount: 0, messageType, contentType: 'application/json', contentLength: String(bytes.byteLength),
      repoId: '', worktreeId: '', hlcTimestamp: '', ttlMs: 0, timestampMs: this.clock.now(), payload: bytes, parentCorrelationId: '',
    };
  }

  private broadcast(event: 'agent.joined' | 'agent.left', agentId: string, details: Record<string, unknown>): void {
    for (const inbox of this.inboxes.values()) {
      if (inbox.agentId !== agentId && inbox.sink) this.sendEphemeral(inbox, 'NOTIFICATION', this.ids.uuid(), { event, agent_id: agentId, ...details });
    }
  }

  private scheduleHeartbeat(): void {
    if (this.options.heartbeatIntervalMs <= 0 || this.disposed) return;
    this.heartbeatTimer = this.clock.setTimer(this.options.heartbeatIntervalMs, () => {
      this.safely(() => {
        const sentAt = isoUtc(this.clock.now());
        for (const inbox of this.inboxes.values()) {
          if (inbox.sink) this.sendEphemeral(inbox, 'HEARTBEAT', this.ids.uuid(), { kind: 'heartbeat', agent_id: inbox.agentId, sent_at: sentAt });
        }
      });
      this.scheduleHeartbeat();
    });
  }

  /** A pruning job (retention.ts) whose failures are logged like every other timer's. */
  private pruningTimer(intervalMs: number, run: (now: number) => boolean): Disposable {
    return schedulePruning(this.clock, intervalMs, () => {
      let more = false;
      this.safely(() => { more = run(this.clock.now()); });
      return more;
    });
  }

  /** Forgets expired outcomes (one bounded batch) and applies the dead-letter retention; answers whether more expired outcomes wait. */
  private housekeeping(now: number): boolean {
    const expired = this.store.transaction(() => {
      const result = this.repo.pruneDedup(now, DEDUP_PRUNE_BATCH);
      if (result.deleted > 0) {
        this.log.record({
          correlationId: this.ids.uuid(), actor: 'router', eventType: 'dedup.outcomes_expired',
          details: { entries: result.deleted, expired_before: isoUtc(now), window_seconds: this.options.dedupWindowMs / 1000 },
        });
      }
      return result;
    });
    this.dedup.prune(now);
    if (this.repo.pruneDeadLetters(this.options.dlqMaxEntries, now - this.options.dlqRetentionMs) > 0) this.deadLettersChanged.fire({ kind: 'pruned' });
    return expired.more;
  }

  /** Retention of finished messages (RouterOptions.messageRetentionMs), one bounded run; answers whether more wait. */
  private pruneMessages(now: number): boolean {
    const retentionMs = Math.max(this.options.messageRetentionMs, this.options.dedupWindowMs);
    const finishedBefore = now - retentionMs;
    return this.store.transaction(() => {
      const result = this.repo.pruneMessages(finishedBefore, RETENTION_SCAN_PER_RUN);
      if (result.deleted > 0) {
        this.log.record({
          correlationId: this.ids.uuid(), actor: 'router', eventType: 'router.messages_pruned',
          details: { messages: result.deleted, finished_before: isoUtc(finishedBefore), retention_hours: retentionMs / 3_600_000 },
        });
      }
      return result.more;
    });
  }

  // ---------------------------------------------------------------- agents leaving

  private agentLeft(agentId: string, reason: string): void {
    const inbox = this.inboxes.get(agentId);
    const now = this.clock.now();
    const ctx = { correlationId: `left:${agentId}` };
    inbox?.sink?.close('deregistered', `${agentId} deregistered: ${reason}`);
    if (inbox) inbox.sink = undefined;
    const stranded = [...this.live.values()].filter((m) => m.recipientId === agentId && (m.delivery !== 'done' || (m.tracked && !isTerminal(m.state) && m.state !== 'RETRYING')));
    this.store.transaction(() => {
      for (const record of stranded) {
        this.finish(record, 'FAILED', 'AGENT_UNAVAILABLE', `${agentId} deregistered before the message was done (${reason})`, ctx, now,
          { dlq: record.tracked, nack: record.tracked, settleDedup: true });
      }
    });
    this.broadcast('agent.left', agentId, { reason });
  }

  // ---------------------------------------------------------------- dead letters

  private deadLetter(record: MessageRecord, reason: string, now: number): void {
    const e = record.envelope;
    const id = this.repo.addDeadLetter({
      messageId: e.messageId, producerId: e.producerId, recipientId: record.recipientId, correlationId: e.correlationId,
      idempotencyToken: e.idempotencyToken, messageType: e.messageType, contentType: e.contentType, size: e.payload.byteLength,
      finalState: record.state, errorCode: record.errorCode, reason, attempts: record.history,
      route: { producer: e.producerId, recipient: record.recipientId, lane: record.lane, hops: ['router'], delivery_attempts: record.deliveryAttempts },
      createdAt: record.acceptedAt, failedAt: now, excerpt: payloadExcerpt(e.payload),
    }, e.payload, e);
    this.log.record({
      correlationId: e.correlationId, actor: 'router', eventType: 'message.dead_lettered', level: 'WARN',
      details: { message_id: e.messageId, error_code: record.errorCode, reason },
    });
    // Announced once the surrounding transaction has committed.
    queueMicrotask(() => this.deadLettersChanged.fire({ kind: 'added', id }));
  }

  deadLetters(filter?: DeadLetterFilter): DeadLetter[] {
    return this.repo.deadLetters(filter);
  }

  deadLetterCount(): number {
    return this.repo.deadLetterCount();
  }

  /** Sends a dead letter again as a new attempt (new message_id, same token, retry_count + 1). */
  requeue(id: number, ctx: CallContext): SendResult {
    const found = this.repo.deadLetter(id);
    if (!found) return { accepted: false, code: 'VALIDATION_ERROR', reason: `VALIDATION_ERROR: no dead letter ${id}` };
    if (found.letter.requeuedAt !== null) {
      return { accepted: false, code: 'DUPLICATE_DETECTED', reason: `DUPLICATE_DETECTED: dead letter ${id} was already requeued as ${found.letter.requeuedAs}` };
    }
    const original = found.envelope;
    if (!this.registry.get(original.producerId)) {
      return { accepted: false, code: 'PERMISSION_DENIED', reason: `PERMISSION_DENIED: the producer ${original.producerId} is no longer registered` };
    }
    // A requeue is a retry of the same logical operation: new message_id, same token (or sequence number).
    const envelope: Envelope = { ...original, messageId: this.ids.uuid(), retryCount: original.retryCount + 1 };
    // The operator's requeue overrides the cached failure of the operation (not a success, nor one under way).
    const entry = this.dedupEntry(original.producerId, original.idempotencyToken ? `t:${original.idempotencyToken}` : `s:${original.sequenceNumber}`, this.clock.now());
    const overridden = entry !== undefined && entry.status === 'done' && entry.outcomeState !== 'FULFILLED';
    if (overridden) {
      entry.status = 'retryable';
      this.putDedup(entry);
    }
    const result = this.send(envelope, ctx, { to: found.letter.recipientId });
    if (!result.accepted && overridden && entry.status === 'retryable') {
      entry.status = 'done';
      this.putDedup(entry);
    }
    if (result.accepted) {
      this.store.transaction(() => {
        this.repo.markRequeued(id, this.clock.now(), envelope.messageId);
        this.log.record({ correlationId: ctx.correlationId, actor: 'operator', eventType: 'dlq.requeued', details: { dead_letter: id, original_message_id: original.messageId, new_message_id: envelope.messageId } });
      });
      this.deadLettersChanged.fire({ kind: 'requeued', id });
    }
    return result;
  }

  /** A diagnostic bundle (RFC §21.1) of every dead letter matching `filter` (requeued ones included unless excluded). */
  exportDeadLetters(filter?: DeadLetterFilter): Record<string, unknown> {
    const entries = this.repo.deadLetters({ ...filter, includeRequeued: filter?.includeRequeued ?? true, limit: filter?.limit ?? Number.MAX_SAFE_INTEGER });
    return { exported_at: isoUtc(this.clock.now()), filter: filter ?? {}, total: entries.length, entries };
  }

  // ---------------------------------------------------------------- queries

  /** A message by id, from memory or the store. */
  message(messageId: string): MessageRecord | undefined {
    return this.live.get(messageId) ?? this.repo.getMessage(messageId);
  }

  stateCounts(): Record<string, number> {
    return this.repo.countByState();
  }

  /** An agent's inbox counts; zeros for an agent that has none yet. Reads only. */
  inboxStats(agentId: string): InboxStats {
    const inbox = this.inboxes.get(agentId);
    if (!inbox) {
      return { agentId, queueDepth: 0, capacity: this.options.capacity, inFlight: 0, queued: 0, streaming: false, lastDeliveryAt: null };
    }
    return {
      agentId, queueDepth: inbox.notRead.size, capacity: this.options.capacity, inFlight: inbox.inflight.size, queued: inbox.queue.size,
      streaming: inbox.sink !== undefined, lastDeliveryAt: inbox.metrics.lastDeliveryAt,
    };
  }

  metrics(): AgentRouterMetrics[] {
    const now = this.clock.now();
    return [...this.inboxes.values()].map((inbox) => {
      let oldest = now;
      for (const record of this.live.values()) {
        if (record.recipientId === inbox.agentId && record.tracked && NOT_READ.has(record.state)) oldest = Math.min(oldest, record.acceptedAt);
      }
      return { ...inbox.metrics, queueDepth: inbox.notRead.size, inFlight: inbox.inflight.size, oldestEnqueuedAgeSeconds: (now - oldest) / 1000 };
    });
  }

  metricsText(): string {
    return metricsText(this.metrics());
  }

  /** Ends every inbox stream (the server drains before the coordinator stops). */
  closeStreams(detail: string): void {
    for (const inbox of this.inboxes.values()) {
      inbox.sink?.close('shutdown', detail);
      inbox.sink = undefined;
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const subscription of this.subscriptions) subscription.dispose();
    this.heartbeatTimer?.dispose();
    this.housekeepingTimer.dispose();
    this.retentionTimer.dispose();
    for (const id of [...this.timers.keys()]) this.clearAllTimers(id);
    for (const inbox of this.inboxes.values()) {
      inbox.sink?.close('shutdown', 'the coordinator is stopping');
      inbox.sink = undefined;
    }
    this.changed.dispose();
    this.deadLettersChanged.dispose();
  }

  // ---------------------------------------------------------------- internals

  private inbox(agentId: string): Inbox {
    let inbox = this.inboxes.get(agentId);
    if (!inbox) {
      inbox = {
        agentId, queue: new LaneQueues<MessageRecord>(this.options.lanes.weights), inflight: new Inflight(), sink: undefined,
        lastSeq: this.repo.lastSeq(agentId), notRead: new Set(), metrics: emptyMetrics(agentId, this.options.capacity),
      };
      this.inboxes.set(agentId, inbox);
    }
    return inbox;
  }

  private dedupEntry(producerId: string, key: string, now: number): DedupEntry | undefined {
    let entry = this.dedup.get(OutcomeCache.key(producerId, key));
    if (!entry) {
      entry = this.repo.getDedup(producerId, key);
      if (entry) this.dedup.set(entry);
    }
    if (entry && entry.status !== 'in_progress' && entry.expiresAt < now) return undefined;
    return entry;
  }

  private putDedup(entry: DedupEntry): void {
    this.dedup.set(entry);
    this.repo.putDedup(entry);
  }

  /** Every lifecycle change goes through here, so the capacity count always matches the states. */
  private setState(record: MessageRecord, state: MessageState): void {
    record.state = state;
    const notRead = this.inbox(record.recipientId).notRead;
    if (record.tracked && NOT_READ.has(state)) notRead.add(record.envelope.messageId);
    else notRead.delete(record.envelope.messageId);
  }

  private transition(record: MessageRecord, from: MessageState, to: MessageState, correlationId: string, details: Record<string, unknown>): void {
    this.log.record({
      correlationId: record.envelope.correlationId || correlationId, actor: 'router', eventType: 'message.state_changed',
      details: { message_id: record.envelope.messageId, from, to, ...details },
    });
  }

  /** A message that is finished with leaves memory; the store keeps it. */
  private retire(record: MessageRecord): void {
    const terminal = record.tracked ? isTerminal(record.state) : record.state !== 'SENT';
    if (terminal && record.delivery === 'done') {
      this.live.delete(record.envelope.messageId);
      this.clearAllTimers(record.envelope.messageId);
    }
  }

  /** After a restart: every message not finished with is back in its inbox, with its deadlines. */
  private recover(): void {
    const records = this.repo.liveMessages();
    this.store.transaction(() => {
      for (const record of records) {
        this.live.set(record.envelope.messageId, record);
        const inbox = this.inbox(record.recipientId);
        this.setState(record, record.state);
        if (record.delivery === 'inflight' && record.deliverySeq !== null) inbox.inflight.set(record.deliverySeq, record);
        else if (record.delivery === 'queued') inbox.queue.push(record.lane, record);
      }
      if (records.length) {
        this.log.record({ correlationId: this.ids.uuid(), actor: 'router', eventType: 'router.recovered', details: { messages: records.length } });
      }
    });
    for (const record of records) {
      this.armTimers(record);
      if (record.tracked && record.delivery === 'inflight') this.armLease(record);
    }
  }
}
