import { performance } from 'node:perf_hooks';
import type { Disposable, Event, Listener } from '../../events';
import { CoordinatorApiError, type CoordinatorApiErrorCode } from '../errors';
import { isEventName, type RemoteError, type RemotePort, type RemoteReply, type RemoteRequest } from './protocol';

/** How long one turn of this thread may spend passing replies and events on before it lets other work run. */
const SLICE_MS = 4;

interface Pending {
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: Error) => void;
}

const STOPPED_MESSAGE = 'The SW4RM coordinator is not running.';

/**
 * The other end of a RemoteServer (serve.ts): `remote<T>(name)` is an object whose methods post a call and answer
 * its Promise, and whose `onDid…` members are events, subscribed on the served side while they have a listener.
 * One generic proxy for every method: a method added to the served object needs nothing here.
 *
 * Replies are taken in arrival order, a few milliseconds' worth per turn of this thread's event loop, so a burst of
 * events never holds this thread (the editor's) for long. After `close` every pending and later call rejects with
 * CoordinatorApiError `stopped` and no event fires.
 */
export class RemoteConnection implements Disposable {
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new Map<string, Set<Listener<unknown>>>();
  private readonly remotes = new Map<string, object>();
  private nextId = 1;
  private closed: Error | undefined;
  private readonly inbox: RemoteReply[] = [];
  private draining = false;
  /** The next event of the batch at the head of `inbox`. */
  private eventCursor = 0;
  private readonly listener = (value: unknown) => this.receive(value as RemoteReply);

  constructor(private readonly port: RemotePort) {
    port.on('message', this.listener);
  }

  /** Calls not answered yet. */
  get pendingCalls(): number {
    return this.pending.size;
  }

  /** The object served under `name` on the other side, as `T`. */
  remote<T extends object>(name: string): T {
    const known = this.remotes.get(name);
    if (known) return known as T;
    const members = new Map<string, unknown>();
    const proxy = new Proxy(Object.create(null) as object, {
      get: (_, member) => {
        // Not a thenable (an `await` of the proxy is the proxy), no symbols, no Object.prototype names.
        if (typeof member !== 'string' || member === 'then' || member in Object.prototype) return undefined;
        let value = members.get(member);
        if (value === undefined) {
          value = isEventName(member)
            ? this.event(name, member)
            : (...args: unknown[]) => this.call(name, member, args);
          members.set(member, value);
        }
        return value;
      },
    });
    this.remotes.set(name, proxy);
    return proxy as T;
  }

  /** Calls `method` of the object served under `target`. */
  call(target: string, method: string, args: unknown[]): Promise<unknown> {
    if (this.closed) return Promise.reject(this.closed);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      try {
        this.post({ t: 'call', id, target, method, args });
      } catch (err) {
        this.pending.delete(id);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /**
   * Ends the connection: every pending call rejects with `why` (default CoordinatorApiError `stopped`), later
   * calls too, and no event fires. Replies still queued are dropped.
   */
  close(why: Error = new CoordinatorApiError('stopped', STOPPED_MESSAGE)): void {
    if (this.closed) return;
    this.closed = why;
    this.port.off('message', this.listener);
    this.inbox.length = 0;
    this.eventCursor = 0;
    const pending = [...this.pending.values()];
    this.pending.clear();
    this.listeners.clear();
    for (const call of pending) call.reject(why);
  }

  dispose(): void {
    this.close();
  }

  private event(target: string, name: string): Event<unknown> {
    const key = `${target}\0${name}`;
    return (listener) => {
      if (this.closed) return { dispose: () => undefined };
      let set = this.listeners.get(key);
      if (!set) {
        set = new Set();
        this.listeners.set(key, set);
        this.post({ t: 'sub', target, event: name });
      }
      // The same function twice is two subscriptions, as with an Emitter's listeners of different identity.
      const entry: Listener<unknown> = (payload) => listener(payload);
      set.add(entry);
      return {
        dispose: () => {
          const current = this.listeners.get(key);
          if (!current?.delete(entry) || current.size > 0) return;
          this.listeners.delete(key);
          if (!this.closed) this.post({ t: 'unsub', target, event: name });
        },
      };
    };
  }

  private post(request: RemoteRequest): void {
    this.port.postMessage(request);
  }

  private receive(reply: RemoteReply): void {
    if (this.closed || typeof reply !== 'object' || reply === null) return;
    this.inbox.push(reply);
    if (!this.draining) this.drain();
  }

  /** Takes replies (and the events of a batch one by one) in order for at most SLICE_MS, then lets the event loop run. */
  private drain(): void {
    this.draining = true;
    const started = performance.now();
    while (this.inbox.length > 0 && !this.closed) {
      const reply = this.inbox[0];
      if (reply.t === 'events') {
        const batch = reply.batch;
        while (this.eventCursor < batch.length && !this.closed) {
          this.deliver(batch[this.eventCursor++]);
          if (performance.now() - started > SLICE_MS) break;
        }
        if (this.eventCursor < batch.length) break;
        this.eventCursor = 0;
        this.inbox.shift();
      } else {
        this.inbox.shift();
        this.settle(reply);
      }
      if (performance.now() - started > SLICE_MS) break;
    }
    if (this.inbox.length > 0 && !this.closed) setImmediate(() => this.drain());
    else this.draining = false;
  }

  private settle(reply: Extract<RemoteReply, { t: 'result' | 'error' }>): void {
    const call = this.pending.get(reply.id);
    this.pending.delete(reply.id);
    if (reply.t === 'result') call?.resolve(reply.value);
    else call?.reject(fromRemoteError(reply.error));
  }

  private deliver([target, name, payload]: readonly [string, string, unknown]): void {
    const set = this.listeners.get(`${target}\0${name}`);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(payload);
      } catch (err) {
        console.error('[sw4rm] an event listener failed:', err);
      }
    }
  }
}

const API_ERROR_CODES: ReadonlySet<string> = new Set<CoordinatorApiErrorCode>([
  'not_found',
  'settled',
  'invalid',
  'refused',
  'stopped',
]);

/** The error the served side threw, rebuilt: a CoordinatorApiError as itself, any other as an Error of its name. */
export function fromRemoteError(remote: RemoteError): Error {
  const code = remote.fields.code;
  if (remote.name === 'CoordinatorApiError' && typeof code === 'string' && API_ERROR_CODES.has(code)) {
    const sw4rmCode = remote.fields.sw4rmCode;
    return new CoordinatorApiError(
      code as CoordinatorApiErrorCode,
      remote.message,
      typeof sw4rmCode === 'string' ? sw4rmCode : undefined,
    );
  }
  const err = new Error(remote.message);
  err.name = remote.name;
  Object.assign(err, remote.fields);
  return err;
}
