import type { Disposable } from '../../events';
import { isEventName, toRemoteError, type RemotePort, type RemoteReply, type RemoteRequest } from './protocol';

/** Events whose listeners only need to hear that something changed: repeats in one batch are sent once. */
export type CoalescedEvents = ReadonlySet<string>;

/** An event member of a served object: `(listener) => Disposable`. */
type EventMember = (listener: (payload: unknown) => void) => Disposable;

/**
 * Serves objects (the CoordinatorApi, the host's controls) to a proxy in another thread over `port` (proxy.ts), by
 * name: `call` runs the method at once, in arrival order (the order of calls is the order of effects, as in
 * process), and answers what it resolves to or why it failed; `sub` subscribes to an `onDid…` event and passes its
 * payloads on. Events are posted together once per turn of this thread's event loop, and always before an answer
 * that follows them, so the other side sees an answer after the events its call caused.
 */
export class RemoteServer implements Disposable {
  private readonly targets = new Map<string, object>();
  /** Each subscribed event's subscription, by `target\0event`. */
  private readonly subscriptions: Map<string, { dispose(): void }> = new Map();
  private batch: Array<readonly [string, string, unknown]> = [];
  /** Keys of the coalesced events already in `batch`. */
  private readonly coalescedKeys = new Set<string>();
  private flushScheduled = false;
  private disposed = false;
  private readonly listener = (value: unknown) => this.receive(value as RemoteRequest);

  constructor(
    private readonly port: RemotePort,
    private readonly coalesced: CoalescedEvents = new Set(),
  ) {
    port.on('message', this.listener);
  }

  /** Serves `target` under `name` from now on (calls to a name not served yet are refused). */
  add(name: string, target: object): void {
    this.targets.set(name, target);
  }

  /** Posts the events fired so far now, instead of at the end of this turn. */
  flush(): void {
    this.flushScheduled = false;
    if (this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    this.coalescedKeys.clear();
    this.post({ t: 'events', batch });
  }

  dispose(): void {
    if (this.disposed) return;
    this.flush();
    this.disposed = true;
    this.port.off('message', this.listener);
    for (const subscription of this.subscriptions.values()) subscription.dispose();
    this.subscriptions.clear();
  }

  private receive(request: RemoteRequest): void {
    if (this.disposed || typeof request !== 'object' || request === null) return;
    switch (request.t) {
      case 'call':
        return this.call(request.id, request.target, request.method, request.args);
      case 'sub':
        return this.subscribe(request.target, request.event);
      case 'unsub': {
        const key = `${request.target}\0${request.event}`;
        this.subscriptions.get(key)?.dispose();
        this.subscriptions.delete(key);
        return;
      }
    }
  }

  private call(id: number, name: string, method: string, args: unknown[]): void {
    const target = this.targets.get(name);
    // `dispose` belongs to whoever owns the served object, never to the other side.
    const callable = target && !isEventName(method) && method !== 'dispose' && !(method in Object.prototype);
    const fn = callable ? memberOf(target, method) : undefined;
    if (typeof fn !== 'function') {
      this.answerError(id, new Error(`${name}.${method} is not something this coordinator answers`));
      return;
    }
    let result: unknown;
    try {
      result = (fn as (...a: unknown[]) => unknown).apply(target, Array.isArray(args) ? args : []);
    } catch (err) {
      this.answerError(id, err);
      return;
    }
    Promise.resolve(result).then(
      (value) => this.answer(id, method, value),
      (err: unknown) => this.answerError(id, err),
    );
  }

  private answer(id: number, method: string, value: unknown): void {
    if (this.disposed) return;
    this.flush();
    try {
      this.port.postMessage({ t: 'result', id, value } satisfies RemoteReply);
    } catch (err) {
      // A value structured clone cannot copy (a function, a class with private state): a bug of the served side,
      // reported as the answer rather than a call that never returns.
      this.answerError(id, new Error(`the answer of ${method} could not be sent to the editor: ${String(err)}`));
    }
  }

  private answerError(id: number, err: unknown): void {
    if (this.disposed) return;
    this.flush();
    this.post({ t: 'error', id, error: toRemoteError(err) });
  }

  private subscribe(name: string, event: string): void {
    const key = `${name}\0${event}`;
    if (this.subscriptions.has(key)) return;
    const target = this.targets.get(name);
    const member = target && isEventName(event) ? memberOf(target, event) : undefined;
    if (typeof member !== 'function') return;
    const coalesced = this.coalesced.has(event);
    const subscription = (member as EventMember).call(target, (payload: unknown) => {
      if (this.disposed) return;
      if (coalesced) {
        const payloadKey = `${key}\0${JSON.stringify(payload)}`;
        if (this.coalescedKeys.has(payloadKey)) return;
        this.coalescedKeys.add(payloadKey);
      }
      this.batch.push([name, event, payload]);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
    this.subscriptions.set(key, subscription);
  }

  private post(reply: RemoteReply): void {
    try {
      this.port.postMessage(reply);
    } catch (err) {
      if (reply.t !== 'events') throw err;
      // An event payload that cannot be copied: the others still go, one at a time, and the bad one is dropped.
      for (const entry of reply.batch) {
        try {
          this.port.postMessage({ t: 'events', batch: [entry] } satisfies RemoteReply);
        } catch {
          console.error(`[sw4rm] the event ${entry[0]}.${entry[1]} could not be sent to the editor`);
        }
      }
    }
  }
}

/** A member of `target` by name, own or inherited (a class's methods, the sections' members of an API). */
function memberOf(target: object, name: string): unknown {
  return (target as Record<string, unknown>)[name];
}
