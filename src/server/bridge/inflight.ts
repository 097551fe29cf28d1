import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';

/** In-flight `tools/call` requests one credential may have at once; a POST that would exceed it is refused 429 OVERLOADED. */
export const MAX_INFLIGHT_CALLS_PER_CREDENTIAL = 64;
/** The longest cancellation reason kept (for the abort and the log). */
const MAX_REASON_CHARS = 512;

/** A JSON-RPC request of a POST body: its id and method (`name` for a tools/call: the tool). */
export interface PostedRequest {
  readonly id: RequestId;
  readonly method: string;
  readonly tool?: string;
}

/** What McpExchange.bindResponse needs of the POST's http.ServerResponse. */
export interface ResponseLike {
  once(event: 'finish' | 'close', listener: () => void): unknown;
  destroy(): unknown;
  readonly writableFinished: boolean;
}

/** A `notifications/cancelled` of a POST body. */
export interface PostedCancel {
  readonly requestId: RequestId;
  readonly reason?: string;
}

/** The JSON-RPC requests (with an id) and cancellations in a POST body, single message or batch (array). */
export function readPost(body: unknown): { requests: PostedRequest[]; cancels: PostedCancel[] } {
  const requests: PostedRequest[] = [];
  const cancels: PostedCancel[] = [];
  for (const message of Array.isArray(body) ? body : [body]) {
    if (typeof message !== 'object' || message === null || (message as { jsonrpc?: unknown }).jsonrpc !== '2.0')
      continue;
    const { id, method, params } = message as { id?: unknown; method?: unknown; params?: unknown };
    if (typeof method !== 'string') continue;
    const p = typeof params === 'object' && params !== null ? (params as Record<string, unknown>) : {};
    if (id === undefined) {
      if (method === 'notifications/cancelled' && isRequestId(p.requestId)) {
        cancels.push({
          requestId: p.requestId,
          ...(typeof p.reason === 'string' ? { reason: p.reason.slice(0, MAX_REASON_CHARS) } : {}),
        });
      }
    } else if (isRequestId(id)) {
      requests.push({
        id,
        method,
        ...(method === 'tools/call' && typeof p.name === 'string' ? { tool: p.name.slice(0, 128) } : {}),
      });
    }
  }
  return { requests, cancels };
}

function isRequestId(value: unknown): value is RequestId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value));
}

/** A JSON-RPC id as a map key: `1` and `"1"` are different requests. */
function keyOf(id: RequestId): string {
  return `${typeof id}:${String(id)}`;
}

/**
 * The stateless transport of one POST, telling its exchange each response it sends (a request is answered: a late
 * cancellation of it changes nothing).
 */
class ExchangeTransport extends StreamableHTTPServerTransport {
  constructor(private readonly exchange: McpExchange) {
    super({ sessionIdGenerator: undefined });
  }

  override async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const answered = 'id' in message && ('result' in message || 'error' in message) ? message.id : undefined;
    if (answered !== undefined && answered !== null) this.exchange.answering(answered);
    await super.send(message, options);
    if (answered !== undefined && answered !== null) this.exchange.answered(answered);
  }
}

/**
 * One POST to `/mcp`: its requests, which of them are still unanswered, and how to cancel one. The bridge is stateless
 * (a fresh SDK Server and transport per POST), so the client's `notifications/cancelled` arrives in another POST at
 * another Server, whose SDK Protocol knows nothing of the call. `cancel` hands the notification to THIS POST's Server,
 * through its transport's `onmessage`, as the transport would have delivered it: the SDK's own cancellation handling
 * aborts that one request handler's AbortSignal (the tool's `signal`) with the reason, and the SDK then sends no
 * response for it (the MCP spec: the receiver SHOULD NOT answer a cancelled request). Once no request of the POST is
 * left unanswered, the transport is closed: that ends the pending HTTP response (the SSE stream ends without a
 * message; a POST's stream is not resumable here, so the SDK client does not reconnect) and releases the Server.
 * A cancellation that arrives before the transport handed the request to the Server is delivered right after it.
 */
