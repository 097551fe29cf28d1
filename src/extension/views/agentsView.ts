import * as vscode from 'vscode';
import type { AgentRecord, CoordinatorApi, Disposable, InboxStats, LaunchProfile, LaunchRecord } from '../../core/api';
import { agentRow, connection, inboxSummary } from '../agentsModel';
import { launchedRowParts } from '../launchModel';
import { KeyedThrottle } from '../throttle';
import { agentWorktreeRow, worktreeOf } from '../worktreesModel';
import type { WorktreeState } from '../worktreeState';
import { NodeCache } from './liveTree';
import { rowItem, themeIcon } from './rowItem';

type AgentsNode =
  | { readonly kind: 'agent'; readonly agentId: string }
  | { readonly kind: 'detail'; readonly agentId: string; readonly key: DetailKey }
  /** The worktree a bound agent works in (or its failed bind), the first child of its row. */
  | { readonly kind: 'agentWorktree'; readonly agentId: string };

type DetailKey = 'state' | 'presence' | 'inbox' | 'class' | 'capabilities' | 'modalities' | 'heartbeat' | 'description';
const DETAIL_KEYS: readonly DetailKey[] = [
  'state',
  'presence',
  'inbox',
  'class',
  'capabilities',
  'modalities',
  'heartbeat',
  'description',
];

/** Inbox counts change with every delivery; the view shows them at most this often per agent. */
export const INBOX_REFRESH_MS = 250;

/** What one agent's row and details show, read once per refresh of the row. */
interface AgentSnapshot {
  readonly agent: AgentRecord;
  readonly inbox: InboxStats | undefined;
  /** Set for an agent launched from the editor (SW4RM: Launch Agent…). */
  readonly launch: LaunchRecord | undefined;
  readonly profile: LaunchProfile | undefined;
}

/** Which launched agents have a terminal in this window (launchedTerminals.ts). */
export interface AgentTerminals {
  has(agentId: string): boolean;
  onDidChange(listener: (agentId: string) => void): Disposable;
}

/**
 * The Agents view: one row per registered agent (name, id, state, presence, inbox counts) with its details as
 * children. It follows the coordinator's agent and inbox events, so it needs no manual refresh; a change
 * to one agent refreshes only that agent's row, and inbox changes are coalesced per agent.
 */
