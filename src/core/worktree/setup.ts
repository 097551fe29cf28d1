import { spawn } from 'node:child_process';
import { constants as C, promises as fsp, type Dirent } from 'node:fs';
import * as path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import picomatch from 'picomatch';
import type { Clock } from '../clock';
import { Confinement, ConfinementError } from './confinement';
import { cleanEnvironment } from './git';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/**
 * Worktree setup (issue 15, part 9): what runs once after a worktree is made, so an agent does not start in a tree
 * without its dependencies or its `.env`. The configuration comes from settings or from `.sw4rm/worktree.json` in
 * the main checkout (README, "Worktrees": the format):
 *
 *   { "copy": [".env*", "config/local/**"],
 *     "setup": { "command": "npm", "args": ["ci"], "timeoutSeconds": 600 } }
 *
 * Files matching `copy` are read from the main checkout and written into the worktree through Confinement (never a
 * symbolic link; a link in the main checkout is skipped and reported, never followed). The command runs in the
 * worktree as an argument vector without a shell unless `"shell": true`; its output is streamed to a callback; a
 * failure or a timeout is returned as data (the worktree and its binding stay usable), never thrown.
 */

export const SETUP_CONFIG_FILE = '.sw4rm/worktree.json';
export const DEFAULT_SETUP_TIMEOUT_SECONDS = 600;
export const MAX_SETUP_TIMEOUT_SECONDS = 3600;
/** A timed-out command gets SIGTERM, then SIGKILL this much later. */
export const SETUP_KILL_GRACE_MS = 5000;
/**
 * After the command exits, how long its output may still arrive: a process it left running in the background (`cmd &`,
 * `setsid …`) may hold its output open for ever, and the setup ends without waiting for that process.
 */
export const SETUP_OUTPUT_DRAIN_MS = 1000;
/** The command's output kept in the result (the callback sees all of it). */
export const SETUP_OUTPUT_KEPT_BYTES = 64 * 1024;
const MAX_CONFIG_BYTES = 64 * 1024;
const MAX_GLOBS = 100;

export interface SetupCommand {
  readonly command: string;
  readonly args: readonly string[];
  readonly timeoutSeconds: number;
  /** `command` is one shell command line (args must be empty); only when the configuration says so. */
  readonly shell: boolean;
}

export interface WorktreeSetupConfig {
  /** Globs (picomatch, dot files included) of files relative to the repository root, copied into a new worktree. */
  readonly copy: readonly string[];
  readonly setup: SetupCommand | undefined;
}

export class SetupConfigError extends SwarmError {
  constructor(message: string) {
    super(`worktree setup configuration: ${message}`);
    this.name = 'SetupConfigError';
  }

  override get errorKind(): ErrorKind {
    return 'invalid';
  }

  override get errorCode(): Sw4rmCode {
    return 'VALIDATION_ERROR';
  }
}

