import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable, Event } from '../events';
import type { IdSource } from '../ids';
import type { EventLog } from '../log/eventLog';
import type { TransferredWork } from '../handoff/model';
import type { AgentDirectory } from '../registry/model';
import type { SendOptions, SendResult } from './admission';
import type { DeadLetterChange } from './deadLetters';
import { baseContentType, checkEnvelope, type Envelope } from './envelope';
import type { MemoryUsage } from './memoryBudget';
import { PayloadChecker, payloadWorkerScript } from './payloadChecker';
import { contentKind, OFFLOAD_MIN_BYTES, type ContentKind } from './payloadContent';
import { FILE_PAYLOAD_MIN_BYTES, type PayloadFiles } from './payloadFiles';
import { contentDigest } from './contentDigest';
import { checkPayloadFiles, recover, sweepPayloadFiles } from './recovery';
import { Housekeeping } from './housekeeping';
import { NOT_READ, type InboxSink, type InboxStats } from './inbox';
import { metricsText, type AgentRouterMetrics } from './metrics';
import type {
  CoordinatorHandler,
  CoordinatorMailbox,
  CoordinatorOutbox,
  DeadLetter,
  DeadLetterFilter,
  MessageRecord,
  OutboxMessage,
  OutboxUpdate,
  RecipientAckTimeouts,
  RouterStorage,
} from './model';
import { DEFAULT_ROUTER_OPTIONS, type RouterOptions } from './options';
import { RouterCore } from './routerCore';
import type { StoreUsage } from './storeUsage';
import { CoordinatorSend, type CoordinatorSendInput } from './coordinatorSend';
import { MessageQueries, type MessageDetail, type MessageQuery, type MessageSummary } from './messageQueries';

export type {
  CoordinatorHandler,
  DeadLetterChange,
  InboxSink,
  InboxStats,
  MemoryUsage,
  RouterOptions,
  SendOptions,
  SendResult,
  StoreUsage,
};
export type { CoordinatorSendInput, MessageDetail, MessageQuery, MessageSummary };
export { UNSPECIFIED_ERROR } from './ackLifecycle';
export { COORDINATOR_ID } from './coordinatorMessages';
export { StreamRefusal } from './delivery';
export {
  DEFAULT_ROUTER_OPTIONS,
  MAX_MEMORY_BUDGET_MIB,
  MAX_MESSAGE_RETENTION_HOURS,
  MAX_STORE_BUDGET_MIB,
  MIN_MEMORY_BUDGET_MIB,
  MIN_STORE_BUDGET_MIB,
  UNADDRESSED_POLICIES,
  type UnaddressedPolicy,
} from './options';

/**
 * The router (RFC §11–§13, §21): admits envelopes durably, routes them to the recipient's inbox stream in
 * lane order, follows their lifecycle through protocol ACKs, deduplicates retries, applies back-pressure,
 * times out, expires and dead-letters. Everything it accepts reaches a terminal state or the DLQ.
 *
 * The work is done by its parts, which share one RouterCore: admission.ts, deduplication.ts, ackLifecycle.ts,
 * delivery.ts, timeouts.ts, coordinatorHandlers.ts, coordinatorMessages.ts, deadLetters.ts, housekeeping.ts
 * and recovery.ts. Each takes it as the narrow interface of what it uses (parts.ts), so no part depends on another's
 * file but through parts.ts. The Router builds them and answers the rest of the coordinator.
 */
export class Router implements CoordinatorMailbox, CoordinatorOutbox, RecipientAckTimeouts, Disposable {
  private readonly core: RouterCore;
  private readonly subscriptions: Disposable[] = [];
  private readonly housekeeping: Housekeeping;
  private checker: PayloadChecker | undefined;
  private workerScript: string | null | undefined;
  /** Fires when an inbox's counts change (views refresh from `inboxStats`). */
  readonly onDidChange: Event<{ agentId: string }>;
  /** Fires after a dead letter was added, requeued, or pruned by retention (the change is committed). */
  readonly onDidChangeDeadLetters: Event<DeadLetterChange>;

