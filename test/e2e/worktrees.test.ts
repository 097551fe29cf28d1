import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Locator } from 'playwright-core';
import { CoordinatorClients, canonicalDefinition, unary } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { ROOT, poll, startWithCoordinator, type CodeServerHarness } from './harness';

const AGENT = 'e2e-wt-agent';
/** The harness opens `<temp>/workspace`, a git repository: its repo_id is its folder's name. */
const REPO_ID = 'workspace';
const SCREENSHOTS = path.join(ROOT, 'media', 'screenshots');

/** git in `cwd` with an identity of its own (CI may have none); fails with git's output. */
function git(cwd: string, ...args: string[]): string {
  const r = spawnSync('git', ['-c', 'user.name=SW4RM e2e', '-c', 'user.email=e2e@sw4rm.invalid', '-c', 'commit.gpgsign=false', ...args],
    { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')} in ${cwd}: ${r.stderr}`);
  return r.stdout;
}

type ServiceClient = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

describe('worktrees in a real editor (code-server + Chromium, an agent bound through WorktreeService)', function () {
  let harness: CodeServerHarness | undefined;
  let clients: CoordinatorClients | undefined;
  let worktreeService: ServiceClient | undefined;
  let token: string;

  const pane = (title: string): Locator =>
    harness!.page.locator('.pane').filter({ has: harness!.page.locator('.pane-header', { hasText: title }) });

  /** Collapses every view of the SW4RM container but the ones named, so that those have room (and a clean screenshot). */
  async function showOnly(...titles: string[]): Promise<void> {
    for (const header of await harness!.page.locator('.part.sidebar .pane-header').all()) {
      const title = (await header.innerText()).split('\n')[0].trim();
      const expanded = (await header.getAttribute('aria-expanded')) === 'true';
      const wanted = titles.some((t) => title.toLowerCase() === t.toLowerCase());
      if (expanded !== wanted) await header.click();
    }
  }

  /** Drags the side bar's edge to `width` pixels (wide: rows show their descriptions whole), then moves the mouse away. */
  async function sideBarWidth(width: number): Promise<void> {
    const page = harness!.page;
    const box = await page.locator('.part.sidebar').boundingBox();
    if (!box) return;
    const y = box.y + box.height / 2;
    await page.mouse.move(box.x + box.width + 1, y);
    await page.mouse.down();
    await page.mouse.move(box.x + width, y, { steps: 8 });
    await page.mouse.up();
    await page.mouse.move(box.x + width + 300, box.y + box.height - 100);
    // The sash stays highlighted while hovered: the screenshot waits until it is not (cosmetic, so not an error).
    await poll(async () => (await page.locator('.monaco-sash.hover, .monaco-sash.active').count()) === 0, { timeoutMs: 3_000 }).catch(() => undefined);
  }

  before(async function () {
    ({ harness } = await startWithCoordinator({
      name: 'sw4rm-worktrees-e2e', viewport: { width: 1400, height: 900 },
      userSettings: { 'workbench.secondarySideBar.defaultVisibility': 'hidden' },
    }));
    const env = await harness.copyAgentEnvironment(AGENT);
    token = env.SW4RM_TOKEN;
    clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, token);
    const registered = await clients.registerAgent(descriptorMessage(AGENT));
    assert.ok(registered.accepted, registered.reason);
    let node: unknown = grpc.loadPackageDefinition(canonicalDefinition());
    for (const part of 'sw4rm.worktree.WorktreeService'.split('.')) node = (node as Record<string, unknown>)[part];
    worktreeService = new (node as grpc.ServiceClientConstructor)(env.SW4RM_WORKTREE_ADDR, grpc.credentials.createInsecure()) as ServiceClient;
    await harness.openViewContainer('SW4RM');
  });

  after(async function () {
    worktreeService?.close();
    clients?.close();
    if (harness && this.currentTest?.state === 'failed') await harness.screenshot('worktrees-failure').catch(() => undefined);
    await harness?.dispose();
  });

  it('shows the repository in the Worktrees view before any agent is bound', async function () {
    await showOnly('Agents', 'Worktrees');
    await harness!.waitForText((t) => t.includes(REPO_ID) && t.includes('0 worktrees'), 30_000, () => harness!.viewText('Worktrees'));
  });

  it('binding an agent (WorktreeService.Bind) shows its worktree in the Worktrees view and under the agent in the Agents view', async function () {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    const bound = await unary<{ ok: boolean; reason?: string }>(worktreeService!, 'Bind', { agent_id: AGENT, repo_id: REPO_ID, worktree_id: AGENT }, metadata);
    assert.ok(bound.ok, JSON.stringify(bound));
    const worktreePath = path.join(path.dirname(harness!.workspaceDir), `${REPO_ID}.sw4rm-worktrees`, AGENT);
    assert.ok(fs.existsSync(path.join(worktreePath, 'README.md')), `${worktreePath} is a checkout`);

    const worktrees = await harness!.waitForText((t) => t.includes(AGENT) && t.includes(`sw4rm/${AGENT}`), 15_000, () => harness!.viewText('Worktrees'));
    assert.match(worktrees, new RegExp(`sw4rm/${AGENT} ← main · up to date · clean · ${AGENT} \\(home\\)`));

    // The agent's row has its worktree as its first child.
    const agentRow = pane('Agents').locator('.monaco-list-row', { hasText: AGENT }).first();
    await agentRow.waitFor({ state: 'visible', timeout: 15_000 });
    if ((await agentRow.getAttribute('aria-expanded')) !== 'true') await agentRow.click();
    const agents = await harness!.waitForText((t) => t.includes(`Worktree ${AGENT}`), 15_000, () => harness!.viewText('Agents'));
    assert.match(agents, new RegExp(`Worktree ${AGENT}\\s*sw4rm/${AGENT} · BOUND_HOME`));

    // A change in the worktree shows as its dirty count once the view refreshes.
    fs.writeFileSync(path.join(worktreePath, 'notes.txt'), 'work in progress\n');
    await harness!.runCommand('SW4RM: Refresh Worktrees');
    await harness!.waitForText((t) => t.includes('1 changed file'), 15_000, () => harness!.viewText('Worktrees'));
    fs.rmSync(path.join(worktreePath, 'notes.txt'));
    await harness!.runCommand('SW4RM: Refresh Worktrees');
    await harness!.waitForText((t) => t.includes(`up to date · clean`), 15_000, () => harness!.viewText('Worktrees'));

    // The agent's commit is ahead of its base.
    fs.writeFileSync(path.join(worktreePath, 'feature.txt'), 'the agent\'s feature\n');
    git(worktreePath, 'add', 'feature.txt');
    git(worktreePath, 'commit', '-q', '-m', 'Add the feature');
    await harness!.runCommand('SW4RM: Refresh Worktrees');
    await harness!.waitForText((t) => t.includes('↑1 ↓0'), 15_000, () => harness!.viewText('Worktrees'));
    await showOnly('Worktrees', 'Agents');
    await sideBarWidth(760);
    await harness!.runCommand('Notifications: Clear All Notifications');
    const shot = await harness!.screenshot('worktrees');
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    fs.copyFileSync(shot, path.join(SCREENSHOTS, 'worktrees.png'));
  });

  it('Merge Back on a worktree whose change conflicts with the main checkout shows the conflict prediction and changes nothing', async function () {
    const worktreePath = path.join(path.dirname(harness!.workspaceDir), `${REPO_ID}.sw4rm-worktrees`, AGENT);
    fs.writeFileSync(path.join(worktreePath, 'README.md'), '# e2e workspace\n\nThe agent\'s version of this line.\n');
    git(worktreePath, 'commit', '-q', '-am', 'Agent: reword the README');
    fs.writeFileSync(path.join(harness!.workspaceDir, 'README.md'), '# e2e workspace\n\nYour version of this line.\n');
    git(harness!.workspaceDir, 'commit', '-q', '-am', 'You: reword the README');
    const before = git(harness!.workspaceDir, 'rev-parse', 'HEAD').trim();

    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('SW4RM: Merge Back…');
    const input = harness!.page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible', timeout: 15_000 });
    const row = harness!.page.locator('.quick-input-list .monaco-list-row', { hasText: AGENT }).first();
    await row.waitFor({ state: 'visible', timeout: 15_000 });
    await row.click();

    const notice = await harness!.waitForText((t) => t.includes('would conflict in 1 file: README.md'), 30_000);
    assert.match(notice, new RegExp(`Merge Back of sw4rm/${AGENT} into main would conflict in 1 file: README\\.md\\. Nothing was changed\\.`));
    // The prediction document: the conflicted file with its stages, and git's own message.
    const editor = harness!.page.locator('.editor-instance .view-lines').first();
    // Monaco renders spaces as no-break spaces.
    const document = await harness!.waitForText((t) => t.includes('CONFLICT'), 15_000, async () => (await editor.innerText()).replace(/\u00a0/g, ' '));
    assert.match(document, /Conflicts predicted by git merge-tree --write-tree/);
    assert.match(document, /README\.md/);
    assert.match(document, /CONFLICT \(content\): Merge conflict in README\.md/);
    assert.equal(git(harness!.workspaceDir, 'rev-parse', 'HEAD').trim(), before, 'the main checkout did not move');
    assert.equal(git(harness!.workspaceDir, 'status', '--porcelain'), '', 'the main checkout has no change');
    await sideBarWidth(520);
    const shot = await harness!.screenshot('merge-conflicts');
    fs.copyFileSync(shot, path.join(SCREENSHOTS, 'merge-conflicts.png'));
  });

  it('refuses to remove the worktree the agent is bound to, naming the agent', async function () {
    await harness!.runCommand('SW4RM: Remove Worktree');
    const row = harness!.page.locator('.quick-input-list .monaco-list-row', { hasText: AGENT }).first();
    await row.waitFor({ state: 'visible', timeout: 15_000 });
    await row.click();
    await harness!.waitForText((t) => t.includes(`Worktree ${AGENT} is not removed: ${AGENT} (home, BOUND_HOME) is bound to it. Unbind first.`), 15_000);
    const worktreePath = path.join(path.dirname(harness!.workspaceDir), `${REPO_ID}.sw4rm-worktrees`, AGENT);
    await poll(() => fs.existsSync(worktreePath), { timeoutMs: 1_000, description: 'the worktree still there' });
  });
});
