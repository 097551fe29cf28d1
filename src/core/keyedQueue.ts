/**
 * Runs asynchronous operations one at a time per key (an agent, a repository), in the order they were asked for; an
 * operation that fails does not stop the ones after it. A key is forgotten once its queue is empty.
 */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<void>>();

  run<T>(key: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(operation);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Keys with an operation running or waiting. */
  get size(): number {
    return this.tails.size;
  }
}
