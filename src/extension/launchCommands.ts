import * as vscode from 'vscode';
import type {
  CoordinatorApi,
  LaunchPlan,
  LaunchProfile,
  LaunchRecord,
  LaunchRequest,
  ProfileAvailability,
  ProfileIssue,
  WorktreeRepositoryInfo,
} from '../core/api';
import { Settings, SETTINGS_SECTION } from './contributions';
import { CoordinatorCommands, messageOf } from './coordinatorCommands';
import type { LaunchedTerminals } from './launchedTerminals';
import {
  launchedText,
  notInstalledWarning,
  profileIssueLines,
  profileIssuesWarning,
  profilePick,
  worktreePicks,
} from './launchModel';
import { asAgentRow } from './messageCommands';
import { notificationText } from './notificationText';
import { requireRunning } from './notRunning';
import { localBranches } from './worktreeGit';
import type { WorktreeState } from './worktreeState';

const OPEN_SETTINGS = 'Open Settings';
const OPEN_README = 'Open README';

/**
 * SW4RM: Launch Agent… (a profile, a repository, a worktree: new from a branch or an existing unbound one → the
 * coordinator prepares the agent → its terminal), Relaunch (an EXITED launched agent, same worktree) and Show Terminal
 * (README, "Launch your first agent"). Refusals are shown with the coordinator's message; a profile whose program is
 * not installed is refused here, before anything is launched.
 */
export class LaunchCommands extends CoordinatorCommands {
  constructor(
    private readonly operator: string,
    private readonly terminals: LaunchedTerminals,
    private readonly worktrees: WorktreeState,
    private readonly output: vscode.OutputChannel,
    private readonly extensionUri: vscode.Uri,
  ) {
    super();
  }