  constructor(
    store: RouterStorage,
    registry: AgentDirectory,
    log: EventLog,
    clock: Clock,
    ids: IdSource,
    readonly options: RouterOptions = DEFAULT_ROUTER_OPTIONS,
  ) {
    const core = (this.core = new RouterCore(store, registry, log, clock, ids, options));
    this.onDidChange = core.changed.event;
    this.onDidChangeDeadLetters = core.deadLettersChanged.event;
    this.onDidUpdateOutbox = core.outbox.event;
    checkPayloadFiles(core);
    recover(core);
    this.payloadFilesSwept = sweepPayloadFiles(core);
    this.subscriptions.push(
      registry.onDidChange((change) => {
        if (change.kind === 'left') core.delivery.agentLeft(change.agentId, change.reason);
        else if (change.kind === 'joined')
          core.coordinator.broadcast('agent.joined', change.agent.descriptor.agentId, {
            name: change.agent.descriptor.name,
          });
      }),
    );
    core.coordinator.startHeartbeat();
    this.housekeeping = new Housekeeping(core);
  }

  /**
   * The handoff area's completed transfers: from now on admission asks `work.refusalFor(producer, correlation_id)` of every
   * message an agent sends (ACKs and heartbeats aside) and refuses it PERMISSION_DENIED with the answer (RFC §17.6).
   */
  guardTransferredWork(work: TransferredWork): Disposable {
    this.core.transferredWork = work;
    return {
      dispose: () => {
        if (this.core.transferredWork === work) this.core.transferredWork = undefined;
      },
    };
  }

  /**
   * A recipient's own ACK timeout (RecipientAckTimeouts), beside the RFC's default `ackTimeoutMs` for everyone else:
   * messages admitted to `agentId` from now on must be RECEIVED within `ms`; undefined gives it the default again.
   * Messages already admitted keep their stored deadline. A change is logged (`router.recipient_ack_timeout`), a repeat
   * of the same value is not. In memory only: its owner (the launch area) sets it again at each start.
   */
  setRecipientAckTimeout(agentId: string, ms: number | undefined): void {
    if (ms !== undefined && !(Number.isInteger(ms) && ms >= 1))
      throw new RangeError(`an ACK timeout is a whole number of ms ≥ 1, not ${ms}`);
    const own = this.core.recipientAckTimeouts;
    const previous = own.get(agentId);
    if (previous === ms) return;
    if (ms === undefined) own.delete(agentId);
    else own.set(agentId, ms);
    this.core.store.transaction(() =>
      this.core.log.record({
        correlationId: `ack-timeout:${agentId}`,
        actor: 'router',
        eventType: 'router.recipient_ack_timeout',
        details: {
          agent_id: agentId,
          ack_timeout_ms: ms ?? this.options.ackTimeoutMs,
          own: ms !== undefined,
          previous_ms: previous ?? this.options.ackTimeoutMs,
        },
      }),
    );
  }

  /** The ACK timeout a message admitted to `agentId` now gets: its own, or the default. */
  ackTimeoutOf(agentId: string): number {
    return this.core.ackTimeoutOf(agentId);
  }

  /** SendMessage: answers accepted only after the message is committed to the store. Validates on the event loop. */
  send(envelope: Envelope, ctx: CallContext, options: SendOptions = {}): SendResult {
    return this.core.admission.send(envelope, ctx, options);
  }

