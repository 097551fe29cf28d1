import { spawn, type ChildProcess } from 'node:child_process';
import { constants as FS, promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import type { Clock } from '../clock';
import type { Disposable } from '../events';
import { Confinement, ConfinementError } from '../worktree/confinement';
import { UntrustedGitDirError, worktreeGitDirs, type WorktreeGitDirs } from '../worktree/gitDirs';
import { ToolCallError, type JsonSchema, type ToolDescriptor, type ToolProvider, type ToolRequest } from './model';
import {
  clockTicksPerSecond,
  killPids,
  killProcessGroup,
  membersCpuMs,
  listPids,
  procAvailable,
  ProcessGroupReader,
} from './processTree';
import {
  AGENT_BRANCHES,
  probeSandboxTools,
  sandboxPlan,
  SECCOMP_FD,
  type Confinement as BwrapConfinement,
  type SandboxOptions,
} from './sandbox';

/**
 * The built-in provider `process` (README, "The process provider"): `run_command` (argv, never a shell) in the caller's
 * bound worktree; budget_cpu_ms and budget_wall_ms enforced on the child's process tree (CPU_BUDGET_EXCEEDED /
 * WALL_TIMEOUT), stdout/stderr streamed as frames, the tree killed on cancel; network_policy DENY_ALL in a new network
 * namespace where the platform allows it, else refused unless acceptUnenforcedNetworkPolicy. Off unless enabled.
 * Owner: the process part.
 */
export interface ProcessProviderOptions {
  readonly enabled: boolean;
  readonly acceptUnenforcedNetworkPolicy: boolean;
  /** Folders a DENY_ALL command under bubblewrap never sees (an empty tmpfs over each): the coordinator's data folder. */
  readonly hiddenFolders?: readonly string[];
}

export const DEFAULT_PROCESS_PROVIDER_OPTIONS: ProcessProviderOptions = {
  enabled: false,
  acceptUnenforcedNetworkPolicy: false,
};

export const PROCESS_PROVIDER_ID = 'process';

/** The bounds of run_command (README, "The process provider"). */
export const PROCESS_LIMITS = Object.freeze({
  maxArgs: 256,
  /** Each argv element, cwd, and each env value, in UTF-8 bytes. */
  maxArgBytes: 32 * 1024,
  maxEnvEntries: 256,
  maxEnvNameChars: 256,
  maxStdinChars: 4 * 1024 * 1024,
  /** The text of one output frame, in UTF-8 bytes. */
  maxFrameTextBytes: 64 * 1024,
  /** Without streaming: the stdout and the stderr kept in the final result, each, in bytes (then `truncated`). */
  maxResultOutputBytes: 1024 * 1024,
  /** SIGTERM, then SIGKILL this much later (the provider's Clock). */
  killGraceMs: 2_000,
  /** After the command exited, how long its output pipes may stay open (held by a process that left its group). */
  outputDrainMs: 1_000,
  /** The CPU sampler's period (real time: see CpuSampler). */
  sampleMs: 50,
  /** After a kill, how long to wait (in sampler periods) for the process group to be gone. */
  reapSamples: 100,
});

const L = PROCESS_LIMITS;

/** Environment variable names a caller may not set (the coordinator's and git's own). */
const RESERVED_ENV = /^(GIT_|SW4RM_)/i;
/** What the child keeps of the coordinator's environment. */
const KEPT_ENV = ['PATH', 'HOME', 'LANG'] as const;

const INPUT_SCHEMA: JsonSchema = {
  type: 'object',
  properties: {
    argv: {
      type: 'array',
      items: { type: 'string', maxLength: L.maxArgBytes },
      minItems: 1,
      maxItems: L.maxArgs,
      description: 'the program and its arguments; never run by a shell',
    },
    cwd: {
      type: 'string',
      maxLength: L.maxArgBytes,
      description: 'a folder relative to the worktree root ("/" separated); default the root',
    },
    env: {
      type: 'object',
      maxProperties: L.maxEnvEntries,
      propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: L.maxEnvNameChars },
      additionalProperties: { type: 'string', maxLength: L.maxArgBytes },
      description: 'added to a clean environment (PATH, HOME, LANG kept); GIT_* and SW4RM_* are refused',
    },
    stdin: { type: 'string', maxLength: L.maxStdinChars },
  },
  required: ['argv'],
  additionalProperties: false,
};

