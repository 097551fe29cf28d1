import { isoUtc } from '../clock';
import type { CallContext } from '../context';
import { checkEnvelope, jsonObject, modalityAccepts, type Envelope, type ErrorCode } from './envelope';
import { PrivilegedRateLimiter } from './lanes';
import { isTerminal, nackPayload, parseAck, type AckPayload } from './lifecycle';
import { RECORD_OVERHEAD_BYTES } from './memoryBudget';
import type { PayloadFile } from './payloadFiles';
import type { AgentDirectory } from '../registry/model';
import { observe } from './metrics';
import type { AgentRecord } from '../registry/model';
import type { DedupEntry, MessageRecord, RouterRepository, RouterStorage } from './model';
import { COORDINATOR_ID } from './coordinatorMessages';
import { dedupKey } from './deduplication';
import type { RouterOptions } from './options';
import type {
  AckHandling,
  Admitting,
  CoordinatorEnvelopes,
  CoordinatorIntake,
  Dispatching,
  Deadlines,
  Outcomes,
  RouterShared,
  SendOptions,
  SendResult,
} from './parts';

/** What admission uses of the router. */
export interface AdmissionCore extends Pick<
  RouterShared,
  | 'log'
  | 'clock'
  | 'ids'
  | 'memory'
  | 'live'
  | 'inboxes'
  | 'changed'
  | 'storeBudget'
  | 'transferredWork'
  | 'message'
  | 'inbox'
  | 'setState'
  | 'transition'
  | 'ackTimeoutOf'
> {
  readonly store: Pick<RouterStorage, 'transaction'>;
  readonly repo: Pick<RouterRepository, 'insertMessage' | 'updateMessage'>;
  readonly registry: Pick<AgentDirectory, 'get' | 'list' | 'recordLiveness'>;
  readonly options: Pick<RouterOptions, 'capacity' | 'dedupWindowMs' | 'lanes' | 'payloadLimits' | 'unaddressed'>;
  readonly dedup: Pick<Outcomes, 'entry' | 'put' | 'reusedSequence' | 'noteReusedSequence' | 'refuseRepeat'>;
  readonly acks: Pick<AckHandling, 'acceptAck'>;
  readonly handlers: Pick<CoordinatorIntake, 'takes' | 'messageTypes' | 'accept'>;
  readonly coordinator: Pick<CoordinatorEnvelopes, 'ephemeralRecipient' | 'sendEphemeral'>;
  readonly delivery: Pick<Dispatching, 'dispatch'>;
  readonly timeouts: Pick<Deadlines, 'arm'>;
}

/** When a message expires (RFC §11 ttl_ms, counted from its timestamp, or from acceptance); null without a TTL. */
function expiry(envelope: Envelope, now: number): number | null {
  return envelope.ttlMs > 0 ? (envelope.timestampMs ?? now) + envelope.ttlMs : null;
}

export type { SendOptions, SendResult };

/** Message types an agent sends only to `coordinator` (README, "Write a tool provider"). */
const TOOL_MESSAGE_TYPES: ReadonlySet<string> = new Set(['TOOL_CALL', 'TOOL_RESULT', 'TOOL_ERROR']);
export const TOOL_ENVELOPES_TO_COORDINATOR =
  'tool envelopes go to coordinator, which enforces the execution policy (README, "Write a tool provider")';

/**
 * Admission (SendMessage): validates an envelope, resolves its recipient, checks modality, TTL, deduplication,
 * the store's disk budget and capacity, and commits the message with its outcome-cache entry and its log event in one transaction
 * before answering accepted. ACKs and messages to the coordinator itself are handed on once admitted.
 */
export class Admission implements Admitting {
  private readonly limiter: PrivilegedRateLimiter;

  constructor(private readonly core: AdmissionCore) {
    this.limiter = new PrivilegedRateLimiter(core.options.lanes);
  }

