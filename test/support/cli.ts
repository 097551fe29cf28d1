import { spawn, type ChildProcess } from 'node:child_process';
import { CLI_BUNDLE, REPO_ROOT, requireBundles } from './paths';
import { pollUntil } from './poll';
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
    this.child = spawn(process.execPath, [CLI_BUNDLE, ...args], { cwd: REPO_ROOT, stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { this.stdout += chunk; });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { this.stderr += chunk; });
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
    return pollUntil('the agent environment on stdout', () => {
      if (!this.running && !/^export SW4RM_\w+=.*\n/m.test(this.stdout)) {
        throw new Error(`the coordinator exited with ${this.exitCode} before printing its environment:\n${this.stderr}`);
      }
      if (!/^# Agent environment:\n(export SW4RM_\w+=\S+\n){15,}/m.test(this.stdout)) return undefined;
      const env: Record<string, string> = {};
      for (const match of this.stdout.matchAll(/^export (SW4RM_\w+)=(\S*)$/gm)) env[match[1]] = match[2];
      return env;
    }, deadlineMs);
  }

  /** Waits for the exit code, failing after the deadline. */
  async exit(deadlineMs = 20_000): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the coordinator did not exit within ${deadlineMs} ms:\n${this.stderr}`)), deadlineMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Ends the child if a test left it running. */
  async kill(): Promise<void> {
    if (this.running) {
      this.child.kill('SIGKILL');
      await this.exited.catch(() => undefined);
    }
  }
}

/**
 * Mocha hooks for a suite that runs headless coordinators: a fresh data folder per test (prefix `prefix`), every
 * process started with `run` killed and the folder removed after it, and a check that the bundle is built.
 */
export function useCliProcesses(prefix: string): { readonly dataDir: () => string; readonly run: (...args: string[]) => CliProcess } {
  let dataDir = '';
  const processes: CliProcess[] = [];
  requireBundles(CLI_BUNDLE);
  beforeEach(() => {
    dataDir = makeTempDir(prefix);
  });
  afterEach(async () => {
    for (const cli of processes.splice(0)) await cli.kill();
    removeTempDir(dataDir);
  });
  return {
    dataDir: () => dataDir,
    run: (...args: string[]) => {
      const cli = new CliProcess(args);
      processes.push(cli);
      return cli;
    },
  };
}
