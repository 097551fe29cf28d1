/**
 * Coalesces bursts per key: the first request for a key runs `run(key)` after `delayMs`, and requests for
 * that key in the meantime are absorbed. So each key runs at most once per `delayMs`, at most `delayMs` late.
 */
export class KeyedThrottle<K> {
  private readonly pending = new Map<K, ReturnType<typeof setTimeout>>();

  constructor(private readonly delayMs: number, private readonly run: (key: K) => void) {}

  schedule(key: K): void {
    if (this.pending.has(key)) return;
    this.pending.set(key, setTimeout(() => {
      this.pending.delete(key);
      this.run(key);
    }, this.delayMs));
  }

  /** Drops every pending run. */
  cancel(): void {
    for (const timer of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
  }

  dispose(): void {
    this.cancel();
  }
}
