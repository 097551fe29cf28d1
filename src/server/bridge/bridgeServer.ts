import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type * as net from 'node:net';
import * as path from 'node:path';
import type { Coordinator } from '../../core/coordinator';
import type { CallContext } from '../../core/context';
import type { Disposable } from '../../core/events';
import { CREDENTIAL_TOKEN_PREFIX, principalName } from '../../core/credentials/credentials';
import { jsonShape, MAX_JSON_DEPTH } from '../../core/json';
import { ConnectionBounds, DEFAULT_BRIDGE_CONNECTION_LIMITS, type BridgeConnectionLimits } from './connectionBounds';
import { InflightCalls, McpExchange, readPost } from './inflight';
import { createBridgeMcpServer } from './mcpServer';
import { revokedError, untilRevoked } from './revocation';
import {
  BridgeToolError,
  type BridgeCaller,
  type BridgeEndpoints,
  type BridgeHttpRoute,
  type BridgeTool,
  type BridgeToolContext,
} from './model';

/** The bridge listens on loopback only: agents on this machine reach it, nothing else does. */
export const BRIDGE_HOST = '127.0.0.1';
export { DEFAULT_BRIDGE_PORT } from './defaults';
/** The largest request body read (MCP JSON-RPC, hook JSON); larger ones are answered 413. */
export const BRIDGE_MAX_BODY_BYTES = 4 * 1024 * 1024;
/**
 * A request body with more JSON values than this (arrays, objects and commas counted) or nested deeper than
 * BRIDGE_MAX_BODY_DEPTH is refused before JSON.parse (400 VALIDATION_ERROR): parsing 4 MiB of `[{},{},…]` alone holds the
 * event loop ~200 ms (README, "Limits").
 */
export const BRIDGE_MAX_BODY_VALUES = 100_000;
/**
 * A request body's nesting at most, checked before JSON.parse (which recurses): well above MAX_JSON_DEPTH, so that
 * a tool's argument nested deeper than MAX_JSON_DEPTH inside the JSON-RPC envelope gets that tool's own answer
 * (VALIDATION_ERROR, the field named) rather than a transport error.
 */
export const BRIDGE_MAX_BODY_DEPTH = 8 * MAX_JSON_DEPTH;
/** How long a request's headers and body may take to arrive. */
export const BRIDGE_REQUEST_TIMEOUT_MS = 60_000;
/** Open connections at most (loopback agents; each MCP client keeps a few). */
export const BRIDGE_MAX_CONNECTIONS = 1024;
/**
 * An online agent's requests record its liveness (a store write) at most once per this interval, on the coordinator's
 * Clock: far under the registry's presence debounce (30 s), so a polling agent stays online without a write per request.
 */
export const BRIDGE_LIVENESS_INTERVAL_MS = 5_000;
export const MCP_PATH = '/mcp';
export const HOOK_PATH = '/hooks/pre-tool-use';
/** The bundled entry points beside the extension's and the CLI's bundles (esbuild.mjs). */
export const STDIO_ENTRY = 'sw4rm-mcp.js';
export const HOOK_ENTRY = 'sw4rm-hook.js';

export interface BridgeServerOptions {
  readonly coordinator: Coordinator;
  /** What `/mcp` serves (BRIDGE_TOOLS). */
  readonly tools: readonly BridgeTool[];
  /** The other routes (HOOK_ROUTES), dispatched by method and exact path. */
  readonly routes: readonly BridgeHttpRoute[];
  /** 0 = any free port; a busy port falls back to a free one (logged `bridge.port_fallback`). */
  readonly port: number;
  /** The gRPC address SDK agents use (BridgeEndpoints.grpcAddress). */
  readonly grpcAddress: string;
  /** Where sw4rm-mcp.js and sw4rm-hook.js are; default the directory of the running bundle (dist/). */
  readonly distDir?: string;
  /** Tool calls in progress per agent credential at most (default MAX_INFLIGHT_CALLS_PER_CREDENTIAL); beyond: 429 OVERLOADED. */
  readonly maxInflightCallsPerCredential?: number;
  /** Bounds on unauthenticated connections (default DEFAULT_BRIDGE_CONNECTION_LIMITS). */
  readonly connectionLimits?: BridgeConnectionLimits;
}

