import * as vscode from 'vscode';
import type { CoordinatorApi, DeadLetter, Disposable, RequeueResult } from '../../core/api';
import { ContextKeys, Views } from '../contributions';
import {
  NO_FILTER,
  TIME_RANGES,
  coreFilter,
  describeFilter,
  exportFileName,
  isFiltered,
  matches,
  valueCounts,
  type DeadLetterViewFilter,
  type TimeRange,
} from '../deadLetterFilter';
import { requireRunning } from '../notRunning';
import { CANCELLED, pickItem, pickValueOrAny } from '../quickPick';
import { KeyedThrottle } from '../throttle';
import { CoordinatorRows, NodeCache, ViewCount } from './liveTree';

/** What became of one requeue: the coordinator's answer, or why it could not be asked (it stopped). */
type Requeued = RequeueResult | { readonly accepted: false; readonly reason: string };

export interface DeadLetterNode {
  readonly kind: 'deadLetter';
  readonly id: number;
}

/** Rows the view lists at most; the diagnostic bundle has every matching entry. */
export const MAX_LISTED = 500;
/** The most entries one bundle holds (the store's own ceiling per query). */
export const MAX_EXPORTED = 100_000;
/** The router fires on every delivery; the view checks the DLQ at most this often. */
export const DLQ_REFRESH_MS = 250;

/**
 * The rows of the Dead Letters view: the coordinator's dead letters matching the filter, newest first. A row's
 * text comes from agents (ids, reasons, payloads) and is shown as plain text only.
 */
class DeadLettersTreeProvider extends CoordinatorRows<DeadLetterNode> {
  private readonly nodes = new NodeCache<DeadLetterNode, number>();
  private readonly letters = new Map<number, DeadLetter>();
  /** What the rows show: the dead letters matching it. */
  filter: DeadLetterViewFilter = NO_FILTER;

  letter(id: number): DeadLetter | undefined {
    return this.letters.get(id);
  }

  async getChildren(node?: DeadLetterNode): Promise<DeadLetterNode[]> {
    if (node) return [];
    const filter = this.filter;
    const found =
      (await this.listed((api) => api.deadLetters(coreFilter(filter, Date.now(), MAX_LISTED + 1)).catch(() => []))) ??
      [];
    this.showMessage(
      found.length > MAX_LISTED
        ? `Showing the newest ${MAX_LISTED}. Filter, or export the diagnostic bundle for all of them.`
        : undefined,
    );
    const shown = found.slice(0, MAX_LISTED);
    this.letters.clear();
    for (const letter of shown) this.letters.set(letter.id, letter);
    this.nodes.keepOnly(this.letters);
    return shown.map((letter) => this.nodes.get(letter.id, () => ({ kind: 'deadLetter', id: letter.id })));
  }

  getParent(): DeadLetterNode | undefined {
    return undefined;
  }

  getTreeItem(node: DeadLetterNode): vscode.TreeItem {
    const letter = this.letters.get(node.id);
    return letter ? deadLetterItem(letter) : new vscode.TreeItem(`dead letter ${node.id}`);
  }
}

/**
 * The Dead Letters view and its commands (RFC §21.1): list and filter by time range, error code, producer
 * and recipient; requeue selected entries; export a diagnostic bundle. It follows the coordinator's dead
 * letter events, coalesced, and tells the status bar how many dead letters wait.
 */
export class DeadLettersView implements vscode.Disposable {
  private subscription: Disposable | undefined;
  private signature = '';
  /** Checks started; only the latest one shows its result. */
  private checks = 0;
  /** A forced check was asked for and has not completed yet. */
  private forced = false;
  private readonly provider = new DeadLettersTreeProvider();
  private readonly view: vscode.TreeView<DeadLetterNode>;
  private readonly check = new KeyedThrottle<'dlq'>(DLQ_REFRESH_MS, () => void this.checkForChanges());
  private readonly listedMessage: vscode.Disposable;
  private readonly waiting = new ViewCount((count) => `${count} dead letter${count === 1 ? '' : 's'}`);
  /** Fires with the number of dead letters not yet requeued when it changes. */
  readonly onDidChangeCount = this.waiting.onDidChange;

