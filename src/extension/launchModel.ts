import type {
  InboxStats,
  LaunchProfile,
  LaunchRecord,
  ProfileAvailability,
  ProfileIssue,
  WorktreeInfo,
} from '../core/api';

/**
 * The texts and decisions of SW4RM: Launch Agent…, the launched terminals and the launched agents' rows in the Agents
 * view (README, "Launch your first agent"), as plain data (no `vscode`): launchCommands.ts, launchedTerminals.ts and
 * views/agentsView.ts turn them into quick picks, notifications, terminals and tree items.
 */

/** One row of the profile quick pick. */
export interface ProfilePick {
  readonly label: string;
  readonly description: string;
  readonly detail: string;
  readonly profile: LaunchProfile;
  /** Null when the command can run here; else why not (shown before anything is launched). */
  readonly problem: string | null;
}

/**
 * A profile's row: its name (a warning icon when its command is not installed), its id and where it comes from, and a
 * detail line with its description and whether its program was found.
 */
export function profilePick(profile: LaunchProfile, availability: ProfileAvailability | undefined): ProfilePick {
  const problem = availability === undefined ? null : notInstalledText(profile, availability);
  const found = availability?.resolved ? `runs ${availability.resolved}` : `runs ${programOf(profile)}`;
  return {
    label: `${problem ? '$(warning) ' : ''}${profile.name}`,
    description: `${profile.id} · ${sourceText(profile.source)}`,
    detail: [profile.description, problem ? `not installed: ${problem}` : found].filter(Boolean).join(' — '),
    profile,
    problem,
  };
}

/** The program a profile runs (looked up on PATH unless absolute). */
export function programOf(profile: Pick<LaunchProfile, 'command'>): string {
  return profile.command[0] ?? '(no command)';
}

export function sourceText(source: LaunchProfile['source']): string {
  if (source === 'builtin') return 'built in';
  if (source === 'settings') return 'sw4rm.agents.profiles';
  return source.file;
}

/**
 * Why the profile cannot be launched here, naming its program, or null when it can. The coordinator's own words are
 * kept (they say how to install it); the program is added when they do not name it.
 */
export function notInstalledText(
  profile: Pick<LaunchProfile, 'command'>,
  availability: Pick<ProfileAvailability, 'resolved' | 'problem'>,
): string | null {
  if (availability.problem === null && availability.resolved !== null) return null;
  const program = programOf(profile);
  const problem = availability.problem ?? `\`${program}\` is not installed (not found on PATH).`;
  return problem.includes(program) ? problem : `\`${program}\`: ${problem}`;
}

/** The warning shown instead of launching a profile whose program is missing. */
export function notInstalledWarning(profile: Pick<LaunchProfile, 'name' | 'command'>, problem: string): string {
  const sentence = /[.!?]$/.test(problem.trim()) ? problem.trim() : `${problem.trim()}.`;
  return `${profile.name} cannot be launched: ${sentence} Install it, or change the profile's command in the sw4rm.agents.profiles setting or .sw4rm/agents.json.`;
}

/** The worktree quick pick: a new worktree first, then the repository's worktrees no agent is bound to. */
export interface WorktreePick {
  readonly label: string;
  readonly description: string;
  readonly worktree: WorktreeInfo | undefined;
}

export const NEW_WORKTREE_LABEL = '$(add) New worktree from branch…';

export function worktreePicks(
  worktrees: readonly WorktreeInfo[],
  repoId: string,
  worktreesRoot: string,
): WorktreePick[] {
  const unbound = worktrees.filter((w) => w.repoId === repoId && !w.prunable && w.boundAgents.length === 0);
  return [
    { label: NEW_WORKTREE_LABEL, description: `in ${worktreesRoot || repoId}`, worktree: undefined },
    ...unbound.map((w) => ({ label: w.worktreeId, description: `${w.branch} · not bound`, worktree: w })),
  ];
}

/** The issues of the profile settings and files, one line each, for the Output channel and the warning. */
export function profileIssueLines(issues: readonly ProfileIssue[]): string[] {
  return issues.map((issue) => `${issue.source}${issue.path ? ` ${issue.path}` : ''}: ${issue.message}`);
}

export function profileIssuesWarning(issues: readonly ProfileIssue[]): string {
  const lines = profileIssueLines(issues);
  const first = lines[0] ?? '';
  return issues.length === 1
    ? `SW4RM: a launch profile was refused: ${first}`
    : `SW4RM: ${issues.length} launch profile entries were refused; the first: ${first} (all of them in the SW4RM Output channel).`;
}

/** The variable the terminal gives the starter (dist/sw4rm-launch.js) the plan in: src/cli/agentLauncher.ts's PLAN_VARIABLE. */
export const LAUNCH_PLAN_VARIABLE = 'SW4RM_LAUNCH_PLAN';

/** The terminal a launched agent runs in is found again by this title (the plan's `title`) after a window reload. */
export function terminalTitleOf(record: Pick<LaunchRecord, 'agentId' | 'profileName'>): string {
  return `SW4RM: ${record.agentId} (${record.profileName})`;
}

