import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { useCliProcesses } from '../support/cli';
import { WorktreeClient } from '../support/clients';
import { git, makeRepo, writeFile } from '../support/gitRepo';
import { pollUntil } from '../support/poll';

describe("the operator console's worktree commands (sw4rm-coordinator --operator --workspace)", function () {
  this.timeout(60_000);
  const processes = useCliProcesses('sw4rm-int-wtconsole-');

  it('binds with setup from the flags, lists, merges back through an approval typed in the console, undoes, removes with --confirm, restores, prunes', async () => {
    const dir = processes.dataDir();
    const repoPath = makeRepo(dir, 'app', { 'README.md': 'hello\n', 'src/a.txt': 'a\n' });
    fs.appendFileSync(path.join(repoPath, '.git', 'info', 'exclude'), '.env\n');
    writeFile(repoPath, '.env', 'TOKEN=local\n');
    const cli = processes.runWithInput(
      '--port',
      '0',
      '--data-dir',
      path.join(dir, 'data'),
      '--workspace',
      repoPath,
      '--operator',
      '--setup-copy',
      '.env',
      '--setup-command',
      'echo setting up',
      '--snapshot-retention',
      '7',
    );
    const env = await cli.environment();
    await cli.waitForOutput(/# HITL operator cli:\S+ attached/);
    const client = new WorktreeClient(env.SW4RM_WORKTREE_ADDR, env.SW4RM_TOKEN);
    processes.closeAfter(client);

    // A Bind through the RPC makes the worktree, and its setup runs (copies, command output on stderr).
    assert.deepEqual(await client.call('Bind', { agent_id: 'coder', repo_id: 'app', worktree_id: 'w1' }), {
      ok: true,
      reason: '',
    });
    const w1 = path.join(`${repoPath}.sw4rm-worktrees`, 'w1');
    await pollUntil('the setup to finish', () => (/worktree\.setup_finished/.test(cli.stderr) ? true : undefined));
    assert.match(cli.stderr, /setup app\/w1: setting up/);
    assert.equal(fs.readFileSync(path.join(w1, '.env'), 'utf8'), 'TOKEN=local\n');

    writeFile(w1, 'src/a.txt', 'a by the agent\n');
    git(w1, 'commit', '-q', '-am', 'agent edits a');
    writeFile(w1, 'scratch.txt', 'not committed\n'); // (.env is ignored: .git/info/exclude is shared by the worktrees)
    cli.type('worktrees');
    await cli.waitForOutput(/app\/w1 {2}sw4rm\/w1 {2}\+1\/-0 {2}1 uncommitted {2}agents coder:BOUND_HOME/);

    // Merge back: a preview, then an ordinary pending approval the console decides.
    cli.type('merge app w1 squash');
    const [, invocationId] = await cli.waitForOutput(/approval (\S+) opened/);
    assert.match(
      cli.stdout,
      /merge preview refs\/heads\/sw4rm\/w1 → refs\/heads\/main \(squash\): 1 commit\(s\), 1 file\(s\)\n {2}\S+ agent edits a\n {2}M\tsrc\/a\.txt/,
    );
    assert.match(cli.stdout, new RegExp(`HITL pending: ${invocationId}  MANUAL_OVERRIDE`));
    cli.type(`approve ${invocationId} reviewed the diff`);
    const [, mergeId] = await cli.waitForOutput(/merged app\/w1: merge (\S+) /);
    assert.equal(fs.readFileSync(path.join(repoPath, 'src/a.txt'), 'utf8'), 'a by the agent\n');
    cli.type('merges');
    await cli.waitForOutput(new RegExp(`\\n${mergeId}  app/w1  squash into refs/heads/main`));
    cli.type(`undo ${mergeId}`);
    await cli.waitForOutput(/undone: the target is back on /);
    assert.equal(fs.readFileSync(path.join(repoPath, 'src/a.txt'), 'utf8'), 'a\n');

    // Remove: refused while bound, then without --confirm (uncommitted files); confirmed, a snapshot and the branch stay.
    cli.type('remove app w1');
    await cli.waitForOutput(/error \(bound\): worktree w1 is bound/);
    assert.deepEqual(await client.call('Unbind', { agent_id: 'coder' }), { ok: true });
    cli.type('remove app w1');
    await cli.waitForOutput(/error \(dirty\): worktree w1 has 1 uncommitted file;/);
    cli.type('remove app w1 --confirm');
    const [, snapshotRef] = await cli.waitForOutput(/removed app\/w1; snapshot (\S+); branch kept/);
    assert.equal(fs.existsSync(w1), false);
    cli.type('snapshots app w1');
    await cli.waitForOutput(new RegExp(`\\n${snapshotRef.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}  `));

    // Bind the same id again (its kept branch), restore the snapshot: the uncommitted file is back.
    assert.deepEqual(await client.call('Bind', { agent_id: 'coder', repo_id: 'app', worktree_id: 'w1' }), {
      ok: true,
      reason: '',
    });
    cli.type(`restore app w1 ${snapshotRef}`);
    await cli.waitForOutput(/restored \S+ into app\/w1; the state before is refs\/sw4rm\/snapshots\/w1\//);
    assert.equal(fs.readFileSync(path.join(w1, 'scratch.txt'), 'utf8'), 'not committed\n');

    // Prune: listed first, then exactly that.
    assert.deepEqual(await client.call('Bind', { agent_id: 'other', repo_id: 'app', worktree_id: 'w2' }), {
      ok: true,
      reason: '',
    });
    assert.deepEqual(await client.call('Unbind', { agent_id: 'other' }), { ok: true });
    await pollUntil('the setup of w2 to finish', () =>
      /worktree\.setup_finished.*"worktree_id":"w2"/.test(cli.stderr) ? true : undefined,
    );
    fs.rmSync(path.join(`${repoPath}.sw4rm-worktrees`, 'w2'), { recursive: true, force: true });
    cli.type('prune apply');
    await cli.waitForOutput(/error: run "prune" first/);
    cli.type('prune');
    await cli.waitForOutput(/would prune app\/w2: .*\ntype "prune apply"/);
    cli.type('prune apply');
    await cli.waitForOutput(/pruned app\/w2\n/);
    assert.doesNotMatch(git(repoPath, 'worktree', 'list'), /w2/);
  });

  it('--help lists the worktree flags; a bad one is a usage error', async () => {
    let cli = processes.run('--help');
    assert.equal(await cli.exit(), 0);
    for (const flag of [
      '--worktrees-folder',
      '--setup-copy',
      '--setup-command',
      '--setup-timeout',
      '--trust-repository-setup',
      '--snapshot-retention',
    ]) {
      assert.ok(cli.stdout.includes(flag), flag);
    }
    cli = processes.run('--snapshot-retention', '0');
    assert.equal(await cli.exit(), 2);
    assert.match(cli.stderr, /--snapshot-retention must be a whole number from 1 to 3650/);
    cli = processes.run('--setup-copy', '../outside');
    assert.equal(await cli.exit(), 2);
    assert.match(cli.stderr, /--setup-copy: .*contains "\.\."/);
  });
});