export class McpExchange {
  readonly transport: StreamableHTTPServerTransport;
  private readonly unanswered = new Map<string, PostedRequest>();
  private readonly delivered = new Set<string>();
  private readonly cancelOnDelivery = new Map<string, string | undefined>();
  private cancelledAny = false;
  private closing = false;
  /** The requests whose response went into the POST's response stream. */
  private readonly sent = new Set<string>();
  /** Whether the POST's HTTP response finished (true) or closed unfinished (false): bindResponse. */
  private ended: Promise<boolean> = Promise.resolve(false);
  /** Told when a request of this exchange ends (answered or cancelled): the in-flight map forgets it. */
  onEnded: (id: RequestId) => void = () => undefined;

  constructor(readonly requests: readonly PostedRequest[]) {
    for (const request of requests) this.unanswered.set(keyOf(request.id), request);
    this.transport = new ExchangeTransport(this);
  }

  /** The request `id` of this POST, if it is still unanswered. */
  pending(id: RequestId): PostedRequest | undefined {
    return this.unanswered.get(keyOf(id));
  }

  /**
   * After `server.connect(transport)`: watches the transport hand each request to the Server, so a cancellation that
   * came first is delivered right after its request (the SDK Protocol registers a request's AbortController when it
   * receives it).
   */
  watchDeliveries(): void {
    const deliver = this.transport.onmessage;
    if (deliver === undefined)
      throw new Error('McpExchange.watchDeliveries: connect the Server to the transport first');
    this.transport.onmessage = (message, extra) => {
      deliver(message, extra);
      if (!('id' in message) || !('method' in message)) return;
      const key = keyOf(message.id);
      this.delivered.add(key);
      if (this.cancelOnDelivery.has(key)) {
        const reason = this.cancelOnDelivery.get(key);
        this.cancelOnDelivery.delete(key);
        this.deliverCancel(message.id, reason);
      }
    };
  }

  /**
   * Cancels request `id` of this POST: true when it was unanswered (its handler is aborted and will not be
   * answered), false when it was answered already or is not this POST's.
   */
  cancel(id: RequestId, reason: string | undefined): boolean {
    const key = keyOf(id);
    if (this.closing || !this.unanswered.has(key)) return false;
    this.unanswered.delete(key);
    this.cancelledAny = true;
    this.onEnded(id);
    if (this.delivered.has(key)) this.deliverCancel(id, reason);
    else this.cancelOnDelivery.set(key, reason);
    this.closeWhenDone();
    return true;
  }

  /** The Server is sending the response to `id`: it is answered (from now on a cancellation of it changes nothing). */
  answering(id: RequestId): void {
    const key = keyOf(id);
    if (this.unanswered.delete(key)) this.onEnded(id);
  }

  /** A response was sent: if only cancelled requests were left, nothing more will be written, so the POST ends. */
  answered(id: RequestId): void {
    this.sent.add(keyOf(id));
    this.closeWhenDone();
  }

  /**
   * The POST's HTTP response and the signal of its credential's revocation: `written` answers from how it ends.
   * Revoked before the response finished, nothing of it counts as written; one that has answered everything and is
   * still being written (a client reading slowly) is destroyed at once: what it carried is given back.
   */
  bindResponse(res: ResponseLike, revoked: AbortSignal): void {
    this.ended = new Promise<boolean>((resolve) => {
      const onRevoked = () => {
        if (this.unanswered.size === 0 && !res.writableFinished) res.destroy();
      };
      revoked.addEventListener('abort', onRevoked, { once: true });
      const end = (finished: boolean) => {
        revoked.removeEventListener('abort', onRevoked);
        resolve(finished && !revoked.aborted);
      };
      res.once('finish', () => end(true));
      res.once('close', () => end(res.writableFinished));
    });
  }

  /**
   * Whether the response to request `id` reached the connection: true once it went into the POST's response and the
   * HTTP response then finished (every byte handed to the operating system) before any revocation; false when the
   * response closed before it finished (the client went away, the connection broke), the credential was revoked
   * first, or the POST ended without it (the call was cancelled). Node cannot tell more: bytes handed to the OS may
   * still be lost with the client.
   */
  written(id: RequestId): Promise<boolean> {
    return this.ended.then((finished) => finished && this.sent.has(keyOf(id)));
  }

