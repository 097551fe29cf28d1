import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BUILTIN_PROFILES } from '../../src/core/launch/builtinProfiles';
import type { BridgeEndpoints, LaunchProfile } from '../../src/core/launch/model';
import {
  excludeFromGit,
  plannedFiles,
  WiringError,
  writeWiring,
  type WiringContext,
} from '../../src/core/launch/wiring';
import { createGit } from '../../src/core/worktree/git';
import { git, makeRepo } from '../support/gitRepo';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const builtin = (id: string): LaunchProfile => BUILTIN_PROFILES.find((p) => p.id === id)!;
const endpoints: BridgeEndpoints = {
  mcpUrl: 'http://127.0.0.1:50052/mcp',
  hookUrl: 'http://127.0.0.1:50052/hooks/pre-tool-use',
  stdioCommand: ['/usr/bin/node', '/ext/dist/sw4rm-mcp.js'],
  hookCommand: ['/Applications/Code Helper', '/ext/dist/sw4rm-hook.js'],
  grpcAddress: '127.0.0.1:50051',
  // The desktop editor: its binary is Electron, so our own commands (only they) run with ELECTRON_RUN_AS_NODE.
  commandEnv: { ELECTRON_RUN_AS_NODE: '1' },
};
/** `null`: the bridge is not listening. */
const ctxFor = (profile: LaunchProfile, e: BridgeEndpoints | null = endpoints): WiringContext => ({
  agentId: 'coder-1',
  profile,
  cwd: '/wt/coder-1',
  endpoints: e ?? undefined,
});

describe('launch wiring: what a launch writes and runs, per profile', () => {
  describe('in a real worktree', function () {
    this.timeout(30_000);
    let dir: string;
    let repo: string;
    let worktree: string;

    beforeEach(() => {
      dir = makeTempDir('sw4rm-wiring-');
      repo = makeRepo(dir, 'app');
      worktree = path.join(dir, 'wt');
      git(repo, 'worktree', 'add', '-q', '-b', 'sw4rm/wt', worktree);
    });
    afterEach(() => removeTempDir(dir));

    it("writes the files, ignored by the worktree's own exclude file (the user's excludes kept); the main checkout is untouched", async () => {
      const userExcludes = path.join(dir, 'my-excludes');
      fs.writeFileSync(userExcludes, '*.log\n');
      git(repo, 'config', 'core.excludesFile', userExcludes);
      const wrote = await writeWiring(
        createGit(),
        worktree,
        plannedFiles({ ...ctxFor(builtin('gemini')), cwd: worktree }),
        {},
      );
      assert.deepEqual(wrote, ['.sw4rm/AGENT.md', '.gemini/settings.json']);
      fs.writeFileSync(path.join(worktree, 'debug.log'), 'x');
      assert.equal(
        git(worktree, 'status', '--porcelain', '--untracked-files=all'),
        '',
        "ours and the user's excludes apply in the worktree",
      );
      fs.writeFileSync(path.join(worktree, 'new.txt'), 'x');
      assert.equal(
        git(worktree, 'status', '--porcelain', '--untracked-files=all'),
        '?? new.txt\n',
        'nothing else is hidden',
      );
      const excludeFile = git(worktree, 'config', '--worktree', '--get', 'core.excludesFile').trim();
      assert.equal(
        excludeFile,
        path.join(fs.realpathSync(path.join(repo, '.git')), 'worktrees', 'wt', 'info', 'sw4rm-exclude'),
      );
      assert.match(
        fs.readFileSync(excludeFile, 'utf8'),
        /\*\.log\n# What the launch wrote:\n\/\.sw4rm\/AGENT\.md\n\/\.gemini\/settings\.json\n$/,
      );
      // The main checkout: same names are not ignored there, its config keeps the user's excludes, nothing written.
      assert.equal(git(repo, 'config', '--get', 'core.excludesFile').trim(), userExcludes);
      fs.mkdirSync(path.join(repo, '.gemini'));
      fs.writeFileSync(path.join(repo, '.gemini', 'settings.json'), '{}');
      assert.equal(git(repo, 'status', '--porcelain', '--untracked-files=all'), '?? .gemini/settings.json\n');
      // Written again (a relaunch): the exclude file is rewritten, not appended to.
      await excludeFromGit(createGit(), worktree, ['.sw4rm/AGENT.md'], {});
      assert.equal(fs.readFileSync(excludeFile, 'utf8').match(/AGENT\.md/g)?.length, 1);
    });

    it('a worktree of a bare repository stays a work tree: core.bare moves into the main config.worktree first', async () => {
      const bare = path.join(dir, 'bare.git');
      git(dir, 'clone', '-q', '--bare', repo, bare);
      const linked = path.join(dir, 'linked');
      git(bare, 'worktree', 'add', '-q', '-b', 'sw4rm/linked', linked, 'main');
      await writeWiring(createGit(), linked, plannedFiles({ ...ctxFor(builtin('claude-code')), cwd: linked }), {});
      assert.equal(
        git(linked, 'status', '--porcelain', '--untracked-files=all'),
        '',
        'still a work tree, the wiring ignored',
      );
      assert.equal(git(bare, 'rev-parse', '--is-bare-repository').trim(), 'true', 'the repository is still bare');
      assert.equal(
        git(bare, 'config', '--file', path.join(bare, 'config.worktree'), '--get', 'core.bare').trim(),
        'true',
      );
    });

    it('refuses a file git tracks in the worktree, writing nothing', async () => {
      fs.writeFileSync(path.join(repo, '.mcp.json'), '{"mcpServers": {}}\n');
      git(repo, 'add', '.mcp.json');
      git(repo, 'commit', '-q', '-m', 'team servers');
      git(worktree, 'merge', '-q', '--ff-only', 'main');
      await assert.rejects(
        writeWiring(createGit(), worktree, plannedFiles({ ...ctxFor(builtin('claude-code')), cwd: worktree }), {}),
        (err: unknown) =>
          err instanceof WiringError && /^\.mcp\.json is tracked by git in this repository/.test(err.message),
      );
      assert.ok(!fs.existsSync(path.join(worktree, '.sw4rm')), 'nothing written');
      assert.equal(fs.readFileSync(path.join(worktree, '.mcp.json'), 'utf8'), '{"mcpServers": {}}\n');
      assert.equal(git(worktree, 'status', '--porcelain', '--untracked-files=all'), '');
    });
  });
});
