import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable, ProviderInfo, ToolCallRecord } from '../../core/api';
import { Commands, Views } from '../contributions';
import { KeyedThrottle } from '../throttle';
import {
  RECENT_CALLS_LISTED, TOOL_GROUPS, TOOL_GROUP_LABELS, callContextValue, callRow, isOpenCall, providerContextValue, providerRow, toolGroupDescription,
  toolRow, type ToolGroup,
} from '../toolsModel';

export type ToolsNode =
  | { readonly kind: 'toolGroup'; readonly group: ToolGroup }
  | { readonly kind: 'toolProvider'; readonly id: string }
  | { readonly kind: 'tool'; readonly providerId: string; readonly name: string }
  | { readonly kind: 'toolCall'; readonly id: string };

/** The engine announces a call when it starts, changes state and ends (not per frame); the view asks for its rows at most this often, while visible. */
const TOOLS_REFRESH_MS = 500;

/** The call row a command was run on, if it was run on one (not from the palette). */
export function asToolCallNode(value: unknown): Extract<ToolsNode, { kind: 'toolCall' }> | undefined {
  return typeof value === 'object' && value !== null && (value as ToolsNode).kind === 'toolCall' && typeof (value as { id: unknown }).id === 'string'
    ? value as Extract<ToolsNode, { kind: 'toolCall' }> : undefined;
}

class ToolsTreeProvider implements vscode.TreeDataProvider<ToolsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<ToolsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly groupNodes = new Map<ToolGroup, ToolsNode>(TOOL_GROUPS.map((group) => [group, { kind: 'toolGroup', group }]));
  /** The last listing: the groups' children come from the same listing as their counts. */
  private providers: ProviderInfo[] = [];
  private calls: ToolCallRecord[] = [];
  private readonly providerNodes = new Map<string, ToolsNode>();
  private readonly toolNodes = new Map<string, ToolsNode>();
  private readonly callNodes = new Map<string, ToolsNode>();

  constructor(private readonly source: () => CoordinatorApi | undefined) {}

  refresh(): void {
    this.changed.fire(undefined);
  }

  call(callId: string): ToolCallRecord | undefined {
    return this.calls.find((c) => c.callId === callId);
  }

  async getChildren(node?: ToolsNode): Promise<ToolsNode[]> {
    if (node?.kind === 'toolGroup') {
      return node.group === 'providers'
        ? this.providers.map((p) => cached(this.providerNodes, p.providerId, () => ({ kind: 'toolProvider', id: p.providerId })))
        : this.calls.map((c) => cached(this.callNodes, c.callId, () => ({ kind: 'toolCall', id: c.callId })));
    }
    if (node?.kind === 'toolProvider') {
      const provider = this.providers.find((p) => p.providerId === node.id);
      return (provider?.tools ?? []).map((t) => cached(this.toolNodes, `${node.id}\u0000${t.name}`, () => ({ kind: 'tool', providerId: node.id, name: t.name })));
    }
    if (node) return [];
    const api = this.source();
    if (!api) return [];
    const [providers, calls] = await Promise.all([
      api.toolProviders().catch(() => [] as ProviderInfo[]),
      api.toolCalls(RECENT_CALLS_LISTED).catch(() => [] as ToolCallRecord[]),
    ]);
    if (api !== this.source()) return [];
    this.providers = providers;
    this.calls = calls;
    prune(this.providerNodes, new Set(providers.map((p) => p.providerId)));
    prune(this.toolNodes, new Set(providers.flatMap((p) => p.tools.map((t) => `${p.providerId}\u0000${t.name}`))));
    prune(this.callNodes, new Set(calls.map((c) => c.callId)));
    return TOOL_GROUPS.map((group) => this.groupNodes.get(group)!);
  }

  getTreeItem(node: ToolsNode): vscode.TreeItem {
    switch (node.kind) {
      case 'toolGroup': {
        const item = new vscode.TreeItem(TOOL_GROUP_LABELS[node.group], vscode.TreeItemCollapsibleState.Expanded);
        item.id = `toolGroup:${node.group}`;
        item.description = toolGroupDescription(node.group, this.providers, this.calls);
        item.contextValue = `toolGroup+${node.group}`;
        return item;
      }
      case 'toolProvider': {
        const provider = this.providers.find((p) => p.providerId === node.id);
        if (!provider) return new vscode.TreeItem(node.id);
        const row = providerRow(provider);
        const item = new vscode.TreeItem(row.label, provider.tools.length ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None);
        item.id = `toolProvider:${provider.providerId}`;
        item.description = row.description;
        // A plain string: provider ids, tool names and reasons come from agents and are never rendered as Markdown.
        item.tooltip = row.tooltip;
        item.contextValue = providerContextValue(provider);
        item.iconPath = provider.available ? new vscode.ThemeIcon('tools') : new vscode.ThemeIcon('debug-disconnect', new vscode.ThemeColor('disabledForeground'));
        item.accessibilityInformation = { label: `${row.label}, ${row.description}` };
        return item;
      }
      case 'tool': {
        const tool = this.providers.find((p) => p.providerId === node.providerId)?.tools.find((t) => t.name === node.name);
        if (!tool) return new vscode.TreeItem(node.name);
        const row = toolRow(tool);
        const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.None);
        item.id = `tool:${node.providerId}\u0000${node.name}`;
        item.description = row.description;
        item.tooltip = row.tooltip;
        item.contextValue = 'tool';
        item.iconPath = new vscode.ThemeIcon('symbol-method');
        return item;
      }
      case 'toolCall': {
        const call = this.call(node.id);
        if (!call) return new vscode.TreeItem(`call ${node.id}`);
        const row = callRow(call);
        const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.None);
        item.id = `toolCall:${call.callId}`;
        item.description = row.description;
        item.tooltip = row.tooltip;
        item.contextValue = callContextValue(call);
        item.iconPath = outcomeIcon(call);
        item.command = { command: Commands.showToolCallDetails, title: 'Show Tool Call Details', arguments: [node] };
        item.accessibilityInformation = { label: `${row.label}, ${row.description}` };
        return item;
      }
    }
  }

  dispose(): void {
    this.changed.dispose();
  }
}

