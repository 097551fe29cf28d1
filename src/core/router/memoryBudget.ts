import { mib } from './storeUsage';
import type { MessageRecord } from './model';

/**
 * Payloads from this size live only in the store once admitted: the message in memory (its lane queue, the
 * live map) keeps an empty payload and `storedPayloadBytes`, and delivery reads the bytes back (RouterCore.envelopeOf).
 */
export const PAYLOAD_DETACH_MIN_BYTES = 4096;

/**
 * Payloads from this size are released when their message is finished with. Smaller ones stay in the message's
 * row until the retention deletes it: releasing them would free no page, and cost the hot path a write and a digest.
 */
export const PAYLOAD_RELEASE_MIN_BYTES = 4096;

/** What a message in memory costs besides its payload (record, history, envelope strings): an estimate. */
export const RECORD_OVERHEAD_BYTES = 1024;

/** What the coordinator holds in memory against its budget (RouterOptions.memoryBudgetBytes). Plain data. */
export interface MemoryUsage {
  /** Messages in memory: payloads kept there (under PAYLOAD_DETACH_MIN_BYTES) and their records. */
  readonly messages: number;
  /** Payloads written to inbox streams and not yet confirmed (gRPC's buffers hold them until sent). */
  readonly inflight: number;
  /** Large payloads being validated or written to a payload file, off the event loop. */
  readonly checking: number;
  /** Payload files read back for delivery and not yet written to their stream. */
  readonly reading: number;
  readonly used: number;
  readonly budget: number;
}

/**
 * The coordinator's memory budget. Admission refuses BUFFER_FULL when a payload would take what is held over the
 * budget; delivery writes payloads to streams only while what is in flight stays within half of it (the rest of
 * a stream's messages wait in the store), so slow readers cannot hold the whole budget and producers keep room.
 */
export class MemoryBudget {
  messages = 0;
  checking = 0;
  private inflightBytes = 0;
  private readingBytes = 0;
  /**
   * Called when bytes in flight or being read back go down (a delivery confirmed, a stream closed, a read dropped):
   * held deliveries may go on.
   */
  onInflightFreed: () => void = () => undefined;

  constructor(readonly budget: number) {}

  /** Payload files read back for delivery and not yet written to their stream (deliveryRoom counts them). */
  get reading(): number {
    return this.readingBytes;
  }

  set reading(bytes: number) {
    const freed = bytes < this.readingBytes;
    this.readingBytes = bytes;
    if (freed) this.onInflightFreed();
  }

  get inflight(): number {
    return this.inflightBytes;
  }

  set inflight(bytes: number) {
    const freed = bytes < this.inflightBytes;
    this.inflightBytes = bytes;
    if (freed) this.onInflightFreed();
  }

  get used(): number {
    return this.messages + this.inflight + this.checking + this.reading;
  }

  usage(): MemoryUsage {
    return {
      messages: this.messages,
      inflight: this.inflight,
      checking: this.checking,
      reading: this.reading,
      used: this.used,
      budget: this.budget,
    };
  }

  /** Why `incoming` more bytes would take the coordinator over its memory budget; undefined when they fit. */
  refusal(incoming: number): string | undefined {
    if (this.used + incoming <= this.budget) return undefined;
    return (
      `the coordinator holds ${mib(this.used)} of its ${mib(this.budget)} memory budget (memoryBudgetBytes, the setting ` +
      `sw4rm.memoryBudgetMiB): ${mib(this.inflight)} written to inbox streams and not yet confirmed, ${mib(this.checking)} being validated or written, ${mib(this.reading)} read back for delivery, ` +
      `${mib(this.messages)} of messages in memory; a payload of ${incoming} bytes would take it over. Retry later`
    );
  }

  /**
   * May a payload of `size` be read back and written to a stream, with `pending` bytes of the same dispatch before
   * it? What is in flight and what is being read back for delivery (`reading`, less `own`: this payload's bytes, when
   * they are read already) stay within half the budget, so that many streams starting at once do not each read a
   * 16 MB file. Always when nothing else is held, so that one payload larger than the room never waits forever.
   */
  deliveryRoom(pending: number, size: number, own = 0): boolean {
    const held = this.inflight + this.reading - own + pending;
    return held <= 0 || held + size <= this.budget / 2;
  }
}

/** The payload bytes of a message, in memory or only in the store. */
export function payloadSize(record: MessageRecord): number {
  return record.storedPayloadBytes ?? record.envelope.payload.byteLength;
}

/** What a message in memory counts against the budget. */
export function memoryCost(record: MessageRecord): number {
  return RECORD_OVERHEAD_BYTES + record.envelope.payload.byteLength;
}

/**
 * The messages not yet finished with, by id, counting what they hold in memory. A message entering it gives up
 * a payload of PAYLOAD_DETACH_MIN_BYTES or more (its bytes are in the store already: it is inserted first).
 */
export class LiveMessages extends Map<string, MessageRecord> {
  constructor(private readonly memory: MemoryBudget) {
    super();
  }

  override set(messageId: string, record: MessageRecord): this {
    const previous = super.get(messageId);
    if (previous) this.memory.messages -= memoryCost(previous);
    detachPayload(record);
    this.memory.messages += memoryCost(record);
    return super.set(messageId, record);
  }

  override delete(messageId: string): boolean {
    const previous = super.get(messageId);
    if (previous) this.memory.messages -= memoryCost(previous);
    return super.delete(messageId);
  }
}

/** Leaves a large payload to the store: the record keeps an empty payload and the size of the stored one. */
export function detachPayload(record: MessageRecord): void {
  const size = record.envelope.payload.byteLength;
  if (size < PAYLOAD_DETACH_MIN_BYTES || record.storedPayloadBytes !== undefined) return;
  record.envelope = { ...record.envelope, payload: EMPTY };
  record.storedPayloadBytes = size;
}

const EMPTY = new Uint8Array(0);
