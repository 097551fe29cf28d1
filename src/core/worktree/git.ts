import { spawn } from 'node:child_process';

/**
 * The environment variables the worktree area may hand to git. Everything else named GIT_* is removed from the
 * coordinator's own environment before git runs, so a GIT_DIR or GIT_INDEX_FILE of the editor's process never
 * leaks into an operation.
 */
export interface GitEnvironment {
  /** A temporary index (snapshots are written through one, never through the worktree's own index). */
  readonly GIT_INDEX_FILE?: string;
  readonly GIT_AUTHOR_NAME?: string;
  readonly GIT_AUTHOR_EMAIL?: string;
  readonly GIT_AUTHOR_DATE?: string;
  readonly GIT_COMMITTER_NAME?: string;
  readonly GIT_COMMITTER_EMAIL?: string;
  readonly GIT_COMMITTER_DATE?: string;
  /** Reads that must not take the index lock (the editor's own reads). */
  readonly GIT_OPTIONAL_LOCKS?: string;
  /**
   * The git directory and the work tree, named by the coordinator (the workspace tools run git with an empty private
   * folder as its work tree, so that git never opens a file of an agent's worktree itself).
   */
  readonly GIT_DIR?: string;
  readonly GIT_WORK_TREE?: string;
}

const ALLOWED_ENVIRONMENT: readonly (keyof GitEnvironment)[] = [
  'GIT_INDEX_FILE',
  'GIT_AUTHOR_NAME',
  'GIT_AUTHOR_EMAIL',
  'GIT_AUTHOR_DATE',
  'GIT_COMMITTER_NAME',
  'GIT_COMMITTER_EMAIL',
  'GIT_COMMITTER_DATE',
  'GIT_OPTIONAL_LOCKS',
  'GIT_DIR',
  'GIT_WORK_TREE',
];

export interface GitRunOptions {
  readonly env?: GitEnvironment;
  /** Exit codes that are answers, not failures (e.g. 1 from `merge-base --is-ancestor`). 0 always is. */
  readonly okExitCodes?: readonly number[];
  /** What git reads on its standard input (e.g. `update-index --index-info`); nothing (closed) when absent. */
  readonly input?: string | Uint8Array;
  /**
   * Keep at most this many bytes of stdout (the rest is read and dropped; `stdoutTruncated` says so), so that an
   * agent-sized output (a diff of a 64 MiB file) is never gathered and decoded in one turn of the event loop.
   */
  readonly maxStdoutBytes?: number;
}

export interface GitResult {
  readonly stdout: string;
  /** True when stdout was longer than GitRunOptions.maxStdoutBytes and was cut there (maybe inside a character). */
  readonly stdoutTruncated?: boolean;
  /** What git wrote to stderr (some commands, e.g. `worktree prune --verbose`, report there). */
  readonly stderr: string;
  readonly exitCode: number;
}

/** git refused or failed: the command, its exit code and what it wrote to stderr. */
export class GitCommandError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly exitCode: number,
    readonly stderr: string,
  ) {
    super(`git ${args[0] ?? ''} failed (exit ${exitCode}): ${stderr.trim() || 'no message'}`);
  }
}

/**
 * The one way the worktree area runs git: an argument vector in a folder, never a shell, in a clean environment.
 * Everything the area does (worktrees, snapshots, repositories) is written against this interface, so a test may
 * wrap it (e.g. to stop between two steps) while production code runs the real git through simple-git.
 */
export interface Git {
  run(cwd: string, args: readonly string[], options?: GitRunOptions): Promise<GitResult>;
}

/** Programs git would start on its own (an editor, a pager, a password prompt): a coordinator operation needs none. */
const PROGRAM_VARIABLES = new Set(['EDITOR', 'VISUAL', 'PAGER', 'SSH_ASKPASS', 'PREFIX']);

/**
 * The process environment without any GIT_* variable (the editor's or a hook's git state must not leak in) and
 * without the variables naming programs git would start (simple-git's guard refuses those too).
 */
export function cleanEnvironment(base: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) {
    const upper = key.toUpperCase();
    if (value === undefined || upper.startsWith('GIT_') || PROGRAM_VARIABLES.has(upper)) continue;
    env[key] = value;
  }
  // Never prompt (a credential helper or an editor would hang a coordinator operation).
  env.GIT_TERMINAL_PROMPT = '0';
  return env;
}

/**
 * Settings every git the coordinator runs is given on its command line (they win over every configuration file,
 * include.path and includeIf content included): none of the programs a repository's configuration may name
 * (git-config(1): hooks, fsmonitor, pager, editors, ssh, askpass, credential helpers, gpg/ssh/x509 signing
 * programs, external diff, automatic gc/maintenance, any transport) is ever started. An agent's sandboxed command
 * could write the shared .git/config; the coordinator then still runs only git itself.
 */
export const HARDENING_CONFIG: readonly string[] = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.pager=cat',
  'core.editor=false',
  'sequence.editor=false',
  'core.sshCommand=false',
  'credential.helper=',
  'gpg.program=false',
  'gpg.openpgp.program=false',
  'gpg.ssh.program=false',
  'gpg.x509.program=false',
  'gpg.ssh.defaultKeyCommand=false',
  'commit.gpgSign=false',
  'tag.gpgSign=false',
  'log.showSignature=false',
  'merge.verifySignatures=false',
  'gc.auto=0',
  'maintenance.auto=false',
  'protocol.allow=never',
  'diff.external=',
  'core.askPass=false',
  'core.gitProxy=false',
  'submodule.recurse=false',
  'core.alternateRefsCommand=false',
];

