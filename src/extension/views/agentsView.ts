import * as vscode from 'vscode';
import type { AgentRecord } from '../../core/store/store';
import type { Registry } from '../../core/registry/registry';
import type { Disposable } from '../../core/events';
import type { InboxStats, Router } from '../../core/router/router';
import { KeyedThrottle } from '../throttle';

type AgentsNode =
  | { readonly kind: 'agent'; readonly agentId: string }
  | { readonly kind: 'detail'; readonly agentId: string; readonly key: DetailKey };

type DetailKey = 'state' | 'presence' | 'inbox' | 'class' | 'capabilities' | 'modalities' | 'heartbeat' | 'description';
const DETAIL_KEYS: readonly DetailKey[] = ['state', 'presence', 'inbox', 'class', 'capabilities', 'modalities', 'heartbeat', 'description'];

/** Inbox counts change with every delivery; the view shows them at most this often per agent. */
export const INBOX_REFRESH_MS = 250;

/**
 * The Agents view: one row per registered agent (name, id, state, presence, inbox counts) with its details as
 * children. It follows the registry's and the router's change events, so it needs no manual refresh; a change
 * to one agent refreshes only that agent's row, and inbox changes are coalesced per agent.
 */
export class AgentsTreeProvider implements vscode.TreeDataProvider<AgentsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<AgentsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private registry: Registry | undefined;
  private router: Router | undefined;
  private subscriptions: Disposable[] = [];
  private readonly inboxRefresh = new KeyedThrottle<string>(INBOX_REFRESH_MS, (agentId) => {
    if (this.registry?.get(agentId)) this.changed.fire(this.agentNode(agentId));
  });
  private readonly agentNodes = new Map<string, AgentsNode>();
  private readonly detailNodes = new Map<string, AgentsNode>();

  /** Follows a (new) registry and router, or none while the coordinator is stopped. */
  bind(registry: Registry | undefined, router?: Router): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    this.inboxRefresh.cancel();
    this.registry = registry;
    this.router = registry ? router : undefined;
    if (registry) {
      this.subscriptions.push(registry.onDidChange((change) => {
        if (change.kind === 'joined' || change.kind === 'left') this.changed.fire(undefined);
        else this.changed.fire(this.agentNode(change.agent.descriptor.agentId));
      }));
    }
    if (this.router) this.subscriptions.push(this.router.onDidChange(({ agentId }) => this.inboxRefresh.schedule(agentId)));
    this.changed.fire(undefined);
  }

  getChildren(node?: AgentsNode): AgentsNode[] {
    if (!this.registry) return [];
    if (!node) return this.registry.list().map((agent) => this.agentNode(agent.descriptor.agentId));
    if (node.kind === 'agent') return DETAIL_KEYS.map((key) => this.detailNode(node.agentId, key));
    return [];
  }

  getParent(node: AgentsNode): AgentsNode | undefined {
    return node.kind === 'detail' ? this.agentNode(node.agentId) : undefined;
  }

  getTreeItem(node: AgentsNode): vscode.TreeItem {
    const agent = this.registry?.get(node.agentId);
    if (!agent) return new vscode.TreeItem(node.agentId);
    const inbox = this.router?.inboxStats(node.agentId);
    return node.kind === 'agent' ? agentItem(agent, inbox) : detailItem(agent, node.key, inbox);
  }

  dispose(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    this.inboxRefresh.dispose();
    this.changed.dispose();
  }

  private agentNode(agentId: string): AgentsNode {
    let node = this.agentNodes.get(agentId);
    if (!node) this.agentNodes.set(agentId, (node = { kind: 'agent', agentId }));
    return node;
  }

  private detailNode(agentId: string, key: DetailKey): AgentsNode {
    const id = `${agentId}/${key}`;
    let node = this.detailNodes.get(id);
    if (!node) this.detailNodes.set(id, (node = { kind: 'detail', agentId, key }));
    return node;
  }
}

function agentItem(agent: AgentRecord, inbox: InboxStats | undefined): vscode.TreeItem {
  const { descriptor } = agent;
  const label = descriptor.name === descriptor.agentId ? descriptor.agentId : `${descriptor.name} (${descriptor.agentId})`;
  const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.Collapsed);
  item.id = `agent:${descriptor.agentId}`;
  item.description = `${agent.state} · ${connection(agent)}${inbox ? ` · ${queued(inbox)} · ${inbox.inFlight} in flight` : ''}`;
  item.iconPath = presenceIcon(agent);
  item.contextValue = `agent+${agent.presence}`;
  const tooltip = new vscode.MarkdownString(undefined, false);
  tooltip.appendMarkdown('**').appendText(descriptor.name).appendMarkdown('**\n\n');
  tooltip.appendText(`id: ${descriptor.agentId}\nstate: ${agent.state}\nconnection: ${connection(agent)}\n` +
    `class: ${descriptor.communicationClass}\ncapabilities: ${descriptor.capabilities.join(', ') || '—'}\n` +
    `last heartbeat: ${formatTime(agent.lastHeartbeatAt)}` + (inbox ? `\ninbox: ${inboxSummary(inbox)}` : ''));
  item.tooltip = tooltip;
  return item;
}

function detailItem(agent: AgentRecord, key: DetailKey, inbox: InboxStats | undefined): vscode.TreeItem {
  const { descriptor } = agent;
  const [label, value] = ((): [string, string] => {
    switch (key) {
      case 'state': return ['State', agent.state];
      case 'presence': return ['Connection', connection(agent)];
      case 'inbox': return ['Inbox', inbox ? inboxSummary(inbox) : 'the coordinator is not running'];
      case 'class': return ['Communication class', descriptor.communicationClass];
      case 'capabilities': return ['Capabilities', descriptor.capabilities.join(', ') || '—'];
      case 'modalities': return ['Modalities', descriptor.modalitiesSupported.join(', ') || 'any'];
      case 'heartbeat': return ['Last heartbeat', formatTime(agent.lastHeartbeatAt)];
      case 'description': return ['Description', descriptor.description || '—'];
    }
  })();
  const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.None);
  item.id = `agent:${descriptor.agentId}/${key}`;
  item.description = value;
  item.tooltip = value;
  item.contextValue = `agentDetail+${key}`;
  return item;
}

function queued(inbox: InboxStats): string {
  return `${inbox.queueDepth}/${inbox.capacity} queued`;
}

function inboxSummary(inbox: InboxStats): string {
  return `${queued(inbox)} · ${inbox.inFlight} in flight · streaming: ${inbox.streaming ? 'yes' : 'no'} · ` +
    `last delivery: ${formatTime(inbox.lastDeliveryAt)}`;
}

function connection(agent: AgentRecord): string {
  switch (agent.presence) {
    case 'online': return 'connected';
    case 'unavailable': return 'unavailable (missed heartbeats)';
    case 'disconnected': return 'disconnected';
  }
}

function presenceIcon(agent: AgentRecord): vscode.ThemeIcon {
  switch (agent.presence) {
    case 'online': return new vscode.ThemeIcon('circle-filled', new vscode.ThemeColor('testing.iconPassed'));
    case 'unavailable': return new vscode.ThemeIcon('warning', new vscode.ThemeColor('problemsWarningIcon.foreground'));
    case 'disconnected': return new vscode.ThemeIcon('circle-outline', new vscode.ThemeColor('disabledForeground'));
  }
}

function formatTime(ms: number | null): string {
  return ms === null ? 'never' : new Date(ms).toLocaleString();
}
