import { isoUtc } from '../clock';
import type { CallContext } from '../context';
import { payloadExcerpt, type Envelope } from './envelope';
import type { DeadLetter, DeadLetterFilter, MessageRecord, RouterRepository, RouterStorage } from './model';
import { dedupKey } from './deduplication';
import type { Admitting, DeadLetterChange, DeadLetterQueue, Outcomes, RouterShared, SendResult } from './parts';
import type { AgentDirectory } from '../registry/model';

export type { DeadLetterChange };

/** What the dead-letter queue uses of the router. */
export interface DeadLettersCore extends Pick<
  RouterShared,
  'log' | 'clock' | 'ids' | 'deadLettersChanged' | 'files' | 'message' | 'envelopeOf'
> {
  readonly store: Pick<RouterStorage, 'transaction' | 'afterCommit'>;
  readonly repo: Pick<
    RouterRepository,
    'addDeadLetter' | 'sharePayloadFile' | 'deadLetters' | 'deadLetterCount' | 'deadLetter' | 'markRequeued'
  >;
  readonly registry: Pick<AgentDirectory, 'get'>;
  readonly dedup: Pick<Outcomes, 'entry' | 'put'>;
  readonly admission: Pick<Admitting, 'send'>;
}

/**
 * The dead-letter queue (RFC §21): failures a retry cannot mend, kept with their diagnostic context, listed,
 * exported and requeued by the operator. Its retention runs with the router's housekeeping.
 */
export class DeadLetters implements DeadLetterQueue {
  constructor(private readonly core: DeadLettersCore) {}

  /** Dead-letters a message that has just failed. Runs inside the transaction that ended it. */
  add(record: MessageRecord, reason: string, now: number): void {
    const core = this.core;
    const file = record.payloadFile;
    // A file-backed payload is shared with the dead letter (an owner row), never copied or read whole.
    const e = file ? record.envelope : core.envelopeOf(record);
    const size = file ? file.bytes : e.payload.byteLength;
    const id = core.repo.addDeadLetter(
      {
        messageId: e.messageId,
        producerId: e.producerId,
        recipientId: record.recipientId,
        correlationId: e.correlationId,
        idempotencyToken: e.idempotencyToken,
        messageType: e.messageType,
        contentType: e.contentType,
        size,
        finalState: record.state,
        errorCode: record.errorCode,
        reason,
        attempts: record.history,
        route: {
          producer: e.producerId,
          recipient: record.recipientId,
          lane: record.lane,
          hops: ['router'],
          delivery_attempts: record.deliveryAttempts,
        },
        createdAt: record.acceptedAt,
        failedAt: now,
        excerpt: payloadExcerpt(file ? this.prefix(file.fileId) : e.payload),
      },
      e.payload,
      e,
    );
    if (file) core.repo.sharePayloadFile(id, file);
    core.log.record({
      correlationId: e.correlationId,
      actor: 'router',
      eventType: 'message.dead_lettered',
      level: 'WARN',
      details: { message_id: e.messageId, error_code: record.errorCode, reason },
    });
    // Announced once the surrounding transaction has committed (never for one that is rolled back).
    core.store.afterCommit(() => core.deadLettersChanged.fire({ kind: 'added', id }));
  }

  /** The first bytes of a payload file, for the excerpt: one small synchronous read, on a failure path only. */
  private prefix(fileId: string): Uint8Array {
    try {
      return this.core.files?.prefixSync(fileId, 1024) ?? new Uint8Array(0);
    } catch {
      return new Uint8Array(0);
    }
  }

  list(filter?: DeadLetterFilter): DeadLetter[] {
    return this.core.repo.deadLetters(filter);
  }

  count(): number {
    return this.core.repo.deadLetterCount();
  }

  /** Sends a dead letter again as a new attempt (new message_id, same token, retry_count + 1). */
  requeue(id: number, ctx: CallContext): SendResult {
    const core = this.core;
    const found = core.repo.deadLetter(id);
    if (!found) return { accepted: false, code: 'VALIDATION_ERROR', reason: `VALIDATION_ERROR: no dead letter ${id}` };
    if (found.letter.requeuedAt !== null) {
      return {
        accepted: false,
        code: 'DUPLICATE_DETECTED',
        reason: `DUPLICATE_DETECTED: dead letter ${id} was already requeued as ${found.letter.requeuedAs}`,
      };
    }
    // A file-backed payload is read here (a requeue is off the hot path) for validation; the new message shares the file.
    const file = found.payloadFile;
    if (file && !core.files)
      return {
        accepted: false,
        code: 'INTERNAL_ERROR',
        reason: `INTERNAL_ERROR: dead letter ${id} keeps its payload in a file, and the router has no payload folder`,
      };
    const original = file
      ? { ...found.envelope, payload: core.files!.readSync(file.fileId, file.bytes) }
      : found.envelope;
    if (!core.registry.get(original.producerId)) {
      return {
        accepted: false,
        code: 'PERMISSION_DENIED',
        reason: `PERMISSION_DENIED: the producer ${original.producerId} is no longer registered`,
      };
    }
    // A requeue is a retry of the same logical operation: new message_id, same token (or sequence number).
    const envelope: Envelope = { ...original, messageId: core.ids.uuid(), retryCount: original.retryCount + 1 };
    // The operator's requeue overrides the cached failure of the operation (not a success, nor one under way).
    // The key the message was admitted under: a reused sequence number or a fan-out copy has its own.
    const key = core.message(original.messageId)?.dedupKey || dedupKey(original);
    const entry = core.dedup.entry(original.producerId, key, core.clock.now());
    const overridden = entry !== undefined && entry.status === 'done' && entry.outcomeState !== 'FULFILLED';
    if (overridden) {
      entry.status = 'retryable';
      core.dedup.put(entry);
    }
    const result = core.admission.send(envelope, ctx, {
      to: found.letter.recipientId,
      ...(file ? { payloadFile: { file, owned: false } } : {}),
    });
    if (!result.accepted && overridden && entry.status === 'retryable') {
      entry.status = 'done';
      core.dedup.put(entry);
    }
    if (result.accepted) {
      core.store.transaction(() => {
        core.repo.markRequeued(id, core.clock.now(), envelope.messageId);
        core.log.record({
          correlationId: ctx.correlationId,
          actor: 'operator',
          eventType: 'dlq.requeued',
          details: { dead_letter: id, original_message_id: original.messageId, new_message_id: envelope.messageId },
        });
      });
      core.deadLettersChanged.fire({ kind: 'requeued', id });
    }
    return result;
  }

  /** A diagnostic bundle (RFC §21.1) of every dead letter matching `filter` (requeued ones included unless excluded). */
  export(filter?: DeadLetterFilter): Record<string, unknown> {
    const entries = this.core.repo.deadLetters({
      ...filter,
      includeRequeued: filter?.includeRequeued ?? true,
      limit: filter?.limit ?? Number.MAX_SAFE_INTEGER,
    });
    return { exported_at: isoUtc(this.core.clock.now()), filter: filter ?? {}, total: entries.length, entries };
  }
}
