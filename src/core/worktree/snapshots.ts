import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Clock } from '../clock';
import type { Git, GitEnvironment } from './git';
import { parseRefList } from './porcelain';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/** Snapshots live under this namespace, one folder per worktree id: refs/sw4rm/snapshots/<worktree_id>/<time>. */
export const SNAPSHOT_REF_PREFIX = 'refs/sw4rm/snapshots/';

/** The identity snapshot commits carry (git may have none configured, and the user's is not ours to borrow). */
const SNAPSHOT_IDENTITY = { name: 'SW4RM Coordinator', email: 'coordinator@sw4rm.invalid' };

/**
 * A worktree id, or the key of any snapshotted tree: letters, digits, `.`, `_`, `-`; 1–64 characters; not
 * starting with `.` or `-`, no `..`, not ending `.lock` (git's ref rules), so it is safe in a path and a ref.
 */
export const WORKTREE_ID_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/;

export class InvalidWorktreeIdError extends SwarmError {
  constructor(readonly id: string) {
    super(
      `'${id.slice(0, 80)}' is not a worktree id (letters, digits, '.', '_', '-'; at most 64; no '..', not ending '.lock')`,
    );
  }

  override get errorKind(): ErrorKind {
    return 'invalid';
  }

  override get errorCode(): Sw4rmCode {
    return 'VALIDATION_ERROR';
  }
}

/** Whether `id` is a worktree id (the rule above). */
export function isWorktreeId(id: string): boolean {
  return WORKTREE_ID_PATTERN.test(id) && !id.includes('..') && !id.endsWith('.lock') && !id.endsWith('.');
}

export function checkWorktreeId(id: string): string {
  if (!isWorktreeId(id)) throw new InvalidWorktreeIdError(id);
  return id;
}

/**
 * The key merge-back snapshots of the main checkout are written under: refs/sw4rm/snapshots/@merge-target/<time>.
 * It starts with `@`, which no worktree id can, so it never shares a folder of refs with an agent's worktree.
 */
export const MERGE_TARGET_SNAPSHOT_KEY = '@merge-target';

/** A snapshot key: a worktree id, or one of the keys reserved for the coordinator's own trees (the main checkout). */
export function checkSnapshotKey(key: string): string {
  return key === MERGE_TARGET_SNAPSHOT_KEY ? key : checkWorktreeId(key);
}

export interface Snapshot {
  readonly worktreeId: string;
  readonly ref: string;
  readonly commit: string;
  /** When it was taken (epoch ms, from the injected clock; encoded in the ref's name). */
  readonly takenAt: number;
}

/** A compact UTC time that is a valid ref component and sorts as text: 20260101T000000000Z. */
export function snapshotTimeName(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:.]/g, '');
}

function timeFromName(name: string): number | undefined {
  const match = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(\d{3})Z(?:-\d+)?$/.exec(name);
  if (!match) return undefined;
  const [, y, mo, d, h, mi, s, ms] = match.map(Number);
  return Date.UTC(y, mo - 1, d, h, mi, s, ms);
}

function gitDate(ms: number): string {
  return `@${Math.floor(ms / 1000)} +0000`;
}

/**
 * Writes, lists, restores and expires snapshots. A snapshot is a commit of a working tree's full state — tracked
 * changes and untracked files, not ignored ones — whose parent is the tree's HEAD. It is written through a
 * temporary index (a copy of the tree's own), so neither the files nor the user's index are touched.
 */
export class Snapshots {
  constructor(
    private readonly git: Git,
    private readonly clock: Clock,
  ) {}

