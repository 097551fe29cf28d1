import * as grpc from '@grpc/grpc-js';
import type { Store } from '../core/store/store';

/**
 * Answers a unary call once everything the handler wrote is committed (group commit): an agent is never told
 * "accepted" about something a crash could still take back. A failed commit answers INTERNAL (and stops the
 * coordinator: see Store.onDidFail).
 */
export function answerWhenDurable<T>(store: Store, callback: grpc.sendUnaryData<T>, response: T,
  initialMetadata?: { readonly call: { sendMetadata(metadata: grpc.Metadata): void }; readonly metadata: grpc.Metadata }): void {
  store.whenDurable().then(
    () => {
      // What the answer carries in its headers (a minted credential) is as durable as the answer itself.
      initialMetadata?.call.sendMetadata(initialMetadata.metadata);
      callback(null, response);
    },
    // The store's StoreFailedError says what happened and that nothing of it was accepted.
    (err: Error) => callback({ code: grpc.status.INTERNAL, details: `INTERNAL_ERROR: ${err.message}` }),
  );
}
