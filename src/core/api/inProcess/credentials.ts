import type { CredentialInfo, CredentialsChange, MintedCredential } from '../../credentials/model';
import type { CredentialsApi } from '../sections/credentials';
import type { InProcessHost } from './host';

/** CoordinatorApi's credentials section over a coordinator in this thread. */
export function credentialsSection(host: InProcessHost): CredentialsApi {
  const credentialsChanged = host.emitter<CredentialsChange>();
  host.subscribe(host.coordinator.credentials.onDidChange((change) => credentialsChanged.fire(change)));
  return {
    onDidChangeCredentials: credentialsChanged.event,

    credentials(): Promise<CredentialInfo[]> {
      return host.run((c) => c.credentials.list());
    },

    mintAgentCredential(agentId: string, by: string, label?: string): Promise<MintedCredential> {
      return host.run((c) =>
        c.credentials.mintAgent(agentId, by, label ?? `minted by ${by} for agent ${agentId}`, {
          correlationId: c.ids.uuid(),
        }),
      );
    },

    revokeCredential(credentialId: string, by: string): Promise<CredentialInfo> {
      return host.run((c) => c.credentials.revoke(credentialId, by, { correlationId: c.ids.uuid() }));
    },
  };
}
