import type { Disposable } from '../events';
import { NOT_READ } from './inbox';
import type { MessageRecord } from './model';
import type { RouterCore } from './routerCore';

interface MessageTimers {
  ack?: Disposable;
  ttl?: Disposable;
  lease?: Disposable;
}

/**
 * The deadlines of messages in memory: the ACK timeout (RFC §11/§20: RECEIVED in time or TIMED_OUT), the TTL,
 * and the delivery lease (a delivery not confirmed in time is sent again).
 */
export class Timeouts {
  private readonly timers = new Map<string, MessageTimers>();

  constructor(private readonly core: RouterCore) {}

  /** Arms the ACK timeout and TTL of a tracked message waiting to be RECEIVED. */
  arm(record: MessageRecord): void {
    const id = record.envelope.messageId;
    const now = this.core.clock.now();
    if (record.tracked && record.ackDeadline !== null && NOT_READ.has(record.state) && record.state === 'SENT') {
      this.set(id, 'ack', record.ackDeadline - now, () => this.expired(id, false));
    }
    if (record.tracked && record.expiresAt !== null && record.state === 'SENT') {
      this.set(id, 'ttl', record.expiresAt - now, () => this.expired(id, true));
    }
  }

  armLease(record: MessageRecord): void {
    const id = record.envelope.messageId;
    this.set(id, 'lease', this.core.options.leaseMs, () => this.leaseExpired(id));
  }

  clear(id: string, kind: keyof MessageTimers): void {
    const timers = this.timers.get(id);
    timers?.[kind]?.dispose();
    if (timers) delete timers[kind];
  }

  clearAll(id: string): void {
    const timers = this.timers.get(id);
    if (!timers) return;
    timers.ack?.dispose();
    timers.ttl?.dispose();
    timers.lease?.dispose();
    this.timers.delete(id);
  }

  dispose(): void {
    for (const id of [...this.timers.keys()]) this.clearAll(id);
  }

  /**
   * A tracked message still not RECEIVED at its deadline: at the ACK timeout it is TIMED_OUT (a retry may mend
   * that); past its TTL it FAILED and is dead-lettered.
   */
  private expired(id: string, ttl: boolean): void {
    const core = this.core;
    const record = core.live.get(id);
    if (!record || record.state !== 'SENT') return;
    const now = core.clock.now();
    const ctx = { correlationId: record.envelope.correlationId };
    core.store.transaction(() => {
      if (ttl) {
        core.acks.finish(record, 'FAILED', 'TTL_EXPIRED', `ttl_ms ${record.envelope.ttlMs} passed before it was received`, ctx, now,
          { dlq: true, nack: true, settleDedup: true });
      } else {
        // The timeout it was admitted with: the default, or its recipient's own (Router.setRecipientAckTimeout).
        const within = record.ackDeadline !== null ? record.ackDeadline - record.acceptedAt : core.options.ackTimeoutMs;
        core.acks.finish(record, 'TIMED_OUT', 'ACK_TIMEOUT', `not RECEIVED within ${within} ms`, ctx, now,
          { dlq: false, nack: true, settleDedup: true });
      }
    });
    core.delivery.dispatch(core.inbox(record.recipientId));
  }

  private leaseExpired(id: string): void {
    const core = this.core;
    const record = core.live.get(id);
    if (!record || record.delivery !== 'inflight') return;
    const inbox = core.inbox(record.recipientId);
    const now = core.clock.now();
    if (record.deliverySeq !== null) inbox.inflight.delete(record.deliverySeq);
    record.delivery = 'queued';
    record.leaseUntil = null;
    record.history.push({ at: now, event: 'lease_expired', detail: `seq ${record.deliverySeq} not confirmed within ${core.options.leaseMs} ms` });
    core.store.transaction(() => {
      core.repo.updateMessage(record);
      core.log.record({
        correlationId: record.envelope.correlationId, actor: 'router', eventType: 'message.redelivery_scheduled', level: 'WARN',
        details: { message_id: id, to: record.recipientId, seq: record.deliverySeq, attempts: record.deliveryAttempts },
      });
    });
    inbox.queue.unshift(record.lane, record);
    core.delivery.dispatch(inbox);
  }

  private set(id: string, kind: keyof MessageTimers, ms: number, fn: () => void): void {
    const timers = this.timers.get(id) ?? {};
    timers[kind]?.dispose();
    timers[kind] = this.core.clock.setTimer(Math.max(0, ms), () => {
      const current = this.timers.get(id);
      if (current) delete current[kind];
      if (!this.core.disposed) this.core.safely(fn);
    });
    this.timers.set(id, timers);
  }
}
