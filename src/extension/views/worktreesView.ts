import * as vscode from 'vscode';
import type { Disposable, WorktreeInfo } from '../../core/api';
import { groupByRepository, repositoryRow, worktreeRow, type WorktreeRow } from '../worktreesModel';
import type { WorktreeState } from '../worktreeState';
import { NodeCache } from './liveTree';
import { rowItem } from './rowItem';

/** A row of the Worktrees view, as its context menu hands it to a command. */
export type WorktreesNode =
  | { readonly kind: 'repository'; readonly repoId: string }
  | { readonly kind: 'worktree'; readonly repoId: string; readonly worktreeId: string };

/** The worktree row a command was run on, if it was run on one (not from the palette). */
export function asWorktreeNode(value: unknown): Extract<WorktreesNode, { kind: 'worktree' }> | undefined {
  const node = value as WorktreesNode | undefined;
  return typeof node === 'object' &&
    node !== null &&
    node.kind === 'worktree' &&
    typeof node.repoId === 'string' &&
    typeof node.worktreeId === 'string'
    ? node
    : undefined;
}

/**
 * The Worktrees view: the workspace's repositories, each with its agent worktrees (branch, base, ahead/behind, dirty
 * file count, who is bound, last snapshot; stale ones marked). It shows what `WorktreeState` last read, so it
 * refreshes when worktrees change (throttled) and reads git only then.
 */
export class WorktreesTreeProvider implements vscode.TreeDataProvider<WorktreesNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<WorktreesNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscription: Disposable;
  private readonly repositoryNodes = new NodeCache<WorktreesNode>();
  private readonly worktreeNodes = new NodeCache<WorktreesNode>();

  constructor(private readonly state: WorktreeState) {
    this.subscription = state.onDidChange(() => this.changed.fire(undefined));
  }

  async getChildren(node?: WorktreesNode): Promise<WorktreesNode[]> {
    if (!this.state.coordinator) return [];
    const data = await this.state.current();
    const groups = groupByRepository(data.repositories, data.worktrees);
    if (!node) return groups.map((g) => this.repositoryNode(g.repository.repoId));
    if (node.kind !== 'repository') return [];
    const group = groups.find((g) => g.repository.repoId === node.repoId);
    return (group?.worktrees ?? []).map((w) => this.worktreeNode(w.repoId, w.worktreeId));
  }

  getParent(node: WorktreesNode): WorktreesNode | undefined {
    return node.kind === 'worktree' ? this.repositoryNode(node.repoId) : undefined;
  }

  async getTreeItem(node: WorktreesNode): Promise<vscode.TreeItem> {
    const data = await this.state.current();
    if (node.kind === 'repository') {
      const group = groupByRepository(data.repositories, data.worktrees).find(
        (g) => g.repository.repoId === node.repoId,
      );
      const row = group ? repositoryRow(group) : { label: node.repoId, description: '', tooltip: node.repoId };
      const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.Expanded);
      item.id = `repository:${node.repoId}`;
      item.description = row.description;
      item.tooltip = row.tooltip;
      item.iconPath = new vscode.ThemeIcon('repo');
      item.contextValue = 'repository';
      return item;
    }
    const worktree = data.worktrees.find((w) => w.repoId === node.repoId && w.worktreeId === node.worktreeId);
    if (!worktree) return new vscode.TreeItem(node.worktreeId);
    return worktreeItem(worktree, worktreeRow(worktree, formatTime));
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }

  private repositoryNode(repoId: string): WorktreesNode {
    return this.repositoryNodes.get(repoId, () => ({ kind: 'repository', repoId }));
  }

  private worktreeNode(repoId: string, worktreeId: string): WorktreesNode {
    return this.worktreeNodes.get(`${repoId}/${worktreeId}`, () => ({ kind: 'worktree', repoId, worktreeId }));
  }
}

function worktreeItem(worktree: WorktreeInfo, row: WorktreeRow): vscode.TreeItem {
  return rowItem(`worktree:${worktree.repoId}/${worktree.worktreeId}`, row, {
    contextValue: row.contextValue,
    iconPath: rowIcon(row.icon),
  });
}

export function rowIcon(icon: WorktreeRow['icon']): vscode.ThemeIcon {
  switch (icon) {
    case 'stale':
      return new vscode.ThemeIcon('warning', new vscode.ThemeColor('problemsWarningIcon.foreground'));
    case 'locked':
      return new vscode.ThemeIcon('lock');
    case 'bound':
      return new vscode.ThemeIcon('git-branch', new vscode.ThemeColor('testing.iconPassed'));
    case 'free':
      return new vscode.ThemeIcon('git-branch');
  }
}

function formatTime(ms: number): string {
  return new Date(ms).toLocaleString();
}
