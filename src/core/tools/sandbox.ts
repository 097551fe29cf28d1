import { spawn } from 'node:child_process';
import { constants as FS, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { ToolCallError, type ExecutionPolicy } from './model';

/**
 * What the process provider can enforce of a call's network_policy and privilege_level (RFC §18.5.2, §18.5.3;
 * README, "The process provider"), and the argv prefix that enforces it.
 *
 * DENY_ALL runs the command in a new, empty network namespace (only a loopback interface, down) of a new user
 * namespace: `unshare --user --map-root-user --net -- argv…`, where unprivileged user namespaces are allowed (a
 * probe, `unshare -rn true`, once). Nothing else is enforced by this provider: EGRESS_RESTRICTED would need a
 * firewall it does not have.
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
}

export interface SandboxOptions {
  readonly acceptUnenforcedNetworkPolicy: boolean;
  /** The absolute path of an `unshare` that makes unprivileged network namespaces here (probeSandboxTools), or undefined. */
  readonly unshare: string | undefined;
  /** RLIMIT_CPU backstop: the absolute path of `prlimit` (probeSandboxTools), or undefined. */
  readonly prlimit: string | undefined;
  /** The absolute path of `env`, which applies the command's environment inside the wrappers; no wrapper runs without it. */
  readonly env: string | undefined;
}

function refusedNetwork(policy: string, why: string): ToolCallError {
  return new ToolCallError('permission_denied', 'PERMISSION_DENIED',
    `network_policy ${policy} cannot be enforced here (${why}): enable ${UNENFORCED_NETWORK_SETTING} to run without it`);
}

/**
 * The plan for one call, or a PERMISSION_DENIED ToolCallError: MINIMAL spawns no process; DENY_ALL needs a network
 * namespace (else accepted unenforced only by the setting); EGRESS_RESTRICTED is never enforced here (accepted
 * unenforced only by the setting); EGRESS_UNRESTRICTED and FULL_ACCESS run without a namespace. ELEVATED and
 * PRIVILEGED run like DEFAULT: this provider never adds a privilege (the engine asked a human before).
 */
export function sandboxPlan(argv: readonly string[], policy: ExecutionPolicy, options: SandboxOptions, env: Readonly<Record<string, string>> = {}): SandboxPlan {
  if (policy.privilegeLevel === 'MINIMAL') {
    throw new ToolCallError('permission_denied', 'PERMISSION_DENIED', 'run_command spawns processes: ask for privilege_level DEFAULT');
  }
  let prefix: string[] = [];
  let networkEnforced = true;
  switch (policy.networkPolicy) {
    case 'DENY_ALL':
      // A PID namespace too: whatever leaves the process group (GNU timeout's setpgid, setsid) dies with the namespace's
      // init when the group is killed (--kill-child: init gets SIGKILL when unshare does).
      if (options.unshare !== undefined && options.env !== undefined) prefix = [options.unshare, '--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child', '--'];
      else if (options.acceptUnenforcedNetworkPolicy) networkEnforced = false;
      else throw refusedNetwork('DENY_ALL', 'no unprivileged network namespaces');
      break;
    case 'EGRESS_RESTRICTED':
      if (options.acceptUnenforcedNetworkPolicy) networkEnforced = false;
      else throw refusedNetwork('EGRESS_RESTRICTED', 'the process provider has no egress filter');
      break;
    case 'EGRESS_UNRESTRICTED':
    case 'FULL_ACCESS':
      break;
  }
  const cpuLimit = policy.budgetCpuMs > 0 && options.prlimit !== undefined && options.env !== undefined
    // RLIMIT_CPU counts whole seconds per process: a backstop a second above the budget, the sampler acts first.
    ? [options.prlimit, `--cpu=${Math.ceil(policy.budgetCpuMs / 1000) + 1}`, '--']
    : [];
  if (cpuLimit.length === 0 && prefix.length === 0) return { argv, env, networkEnforced };
  // env(1) would read a first word with '=' as a variable: such a program name is refused under a wrapper.
  if (argv[0].includes('=')) throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', "/argv/0: a program name with '=' cannot run under the sandbox's env -i");
  const assignments = Object.entries(env).map(([name, value]) => `${name}=${value}`);
  return { argv: [...cpuLimit, ...prefix, options.env as string, '-i', ...assignments, ...argv], env: {}, networkEnforced };
}

/**
 * The absolute path of `program` on the coordinator's PATH (absolute folders only: never '.', never the caller's
 * PATH), else in /usr/bin or /bin; undefined when none is executable.
 */
export async function resolveTool(program: string, searchPath: string = process.env.PATH ?? ''): Promise<string | undefined> {
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
  readonly unshare: string | undefined;
  readonly prlimit: string | undefined;
  readonly env: string | undefined;
}

let toolsProbe: Promise<SandboxTools> | undefined;

async function probeTools(): Promise<SandboxTools> {
  if (process.platform !== 'linux') return { unshare: undefined, prlimit: undefined, env: undefined };
  const [unshare, prlimit, env] = await Promise.all([resolveTool('unshare'), resolveTool('prlimit'), resolveTool('env')]);
  const works = async (tool: string | undefined, args: readonly string[]): Promise<string | undefined> =>
    tool !== undefined && env !== undefined && await probe([tool, ...args, env, 'true']) ? tool : undefined;
  const [unshareOk, prlimitOk] = await Promise.all([works(unshare, ['--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child', '--']), works(prlimit, ['--cpu=1', '--'])]);
  return { unshare: unshareOk, prlimit: prlimitOk, env };
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
