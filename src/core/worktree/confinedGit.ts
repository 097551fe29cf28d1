import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { byteOrder, eachRecordInTurns, sortInTurns } from '../inTurns';
import { ConfinementError, type Confinement } from './confinement';
import type { Git, GitEnvironment, GitResult } from './git';
import { UntrustedGitDirError, worktreeGitDirs } from './gitDirs';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/**
 * git for the workspace tools without git ever opening a file of the agent's worktree (issue 30, item 3). Every
 * command runs with the coordinator's own empty private folder as its working folder and work tree (GIT_DIR names
 * the worktree's git directory); what git needs of the worktree, the content of its tracked and new files, is read
 * through the Confinement (no link followed, hard links and mount points refused, swaps caught at the open),
 * hashed here and handed to git as blobs (`hash-object --stdin-paths` of private copies) and index entries
 * (`update-index --index-info`) of a temporary index. So a diff, a status or a commit is made of exactly what the
 * confined reader saw: a folder swapped for a link while git runs cannot redirect git, because git reads no path
 * of the worktree at all. The ignore rules come the same way: the `.gitignore` files read through the Confinement
 * and copied into a private folder that `check-ignore` takes as its work tree.
 */

/** A file up to this size is kept in memory as it is hashed, for its private copy; a larger one is read again. */
const KEPT_BYTES = 4 * 1024 * 1024;

export const CONFINED_GIT_LIMITS = Object.freeze({
  /** A tracked or new file larger than this fails the call (resource_exhausted): name smaller paths. */
  maxFileBytes: 64 * 1024 * 1024,
  /** Bytes read from the worktree in one call; beyond, the call fails (resource_exhausted). */
  maxTotalBytes: 512 * 1024 * 1024,
  /** Folder entries looked at by the walk for new files in one call; beyond, the call fails (resource_exhausted). */
  maxWalkEntries: 200_000,
});

/** An entry of an index (`ls-files -s`) or a tree (`ls-tree -r`). */
export interface GitEntry {
  mode: string;
  oid: string;
  stage: number;
  path: string;
}

/** The worktree's state of a path as git records it: its mode and blob, or undefined when it is missing. */
export interface WorktreeBlob {
  mode: string;
  oid: string;
}

/** Too much to read for one call: the tool's resource_exhausted (workspaceProvider: `too_large`). */
export class ConfinedGitLimitError extends SwarmError {
  override get errorKind(): ErrorKind {
    return 'exhausted';
  }

  override get errorCode(): Sw4rmCode {
    return 'too_large';
  }
}

const SYMLINK = '120000';

/**
 * Whether a path is one of `specs` or below one ("." or no spec: everything): the specs in a Set, each path looked up
 * with its folders (work as long as the path is deep), not compared with every spec (1,000 specs against a
 * 100,000-entry index were 2.8 s of one turn).
 */
export function specMatcher(specs: readonly string[]): (p: string) => boolean {
  if (specs.length === 0 || specs.some((s) => s === '.' || s === '')) return () => true;
  const set = new Set(specs);
  return (p) => {
    if (set.has(p)) return true;
    for (let slash = p.indexOf('/'); slash >= 0; slash = p.indexOf('/', slash + 1))
      if (set.has(p.slice(0, slash))) return true;
    return false;
  };
}

/** `ls-files -s -z` records, parsed in turns. */
async function parseIndex(stdout: string): Promise<GitEntry[]> {
  const entries: GitEntry[] = [];
  await eachRecordInTurns(stdout, '\0', (record) => {
    const tab = record.indexOf('\t');
    const [mode, oid, stage] = record.slice(0, tab).split(' ');
    entries.push({ mode, oid, stage: Number(stage), path: record.slice(tab + 1) });
  });
  return entries;
}

/** `ls-tree -r -z` records, parsed in turns. */
async function parseTree(stdout: string): Promise<GitEntry[]> {
  const entries: GitEntry[] = [];
  await eachRecordInTurns(stdout, '\0', (record) => {
    const tab = record.indexOf('\t');
    const [mode, , oid] = record.slice(0, tab).split(' ');
    entries.push({ mode, oid, stage: 0, path: record.slice(tab + 1) });
  });
  return entries;
}

