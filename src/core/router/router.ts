import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable, Event } from '../events';
import type { IdSource } from '../ids';
import type { EventLog } from '../log/eventLog';
import type { AgentDirectory } from '../registry/model';
import type { SendOptions, SendResult } from './admission';
import type { DeadLetterChange } from './deadLetters';
import type { Envelope } from './envelope';
import { Housekeeping } from './housekeeping';
import { NOT_READ, type InboxSink, type InboxStats } from './inbox';
import { metricsText, type AgentRouterMetrics } from './metrics';
import type { CoordinatorHandler, CoordinatorMailbox, DeadLetter, DeadLetterFilter, MessageRecord, RouterStorage } from './model';
import { DEFAULT_ROUTER_OPTIONS, type RouterOptions } from './options';
import { recover } from './recovery';
import { RouterCore } from './routerCore';
import type { StoreUsage } from './storeUsage';

export type { CoordinatorHandler, DeadLetterChange, InboxSink, InboxStats, RouterOptions, SendOptions, SendResult, StoreUsage };
export { UNSPECIFIED_ERROR } from './ackLifecycle';
export { COORDINATOR_ID } from './coordinatorMessages';
export { StreamRefusal } from './delivery';
export {
  DEFAULT_ROUTER_OPTIONS, MAX_MESSAGE_RETENTION_HOURS, MAX_STORE_BUDGET_MIB, MIN_STORE_BUDGET_MIB, UNADDRESSED_POLICIES, type UnaddressedPolicy,
} from './options';

/**
 * The router (RFC §11–§13, §21): admits envelopes durably, routes them to the recipient's inbox stream in
 * lane order, follows their lifecycle through protocol ACKs, deduplicates retries, applies back-pressure,
 * times out, expires and dead-letters. Everything it accepts reaches a terminal state or the DLQ.
 *
 * The work is done by its parts, which share one RouterCore: admission.ts, deduplication.ts, ackLifecycle.ts,
 * delivery.ts, timeouts.ts, coordinatorHandlers.ts, coordinatorMessages.ts, deadLetters.ts, housekeeping.ts
 * and recovery.ts. The Router builds them and answers the rest of the coordinator.
 */
export class Router implements CoordinatorMailbox, Disposable {
  private readonly core: RouterCore;
  private readonly subscriptions: Disposable[] = [];
  private readonly housekeeping: Housekeeping;
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
    const core = this.core = new RouterCore(store, registry, log, clock, ids, options);
    this.onDidChange = core.changed.event;
    this.onDidChangeDeadLetters = core.deadLettersChanged.event;
    recover(core);
    this.subscriptions.push(registry.onDidChange((change) => {
      if (change.kind === 'left') core.delivery.agentLeft(change.agentId, change.reason);
      else if (change.kind === 'joined') core.coordinator.broadcast('agent.joined', change.agent.descriptor.agentId, { name: change.agent.descriptor.name });
    }));
    core.coordinator.startHeartbeat();
    this.housekeeping = new Housekeeping(core);
  }

  /** SendMessage: answers accepted only after the message is committed to the store. */
  send(envelope: Envelope, ctx: CallContext, options: SendOptions = {}): SendResult {
    return this.core.admission.send(envelope, ctx, options);
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

  /**
   * Opens an agent's inbox stream. A newer stream replaces an older one. With `resumeAfter`, deliveries up to
   * that seq count as processed; anything else not yet confirmed is delivered again.
   */
  attach(agentId: string, sink: InboxSink, ctx: CallContext, resumeAfter?: number): Disposable {
    return this.core.delivery.attach(agentId, sink, ctx, resumeAfter);
  }

  /** AckDelivery: confirms (or permanently fails) the delivery with this seq. Answers whether it was recorded. */
  ackDelivery(agentId: string, seq: number, messageId: string, outcome: 'DELIVERED' | 'PERMANENT_FAILURE', ctx: CallContext): boolean {
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
      return { agentId, queueDepth: 0, capacity: this.options.capacity, inFlight: 0, queued: 0, streaming: false, lastDeliveryAt: null };
    }
    return {
      agentId, queueDepth: inbox.notRead.size, capacity: this.options.capacity, inFlight: inbox.inflight.size, queued: inbox.queue.size,
      streaming: inbox.sink !== undefined, lastDeliveryAt: inbox.metrics.lastDeliveryAt,
    };
  }

  metrics(): AgentRouterMetrics[] {
    const { clock, inboxes, live } = this.core;
    const now = clock.now();
    return [...inboxes.values()].map((inbox) => {
      let oldest = now;
      for (const record of live.values()) {
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
    this.core.delivery.closeStreams(detail);
  }

  dispose(): void {
    const core = this.core;
    if (core.disposed) return;
    core.disposed = true;
    for (const subscription of this.subscriptions) subscription.dispose();
    core.coordinator.dispose();
    this.housekeeping.dispose();
    core.timeouts.dispose();
    core.delivery.closeStreams('the coordinator is stopping');
    core.changed.dispose();
    core.deadLettersChanged.dispose();
  }
}