const OUTPUT_SCHEMA: JsonSchema = {
  type: 'object',
  properties: {
    exit_code: { type: ['integer', 'null'] },
    signal: { type: ['string', 'null'] },
    stdout_bytes: { type: 'integer' },
    stderr_bytes: { type: 'integer' },
    cpu_ms: { type: 'integer' },
    wall_ms: { type: 'integer' },
    network_enforced: { type: 'boolean' },
    cancelled: { type: 'boolean' },
    stdout: { type: 'string' },
    stderr: { type: 'string' },
    truncated: { type: 'boolean' },
  },
  required: ['exit_code', 'signal', 'stdout_bytes', 'stderr_bytes', 'cpu_ms', 'wall_ms', 'network_enforced'],
};

const DESCRIPTORS: readonly ToolDescriptor[] = [
  {
    name: 'run_command',
    description:
      'Runs a program (argv, never a shell) in the caller\'s worktree, in its own process group; with a stream its output arrives as frames {"stream","text"}. Enforces budget_cpu_ms and budget_wall_ms on the process tree, network_policy DENY_ALL by a network namespace.',
    inputSchema: INPUT_SCHEMA,
    outputSchema: OUTPUT_SCHEMA,
    idempotent: false,
    needsWorktree: true,
    defaultTimeoutS: 600,
    maxConcurrency: 4,
    sideEffects: 'process',
  },
];

/** The final result of a run (the output schema's fields). */
export interface RunResult {
  exit_code: number | null;
  signal: string | null;
  stdout_bytes: number;
  stderr_bytes: number;
  cpu_ms: number;
  wall_ms: number;
  network_enforced: boolean;
  cancelled?: true;
  stdout?: string;
  stderr?: string;
  truncated?: boolean;
}

function invalid(detail: string): ToolCallError {
  return new ToolCallError('invalid_argument', 'VALIDATION_ERROR', detail);
}

function fromConfinement(error: ConfinementError): ToolCallError {
  const detail = error.message.startsWith(`${error.code}: `)
    ? error.message.slice(error.code.length + 2)
    : error.message;
  switch (error.code) {
    case 'permission_denied':
      return new ToolCallError('permission_denied', 'PERMISSION_DENIED', `cwd: ${detail}`);
    case 'worktree_not_bound':
      return new ToolCallError('failed_precondition', 'worktree_not_bound', detail);
    case 'not_found':
      return new ToolCallError('not_found', 'NOT_FOUND', `cwd: ${detail}`);
    default:
      return new ToolCallError('failed_precondition', error.code, `cwd: ${detail}`);
  }
}

/** The arguments, checked again here (the engine checked the schema; a direct caller may not have). */
function readArgs(args: Record<string, unknown>): {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  stdin: string | undefined;
} {
  const argv = args.argv;
  if (!Array.isArray(argv) || argv.length < 1 || argv.length > L.maxArgs || !argv.every((a) => typeof a === 'string')) {
    throw invalid(`/argv must be a list of 1 to ${L.maxArgs} strings`);
  }
  argv.forEach((a: string, i) => {
    if (Buffer.byteLength(a, 'utf8') > L.maxArgBytes) throw invalid(`/argv/${i} is longer than ${L.maxArgBytes} bytes`);
    if (a.includes('\0')) throw invalid(`/argv/${i} contains a NUL character`);
  });
  if (argv[0] === '') throw invalid('/argv/0 (the program) is empty');
  const cwd = args.cwd ?? '';
  if (typeof cwd !== 'string') throw invalid('/cwd must be a string');
  const env: Record<string, string> = {};
  if (args.env !== undefined) {
    if (typeof args.env !== 'object' || args.env === null || Array.isArray(args.env))
      throw invalid('/env must be an object of NAME → string');
    const entries = Object.entries(args.env as Record<string, unknown>);
    if (entries.length > L.maxEnvEntries) throw invalid(`/env has more than ${L.maxEnvEntries} variables`);
    for (const [name, value] of entries) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || name.length > L.maxEnvNameChars)
        throw invalid(`/env/${name.slice(0, 100)} is not a variable name`);
      if (RESERVED_ENV.test(name))
        throw invalid(`/env/${name} is refused: GIT_* and SW4RM_* variables are the coordinator's`);
      if (typeof value !== 'string' || value.includes('\0') || Buffer.byteLength(value, 'utf8') > L.maxArgBytes) {
        throw invalid(`/env/${name} must be a string of at most ${L.maxArgBytes} bytes without NUL`);
      }
      env[name] = value;
    }
  }
  const stdin = args.stdin;
  if (stdin !== undefined && (typeof stdin !== 'string' || stdin.length > L.maxStdinChars))
    throw invalid(`/stdin must be a string of at most ${L.maxStdinChars} characters`);
  return { argv: argv as string[], cwd, env, stdin: stdin as string | undefined };
}

