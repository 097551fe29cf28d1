import picomatch from 'picomatch';
import type { TaskScope } from './model';

/**
 * RFC §9.2 scope-based conflict analysis: whether two tasks' scopes could touch the same thing. Pure.
 *
 * Rules (README, "Concurrency and conflicts"):
 * - A declared resource shared by both scopes is an overlap, whatever their repositories.
 * - Files: two scopes share a place when their repositories are the same (a scope without a repository declares no
 *   files unless it names a worktree or paths; a missing side is "unknown" and taken as the same) and their worktrees are
 *   the same, where an empty worktree means "any worktree of the repository" (the main checkout or an agent's own):
 *   two different named worktrees are separate checkouts and do not overlap.
 * - In a shared place, a scope without paths covers the whole tree (it overlaps everything there); otherwise two path
 *   globs overlap when some path could match both (`globsOverlap`, a sound approximation: it may say yes wrongly,
 *   never no wrongly).
 */
export interface ScopeOverlap {
  readonly overlap: boolean;
  /** One line per reason, for the log, the HITL invocation and the notes of CheckParallelism. */
  readonly reasons: string[];
  /** Resources both scopes declare. */
  readonly sharedResources: string[];
  /** Both scopes can be in the same repository and worktree. */
  readonly samePlace: boolean;
  /** In the same place, one side has no paths: the whole tree is shared. */
  readonly wholeTree: boolean;
  /** Overlapping path pairs (a, b) with how certain and how specific each overlap is. */
  readonly paths: readonly PathOverlap[];
}

export interface PathOverlap {
  readonly a: string;
  readonly b: string;
  /** identical: the same glob; certain: every match of one lies inside the other, or a literal path lies in the other; possible: the globs may share some paths. */
  readonly kind: 'identical' | 'certain' | 'possible';
  /** Static path segments both globs share before their first wildcard (how narrow the shared region is). */
  readonly depth: number;
}

export function scopesOverlap(a: TaskScope, b: TaskScope): ScopeOverlap {
  const reasons: string[] = [];
  const resourcesB = new Set(b.resources);
  const sharedResources = [...new Set(a.resources.filter((r) => resourcesB.has(r)))].sort();
  for (const r of sharedResources) reasons.push(`both declare the resource '${r}'`);

  const place = samePlace(a, b);
  let wholeTree = false;
  const paths: PathOverlap[] = [];
  if (place !== undefined) {
    if (a.paths.length === 0 || b.paths.length === 0) {
      wholeTree = true;
      reasons.push(
        `${place}, and ${a.paths.length === 0 && b.paths.length === 0 ? 'neither names paths' : 'one names no paths'}: the whole tree is shared`,
      );
    } else {
      for (const pa of a.paths) {
        for (const pb of b.paths) {
          const o = globsOverlap(pa, pb);
          if (o === undefined) continue;
          paths.push(o);
          reasons.push(
            `${place}: ${o.kind === 'identical' ? `both name '${pa}'` : `'${pa}' and '${pb}' ${o.kind === 'certain' ? 'share paths' : 'may share paths'}`}`,
          );
        }
      }
    }
  }
  return {
    overlap: sharedResources.length > 0 || wholeTree || paths.length > 0,
    reasons,
    sharedResources,
    samePlace: place !== undefined,
    wholeTree,
    paths,
  };
}

/**
 * Whether a scope declares files at all (a repository, a worktree or paths): only two such scopes can share a place.
 * The running-task index (RunningIndex, concurrency.ts) files its candidates by this rule and the repository.
 */
export function touchesFiles(s: TaskScope): boolean {
  return s.repoId !== '' || s.worktreeId !== '' || s.paths.length > 0;
}

/** A description of the shared place, or undefined when the scopes cannot touch the same files. */
function samePlace(a: TaskScope, b: TaskScope): string | undefined {
  if (!touchesFiles(a) || !touchesFiles(b)) return undefined;
  if (a.repoId !== '' && b.repoId !== '' && a.repoId !== b.repoId) return undefined;
  if (a.worktreeId !== '' && b.worktreeId !== '' && a.worktreeId !== b.worktreeId) return undefined;
  const repo = a.repoId || b.repoId;
  const worktree = a.worktreeId || b.worktreeId;
  const where = repo ? `same repository '${repo}'` : 'no repository named';
  return worktree
    ? `${where}, worktree '${worktree}'${a.worktreeId === b.worktreeId ? '' : ' (the other: any worktree)'}`
    : `${where}, any worktree`;
}