  /**
   * SendMessage as the server calls it: like `send`, except that a JSON or text payload of OFFLOAD_MIN_BYTES or
   * more is validated (rule 5) on a worker thread first, so that no request holds the event loop for the
   * hundreds of milliseconds a 16 MB parse takes. Its bytes count against the memory budget while they wait.
   */
  submit(envelope: Envelope, ctx: CallContext, options: SendOptions = {}): SendResult | Promise<SendResult> {
    const core = this.core;
    const size = envelope.payload?.byteLength ?? 0;
    const base = size >= OFFLOAD_MIN_BYTES ? baseContentType(envelope.contentType) : undefined;
    const kind = contentKind(base);
    const files = size >= FILE_PAYLOAD_MIN_BYTES ? core.files : undefined;
    const script = kind || files ? this.payloadWorkerScript() : undefined;
    if (files && !checkEnvelope(envelope, this.options.payloadLimits, 'checked')) {
      const overBudget = core.memory.refusal(size);
      if (overBudget)
        return core.admission.refuse(envelope, 'BUFFER_FULL', overBudget, ctx, {
          memory_budget_bytes: core.memory.budget,
        });
      return this.submitAsFile(envelope, ctx, options, files, kind, base ?? '', script);
    }
    if (!kind || !base || !script || checkEnvelope(envelope, this.options.payloadLimits, 'checked'))
      return core.admission.send(envelope, ctx, options);
    const overBudget = core.memory.refusal(size);
    if (overBudget)
      return core.admission.refuse(envelope, 'BUFFER_FULL', overBudget, ctx, {
        memory_budget_bytes: core.memory.budget,
      });
    this.checker ??= new PayloadChecker(script);
    core.memory.checking += size;
    return this.checker.check(kind, base, envelope.payload).then(
      ({ refusal, payload }) => {
        core.memory.checking -= size;
        if (core.disposed)
          return {
            accepted: false,
            code: 'INTERNAL_ERROR',
            reason: 'INTERNAL_ERROR: the coordinator is stopping',
          } as const;
        // The payload's memory went to the worker and back: go on with the view that came back.
        const checked = { ...envelope, payload };
        if (refusal !== undefined) return core.admission.refuse(checked, 'VALIDATION_ERROR', refusal, ctx, {});
        return core.admission.send(checked, ctx, { ...options, contentChecked: true });
      },
      (err: Error) => {
        core.memory.checking -= size;
        throw err;
      },
    );
  }

  /**
   * A payload of FILE_PAYLOAD_MIN_BYTES or more (with a payload folder): validated (JSON, text) and, for an untokened
   * message, hashed on the worker; written as a durable file with async fs; then admitted, the message referencing
   * the file. All of it off the event loop but the admission itself; the bytes count against the memory budget
   * (`checking`) until then. A refusal, or a path that stores bytes itself (an ACK, a message to the coordinator),
   * deletes the file.
   */
  private async submitAsFile(
    envelope: Envelope,
    ctx: CallContext,
    options: SendOptions,
    files: PayloadFiles,
    kind: ContentKind | undefined,
    base: string,
    script: string | undefined,
  ): Promise<SendResult> {
    const core = this.core;
    const size = envelope.payload.byteLength;
    let counted = true;
    core.memory.checking += size;
    const uncount = () => {
      if (counted) core.memory.checking -= size;
      counted = false;
    };
    const stopping = {
      accepted: false,
      code: 'INTERNAL_ERROR',
      reason: 'INTERNAL_ERROR: the coordinator is stopping',
    } as const;
    try {
      let payload = envelope.payload;
      let digest: string | undefined;
      const digestOf = envelope.idempotencyToken
        ? undefined
        : { messageType: envelope.messageType, contentType: envelope.contentType };
      if (script && (kind || digestOf)) {
        this.checker ??= new PayloadChecker(script);
        const verdict = await this.checker.check(kind, base, payload, digestOf);
        // The payload's memory went to the worker and back: go on with the view that came back.
        payload = verdict.payload;
        digest = verdict.digest;
        if (core.disposed) return stopping;
        if (verdict.refusal !== undefined) {
          uncount();
          return core.admission.refuse({ ...envelope, payload }, 'VALIDATION_ERROR', verdict.refusal, ctx, {});
        }
      } else if (digestOf) {
        // No worker (RouterOptions.payloadWorker false): the digest is computed here.
        digest = contentDigest({ ...digestOf, payload });
      }
      const fileId = core.ids.uuid();
      await files.write(fileId, payload);
      const claim = { file: { fileId, bytes: size, ...(digest ? { digest } : {}) }, owned: false };
      if (core.disposed) {
        files.settled(fileId);
        await core.unlinkFile(fileId);
        return stopping;
      }
      uncount();
      let result: SendResult;
      try {
        result = core.admission.send({ ...envelope, payload }, ctx, {
          ...options,
          contentChecked: (kind !== undefined && script !== undefined) || options.contentChecked,
          payloadFile: claim,
        });
      } finally {
        if (!claim.owned) {
          files.settled(fileId);
          void core.unlinkFile(fileId);
        } else {
          core.store.afterCommit(() => files.settled(fileId));
        }
      }
      return result;
    } finally {
      uncount();
    }
  }