  private deliverCancel(id: RequestId, reason: string | undefined): void {
    this.transport.onmessage?.({
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: id, ...(reason !== undefined ? { reason } : {}) },
    });
  }

  private closeWhenDone(): void {
    if (this.closing || !this.cancelledAny || this.unanswered.size > 0) return;
    this.closing = true;
    // The SDK Protocol runs a notification handler as a promise job: the abort (with its reason) has run by the time
    // this macrotask closes the transport (which aborts whatever is left, with no reason).
    setImmediate(() => void this.transport.close());
  }
}

/**
 * The in-flight `tools/call` requests of the bridge, per agent credential and JSON-RPC id: a `notifications/cancelled`
 * is honoured only for a call made with the same credential (another agent, or another credential of the same agent,
 * cancels nothing). Entries leave when their call is answered, cancelled or its POST closes; at most
 * `maxPerCredential` per credential.
 */
export class InflightCalls {
  private readonly byCredential = new Map<string, Map<string, McpExchange[]>>();
  private readonly counts = new Map<string, number>();
  private readonly releasers = new WeakMap<McpExchange, () => void>();

  constructor(readonly maxPerCredential = MAX_INFLIGHT_CALLS_PER_CREDENTIAL) {}

  /** In-flight calls of `credentialId`. */
  count(credentialId: string): number {
    return this.counts.get(credentialId) ?? 0;
  }

  /**
   * Tracks the exchange's `tools/call` requests for `credentialId`, all or none: false (nothing tracked) when that
   * would take the credential past the bound. Each is forgotten when it ends (the exchange's `onEnded`: answered or
   * cancelled); `release` forgets whatever is left (the POST closed).
   */
  admit(credentialId: string, exchange: McpExchange): boolean {
    const tracked = new Map<string, RequestId>();
    for (const call of exchange.requests) if (call.method === 'tools/call') tracked.set(keyOf(call.id), call.id);
    if (this.count(credentialId) + tracked.size > this.maxPerCredential) return false;
    let byId = this.byCredential.get(credentialId);
    if (byId === undefined) this.byCredential.set(credentialId, (byId = new Map()));
    for (const key of tracked.keys()) byId.set(key, [...(byId.get(key) ?? []), exchange]);
    if (tracked.size > 0) this.counts.set(credentialId, this.count(credentialId) + tracked.size);
    const forget = (key: string) => {
      if (!tracked.delete(key)) return;
      const ids = this.byCredential.get(credentialId);
      const others = ids?.get(key)?.filter((e) => e !== exchange) ?? [];
      if (others.length > 0) ids!.set(key, others);
      else ids?.delete(key);
      if (ids?.size === 0) this.byCredential.delete(credentialId);
      const left = this.count(credentialId) - 1;
      if (left > 0) this.counts.set(credentialId, left);
      else this.counts.delete(credentialId);
    };
    if (byId.size === 0) this.byCredential.delete(credentialId);
    exchange.onEnded = (id) => forget(keyOf(id));
    this.releasers.set(exchange, () => {
      for (const key of [...tracked.keys()]) forget(key);
    });
    return true;
  }

  /** Forgets whatever of the exchange is still tracked (its POST closed). */
  release(exchange: McpExchange): void {
    this.releasers.get(exchange)?.();
    this.releasers.delete(exchange);
  }

  /**
   * A `notifications/cancelled` from `credentialId`: `cancelled` (the call's handler is aborted and its POST answers
   * it no more), `unknown` (no unanswered call of this credential has that id: nothing happens), or `ambiguous` (two or
   * more of its in-flight calls have that id, e.g. two MCP clients sharing the credential: nothing is cancelled rather
   * than perhaps the wrong one). `cancelled` names the request.
   */
  cancel(
    credentialId: string,
    requestId: RequestId,
    reason: string | undefined,
  ):
    | { outcome: 'cancelled'; request: PostedRequest }
    | { outcome: 'unknown' }
    | { outcome: 'ambiguous'; count: number } {
    const list = this.byCredential.get(credentialId)?.get(keyOf(requestId)) ?? [];
    if (list.length > 1) return { outcome: 'ambiguous', count: list.length };
    const exchange = list[0];
    const request = exchange?.pending(requestId);
    if (exchange === undefined || request === undefined || !exchange.cancel(requestId, reason))
      return { outcome: 'unknown' };
    return { outcome: 'cancelled', request };
  }
}