interface Pattern {
  readonly text: string;
  /** The static directory (or, for a literal, the whole path) every match lies under; '' = anywhere. */
  readonly base: string;
  readonly literal: boolean;
  /** Braces, extended globs and negations can change the number of segments: compared conservatively. */
  readonly irregular: boolean;
  readonly globstar: boolean;
}

/** Parsed globs, reused: the gate compares the same running scopes on every dispatch attempt. Cleared when full. */
const patterns = new Map<string, Pattern>();
const MAX_CACHED_PATTERNS = 10_000;

function pattern(glob: string): Pattern {
  let parsed = patterns.get(glob);
  if (parsed === undefined) {
    if (patterns.size >= MAX_CACHED_PATTERNS) patterns.clear();
    parsed = parsePattern(glob);
    patterns.set(glob, parsed);
  }
  return parsed;
}

function parsePattern(glob: string): Pattern {
  const text = glob.replace(/\\/g, '/').replace(/^\.\//, '').replace(/\/+$/, '');
  if (text.startsWith('!')) return { text, base: '', literal: false, irregular: true, globstar: true };
  const scan = picomatch.scan(text);
  const base = scan.base.replace(/\/+$/, '');
  return {
    text,
    base,
    literal: !scan.isGlob,
    irregular: scan.isBrace || scan.isExtglob || scan.negated,
    globstar: scan.glob.includes('**'),
  };
}

const segments = (p: string): string[] => (p === '' ? [] : p.split('/'));

/** `outer` is `inner` or one of its ancestor directories ('' is the root). */
function isWithin(inner: string, outer: string): boolean {
  return outer === '' || inner === outer || inner.startsWith(`${outer}/`);
}

function match(path: string, glob: string): boolean {
  return picomatch.isMatch(path, glob, { dot: true });
}

/**
 * Whether some path could match both globs (picomatch syntax, relative to the repository). A literal path (no
 * wildcard) stands for itself and, if it is a directory, everything under it. Sound: `undefined` only when no path
 * can match both; a `possible` overlap may be wrong.
 */
export function globsOverlap(globA: string, globB: string): PathOverlap | undefined {
  const a = pattern(globA);
  const b = pattern(globB);
  if (a.text === b.text) return { a: globA, b: globB, kind: 'identical', depth: segments(a.base).length };
  // Every match of a glob lies under its base: bases on different branches never meet.
  if (!isWithin(a.base, b.base) && !isWithin(b.base, a.base)) return undefined;
  const depth = Math.min(segments(a.base).length, segments(b.base).length);
  const found = (kind: PathOverlap['kind']): PathOverlap => ({ a: globA, b: globB, kind, depth });
  if (a.literal && b.literal) return found('certain');
  if (a.literal || b.literal) {
    const [lit, glob] = a.literal ? [a, b] : [b, a];
    // The literal is the glob's base or above it: all the glob's matches are inside the literal directory.
    if (isWithin(glob.base, lit.text)) return found('certain');
    if (match(lit.text, glob.text)) return found('certain');
    // Could the glob match something under the literal directory?
    if (glob.globstar || glob.irregular) return found('possible');
    const litSegments = segments(lit.text);
    const globSegments = segments(glob.text);
    if (globSegments.length <= litSegments.length) return undefined;
    return match(lit.text, globSegments.slice(0, litSegments.length).join('/')) ? found('possible') : undefined;
  }
  if (!a.irregular && !b.irregular && disjointSuffixes(a.text, b.text)) return undefined;
  return found('possible');
}

/**
 * Two globs whose last segments are `*<suffix>` with static suffixes neither of which ends the other (`*.ts`, `*.md`)
 * match no common file. Applies only when that last segment is not `**`.
 */
function disjointSuffixes(a: string, b: string): boolean {
  const suffix = (glob: string): string | undefined => {
    const last = glob.slice(glob.lastIndexOf('/') + 1);
    if (!last.startsWith('*') || last.startsWith('**')) return undefined;
    const rest = last.slice(1);
    return rest !== '' && !/[*?[\]{}()!+@]/.test(rest) ? rest : undefined;
  };
  const sa = suffix(a);
  const sb = suffix(b);
  return sa !== undefined && sb !== undefined && !sa.endsWith(sb) && !sb.endsWith(sa);
}
