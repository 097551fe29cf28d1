import * as path from 'node:path';
import * as vscode from 'vscode';
import type { CoordinatorApi } from '../core/api';
import { SERVICE_ADDRESS_VARIABLES, formatEnvironment } from '../server/agentEnvironment';
import { describeMigration, migrateStore } from '../server/storeMigration';
import { CoordinatorStartError, WorkerCoordinator, type WorkerExit } from '../server/worker/workerCoordinator';
import type { Approvals } from './approvals';
import { Commands, ContextKeys } from './contributions';
import { agentEnvironmentFor } from './credentialsModel';
import { reportNotRunning } from './notRunning';
import { hostOptionsOf } from './hostOptions';
import { readSettings } from './settings';
import type { CoordinatorStatusBar } from './statusBar';
import { CRASH_WINDOW_MS, CrashBudget } from './crashBudget';

/** How often the status bar looks at the store's size against its disk budget. */
const STORE_USAGE_POLL_MS = 15_000;

function disposableInterval(fn: () => void, ms: number): { dispose(): void } {
  const timer = setInterval(fn, ms);
  timer.unref?.();
  return { dispose: () => clearInterval(timer) };
}
import type { AgentsTreeProvider } from './views/agentsView';
import type { CredentialsView } from './views/credentialsView';
import type { DeadLettersView } from './views/deadLettersView';

/**
 * Owns the running coordinator in this window: starts, stops and restarts it, and keeps the status bar,
 * the Agents, Approvals, Dead Letters and Credentials views, the Output channel and the terminals' environment in step
 * with it. The coordinator runs in a worker thread (server/worker): this thread, the extension host's, only passes
 * calls and events. A worker that ends by itself (an exception, its heap limit) is restarted from the store, at most
 * MAX_RESTARTS times in CRASH_WINDOW_MS.
 */
