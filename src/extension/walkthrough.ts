import * as vscode from 'vscode';
import type { CoordinatorApi } from '../core/api';
import { ContextKeys, Walkthroughs } from './contributions';
import { WalkthroughProgress, type WalkthroughSteps } from './walkthroughModel';

/**
 * The workbench registers an extension's walkthrough up to 5 s after it read the extension's manifest (it waits
 * for an experiment service that long), and a step whose `onContext:` expression is already true at that moment
 * is never checked in that session. So the walkthrough's context keys stay unset this long after activation.
 */
export const CONTEXT_KEYS_HOLD_MS = 8_000;

/** globalState: the walkthrough was opened once (or the user's startup editor said not to), on the first activation. */
export const WALKTHROUGH_SHOWN_KEY = 'sw4rm.walkthroughShown';

/**
 * The Get Started walkthrough: its steps are checked by `onContext:` completion events, and the context keys
 * follow the running coordinator's state (WalkthroughProgress). Opens itself once, on the first activation.
 */
export class Walkthrough implements vscode.Disposable {
  private readonly progress = new WalkthroughProgress(() => this.setContextKeys());
  private holding = true;
  private readonly hold: ReturnType<typeof setTimeout>;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.hold = setTimeout(() => {
      this.holding = false;
      this.setContextKeys();
    }, CONTEXT_KEYS_HOLD_MS);
  }

  /** Follows the coordinator that started, or none when it stopped. */
  bind(api: CoordinatorApi | undefined): Promise<void> {
    return this.progress.bind(api);
  }

  async open(): Promise<void> {
    await vscode.commands.executeCommand('workbench.action.openWalkthrough', Walkthroughs.gettingStarted, false);
  }

  /**
   * Opens the walkthrough on the extension's first activation, once for this user; not when the user's
   * `workbench.startupEditor` is `none` (they asked for no welcome page at startup).
   */
  async openOnFirstActivation(): Promise<void> {
    if (this.context.globalState.get<boolean>(WALKTHROUGH_SHOWN_KEY)) return;
    await this.context.globalState.update(WALKTHROUGH_SHOWN_KEY, true);
    if (vscode.workspace.getConfiguration('workbench').get<string>('startupEditor') === 'none') return;
    await this.open();
  }

  dispose(): void {
    clearTimeout(this.hold);
    this.progress.dispose();
  }

  private setContextKeys(): void {
    if (this.holding) return;
    const steps: WalkthroughSteps = this.progress.steps;
    const keys: Array<[string, boolean]> = [
      [ContextKeys.walkthroughCoordinatorRunning, steps.coordinatorRunning],
      [ContextKeys.walkthroughEnvironmentReady, steps.environmentReady],
      [ContextKeys.walkthroughAgentRegistered, steps.agentRegistered],
      [ContextKeys.walkthroughMessageDelivered, steps.messageDelivered],
      [ContextKeys.walkthroughApprovalDecided, steps.approvalDecided],
    ];
    for (const [key, value] of keys) void vscode.commands.executeCommand('setContext', key, value);
  }
}