/** A refusal before any tool or route runs: an HTTP status and a SW4RM code, answered as JSON. */
interface Refusal {
  readonly status: number;
  readonly code: string;
  readonly message: string;
}

class BodyTooLarge extends Error {}

/** The HTTP status of a route's BridgeToolError (any other code: 400). */
const STATUS_OF_CODE: Readonly<Record<string, number>> = {
  UNAUTHENTICATED: 401,
  PERMISSION_DENIED: 403,
  NOT_FOUND: 404,
  FAILED_PRECONDITION: 409,
  ALREADY_EXISTS: 409,
  OVERLOADED: 429,
  BUFFER_FULL: 429,
  DEADLINE_EXCEEDED: 504,
  INTERNAL_ERROR: 500,
};

/**
 * The MCP bridge's HTTP door (README, "The MCP bridge"): a node:http server on 127.0.0.1. Every request is checked
 * in this order: Host and Origin (DNS rebinding: 403), exactly one `Authorization: Bearer <agent credential>` (401
 * for anything else, logged `auth.unauthenticated`), the body (≤ 4 MiB: 413; JSON: 400). Then the agent's liveness
 * is recorded (recordLiveness: at most once per BRIDGE_LIVENESS_INTERVAL_MS while it is online) and the request is
 * served: `/mcp` by a fresh MCP server and stateless Streamable HTTP transport per request (createBridgeMcpServer), any
 * other route from `routes`; unknown paths 404.
 */
export class BridgeServer {
  private readonly server: http.Server;
  private boundPort = 0;
  private readonly distDir: string;
  private closed = false;
  /** The `tools/call` requests being served, per credential and JSON-RPC id: what a `notifications/cancelled` aborts. */
  private readonly inflight: InflightCalls;
  /** Unauthenticated and header timeouts, the per-address bound (README "Limits"). */
  private readonly bounds: ConnectionBounds;
  /** credential id → the requests authenticated with it and still open: aborted when the credential is revoked. */
  private readonly live = new Map<string, Set<AbortController>>();
  private readonly revocations: Disposable;

