import * as vscode from 'vscode';
import {
  MESSAGE_SCAN_WINDOW,
  MESSAGE_TYPES,
  type CoordinatorApi,
  type Disposable,
  type MessageSummary,
} from '../../core/api';
import { Commands, ContextKeys, Views } from '../contributions';
import {
  MESSAGE_STATES,
  NO_MESSAGE_FILTER,
  describeMessageFilter,
  isMessageFilterSet,
  messageDetailText,
  messageQuery,
  messageRow,
  shortId,
  type MessagesViewFilter,
} from '../messagesModel';
import { coordinatorDocument } from '../coordinatorCommands';
import { requireRunning } from '../notRunning';
import { CANCELLED, pickValueOrAny, type ValueChoice } from '../quickPick';
import type { ReadOnlyDocuments } from '../readOnlyDocuments';
import { CoordinatorRows, LiveTreeView, NodeCache } from './liveTree';
import { rowItem } from './rowItem';

export interface MessageNode {
  readonly kind: 'message';
  readonly id: string;
}

/** Rows the view lists at most (newest first). */
export const MAX_LISTED_MESSAGES = 200;
/**
 * The router fires on every admission, delivery and ACK; the view asks for its rows at most this often, and only
 * while it is visible (one bounded query of the newest rows, a few hundred microseconds).
 */
export const MESSAGES_REFRESH_MS = 1000;
/** Ages in the rows move on even when no message does. */
const AGE_REFRESH_MS = 15_000;
/** The read-only document kind of a message's detail. */
const MESSAGE_DOCUMENT = 'message';

class MessagesTreeProvider extends CoordinatorRows<MessageNode> {
  private readonly nodes = new NodeCache<MessageNode>();
  private readonly messages = new Map<string, MessageSummary>();
  /** What the rows show: the messages matching it. */
  filter: MessagesViewFilter = NO_MESSAGE_FILTER;

  async getChildren(node?: MessageNode): Promise<MessageNode[]> {
    if (node) return [];
    const filter = this.filter;
    const found =
      (await this.listed((api) => api.messages(messageQuery(filter, MAX_LISTED_MESSAGES)).catch(() => []))) ?? [];
    this.showMessage(
      found.length >= MAX_LISTED_MESSAGES
        ? `The newest ${MAX_LISTED_MESSAGES} are shown. Filter by agent, correlation, state or type to find others.`
        : undefined,
    );
    this.messages.clear();
    for (const m of found) this.messages.set(m.messageId, m);
    this.nodes.keepOnly(this.messages);
    return found.map((m) => this.nodes.get(m.messageId, () => ({ kind: 'message', id: m.messageId })));
  }

  getParent(): MessageNode | undefined {
    return undefined;
  }

  getTreeItem(node: MessageNode): vscode.TreeItem {
    const m = this.messages.get(node.id);
    if (!m) return new vscode.TreeItem(`message ${node.id}`);
    return rowItem(`message:${m.messageId}`, messageRow(m, Date.now()), {
      contextValue: `message+${m.state}${m.tracked ? '' : '+untracked'}`,
      iconPath: stateIcon(m),
      command: { command: Commands.openMessage, title: 'Open Message', arguments: [node] },
    });
  }
}

function stateIcon(m: MessageSummary): vscode.ThemeIcon {
  switch (m.state) {
    case 'FULFILLED':
      return new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
    case 'REJECTED':
    case 'FAILED':
    case 'TIMED_OUT':
      return new vscode.ThemeIcon('error', new vscode.ThemeColor('problemsErrorIcon.foreground'));
    case 'RETRYING':
      return new vscode.ThemeIcon('sync');
    default:
      return new vscode.ThemeIcon(m.tracked ? 'mail' : 'mail-read');
  }
}

/**
 * The Messages view: the router's recent messages, newest first, with type, state, producer → recipient, age and
 * correlation id; filters by agent, correlation id, state and type; a row opens the message's envelope, payload
 * and lifecycle history in a read-only document. Live: it follows inbox changes, throttled, while it is visible.
 */