/** The environment every git run is given (after cleanEnvironment, which removes every other GIT_*). */
export const HARDENING_ENVIRONMENT: Readonly<Record<string, string>> = {
  GIT_ALLOW_PROTOCOL: '',
  GIT_NO_LAZY_FETCH: '1',
  GIT_TERMINAL_PROMPT: '0',
  GIT_CONFIG_NOSYSTEM: '1',
};

/** Subcommands that may produce a diff: given --no-ext-diff --no-textconv right after their name. */
const DIFF_COMMANDS = new Set(['diff', 'show', 'log', 'diff-tree', 'diff-index', 'diff-files']);

/** A driver variable (filter.<x>.clean, merge.<x>.driver, diff.<x>.command…) and the value that disables it. */
const DRIVER_OVERRIDES: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  filter: { clean: '', smudge: '', process: '', required: 'false' },
  merge: { driver: 'false' },
  diff: { command: 'false', textconv: 'false', cachetextconv: 'false' },
};

const DRIVER_KEY = /^(filter|merge|diff)\.(.+)\.([a-z]+)$/s;

/**
 * The `-c` overrides for every filter, merge and diff driver the repository's own configuration (local or worktree
 * scope, include.path/includeIf content included) defines. A subsection name git's `-c` cannot carry is refused.
 */
export function driverOverrides(configListing: string): string[] {
  const out = new Set<string>();
  const fields = configListing.split('\0');
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const scope = fields[i];
    const entry = fields[i + 1];
    const key = entry.split('\n', 1)[0];
    if (scope === 'global' || scope === 'system' || scope === 'command') continue;
    const match = DRIVER_KEY.exec(key);
    if (!match) continue;
    const [, section, name] = match;
    if (/[=\n\0]/.test(name)) {
      throw new GitCommandError(
        ['config'],
        -1,
        `the repository defines a ${section} driver whose name git's -c cannot override; refused`,
      );
    }
    for (const [variable, value] of Object.entries(DRIVER_OVERRIDES[section]))
      out.add(`${section}.${name}.${variable}=${value}`);
  }
  return [...out];
}

/** Leading `-c k=v` pairs a caller gave, then the subcommand; --no-ext-diff --no-textconv after a diff-producing one. */
function hardenedArgs(args: readonly string[], drivers: readonly string[]): string[] {
  let i = 0;
  while (args[i] === '-c' && i + 1 < args.length) i += 2;
  const sub = args[i];
  const rest = DIFF_COMMANDS.has(sub ?? '')
    ? [sub, '--no-ext-diff', '--no-textconv', ...args.slice(i + 1)]
    : args.slice(i);
  const config = [...args.slice(0, i).filter((_, k) => k % 2 === 1), ...HARDENING_CONFIG, ...drivers];
  return [...config.flatMap((c) => ['-c', c]), ...rest];
}

interface Spawned {
  readonly stdout: string;
  readonly stdoutTruncated: boolean;
  readonly stderr: string;
  readonly exitCode: number;
}

function spawnGit(
  binary: string,
  cwd: string,
  args: readonly string[],
  env: Record<string, string>,
  input?: string | Uint8Array,
  maxStdoutBytes = Infinity,
): Promise<Spawned> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, [...args], {
      cwd,
      env,
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      shell: false,
      windowsHide: true,
    });
    if (input !== undefined) {
      child.stdin!.on('error', () => undefined); // git may exit before reading everything: its exit code says why
      child.stdin!.end(input);
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let kept = 0;
    let truncated = false;
    child.stdout!.on('data', (b: Buffer) => {
      if (kept >= maxStdoutBytes) {
        truncated = true;
        return;
      }
      const part = kept + b.length > maxStdoutBytes ? b.subarray(0, maxStdoutBytes - kept) : b;
      if (part.length < b.length) truncated = true;
      out.push(part);
      kept += part.length;
    });
    child.stderr!.on('data', (b: Buffer) => err.push(b));
    child.once('error', reject);
    child.once('close', (code, signal) =>
      resolve({
        stdout: Buffer.concat(out).toString('utf8'),
        stdoutTruncated: truncated,
        stderr: Buffer.concat(err).toString('utf8'),
        exitCode: code ?? (signal ? 128 : -1),
      }),
    );
  });
}

/**
 * The product's git and the only place the product starts a git process: argv only (never a shell), a clean
 * environment plus HARDENING_ENVIRONMENT, HARDENING_CONFIG and the overrides of the repository's own drivers
 * (read first with `git config --includes --show-scope --get-regexp`) on every command line.
 */
export function createGit(binary = 'git'): Git {
  return {
    async run(cwd, args, options = {}) {
      const env: Record<string, string> = { ...cleanEnvironment(), ...HARDENING_ENVIRONMENT };
      for (const key of ALLOWED_ENVIRONMENT) {
        const value = options.env?.[key];
        if (value !== undefined) env[key] = value;
      }
      let result: Spawned;
      try {
        const listing = await spawnGit(
          binary,
          cwd,
          hardenedArgs(['config', '--includes', '--show-scope', '-z', '--get-regexp', '^(filter|merge|diff)\\.'], []),
          env,
        );
        // 1: no such variable; anything else (not a repository…) is left to the command itself to report.
        const drivers = listing.exitCode === 0 ? driverOverrides(listing.stdout) : [];
        result = await spawnGit(binary, cwd, hardenedArgs(args, drivers), env, options.input, options.maxStdoutBytes);
      } catch (err) {
        if (err instanceof GitCommandError) throw err;
        throw new GitCommandError(args, -1, (err as Error).message);
      }
      const { stdout, stdoutTruncated, stderr, exitCode } = result;
      if (exitCode !== 0 && !(options.okExitCodes ?? []).includes(exitCode))
        throw new GitCommandError(args, exitCode, stderr);
      return { stdout, stdoutTruncated, stderr, exitCode };
    },
  };
}