  /** SendMessage: answers accepted only after the message is committed to the store. */
  send(envelope: Envelope, ctx: CallContext, options: SendOptions = {}, fromCoordinator?: AgentRecord): SendResult {
    const core = this.core;
    const now = core.clock.now();
    const refused = (
      code: ErrorCode,
      detail: string,
      extra: Record<string, unknown> = {},
      inboxId?: string,
    ): SendResult => this.refuse(envelope, code, detail, ctx, extra, inboxId);

    const invalid = checkEnvelope(envelope, core.options.payloadLimits, options.contentChecked ? 'checked' : 'check');
    if (invalid) return refused(invalid.code, invalid.detail);
    // `fromCoordinator` (Router.sendFromCoordinator, never an RPC): the coordinator's own producer record.
    const producer =
      fromCoordinator && envelope.producerId === COORDINATOR_ID
        ? fromCoordinator
        : core.registry.get(envelope.producerId);
    if (!producer)
      return refused(
        'PERMISSION_DENIED',
        `producer_id '${envelope.producerId}' is not a registered agent; RegisterAgent first`,
      );
    const same = core.message(envelope.messageId);
    if (same) {
      // The same attempt sent twice (a transport-level resend): message_id is unique per attempt.
      const terminal = same.tracked ? isTerminal(same.state) : same.delivery === 'done';
      return refused(
        terminal ? 'DUPLICATE_DETECTED' : 'ALREADY_IN_PROGRESS',
        JSON.stringify({
          original_message_id: same.envelope.messageId,
          original_status: same.state,
          cached_at: isoUtc(same.updatedAt),
        }),
        { original_message_id: same.envelope.messageId, original_status: same.state },
      );
    }

    // RFC §17.6: after a handoff COMPLETED, its origin may no longer act on the transferred work. ACKs (protocol answers
    // about messages it received, a `terminate` included) and heartbeats are not acting on it. A Map lookup, and none
    // at all while nothing was ever handed off.
    const work = core.transferredWork;
    if (
      work !== undefined &&
      envelope.correlationId !== '' &&
      envelope.producerId !== COORDINATOR_ID &&
      envelope.messageType !== 'ACKNOWLEDGEMENT' &&
      envelope.messageType !== 'HEARTBEAT'
    ) {
      const transferred = work.refusalFor(envelope.producerId, envelope.correlationId);
      if (transferred !== undefined)
        return refused('PERMISSION_DENIED', transferred, { correlation_id: envelope.correlationId });
    }

    const json = jsonObject(envelope);
    const to = (options.to ?? '').trim() || (typeof json?.to === 'string' ? json.to.trim() : '');

    // The producer is heard from: every message it sends counts as a sign of life.
    if (envelope.messageType === 'HEARTBEAT' && (to === '' || to === COORDINATOR_ID)) {
      core.registry.recordLiveness(envelope.producerId, ctx);
      return { accepted: true, messageId: envelope.messageId };
    }

    let ack: AckPayload | undefined;
    let target: MessageRecord | undefined;
    let recipient = to;
    if (envelope.messageType === 'ACKNOWLEDGEMENT') {
      const parsed = parseAck(json);
      if (typeof parsed === 'string') return refused('VALIDATION_ERROR', parsed);
      ack = parsed;
      target = core.message(ack.ackForMessageId);
      if (!target && core.coordinator.ephemeralRecipient(ack.ackForMessageId) === envelope.producerId) {
        // An ACK of a heartbeat or notice: a sign of life, nothing to forward.
        core.registry.recordLiveness(envelope.producerId, ctx);
        return { accepted: true, messageId: envelope.messageId };
      }
      if (!target)
        return refused(
          'NO_ROUTE',
          `ack_for_message_id '${ack.ackForMessageId.slice(0, 80)}' is not a message this coordinator routed`,
        );
      if (target.recipientId !== envelope.producerId) {
        return refused('PERMISSION_DENIED', `only the recipient of ${target.envelope.messageId} may acknowledge it`);
      }
      if (recipient === '') {
        recipient = target.envelope.producerId;
        if (recipient !== COORDINATOR_ID && !core.registry.get(recipient)) recipient = COORDINATOR_ID;
      }
    } else if (recipient === COORDINATOR_ID && !core.handlers.takes(envelope.messageType)) {
      const takes = ['HEARTBEAT replies', 'ACKNOWLEDGEMENTs', ...core.handlers.messageTypes()].join(', ');
      return refused('UNSUPPORTED_MESSAGE_TYPE', `the coordinator takes ${takes}, not ${envelope.messageType}`);
    }
    // Tool envelopes between agents would bypass the execution policy the coordinator enforces on every call.
    if (
      TOOL_MESSAGE_TYPES.has(envelope.messageType) &&
      recipient !== COORDINATOR_ID &&
      envelope.producerId !== COORDINATOR_ID
    ) {
      return refused('VALIDATION_ERROR', TOOL_ENVELOPES_TO_COORDINATOR);
    }
    if (recipient === '' && !ack && core.options.unaddressed === 'fanout')
      return this.fanout(envelope, producer, ctx, options, now);
    if (recipient === '')
      return refused('NO_ROUTE', 'no recipient: set call metadata sw4rm-to or a top-level "to" in the JSON payload');
    if (recipient === envelope.producerId) return refused('NO_ROUTE', 'a producer never receives its own message');
    const recipientAgent = recipient === COORDINATOR_ID ? undefined : core.registry.get(recipient);
    if (!recipientAgent && recipient !== COORDINATOR_ID)
      return refused('NO_ROUTE', `no agent '${recipient.slice(0, 128)}' is registered`);
    if (
      recipientAgent &&
      !ack &&
      !modalityAccepts(recipientAgent.descriptor.modalitiesSupported, envelope.contentType)
    ) {
      return refused(
        'UNSUPPORTED_MESSAGE_TYPE',
        `${recipient} accepts ${recipientAgent.descriptor.modalitiesSupported.join(', ')}, not ${envelope.contentType}`,
      );
    }
    const expiresAt = expiry(envelope, now);
    if (expiresAt !== null && expiresAt <= now)
      return refused('TTL_EXPIRED', `ttl_ms ${envelope.ttlMs} had passed on arrival`);

    // Deduplication (RFC §11.2): by token when present, else by (producer_id, sequence_number) and, when that
    // collides, by content (a reused sequence number with other content is a distinct operation).
    let key = dedupKey(envelope);
    let previous = core.dedup.entry(envelope.producerId, key, now);
    let reusedFrom: string | undefined;
    if (previous !== undefined) {
      const reused = core.dedup.reusedSequence(envelope, key, previous, now);
      if (reused) ({ key, previous, reusedFrom } = reused);
    }
    if (previous !== undefined && previous.status !== 'retryable')
      return core.dedup.refuseRepeat(envelope, key, previous, ctx);

    if (target && ack)
      return core.acks.acceptAck(envelope, ack, target, recipient, key, previous, ctx, now, options, reusedFrom);
    // The disk budget (ACKs pass: they finish messages, which releases their payloads). An estimate, no store read.
    const overBudget = core.storeBudget.refusal(envelope.payload.byteLength);
    if (overBudget) return refused('BUFFER_FULL', overBudget, { store_budget_bytes: core.storeBudget.budget });
    // The memory budget (memoryBudget.ts): what the coordinator holds, and this payload while it is admitted.
    const overMemory = core.memory.refusal(envelope.payload.byteLength + RECORD_OVERHEAD_BYTES);
    if (overMemory) return refused('BUFFER_FULL', overMemory, { memory_budget_bytes: core.memory.budget });
    if (recipient === COORDINATOR_ID)
      return core.handlers.accept(envelope, json, key, previous, ctx, now, expiresAt, reusedFrom);

    const inbox = core.inbox(recipient);
    if (inbox.notRead.size >= core.options.capacity) {
      return refused(
        'BUFFER_FULL',
        `the inbox of ${recipient} holds ${inbox.notRead.size} messages not yet READ (capacity ${core.options.capacity})`,
        {},
        recipient,
      );
    }
    const record = core.store.transaction(() =>
      this.write(
        envelope,
        recipient,
        key,
        previous,
        reusedFrom,
        producer,
        ctx,
        now,
        expiresAt,
        '',
        options.payloadFile,
        options.ackTimeout,
      ),
    );
    core.storeBudget.added(envelope.payload.byteLength);
    this.activate(record, now, options);
    return { accepted: true, messageId: envelope.messageId };
  }

