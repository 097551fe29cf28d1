import { isoUtc } from '../clock';
import type { CallContext } from '../context';
import type { Envelope } from './envelope';
import { RETRYABLE_CODES, advances, isTerminal, type AckPayload, type MessageState } from './lifecycle';
import { observe } from './metrics';
import type { DedupEntry, MessageRecord, RouterRepository, RouterStorage } from './model';
import { COORDINATOR_ID } from './coordinatorMessages';
import type { RouterOptions } from './options';
import type {
  AckHandling,
  CoordinatorEnvelopes,
  DeadLetterQueue,
  Deadlines,
  Dispatching,
  FinishHow,
  Outcomes,
  RouterShared,
  SendOptions,
  SendResult,
} from './parts';

/** What the lifecycle uses of the router. */
export interface AckLifecycleCore extends Pick<
  RouterShared,
  'log' | 'clock' | 'live' | 'changed' | 'outbox' | 'message' | 'inbox' | 'setState' | 'transition' | 'retire'
> {
  readonly store: Pick<RouterStorage, 'transaction'>;
  readonly repo: Pick<RouterRepository, 'insertMessage' | 'updateMessage'>;
  readonly options: Pick<RouterOptions, 'dedupWindowMs'>;
  readonly dedup: Pick<Outcomes, 'entry' | 'put' | 'noteReusedSequence' | 'reconcileSuccess' | 'settleFailure'>;
  readonly delivery: Pick<Dispatching, 'dispatch' | 'confirm' | 'takeOffQueue'>;
  readonly timeouts: Pick<Deadlines, 'clear' | 'clearAll'>;
  readonly coordinator: Pick<CoordinatorEnvelopes, 'persistNack'>;
  readonly deadLetters: DeadLetterQueue;
}

/**
 * The error code recorded when the recipient ends a message without naming one (a REJECTED/FAILED ACK with no
 * error_code, or AckDelivery PERMANENT_FAILURE). INTERNAL_ERROR is kept for the coordinator's own faults.
 */
export const UNSPECIFIED_ERROR = 'ERROR_CODE_UNSPECIFIED';

/** The ACK of a fan-out copy as its producer gets it: `ack_for_message_id` is the producer's message. */
function copyAck(envelope: Envelope, ack: AckPayload, copyOf: string, copyId: string): Envelope {
  const payload = Buffer.from(
    JSON.stringify({
      ...ack.raw,
      ack_for_message_id: copyOf,
      copy_message_id: copyId,
      recipient_id: envelope.producerId,
    }),
    'utf8',
  );
  return { ...envelope, payload, contentLength: String(payload.byteLength) };
}

/**
 * The lifecycle of a tracked message (RFC §11, §11.1): protocol ACKs move it through its states, late ACKs are
 * recorded by the rules of §11.1, and every error path ends it through `finish`.
 */
export class AckLifecycle implements AckHandling {
  constructor(private readonly core: AckLifecycleCore) {}