export class AgentsTreeProvider implements vscode.TreeDataProvider<AgentsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<AgentsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private api: CoordinatorApi | undefined;
  private subscriptions: Disposable[] = [];
  private readonly inboxRefresh = new KeyedThrottle<string>(
    INBOX_REFRESH_MS,
    (agentId) => void this.refreshIfRegistered(agentId),
  );
  private readonly agentNodes = new NodeCache<AgentsNode>();
  private readonly detailNodes = new NodeCache<AgentsNode>();
  /** The data of each shown agent, shared by its row and its details until the row is refreshed. */
  private readonly snapshots = new Map<string, Promise<AgentSnapshot | undefined>>();
  private readonly worktreeNodes = new NodeCache<AgentsNode>();
  private readonly worktreeSubscription: Disposable | undefined;
  private readonly terminalSubscription: Disposable | undefined;
  /** The launch profiles, read once per refresh of the whole tree (for how a launched agent reads its inbox). */
  private profiles: Promise<LaunchProfile[]> | undefined;

  /**
   * With `worktrees`, a bound agent's row has its worktree as its first child, refreshed as worktrees change; with
   * `terminals`, a launched agent's row says whether its terminal is open here (Show Terminal, Relaunch).
   */
  constructor(
    private readonly worktrees?: WorktreeState,
    private readonly terminals?: AgentTerminals,
  ) {
    this.worktreeSubscription = worktrees?.onDidChange(() => this.changed.fire(undefined));
    this.terminalSubscription = terminals?.onDidChange((agentId) => this.refresh(agentId));
  }

  /** Follows the API of a (new) coordinator, or none while the coordinator is stopped. */
  bind(api: CoordinatorApi | undefined): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    this.inboxRefresh.cancel();
    this.api = api;
    if (api) {
      this.subscriptions.push(
        api.onDidChangeAgents((change) =>
          this.refresh(change.kind === 'joined' || change.kind === 'left' ? undefined : change.agentId),
        ),
        api.onDidChangeInbox(({ agentId }) => this.inboxRefresh.schedule(agentId)),
        api.onDidChangeLaunches((change) =>
          this.refresh(change.kind === 'forgotten' ? change.agentId : change.record.agentId),
        ),
      );
    }
    this.refresh(undefined);
  }

  async getChildren(node?: AgentsNode): Promise<AgentsNode[]> {
    const api = this.api;
    if (!api) return [];
    if (node) {
      if (node.kind !== 'agent') return [];
      const details = DETAIL_KEYS.map((key) => this.detailNode(node.agentId, key));
      const binding = (await this.worktrees?.current())?.bindings.find(
        (b) => b.agentId === node.agentId && b.state !== 'UNBOUND',
      );
      return binding ? [this.worktreeNode(node.agentId), ...details] : details;
    }
    const agents = await api.agents().catch(() => []);
    return api === this.api ? agents.map((agent) => this.agentNode(agent.descriptor.agentId)) : [];
  }

  getParent(node: AgentsNode): AgentsNode | undefined {
    return node.kind === 'agent' ? undefined : this.agentNode(node.agentId);
  }

  async getTreeItem(node: AgentsNode): Promise<vscode.TreeItem> {
    if (node.kind === 'agentWorktree') return this.worktreeItem(node.agentId);
    const snapshot = await this.snapshot(node.agentId);
    if (!snapshot) return new vscode.TreeItem(node.agentId);
    const { agent, inbox } = snapshot;
    return node.kind === 'agent'
      ? agentItem(snapshot, this.terminals?.has(node.agentId) ?? false)
      : detailItem(agent, (node as { key: DetailKey }).key, inbox);
  }

  dispose(): void {
    this.worktreeSubscription?.dispose();
    this.terminalSubscription?.dispose();
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    this.inboxRefresh.dispose();
    this.changed.dispose();
  }

  /** Refreshes one agent's row (with its details), or the whole tree. */
  private refresh(agentId: string | undefined): void {
    if (agentId === undefined) {
      this.snapshots.clear();
      this.profiles = undefined;
    } else {
      this.snapshots.delete(agentId);
    }
    this.changed.fire(agentId === undefined ? undefined : this.agentNode(agentId));
  }

  private async refreshIfRegistered(agentId: string): Promise<void> {
    const api = this.api;
    const agent = await api?.agent(agentId).catch(() => undefined);
    if (agent && api === this.api) this.refresh(agentId);
  }

  private snapshot(agentId: string): Promise<AgentSnapshot | undefined> {
    const api = this.api;
    if (!api) return Promise.resolve(undefined);
    let snapshot = this.snapshots.get(agentId);
    if (!snapshot) {
      snapshot = Promise.all([
        api.agent(agentId),
        api.inboxStats(agentId).catch(() => undefined),
        api.launch(agentId).catch(() => undefined),
      ]).then(
        async ([agent, inbox, launch]) => {
          if (!agent) return undefined;
          const profile = launch ? (await this.launchProfiles(api)).find((p) => p.id === launch.profileId) : undefined;
          return { agent, inbox, launch, profile };
        },
        () => undefined,
      );
      this.snapshots.set(agentId, snapshot);
    }
    return snapshot;
  }

  private launchProfiles(api: CoordinatorApi): Promise<LaunchProfile[]> {
    this.profiles ??= api.launchProfiles().then(
      (answer) => answer.profiles,
      () => [],
    );
    return this.profiles;
  }

  private agentNode(agentId: string): AgentsNode {
    return this.agentNodes.get(agentId, () => ({ kind: 'agent', agentId }));
  }

  private worktreeNode(agentId: string): AgentsNode {
    return this.worktreeNodes.get(agentId, () => ({ kind: 'agentWorktree', agentId }));
  }

  private async worktreeItem(agentId: string): Promise<vscode.TreeItem> {
    const data = await this.worktrees?.current();
    const binding = data?.bindings.find((b) => b.agentId === agentId);
    const row =
      binding && data && agentWorktreeRow(binding, worktreeOf(binding, data.worktrees), (ms) => formatTime(ms));
    if (!row) return new vscode.TreeItem('Not bound to a worktree');
    return rowItem(`agent:${agentId}/worktree`, row, {
      contextValue: row.contextValue,
      accessibilityLabel: false,
      iconPath:
        binding.state === 'BIND_FAILED' ? themeIcon('error', 'problemsErrorIcon.foreground') : themeIcon('git-branch'),
    });
  }

  private detailNode(agentId: string, key: DetailKey): AgentsNode {
    return this.detailNodes.get(`${agentId}/${key}`, () => ({ kind: 'detail', agentId, key }));
  }
}

