/**
 * The one error type of the core. Every refusal an area answers is a SwarmError: `errorKind` says which family of
 * failure it is (the server maps it to a gRPC status, the bridge to an MCP error, in one place each), `errorCode` is
 * the SW4RM error code (RFC §21, message-types.txt: VALIDATION_ERROR, PERMISSION_DENIED, NO_ROUTE, BUFFER_FULL, …)
 * that goes first in the status details. An area's own error class extends it and keeps its own fields.
 */

/** The family of a refusal, each one gRPC status (src/server/errorStatus.ts) and one MCP error (the bridge). */
export type ErrorKind =
  | 'invalid' // INVALID_ARGUMENT: the request itself cannot be accepted
  | 'not_found' // NOT_FOUND
  | 'permission' // PERMISSION_DENIED: this caller may not
  | 'precondition' // FAILED_PRECONDITION: not in the state it is in now
  | 'exists' // ALREADY_EXISTS
  | 'exhausted' // RESOURCE_EXHAUSTED: a buffer or budget is full
  | 'deadline' // DEADLINE_EXCEEDED
  | 'unavailable' // UNAVAILABLE: try again later
  | 'unimplemented' // UNIMPLEMENTED
  | 'cancelled' // CANCELLED: the caller or the coordinator gave the work up (a tool call)
  | 'internal'; // INTERNAL: a fault of the coordinator

/** The SW4RM error codes of the RFC's ErrorCode enum, and the other codes the wire contract names in details. */
export type Sw4rmCode =
  | 'BUFFER_FULL'
  | 'NO_ROUTE'
  | 'ACK_TIMEOUT'
  | 'AGENT_UNAVAILABLE'
  | 'AGENT_SHUTDOWN'
  | 'VALIDATION_ERROR'
  | 'PERMISSION_DENIED'
  | 'UNSUPPORTED_MESSAGE_TYPE'
  | 'OVERSIZE_PAYLOAD'
  | 'TOOL_TIMEOUT'
  | 'FORCED_PREEMPTION'
  | 'TTL_EXPIRED'
  | 'INTERNAL_ERROR'
  | (string & {});

/** The SW4RM code a kind implies when the error names none. */
export const DEFAULT_CODE: Readonly<Record<ErrorKind, Sw4rmCode>> = {
  invalid: 'VALIDATION_ERROR',
  not_found: 'NO_ROUTE',
  permission: 'PERMISSION_DENIED',
  precondition: 'VALIDATION_ERROR',
  exists: 'VALIDATION_ERROR',
  exhausted: 'BUFFER_FULL',
  deadline: 'ACK_TIMEOUT',
  unavailable: 'AGENT_UNAVAILABLE',
  unimplemented: 'UNSUPPORTED_MESSAGE_TYPE',
  cancelled: 'CANCELLED',
  internal: 'INTERNAL_ERROR',
};

export abstract class SwarmError extends Error {
  /** Which family of failure: picks the gRPC status and the MCP error. */
  abstract readonly errorKind: ErrorKind;
  /** The SW4RM error code the details start with. */
  abstract readonly errorCode: Sw4rmCode;
}

/** A refusal that needs no class of its own: `new CoreError('invalid', 'VALIDATION_ERROR', 'agent_id is required')`. */
export class CoreError extends SwarmError {
  constructor(
    readonly errorKind: ErrorKind,
    readonly errorCode: Sw4rmCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'CoreError';
  }
}

/** The kind and code of any thrown value: a SwarmError's own, anything else an internal fault. */
export function classify(err: unknown): {
  readonly kind: ErrorKind;
  readonly code: Sw4rmCode;
  readonly message: string;
} {
  if (err instanceof SwarmError) return { kind: err.errorKind, code: err.errorCode, message: err.message };
  return { kind: 'internal', code: 'INTERNAL_ERROR', message: err instanceof Error ? err.message : String(err) };
}
