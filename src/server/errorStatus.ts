import * as grpc from '@grpc/grpc-js';
import { classify, type ErrorKind } from '../core/kernel/errors';

/** The gRPC status of each kind of refusal (src/core/kernel/errors.ts): the one table. */
export const GRPC_STATUS: Readonly<Record<ErrorKind, grpc.status>> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  not_found: grpc.status.NOT_FOUND,
  permission: grpc.status.PERMISSION_DENIED,
  precondition: grpc.status.FAILED_PRECONDITION,
  exists: grpc.status.ALREADY_EXISTS,
  exhausted: grpc.status.RESOURCE_EXHAUSTED,
  deadline: grpc.status.DEADLINE_EXCEEDED,
  unavailable: grpc.status.UNAVAILABLE,
  unimplemented: grpc.status.UNIMPLEMENTED,
  cancelled: grpc.status.CANCELLED,
  internal: grpc.status.INTERNAL,
};

/**
 * The gRPC status of anything a service's work threw: a SwarmError's kind picks the status and the details start with
 * its SW4RM code (`VALIDATION_ERROR: agent_id is required`); anything else is the coordinator's own fault, INTERNAL
 * `INTERNAL_ERROR: <message>`. Every service answers a refusal through this; where a service answers one differently
 * (a refusal field of its response instead of a status, details without the code), that case is written beside its call.
 */
export function statusOf(err: unknown): grpc.StatusObject {
  const { kind, code, message } = classify(err);
  return { code: GRPC_STATUS[kind], details: `${code}: ${message}`, metadata: new grpc.Metadata() };
}
