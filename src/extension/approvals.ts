import * as os from 'node:os';
import * as vscode from 'vscode';
import type { CoordinatorApi, Disposable, HitlInvocation, HitlPolicy, OperatorAttachment, ToolRule } from '../core/api';
import { approvalSettings, ProblemMemory } from './approvalSettings';
import { announcementText, needsAnnouncement, OpenAnnouncements } from './approvalsModel';
import { Commands, ContextKeys, SETTINGS_SECTION, Settings } from './contributions';
import { HitlPanels } from './panels/hitlPanels';
import { readApprovalSettings } from './settings';
import { ApprovalsView } from './views/approvalsView';

/** `editor:<user name>`: who decides in this window (RFC §15.1: the audit says who). */
export function editorOperatorName(): string {
  let user = '';
  try {
    user = os.userInfo().username;
  } catch {
    // Some containers have no passwd entry for the user; fall back to the environment.
  }
  return `editor:${user || process.env.USER || process.env.USERNAME || 'unknown'}`;
}

/**
 * Human-in-the-loop in the editor (RFC §15): while the coordinator runs, this window is an attached operator;
 * the approval settings are its HITL policy (applied live); every newly pending invocation is announced;
 * the Approvals view and the approval panels follow the invocations.
 */
export class Approvals implements vscode.Disposable {
  readonly operator = editorOperatorName();
  readonly view: ApprovalsView;
  readonly panels: HitlPanels;
  private api: CoordinatorApi | undefined;
  /** This window's attachment as an operator of the bound coordinator (resolves to none if it failed). */
  private attachment: Promise<OperatorAttachment | undefined> | undefined;
  private subscriptions: Disposable[] = [];
  private readonly problems = new ProblemMemory();
  /** "Approval needed" notifications on screen, closed when their invocation settles. */
  private readonly announcements = new OpenAnnouncements();

  constructor(
    extensionUri: vscode.Uri,
    private readonly output: vscode.OutputChannel,
  ) {
    this.panels = new HitlPanels(extensionUri, this.operator);
    this.view = new ApprovalsView((id) => void this.panels.open(id), this.operator);
    this.readPolicy(false);
  }

  /** Fires with the number of pending invocations when it changes. */
  get onDidChangeCount(): vscode.Event<number> {
    return this.view.onDidChangeCount;
  }

  get pendingCount(): number {
    return this.view.pendingCount;
  }

  /** The HITL policy of the approval settings, for a coordinator about to start (problems are reported once). */
  policy(): HitlPolicy {
    return this.readPolicy(true);
  }

  /**
   * Follows the API of a (re)started coordinator, or none when it stops: applies the policy, attaches this
   * window as an operator (detaching it from the previous one) and resolves when both are done.
   */
  async bind(api: CoordinatorApi | undefined): Promise<void> {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    // Notifications of the previous coordinator's invocations would never hear that they settled.
    this.announcements.closeAll();
    const previous = this.api;
    const attached = this.attachment;
    this.api = api;
    this.attachment = undefined;
    const steps: Array<Promise<unknown>> = [];
    if (previous && attached)
      steps.push(attached.then((attachment) => attachment && previous.detachOperator(attachment.id)).catch(ignore));
    if (api) {
      // The settings may have changed while the coordinator was starting.
      steps.push(api.setApprovalPolicy(this.readPolicy(true), 'settings').catch(ignore));
      steps.push(api.setToolApprovalRules(this.readToolRules(), 'settings').catch(ignore));
      this.attachment = api.attachOperator(this.operator).catch(() => undefined);
      steps.push(this.attachment);
      this.subscriptions.push(
        api.onDidChangeApprovals((change) => {
          this.panels.changed(change.invocation);
          if (needsAnnouncement(change)) this.announce(change.invocation);
          else if (change.invocation.state !== 'pending') this.announcements.close(change.invocation.id);
        }),
      );
    }
    this.view.bind(api);
    this.panels.bind(api);
    await Promise.all(steps);
  }

  /** Applies changed approval settings to the running coordinator at once (no restart). */
  settingsChanged(): void {
    const policy = this.readPolicy(true);
    void this.api?.setApprovalPolicy(policy, 'settings').catch(ignore);
    void this.api?.setToolApprovalRules(this.readToolRules(), 'settings').catch(ignore);
  }

  /** Sets sw4rm.approvals.pauseAll for this workspace (or for the user when no folder is open). */
  async setPaused(paused: boolean): Promise<void> {
    const target = vscode.workspace.workspaceFolders?.length
      ? vscode.ConfigurationTarget.Workspace
      : vscode.ConfigurationTarget.Global;
    await vscode.workspace.getConfiguration(SETTINGS_SECTION).update(Settings.approvalsPauseAll, paused, target);
    const effective = this.readPolicy(false).paused;
    if (effective !== paused) {
      void vscode.window.showWarningMessage(
        `SW4RM: ${SETTINGS_SECTION}.${Settings.approvalsPauseAll} is set elsewhere (e.g. a folder setting); approvals are still ${effective ? 'paused' : 'not paused'}.`,
      );
    } else {
      void vscode.window.showInformationMessage(
        paused
          ? 'SW4RM approvals paused: no rule decides automatically; every new request waits for a human.'
          : 'SW4RM approvals resumed: the approval rules apply again.',
      );
    }
  }

  dispose(): void {
    this.announcements.closeAll();
    void this.bind(undefined);
    this.view.dispose();
    this.panels.dispose();
  }

  /** sw4rm.approvals.toolRules as checked (its problems are reported with the others by readPolicy). */
  private readToolRules(): readonly ToolRule[] {
    return approvalSettings(readApprovalSettings()).toolRules;
  }

  private readPolicy(report: boolean): HitlPolicy {
    const { policy, problems } = approvalSettings(readApprovalSettings());
    if (report) {
      const fresh = this.problems.fresh(problems);
      for (const problem of fresh) this.output.appendLine(`SW4RM settings: ${problem}`);
      if (fresh.length) {
        void vscode.window
          .showWarningMessage(
            `SW4RM approval settings: ${fresh.join('; ')}. These entries are ignored.`,
            'Open Settings',
          )
          .then(
            (choice) =>
              choice &&
              vscode.commands.executeCommand('workbench.action.openSettings', `${SETTINGS_SECTION}.approvals`),
          );
      }
    }
    this.showPaused(policy.paused);
    return policy;
  }

  private showPaused(paused: boolean): void {
    this.view.setPaused(paused);
    void vscode.commands.executeCommand('setContext', ContextKeys.approvalsPaused, paused);
  }

  /**
   * A notification that goes away when the invocation settles: a message shown with showInformationMessage can
   * never be closed by the extension, a progress notification ends when its promise does. Its Cancel button only
   * hides it; the request stays in the Approvals view.
   */
  private announce(invocation: HitlInvocation): void {
    let close = (): void => undefined;
    const closed = new Promise<void>((resolve) => {
      close = resolve;
    });
    // Registered before the notification shows, so that a settlement in between still closes it.
    if (!this.announcements.add(invocation.id, close)) return;
    void vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: announcementText(invocation, Commands.reviewApproval),
        cancellable: true,
      },
      (_progress, token) => {
        token.onCancellationRequested(() => this.announcements.close(invocation.id));
        return closed;
      },
    );
  }
}

/** Changes to a coordinator that has stopped meanwhile are moot. */
function ignore(): void {}
