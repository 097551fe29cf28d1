/**
 * Pure parsers of git's machine-readable output. Every one reads the NUL-separated (`-z`) form, in which paths
 * are given as they are: spaces, newlines, quotes and non-ASCII characters need no unquoting.
 */

/** One entry of `git worktree list --porcelain -z`. */
export interface WorktreeEntry {
  readonly path: string;
  /** The checked-out commit; undefined for a bare repository (and an unborn branch). */
  readonly head: string | undefined;
  /** The full ref (`refs/heads/…`), undefined when detached or bare. */
  readonly branch: string | undefined;
  readonly bare: boolean;
  readonly detached: boolean;
  readonly locked: boolean;
  /** The lock's reason as given to `git worktree lock --reason` ('' when none was given). */
  readonly lockReason: string | undefined;
  readonly prunable: boolean;
  readonly prunableReason: string | undefined;
}

/** Parses `git worktree list --porcelain -z`: records of `key[ value]` fields, each record ended by an empty field. */
export function parseWorktreeList(output: string): WorktreeEntry[] {
  const entries: WorktreeEntry[] = [];
  let current: { -readonly [K in keyof WorktreeEntry]: WorktreeEntry[K] } | undefined;
  const finish = () => {
    if (current) entries.push(current);
    current = undefined;
  };
  for (const field of output.split('\0')) {
    if (field === '') {
      finish();
      continue;
    }
    const space = field.indexOf(' ');
    const key = space < 0 ? field : field.slice(0, space);
    const value = space < 0 ? undefined : field.slice(space + 1);
    if (key === 'worktree') {
      finish();
      current = {
        path: value ?? '',
        head: undefined,
        branch: undefined,
        bare: false,
        detached: false,
        locked: false,
        lockReason: undefined,
        prunable: false,
        prunableReason: undefined,
      };
      continue;
    }
    if (!current) throw new Error(`worktree list: '${key}' before any 'worktree' line`);
    switch (key) {
      case 'HEAD':
        current.head = value;
        break;
      case 'branch':
        current.branch = value;
        break;
      case 'bare':
        current.bare = true;
        break;
      case 'detached':
        current.detached = true;
        break;
      case 'locked':
        current.locked = true;
        current.lockReason = value ?? '';
        break;
      case 'prunable':
        current.prunable = true;
        current.prunableReason = value ?? '';
        break;
      default:
        break; // a field a newer git adds is not ours to refuse
    }
  }
  finish();
  return entries;
}

export type StatusKind = 'changed' | 'renamed' | 'unmerged' | 'untracked' | 'ignored';

/** One entry of `git status --porcelain=v2 -z`. */
export interface StatusEntry {
  readonly kind: StatusKind;
  /** The two-letter XY code ('??' for untracked, '!!' for ignored). */
  readonly xy: string;
  readonly path: string;
  /** For a rename or copy: the path it came from. */
  readonly origPath?: string;
}

export interface StatusSummary {
  readonly entries: readonly StatusEntry[];
  /** `# branch.head` when `--branch` was given: the branch name or '(detached)'. */
  readonly branchHead?: string;
  readonly branchOid?: string;
}

/** Splits off the first `count` space-separated fields of a record; the rest (a path) may contain spaces. */
function fieldsThenPath(record: string, count: number): { fields: string[]; path: string } {
  const fields: string[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    const next = record.indexOf(' ', at);
    if (next < 0) throw new Error(`status: a record has fewer than ${count} fields: '${record.slice(0, 80)}'`);
    fields.push(record.slice(at, next));
    at = next + 1;
  }
  return { fields, path: record.slice(at) };
}

/** Parses `git status --porcelain=v2 -z [--branch]`. */
export function parseStatusV2(output: string): StatusSummary {
  const records = output.split('\0');
  const entries: StatusEntry[] = [];
  let branchHead: string | undefined;
  let branchOid: string | undefined;
  for (let i = 0; i < records.length; i++) {
    const record = records[i];
    if (record === '') continue;
    switch (record[0]) {
      case '#': {
        const { fields, path } = fieldsThenPath(record, 2);
        if (fields[1] === 'branch.head') branchHead = path;
        if (fields[1] === 'branch.oid') branchOid = path;
        break;
      }
      case '1': {
        // 1 XY sub mH mI mW hH hI path
        const { fields, path } = fieldsThenPath(record, 8);
        entries.push({ kind: 'changed', xy: fields[1], path });
        break;
      }
      case '2': {
        // 2 XY sub mH mI mW hH hI Xscore path NUL origPath
        const { fields, path } = fieldsThenPath(record, 9);
        const origPath = records[++i];
        if (origPath === undefined) throw new Error('status: a rename record without its original path');
        entries.push({ kind: 'renamed', xy: fields[1], path, origPath });
        break;
      }
      case 'u': {
        // u XY sub m1 m2 m3 mW h1 h2 h3 path
        const { fields, path } = fieldsThenPath(record, 10);
        entries.push({ kind: 'unmerged', xy: fields[1], path });
        break;
      }
      case '?':
        entries.push({ kind: 'untracked', xy: '??', path: record.slice(2) });
        break;
      case '!':
        entries.push({ kind: 'ignored', xy: '!!', path: record.slice(2) });
        break;
      default:
        throw new Error(`status: unknown record '${record.slice(0, 20)}'`);
    }
  }
  return { entries, branchHead, branchOid };
}

/** Files that are not committed: changed, renamed, unmerged and untracked (ignored files do not count). */
export function dirtyCount(status: StatusSummary): number {
  return status.entries.filter((e) => e.kind !== 'ignored').length;
}

/** One line of `git worktree prune --dry-run --verbose`: the administrative entry and why it would go. */
export interface PruneCandidate {
  /** The entry's name under `<git dir>/worktrees/`. */
  readonly name: string;
  readonly reason: string;
}

/** Parses `git worktree prune --dry-run --verbose` ("Removing worktrees/<name>: <reason>", one per line). */
export function parsePruneDryRun(output: string): PruneCandidate[] {
  const candidates: PruneCandidate[] = [];
  for (const line of output.split('\n')) {
    const match = /^Removing worktrees\/(.+?): (.*)$/.exec(line);
    if (match) candidates.push({ name: match[1], reason: match[2] });
  }
  return candidates;
}

/** One ref of `git for-each-ref --format=%(refname)%00%(objectname)`, records ended by a newline. */
export interface RefEntry {
  readonly ref: string;
  readonly oid: string;
}

export function parseRefList(output: string): RefEntry[] {
  return output
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const [ref, oid] = line.split('\0');
      return { ref, oid };
    });
}
