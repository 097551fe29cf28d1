import type { CallContext } from '../context';
import type { Disposable } from '../events';
import type { Envelope } from './envelope';
import type { Inbox, InboxSink } from './inbox';
import { isTerminal } from './lifecycle';
import { payloadSize } from './memoryBudget';
import { observe } from './metrics';
import type { MessageRecord, RouterRepository, RouterStorage } from './model';
import { UNSPECIFIED_ERROR } from './ackLifecycle';
import type { RouterOptions } from './options';
import type { AckHandling, CoordinatorEnvelopes, Deadlines, Dispatching, RouterShared } from './parts';
import type { AgentDirectory } from '../registry/model';

/** What delivery uses of the router. */
export interface DeliveryCore extends Pick<
  RouterShared,
  | 'log'
  | 'clock'
  | 'guard'
  | 'memory'
  | 'live'
  | 'inboxes'
  | 'changed'
  | 'deliveredMessages'
  | 'disposed'
  | 'files'
  | 'message'
  | 'inbox'
  | 'setState'
  | 'retire'
  | 'envelopeOf'
> {
  readonly store: Pick<RouterStorage, 'transaction' | 'afterCommit'>;
  readonly repo: Pick<
    RouterRepository,
    'updateMessage' | 'recordDelivery' | 'deliveryAt' | 'oldestDeliverySeq' | 'pruneDeliveries'
  >;
  readonly registry: Pick<AgentDirectory, 'get' | 'recordLiveness'>;
  readonly options: Pick<
    RouterOptions,
    'deliveryWindow' | 'deliveryWindowBytes' | 'leaseMs' | 'maxDeliveryAttempts' | 'resumeBacklog'
  >;
  readonly acks: Pick<AckHandling, 'finish'>;
  readonly timeouts: Pick<Deadlines, 'armLease' | 'clear'>;
  readonly coordinator: Pick<CoordinatorEnvelopes, 'broadcast'>;
}

/** Forwarded ACKs and NACKs held per agent for redelivery when the client never confirms them (AckDelivery). */
const MAX_UNCONFIRMED_UNTRACKED = 256;

