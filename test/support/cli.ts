import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { CLI_BUNDLE, REPO_ROOT, requireBundles } from './paths';
import { pollUntil, within } from './poll';
import { makeTempDir, removeTempDir } from './tempDir';

/** A headless coordinator (dist/cli.js) running as a child process, with its output collected. */
export class CliProcess {
  stdout = '';
  stderr = '';
  exitCode: number | null | undefined;
  exitSignal: NodeJS.Signals | null = null;
  readonly exited: Promise<number | null>;
  private readonly child: ChildProcess;

  /** With `stdin`, the test types into the coordinator's standard input (the operator console). */
  constructor(args: readonly string[], options: { stdin?: boolean } = {}) {
    // process.execPath is the Node 24 that runs the tests (node_modules/.bin/node), which has node:sqlite.
    this.child = spawn(process.execPath, [CLI_BUNDLE, ...args], {
      cwd: REPO_ROOT,
      stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stdout += chunk;
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve, reject) => {
      this.child.once('error', reject);
      this.child.once('close', (code, signal) => {
        this.exitCode = code;
        this.exitSignal = signal;
        resolve(code);
      });
    });
  }

  /** The coordinator's process id (e.g. to read its memory from /proc). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  /** Types one line on the coordinator's standard input. */
  type(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }

  /** Closes standard input (the operator left). */
  endInput(): void {
    this.child.stdin!.end();
  }

  /** Waits until stdout matches `pattern` and answers the match. */
  async waitForOutput(pattern: RegExp, deadlineMs = 10_000): Promise<RegExpMatchArray> {
    return pollUntil(`stdout matching ${pattern}`, () => this.stdout.match(pattern) ?? undefined, deadlineMs);
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Waits for the agent environment on stdout and answers it as name → value. */
  async environment(deadlineMs = 20_000): Promise<Record<string, string>> {
    return pollUntil(
      'the agent environment on stdout',
      () => {
        if (!this.running && !/^export SW4RM_\w+=.*\n/m.test(this.stdout)) {
          throw new Error(
            `the coordinator exited with ${this.exitCode} before printing its environment:\n${this.stderr}`,
          );
        }
        if (!/^# Agent environment:\n(export SW4RM_\w+=\S+\n){15,}/m.test(this.stdout)) return undefined;
        const env: Record<string, string> = {};
        for (const match of this.stdout.matchAll(/^export (SW4RM_\w+)=(\S*)$/gm)) env[match[1]] = match[2];
        return env;
      },
      deadlineMs,
    );
  }

  /** Waits for the exit code, failing after the deadline. */
  exit(deadlineMs = 20_000): Promise<number | null> {
    return within(
      this.exited,
      deadlineMs,
      () => new Error(`the coordinator did not exit within ${deadlineMs} ms:\n${this.stderr}`),
    );
  }

  /** Ends the child if a test left it running. */
  async kill(): Promise<void> {
    if (this.running) {
      this.child.kill('SIGKILL');
      await this.exited.catch(() => undefined);
    }
  }
}

/** A client or stream a test closes when it ends. */
export interface Closable {
  close(): void;
}

/** What `useCliProcesses` gives a suite's tests. */
export interface CliProcesses {
  /** This test's data folder. */
  readonly dataDir: () => string;
  /** Starts dist/cli.js with `args`. */
  readonly run: (...args: string[]) => CliProcess;
  /** Starts dist/cli.js with `args` and a standard input the test types into (the operator console). */
  readonly runWithInput: (...args: string[]) => CliProcess;
  /** The process started last (after `serve`, the one serving). */
  readonly last: () => CliProcess;
  /**
   * Starts dist/cli.js serving on `port` (0: any free one) with this test's data folder and `args`, started again
   * while a killed coordinator still holds the port (a crash test restarts where its clients connect); answers the
   * process and the agent environment it printed.
   */
  readonly serve: (
    port: number,
    args?: readonly string[],
    deadlineMs?: number,
  ) => Promise<{ cli: CliProcess; env: Record<string, string> }>;
  /** Closes these (clients, inbox streams) after the test, the last given first, before the processes are killed. */
  readonly closeAfter: (...closables: Closable[]) => void;
}

/**
 * Mocha hooks for a suite that runs headless coordinators: a fresh data folder per test (prefix `prefix`), after it
 * everything given to `closeAfter` closed (the last first), every process it started killed and the folder removed,
 * and a check that the bundle is built.
 */
export function useCliProcesses(prefix: string): CliProcesses {
  let dataDir = '';
  const processes: CliProcess[] = [];
  const closables: Closable[] = [];
  requireBundles(CLI_BUNDLE);
  beforeEach(() => {
    dataDir = makeTempDir(prefix);
  });
  afterEach(async () => {
    for (const closable of closables.splice(0).reverse()) closable.close();
    for (const cli of processes.splice(0)) await cli.kill();
    removeTempDir(dataDir);
  });
  const start = (args: readonly string[], stdin: boolean): CliProcess => {
    const cli = new CliProcess(args, { stdin });
    processes.push(cli);
    return cli;
  };
  const run = (...args: string[]): CliProcess => start(args, false);
  return {
    dataDir: () => dataDir,
    run,
    runWithInput: (...args: string[]) => start(args, true),
    last: () => {
      assert.ok(processes.length > 0, 'no coordinator was started');
      return processes[processes.length - 1];
    },
    serve: (port, args = [], deadlineMs = 20_000) =>
      pollUntil(
        `a coordinator serving on port ${port}`,
        async () => {
          const cli = run('--port', String(port), '--data-dir', dataDir, ...args);
          try {
            return { cli, env: await cli.environment(Math.min(deadlineMs, 15_000)) };
          } catch (err) {
            if (/already in use/.test(cli.stderr)) return undefined;
            throw err;
          }
        },
        deadlineMs,
        100,
      ),
    closeAfter: (...more) => {
      closables.push(...more);
    },
  };
}
