import * as grpc from '@grpc/grpc-js';
import { NegotiationError, type NegotiationErrorKind } from '../core/policy/speaker';

const STATUS: Readonly<Record<NegotiationErrorKind, grpc.status>> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  not_found: grpc.status.NOT_FOUND,
  permission: grpc.status.PERMISSION_DENIED,
  precondition: grpc.status.FAILED_PRECONDITION,
  exists: grpc.status.ALREADY_EXISTS,
  exhausted: grpc.status.RESOURCE_EXHAUSTED,
  deadline: grpc.status.DEADLINE_EXCEEDED,
  unavailable: grpc.status.UNAVAILABLE,
};

/**
 * The gRPC status of a refusal from the policy, negotiation, room or handoff areas (their adapters share it): the kind
 * picks the status, the details start with the SW4RM error code (`VALIDATION_ERROR: …`). Anything else is INTERNAL.
 */
export function negotiationStatus(err: unknown): grpc.StatusObject {
  const metadata = new grpc.Metadata();
  if (err instanceof NegotiationError) return { code: STATUS[err.kind], details: `${err.code}: ${err.message}`, metadata };
  return { code: grpc.status.INTERNAL, details: `INTERNAL_ERROR: ${err instanceof Error ? err.message : String(err)}`, metadata };
}