/** Whether a terminal of that name is the one of this agent (its plan's title, whatever the profile's name became). */
export function isTerminalOf(terminalName: string, agentId: string): boolean {
  return terminalName.startsWith(`SW4RM: ${agentId} (`) && terminalName.endsWith(')');
}

/** The launch states whose process this window should have a terminal for. */
export const LIVE_LAUNCH_STATES: ReadonlySet<LaunchRecord['state']> = new Set(['STARTING', 'RUNNING']);

/**
 * After the editor (or the coordinator) started: which launched agents still run in a terminal of this window
 * (`adopt`: agent → terminal name), and which are gone (`exited`: their process ended with the window that ran it).
 * A terminal is matched once, by its title.
 */
export function reconcileLaunches(
  records: readonly LaunchRecord[],
  terminalNames: readonly string[],
  known: ReadonlySet<string>,
): { readonly adopt: ReadonlyMap<string, string>; readonly exited: readonly string[] } {
  const adopt = new Map<string, string>();
  const exited: string[] = [];
  const free = [...terminalNames];
  for (const record of records) {
    if (!LIVE_LAUNCH_STATES.has(record.state) || known.has(record.agentId)) continue;
    const exact = free.indexOf(terminalTitleOf(record));
    const index = exact >= 0 ? exact : free.findIndex((name) => isTerminalOf(name, record.agentId));
    if (index >= 0) {
      adopt.set(record.agentId, free[index]);
      free.splice(index, 1);
    } else {
      exited.push(record.agentId);
    }
  }
  return { adopt, exited };
}

/** How a launched agent reads its inbox, in words, from its profile's wiring. */
export function inboxHowText(profile: Pick<LaunchProfile, 'bridge' | 'instructions'> | undefined): string {
  if (!profile) return "through the SW4RM MCP server's read_inbox tool, if its profile wires the bridge";
  if (profile.bridge.kind === 'none') return 'it cannot: its profile has no MCP bridge (messages to it wait unread)';
  const told = profile.instructions.file
    ? ` (told so in ${profile.instructions.file})`
    : profile.instructions.firstPromptArgs?.length
      ? ' (told so in its first prompt)'
      : '';
  return `with the read_inbox tool of the SW4RM MCP server, when it calls it${told}; messages wait until then`;
}

/** What a launched agent's row adds: the profile and launch state in the description, the launch facts in the tooltip. */
export interface LaunchedRowParts {
  readonly description: readonly string[];
  readonly tooltip: readonly string[];
  /** Appended to the row's context value: `+launched+<state>` (the Relaunch and Show Terminal menus match it). */
  readonly contextSuffix: string;
}

export function launchedRowParts(
  record: LaunchRecord,
  profile: LaunchProfile | undefined,
  hasTerminal: boolean,
  formatTime: (ms: number | null) => string,
): LaunchedRowParts {
  const state = launchStateText(record);
  return {
    description: [record.profileName, state],
    tooltip: [
      `launched from profile: ${record.profileName} (${record.profileId})`,
      `launch: ${state}${record.launches > 1 ? ` · launched ${record.launches} times` : ''} · since ${formatTime(record.updatedAt)}`,
      `worktree: ${record.worktreeId === null ? `none (runs in ${record.cwd})` : `${record.repoId}/${record.worktreeId} (${record.cwd})`}`,
      `terminal: ${hasTerminal ? 'open in this window' : 'none in this window'}`,
      `reads its inbox: ${inboxHowText(profile)}`,
      ...(record.error ? [`error: ${record.error}`] : []),
    ],
    contextSuffix: `+launched+${record.state}`,
  };
}

/**
 * The launch state in words that cannot be taken for the agent's lifecycle state (RFC §8, shown in the label: RUNNING,
 * RUNNABLE…): `starting`, `terminal running`, `exited` / `exited (code 2)`, `launch failed`.
 */
export function launchStateText(record: Pick<LaunchRecord, 'state' | 'exitCode'>): string {
  switch (record.state) {
    case 'STARTING':
      return 'starting';
    case 'RUNNING':
      return 'terminal running';
    case 'EXITED':
      return record.exitCode === null ? 'exited' : `exited (code ${record.exitCode})`;
    case 'FAILED':
      return 'launch failed';
  }
}

/** Messages waiting in an agent's inbox that it has not read (acknowledged): the router's not-read count. */
export function unreadText(inbox: Pick<InboxStats, 'queueDepth'>): string {
  return `${inbox.queueDepth} unread`;
}

/** The notification after a launch: where it runs, and how to see it. */
export function launchedText(
  record: Pick<LaunchRecord, 'agentId' | 'profileName' | 'worktreeId' | 'cwd' | 'mode'>,
  relaunch: boolean,
): string {
  const where = record.worktreeId === null ? record.cwd : `worktree ${record.worktreeId}`;
  const session = record.mode === 'session' ? ': its session is open, and the swarm sends it its work' : '';
  return `${relaunch ? 'Relaunched' : 'Launched'} ${record.agentId} (${record.profileName}) in ${where}${session}.`;
}