  constructor() {
    this.view = vscode.window.createTreeView(Views.deadLetters, {
      treeDataProvider: this.provider,
      canSelectMany: true,
    });
    this.listedMessage = this.provider.onDidChangeMessage((message) => {
      this.view.message = message;
    });
    this.showFilter();
  }

  /** Follows the API of a (new) coordinator, or none while the coordinator is stopped. */
  bind(api: CoordinatorApi | undefined): void {
    this.subscription?.dispose();
    this.check.cancel();
    this.provider.api = api;
    this.subscription = api?.onDidChangeDeadLetters(() => this.check.schedule('dlq'));
    void this.checkForChanges(true);
  }

  refresh(): Promise<void> {
    return this.checkForChanges(true);
  }

  /** Requeues the clicked entry, the selected entries, or entries picked from a list. */
  async requeue(node?: DeadLetterNode, selected?: readonly DeadLetterNode[]): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    let nodes: readonly DeadLetterNode[];
    if (node && selected?.some((n) => n.id === node.id)) nodes = selected;
    else if (node) nodes = [node];
    else nodes = this.view.selection;
    const targets: Array<{ id: number; letter: DeadLetter | undefined }> = nodes.length
      ? nodes.map((n) => ({ id: n.id, letter: this.provider.letter(n.id) }))
      : (await this.pickToRequeue(api)).map((letter) => ({ id: letter.id, letter }));
    // The coordinator may have stopped while the list was open.
    if (!targets.length || this.api !== api) return;
    const results: Array<{ id: number; letter: DeadLetter | undefined; result: Requeued }> = [];
    for (const { id, letter } of targets) {
      const result = await api
        .requeueDeadLetter(id, { correlationId: letter?.correlationId })
        .catch((err: unknown): Requeued => ({
          accepted: false,
          reason: err instanceof Error ? err.message : String(err),
        }));
      results.push({ id, letter, result });
    }
    await this.refresh();
    const refused = results.filter(
      (r): r is typeof r & { result: Extract<Requeued, { accepted: false }> } => !r.result.accepted,
    );
    if (results.length === 1) {
      const [{ id, letter, result }] = results;
      if (result.accepted) {
        void vscode.window.showInformationMessage(
          `Requeued dead letter #${id}${letter ? ` to ${letter.recipientId}` : ''} as message ${result.messageId}.`,
        );
      } else {
        void vscode.window.showWarningMessage(`Dead letter #${id} was not requeued: ${result.reason}`);
      }
    } else if (!refused.length) {
      void vscode.window.showInformationMessage(`Requeued ${results.length} dead letters.`);
    } else {
      void vscode.window.showWarningMessage(
        `Requeued ${results.length - refused.length} of ${results.length} dead letters. ` +
          refused
            .slice(0, 5)
            .map((r) => `#${r.id}: ${r.result.reason}`)
            .join('; ') +
          (refused.length > 5 ? '; …' : ''),
      );
    }
  }

  /** Writes the diagnostic bundle of the entries matching the filter to a file the user picks. */
  async exportBundle(): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const now = Date.now();
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const target = await vscode.window.showSaveDialog({
      title: 'Export Dead Letter Diagnostic Bundle',
      defaultUri: folder ? vscode.Uri.joinPath(folder, exportFileName(now)) : undefined,
      filters: { JSON: ['json'] },
      saveLabel: 'Export',
    });
    if (!target || this.api !== api) return;
    const bundle = await api.exportDeadLetters(coreFilter(this.provider.filter, now, MAX_EXPORTED));
    await vscode.workspace.fs.writeFile(target, new TextEncoder().encode(JSON.stringify(bundle, null, 2) + '\n'));
    const entries = Array.isArray(bundle.entries) ? bundle.entries.length : 0;
    const choice = await vscode.window.showInformationMessage(
      `Exported ${entries} dead letter${entries === 1 ? '' : 's'} to ${target.fsPath}.`,
      'Open',
    );
    if (choice) await vscode.window.showTextDocument(target);
  }

  /** Asks for error code, producer, recipient, time range and whether to show requeued entries. */
  async pickFilter(): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const now = Date.now();
    const all = await api.deadLetters({ includeRequeued: true, limit: MAX_EXPORTED });
    const current = this.provider.filter;
    const pool = (draft: Partial<DeadLetterViewFilter>) =>
      all.filter((l) => matches(l, { ...draft, includeRequeued: current.includeRequeued ? undefined : false }, now));
    const steps = 5;
    const title = (step: number) => `Filter Dead Letters (${step}/${steps})`;

    const errorCode = await pickCounted(
      title(1),
      'Show dead letters with this error code',
      'Any error code',
      valueCounts(pool({}), (l) => l.errorCode),
      current.errorCode,
    );
    if (errorCode === CANCELLED) return;
    const producerId = await pickCounted(
      title(2),
      'Show dead letters from this producer',
      'Any producer',
      valueCounts(pool({ errorCode }), (l) => l.producerId),
      current.producerId,
    );
    if (producerId === CANCELLED) return;
    const recipientId = await pickCounted(
      title(3),
      'Show dead letters routed to this recipient',
      'Any recipient',
      valueCounts(pool({ errorCode, producerId }), (l) => l.recipientId),
      current.recipientId,
    );
    if (recipientId === CANCELLED) return;
    const narrowed = pool({ errorCode, producerId, recipientId });
    const timeRange = await pickOne<TimeRange>(
      title(4),
      'Show dead letters that failed within',
      TIME_RANGES.map((r) => ({
        label: r.label,
        value: r.range,
        description: counted(narrowed.filter((l) => r.ms === undefined || l.failedAt >= now - r.ms).length),
      })),
      current.timeRange,
    );
    if (timeRange === undefined) return;
    const includeRequeued = await pickOne<boolean>(
      title(5),
      'Requeued entries',
      [
        { label: 'Hide requeued entries', value: false },
        { label: 'Show requeued entries too', value: true },
      ],
      current.includeRequeued,
    );
    if (includeRequeued === undefined) return;
    this.setFilter({ errorCode, producerId, recipientId, timeRange, includeRequeued });
  }

  clearFilter(): void {
    this.setFilter(NO_FILTER);
  }

  dispose(): void {
    this.subscription?.dispose();
    this.check.dispose();
    this.listedMessage.dispose();
    this.view.dispose();
    this.provider.dispose();
    this.waiting.dispose();
  }

  /** Dead letters not yet requeued, as of the last check. */
  get count(): number {
    return this.waiting.value;
  }

  /** The running coordinator's API, or undefined while it is stopped. */
  private get api(): CoordinatorApi | undefined {
    return this.provider.api;
  }

  private setFilter(filter: DeadLetterViewFilter): void {
    this.provider.filter = filter;
    this.showFilter();
    this.provider.refresh();
  }

  private showFilter(): void {
    this.view.description = describeFilter(this.provider.filter);
    void vscode.commands.executeCommand(
      'setContext',
      ContextKeys.deadLettersFiltered,
      isFiltered(this.provider.filter),
    );
  }

  /** Refreshes the rows and the count when the DLQ changed: a new entry, a requeue, a prune. */
  private async checkForChanges(force = false): Promise<void> {
    const api = this.api;
    const check = ++this.checks;
    this.forced ||= force;
    let count = 0;
    let newest = 0;
    if (api) {
      try {
        [count, newest] = await Promise.all([
          api.deadLetterCount(),
          api.deadLetters({ includeRequeued: true, limit: 1 }).then((letters) => letters[0]?.id ?? 0),
        ]);
      } catch {
        return; // The coordinator stopped meanwhile; unbinding checks again.
      }
    }
    if (check !== this.checks) return;
    const signature = api ? `${count}:${newest}` : '';
    if (signature === this.signature && !this.forced) return;
    this.forced = false;
    this.signature = signature;
    this.provider.refresh();
    this.waiting.show(this.view, count);
  }

  private async pickToRequeue(api: CoordinatorApi): Promise<DeadLetter[]> {
    const letters = await api.deadLetters(
      coreFilter({ ...this.provider.filter, includeRequeued: false }, Date.now(), MAX_LISTED),
    );
    if (!letters.length) {
      void vscode.window.showInformationMessage('There is no dead letter to requeue.');
      return [];
    }
    const picked = await vscode.window.showQuickPick(
      letters.map((letter) => {
        const item = deadLetterItem(letter);
        return { label: String(item.label), description: String(item.description), letter };
      }),
      {
        title: 'Requeue Dead Letters',
        placeHolder: 'Pick the dead letters to send again',
        canPickMany: true,
        matchOnDescription: true,
      },
    );
    return picked?.map((p) => p.letter) ?? [];
  }
}

