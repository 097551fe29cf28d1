import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Emitter } from '../events';
import type { IdSource } from '../ids';
import type { Guard } from '../kernel/guard';
import type { EventLog } from '../log/eventLog';
import type { TransferredWork } from '../handoff/model';
import type { AgentDirectory, AgentRecord } from '../registry/model';
import type { Envelope, ErrorCode } from './envelope';
import type { Inbox } from './inbox';
import type { AckPayload, MessageState } from './lifecycle';
import type { LiveMessages, MemoryBudget } from './memoryBudget';
import type { DedupEntry, MessageRecord, OutboxUpdate, RouterRepository, RouterStorage } from './model';
import type { RouterOptions } from './options';
import type { PayloadFile, PayloadFiles } from './payloadFiles';
import type { StoreBudget } from './storeUsage';

/*
 * The narrow pieces the router's parts take. routerCore.ts builds one RouterCore that is all of them; each part
 * declares, from these, exactly what it uses of the shared state and of the other parts (its `…Core` interface),
 * and is handed that RouterCore. This file imports no part, so the parts depend on one another only through it:
 * there is no import cycle among router/*.ts. All of it is types: a part calls the same objects it always did.
 */

export type SendResult =
  | { readonly accepted: true; readonly messageId: string }
  | {
      readonly accepted: false;
      readonly code: ErrorCode;
      readonly reason: string;
      /** The refusal's structured details when it has any (a repeated operation's original_message_id and status, RFC §11.2). */
      readonly details?: Readonly<Record<string, unknown>>;
    };

export interface SendOptions {
  /** The recipient from call metadata `sw4rm-to`. */
  readonly to?: string;
  /** When the request arrived, for the enqueue latency metric. */
  readonly receivedAt?: number;
  /** Rule 5 (valid JSON, UTF-8 text) was checked already, off the event loop (Router.submit). */
  readonly contentChecked?: boolean;
  /**
   * The payload is already durable as this file (Router.submit, or the dead letter a requeue shares): a tracked message
   * to an agent references it (an owner row) instead of storing the bytes, and sets `owned`. Any other path (an ACK, a
   * message to the coordinator) stores the bytes as usual and leaves `owned` false: the caller deletes the file.
   */
  readonly payloadFile?: { readonly file: PayloadFile; owned: boolean };
  /**
   * false: no ACK deadline (ackTimeoutMs, or the recipient's own: Router.setRecipientAckTimeout) for this message — the
   * coordinator's own commands whose sender keeps its own deadlines (the scheduler's `run`, `preempt_request`,
   * `terminate`, `shutdown`). TTL and the recipient leaving still end it.
   */
  readonly ackTimeout?: false;
}

/** What changed in the dead-letter queue. */
export type DeadLetterChange = { kind: 'added' | 'requeued' | 'pruned'; id?: number };

/** A distinct operation found behind a colliding `(producer_id, sequence_number)`: its own key and entry. */
export interface ReusedSequence {
  readonly key: string;
  readonly previous: DedupEntry | undefined;
  /** The operation that first used the sequence number; set only when this operation is new (logged then). */
  readonly reusedFrom: string | undefined;
}

/** The state the parts share (RouterCore holds it) and the helpers over it. */
export interface RouterShared {
  readonly store: RouterStorage;
  readonly repo: RouterRepository;
  readonly registry: AgentDirectory;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly options: RouterOptions;
  /**
   * Work the router does on its own (timers, after a commit, a payload read) runs through it; stopped when disposed. A
   * fault is logged as router.internal_error under the context given to `run` as its correlation id ('' : a new one).
   */
  readonly guard: Guard;
  /** What the router holds in memory against its budget (admission and delivery respect it). */
  readonly memory: MemoryBudget;
  /** Messages not yet finished with, by id. */
  readonly live: LiveMessages;
  readonly inboxes: Map<string, Inbox>;
  /** Fires when an inbox's counts change. */
  readonly changed: Emitter<{ agentId: string }>;
  /** Each state a tracked message produced by `coordinator` enters, inside its transaction. */
  readonly outbox: Emitter<OutboxUpdate>;
  /** Fires after a dead letter was added, requeued, or pruned by retention (the change is committed). */
  readonly deadLettersChanged: Emitter<DeadLetterChange>;
  /** Deliveries of tracked messages to an inbox stream since this router started. */
  deliveredMessages: number;
  readonly disposed: boolean;
  /** The store's size against its disk budget, estimated for admission. */
  readonly storeBudget: StoreBudget;
  /** The payload folder; without one, every payload stays in SQLite. */
  readonly files: PayloadFiles | undefined;
  /** The handoff area's completed transfers: admission refuses their origins' sends about them. */
  readonly transferredWork: TransferredWork | undefined;
  /** A message by id, from memory or the store. */
  message(messageId: string): MessageRecord | undefined;
  /** An agent's inbox, made on first use. */
  inbox(agentId: string): Inbox;
  /** Every lifecycle change goes through here, so the capacity count always matches the states. */
  setState(record: MessageRecord, state: MessageState): void;
  /** Logs a lifecycle step (`message.state_changed`). */
  transition(
    record: MessageRecord,
    from: MessageState,
    to: MessageState,
    correlationId: string,
    details: Record<string, unknown>,
  ): void;
  /** A message that is finished with leaves memory (call inside the transaction of its final state). */
  retire(record: MessageRecord): void;
  /** The message's envelope with its payload bytes (read back from the store when memory does not hold them). */
  envelopeOf(record: MessageRecord): Envelope;
  /** The ACK timeout of a message to `agentId` admitted now. */
  ackTimeoutOf(agentId: string): number;
  /** Deletes a payload file nobody references any more. */
  unlinkFile(fileId: string): Promise<void>;
}

