import type { CallContext } from '../context';
import type { Disposable, Event } from '../events';
import type { Envelope, Refusal } from './envelope';
import type { Lane } from './lanes';
import type { MessageState } from './lifecycle';
import type { PruneResult } from '../retention';
import type { Transactions } from '../store/store';
import type { PayloadFile } from './payloadFiles';

/** What other areas use of envelope.ts (it does not import this file). */
export { baseContentType, modalityAccepts, type Envelope, type Refusal } from './envelope';
/** What the session area uses to read and answer an agent's inbox as that agent (sessions/agentSide.ts). */
export { isTerminal, parseAck, type AckPayload } from './lifecycle';
export { ackPayload, agentEnvelope, derivedToken } from './agentEnvelope';

/** Where an agent's inbox goes while it streams. The gRPC adapter implements it (and read_inbox, and a session's driver). */
export interface InboxSink {
  deliver(seq: number, envelope: Envelope): void;
  /** Ends the stream: a newer stream replaced it, the agent left, or the coordinator stops. */
  close(reason: 'superseded' | 'deregistered' | 'shutdown', detail: string): void;
}

/** Where a message is on its way to the recipient's stream. */
export type DeliveryStatus = 'queued' | 'inflight' | 'done';

/** One step of a message's history, kept for the DLQ's attempt history and for audits. */
export interface HistoryEntry {
  readonly at: number;
  readonly event: string;
  readonly detail?: string;
}

/** A routed message as the router keeps it (and the store persists it). */
export interface MessageRecord {
  /** A payload of PAYLOAD_DETACH_MIN_BYTES or more is not held here once admitted (see `storedPayloadBytes`). */
  envelope: Envelope;
  readonly recipientId: string;
  /** Deduplication key within the producer: `t:<token>` or `s:<sequence_number>`; empty for coordinator messages. */
  readonly dedupKey: string;
  /** Tracked messages expect protocol ACKs and have an ACK timeout; forwarded ACKs and NACKs do not. */
  readonly tracked: boolean;
  readonly lane: Lane;
  /**
   * For ACKNOWLEDGEMENT envelopes: the message they acknowledge. For a fan-out copy (tracked): the producer's
   * message_id it copies, which the ACKs and NACKs forwarded to the producer name.
   */
  readonly ackFor: string;
  readonly acceptedAt: number;
  state: MessageState;
  errorCode: string;
  updatedAt: number;
  ackDeadline: number | null;
  expiresAt: number | null;
  delivery: DeliveryStatus;
  deliverySeq: number | null;
  deliveredAt: number | null;
  leaseUntil: number | null;
  deliveryAttempts: number;
  history: HistoryEntry[];
  /**
   * Set on a message read back from the store after it was finished with (terminal and delivered): its payload
   * bytes were released then (`envelope.payload` is empty); the record and its history stay for the retention.
   */
  readonly payloadReleased?: true;
  /** For a released payload of a message without an idempotency token: its content digest (deduplication.ts). */
  readonly contentDigest?: string;
  /**
   * Set when the payload's bytes are only in the store (memoryBudget.ts, `detachPayload`): `envelope.payload` is
   * empty in memory and this is its size; `RouterCore.envelopeOf` reads the bytes back when they are needed.
   */
  storedPayloadBytes?: number;
  /**
   * Set when the payload is a file in the payload folder (payloadFiles.ts), shared with the other owners of that file
   * (fan-out copies, its dead letter, a requeue); `storedPayloadBytes` is its size. Delivery reads it asynchronously.
   */
  payloadFile?: PayloadFile;
}

/** The outcome cache of one logical operation (RFC §11.2), per producer and token (or sequence number). */
export interface DedupEntry {
  readonly producerId: string;
  readonly key: string;
  readonly originalMessageId: string;
  latestMessageId: string;
  attempts: string[];
  /** in_progress: an attempt is under way; done: a terminal outcome is cached; retryable: a retry may run. */
  status: 'in_progress' | 'done' | 'retryable';
  outcomeState: MessageState | '';
  errorCode: string;
  /** The FULFILLED ACK payload (cached result) or the error details. */
  result: Record<string, unknown> | null;
  cachedAt: number;
  expiresAt: number;
}

/** A dead-lettered message with the diagnostic context of RFC §21.1. */
export interface DeadLetter {
  readonly id: number;
  readonly messageId: string;
  readonly producerId: string;
  readonly recipientId: string;
  readonly correlationId: string;
  readonly idempotencyToken: string;
  readonly messageType: string;
  readonly contentType: string;
  readonly size: number;
  readonly finalState: MessageState;
  readonly errorCode: string;
  readonly reason: string;
  readonly attempts: readonly HistoryEntry[];
  readonly route: Readonly<Record<string, unknown>>;
  readonly createdAt: number;
  readonly failedAt: number;
  readonly excerpt: string;
  readonly requeuedAt: number | null;
  readonly requeuedAs: string | null;
}

export interface DeadLetterFilter {
  readonly since?: number;
  readonly until?: number;
  readonly errorCode?: string;
  readonly recipientId?: string;
  readonly producerId?: string;
  readonly includeRequeued?: boolean;
  readonly limit?: number;
}

