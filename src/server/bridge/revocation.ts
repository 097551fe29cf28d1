import { BridgeToolError } from './model';

/**
 * Revocation on the bridge (README, "Security model"): every request authenticated with a credential carries a signal
 * (BridgeServer.bindToCredential) that aborts when the credential is revoked, whose reason is the UNAUTHENTICATED
 * refusal the request ends with at once.
 */

/** The refusal a revoked request ends with (its signal's reason: endRequests). */
export function revokedError(revoked: AbortSignal): BridgeToolError {
  return revoked.reason instanceof BridgeToolError
    ? revoked.reason
    : new BridgeToolError('UNAUTHENTICATED', 'the credential was revoked: this call ends');
}

/**
 * `work`'s answer, or — as soon as `revoked` aborts — the revocation's UNAUTHENTICATED refusal (work's later answer or
 * error is dropped; work was told through its own signal to stop).
 */
export function untilRevoked<T>(work: Promise<T>, revoked: AbortSignal): Promise<T> {
  if (revoked.aborted) {
    work.catch(() => undefined);
    return Promise.reject(revokedError(revoked));
  }
  return new Promise<T>((resolve, reject) => {
    const onRevoked = () => reject(revokedError(revoked));
    revoked.addEventListener('abort', onRevoked, { once: true });
    work.then(
      (value) => {
        revoked.removeEventListener('abort', onRevoked);
        resolve(value);
      },
      (err: unknown) => {
        revoked.removeEventListener('abort', onRevoked);
        reject(err);
      },
    );
  });
}