function agentItem({ agent, inbox, launch, profile }: AgentSnapshot, hasTerminal: boolean): vscode.TreeItem {
  const { descriptor } = agent;
  const launched = launch ? launchedRowParts(launch, profile, hasTerminal, formatTime) : undefined;
  const row = agentRow(agent, inbox, formatTime, launched);
  const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.Collapsed);
  item.id = `agent:${descriptor.agentId}`;
  item.description = row.description;
  item.iconPath = launch ? launchIcon(launch) : presenceIcon(agent);
  item.contextValue = `agent+${agent.presence}${launched?.contextSuffix ?? ''}${hasTerminal ? '+terminal' : ''}`;
  const tooltip = new vscode.MarkdownString(undefined, false);
  tooltip.appendMarkdown('**').appendText(descriptor.name).appendMarkdown('**\n\n');
  tooltip.appendText(row.tooltip);
  item.tooltip = tooltip;
  return item;
}

function detailItem(agent: AgentRecord, key: DetailKey, inbox: InboxStats | undefined): vscode.TreeItem {
  const { descriptor } = agent;
  const [label, value] = ((): [string, string] => {
    switch (key) {
      case 'state':
        return ['State', agent.state];
      case 'presence':
        return ['Connection', connection(agent)];
      case 'inbox':
        return ['Inbox', inbox ? inboxSummary(inbox) : 'the coordinator is not running'];
      case 'class':
        return ['Communication class', descriptor.communicationClass];
      case 'capabilities':
        return ['Capabilities', descriptor.capabilities.join(', ') || '—'];
      case 'modalities':
        return ['Modalities', descriptor.modalitiesSupported.join(', ') || 'any'];
      case 'heartbeat':
        return ['Last heartbeat', formatTime(agent.lastHeartbeatAt)];
      case 'description':
        return ['Description', descriptor.description || '—'];
    }
  })();
  const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.None);
  item.id = `agent:${descriptor.agentId}/${key}`;
  item.description = value;
  item.tooltip = value;
  item.contextValue = `agentDetail+${key}`;
  return item;
}

/** A launched agent's icon: its process's state (the terminal icon while it runs). */
function launchIcon(launch: LaunchRecord): vscode.ThemeIcon {
  switch (launch.state) {
    case 'STARTING':
      return new vscode.ThemeIcon('loading~spin');
    case 'RUNNING':
      return new vscode.ThemeIcon('terminal', new vscode.ThemeColor('testing.iconPassed'));
    case 'EXITED':
      return new vscode.ThemeIcon('debug-stop', new vscode.ThemeColor('disabledForeground'));
    case 'FAILED':
      return new vscode.ThemeIcon('error', new vscode.ThemeColor('problemsErrorIcon.foreground'));
  }
}

function presenceIcon(agent: AgentRecord): vscode.ThemeIcon {
  switch (agent.presence) {
    case 'online':
      return new vscode.ThemeIcon('circle-filled', new vscode.ThemeColor('testing.iconPassed'));
    case 'unavailable':
      return new vscode.ThemeIcon('warning', new vscode.ThemeColor('problemsWarningIcon.foreground'));
    case 'disconnected':
      return new vscode.ThemeIcon('circle-outline', new vscode.ThemeColor('disabledForeground'));
  }
}

function formatTime(ms: number | null): string {
  return ms === null ? 'never' : new Date(ms).toLocaleString();
}
