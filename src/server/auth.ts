import * as grpc from '@grpc/grpc-js';
import { tokenMatches } from '../core/auth/token';

export type AuthMode = 'token' | 'none';

/** Health probes carry no credentials and reveal nothing but liveness, so they are not authenticated. */
const UNAUTHENTICATED_PREFIXES = ['/grpc.health.v1.Health/'];

/**
 * The auth interceptor: with mode `token`, every call must carry `authorization: Bearer <token>`;
 * a missing or wrong token ends the call with UNAUTHENTICATED before any handler runs.
 */
export function authInterceptor(mode: AuthMode, token: string): grpc.ServerInterceptor {
  return (methodDescriptor, call) => {
    if (mode === 'none' || UNAUTHENTICATED_PREFIXES.some((p) => methodDescriptor.path.startsWith(p))) {
      return new grpc.ServerInterceptingCall(call);
    }
    const listener = new grpc.ServerListenerBuilder()
      .withOnReceiveMetadata((metadata, next) => {
        const problem = checkBearer(metadata, token);
        if (problem) {
          call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: problem, metadata: new grpc.Metadata() });
          return;
        }
        next(metadata);
      })
      .build();
    const responder = new grpc.ResponderBuilder().withStart((next) => next(listener)).build();
    return new grpc.ServerInterceptingCall(call, responder);
  };
}

function checkBearer(metadata: grpc.Metadata, token: string): string | undefined {
  const values = metadata.get('authorization');
  if (values.length === 0) {
    return 'missing credentials: send metadata `authorization: Bearer <token>` with the token from SW4RM_TOKEN';
  }
  if (values.length > 1) return 'more than one authorization header';
  const match = /^Bearer\s+(\S+)\s*$/i.exec(String(values[0]));
  if (!match) return 'malformed authorization header: expected `Bearer <token>`';
  if (!tokenMatches(token, match[1])) return 'wrong token: use the current SW4RM_TOKEN of this coordinator';
  return undefined;
}
