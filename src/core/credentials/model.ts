import type { Transactions } from '../store/store';

/**
 * Credentials (README, "Security model"). The operator credential (SW4RM_TOKEN of the editor and the CLI console)
 * may act for any agent; an agent credential acts only as its agent; an enrolment credential (what terminals of
 * the editor carry) may register new agent ids and act as the agents it enrolled. Secrets are stored hashed.
 */
export type CredentialKind = 'agent' | 'enrolment';

/** A credential as listed: never its secret. */
export interface CredentialInfo {
  readonly id: string;
  readonly kind: CredentialKind;
  /** For an agent credential, the one agent it acts as; null for an enrolment credential. */
  readonly agentId: string | null;
  /** What it is for, as its minter said (e.g. "terminals of this window", "copied for agent alpha"). */
  readonly label: string;
  readonly createdAt: number;
  /** Who minted it: `editor:<user>`, `cli`, `enrolment:<credential id>`… */
  readonly createdBy: string;
  readonly revokedAt: number | null;
  readonly lastUsedAt: number | null;
}

/** A credential just minted: the token is shown this once and kept only as a hash. */
export interface MintedCredential {
  readonly credential: CredentialInfo;
  readonly token: string;
}

export interface CredentialsChange {
  readonly kind: 'minted' | 'revoked';
  readonly credential: CredentialInfo;
}

/** Who a call is, once authenticated (src/server/auth.ts resolves it; the core decides what it may do). */
export type Principal =
  /** The operator token (editor, CLI console): may act for any agent. */
  | { readonly kind: 'operator' }
  | { readonly kind: 'agent'; readonly credentialId: string; readonly agentId: string }
  | { readonly kind: 'enrolment'; readonly credentialId: string };

/** A credential as stored: its info and the SHA-256 of its secret (never the secret). */
export interface CredentialRecord extends CredentialInfo {
  readonly secretHash: Buffer;
}

/** The enrolment credential that enrolled an agent id: it may act as that agent from then on (Credentials.refusal). */
export interface AgentOwner {
  readonly agentId: string;
  /** `enrolment:<credential id>`. */
  readonly owner: string;
  readonly since: number;
}

export interface CredentialRepository {
  insert(record: CredentialRecord): void;
  revoke(id: string, at: number): void;
  /** Persists last-use times (only those later than what is stored). */
  touch(uses: ReadonlyArray<readonly [id: string, at: number]>): void;
  /** Every credential, revoked ones included, oldest first. */
  all(): CredentialRecord[];
  putOwner(owner: AgentOwner): void;
  owners(): AgentOwner[];
}

/** What the credentials area is handed of the store: its own repository and transactions. */
export interface CredentialsStorage extends Transactions {
  readonly credentials: CredentialRepository;
}
