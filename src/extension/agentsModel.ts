import type { AgentRecord, InboxStats } from '../core/api';
import { unreadText, type LaunchedRowParts } from './launchModel';

/** What one row of the Agents view shows; plain data, turned into a TreeItem by the view. */
export interface AgentRow {
  /** The name and the lifecycle state: what must survive a narrow side bar. */
  readonly label: string;
  /** The id (when the name differs), connection and inbox counts: cut off first when the side bar is narrow. */
  readonly description: string;
  /** Everything, one fact a line (plain text: every part may come from the agent). */
  readonly tooltip: string;
}

/**
 * An agent's row: `E2E Agent · RUNNABLE` as the label, `e2e-agent-1 · connected · 0/10 queued · 0 in flight` as the
 * description (the id only when the name differs from it; `queued` counts the messages it has not read yet), and
 * every fact in the tooltip. An agent launched from the editor (`launched`) shows its profile and launch state and its
 * unread messages instead of the stream counts: `Claude Code · terminal running · 2 unread · connected` (it
 * reads its inbox through the MCP bridge, where messages wait until it asks); the profile's name is left out of the
 * description when the label's name is already it.
 */
export function agentRow(
  agent: AgentRecord,
  inbox: InboxStats | undefined,
  formatTime: (ms: number | null) => string = defaultTime,
  launched?: LaunchedRowParts,
): AgentRow {
  const { descriptor } = agent;
  const id = descriptor.name === descriptor.agentId ? [] : [descriptor.agentId];
  const description = (
    launched
      ? // The profile's name only where the label does not already show it (a launched agent is named by its id; one registered with its profile's name shows it once).
        [
          ...id,
          ...launched.description.filter((part, i) => i !== 0 || part !== descriptor.name),
          ...(inbox ? [unreadText(inbox)] : []),
          connection(agent),
        ]
      : [...id, connection(agent), ...(inbox ? [queued(inbox), `${inbox.inFlight} in flight`] : [])]
  ).join(' · ');
  const tooltip = [
    `id: ${descriptor.agentId}`,
    `state: ${agent.state}`,
    `connection: ${connection(agent)}`,
    `class: ${descriptor.communicationClass}`,
    `capabilities: ${descriptor.capabilities.join(', ') || '—'}`,
    `last heartbeat: ${formatTime(agent.lastHeartbeatAt)}`,
    ...(inbox ? [`unread messages: ${inbox.queueDepth}`, `inbox: ${inboxSummary(inbox, formatTime)}`] : []),
    ...(launched?.tooltip ?? []),
  ].join('\n');
  return { label: `${descriptor.name} · ${agent.state}`, description, tooltip };
}

export function queued(inbox: InboxStats): string {
  return `${inbox.queueDepth}/${inbox.capacity} queued`;
}

export function inboxSummary(inbox: InboxStats, formatTime: (ms: number | null) => string = defaultTime): string {
  return (
    `${queued(inbox)} · ${inbox.inFlight} in flight · streaming: ${inbox.streaming ? 'yes' : 'no'} · ` +
    `last delivery: ${formatTime(inbox.lastDeliveryAt)}`
  );
}

export function connection(agent: Pick<AgentRecord, 'presence'>): string {
  switch (agent.presence) {
    case 'online':
      return 'connected';
    case 'unavailable':
      return 'unavailable (missed heartbeats)';
    case 'disconnected':
      return 'disconnected';
  }
}

function defaultTime(ms: number | null): string {
  return ms === null ? 'never' : new Date(ms).toLocaleString();
}
