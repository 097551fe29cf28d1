import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable, NegotiationSummary, RoomArtifactSummary } from '../../core/api';
import { Commands, Views } from '../contributions';
import {
  NEGOTIATIONS_LISTED,
  NEGOTIATION_GROUPS,
  NEGOTIATION_GROUP_LABELS,
  debateRow,
  groupDescription,
  roomRow,
  type NegotiationGroup,
  type NegotiationRow,
} from '../negotiationsModel';
import { CoordinatorRows, LiveTreeView, NodeCache } from './liveTree';
import { groupItem, rowItem, themeIcon } from './rowItem';

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
  return (node.kind === 'debate' || node.kind === 'roomArtifact') && typeof (node as { id: unknown }).id === 'string'
    ? node
    : undefined;
}

class NegotiationsTreeProvider extends CoordinatorRows<NegotiationsNode> {
  private readonly groupNodes = new Map<NegotiationGroup, NegotiationsNode>(
    NEGOTIATION_GROUPS.map((group) => [group, { kind: 'negotiationGroup', group }]),
  );
  private debates: NegotiationSummary[] = [];
  private rooms: RoomArtifactSummary[] = [];
  private readonly debateNodes = new NodeCache<NegotiationsNode>();
  private readonly roomNodes = new NodeCache<NegotiationsNode>();

  async getChildren(node?: NegotiationsNode): Promise<NegotiationsNode[]> {
    if (node?.kind === 'negotiationGroup') {
      return node.group === 'debates'
        ? this.debates.map((d) => this.debateNodes.get(d.id, () => ({ kind: 'debate', id: d.id })))
        : this.rooms.map((r) => this.roomNodes.get(r.artifactId, () => ({ kind: 'roomArtifact', id: r.artifactId })));
    }
    if (node) return [];
    const listing = await this.listed((api) =>
      Promise.all([
        api.negotiations(NEGOTIATIONS_LISTED).catch(() => [] as NegotiationSummary[]),
        api.roomArtifacts(NEGOTIATIONS_LISTED).catch(() => [] as RoomArtifactSummary[]),
      ]),
    );
    if (!listing) return [];
    const [debates, rooms] = listing;
    this.debates = debates;
    this.rooms = rooms;
    this.debateNodes.keepOnly(new Set(debates.map((d) => d.id)));
    this.roomNodes.keepOnly(new Set(rooms.map((r) => r.artifactId)));
    return NEGOTIATION_GROUPS.map((group) => this.groupNodes.get(group)!);
  }

  getTreeItem(node: NegotiationsNode): vscode.TreeItem {
    switch (node.kind) {
      case 'negotiationGroup':
        return groupItem(
          'negotiationGroup',
          node.group,
          NEGOTIATION_GROUP_LABELS[node.group],
          groupDescription(node.group, this.debates, this.rooms),
        );
      case 'debate': {
        const debate = this.debates.find((d) => d.id === node.id);
        return debate ? negotiationItem(`debate:${debate.id}`, debateRow(debate), node) : new vscode.TreeItem(node.id);
      }
      case 'roomArtifact': {
        const room = this.rooms.find((r) => r.artifactId === node.id);
        return room
          ? negotiationItem(`roomArtifact:${room.artifactId}`, roomRow(room), node)
          : new vscode.TreeItem(node.id);
      }
    }
  }
}

function negotiationItem(id: string, row: NegotiationRow, node: NegotiationsNode): vscode.TreeItem {
  return rowItem(id, row, {
    contextValue: row.contextValue,
    iconPath: themeIcon(
      row.icon,
      row.needsYou
        ? 'notificationsWarningIcon.foreground'
        : row.icon === 'pass'
          ? 'testing.iconPassed'
          : row.icon === 'error'
            ? 'problemsWarningIcon.foreground'
            : undefined,
    ),
    command: { command: Commands.openNegotiation, title: 'Open Negotiation', arguments: [node] },
  });
}

/**
 * The Negotiations view: Debates (open and paused first, then recent: topic, participants, rounds, best score, state)
 * and Rooms (artifact, type, producer, revision, votes n/m, state or outcome); rows that wait for a person are marked.
 * Live: it follows the negotiation areas' changes, throttled, while it is visible. A row opens the negotiation panel.
 */
export class NegotiationsView extends LiveTreeView<NegotiationsNode, NegotiationsTreeProvider> {
  constructor() {
    super(new NegotiationsTreeProvider(), Views.negotiations, NEGOTIATIONS_REFRESH_MS, { showCollapseAll: true });
  }

  /** The selected debate or room row, if one is selected. */
  selected(): Exclude<NegotiationsNode, { kind: 'negotiationGroup' }> | undefined {
    return asNegotiationNode(this.view.selection[0]);
  }

  protected follow(api: CoordinatorApi, changed: () => void): Disposable[] {
    return [api.onDidChangeNegotiations(changed)];
  }
}
