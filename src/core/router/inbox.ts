import type { Envelope } from './envelope';
import type { LaneQueues } from './lanes';
import type { MessageState } from './lifecycle';
import type { AgentRouterMetrics } from './metrics';
import type { MessageRecord } from './model';

/** Where an agent's inbox goes while it streams. The gRPC adapter implements it. */
export interface InboxSink {
  deliver(seq: number, envelope: Envelope): void;
  /** Ends the stream: a newer stream replaced it, the agent left, or the coordinator stops. */
  close(reason: 'superseded' | 'deregistered' | 'shutdown', detail: string): void;
}

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

/** Deliveries written to a stream and not yet confirmed, by seq, counting tracked ones as they come and go. */
export class Inflight extends Map<number, MessageRecord> {
  tracked = 0;

  override set(seq: number, record: MessageRecord): this {
    const previous = super.get(seq);
    if (previous?.tracked) this.tracked--;
    if (record.tracked) this.tracked++;
    return super.set(seq, record);
  }

  override delete(seq: number): boolean {
    const previous = super.get(seq);
    if (previous?.tracked) this.tracked--;
    return super.delete(seq);
  }

  override clear(): void {
    this.tracked = 0;
    super.clear();
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
  lastSeq: number;
  /** Tracked messages admitted and not yet READ (the capacity count), by message id. */
  readonly notRead: Set<string>;
  readonly metrics: AgentRouterMetrics;
}