/** A copy glob is relative and stays inside the repository: no absolute path, no `..`, no backslash, no control character. */
export function checkCopyGlob(glob: unknown): string {
  if (typeof glob !== 'string' || glob === '') throw new SetupConfigError('a copy glob must be a non-empty string');
  const shown = JSON.stringify(glob.slice(0, 80));
  if (glob.length > 1024) throw new SetupConfigError(`the copy glob ${shown}… is too long`);
  if (/[\u0000-\u001f\u007f]/.test(glob)) throw new SetupConfigError(`the copy glob ${shown} has a control character`);
  if (glob.includes('\\')) throw new SetupConfigError(`the copy glob ${shown} has a backslash; use "/"`);
  if (glob.startsWith('/') || glob.startsWith('~') || /^[A-Za-z]:/.test(glob))
    throw new SetupConfigError(`the copy glob ${shown} is not relative to the repository`);
  if (glob.includes('..'))
    throw new SetupConfigError(`the copy glob ${shown} contains ".." and could leave the repository`);
  return glob;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function refuseUnknownKeys(value: Record<string, unknown>, known: readonly string[], where: string): void {
  const unknown = Object.keys(value).filter((k) => !known.includes(k));
  if (unknown.length > 0)
    throw new SetupConfigError(
      `unknown key${unknown.length === 1 ? '' : 's'} ${unknown.map((k) => JSON.stringify(k)).join(', ')} in ${where}`,
    );
}

/** Reads the configuration's JSON value (the file's, or the settings'), refusing anything it does not know. */
export function parseSetupConfig(value: unknown): WorktreeSetupConfig {
  if (!isRecord(value)) throw new SetupConfigError('it must be a JSON object');
  refuseUnknownKeys(value, ['copy', 'setup'], 'the configuration');
  const copyValue = value.copy ?? [];
  if (!Array.isArray(copyValue)) throw new SetupConfigError('"copy" must be a list of globs');
  if (copyValue.length > MAX_GLOBS) throw new SetupConfigError(`"copy" has more than ${MAX_GLOBS} globs`);
  const copy = copyValue.map(checkCopyGlob);
  let setup: SetupCommand | undefined;
  if (value.setup !== undefined && value.setup !== null) {
    const s = value.setup;
    if (!isRecord(s)) throw new SetupConfigError('"setup" must be an object');
    refuseUnknownKeys(s, ['command', 'args', 'timeoutSeconds', 'shell'], '"setup"');
    if (typeof s.command !== 'string' || s.command.trim() === '' || s.command.includes('\0'))
      throw new SetupConfigError('"setup.command" must be a non-empty string');
    const args = s.args ?? [];
    if (!Array.isArray(args) || !args.every((a) => typeof a === 'string' && !a.includes('\0')))
      throw new SetupConfigError('"setup.args" must be a list of strings');
    const shell = s.shell ?? false;
    if (typeof shell !== 'boolean') throw new SetupConfigError('"setup.shell" must be true or false');
    if (shell && args.length > 0)
      throw new SetupConfigError(
        'with "shell": true, "setup.command" is the whole command line and "setup.args" must be empty',
      );
    const timeoutSeconds = s.timeoutSeconds ?? DEFAULT_SETUP_TIMEOUT_SECONDS;
    if (
      typeof timeoutSeconds !== 'number' ||
      !Number.isFinite(timeoutSeconds) ||
      timeoutSeconds <= 0 ||
      timeoutSeconds > MAX_SETUP_TIMEOUT_SECONDS
    ) {
      throw new SetupConfigError(
        `"setup.timeoutSeconds" must be a number of seconds above 0 and at most ${MAX_SETUP_TIMEOUT_SECONDS}`,
      );
    }
    setup = { command: s.command, args: args as string[], timeoutSeconds, shell };
  }
  return { copy, setup };
}

/**
 * The configuration the editor's settings (sw4rm.worktrees.setupCopy / setupCommand / setupTimeoutSeconds) or the CLI's
 * flags (--setup-copy, --setup-command, --setup-timeout) give: undefined when they name neither a glob nor a command (each
 * repository's `.sw4rm/worktree.json` applies), else a configuration that replaces the file. A command given there is
 * one command line, run by the shell (the user wrote it, not the repository). Throws SetupConfigError for a bad value.
 */
export function settingsSetupConfig(
  copy: readonly string[],
  command: string,
  timeoutSeconds: number = DEFAULT_SETUP_TIMEOUT_SECONDS,
): WorktreeSetupConfig | undefined {
  if (copy.length === 0 && command.trim() === '') return undefined;
  return parseSetupConfig({
    copy: [...copy],
    setup: command.trim() === '' ? undefined : { command: command.trim(), shell: true, timeoutSeconds },
  });
}

export type SetupConfigSource = 'settings' | 'file' | 'none';

/**
 * The configuration for a repository: the settings when given (they replace the file), else `.sw4rm/worktree.json`
 * of the main checkout (a regular file, not a link), else none.
 */
export async function readSetupConfig(
  repoPath: string,
  settings?: unknown,
): Promise<{ config: WorktreeSetupConfig; source: SetupConfigSource }> {
  if (settings !== undefined) return { config: parseSetupConfig(settings), source: 'settings' };
  const file = path.join(repoPath, ...SETUP_CONFIG_FILE.split('/'));
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(file, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { config: { copy: [], setup: undefined }, source: 'none' };
    if (code === 'ELOOP')
      throw new SetupConfigError(`${SETUP_CONFIG_FILE} is a symbolic link; it must be a regular file`);
    throw new SetupConfigError(`${SETUP_CONFIG_FILE} cannot be read (${code ?? (err as Error).message})`);
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new SetupConfigError(`${SETUP_CONFIG_FILE} is not a regular file`);
    if (stats.size > MAX_CONFIG_BYTES)
      throw new SetupConfigError(`${SETUP_CONFIG_FILE} is larger than ${MAX_CONFIG_BYTES} bytes`);
    const text = (await handle.readFile()).toString('utf8');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new SetupConfigError(`${SETUP_CONFIG_FILE} is not valid JSON (${(err as Error).message})`);
    }
    return { config: parseSetupConfig(json), source: 'file' };
  } finally {
    await handle.close();
  }
}

