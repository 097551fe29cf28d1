import { applyEdits, modify, parse, printParseErrorCode, type ParseError } from 'jsonc-parser';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Git } from '../worktree/git';
import type { BridgeEndpoints, LaunchProfile } from './model';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/**
 * What a launch writes into an agent's worktree and adds to its command line (README, "Launch profiles"):
 * - the instructions file (`.sw4rm/AGENT.md` in the built-in profiles): who the agent is, how and when to read its
 *   inbox, how to reach the others, the worktree it must stay in;
 * - the MCP configuration of the profile's BridgeWiring (a file in the CLI's format, or arguments with placeholders);
 * - the approval hook of the profile's ApprovalWiring (a COMMAND hook: `<hookCommand> --cli <cli>`, 660 s);
 * - the worktree's own exclude file listing all of them (`git config --worktree core.excludesFile`), so `git status`
 *   shows nothing in the worktree and the main checkout is never touched.
 * The agent's token is never written: every file names the SW4RM_TOKEN environment variable, which the CLI expands.
 *
 * A file the launch would write that git TRACKS in the worktree (a repository that commits its own `.mcp.json`) is
 * refused (WiringError): writing it would change a committed file that the agent could commit, and an exclude file
 * cannot hide a tracked file. An existing untracked file (e.g. copied by the worktree setup) is merged: our server
 * entry and hook are set in it and everything else in it is kept.
 */

/** The MCP server's name in every configuration the launch writes. */
export const SERVER_NAME = 'sw4rm';
/** Hook timeout: the hook endpoint waits at most 600 s, and a CLI must not give up first. */
export const HOOK_TIMEOUT_SECONDS = 660;
/** The exclude file in the worktree's own git directory. */
export const EXCLUDE_FILE_NAME = 'sw4rm-exclude';

/** A launch refused while wiring (a tracked file in the way): the message is for the person. */
export class WiringError extends SwarmError {
  constructor(message: string) {
    super(message);
    this.name = 'WiringError';
  }

  /** Refused as the launch refuses it (LaunchError `refused`). */
  override get errorKind(): ErrorKind {
    return 'precondition';
  }

  override get errorCode(): Sw4rmCode {
    return 'FAILED_PRECONDITION';
  }
}

export interface WiringContext {
  readonly agentId: string;
  readonly profile: LaunchProfile;
  /** The directory the agent runs in (its worktree). */
  readonly cwd: string;
  /** Undefined when the bridge is not listening (then only profiles that need none of it can be wired). */
  readonly endpoints: BridgeEndpoints | undefined;
  /** How long a message to this agent waits to be read before it ends TIMED_OUT (LaunchesOptions.bridgedAckTimeoutMs). */
  readonly inboxWaitMs?: number;
}

/** Whether the profile needs the bridge's endpoints (its MCP wiring, its hook, or a placeholder naming them). */
export function needsEndpoints(profile: LaunchProfile): boolean {
  // A session's MCP server is the bridge.
  if (profile.mode === 'session') return true;
  if (profile.bridge.kind !== 'none' || profile.approvals.kind !== 'none') return true;
  const args = [...profile.command.slice(1), ...(profile.instructions.firstPromptArgs ?? [])];
  return args.some((a) => /\{(mcpUrl|hookUrl|grpcAddress|stdioCommand|stdioProgram|stdioArgs|hookCommand)\}/.test(a));
}

/** The values of the placeholders: strings, or argv lists (spread when a whole argument, JSON array text inside one). */
export function placeholderValues(ctx: WiringContext): Record<string, string | readonly string[] | undefined> {
  const e = ctx.endpoints;
  return {
    agentId: ctx.agentId,
    worktree: ctx.cwd,
    instructionsPath: ctx.profile.instructions.file,
    mcpUrl: e?.mcpUrl,
    hookUrl: e?.hookUrl,
    grpcAddress: e?.grpcAddress,
    stdioCommand: e?.stdioCommand,
    stdioProgram: e?.stdioCommand[0],
    stdioArgs: e?.stdioCommand.slice(1),
    hookCommand: e && [...e.hookCommand, '--cli', ctx.profile.cli],
  };
}