  /**
   * An unaddressed message with `unaddressed: 'fanout'`: one unicast copy for every other registered agent that
   * accepts its content type, each its own message (a new message_id; `ackFor` names the producer's message) with
   * its own lifecycle and its own outcome-cache entry `f:<recipient>:<key>`, so that a retry reaches only the
   * recipients whose copy may be retried. All copies are written in one transaction, or none (BUFFER_FULL).
   */
  private fanout(
    envelope: Envelope,
    producer: AgentRecord,
    ctx: CallContext,
    options: SendOptions,
    now: number,
  ): SendResult {
    const core = this.core;
    const expiresAt = expiry(envelope, now);
    if (expiresAt !== null && expiresAt <= now)
      return this.refuse(envelope, 'TTL_EXPIRED', `ttl_ms ${envelope.ttlMs} had passed on arrival`, ctx, {});
    const base = dedupKey(envelope);
    const targets: Array<{
      recipient: string;
      key: string;
      previous: DedupEntry | undefined;
      reusedFrom: string | undefined;
    }> = [];
    let repeat: { key: string; previous: DedupEntry } | undefined;
    for (const agent of core.registry.list()) {
      const recipient = agent.descriptor.agentId;
      if (
        recipient === envelope.producerId ||
        !modalityAccepts(agent.descriptor.modalitiesSupported, envelope.contentType)
      )
        continue;
      let key = `f:${recipient}:${base}`;
      let previous = core.dedup.entry(envelope.producerId, key, now);
      let reusedFrom: string | undefined;
      if (previous !== undefined) {
        const reused = core.dedup.reusedSequence(envelope, key, previous, now);
        if (reused) ({ key, previous, reusedFrom } = reused);
      }
      if (previous !== undefined && previous.status !== 'retryable') repeat ??= { key, previous };
      else targets.push({ recipient, key, previous, reusedFrom });
    }
    if (targets.length === 0) {
      if (repeat) return core.dedup.refuseRepeat(envelope, repeat.key, repeat.previous, ctx);
      return this.refuse(
        envelope,
        'NO_ROUTE',
        `no recipient, and no other registered agent accepts ${envelope.contentType || 'it'} for a fan-out`,
        ctx,
        {},
      );
    }
    const full = targets.find((t) => core.inbox(t.recipient).notRead.size >= core.options.capacity);
    if (full) {
      return this.refuse(
        envelope,
        'BUFFER_FULL',
        `fan-out: the inbox of ${full.recipient} holds ${core.inbox(full.recipient).notRead.size} messages not yet READ (capacity ${core.options.capacity})`,
        ctx,
        {},
        full.recipient,
      );
    }
    const overBudget = core.storeBudget.refusal(envelope.payload.byteLength * targets.length);
    if (overBudget)
      return this.refuse(envelope, 'BUFFER_FULL', `fan-out of ${targets.length} copies: ${overBudget}`, ctx, {
        store_budget_bytes: core.storeBudget.budget,
      });
    const overMemory = core.memory.refusal(envelope.payload.byteLength + RECORD_OVERHEAD_BYTES * targets.length);
    if (overMemory)
      return this.refuse(envelope, 'BUFFER_FULL', `fan-out: ${overMemory}`, ctx, {
        memory_budget_bytes: core.memory.budget,
      });
    const records = core.store.transaction(() => {
      // Copies of a file-backed payload share its file (one owner row each), no bytes copied.
      const written = targets.map((t) =>
        this.write(
          { ...envelope, messageId: core.ids.uuid() },
          t.recipient,
          t.key,
          t.previous,
          t.reusedFrom,
          producer,
          ctx,
          now,
          expiresAt,
          envelope.messageId,
          options.payloadFile,
          options.ackTimeout,
        ),
      );
      core.log.record({
        correlationId: envelope.correlationId,
        actor: envelope.producerId,
        eventType: 'message.fanned_out',
        details: {
          message_id: envelope.messageId,
          message_type: envelope.messageType,
          copies: written.map((r) => ({ to: r.recipientId, message_id: r.envelope.messageId })),
        },
      });
      return written;
    });
    core.storeBudget.added(envelope.payload.byteLength * records.length);
    for (const record of records) this.activate(record, now, options);
    return { accepted: true, messageId: envelope.messageId };
  }