  constructor(private readonly options: BridgeServerOptions) {
    this.distDir = options.distDir ?? __dirname;
    this.inflight = new InflightCalls(options.maxInflightCallsPerCredential);
    // The request (headers and body) must arrive within a minute; the answer may take as long as its tool waits.
    this.server = http.createServer({ requestTimeout: BRIDGE_REQUEST_TIMEOUT_MS }, (req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (err instanceof BridgeToolError) {
          if (!res.headersSent)
            refuse(res, { status: STATUS_OF_CODE[err.code] ?? 400, code: err.code, message: err.message });
          else res.end();
          return;
        }
        options.coordinator.log.internalError('bridge', options.coordinator.ids.uuid(), err, {
          path: safePath(req.url),
        });
        if (!res.headersSent)
          sendJson(res, 500, {
            error: { code: 'INTERNAL_ERROR', message: err instanceof Error ? err.message : String(err) },
          });
        else res.end();
      });
    });
    this.server.maxConnections = BRIDGE_MAX_CONNECTIONS;
    const { coordinator } = options;
    this.bounds = new ConnectionBounds(
      options.connectionLimits ?? DEFAULT_BRIDGE_CONNECTION_LIMITS,
      coordinator.clock,
      (counts) => {
        coordinator.log.record({
          correlationId: coordinator.ids.uuid(),
          actor: 'bridge',
          eventType: 'bridge.connections_dropped',
          level: 'WARN',
          details: { ...counts },
        });
      },
    );
    // prependListener: tracked before Node's own handler can close or parse anything.
    this.server.prependListener('connection', (socket: net.Socket) => this.bounds.accept(socket));
    // Node's own header timer (headersTimeout) uses real timers; ours runs on the Clock and answers 100 Continue only after auth.
    this.server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) =>
      this.server.emit('request', req, res),
    );
    this.revocations = coordinator.credentials.onDidChange((change) => {
      if (change.kind === 'revoked') this.endRequests(change.credential.id);
    });
  }

  /** Listens; answers the port bound. A busy requested port falls back to a free one (logged). */
  async start(): Promise<number> {
    const { coordinator, port } = this.options;
    try {
      this.boundPort = await this.listen(port);
    } catch (err) {
      if (port === 0 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      this.boundPort = await this.listen(0);
      coordinator.log.record({
        correlationId: coordinator.ids.uuid(),
        actor: 'bridge',
        eventType: 'bridge.port_fallback',
        level: 'WARN',
        details: { requested_port: port, port: this.boundPort, reason: `port ${port} is in use` },
      });
    }
    coordinator.log.record({
      correlationId: coordinator.ids.uuid(),
      actor: 'bridge',
      eventType: 'bridge.serving',
      details: { host: BRIDGE_HOST, port: this.boundPort, mcp_url: this.endpoints().mcpUrl },
    });
    return this.boundPort;
  }

  get port(): number {
    return this.boundPort;
  }

  /** Where a launched agent reaches the bridge. */
  endpoints(): BridgeEndpoints {
    const base = `http://${BRIDGE_HOST}:${this.boundPort}`;
    return {
      mcpUrl: `${base}${MCP_PATH}`,
      hookUrl: `${base}${HOOK_PATH}`,
      stdioCommand: [process.execPath, path.join(this.distDir, STDIO_ENTRY)],
      hookCommand: [process.execPath, path.join(this.distDir, HOOK_ENTRY)],
      grpcAddress: this.options.grpcAddress,
      commandEnv: process.versions.electron !== undefined ? { ELECTRON_RUN_AS_NODE: '1' } : {},
    };
  }

  /** Stops listening and ends every open request (a waiting read_inbox or hook stops waiting). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.revocations.dispose();
    this.bounds.dispose();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** Ends every connection now, synchronously, without answering (CoordinatorServer.abort). */
  abort(): void {
    this.closed = true;
    this.server.closeAllConnections();
    this.server.close();
  }

  private listen(port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.server.once('error', onError);
      this.server.listen(port, BRIDGE_HOST, () => {
        this.server.off('error', onError);
        resolve((this.server.address() as AddressInfo).port);
      });
    });
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { coordinator } = this.options;
    const socket = req.socket;
    this.bounds.headersComplete(socket);
    res.once('finish', () => this.bounds.answered(socket));
    const url = new URL(req.url ?? '/', 'http://bridge');
    const rebinding = this.rebindingRefusal(req);
    if (rebinding !== undefined) return refuse(res, rebinding);

    const correlationId = coordinator.ids.uuid();
    const caller = this.authenticate(req);
    if (typeof caller === 'string') {
      coordinator.credentials.recordUnauthenticated(`HTTP ${req.method ?? ''} ${url.pathname.slice(0, 256)}`, caller, {
        correlationId,
      });
      res.setHeader('WWW-Authenticate', 'Bearer');
      return refuse(res, { status: 401, code: 'UNAUTHENTICATED', message: caller });
    }
    this.bounds.markAuthenticated(socket);
    // Bound to its credential from now (no await since it was verified): revoking it ends this request at once.
    const revoked = this.bindToCredential(caller.credentialId, res);
    // `Expect: 100-continue` is answered only now, after Host, Origin and the credential passed.
    if (/^100-continue$/i.test(req.headers.expect ?? '')) res.writeContinue();
    const ctx: CallContext = { correlationId, principal: principalName({ kind: 'agent', ...caller }) };
    this.recordLiveness(caller.agentId, ctx);

    if (url.pathname === MCP_PATH) return this.serveMcp(req, res, caller, ctx, revoked);
    const route = this.options.routes.find((r) => r.path === url.pathname && r.method === req.method);
    if (route === undefined) {
      return this.options.routes.some((r) => r.path === url.pathname)
        ? refuse(res, {
            status: 405,
            code: 'METHOD_NOT_ALLOWED',
            message: `${req.method} is not served on ${url.pathname}`,
          })
        : refuse(res, {
            status: 404,
            code: 'NOT_FOUND',
            message: `no bridge endpoint at ${url.pathname.slice(0, 256)}; MCP is served at ${MCP_PATH}`,
          });
    }
    const body = await this.readJson(req, res, false, route.bodyAsText === true);
    if (body === NO_BODY) return;
    if (revoked.aborted) throw revokedError(revoked);
    // The route stops waiting when the client goes away or the credential is revoked; on revocation the request is
    // answered 401 UNAUTHENTICATED at once and whatever the route answers later is dropped.
    const signal = AbortSignal.any([abortOnEarlyClose(res), revoked]);
    const tool: BridgeToolContext = { coordinator, caller, ctx, signal };
    const answer = await untilRevoked(
      route.handle({ body, query: url.searchParams, headers: req.headers }, tool),
      revoked,
    );
    if (!res.writableEnded && !res.destroyed) sendJson(res, answer.status, answer.body);
  }

  /**
   * An AbortSignal aborted when the credential `credentialId` is revoked while the response `res` is open (README,
   * "Security model": revocation ends everything a credential started).
   */
  private bindToCredential(credentialId: string, res: http.ServerResponse): AbortSignal {
    const controller = new AbortController();
    let open = this.live.get(credentialId);
    if (open === undefined) this.live.set(credentialId, (open = new Set()));
    open.add(controller);
    res.once('close', () => {
      open.delete(controller);
      if (open.size === 0 && this.live.get(credentialId) === open) this.live.delete(credentialId);
    });
    return controller.signal;
  }

  /** The credential was revoked: every request still open under it ends now, UNAUTHENTICATED. */
  private endRequests(credentialId: string): void {
    const open = this.live.get(credentialId);
    if (open === undefined) return;
    this.live.delete(credentialId);
    const reason = new BridgeToolError('UNAUTHENTICATED', `credential ${credentialId} was revoked: this call ends`);
    for (const controller of [...open]) controller.abort(reason);
  }

  private async serveMcp(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    caller: BridgeCaller,
    ctx: CallContext,
    revoked: AbortSignal,
  ): Promise<void> {
    if (req.method !== 'POST') {
      // Stateless: no server-initiated stream (GET) and no session to end (DELETE), as the SDK's stateless examples answer.
      res.setHeader('Allow', 'POST');
      res.writeHead(405, { 'Content-Type': 'application/json' }).end(
        JSON.stringify({
          jsonrpc: '2.0',
          error: { code: -32000, message: 'Method not allowed: this stateless MCP endpoint takes POST only' },
          id: null,
        }),
      );
      return;
    }
    const body = await this.readJson(req, res, true);
    if (body === NO_BODY) return;
    const { requests, cancels } = readPost(body);
    // A cancellation reaches the call it names (an earlier POST's Server), never this POST's fresh one.
    for (const cancel of cancels) this.cancelCall(caller, cancel.requestId, cancel.reason, ctx);
    const exchange = new McpExchange(requests);
    if (!this.inflight.admit(caller.credentialId, exchange)) {
      const message =
        `OVERLOADED: agent '${caller.agentId}' has ${this.inflight.count(caller.credentialId)} tool calls in progress with this credential ` +
        `(at most ${this.inflight.maxPerCredential}); retry when some have answered`;
      res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '1' }).end(
        JSON.stringify({
          jsonrpc: '2.0',
          error: { code: -32000, message, data: { code: 'OVERLOADED', retryable: true } },
          id: requests.length === 1 ? requests[0].id : null,
        }),
      );
      return;
    }
    // A tool learns whether its answer reached the connection (BridgeToolContext.answerWritten) from how this POST's response ends.
    exchange.bindResponse(res, revoked);
    const server = createBridgeMcpServer(this.options.coordinator, this.options.tools, caller, revoked, (id) =>
      exchange.written(id),
    );
    const transport = exchange.transport;
    // Closing the server when the response closes (finished, cancelled, or the client went away) aborts every tool call
    // still running for this request: their AbortSignal fires (the SDK aborts open requests when its transport closes).
    res.on('close', () => {
      this.inflight.release(exchange);
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    exchange.watchDeliveries();
    await transport.handleRequest(req, res, body);
  }

  /**
   * A bridged agent has no heartbeat stream: each authenticated request is its heartbeat. Recorded when the agent is
   * not shown online (an unavailable or disconnected agent is online again at its first request), and otherwise at
   * most once per BRIDGE_LIVENESS_INTERVAL_MS after the registry's last one (`lastHeartbeatAt`, on the coordinator's
   * Clock: a gRPC heartbeat counts too). An agent that calls is ready (it has no
   * other way to say so): an INITIALIZING or FAILED one is reported RUNNABLE, as a gRPC agent reports it in
   * `Heartbeat.state` (FAILED goes through RECOVERING); every other state is kept.
   */
  private recordLiveness(agentId: string, ctx: CallContext): void {
    const { registry, clock } = this.options.coordinator;
    const agent = registry.get(agentId);
    if (agent === undefined) return; // not registered: nothing to keep alive (its tools say so)
    const now = clock.now();
    const last = agent.lastHeartbeatAt;
    if (agent.state === 'INITIALIZING' || agent.state === 'FAILED_STATE')
      registry.heartbeat(agentId, 'RUNNABLE', { ...agent.health }, ctx);
    else if (agent.presence !== 'online' || last === null || now - last >= BRIDGE_LIVENESS_INTERVAL_MS || now < last)
      registry.recordLiveness(agentId, ctx);
  }

  /**
   * A client's `notifications/cancelled` for request `requestId`: the tool call of that id made with the SAME
   * credential, still running, is aborted (its signal fires: request_decision detaches, read_inbox stops waiting) and
   * its POST ends without an answer (McpExchange.cancel). An id of no running call of this credential changes nothing.
   */
  private cancelCall(
    caller: BridgeCaller,
    requestId: string | number,
    reason: string | undefined,
    ctx: CallContext,
  ): void {
    const { coordinator } = this.options;
    const result = this.inflight.cancel(caller.credentialId, requestId, reason);
    if (result.outcome === 'unknown') return;
    coordinator.log.record(
      result.outcome === 'cancelled'
        ? {
            correlationId: ctx.correlationId,
            actor: caller.agentId,
            eventType: 'bridge.call_cancelled',
            details: {
              agent_id: caller.agentId,
              request_id: requestId,
              tool: result.request.tool ?? null,
              reason: reason ?? null,
            },
          }
        : {
            correlationId: ctx.correlationId,
            actor: caller.agentId,
            eventType: 'bridge.cancel_ambiguous',
            level: 'WARN',
            details: {
              agent_id: caller.agentId,
              request_id: requestId,
              calls: result.count,
              reason: reason ?? null,
              note: 'more than one running tool call of this credential has this request id (two MCP clients sharing the credential?): none was cancelled',
            },
          },
    );
  }

  /** Host must name this server on loopback (not a rebound DNS name); a browser Origin must be loopback too. */
  private rebindingRefusal(req: http.IncomingMessage): Refusal | undefined {
    const host = req.headers.host;
    const allowed = [`${BRIDGE_HOST}:${this.boundPort}`, `localhost:${this.boundPort}`];
    if (host === undefined || !allowed.includes(host.toLowerCase())) {
      return { status: 403, code: 'PERMISSION_DENIED', message: `Host header must be ${allowed.join(' or ')}` };
    }
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== 'null' && !isLoopbackOrigin(origin)) {
      return {
        status: 403,
        code: 'PERMISSION_DENIED',
        message: 'requests from web pages are refused: the Origin is not loopback',
      };
    }
    if (origin === 'null')
      return { status: 403, code: 'PERMISSION_DENIED', message: 'requests from web pages are refused: opaque Origin' };
    return undefined;
  }

  /** The agent the request's credential acts as, or why it acts as none. */
  private authenticate(req: http.IncomingMessage): BridgeCaller | string {
    let count = 0;
    let value = '';
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      if (req.rawHeaders[i].toLowerCase() === 'authorization') {
        count++;
        value = req.rawHeaders[i + 1];
      }
    }
    if (count === 0)
      return 'missing credentials: send `Authorization: Bearer <token>` with the agent credential from SW4RM_TOKEN';
    if (count > 1) return 'more than one Authorization header: send exactly one `Authorization: Bearer <token>`';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(value);
    if (!match) return 'malformed Authorization header: expected `Bearer <token>`';
    const token = match[1];
    if (!token.startsWith(CREDENTIAL_TOKEN_PREFIX)) {
      return "the bridge accepts agent credentials only (not the operator token): use the agent's own SW4RM_TOKEN";
    }
    const principal = this.options.coordinator.credentials.verify(token);
    if (typeof principal === 'string')
      return `${principal}: use a current agent credential (SW4RM_TOKEN) of this coordinator`;
    if (principal.kind !== 'agent') {
      return `the bridge accepts agent credentials only (this is ${principal.kind === 'enrolment' ? 'an enrolment credential' : 'the operator token'}): mint the agent a credential of its own`;
    }
    return { agentId: principal.agentId, credentialId: principal.credentialId };
  }

  /**
   * The request body as JSON (at most BRIDGE_MAX_BODY_BYTES), or its text (`asText`, shape checked: the route parses
   * it), or NO_BODY once a refusal was answered. An empty body is `undefined` for routes. For `/mcp` a parse error is a JSON-RPC parse error, as the SDK answers one.
   */
  private async readJson(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    jsonRpc = false,
    asText = false,
  ): Promise<unknown> {
    const declared = Number(req.headers['content-length'] ?? 0);
    let text: string;
    try {
      if (declared > BRIDGE_MAX_BODY_BYTES) throw new BodyTooLarge();
      text = await readBody(req, BRIDGE_MAX_BODY_BYTES);
    } catch (err) {
      if (!(err instanceof BodyTooLarge)) throw err;
      res.setHeader('Connection', 'close');
      refuse(res, {
        status: 413,
        code: 'VALIDATION_ERROR',
        message: `the request body is larger than ${BRIDGE_MAX_BODY_BYTES} bytes`,
      });
      return NO_BODY;
    }
    if (text.trim() === '') return undefined;
    const shape = jsonShape(text, BRIDGE_MAX_BODY_DEPTH, BRIDGE_MAX_BODY_VALUES);
    if (shape.depth > BRIDGE_MAX_BODY_DEPTH || shape.values > BRIDGE_MAX_BODY_VALUES) {
      const why =
        shape.depth > BRIDGE_MAX_BODY_DEPTH
          ? `the request body nests deeper than ${BRIDGE_MAX_BODY_DEPTH} levels (JSON depth limit)`
          : `the request body holds more than ${BRIDGE_MAX_BODY_VALUES} JSON values`;
      if (jsonRpc) {
        res
          .writeHead(400, { 'Content-Type': 'application/json' })
          .end(
            JSON.stringify({ jsonrpc: '2.0', error: { code: -32600, message: `Invalid Request: ${why}` }, id: null }),
          );
      } else {
        refuse(res, { status: 400, code: 'VALIDATION_ERROR', message: why });
      }
      return NO_BODY;
    }
    if (asText) return text;
    try {
      return JSON.parse(text) as unknown;
    } catch (err) {
      const why = `the request body is not JSON: ${(err as Error).message}`;
      if (jsonRpc) {
        res
          .writeHead(400, { 'Content-Type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32700, message: `Parse error: ${why}` }, id: null }));
      } else {
        refuse(res, { status: 400, code: 'VALIDATION_ERROR', message: why });
      }
      return NO_BODY;
    }
  }
}

const NO_BODY = Symbol('no body');

function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        done = true;
        req.resume();
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!done) {
        done = true;
        resolve(Buffer.concat(chunks).toString('utf8'));
      }
    });
    req.on('error', (err) => {
      if (!done) {
        done = true;
        reject(err);
      }
    });
  });
}

/** Aborted when the response closes before it was finished (the client went away): a waiting route stops waiting. */
function abortOnEarlyClose(res: http.ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort(new Error('the HTTP request closed'));
  });
  return controller.signal;
}

function isLoopbackOrigin(origin: string): boolean {
  try {
    const { protocol, hostname } = new URL(origin);
    if (protocol !== 'http:' && protocol !== 'https:') return false;
    return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
  } catch {
    return false;
  }
}

function safePath(url: string | undefined): string {
  return (url ?? '').split('?')[0].slice(0, 256);
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body ?? null);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) }).end(text);
}

function refuse(res: http.ServerResponse, refusal: Refusal): void {
  sendJson(res, refusal.status, { error: { code: refusal.code, message: refusal.message } });
}
