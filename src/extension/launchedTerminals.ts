import * as vscode from 'vscode';
import { systemClock, type Clock, type CoordinatorApi, type Disposable, type LaunchPlan } from '../core/api';
import { LAUNCH_PLAN_VARIABLE, reconcileLaunches } from './launchModel';

/**
 * After a window reload the editor brings back the terminals whose process survived (persistent terminal sessions),
 * but not all at once: a launched agent without its terminal is marked gone only after this long.
 */
export const TERMINAL_RESTORE_GRACE_MS = 10_000;

/**
 * The integrated terminals launched agents run in (README, "Launch your first agent"): one per agent, opened from a
 * LaunchPlan with no shell in between (the starter dist/sw4rm-launch.js spawns the program's argv on the terminal); a terminal closed or whose process exited marks its agent EXITED
 * (`launchExited` with the exit code); after the editor or the coordinator (re)started, a RUNNING or STARTING agent
 * whose terminal this window still has (found by its title) is adopted again, and one whose terminal is gone is marked
 * EXITED (its process ended with the window that ran it).
 */
export class LaunchedTerminals implements vscode.Disposable {
  private api: CoordinatorApi | undefined;
  private readonly byAgent = new Map<string, vscode.Terminal>();
  private readonly agentOf = new Map<vscode.Terminal, string>();
  /** Exits seen while no coordinator ran: told to the next one. */
  private readonly pendingExits = new Map<string, number | null>();
  private readonly subscriptions: vscode.Disposable[];
  private grace: Disposable | undefined;
  private readonly changed = new vscode.EventEmitter<string>();
  /** An agent's terminal opened, was adopted or closed. */
  readonly onDidChange = this.changed.event;
  private readonly activatedAt: number;

  /** `launcherPath`: the bundled dist/sw4rm-launch.js. */
  constructor(
    private readonly operator: string,
    private readonly output: vscode.OutputChannel,
    private readonly launcherPath: string,
    private readonly clock: Clock = systemClock,
  ) {
    this.activatedAt = clock.now();
    this.subscriptions = [
      vscode.window.onDidCloseTerminal((terminal) => this.closed(terminal)),
      // A terminal restored after a reload may arrive after the coordinator started: adopted when it does.
      vscode.window.onDidOpenTerminal(() => void this.reconcile(false)),
    ];
  }

  /** Follows the API of a (new) coordinator: tells it the exits it missed, then reconciles its launches with this window's terminals. */
  async bind(api: CoordinatorApi | undefined): Promise<void> {
    this.grace?.dispose();
    this.grace = undefined;
    this.api = api;
    if (!api) return;
    for (const [agentId, code] of [...this.pendingExits]) {
      this.pendingExits.delete(agentId);
      await this.exited(api, agentId, code);
    }
    // Right after activation, restored terminals may still be on their way: the missing ones are marked after the grace.
    const waited = this.clock.now() - this.activatedAt;
    if (waited >= TERMINAL_RESTORE_GRACE_MS) {
      await this.reconcile(true);
    } else {
      await this.reconcile(false);
      this.grace = this.clock.setTimer(TERMINAL_RESTORE_GRACE_MS - waited, () => void this.reconcile(true));
    }
  }

  has(agentId: string): boolean {
    return this.byAgent.has(agentId);
  }

  /** Shows an agent's terminal; false when this window has none. */
  show(agentId: string): boolean {
    const terminal = this.byAgent.get(agentId);
    terminal?.show();
    return terminal !== undefined;
  }

