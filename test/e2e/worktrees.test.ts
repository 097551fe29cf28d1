import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { CoordinatorClients, canonicalDefinition, unary } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { disposeAfter, poll, startWithCoordinator, type CodeServerHarness } from './harness';
import { git } from '../support/gitRepo';

const AGENT = 'e2e-wt-agent';
/** An agent bound through the editor's command, and a worktree deleted by hand. */
const SECOND = 'e2e-wt-second';
const STALE = 'e2e-wt-stale';
/** The harness opens `<temp>/workspace`, a git repository: its repo_id is its folder's name. */
const REPO_ID = 'workspace';

type ServiceClient = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

describe('worktrees in a real editor (code-server + Chromium, an agent bound through WorktreeService)', function () {
  let harness: CodeServerHarness | undefined;
  let clients: CoordinatorClients | undefined;
  let worktreeService: ServiceClient | undefined;
  let token: string;

  /**
   * Bind Agent to Worktree… from the palette: another agent id typed, a new worktree from main, the proposed worktree id
   * (the agent id) kept; waits for the notification that it is bound.
   */
  async function bindThroughCommand(agentId: string): Promise<void> {
    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('SW4RM: Bind Agent to Worktree…');
    await harness!.chooseQuickPick('Another agent id…');
    await harness!.answerQuickInput('Bind Agent to Worktree: Agent Id', agentId);
    await harness!.chooseQuickPick('New worktree from a branch…');
    await harness!.chooseQuickPick('main');
    assert.equal(await harness!.answerInputBox(), agentId, 'the worktree id proposed is the agent id');
    await harness!.waitForText(
      (t) => t.includes(`Agent ${agentId} is bound to worktree ${agentId} (BOUND_HOME)`),
      30_000,
    );
  }

  const worktreeFolder = (id: string): string =>
    path.join(path.dirname(harness!.workspaceDir), `${REPO_ID}.sw4rm-worktrees`, id);

  before(async function () {
    ({ harness } = await startWithCoordinator({
      name: 'sw4rm-worktrees-e2e',
      viewport: { width: 1400, height: 900 },
      userSettings: { 'workbench.secondarySideBar.defaultVisibility': 'hidden' },
    }));
    const env = await harness.copyAgentEnvironment(AGENT);
    token = env.SW4RM_TOKEN;
    clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, token);
    const registered = await clients.registerAgent(descriptorMessage(AGENT));
    assert.ok(registered.accepted, registered.reason);
    let node: unknown = grpc.loadPackageDefinition(canonicalDefinition());
    for (const part of 'sw4rm.worktree.WorktreeService'.split('.')) node = (node as Record<string, unknown>)[part];
    worktreeService = new (node as grpc.ServiceClientConstructor)(
      env.SW4RM_WORKTREE_ADDR,
      grpc.credentials.createInsecure(),
    ) as ServiceClient;
    await harness.openViewContainer('SW4RM');
  });

  after(async function () {
    worktreeService?.close();
    clients?.close();
    await disposeAfter(harness, this.currentTest, 'worktrees');
  });

  it('shows the repository in the Worktrees view before any agent is bound', async function () {
    await harness!.showOnly('Agents', 'Worktrees');
    await harness!.waitForText(
      (t) => t.includes(REPO_ID) && t.includes('0 worktrees'),
      30_000,
      () => harness!.viewText('Worktrees'),
    );
  });

  it('binding an agent (WorktreeService.Bind) shows its worktree in the Worktrees view and under the agent in the Agents view', async function () {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    const bound = await unary<{ ok: boolean; reason?: string }>(
      worktreeService!,
      'Bind',
      { agent_id: AGENT, repo_id: REPO_ID, worktree_id: AGENT },
      metadata,
    );
    assert.ok(bound.ok, JSON.stringify(bound));
    const worktreePath = path.join(path.dirname(harness!.workspaceDir), `${REPO_ID}.sw4rm-worktrees`, AGENT);
    assert.ok(fs.existsSync(path.join(worktreePath, 'README.md')), `${worktreePath} is a checkout`);

    const worktrees = await harness!.waitForText(
      (t) => t.includes(AGENT) && t.includes(`sw4rm/${AGENT}`),
      15_000,
      () => harness!.viewText('Worktrees'),
    );
    assert.match(worktrees, new RegExp(`sw4rm/${AGENT} ← main · up to date · clean · ${AGENT} \\(home\\)`));

    // The agent's row has its worktree as its first child.
    const agentRow = harness!.viewRow('Agents', AGENT);
    await agentRow.waitFor({ state: 'visible', timeout: 15_000 });
    if ((await agentRow.getAttribute('aria-expanded')) !== 'true') await agentRow.click();
    const agents = await harness!.waitForText(
      (t) => t.includes(`Worktree ${AGENT}`),
      15_000,
      () => harness!.viewText('Agents'),
    );
    assert.match(agents, new RegExp(`Worktree ${AGENT}\\s*sw4rm/${AGENT} · BOUND_HOME`));

    // A change in the worktree shows as its dirty count once the view refreshes.
    fs.writeFileSync(path.join(worktreePath, 'notes.txt'), 'work in progress\n');
    await harness!.runCommand('SW4RM: Refresh Worktrees');
    await harness!.waitForText(
      (t) => t.includes('1 changed file'),
      15_000,
      () => harness!.viewText('Worktrees'),
    );
    fs.rmSync(path.join(worktreePath, 'notes.txt'));
    await harness!.runCommand('SW4RM: Refresh Worktrees');
    await harness!.waitForText(
      (t) => t.includes(`up to date · clean`),
      15_000,
      () => harness!.viewText('Worktrees'),
    );

    // The agent's commit is ahead of its base.
    fs.writeFileSync(path.join(worktreePath, 'feature.txt'), "the agent's feature\n");
    git(worktreePath, 'add', 'feature.txt');
    git(worktreePath, 'commit', '-q', '-m', 'Add the feature');
    await harness!.runCommand('SW4RM: Refresh Worktrees');
    await harness!.waitForText(
      (t) => t.includes('↑1 ↓0'),
      15_000,
      () => harness!.viewText('Worktrees'),
    );
    await harness!.showOnly('Worktrees', 'Agents');
    await harness!.sideBarWidth(760);
    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.screenshotForDocs('worktrees');
  });

  it('Merge Back on a worktree whose change conflicts with the main checkout shows the conflict prediction and changes nothing', async function () {
    const worktreePath = path.join(path.dirname(harness!.workspaceDir), `${REPO_ID}.sw4rm-worktrees`, AGENT);
    fs.writeFileSync(path.join(worktreePath, 'README.md'), "# e2e workspace\n\nThe agent's version of this line.\n");
    git(worktreePath, 'commit', '-q', '-am', 'Agent: reword the README');
    fs.writeFileSync(path.join(harness!.workspaceDir, 'README.md'), '# e2e workspace\n\nYour version of this line.\n');
    git(harness!.workspaceDir, 'commit', '-q', '-am', 'You: reword the README');
    const before = git(harness!.workspaceDir, 'rev-parse', 'HEAD').trim();

    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('SW4RM: Merge Back…');
    await harness!.chooseQuickPick(AGENT);

    const notice = await harness!.waitForText((t) => t.includes('would conflict in 1 file: README.md'), 30_000);
    assert.match(
      notice,
      new RegExp(
        `Merge Back of sw4rm/${AGENT} into main would conflict in 1 file: README\\.md\\. Nothing was changed\\.`,
      ),
    );
    // The prediction document: the conflicted file with its stages, and git's own message.
    const document = await harness!.waitForText(
      (t) => t.includes('CONFLICT'),
      15_000,
      () => harness!.editorText(),
    );
    assert.match(document, /Conflicts predicted by git merge-tree --write-tree/);
    assert.match(document, /README\.md/);
    assert.match(document, /CONFLICT \(content\): Merge conflict in README\.md/);
    assert.equal(git(harness!.workspaceDir, 'rev-parse', 'HEAD').trim(), before, 'the main checkout did not move');
    assert.equal(git(harness!.workspaceDir, 'status', '--porcelain'), '', 'the main checkout has no change');
    await harness!.sideBarWidth(520);
    await harness!.screenshotForDocs('merge-conflicts');
  });

  it('refuses to remove the worktree the agent is bound to, naming the agent', async function () {
    await harness!.runCommand('SW4RM: Remove Worktree');
    await harness!.chooseQuickPick(AGENT);
    await harness!.waitForText(
      (t) => t.includes(`Worktree ${AGENT} is not removed: ${AGENT} (home, BOUND_HOME) is bound to it. Unbind first.`),
      15_000,
    );
    const worktreePath = path.join(path.dirname(harness!.workspaceDir), `${REPO_ID}.sw4rm-worktrees`, AGENT);
    await poll(() => fs.existsSync(worktreePath), { timeoutMs: 1_000, description: 'the worktree still there' });
  });

  it('binds an agent through Bind Agent to Worktree… to a new worktree from a branch, and removes it once unbound only after asking twice', async function () {
    const env = await harness!.copyAgentEnvironment(SECOND);
    await bindThroughCommand(SECOND);
    await harness!.waitForText(
      (t) => t.includes(`sw4rm/${SECOND} ← main`) && t.includes(`${SECOND} (home)`),
      15_000,
      () => harness!.viewText('Worktrees'),
    );
    assert.ok(fs.existsSync(path.join(worktreeFolder(SECOND), 'README.md')));

    // Unbound (by the agent itself), with a file not committed: removal asks twice and keeps everything recoverable.
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${env.SW4RM_TOKEN}`);
    await unary(worktreeService!, 'Unbind', { agent_id: SECOND }, metadata);
    fs.writeFileSync(path.join(worktreeFolder(SECOND), 'unsaved.txt'), 'work not committed\n');
    await harness!.runCommand('SW4RM: Refresh Worktrees');
    await harness!.waitForText(
      (t) => new RegExp(`sw4rm/${SECOND} ← main · up to date · 1 changed file · not bound`).test(t),
      15_000,
      () => harness!.viewText('Worktrees'),
    );
    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('SW4RM: Remove Worktree');
    await harness!.chooseQuickPick(SECOND);
    assert.match(await harness!.answerDialog('Remove'), new RegExp(`Remove worktree ${SECOND}\\?`));
    const second = await harness!.answerDialog('Remove Anyway');
    assert.match(second, new RegExp(`Worktree ${SECOND} has uncommitted files \\(1\\)\\. Remove it anyway\\?`));
    assert.match(second, /A snapshot of all its files .* is written first/);
    assert.match(second, new RegExp(`its branch sw4rm/${SECOND} is kept`));
    const removed = await harness!.waitForText((t) => t.includes(`Removed worktree ${SECOND}`), 30_000);
    const snapshot = new RegExp(
      `its files are in snapshot (refs/sw4rm/snapshots/${SECOND}/\\S+); branch sw4rm/${SECOND} is kept`,
    ).exec(removed)?.[1];
    assert.ok(snapshot, removed);
    assert.ok(!fs.existsSync(worktreeFolder(SECOND)), 'the folder is gone');
    assert.equal(
      git(harness!.workspaceDir, 'show', `${snapshot.replace(/\.$/, '')}:unsaved.txt`),
      'work not committed\n',
      'the uncommitted file is in the snapshot',
    );
    git(harness!.workspaceDir, 'rev-parse', '--verify', `refs/heads/sw4rm/${SECOND}`);
    await harness!.waitForText(
      (t) => !t.includes(SECOND),
      15_000,
      () => harness!.viewText('Worktrees'),
    );
  });

  it('marks a worktree whose folder was deleted as stale, lists it, and prunes exactly that', async function () {
    git(harness!.workspaceDir, 'worktree', 'add', '-q', '-b', `sw4rm/${STALE}`, worktreeFolder(STALE));
    fs.rmSync(worktreeFolder(STALE), { recursive: true, force: true });
    await harness!.runCommand('SW4RM: Refresh Worktrees');
    await harness!.waitForText(
      (t) => t.includes(`${STALE}`) && t.includes('stale: folder gone'),
      15_000,
      () => harness!.viewText('Worktrees'),
    );
    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('SW4RM: Prune Stale Worktrees…');
    const question = await harness!.answerDialog('Prune');
    assert.match(question, /Prune 1 stale worktree\?/);
    assert.match(question, new RegExp(`no file and no branch is deleted: ${REPO_ID}: ${STALE} \\(`));
    await harness!.waitForText((t) => t.includes(`Pruned 1 stale worktree: ${REPO_ID}: ${STALE}`), 30_000);
    await harness!.waitForText(
      (t) => !t.includes(STALE),
      15_000,
      () => harness!.viewText('Worktrees'),
    );
    git(harness!.workspaceDir, 'rev-parse', '--verify', `refs/heads/sw4rm/${STALE}`);
  });

  it("brings a removed worktree's work back: binding its id again checks out the kept branch, Restore Snapshot… writes the files back", async function () {
    await bindThroughCommand(SECOND);
    assert.ok(
      !fs.existsSync(path.join(worktreeFolder(SECOND), 'unsaved.txt')),
      'the uncommitted file is not in the branch',
    );

    await harness!.runCommand('SW4RM: Restore Snapshot…');
    await harness!.chooseQuickPick(SECOND);
    await harness!.chooseQuickPick(`refs/sw4rm/snapshots/${SECOND}/`);
    assert.match(
      await harness!.answerDialog('Restore'),
      new RegExp(`Restore worktree ${SECOND} to the snapshot of .*\\? .*The current state is snapshotted first`),
    );
    await harness!.waitForText(
      (t) =>
        new RegExp(`Restored worktree ${SECOND}\\. The state before is snapshot refs/sw4rm/snapshots/${SECOND}/`).test(
          t,
        ),
      30_000,
    );
    assert.equal(fs.readFileSync(path.join(worktreeFolder(SECOND), 'unsaved.txt'), 'utf8'), 'work not committed\n');
    await harness!.runCommand('SW4RM: Refresh Worktrees');
    await harness!.waitForText(
      (t) => new RegExp(`sw4rm/${SECOND} ← main · up to date · 1 changed file · ${SECOND} \\(home\\)`).test(t),
      15_000,
      () => harness!.viewText('Worktrees'),
    );
  });

  it("Show Worktree Changes opens the editor's diff of each changed file against the base", async function () {
    await harness!.runCommand('SW4RM: Show Worktree Changes');
    await harness!.chooseQuickPick(AGENT);
    const tab = harness!.page.locator('.tabs-container .tab', { hasText: `${AGENT} ↔ main` }).first();
    await tab.waitFor({ state: 'visible', timeout: 30_000 });
    const editor = await harness!.waitForText(
      (t) => t.includes('feature.txt') && t.includes('README.md'),
      30_000,
      () => harness!.page.locator('.editor-group-container.active').first().innerText(),
    );
    assert.match(editor.replace(/\u00a0/g, ' '), /the agent's feature/);
  });

  it('Merge Back… without conflicts asks for approval with the diff, merges once approved in the panel, and Undo Merge puts the checkout back', async function () {
    // The agent drops its conflicting commit: what is left (feature.txt) merges cleanly.
    git(worktreeFolder(AGENT), 'reset', '-q', '--hard', 'HEAD~1');
    const before = git(harness!.workspaceDir, 'rev-parse', 'HEAD').trim();
    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('SW4RM: Merge Back…');
    await harness!.chooseQuickPick(AGENT);
    await harness!.chooseQuickPick('Squash');
    const question = await harness!.answerDialog('Ask for Approval');
    assert.match(
      question,
      new RegExp(
        `Squash sw4rm/${AGENT} into main\\? 1 commit, 1 file changed \\(feature\\.txt\\)\\. No conflict is predicted\\.`,
      ),
    );
    await harness!.waitForText((t) => t.includes(`Merge Back of sw4rm/${AGENT} waits for approval`), 15_000);
    assert.equal(git(harness!.workspaceDir, 'rev-parse', 'HEAD').trim(), before, 'nothing merged before the approval');

    // The approval, with the diff, in the Approvals view and its panel.
    await harness!.showOnly('Approvals', 'Worktrees');
    const summary = `Merge back sw4rm/${AGENT} into main (squash)`;
    await harness!.clickViewRow('Approvals', summary);
    const frame = await harness!.webviewFrameShowing(summary);
    const content = await frame.locator('#content').innerText();
    assert.ok(
      content.includes('feature.txt') && content.includes("+the agent's feature"),
      `the panel shows the diff:\n${content}`,
    );
    await frame.locator('#rationale').fill('Reviewed the feature; squash it.');
    await frame.locator('#approve').click();

    const merged = await harness!.waitForText((t) => t.includes(`Merged sw4rm/${AGENT} into main (squash)`), 30_000);
    assert.match(merged, /Undo Merge puts the previous state back/);
    const after = git(harness!.workspaceDir, 'rev-parse', 'HEAD').trim();
    assert.notEqual(after, before);
    assert.equal(fs.readFileSync(path.join(harness!.workspaceDir, 'feature.txt'), 'utf8'), "the agent's feature\n");
    assert.equal(
      git(harness!.workspaceDir, 'log', '-1', '--format=%s'),
      'Add the feature\n',
      'a squash of one commit keeps its subject',
    );

    await harness!.page
      .locator('.notification-toast', { hasText: `Merged sw4rm/${AGENT}` })
      .locator('.monaco-button', { hasText: 'Undo Merge' })
      .click();
    assert.match(
      await harness!.answerDialog('Undo Merge'),
      new RegExp(`Undo the squash of sw4rm/${AGENT} into main\\?`),
    );
    await harness!.waitForText((t) => t.includes(`Undone: main is back on ${before.slice(0, 12)}`), 30_000);
    assert.equal(git(harness!.workspaceDir, 'rev-parse', 'HEAD').trim(), before);
    assert.ok(!fs.existsSync(path.join(harness!.workspaceDir, 'feature.txt')), 'the merged file is gone again');
    assert.equal(git(harness!.workspaceDir, 'status', '--porcelain'), '');
  });

  it('says the coordinator is not running while it is stopped, offers Start, and shows the worktrees again once it runs', async function () {
    await harness!.showOnly('Agents', 'Worktrees');
    await harness!.runCommand('SW4RM: Stop Coordinator');
    await harness!.waitForText(
      (t) => t.includes('The coordinator is not running.') && !t.includes(AGENT),
      30_000,
      () => harness!.viewText('Worktrees'),
    );
    await harness!.pane('Worktrees').locator('.monaco-button', { hasText: 'Start Coordinator' }).click();
    await harness!.waitForText(
      (t) => /SW4RM :\d+/.test(t),
      30_000,
      () => harness!.statusBarText(),
    );
    // The binding was kept in the store: the worktree is still the agent's home after the restart.
    await harness!.waitForText(
      (t) => t.includes(`sw4rm/${AGENT} ← main`) && t.includes(`${AGENT} (home)`),
      30_000,
      () => harness!.viewText('Worktrees'),
    );
  });
});
