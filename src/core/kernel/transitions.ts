import { Emitter, type Event } from '../events';
import type { Transactions } from '../store/store';
import type { Guard } from './guard';
import type { KeyedTimers } from './timers';

/**
 * An event whose listeners are told once the transaction that caused it committed (the usual kind: views, other
 * areas' reactions). Fired only through a transition (`tx.notify`), never inside a transaction.
 */
export type AfterCommit<T> = Event<T> & { readonly fires?: 'after-commit' };

/**
 * An event whose listeners run inside the transaction that caused it, with that transition: what they write commits
 * or rolls back with it, and what they announce goes through `tx` like the rest.
 */
export type InTransaction<T> = (listener: (event: T, tx: Transition) => void) => { dispose(): void };

/** The emitter of an AfterCommit event. Its `fire` is for the kernel: areas call `tx.notify(emitter, value)`. */
export class CommitEmitter<T> extends Emitter<T> {
  declare readonly event: AfterCommit<T>;
}

/** The emitter of an InTransaction event: `fire(value, tx)` inside the transition; a throw of a listener rolls it back. */
export class TransactionEmitter<T> {
  private readonly listeners = new Set<(event: T, tx: Transition) => void>();

  readonly event: InTransaction<T> = (listener) => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };

  fire(value: T, tx: Transition): void {
    for (const listener of [...this.listeners]) listener(value, tx);
  }

  dispose(): void {
    this.listeners.clear();
  }
}

/**
 * What one transition does besides its store writes, as commands (the way Temporal's SDK treats a workflow's effects):
 * the body of `Transitions.run` writes its rows, log events and envelopes inside the transaction, and hands the rest
 * to `tx`. Once the store took the transaction, and only then, the kernel installs the memory, arms and disarms the
 * timers, runs the `after` work and tells the listeners, in that order (each phase in the order given). When the
 * body throws, the store rolls its writes back and none of these happen.
 */
export interface Transition {
  /** Memory to change once the transaction is in: the memory the area reads stays as the store is until then. */
  install(fn: () => void): void;
  /** A timer to arm after the commit (replacing the key's timer). */
  arm<K>(timers: KeyedTimers<K>, key: K, ms: number, fn: () => void): void;
  /** A timer to disarm after the commit. */
  disarm<K>(timers: KeyedTimers<K>, key: K): void;
  /** Work for after the commit that is not memory (asking an engine, starting the next step): it may run a new transition. */
  after(fn: () => void): void;
  /** Listeners to tell after the commit. */
  notify<T>(emitter: CommitEmitter<T>, value: T): void;
  /** Work for once the commit is durable on disk (answers, stream writes): the store's `afterCommit`. */
  whenDurable(fn: () => void): void;
}

type Phase = 'install' | 'timers' | 'after' | 'notify';
const PHASES: readonly Phase[] = ['install', 'timers', 'after', 'notify'];

class Collected implements Transition {
  readonly effects: Record<Phase, Array<() => void>> = { install: [], timers: [], after: [], notify: [] };
  readonly durable: Array<() => void> = [];

  install(fn: () => void): void {
    this.effects.install.push(fn);
  }
  arm<K>(timers: KeyedTimers<K>, key: K, ms: number, fn: () => void): void {
    this.effects.timers.push(() => timers.arm(key, ms, fn));
  }
  disarm<K>(timers: KeyedTimers<K>, key: K): void {
    this.effects.timers.push(() => timers.disarm(key));
  }
  after(fn: () => void): void {
    this.effects.after.push(fn);
  }
  notify<T>(emitter: CommitEmitter<T>, value: T): void {
    this.effects.notify.push(() => emitter.fire(value));
  }
  whenDurable(fn: () => void): void {
    this.durable.push(fn);
  }

  /** A nested transition that succeeded: its effects join this one's, to run after the outer commit. */
  adopt(inner: Collected): void {
    for (const phase of PHASES) this.effects[phase].push(...inner.effects[phase]);
    this.durable.push(...inner.durable);
  }
}

/**
 * The transition kernel: the one way an area changes state (ARCHITECTURE.md, "the kernel"). One per area, over the
 * store's transactions and the area's Guard (which reports a fault in an effect without stopping the others).
 *
 * A `run` inside another (of any area) is nested: its writes sit under a savepoint, so a throw undoes them alone and
 * drops its effects, and the enclosing transition goes on; when it returns, its effects wait for the outer commit.
 */
export class Transitions {
  private static current: Collected | undefined;

  constructor(
    private readonly store: Transactions,
    private readonly guard: Guard,
  ) {}

  /** Runs `body` in one transaction; answers what it answered. See the class and `Transition` for what happens when. */
  run<T>(body: (tx: Transition) => T, context = 'transition'): T {
    const outer = Transitions.current;
    const tx = new Collected();
    Transitions.current = tx;
    let result: T;
    try {
      result = outer ? this.store.savepoint(() => body(tx)) : this.store.transaction(() => body(tx));
    } finally {
      Transitions.current = outer;
    }
    if (outer) {
      outer.adopt(tx);
      return result;
    }
    this.apply(tx, context);
    return result;
  }

  /** Whether a transition is open (for code that must not be called inside one). */
  static get inTransition(): boolean {
    return Transitions.current !== undefined;
  }

  private apply(tx: Collected, context: string): void {
    for (const phase of PHASES) for (const fn of tx.effects[phase]) this.guard.run(context, fn);
    for (const fn of tx.durable) this.store.afterCommit(() => this.guard.run(context, fn));
  }
}
