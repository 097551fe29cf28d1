import type { CallContext } from '../context';
import type { Disposable } from '../events';
import type { Envelope, Refusal } from './envelope';
import { isTerminal } from './lifecycle';
import type { CoordinatorHandler, DedupEntry, MessageRecord, RouterRepository, RouterStorage } from './model';
import { COORDINATOR_ID } from './coordinatorMessages';
import type { RouterOptions } from './options';
import type { Admitting, CoordinatorEnvelopes, CoordinatorIntake, Outcomes, RouterShared, SendResult } from './parts';
import type { AgentDirectory } from '../registry/model';

/** What the coordinator's own intake uses of the router. */
export interface CoordinatorHandlersCore extends Pick<
  RouterShared,
  'log' | 'clock' | 'live' | 'message' | 'setState' | 'transition' | 'retire'
> {
  readonly store: Pick<RouterStorage, 'transaction'>;
  readonly repo: Pick<RouterRepository, 'insertMessage' | 'updateMessage'>;
  readonly registry: Pick<AgentDirectory, 'get'>;
  readonly options: Pick<RouterOptions, 'dedupWindowMs'>;
  readonly dedup: Pick<Outcomes, 'put' | 'restore' | 'noteReusedSequence' | 'reconcileSuccess'>;
  readonly admission: Pick<Admitting, 'refuse'>;
  readonly coordinator: Pick<CoordinatorEnvelopes, 'envelope' | 'persist'>;
}

/**
 * Messages addressed to the coordinator itself (e.g. HITL_INVOCATION): the components that take them, by
 * message type, and their replies, which settle the message and go back to its producer.
 */
export class CoordinatorHandlers implements CoordinatorIntake {
  private readonly handlers = new Map<string, CoordinatorHandler>();

  constructor(private readonly core: CoordinatorHandlersCore) {}

  /** Lets a component take messages of `messageType` addressed to `coordinator` (e.g. HITL_INVOCATION). */
  handle(messageType: string, handler: CoordinatorHandler): Disposable {
    this.handlers.set(messageType, handler);
    return { dispose: () => this.handlers.delete(messageType) };
  }

  takes(messageType: string): boolean {
    return this.handlers.has(messageType);
  }

  messageTypes(): IterableIterator<string> {
    return this.handlers.keys();
  }

  /**
   * A message to the coordinator: the component's handler takes it in the same transaction as the message,
   * which is READ at once (the coordinator has it) and FULFILLED when the component replies.
   */
  accept(
    envelope: Envelope,
    json: Record<string, unknown> | undefined,
    dedupKey: string,
    previous: DedupEntry | undefined,
    ctx: CallContext,
    now: number,
    expiresAt: number | null,
    reusedFrom?: string,
  ): SendResult {
    const core = this.core;
    const handler = this.handlers.get(envelope.messageType)!;
    const record: MessageRecord = {
      envelope,
      recipientId: COORDINATOR_ID,
      dedupKey,
      tracked: true,
      lane: 'STANDARD',
      ackFor: '',
      acceptedAt: now,
      state: 'READ',
      errorCode: '',
      updatedAt: now,
      ackDeadline: null,
      expiresAt: null,
      delivery: 'done',
      deliverySeq: null,
      deliveredAt: now,
      leaseUntil: null,
      deliveryAttempts: 0,
      history: [
        { at: now, event: 'accepted', detail: previous ? `retry of ${previous.originalMessageId}` : undefined },
        { at: now, event: 'read', detail: 'taken by the coordinator' },
      ],
    };
    const entry: DedupEntry = {
      producerId: envelope.producerId,
      key: dedupKey,
      originalMessageId: previous?.originalMessageId ?? envelope.messageId,
      latestMessageId: envelope.messageId,
      attempts: [...(previous?.attempts ?? []), envelope.messageId],
      status: 'in_progress',
      outcomeState: '',
      errorCode: '',
      result: null,
      cachedAt: now,
      expiresAt: now + core.options.dedupWindowMs,
    };
    // The message is written first, so that a component answering at once (an auto rule) finds it.
    const rollback = new Error('refused by the coordinator handler');
    let refusal: Refusal | undefined;
    try {
      core.store.transaction(() => {
        core.repo.insertMessage(record);
        core.live.set(envelope.messageId, record);
        core.dedup.put(entry);
        refusal = handler(envelope, json, ctx, expiresAt);
        if (refusal) throw rollback;
        core.dedup.noteReusedSequence(envelope, dedupKey, reusedFrom);
        core.log.record({
          correlationId: envelope.correlationId,
          actor: envelope.producerId,
          eventType: 'message.accepted',
          details: {
            message_id: envelope.messageId,
            to: COORDINATOR_ID,
            message_type: envelope.messageType,
            state: 'READ',
            retry_of: previous?.originalMessageId,
          },
        });
      });
    } catch (err) {
      // Rolled back: memory must not keep what the store no longer has, whether refused or faulty.
      core.live.delete(envelope.messageId);
      core.dedup.restore(previous, entry);
      if (err !== rollback) throw err;
    }
    if (refusal) return core.admission.refuse(envelope, refusal.code, refusal.detail, ctx, refusal.extra ?? {});
    return { accepted: true, messageId: envelope.messageId };
  }

