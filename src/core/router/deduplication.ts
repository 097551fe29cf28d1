import { isoUtc } from '../clock';
import type { CallContext } from '../context';
import { contentDigest } from './contentDigest';
import type { Envelope } from './envelope';
import { RETRYABLE_CODES, isTerminal, type AckPayload } from './lifecycle';
import type { DedupEntry, MessageRecord, RouterRepository } from './model';
import type { RouterOptions } from './options';
import { OutcomeCache } from './outcomeCache';
import type { Admitting, Outcomes, ReusedSequence, RouterShared, SendResult } from './parts';

export type { ReusedSequence };

/** What deduplication uses of the router. */
export interface DeduplicationCore extends Pick<
  RouterShared,
  'log' | 'message' | 'envelopeOf' | 'setState' | 'transition' | 'retire'
> {
  readonly repo: Pick<RouterRepository, 'getDedup' | 'putDedup' | 'updateMessage'>;
  readonly options: Pick<RouterOptions, 'dedupWindowMs' | 'outcomesInMemory'>;
  readonly admission: Pick<Admitting, 'refuse'>;
}

/** The operation an envelope belongs to (RFC §11.2): its idempotency token when present, else its sequence number. */
export function dedupKey(envelope: Envelope): string {
  return envelope.idempotencyToken ? `t:${envelope.idempotencyToken}` : `s:${envelope.sequenceNumber}`;
}

export { contentDigest };

/**
 * Same operation by content: message type, content type and payload bytes; for a stored message whose payload
 * was released (finished with), its content digest. Answers undefined when there is nothing left to compare.
 */
function sameContent(
  original: MessageRecord,
  b: Envelope,
  envelopeOf: (record: MessageRecord) => Envelope,
): boolean | undefined {
  if (original.payloadReleased)
    return original.contentDigest === undefined ? undefined : original.contentDigest === contentDigest(b);
  if (original.envelope.messageType !== b.messageType || original.envelope.contentType !== b.contentType) return false;
  const size = original.storedPayloadBytes ?? original.envelope.payload.byteLength;
  if (size !== b.payload.byteLength) return false;
  const a = envelopeOf(original);
  return Buffer.from(a.payload.buffer, a.payload.byteOffset, a.payload.byteLength).equals(b.payload);
}

/** The key of a distinct operation that reused a sequence number: `<key>#<digest of its content>`. */
function contentKey(envelope: Envelope, key: string): string {
  return `${key}#${contentDigest(envelope).slice(0, 32)}`;
}

/**
 * Deduplication (RFC §11.2): the outcome cache of every logical operation, in memory (OutcomeCache) and in the
 * store, the refusal of repeated attempts, and the rules by which an operation's outcome is settled.
 */
export class Deduplication implements Outcomes {
  private readonly cache: OutcomeCache;

  constructor(private readonly core: DeduplicationCore) {
    this.cache = new OutcomeCache(core.options.outcomesInMemory);
  }

  /** The operation's entry, read back from the store when memory no longer has it; none once its window has passed. */
  entry(producerId: string, key: string, now: number): DedupEntry | undefined {
    let entry = this.cache.get(OutcomeCache.key(producerId, key));
    if (!entry) {
      entry = this.core.repo.getDedup(producerId, key);
      if (entry) this.cache.set(entry);
    }
    if (entry && entry.status !== 'in_progress' && entry.expiresAt < now) return undefined;
    return entry;
  }

  /**
   * Without an idempotency token, `(producer_id, sequence_number)` names the operation, but some producers (the
   * reference JS SDK) send the same sequence number for every message. When the key collides with `previous`,
   * the envelope is the same operation only if its content (message type, content type, payload bytes) equals
   * that of the operation's first attempt still stored; otherwise it is a distinct operation with its own key,
   * `<key>#<content digest>`, so that its own retries are caught. Answers undefined for the same operation.
   * Only called on a collision: the common path reads and hashes nothing more.
   */
  reusedSequence(envelope: Envelope, key: string, previous: DedupEntry, now: number): ReusedSequence | undefined {
    if (envelope.idempotencyToken) return undefined;
    // The first attempt still stored; with none left to compare (never stored, or pruned), the rule applies as written.
    let original: MessageRecord | undefined;
    for (const id of previous.attempts) if ((original = this.core.message(id)) !== undefined) break;
    if (original === undefined || sameContent(original, envelope, (record) => this.core.envelopeOf(record)) !== false)
      return undefined;
    const own = contentKey(envelope, key);
    const ownPrevious = this.entry(envelope.producerId, own, now);
    return { key: own, previous: ownPrevious, reusedFrom: ownPrevious ? undefined : previous.originalMessageId };
  }

  /** Logs a sequence number reused by a distinct operation (inside the admission's transaction). */
  noteReusedSequence(envelope: Envelope, key: string, reusedFrom: string | undefined): void {
    if (reusedFrom === undefined) return;
    this.core.log.record({
      correlationId: envelope.correlationId,
      actor: 'router',
      eventType: 'dedup.sequence_reused',
      level: 'WARN',
      details: {
        message_id: envelope.messageId,
        producer_id: envelope.producerId,
        sequence_number: envelope.sequenceNumber,
        key,
        original_message_id: reusedFrom,
        decision: 'different content: accepted as a distinct operation',
      },
    });
  }

