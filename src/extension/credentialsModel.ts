import { validateDescriptor, type CredentialInfo } from '../core/api';
import { SERVICE_ADDRESS_VARIABLES } from '../server/agentEnvironment';
import { defaultTimeFormat, type TimeFormat } from './approvalsModel';

/** The prefix of the agent ids "Copy Agent Environment" proposes: `agent-1`, `agent-2`, … */
export const PROPOSED_AGENT_PREFIX = 'agent-';

/**
 * The agent id to propose: `agent-N` with N one more than the highest `agent-N` among the ids given (registered
 * agents and agents that already hold a credential), so that copying twice proposes two different agents.
 */
export function proposeAgentId(taken: Iterable<string>): string {
  let highest = 0;
  for (const id of taken) {
    const match = /^agent-(\d{1,9})$/.exec(id);
    if (match) highest = Math.max(highest, Number(match[1]));
  }
  return `${PROPOSED_AGENT_PREFIX}${highest + 1}`;
}

/** Why the registry would refuse this agent id (its own rule, through the API), or undefined when it would accept it. */
export function agentIdProblem(agentId: string): string | undefined {
  const verdict = validateDescriptor({ agentId });
  return verdict.ok ? undefined : verdict.reason.replace(/^VALIDATION_ERROR:\s*/, '');
}

/** The label of a credential minted by "Copy Agent Environment" (shown in the Credentials view). */
export function copiedLabel(agentId: string): string {
  return `copied for agent ${agentId}`;
}

/**
 * One agent's environment: every SW4RM_*_ADDR of the coordinator's environment, SW4RM_AGENT_ID, and SW4RM_TOKEN
 * when the agent has a credential of its own. The operator token of `coordinatorEnvironment` is never passed on.
 */
export function agentEnvironmentFor(
  coordinatorEnvironment: Readonly<Record<string, string>>,
  agentId: string,
  token: string | undefined,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of SERVICE_ADDRESS_VARIABLES) {
    if (coordinatorEnvironment[name] !== undefined) env[name] = coordinatorEnvironment[name];
  }
  env.SW4RM_AGENT_ID = agentId;
  if (token !== undefined) env.SW4RM_TOKEN = token;
  return env;
}

/** Agent ids that hold a credential not revoked. */
export function credentialedAgentIds(credentials: readonly CredentialInfo[]): string[] {
  return credentials.filter((c) => c.revokedAt === null && c.agentId !== null).map((c) => c.agentId!);
}

/** The view's order: credentials in use first, newest first; then revoked ones, most recently revoked first. */
export function orderCredentials(credentials: readonly CredentialInfo[]): CredentialInfo[] {
  const active = credentials.filter((c) => c.revokedAt === null).sort((a, b) => b.createdAt - a.createdAt);
  const revoked = credentials
    .filter((c) => c.revokedAt !== null)
    .sort((a, b) => b.revokedAt! - a.revokedAt! || b.createdAt - a.createdAt);
  return [...active, ...revoked];
}

/** What one row of the Credentials view shows; plain data, turned into a TreeItem by the view. */
export interface CredentialRow {
  readonly label: string;
  readonly description: string;
  /** A codicon id. */
  readonly icon: string;
  /** A theme colour id for the icon, or undefined for the default. */
  readonly color: string | undefined;
  /** `credential+<kind>` and `+revoked` once revoked: menus match it to offer Revoke. */
  readonly contextValue: string;
  /** Plain text: agent ids and labels are data, never Markdown. */
  readonly tooltip: string;
  readonly accessibilityLabel: string;
}

/**
 * The row of a credential: its agent (an enrolment credential: its label), then kind, revoked or last used, when
 * created, and an agent credential's label unless it is the one Copy Agent Environment gives.
 */
export function credentialRow(credential: CredentialInfo, time: TimeFormat = defaultTimeFormat): CredentialRow {
  const revoked = credential.revokedAt !== null;
  const who = credentialSubject(credential);
  const used = credential.lastUsedAt === null ? 'never used' : `used ${time(credential.lastUsedAt)}`;
  const state = revoked ? `revoked ${time(credential.revokedAt!)}` : used;
  const agent = credential.kind === 'agent';
  const label = agent ? (credential.agentId ?? '?') : credential.label || 'enrolment';
  // The label "copied for agent <id>" would only repeat the row's label; the tooltip has it.
  const ownLabel =
    agent && credential.label && credential.label !== copiedLabel(credential.agentId ?? '') ? [credential.label] : [];
  const description = [credential.kind, state, `created ${time(credential.createdAt)}`, ...ownLabel].join(' · ');
  const tooltip = [
    credential.kind === 'agent'
      ? `Agent credential of ${credential.agentId ?? '?'}: it acts only as this agent.`
      : 'Enrolment credential: it may register new agent ids and act as the agents it enrolled.',
    `label: ${credential.label || '—'}`,
    `created: ${time(credential.createdAt)} by ${credential.createdBy}`,
    `last used: ${credential.lastUsedAt === null ? 'never' : time(credential.lastUsedAt)}`,
    `revoked: ${revoked ? time(credential.revokedAt!) : 'no'}`,
    `id: ${credential.id}`,
  ].join('\n');
  return {
    label,
    description,
    icon: revoked ? 'circle-slash' : credential.kind === 'agent' ? 'key' : 'terminal',
    color: revoked ? 'disabledForeground' : undefined,
    contextValue: `credential+${credential.kind}${revoked ? '+revoked' : ''}`,
    tooltip,
    accessibilityLabel: `${who}, ${credential.label || 'no label'}, created ${time(credential.createdAt)}, ${state}`,
  };
}

/** `agent credential of alpha` or `enrolment credential "terminals of this window"`, for messages. */
export function credentialSubject(credential: CredentialInfo): string {
  return credential.kind === 'agent'
    ? `agent credential of ${credential.agentId ?? '?'}`
    : `enrolment credential "${credential.label || credential.id}"`;
}
