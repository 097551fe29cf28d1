import * as grpc from '@grpc/grpc-js';
import * as fs from 'node:fs';
import * as http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import type { Clock } from '../core/clock';
import type { Disposable } from '../core/events';
import { newHttp2Servers } from './http2Servers';
import { DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from './connectionLimits';

const { NGHTTP2_NO_ERROR } = http2.constants;

/**
 * Bounds on connections and on a request's arrival, so that connections nobody authenticated cannot hold the
 * server's file descriptors or streams (README "Limits", "Security model").
 */
/** Which connection a call came on (grpc-js's `ConnectionInfo`, not exported by name). */
export type ConnectionInfo = ReturnType<grpc.ServerInterceptingCallInterface['getConnectionInfo']>;

export { CONNECTION_LIMIT_BOUNDS, DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from './connectionLimits';

/**
 * Closes connections that stay unauthenticated for `unauthenticatedIdleMs`, and caps the number of connections with
 * the listening server's `maxConnections` (Node closes a connection beyond it as soon as it is accepted; it never
 * closes one already open, so an authenticated connection is never closed for the limit).
 *
 * Like duplicateHeaders.ts, this reads grpc-js's `http2Servers` after binding (no public handle exists) and throws at
 * start-up if a grpc-js release renames it. A call marks its connection authenticated through its public
 * `getConnectionInfo()` (remote address and port, local port), which names the session's socket.
 */
export class ConnectionGuard {
  private readonly pending = new Map<string, { session: http2.ServerHttp2Session; timer: Disposable }>();
  private readonly attached = new WeakSet<object>();
  /** Every open TCP connection, for `destroyAll`. */
  private readonly sockets = new Set<Duplex>();
  private disposed = false;

  constructor(
    private readonly limits: ConnectionLimits,
    private readonly clock: Clock,
  ) {}

  attach(server: grpc.Server): void {
    for (const http2Server of newHttp2Servers(server, this.attached, 'connections cannot be bounded')) {
      http2Server.maxConnections = this.limits.maxConnections;
      http2Server.on('connection', (socket: Duplex) => {
        this.sockets.add(socket);
        socket.once('close', () => this.sockets.delete(socket));
      });
      http2Server.prependListener('session', (session: http2.ServerHttp2Session) => this.track(session));
      http2Server.prependListener('stream', closeWhenAnswered);
    }
  }

  /** The auth interceptor let a call through on this connection: it is no longer closed for being idle. */
  markAuthenticated(info: ConnectionInfo): void {
    const key = connectionKey(info.remoteAddress, info.remotePort, info.localPort);
    const entry = this.pending.get(key);
    if (entry === undefined) return;
    entry.timer.dispose();
    this.pending.delete(key);
  }

  /** Connections opened and not yet authenticated (for tests). */
  get unauthenticated(): number {
    return this.pending.size;
  }

  /**
   * Destroys every TCP connection now, under its HTTP/2 session: the agents see their connection drop (UNAVAILABLE,
   * as after a kill) and no read of theirs reaches this thread again. CoordinatorServer.abort.
   */
  destroyAll(): void {
    for (const socket of [...this.sockets]) socket.destroy();
    this.sockets.clear();
  }

  dispose(): void {
    this.disposed = true;
    for (const { timer } of this.pending.values()) timer.dispose();
    this.pending.clear();
  }

  private track(session: http2.ServerHttp2Session): void {
    const socket = session.socket;
    if (this.disposed || socket === undefined || socket.remoteAddress === undefined) return;
    const key = connectionKey(socket.remoteAddress, socket.remotePort, socket.localPort);
    const timer = this.clock.setTimer(this.limits.unauthenticatedIdleMs, () => {
      this.pending.delete(key);
      // Destroying the session closes its socket (session.socket is a proxy that refuses destroy()).
      session.destroy();
    });
    this.pending.set(key, { session, timer });
    session.once('close', () => {
      const entry = this.pending.get(key);
      if (entry?.session !== session) return;
      entry.timer.dispose();
      this.pending.delete(key);
    });
  }
}

/**
 * Once a call's status has gone out (trailers, or a trailers-only answer) while the client is still sending, the
 * stream is reset with NO_ERROR (RFC 9113 §8.1 allows it), so that a half-sent request does not hold the stream.
 */
function closeWhenAnswered(stream: http2.ServerHttp2Stream): void {
  stream.once('finish', () => {
    setImmediate(() => {
      if (stream.destroyed || stream.closed || stream.readableEnded) return;
      const answered =
        stream.sentTrailers?.['grpc-status'] !== undefined || stream.sentHeaders?.['grpc-status'] !== undefined;
      if (answered) stream.close(NGHTTP2_NO_ERROR);
    });
  });
}

function connectionKey(
  remoteAddress: string | undefined,
  remotePort: number | undefined,
  localPort: number | undefined,
): string {
  return `${remoteAddress}|${remotePort}|${localPort}`;
}

/**
 * For unary and server-streaming calls (one request message): a stream that ends before a complete request message
 * arrived is answered INVALID_ARGUMENT (grpc-js alone answers UNIMPLEMENTED "Received no request message"), and a
 * request message that has not fully arrived within `requestBodyMs` ends the call DEADLINE_EXCEEDED. Client-streaming
 * calls are left to their handlers.
 */
export function requestBodyInterceptor(requestBodyMs: number, clock: Clock): grpc.ServerInterceptor {
  return (methodDescriptor, call) => {
    if (methodDescriptor.requestStream) return new grpc.ServerInterceptingCall(call);
    let received = false;
    let ended = false;
    let timer: Disposable | undefined;
    const finish = () => {
      ended = true;
      timer?.dispose();
      timer = undefined;
    };
    const listener = new grpc.ServerListenerBuilder()
      .withOnReceiveMessage((message, next) => {
        received = true;
        timer?.dispose();
        timer = undefined;
        next(message);
      })
      .withOnReceiveHalfClose((next) => {
        if (received) {
          next();
          return;
        }
        if (ended) return;
        finish();
        call.sendStatus({
          code: grpc.status.INVALID_ARGUMENT,
          details: `the request to ${methodDescriptor.path} ended before a complete request message arrived`,
          metadata: new grpc.Metadata(),
        });
      })
      .withOnCancel(() => finish())
      .build();
    const responder = new grpc.ResponderBuilder()
      .withStart((next) => {
        timer = clock.setTimer(requestBodyMs, () => {
          timer = undefined;
          if (received || ended) return;
          finish();
          call.sendStatus({
            code: grpc.status.DEADLINE_EXCEEDED,
            details: `the request message to ${methodDescriptor.path} did not arrive completely within ${requestBodyMs / 1000} s`,
            metadata: new grpc.Metadata(),
          });
        });
        next(listener);
      })
      .withSendStatus((status, next) => {
        finish();
        next(status);
      })
      .build();
    return new grpc.ServerInterceptingCall(call, responder);
  };
}

export interface OpenFilesLimit {
  readonly soft: number;
  readonly hard: number;
}

/**
 * The process's open-files limit (RLIMIT_NOFILE) from /proc/self/limits (Linux); undefined elsewhere or when
 * unreadable. Node itself raises its soft limit to the hard limit at start-up, and can go no higher: beyond that the
 * hard limit must be raised outside the process (limits.conf, `LimitNOFILE=`, `docker run --ulimit`).
 */
export function readOpenFilesLimit(text?: string): OpenFilesLimit | undefined {
  let limits = text;
  if (limits === undefined) {
    try {
      limits = fs.readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return undefined;
    }
  }
  const match = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(limits);
  if (!match) return undefined;
  const value = (s: string) => (s === 'unlimited' ? Infinity : Number(s));
  return { soft: value(match[1]), hard: value(match[2]) };
}

/** File descriptors the coordinator needs beside its connections (store, protos, stdio, timers…). */
const OTHER_FILES = 256;

/** A line for the CLI's start-up banner, with a warning when the soft limit is below the connection limit's needs. */
export function describeOpenFilesLimit(
  limit: OpenFilesLimit | undefined,
  maxConnections = DEFAULT_CONNECTION_LIMITS.maxConnections,
): { line: string; warning?: string } | undefined {
  if (limit === undefined) return undefined;
  const show = (n: number) => (n === Infinity ? 'unlimited' : String(n));
  const line = `# Open files limit: soft ${show(limit.soft)}, hard ${show(limit.hard)}\n`;
  const needed = maxConnections + OTHER_FILES;
  if (limit.soft >= needed) return { line };
  const raise =
    limit.hard >= needed
      ? `run \`ulimit -n ${needed}\` in the shell that starts the coordinator`
      : `the hard limit ${show(limit.hard)} is also low (Node already raised the soft limit as far as it allows): raise it outside ` +
        `the coordinator, e.g. \`nofile\` in /etc/security/limits.conf, LimitNOFILE=${needed} in a systemd unit, or ` +
        `\`docker run --ulimit nofile=${needed}:${needed}\`, then start it again`;
  return {
    line,
    warning:
      `sw4rm-coordinator: warning: the open-files soft limit ${show(limit.soft)} is below ${needed} (${maxConnections} connections + ${OTHER_FILES}); ` +
      `connections could exhaust file descriptors before the connection limit applies: ${raise}\n`,
  };
}
