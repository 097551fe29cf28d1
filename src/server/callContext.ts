import type * as grpc from '@grpc/grpc-js';
import type { CallContext } from '../core/context';
import type { IdSource } from '../core/ids';

/** The longest x-correlation-id kept as given; longer ones are replaced, not truncated. */
const MAX_CORRELATION_ID = 256;

/** Builds the core's call context: the caller's `x-correlation-id` when it sent a usable one, else a new UUID. */
export function callContext(call: { metadata: grpc.Metadata }, ids: IdSource): CallContext {
  const given = call.metadata.get('x-correlation-id')[0];
  const text = typeof given === 'string' ? given.trim() : '';
  const usable = text !== '' && text.length <= MAX_CORRELATION_ID && !/[\u0000-\u001f]/.test(text);
  return { correlationId: usable ? text : ids.uuid() };
}
