import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable, ProviderInfo, ToolCallRecord } from '../../core/api';
import { Commands, Views } from '../contributions';
import {
  RECENT_CALLS_LISTED,
  TOOL_GROUPS,
  TOOL_GROUP_LABELS,
  callContextValue,
  callRow,
  isOpenCall,
  providerContextValue,
  providerRow,
  toolGroupDescription,
  toolRow,
  type ToolGroup,
} from '../toolsModel';
import { CoordinatorRows, LiveTreeView, NodeCache } from './liveTree';
import { groupItem, rowItem, themeIcon } from './rowItem';

export type ToolsNode =
  | { readonly kind: 'toolGroup'; readonly group: ToolGroup }
  | { readonly kind: 'toolProvider'; readonly id: string }
  | { readonly kind: 'tool'; readonly providerId: string; readonly name: string }
  | { readonly kind: 'toolCall'; readonly id: string };

/** The engine announces a call when it starts, changes state and ends (not per frame); the view asks for its rows at most this often, while visible. */
const TOOLS_REFRESH_MS = 500;

/** The call row a command was run on, if it was run on one (not from the palette). */
export function asToolCallNode(value: unknown): Extract<ToolsNode, { kind: 'toolCall' }> | undefined {
  return typeof value === 'object' &&
    value !== null &&
    (value as ToolsNode).kind === 'toolCall' &&
    typeof (value as { id: unknown }).id === 'string'
    ? (value as Extract<ToolsNode, { kind: 'toolCall' }>)
    : undefined;
}

class ToolsTreeProvider extends CoordinatorRows<ToolsNode> {
  private readonly groupNodes = new Map<ToolGroup, ToolsNode>(
    TOOL_GROUPS.map((group) => [group, { kind: 'toolGroup', group }]),
  );
  /** The last listing: the groups' children come from the same listing as their counts. */
  private providers: ProviderInfo[] = [];
  private calls: ToolCallRecord[] = [];
  private readonly providerNodes = new NodeCache<ToolsNode>();
  private readonly toolNodes = new NodeCache<ToolsNode>();
  private readonly callNodes = new NodeCache<ToolsNode>();

  call(callId: string): ToolCallRecord | undefined {
    return this.calls.find((c) => c.callId === callId);
  }

  async getChildren(node?: ToolsNode): Promise<ToolsNode[]> {
    if (node?.kind === 'toolGroup') {
      return node.group === 'providers'
        ? this.providers.map((p) =>
            this.providerNodes.get(p.providerId, () => ({ kind: 'toolProvider', id: p.providerId })),
          )
        : this.calls.map((c) => this.callNodes.get(c.callId, () => ({ kind: 'toolCall', id: c.callId })));
    }
    if (node?.kind === 'toolProvider') {
      const provider = this.providers.find((p) => p.providerId === node.id);
      return (provider?.tools ?? []).map((t) =>
        this.toolNodes.get(`${node.id}\u0000${t.name}`, () => ({ kind: 'tool', providerId: node.id, name: t.name })),
      );
    }
    if (node) return [];
    const listing = await this.listed((api) =>
      Promise.all([
        api.toolProviders().catch(() => [] as ProviderInfo[]),
        api.toolCalls(RECENT_CALLS_LISTED).catch(() => [] as ToolCallRecord[]),
      ]),
    );
    if (!listing) return [];
    const [providers, calls] = listing;
    this.providers = providers;
    this.calls = calls;
    this.providerNodes.keepOnly(new Set(providers.map((p) => p.providerId)));
    this.toolNodes.keepOnly(new Set(providers.flatMap((p) => p.tools.map((t) => `${p.providerId}\u0000${t.name}`))));
    this.callNodes.keepOnly(new Set(calls.map((c) => c.callId)));
    return TOOL_GROUPS.map((group) => this.groupNodes.get(group)!);
  }

  getTreeItem(node: ToolsNode): vscode.TreeItem {
    switch (node.kind) {
      case 'toolGroup':
        return groupItem(
          'toolGroup',
          node.group,
          TOOL_GROUP_LABELS[node.group],
          toolGroupDescription(node.group, this.providers, this.calls),
        );
      case 'toolProvider': {
        const provider = this.providers.find((p) => p.providerId === node.id);
        if (!provider) return new vscode.TreeItem(node.id);
        return rowItem(`toolProvider:${provider.providerId}`, providerRow(provider), {
          contextValue: providerContextValue(provider),
          iconPath: provider.available ? themeIcon('tools') : themeIcon('debug-disconnect', 'disabledForeground'),
          collapsible: provider.tools.length
            ? vscode.TreeItemCollapsibleState.Collapsed
            : vscode.TreeItemCollapsibleState.None,
        });
      }
      case 'tool': {
        const tool = this.providers
          .find((p) => p.providerId === node.providerId)
          ?.tools.find((t) => t.name === node.name);
        if (!tool) return new vscode.TreeItem(node.name);
        return rowItem(`tool:${node.providerId}\u0000${node.name}`, toolRow(tool), {
          contextValue: 'tool',
          iconPath: themeIcon('symbol-method'),
          accessibilityLabel: false,
        });
      }
      case 'toolCall': {
        const call = this.call(node.id);
        if (!call) return new vscode.TreeItem(`call ${node.id}`);
        return rowItem(`toolCall:${call.callId}`, callRow(call), {
          contextValue: callContextValue(call),
          iconPath: outcomeIcon(call),
          command: { command: Commands.showToolCallDetails, title: 'Show Tool Call Details', arguments: [node] },
        });
      }
    }
  }
}

function outcomeIcon(call: ToolCallRecord): vscode.ThemeIcon {
  if (isOpenCall(call))
    return new vscode.ThemeIcon(
      call.outcome === 'running' ? 'sync~spin' : call.outcome === 'queued' ? 'clock' : 'person',
    );
  switch (call.outcome) {
    case 'ok':
      return new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
    case 'cancelled':
      return new vscode.ThemeIcon('circle-slash');
    default:
      return new vscode.ThemeIcon('error', new vscode.ThemeColor('problemsErrorIcon.foreground'));
  }
}

/**
 * The Tools view: Providers (built in and agents, available or why not) → their tools (side effects, idempotent, max
 * concurrency, timeout; the input schema in the tooltip), and Recent calls (the newest 100: provider/tool, caller,
 * outcome, duration, frames and bytes). Live: it follows the tools engine's changes, throttled, while it is visible.
 */
export class ToolsView extends LiveTreeView<ToolsNode, ToolsTreeProvider> {
  constructor() {
    super(new ToolsTreeProvider(), Views.tools, TOOLS_REFRESH_MS, { showCollapseAll: true });
  }

  /** The call of the selected row, if a call row is selected. */
  selectedCallId(): string | undefined {
    const node = this.view.selection[0];
    return node?.kind === 'toolCall' ? node.id : undefined;
  }

  protected follow(api: CoordinatorApi, changed: () => void): Disposable[] {
    return [api.onDidChangeTools(changed)];
  }
}
