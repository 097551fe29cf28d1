import type { Coordinator } from '../../coordinator';
import { Emitter, type Disposable } from '../../events';
import { CoordinatorApiError } from '../errors';
import { translateError } from './translate';

/**
 * What the in-process sections share: the coordinator, the two ways a call runs, and what `dispose` releases. After
 * `dispose` (the coordinator is stopping) calls reject with CoordinatorApiError `stopped` and no event fires.
 */
export class InProcessHost implements Disposable {
  private stopped = false;
  private readonly first: Array<() => void> = [];
  private readonly subscriptions: Disposable[] = [];
  private readonly emitters: Disposable[] = [];

  constructor(readonly coordinator: Coordinator) {}

  get disposed(): boolean {
    return this.stopped;
  }

  /** Runs `work` now; its result or its error (translated for the user) is the Promise's. */
  run<T>(work: (coordinator: Coordinator) => T): Promise<T> {
    if (this.stopped)
      return Promise.reject(new CoordinatorApiError('stopped', 'The SW4RM coordinator is not running.'));
    try {
      return Promise.resolve(work(this.coordinator));
    } catch (err) {
      return Promise.reject(translateError(err));
    }
  }

  /** Starts `work` now (its synchronous part runs before this returns); its result or its error (translated) is the Promise's. */
  runAsync<T>(work: (coordinator: Coordinator) => Promise<T>): Promise<T> {
    if (this.stopped)
      return Promise.reject(new CoordinatorApiError('stopped', 'The SW4RM coordinator is not running.'));
    try {
      return work(this.coordinator).catch((err: unknown) => Promise.reject(translateError(err)));
    } catch (err) {
      return Promise.reject(translateError(err));
    }
  }

  /** A subscription to the core (or what goes with it): ended by `dispose`, after the `onDispose` work. */
  subscribe(...subscriptions: Disposable[]): void {
    this.subscriptions.push(...subscriptions);
  }

  /** An emitter of the API's own events: disposed last. */
  emitter<T>(): Emitter<T> {
    const emitter = new Emitter<T>();
    this.emitters.push(emitter);
    return emitter;
  }

  /** Work for the start of `dispose`, while the subscriptions still run (detaching the operators). */
  onDispose(fn: () => void): void {
    this.first.push(fn);
  }

  /** Stops answering: the `onDispose` work, then the subscriptions, then the emitters. The coordinator itself is not touched. */
  dispose(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const fn of this.first) fn();
    for (const subscription of this.subscriptions) subscription.dispose();
    for (const emitter of this.emitters) emitter.dispose();
  }
}
