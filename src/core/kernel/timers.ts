import type { Clock } from '../clock';
import type { Disposable } from '../events';
import type { Guard } from './guard';

/**
 * Timers by key on the injected Clock (the one keyed-timer helper of the core): arming a key replaces its timer, a
 * timer that fires leaves the map before it runs, and it runs through the owner's Guard, so a fault in it is reported
 * with its key and a stopped owner's timers do nothing. Tests move time with ManualClock; nothing sleeps.
 *
 * Inside a transition, arm and disarm through the transition (`tx.arm`, `tx.disarm`): the timer then changes only
 * once the store committed, and not at all when the transaction rolled back.
 */
export class KeyedTimers<K> implements Disposable {
  private readonly timers = new Map<K, Disposable>();

  /** `context(key)`: what a fault in a timer is reported with (default the key as text). */
  constructor(
    private readonly clock: Clock,
    private readonly guard: Guard,
    private readonly context: (key: K) => string = String,
  ) {}

  /** Arms `fn` to run after `ms` under `key`, replacing the key's timer if it has one. */
  arm(key: K, ms: number, fn: () => void): void {
    this.timers.get(key)?.dispose();
    const handle = this.clock.setTimer(ms, () => {
      if (this.timers.get(key) !== handle) return;
      this.timers.delete(key);
      this.guard.run(this.context(key), fn);
    });
    this.timers.set(key, handle);
  }

  /** Disarms the key's timer, if it has one. */
  disarm(key: K): void {
    const handle = this.timers.get(key);
    if (!handle) return;
    handle.dispose();
    this.timers.delete(key);
  }

  has(key: K): boolean {
    return this.timers.has(key);
  }

  get size(): number {
    return this.timers.size;
  }

  keys(): IterableIterator<K> {
    return this.timers.keys();
  }

  /** Disarms every timer. */
  clear(): void {
    for (const handle of this.timers.values()) handle.dispose();
    this.timers.clear();
  }

  dispose(): void {
    this.clear();
  }
}
