// Real git repositories for the worktree area's tests: the test's own git (clean environment, never the code under
// test), a repository with one commit and an identity of its own (CI may have none), and file trees read back.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { cleanEnvironment } from '../../src/core/worktree/git';

/** Runs git in `cwd` and answers its stdout; a failure throws with git's stderr. */
export function git(cwd: string, ...args: string[]): string {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8', env: cleanEnvironment() });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')} (in ${cwd}): ${r.stderr}`);
  return r.stdout;
}

/** Writes `content` to `dir/file`, creating its folders; `mode` when given. */
export function writeFile(dir: string, file: string, content: string, mode?: number): void {
  fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
  fs.writeFileSync(path.join(dir, file), content);
  if (mode !== undefined) fs.chmodSync(path.join(dir, file), mode);
}

/** `git init` on branch main in `dir` (created), with a user name and email of the repository's own and no signing. */
export function initRepo(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.name', 'Test');
  git(dir, 'config', 'user.email', 'test@example.invalid');
  git(dir, 'config', 'commit.gpgsign', 'false');
}

/** A repository `parent/name` with `files` in one commit on main; answers its real path. */
export function makeRepo(
  parent: string,
  name: string,
  files: Record<string, string> = { 'README.md': 'hello\n' },
): string {
  const dir = path.join(parent, name);
  initRepo(dir);
  for (const [file, content] of Object.entries(files)) writeFile(dir, file, content);
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'initial');
  return fs.realpathSync(dir);
}

/** Stages every change in `dir` and commits it; answers the new HEAD. */
export function commitAll(dir: string, message: string): string {
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', message);
  return git(dir, 'rev-parse', 'HEAD').trim();
}

/** Every regular file under `dir` (outside .git) as relative path → bytes. */
export function readTree(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  const walk = (at: string) => {
    for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
      if (entry.name === '.git') continue;
      const full = path.join(at, entry.name);
      if (entry.isDirectory()) walk(full);
      else files.set(path.relative(dir, full), fs.readFileSync(full));
    }
  };
  walk(dir);
  return files;
}

/** Asserts that `promise` rejects with an `ErrorClass` whose `reason` is `reason`, and answers the error. */
export async function refusedWith<E extends Error & { readonly reason: string }>(
  ErrorClass: new (...args: never[]) => E,
  promise: Promise<unknown>,
  reason: string,
): Promise<E> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ErrorClass, `expected a refusal '${reason}', got ${(err as Error).message}`);
    assert.equal(err.reason, reason, err.message);
    return err;
  }
  assert.fail(`expected a refusal '${reason}'`);
}