/** The child's environment: PATH, HOME and LANG of the coordinator's, then the caller's variables. */
export function childEnvironment(
  extra: Readonly<Record<string, string>>,
  base: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of KEPT_ENV) {
    const value = base[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...extra };
}

/**
 * Whether `program` names an executable file: a path (relative to `cwd`) when it has a `/`, else a name searched on
 * `searchPath` as execvp does. Checked before the spawn so that a missing program is NOT_FOUND whether or not a wrapper
 * (unshare, prlimit) runs it.
 */
export async function programExists(program: string, searchPath: string, cwd: string): Promise<boolean> {
  const executable = async (file: string): Promise<boolean> => {
    try {
      await fsp.access(file, FS.X_OK);
      return (await fsp.stat(file)).isFile();
    } catch {
      return false;
    }
  };
  if (program.includes('/')) return executable(path.resolve(cwd, program));
  for (const dir of searchPath.split(':')) {
    if (dir !== '' && (await executable(path.join(dir, program)))) return true;
  }
  return false;
}

/** The longest prefix of `text` of at most `maxBytes` UTF-8 bytes that does not split a character. */
function cutUtf8(text: string, maxBytes: number): [string, string] {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return [text, ''];
  let cut = maxBytes;
  // A UTF-8 continuation byte (10xxxxxx) never starts a character.
  while (cut > 0 && (bytes[cut] & 0xc0) === 0x80) cut--;
  const head = bytes.subarray(0, cut).toString('utf8');
  return [head, text.slice(head.length)];
}

type StreamName = 'stdout' | 'stderr';

/** One stream's output: counted, and either coalesced into frames or kept (bounded) for the final result. */
class OutputStream {
  bytes = 0;
  kept = '';
  keptBytes = 0;
  truncated = false;
  private pending = '';
  private readonly decoder = new StringDecoder('utf8');

  constructor(
    private readonly name: StreamName,
    private readonly emit: ((name: StreamName, text: string) => void) | undefined,
  ) {}

  write(chunk: Buffer): void {
    this.bytes += chunk.length;
    this.add(this.decoder.write(chunk));
  }

  end(): void {
    this.add(this.decoder.end());
    this.flush();
  }

  /** Emits what waits, in frames of at most maxFrameTextBytes. */
  flush(): void {
    while (this.pending !== '') {
      const [head, rest] = cutUtf8(this.pending, L.maxFrameTextBytes);
      this.pending = rest;
      this.emit?.(this.name, head);
    }
  }

  /** Whether a full frame waits (emitted at once; smaller rests wait for the turn's end). */
  private add(text: string): void {
    if (text === '') return;
    if (this.emit) {
      this.pending += text;
      while (Buffer.byteLength(this.pending, 'utf8') >= L.maxFrameTextBytes) {
        const [head, rest] = cutUtf8(this.pending, L.maxFrameTextBytes);
        this.pending = rest;
        this.emit(this.name, head);
      }
      return;
    }
    if (this.truncated) return;
    const room = L.maxResultOutputBytes - this.keptBytes;
    const [head, rest] = cutUtf8(text, room);
    this.kept += head;
    this.keptBytes += Buffer.byteLength(head, 'utf8');
    if (rest !== '') this.truncated = true;
  }
}

