import * as vscode from 'vscode';
import type { AgentRecord } from '../../core/store/store';
import type { Registry } from '../../core/registry/registry';
import type { Disposable } from '../../core/events';

type AgentsNode =
  | { readonly kind: 'agent'; readonly agentId: string }
  | { readonly kind: 'detail'; readonly agentId: string; readonly key: DetailKey };

type DetailKey = 'state' | 'presence' | 'class' | 'capabilities' | 'modalities' | 'heartbeat' | 'description';
const DETAIL_KEYS: readonly DetailKey[] = ['state', 'presence', 'class', 'capabilities', 'modalities', 'heartbeat', 'description'];

/**
 * The Agents view: one row per registered agent (name, id, state, presence) with its details as children.
 * It follows the registry's change events, so it needs no manual refresh; a change to one agent refreshes
 * only that agent's row.
 */
export class AgentsTreeProvider implements vscode.TreeDataProvider<AgentsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<AgentsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private registry: Registry | undefined;
  private subscription: Disposable | undefined;
  private readonly agentNodes = new Map<string, AgentsNode>();
  private readonly detailNodes = new Map<string, AgentsNode>();

  /** Follows a (new) registry, or none while the coordinator is stopped. */
  bind(registry: Registry | undefined): void {
    this.subscription?.dispose();
    this.registry = registry;
    this.subscription = registry?.onDidChange((change) => {
      if (change.kind === 'joined' || change.kind === 'left') this.changed.fire(undefined);
      else this.changed.fire(this.agentNode(change.agent.descriptor.agentId));
    });
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
    return node.kind === 'agent' ? agentItem(agent) : detailItem(agent, node.key);
  }

  dispose(): void {
    this.subscription?.dispose();
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

function agentItem(agent: AgentRecord): vscode.TreeItem {
  const { descriptor } = agent;
  const label = descriptor.name === descriptor.agentId ? descriptor.agentId : `${descriptor.name} (${descriptor.agentId})`;
  const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.Collapsed);
  item.id = `agent:${descriptor.agentId}`;
  item.description = `${agent.state} · ${connection(agent)}`;
  item.iconPath = presenceIcon(agent);
  item.contextValue = `agent+${agent.presence}`;
  const tooltip = new vscode.MarkdownString(undefined, false);
  tooltip.appendMarkdown('**').appendText(descriptor.name).appendMarkdown('**\n\n');
  tooltip.appendText(`id: ${descriptor.agentId}\nstate: ${agent.state}\nconnection: ${connection(agent)}\n` +
    `class: ${descriptor.communicationClass}\ncapabilities: ${descriptor.capabilities.join(', ') || '—'}\n` +
    `last heartbeat: ${formatTime(agent.lastHeartbeatAt)}`);
  item.tooltip = tooltip;
  return item;
}

function detailItem(agent: AgentRecord, key: DetailKey): vscode.TreeItem {
  const { descriptor } = agent;
  const [label, value] = ((): [string, string] => {
    switch (key) {
      case 'state': return ['State', agent.state];
      case 'presence': return ['Connection', connection(agent)];
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
