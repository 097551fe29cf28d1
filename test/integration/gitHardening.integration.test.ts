import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CoordinatorHost } from '../../src/server/host';
import { createGit } from '../../src/core/worktree/git';
import { bearer, CoordinatorClients, serviceClient, unary, type ServiceClient } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { git, makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface ToolFrame {
  data: Buffer;
}

/**
 * Issue 30, item 2: every git the coordinator runs ignores the programs a repository's configuration names. What an
 * agent's sandboxed command could write into the shared .git/config (fsmonitor, core.hooksPath with hooks, a filter
 * driver its .gitattributes selects, one more through include.path, a pager, an external diff, a diff driver's
 * command and textconv, a merge driver, gpg programs) is planted; then the coordinator's own operations run (Bind:
 * worktree add; git_status, git_diff, git_commit of the workspace tools; its Git on diff/show/log directly). Each
 * planted program would append its name to a marker file: the file never appears.
 */
describe('the coordinator never runs a program a repository configures (issue 30, item 2)', function () {
  this.timeout(180_000);
  let base: string;
  let dataDir: string;
  let repo: string;
  let host: CoordinatorHost;
  let tools: ServiceClient;
  let worktrees: ServiceClient;
  let marker: string;
  let token = '';

  const meta = (): grpc.Metadata => bearer(token);
  const ran = (): string => (fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8') : '');

  async function call(tool: string, args: unknown): Promise<Record<string, unknown>> {
    const frame = await unary<ToolFrame>(
      tools,
      'Call',
      {
        call_id: `c-${tool}-${Math.random().toString(36).slice(2)}`,
        tool_name: tool,
        provider_id: 'workspace',
        content_type: 'application/json',
        args: Buffer.from(JSON.stringify(args)),
      },
      meta(),
    );
    return JSON.parse(frame.data.toString('utf8')) as Record<string, unknown>;
  }

  before(async () => {
    base = fs.realpathSync(makeTempDir('sw4rm-int-githard-'));
    dataDir = makeTempDir('sw4rm-int-githard-data-');
    marker = path.join(base, 'MARKER');
    repo = makeRepo(base, 'app', {
      'README.md': 'hello\n',
      'notes.txt': 'one\n',
      'doc.md': 'doc\n',
      '.gitattributes': '*.txt filter=evil diff=evil merge=evil\n*.md filter=inc diff=inc\nREADME.md -filter\n',
    });
    // The planted program: appends its name (its first argument) to the marker file, and passes stdin through.
    const evil = path.join(base, 'evil.sh');
    fs.writeFileSync(evil, `#!/bin/sh\necho "$1" >> '${marker}'\ncat 2>/dev/null\nexit 0\n`, { mode: 0o755 });
    const hooks = path.join(base, 'hooks');
    fs.mkdirSync(hooks);
    for (const hook of [
      'post-checkout',
      'pre-commit',
      'post-commit',
      'post-index-change',
      'reference-transaction',
      'post-merge',
      'pre-auto-gc',
    ]) {
      fs.writeFileSync(path.join(hooks, hook), `#!/bin/sh\necho "hook ${hook}" >> '${marker}'\nexit 0\n`, {
        mode: 0o755,
      });
    }
    // Also in the repository's own hooks folder, in case core.hooksPath were ignored but hooks were not.
    for (const hook of ['post-checkout', 'post-index-change']) {
      fs.copyFileSync(path.join(hooks, hook), path.join(repo, '.git', 'hooks', hook));
      fs.chmodSync(path.join(repo, '.git', 'hooks', hook), 0o755);
    }
    const included = path.join(base, 'included.cfg');
    fs.writeFileSync(
      included,
      `[filter "inc"]\n\tclean = '${evil}' include-clean\n\tsmudge = '${evil}' include-smudge\n\trequired = true\n` +
        `[diff "inc"]\n\ttextconv = '${evil}' include-textconv\n\tcommand = '${evil}' include-diff-command\n`,
    );
    const plant: Array<[string, string]> = [
      ['core.fsmonitor', `${evil}`],
      ['core.hooksPath', hooks],
      ['filter.evil.clean', `'${evil}' filter-clean`],
      ['filter.evil.smudge', `'${evil}' filter-smudge`],
      ['filter.evil.required', 'true'],
      ['diff.evil.textconv', `'${evil}' textconv`],
      ['diff.evil.command', `'${evil}' diff-command`],
      ['merge.evil.driver', `'${evil}' merge-driver`],
      ['core.pager', `'${evil}' pager`],
      ['pager.diff', `'${evil}' pager-diff`],
      ['diff.external', `'${evil}' external-diff`],
      ['gpg.program', `'${evil}' gpg`],
      ['log.showSignature', 'true'],
      ['commit.gpgSign', 'true'],
      ['gc.auto', '1'],
      ['include.path', included],
    ];
    for (const [key, value] of plant) git(repo, 'config', key, value);

    host = await startHost(dataDir, { workspaceFolders: [repo] });
    const address = `127.0.0.1:${host.port}`;
    tools = serviceClient(address, 'sw4rm.tool.ToolService');
    worktrees = serviceClient(address, 'sw4rm.worktree.WorktreeService');
    const registry = new CoordinatorClients(address, host.token);
    assert.equal((await registry.registerAgent(descriptorMessage('coder'))).accepted, true);
    registry.close();
    token = host.coordinator.credentials.mintAgent('coder', 'test', 'git hardening tests', {
      correlationId: 'test',
    }).token;
  });

  after(async () => {
    for (const client of [tools, worktrees]) client?.close();
    if (host) await stopHost(host);
    removeTempDir(dataDir);
    removeTempDir(base);
  });

  it('Bind (git worktree add + checkout) runs no hook, fsmonitor or smudge filter', async () => {
    assert.deepEqual(await unary(worktrees, 'Bind', { agent_id: 'coder', repo_id: 'app' }, meta()), {
      ok: true,
      reason: '',
    });
    const home = path.join(base, 'app.sw4rm-worktrees', 'coder');
    assert.equal(fs.readFileSync(path.join(home, 'notes.txt'), 'utf8'), 'one\n');
    assert.equal(ran(), '', 'a planted program ran');
  });

  it('git_status, git_diff and git_commit run no fsmonitor, filter, textconv, diff command, external diff, pager, hook or gpg', async () => {
    await call('write_file', { path: 'notes.txt', content: 'one\ntwo\n' });
    await call('write_file', { path: 'doc.md', content: 'doc\nmore\n' });
    const status = await call('git_status', {});
    assert.equal(status.branch, 'sw4rm/coder');
    assert.equal(ran(), '', 'git_status ran a planted program');
    const diff = (await call('git_diff', {})).diff as string;
    assert.match(diff, /^\+two$/m);
    assert.match(diff, /^\+more$/m);
    assert.equal(ran(), '', 'git_diff ran a planted program');
    const committed = await call('git_commit', { message: 'two' });
    assert.equal(git(repo, 'rev-parse', 'sw4rm/coder').trim(), committed.commit);
    assert.equal(git(repo, 'show', '--no-textconv', `${committed.commit as string}:notes.txt`), 'one\ntwo\n');
    assert.equal(ran(), '', 'git_commit ran a planted program');
  });

  it("the coordinator's Git itself: diff, show and log (textconv, external diff, signatures) and checkout run nothing planted", async () => {
    const home = path.join(base, 'app.sw4rm-worktrees', 'coder');
    const g = createGit();
    fs.writeFileSync(path.join(home, 'notes.txt'), 'changed\n');
    await g.run(home, ['diff', 'HEAD']);
    await g.run(home, ['show', 'HEAD']);
    await g.run(home, ['log', '-p', '-2']);
    await g.run(home, ['checkout', '--', 'notes.txt']);
    await g.run(home, ['status']);
    assert.equal(ran(), '', 'a planted program ran');
  });

  it('a worktree .git rewritten to name another repository is not believed: git_status, git_diff, git_commit refuse it, read and write nothing there', async () => {
    const home = path.join(base, 'app.sw4rm-worktrees', 'coder');
    const other = makeRepo(base, 'other', { 'secret.txt': 'other repository\n' });
    git(other, 'commit', '-q', '--allow-empty', '-m', 'SECRET-COMMIT-MESSAGE');
    const dotGit = path.join(home, '.git');
    const before = fs.readFileSync(dotGit, 'utf8');
    try {
      // What an agent's program run without the sandbox (or before it) could write.
      fs.writeFileSync(dotGit, `gitdir: ${path.join(other, '.git')}\n`);
      const otherHead = git(other, 'rev-parse', 'HEAD');
      for (const [tool, args] of [
        ['git_status', {}],
        ['git_diff', {}],
        ['git_commit', { message: 'into the other repository' }],
      ] as const) {
        let answer = '';
        try {
          answer = JSON.stringify(await call(tool, args));
        } catch (error) {
          const status = error as grpc.ServiceError;
          console.log(`      ${tool} with a rewritten .git: ${status.details}`);
          assert.equal(status.code, grpc.status.PERMISSION_DENIED, status.details);
          assert.match(status.details, /\.git is not believed/);
          continue;
        }
        assert.fail(`${tool} answered with a rewritten .git: ${answer.slice(0, 200)}`);
      }
      assert.equal(git(other, 'rev-parse', 'HEAD'), otherHead, 'nothing was committed there');
    } finally {
      fs.writeFileSync(dotGit, before);
    }
    assert.equal((await call('git_status', {})).branch, 'sw4rm/coder', 'the restored .git is believed again');
  });

  it('the planted programs do run under a plain git (the fixture is live)', () => {
    const home = path.join(base, 'app.sw4rm-worktrees', 'coder');
    git(home, 'status');
    git(home, 'diff', 'HEAD~1');
    console.log(`      plain git ran: ${ran().trim().split('\n').join(', ')}`);
    assert.match(ran(), /hook post-index-change/);
    assert.match(ran(), /filter-clean|include-clean/);
  });
});