  /** Writes a tracked message with its outcome-cache entry and its event. Runs inside the caller's transaction. */
  private write(
    envelope: Envelope,
    recipient: string,
    key: string,
    previous: DedupEntry | undefined,
    reusedFrom: string | undefined,
    producer: AgentRecord,
    ctx: CallContext,
    now: number,
    expiresAt: number | null,
    copyOf: string,
    payloadFile?: { readonly file: PayloadFile; owned: boolean },
    ackTimeout?: false,
  ): MessageRecord {
    const core = this.core;
    const { lane, demoted } = this.limiter.admit(envelope.producerId, producer.descriptor.communicationClass, now);
    const record: MessageRecord = {
      envelope,
      recipientId: recipient,
      dedupKey: key,
      tracked: true,
      lane,
      ackFor: copyOf,
      acceptedAt: now,
      state: 'SENT',
      errorCode: '',
      updatedAt: now,
      ackDeadline: ackTimeout === false ? null : now + core.ackTimeoutOf(recipient),
      expiresAt,
      delivery: 'queued',
      deliverySeq: null,
      deliveredAt: null,
      leaseUntil: null,
      deliveryAttempts: 0,
      history: [
        {
          at: now,
          event: 'accepted',
          detail: previous
            ? `retry of ${previous.originalMessageId}`
            : copyOf
              ? `fan-out copy of ${copyOf}`
              : undefined,
        },
      ],
    };
    if (payloadFile) {
      record.envelope = { ...envelope, payload: new Uint8Array(0) };
      record.storedPayloadBytes = payloadFile.file.bytes;
      record.payloadFile = payloadFile.file;
      payloadFile.owned = true;
    }
    const entry: DedupEntry = previous
      ? {
          ...previous,
          latestMessageId: envelope.messageId,
          attempts: [...previous.attempts, envelope.messageId],
          status: 'in_progress',
          outcomeState: '',
          errorCode: '',
          result: null,
          cachedAt: now,
          expiresAt: now + core.options.dedupWindowMs,
        }
      : {
          producerId: envelope.producerId,
          key,
          originalMessageId: envelope.messageId,
          latestMessageId: envelope.messageId,
          attempts: [envelope.messageId],
          status: 'in_progress',
          outcomeState: '',
          errorCode: '',
          result: null,
          cachedAt: now,
          expiresAt: now + core.options.dedupWindowMs,
        };
    const retrying = previous
      ? previous.attempts.map((id) => core.message(id)).filter((m): m is MessageRecord => m?.state === 'TIMED_OUT')
      : [];

    core.repo.insertMessage(record);
    core.dedup.put(entry);
    for (const earlier of retrying) {
      core.setState(earlier, 'RETRYING');
      earlier.updatedAt = now;
      earlier.history.push({ at: now, event: 'retrying', detail: `retry ${envelope.messageId}` });
      core.repo.updateMessage(earlier);
      core.live.set(earlier.envelope.messageId, earlier);
      core.transition(earlier, 'TIMED_OUT', 'RETRYING', ctx.correlationId, { retry_message_id: envelope.messageId });
    }
    core.dedup.noteReusedSequence(envelope, key, reusedFrom);
    core.log.record({
      correlationId: envelope.correlationId,
      actor: envelope.producerId,
      eventType: 'message.accepted',
      details: {
        message_id: envelope.messageId,
        to: recipient,
        message_type: envelope.messageType,
        lane,
        state: 'SENT',
        retry_of: previous?.originalMessageId,
        lane_demoted_from: demoted ? 'PRIVILEGED' : undefined,
        copy_of: copyOf || undefined,
      },
    });
    if (demoted) {
      const rejects = core.inbox(recipient).metrics.rejects;
      rejects.privileged_demoted = (rejects.privileged_demoted ?? 0) + 1;
    }
    return record;
  }