function cached<N>(nodes: Map<string, N>, key: string, make: () => N): N {
  let node = nodes.get(key);
  if (!node) nodes.set(key, (node = make()));
  return node;
}

function prune<N>(nodes: Map<string, N>, keep: ReadonlySet<string>): void {
  for (const key of [...nodes.keys()]) if (!keep.has(key)) nodes.delete(key);
}

function outcomeIcon(call: ToolCallRecord): vscode.ThemeIcon {
  if (isOpenCall(call)) return new vscode.ThemeIcon(call.outcome === 'running' ? 'sync~spin' : call.outcome === 'queued' ? 'clock' : 'person');
  switch (call.outcome) {
    case 'ok': return new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
    case 'cancelled': return new vscode.ThemeIcon('circle-slash');
    default: return new vscode.ThemeIcon('error', new vscode.ThemeColor('problemsErrorIcon.foreground'));
  }
}

/**
 * The Tools view: Providers (built in and agents, available or why not) → their tools (side effects, idempotent, max
 * concurrency, timeout; the input schema in the tooltip), and Recent calls (the newest 100: provider/tool, caller,
 * outcome, duration, frames and bytes). Live: it follows the tools engine's changes, throttled, while it is visible.
 */
export class ToolsView implements vscode.Disposable {
  private api: CoordinatorApi | undefined;
  private subscription: Disposable | undefined;
  private stale = false;
  private readonly provider = new ToolsTreeProvider(() => this.api);
  private readonly view: vscode.TreeView<ToolsNode>;
  private readonly throttle = new KeyedThrottle<'tools'>(TOOLS_REFRESH_MS, () => this.refreshIfVisible());
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor() {
    this.view = vscode.window.createTreeView(Views.tools, { treeDataProvider: this.provider, showCollapseAll: true });
    this.subscriptions.push(this.view.onDidChangeVisibility(({ visible }) => {
      if (visible && this.stale) this.refreshIfVisible();
    }));
  }

  bind(api: CoordinatorApi | undefined): void {
    this.subscription?.dispose();
    this.throttle.cancel();
    this.api = api;
    this.subscription = api?.onDidChangeTools(() => this.throttle.schedule('tools'));
    this.stale = true;
    this.refreshIfVisible();
  }

  refresh(): void {
    this.stale = false;
    this.provider.refresh();
  }

  /** The call of the selected row, if a call row is selected. */
  selectedCallId(): string | undefined {
    const node = this.view.selection[0];
    return node?.kind === 'toolCall' ? node.id : undefined;
  }

  dispose(): void {
    this.subscription?.dispose();
    this.throttle.dispose();
    for (const subscription of this.subscriptions) subscription.dispose();
    this.view.dispose();
    this.provider.dispose();
  }

  private refreshIfVisible(): void {
    if (this.view.visible) this.refresh();
    else this.stale = true;
  }
}