/** `args` with their placeholders filled. An unknown `{word}` is left as it is; a known one without a value is refused. */
export function fillArgs(
  args: readonly string[],
  values: Record<string, string | readonly string[] | undefined>,
): string[] {
  const out: string[] = [];
  const valueOf = (name: string): string | readonly string[] | null => {
    if (!(name in values)) return null;
    const value = values[name];
    if (value === undefined)
      throw new WiringError(
        `{${name}} has no value here (${name === 'instructionsPath' ? 'the profile has no instructions file' : 'the MCP bridge is not listening'})`,
      );
    return value;
  };
  for (const arg of args) {
    const whole = /^\{([A-Za-z]+)\}$/.exec(arg);
    const wholeValue = whole ? valueOf(whole[1]) : null;
    if (Array.isArray(wholeValue)) {
      out.push(...wholeValue);
      continue;
    }
    out.push(
      arg.replace(/\{([A-Za-z]+)\}/g, (match, name: string) => {
        const value = valueOf(name);
        if (value === null) return match;
        return typeof value === 'string' ? value : JSON.stringify(value);
      }),
    );
  }
  return out;
}

/** The command line the agent starts with: the profile's command, the bridge's arguments, the first prompt. */
export function launchCommand(ctx: WiringContext): string[] {
  const values = placeholderValues(ctx);
  const [program, ...rest] = ctx.profile.command;
  return [
    program,
    ...fillArgs(rest, values),
    ...(ctx.profile.bridge.kind === 'args' ? fillArgs(ctx.profile.bridge.args, values) : []),
    ...fillArgs(ctx.profile.instructions.firstPromptArgs ?? [], values),
  ];
}