  async launchAgent(): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    let profiles: LaunchProfile[];
    let issues: ProfileIssue[];
    try {
      ({ profiles, issues } = await api.launchProfiles());
    } catch (err) {
      return this.refused('Launch Agent', err);
    }
    for (const line of profileIssueLines(issues)) this.output.appendLine(`SW4RM launch profiles: ${line}`);
    if (!profiles.length) {
      void this.warnWithSettings(
        'SW4RM: there is no launch profile. Add one to the sw4rm.agents.profiles setting or to .sw4rm/agents.json.',
      );
      return;
    }
    const availability = await Promise.all(
      profiles.map((p) => api.profileAvailability(p.id).catch((): ProfileAvailability | undefined => undefined)),
    );
    const picked = await vscode.window.showQuickPick(
      profiles.map((p, i) => profilePick(p, availability[i])),
      {
        title: 'Launch Agent: Profile',
        placeHolder: 'The kind of coding agent to launch',
        matchOnDescription: true,
        matchOnDetail: true,
      },
    );
    if (!picked || this.api !== api) return;
    const { profile } = picked;
    // Asked again: the picker may have stayed open while the program was installed (or removed).
    const now = await api.profileAvailability(profile.id).catch((): ProfileAvailability | undefined => undefined);
    const problem = now ? profilePick(profile, now).problem : picked.problem;
    if (problem) {
      const choice = await vscode.window.showWarningMessage(
        notificationText(notInstalledWarning(profile, problem)),
        OPEN_SETTINGS,
        OPEN_README,
      );
      await this.followUp(choice);
      return;
    }
    const repository = await this.pickRepository(api);
    if (!repository) return;
    const worktree = profile.needsWorktree ? await this.pickWorktree(api, repository) : { kind: 'new' as const };
    if (!worktree || this.api !== api) return;
    const request: LaunchRequest = { profileId: profile.id, repoId: repository.repoId, worktree };
    let plan: LaunchPlan;
    try {
      plan = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Launching ${profile.name}…` },
        () => api.launchAgent(request, this.operator),
      );
    } catch (err) {
      this.worktrees.refresh();
      return this.refused('Launch Agent', err);
    }
    await this.start(api, plan, false);
  }

  /** Relaunch: the row's EXITED (or FAILED) launched agent, or one picked, in the same worktree. */
  async relaunchAgent(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const agentId =
      asAgentRow(node)?.agentId ??
      (await this.pickLaunch(api, (r) => r.state === 'EXITED' || r.state === 'FAILED', 'Relaunch Agent'));
    if (!agentId) return;
    if (this.terminals.has(agentId)) {
      this.terminals.show(agentId);
      void vscode.window.showInformationMessage(notificationText(`${agentId} still runs in its terminal.`));
      return;
    }
    let plan: LaunchPlan;
    try {
      plan = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Relaunching ${agentId}…` },
        () => api.relaunchAgent(agentId, this.operator),
      );
    } catch (err) {
      return this.refused('Relaunch', err);
    }
    await this.start(api, plan, true);
  }

  async showAgentTerminal(node?: unknown): Promise<void> {
    const api = await requireRunning(this.api);
    if (!api) return;
    const agentId =
      asAgentRow(node)?.agentId ??
      (await this.pickLaunch(api, (r) => this.terminals.has(r.agentId), 'Show Agent Terminal'));
    if (!agentId) return;
    if (!this.terminals.show(agentId)) {
      void vscode.window.showInformationMessage(notificationText(`${agentId} has no terminal in this window.`));
    }
  }

  /** Opens the plan's terminal (a session agent was started by the coordinator: none) and says where the agent runs. */
  private async start(api: CoordinatorApi, plan: LaunchPlan, relaunch: boolean): Promise<void> {
    try {
      if (plan.mode !== 'session') await this.terminals.open(api, plan);
    } catch (err) {
      this.worktrees.refresh();
      return this.refused(relaunch ? 'Relaunch' : 'Launch Agent', err);
    }
    this.worktrees.refresh();
    void vscode.window.showInformationMessage(notificationText(launchedText(plan.record, relaunch)));
  }

  private async pickRepository(api: CoordinatorApi): Promise<WorktreeRepositoryInfo | undefined> {
    const data = await this.worktrees.current();
    const repositories = data.repositories.length
      ? data.repositories
      : await api.worktreeRepositories().catch(() => []);
    if (!repositories.length) {
      void vscode.window.showWarningMessage(
        'No git repository is open in this window: an agent is launched in a worktree of one. Open a folder that is a git repository.',
      );
      return undefined;
    }
    if (repositories.length === 1) return repositories[0];
    return (
      await vscode.window.showQuickPick(
        repositories.map((r) => ({ label: r.repoId, description: r.path, repository: r })),
        { title: 'Launch Agent: Repository', placeHolder: 'The repository the agent works in' },
      )
    )?.repository;
  }

  private async pickWorktree(
    api: CoordinatorApi,
    repository: WorktreeRepositoryInfo,
  ): Promise<LaunchRequest['worktree'] | undefined> {
    const worktrees = await api.worktrees().catch(() => []);
    const picked = await vscode.window.showQuickPick(
      worktreePicks(worktrees, repository.repoId, repository.worktreesRoot),
      {
        title: 'Launch Agent: Worktree',
        placeHolder: 'A new worktree for the agent, or an existing one no agent is bound to',
      },
    );
    if (!picked) return undefined;
    if (picked.worktree) return { kind: 'existing', worktreeId: picked.worktree.worktreeId };
    const branches = await localBranches(repository.path).catch(() => [] as string[]);
    if (!branches.length) return { kind: 'new' };
    const branch = (
      await vscode.window.showQuickPick(
        branches.map((b, i) => ({ label: b, description: i === 0 ? 'checked out' : undefined })),
        { title: 'Launch Agent: Base Branch', placeHolder: 'The new worktree starts from this branch' },
      )
    )?.label;
    return branch === undefined ? undefined : { kind: 'new', fromBranch: branch };
  }

  private async pickLaunch(
    api: CoordinatorApi,
    filter: (record: LaunchRecord) => boolean,
    title: string,
  ): Promise<string | undefined> {
    const records = (await api.launches().catch(() => [] as LaunchRecord[])).filter(filter);
    if (!records.length) {
      void vscode.window.showInformationMessage(`${title}: no launched agent fits.`);
      return undefined;
    }
    return (
      await vscode.window.showQuickPick(
        records.map((r) => ({ label: r.agentId, description: `${r.profileName} · ${r.state}`, agentId: r.agentId })),
        { title, placeHolder: 'A launched agent' },
      )
    )?.agentId;
  }

  private refused(what: string, err: unknown): void {
    const message = messageOf(err);
    this.output.appendLine(`SW4RM ${what}: ${message}`);
    void vscode.window.showErrorMessage(notificationText(`${what}: ${message}`));
  }

  /** The issues of sw4rm.agents.profiles / .sw4rm/agents.json: in the Output channel, and a warning with Open Settings. */
  reportIssues(issues: readonly ProfileIssue[]): void {
    for (const line of profileIssueLines(issues)) this.output.appendLine(`SW4RM launch profiles: ${line}`);
    void this.warnWithSettings(profileIssuesWarning(issues));
  }

  private async warnWithSettings(text: string): Promise<void> {
    const choice = await vscode.window.showWarningMessage(notificationText(text), OPEN_SETTINGS, OPEN_README);
    await this.followUp(choice);
  }

  private async followUp(choice: string | undefined): Promise<void> {
    if (choice === OPEN_SETTINGS) {
      await vscode.commands.executeCommand(
        'workbench.action.openSettings',
        `${SETTINGS_SECTION}.${Settings.agentsProfiles}`,
      );
    } else if (choice === OPEN_README) {
      await vscode.commands.executeCommand('markdown.showPreview', vscode.Uri.joinPath(this.extensionUri, 'readme.md'));
    }
  }
}