  /** The payload files referenced by the store were checked at start; this resolves when the unreferenced ones are deleted. */
  readonly payloadFilesSwept: Promise<string[]>;

  /** What the router holds in memory against its budget. */
  memoryUsage(): MemoryUsage {
    return this.core.memory.usage();
  }

  private payloadWorkerScript(): string | undefined {
    if (this.workerScript === undefined)
      this.workerScript = this.options.payloadWorker === false ? null : (payloadWorkerScript() ?? null);
    return this.workerScript ?? undefined;
  }

  /** Lets a component take messages of `messageType` addressed to `coordinator` (e.g. HITL_INVOCATION). */
  handleAtCoordinator(messageType: string, handler: CoordinatorHandler): Disposable {
    return this.core.handlers.handle(messageType, handler);
  }

  /**
   * The coordinator's answer to a message addressed to it: the message becomes FULFILLED with `reply` as the
   * cached result, and `reply` goes to the producer as a persisted envelope. Call inside the component's transaction.
   */
  replyFromCoordinator(messageId: string, messageType: string, reply: Record<string, unknown>, ctx: CallContext): void {
    this.core.handlers.reply(messageId, messageType, reply, ctx);
  }

  /** A message addressed to the coordinator becomes FULFILLED without an answer envelope (CoordinatorMailbox). */
  settleAtCoordinator(messageId: string, ctx: CallContext, raw?: Record<string, unknown>): void {
    this.core.handlers.settle(messageId, ctx, raw);
  }

  /**
   * Opens an agent's inbox stream. A newer stream replaces an older one. With `resumeAfter`, deliveries up to
   * that seq count as processed; anything else not yet confirmed is delivered again. With `window`, the stream takes
   * at most that many tracked deliveries unconfirmed at once (below the router's deliveryWindow).
   */
  attach(agentId: string, sink: InboxSink, ctx: CallContext, resumeAfter?: number, window?: number): Disposable {
    return this.core.delivery.attach(agentId, sink, ctx, resumeAfter, window);
  }

  /** AckDelivery: confirms (or permanently fails) the delivery with this seq. Answers whether it was recorded. */
  ackDelivery(
    agentId: string,
    seq: number,
    messageId: string,
    outcome: 'DELIVERED' | 'PERMANENT_FAILURE',
    ctx: CallContext,
  ): boolean {
    return this.core.delivery.ackDelivery(agentId, seq, messageId, outcome, ctx);
  }

  deadLetters(filter?: DeadLetterFilter): DeadLetter[] {
    return this.core.deadLetters.list(filter);
  }

  /** One dead letter by its id, requeued or not. */
  deadLetter(id: number): DeadLetter | undefined {
    return this.core.repo.deadLetter(id)?.letter;
  }

  deadLetterCount(): number {
    return this.core.deadLetters.count();
  }

  /** Sends a dead letter again as a new attempt (new message_id, same token, retry_count + 1). */
  requeue(id: number, ctx: CallContext): SendResult {
    return this.core.deadLetters.requeue(id, ctx);
  }

  /** A diagnostic bundle (RFC §21.1) of every dead letter matching `filter` (requeued ones included unless excluded). */
  exportDeadLetters(filter?: DeadLetterFilter): Record<string, unknown> {
    return this.core.deadLetters.export(filter);
  }

  /**
   * A message by id, from memory or the store. A message finished with has `payloadReleased` and an empty
   * payload (its dead letter, if any, keeps the bytes).
   */
  message(messageId: string): MessageRecord | undefined {
    return this.core.message(messageId);
  }

  /** The store's size against its disk budget (the estimate admission uses; read back every few seconds). */
  storeUsage(): StoreUsage {
    return this.core.storeBudget.usage();
  }

  /**
   * How many times a tracked message (from an agent, or sent by the coordinator through admission; not an ACK, NACK,
   * reply, heartbeat or notice) was delivered to its recipient's inbox stream since this router started.
   */
  deliveredMessageCount(): number {
    return this.core.deliveredMessages;
  }