export class CoordinatorController implements vscode.Disposable {
  private host: WorkerCoordinator | undefined;
  /** The running coordinator as the views see it: the one way from the editor into the core. */
  private api: CoordinatorApi | undefined;
  /** The crashes of the worker the editor still restarts from. */
  private readonly crashes = new CrashBudget();
  /** Why the previous worker ended, while the editor restarts it (the status bar says "restarting"). */
  private restartingAfter: string | undefined;
  /** Status updates started; only the latest one is shown. */
  private statusUpdates = 0;
  private hostSubscriptions: Array<{ dispose(): void }> = [];
  /** A port chosen by the user after a conflict; used instead of the setting until the window closes. */
  private portOverride: number | undefined;
  private transition: Promise<void> = Promise.resolve();
  private readonly apiChanged = new vscode.EventEmitter<CoordinatorApi | undefined>();
  /** The running coordinator's API once it serves, undefined once it stopped: for views bound outside this class. */
  readonly onDidChangeApi = this.apiChanged.event;
  /** Others that follow the running coordinator's API: bound when it starts, unbound when it stops. */
  private readonly followers: Array<{ bind(api: CoordinatorApi | undefined): unknown }> = [];

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.OutputChannel,
    private readonly statusBar: CoordinatorStatusBar,
    private readonly agentsView: AgentsTreeProvider,
    private readonly deadLettersView: DeadLettersView,
    private readonly approvals: Approvals,
    private readonly credentialsView: CredentialsView,
  ) {
    context.environmentVariableCollection.persistent = false;
    context.environmentVariableCollection.description =
      'SW4RM: the address of the coordinator in this window and an enrolment credential for the agents started here';
  }

  get running(): WorkerCoordinator | undefined {
    return this.host;
  }

  /**
   * Ends the coordinator's worker as a crash would (SW4RM: Simulate Coordinator Crash): the editor restarts it from
   * the store, as it would after a real one.
   */
  async simulateCrash(): Promise<void> {
    const host = this.host;
    if (!host) return reportNotRunning();
    this.output.appendLine('SW4RM: ending the coordinator worker on request (Simulate Coordinator Crash)');
    await host.terminate();
  }

  start(): Promise<void> {
    return this.serialize(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.serialize(() => this.doStop());
  }

  restart(): Promise<void> {
    return this.serialize(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  /**
   * Asks which agent the environment is for, mints that agent's own credential and copies `export` lines: the
   * service addresses, SW4RM_AGENT_ID and SW4RM_TOKEN (the agent's credential, never the operator token). With auth
   * `none` nothing is minted and no token is copied.
   */
  async copyAgentEnvironment(): Promise<void> {
    const { host, api } = this;
    if (!host || !api) return reportNotRunning();
    const agentId = await this.credentialsView.askAgentId(api, 'Copy Agent Environment');
    if (agentId === undefined || this.host !== host) return;
    const authNone = host.options.auth === 'none';
    const minted = authNone ? undefined : await this.credentialsView.mintFor(api, agentId);
    if (!authNone && !minted) return;
    const env = agentEnvironmentFor(await host.environment(), agentId, minted?.token);
    await vscode.env.clipboard.writeText(formatEnvironment(env));
    void vscode.window.showInformationMessage(
      authNone
        ? `Copied the environment for agent ${agentId} (${env.SW4RM_REGISTRY_ADDR}). Auth is "none": no token, and any local process can act as any agent.`
        : `Copied the environment for agent ${agentId} (${env.SW4RM_REGISTRY_ADDR}) with its own SW4RM_TOKEN; revoke it in the Credentials view.`,
    );
  }

  async dispose(): Promise<void> {
    await this.stop();
    this.apiChanged.dispose();
  }

  /** `follower` is bound to the running coordinator's API from now on (at once if it runs). */
  follow(follower: { bind(api: CoordinatorApi | undefined): unknown }): void {
    this.followers.push(follower);
    if (this.api) void follower.bind(this.api);
  }

  /** Start, stop and restart never overlap. */
  private serialize(step: () => Promise<void>): Promise<void> {
    this.transition = this.transition.then(step, step);
    return this.transition;
  }

  private async doStart(): Promise<void> {
    if (this.host) return;
    if (!vscode.workspace.workspaceFolders?.length) {
      this.statusBar.show({ kind: 'stopped', reason: 'no folder is open' });
      return;
    }
    const settings = readSettings(this.context);
    const port = this.portOverride ?? settings.port;
    this.statusBar.show({ kind: 'starting', after: this.restartingAfter });
    let dataDir = settings.dataDir;
    try {
      dataDir = this.moveLegacyStore(settings.legacyDataDir, settings.dataDir);
      const { onEvent: _onEvent, ...options } = hostOptionsOf(settings, {
        dataDir,
        protosDir: path.join(this.context.extensionPath, 'protos'),
        port,
        hitl: this.approvals.policy(),
        onEvent: undefined,
        workspaceFolders: (vscode.workspace.workspaceFolders ?? [])
          .filter((f) => f.uri.scheme === 'file')
          .map((f) => f.uri.fsPath),
        // A repository's own .sw4rm/worktree.json command runs only in a trusted workspace.
        trusted: vscode.workspace.isTrusted,
      });
      this.host = await WorkerCoordinator.start({
        script: coordinatorScript(this.context),
        host: options,
        // The coordinator's events, a batch per turn of its thread: one append each.
        onLog: (lines) => this.output.appendLine(lines.join('\n')),
      });
    } catch (err) {
      await this.reportStartFailure(err);
      return;
    }
    const host = this.host;
    const api = (this.api = host.api);
    // Policy and operator presence first, so that no invocation sees the default policy or "no operator".
    const bound = this.approvals.bind(api);
    this.output.appendLine(
      `SW4RM coordinator serving on ${settings.host}:${host.port} (auth ${settings.auth}; store ${host.storeLocation}; ` +
        `in worker thread ${host.threadId}; started in ${host.startTimings.totalMs} ms: its script ${host.startTimings.loadedMs} ms, ` +
        `the host ${host.startTimings.hostMs} ms)`,
    );
    if (host.bridgeEndpoints) this.output.appendLine(`SW4RM MCP bridge for agents: ${host.bridgeEndpoints.mcpUrl}`);
    for (const warning of [
      ...settings.router.warnings,
      ...settings.connections.warnings,
      ...settings.worktrees.warnings,
      ...settings.scheduler.warnings,
      ...settings.tools.warnings,
      ...settings.negotiation.warnings,
      ...settings.handoffs.warnings,
      ...settings.agentInbox.warnings,
    ])
      this.output.appendLine(`SW4RM settings: ${warning}`);
    this.hostSubscriptions.push(
      host.onDidFail((err) => void this.reportStoreFailure(host, err)),
      host.onDidExit((exit) => void this.recoverFromCrash(host, exit)),
      api.onDidChangeAgents(() => void this.updateStatus()),
      // A worktree's setup: its output in the Output channel as it comes; a failure shown (the binding stays usable).
      api.onDidRunWorktreeSetup((event) => {
        if (event.kind === 'output') this.output.append(event.text);
        else this.output.appendLine(`SW4RM worktree ${event.repoId}/${event.worktreeId}: ${event.text}`);
        if (event.kind === 'finished' && event.ok === false) {
          void vscode.window
            .showWarningMessage(`SW4RM: ${event.text.replace(/[[\]]/g, '')}`, 'Show Log')
            .then((choice) => {
              if (choice) this.output.show(true);
            });
        }
      }),
      this.deadLettersView.onDidChangeCount(() => void this.updateStatus()),
      this.approvals.onDidChangeCount(() => void this.updateStatus()),
      // The store's size against its budget changes without an event: looked at at a low rate.
      disposableInterval(() => void this.updateStatus(), STORE_USAGE_POLL_MS),
    );
    this.agentsView.bind(api);
    this.deadLettersView.bind(api);
    this.credentialsView.bind(api, () => void this.renewEnrolment(host));
    this.apiChanged.fire(api);
    for (const follower of this.followers) void follower.bind(api);
    await bound.catch(() => undefined);
    if (this.host !== host) return;
    void vscode.commands.executeCommand('setContext', ContextKeys.running, true);
    try {
      this.setTerminalEnvironment(await host.terminalEnvironment());
    } catch {
      return; // The worker ended meanwhile: recoverFromCrash takes it from here.
    }
    void this.updateStatus();
  }

  /**
   * The worker ended by itself: what the store took is safe, the rest of its memory is gone. The views unbind, the
   * Output channel and the status bar say what happened, and a new worker starts from the store (agents reconnect);
   * after MAX_RESTARTS in CRASH_WINDOW_MS the editor stops trying and says so.
   */
  private async recoverFromCrash(host: WorkerCoordinator, exit: WorkerExit): Promise<void> {
    if (this.host !== host) return;
    const outOfMemory = exit.code === 'ERR_WORKER_OUT_OF_MEMORY';
    const why = outOfMemory ? `its heap reached its limit (${exit.reason})` : exit.reason;
    this.output.appendLine(`SW4RM coordinator worker ended: ${why}`);
    const verdict = this.crashes.crashed(Date.now());
    await this.serialize(async () => {
      if (this.host === host) await this.doStop();
    });
    if (!verdict.restart) {
      const reason = `it crashed ${verdict.crashes} times in ${CRASH_WINDOW_MS / 60_000} minutes`;
      this.output.appendLine(`SW4RM: not restarting the coordinator: ${reason}. The last: ${why}.`);
      this.statusBar.show({ kind: 'stopped', reason });
      const choice = await vscode.window.showErrorMessage(
        `SW4RM: the coordinator stopped: ${reason} (the last time: ${why}). Nothing it accepted is lost; see the log.`,
        'Restart Coordinator',
        'Show Log',
      );
      if (choice === 'Restart Coordinator') await vscode.commands.executeCommand(Commands.restart);
      else if (choice === 'Show Log') this.output.show();
      return;
    }
    this.output.appendLine(
      `SW4RM: restarting the coordinator from its store (restart ${verdict.attempt} of ${this.crashes.describe()})`,
    );
    this.restartingAfter = why;
    try {
      await this.start();
    } finally {
      this.restartingAfter = undefined;
    }
    if (this.host) this.output.appendLine('SW4RM coordinator restarted: agents reconnect, nothing accepted is lost');
    else this.statusBar.show({ kind: 'stopped', reason: `it did not restart after a crash (${why})` });
  }

  /**
   * Moves the store of an earlier release from the window's workspace storage (which code-server, for one, may
   * change at every restart) to the data folder, once; returns the folder this start uses.
   */
  private moveLegacyStore(legacy: string | undefined, dataDir: string): string {
    if (legacy === undefined) return dataDir;
    const migration = migrateStore(legacy, dataDir);
    const message = describeMigration(legacy, migration);
    if (message !== undefined) this.output.appendLine(message);
    return migration.use;
  }

  /** The terminals' enrolment credential was revoked: terminals opened from now on get a new one. */
  private async renewEnrolment(host: WorkerCoordinator): Promise<void> {
    if (this.host !== host) return;
    try {
      this.setTerminalEnvironment(await host.rotateEnrolment(this.approvals.operator));
      this.output.appendLine('SW4RM: the enrolment credential was revoked; terminals opened from now on get a new one');
    } catch (err) {
      this.output.appendLine(
        `SW4RM: no new enrolment credential for terminals: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  /**
   * Terminals get the enrolment credential: an agent started there registers as it likes, and acts only as the
   * agents it enrolled (never as the operator, never as agents enrolled elsewhere).
   */
  private setTerminalEnvironment(env: Record<string, string>): void {
    const collection = this.context.environmentVariableCollection;
    collection.clear();
    for (const [name, value] of Object.entries(env)) collection.replace(name, value);
  }

  private async doStop(): Promise<void> {
    const host = this.host;
    if (!host) return;
    this.host = undefined;
    this.api = undefined;
    for (const subscription of this.hostSubscriptions) subscription.dispose();
    this.hostSubscriptions = [];
    this.agentsView.bind(undefined);
    this.deadLettersView.bind(undefined);
    this.credentialsView.bind(undefined);
    this.apiChanged.fire(undefined);
    for (const follower of this.followers) void follower.bind(undefined);
    await this.approvals.bind(undefined).catch(() => undefined);
    void vscode.commands.executeCommand('setContext', ContextKeys.running, false);
    this.context.environmentVariableCollection.clear();
    await host.stop(1500);
    this.output.appendLine('SW4RM coordinator stopped');
    this.statusBar.show({ kind: 'stopped' });
  }

  private async updateStatus(): Promise<void> {
    const { host, api } = this;
    if (!host || !api) return;
    const update = ++this.statusUpdates;
    let agents;
    let store;
    try {
      [agents, store] = await Promise.all([api.agentCounts(), api.storeUsage()]);
    } catch {
      return; // The coordinator stopped meanwhile.
    }
    if (update !== this.statusUpdates || this.host !== host) return;
    this.statusBar.show({
      kind: 'serving',
      host: host.options.host,
      port: host.port,
      auth: host.options.auth,
      agents: agents.registered,
      online: agents.online,
      deadLetters: this.deadLettersView.count,
      approvals: this.approvals.pendingCount,
      store,
    });
  }

  /** The store could not commit: stop serving at once, and offer the restart that recovers from the store. */
  private async reportStoreFailure(host: WorkerCoordinator, err: { readonly message: string }): Promise<void> {
    this.output.appendLine(`SW4RM coordinator stopped: ${err.message}`);
    await this.serialize(async () => {
      if (this.host === host) await this.doStop();
    });
    this.statusBar.show({ kind: 'stopped', reason: 'the store could not commit' });
    const choice = await vscode.window.showErrorMessage(`SW4RM: ${err.message}`, 'Restart Coordinator', 'Show Log');
    if (choice === 'Restart Coordinator') await vscode.commands.executeCommand(Commands.restart);
    else if (choice === 'Show Log') this.output.show();
  }

  private async reportStartFailure(err: unknown): Promise<void> {
    const message = err instanceof Error ? err.message : String(err);
    this.output.appendLine(`SW4RM coordinator failed to start: ${message}`);
    if (err instanceof CoordinatorStartError && err.kind === 'port_in_use' && err.freePort !== undefined) {
      this.statusBar.show({ kind: 'stopped', reason: `port ${err.port} is in use` });
      const useFree = `Use port ${err.freePort}`;
      const choice = await vscode.window.showWarningMessage(
        `SW4RM: port ${err.port} is already in use, probably by a coordinator in another window. Port ${err.freePort} is free.`,
        useFree,
        'Open Settings',
      );
      if (choice === useFree) {
        this.portOverride = err.freePort;
        void vscode.commands.executeCommand(Commands.start);
      } else if (choice === 'Open Settings') {
        void vscode.commands.executeCommand('workbench.action.openSettings', 'sw4rm.port');
      }
      return;
    }
    this.statusBar.show({ kind: 'stopped', reason: message });
    if (err instanceof CoordinatorStartError && (err.kind === 'store_open' || err.kind === 'configuration')) {
      const choice = await vscode.window.showErrorMessage(`SW4RM: ${message}`, 'Show Log');
      if (choice) this.output.show();
      return;
    }
    void vscode.window.showErrorMessage(`SW4RM coordinator failed to start: ${message}`);
  }
}

/** The coordinator thread's script, beside the extension's bundle. */
export function coordinatorScript(context: vscode.ExtensionContext): string {
  return path.join(context.extensionPath, 'dist', 'coordinatorWorker.js');
}

/** Names the terminal environment sets, for tests and docs. */
export const TERMINAL_VARIABLES = [...SERVICE_ADDRESS_VARIABLES, 'SW4RM_TOKEN'];