/** The router's durable state. Implemented by the SQLite store. */
export interface RouterRepository {
  insertMessage(record: MessageRecord): void;
  updateMessage(record: MessageRecord): void;
  getMessage(messageId: string): MessageRecord | undefined;
  /** Messages not yet finished with: not terminal, or not yet delivered. */
  liveMessages(): MessageRecord[];
  countByState(): Record<string, number>;
  /**
   * Deletes finished messages (terminal and delivered) last changed before `finishedBefore`, looking at up to
   * `scanLimit` messages in arrival order from where the previous call stopped; `more` when the scan stopped at
   * its limit rather than at a message too recent to go.
   */
  pruneMessages(finishedBefore: number, scanLimit: number): PruneResult;
  /**
   * Drops the payload bytes of a message finished with (terminal and delivered), inside the transaction of its
   * final state; `contentDigest` is kept in their place when given (untokened messages, for deduplication).
   */
  releasePayload(record: MessageRecord, contentDigest: string | undefined): void;
  /** The payload bytes of a message as stored (undefined when released or gone). */
  payload(record: MessageRecord): Uint8Array | undefined;
  /** The bytes of the store file in use (pages in use × page size, all areas). A cheap read, not per message. */
  storeBytes(): number;

  getDedup(producerId: string, key: string): DedupEntry | undefined;
  putDedup(entry: DedupEntry): void;
  /** Removes up to `limit` outcome entries whose window has passed, the longest expired first. */
  pruneDedup(now: number, limit: number): PruneResult;

  lastSeq(agentId: string): number;
  recordDelivery(agentId: string, seq: number, messageId: string, at: number): void;
  deliveryAt(agentId: string, seq: number): string | undefined;
  /** The oldest retained delivery seq of an agent (0 when none). */
  oldestDeliverySeq(agentId: string): number;
  pruneDeliveries(agentId: string, keep: number): void;

  addDeadLetter(
    letter: Omit<DeadLetter, 'id' | 'requeuedAt' | 'requeuedAs'>,
    payload: Uint8Array,
    envelope: Envelope,
  ): number;
  deadLetters(filter?: DeadLetterFilter): DeadLetter[];
  /** A dead letter with its envelope; a file-backed payload is not read (`payloadFile`, and an empty payload). */
  deadLetter(id: number): { letter: DeadLetter; envelope: Envelope; payloadFile?: PayloadFile } | undefined;
  /** Adds a dead letter's owner row for the file of the message it keeps (no bytes copied). */
  sharePayloadFile(deadLetterId: number, file: PayloadFile): void;
  /** Every payload file the store references, once each, with its size (checked at start). */
  payloadFiles(): Array<{ fileId: string; bytes: number }>;
  /** Whether any owner references the file (the sweep asks before it deletes). */
  payloadFileReferenced(fileId: string): boolean;
  /** The bytes of the payload files the store references (the disk budget counts them). */
  payloadFileBytes(): number;
  /**
   * Called inside a transaction for every file whose last owner row it deleted (the router unlinks the file after
   * the commit). Set by the router.
   */
  onPayloadFileOrphaned: (fileId: string) => void;
  markRequeued(id: number, at: number, newMessageId: string): void;
  deadLetterCount(includeRequeued?: boolean): number;
  /** Drops dead letters failed before `olderThan`, then the oldest beyond `maxEntries` or beyond `maxBytes` of payload. */
  pruneDeadLetters(maxEntries: number, olderThan: number, maxBytes?: number): number;
  /**
   * The newest messages matching `filter`, newest first, at most `limit`, looking only at the newest `scanWindow`
   * messages in arrival order (so a filter that matches little never reads the whole table). No payload bytes.
   */
  recentMessages(filter: MessageListFilter, scanWindow: number, limit: number): MessageSummary[];
}

/** What the router is handed of the store: its own repository and transactions. */
export interface RouterStorage extends Transactions {
  readonly router: RouterRepository;
}

/**
 * Takes a message addressed to the coordinator itself (e.g. a HITL_INVOCATION). It runs inside the admission
 * transaction, with the message already written (so that it may answer at once); a refusal rolls the
 * transaction back and leaves nothing behind. A handler that accepts answers through
 * `CoordinatorMailbox.replyFromCoordinator`, at once or later.
 */
export type CoordinatorHandler = (
  envelope: Envelope,
  json: Record<string, unknown> | undefined,
  ctx: CallContext,
  expiresAt: number | null,
) => Refusal | undefined;

/**
 * How another area takes messages addressed to `coordinator` and answers them (HITL does). The Router
 * implements it; areas take this interface, never the Router.
 */
