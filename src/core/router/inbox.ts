import type { LaneQueues } from './lanes';
import type { MessageState } from './lifecycle';
import { payloadSize, type MemoryBudget } from './memoryBudget';
import type { AgentRouterMetrics } from './metrics';
import type { InboxSink, MessageRecord } from './model';

export type { InboxSink };

export interface InboxStats {
  readonly agentId: string;
  readonly queueDepth: number;
  readonly capacity: number;
  readonly inFlight: number;
  readonly queued: number;
  readonly streaming: boolean;
  readonly lastDeliveryAt: number | null;
}

/** The states that count against an inbox's capacity. */
export const NOT_READ: ReadonlySet<MessageState> = new Set(['SENT', 'RECEIVED']);

/**
 * Deliveries written to a stream and not yet confirmed, by seq, counting tracked ones and payload bytes as they
 * come and go. While the inbox streams (`counted`), its bytes count against the memory budget: gRPC's buffers
 * hold what a slow reader has not taken yet. When the stream closes they are freed, and the deliveries wait for
 * the next stream (Delivery.attach) without counting.
 */
export class Inflight extends Map<number, MessageRecord> {
  tracked = 0;
  bytes = 0;
  private counted = false;

  constructor(private readonly memory: MemoryBudget) {
    super();
  }

  override set(seq: number, record: MessageRecord): this {
    this.forget(super.get(seq));
    if (record.tracked) this.tracked++;
    this.add(payloadSize(record));
    return super.set(seq, record);
  }

  override delete(seq: number): boolean {
    this.forget(super.get(seq));
    return super.delete(seq);
  }

  /** The inbox streams: its bytes in flight count against the memory budget. */
  count(): void {
    if (this.counted) return;
    this.counted = true;
    this.memory.inflight += this.bytes;
  }

  /** Its stream closed: the bytes are no longer in gRPC's buffers. */
  uncount(): void {
    if (!this.counted) return;
    this.counted = false;
    this.memory.inflight -= this.bytes;
  }

  private add(bytes: number): void {
    this.bytes += bytes;
    if (this.counted) this.memory.inflight += bytes;
  }

  private forget(record: MessageRecord | undefined): void {
    if (!record) return;
    if (record.tracked) this.tracked--;
    this.add(-payloadSize(record));
  }

  get untracked(): number {
    return this.size - this.tracked;
  }
}

/** One recipient's side of the router: its lanes, its unconfirmed deliveries and its stream. */
export interface Inbox {
  readonly agentId: string;
  readonly queue: LaneQueues<MessageRecord>;
  readonly inflight: Inflight;
  sink: InboxSink | undefined;
  /** The open stream's own delivery window (tracked deliveries unconfirmed at once), when it asked for one smaller than the router's. */
  window: number | undefined;
  lastSeq: number;
  /** Tracked messages admitted and not yet READ (the capacity count), by message id. */
  readonly notRead: Set<string>;
  readonly metrics: AgentRouterMetrics;
}
