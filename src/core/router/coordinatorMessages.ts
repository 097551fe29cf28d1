import { isoUtc } from '../clock';
import type { Disposable } from '../events';
import type { Envelope } from './envelope';
import type { Inbox } from './inbox';
import { nackPayload } from './lifecycle';
import type { MessageRecord } from './model';
import type { RouterCore } from './routerCore';

/** The coordinator's own address and producer id. */
export const COORDINATOR_ID = 'coordinator';

/**
 * Envelopes the coordinator itself sends. NACKs of accepted messages and replies are persisted and leased like
 * any message, so they reach the producer across a restart. Heartbeats, join/leave notices and admission NACKs
 * are live-only: written to an open stream, never stored.
 */
export class CoordinatorMessages {
  /** Recent live-only envelopes (id → recipient), so that agents may acknowledge them. */
  private readonly ephemeral = new Map<string, string>();
  private heartbeatTimer: Disposable | undefined;

  constructor(private readonly core: RouterCore) {}

  /** The agent a recent live-only envelope went to. */
  ephemeralRecipient(messageId: string): string | undefined {
    return this.ephemeral.get(messageId);
  }

  /** A NACK for an accepted message that failed later: persisted, so the producer learns of it even offline. */
  persistNack(record: MessageRecord, stage: 'REJECTED' | 'FAILED' | 'TIMED_OUT', code: string, note: string, now: number): void {
    const producerId = record.envelope.producerId;
    if (!this.core.registry.get(producerId)) return;
    // A fan-out copy's NACK names the producer's message, the copy and its recipient.
    const copyOf = record.tracked ? record.ackFor : '';
    const payload = copyOf
      ? nackPayload(copyOf, stage, code, note, { copy_message_id: record.envelope.messageId, recipient_id: record.recipientId })
      : nackPayload(record.envelope.messageId, stage, code, note);
    const envelope = this.envelope('ACKNOWLEDGEMENT', record.envelope.correlationId, payload);
    const inbox = this.persist(producerId, envelope, record.envelope.messageId, `NACK ${code} for ${record.envelope.messageId}`, now);
    inbox.metrics.nacks[code] = (inbox.metrics.nacks[code] ?? 0) + 1;
  }

  /** A coordinator-originated envelope that must reach `recipientId` even across a restart (untracked, leased). */
  persist(recipientId: string, envelope: Envelope, ackFor: string, detail: string, now: number): Inbox {
    const core = this.core;
    const message: MessageRecord = {
      envelope, recipientId, dedupKey: '', tracked: false, lane: 'PRIVILEGED', ackFor, acceptedAt: now,
      state: 'SENT', errorCode: '', updatedAt: now, ackDeadline: null, expiresAt: null,
      delivery: 'queued', deliverySeq: null, deliveredAt: null, leaseUntil: null, deliveryAttempts: 0,
      history: [{ at: now, event: 'accepted', detail }],
    };
    core.repo.insertMessage(message);
    core.live.set(envelope.messageId, message);
    const inbox = core.inbox(recipientId);
    inbox.queue.push('PRIVILEGED', message);
    queueMicrotask(() => core.delivery.dispatch(inbox));
    return inbox;
  }

  /** Live-only envelopes (heartbeats, join/leave notices, admission NACKs): written to an open stream, not stored. */
  sendEphemeral(inbox: Inbox, messageType: 'HEARTBEAT' | 'NOTIFICATION' | 'ACKNOWLEDGEMENT', correlationId: string, payload: Record<string, unknown>): void {
    if (!inbox.sink) return;
    const core = this.core;
    const envelope = this.envelope(messageType, correlationId, payload);
    const seq = ++inbox.lastSeq;
    core.repo.recordDelivery(inbox.agentId, seq, envelope.messageId, core.clock.now());
    core.delivery.pruneDeliveriesIfDue(inbox, seq);
    this.ephemeral.set(envelope.messageId, inbox.agentId);
    if (this.ephemeral.size > 10_000) this.ephemeral.delete(this.ephemeral.keys().next().value!);
    // Through the commit queue too, so that seqs reach the stream in order.
    const sink = inbox.sink;
    core.store.afterCommit(() => sink.deliver(seq, envelope));
  }

  envelope(messageType: string, correlationId: string, payload: Record<string, unknown>): Envelope {
    const bytes = Buffer.from(JSON.stringify(payload));
    const { ids, clock } = this.core;
    return {
      messageId: ids.uuid(), idempotencyToken: '', producerId: COORDINATOR_ID, correlationId: correlationId || ids.uuid(),
      sequenceNumber: '0', retryCount: 0, messageType, contentType: 'application/json', contentLength: String(bytes.byteLength),
      repoId: '', worktreeId: '', hlcTimestamp: '', ttlMs: 0, timestampMs: clock.now(), payload: bytes, parentCorrelationId: '',
    };
  }

  /** A join or leave notice to every other streaming agent. */
  broadcast(event: 'agent.joined' | 'agent.left', agentId: string, details: Record<string, unknown>): void {
    for (const inbox of this.core.inboxes.values()) {
      if (inbox.agentId !== agentId && inbox.sink) this.sendEphemeral(inbox, 'NOTIFICATION', this.core.ids.uuid(), { event, agent_id: agentId, ...details });
    }
  }

  /** RFC §14: a HEARTBEAT to every streaming agent each `heartbeatIntervalMs`, until disposed. */
  startHeartbeat(): void {
    const core = this.core;
    if (core.options.heartbeatIntervalMs <= 0 || core.disposed) return;
    this.heartbeatTimer = core.clock.setTimer(core.options.heartbeatIntervalMs, () => {
      core.safely(() => {
        const sentAt = isoUtc(core.clock.now());
        for (const inbox of core.inboxes.values()) {
          if (inbox.sink) this.sendEphemeral(inbox, 'HEARTBEAT', core.ids.uuid(), { kind: 'heartbeat', agent_id: inbox.agentId, sent_at: sentAt });
        }
      });
      this.startHeartbeat();
    });
  }

  dispose(): void {
    this.heartbeatTimer?.dispose();
  }
}
