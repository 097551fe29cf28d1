/**
 * What crosses the MessagePort between an object served in one thread (serve.ts) and its proxy in another
 * (proxy.ts). Only plain data: the arguments and answers of the served methods and the events' payloads, which the
 * CoordinatorApi promises are records that structured clone copies.
 */

/** From the proxy's side to the served side. */
export type RemoteRequest =
  /** Calls `method` of the served object `target` with `args`; answered by a `result` or an `error` of the same id. */
  | {
      readonly t: 'call';
      readonly id: number;
      readonly target: string;
      readonly method: string;
      readonly args: unknown[];
    }
  /** The proxy has a first listener of `event` (an `onDid…` member): the served side subscribes to it. */
  | { readonly t: 'sub'; readonly target: string; readonly event: string }
  /** The proxy's last listener of `event` left. */
  | { readonly t: 'unsub'; readonly target: string; readonly event: string };

/** From the served side to the proxy's side. */
export type RemoteReply =
  | { readonly t: 'result'; readonly id: number; readonly value: unknown }
  | { readonly t: 'error'; readonly id: number; readonly error: RemoteError }
  /** Events in the order they fired, posted together once per turn of the served side's event loop. */
  | { readonly t: 'events'; readonly batch: ReadonlyArray<readonly [target: string, event: string, payload: unknown]> };

/** An error as it crosses: its class name, message and the plain fields the receiver rebuilds it from. */
export interface RemoteError {
  readonly name: string;
  readonly message: string;
  /** CoordinatorApiError's `code` and `sw4rmCode`, and any other own plain fields of the error. */
  readonly fields: Readonly<Record<string, string | number | boolean | undefined>>;
}

/** The one end of a MessagePort, a Worker or a worker's parentPort. */
export interface RemotePort {
  postMessage(value: unknown): void;
  on(event: 'message', listener: (value: unknown) => void): unknown;
  off(event: 'message', listener: (value: unknown) => void): unknown;
}

/** Whether a member name is an event of the CoordinatorApi convention (`onDidChangeAgents`…). */
export function isEventName(name: string): boolean {
  return /^onDid[A-Z]/.test(name);
}

/** An error as it crosses the port: own plain fields kept, anything else (functions, objects) left behind. */
export function toRemoteError(err: unknown): RemoteError {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err), fields: {} };
  const fields: Record<string, string | number | boolean | undefined> = {};
  for (const key of Object.keys(err)) {
    const value = (err as unknown as Record<string, unknown>)[key];
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') fields[key] = value;
  }
  // Getters of the class (CoordinatorApiError's `code` is a field; SwarmError's kind and code are getters).
  for (const key of ['code', 'sw4rmCode'] as const) {
    const value = (err as unknown as Record<string, unknown>)[key];
    if (fields[key] === undefined && (typeof value === 'string' || typeof value === 'number')) fields[key] = value;
  }
  return { name: err.name, message: err.message, fields };
}