export type CopySkipReason = 'symlink' | 'not_regular_file' | 'exists' | 'refused' | 'changed';

export interface SetupCommandResult {
  /** The argument vector run (with `shell`, the command line). */
  readonly argv: readonly string[];
  readonly shell: boolean;
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly timedOut: boolean;
  readonly durationMs: number;
  /** The last 64 KiB of stdout and stderr, interleaved as they came. */
  readonly output: string;
  /** Why it could not start (e.g. ENOENT: no such program). */
  readonly startError: string | undefined;
}

export interface SetupResult {
  readonly source: SetupConfigSource;
  /** Files copied, relative to the repository (and the worktree). */
  readonly copied: readonly string[];
  readonly skipped: readonly { readonly path: string; readonly reason: CopySkipReason; readonly detail?: string }[];
  readonly command: SetupCommandResult | undefined;
  /** Why the command from the repository's file did not run (it runs only when the caller trusts the repository). */
  readonly commandSkipped: string | undefined;
  readonly ok: boolean;
  /** What went wrong (configuration, copy or command), for the Output channel and the binding's record. */
  readonly failure: string | undefined;
}

export interface SetupOptions {
  readonly clock: Clock;
  /** The configuration from settings (replaces the repository's file); undefined: read the file. */
  readonly settings?: unknown;
  /** Whether a command from the repository's own file may run (the editor passes its workspace trust). */
  readonly trustRepositoryCommand?: boolean;
  /** Every chunk of the command's output, as it comes (the editor writes it to the Output channel). */
  readonly onOutput?: (text: string, stream: 'stdout' | 'stderr') => void;
  /** Added to the command's environment (which has no GIT_* variable of the coordinator's own). */
  readonly env?: Readonly<Record<string, string>>;
  /** The most directory entries a copy may look at before it gives up (default 200,000). */
  readonly maxEntries?: number;
}

/**
 * Runs the setup of the worktree at `worktreePath`, made from the repository whose main checkout is `repoPath`.
 * Never throws for a failure of the setup itself: the result says what was done and what failed.
 */
export async function runWorktreeSetup(
  repoPath: string,
  worktreePath: string,
  options: SetupOptions,
): Promise<SetupResult> {
  let source: SetupConfigSource = 'none';
  let config: WorktreeSetupConfig;
  try {
    ({ config, source } = await readSetupConfig(repoPath, options.settings));
  } catch (err) {
    return {
      source,
      copied: [],
      skipped: [],
      command: undefined,
      commandSkipped: undefined,
      ok: false,
      failure: (err as Error).message,
    };
  }
  const copied: string[] = [];
  const skipped: { path: string; reason: CopySkipReason; detail?: string }[] = [];
  let failure: string | undefined;
  try {
    await copyFiles(repoPath, worktreePath, config.copy, options.maxEntries ?? 200_000, copied, skipped);
  } catch (err) {
    failure = `copying files failed: ${(err as Error).message}`;
  }
  let command: SetupCommandResult | undefined;
  let commandSkipped: string | undefined;
  if (config.setup && failure === undefined) {
    if (source === 'file' && !options.trustRepositoryCommand) {
      commandSkipped = `the setup command of ${SETUP_CONFIG_FILE} runs only in a trusted workspace`;
    } else {
      command = await runSetupCommand(worktreePath, config.setup, options);
      failure =
        command.startError !== undefined
          ? `the setup command could not start: ${command.startError}`
          : command.timedOut
            ? `the setup command timed out after ${config.setup.timeoutSeconds} s`
            : command.exitCode !== 0
              ? `the setup command ${command.signal ? `was killed by ${command.signal}` : `exited with code ${command.exitCode}`}`
              : undefined;
    }
  }
  return { source, copied, skipped, command, commandSkipped, ok: failure === undefined, failure };
}

