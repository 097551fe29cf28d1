/**
 * The connection bounds (connections.ts enforces them) as plain values: the editor's settings read them without loading
 * grpc-js on the extension host's main thread.
 */
export interface ConnectionLimits {
  /** A connection (TCP or HTTP/2 session) that has not passed the auth interceptor with a call within this is closed. */
  readonly unauthenticatedIdleMs: number;
  /** At most this many connections at once per listening address; one more is closed as soon as it is accepted. */
  readonly maxConnections: number;
  /** A unary or server-streaming call whose request message has not fully arrived within this ends DEADLINE_EXCEEDED. */
  readonly requestBodyMs: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  unauthenticatedIdleMs: 10_000,
  maxConnections: 1000,
  requestBodyMs: 30_000,
};

/** What the settings and the CLI accept (README "Limits"). */
export const CONNECTION_LIMIT_BOUNDS = {
  maxConnections: { min: 10, max: 100_000 },
  unauthenticatedIdleSeconds: { min: 1, max: 3600 },
  requestBodySeconds: { min: 1, max: 3600 },
} as const;
