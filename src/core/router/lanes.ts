import type { CommunicationClass } from '../registry/descriptor';

/** Priority lanes of RFC §7.3, one per communication class. */
export type Lane = CommunicationClass;
export const LANES: readonly Lane[] = ['PRIVILEGED', 'STANDARD', 'BULK'];

export interface LaneOptions {
  /** Weighted fair queuing: how many messages each lane may send per round while others wait. */
  readonly weights: Readonly<Record<Lane, number>>;
  /** PRIVILEGED admissions per producer per second before overflow is demoted to STANDARD. */
  readonly privilegedRatePerSecond: number;
  /** Burst allowance of the PRIVILEGED rate limit. */
  readonly privilegedBurst: number;
}

export const DEFAULT_LANE_OPTIONS: LaneOptions = {
  weights: { PRIVILEGED: 8, STANDARD: 4, BULK: 1 },
  privilegedRatePerSecond: 50,
  privilegedBurst: 20,
};

/**
 * Rate limit of the PRIVILEGED lane (RFC §7.3, §23): a token bucket per producer. A PRIVILEGED producer over
 * its rate is demoted to STANDARD for that message.
 */
export class PrivilegedRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly options: LaneOptions) {}

  /** The lane a message of `communicationClass` from `producerId` gets at time `now`. */
  admit(producerId: string, communicationClass: CommunicationClass, now: number): { lane: Lane; demoted: boolean } {
    if (communicationClass !== 'PRIVILEGED') return { lane: communicationClass, demoted: false };
    const { privilegedRatePerSecond: rate, privilegedBurst: burst } = this.options;
    const bucket = this.buckets.get(producerId) ?? { tokens: burst, at: now };
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    this.buckets.set(producerId, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { lane: 'PRIVILEGED', demoted: false };
    }
    return { lane: 'STANDARD', demoted: true };
  }
}

/**
 * Per-recipient lane queues served by deficit round robin: in every round PRIVILEGED goes first and each
 * lane may send up to its weight, so PRIVILEGED is preferred and no lane starves.
 */
export class LaneQueues<T> {
  private readonly queues: Record<Lane, T[]> = { PRIVILEGED: [], STANDARD: [], BULK: [] };
  private readonly credit: Record<Lane, number> = { PRIVILEGED: 0, STANDARD: 0, BULK: 0 };

  private readonly weights: Readonly<Record<Lane, number>>;

  constructor(weights: Readonly<Record<Lane, number>>) {
    // A lane with no weight would never be served; every lane gets at least one message a round.
    this.weights = {
      PRIVILEGED: Math.max(1, weights.PRIVILEGED),
      STANDARD: Math.max(1, weights.STANDARD),
      BULK: Math.max(1, weights.BULK),
    };
  }

  push(lane: Lane, item: T): void {
    this.queues[lane].push(item);
  }

  /** Puts an item back at the head of its lane (a delivery that must be repeated keeps its place). */
  unshift(lane: Lane, item: T): void {
    this.queues[lane].unshift(item);
  }

  remove(predicate: (item: T) => boolean): T[] {
    const removed: T[] = [];
    for (const lane of LANES) {
      this.queues[lane] = this.queues[lane].filter((item) => (predicate(item) ? (removed.push(item), false) : true));
    }
    return removed;
  }

  get size(): number {
    return this.queues.PRIVILEGED.length + this.queues.STANDARD.length + this.queues.BULK.length;
  }

  items(): T[] {
    return [...this.queues.PRIVILEGED, ...this.queues.STANDARD, ...this.queues.BULK];
  }

  /** The next item by weighted fair queuing, with the lane it came from. */
  shift(): { item: T; lane: Lane } | undefined {
    if (this.size === 0) return undefined;
    for (;;) {
      for (const lane of LANES) {
        if (this.queues[lane].length > 0 && this.credit[lane] >= 1) {
          this.credit[lane] -= 1;
          return { item: this.queues[lane].shift()!, lane };
        }
      }
      // A new round: every lane with work gets its weight; idle lanes keep no credit.
      for (const lane of LANES) this.credit[lane] = this.queues[lane].length > 0 ? this.weights[lane] : 0;
    }
  }
}
