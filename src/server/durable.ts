import * as grpc from '@grpc/grpc-js';
import type { Store } from '../core/store/store';

/**
 * Answers a unary call once everything the handler wrote is committed (group commit): an agent is never told
 * "accepted" about something a crash could still take back. A failed commit answers INTERNAL (and stops the
 * coordinator: see Store.onDidFail). `trailer`, when given, is sent as the answer's trailing metadata.
 */
export function answerWhenDurable<T>(
  store: Store,
  callback: grpc.sendUnaryData<T>,
  response: T,
  initialMetadata?: {
    readonly call: { sendMetadata(metadata: grpc.Metadata): void };
    readonly metadata: grpc.Metadata;
  },
  trailer?: grpc.Metadata,
): void {
  store.whenDurable().then(
    () => {
      // What the answer carries in its headers (a minted credential) is as durable as the answer itself.
      initialMetadata?.call.sendMetadata(initialMetadata.metadata);
      if (trailer) callback(null, response, trailer);
      else callback(null, response);
    },
    // The store's StoreFailedError says what happened and that nothing of it was accepted.
    (err: Error) => callback({ code: grpc.status.INTERNAL, details: `INTERNAL_ERROR: ${err.message}` }),
  );
}
