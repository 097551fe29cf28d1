import { systemClock, type Clock, type Disposable } from '../core/api';

/**
 * Coalesces bursts per key: the first request for a key runs `run(key)` after `delayMs`, and requests for
 * that key in the meantime are absorbed. So each key runs at most once per `delayMs`, at most `delayMs` late.
 */
export class KeyedThrottle<K> {
  private readonly pending = new Map<K, Disposable>();

  constructor(
    private readonly delayMs: number,
    private readonly run: (key: K) => void,
    private readonly clock: Clock = systemClock,
  ) {}

  schedule(key: K): void {
    if (this.pending.has(key)) return;
    this.pending.set(
      key,
      this.clock.setTimer(this.delayMs, () => {
        this.pending.delete(key);
        this.run(key);
      }),
    );
  }

  /** Drops every pending run. */
  cancel(): void {
    for (const timer of this.pending.values()) timer.dispose();
    this.pending.clear();
  }

  dispose(): void {
    this.cancel();
  }
}
