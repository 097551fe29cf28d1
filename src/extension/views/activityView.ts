import * as vscode from 'vscode';
import type { ActivityEntry, CoordinatorApi, Disposable } from '../../core/api';
import { activityKey, activityOverlaps, activityRow, activityUsageMessage, groupActivity, type ActivityGrouping, type ActivityOverlap } from '../activityModel';
import { Views } from '../contributions';
import { KeyedThrottle } from '../throttle';

type ActivityNode =
  | { readonly kind: 'activityGroup'; readonly key: string }
  | { readonly kind: 'activity'; readonly key: string };

/** Entries come and go with every task; the view reads them at most this often, while visible. */
const ACTIVITY_REFRESH_MS = 500;
/** Where the grouping is remembered (workspace state). */
const GROUPING_KEY = 'sw4rm.activity.grouping';

interface ActivitySnapshot {
  readonly grouping: ActivityGrouping;
  readonly groups: Map<string, { readonly label: string; readonly entries: readonly ActivityEntry[] }>;
  readonly entries: Map<string, ActivityEntry>;
  readonly overlaps: Map<string, ActivityOverlap>;
}

class ActivityTreeProvider implements vscode.TreeDataProvider<ActivityNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<ActivityNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private snapshot: ActivitySnapshot = { grouping: 'agent', groups: new Map(), entries: new Map(), overlaps: new Map() };
  private readonly nodes = new Map<string, ActivityNode>();

  constructor(
    private readonly source: () => { api: CoordinatorApi; grouping: ActivityGrouping } | undefined,
    private readonly onListed: (message: string | undefined) => void,
  ) {}

  refresh(): void {
    this.changed.fire(undefined);
  }

  async getChildren(node?: ActivityNode): Promise<ActivityNode[]> {
    if (node?.kind === 'activity') return [];
    if (node?.kind === 'activityGroup') {
      return (this.snapshot.groups.get(node.key)?.entries ?? []).map((e) => this.node('activity', activityKey(e)));
    }
    const current = this.source();
    if (!current) return [];
    const [entries, usage] = await Promise.all([
      current.api.activity().catch(() => [] as ActivityEntry[]),
      current.api.activityUsage().catch(() => undefined),
    ]);
    if (current.api !== this.source()?.api) return [];
    const groups = groupActivity(entries, current.grouping);
    this.snapshot = {
      grouping: current.grouping,
      groups: new Map(groups.map((g) => [g.key, g])),
      entries: new Map(entries.map((e) => [activityKey(e), e])),
      overlaps: activityOverlaps(entries),
    };
    this.onListed(usage ? activityUsageMessage(usage) : undefined);
    this.nodes.clear();
    return groups.map((g) => this.node('activityGroup', g.key));
  }

  getTreeItem(node: ActivityNode): vscode.TreeItem {
    if (node.kind === 'activityGroup') {
      const group = this.snapshot.groups.get(node.key);
      const item = new vscode.TreeItem(group?.label ?? node.key, vscode.TreeItemCollapsibleState.Expanded);
      item.id = `activityGroup:${this.snapshot.grouping}:${node.key}`;
      const overlapping = group?.entries.filter((e) => this.snapshot.overlaps.has(activityKey(e))).length ?? 0;
      item.description = `${group?.entries.length ?? 0} active${overlapping ? ` · ${overlapping} overlapping` : ''}`;
      item.iconPath = new vscode.ThemeIcon(this.snapshot.grouping === 'agent' ? 'person' : 'repo');
      item.contextValue = 'activityGroup';
      return item;
    }
    const entry = this.snapshot.entries.get(node.key);
    if (!entry) return new vscode.TreeItem('(ended)');
    const row = activityRow(entry, this.snapshot.overlaps.get(node.key), this.snapshot.grouping, Date.now());
    const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.None);
    item.id = `activity:${this.snapshot.grouping}:${node.key}`;
    item.description = row.description;
    // A plain string: the description is the agent's own text.
    item.tooltip = row.tooltip;
    item.iconPath = row.overlapping
      ? new vscode.ThemeIcon('warning', new vscode.ThemeColor('list.warningForeground'))
      : new vscode.ThemeIcon('pulse');
    item.contextValue = row.overlapping ? 'activity+overlap' : 'activity';
    item.accessibilityInformation = { label: `${row.overlapping ? 'Warning: ' : ''}${row.label}, ${row.description}` };
    return item;
  }

  dispose(): void {
    this.changed.dispose();
  }

  private node(kind: ActivityNode['kind'], key: string): ActivityNode {
    const id = `${kind}\u0001${key}`;
    const known = this.nodes.get(id);
    if (known) return known;
    const node: ActivityNode = { kind, key };
    this.nodes.set(id, node);
    return node;
  }
}

/**
 * The Activity view (RFC §10): who is working on which repository, worktree and branch, right now; grouped by agent or
 * by repository (remembered); entries in the same repository and worktree or branch are marked as overlapping; the
 * buffer's 80% warning is the view's message. Live: the buffer's feed, throttled, while visible.
 */
export class ActivityView implements vscode.Disposable {
  private api: CoordinatorApi | undefined;
  private subscription: Disposable | undefined;
  private stale = false;
  private grouping: ActivityGrouping;
  private readonly provider = new ActivityTreeProvider(
    () => (this.api ? { api: this.api, grouping: this.grouping } : undefined),
    (message) => { this.view.message = message; });
  private readonly view: vscode.TreeView<ActivityNode>;
  private readonly throttle = new KeyedThrottle<'activity'>(ACTIVITY_REFRESH_MS, () => this.refreshIfVisible());
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly state: vscode.Memento) {
    this.grouping = state.get<ActivityGrouping>(GROUPING_KEY) === 'repository' ? 'repository' : 'agent';
    this.view = vscode.window.createTreeView(Views.activity, { treeDataProvider: this.provider, showCollapseAll: true });
    this.subscriptions.push(this.view.onDidChangeVisibility(({ visible }) => {
      if (visible && this.stale) this.refreshIfVisible();
    }));
    this.showGrouping();
  }

  bind(api: CoordinatorApi | undefined): void {
    this.subscription?.dispose();
    this.throttle.cancel();
    this.api = api;
    this.subscription = api?.onDidChangeActivity(() => this.throttle.schedule('activity'));
    if (!api) this.view.message = undefined;
    this.stale = true;
    this.refreshIfVisible();
  }

  refresh(): void {
    this.stale = false;
    this.provider.refresh();
  }

  /** Switches between grouping by agent and by repository, and remembers it for this workspace. */
  async toggleGrouping(): Promise<void> {
    this.grouping = this.grouping === 'agent' ? 'repository' : 'agent';
    await this.state.update(GROUPING_KEY, this.grouping);
    this.showGrouping();
    this.refresh();
  }

  dispose(): void {
    this.subscription?.dispose();
    this.throttle.dispose();
    for (const subscription of this.subscriptions) subscription.dispose();
    this.view.dispose();
    this.provider.dispose();
  }

  private showGrouping(): void {
    this.view.description = this.grouping === 'agent' ? 'by agent' : 'by repository';
  }

  private refreshIfVisible(): void {
    if (this.view.visible) this.refresh();
    else this.stale = true;
  }
}