  /** A committed message enters memory: live, SENT, timers armed, queued and dispatched. */
  private activate(record: MessageRecord, now: number, options: SendOptions): void {
    const core = this.core;
    const inbox = core.inbox(record.recipientId);
    core.live.set(record.envelope.messageId, record);
    core.setState(record, 'SENT');
    observe(inbox.metrics.enqueueLatency, Math.max(0, core.clock.now() - (options.receivedAt ?? now)) / 1000);
    core.timeouts.arm(record);
    inbox.queue.push(record.lane, record);
    core.delivery.dispatch(inbox);
    core.changed.fire({ agentId: record.recipientId });
  }

  /**
   * Refuses an admission. The reject is counted against the inbox it concerns (the recipient's for BUFFER_FULL,
   * else the producer's); refusals from unregistered producers are counted under `(unregistered)`.
   */
  refuse(
    envelope: Envelope,
    code: ErrorCode,
    detail: string,
    ctx: CallContext,
    extra: Record<string, unknown>,
    inboxId?: string,
  ): SendResult {
    const core = this.core;
    const reason = `${code}: ${detail}`;
    const producer = core.registry.get(envelope.producerId ?? '');
    const rejects = core.inbox(inboxId ?? producer?.descriptor.agentId ?? '(unregistered)').metrics.rejects;
    rejects[code] = (rejects[code] ?? 0) + 1;
    core.log.record({
      correlationId: ctx.correlationId,
      actor: 'router',
      eventType: 'message.refused',
      level: 'WARN',
      details: {
        message_id: String(envelope.messageId ?? '').slice(0, 64),
        producer_id: String(envelope.producerId ?? '').slice(0, 128),
        error_code: code,
        reason: detail.slice(0, 500),
      },
    });
    // A NACK goes to the sender's stream when it has one (not persisted: the answer already carries the refusal).
    if (producer) {
      const inbox = core.inboxes.get(producer.descriptor.agentId);
      if (inbox?.sink) {
        inbox.metrics.nacks[code] = (inbox.metrics.nacks[code] ?? 0) + 1;
        const stage = code === 'DUPLICATE_DETECTED' && extra.original_status === 'FULFILLED' ? 'FULFILLED' : 'REJECTED';
        core.coordinator.sendEphemeral(inbox, 'ACKNOWLEDGEMENT', envelope.correlationId || ctx.correlationId, {
          ...nackPayload(String(envelope.messageId ?? ''), 'REJECTED', code, detail),
          ack_stage: stage,
          status: code,
          ...extra,
        });
      }
    }
    return Object.keys(extra).length > 0
      ? { accepted: false, code, reason, details: extra }
      : { accepted: false, code, reason };
  }
}
