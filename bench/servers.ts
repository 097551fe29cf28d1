import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT } from './protocol';

/** A server under test, running in its own child process. */
export interface ServerHandle {
  readonly name: string;
  readonly address: string;
  /** Bearer token to send, when the server requires one. */
  readonly token: string | undefined;
  /** Whether agents must register through RegistryService before routing. */
  readonly registers: boolean;
  /** CPU seconds (user + system) the child process has used so far, or NaN when /proc is unavailable. */
  cpuSeconds(): number;
  /** The file holding everything the child wrote to stderr. */
  readonly stderrPath: string;
  /** The last lines the child wrote to stderr, for diagnostics. */
  stderrTail(): string;
  /** Stops the child; its temporary folder (store and stderr log) is removed unless keepFiles is set. */
  stop(keepFiles?: boolean): Promise<void>;
}

export interface RoutedOptions {
  readonly capacity: number;
  /** The coordinator CLI bundle; dist/cli.js of this repository by default. */
  readonly cliPath?: string;
  /** The name the server is reported under: 'routed' by default. */
  readonly name?: string;
}

const START_TIMEOUT_MS = 20_000;
/** Linux reports /proc/<pid>/stat times in clock ticks; USER_HZ is 100 on every mainstream kernel. */
const CLOCK_TICKS_PER_SECOND = 100;

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

export async function startBareServer(): Promise<ServerHandle> {
  const script = path.join(__dirname, 'bareServer.js');
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-bench-bare-'));
  const { child, lines, stderrPath } = launch(script, ['--port', '0'], logDir);
  const line = await waitForLine(child, lines, /^listening on (\S+)$/, stderrPath);
  return handle('bare', child, line[1], undefined, false, stderrPath, logDir);
}

export async function startRoutedServer(options: RoutedOptions): Promise<{ server: ServerHandle; notes: string[] }> {
  const cli = options.cliPath ?? path.join(REPO_ROOT, 'dist', 'cli.js');
  if (!fs.existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`);
  const notes: string[] = [];
  const help = execFileSync(process.execPath, [cli, '--help'], { encoding: 'utf8' });
  const args = ['--port', '0', '--auth', 'token'];
  if (/--capacity\b/.test(help)) {
    args.push('--capacity', String(options.capacity));
    notes.push(`${options.name ?? 'routed'}: --capacity ${options.capacity}`);
  } else {
    notes.push(
      `${options.name ?? 'routed'}: this CLI has no --capacity flag; inboxes keep their default capacity, which may refuse messages with BUFFER_FULL at this concurrency`,
    );
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-bench-routed-'));
  args.push('--data-dir', dataDir);
  const { child, lines, stderrPath } = launch(cli, args, dataDir);
  const env = new Map<string, string>();
  await waitForLine(
    child,
    lines,
    (text) => {
      const match = /^export (SW4RM_[A-Z_]+)=(.*)$/.exec(text);
      if (match) env.set(match[1], match[2]);
      return env.has('SW4RM_ROUTER_ADDR') && env.has('SW4RM_TOKEN') ? match : null;
    },
    stderrPath,
  );
  const server = handle(
    options.name ?? 'routed',
    child,
    env.get('SW4RM_ROUTER_ADDR') as string,
    env.get('SW4RM_TOKEN'),
    true,
    stderrPath,
    dataDir,
  );
  return { server, notes };
}

interface Launched {
  child: ChildProcess;
  lines: string[];
  stderrPath: string;
}

function launch(script: string, args: string[], logDir: string): Launched {
  const stderrPath = path.join(logDir, 'stderr.log');
  // The child writes its stderr (the coordinator's event log) to a file, so the load generator never reads it.
  const stderrFd = fs.openSync(stderrPath, 'w');
  // Extra node arguments for every server (README: BENCH_SERVER_NODE_ARGS), before the script.
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
  const child = spawn(process.execPath, [...nodeArgs, script, ...args], { stdio: ['ignore', 'pipe', stderrFd] });
  fs.closeSync(stderrFd);
  children.add(child);
  child.on('exit', () => children.delete(child));
  const lines: string[] = [];
  let partial = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    for (const part of parts) {
      lines.push(part.trim());
      child.emit('line');
    }
  });
  return { child, lines, stderrPath };
}

type LineMatcher = RegExp | ((line: string) => RegExpExecArray | null);

function waitForLine(
  child: ChildProcess,
  lines: string[],
  matcher: LineMatcher,
  stderrPath: string,
): Promise<RegExpExecArray> {
  const match = (line: string): RegExpExecArray | null =>
    matcher instanceof RegExp ? matcher.exec(line) : matcher(line);
  return new Promise((resolve, reject) => {
    let consumed = 0;
    const onLine = (): void => {
      while (consumed < lines.length) {
        const found = match(lines[consumed++]);
        if (found) {
          finish();
          resolve(found);
          return;
        }
      }
    };
    const onExit = (code: number | null): void => {
      finish();
      reject(new Error(`server exited with code ${code} before it was ready:\n${tail(stderrPath)}`));
    };
    const timer = setTimeout(() => {
      finish();
      reject(new Error(`server not ready after ${START_TIMEOUT_MS} ms:\n${tail(stderrPath)}`));
    }, START_TIMEOUT_MS);
    const finish = (): void => {
      clearTimeout(timer);
      child.off('line', onLine);
      child.off('exit', onExit);
    };
    child.on('line', onLine);
    child.on('exit', onExit);
    onLine();
  });
}

function handle(
  name: string,
  child: ChildProcess,
  address: string,
  token: string | undefined,
  registers: boolean,
  stderrPath: string,
  tempDir: string,
): ServerHandle {
  return {
    name,
    address,
    token,
    registers,
    cpuSeconds: () => processCpuSeconds(child.pid),
    stderrPath,
    stderrTail: () => tail(stderrPath),
    stop: async (keepFiles = false) => {
      await stopChild(child);
      if (!keepFiles) fs.rmSync(tempDir, { recursive: true, force: true });
    },
  };
}

/** Stops a child process: SIGTERM, then SIGKILL if it has not exited 5 s later; resolves once it has exited. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

function processCpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 of the whole line.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

function tail(file: string, lines = 8): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}