/** One argument quoted for a POSIX shell (every hook is run through one). */
export function shellQuote(arg: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** One argument quoted for PowerShell (Copilot CLI's `powershell` hook on Windows). */
function powershellQuote(arg: string): string {
  return `'${arg.replace(/'/g, "''")}'`;
}

/**
 * The hook command line for `cli`: the bridge's hook command with `--cli <cli>`, after the commands' own environment
 * (BridgeEndpoints.commandEnv), quoted for a POSIX shell or, with `shell: 'powershell'`, for PowerShell.
 */
export function hookCommandLine(
  endpoints: BridgeEndpoints,
  cli: string,
  shell: 'posix' | 'powershell' = 'posix',
): string {
  const argv = [...endpoints.hookCommand, '--cli', cli];
  const env = Object.entries(endpoints.commandEnv);
  if (shell === 'powershell')
    return `${env.map(([name, value]) => `$env:${name}=${powershellQuote(value)}; `).join('')}& ${argv.map(powershellQuote).join(' ')}`;
  return `${env.map(([name, value]) => `${name}=${shellQuote(value)} `).join('')}${argv.map(shellQuote).join(' ')}`;
}

// ---------------------------------------------------------------- the files

/** A change to a JSON file: set the value at a path, or put our entry into an array of hooks (others kept). */
type JsonEdit =
  | { readonly kind: 'set'; readonly path: readonly (string | number)[]; readonly value: unknown }
  | { readonly kind: 'hook'; readonly path: readonly (string | number)[]; readonly entry: unknown }
  /** A string added to an array of strings unless it is there already. */
  | { readonly kind: 'include'; readonly path: readonly (string | number)[]; readonly item: string };

export type PlannedFile =
  | { readonly path: string; readonly kind: 'text'; readonly content: string }
  | { readonly path: string; readonly kind: 'json'; readonly edits: readonly JsonEdit[] };

/** Whether a hook entry is one a launch wrote (replaced on relaunch, never duplicated). */
function isOurHook(entry: unknown): boolean {
  const text = JSON.stringify(entry);
  return text.includes('sw4rm-hook') || text.includes('/hooks/pre-tool-use') || text.includes('"sw4rm-approvals"');
}

/** The MCP server entry of `format` (the token named, never written). */
function serverEntry(
  format: 'claude-mcp-json' | 'gemini-settings' | 'cursor-mcp-json' | 'vscode-mcp-json',
  transport: 'http' | 'stdio',
  e: BridgeEndpoints,
): { path: string[]; value: unknown } {
  // How each format names an environment variable inside a string value.
  const ref =
    format === 'gemini-settings'
      ? (n: string) => `\${${n}}`
      : format === 'claude-mcp-json'
        ? (n: string) => `\${${n}}`
        : (n: string) => `\${env:${n}}`;
  const auth = { Authorization: `Bearer ${ref('SW4RM_TOKEN')}` };
  const stdioEnv = { SW4RM_MCP_URL: ref('SW4RM_MCP_URL'), SW4RM_TOKEN: ref('SW4RM_TOKEN'), ...e.commandEnv };
  const [command, ...args] = e.stdioCommand;
  switch (format) {
    case 'claude-mcp-json':
      return {
        path: ['mcpServers', SERVER_NAME],
        value:
          transport === 'http'
            ? { type: 'http', url: e.mcpUrl, headers: auth }
            : { type: 'stdio', command, args, env: stdioEnv },
      };
    case 'gemini-settings':
      return {
        path: ['mcpServers', SERVER_NAME],
        value: transport === 'http' ? { httpUrl: e.mcpUrl, headers: auth } : { command, args, env: stdioEnv },
      };
    case 'cursor-mcp-json':
      return {
        path: ['mcpServers', SERVER_NAME],
        value: transport === 'http' ? { url: e.mcpUrl, headers: auth } : { command, args, env: stdioEnv },
      };
    case 'vscode-mcp-json':
      return {
        path: ['servers', SERVER_NAME],
        value:
          transport === 'http'
            ? { type: 'http', url: e.mcpUrl, headers: auth }
            : { type: 'stdio', command, args, env: stdioEnv },
      };
  }
}

/** Every file the launch writes for this profile (none for needsWorktree false), merged per path. */
export function plannedFiles(ctx: WiringContext): PlannedFile[] {
  const { profile } = ctx;
  if (!profile.needsWorktree) return [];
  const files: PlannedFile[] = [];
  if (profile.instructions.file !== undefined)
    files.push({ path: profile.instructions.file, kind: 'text', content: instructionsText(ctx) });
  const json = new Map<string, JsonEdit[]>();
  const add = (file: string, edit: JsonEdit) => json.set(file, [...(json.get(file) ?? []), edit]);
  const e = ctx.endpoints;
  if (profile.bridge.kind === 'mcp-config-file') {
    if (!e) throw new WiringError('the MCP bridge is not listening');
    const entry = serverEntry(profile.bridge.format, profile.bridge.transport, e);
    add(profile.bridge.path, { kind: 'set', path: entry.path, value: entry.value });
    // Claude Code uses a project's .mcp.json server only once it is approved: the launch approves its own one in the
    // worktree's local settings (checked with Claude Code 2.1.328: without it `claude mcp list` says "Pending approval").
    if (
      profile.cli === 'claude-code' &&
      profile.bridge.format === 'claude-mcp-json' &&
      profile.bridge.path === '.mcp.json'
    ) {
      add('.claude/settings.local.json', { kind: 'include', path: ['enabledMcpjsonServers'], item: SERVER_NAME });
    }
  }
  const approvals = profile.approvals;
  if (approvals.kind !== 'none') {
    if (!e) throw new WiringError('the MCP bridge is not listening');
    switch (approvals.kind) {
      case 'claude-code-hooks': {
        // Never an HTTP hook: Claude Code runs the tool when one fails (profiles.ts refuses `via: "http"`).
        if (approvals.via === 'http')
          throw new WiringError(
            'Claude Code approvals are wired as a command hook only (an HTTP hook that fails lets the tool run)',
          );
        const hook = { type: 'command', command: hookCommandLine(e, 'claude-code'), timeout: HOOK_TIMEOUT_SECONDS };
        add('.claude/settings.local.json', {
          kind: 'hook',
          path: ['hooks', 'PreToolUse'],
          entry: { matcher: '*', hooks: [hook] },
        });
        break;
      }
      case 'gemini-hooks':
        add('.gemini/settings.json', {
          kind: 'hook',
          path: ['hooks', 'BeforeTool'],
          entry: {
            matcher: '.*',
            hooks: [
              {
                type: 'command',
                name: 'sw4rm-approvals',
                command: hookCommandLine(e, 'gemini'),
                timeout: HOOK_TIMEOUT_SECONDS * 1000,
              },
            ],
          },
        });
        break;
      case 'copilot-hooks':
        add('.github/hooks/sw4rm.json', { kind: 'set', path: ['version'], value: 1 });
        add('.github/hooks/sw4rm.json', {
          kind: 'hook',
          path: ['hooks', 'preToolUse'],
          entry: {
            type: 'command',
            bash: hookCommandLine(e, 'copilot'),
            powershell: hookCommandLine(e, 'copilot', 'powershell'),
            timeoutSec: HOOK_TIMEOUT_SECONDS,
          },
        });
        break;
    }
  }
  for (const [file, edits] of json) files.push({ path: file, kind: 'json', edits });
  return files;
}

/** The file's new text: ours (text), or `existing` with our edits applied (comments and other entries kept). */
export function renderFile(file: PlannedFile, existing: string | undefined): string {
  if (file.kind === 'text') return file.content;
  let text = existing !== undefined && existing.trim() !== '' ? existing : '{}';
  const errors: ParseError[] = [];
  const current = parse(text, errors, { allowTrailingComma: true }) as unknown;
  if (errors.length > 0 || typeof current !== 'object' || current === null || Array.isArray(current)) {
    const why =
      errors.length > 0
        ? `${printParseErrorCode(errors[0].error)} at offset ${errors[0].offset}`
        : 'it is not a JSON object';
    throw new WiringError(
      `${file.path} exists in the worktree and cannot be merged (${why}); fix or remove it and launch again`,
    );
  }
  const formattingOptions = { insertSpaces: true, tabSize: 2, eol: '\n' };
  for (const edit of file.edits) {
    let value: unknown;
    if (edit.kind === 'set') {
      value = edit.value;
    } else {
      let at: unknown = parse(text, [], { allowTrailingComma: true });
      for (const key of edit.path)
        at = at !== null && typeof at === 'object' ? (at as Record<string | number, unknown>)[key] : undefined;
      if (edit.kind === 'include') {
        const list = Array.isArray(at) ? at : [];
        if (list.includes(edit.item)) continue;
        value = [...list, edit.item];
      } else {
        const others = Array.isArray(at) ? at.filter((entry) => !isOurHook(entry)) : [];
        value = [...others, edit.entry];
      }
    }
    text = applyEdits(text, modify(text, [...edit.path], value, { formattingOptions }));
  }
  return text.endsWith('\n') ? text : `${text}\n`;
}

/** The instructions file: who the agent is and how it works with the swarm (README, "The inbox reaches the agent"). */
export function instructionsText(ctx: WiringContext): string {
  const { agentId, profile, cwd } = ctx;
  const lines: string[] = [
    `# You are \`${agentId}\` in a SW4RM swarm`,
    '',
    `The SW4RM coordinator in the editor launched you (profile "${profile.name}") and wrote this file. It is not part of`,
    'the repository: git ignores it in this worktree only. Read it again whenever you are unsure what to do next.',
    '',
    '## Who you are and where you work',
    '',
    `- Your agent id is \`${agentId}\`. Other agents and the person at the editor address you by it.`,
    `- You work in the git worktree \`${cwd}\`. Stay inside it: do not read or change files outside this folder, do not`,
    '  check out other branches or worktrees, and commit your work here. The person merges it back when it is ready.',
    '- Your credential is in the SW4RM_TOKEN environment variable. Never print it, write it into a file or pass it on.',
    '',
  ];
  if (profile.bridge.kind === 'none') {
    lines.push(
      '## No swarm tools in this CLI',
      '',
      'This CLI has no MCP client, so you cannot read an inbox or message other agents from here. The person at the',
      "editor talks to you in this terminal; other agents' messages to you wait in your inbox, and the editor shows them.",
      '',
    );
  } else {
    lines.push(
      '## Your inbox',
      '',
      `Your swarm tools come from the MCP server \`${SERVER_NAME}\`. Messages from other agents and from the person wait in`,
      'your inbox until you read them; nothing is pushed to you, so you must look:',
      '',
      ...(ctx.inboxWaitMs !== undefined
        ? [
            `A message you have not read within ${waitText(ctx.inboxWaitMs)} of its sending ends unread (TIMED_OUT) and its sender is told so.`,
            '',
          ]
        : []),
      '- Call `read_inbox` now, before you start.',
      '- Call it again after each step of your work (a commit, a finished subtask), whenever you wait for something',
      '  (`wait_ms` waits for the first message), before you ask a question, and before you say you are done.',
      '- Reading marks a message READ. When you have handled it, answer it with `ack_message` (fulfilled, rejected or',
      '  failed): its sender learns what became of it. Do not leave a message unanswered.',
      '',
      '## Working with the others',
      '',
      '- `list_agents`: who is in the swarm, what they can do and whether they are online.',
      '- `send_message`: a message to one agent by its id. Say what you need and what you did.',
      '- `request_decision`: a question that needs the person (it waits until they decide; when the deadline passes',
      '  without an answer, that is not a "no": ask again or choose the safe option).',
      '- `current_task`: the task the coordinator gave you, if any; `complete_task` when it is done, `fail_task` when you',
      '  cannot do it; `request_handoff` to pass work to an agent with the right capability.',
      '- `report_activity` and `append_artifact`: tell the editor what you are doing and what you produced;',
      '  `submit_proposal` / `submit_vote` in a negotiation room.',
      '- `workspace_*`: file and git tools confined to your worktree.',
      '',
      `The tool list of the \`${SERVER_NAME}\` server is the reference: if a name above differs from it, use the tool it describes.`,
      '',
    );
  }
  lines.push('## Tool approvals', '');
  switch (profile.approvals.kind) {
    case 'none':
      lines.push(profile.approvals.note ?? 'No approval hook is wired for this CLI: its own confirmations apply.', '');
      break;
    default:
      lines.push(
        'Before you run a tool, the editor may ask the person (or its approval rules decide). A denial says why: do not',
        'try to get around it. When nobody decided in time, the CLI asks you or refuses; that is not the person\'s "no".',
        '',
      );
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------- writing, and git

/** Which of `paths` git tracks in the worktree `cwd`. */
export async function trackedPaths(git: Git, cwd: string, paths: readonly string[]): Promise<string[]> {
  if (paths.length === 0) return [];
  const out = await git.run(cwd, ['ls-files', '-z', '--', ...paths.map((p) => `:(literal)${p}`)]);
  return out.stdout.split('\0').filter((p) => p !== '');
}

/**
 * Writes the planned files into the worktree `cwd` (refusing tracked ones, merging untracked ones), then makes the
 * worktree's own exclude file list them. Answers the relative paths written.
 */
export async function writeWiring(
  git: Git,
  cwd: string,
  files: readonly PlannedFile[],
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<string[]> {
  // Nothing to write (needsWorktree false: the main checkout is never touched, not even its git config).
  if (files.length === 0) return [];
  const paths = files.map((f) => f.path);
  const tracked = await trackedPaths(git, cwd, paths);
  if (tracked.length > 0) {
    throw new WiringError(
      `${tracked.join(', ')} ${tracked.length === 1 ? 'is' : 'are'} tracked by git in this repository: the launch does not change committed files ` +
        '(the agent could commit the change, and a tracked file cannot be excluded). Use a profile whose bridge writes another file and passes it on the ' +
        'command line (for Claude Code: command ["claude", "--mcp-config", ".sw4rm/mcp.json"] with bridge path ".sw4rm/mcp.json"), or one with bridge "args".',
    );
  }
  // Everything is rendered before anything is written: a file that cannot be merged writes nothing.
  const rendered = files.map((file) => {
    const full = path.join(cwd, ...file.path.split('/'));
    let existing: string | undefined;
    try {
      existing = fs.readFileSync(full, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    return { full, text: renderFile(file, existing) };
  });
  for (const { full, text } of rendered) {
    fs.mkdirSync(path.dirname(full), { recursive: true });
    fs.writeFileSync(full, text);
  }
  await excludeFromGit(git, cwd, paths, env);
  return paths;
}

/** A gitignore pattern matching exactly the relative path `p` from the worktree root. */
export function excludePattern(p: string): string {
  return `/${p.replace(/[\\*?[\]!# ]/g, (c) => `\\${c}`)}`;
}

/** The user's own excludes file as git would read it without ours: repository, then global, then system config, else the XDG default. */
async function userExcludesFile(
  git: Git,
  cwd: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<string | undefined> {
  for (const scope of ['--local', '--global', '--system']) {
    const r = await git.run(cwd, ['config', scope, '--type=path', '--get', 'core.excludesFile'], { okExitCodes: [1] });
    const value = r.stdout.trim();
    if (r.exitCode === 0 && value !== '') return value;
  }
  const base = env.XDG_CONFIG_HOME ? env.XDG_CONFIG_HOME : env.HOME ? path.join(env.HOME, '.config') : undefined;
  return base === undefined ? undefined : path.join(base, 'git', 'ignore');
}

/**
 * Turns `extensions.worktreeConfig` on as git-worktree(1) says to: `core.bare = true` and `core.worktree` of the shared config
 * move first into the main worktree's `config.worktree`, or every linked worktree of a bare repository would read
 * `core.bare = true` and stop being a work tree.
 */
async function enableWorktreeConfig(git: Git, cwd: string): Promise<void> {
  const common = (await git.run(cwd, ['rev-parse', '--path-format=absolute', '--git-common-dir'])).stdout.trim();
  const shared = path.join(common, 'config');
  const main = path.join(common, 'config.worktree');
  for (const key of ['core.bare', 'core.worktree']) {
    const value = await git.run(cwd, ['config', '--file', shared, '--get', key], { okExitCodes: [1] });
    // core.bare false means what its absence means: it stays where it is.
    if (value.exitCode !== 0 || (key === 'core.bare' && value.stdout.trim() !== 'true')) continue;
    await git.run(cwd, ['config', '--file', main, key, value.stdout.replace(/\n$/, '')]);
    await git.run(cwd, ['config', '--file', shared, '--unset', key]);
  }
  await git.run(cwd, ['config', 'extensions.worktreeConfig', 'true']);
}

/**
 * Makes `paths` ignored in the worktree `cwd` only: `<worktree git dir>/info/sw4rm-exclude` holds the user's own
 * excludes file first (core.excludesFile is replaced, not added to), then our paths; the worktree's config points
 * core.excludesFile at it (`extensions.worktreeConfig` on, `git config --worktree`). The main checkout's status does
 * not change.
 */
export async function excludeFromGit(
  git: Git,
  cwd: string,
  paths: readonly string[],
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<string> {
  const gitDir = (await git.run(cwd, ['rev-parse', '--path-format=absolute', '--git-dir'])).stdout.trim();
  const excludeFile = path.join(gitDir, 'info', EXCLUDE_FILE_NAME);
  const lines = [
    '# Written by SW4RM when it launched an agent in this worktree: core.excludesFile of this worktree only.',
  ];
  const user = await userExcludesFile(git, cwd, env);
  if (user !== undefined && path.resolve(user) !== path.resolve(excludeFile)) {
    try {
      const text = fs.readFileSync(user, 'utf8');
      lines.push(`# Your own excludes file (${user}), which this one replaces here:`, text.replace(/\n+$/, ''));
    } catch {
      // No such file: nothing of the user's to keep.
    }
  }
  lines.push('# What the launch wrote:', ...paths.map(excludePattern), '');
  fs.mkdirSync(path.dirname(excludeFile), { recursive: true });
  fs.writeFileSync(excludeFile, lines.join('\n'));
  const enabled = await git.run(cwd, ['config', '--bool', '--get', 'extensions.worktreeConfig'], { okExitCodes: [1] });
  if (enabled.stdout.trim() !== 'true') await enableWorktreeConfig(git, cwd);
  await git.run(cwd, ['config', '--worktree', 'core.excludesFile', excludeFile]);
  return excludeFile;
}

/** `30 minutes`, `1 hour`, `45 seconds`: how long a message waits, for the instructions file. */
function waitText(ms: number): string {
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  if (ms % 3_600_000 === 0) return unit(ms / 3_600_000, 'hour');
  if (ms % 60_000 === 0) return unit(ms / 60_000, 'minute');
  return unit(Math.round(ms / 1000), 'second');
}
