import { simpleGit } from 'simple-git';

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
}

const ALLOWED_ENVIRONMENT: readonly (keyof GitEnvironment)[] = [
  'GIT_INDEX_FILE', 'GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_AUTHOR_DATE', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL', 'GIT_COMMITTER_DATE',
];

export interface GitRunOptions {
  readonly env?: GitEnvironment;
  /** Exit codes that are answers, not failures (e.g. 1 from `merge-base --is-ancestor`). 0 always is. */
  readonly okExitCodes?: readonly number[];
}

export interface GitResult {
  readonly stdout: string;
  /** What git wrote to stderr (some commands, e.g. `worktree prune --verbose`, report there). */
  readonly stderr: string;
  readonly exitCode: number;
}

/** git refused or failed: the command, its exit code and what it wrote to stderr. */
export class GitCommandError extends Error {
  constructor(readonly args: readonly string[], readonly exitCode: number, readonly stderr: string) {
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

/** The product's git: simple-git (its environment guard on), one process per call, argv only. */
export function createGit(binary = 'git'): Git {
  return {
    async run(cwd, args, options = {}) {
      let exitCode = 0;
      let stderr = '';
      const git = simpleGit({
        baseDir: cwd,
        binary,
        trimmed: false,
        allowEnvironment: [...ALLOWED_ENVIRONMENT, 'GIT_TERMINAL_PROMPT'],
        errors: (_error, result) => {
          exitCode = result.exitCode;
          stderr = Buffer.concat(result.stdErr).toString('utf8');
          return undefined;
        },
      });
      git.env({ ...cleanEnvironment(), ...options.env });
      let stdout: string;
      try {
        stdout = await git.raw([...args]);
      } catch (err) {
        throw new GitCommandError(args, exitCode || -1, (err as Error).message);
      }
      if (exitCode !== 0 && !(options.okExitCodes ?? []).includes(exitCode)) throw new GitCommandError(args, exitCode, stderr);
      return { stdout, stderr, exitCode };
    },
  };
}
