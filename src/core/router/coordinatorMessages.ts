import { isoUtc } from '../clock';
import type { Disposable } from '../events';
import type { Envelope } from './envelope';
import type { Inbox } from './inbox';
import { nackPayload } from './lifecycle';
import type { MessageRecord, RouterRepository, RouterStorage } from './model';
import type { RouterOptions } from './options';
import type { CoordinatorEnvelopes, Dispatching, RouterShared } from './parts';
import type { AgentDirectory } from '../registry/model';

/** What the coordinator's own envelopes use of the router. */
export interface CoordinatorMessagesCore extends Pick<
  RouterShared,
  'clock' | 'ids' | 'guard' | 'live' | 'inboxes' | 'disposed' | 'inbox'
> {
  readonly store: Pick<RouterStorage, 'transaction' | 'afterCommit'>;
  readonly repo: Pick<RouterRepository, 'insertMessage' | 'recordDelivery'>;
  readonly registry: Pick<AgentDirectory, 'get'>;
  readonly options: Pick<RouterOptions, 'heartbeatIntervalMs'>;
  readonly delivery: Pick<Dispatching, 'dispatch' | 'pruneDeliveriesIfDue'>;
}

/** The coordinator's own address and producer id. */
export const COORDINATOR_ID = 'coordinator';

/** One join or leave: the agent it is about and its notice payload as JSON. */
interface NoticeChange {
  readonly agentId: string;
  readonly json: string;
}

/** A NOTIFICATION listing several changes stays well under the 32 KB NOTIFICATION payload limit. */
export const MAX_NOTICE_BYTES = 16 * 1024;

/**
 * The NOTIFICATION payloads for `changes`, in order. A single change is today's notice,
 * `{"event": "agent.joined" | "agent.left", "agent_id": …, …}`; several are one
 * `{"event": "agents.changed", "changes": [<such a notice>, …]}`, split so that each payload stays under
 * MAX_NOTICE_BYTES (a change too big to share one goes alone).
 */
export function noticePayloads(changes: readonly NoticeChange[]): Uint8Array[] {
  const payloads: Uint8Array[] = [];
  let group: string[] = [];
  let size = 0;
  const close = (): void => {
    if (group.length === 1) payloads.push(Buffer.from(group[0]));
    else if (group.length > 1) payloads.push(Buffer.from(`{"event":"agents.changed","changes":[${group.join(',')}]}`));
    group = [];
    size = 0;
  };
  for (const change of changes) {
    const bytes = Buffer.byteLength(change.json);
    if (group.length > 0 && size + bytes + 64 > MAX_NOTICE_BYTES) close();
    group.push(change.json);
    size += bytes + 1;
  }
  close();
  return payloads;
}

/**
 * Envelopes the coordinator itself sends. NACKs of accepted messages and replies are persisted and leased like
 * any message, so they reach the producer across a restart. Heartbeats, join/leave notices and admission NACKs
 * are live-only: written to an open stream, never stored.
 */
export class CoordinatorMessages implements CoordinatorEnvelopes {
  /** Recent live-only envelopes (id → recipient), so that agents may acknowledge them. */
  private readonly ephemeral = new Map<string, string>();
  private heartbeatTimer: Disposable | undefined;
  /** Join/leave changes not yet sent, in the order they happened, and whether their sending is scheduled. */
  private pendingNotices: NoticeChange[] = [];
  private noticesScheduled = false;

  constructor(private readonly core: CoordinatorMessagesCore) {}

  /** The agent a recent live-only envelope went to. */
  ephemeralRecipient(messageId: string): string | undefined {
    return this.ephemeral.get(messageId);
  }

  /** A NACK for an accepted message that failed later: persisted, so the producer learns of it even offline. */
  persistNack(
    record: MessageRecord,
    stage: 'REJECTED' | 'FAILED' | 'TIMED_OUT',
    code: string,
    note: string,
    now: number,
  ): void {
    const producerId = record.envelope.producerId;
    if (!this.core.registry.get(producerId)) return;
    // A fan-out copy's NACK names the producer's message, the copy and its recipient.
    const copyOf = record.tracked ? record.ackFor : '';
    const payload = copyOf
      ? nackPayload(copyOf, stage, code, note, {
          copy_message_id: record.envelope.messageId,
          recipient_id: record.recipientId,
        })
      : nackPayload(record.envelope.messageId, stage, code, note);
    const envelope = this.envelope('ACKNOWLEDGEMENT', record.envelope.correlationId, payload);
    const inbox = this.persist(
      producerId,
      envelope,
      record.envelope.messageId,
      `NACK ${code} for ${record.envelope.messageId}`,
      now,
    );
    inbox.metrics.nacks[code] = (inbox.metrics.nacks[code] ?? 0) + 1;
  }

