import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CoordinatorClients } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { git } from '../support/gitRepo';
import { disposeAfter, PollAbortError, ROOT, poll, startWithCoordinator, type CodeServerHarness } from './harness';

/** The stand-in CLI agent (speaks MCP with the SDK's Client, runs the PreToolUse hook like Claude Code). */
const STAND_IN = path.join(ROOT, 'test', 'fixtures', 'standInAgent.mjs');
const PROFILE_ID = 'stand-in';
const PROFILE_NAME = 'Stand-in agent';
const MISSING_NAME = 'Missing CLI';
/** The profile picker: its built-in profiles come first, so the test's own are typed for, as a person would. */
const PROFILE_PICK = { title: 'Launch Agent: Profile' };
const MISSING_PROGRAM = 'sw4rm-e2e-no-such-cli';
/** The harness opens `<temp>/workspace`, a git repository: its repo_id is its folder's name. */
const REPO_ID = 'workspace';
const RATIONALE = 'The build folder is generated; removing it is safe.';
/** An SDK agent registered beside the stand-in: the one it writes to. */
const PEER = 'e2e-peer';
const GREETING = 'hello stand-in, please check the build';

/** The repository's own launch profiles (README, "Launch your first agent"). */
const AGENTS_JSON = {
  profiles: [
    {
      id: PROFILE_ID,
      name: PROFILE_NAME,
      cli: 'custom',
      // process.execPath: the Node running this test (the profile's program is looked up on PATH otherwise).
      command: [process.execPath, STAND_IN],
      env: { STAND_IN_PEER: PEER },
      bridge: { kind: 'mcp-config-file', path: '.mcp.json', format: 'claude-mcp-json', transport: 'http' },
      approvals: { kind: 'claude-code-hooks', via: 'command' },
      instructions: { file: '.sw4rm/AGENT.md' },
      capabilities: ['code'],
      description: 'A scripted stand-in for a CLI coding agent (test/fixtures/standInAgent.mjs)',
    },
    {
      id: 'missing',
      name: MISSING_NAME,
      cli: 'custom',
      command: [MISSING_PROGRAM, '--yes'],
      bridge: { kind: 'none' },
      approvals: { kind: 'none' },
      description: 'A CLI that is not installed',
    },
  ],
};

