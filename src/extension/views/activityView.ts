import * as vscode from 'vscode';
import type { ActivityEntry, CoordinatorApi, Disposable } from '../../core/api';
import {
  activityKey,
  activityOverlaps,
  activityRow,
  activityUsageMessage,
  groupActivity,
  type ActivityGrouping,
  type ActivityOverlap,
} from '../activityModel';
import { Views } from '../contributions';
import { CoordinatorRows, LiveTreeView, NodeCache } from './liveTree';
import { rowItem, themeIcon } from './rowItem';

type ActivityNode =
  { readonly kind: 'activityGroup'; readonly key: string } | { readonly kind: 'activity'; readonly key: string };

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

class ActivityTreeProvider extends CoordinatorRows<ActivityNode> {
  private snapshot: ActivitySnapshot = {
    grouping: 'agent',
    groups: new Map(),
    entries: new Map(),
    overlaps: new Map(),
  };
  private readonly nodes = new NodeCache<ActivityNode>();
  /** How the next listing groups the entries. */
  grouping: ActivityGrouping = 'agent';

  async getChildren(node?: ActivityNode): Promise<ActivityNode[]> {
    if (node?.kind === 'activity') return [];
    if (node?.kind === 'activityGroup') {
      return (this.snapshot.groups.get(node.key)?.entries ?? []).map((e) => this.node('activity', activityKey(e)));
    }
    const grouping = this.grouping;
    const listing = await this.listed((api) =>
      Promise.all([api.activity().catch(() => [] as ActivityEntry[]), api.activityUsage().catch(() => undefined)]),
    );
    if (!listing) return [];
    const [entries, usage] = listing;
    const groups = groupActivity(entries, grouping);
    this.snapshot = {
      grouping,
      groups: new Map(groups.map((g) => [g.key, g])),
      entries: new Map(entries.map((e) => [activityKey(e), e])),
      overlaps: activityOverlaps(entries),
    };
    this.showMessage(usage ? activityUsageMessage(usage) : undefined);
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
    return rowItem(`activity:${this.snapshot.grouping}:${node.key}`, row, {
      contextValue: row.overlapping ? 'activity+overlap' : 'activity',
      iconPath: row.overlapping ? themeIcon('warning', 'list.warningForeground') : themeIcon('pulse'),
      accessibilityLabel: `${row.overlapping ? 'Warning: ' : ''}${row.label}, ${row.description}`,
    });
  }

  private node(kind: ActivityNode['kind'], key: string): ActivityNode {
    return this.nodes.get(`${kind}\u0001${key}`, () => ({ kind, key }));
  }
}

/**
 * The Activity view (RFC §10): who is working on which repository, worktree and branch, right now; grouped by agent or
 * by repository (remembered); entries in the same repository and worktree or branch are marked as overlapping; the
 * buffer's 80% warning is the view's message. Live: the buffer's feed, throttled, while visible.
 */
export class ActivityView extends LiveTreeView<ActivityNode, ActivityTreeProvider> {
  constructor(private readonly state: vscode.Memento) {
    super(new ActivityTreeProvider(), Views.activity, ACTIVITY_REFRESH_MS, { showCollapseAll: true });
    this.rows.grouping = state.get<ActivityGrouping>(GROUPING_KEY) === 'repository' ? 'repository' : 'agent';
    this.showGrouping();
  }

  override bind(api: CoordinatorApi | undefined): void {
    if (!api) this.view.message = undefined;
    super.bind(api);
  }

  /** Switches between grouping by agent and by repository, and remembers it for this workspace. */
  async toggleGrouping(): Promise<void> {
    this.rows.grouping = this.rows.grouping === 'agent' ? 'repository' : 'agent';
    await this.state.update(GROUPING_KEY, this.rows.grouping);
    this.showGrouping();
    this.refresh();
  }

  protected follow(api: CoordinatorApi, changed: () => void): Disposable[] {
    return [api.onDidChangeActivity(changed)];
  }

  private showGrouping(): void {
    this.view.description = this.rows.grouping === 'agent' ? 'by agent' : 'by repository';
  }
}
