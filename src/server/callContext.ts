import type * as grpc from '@grpc/grpc-js';
import type { CallContext } from '../core/context';
import { principalName } from '../core/credentials/credentials';
import type { Principal } from '../core/credentials/model';
import type { IdSource } from '../core/ids';
import { principalOf } from './auth';

/** The longest x-correlation-id kept as given; longer ones are replaced, not truncated. */
const MAX_CORRELATION_ID = 256;

/** `operator`, `agent:<id>`, `enrolment:<id>`, computed once per principal (the same object serves every call). */
const names = new WeakMap<Principal, string>();

/**
 * Builds the core's call context: the caller's `x-correlation-id` when it sent a usable one, else a new UUID;
 * and who the caller authenticated as (absent with auth `none`).
 */
export function callContext(call: { metadata: grpc.Metadata }, ids: IdSource): CallContext {
  const given = call.metadata.get('x-correlation-id')[0];
  const text = typeof given === 'string' ? given.trim() : '';
  const usable = text !== '' && text.length <= MAX_CORRELATION_ID && !/[\u0000-\u001f]/.test(text);
  const correlationId = usable ? text : ids.uuid();
  const principal = principalOf(call);
  if (principal === undefined) return { correlationId };
  let name = names.get(principal);
  if (name === undefined) names.set(principal, (name = principalName(principal)));
  return { correlationId, principal: name };
}