export interface CoordinatorMailbox {
  /** Lets a component take messages of `messageType` addressed to `coordinator` (e.g. HITL_INVOCATION). */
  handleAtCoordinator(messageType: string, handler: CoordinatorHandler): Disposable;
  /**
   * The coordinator's answer to a message addressed to it: the message becomes FULFILLED with `reply` as the
   * cached result, and `reply` goes to the producer as a persisted envelope correlated to the message. Call
   * inside the component's transaction.
   */
  replyFromCoordinator(messageId: string, messageType: string, reply: Record<string, unknown>, ctx: CallContext): void;
  /**
   * A message addressed to the coordinator that needs no answer envelope (a provider's TOOL_RESULT / TOOL_ERROR, or
   * a TOOL_CALL whose answer went to the caller through CoordinatorOutbox.sendToAgent, in order with its frames): it
   * becomes FULFILLED, nothing goes back to its producer. `raw` is the cached result a retry with the same idempotency
   * token gets (DUPLICATE_DETECTED); absent = `{}`. Call at once from the handler or later.
   */
  settleAtCoordinator(messageId: string, ctx: CallContext, raw?: Record<string, unknown>): void;
}

/** A tracked message the coordinator sent (CoordinatorOutbox.sendToAgent) moved: an ACK of its recipient, or the router ended it. */
export interface OutboxUpdate {
  readonly messageId: string;
  readonly recipientId: string;
  readonly correlationId: string;
  /** The state it entered: RECEIVED, READ, FULFILLED, or REJECTED / FAILED / TIMED_OUT. */
  readonly state: MessageState;
  /** An ACK's error_code, or the router's code when it ended the message (ACK_TIMEOUT, TTL_EXPIRED, AGENT_UNAVAILABLE…). */
  readonly errorCode: string;
  /** The ACK's note (e.g. `yielded`), or the router's reason. */
  readonly note: string;
  /** True when the recipient's ACK caused it, false when the router did (a timeout, the agent left). */
  readonly byAck: boolean;
  /**
   * The ACK payload's `result` field as JSON text when the ACK carried one (any JSON value: a task's output, README
   * "Workflows"), else ''. ACKNOWLEDGEMENT payloads are at most 4 KiB, so it is too.
   */
  readonly result: string;
}

/**
 * Messages areas of the coordinator send to agents as `coordinator` (the scheduler's CONTROL commands), through the
 * normal admission path, and what becomes of them.
 */
export interface CoordinatorOutbox {
  /**
   * Sends a tracked envelope from `coordinator` to `to` (validation, modality, capacity, the durable commit). Call it
   * inside your transaction to commit your change with the message. A refusal is an answer (code and reason).
   */
  sendToAgent(
    input: OutboxMessage,
    ctx: CallContext,
  ):
    | { readonly accepted: true; readonly messageId: string }
    | { readonly accepted: false; readonly code: string; readonly reason: string };
  /**
   * Each state a message sent through `sendToAgent` enters, fired inside the transaction that records it (write
   * your own state in the same transaction; never throw).
   */
  readonly onDidUpdateOutbox: Event<OutboxUpdate>;
}

export interface OutboxMessage {
  readonly to: string;
  readonly messageType:
    'CONTROL' | 'NOTIFICATION' | 'DATA' | 'TOOL_CALL' | 'TOOL_RESULT' | 'TOOL_ERROR' | 'NEGOTIATION';
  readonly contentType: string;
  readonly payload: Buffer;
  readonly correlationId: string;
  /** ms; 0 = none. */
  readonly ttlMs?: number;
  /**
   * false: the router sets no ACK deadline (ackTimeoutMs) on it, so a late RECEIVED or FULFILLED still counts; for
   * commands whose sender keeps its own deadlines (the scheduler's). TTL and the recipient leaving still end it.
   */
  readonly ackTimeout?: false;
}

/**
 * A recipient's own ACK timeout beside the RFC's default (RouterOptions.ackTimeoutMs, 10 s): the launch area gives one
 * to each agent it launched with the MCP bridge, which pulls its inbox (read_inbox) between steps of its work instead of
 * holding a stream. Admission sets `now + ms` as the deadline of every message to it (fan-out copies each their own
 * recipient's); messages already admitted keep the deadline they were stored with.
 */
export interface RecipientAckTimeouts {
  /** `ms` a whole number ≥ 1 (else RangeError); undefined: the default again. In memory only: the owner sets it at each start. */
  setRecipientAckTimeout(agentId: string, ms: number | undefined): void;
}

/** What the Messages view filters by; every field set must match. */
export interface MessageListFilter {
  /** The producer or the recipient. */
  readonly agentId?: string;
  readonly correlationId?: string;
  readonly state?: string;
  readonly messageType?: string;
}

/** One routed message as a list shows it: plain data, no payload. */
export interface MessageSummary {
  readonly messageId: string;
  readonly messageType: string;
  readonly producerId: string;
  readonly recipientId: string;
  readonly state: MessageState;
  readonly errorCode: string;
  readonly correlationId: string;
  readonly contentType: string;
  /** The payload's size as the producer declared it (content_length), in bytes. */
  readonly size: number;
  /** Tracked messages have a lifecycle of protocol ACKs; forwarded ACKs, NACKs and replies do not. */
  readonly tracked: boolean;
  readonly acceptedAt: number;
  readonly updatedAt: number;
}
