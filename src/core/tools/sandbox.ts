import { spawn } from 'node:child_process';
import { constants as FS, lstatSync, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { ToolCallError, type ExecutionPolicy } from './model';

/**
 * What the process provider can enforce of a call's network_policy and privilege_level (RFC §18.5.2, §18.5.3;
 * README, "The process provider"), and the argv prefix that enforces it.
 *
 * DENY_ALL runs the command under bubblewrap (bwrapArgs): new user, network and PID namespaces, the file system
 * confined, UNIX sockets closed by seccomp. Where bubblewrap does not work it is refused, unless the operator's
 * setting accepts it unenforced: then it still runs in what `unshare --user --map-root-user --net --pid` gives where
 * unprivileged user namespaces are allowed (no network, its own PID namespace), and says network_enforced false.
 * Nothing else is enforced by this provider: EGRESS_RESTRICTED would need a firewall it does not have.
 *
 * The wrappers (prlimit, unshare) are never looked up on the caller's PATH nor started with the caller's variables:
 * they are resolved to absolute paths at probe time (on the coordinator's PATH, absolute folders only), started with an
 * empty environment, and the command's environment (the caller's variables included) is applied inside, last:
 * `… -- /usr/bin/env -i K=V… argv…`. A fake `unshare` first on the caller's PATH, or an LD_PRELOAD, reaches only the
 * caller's own command.
 */

export const UNENFORCED_NETWORK_SETTING = 'sw4rm.tools.process.acceptUnenforcedNetworkPolicy';

/** The argv that runs `argv` under the policy, the environment to start it with, and whether the network policy is enforced. */
export interface SandboxPlan {
  readonly argv: readonly string[];
  /** The spawn's environment: the command's own when no wrapper runs; empty when one does (applied inside by env -i). */
  readonly env: Readonly<Record<string, string>>;
  readonly networkEnforced: boolean;
  /** The seccomp program to hand bubblewrap on SECCOMP_FD, when the plan uses it. */
  readonly seccomp?: Buffer;
}

export interface SandboxOptions {
  readonly acceptUnenforcedNetworkPolicy: boolean;
  /** The absolute path of an `unshare` that makes unprivileged network namespaces here (probeSandboxTools), or undefined. */
  readonly unshare: string | undefined;
  /** RLIMIT_CPU backstop: the absolute path of `prlimit` (probeSandboxTools), or undefined. */
  readonly prlimit: string | undefined;
  /** The absolute path of `env`, which applies the command's environment inside the wrappers; no wrapper runs without it. */
  readonly env: string | undefined;
  /** The absolute path of a working bubblewrap (probeSandboxTools), or undefined: DENY_ALL then uses unshare. */
  readonly bwrap?: string | undefined;
}

/** What bubblewrap confines a DENY_ALL call to: the worktree read-write, its git directory, what is hidden. */
export interface Confinement {
  /** The worktree's real path: bound read-write. */
  readonly worktree: string;
  /** The repository's shared git directory (a linked worktree's common dir): bound read-only. */
  readonly gitCommonDir?: string;
  /** The worktree's own git directory (.git/worktrees/<name>): bound read-write (index, HEAD). */
  readonly gitWorktreeDir?: string;
  /** Folders replaced by an empty tmpfs (HOME, the coordinator's data folder): secrets and sockets hidden. */
  readonly hide: readonly string[];
  /** The cwd inside. */
  readonly cwd: string;
}

/** The fd the seccomp program is handed to bubblewrap on (spawn's stdio[3]). */
export const SECCOMP_FD = 3;

/**
 * A classic-BPF seccomp program (struct sock_filter[]) that makes socket(AF_UNIX, …) fail with EAFNOSUPPORT and
 * io_uring_setup with EPERM, and refuses every syscall of another ABI (x32, i386 on x86-64): no UNIX socket can be
 * made inside, so none outside can be reached whatever path is visible. socketpair stays (an unnamed pair reaches
 * nothing). Undefined on an architecture without numbers here: DENY_ALL then hides socket paths only.
 */
export function unixSocketSeccomp(arch: string = process.arch): Buffer | undefined {
  const abi =
    arch === 'x64'
      ? { audit: 0xc000003e, socket: 41, uring: 425, x32: true }
      : arch === 'arm64'
        ? { audit: 0xc00000b7, socket: 198, uring: 425, x32: false }
        : undefined;
  if (abi === undefined) return undefined;
  const LD_W_ABS = 0x20,
    JEQ_K = 0x15,
    JGE_K = 0x35,
    RET_K = 0x06;
  const ALLOW = 0x7fff0000,
    ERRNO = 0x00050000,
    EAFNOSUPPORT = 97,
    EPERM = 1;
  const prog: [number, number, number, number][] = [
    [LD_W_ABS, 0, 0, 4], // 0: arch
    [JEQ_K, 0, 8, abi.audit], // 1: other ABI -> 10
    [LD_W_ABS, 0, 0, 0], // 2: nr
    [JGE_K, 7, 0, abi.x32 ? 0x40000000 : 0xffffffff], // 3: x32 -> 11
    [JEQ_K, 6, 0, abi.uring], // 4: io_uring_setup -> 11
    [JEQ_K, 0, 3, abi.socket], // 5: not socket -> 9
    [LD_W_ABS, 0, 0, 16], // 6: args[0] (family, low 32 bits)
    [JEQ_K, 2, 0, 1], // 7: AF_UNIX -> 10
    [JEQ_K, 1, 0, 1], // 8: (padding, never true twice) -> 10
    [RET_K, 0, 0, ALLOW], // 9
    [RET_K, 0, 0, ERRNO | EAFNOSUPPORT], // 10
    [RET_K, 0, 0, ERRNO | EPERM], // 11
  ];
  const buffer = Buffer.alloc(prog.length * 8);
  prog.forEach(([code, jt, jf, k], i) => {
    buffer.writeUInt16LE(code, i * 8);
    buffer.writeUInt8(jt, i * 8 + 2);
    buffer.writeUInt8(jf, i * 8 + 3);
    buffer.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return buffer;
}

/**
 * bubblewrap's arguments for a DENY_ALL call: every namespace new (user, net, pid, ipc, uts, cgroup), a new session,
 * dead with the coordinator; / read-only, a private /tmp, /run (and /var/run), /dev and /proc; the hidden folders
 * empty (one inside the worktree too); the worktree read-write; the shared git directory read-only and the worktree's
 * own git directory read-write; the seccomp program of unixSocketSeccomp on SECCOMP_FD when `seccomp`.
 */
export function bwrapArgs(bwrap: string, c: Confinement, seccomp: boolean): string[] {
  const args = [
    bwrap,
    '--unshare-all',
    '--die-with-parent',
    '--new-session',
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/tmp',
    '--tmpfs',
    '/run',
  ];
  let varRunIsLink = true;
  try {
    varRunIsLink = lstatSync('/var/run').isSymbolicLink();
  } catch {
    /* absent */
  }
  if (!varRunIsLink) args.push('--tmpfs', '/var/run');
  for (const dir of c.hide) args.push('--tmpfs', dir);
  args.push('--bind', c.worktree, c.worktree);
  const isDir = (dir: string): boolean => {
    try {
      return lstatSync(dir).isDirectory();
    } catch {
      return false;
    }
  };
  const isFile = (file: string): boolean => {
    try {
      return lstatSync(file).isFile();
    } catch {
      return false;
    }
  };
  if (c.gitCommonDir !== undefined) {
    args.push('--ro-bind', c.gitCommonDir, c.gitCommonDir);
    // Objects stay writable (git add, commit), but objects/info (alternates: other object stores) does not. From a
    // linked worktree only the agents' branches and their reflogs are writable (refs/heads/sw4rm, made by the
    // binding), never main, tags, the stash or the snapshots under refs/sw4rm; a main checkout's refs and logs are
    // its own. config, hooks, info and the other worktrees' folders stay read-only.
    const writable =
      c.gitWorktreeDir === undefined
        ? ['objects', 'refs', 'logs']
        : ['objects', AGENT_BRANCHES, `logs/${AGENT_BRANCHES}`];
    for (const sub of writable) {
      const dir = path.join(c.gitCommonDir, sub);
      if (isDir(dir)) args.push('--bind', dir, dir);
    }
    const objectsInfo = path.join(c.gitCommonDir, 'objects', 'info');
    if (isDir(objectsInfo)) args.push('--ro-bind', objectsInfo, objectsInfo);
  }
  if (c.gitWorktreeDir !== undefined) {
    args.push('--bind', c.gitWorktreeDir, c.gitWorktreeDir);
    // What names the git directories stays as worktreeGitDirs checked it: the worktree's .git file and the back links.
    for (const file of [
      path.join(c.worktree, '.git'),
      path.join(c.gitWorktreeDir, 'gitdir'),
      path.join(c.gitWorktreeDir, 'commondir'),
    ]) {
      if (isFile(file)) args.push('--ro-bind', file, file);
    }
  }
  // A hidden folder inside a folder bound above (a data folder inside the worktree) is hidden again over that bind.
  const bound = [c.worktree, c.gitCommonDir, c.gitWorktreeDir].filter((d): d is string => d !== undefined);
  for (const dir of c.hide) {
    if (bound.some((b) => b !== dir && isWithin(dir, b))) args.push('--tmpfs', dir);
  }
  args.push('--chdir', c.cwd);
  if (seccomp) args.push('--seccomp', String(SECCOMP_FD));
  args.push('--');
  return args;
}

/** Where the agents' branches (`sw4rm/<worktree id>`) live in a repository's shared git directory. */
export const AGENT_BRANCHES = 'refs/heads/sw4rm';

/** Whether `child` is `parent` or inside it (both absolute, real paths). */
function isWithin(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

function refusedNetwork(policy: string, why: string): ToolCallError {
  return new ToolCallError(
    'permission_denied',
    'PERMISSION_DENIED',
    `network_policy ${policy} cannot be enforced here (${why}): enable ${UNENFORCED_NETWORK_SETTING} to run without it`,
  );
}

/**
 * The plan for one call, or a PERMISSION_DENIED ToolCallError: MINIMAL spawns no process; DENY_ALL needs bubblewrap
 * and a confinement (else accepted unenforced only by the setting); EGRESS_RESTRICTED is never enforced here (accepted
 * unenforced only by the setting); EGRESS_UNRESTRICTED and FULL_ACCESS run without a namespace. ELEVATED and
 * PRIVILEGED run like DEFAULT: this provider never adds a privilege (the engine asked a human before).
 */
export function sandboxPlan(
  argv: readonly string[],
  policy: ExecutionPolicy,
  options: SandboxOptions,
  env: Readonly<Record<string, string>> = {},
  confine?: Confinement,
): SandboxPlan {
  if (policy.privilegeLevel === 'MINIMAL') {
    throw new ToolCallError(
      'permission_denied',
      'PERMISSION_DENIED',
      'run_command spawns processes: ask for privilege_level DEFAULT',
    );
  }
  let prefix: string[] = [];
  let networkEnforced = true;
  let seccompProgram: Buffer | undefined;
  switch (policy.networkPolicy) {
    case 'DENY_ALL':
      // A PID namespace too: whatever leaves the process group (GNU timeout's setpgid, setsid) dies with the namespace's
      // init when the group is killed (--kill-child: init gets SIGKILL when unshare does).
      if (options.bwrap !== undefined && options.env !== undefined && confine !== undefined) {
        const seccomp = unixSocketSeccomp();
        prefix = bwrapArgs(options.bwrap, confine, seccomp !== undefined);
        seccompProgram = seccomp;
      } else if (!options.acceptUnenforcedNetworkPolicy) {
        // unshare alone closes the network and the processes, not filesystem UNIX sockets (D-Bus, docker.sock,
        // ssh-agent) nor the shared .git: that is not DENY_ALL, so it runs only when the setting accepts it.
        throw refusedNetwork(
          'DENY_ALL',
          options.unshare !== undefined && options.env !== undefined
            ? 'no bubblewrap: UNIX sockets and the shared .git would be reachable'
            : 'no unprivileged network namespaces',
        );
      } else {
        networkEnforced = false;
        // Accepted unenforced: still in what unshare gives (no network interface, its own PID namespace) where it works.
        if (options.unshare !== undefined && options.env !== undefined)
          prefix = [options.unshare, '--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child', '--'];
      }
      break;
    case 'EGRESS_RESTRICTED':
      if (options.acceptUnenforcedNetworkPolicy) networkEnforced = false;
      else throw refusedNetwork('EGRESS_RESTRICTED', 'the process provider has no egress filter');
      break;
    case 'EGRESS_UNRESTRICTED':
    case 'FULL_ACCESS':
      break;
  }
  const cpuLimit =
    policy.budgetCpuMs > 0 && options.prlimit !== undefined && options.env !== undefined
      ? // RLIMIT_CPU counts whole seconds per process: a backstop a second above the budget, the sampler acts first.
        [options.prlimit, `--cpu=${Math.ceil(policy.budgetCpuMs / 1000) + 1}`, '--']
      : [];
  if (cpuLimit.length === 0 && prefix.length === 0) return { argv, env, networkEnforced };
  // env(1) would read a first word with '=' as a variable: such a program name is refused under a wrapper.
  if (argv[0].includes('='))
    throw new ToolCallError(
      'invalid_argument',
      'VALIDATION_ERROR',
      "/argv/0: a program name with '=' cannot run under the sandbox's env -i",
    );
  const assignments = Object.entries(env).map(([name, value]) => `${name}=${value}`);
  return {
    argv: [...cpuLimit, ...prefix, options.env as string, '-i', ...assignments, ...argv],
    env: {},
    networkEnforced,
    ...(seccompProgram === undefined ? {} : { seccomp: seccompProgram }),
  };
}

/**
 * The absolute path of `program` on the coordinator's PATH (absolute folders only: never '.', never the caller's
 * PATH), else in /usr/bin or /bin; undefined when none is executable.
 */
export async function resolveTool(
  program: string,
  searchPath: string = process.env.PATH ?? '',
): Promise<string | undefined> {
  for (const dir of [...searchPath.split(':'), '/usr/bin', '/bin']) {
    if (!path.isAbsolute(dir)) continue;
    const file = path.join(dir, program);
    try {
      await fsp.access(file, FS.X_OK);
      if ((await fsp.stat(file)).isFile()) return file;
    } catch {
      // next folder
    }
  }
  return undefined;
}

/** Whether `argv` runs and exits 0 (a probe: output ignored, bounded to 5 s of real time). */
function probe(argv: readonly string[]): Promise<boolean> {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(argv[0], argv.slice(1), { stdio: 'ignore', timeout: 5_000, env: {} });
    } catch {
      resolve(false);
      return;
    }
    child.on('error', () => resolve(false));
    child.on('exit', (code) => resolve(code === 0));
  });
}

/** The wrappers this machine has, as absolute paths (SandboxOptions without the setting). */
export interface SandboxTools {
  readonly bwrap?: string | undefined;
  readonly unshare: string | undefined;
  readonly prlimit: string | undefined;
  readonly env: string | undefined;
}

let toolsProbe: Promise<SandboxTools> | undefined;

async function probeTools(): Promise<SandboxTools> {
  if (process.platform !== 'linux') return { unshare: undefined, prlimit: undefined, env: undefined };
  const [unshare, prlimit, env, bwrap] = await Promise.all([
    resolveTool('unshare'),
    resolveTool('prlimit'),
    resolveTool('env'),
    resolveTool('bwrap'),
  ]);
  const works = async (tool: string | undefined, args: readonly string[]): Promise<string | undefined> =>
    tool !== undefined && env !== undefined && (await probe([tool, ...args, env, 'true'])) ? tool : undefined;
  const [unshareOk, prlimitOk] = await Promise.all([
    works(unshare, ['--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child', '--']),
    works(prlimit, ['--cpu=1', '--']),
  ]);
  const bwrapOk = await works(bwrap, [
    '--unshare-all',
    '--die-with-parent',
    '--new-session',
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/tmp',
    '--',
  ]);
  return { bwrap: bwrapOk, unshare: unshareOk, prlimit: prlimitOk, env };
}

/**
 * unshare (when `unshare -rn` works: unprivileged user namespaces), prlimit and env resolved to absolute paths and
 * tried once per process, in an empty environment.
 */
export function probeSandboxTools(): Promise<SandboxTools> {
  toolsProbe ??= probeTools();
  return toolsProbe;
}

/** Whether `unshare -rn true` works here (Linux with unprivileged user namespaces); probed once per process. */
export async function probeNetworkNamespace(): Promise<boolean> {
  return (await probeSandboxTools()).unshare !== undefined;
}
