import { KeyedTimers } from '../kernel/timers';
import { NOT_READ } from './inbox';
import type { MessageRecord, RouterRepository } from './model';
import type { RouterOptions } from './options';
import type { AckHandling, DeadlineKind, Deadlines, Dispatching, RouterShared } from './parts';

/** What the deadlines use of the router. */
export interface TimeoutsCore extends Pick<RouterShared, 'store' | 'log' | 'clock' | 'guard' | 'live' | 'inbox'> {
  readonly repo: Pick<RouterRepository, 'updateMessage'>;
  readonly options: Pick<RouterOptions, 'ackTimeoutMs' | 'leaseMs'>;
  readonly acks: Pick<AckHandling, 'finish'>;
  readonly delivery: Pick<Dispatching, 'dispatch'>;
}

/** A timer's fault is logged like any of the router's own work (a new correlation id, RouterCore.guard). */
const NO_CONTEXT = (): string => '';

/**
 * The deadlines of messages in memory: the ACK timeout (RFC §11/§20: RECEIVED in time or TIMED_OUT), the TTL,
 * and the delivery lease (a delivery not confirmed in time is sent again).
 */
export class Timeouts implements Deadlines {
  /** One KeyedTimers per kind, by message id; a timer runs through the router's Guard (nothing once disposed). */
  private readonly timers: Readonly<Record<DeadlineKind, KeyedTimers<string>>>;

  constructor(private readonly core: TimeoutsCore) {
    this.timers = {
      ack: new KeyedTimers<string>(core.clock, core.guard, NO_CONTEXT),
      ttl: new KeyedTimers<string>(core.clock, core.guard, NO_CONTEXT),
      lease: new KeyedTimers<string>(core.clock, core.guard, NO_CONTEXT),
    };
  }

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

  clear(id: string, kind: DeadlineKind): void {
    this.timers[kind].disarm(id);
  }

  clearAll(id: string): void {
    const { ack, ttl, lease } = this.timers;
    ack.disarm(id);
    ttl.disarm(id);
    lease.disarm(id);
  }

  dispose(): void {
    const { ack, ttl, lease } = this.timers;
    ack.clear();
    ttl.clear();
    lease.clear();
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
        core.acks.finish(
          record,
          'FAILED',
          'TTL_EXPIRED',
          `ttl_ms ${record.envelope.ttlMs} passed before it was received`,
          ctx,
          now,
          { dlq: true, nack: true, settleDedup: true },
        );
      } else {
        // The timeout it was admitted with: the default, or its recipient's own (Router.setRecipientAckTimeout).
        const within = record.ackDeadline !== null ? record.ackDeadline - record.acceptedAt : core.options.ackTimeoutMs;
        core.acks.finish(record, 'TIMED_OUT', 'ACK_TIMEOUT', `not RECEIVED within ${within} ms`, ctx, now, {
          dlq: false,
          nack: true,
          settleDedup: true,
        });
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
    record.history.push({
      at: now,
      event: 'lease_expired',
      detail: `seq ${record.deliverySeq} not confirmed within ${core.options.leaseMs} ms`,
    });
    core.store.transaction(() => {
      core.repo.updateMessage(record);
      core.log.record({
        correlationId: record.envelope.correlationId,
        actor: 'router',
        eventType: 'message.redelivery_scheduled',
        level: 'WARN',
        details: { message_id: id, to: record.recipientId, seq: record.deliverySeq, attempts: record.deliveryAttempts },
      });
    });
    inbox.queue.unshift(record.lane, record);
    core.delivery.dispatch(inbox);
  }

  private set(id: string, kind: DeadlineKind, ms: number, fn: () => void): void {
    this.timers[kind].arm(id, Math.max(0, ms), fn);
  }
}