/** Admission (admission.ts). */
export interface Admitting {
  send(envelope: Envelope, ctx: CallContext, options?: SendOptions, fromCoordinator?: AgentRecord): SendResult;
  refuse(
    envelope: Envelope,
    code: ErrorCode,
    detail: string,
    ctx: CallContext,
    extra: Record<string, unknown>,
    inboxId?: string,
  ): SendResult;
}

/** How `finish` ends a message: dead-lettered, NACKed, its outcome settled, because of an ACK. */
export interface FinishHow {
  readonly dlq: boolean;
  readonly nack: boolean;
  readonly settleDedup: boolean;
  readonly byAck?: boolean;
}

/** The lifecycle of tracked messages (ackLifecycle.ts). */
export interface AckHandling {
  acceptAck(
    envelope: Envelope,
    ack: AckPayload,
    target: MessageRecord,
    recipient: string,
    dedupKey: string,
    previous: DedupEntry | undefined,
    ctx: CallContext,
    now: number,
    options: SendOptions,
    reusedFrom?: string,
  ): SendResult;
  finish(
    record: MessageRecord,
    state: 'REJECTED' | 'FAILED' | 'TIMED_OUT',
    code: string,
    note: string,
    ctx: CallContext,
    now: number,
    how: FinishHow,
  ): void;
}

/** Delivery to inbox streams (delivery.ts). */
export interface Dispatching {
  dispatch(inbox: Inbox): void;
  confirm(record: MessageRecord, now: number, how: string): void;
  takeOffQueue(record: MessageRecord): void;
  pruneDeliveriesIfDue(inbox: Inbox, firstSeq: number): void;
  agentLeft(agentId: string, reason: string): void;
  closeStreams(detail: string): void;
}

/** The three deadlines of a message in memory. */
export type DeadlineKind = 'ack' | 'ttl' | 'lease';

/** The deadlines of messages in memory (timeouts.ts). */
export interface Deadlines {
  arm(record: MessageRecord): void;
  armLease(record: MessageRecord): void;
  clear(id: string, kind: DeadlineKind): void;
  clearAll(id: string): void;
  dispose(): void;
}

/** The outcome cache and its rules (deduplication.ts). */
export interface Outcomes {
  entry(producerId: string, key: string, now: number): DedupEntry | undefined;
  reusedSequence(envelope: Envelope, key: string, previous: DedupEntry, now: number): ReusedSequence | undefined;
  noteReusedSequence(envelope: Envelope, key: string, reusedFrom: string | undefined): void;
  put(entry: DedupEntry): void;
  restore(previous: DedupEntry | undefined, entry: DedupEntry): void;
  prune(now: number): void;
  refuseRepeat(envelope: Envelope, key: string, previous: DedupEntry, ctx: CallContext): SendResult;
  reconcileSuccess(target: MessageRecord, ack: AckPayload, now: number, ctx: CallContext): void;
  settleFailure(
    record: MessageRecord,
    state: 'REJECTED' | 'FAILED' | 'TIMED_OUT',
    code: string,
    note: string,
    now: number,
    ctx: CallContext,
  ): void;
}

/** Envelopes the coordinator itself sends (coordinatorMessages.ts). */
export interface CoordinatorEnvelopes {
  ephemeralRecipient(messageId: string): string | undefined;
  persistNack(
    record: MessageRecord,
    stage: 'REJECTED' | 'FAILED' | 'TIMED_OUT',
    code: string,
    note: string,
    now: number,
  ): void;
  persist(recipientId: string, envelope: Envelope, ackFor: string, detail: string, now: number): Inbox;
  sendEphemeral(
    inbox: Inbox,
    messageType: 'HEARTBEAT' | 'NOTIFICATION' | 'ACKNOWLEDGEMENT',
    correlationId: string,
    payload: Record<string, unknown>,
  ): void;
  envelope(messageType: string, correlationId: string, payload: Record<string, unknown>): Envelope;
  broadcast(event: 'agent.joined' | 'agent.left', agentId: string, details: Record<string, unknown>): void;
}

/** Messages addressed to the coordinator itself (coordinatorHandlers.ts). */
export interface CoordinatorIntake {
  takes(messageType: string): boolean;
  messageTypes(): IterableIterator<string>;
  accept(
    envelope: Envelope,
    json: Record<string, unknown> | undefined,
    dedupKey: string,
    previous: DedupEntry | undefined,
    ctx: CallContext,
    now: number,
    expiresAt: number | null,
    reusedFrom?: string,
  ): SendResult;
}

/** The dead-letter queue (deadLetters.ts). */
export interface DeadLetterQueue {
  add(record: MessageRecord, reason: string, now: number): void;
}