/** One value of a field, or "any" (undefined); CANCELLED when the user pressed Escape. */
function pickCounted(
  title: string,
  placeholder: string,
  anyLabel: string,
  values: Array<{ value: string; count: number }>,
  current: string | undefined,
): Promise<string | undefined | typeof CANCELLED> {
  const total = values.reduce((sum, v) => sum + v.count, 0);
  return pickValueOrAny(
    title,
    placeholder,
    { label: anyLabel, description: counted(total) },
    values.map((v) => ({ value: v.value, label: v.value || '(none)', description: counted(v.count) })),
    current,
    counted(0),
  );
}

/** A single choice among `items`, with the current value active; undefined when the user pressed Escape. */
async function pickOne<T>(
  title: string,
  placeholder: string,
  items: Array<{ label: string; value: T; description?: string }>,
  current: T,
): Promise<T | undefined> {
  return (await pickItem(title, placeholder, items, current))?.value;
}

function counted(n: number): string {
  return `${n} dead letter${n === 1 ? '' : 's'}`;
}

function deadLetterItem(letter: DeadLetter): vscode.TreeItem {
  const requeued = letter.requeuedAt !== null;
  const item = new vscode.TreeItem(
    `${letter.errorCode || letter.finalState} · ${letter.messageType}`,
    vscode.TreeItemCollapsibleState.None,
  );
  item.id = `deadLetter:${letter.id}`;
  item.description = `${letter.producerId} → ${letter.recipientId} · ${shortTime(letter.failedAt)}${requeued ? ' · requeued' : ''}`;
  item.contextValue = requeued ? 'deadLetter+requeued' : 'deadLetter';
  item.iconPath = requeued
    ? new vscode.ThemeIcon('history', new vscode.ThemeColor('disabledForeground'))
    : new vscode.ThemeIcon('mail', new vscode.ThemeColor('problemsWarningIcon.foreground'));
  // A plain string: agent-supplied text (reasons, payloads) is never rendered as Markdown.
  item.tooltip = deadLetterTooltip(letter);
  item.accessibilityInformation = { label: `Dead letter ${letter.id}: ${item.label}, ${item.description}` };
  return item;
}