  put(entry: DedupEntry): void {
    this.cache.set(entry);
    this.core.repo.putDedup(entry);
  }

  /** Undoes `put(entry)` in memory after its transaction rolled back: the previous entry again, or none. */
  restore(previous: DedupEntry | undefined, entry: DedupEntry): void {
    if (previous) this.cache.set(previous);
    else this.cache.delete(OutcomeCache.key(entry.producerId, entry.key));
  }

  /** Forgets settled outcomes in memory whose window has passed (the store's are pruned by housekeeping). */
  prune(now: number): void {
    this.cache.prune(now);
  }

  /** Refuses a new attempt of an operation that is under way or whose outcome is cached. */
  refuseRepeat(envelope: Envelope, key: string, previous: DedupEntry, ctx: CallContext): SendResult {
    const core = this.core;
    if (previous.status === 'in_progress') {
      const latest = core.message(previous.latestMessageId);
      core.log.record({
        correlationId: envelope.correlationId,
        actor: 'router',
        eventType: 'dedup.already_in_progress',
        details: {
          message_id: envelope.messageId,
          producer_id: envelope.producerId,
          key,
          original_message_id: previous.originalMessageId,
          latest_message_id: previous.latestMessageId,
        },
      });
      return core.admission.refuse(
        envelope,
        'ALREADY_IN_PROGRESS',
        `the operation is under way as ${previous.latestMessageId} (${latest?.state ?? 'unknown'})`,
        ctx,
        {
          original_message_id: previous.originalMessageId,
          latest_message_id: previous.latestMessageId,
          original_status: latest?.state ?? '',
        },
      );
    }
    const cached: Record<string, unknown> = {
      original_message_id: previous.originalMessageId,
      original_status: previous.outcomeState,
      cached_at: isoUtc(previous.cachedAt),
    };
    if (previous.outcomeState === 'FULFILLED') cached.cached_result = previous.result;
    else cached.cached_error = { error_code: previous.errorCode, ...(previous.result ?? {}) };
    core.log.record({
      correlationId: envelope.correlationId,
      actor: 'router',
      eventType: 'dedup.duplicate_detected',
      details: { message_id: envelope.messageId, producer_id: envelope.producerId, key, ...cached },
    });
    return core.admission.refuse(envelope, 'DUPLICATE_DETECTED', JSON.stringify(cached), ctx, cached);
  }

  /** Rule 4: the outcome cache reflects the earliest successful completion of the operation. */
  reconcileSuccess(target: MessageRecord, ack: AckPayload, now: number, ctx: CallContext): void {
    if (!target.dedupKey) return;
    const entry = this.entry(target.envelope.producerId, target.dedupKey, now);
    if (!entry || (entry.status === 'done' && entry.outcomeState === 'FULFILLED')) return;
    entry.status = 'done';
    entry.outcomeState = 'FULFILLED';
    entry.errorCode = '';
    entry.result = { ...ack.raw, fulfilled_message_id: target.envelope.messageId };
    entry.cachedAt = now;
    entry.expiresAt = now + this.core.options.dedupWindowMs;
    this.put(entry);
    this.core.log.record({
      correlationId: target.envelope.correlationId,
      actor: 'router',
      eventType: 'dedup.outcome_cached',
      details: {
        producer_id: entry.producerId,
        key: entry.key,
        original_message_id: entry.originalMessageId,
        fulfilled_by: target.envelope.messageId,
      },
    });
    this.settleSiblings(entry, now, ctx);
  }

  /**
   * A tracked attempt ended in an error state: the operation's outcome is cached, retryable when the code is one
   * a retry can mend, unless an attempt already fulfilled it.
   */
  settleFailure(
    record: MessageRecord,
    state: 'REJECTED' | 'FAILED' | 'TIMED_OUT',
    code: string,
    note: string,
    now: number,
    ctx: CallContext,
  ): void {
    const entry = this.entry(record.envelope.producerId, record.dedupKey, now);
    if (entry && !(entry.status === 'done' && entry.outcomeState === 'FULFILLED')) {
      entry.status = RETRYABLE_CODES.has(code) ? 'retryable' : 'done';
      entry.outcomeState = state;
      entry.errorCode = code;
      entry.result = { note };
      entry.cachedAt = now;
      entry.expiresAt = now + this.core.options.dedupWindowMs;
      this.put(entry);
      this.settleSiblings(entry, now, ctx);
    }
  }

  /** Once an operation is settled, attempts left RETRYING take their truthful terminal state. */
  private settleSiblings(entry: DedupEntry, now: number, ctx: CallContext): void {
    const core = this.core;
    for (const id of entry.attempts) {
      const sibling = core.message(id);
      const revived =
        sibling !== undefined &&
        entry.status === 'done' &&
        !isTerminal(sibling.state) &&
        sibling.state !== 'RETRYING' &&
        sibling.history.some((h) => h.event === 'timed_out');
      if (sibling && (sibling.state === 'RETRYING' || revived)) {
        const from = sibling.state;
        core.setState(sibling, 'TIMED_OUT');
        sibling.updatedAt = now;
        sibling.history.push({ at: now, event: 'settled', detail: `operation settled as ${entry.outcomeState}` });
        core.repo.updateMessage(sibling);
        core.transition(sibling, from, 'TIMED_OUT', ctx.correlationId, { settled_as: entry.outcomeState });
        core.retire(sibling);
      }
    }
  }
}
