import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';
import type { Coordinator } from '../../core/coordinator';
import { CredentialError } from '../../core/credentials/credentials';
import type { CredentialInfo } from '../../core/credentials/model';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';
import type { IdentityRule } from '../identity';
import { LOADER_OPTIONS } from '../protos';
import { statusOf } from '../errorStatus';

/** Our own proto (package sw4rm.vscode.credentials), beside the canonical ones; never one of them. */
export const CREDENTIALS_PROTO = path.join('sw4rm_vscode', 'credentials.proto');

export const CREDENTIALS_SERVICE = 'sw4rm.vscode.credentials.CredentialsService';

/** Operator only: no agent or enrolment credential may mint, list or revoke. */
export const CREDENTIALS_RULES: Readonly<Record<string, IdentityRule>> = Object.freeze(
  Object.fromEntries(
    ['MintAgentCredential', 'ListCredentials', 'RevokeCredential'].map((method) => [
      `/${CREDENTIALS_SERVICE}/${method}`,
      { actsAs: [], operatorOnly: true, note: 'operator only (sw4rm.vscode extension)' },
    ]),
  ),
);

export function loadCredentialsDefinition(protosDir: string): protoLoader.PackageDefinition {
  return protoLoader.loadSync(CREDENTIALS_PROTO, { ...LOADER_OPTIONS, includeDirs: [protosDir] });
}

/** Credential as on the wire. */
export interface CredentialMessage {
  id: string;
  kind: string;
  agent_id: string;
  label: string;
  created_at_ms: string;
  created_by: string;
  revoked_at_ms: string;
  last_used_at_ms: string;
}

export function credentialMessage(c: CredentialInfo): CredentialMessage {
  return {
    id: c.id,
    kind: c.kind,
    agent_id: c.agentId ?? '',
    label: c.label,
    created_at_ms: String(c.createdAt),
    created_by: c.createdBy,
    revoked_at_ms: String(c.revokedAt ?? 0),
    last_used_at_ms: String(c.lastUsedAt ?? 0),
  };
}

export function credentialInfo(m: CredentialMessage): CredentialInfo {
  const time = (text: string) => (Number(text) === 0 ? null : Number(text));
  return {
    id: m.id,
    kind: m.kind === 'enrolment' ? 'enrolment' : 'agent',
    agentId: m.agent_id === '' ? null : m.agent_id,
    label: m.label,
    createdAt: Number(m.created_at_ms),
    createdBy: m.created_by,
    revokedAt: time(m.revoked_at_ms),
    lastUsedAt: time(m.last_used_at_ms),
  };
}

/** sw4rm.vscode.credentials.CredentialsService over the core's Credentials (for the headless CLI). */
export class CredentialsServiceAdapter {
  static readonly serviceName = CREDENTIALS_SERVICE;

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { credentials, ids, store } = this.coordinator;
    const failed = (callback: grpc.sendUnaryData<unknown>, err: unknown, ctx: { correlationId: string }) => {
      if (err instanceof CredentialError) {
        // Its own case: the details are the message alone (the CLI prints them as they are), no SW4RM code first.
        callback({ code: statusOf(err).code, details: err.message });
        return;
      }
      // The coordinator's own fault (a store that refuses writes…): INTERNAL with the cause, logged, never UNKNOWN.
      this.coordinator.log.internalError('credentials', ctx.correlationId, err);
      callback(statusOf(err));
    };
    return {
      MintAgentCredential: (
        call: grpc.ServerUnaryCall<{ agent_id?: string; label?: string; by?: string }, unknown>,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        const { agent_id = '', label = '', by = '' } = call.request;
        const who = by.trim() || 'cli';
        const ctx = callContext(call, ids);
        try {
          const minted = credentials.mintAgent(
            agent_id,
            who,
            label.trim() || `minted by ${who} for agent ${agent_id}`,
            ctx,
          );
          answerWhenDurable(store, callback, { credential: credentialMessage(minted.credential), token: minted.token });
        } catch (err) {
          failed(callback, err, ctx);
        }
      },
      ListCredentials: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        callback(null, { credentials: credentials.list().map(credentialMessage) });
      },
      RevokeCredential: (
        call: grpc.ServerUnaryCall<{ credential_id?: string; by?: string }, unknown>,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        const { credential_id = '', by = '' } = call.request;
        const ctx = callContext(call, ids);
        try {
          const revoked = credentials.revoke(credential_id, by.trim() || 'cli', ctx);
          answerWhenDurable(store, callback, { credential: credentialMessage(revoked) });
        } catch (err) {
          failed(callback, err, ctx);
        }
      },
    };
  }
}