/** The fixed folder a glob starts in (`config/local` for `config/local/**`), '' for the root. */
function globBase(glob: string): string {
  const base = picomatch.scan(glob).base;
  return base === '.' ? '' : base.replace(/\/+$/, '');
}

type EntryKind = Pick<Dirent, 'isDirectory' | 'isFile' | 'isSymbolicLink'>;

async function copyFiles(
  repoPath: string,
  worktreePath: string,
  globs: readonly string[],
  maxEntries: number,
  copied: string[],
  skipped: { path: string; reason: CopySkipReason; detail?: string }[],
): Promise<void> {
  if (globs.length === 0) return;
  const root = await fsp.realpath(repoPath);
  const matches = picomatch([...globs], { dot: true });
  const confinement = await Confinement.forWorktree(worktreePath);
  const seen = new Set<string>();
  const linkDetail = 'a symbolic link in the main checkout is neither followed nor recreated';
  let entries = 0;
  const visit = async (rel: string, dirent: EntryKind | undefined, searchModules: boolean): Promise<void> => {
    const full = rel === '' ? root : path.join(root, ...rel.split('/'));
    if (dirent === undefined || dirent.isDirectory()) {
      let list: Dirent[];
      try {
        list = await fsp.readdir(full, { withFileTypes: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR')
          return;
        throw err;
      }
      entries += list.length;
      if (entries > maxEntries) throw new Error(`more than ${maxEntries} entries to search; narrow the copy globs`);
      for (const child of list.sort((a, b) => (a.name < b.name ? -1 : 1))) {
        if (child.name === '.git' || (child.name === 'node_modules' && !searchModules)) continue;
        await visit(rel === '' ? child.name : `${rel}/${child.name}`, child, searchModules);
      }
      return;
    }
    if (!matches(rel) || seen.has(rel)) return;
    seen.add(rel);
    if (dirent.isSymbolicLink()) return void skipped.push({ path: rel, reason: 'symlink', detail: linkDetail });
    if (!dirent.isFile()) return void skipped.push({ path: rel, reason: 'not_regular_file' });
    await copyOne(root, rel, confinement, copied, skipped);
  };
  for (const glob of globs) {
    const base = globBase(glob);
    // The glob's fixed folders are looked at directly: each must be a real folder (a link is reported, not followed).
    const parts = base === '' ? [] : base.split('/');
    let blocked = false;
    for (let n = 0; n < parts.length && !blocked; n++) {
      const rel = parts.slice(0, n + 1).join('/');
      const stats = await fsp.lstat(path.join(root, ...parts.slice(0, n + 1))).catch(() => undefined);
      if (stats?.isDirectory()) continue;
      blocked = true;
      if (stats?.isSymbolicLink() && !seen.has(rel)) {
        seen.add(rel);
        skipped.push({ path: rel, reason: 'symlink', detail: linkDetail });
      } else if (stats && n === parts.length - 1) {
        await visit(rel, stats, false); // the glob names one file
      }
    }
    if (!blocked) await visit(base, undefined, parts.includes('node_modules'));
  }
}

async function copyOne(
  root: string,
  rel: string,
  confinement: Confinement,
  copied: string[],
  skipped: { path: string; reason: CopySkipReason; detail?: string }[],
): Promise<void> {
  const full = path.join(root, ...rel.split('/'));
  try {
    await confinement.stat(rel);
    skipped.push({ path: rel, reason: 'exists', detail: 'the worktree already has it; it is never overwritten' });
    return;
  } catch (err) {
    if (!(err instanceof ConfinementError) || err.code !== 'not_found') {
      skipped.push({ path: rel, reason: 'refused', detail: (err as Error).message });
      return;
    }
  }
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(full, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    skipped.push({ path: rel, reason: code === 'ELOOP' ? 'symlink' : 'changed', detail: code });
    return;
  }
  let data: Buffer;
  let mode: number;
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) return void skipped.push({ path: rel, reason: 'not_regular_file' });
    // The folder it was found in must still be where it was (not swapped for a link since the walk).
    if ((await fsp.realpath(path.dirname(full))) !== path.dirname(full))
      return void skipped.push({ path: rel, reason: 'changed', detail: 'a folder on its path changed' });
    data = await handle.readFile();
    mode = stats.mode & 0o777;
  } finally {
    await handle.close();
  }
  try {
    await confinement.writeFile(rel, data, { createParents: true, mode });
    copied.push(rel);
  } catch (err) {
    skipped.push({ path: rel, reason: 'refused', detail: (err as Error).message });
  }
}

