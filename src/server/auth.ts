import * as grpc from '@grpc/grpc-js';
import { tokenMatches } from '../core/auth/token';
import { CREDENTIAL_TOKEN_PREFIX, OPERATOR, type Credentials } from '../core/credentials/credentials';
import type { Principal } from '../core/credentials/model';
import type { ConnectionInfo } from './connections';

export type AuthMode = 'token' | 'none';

/** Health probes carry no credentials and reveal nothing but liveness, so they are not authenticated. */
const UNAUTHENTICATED_PREFIXES = ['/grpc.health.v1.Health/'];

/**
 * Who each authenticated call is, kept on the call's own Metadata object under a symbol: the interceptor sets it
 * and hands that object on to the handler (`call.metadata`); nothing a client sends can create a symbol key, so
 * nothing it sends can set or change it. (A property, not a WeakMap: a WeakMap entry per call costs the garbage
 * collector more than the call's other work on the hot path.)
 */
const PRINCIPAL = Symbol('sw4rm.principal');
type WithPrincipal = grpc.Metadata & { [PRINCIPAL]?: Principal };

/** The principal the auth interceptor resolved for this call; undefined with auth `none` (callers are who they say). */
export function principalOf(call: { readonly metadata: grpc.Metadata }): Principal | undefined {
  return (call.metadata as WithPrincipal)[PRINCIPAL];
}

export interface Authentication {
  /** The operator token (the token file): acts for any agent. */
  readonly operatorToken: string;
  /** Agent and enrolment credentials; without it only the operator token is accepted. */
  readonly credentials?: Credentials;
  /** Told of every refusal (for the log), with the RPC and why; never the token. */
  readonly onRefused?: (path: string, reason: string, metadata: grpc.Metadata) => void;
  /** Told of every call that passes (health probes excepted): its connection is authenticated (connections.ts). */
  readonly onAuthenticated?: (connection: ConnectionInfo) => void;
}

/**
 * The auth interceptor: with mode `token`, every call must carry exactly one `authorization: Bearer <token>`
 * naming the operator token or an active agent or enrolment credential; anything else (missing, malformed,
 * another scheme, unknown, revoked, two headers) ends the call with UNAUTHENTICATED before any handler runs.
 */
export function authInterceptor(mode: AuthMode, auth: Authentication): grpc.ServerInterceptor {
  return (methodDescriptor, call) => {
    if (UNAUTHENTICATED_PREFIXES.some((p) => methodDescriptor.path.startsWith(p)))
      return new grpc.ServerInterceptingCall(call);
    if (mode === 'none') {
      auth.onAuthenticated?.(call.getConnectionInfo());
      return new grpc.ServerInterceptingCall(call);
    }
    const listener = new grpc.ServerListenerBuilder()
      .withOnReceiveMetadata((metadata, next) => {
        const principal = authenticate(metadata, auth);
        if (typeof principal === 'string') {
          auth.onRefused?.(methodDescriptor.path, principal, metadata);
          call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: principal, metadata: new grpc.Metadata() });
          return;
        }
        (metadata as WithPrincipal)[PRINCIPAL] = principal;
        auth.onAuthenticated?.(call.getConnectionInfo());
        next(metadata);
      })
      .build();
    const responder = new grpc.ResponderBuilder().withStart((next) => next(listener)).build();
    return new grpc.ServerInterceptingCall(call, responder);
  };
}

/** The caller's principal, or why it has none. */
function authenticate(metadata: grpc.Metadata, auth: Authentication): Principal | string {
  const values = metadata.get('authorization');
  if (values.length === 0) {
    return 'missing credentials: send metadata `authorization: Bearer <token>` with the token from SW4RM_TOKEN';
  }
  if (values.length > 1) return 'more than one authorization header: send exactly one `authorization: Bearer <token>`';
  const match = /^Bearer\s+(\S+)\s*$/i.exec(String(values[0]));
  if (!match) return 'malformed authorization header: expected `Bearer <token>`';
  const token = match[1];
  if (auth.credentials !== undefined && token.startsWith(CREDENTIAL_TOKEN_PREFIX)) {
    const principal = auth.credentials.verify(token);
    return typeof principal === 'string'
      ? `${principal}: use a current credential (SW4RM_TOKEN) of this coordinator`
      : principal;
  }
  if (!tokenMatches(auth.operatorToken, token)) return 'wrong token: use the current SW4RM_TOKEN of this coordinator';
  return OPERATOR;
}
