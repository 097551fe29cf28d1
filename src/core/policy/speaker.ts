import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';
/**
 * Who speaks in a negotiation or a room, as the core sees it (the server derives it from the caller's Principal):
 * the operator (editor, CLI console, the operator token) may act for anyone; an agent credential or an enrolment
 * credential may act only as the agents `mayActAs` allows (Credentials.refusal); the coordinator's own work is
 * `coordinator`.
 */
export type Speaker =
  | { readonly kind: 'operator'; readonly label: string }
  | { readonly kind: 'agent'; readonly label: string; mayActAs(agentId: string): boolean }
  | { readonly kind: 'coordinator' };

export const COORDINATOR_SPEAKER: Speaker = { kind: 'coordinator' };

/** How a refusal maps onto gRPC (the server's table) — the core never names a status code. */
export type NegotiationErrorKind =
  | 'invalid' // INVALID_ARGUMENT
  | 'not_found' // NOT_FOUND
  | 'permission' // PERMISSION_DENIED
  | 'precondition' // FAILED_PRECONDITION
  | 'exists' // ALREADY_EXISTS
  | 'exhausted' // RESOURCE_EXHAUSTED
  | 'deadline' // DEADLINE_EXCEEDED
  | 'unavailable'; // UNAVAILABLE

/**
 * A refusal from the policy, negotiation, room or handoff areas. `code` is the spec's error code (RFC §21 / message-types.txt:
 * VALIDATION_ERROR, PERMISSION_DENIED, NOT_FOUND, BUFFER_FULL, …); the server sends `<code>: <message>` as details.
 */
export class NegotiationError extends SwarmError {
  constructor(
    readonly kind: NegotiationErrorKind,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'NegotiationError';
  }

  override get errorKind(): ErrorKind {
    return this.kind;
  }

  override get errorCode(): Sw4rmCode {
    return this.code;
  }
}