/** Runs the command in `cwd` (its own process group), streams its output, kills it at the timeout (Clock). */
export function runSetupCommand(cwd: string, setup: SetupCommand, options: SetupOptions): Promise<SetupCommandResult> {
  const started = options.clock.now();
  const argv = setup.shell ? [setup.command] : [setup.command, ...setup.args];
  let output = '';
  const keep = (text: string) => {
    output += text;
    if (output.length > SETUP_OUTPUT_KEPT_BYTES) output = output.slice(output.length - SETUP_OUTPUT_KEPT_BYTES);
  };
  return new Promise((resolve) => {
    let timedOut = false;
    let settled = false;
    const finish = (exitCode: number | null, signal: string | null, startError?: string) => {
      if (settled) return;
      settled = true;
      timer.dispose();
      killTimer?.dispose();
      drainTimer?.dispose();
      resolve({
        argv,
        shell: setup.shell,
        exitCode,
        signal,
        timedOut,
        durationMs: options.clock.now() - started,
        output,
        startError,
      });
    };
    const child = spawn(setup.command, setup.shell ? [] : [...setup.args], {
      cwd,
      shell: setup.shell,
      detached: process.platform !== 'win32',
      windowsHide: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...cleanEnvironment(), ...options.env },
    });
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined && process.platform !== 'win32') process.kill(-child.pid, signal);
        else child.kill(signal);
      } catch {
        /* already gone */
      }
    };
    let killTimer: { dispose(): void } | undefined;
    const timer = options.clock.setTimer(setup.timeoutSeconds * 1000, () => {
      timedOut = true;
      killGroup('SIGTERM');
      killTimer = options.clock.setTimer(SETUP_KILL_GRACE_MS, () => killGroup('SIGKILL'));
    });
    for (const [stream, name] of [
      [child.stdout, 'stdout'],
      [child.stderr, 'stderr'],
    ] as const) {
      const decoder = new StringDecoder('utf8');
      stream?.on('data', (chunk: Buffer) => {
        const text = decoder.write(chunk);
        if (text === '') return;
        keep(text);
        options.onOutput?.(text, name);
      });
    }
    let drainTimer: { dispose(): void } | undefined;
    child.on('error', (err: NodeJS.ErrnoException) => finish(null, null, err.code ?? err.message));
    child.on('close', (code, signal) => finish(code, signal));
    // The command itself has ended: its output still arriving is read for a moment, then the setup ends (whatever it
    // left running keeps its pipes, which are closed on our side).
    child.on('exit', (code, signal) => {
      drainTimer = options.clock.setTimer(SETUP_OUTPUT_DRAIN_MS, () => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish(code, signal);
      });
    });
  });
}
