import * as vscode from 'vscode';
import type { CoordinatorApi, CredentialInfo, Disposable, MintedCredential } from '../../core/api';
import { Views } from '../contributions';
import {
  agentIdProblem,
  copiedLabel,
  credentialedAgentIds,
  credentialRow,
  credentialSubject,
  orderCredentials,
  proposeAgentId,
} from '../credentialsModel';
import { requireRunning } from '../notRunning';
import { KeyedThrottle } from '../throttle';
import { RecordListProvider, type RecordNode } from './recordList';
import { rowItem, themeIcon } from './rowItem';

export type CredentialNode = RecordNode<'credential'>;

/**
 * Credentials change when minted or revoked (events), and their "last used" when an agent calls (no event): the
 * view follows agent activity at most this often.
 */
export const CREDENTIALS_REFRESH_MS = 1000;

/** A row of the Credentials view: the agent (or "enrolment"), label, created, last used or revoked; never a secret. */
function credentialItem(credential: CredentialInfo): vscode.TreeItem {
  const row = credentialRow(credential);
  return rowItem(`credential:${credential.id}`, row, {
    contextValue: row.contextValue,
    iconPath: themeIcon(row.icon, row.color),
    accessibilityLabel: row.accessibilityLabel,
  });
}

/**
 * The Credentials view and its commands: the agent and enrolment credentials of the running coordinator (never
 * their secrets), minting one for an agent (its token shown once) and revoking one after a confirmation.
 */
export class CredentialsView implements vscode.Disposable {
  private subscriptions: Disposable[] = [];
  /** The rows: credentials in use first, then revoked ones. */
  private readonly provider = new RecordListProvider(
    'credential',
    async (api: CoordinatorApi) => orderCredentials(await api.credentials()),
    (credential) => credential.id,
    credentialItem,
  );
  private readonly view: vscode.TreeView<CredentialNode>;
  private readonly throttle = new KeyedThrottle<'credentials'>(CREDENTIALS_REFRESH_MS, () => this.provider.refresh());
  private renewEnrolment: (() => void) | undefined;

  constructor(
    /** Who mints and revokes, as the coordinator records it (`editor:<user>`). */
    private readonly operator: string,
  ) {
    this.view = vscode.window.createTreeView(Views.credentials, { treeDataProvider: this.provider });
  }

  /**
   * Follows the API of a (new) coordinator, or none while the coordinator is stopped. `renewEnrolment` gives new
   * terminals a new enrolment credential once theirs is revoked.
   */
  bind(api: CoordinatorApi | undefined, renewEnrolment?: () => void): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.throttle.cancel();
    this.provider.api = api;
    this.renewEnrolment = renewEnrolment;
    this.subscriptions = api
      ? [
          api.onDidChangeCredentials(() => this.provider.refresh()),
          api.onDidChangeAgents(() => this.throttle.schedule('credentials')),
        ]
      : [];
    this.provider.refresh();
  }

  /**
   * Asks for an agent id, proposing the next free `agent-N` and checking it by the registry's rule; undefined when
   * the user cancels.
   */
  async askAgentId(api: CoordinatorApi, title: string): Promise<string | undefined> {
    const [agents, credentials] = await Promise.all([api.agents().catch(() => []), api.credentials().catch(() => [])]);
    const proposed = proposeAgentId([...agents.map((a) => a.descriptor.agentId), ...credentialedAgentIds(credentials)]);
    const agentId = await vscode.window.showInputBox({
      title,
      prompt: 'The id the agent registers as (SW4RM_AGENT_ID). Its credential acts only as this agent.',
      value: proposed,
      valueSelection: [proposed.length, proposed.length],
      ignoreFocusOut: true,
      validateInput: (value) => agentIdProblem(value.trim()),
    });
    return agentId === undefined ? undefined : agentId.trim();
  }

  /** Mints the credential of `agentId`, recorded as copied for it; says why when the coordinator refuses. */
  async mintFor(api: CoordinatorApi, agentId: string): Promise<MintedCredential | undefined> {
    try {
      return await api.mintAgentCredential(agentId, this.operator, copiedLabel(agentId));
    } catch (err) {
      void vscode.window.showErrorMessage(
        `No credential was minted for agent ${agentId}: ${err instanceof Error ? err.message : String(err)}`,
      );
      return undefined;
    }
  }

  /** "Mint Agent Credential…": asks for an agent, mints its credential and shows the token once, with Copy. */
  async mint(authNone: boolean): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const agentId = await this.askAgentId(api, 'Mint Agent Credential');
    if (agentId === undefined || this.api !== api) return;
    const minted = await this.mintFor(api, agentId);
    if (!minted) return;
    const copy = 'Copy';
    const choice = await vscode.window.showInformationMessage(
      `Credential for agent ${agentId}`,
      {
        modal: true,
        detail:
          `SW4RM_TOKEN=${minted.token}\n\nIt is shown this once: the coordinator keeps only its hash. ` +
          `It acts only as agent ${agentId}; revoke it in the Credentials view.` +
          (authNone
            ? '\n\nsw4rm.auth is "none": the coordinator checks no credential until it is set to "token".'
            : ''),
      },
      copy,
    );
    if (choice === copy) {
      await vscode.env.clipboard.writeText(minted.token);
      void vscode.window.showInformationMessage(`Copied the credential of agent ${agentId}.`);
    }
  }

  /** Revokes the credential of the row (or one picked from a list) after a modal confirmation naming its agent. */
  async revoke(node?: CredentialNode): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const credential = node
      ? (this.provider.record(node.id) ?? (await api.credentials()).find((c) => c.id === node.id))
      : await this.pick(api);
    if (!credential) return;
    if (credential.revokedAt !== null) {
      void vscode.window.showInformationMessage(`The ${credentialSubject(credential)} is already revoked.`);
      return;
    }
    const consequence =
      credential.kind === 'agent'
        ? `Agent ${credential.agentId ?? '?'} can no longer call the coordinator with it: its calls are refused and its open streams end.`
        : 'Terminals already open, and agents started there that still call with it, can no longer register agents or act as the ' +
          'agents it enrolled. Terminals opened from now on get a new enrolment credential.';
    const revoke = 'Revoke';
    const choice = await vscode.window.showWarningMessage(
      `Revoke the ${credentialSubject(credential)}?`,
      { modal: true, detail: `${consequence}\n\nLabel: ${credential.label || '—'}\nId: ${credential.id}` },
      revoke,
    );
    if (choice !== revoke || this.api !== api) return;
    try {
      await api.revokeCredential(credential.id, this.operator);
      if (credential.kind === 'enrolment' && this.api === api) this.renewEnrolment?.();
      void vscode.window.showInformationMessage(`Revoked the ${credentialSubject(credential)}.`);
    } catch (err) {
      void vscode.window.showWarningMessage(
        `The credential was not revoked: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  /** The running coordinator's API, or undefined while it is stopped. */
  private get api(): CoordinatorApi | undefined {
    return this.provider.api;
  }

  dispose(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    this.throttle.dispose();
    this.view.dispose();
    this.provider.dispose();
  }

  private async pick(api: CoordinatorApi): Promise<CredentialInfo | undefined> {
    const active = orderCredentials(await api.credentials()).filter((c) => c.revokedAt === null);
    if (!active.length) {
      void vscode.window.showInformationMessage('There is no credential to revoke.');
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      active.map((credential) => {
        const row = credentialRow(credential);
        return { label: row.label, description: row.description, credential };
      }),
      { title: 'Revoke Credential', matchOnDescription: true },
    );
    return picked?.credential;
  }
}