function deadLetterTooltip(letter: DeadLetter): string {
  const lines = [
    `${letter.errorCode || letter.finalState} · ${letter.messageType} (${letter.finalState}) — dead letter #${letter.id}`,
    `message ${letter.messageId}`,
    `from ${letter.producerId} to ${letter.recipientId}`,
    `correlation ${letter.correlationId}${letter.idempotencyToken ? ` · idempotency token ${clip(letter.idempotencyToken, 80)}` : ''}`,
    `accepted ${new Date(letter.createdAt).toLocaleString()} · failed ${new Date(letter.failedAt).toLocaleString()}`,
    `reason: ${clip(letter.reason, 500)}`,
    'attempts:',
    ...letter.attempts
      .slice(-20)
      .map((a) => `  ${new Date(a.at).toLocaleTimeString()} ${a.event}${a.detail ? ` — ${clip(a.detail, 200)}` : ''}`),
    `payload (${letter.contentType || 'no content type'}, ${letter.size} bytes):`,
    `  ${letter.excerpt || '(empty)'}`,
  ];
  if (letter.attempts.length > 20) lines.splice(7, 0, `  … ${letter.attempts.length - 20} earlier`);
  if (letter.requeuedAt !== null)
    lines.push(`requeued ${new Date(letter.requeuedAt).toLocaleString()} as ${letter.requeuedAs ?? '?'}`);
  return lines.join('\n');
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** The time of day for today's entries, else date and time. */
function shortTime(ms: number): string {
  const date = new Date(ms);
  return date.toDateString() === new Date().toDateString() ? date.toLocaleTimeString() : date.toLocaleString();
}
