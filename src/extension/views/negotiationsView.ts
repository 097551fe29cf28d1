import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable, NegotiationSummary, RoomArtifactSummary } from '../../core/api';
import { Commands, Views } from '../contributions';
import { KeyedThrottle } from '../throttle';
import {
  NEGOTIATIONS_LISTED, NEGOTIATION_GROUPS, NEGOTIATION_GROUP_LABELS, debateRow, groupDescription, roomRow, type NegotiationGroup, type NegotiationRow,
} from '../negotiationsModel';

export type NegotiationsNode =
  | { readonly kind: 'negotiationGroup'; readonly group: NegotiationGroup }
  | { readonly kind: 'debate'; readonly id: string }
  | { readonly kind: 'roomArtifact'; readonly id: string };

/** Debates change per round and vote; the view asks for its rows at most this often, while visible. */
const NEGOTIATIONS_REFRESH_MS = 500;

/** The row a command was run on, if it was run on a debate or room row (not from the palette). */
export function asNegotiationNode(value: unknown): Exclude<NegotiationsNode, { kind: 'negotiationGroup' }> | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const node = value as NegotiationsNode;
  return (node.kind === 'debate' || node.kind === 'roomArtifact') && typeof (node as { id: unknown }).id === 'string' ? node : undefined;
}

class NegotiationsTreeProvider implements vscode.TreeDataProvider<NegotiationsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<NegotiationsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly groupNodes = new Map<NegotiationGroup, NegotiationsNode>(NEGOTIATION_GROUPS.map((group) => [group, { kind: 'negotiationGroup', group }]));
  private debates: NegotiationSummary[] = [];
  private rooms: RoomArtifactSummary[] = [];
  private readonly debateNodes = new Map<string, NegotiationsNode>();
  private readonly roomNodes = new Map<string, NegotiationsNode>();

  constructor(private readonly source: () => CoordinatorApi | undefined) {}

  refresh(): void {
    this.changed.fire(undefined);
  }

  async getChildren(node?: NegotiationsNode): Promise<NegotiationsNode[]> {
    if (node?.kind === 'negotiationGroup') {
      return node.group === 'debates'
        ? this.debates.map((d) => cached(this.debateNodes, d.id, () => ({ kind: 'debate', id: d.id })))
        : this.rooms.map((r) => cached(this.roomNodes, r.artifactId, () => ({ kind: 'roomArtifact', id: r.artifactId })));
    }
    if (node) return [];
    const api = this.source();
    if (!api) return [];
    const [debates, rooms] = await Promise.all([
      api.negotiations(NEGOTIATIONS_LISTED).catch(() => [] as NegotiationSummary[]),
      api.roomArtifacts(NEGOTIATIONS_LISTED).catch(() => [] as RoomArtifactSummary[]),
    ]);
    if (api !== this.source()) return [];
    this.debates = debates;
    this.rooms = rooms;
    prune(this.debateNodes, new Set(debates.map((d) => d.id)));
    prune(this.roomNodes, new Set(rooms.map((r) => r.artifactId)));
    return NEGOTIATION_GROUPS.map((group) => this.groupNodes.get(group)!);
  }

  getTreeItem(node: NegotiationsNode): vscode.TreeItem {
    switch (node.kind) {
      case 'negotiationGroup': {
        const item = new vscode.TreeItem(NEGOTIATION_GROUP_LABELS[node.group], vscode.TreeItemCollapsibleState.Expanded);
        item.id = `negotiationGroup:${node.group}`;
        item.description = groupDescription(node.group, this.debates, this.rooms);
        item.contextValue = `negotiationGroup+${node.group}`;
        return item;
      }
      case 'debate': {
        const debate = this.debates.find((d) => d.id === node.id);
        return debate ? rowItem(`debate:${debate.id}`, debateRow(debate), node) : new vscode.TreeItem(node.id);
      }
      case 'roomArtifact': {
        const room = this.rooms.find((r) => r.artifactId === node.id);
        return room ? rowItem(`roomArtifact:${room.artifactId}`, roomRow(room), node) : new vscode.TreeItem(node.id);
      }
    }
  }

  dispose(): void {
    this.changed.dispose();
  }
}

function rowItem(id: string, row: NegotiationRow, node: NegotiationsNode): vscode.TreeItem {
  const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.None);
  item.id = id;
  item.description = row.description;
  // A plain string: topics, ids and states come from agents and are never rendered as Markdown.
  item.tooltip = row.tooltip;
  item.contextValue = row.contextValue;
  item.iconPath = row.needsYou ? new vscode.ThemeIcon(row.icon, new vscode.ThemeColor('notificationsWarningIcon.foreground'))
    : row.icon === 'pass' ? new vscode.ThemeIcon(row.icon, new vscode.ThemeColor('testing.iconPassed'))
      : row.icon === 'error' ? new vscode.ThemeIcon(row.icon, new vscode.ThemeColor('problemsWarningIcon.foreground')) : new vscode.ThemeIcon(row.icon);
  item.command = { command: Commands.openNegotiation, title: 'Open Negotiation', arguments: [node] };
  item.accessibilityInformation = { label: `${row.label}, ${row.description}` };
  return item;
}

function cached<N>(nodes: Map<string, N>, key: string, make: () => N): N {
  let node = nodes.get(key);
  if (!node) nodes.set(key, (node = make()));
  return node;
}

function prune<N>(nodes: Map<string, N>, keep: ReadonlySet<string>): void {
  for (const key of [...nodes.keys()]) if (!keep.has(key)) nodes.delete(key);
}

/**
 * The Negotiations view: Debates (open and paused first, then recent: topic, participants, rounds, best score, state)
 * and Rooms (artifact, type, producer, revision, votes n/m, state or outcome); rows that wait for a person are marked.
 * Live: it follows the negotiation areas' changes, throttled, while it is visible. A row opens the negotiation panel.
 */
export class NegotiationsView implements vscode.Disposable {
  private api: CoordinatorApi | undefined;
  private subscription: Disposable | undefined;
  private stale = false;
  private readonly provider = new NegotiationsTreeProvider(() => this.api);
  private readonly view: vscode.TreeView<NegotiationsNode>;
  private readonly throttle = new KeyedThrottle<'negotiations'>(NEGOTIATIONS_REFRESH_MS, () => this.refreshIfVisible());
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor() {
    this.view = vscode.window.createTreeView(Views.negotiations, { treeDataProvider: this.provider, showCollapseAll: true });
    this.subscriptions.push(this.view.onDidChangeVisibility(({ visible }) => {
      if (visible && this.stale) this.refreshIfVisible();
    }));
  }

  bind(api: CoordinatorApi | undefined): void {
    this.subscription?.dispose();
    this.throttle.cancel();
    this.api = api;
    this.subscription = api?.onDidChangeNegotiations(() => this.throttle.schedule('negotiations'));
    this.stale = true;
    this.refreshIfVisible();
  }

  refresh(): void {
    this.stale = false;
    this.provider.refresh();
  }

  /** The selected debate or room row, if one is selected. */
  selected(): Exclude<NegotiationsNode, { kind: 'negotiationGroup' }> | undefined {
    return asNegotiationNode(this.view.selection[0]);
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