export class MessagesView extends LiveTreeView<MessageNode, MessagesTreeProvider> {
  constructor(private readonly documents: ReadOnlyDocuments) {
    super(new MessagesTreeProvider(), Views.messages, MESSAGES_REFRESH_MS);
    coordinatorDocument(
      documents,
      MESSAGE_DOCUMENT,
      () => this.api,
      async (api, id) => {
        const detail = await api.message(id);
        return detail
          ? messageDetailText(detail)
          : `Message ${id} is no longer stored: finished messages are deleted after sw4rm.messageRetentionHours.\n`;
      },
    );
    const ages = setInterval(() => this.refreshIfVisible(), AGE_REFRESH_MS);
    this.own({ dispose: () => clearInterval(ages) });
    this.showFilter();
  }

  /** Opens a message's detail (envelope, payload as text, lifecycle history) in a read-only document. */
  async open(node?: MessageNode): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const id = node?.id ?? this.view.selection[0]?.id ?? (await this.pickMessage(api));
    if (!id) return;
    await this.documents.open(MESSAGE_DOCUMENT, id, `message ${shortId(id)}.txt`);
  }

  /** Shows only the messages of `agentId` (as producer or recipient) and reveals the view. */
  async showAgent(agentId: string): Promise<void> {
    this.setFilter({ agentId });
    await vscode.commands.executeCommand(`${Views.messages}.focus`);
  }

  /** Asks for agent, state, type and correlation id, each "any" by default. */
  async pickFilter(): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const current = this.rows.filter;
    const [agents, recent] = await Promise.all([api.agents(), api.messages({ limit: 1000 })]);
    const agentIds = new Set<string>(agents.map((a) => a.descriptor.agentId));
    for (const m of recent) {
      agentIds.add(m.producerId);
      agentIds.add(m.recipientId);
    }
    const steps = 4;
    const title = (step: number) => `Filter Messages (${step}/${steps})`;
    const agentId = await pickValueOrAny(
      title(1),
      'Show messages from or to this agent',
      { label: 'Any agent' },
      choices([...agentIds].sort()),
      current.agentId,
    );
    if (agentId === CANCELLED) return;
    const state = await pickValueOrAny(
      title(2),
      'Show messages in this state',
      { label: 'Any state' },
      choices(MESSAGE_STATES),
      current.state,
    );
    if (state === CANCELLED) return;
    const messageType = await pickValueOrAny(
      title(3),
      'Show messages of this type',
      { label: 'Any type' },
      choices(MESSAGE_TYPES),
      current.messageType,
    );
    if (messageType === CANCELLED) return;
    const correlationId = await vscode.window.showInputBox({
      title: title(4),
      value: current.correlationId ?? '',
      placeHolder: 'Any correlation id (leave empty)',
      prompt: 'Show messages of this correlation id (exactly)',
      ignoreFocusOut: true,
    });
    if (correlationId === undefined) return;
    this.setFilter({
      ...(agentId ? { agentId } : {}),
      ...(state ? { state } : {}),
      ...(messageType ? { messageType } : {}),
      ...(correlationId.trim() ? { correlationId: correlationId.trim() } : {}),
    });
  }

  clearFilter(): void {
    this.setFilter(NO_MESSAGE_FILTER);
  }

  protected follow(api: CoordinatorApi, changed: () => void): Disposable[] {
    return [api.onDidChangeInbox(changed)];
  }

  private setFilter(filter: MessagesViewFilter): void {
    this.rows.filter = filter;
    this.showFilter();
    this.refresh();
  }

  private showFilter(): void {
    this.view.description = describeMessageFilter(this.rows.filter);
    void vscode.commands.executeCommand(
      'setContext',
      ContextKeys.messagesFiltered,
      isMessageFilterSet(this.rows.filter),
    );
  }

  private async pickMessage(api: CoordinatorApi): Promise<string | undefined> {
    const messages = await api.messages(messageQuery(this.rows.filter, MAX_LISTED_MESSAGES));
    if (!messages.length) {
      void vscode.window.showInformationMessage(
        `No message to open among the newest ${MESSAGE_SCAN_WINDOW.toLocaleString('en-US')}.`,
      );
      return undefined;
    }
    const now = Date.now();
    const picked = await vscode.window.showQuickPick(
      messages.map((m) => {
        const row = messageRow(m, now);
        return { label: row.label, description: row.description, id: m.messageId };
      }),
      { title: 'Open Message', placeHolder: 'Pick a message', matchOnDescription: true },
    );
    return picked?.id;
  }
}

function choices(values: readonly string[]): ValueChoice[] {
  return values.map((value) => ({ value }));
}
