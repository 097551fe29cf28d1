import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { exampleBundle, REPO_ROOT } from './paths';
import { pollUntil, within } from './poll';

/** The example agent bundle built by `npm run build` from examples/agent.ts. */
export const EXAMPLE_AGENT_BUNDLE = exampleBundle('agent');

/** What an example printed (stdout and stderr, in the order each stream wrote it) and its exit code. */
export interface ExampleRun {
  output: string;
  code: number | null;
}

export interface ExampleProcessOptions {
  /** Arguments after the bundle (not used when the command is a whole command line). */
  args?: readonly string[];
  /** The working directory: the clone's folder unless given. */
  cwd?: string;
  /**
   * false: the child gets only PATH and `env` (a launch plan's environment, as dist/sw4rm-launch.js runs it);
   * otherwise `env` is added to this test's environment.
   */
  inheritEnv?: boolean;
  /** Called with all the output so far each time the child writes. */
  onOutput?: (output: string) => void;
  /** How the failure messages name the child (default: the bundle's file name). */
  name?: string;
}

/**
 * An example (a bundle run by this test's Node, or a whole command line `[program, ...args]`) as a child process
 * with the given environment, its output collected.
 */
export class ExampleProcess {
  output = '';
  exitCode: number | null | undefined;
  readonly exited: Promise<number | null>;
  readonly name: string;
  private readonly child: ChildProcess;

  constructor(
    command: string | readonly string[],
    environment: Readonly<Record<string, string>>,
    options: ExampleProcessOptions = {},
  ) {
    // process.execPath is the Node 24 that runs the tests (node_modules/.bin/node).
    const [program, ...args] =
      typeof command === 'string' ? [process.execPath, command, ...(options.args ?? [])] : command;
    this.name = options.name ?? path.basename(typeof command === 'string' ? command : program);
    const env =
      options.inheritEnv === false
        ? { PATH: process.env.PATH ?? '', ...environment }
        : { ...process.env, ...environment };
    this.child = spawn(program, args, { cwd: options.cwd ?? REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    // The child's lines and its complaints are read together, in the order they were written per stream.
    for (const stream of [this.child.stdout!, this.child.stderr!])
      stream.setEncoding('utf8').on('data', (chunk: string) => {
        this.output += chunk;
        options.onOutput?.(this.output);
      });
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

  /** Waits until the output matches `pattern`, failing early (with the output) when the child exits. */
  async waitForLine(pattern: RegExp, deadlineMs = 15_000): Promise<RegExpMatchArray> {
    try {
      return await pollUntil(
        `${this.name} to print ${pattern}`,
        () => {
          const match = this.output.match(pattern);
          if (match) return match;
          if (!this.running) throw new Error(`${this.name} exited with ${this.exitCode}`);
          return undefined;
        },
        deadlineMs,
      );
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

  /** Waits until the child exits and answers its output and code; SIGKILLs it and fails after the deadline. */
  async finished(deadlineMs = 30_000): Promise<ExampleRun> {
    const code = await within(this.exited, deadlineMs, () => {
      this.child.kill('SIGKILL');
      return new Error(`${this.name} did not exit within ${deadlineMs} ms:\n${this.output}`);
    });
    return { output: this.output, code };
  }

  async kill(): Promise<void> {
    if (this.running) {
      this.child.kill('SIGKILL');
      await this.exited.catch(() => undefined);
    }
  }
}

/** The example agent (dist/example-agent.js) as a child process with the given environment, its output collected. */
export class ExampleAgentProcess extends ExampleProcess {
  constructor(environment: Record<string, string>) {
    super(EXAMPLE_AGENT_BUNDLE, environment, { name: 'the example agent' });
  }
}

/**
 * Runs an example until it exits and answers its output and code: `command` is a bundle run by this test's Node
 * (`options.args` after it) or a whole command line; `env` is added to this test's environment (or, with
 * `inheritEnv: false`, is all of it besides PATH). Fails after `deadlineMs` (30 s unless given), the child killed.
 */
export function runExample(
  command: string | readonly string[],
  env: Readonly<Record<string, string>>,
  options: ExampleProcessOptions & { deadlineMs?: number } = {},
): Promise<ExampleRun> {
  return new ExampleProcess(command, env, options).finished(options.deadlineMs);
}

/** Asserts that an example printed every line of `expected`, and nothing `refused` matches (a refusal it was sent). */
export function assertPrinted(
  output: string,
  expected: readonly RegExp[],
  refused: RegExp,
  message = 'nothing the example sent was refused',
): void {
  for (const pattern of expected) assert.match(output, pattern);
  assert.doesNotMatch(output, refused, message);
}