  stateCounts(): Record<string, number> {
    return this.core.repo.countByState();
  }

  /** An agent's inbox counts; zeros for an agent that has none yet. Reads only. */
  inboxStats(agentId: string): InboxStats {
    const inbox = this.core.inboxes.get(agentId);
    if (!inbox) {
      return {
        agentId,
        queueDepth: 0,
        capacity: this.options.capacity,
        inFlight: 0,
        queued: 0,
        streaming: false,
        lastDeliveryAt: null,
      };
    }
    return {
      agentId,
      queueDepth: inbox.notRead.size,
      capacity: this.options.capacity,
      inFlight: inbox.inflight.size,
      queued: inbox.queue.size,
      streaming: inbox.sink !== undefined,
      lastDeliveryAt: inbox.metrics.lastDeliveryAt,
    };
  }

  metrics(): AgentRouterMetrics[] {
    const { clock, inboxes, live } = this.core;
    const now = clock.now();
    return [...inboxes.values()].map((inbox) => {
      let oldest = now;
      for (const record of live.values()) {
        if (record.recipientId === inbox.agentId && record.tracked && NOT_READ.has(record.state))
          oldest = Math.min(oldest, record.acceptedAt);
      }
      return {
        ...inbox.metrics,
        queueDepth: inbox.notRead.size,
        inFlight: inbox.inflight.size,
        oldestEnqueuedAgeSeconds: (now - oldest) / 1000,
      };
    });
  }

  metricsText(): string {
    return metricsText(this.metrics());
  }

  /** Ends every inbox stream (the server drains before the coordinator stops). */
  closeStreams(detail: string): void {
    this.core.delivery.closeStreams(detail);
  }

  /** Recent messages matching `query`, newest first, bounded (the Messages view). Reads only. */
  messages(query?: MessageQuery): MessageSummary[] {
    this.messageQueries ??= new MessageQueries(this.core);
    return this.messageQueries.recent(query);
  }

  /** A message's envelope, payload as text (or why it is gone) and lifecycle history; undefined once it was pruned. */
  messageDetail(messageId: string): MessageDetail | undefined {
    this.messageQueries ??= new MessageQueries(this.core);
    return this.messageQueries.detail(messageId);
  }

  /** A DATA message from `coordinator` (the editor's Send Message…) through the normal admission path. */
  sendFromCoordinator(input: CoordinatorSendInput, ctx: CallContext): SendResult {
    this.coordinatorSend ??= new CoordinatorSend(this.core);
    return this.coordinatorSend.send(input, ctx);
  }

  private messageQueries: MessageQueries | undefined;
  private coordinatorSend: CoordinatorSend | undefined;

  /**
   * Fires for every tracked message produced by `coordinator` (sendToAgent's and the editor's Send Message… alike: one
   * producer check, restart-proof) at each state it enters, inside the transaction that records it.
   */
  readonly onDidUpdateOutbox: Event<OutboxUpdate>;

  /** CoordinatorOutbox: a tracked CONTROL/NOTIFICATION/DATA envelope from `coordinator` through the normal admission path. */
  sendToAgent(
    input: OutboxMessage,
    ctx: CallContext,
  ):
    | { readonly accepted: true; readonly messageId: string }
    | { readonly accepted: false; readonly code: string; readonly reason: string } {
    this.coordinatorSend ??= new CoordinatorSend(this.core);
    const result = this.coordinatorSend.sendEnvelope(input, ctx);
    return result.accepted
      ? { accepted: true, messageId: result.messageId }
      : { accepted: false, code: result.code, reason: result.reason };
  }

  dispose(): void {
    const core = this.core;
    if (core.disposed) return;
    core.disposed = true;
    core.guard.stop();
    for (const subscription of this.subscriptions) subscription.dispose();
    core.coordinator.dispose();
    this.checker?.dispose();
    this.housekeeping.dispose();
    core.timeouts.dispose();
    core.delivery.closeStreams('the coordinator is stopping');
    core.changed.dispose();
    core.deadLettersChanged.dispose();
  }
}
