import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { REPO_ROOT } from './paths';
import { pollUntil } from './poll';

/** The example agent bundle built by `npm run build` from examples/agent.ts. */
export const EXAMPLE_AGENT_BUNDLE = path.join(REPO_ROOT, 'dist', 'example-agent.js');

/** The example agent (dist/example-agent.js) as a child process with the given environment, its output collected. */
export class ExampleAgentProcess {
  output = '';
  exitCode: number | null | undefined;
  readonly exited: Promise<number | null>;
  private readonly child: ChildProcess;

  constructor(environment: Record<string, string>) {
    const env = { ...process.env, ...environment };
    this.child = spawn(process.execPath, [EXAMPLE_AGENT_BUNDLE], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    // The agent's lines and its complaints are read together, in the order they were written per stream.
    for (const stream of [this.child.stdout!, this.child.stderr!]) stream.setEncoding('utf8').on('data', (chunk: string) => { this.output += chunk; });
    this.exited = new Promise((resolve, reject) => {
      this.child.once('error', reject);
      this.child.once('close', (code) => {
        this.exitCode = code;
        resolve(code);
      });
    });
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  /** Waits until the output matches `pattern`, failing early (with the output) when the agent exits. */
  async waitForLine(pattern: RegExp, deadlineMs = 15_000): Promise<RegExpMatchArray> {
    try {
      return await pollUntil(`the example agent to print ${pattern}`, () => {
        const match = this.output.match(pattern);
        if (match) return match;
        if (!this.running) throw new Error(`the example agent exited with ${this.exitCode}`);
        return undefined;
      }, deadlineMs);
    } catch (err) {
      throw new Error(`${(err as Error).message}; it printed:\n${this.output}`);
    }
  }

  /** How many lines of the output match `pattern`. */
  count(pattern: RegExp): number {
    return this.output.split('\n').filter((line) => pattern.test(line)).length;
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  async kill(): Promise<void> {
    if (this.running) {
      this.child.kill('SIGKILL');
      await this.exited.catch(() => undefined);
    }
  }
}