/** A refusal of the confinement for a path git needed, naming that (worktree-relative) path. */
function about(p: string, error: unknown): unknown {
  if (error instanceof ConfinementError && error.code === 'permission_denied')
    return new ConfinementError(error.reason, `the worktree path ${JSON.stringify(p.slice(0, 300))}`);
  if (error instanceof ConfinementError && error.reason === 'too_large') return new ConfinementGitTooLarge(p);
  return error;
}

class ConfinementGitTooLarge extends ConfinedGitLimitError {
  constructor(p: string) {
    super(
      `the worktree file ${JSON.stringify(p.slice(0, 300))} is larger than ${CONFINED_GIT_LIMITS.maxFileBytes} bytes: name other paths`,
    );
  }
}

export class ConfinedGit {
  private readonly pending: Array<{ file: string; oid: string }> = [];
  private readonly written = new Set<string>();
  private blobs = 0;
  private bytesRead = 0;

  private constructor(
    private readonly git: Git,
    readonly confinement: Confinement,
    private readonly gitDir: string,
    private readonly objectFormat: 'sha1' | 'sha256',
    /** The private folder: `empty` (the work tree git is given), `blobs`, `ignore`, `index`. */
    private readonly tmp: string,
  ) {}

  /**
   * The worktree's git directory as worktreeGitDirs believes it (never what a rewritten `.git` names, and never a
   * repository above the worktree when its `.git` is gone): git_metadata otherwise.
   */
  static async open(git: Git, confinement: Confinement): Promise<ConfinedGit> {
    let gitDir: string;
    try {
      const dirs = await worktreeGitDirs(confinement.root);
      if (dirs === undefined) throw new ConfinementError('git_metadata', 'the worktree has no .git');
      gitDir = dirs.gitDir;
    } catch (error) {
      if (error instanceof UntrustedGitDirError) throw new ConfinementError('git_metadata', error.message);
      throw error;
    }
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'sw4rm-confined-git-'));
    try {
      await fsp.mkdir(path.join(tmp, 'empty'));
      await fsp.mkdir(path.join(tmp, 'blobs'));
      await fsp.mkdir(path.join(tmp, 'ignore'));
      const format = (
        await git.run(path.join(tmp, 'empty'), ['rev-parse', '--show-object-format'], {
          env: { GIT_DIR: gitDir, GIT_WORK_TREE: path.join(tmp, 'empty') },
        })
      ).stdout.trim();
      return new ConfinedGit(git, confinement, gitDir, format === 'sha256' ? 'sha256' : 'sha1', tmp);
    } catch (error) {
      await fsp.rm(tmp, { recursive: true, force: true });
      throw error;
    }
  }

  async dispose(): Promise<void> {
    await fsp.rm(this.tmp, { recursive: true, force: true });
  }

  /** A temporary index file of this call (absent until git writes it). */
  get tempIndex(): string {
    return path.join(this.tmp, 'index');
  }

  get zeroOid(): string {
    return '0'.repeat(this.objectFormat === 'sha256' ? 64 : 40);
  }

  /** git with the empty private folder as its folder and work tree; `index` a temporary index instead of the worktree's. */
  run(
    args: readonly string[],
    options: {
      index?: string;
      input?: string;
      okExitCodes?: readonly number[];
      env?: GitEnvironment;
      workTree?: string;
      maxStdoutBytes?: number;
    } = {},
  ): Promise<GitResult> {
    const workTree = options.workTree ?? path.join(this.tmp, 'empty');
    return this.git.run(workTree, args, {
      env: {
        ...options.env,
        GIT_DIR: this.gitDir,
        GIT_WORK_TREE: workTree,
        ...(options.index !== undefined ? { GIT_INDEX_FILE: options.index } : {}),
      },
      input: options.input,
      okExitCodes: options.okExitCodes,
      maxStdoutBytes: options.maxStdoutBytes,
    });
  }

  /** Refuses the call when anything is mounted inside the worktree (a bind mount needs root to plant, and hides what is below). */
  async refuseMounts(): Promise<void> {
    const inside = await this.confinement.mountPointsInside();
    if (inside.length > 0)
      throw new ConfinementError(
        'mount_point',
        `mounted inside the worktree: ${JSON.stringify(inside[0].slice(0, 300))}`,
      );
  }

  /** The worktree's index (every stage). */
  async indexEntries(): Promise<GitEntry[]> {
    return parseIndex((await this.run(['ls-files', '-s', '-z'])).stdout);
  }

  /** The files of a commit's tree. */
  async treeEntries(commit: string): Promise<GitEntry[]> {
    return parseTree((await this.run(['ls-tree', '-r', '-z', '--full-tree', commit])).stdout);
  }

  /** git's blob id of a link's target (a few bytes: hashed at once). */
  private hash(data: Buffer): string {
    return createHash(this.objectFormat).update(`blob ${data.length}\0`).update(data).digest('hex');
  }

  /**
   * The path's worktree content as git would record it, read through the confinement; undefined when missing (or a
   * folder, or under a link). With `write`, its blob is written to the repository by writeBlobs unless `known`
   * says the repository has it. A refusal of the confinement names the path. The content is hashed a slice at a
   * time as it is read (a 64 MiB file never holds the event loop, nor lies in memory whole); a file larger than
   * KEPT_BYTES that must be written is read again straight into the private copy (writeBlobs checks git's hash of
   * that copy against this one, so a file changed in between fails the call).
   */
  async worktreeBlob(
    p: string,
    options: { write: boolean; known?: ReadonlySet<string> },
  ): Promise<WorktreeBlob | undefined> {
    const hash = createHash(this.objectFormat);
    const kept: Buffer[] = [];
    let large = false;
    let entry;
    try {
      entry = await this.confinement.streamEntry(p, {
        maxBytes: CONFINED_GIT_LIMITS.maxFileBytes,
        start: (size) => {
          hash.update(`blob ${size}\0`);
          large = size > KEPT_BYTES;
        },
        sink: (slice) => {
          hash.update(slice);
          if (options.write && !large) kept.push(Buffer.from(slice));
        },
      });
    } catch (error) {
      throw about(p, error);
    }
    if (entry.kind === 'missing' || entry.kind === 'directory') return undefined;
    const size = entry.kind === 'file' ? entry.data : entry.target.length;
    this.bytesRead += size;
    if (this.bytesRead > CONFINED_GIT_LIMITS.maxTotalBytes)
      throw new ConfinedGitLimitError(
        `the worktree files to read are more than ${CONFINED_GIT_LIMITS.maxTotalBytes} bytes: name fewer paths`,
      );
    const mode = entry.kind === 'symlink' ? SYMLINK : entry.executable ? '100755' : '100644';
    const oid = entry.kind === 'symlink' ? this.hash(entry.target) : hash.digest('hex');
    if (options.write && !options.known?.has(oid) && !this.written.has(oid)) {
      const file = path.join(this.tmp, 'blobs', String(this.blobs++));
      if (entry.kind === 'symlink') await fsp.writeFile(file, entry.target, { mode: 0o600 });
      else if (!large) await fsp.writeFile(file, Buffer.concat(kept), { mode: 0o600 });
      else await this.copyInto(p, file);
      this.pending.push({ file, oid });
      this.written.add(oid);
    }
    return { mode, oid };
  }

  /** A large file's content read again through the confinement, slice by slice, into the private copy `file`. */
  private async copyInto(p: string, file: string): Promise<void> {
    const out = await fsp.open(file, 'wx', 0o600);
    try {
      await this.confinement.streamEntry(p, {
        maxBytes: CONFINED_GIT_LIMITS.maxFileBytes,
        sink: async (slice) => {
          await out.write(slice);
        },
      });
    } catch (error) {
      throw about(p, error);
    } finally {
      await out.close();
    }
  }

  /** Writes the blobs worktreeBlob read (from the private copies, without filters) and checks git hashed the same. */
  async writeBlobs(): Promise<void> {
    if (this.pending.length === 0) return;
    const batch = this.pending.splice(0);
    const { stdout } = await this.run(['hash-object', '-w', '--no-filters', '--stdin-paths'], {
      input: batch.map((b) => b.file).join('\n') + '\n',
    });
    const oids = stdout.split('\n').filter((l) => l !== '');
    if (oids.length !== batch.length || oids.some((oid, i) => oid !== batch[i].oid)) {
      throw new Error('git hashed the worktree content differently from the coordinator');
    }
  }

  /** `update-index -z --index-info` lines: a path set to a blob, or removed (mode 0). */
  entryLine(p: string, blob: WorktreeBlob | undefined): string {
    return blob ? `${blob.mode} ${blob.oid}\t${p}\0` : `0 ${this.zeroOid}\t${p}\0`;
  }

  /**
   * The files under `starts` ("." the whole worktree) that the index does not track and the ignore rules do not
   * ignore (`--untracked-files=all`: files and links, never folders), walked through the confinement one level at a
   * time; each level's names are checked in one `check-ignore` against copies of the `.gitignore` files read so far.
   * A folder that is a link, or is swapped while walked, is not entered (git does not enter links either).
   */
  async untracked(starts: readonly string[], tracked: ReadonlySet<string>): Promise<string[]> {
    const found: string[] = [];
    let level: string[] = [];
    let seen = 0;
    const fileCandidates: string[] = [];
    for (const start of starts.length === 0 ? ['.'] : starts) {
      if (start === '.' || start === '') {
        level.push('');
        continue;
      }
      try {
        await this.confinement.listDir(start);
        level.push(start);
      } catch (error) {
        if (error instanceof ConfinementError && error.reason === 'not_a_directory') fileCandidates.push(start);
        else if (!(error instanceof ConfinementError && error.reason === 'not_found')) throw about(start, error);
      }
    }
    const ignoreRoot = path.join(this.tmp, 'ignore');
    // A named file is checked against the .gitignore files of its folders.
    for (const file of fileCandidates) {
      const parts = file.split('/');
      for (let i = 0; i < parts.length - 1; i++) await this.copyGitignore(parts.slice(0, i).join('/'), ignoreRoot);
    }
    let candidates = fileCandidates.filter((p) => !tracked.has(p)).map((p) => ({ path: p, dir: false }));
    for (const start of level) {
      const parts = start === '' ? [] : start.split('/');
      for (let i = 0; i < parts.length; i++) await this.copyGitignore(parts.slice(0, i).join('/'), ignoreRoot);
    }
    while (level.length > 0 || candidates.length > 0) {
      for (const dir of level) {
        let entries;
        try {
          entries = await this.confinement.listDir(dir);
        } catch (error) {
          if (
            error instanceof ConfinementError &&
            ['symlink', 'not_found', 'not_a_directory', 'changed_during_open', 'outside_worktree'].includes(
              error.reason,
            )
          )
            continue;
          throw about(dir, error);
        }
        seen += entries.length;
        if (seen > CONFINED_GIT_LIMITS.maxWalkEntries)
          throw new ConfinedGitLimitError(
            `the worktree has more than ${CONFINED_GIT_LIMITS.maxWalkEntries} entries to walk: name fewer paths`,
          );
        if (entries.some((e) => e.name === '.gitignore' && e.type === 'file'))
          await this.copyGitignore(dir, ignoreRoot);
        for (const entry of entries) {
          const rel = dir === '' ? entry.name : `${dir}/${entry.name}`;
          if (entry.type === 'directory') candidates.push({ path: rel, dir: true });
          else if ((entry.type === 'file' || entry.type === 'symlink') && !tracked.has(rel))
            candidates.push({ path: rel, dir: false });
        }
      }
      level = [];
      if (candidates.length === 0) break;
      const ignored = await this.ignored(
        candidates.map((c) => (c.dir ? `${c.path}/` : c.path)),
        ignoreRoot,
      );
      for (const candidate of candidates) {
        if (ignored.has(candidate.dir ? `${candidate.path}/` : candidate.path)) continue;
        if (candidate.dir) level.push(candidate.path);
        else found.push(candidate.path);
      }
      candidates = [];
    }
    return sortInTurns(found, byteOrder);
  }

  /** Copies `<dir>/.gitignore`, read through the confinement, into the private ignore tree (absent or refused: none). */
  private async copyGitignore(dir: string, ignoreRoot: string): Promise<void> {
    const rel = dir === '' ? '.gitignore' : `${dir}/.gitignore`;
    let data: Buffer;
    try {
      data = await this.confinement.readFile(rel, { maxBytes: 1024 * 1024 });
    } catch {
      return; // git itself does not follow a .gitignore that is a link; an unreadable one is none
    }
    const target = path.join(ignoreRoot, ...rel.split('/'));
    await fsp.mkdir(path.dirname(target), { recursive: true });
    await fsp.writeFile(target, data, { mode: 0o600 });
  }

  private async ignored(paths: readonly string[], ignoreRoot: string): Promise<Set<string>> {
    if (paths.length === 0) return new Set();
    const { stdout } = await this.run(['check-ignore', '-z', '--stdin'], {
      input: paths.join('\0') + '\0',
      okExitCodes: [1],
      workTree: ignoreRoot,
    });
    return new Set(stdout.split('\0').filter((p) => p !== ''));
  }
}
