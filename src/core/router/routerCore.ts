import type { Clock } from '../clock';
import { Emitter } from '../events';
import type { IdSource } from '../ids';
import { Guard } from '../kernel/guard';
import type { EventLog } from '../log/eventLog';
import type { TransferredWork } from '../handoff/model';
import type { AgentDirectory } from '../registry/model';
import { AckLifecycle } from './ackLifecycle';
import { Admission } from './admission';
import { CoordinatorHandlers } from './coordinatorHandlers';
import { CoordinatorMessages } from './coordinatorMessages';
import { DeadLetters } from './deadLetters';
import { Deduplication, contentDigest } from './deduplication';
import { Delivery } from './delivery';
import type { Envelope } from './envelope';
import { Inflight, NOT_READ, type Inbox } from './inbox';
import { LaneQueues } from './lanes';
import { isTerminal, type MessageState } from './lifecycle';
import { LiveMessages, MemoryBudget, PAYLOAD_RELEASE_MIN_BYTES, payloadSize } from './memoryBudget';
import { emptyMetrics } from './metrics';
import type { MessageRecord, OutboxUpdate, RouterRepository, RouterStorage } from './model';
import type { RouterOptions } from './options';
import type { DeadLetterChange, RouterShared } from './parts';
import { StoreBudget } from './storeUsage';
import { PayloadFiles } from './payloadFiles';
import { Timeouts } from './timeouts';

export { PAYLOAD_RELEASE_MIN_BYTES };

/**
 * What the parts of the router share: the store, the log, the clock, the messages in memory, the inboxes, and
 * the parts themselves. The Router builds one; each part reaches the others through it, never through the Router.
 * A part takes it as the narrow interface of what it uses (its `…Core`, from parts.ts), never as RouterCore.
 */
export class RouterCore implements RouterShared {
  readonly repo: RouterRepository;
  /** Work the router does on its own runs through it: a fault is logged as router.internal_error (RouterShared.guard). Stopped when disposed. */
  readonly guard: Guard;
  /** What the router holds in memory against its budget (admission and delivery respect it). */
  readonly memory: MemoryBudget;
  /**
   * Messages not yet finished with, by id; a finished one leaves memory (`retire`) and stays in the store. Their
   * large payloads are in the store only (memoryBudget.ts).
   */
  readonly live: LiveMessages;
  readonly inboxes = new Map<string, Inbox>();
  /** Fires when an inbox's counts change. */
  readonly changed = new Emitter<{ agentId: string }>();
  /** Each state a tracked message produced by `coordinator` enters (CoordinatorOutbox.onDidUpdateOutbox), inside its transaction. */
  readonly outbox = new Emitter<OutboxUpdate>();
  /** Fires after a dead letter was added, requeued, or pruned by retention (the change is committed). */
  readonly deadLettersChanged = new Emitter<DeadLetterChange>();
  /** Deliveries of tracked messages (not ACKs, NACKs, replies, heartbeats or notices) to an inbox stream since this router started. */
  deliveredMessages = 0;
  disposed = false;

  readonly dedup: Deduplication;
  readonly admission: Admission;
  readonly handlers: CoordinatorHandlers;
  readonly acks: AckLifecycle;
  readonly delivery: Delivery;
  readonly timeouts: Timeouts;
  readonly coordinator: CoordinatorMessages;
  readonly deadLetters: DeadLetters;
  /** The store's size against its disk budget, estimated for admission. */
  readonly storeBudget: StoreBudget;
  /** The payload folder (RouterOptions.payloadDir); without one, every payload stays in SQLite. */
  readonly files: PayloadFiles | undefined;
  /** The handoff area's completed transfers (Router.guardTransferredWork): admission refuses their origins' sends about them. */
  transferredWork: TransferredWork | undefined;
  /** Recipients with their own ACK timeout (Router.setRecipientAckTimeout); empty for most coordinators. */
  readonly recipientAckTimeouts = new Map<string, number>();

  constructor(
    readonly store: RouterStorage,
    readonly registry: AgentDirectory,
    readonly log: EventLog,
    readonly clock: Clock,
    readonly ids: IdSource,
    readonly options: RouterOptions,
  ) {
    this.repo = store.router;
    this.guard = new Guard((context, err) => log.internalError('router', context || ids.uuid(), err));
    this.memory = new MemoryBudget(options.memoryBudgetBytes);
    this.live = new LiveMessages(this.memory);
    this.dedup = new Deduplication(this);
    this.admission = new Admission(this);
    this.handlers = new CoordinatorHandlers(this);
    this.acks = new AckLifecycle(this);
    this.delivery = new Delivery(this);
    this.timeouts = new Timeouts(this);
    this.coordinator = new CoordinatorMessages(this);
    this.deadLetters = new DeadLetters(this);
    this.storeBudget = new StoreBudget(this.repo, clock, options.storeBudgetBytes);
    this.files = options.payloadDir ? new PayloadFiles(options.payloadDir) : undefined;
    // A file whose last owner went is deleted once that transaction has committed (never before: a rollback keeps it).
    this.repo.onPayloadFileOrphaned = (fileId) =>
      store.afterCommit(() => {
        void this.unlinkFile(fileId);
      });
  }