describe('SW4RM: Launch Agent… in a real editor (code-server + Chromium, a stand-in CLI agent over the MCP bridge and the approval hook)', function () {
  let harness: CodeServerHarness | undefined;
  let agentId = '';
  let worktreeId = '';
  let worktreePath = '';
  let clients: CoordinatorClients | undefined;

  const page = () => harness!.page;
  const standIn = (name: string): string => path.join(worktreePath, '.stand-in', name);
  const readJson = (name: string): unknown => JSON.parse(fs.readFileSync(standIn(name), 'utf8'));

  /** Waits for a file the stand-in writes; fails at once with its error if it wrote one. */
  async function standInFile(name: string, timeoutMs = 30_000): Promise<unknown> {
    const failed = (): Error =>
      new Error(
        `the stand-in failed: ${fs.readFileSync(standIn('error.txt'), 'utf8')}\nits environment: ${
          fs.existsSync(standIn('env.json')) ? fs.readFileSync(standIn('env.json'), 'utf8') : 'not written'
        }`,
      );
    return await poll(
      () => {
        if (fs.existsSync(standIn('error.txt'))) throw new PollAbortError(failed().message);
        return fs.existsSync(standIn(name)) ? readJson(name) : false;
      },
      { timeoutMs, description: `the stand-in to write .stand-in/${name}` },
    ).catch((err: Error) => {
      throw fs.existsSync(standIn('error.txt')) ? failed() : err;
    });
  }

  const agentsText = (predicate: (t: string) => boolean, timeoutMs = 20_000) =>
    harness!.waitForText(predicate, timeoutMs, () => harness!.viewText('Agents'));

  before(async function () {
    ({ harness } = await startWithCoordinator({
      name: 'sw4rm-launch-e2e',
      viewport: { width: 1400, height: 900 },
      workspaceFiles: { '.sw4rm/agents.json': `${JSON.stringify(AGENTS_JSON, null, 2)}\n` },
      userSettings: { 'sw4rm.bridge.port': 0 },
    }));
    const env = await harness.copyAgentEnvironment(PEER);
    clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    const registered = await clients.registerAgent(descriptorMessage(PEER));
    assert.ok(registered.accepted, registered.reason);
    await harness.openViewContainer('SW4RM');
    await harness.showOnly('Agents', 'Worktrees', 'Approvals');
  });

  after(async function () {
    clients?.close();
    await disposeAfter(harness, this.currentTest, 'launch');
  });

  it('offers Launch Agent… on the Agents view', async function () {
    await agentsText((t) => t.includes(PEER));
    const button = harness!.pane('Agents').locator('.pane-header .action-label[aria-label="Launch Agent…"]');
    await button.waitFor({ state: 'attached', timeout: 15_000 });
  });

  it('refuses a profile whose program is not installed before launching anything, naming the program', async function () {
    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('SW4RM: Launch Agent…');
    await harness!.chooseQuickPick(MISSING_NAME, undefined, PROFILE_PICK);
    const toast = page()
      .locator('.notification-toast', { hasText: `${MISSING_NAME} cannot be launched` })
      .first();
    await toast.waitFor({ state: 'visible', timeout: 15_000 });
    // The toast's accessible label holds the whole message (its text may be cut to the toast's width).
    const message =
      (await toast.locator('.notification-list-item').first().getAttribute('aria-label')) ?? (await toast.innerText());
    assert.ok(message.includes(MISSING_PROGRAM), message);
    assert.equal(await toast.locator('.monaco-button', { hasText: 'Open Settings' }).count(), 1);
    await harness!.runCommand('Notifications: Clear All Notifications');
    assert.equal(
      fs.existsSync(path.join(path.dirname(harness!.workspaceDir), `${REPO_ID}.sw4rm-worktrees`)),
      false,
      'no worktree was made',
    );
    assert.doesNotMatch(await harness!.viewText('Agents'), new RegExp(MISSING_NAME));
  });

  it('launches the stand-in in a new worktree: its terminal runs it, the Agents and Worktrees views show it, its message waits unread', async function () {
    await harness!.runCommand('SW4RM: Launch Agent…');
    await harness!.chooseQuickPick(PROFILE_NAME, undefined, PROFILE_PICK);
    // One repository: no repository question. Then the worktree and its base branch.
    await harness!.chooseQuickPick('New worktree from branch…');
    await harness!.chooseQuickPick('main');
    const launched = await harness!.waitForText(
      (t) => new RegExp(`Launched \\S+ \\(${PROFILE_NAME}\\) in worktree \\S+\\.`).test(t),
      60_000,
    );
    [, agentId, worktreeId] = new RegExp(`Launched (\\S+) \\(${PROFILE_NAME}\\) in worktree (\\S+)\\.`).exec(launched)!;
    assert.match(agentId, new RegExp(`^${PROFILE_ID}-\\d+$`));
    worktreePath = path.join(path.dirname(harness!.workspaceDir), `${REPO_ID}.sw4rm-worktrees`, worktreeId);

    // The stand-in reached the bridge with its own credential: the tools, the agents, its message to the peer accepted.
    const sent = (await standInFile('mcp-sent.json')) as {
      me: string;
      peer: string;
      tools: string[];
      agents: unknown;
      sent: { accepted: boolean };
    };
    assert.equal(sent.me, agentId);
    for (const tool of ['list_agents', 'send_message', 'read_inbox'])
      assert.ok(sent.tools.includes(tool), `${tool} in ${sent.tools.join(', ')}`);
    for (const id of [agentId, PEER]) assert.ok(JSON.stringify(sent.agents).includes(id), JSON.stringify(sent.agents));
    assert.equal(sent.peer, PEER);
    assert.equal(sent.sent.accepted, true, JSON.stringify(sent.sent));

    // Its terminal: named after it, in the panel.
    await harness!.waitForText((t) => t.includes(`SW4RM: ${agentId} (${PROFILE_NAME})`), 15_000);

    // The Agents view: its profile and launch state; the peer's inbox holds the stand-in's message, unread.
    await agentsText(
      (t) =>
        new RegExp(`${agentId} · [A-Z_]+\\s*${PROFILE_NAME} · terminal running · 0 unread`).test(t) &&
        new RegExp(`${PEER}[^\\n]*\\n?[^\\n]*1/\\d+ queued`).test(t),
    );
    // The Worktrees view: its worktree, bound to it.
    const worktrees = await harness!.waitForText(
      (t) => t.includes(worktreeId) && t.includes(`${agentId} (home`),
      20_000,
      () => harness!.viewText('Worktrees'),
    );
    assert.match(worktrees, new RegExp(`${agentId} \\(home`));

    // The wiring stays out of git (the worktree's own exclude file), and the token is never on disk.
    const status = git(worktreePath, 'status', '--porcelain', '--untracked-files=all');
    for (const wired of ['.mcp.json', '.claude/settings.local.json', '.sw4rm/AGENT.md']) {
      assert.ok(fs.existsSync(path.join(worktreePath, wired)), `${wired} was written`);
      assert.ok(!status.includes(wired), `${wired} is ignored by git:\n${status}`);
    }
    assert.doesNotMatch(fs.readFileSync(path.join(worktreePath, '.mcp.json'), 'utf8'), /Bearer [A-Za-z0-9_-]{16,}/);
    assert.equal(git(harness!.workspaceDir, 'status', '--porcelain'), '', 'nothing was written into the main checkout');

    // A message to the stand-in from the editor waits in its inbox, unread, until it calls read_inbox.
    await harness!.contextMenu('Agents', agentId, 'Send Message…');
    await harness!.answerQuickInput(`Send Message to ${agentId}: Payload Source`);
    await harness!.answerQuickInput(`Send Message to ${agentId}: Type the Payload`, JSON.stringify({ text: GREETING }));
    await harness!.answerQuickInput('Send Message: Content Type');
    await harness!.waitForText((t) => t.includes(`to ${agentId} (application/json)`), 15_000);
    await agentsText((t) =>
      new RegExp(`${agentId} · [A-Z_]+\\s*${PROFILE_NAME} · terminal running · 1 unread`).test(t),
    );
    fs.writeFileSync(standIn('go-read'), '');
    const read = await standInFile('mcp-read.json');
    assert.ok(JSON.stringify(read).includes(GREETING), JSON.stringify(read));
    await agentsText((t) =>
      new RegExp(`${agentId} · [A-Z_]+\\s*${PROFILE_NAME} · terminal running · 0 unread`).test(t),
    );
  });

  it("asks in the editor before the stand-in's Bash `rm -rf build`; Approve in the panel reaches the hook as allow", async function () {
    const row = harness!.viewRow('Approvals', agentId);
    await row.waitFor({ state: 'visible', timeout: 30_000 });
    assert.equal(fs.existsSync(standIn('hook-answer.json')), false, 'the hook waits for the decision');
    await row.click();
    const frame = await harness!.webviewFrameShowing('rm -rf build');
    await frame.locator('#rationale').fill(RATIONALE);
    await frame.locator('#approve').click();
    const answer = (await standInFile('hook-answer.json')) as {
      code: number;
      decision: string | null;
      stdout: string;
      stderr: string;
    };
    assert.equal(answer.code, 0, JSON.stringify(answer));
    assert.equal(answer.decision, 'allow', JSON.stringify(answer));

    // The screenshot: the Agents view with the launched agent (its worktree beneath it) and its terminal.
    await harness!.runCommand('View: Close All Editors');
    await harness!.clearNotifications();
    await harness!.showOnly('Agents', 'Worktrees');
    const agentRow = harness!.viewRow('Agents', agentId);
    if ((await agentRow.getAttribute('aria-expanded')) !== 'true') await agentRow.click();
    await agentsText((t) => t.includes(`Worktree ${worktreeId}`));
    await harness!.sideBarWidth(640);
    await harness!.runCommand('SW4RM: Show Terminal');
    await harness!.chooseQuickPick(agentId);
    // The terminal draws on a canvas: its tab, titled after the agent, says which one is shown.
    await page().locator('.xterm').first().waitFor({ state: 'visible', timeout: 15_000 });
    await harness!.waitForText((t) => t.includes(`SW4RM: ${agentId} (${PROFILE_NAME})`), 15_000);
    await page().mouse.move(1, 1);
    await page().locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 5_000 });
    // The terminal's size overlay (shown while it resizes) goes away by itself; cosmetic, so not an error.
    await poll(async () => (await page().locator('.terminal-overlay-widget').count()) === 0, {
      timeoutMs: 5_000,
    }).catch(() => undefined);
    await harness!.screenshotForDocs('launch-agent');
  });

  it('closing the terminal marks the agent EXITED; Relaunch reopens it in the same worktree', async function () {
    await harness!.runCommand('SW4RM: Show Terminal');
    await harness!.chooseQuickPick(agentId);
    await harness!.runCommand('Terminal: Kill the Active Terminal Instance');
    await agentsText((t) => new RegExp(`${agentId} · [A-Z_]+\\s*${PROFILE_NAME} · exited`).test(t));

    fs.rmSync(path.join(worktreePath, '.stand-in'), { recursive: true, force: true });
    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.contextMenu('Agents', agentId, 'Relaunch');
    await harness!.waitForText(
      (t) => t.includes(`Relaunched ${agentId} (${PROFILE_NAME}) in worktree ${worktreeId}.`),
      60_000,
    );
    await agentsText((t) => new RegExp(`${agentId} · [A-Z_]+\\s*${PROFILE_NAME} · terminal running`).test(t));
    // The same agent again, in the same worktree, with a working credential (its send with the same key is the first one's).
    const sent = (await standInFile('mcp-sent.json')) as { me: string; sent: { accepted: boolean } };
    assert.equal(sent.me, agentId);
    assert.equal(sent.sent.accepted, true, JSON.stringify(sent.sent));
    await harness!.waitForText((t) => t.includes(`SW4RM: ${agentId} (${PROFILE_NAME})`), 15_000);
  });
});
