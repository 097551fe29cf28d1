import { spawn } from 'node:child_process';
import { ToolCallError, type ExecutionPolicy } from './model';

/**
 * What the process provider can enforce of a call's network_policy and privilege_level (RFC §18.5.2, §18.5.3;
 * README, "The process provider"), and the argv prefix that enforces it.
 *
 * DENY_ALL runs the command in a new, empty network namespace (only a loopback interface, down) of a new user
 * namespace: `unshare --user --map-root-user --net -- argv…`, where unprivileged user namespaces are allowed (a
 * probe, `unshare -rn true`, once). Nothing else is enforced by this provider: EGRESS_RESTRICTED would need a
 * firewall it does not have.
 */

export const UNENFORCED_NETWORK_SETTING = 'sw4rm.tools.process.acceptUnenforcedNetworkPolicy';

/** The argv that runs `argv` under the policy, and whether the network policy is enforced. */
export interface SandboxPlan {
  readonly argv: readonly string[];
  readonly networkEnforced: boolean;
}

export interface SandboxOptions {
  readonly acceptUnenforcedNetworkPolicy: boolean;
  /** Whether unprivileged network namespaces work here (probeNetworkNamespace). */
  readonly networkNamespaces: boolean;
  /** RLIMIT_CPU backstop: `prlimit` is on PATH (probePrlimit). */
  readonly prlimit: boolean;
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
export function sandboxPlan(argv: readonly string[], policy: ExecutionPolicy, options: SandboxOptions): SandboxPlan {
  if (policy.privilegeLevel === 'MINIMAL') {
    throw new ToolCallError('permission_denied', 'PERMISSION_DENIED', 'run_command spawns processes: ask for privilege_level DEFAULT');
  }
  let prefix: string[] = [];
  let networkEnforced = true;
  switch (policy.networkPolicy) {
    case 'DENY_ALL':
      if (options.networkNamespaces) prefix = ['unshare', '--user', '--map-root-user', '--net', '--'];
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
  const cpuLimit = policy.budgetCpuMs > 0 && options.prlimit
    // RLIMIT_CPU counts whole seconds per process: a backstop a second above the budget, the sampler acts first.
    ? ['prlimit', `--cpu=${Math.ceil(policy.budgetCpuMs / 1000) + 1}`, '--']
    : [];
  return { argv: [...cpuLimit, ...prefix, ...argv], networkEnforced };
}

/** Whether `argv` runs and exits 0 (a probe: output ignored, bounded to 5 s of real time). */
function probe(argv: readonly string[]): Promise<boolean> {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(argv[0], argv.slice(1), { stdio: 'ignore', timeout: 5_000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
    } catch {
      resolve(false);
      return;
    }
    child.on('error', () => resolve(false));
    child.on('exit', (code) => resolve(code === 0));
  });
}

let networkNamespaceProbe: Promise<boolean> | undefined;
let prlimitProbe: Promise<boolean> | undefined;

/** Whether `unshare -rn true` works here (Linux with unprivileged user namespaces); probed once per process. */
export function probeNetworkNamespace(): Promise<boolean> {
  networkNamespaceProbe ??= process.platform === 'linux' ? probe(['unshare', '-rn', 'true']) : Promise.resolve(false);
  return networkNamespaceProbe;
}

/** Whether `prlimit` (util-linux) runs here; probed once per process. */
export function probePrlimit(): Promise<boolean> {
  prlimitProbe ??= process.platform === 'linux' ? probe(['prlimit', '--cpu=1', '--', 'true']) : Promise.resolve(false);
  return prlimitProbe;
}