  /**
   * A message addressed to the coordinator that needs no answer envelope (a provider's TOOL_RESULT frame or
   * TOOL_ERROR, taken by the tool transport; or a TOOL_CALL whose answer the coordinator already sent through
   * sendToAgent): it becomes FULFILLED, nothing goes back to its producer. `raw`, when given, is the cached result a
   * retry with the same token gets as DUPLICATE_DETECTED.
   */
  settle(messageId: string, ctx: CallContext, raw: Record<string, unknown> = {}): void {
    this.fulfil(messageId, ctx, raw, 'taken by the coordinator');
  }

  /**
   * The coordinator's answer to a message addressed to it: the message becomes FULFILLED with `reply` as the
   * cached result (a retry with the same token gets it as DUPLICATE_DETECTED), and `reply` goes to the producer
   * as a persisted envelope correlated to the message. Call inside the component's transaction.
   */
  reply(messageId: string, messageType: string, reply: Record<string, unknown>, ctx: CallContext): void {
    this.fulfil(messageId, ctx, reply, 'answered by the coordinator', (record, now) => {
      // A producer that has deregistered finds the answer in the outcome cache when it retries.
      if (this.core.registry.get(record.envelope.producerId)) {
        const envelope = this.core.coordinator.envelope(messageType, record.envelope.correlationId, reply);
        this.core.coordinator.persist(
          record.envelope.producerId,
          envelope,
          messageId,
          `${messageType} answering ${messageId}`,
          now,
        );
      }
    });
  }

  /** Ends a message addressed to the coordinator as FULFILLED with `raw` cached, then runs `answer` in the same transaction. */
  private fulfil(
    messageId: string,
    ctx: CallContext,
    raw: Record<string, unknown>,
    detail: string,
    answer?: (record: MessageRecord, now: number) => void,
  ): void {
    const core = this.core;
    const record = core.message(messageId);
    if (!record || record.recipientId !== COORDINATOR_ID || isTerminal(record.state)) return;
    const now = core.clock.now();
    core.store.transaction(() => {
      const from = record.state;
      core.setState(record, 'FULFILLED');
      record.updatedAt = now;
      record.history.push({ at: now, event: 'fulfilled', detail });
      core.repo.updateMessage(record);
      core.transition(record, from, 'FULFILLED', ctx.correlationId, {});
      core.dedup.reconcileSuccess(
        record,
        { ackForMessageId: messageId, stage: 'FULFILLED', errorCode: '', note: '', raw },
        now,
        ctx,
      );
      answer?.(record, now);
      core.retire(record);
    });
  }
}
