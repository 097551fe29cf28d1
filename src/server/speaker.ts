import type * as grpc from '@grpc/grpc-js';
import type { Credentials } from '../core/credentials/credentials';
import type { Principal } from '../core/credentials/model';
import type { Speaker } from '../core/policy/speaker';
import { principalOf } from './auth';

/**
 * Who speaks in a negotiation or a room (src/core/policy/speaker.ts), from the call's Principal: the operator token
 * acts for anyone; an agent or enrolment credential only as the agents Credentials.refusal allows. With auth `none`
 * there is no principal: the caller is trusted to act as any agent (the README's "Security model" says so), but it is
 * still an agent, not the operator, so the participant rules of the areas apply.
 */
export function speakerOf(call: { readonly metadata: grpc.Metadata }, credentials: Credentials): Speaker {
  return speakerOfPrincipal(principalOf(call), credentials);
}

/** The same for a Principal already known (the MCP bridge: the agent credential of the request). */
export function speakerOfPrincipal(principal: Principal | undefined, credentials: Credentials): Speaker {
  if (principal === undefined) return { kind: 'agent', label: 'unauthenticated', mayActAs: () => true };
  if (principal.kind === 'operator') return { kind: 'operator', label: 'operator' };
  const label = principal.kind === 'agent' ? `agent:${principal.agentId}` : `enrolment:${principal.credentialId}`;
  return {
    kind: 'agent',
    label,
    mayActAs: (agentId: string) => credentials.refusal(principal, agentId, false) === undefined,
  };
}

/** The same for an MCP bridge caller: the agent credential of its request. */
export function speakerOfBridgeCaller(
  caller: { readonly agentId: string; readonly credentialId: string },
  credentials: Credentials,
): Speaker {
  return speakerOfPrincipal({ kind: 'agent', credentialId: caller.credentialId, agentId: caller.agentId }, credentials);
}
