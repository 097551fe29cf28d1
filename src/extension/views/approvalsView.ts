import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable, HitlInvocation } from '../../core/api';
import { approvalRow, auditFileName, MAX_SETTLED_LISTED, orderForView, stateText } from '../approvalsModel';
import { Commands, Views } from '../contributions';
import { requireRunning } from '../notRunning';
import { KeyedThrottle } from '../throttle';
import { ViewCount } from './liveTree';
import { RecordListProvider, type RecordNode } from './recordList';
import { rowItem, themeIcon } from './rowItem';

export type ApprovalNode = RecordNode<'approval'>;

/** HITL changes arrive in bursts (an invocation opened and decided by a rule at once); the view follows at most this often. */
export const APPROVALS_REFRESH_MS = 100;

/** A row of the Approvals view: the reason, requester, state; a click opens its review panel. */
function approvalItem(invocation: HitlInvocation, node: ApprovalNode): vscode.TreeItem {
  const row = approvalRow(invocation);
  return rowItem(`approval:${invocation.id}`, row, {
    contextValue: row.contextValue,
    iconPath: themeIcon(row.icon, row.color),
    accessibilityLabel: row.accessibilityLabel,
    command: { command: Commands.reviewApproval, title: 'Review', arguments: [node] },
  });
}

/**
 * The Approvals view (RFC §15) and its commands: review (the panel), cancel a pending invocation, export
 * the audit trail. It follows the coordinator's approval events, coalesced, shows the number of pending
 * invocations as its badge and says in its title when approvals are paused.
 */
export class ApprovalsView implements vscode.Disposable {
  private subscription: Disposable | undefined;
  /** The rows: pending invocations first, then the settled ones (bounded). */
  private readonly provider = new RecordListProvider(
    'approval',
    async (api: CoordinatorApi) => orderForView(await api.approvals({ limit: MAX_SETTLED_LISTED })),
    (invocation) => invocation.id,
    approvalItem,
  );
  private readonly view: vscode.TreeView<ApprovalNode>;
  private readonly throttle = new KeyedThrottle<'approvals'>(APPROVALS_REFRESH_MS, () => void this.update());
  private readonly pending = new ViewCount((count) => `${count} approval${count === 1 ? '' : 's'} pending`);
  /** Fires with the number of pending invocations when it changes. */
  readonly onDidChangeCount = this.pending.onDidChange;
  /** Updates started; only the latest one shows its count. */
  private updates = 0;

  constructor(
    /** Opens (or reveals) the panel of an invocation. */
    private readonly review: (id: string) => void,
    /** The operator name cancellations are recorded under. */
    private readonly operator: string,
  ) {
    this.view = vscode.window.createTreeView(Views.approvals, { treeDataProvider: this.provider });
  }

  /** Follows the API of a (new) coordinator, or none while the coordinator is stopped. */
  bind(api: CoordinatorApi | undefined): void {
    this.subscription?.dispose();
    this.throttle.cancel();
    this.provider.api = api;
    this.subscription = api?.onDidChangeApprovals(() => this.throttle.schedule('approvals'));
    void this.update();
  }

  /** Shows whether approvals are paused in the view's title and message. */
  setPaused(paused: boolean): void {
    this.view.title = paused ? 'Approvals (paused)' : 'Approvals';
    this.view.message = paused
      ? 'Approvals are paused: no rule decides automatically; every new request waits for a human (or its deadline fallback).'
      : undefined;
  }

  refresh(): Promise<void> {
    return this.update();
  }

  /** Opens the panel of the clicked invocation, or of one picked from a list. */
  async open(node?: ApprovalNode): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const id = node?.id ?? (await this.pick(api, 'Review an approval request', false))?.id;
    if (id) this.review(id);
  }

  /** Withdraws a pending invocation after asking why; the requester is answered `deny`. */
  async cancel(node?: ApprovalNode): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const invocation = node
      ? await api.approval(node.id)
      : await this.pick(api, 'Cancel a pending approval request', true);
    if (!invocation) return;
    if (invocation.state !== 'pending') {
      void vscode.window.showWarningMessage(`That approval request is already ${stateText(invocation)}.`);
      return;
    }
    const reason = await vscode.window.showInputBox({
      title: `Cancel ${invocation.reasonType} from ${invocation.requester}`,
      prompt: 'Why is it cancelled? The requester is answered "deny"; the reason goes into the audit trail.',
      placeHolder: 'Reason for cancelling',
      ignoreFocusOut: true,
      validateInput: (value) => (value.length > 1000 ? 'At most 1000 characters.' : undefined),
    });
    if (reason === undefined || this.api !== api) return;
    try {
      await api.cancelApproval(invocation.id, this.operator, reason.trim());
      void vscode.window.showInformationMessage(
        `Cancelled the ${invocation.reasonType} request from ${invocation.requester}.`,
      );
    } catch (err) {
      void vscode.window.showWarningMessage(
        `The approval request was not cancelled: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  /** Writes the audit trail (every invocation, decision and audit record) to a JSON file the user picks. */
  async exportAudit(): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const target = await vscode.window.showSaveDialog({
      title: 'Export Approvals Audit',
      defaultUri: folder ? vscode.Uri.joinPath(folder, auditFileName(Date.now())) : undefined,
      filters: { JSON: ['json'] },
      saveLabel: 'Export',
    });
    if (!target || this.api !== api) return;
    const audit = await api.exportApprovalAudit();
    await vscode.workspace.fs.writeFile(target, new TextEncoder().encode(JSON.stringify(audit, null, 2) + '\n'));
    const invocations = Array.isArray(audit.invocations) ? audit.invocations.length : 0;
    const records = Array.isArray(audit.audit) ? audit.audit.length : 0;
    const choice = await vscode.window.showInformationMessage(
      `Exported the audit of ${invocations} approval request${invocations === 1 ? '' : 's'} (${records} records) to ${target.fsPath}.`,
      'Open',
    );
    if (choice) await vscode.window.showTextDocument(target);
  }

  /** Pending invocations, as of the last update. */
  get pendingCount(): number {
    return this.pending.value;
  }

  /** The running coordinator's API, or undefined while it is stopped. */
  private get api(): CoordinatorApi | undefined {
    return this.provider.api;
  }

  dispose(): void {
    this.subscription?.dispose();
    this.throttle.dispose();
    this.view.dispose();
    this.provider.dispose();
    this.pending.dispose();
  }

  private async update(): Promise<void> {
    const api = this.api;
    const update = ++this.updates;
    let count = 0;
    if (api) {
      try {
        count = await api.pendingApprovalCount();
      } catch {
        return; // The coordinator stopped meanwhile; unbinding updates again.
      }
    }
    if (update !== this.updates) return;
    this.provider.refresh();
    this.pending.show(this.view, count);
  }

  private async pick(api: CoordinatorApi, title: string, pendingOnly: boolean): Promise<HitlInvocation | undefined> {
    const invocations = orderForView(await api.approvals({ pendingOnly, limit: MAX_SETTLED_LISTED }));
    if (!invocations.length) {
      void vscode.window.showInformationMessage(
        pendingOnly ? 'No approval request is pending.' : 'There is no approval request.',
      );
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      invocations.map((invocation) => {
        const row = approvalRow(invocation);
        return { label: row.label, description: row.description, invocation };
      }),
      { title, matchOnDescription: true },
    );
    return picked?.invocation;
  }
}