export class StreamRefusal extends Error {
  constructor(
    readonly code: 'not_registered' | 'resume_out_of_range' | 'resume_expired',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Delivery: inbox streams (open, resume, replace, close), dispatch from the lanes to a stream within the
 * delivery window, and delivery confirmations (AckDelivery, protocol ACKs, resumption). Every step is written
 * to the store; nothing reaches a stream before it is durable.
 */
export class Delivery implements Dispatching {
  /** Inboxes with deliveries held back by the bytes in flight; dispatched again when bytes are confirmed. */
  private readonly waiting = new Set<Inbox>();
  private retryScheduled = false;
  /** File-backed payloads being read for delivery, and those read and not yet written to their stream. */
  private readonly loading = new Set<MessageRecord>();
  private readonly loaded = new Map<MessageRecord, Uint8Array>();

  constructor(private readonly core: DeliveryCore) {
    core.memory.onInflightFreed = () => this.retryWaiting();
  }

  /** After bytes in flight were confirmed or freed: the inboxes that waited for them try again, once per turn. */
  private retryWaiting(): void {
    if (this.waiting.size === 0 || this.retryScheduled) return;
    this.retryScheduled = true;
    queueMicrotask(() => {
      this.retryScheduled = false;
      const inboxes = [...this.waiting];
      this.waiting.clear();
      for (const inbox of inboxes) this.core.guard.run('', () => this.dispatch(inbox));
    });
  }

  /** The inbox's stream is gone: its bytes in flight no longer count (gRPC freed them). */
  private detach(inbox: Inbox): void {
    inbox.sink = undefined;
    inbox.window = undefined;
    for (const record of this.loaded.keys()) if (record.recipientId === inbox.agentId) this.dropLoaded(record);
    inbox.inflight.uncount();
    this.waiting.delete(inbox);
    this.retryWaiting();
  }

  /**
   * Opens an agent's inbox stream. A newer stream replaces an older one. With `resumeAfter`, deliveries up to
   * that seq count as processed; anything else not yet confirmed is delivered again. `window` (≥ 1): this stream takes
   * at most that many tracked deliveries unconfirmed at once, when fewer than the router's deliveryWindow (the MCP
   * bridge's read_inbox, which returns at most `max` messages and must not be handed more it would leave unconfirmed).
   */
  attach(agentId: string, sink: InboxSink, ctx: CallContext, resumeAfter?: number, window?: number): Disposable {
    const core = this.core;
    if (!core.registry.get(agentId))
      throw new StreamRefusal(
        'not_registered',
        `agent '${agentId.slice(0, 128)}' is not registered; RegisterAgent first`,
      );
    const inbox = core.inbox(agentId);
    const now = core.clock.now();
    if (resumeAfter !== undefined) {
      if (resumeAfter > inbox.lastSeq) {
        throw new StreamRefusal(
          'resume_out_of_range',
          `sw4rm-resume-after ${resumeAfter} is beyond the last delivered seq ${inbox.lastSeq}`,
        );
      }
      const oldest = core.repo.oldestDeliverySeq(agentId);
      if (resumeAfter < inbox.lastSeq && oldest > 0 && resumeAfter + 1 < oldest) {
        throw new StreamRefusal(
          'resume_expired',
          `resume position ${resumeAfter} has expired: deliveries before seq ${oldest} are no longer kept ` +
            `(window ${core.options.resumeBacklog}). Recover by opening the stream without sw4rm-resume-after: every message not yet acknowledged is delivered again.`,
        );
      }
    }
    if (inbox.sink) {
      inbox.sink.close('superseded', `a newer stream for ${agentId} replaced this one`);
      core.log.record({
        correlationId: ctx.correlationId,
        actor: 'router',
        eventType: 'stream.superseded',
        level: 'WARN',
        details: { agent_id: agentId },
      });
    }
    const requeue: MessageRecord[] = [];
    core.store.transaction(() => {
      for (const [seq, record] of [...inbox.inflight.entries()].sort((a, b) => a[0] - b[0])) {
        inbox.inflight.delete(seq);
        core.timeouts.clear(record.envelope.messageId, 'lease');
        if (resumeAfter !== undefined && seq <= resumeAfter) {
          this.confirm(record, now, `resumed after seq ${resumeAfter}`);
          core.repo.updateMessage(record);
          if (!record.tracked) core.retire(record);
        } else {
          record.delivery = 'queued';
          record.leaseUntil = null;
          record.history.push({ at: now, event: 'redelivery_scheduled', detail: 'new stream' });
          core.repo.updateMessage(record);
          requeue.push(record);
        }
      }
      core.log.record({
        correlationId: ctx.correlationId,
        actor: agentId,
        eventType: 'stream.opened',
        details: { agent_id: agentId, resume_after: resumeAfter, redeliver: requeue.length, queued: inbox.queue.size },
      });
    });
    for (const record of requeue.reverse()) inbox.queue.unshift(record.lane, record);
    inbox.sink = sink;
    inbox.window =
      window !== undefined && window >= 1 && window < core.options.deliveryWindow ? Math.floor(window) : undefined;
    inbox.inflight.count();
    core.registry.recordLiveness(agentId, ctx);
    this.dispatch(inbox);
    core.changed.fire({ agentId });
    return {
      dispose: () => {
        if (inbox.sink !== sink) return;
        this.detach(inbox);
        if (!core.disposed) {
          core.log.record({
            correlationId: ctx.correlationId,
            actor: agentId,
            eventType: 'stream.closed',
            details: { agent_id: agentId, unconfirmed: inbox.inflight.size },
          });
          core.changed.fire({ agentId });
        }
      },
    };
  }

  /** AckDelivery: confirms (or permanently fails) the delivery with this seq. Answers whether it was recorded. */
  ackDelivery(
    agentId: string,
    seq: number,
    messageId: string,
    outcome: 'DELIVERED' | 'PERMANENT_FAILURE',
    ctx: CallContext,
  ): boolean {
    const core = this.core;
    const inbox = core.inboxes.get(agentId);
    const id = inbox?.inflight.get(seq)?.envelope.messageId ?? core.repo.deliveryAt(agentId, seq);
    if (!id || (messageId && messageId !== id)) return false;
    const record = core.message(id);
    // Gone from the store (its retention passed): there is nothing left to record.
    if (!record) return false;
    if (outcome === 'DELIVERED' && (record.delivery === 'done' || record.deliverySeq !== seq)) return false;
    const now = core.clock.now();
    core.store.transaction(() => {
      if (outcome === 'PERMANENT_FAILURE' && !isTerminal(record.state)) {
        this.confirm(record, now, 'AckDelivery PERMANENT_FAILURE');
        // A forwarded ACK or NACK (untracked) is not the producer's message: it fails without a dead letter.
        core.acks.finish(
          record,
          'FAILED',
          UNSPECIFIED_ERROR,
          `${agentId} reported a permanent delivery failure (AckDelivery PERMANENT_FAILURE)`,
          ctx,
          now,
          { dlq: record.tracked, nack: true, settleDedup: true },
        );
        return;
      }
      if (record.delivery === 'inflight' && record.deliverySeq === seq) {
        this.confirm(record, now, 'AckDelivery');
        core.repo.updateMessage(record);
        if (!record.tracked) core.retire(record);
      }
    });
    this.dispatch(inbox ?? core.inbox(agentId));
    core.changed.fire({ agentId });
    return true;
  }

  /** Writes what the inbox's lanes hold to its stream, up to the delivery window, in one transaction. */
  dispatch(inbox: Inbox): void {
    const core = this.core;
    if (!inbox.sink || core.disposed) return;
    const batch: MessageRecord[] = [];
    let trackedInflight = inbox.inflight.tracked;
    let bytes = 0;
    const now = core.clock.now();
    const failed: MessageRecord[] = [];
    while (inbox.queue.size > 0) {
      const next = inbox.queue.shift();
      if (!next) break;
      const record = next.item;
      if (record.delivery !== 'queued' || (record.tracked && isTerminal(record.state))) {
        this.dropLoaded(record);
        continue;
      }
      if (record.tracked && trackedInflight >= (inbox.window ?? core.options.deliveryWindow)) {
        inbox.queue.unshift(next.lane, record);
        break;
      }
      if (record.deliveryAttempts >= core.options.maxDeliveryAttempts) {
        if (record.tracked) failed.push(record);
        else {
          // An ACK or NACK written to the stream this often without confirmation has reached the agent.
          record.history.push({
            at: now,
            event: 'delivery_unconfirmed',
            detail: `written ${record.deliveryAttempts} times`,
          });
          this.confirm(record, now, 'delivery attempts exhausted');
          core.repo.updateMessage(record);
          core.retire(record);
        }
        continue;
      }
      // Bytes in flight (memoryBudget.ts): a stream takes up to deliveryWindowBytes unconfirmed, all streams together
      // up to half the memory budget; the rest waits in the store, and a confirmation anywhere lets it go on.
      const size = payloadSize(record);
      if (
        size > 0 &&
        (((bytes > 0 || inbox.inflight.bytes > 0) &&
          inbox.inflight.bytes + bytes + size > core.options.deliveryWindowBytes) ||
          !core.memory.deliveryRoom(bytes, size, this.loaded.get(record)?.byteLength ?? 0))
      ) {
        inbox.queue.unshift(next.lane, record);
        this.waiting.add(inbox);
        break;
      }
      // A payload file is read asynchronously, never here: the message stays first in its lane, and the inbox is
      // dispatched again when the bytes are in memory (counted against the budget while they are held).
      if (record.payloadFile && !this.loaded.has(record)) {
        inbox.queue.unshift(next.lane, record);
        this.load(inbox, record);
        break;
      }
      bytes += size;
      if (record.tracked) trackedInflight++;
      batch.push(record);
    }
    if (batch.length === 0 && failed.length === 0) return;
    const ctx = { correlationId: `dispatch:${inbox.agentId}` };
    const firstSeq = inbox.lastSeq + 1;
    core.store.transaction(() => {
      for (const record of failed) {
        core.acks.finish(
          record,
          'FAILED',
          'AGENT_UNAVAILABLE',
          `delivery to ${inbox.agentId} not confirmed after ${record.deliveryAttempts} attempts`,
          ctx,
          now,
          { dlq: true, nack: true, settleDedup: true },
        );
      }
      for (const record of batch) {
        const seq = ++inbox.lastSeq;
        record.delivery = 'inflight';
        record.deliverySeq = seq;
        record.deliveredAt = now;
        record.leaseUntil = now + core.options.leaseMs;
        record.deliveryAttempts++;
        record.updatedAt = now;
        record.history.push({ at: now, event: 'delivered', detail: `seq ${seq}, attempt ${record.deliveryAttempts}` });
        core.repo.updateMessage(record);
        core.repo.recordDelivery(inbox.agentId, seq, record.envelope.messageId, now);
        inbox.inflight.set(seq, record);
        core.log.record({
          correlationId: record.envelope.correlationId,
          actor: 'router',
          eventType: 'message.delivered',
          details: {
            message_id: record.envelope.messageId,
            to: inbox.agentId,
            seq,
            attempt: record.deliveryAttempts,
            lane: record.lane,
            urgent: record.lane === 'PRIVILEGED' ? true : undefined,
          },
        });
      }
      this.pruneDeliveriesIfDue(inbox, firstSeq);
    });
    const sink = inbox.sink;
    const items: Array<[number, Envelope]> = [];
    let heldBytes = 0;
    for (const record of batch) {
      inbox.metrics.delivered++;
      inbox.metrics.lastDeliveryAt = now;
      if (record.lane === 'PRIVILEGED' && record.tracked) inbox.metrics.urgentDispatches++;
      observe(inbox.metrics.dequeueLatency, Math.max(0, now - record.acceptedAt) / 1000);
      if (record.tracked) {
        core.timeouts.armLease(record);
        core.deliveredMessages++;
      }
      // A payload that lives in the store is read back here, for the stream; the record keeps none. A payload file
      // was read before (`load`); its bytes are dropped once written to the stream.
      const read = this.loaded.get(record);
      if (read) this.loaded.delete(record);
      items.push([record.deliverySeq!, read ? { ...record.envelope, payload: read } : core.envelopeOf(record)]);
      if (read) heldBytes += read.byteLength;
    }
    // Nothing reaches a stream before it is durable: a crash can never show an agent a message the store lost.
    if (sink && items.length) {
      core.store.afterCommit(() => {
        for (const [seq, envelope] of items) sink.deliver(seq, envelope);
        core.memory.reading -= heldBytes;
      });
    } else core.memory.reading -= heldBytes;
    this.boundUnconfirmed(inbox, now);
    core.changed.fire({ agentId: inbox.agentId });
  }

  /** Keeps the last `resumeBacklog` deliveries of the inbox, pruning whenever seq passes a multiple of 100. */
  pruneDeliveriesIfDue(inbox: Inbox, firstSeq: number): void {
    if (Math.floor(inbox.lastSeq / 100) > Math.floor((firstSeq - 1) / 100))
      this.core.repo.pruneDeliveries(inbox.agentId, this.core.options.resumeBacklog);
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
    const core = this.core;
    core.store.transaction(() => {
      // Oldest first; confirming removes the record from the map, which iteration tolerates.
      for (const record of inbox.inflight.values()) {
        if (excess === 0) break;
        if (record.tracked) continue;
        record.history.push({
          at: now,
          event: 'delivery_unconfirmed',
          detail: `written to a live stream; more than ${MAX_UNCONFIRMED_UNTRACKED} unconfirmed`,
        });
        this.confirm(record, now, 'bounded without AckDelivery');
        core.repo.updateMessage(record);
        core.retire(record);
        excess--;
      }
    });
  }

  /** The delivery is done with: off the stream's unconfirmed set (or the queue), its lease cancelled. */
  confirm(record: MessageRecord, now: number, how: string): void {
    if (record.delivery === 'done') return;
    if (record.deliverySeq !== null) this.core.inboxes.get(record.recipientId)?.inflight.delete(record.deliverySeq);
    if (record.delivery === 'queued') this.takeOffQueue(record);
    record.delivery = 'done';
    record.leaseUntil = null;
    record.updatedAt = now;
    record.history.push({ at: now, event: 'delivery_confirmed', detail: how });
    this.core.timeouts.clear(record.envelope.messageId, 'lease');
    if (!record.tracked && record.state === 'SENT') this.core.setState(record, 'FULFILLED');
  }

  /**
   * Reads a message's payload file off the event loop, then dispatches its inbox again. A file that cannot be read
   * (gone or cut short while the coordinator ran) fails the message: FAILED with INTERNAL_ERROR, NACKed.
   */
  private load(inbox: Inbox, record: MessageRecord): void {
    const core = this.core;
    const file = record.payloadFile;
    if (!file || this.loading.has(record)) return;
    this.loading.add(record);
    core.memory.reading += file.bytes;
    const read = core.files
      ? core.files.read(file.fileId, file.bytes)
      : Promise.reject(new Error('the router has no payload folder'));
    read.then(
      (bytes) => {
        this.loading.delete(record);
        if (core.disposed || record.delivery !== 'queued' || !inbox.sink || inbox.queue.size === 0) {
          core.memory.reading -= file.bytes;
          return;
        }
        this.loaded.set(record, bytes);
        core.guard.run('', () => this.dispatch(inbox));
      },
      (err: Error) => {
        this.loading.delete(record);
        core.memory.reading -= file.bytes;
        if (core.disposed || record.delivery !== 'queued') return;
        core.guard.run('', () =>
          core.store.transaction(() => {
            core.acks.finish(
              record,
              'FAILED',
              'INTERNAL_ERROR',
              `its payload file could not be read: ${err.message.slice(0, 200)}`,
              { correlationId: `dispatch:${inbox.agentId}` },
              core.clock.now(),
              { dlq: false, nack: record.tracked, settleDedup: true },
            );
          }),
        );
        core.guard.run('', () => this.dispatch(inbox));
      },
    );
  }

  /** Drops a payload read for a delivery that will not happen now (the message left the queue, the stream closed). */
  private dropLoaded(record: MessageRecord): void {
    const bytes = this.loaded.get(record);
    if (!bytes) return;
    this.loaded.delete(record);
    this.core.memory.reading -= bytes.byteLength;
  }

  takeOffQueue(record: MessageRecord): void {
    this.dropLoaded(record);
    const inbox = this.core.inboxes.get(record.recipientId);
    if (!inbox) return;
    inbox.queue.remove((item) => item === record);
    if (record.deliverySeq !== null && inbox.inflight.get(record.deliverySeq) === record)
      inbox.inflight.delete(record.deliverySeq);
    record.delivery = 'done';
  }

  /** An agent deregistered: its stream ends, and every message still on its way to it fails. */
  agentLeft(agentId: string, reason: string): void {
    const core = this.core;
    const inbox = core.inboxes.get(agentId);
    const now = core.clock.now();
    const ctx = { correlationId: `left:${agentId}` };
    inbox?.sink?.close('deregistered', `${agentId} deregistered: ${reason}`);
    if (inbox) this.detach(inbox);
    const stranded = [...core.live.values()].filter(
      (m) =>
        m.recipientId === agentId &&
        (m.delivery !== 'done' || (m.tracked && !isTerminal(m.state) && m.state !== 'RETRYING')),
    );
    core.store.transaction(() => {
      for (const record of stranded) {
        core.acks.finish(
          record,
          'FAILED',
          'AGENT_UNAVAILABLE',
          `${agentId} deregistered before the message was done (${reason})`,
          ctx,
          now,
          { dlq: record.tracked, nack: record.tracked, settleDedup: true },
        );
      }
    });
    core.coordinator.broadcast('agent.left', agentId, { reason });
  }

  /** Ends every inbox stream. */
  closeStreams(detail: string): void {
    for (const inbox of this.core.inboxes.values()) {
      inbox.sink?.close('shutdown', detail);
      inbox.sink = undefined;
      inbox.inflight.uncount();
    }
  }
}