  /** Snapshots the working tree at `treePath` under `refs/sw4rm/snapshots/<key>/<time>`. */
  async take(treePath: string, key: string, reason: string): Promise<Snapshot> {
    checkSnapshotKey(key);
    const now = this.clock.now();
    const head = await this.headCommit(treePath);
    const indexPath = (
      await this.git.run(treePath, ['rev-parse', '--path-format=absolute', '--git-path', 'index'])
    ).stdout.trim();
    const tempDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-snapshot-'));
    const tempIndex = path.join(tempDir, 'index');
    try {
      // Starting from a copy of the tree's index keeps its stat information, so `add -A` hashes only what changed.
      if (fs.existsSync(indexPath)) fs.copyFileSync(indexPath, tempIndex);
      else if (head) await this.git.run(treePath, ['read-tree', head], { env: { GIT_INDEX_FILE: tempIndex } });
      const env: GitEnvironment = {
        GIT_INDEX_FILE: tempIndex,
        GIT_AUTHOR_NAME: SNAPSHOT_IDENTITY.name,
        GIT_AUTHOR_EMAIL: SNAPSHOT_IDENTITY.email,
        GIT_AUTHOR_DATE: gitDate(now),
        GIT_COMMITTER_NAME: SNAPSHOT_IDENTITY.name,
        GIT_COMMITTER_EMAIL: SNAPSHOT_IDENTITY.email,
        GIT_COMMITTER_DATE: gitDate(now),
      };
      await this.git.run(treePath, ['add', '--all', '--', ':/'], { env });
      const tree = (await this.git.run(treePath, ['write-tree'], { env })).stdout.trim();
      const message = `sw4rm snapshot of ${key}: ${reason}\n\nTaken at ${new Date(now).toISOString()}; HEAD ${head ?? '(unborn)'}.\n`;
      const commit = (
        await this.git.run(treePath, ['commit-tree', tree, ...(head ? ['-p', head] : []), '-m', message], { env })
      ).stdout.trim();
      const base = `${SNAPSHOT_REF_PREFIX}${key}/${snapshotTimeName(now)}`;
      // Two snapshots in one millisecond get -1, -2…; the empty old value makes update-ref create only, so a
      // snapshot ref is never overwritten.
      let ref = base;
      for (let n = 1; await this.refExists(treePath, ref); n++) ref = `${base}-${n}`;
      await this.git.run(treePath, ['update-ref', '-m', `sw4rm snapshot: ${reason}`, ref, commit, '']);
      return { worktreeId: key, ref, commit, takenAt: now };
    } finally {
      fs.rmSync(tempDir, { recursive: true, force: true });
    }
  }

  /** The snapshots of one key (or every key), oldest first. `repoPath` is any working tree of the repository. */
  async list(repoPath: string, key?: string): Promise<Snapshot[]> {
    if (key !== undefined) checkSnapshotKey(key);
    const prefix = key === undefined ? SNAPSHOT_REF_PREFIX : `${SNAPSHOT_REF_PREFIX}${key}/`;
    const out = await this.git.run(repoPath, ['for-each-ref', '--format=%(refname)%00%(objectname)', prefix]);
    const snapshots: Snapshot[] = [];
    for (const { ref, oid } of parseRefList(out.stdout)) {
      const rest = ref.slice(SNAPSHOT_REF_PREFIX.length).split('/');
      if (rest.length !== 2) continue;
      const takenAt = timeFromName(rest[1]);
      if (takenAt === undefined) continue;
      snapshots.push({ worktreeId: rest[0], ref, commit: oid, takenAt });
    }
    return snapshots.sort((a, b) => a.takenAt - b.takenAt || a.ref.localeCompare(b.ref));
  }

  /**
   * Puts the snapshot's files back into the working tree at `treePath`: first a snapshot of the current state
   * (returned, so that the restore itself can be undone), then every file of the snapshot written as it was and
   * tracked files the snapshot did not have removed. HEAD and the branch stay; the index is reset to HEAD, so
   * the restored state shows as uncommitted changes. Untracked files the snapshot did not have stay in place.
   */
  async restore(treePath: string, key: string, snapshot: Snapshot): Promise<{ before: Snapshot }> {
    const commit = (
      await this.git.run(treePath, ['rev-parse', '--verify', '--quiet', `${snapshot.ref}^{commit}`], {
        okExitCodes: [1],
      })
    ).stdout.trim();
    if (!commit) throw new Error(`restore: no snapshot ${snapshot.ref}`);
    const before = await this.take(treePath, key, `before restoring ${snapshot.ref}`);
    await this.git.run(treePath, ['read-tree', '--reset', '-u', commit]);
    const head = await this.headCommit(treePath);
    if (head) await this.git.run(treePath, ['reset', '--quiet', '--mixed', head]);
    else await this.git.run(treePath, ['read-tree', '--empty']);
    return { before };
  }

  /**
   * Deletes snapshots taken `retentionMs` or longer ago, never sooner (the ref's old value is checked, so a ref
   * that changed meanwhile stays). Returns what was deleted.
   */
  async expire(repoPath: string, retentionMs: number): Promise<Snapshot[]> {
    if (!(retentionMs > 0)) throw new Error('snapshot retention must be positive');
    const now = this.clock.now();
    const expired = (await this.list(repoPath)).filter((s) => now - s.takenAt >= retentionMs);
    for (const s of expired) await this.git.run(repoPath, ['update-ref', '-d', s.ref, s.commit]);
    return expired;
  }

  private async refExists(cwd: string, ref: string): Promise<boolean> {
    return (await this.git.run(cwd, ['show-ref', '--verify', '--quiet', ref], { okExitCodes: [1] })).exitCode === 0;
  }

  private async headCommit(treePath: string): Promise<string | undefined> {
    const out = await this.git.run(treePath, ['rev-parse', '--verify', '--quiet', 'HEAD^{commit}'], {
      okExitCodes: [1],
    });
    return out.stdout.trim() || undefined;
  }
}
