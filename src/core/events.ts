/** Something that can be released. Mirrors the editor's Disposable without depending on it. */
export interface Disposable {
  dispose(): void;
}

export type Listener<T> = (event: T) => void;
export type Event<T> = (listener: Listener<T>) => Disposable;

/** A tiny typed event emitter: listeners subscribe through `event`, the owner calls `fire`. */
export class Emitter<T> implements Disposable {
  private listeners = new Set<Listener<T>>();

  readonly event: Event<T> = (listener) => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };

  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(value);
      } catch (err) {
        // A faulty listener must not stop the coordinator or the other listeners.
        console.error('[sw4rm] an event listener failed:', err);
      }
    }
  }

  dispose(): void {
    this.listeners.clear();
  }
}

/** Collects disposables and releases them together, last first. */
export class DisposableStore implements Disposable {
  private items: Disposable[] = [];
  add<T extends Disposable>(item: T): T {
    this.items.push(item);
    return item;
  }
  dispose(): void {
    for (const item of this.items.reverse()) item.dispose();
    this.items = [];
  }
}