  /**
   * Opens the plan's terminal: its command runs directly (the program as the terminal's process, no shell), in its
   * directory, with the agent's environment; then tells the coordinator that it runs.
   */
  async open(api: CoordinatorApi, plan: LaunchPlan): Promise<vscode.Terminal> {
    const agentId = plan.record.agentId;
    const previous = this.byAgent.get(agentId);
    if (previous) this.forget(previous);
    const terminal = vscode.window.createTerminal({
      name: plan.title,
      cwd: plan.cwd,
      // The starter (dist/sw4rm-launch.js, src/cli/agentLauncher.ts) runs the plan's program on this terminal with the
      // plan's variables laid over the terminal's: the window's environment variable collection (the terminals'
      // enrolment credential in SW4RM_TOKEN) is applied over a terminal's own environment by remote editors even with
      // strictEnv, and must never replace the agent's own credential.
      // In the desktop editor process.execPath is Electron: the starter needs ELECTRON_RUN_AS_NODE, and drops it again
      // for the agent's program (agentLauncher.ts programEnvironment), so an Electron program the agent starts works.
      env: {
        ...terminalEnvironment(plan.env),
        [LAUNCH_PLAN_VARIABLE]: JSON.stringify({ command: plan.command, env: plan.env }),
        ...(process.versions.electron !== undefined ? { ELECTRON_RUN_AS_NODE: '1' } : {}),
      },
      strictEnv: true,
      shellPath: process.execPath,
      shellArgs: [this.launcherPath],
      iconPath: new vscode.ThemeIcon('hubot'),
    });
    this.byAgent.set(agentId, terminal);
    this.agentOf.set(terminal, agentId);
    this.changed.fire(agentId);
    terminal.show();
    await api.launchStarted(agentId);
    return terminal;
  }

  dispose(): void {
    this.grace?.dispose();
    for (const subscription of this.subscriptions) subscription.dispose();
    this.changed.dispose();
  }

  private closed(terminal: vscode.Terminal): void {
    const agentId = this.agentOf.get(terminal);
    if (agentId === undefined) return;
    this.forget(terminal);
    const code = terminal.exitStatus?.code ?? null;
    this.output.appendLine(`SW4RM: the terminal of ${agentId} closed${code === null ? '' : ` (exit code ${code})`}`);
    const api = this.api;
    if (api) void this.exited(api, agentId, code);
    else this.pendingExits.set(agentId, code);
  }

  private forget(terminal: vscode.Terminal): void {
    const agentId = this.agentOf.get(terminal);
    this.agentOf.delete(terminal);
    if (agentId !== undefined && this.byAgent.get(agentId) === terminal) {
      this.byAgent.delete(agentId);
      this.changed.fire(agentId);
    }
  }

  private async exited(api: CoordinatorApi, agentId: string, code: number | null): Promise<void> {
    try {
      await api.launchExited(agentId, code, this.operator);
    } catch (err) {
      this.output.appendLine(
        `SW4RM: ${agentId} could not be marked as exited: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  /** Adopts this window's terminals of launched agents that run; with `markGone`, marks those without one EXITED. */
  private async reconcile(markGone: boolean): Promise<void> {
    const api = this.api;
    if (!api) return;
    let records;
    try {
      records = await api.launches();
    } catch {
      return; // The coordinator stopped meanwhile.
    }
    if (api !== this.api) return;
    const open = vscode.window.terminals.filter((t) => !this.agentOf.has(t) && t.exitStatus === undefined);
    const { adopt, exited } = reconcileLaunches(
      records,
      open.map((t) => t.name),
      new Set(this.byAgent.keys()),
    );
    for (const [agentId, name] of adopt) {
      const terminal = open.find((t) => t.name === name && !this.agentOf.has(t));
      if (!terminal) continue;
      this.byAgent.set(agentId, terminal);
      this.agentOf.set(terminal, agentId);
      this.output.appendLine(`SW4RM: ${agentId} still runs in its terminal "${name}": adopted`);
      this.changed.fire(agentId);
      // Its terminal opened before the window could say so (a reload right after the launch).
      if (records.find((r) => r.agentId === agentId)?.state === 'STARTING')
        await api.launchStarted(agentId).catch(() => undefined);
    }
    if (!markGone) return;
    for (const agentId of exited) {
      this.output.appendLine(
        `SW4RM: ${agentId} has no terminal in this window any more (the editor reloaded or closed): marked as exited`,
      );
      await this.exited(api, agentId, null);
    }
  }
}

/**
 * The process environment of a launched agent: the extension host's own (PATH, HOME…) without the editor's private
 * variables (VSCODE_*, ELECTRON_*) or any SW4RM_* of its own, then the plan's (SW4RM_*, the profile's env,
 * ELECTRON_RUN_AS_NODE=1).
 */
export function terminalEnvironment(planEnv: Readonly<Record<string, string>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || /^(VSCODE_|ELECTRON_|SW4RM_)/.test(name)) continue;
    env[name] = value;
  }
  return { ...env, ...planEnv };
}
