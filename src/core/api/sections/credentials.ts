import type { CredentialInfo, CredentialsChange, MintedCredential } from '../../credentials/model';
import type { Event } from '../../events';

/** Credentials (README, "Security model"). Part of CoordinatorApi (coordinatorApi.ts). */
export interface CredentialsApi {
  /** The agent and enrolment credentials this coordinator minted, revoked ones included, newest first; never secrets. */
  credentials(): Promise<CredentialInfo[]>;
  /**
   * Mints a credential bound to `agentId` (registered or not yet: an agent may be given its credential before it
   * starts). The token is in the answer this once; the coordinator keeps only its hash. Rejects `invalid` for an
   * agent id the registry would refuse.
   */
  mintAgentCredential(agentId: string, by: string, label?: string): Promise<MintedCredential>;
  /** Revokes a credential: calls with it are refused from then on, and streams opened with it end. */
  revokeCredential(credentialId: string, by: string): Promise<CredentialInfo>;
  readonly onDidChangeCredentials: Event<CredentialsChange>;
}