/**
 * Samples the CPU time of a process group from /proc and waits for the group to be gone. This sampler is the one place
 * the process provider uses real time (setInterval, every PROCESS_LIMITS.sampleMs): CPU time is consumed in real time by
 * a real process, and a ManualClock would never move while a busy child burns its budget. Every other timer (the kill
 * grace, the output drain, budget_wall_ms) is on the provider's Clock.
 */
class CpuSampler {
  /** The highest group CPU time seen (ms): members reaped by init take their time out of the sum. */
  cpuMs = 0;
  /** The live members seen last (the group and descendants that left it). */
  private members: number[] = [];
  private readonly interval: ReturnType<typeof setInterval>;
  private reading = false;
  private gone: { resolve: () => void; left: number } | undefined;
  private readonly reader: ProcessGroupReader;

  constructor(
    private readonly pgid: number,
    existing: readonly number[],
    private readonly budgetMs: number,
    private readonly onExceeded: () => void,
  ) {
    this.reader = new ProcessGroupReader(pgid, existing);
    this.interval = setInterval(() => void this.sample(), L.sampleMs);
    this.interval.unref?.();
  }

  /** Resolves when no live process is left in the group (or after reapSamples periods). */
  whenGroupGone(): Promise<void> {
    return new Promise((resolve) => {
      this.gone = { resolve, left: L.reapSamples };
      void this.sample();
    });
  }

  dispose(): void {
    clearInterval(this.interval);
  }

  private async sample(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    try {
      const stats = await this.reader.members();
      this.members = stats.filter((s) => s.state !== 'Z' && s.state !== 'X').map((s) => s.pid);
      this.cpuMs = Math.max(this.cpuMs, membersCpuMs(stats, clockTicksPerSecond()));
      if (this.budgetMs > 0 && this.cpuMs >= this.budgetMs) {
        killPids(this.members.filter((p) => p !== this.pgid));
        this.onExceeded();
      }
      if (this.gone) {
        if (this.members.length === 0 || --this.gone.left <= 0) {
          const { resolve } = this.gone;
          this.gone = undefined;
          this.dispose();
          resolve();
        } else {
          killProcessGroup(this.pgid, 'SIGKILL');
          killPids(this.members);
        }
      }
    } finally {
      this.reading = false;
    }
  }
}

/** How a run ended, before it becomes a result or an error. */
interface RunEnd {
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly spawnError?: string;
}

/**
 * What bubblewrap confines a DENY_ALL call to: the worktree's real path; for a linked worktree (.git a file naming
 * <common>/worktrees/<name>, believed only as worktreeGitDirs checks it: PERMISSION_DENIED otherwise) the common git
 * directory read-only but its objects and the agents' branches, and its own git directory read-write; for a worktree
 * whose .git is a folder, that folder read-only; HOME hidden (its sockets and secrets) unless the worktree is HOME itself
 * or an ancestor of it; `hidden` (the coordinator's data folder) hidden wherever it is, inside the worktree too.
 */