  /** Deletes a payload file nobody references any more; a failure is logged (the sweep at the next start retries). */
  async unlinkFile(fileId: string): Promise<void> {
    try {
      await this.files?.unlink(fileId);
    } catch (err) {
      if (!this.disposed) this.log.internalError('router', `payload-file:${fileId}`, err);
    }
  }

  /** A message by id, from memory or the store. */
  message(messageId: string): MessageRecord | undefined {
    return this.live.get(messageId) ?? this.repo.getMessage(messageId);
  }

  /**
   * The ACK timeout of a message to `agentId` admitted now: its own (setRecipientAckTimeout) or the RFC's default.
   * One Map lookup on the hot path, none while no recipient has its own.
   */
  ackTimeoutOf(agentId: string): number {
    const own = this.recipientAckTimeouts;
    return own.size === 0 ? this.options.ackTimeoutMs : (own.get(agentId) ?? this.options.ackTimeoutMs);
  }

  /** An agent's inbox, made on first use. */
  inbox(agentId: string): Inbox {
    let inbox = this.inboxes.get(agentId);
    if (!inbox) {
      inbox = {
        agentId,
        queue: new LaneQueues<MessageRecord>(this.options.lanes.weights),
        inflight: new Inflight(this.memory),
        sink: undefined,
        window: undefined,
        lastSeq: this.repo.lastSeq(agentId),
        notRead: new Set(),
        metrics: emptyMetrics(agentId, this.options.capacity),
      };
      this.inboxes.set(agentId, inbox);
    }
    return inbox;
  }

  /** Every lifecycle change goes through here, so the capacity count always matches the states. */
  setState(record: MessageRecord, state: MessageState): void {
    record.state = state;
    const notRead = this.inbox(record.recipientId).notRead;
    if (record.tracked && NOT_READ.has(state)) notRead.add(record.envelope.messageId);
    else notRead.delete(record.envelope.messageId);
  }

  transition(
    record: MessageRecord,
    from: MessageState,
    to: MessageState,
    correlationId: string,
    details: Record<string, unknown>,
  ): void {
    this.log.record({
      correlationId: record.envelope.correlationId || correlationId,
      actor: 'router',
      eventType: 'message.state_changed',
      details: { message_id: record.envelope.messageId, from, to, ...details },
    });
  }

  /**
   * A message that is finished with leaves memory; the store keeps its record and history for the retention but
   * releases its payload bytes from PAYLOAD_RELEASE_MIN_BYTES (a dead letter has its own copy). Call inside the transaction of its final state.
   * An untokened message keeps its content digest instead, for the reused-sequence rule (deduplication.ts).
   */
  retire(record: MessageRecord): void {
    const terminal = record.tracked ? isTerminal(record.state) : record.state !== 'SENT';
    if (terminal && record.delivery === 'done') {
      this.live.delete(record.envelope.messageId);
      this.timeouts.clearAll(record.envelope.messageId);
      if (!record.payloadReleased && payloadSize(record) >= PAYLOAD_RELEASE_MIN_BYTES) {
        const e = record.envelope;
        const untokened = record.dedupKey !== '' && !e.idempotencyToken;
        // A file-backed payload's digest was computed off the event loop when it was admitted (Router.submit).
        const digest = !untokened
          ? undefined
          : record.payloadFile
            ? record.payloadFile.digest
            : contentDigest(this.envelopeOf(record));
        this.repo.releasePayload(record, digest);
      }
    }
  }

  /**
   * The message's envelope with its payload bytes: read back from the store when memory does not hold them
   * (`storedPayloadBytes`). For delivery, dead letters and content digests; the record keeps its empty payload.
   */
  envelopeOf(record: MessageRecord): Envelope {
    if (record.storedPayloadBytes === undefined) return record.envelope;
    if (record.payloadFile) {
      // A synchronous read: only for readers off the hot path (the reused-sequence comparison, the Messages detail).
      // Delivery reads file-backed payloads asynchronously (delivery.ts).
      if (!this.files)
        throw new Error(`the payload of ${record.envelope.messageId} is a file, and the router has no payload folder`);
      return { ...record.envelope, payload: this.files.readSync(record.payloadFile.fileId, record.payloadFile.bytes) };
    }
    const payload = this.repo.payload(record);
    if (payload === undefined || payload.byteLength !== record.storedPayloadBytes) {
      throw new Error(
        `the payload of ${record.envelope.messageId} (${record.storedPayloadBytes} bytes) is not in the store`,
      );
    }
    return { ...record.envelope, payload };
  }
}