  /** A coordinator-originated envelope that must reach `recipientId` even across a restart (untracked, leased). */
  persist(recipientId: string, envelope: Envelope, ackFor: string, detail: string, now: number): Inbox {
    const core = this.core;
    const message: MessageRecord = {
      envelope,
      recipientId,
      dedupKey: '',
      tracked: false,
      lane: 'PRIVILEGED',
      ackFor,
      acceptedAt: now,
      state: 'SENT',
      errorCode: '',
      updatedAt: now,
      ackDeadline: null,
      expiresAt: null,
      delivery: 'queued',
      deliverySeq: null,
      deliveredAt: null,
      leaseUntil: null,
      deliveryAttempts: 0,
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
  sendEphemeral(
    inbox: Inbox,
    messageType: 'HEARTBEAT' | 'NOTIFICATION' | 'ACKNOWLEDGEMENT',
    correlationId: string,
    payload: Record<string, unknown>,
  ): void {
    if (!inbox.sink) return;
    this.writeEphemeral(inbox, this.envelope(messageType, correlationId, payload));
  }

  /** Writes a live-only envelope to the inbox's open stream, with the next seq, once the store has committed. */
  private writeEphemeral(inbox: Inbox, envelope: Envelope): void {
    const sink = inbox.sink;
    if (!sink) return;
    const core = this.core;
    const seq = ++inbox.lastSeq;
    core.repo.recordDelivery(inbox.agentId, seq, envelope.messageId, core.clock.now());
    core.delivery.pruneDeliveriesIfDue(inbox, seq);
    this.ephemeral.set(envelope.messageId, inbox.agentId);
    if (this.ephemeral.size > 10_000) this.ephemeral.delete(this.ephemeral.keys().next().value!);
    // Through the commit queue too, so that seqs reach the stream in order.
    core.store.afterCommit(() => sink.deliver(seq, envelope));
  }

  envelope(messageType: string, correlationId: string, payload: Record<string, unknown>): Envelope {
    return this.envelopeOf(messageType, correlationId, Buffer.from(JSON.stringify(payload)));
  }

  /** An envelope from the coordinator around `bytes`, which it may share with other envelopes (nobody writes to them). */
  private envelopeOf(messageType: string, correlationId: string, bytes: Uint8Array): Envelope {
    const { ids, clock } = this.core;
    return {
      messageId: ids.uuid(),
      idempotencyToken: '',
      producerId: COORDINATOR_ID,
      correlationId: correlationId || ids.uuid(),
      sequenceNumber: '0',
      retryCount: 0,
      messageType,
      contentType: 'application/json',
      contentLength: String(bytes.byteLength),
      repoId: '',
      worktreeId: '',
      hlcTimestamp: '',
      ttlMs: 0,
      timestampMs: clock.now(),
      payload: bytes,
      parentCorrelationId: '',
    };
  }

  /**
   * A join or leave notice to every other streaming agent (RFC §14). Notices are coalesced: the changes made
   * before the store's next commit (with group commit, one event-loop turn or commit window; without it, each
   * change at once) go out together after that commit, as one NOTIFICATION per streaming agent, in the order
   * they happened, without the agent's own changes (see `noticePayloads`). Agents that are not streaming then
   * get nothing, as live-only envelopes go only to open streams; a leaving agent's stream is already closed.
   */
  broadcast(event: 'agent.joined' | 'agent.left', agentId: string, details: Record<string, unknown>): void {
    if (this.core.disposed) return;
    this.pendingNotices.push({ agentId, json: JSON.stringify({ event, agent_id: agentId, ...details }) });
    if (this.noticesScheduled) return;
    this.noticesScheduled = true;
    // After the commit that made the changes durable (at once when nothing is open).
    this.core.store.afterCommit(() => this.core.guard.run('', () => this.flushNotices()));
  }

  /** Sends the pending join/leave notices: the payload bytes are built once per distinct list and shared. */
  private flushNotices(): void {
    this.noticesScheduled = false;
    const changes = this.pendingNotices;
    this.pendingNotices = [];
    const core = this.core;
    if (core.disposed) return;
    const recipients = [...core.inboxes.values()].filter((inbox) => inbox.sink);
    if (recipients.length === 0) return;
    const changed = new Set(changes.map((change) => change.agentId));
    let shared: Uint8Array[] | undefined;
    const correlationId = core.ids.uuid();
    core.store.transaction(() => {
      for (const inbox of recipients) {
        // An agent is never told about itself; the others share one list.
        const payloads = changed.has(inbox.agentId)
          ? noticePayloads(changes.filter((change) => change.agentId !== inbox.agentId))
          : (shared ??= noticePayloads(changes));
        for (const bytes of payloads) this.writeEphemeral(inbox, this.envelopeOf('NOTIFICATION', correlationId, bytes));
      }
    });
  }

  /** RFC §14: a HEARTBEAT to every streaming agent each `heartbeatIntervalMs`, until disposed. */
  startHeartbeat(): void {
    const core = this.core;
    if (core.options.heartbeatIntervalMs <= 0 || core.disposed) return;
    this.heartbeatTimer = core.clock.setTimer(core.options.heartbeatIntervalMs, () => {
      core.guard.run('', () => {
        const sentAt = isoUtc(core.clock.now());
        for (const inbox of core.inboxes.values()) {
          if (inbox.sink)
            this.sendEphemeral(inbox, 'HEARTBEAT', core.ids.uuid(), {
              kind: 'heartbeat',
              agent_id: inbox.agentId,
              sent_at: sentAt,
            });
        }
      });
      this.startHeartbeat();
    });
  }

  dispose(): void {
    this.heartbeatTimer?.dispose();
  }
}
