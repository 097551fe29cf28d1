import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Confinement, ConfinementError, type ConfinementReason } from '../../src/core/worktree/confinement';
import {
  ALL_OPS,
  CORPUS,
  disposeFixture,
  makeFixture,
  SECRET,
  type Fixture,
  type Op,
} from '../support/confinementCorpus';

/**
 * The confinement corpus (issue 15, parts 5 and 11): attacks against a REAL worktree (`git worktree add` of a
 * temporary repository, so its `.git` is a file), each through every operation it applies to, with canary files
 * outside: every attack must be refused and nothing outside may change. The corpus itself is in
 * test/support/confinementCorpus.ts (the gRPC tool calls of test/integration/workspaceTools.integration.test.ts send it too).
 */

function run(confinement: Confinement, op: Op, requested: string): Promise<unknown> {
  switch (op) {
    case 'resolve':
      return confinement.resolve(requested);
    case 'read':
      return confinement.readFile(requested);
    case 'write':
      return confinement.writeFile(requested, 'PWNED');
    case 'writeParents':
      return confinement.writeFile(requested, 'PWNED', { createParents: true });
    case 'list':
      return confinement.listDir(requested);
    case 'stat':
      return confinement.stat(requested);
    case 'delete':
      return confinement.deleteFile(requested);
    case 'mkdir':
      return confinement.mkdir(requested, { recursive: true });
  }
}

/** How many file descriptors this process has open (Linux: /proc/self/fd), or undefined elsewhere. */
function openDescriptors(): number | undefined {
  try {
    return fs.readdirSync('/proc/self/fd').length;
  } catch {
    return undefined;
  }
}

/** `promise` is refused with a ConfinementError of `reason`, whose message names no real path. */
async function assertRefused(
  promise: Promise<unknown>,
  reason: ConfinementReason | readonly ConfinementReason[],
  f: Fixture,
  label: string,
): Promise<ConfinementError> {
  let result: unknown;
  try {
    result = await promise;
  } catch (error) {
    assert.ok(error instanceof ConfinementError, `${label}: a ConfinementError, not ${String(error)}`);
    const reasons = typeof reason === 'string' ? [reason] : reason;
    assert.ok(
      reasons.includes(error.reason),
      `${label}: refused for ${error.reason}, expected ${reasons.join(' or ')}`,
    );
    assert.ok(!error.message.includes(f.base), `${label}: the message names no real path (${error.message})`);
    assert.ok(!error.message.includes(SECRET), `${label}: the message carries no content`);
    return error;
  }
  assert.fail(
    `${label}: not refused, answered ${JSON.stringify(result instanceof Buffer ? result.toString() : result)}`,
  );
}

