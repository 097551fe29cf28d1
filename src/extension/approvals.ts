import * as os from 'node:os';
import * as vscode from 'vscode';
import type { Disposable } from '../core/events';
import type { HitlService } from '../core/hitl/hitlService';
import type { HitlInvocation } from '../core/hitl/model';
import type { HitlPolicy } from '../core/hitl/policy';
import { approvalSettings, ProblemMemory } from './approvalSettings';
import { needsAnnouncement, notificationText } from './approvalsModel';
import { ContextKeys, SETTINGS_SECTION, Settings } from './contributions';
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
  private hitl: HitlService | undefined;
  private subscriptions: Disposable[] = [];
  private readonly problems = new ProblemMemory();

  constructor(extensionUri: vscode.Uri, private readonly output: vscode.OutputChannel) {
    this.panels = new HitlPanels(extensionUri, this.operator);
    this.view = new ApprovalsView((id) => this.panels.open(id), this.operator);
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

  /** Follows the HITL service of a (re)started coordinator, or none when it stops. */
  bind(hitl: HitlService | undefined): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    this.hitl = hitl;
    if (hitl) {
      // The settings may have changed while the coordinator was starting.
      hitl.setPolicy(this.readPolicy(true), 'settings');
      this.subscriptions.push(
        hitl.attachOperator(this.operator),
        hitl.onDidChange((change) => {
          this.panels.changed(change.invocation);
          if (needsAnnouncement(change)) this.announce(change.invocation);
        }),
      );
    }
    this.view.bind(hitl);
    this.panels.bind(hitl);
  }

  /** Applies changed approval settings to the running coordinator at once (no restart). */
  settingsChanged(): void {
    const policy = this.readPolicy(true);
    this.hitl?.setPolicy(policy, 'settings');
  }

  /** Sets sw4rm.approvals.pauseAll for this workspace (or for the user when no folder is open). */
  async setPaused(paused: boolean): Promise<void> {
    const target = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    await vscode.workspace.getConfiguration(SETTINGS_SECTION).update(Settings.approvalsPauseAll, paused, target);
    const effective = this.readPolicy(false).paused;
    if (effective !== paused) {
      void vscode.window.showWarningMessage(`SW4RM: ${SETTINGS_SECTION}.${Settings.approvalsPauseAll} is set elsewhere (e.g. a folder setting); approvals are still ${effective ? 'paused' : 'not paused'}.`);
    } else {
      void vscode.window.showInformationMessage(paused
        ? 'SW4RM approvals paused: no rule decides automatically; every new request waits for a human.'
        : 'SW4RM approvals resumed: the approval rules apply again.');
    }
  }

  dispose(): void {
    this.bind(undefined);
    this.view.dispose();
    this.panels.dispose();
  }

  private readPolicy(report: boolean): HitlPolicy {
    const { policy, problems } = approvalSettings(readApprovalSettings());
    if (report) {
      const fresh = this.problems.fresh(problems);
      for (const problem of fresh) this.output.appendLine(`SW4RM settings: ${problem}`);
      if (fresh.length) {
        void vscode.window.showWarningMessage(`SW4RM approval settings: ${fresh.join('; ')}. These entries are ignored.`, 'Open Settings')
          .then((choice) => choice && vscode.commands.executeCommand('workbench.action.openSettings', `${SETTINGS_SECTION}.approvals`));
      }
    }
    this.showPaused(policy.paused);
    return policy;
  }

  private showPaused(paused: boolean): void {
    this.view.setPaused(paused);
    void vscode.commands.executeCommand('setContext', ContextKeys.approvalsPaused, paused);
  }

  private announce(invocation: HitlInvocation): void {
    void vscode.window.showInformationMessage(notificationText(invocation), 'Review').then((choice) => {
      if (choice) this.panels.open(invocation.id);
    });
  }
}