async function confinementOf(
  worktreePath: string,
  cwdArg: string,
  hidden: readonly string[] = [],
): Promise<BwrapConfinement> {
  const worktree = await fsp.realpath(worktreePath);
  const cwd = path.join(worktree, ...cwdArg.split('/').filter((p) => p !== ''));
  let dirs: WorktreeGitDirs | undefined;
  try {
    dirs = await worktreeGitDirs(worktree);
  } catch (error) {
    // A `.git` rewritten to name another folder would have that folder bound read-write (README, "Confinement").
    if (error instanceof UntrustedGitDirError)
      throw new ToolCallError('permission_denied', 'PERMISSION_DENIED', `DENY_ALL: ${error.message}`);
    throw error;
  }
  const gitCommonDir = dirs?.commonDir;
  const gitWorktreeDir = dirs?.linked === true ? dirs.gitDir : undefined;
  if (gitCommonDir !== undefined && gitWorktreeDir !== undefined) {
    // The only refs a linked worktree's sandbox may write (bwrapArgs): made here when packed refs left no folder.
    for (const sub of [AGENT_BRANCHES, `logs/${AGENT_BRANCHES}`])
      await fsp.mkdir(path.join(gitCommonDir, sub), { recursive: true }).catch(() => undefined);
  }
  const hide: string[] = [];
  const home = os.homedir();
  if (home !== '' && home !== '/' && !isInside(home, worktree)) {
    try {
      hide.push(await fsp.realpath(home));
    } catch {
      /* no HOME */
    }
  }
  for (const dir of hidden) {
    try {
      const real = await fsp.realpath(dir);
      // A data folder that holds the worktree cannot be hidden without hiding the worktree: the worktree is bound over it.
      if (real !== '/' && !hide.includes(real)) hide.push(real);
    } catch {
      /* not created yet: nothing to hide */
    }
  }
  return { worktree, cwd, gitCommonDir, gitWorktreeDir, hide };
}

function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

export class ProcessProvider implements ToolProvider {
  readonly id = PROCESS_PROVIDER_ID;

  /** The process groups of the calls that run now (their leaders' pids). */
  private readonly live = new Set<number>();
  private disposed = false;

  constructor(
    readonly options: ProcessProviderOptions,
    readonly clock: Clock,
  ) {}

  /**
   * SIGKILLs every process group a call still runs, synchronously (a stopping coordinator must not leave children
   * behind: the kill grace's timer would never fire once the process exits), and takes no more calls.
   */
  dispose(): void {
    this.disposed = true;
    for (const pgid of this.live) killProcessGroup(pgid, 'SIGKILL');
  }

  describe(): readonly ToolDescriptor[] {
    return DESCRIPTORS;
  }

  available(): boolean {
    return this.options.enabled && process.platform !== 'win32' && !this.disposed;
  }

  /** Why the provider takes no calls (the Tools view's reason), or '' when it does. */
  unavailableReason(): string {
    if (!this.options.enabled) return 'disabled: sw4rm.tools.process.enabled';
    if (process.platform === 'win32') return 'not supported on Windows (process groups and /proc are needed)';
    return '';
  }

  async call(request: ToolRequest): Promise<unknown> {
    if (!this.available())
      throw new ToolCallError(
        'unavailable',
        'AGENT_UNAVAILABLE',
        `the process provider takes no calls: ${this.unavailableReason()}`,
      );
    if (request.toolName !== 'run_command')
      throw new ToolCallError('not_found', 'unknown_tool', `provider 'process' has no tool '${request.toolName}'`);
    if (request.worktreePath === undefined)
      throw new ToolCallError(
        'failed_precondition',
        'worktree_not_bound',
        `agent '${request.callerAgentId}' is not bound to a worktree`,
      );
    const args = readArgs(request.args);
    const [tools, proc] = await Promise.all([probeSandboxTools(), procAvailable()]);
    const sandbox: SandboxOptions = {
      acceptUnenforcedNetworkPolicy: this.options.acceptUnenforcedNetworkPolicy,
      ...tools,
    };
    const env = childEnvironment(args.env);
    const confine =
      request.policy.networkPolicy === 'DENY_ALL' && sandbox.bwrap !== undefined
        ? await confinementOf(request.worktreePath, args.cwd, this.options.hiddenFolders)
        : undefined;
    const plan = sandboxPlan(args.argv, request.policy, sandbox, env, confine);
    if (request.policy.budgetCpuMs > 0 && !proc) {
      throw new ToolCallError(
        'permission_denied',
        'PERMISSION_DENIED',
        'budget_cpu_ms cannot be enforced here (no /proc): ask without it',
      );
    }
    let cwd: string;
    try {
      const confinement = await Confinement.forWorktree(request.worktreePath);
      cwd = await confinement.resolve(args.cwd);
      if ((await confinement.stat(args.cwd)).type !== 'directory')
        throw new ToolCallError('failed_precondition', 'NOT_A_DIRECTORY', 'cwd is not a folder');
    } catch (error) {
      if (error instanceof ConfinementError) throw fromConfinement(error);
      throw error;
    }
    if (!(await programExists(args.argv[0], env.PATH ?? '', cwd))) {
      throw new ToolCallError(
        'not_found',
        'NOT_FOUND',
        `the program '${args.argv[0].slice(0, 200)}' was not found (a name is looked up on the command's PATH, a path from cwd) or is not executable`,
      );
    }
    const started = this.clock.now();
    const base = (): RunResult => ({
      exit_code: null,
      signal: null,
      stdout_bytes: 0,
      stderr_bytes: 0,
      cpu_ms: 0,
      wall_ms: 0,
      network_enforced: plan.networkEnforced,
    });
    if (request.signal.aborted) return this.aborted(request, { ...base(), cancelled: true });
    const existing = proc ? await listPids() : [];
    // A cancel (or a stopping coordinator) during the awaits above: nothing is started.
    if (request.signal.aborted) return this.aborted(request, { ...base(), cancelled: true });
    if (this.disposed)
      throw new ToolCallError(
        'unavailable',
        'AGENT_UNAVAILABLE',
        'the process provider takes no calls: the coordinator is stopping',
      );
    return this.run(
      request,
      plan.argv,
      cwd,
      plan.env,
      args.stdin,
      started,
      plan.networkEnforced,
      existing,
      plan.seccomp,
    );
  }

