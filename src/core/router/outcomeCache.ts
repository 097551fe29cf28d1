import type { DedupEntry } from './model';

/** Settled outcomes kept in memory; older ones are read back from the store when a retry asks for them. */
export const SETTLED_OUTCOMES_IN_MEMORY = 10_000;

/**
 * The in-memory side of the outcome cache (RFC §11.2). The store holds every entry for the deduplication
 * window; memory holds the entries of operations under way, which the router needs at once, and the most
 * recently settled ones. Keeping every settled entry for an hour would grow memory with the message rate.
 */
export class OutcomeCache {
  private readonly underWay = new Map<string, DedupEntry>();
  /** In the order they settled (or were read back); the oldest is evicted first. */
  private readonly settled = new Map<string, DedupEntry>();

  constructor(private readonly settledLimit = SETTLED_OUTCOMES_IN_MEMORY) {}

  static key(producerId: string, key: string): string {
    return `${producerId}\u0000${key}`;
  }

  get(cacheKey: string): DedupEntry | undefined {
    return this.underWay.get(cacheKey) ?? this.settled.get(cacheKey);
  }

  set(entry: DedupEntry): void {
    const cacheKey = OutcomeCache.key(entry.producerId, entry.key);
    if (entry.status === 'in_progress') {
      this.settled.delete(cacheKey);
      this.underWay.set(cacheKey, entry);
      return;
    }
    this.underWay.delete(cacheKey);
    this.settled.delete(cacheKey);
    this.settled.set(cacheKey, entry);
    if (this.settled.size > this.settledLimit) this.settled.delete(this.settled.keys().next().value!);
  }

  delete(cacheKey: string): void {
    this.underWay.delete(cacheKey);
    this.settled.delete(cacheKey);
  }

  /** Forgets settled entries whose window has passed (entries under way stay until they settle). */
  prune(now: number): void {
    for (const [cacheKey, entry] of this.settled) if (entry.expiresAt < now) this.settled.delete(cacheKey);
  }

  get size(): number {
    return this.underWay.size + this.settled.size;
  }
}