describe('Confinement (RFC §6.4, §16, §23)', () => {
  for (const strategy of ['proc-fd', 'path'] as const) {
    describe(`with strategy '${strategy}'`, () => {
      let f: Fixture;
      let confinement: Confinement;
      let guardedBefore: Map<string, string>;
      let descriptorsBefore: number | undefined;

      before(async function () {
        if (strategy === 'proc-fd' && process.platform !== 'linux') this.skip();
        f = await makeFixture();
        confinement = await Confinement.forWorktree(f.worktree, { strategy });
        guardedBefore = f.guarded();
        descriptorsBefore = openDescriptors();
      });

      after(async () => {
        if (f) {
          assert.deepEqual(f.guarded(), guardedBefore, 'nothing outside the worktree changed');
          const leftovers = fs.readdirSync(f.worktree).filter((name) => name.startsWith('.sw4rm-write-'));
          assert.deepEqual(leftovers, [], 'no temporary file is left behind');
        }
        await disposeFixture(f);
      });

      for (const [group, attacks] of CORPUS) {
        describe(`refuses ${group}`, () => {
          for (const attack of attacks) {
            it(attack.name, async () => {
              const requested = typeof attack.path === 'string' ? attack.path : attack.path(f);
              for (const op of attack.ops ?? ALL_OPS) {
                await assertRefused(
                  run(confinement, op, requested),
                  attack.reason,
                  f,
                  `${op} ${JSON.stringify(requested.slice(0, 60))}`,
                );
              }
              assert.deepEqual(f.guarded(), guardedBefore, 'nothing outside the worktree was written');
              assert.equal(fs.existsSync(path.join(f.outside, 'created-by-attack.txt')), false);
            });
          }
        });
      }

      it('a device node really is one when the tests run as root (otherwise the corpus used a link)', function () {
        if (!f.deviceNode) this.skip();
        assert.ok(fs.lstatSync(path.join(f.worktree, 'devnull')).isCharacterDevice());
      });

      describe('a hard link to a file outside (issue 30: refused by every operation, not only reads)', () => {
        for (const op of ALL_OPS) {
          it(`${op} of a hard-linked name is refused (hard_link); the other file is untouched`, async () => {
            const name = `hard-${op}.txt`;
            fs.linkSync(path.join(f.outside, 'secret.txt'), path.join(f.worktree, name));
            try {
              await assertRefused(
                run(confinement, op, name),
                op === 'list' || op === 'mkdir' ? ['hard_link', 'not_a_directory'] : 'hard_link',
                f,
                op,
              );
              assert.equal(fs.readFileSync(path.join(f.outside, 'secret.txt'), 'utf8'), SECRET);
              assert.equal(
                fs.statSync(path.join(f.worktree, name)).ino,
                fs.statSync(path.join(f.outside, 'secret.txt')).ino,
                'the name still is the other file',
              );
            } finally {
              fs.unlinkSync(path.join(f.worktree, name));
            }
          });
        }

        it('readEntry (what the git tools hand to git) refuses a hard link, and a name made one after the check (fstat)', async () => {
          const name = 'hard-entry.txt';
          fs.linkSync(path.join(f.outside, 'secret.txt'), path.join(f.worktree, name));
          try {
            await assertRefused(confinement.readEntry(name), 'hard_link', f, 'readEntry');
          } finally {
            fs.unlinkSync(path.join(f.worktree, name));
          }
          const late = path.join(f.worktree, 'hard-late.txt');
          fs.writeFileSync(late, 'inside');
          const racing = await Confinement.forWorktree(f.worktree, {
            strategy,
            beforeOpen: (p) => {
              if (p === late && fs.statSync(late).nlink === 1)
                fs.linkSync(late, path.join(f.worktree, 'hard-late-2.txt'));
            },
          });
          try {
            await assertRefused(racing.readEntry('hard-late.txt'), 'hard_link', f, 'readEntry after a link was made');
            await assertRefused(confinement.readFile('hard-late.txt'), 'hard_link', f, 'readFile');
          } finally {
            fs.unlinkSync(late);
            fs.rmSync(path.join(f.worktree, 'hard-late-2.txt'), { force: true });
          }
        });
      });

      describe('a swap between the check and the open is caught at the open', () => {
        type Moment = 'folder' | 'file';
        const RACE_OPS: Array<[string, (c: Confinement, dir: string) => Promise<unknown>]> = [
          ['read', (c, dir) => c.readFile(`${dir}/secret.txt`)],
          ['stat', (c, dir) => c.stat(`${dir}/secret.txt`)],
          ['list', (c, dir) => c.listDir(dir)],
          ['write a new file', (c, dir) => c.writeFile(`${dir}/new.txt`, 'PWNED')],
          ['write over a file', (c, dir) => c.writeFile(`${dir}/secret.txt`, 'PWNED')],
          ['delete', (c, dir) => c.deleteFile(`${dir}/secret.txt`)],
          ['mkdir', (c, dir) => c.mkdir(`${dir}/new`, { recursive: true })],
        ];

        /**
         * A real folder `dir` (with secret.txt in it) that passes every check, swapped for a symlink to
         * outside/dir right before a system call touches it: at 'folder', right before the folder itself is
         * opened (the walk); at 'file', once the folder was checked and opened, right before the last system
         * call on what is inside it (for a listing: the read of the folder itself, its last touch).
         */
        async function race(
          dir: string,
          moment: Moment,
          operation: (c: Confinement, dir: string) => Promise<unknown>,
        ): Promise<{ swaps: number; result: Promise<unknown> }> {
          const folder = path.join(f.worktree, dir);
          fs.mkdirSync(folder);
          fs.writeFileSync(path.join(folder, 'secret.txt'), 'inside');
          const touches: string[] = [];
          const probe = await Confinement.forWorktree(f.worktree, {
            strategy,
            beforeOpen: (p) => {
              touches.push(p);
            },
          });
          await operation(probe, dir);
          fs.rmSync(folder, { recursive: true, force: true });
          fs.mkdirSync(folder);
          fs.writeFileSync(path.join(folder, 'secret.txt'), 'inside');
          const relevant = touches.filter((p) => p === folder || p.startsWith(folder + '/'));
          const at = moment === 'folder' ? relevant.indexOf(folder) : relevant.length - 1;
          let seen = 0;
          let swaps = 0;
          const racing = await Confinement.forWorktree(f.worktree, {
            strategy,
            beforeOpen: (p) => {
              if (p !== folder && !p.startsWith(folder + '/')) return;
              if (seen++ !== at) return;
              fs.renameSync(folder, `${folder}.moved`);
              fs.symlinkSync(path.join(f.outside, 'dir'), folder);
              swaps++;
            },
          });
          const result = operation(racing, dir);
          await result.catch(() => undefined);
          return { swaps, result };
        }

        for (const moment of ['folder', 'file'] as const) {
          for (const [label, operation] of RACE_OPS) {
            it(`${label}: the folder swapped for a symlink to outside at the ${moment === 'folder' ? "folder's" : 'last'} open`, async () => {
              const dir = `race-${moment}-${label.replace(/\W+/g, '-')}`;
              const { swaps, result } = await race(dir, moment, operation);
              assert.equal(swaps, 1, 'the swap happened after the checks');
              await assertRefused(
                result,
                ['symlink', 'outside_worktree', 'changed_during_open'],
                f,
                `${label} after swap`,
              );
              fs.rmSync(path.join(f.worktree, dir), { force: true });
              assert.deepEqual(
                fs.readdirSync(`${path.join(f.worktree, dir)}.moved`).filter((n) => n.startsWith('.sw4rm-write-')),
                [],
                'no temporary file left',
              );
              fs.rmSync(`${path.join(f.worktree, dir)}.moved`, { recursive: true, force: true });
              assert.deepEqual(f.guarded(), guardedBefore, 'nothing outside the worktree was read, written or removed');
            });
          }
        }

        it('a file swapped for a symlink to outside right before its open (O_NOFOLLOW)', async () => {
          const target = path.join(f.worktree, 'race-file.txt');
          fs.writeFileSync(target, 'inside');
          const racing = await Confinement.forWorktree(f.worktree, {
            strategy,
            beforeOpen: (p) => {
              if (p === target) {
                fs.unlinkSync(target);
                fs.symlinkSync(path.join(f.outside, 'secret.txt'), target);
              }
            },
          });
          await assertRefused(racing.readFile('race-file.txt'), 'symlink', f, 'read after file swap');
          fs.unlinkSync(target);
        });

        it('a file swapped for a FIFO right before its open: the open does not block and is refused', async () => {
          const target = path.join(f.worktree, 'race-fifo');
          fs.writeFileSync(target, 'inside');
          const racing = await Confinement.forWorktree(f.worktree, {
            strategy,
            beforeOpen: (p) => {
              if (p === target) {
                fs.unlinkSync(target);
                execFileSync('mkfifo', [target]);
              }
            },
          });
          await assertRefused(racing.readFile('race-fifo'), 'fifo', f, 'read after FIFO swap');
          fs.unlinkSync(target);
        });
      });

      describe('a read is bounded by maxBytes even when the file grows after its size was checked', () => {
        /** Bytes this process read through read(2) so far (Linux: /proc/self/io), or undefined. */
        function bytesRead(): number | undefined {
          try {
            return Number(/^rchar: (\d+)$/m.exec(fs.readFileSync('/proc/self/io', 'utf8'))![1]);
          } catch {
            return undefined;
          }
        }

        it('reads at most maxBytes + 1 bytes of a file that is larger than its checked size, and refuses it', async function () {
          if (bytesRead() === undefined) this.skip();
          const file = path.join(f.worktree, 'growing.log');
          fs.writeFileSync(file, Buffer.alloc(100, 0x61));
          // The file grows between the size check and the read, as a log written by a running program does: every
          // fstat of it answers the size it had when checked, while it really holds 32 MiB more.
          const probe = await fs.promises.open(file, 'r');
          const prototype = Object.getPrototypeOf(probe) as { stat: (...args: unknown[]) => Promise<fs.Stats> };
          const { ino } = await probe.stat();
          await probe.close();
          fs.appendFileSync(file, Buffer.alloc(32 * 1024 * 1024, 0x62));
          const originalStat = prototype.stat;
          prototype.stat = async function (this: unknown, ...args: unknown[]) {
            const stats = await originalStat.apply(this, args);
            if (stats.ino === ino) Object.defineProperty(stats, 'size', { value: 100 });
            return stats;
          };
          const before = bytesRead()!;
          try {
            await assertRefused(
              confinement.readFile('growing.log', { maxBytes: 1024 }),
              'too_large',
              f,
              'read of a growing file',
            );
          } finally {
            prototype.stat = originalStat;
            fs.unlinkSync(file);
          }
          const read = bytesRead()! - before;
          assert.ok(read < 1024 * 1024, `read ${read} bytes of a 32 MiB file with maxBytes 1024`);
        });
      });

      describe('what is allowed', () => {
        it('nested files: write (making folders), read, stat, list, delete', async () => {
          await confinement.writeFile('a/b/c/nested.txt', 'nested', { createParents: true });
          assert.equal((await confinement.readFile('a/b/c/nested.txt')).toString(), 'nested');
          assert.equal(
            (await confinement.readFile('./a//b/c/nested.txt')).toString(),
            'nested',
            'empty and "." components are dropped',
          );
          const stat = await confinement.stat('a/b/c/nested.txt');
          assert.equal(stat.type, 'file');
          assert.equal(stat.size, 6);
          assert.equal((await confinement.stat('a/b')).type, 'directory');
          assert.deepEqual(await confinement.listDir('a/b/c'), [{ name: 'nested.txt', type: 'file' }]);
          await confinement.deleteFile('a/b/c/nested.txt');
          assert.equal(fs.existsSync(path.join(f.worktree, 'a/b/c/nested.txt')), false);
          await assertRefused(confinement.readFile('a/b/c/nested.txt'), 'not_found', f, 'read after delete');
        });

        it('resolve gives the canonical path inside the worktree, existing or not', async () => {
          const root = fs.realpathSync(f.worktree);
          assert.equal(confinement.root, root);
          assert.equal(await confinement.resolve('src/app.ts'), path.join(root, 'src/app.ts'));
          assert.equal(await confinement.resolve('src/new-file.ts'), path.join(root, 'src/new-file.ts'));
          assert.equal(await confinement.resolve(''), root);
          assert.equal(await confinement.resolve('.'), root);
        });

        it('dotfiles other than .git: .env, .gitignore, .github/, .gitattributes', async () => {
          for (const name of [
            '.env',
            '.env.local',
            '.gitignore',
            '.gitattributes',
            '.github/workflows/ci.yml',
            '.gitkeep',
            '.git-blame-ignore-revs',
          ]) {
            await confinement.writeFile(name, `content of ${name}`, { createParents: true });
            assert.equal((await confinement.readFile(name)).toString(), `content of ${name}`, name);
          }
        });

        it('Unicode names (NFC and NFD are different names on Linux), and names with % and dots', async () => {
          const names = [
            'caf\u00e9.txt',
            'cafe\u0301.txt',
            '\u65e5\u672c\u8a9e/\u30d5\u30a1\u30a4\u30eb.md',
            '\ud83d\ude80.txt',
            '50%.txt',
            'a%20b.txt',
            'x..y',
            '...',
            '\u00e9'.repeat(127),
          ];
          for (const name of names) {
            await confinement.writeFile(name, name, { createParents: true });
            assert.equal((await confinement.readFile(name)).toString(), name, name);
          }
          assert.ok(fs.existsSync(path.join(f.worktree, 'a%20b.txt')), 'a name with % is that name, never decoded');
        });

        it("overwriting keeps the file's mode, leaves no temporary file, and the old content is replaced whole", async () => {
          fs.writeFileSync(path.join(f.worktree, 'script.sh'), 'old old old old');
          fs.chmodSync(path.join(f.worktree, 'script.sh'), 0o750);
          await confinement.writeFile('script.sh', 'new');
          assert.equal(fs.readFileSync(path.join(f.worktree, 'script.sh'), 'utf8'), 'new');
          assert.equal(fs.statSync(path.join(f.worktree, 'script.sh')).mode & 0o777, 0o750);
          assert.deepEqual(
            fs.readdirSync(f.worktree).filter((n) => n.startsWith('.sw4rm-write-')),
            [],
          );
        });

        it('overwriting a setuid or setgid file keeps its permission bits only, as a write(2) by its owner would', async () => {
          const file = path.join(f.worktree, 'setuid-tool');
          fs.writeFileSync(file, '#!/bin/sh\necho old\n');
          fs.chmodSync(file, 0o6755);
          if ((fs.statSync(file).mode & 0o6000) !== 0o6000) {
            fs.unlinkSync(file);
            return;
          } // a file system without the bits
          await confinement.writeFile('setuid-tool', '#!/bin/sh\necho agent\n');
          assert.equal(
            fs.statSync(file).mode & 0o7777,
            0o755,
            'set-user-ID and set-group-ID are not carried onto new content',
          );
          await confinement.writeFile('setuid-new', 'x', { mode: 0o4777 });
          assert.equal(
            fs.statSync(path.join(f.worktree, 'setuid-new')).mode & 0o7000,
            0,
            'a new file is never made set-user-ID',
          );
          fs.unlinkSync(file);
          fs.unlinkSync(path.join(f.worktree, 'setuid-new'));
        });

        it('listDir shows links as links (never followed) and leaves out .git', async () => {
          const entries = await confinement.listDir('');
          const byName = new Map(entries.map((e) => [e.name, e.type]));
          assert.equal(byName.has('.git'), false);
          assert.equal(byName.get('src'), 'directory');
          assert.equal(byName.get('link-dir'), 'symlink');
          assert.equal(byName.get('link-file'), 'symlink');
          assert.equal(byName.get('fifo'), 'other');
        });

        it('mkdir: new folders, an existing folder with recursive; not over a file', async () => {
          await confinement.mkdir('made/deep/er', { recursive: true });
          await confinement.mkdir('made/deep/er', { recursive: true });
          await confinement.mkdir('made/single');
          assert.ok(fs.statSync(path.join(f.worktree, 'made/deep/er')).isDirectory());
          await assertRefused(confinement.mkdir('made/single'), 'already_exists', f, 'mkdir twice without recursive');
          await assertRefused(
            confinement.mkdir('src/app.ts', { recursive: true }),
            'already_exists',
            f,
            'mkdir over a file',
          );
        });

        it('ordinary failures have their own codes: not_found, is_a_directory, not_a_directory, root, too_large', async () => {
          assert.equal(
            (await assertRefused(confinement.readFile('missing.txt'), 'not_found', f, 'missing')).code,
            'not_found',
          );
          assert.equal(
            (await assertRefused(confinement.writeFile('missing/x.txt', 'x'), 'not_found', f, 'missing parent')).code,
            'not_found',
          );
          assert.equal(
            (await assertRefused(confinement.readFile('src'), 'is_a_directory', f, 'read a folder')).code,
            'filesystem_error',
          );
          await assertRefused(confinement.deleteFile('src'), 'is_a_directory', f, 'delete a folder');
          await assertRefused(confinement.readFile('src/app.ts/x'), 'not_a_directory', f, 'a file as a folder');
          assert.equal(
            (await assertRefused(confinement.writeFile('', 'x'), 'root', f, 'write the root')).code,
            'permission_denied',
          );
          await assertRefused(confinement.deleteFile('.'), 'root', f, 'delete the root');
          await assertRefused(confinement.readFile('src/app.ts', { maxBytes: 4 }), 'too_large', f, 'maxBytes');
        });
      });

      // Declared last, so it runs after every refusal, race and allowed operation above.
      describe('resources', () => {
        it('no file descriptor is left open by any operation, refused or not', async function () {
          if (descriptorsBefore === undefined) this.skip();
          for (const op of ALL_OPS) {
            // Refused at every step of the walk and the open (nothing here is changed by any operation).
            for (const requested of [
              'link-dir/secret.txt',
              'real/linked/x',
              'fifo',
              'sock',
              'devnull',
              'src/app.ts/x',
              'missing/x',
              'src',
              '.git',
              '..',
            ]) {
              await run(confinement, op, requested).catch(() => undefined);
            }
          }
          await confinement.readFile('hard.txt').catch(() => undefined);
          await confinement.stat('hard.txt').catch(() => undefined);
          // And answered: a read, a stat and a listing of what exists, a write, a folder and a delete of a new file.
          await confinement.readFile('src/app.ts');
          await confinement.stat('src/app.ts');
          await confinement.listDir('src');
          await confinement.writeFile('fd-check/new.txt', 'x', { createParents: true });
          await confinement.deleteFile('fd-check/new.txt');
          assert.equal(openDescriptors(), descriptorsBefore, 'as many descriptors open as before the corpus');
        });
      });
    });
  }

  describe('the worktree itself', () => {
    let f: Fixture | undefined;
    afterEach(async () => {
      await disposeFixture(f);
      f = undefined;
    });

    it('a missing root, or a file as root, is worktree_not_bound', async () => {
      f = await makeFixture();
      for (const root of [path.join(f.base, 'no-such-worktree'), path.join(f.outside, 'secret.txt')]) {
        const error = await assertRefused(Confinement.forWorktree(root), 'worktree_missing', f, 'forWorktree');
        assert.equal(error.code, 'worktree_not_bound');
      }
    });

    it('a worktree removed after binding answers worktree_not_bound, for every operation', async () => {
      f = await makeFixture();
      const confinement = await Confinement.forWorktree(f.worktree);
      await f.server?.close();
      f.server = undefined;
      fs.rmSync(f.worktree, { recursive: true, force: true });
      for (const op of ALL_OPS) {
        const error = await assertRefused(run(confinement, op, 'src/app.ts'), 'worktree_missing', f, op);
        assert.equal(error.code, 'worktree_not_bound');
      }
    });

    it("the repository's git directory cannot be a worktree root", async () => {
      f = await makeFixture();
      await assertRefused(Confinement.forWorktree(path.join(f.repo, '.git')), 'git_metadata', f, 'git dir as root');
      await assertRefused(
        Confinement.forWorktree(path.join(f.repo, '.git', 'worktrees', 'wt1')),
        'git_metadata',
        f,
        'worktree gitdir as root',
      );
    });

    it('the main checkout as root (its .git is a folder) refuses .git the same way', async () => {
      f = await makeFixture();
      const confinement = await Confinement.forWorktree(f.repo);
      await assertRefused(confinement.readFile('.git/config'), 'git_metadata', f, 'main checkout .git');
      assert.equal((await confinement.readFile('README.md')).toString(), '# repo\n');
    });

    it('a bind mount inside the worktree (same file system, same st_dev) is refused by every operation, reads included', async function () {
      f = await makeFixture();
      const mountedDir = path.join(f.worktree, 'mnt');
      const mountedFile = path.join(f.worktree, 'mounted.txt');
      fs.mkdirSync(mountedDir);
      fs.writeFileSync(mountedFile, 'inside');
      try {
        execFileSync('mount', ['--bind', path.join(f.outside, 'dir'), mountedDir], { stdio: 'ignore' });
      } catch {
        this.skip(); // needs root (CAP_SYS_ADMIN): planting one needs it too
      }
      try {
        execFileSync('mount', ['--bind', path.join(f.outside, 'secret.txt'), mountedFile], { stdio: 'ignore' });
        assert.equal(
          fs.statSync(path.join(mountedDir, 'secret.txt')).dev,
          fs.statSync(f.worktree).dev,
          'a bind mount keeps st_dev: only the mount table tells',
        );
        for (const strategy of ['proc-fd', 'path'] as const) {
          const confinement = await Confinement.forWorktree(f.worktree, { strategy });
          assert.deepEqual((await confinement.mountPointsInside()).sort(), ['mnt', 'mounted.txt']);
          for (const op of ALL_OPS) {
            for (const requested of ['mnt/secret.txt', 'mnt', 'mounted.txt', 'mnt/new.txt']) {
              if (op === 'delete' && requested === 'mnt') continue;
              await assertRefused(run(confinement, op, requested), 'mount_point', f, `${strategy} ${op} ${requested}`);
            }
          }
          await assertRefused(confinement.readEntry('mnt/secret.txt'), 'mount_point', f, `${strategy} readEntry`);
          await assertRefused(confinement.readEntry('mounted.txt'), 'mount_point', f, `${strategy} readEntry file`);
          assert.equal(
            (await confinement.readFile('src/app.ts')).toString(),
            'export const app = 1;\n',
            'the rest of the worktree is readable',
          );
        }
        assert.deepEqual(fs.readdirSync(path.join(f.outside, 'dir')), ['secret.txt']);
      } finally {
        execFileSync('umount', [mountedFile], { stdio: 'ignore' });
        execFileSync('umount', [mountedDir], { stdio: 'ignore' });
      }
    });

    it('a bind mount planted after the check is caught at the open (mount id of the descriptor)', async function () {
      f = await makeFixture();
      const mountedDir = path.join(f.worktree, 'late');
      fs.mkdirSync(mountedDir);
      fs.writeFileSync(path.join(mountedDir, 'secret.txt'), 'inside');
      let mounted = false;
      const confinement = await Confinement.forWorktree(f.worktree, {
        strategy: 'proc-fd',
        beforeOpen: (p) => {
          if (mounted || p !== mountedDir) return;
          execFileSync('mount', ['--bind', path.join(f!.outside, 'dir'), mountedDir], { stdio: 'ignore' });
          mounted = true;
        },
      });
      if (process.platform !== 'linux') this.skip();
      try {
        await confinement.mountPointsInside(); // read before the mount: the check sees none
        try {
          await assertRefused(confinement.readFile('late/secret.txt'), 'mount_point', f, 'read');
        } catch (error) {
          if (!mounted) this.skip(); // not permitted here
          throw error;
        }
      } finally {
        if (mounted) execFileSync('umount', [mountedDir], { stdio: 'ignore' });
      }
    });

    it('a root given through a symlink is canonicalised', async () => {
      f = await makeFixture();
      const alias = path.join(f.base, 'alias');
      fs.symlinkSync(f.worktree, alias);
      const confinement = await Confinement.forWorktree(alias);
      assert.equal(confinement.root, f.worktree);
      assert.equal((await confinement.readFile('src/app.ts')).toString(), 'export const app = 1;\n');
    });
  });
});
