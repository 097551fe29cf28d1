// The launched agents' starter (esbuild.mjs bundles it as dist/sw4rm-launch.js; README, "Launch your first agent").
// The editor's integrated terminal runs `node sw4rm-launch.js` with the launch plan in SW4RM_LAUNCH_PLAN
// (`{"command": [...], "env": {...}}`); it starts the plan's program directly (argv, never a shell) on the same
// terminal (stdio inherited: the CLI sees a TTY, gets Ctrl+C and resizes as its own), with the plan's environment laid
// over the terminal's, and exits with the program's code.
//
// Why not the program as the terminal's process: the editor applies the window's environment variable collection (the
// terminals' enrolment credential in SW4RM_TOKEN) over a terminal's own environment, and remote editors (code-server,
// remote SSH…) ignore `strictEnv`, so the agent would get the enrolment credential instead of its own. Here the plan's
// variables win. The plan lives only in this process's environment: its token is never written to a file.
import { spawn } from 'node:child_process';
import * as os from 'node:os';

export const PLAN_VARIABLE = 'SW4RM_LAUNCH_PLAN';

/** Exit code when the plan is missing or unreadable, or the program cannot be started (as a shell's "not found"). */
export const EXIT_CANNOT_START = 127;

export interface LaunchPlanJson {
  readonly command: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** The plan from the environment, or why it cannot be used. */
export function planFrom(env: NodeJS.ProcessEnv): LaunchPlanJson | { readonly problem: string } {
  const text = env[PLAN_VARIABLE];
  if (!text) return { problem: `${PLAN_VARIABLE} is not set: this starter is run by SW4RM: Launch Agent… only` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { problem: `${PLAN_VARIABLE} is not JSON` };
  }
  const plan = value as Partial<LaunchPlanJson> | null;
  if (
    !plan ||
    !Array.isArray(plan.command) ||
    plan.command.length === 0 ||
    !plan.command.every((a) => typeof a === 'string') ||
    plan.command[0] === ''
  ) {
    return { problem: `${PLAN_VARIABLE}.command must be a non-empty list of strings` };
  }
  if (
    typeof plan.env !== 'object' ||
    plan.env === null ||
    !Object.values(plan.env).every((v) => typeof v === 'string')
  ) {
    return { problem: `${PLAN_VARIABLE}.env must map names to strings` };
  }
  return { command: plan.command, env: plan.env };
}

/** The program's environment: the terminal's (without the plan itself and ELECTRON_RUN_AS_NODE), then the plan's variables over it. */
export function programEnvironment(terminal: NodeJS.ProcessEnv, plan: LaunchPlanJson): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...terminal };
  delete env[PLAN_VARIABLE];
  // The starter's own need under Electron (the desktop editor's binary), never the agent's: profiles cannot set it.
  delete env.ELECTRON_RUN_AS_NODE;
  return { ...env, ...plan.env };
}

function main(): void {
  const plan = planFrom(process.env);
  if ('problem' in plan) {
    process.stderr.write(`sw4rm-launch: ${plan.problem}\n`);
    process.exitCode = EXIT_CANNOT_START;
    return;
  }
  const [program, ...args] = plan.command;
  const child = spawn(program, args, { stdio: 'inherit', env: programEnvironment(process.env, plan) });
  // Ctrl+C, Ctrl+\ and resizes reach the whole foreground process group, the program included: this process only
  // stays out of their way. A hang-up or termination sent to this process (the terminal closed, killed) is passed on.
  for (const signal of ['SIGINT', 'SIGQUIT', 'SIGWINCH'] as const) process.on(signal, () => undefined);
  for (const signal of ['SIGHUP', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  child.once('error', (err: NodeJS.ErrnoException) => {
    process.stderr.write(
      `sw4rm-launch: cannot start ${program}: ${err.code === 'ENOENT' ? 'not found' : err.message}\n`,
    );
    process.exitCode = EXIT_CANNOT_START;
  });
  child.once('exit', (code, signal) => {
    // As a shell reports a program ended by a signal: 128 + its number.
    process.exitCode = code ?? (signal ? 128 + (os.constants.signals[signal] ?? 0) : 0);
  });
}

if (require.main === module) main();
