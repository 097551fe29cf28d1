import * as grpc from '@grpc/grpc-js';
import type { Store } from '../core/store/store';

/**
 * Answers a unary call once everything the handler wrote is committed (group commit): an agent is never told
 * "accepted" about something a crash could still take back. A failed commit answers INTERNAL.
 */
export function answerWhenDurable<T>(store: Store, callback: grpc.sendUnaryData<T>, response: T): void {
  store.whenDurable().then(
    () => callback(null, response),
    (err: Error) => callback({ code: grpc.status.INTERNAL, details: `INTERNAL_ERROR: the store could not commit: ${err.message}` }),
  );
}