  /** An aborted call: the engine's reason (a ToolCallError, e.g. WALL_TIMEOUT) when it gave one, else a cancelled result. */
  private aborted(request: ToolRequest, result: RunResult): RunResult {
    const reason: unknown = request.signal.reason;
    if (reason instanceof ToolCallError) throw reason;
    return result;
  }

  private run(
    request: ToolRequest,
    argv: readonly string[],
    cwd: string,
    env: Record<string, string>,
    stdin: string | undefined,
    started: number,
    networkEnforced: boolean,
    existing: readonly number[],
    seccomp?: Buffer,
  ): Promise<unknown> {
    const policy = request.policy;
    const emit = request.stream
      ? (name: StreamName, text: string) =>
          request.emit(Buffer.from(JSON.stringify({ stream: name, text }), 'utf8'), 'application/json')
      : undefined;
    const out = { stdout: new OutputStream('stdout', emit), stderr: new OutputStream('stderr', emit) };
    return new Promise<unknown>((resolve, reject) => {
      let child: ChildProcess;
      try {
        const stdio: ('ignore' | 'pipe')[] = [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'];
        // bubblewrap reads the seccomp program from fd SECCOMP_FD (a pipe written at once: 96 bytes, under PIPE_BUF).
        if (seccomp !== undefined) stdio.push('pipe');
        child = spawn(argv[0], argv.slice(1), { cwd, env, detached: true, windowsHide: true, stdio });
        if (seccomp !== undefined) {
          const fd = child.stdio[SECCOMP_FD] as NodeJS.WritableStream | null;
          fd?.on?.('error', () => {
            /* bwrap failed: its exit answers */
          });
          fd?.end(seccomp);
        }
      } catch (error) {
        reject(
          new ToolCallError(
            'failed_precondition',
            'SPAWN_FAILED',
            `${argv[0].slice(0, 200)} could not be started: ${(error as Error).message}`,
          ),
        );
        return;
      }
      const pgid = child.pid;
      if (pgid !== undefined) this.live.add(pgid);
      const timers: Disposable[] = [];
      let why: 'cpu' | 'wall' | 'abort' | undefined;
      let exited: RunEnd | undefined;
      let settled = false;
      const kill = (reason: 'cpu' | 'wall' | 'abort') => {
        if (why !== undefined || pgid === undefined) return;
        why = reason;
        if (reason === 'cpu') {
          // A budget is hard: no grace.
          killProcessGroup(pgid, 'SIGKILL');
          return;
        }
        killProcessGroup(pgid, 'SIGTERM');
        timers.push(this.clock.setTimer(L.killGraceMs, () => killProcessGroup(pgid, 'SIGKILL')));
      };
      const sampler =
        pgid === undefined ? undefined : new CpuSampler(pgid, existing, policy.budgetCpuMs, () => kill('cpu'));
      const onAbort = () => kill('abort');
      request.signal.addEventListener('abort', onAbort, { once: true });
      // An abort that landed between the caller's last check and the listener is not lost.
      if (request.signal.aborted) onAbort();
      if (policy.budgetWallMs > 0) timers.push(this.clock.setTimer(policy.budgetWallMs, () => kill('wall')));

      const finish = async (end: RunEnd) => {
        if (settled) return;
        settled = true;
        for (const t of timers) t.dispose();
        request.signal.removeEventListener('abort', onAbort);
        child.stdout?.destroy();
        child.stderr?.destroy();
        out.stdout.end();
        out.stderr.end();
        // Nothing of the tree is left behind: what still runs in the group is killed, and the answer waits until it is gone.
        if (pgid !== undefined) killProcessGroup(pgid, 'SIGKILL');
        await sampler?.whenGroupGone();
        sampler?.dispose();
        if (pgid !== undefined) this.live.delete(pgid);
        const cpuMs = sampler?.cpuMs ?? 0;
        const result: RunResult = {
          exit_code: end.exitCode,
          signal: end.signal,
          stdout_bytes: out.stdout.bytes,
          stderr_bytes: out.stderr.bytes,
          cpu_ms: cpuMs,
          wall_ms: Math.max(0, this.clock.now() - started),
          network_enforced: networkEnforced,
        };
        if (!request.stream) {
          result.stdout = out.stdout.kept;
          result.stderr = out.stderr.kept;
          result.truncated = out.stdout.truncated || out.stderr.truncated;
        }
        try {
          if (end.spawnError !== undefined) {
            throw new ToolCallError(
              'failed_precondition',
              'SPAWN_FAILED',
              `${argv[0].slice(0, 200)} could not be started: ${end.spawnError}`,
            );
          }
          if (why === 'cpu' || end.signal === 'SIGXCPU') {
            throw new ToolCallError(
              'resource_exhausted',
              'CPU_BUDGET_EXCEEDED',
              `the command used ${Math.max(cpuMs, policy.budgetCpuMs)} ms of CPU, more than budget_cpu_ms ${policy.budgetCpuMs}: its process group was killed`,
            );
          }
          if (why === 'abort') {
            resolve(this.aborted(request, { ...result, cancelled: true }));
            return;
          }
          if (why === 'wall') {
            throw new ToolCallError(
              'deadline_exceeded',
              'WALL_TIMEOUT',
              `the command ran longer than budget_wall_ms ${policy.budgetWallMs}: its process group was killed`,
            );
          }
          resolve(result);
        } catch (error) {
          reject(error);
        }
      };

      for (const name of ['stdout', 'stderr'] as const) {
        const stream = child[name];
        stream?.on('data', (chunk: Buffer) => {
          out[name].write(chunk);
          // Coalesced: what arrives within one turn of the event loop goes out as one frame.
          if (emit)
            setImmediate(() => {
              if (!settled) out[name].flush();
            });
        });
        stream?.on('error', () => {
          /* the pipe was closed on our side */
        });
      }
      if (stdin !== undefined && child.stdin) {
        child.stdin.on('error', () => {
          /* the command did not read all of it */
        });
        child.stdin.end(stdin, 'utf8');
      }
      child.on(
        'error',
        (error: NodeJS.ErrnoException) =>
          void finish({ exitCode: null, signal: null, spawnError: error.code ?? error.message }),
      );
      child.on('close', (code, signal) => void finish(exited ?? { exitCode: code, signal }));
      // The leader has ended: the rest of its group is killed (nothing outlives the call), and output still in the pipes
      // is read for a moment (a process that left the group may hold them; they are closed on our side then).
      child.on('exit', (code, signal) => {
        exited = { exitCode: code, signal };
        if (pgid !== undefined) killProcessGroup(pgid, 'SIGKILL');
        timers.push(this.clock.setTimer(L.outputDrainMs, () => void finish(exited!)));
      });
    });
  }
}
