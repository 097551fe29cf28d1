import type { WriteStage } from './store';

/**
 * A WriteStage for a repository: writes staged by key while a transaction is open, written by `write` when the
 * store flushes (just before COMMIT) or when the repository is about to read what it staged. A key staged again
 * before the flush keeps its first value (the repository writes the key's latest state at the flush), so a row
 * written several times in one commit is written once.
 *
 * Rewinding (a savepoint rolled back) drops what was staged after the mark, and stages again what a flush after
 * the mark wrote but had been staged before it: SQLite undid that flush's writes along with the savepoint.
 */
export class WriteBuffer<K, V> implements WriteStage {
  private clock = 0;
  private pending = new Map<K, { at: number; value: V }>();
  /** Flushes since the transaction began, with what each wrote: what a rewind may have to stage again. */
  private flushes: Array<{ at: number; entries: Array<[K, { at: number; value: V }]> }> = [];

  constructor(private readonly write: (entries: ReadonlyArray<readonly [K, V]>) => void) {}

  /** Stages `key` with `value`, unless it is staged already (then its first value stays). */
  stage(key: K, value: V): void {
    if (!this.pending.has(key)) this.pending.set(key, { at: ++this.clock, value });
  }

  has(key: K): boolean {
    return this.pending.has(key);
  }

  /** The value `key` is staged with, if it is staged. */
  get(key: K): V | undefined {
    return this.pending.get(key)?.value;
  }

  get size(): number {
    return this.pending.size;
  }

  flush(): void {
    if (this.pending.size === 0) return;
    const entries = [...this.pending];
    this.pending = new Map();
    // Recorded before writing: if the write throws, the savepoint around it rewinds and stages these again.
    this.flushes.push({ at: ++this.clock, entries });
    this.write(entries.map(([key, staged]) => [key, staged.value] as const));
  }

  mark(): number {
    return ++this.clock;
  }

  rewind(mark: number): void {
    for (const [key, staged] of this.pending) if (staged.at > mark) this.pending.delete(key);
    const undone = this.flushes.filter((f) => f.at > mark);
    if (undone.length === 0) return;
    this.flushes = this.flushes.filter((f) => f.at < mark);
    for (const flush of undone)
      for (const [key, staged] of flush.entries)
        if (staged.at < mark && !this.pending.has(key)) this.pending.set(key, staged);
  }

  ended(): void {
    this.flushes = [];
  }
}