  /** An ACKNOWLEDGEMENT from a recipient: moves the acknowledged message and forwards the ACK to its producer. */
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
  ): SendResult {
    const core = this.core;
    // An ACK of a fan-out copy reaches the producer naming the producer's own message (and the copy, the recipient).
    const copyOf = target.tracked ? target.ackFor : '';
    const forward: MessageRecord | undefined =
      recipient === COORDINATOR_ID
        ? undefined
        : {
            envelope: copyOf ? copyAck(envelope, ack, copyOf, target.envelope.messageId) : envelope,
            recipientId: recipient,
            dedupKey,
            tracked: false,
            lane: 'PRIVILEGED',
            ackFor: ack.ackForMessageId,
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
            history: [{ at: now, event: 'accepted', detail: `ACK ${ack.stage} for ${ack.ackForMessageId}` }],
          };
    const entry: DedupEntry = {
      producerId: envelope.producerId,
      key: dedupKey,
      originalMessageId: previous?.originalMessageId ?? envelope.messageId,
      latestMessageId: envelope.messageId,
      attempts: [...(previous?.attempts ?? []), envelope.messageId],
      status: 'done',
      outcomeState: 'FULFILLED',
      errorCode: '',
      result: { forwarded_to: recipient },
      cachedAt: now,
      expiresAt: now + core.options.dedupWindowMs,
    };
    core.store.transaction(() => {
      this.applyAck(target, ack, ctx, now, envelope.messageId);
      core.dedup.put(entry);
      core.dedup.noteReusedSequence(envelope, dedupKey, reusedFrom);
      if (forward) {
        core.repo.insertMessage(forward);
        core.log.record({
          correlationId: envelope.correlationId,
          actor: envelope.producerId,
          eventType: 'message.accepted',
          details: {
            message_id: envelope.messageId,
            to: recipient,
            message_type: 'ACKNOWLEDGEMENT',
            ack_for: ack.ackForMessageId,
            ack_stage: ack.stage,
          },
        });
      }
    });
    if (forward) {
      core.live.set(envelope.messageId, forward);
      const inbox = core.inbox(recipient);
      observe(inbox.metrics.enqueueLatency, Math.max(0, core.clock.now() - (options.receivedAt ?? now)) / 1000);
      inbox.queue.push(forward.lane, forward);
      core.delivery.dispatch(inbox);
    }
    core.delivery.dispatch(core.inbox(target.recipientId));
    return { accepted: true, messageId: envelope.messageId };
  }

  /** Applies one protocol ACK to the acknowledged message (RFC §11, §11.1). Runs inside a store transaction. */
  private applyAck(target: MessageRecord, ack: AckPayload, ctx: CallContext, now: number, ackMessageId: string): void {
    const core = this.core;
    const id = target.envelope.messageId;
    core.delivery.confirm(target, now, `protocol ACK ${ack.stage}`);
    const from = target.state;
    // The ACK's own message id names the ACK that caused the step (the Messages view shows it).
    target.history.push({
      at: now,
      event: `ack_${ack.stage.toLowerCase()}`,
      detail: `ACK ${ackMessageId}${ack.errorCode ? ` ${ack.errorCode}` : ''}`,
    });
    if (!target.tracked) {
      target.updatedAt = now;
      core.repo.updateMessage(target);
      return;
    }
    if (isTerminal(from)) {
      // Rule 1 (TIMED_OUT) and rule 3 (other terminal states): recorded and logged, never changing the state.
      const timedOutAt = target.history.find((h) => h.event === 'timed_out')?.at;
      core.log.record({
        correlationId: target.envelope.correlationId,
        actor: 'router',
        eventType: from === 'TIMED_OUT' ? 'message.late_ack_after_timeout' : 'message.late_ack_ignored',
        level: 'WARN',
        details: {
          message_id: id,
          state: from,
          ack_stage: ack.stage,
          timed_out_at: timedOutAt === undefined ? undefined : isoUtc(timedOutAt),
          late_ack_at: isoUtc(now),
        },
      });
      target.updatedAt = now;
      core.repo.updateMessage(target);
      if (from === 'TIMED_OUT' && ack.stage === 'FULFILLED') core.dedup.reconcileSuccess(target, ack, now, ctx);
      return;
    }
    if (from === 'RETRYING') {
      // Rule 2: record the late ACK; cancel the retry if it has not been delivered, else track both.
      const entry = core.dedup.entry(target.envelope.producerId, target.dedupKey, now);
      const retry = entry && entry.latestMessageId !== id ? core.message(entry.latestMessageId) : undefined;
      const retryUndelivered =
        retry !== undefined && retry.delivery === 'queued' && retry.deliveryAttempts === 0 && !isTerminal(retry.state);
      core.log.record({
        correlationId: target.envelope.correlationId,
        actor: 'router',
        eventType: 'message.late_ack_while_retrying',
        level: 'WARN',
        details: {
          message_id: id,
          ack_stage: ack.stage,
          retry_message_id: retry?.envelope.messageId,
          late_ack_at: isoUtc(now),
          decision: retryUndelivered
            ? 'retry cancelled, original attempt continues'
            : 'both attempts tracked, deduplicated by token',
        },
      });
      if (retryUndelivered && retry && entry) {
        this.finish(
          retry,
          'REJECTED',
          'DUPLICATE_DETECTED',
          `cancelled: the original attempt ${id} was acknowledged late`,
          ctx,
          now,
          { dlq: false, nack: false, settleDedup: false },
        );
        entry.latestMessageId = id;
        core.dedup.put(entry);
      }
    }
    if (!advances(from === 'RETRYING' ? 'SENT' : from, ack.stage)) {
      core.log.record({
        correlationId: target.envelope.correlationId,
        actor: 'router',
        eventType: 'message.ack_stale',
        level: 'WARN',
        details: { message_id: id, state: from, ack_stage: ack.stage },
      });
      target.updatedAt = now;
      core.repo.updateMessage(target);
      return;
    }
    if (ack.stage === 'REJECTED' || ack.stage === 'FAILED') {
      this.finish(
        target,
        ack.stage,
        ack.errorCode || UNSPECIFIED_ERROR,
        ack.note || `the recipient answered ${ack.stage}`,
        ctx,
        now,
        { dlq: !RETRYABLE_CODES.has(ack.errorCode), nack: false, settleDedup: true, byAck: true },
      );
      return;
    }
    const to = ack.stage as MessageState;
    core.setState(target, to);
    target.updatedAt = now;
    core.timeouts.clear(id, 'ack');
    core.timeouts.clear(id, 'ttl');
    target.ackDeadline = null;
    core.repo.updateMessage(target);
    core.transition(target, from, to, ctx.correlationId, {});
    if (to === 'FULFILLED') {
      core.dedup.reconcileSuccess(target, ack, now, ctx);
      core.retire(target);
    }
    if (target.envelope.producerId === COORDINATOR_ID) {
      core.outbox.fire({
        messageId: id,
        recipientId: target.recipientId,
        correlationId: target.envelope.correlationId,
        state: to,
        errorCode: ack.errorCode,
        note: ack.note,
        byAck: true,
        result: ack.raw.result === undefined ? '' : JSON.stringify(ack.raw.result),
      });
    }
    core.changed.fire({ agentId: target.recipientId });
  }

  /**
   * Ends a message in an error state: off the queue, the producer told (NACK), the operation's cache updated,
   * and into the DLQ when the failure is not one a retry can mend.
   */
  finish(
    record: MessageRecord,
    state: 'REJECTED' | 'FAILED' | 'TIMED_OUT',
    code: string,
    note: string,
    ctx: CallContext,
    now: number,
    how: FinishHow,
  ): void {
    const core = this.core;
    const from = record.state;
    core.setState(record, state);
    record.errorCode = code;
    record.updatedAt = now;
    record.ackDeadline = null;
    record.history.push({ at: now, event: state.toLowerCase(), detail: `${code}: ${note}` });
    if (record.delivery !== 'done') core.delivery.takeOffQueue(record);
    core.timeouts.clearAll(record.envelope.messageId);
    core.repo.updateMessage(record);
    core.transition(record, from, state, ctx.correlationId, { error_code: code, note });
    if (how.settleDedup && record.dedupKey && record.tracked)
      core.dedup.settleFailure(record, state, code, note, now, ctx);
    if (how.nack && record.tracked && record.envelope.producerId !== COORDINATOR_ID) {
      core.coordinator.persistNack(record, state, code, note, now);
    }
    if (how.dlq) core.deadLetters.add(record, note, now);
    core.retire(record);
    if (record.tracked && record.envelope.producerId === COORDINATOR_ID) {
      core.outbox.fire({
        messageId: record.envelope.messageId,
        recipientId: record.recipientId,
        correlationId: record.envelope.correlationId,
        state,
        errorCode: code,
        note,
        byAck: how.byAck === true,
        result: '',
      });
    }
    core.changed.fire({ agentId: record.recipientId });
  }
}
