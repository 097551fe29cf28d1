import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ManualClock } from '../../src/core/clock';
import { createGit } from '../../src/core/worktree/git';
import { discoverRepositories } from '../../src/core/worktree/repositories';
import { runWorktreeSetup, SETUP_KILL_GRACE_MS } from '../../src/core/worktree/setup';
import { Snapshots } from '../../src/core/worktree/snapshots';
import { Worktrees } from '../../src/core/worktree/worktrees';
import { git, initRepo, writeFile as write } from '../support/gitRepo';

/** Resolves when `predicate` holds, polling the event loop (no fixed sleep: it returns as soon as it holds). */
async function until(predicate: () => boolean): Promise<void> {
  while (!predicate()) await new Promise((resolve) => setImmediate(resolve));
}

const node = process.execPath;

describe('worktree setup (real repositories)', function () {
  this.timeout(20_000);
  let tmp: string;
  let repoPath: string;
  let worktreePath: string;
  let clock: ManualClock;

  beforeEach(async () => {
    tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-setup-')));
    repoPath = path.join(tmp, 'app');
    initRepo(repoPath);
    write(repoPath, '.gitignore', '.env*\nconfig/local/\nnode_modules/\n');
    write(repoPath, 'README.md', 'tracked\n');
    git(repoPath, 'add', '-A');
    git(repoPath, 'commit', '-q', '-m', 'initial');
    clock = new ManualClock();
    const realGit = createGit();
    const [repo] = await discoverRepositories(realGit, [repoPath]);
    worktreePath = (await new Worktrees(realGit, new Snapshots(realGit, clock), repo).create('w1')).path;
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('a configuration with an escaping glob copies nothing and runs nothing, and says why', async () => {
    const marker = path.join(worktreePath, 'ran');
    const result = await runWorktreeSetup(repoPath, worktreePath, {
      clock,
      settings: {
        copy: ['../*'],
        setup: { command: node, args: ['-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, '')`] },
      },
    });
    assert.equal(result.ok, false);
    assert.match(result.failure ?? '', /\.\./);
    assert.deepEqual(result.copied, []);
    assert.equal(fs.existsSync(marker), false);
  });

  it('copies matching files (ignored .env files included) as regular files with their mode, never overwriting and never linking', async () => {
    write(repoPath, '.env', 'SECRET=1\n', 0o600);
    write(repoPath, '.env.local', 'LOCAL=1\n', 0o640);
    write(repoPath, 'config/local/db.json', '{"db": 1}\n');
    write(repoPath, 'config/local/deep/x.txt', 'x\n');
    write(repoPath, 'README.md', 'changed in the main checkout\n');
    write(repoPath, 'node_modules/pkg/.env', 'not searched\n');
    const result = await runWorktreeSetup(repoPath, worktreePath, {
      clock,
      settings: { copy: ['.env*', 'config/local/**', 'README.md', 'missing/**', '**/.env'] },
    });
    assert.equal(result.ok, true, result.failure);
    assert.deepEqual([...result.copied].sort(), [
      '.env',
      '.env.local',
      'config/local/db.json',
      'config/local/deep/x.txt',
    ]);
    assert.deepEqual(result.skipped, [
      { path: 'README.md', reason: 'exists', detail: 'the worktree already has it; it is never overwritten' },
    ]);
    for (const file of ['.env', '.env.local', 'config/local/db.json', 'config/local/deep/x.txt']) {
      const stats = fs.lstatSync(path.join(worktreePath, file));
      assert.ok(stats.isFile() && !stats.isSymbolicLink(), file);
      assert.ok(
        fs.readFileSync(path.join(worktreePath, file)).equals(fs.readFileSync(path.join(repoPath, file))),
        file,
      );
    }
    assert.equal(fs.statSync(path.join(worktreePath, '.env')).mode & 0o777, 0o600);
    assert.equal(fs.statSync(path.join(worktreePath, '.env.local')).mode & 0o777, 0o640);
    assert.equal(fs.readFileSync(path.join(worktreePath, 'README.md'), 'utf8'), 'tracked\n');
    assert.equal(fs.existsSync(path.join(worktreePath, 'node_modules')), false);
    // The copy is a copy: changing it leaves the main checkout alone.
    fs.writeFileSync(path.join(worktreePath, '.env'), 'CHANGED BY THE AGENT\n');
    assert.equal(fs.readFileSync(path.join(repoPath, '.env'), 'utf8'), 'SECRET=1\n');
  });

  it('skips a symbolic link in the main checkout (file or folder) and reports it; nothing it points to is copied', async () => {
    write(tmp, 'outside/secret.txt', 'outside the repository\n');
    fs.symlinkSync(path.join(tmp, 'outside/secret.txt'), path.join(repoPath, '.env'));
    fs.mkdirSync(path.join(repoPath, 'config'));
    fs.symlinkSync(path.join(tmp, 'outside'), path.join(repoPath, 'config/local'));
    fs.symlinkSync(path.join(tmp, 'outside'), path.join(repoPath, '.env.d'));
    const result = await runWorktreeSetup(repoPath, worktreePath, {
      clock,
      settings: { copy: ['.env*', 'config/local/**', '.env.d/**'] },
    });
    assert.equal(result.ok, true);
    assert.deepEqual(result.copied, []);
    assert.deepEqual(result.skipped.map((s) => [s.path, s.reason]).sort(), [
      ['.env', 'symlink'],
      ['.env.d', 'symlink'],
      ['config/local', 'symlink'],
    ]);
    assert.equal(fs.existsSync(path.join(worktreePath, '.env')), false);
    assert.equal(fs.existsSync(path.join(worktreePath, 'config')), false);
  });

  it('runs the command in the worktree with argv (no shell), streams and keeps its output', async () => {
    const chunks: string[] = [];
    const script =
      "process.stdout.write('cwd=' + process.cwd() + '\\n'); process.stderr.write('warn: $HOME stays literal ' + process.argv[1] + '\\n')";
    const result = await runWorktreeSetup(repoPath, worktreePath, {
      clock,
      settings: { setup: { command: node, args: ['-e', script, '$(touch pwned); `id`'] } },
      onOutput: (text, stream) => chunks.push(`${stream}:${text}`),
    });
    assert.equal(result.ok, true, result.failure);
    assert.equal(result.command?.exitCode, 0);
    assert.equal(result.command?.shell, false);
    assert.ok(
      chunks.some((c) => c === `stdout:cwd=${worktreePath}\n`),
      chunks.join('|'),
    );
    assert.ok(
      chunks.some((c) => c.startsWith('stderr:warn: $HOME stays literal $(touch pwned); `id`')),
      chunks.join('|'),
    );
    assert.match(result.command?.output ?? '', /cwd=.*w1/);
    assert.equal(fs.existsSync(path.join(worktreePath, 'pwned')), false);
  });

  it('runs a shell line only when the configuration says "shell": true', async () => {
    const result = await runWorktreeSetup(repoPath, worktreePath, {
      clock,
      settings: { setup: { command: 'echo one && echo two > made-by-shell.txt', shell: true } },
    });
    assert.equal(result.ok, true, result.failure);
    assert.equal(fs.readFileSync(path.join(worktreePath, 'made-by-shell.txt'), 'utf8'), 'two\n');
  });

  it('runs the command of the repository’s file only when the caller trusts the repository', async () => {
    write(
      repoPath,
      '.sw4rm/worktree.json',
      JSON.stringify({ setup: { command: node, args: ['-e', "require('fs').writeFileSync('ran', '')"] } }),
    );
    const untrusted = await runWorktreeSetup(repoPath, worktreePath, { clock });
    assert.equal(untrusted.command, undefined);
    assert.match(untrusted.commandSkipped ?? '', /trusted/);
    assert.equal(fs.existsSync(path.join(worktreePath, 'ran')), false);
    const trusted = await runWorktreeSetup(repoPath, worktreePath, { clock, trustRepositoryCommand: true });
    assert.equal(trusted.ok, true, trusted.failure);
    assert.equal(fs.existsSync(path.join(worktreePath, 'ran')), true);
  });

  it('reports a failing command and one that cannot start, without throwing; files copied before stay', async () => {
    write(repoPath, '.env', 'A=1\n');
    const failing = await runWorktreeSetup(repoPath, worktreePath, {
      clock,
      settings: {
        copy: ['.env'],
        setup: { command: node, args: ['-e', "console.error('install failed'); process.exit(3)"] },
      },
    });
    assert.equal(failing.ok, false);
    assert.equal(failing.failure, 'the setup command exited with code 3');
    assert.equal(failing.command?.exitCode, 3);
    assert.match(failing.command?.output ?? '', /install failed/);
    assert.deepEqual(failing.copied, ['.env']);
    const missing = await runWorktreeSetup(repoPath, worktreePath, {
      clock,
      settings: { setup: { command: path.join(tmp, 'no-such-program') } },
    });
    assert.equal(missing.ok, false);
    assert.match(missing.failure ?? '', /could not start: ENOENT/);
  });

  it('ends when the command exits, even if it left a process running that holds its output open', async () => {
    const marker = path.join(tmp, 'background-finished');
    const output: string[] = [];
    // The shell exits at once; its background job keeps stdout open for 3 s, then leaves a marker.
    const running = runWorktreeSetup(repoPath, worktreePath, {
      clock,
      onOutput: (text) => output.push(text),
      settings: {
        setup: { command: `echo started; (sleep 3; touch '${marker}') &`, shell: true, timeoutSeconds: 600 },
      },
    });
    let result: Awaited<typeof running> | undefined;
    void running.then((r) => {
      result = r;
    });
    await until(() => output.join('').includes('started'));
    // The drain after the exit runs on the injected clock, advanced 100 ms per 20 ms of real time until the result is in.
    while (result === undefined) {
      await new Promise((resolve) => setTimeout(resolve, 20)); // real time for the shell to exit; then the clock drains
      clock.advance(100);
    }
    assert.equal(fs.existsSync(marker), false, 'answered while the background job still runs, not when it ends');
    assert.equal(result!.ok, true, result!.failure);
    assert.equal(result!.command?.exitCode, 0);
    assert.equal(result!.command?.timedOut, false);
    assert.ok(result!.command!.durationMs < 600_000);
  });

  it('kills a command at its timeout (injected clock): SIGTERM, then SIGKILL after the grace', async () => {
    const output: string[] = [];
    // Ignores SIGTERM, so only the SIGKILL after the grace ends it.
    const script =
      "process.on('SIGTERM', () => console.log('term ignored')); console.log('started'); setInterval(() => {}, 1000)";
    const running = runWorktreeSetup(repoPath, worktreePath, {
      clock,
      settings: { setup: { command: node, args: ['-e', script], timeoutSeconds: 30 } },
      onOutput: (text) => output.push(text),
    });
    await until(() => output.join('').includes('started'));
    clock.advance(29_999);
    clock.advance(1);
    await until(() => output.join('').includes('term ignored'));
    clock.advance(SETUP_KILL_GRACE_MS);
    const result = await running;
    assert.equal(result.ok, false);
    assert.equal(result.failure, 'the setup command timed out after 30 s');
    assert.equal(result.command?.timedOut, true);
    assert.equal(result.command?.signal, 'SIGKILL');
    assert.equal(result.command?.durationMs, 30_000 + SETUP_KILL_GRACE_MS);
  });
});
