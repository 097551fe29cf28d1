import type { ValidationIssue } from './model';

/**
 * ValidationIssue paths and the issue list the validation module fills.
 *
 * A path names a field the way the definition file spells it: segments joined by `.`, list indexes as `[i]`, and a key
 * that is not made only of letters, digits, `_` and `-` as `["…"]` (JSON string syntax), so that every path is read
 * back unambiguously: `nodes.review.dependencies[1]`, `nodes.review.metadata.route`, `nodes["a.b"].agent_id`,
 * `workflow_id`. The empty path is the whole file.
 */
export type PathSegment = string | number;

const PLAIN = /^[A-Za-z0-9_-]+$/;

export function issuePath(...segments: readonly PathSegment[]): string {
  let out = '';
  for (const segment of segments) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (PLAIN.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

/** The segments of a path written by issuePath (undefined when it is not one). */
export function parseIssuePath(path: string): PathSegment[] | undefined {
  const segments: PathSegment[] = [];
  let i = 0;
  while (i < path.length) {
    const c = path[i];
    if (c === '.') {
      if (segments.length === 0) return undefined;
      i++;
      continue;
    }
    if (c === '[') {
      if (path[i + 1] === '"') {
        // A JSON string: find its closing quote (an escaped quote does not close it).
        let j = i + 2;
        while (j < path.length && path[j] !== '"') j += path[j] === '\\' ? 2 : 1;
        if (path[j + 1] !== ']') return undefined;
        try {
          segments.push(JSON.parse(path.slice(i + 1, j + 1)) as string);
        } catch {
          return undefined;
        }
        i = j + 2;
      } else {
        const close = path.indexOf(']', i);
        const digits = close < 0 ? '' : path.slice(i + 1, close);
        if (!/^\d+$/.test(digits)) return undefined;
        segments.push(Number(digits));
        i = close + 1;
      }
      continue;
    }
    let j = i;
    while (j < path.length && path[j] !== '.' && path[j] !== '[') j++;
    const word = path.slice(i, j);
    if (!PLAIN.test(word)) return undefined;
    segments.push(word);
    i = j;
  }
  return segments;
}

/** An id or a value quoted for a message, cut to `max` characters. */
export function quote(value: string, max = 80): string {
  return JSON.stringify(value.length > max ? `${value.slice(0, max)}…` : value);
}

/** The most issues one validation reports; the rest are counted in one last issue (`more_issues`). */
export const MAX_ISSUES = 100;

interface Entry {
  readonly issue: ValidationIssue;
  /** The author's position of the node it belongs to (-1: the workflow as a whole). */
  readonly node: number;
  readonly seq: number;
}

/**
 * Issues in a stable order: errors before warnings; within each, the workflow's own fields first, then by the
 * author's node order, then in the order they were found. At most MAX_ISSUES are listed, then one `more_issues`.
 */
export class IssueList {
  private readonly entries: Entry[] = [];
  private errorCount = 0;

  add(node: number, issue: ValidationIssue): void {
    if (issue.severity === 'error') this.errorCount++;
    this.entries.push({ issue, node, seq: this.entries.length });
  }

  error(
    node: number,
    code: string,
    path: string,
    message: string,
    extra?: { readonly cycle?: readonly string[] },
  ): void {
    this.add(node, { severity: 'error', code, path, message, ...(extra?.cycle ? { cycle: extra.cycle } : {}) });
  }

  warning(node: number, code: string, path: string, message: string): void {
    this.add(node, { severity: 'warning', code, path, message });
  }

  get hasErrors(): boolean {
    return this.errorCount > 0;
  }

  get size(): number {
    return this.entries.length;
  }

  /** Sorted, every one. */
  all(): ValidationIssue[] {
    return [...this.entries]
      .sort(
        (a, b) =>
          (a.issue.severity === b.issue.severity ? 0 : a.issue.severity === 'error' ? -1 : 1) ||
          a.node - b.node ||
          a.seq - b.seq,
      )
      .map((e) => e.issue);
  }

  /** Sorted and bounded: MAX_ISSUES, then one `more_issues`. */
  list(): ValidationIssue[] {
    return bounded(this.all(), (rest) => ({
      severity: rest.errors ? 'error' : 'warning',
      code: 'more_issues',
      path: '',
      message: moreMessage(rest.errors, rest.warnings),
    }));
  }
}

/** The first MAX_ISSUES of sorted issues, then the one made by `more` from the count of the rest. */
export function bounded<T extends ValidationIssue>(
  sorted: T[],
  more: (rest: { errors: number; warnings: number }) => T,
): T[] {
  if (sorted.length <= MAX_ISSUES) return sorted;
  let errors = 0;
  for (let i = MAX_ISSUES; i < sorted.length; i++) if (sorted[i].severity === 'error') errors++;
  return [...sorted.slice(0, MAX_ISSUES), more({ errors, warnings: sorted.length - MAX_ISSUES - errors })];
}

export function moreMessage(errors: number, warnings: number): string {
  const parts = [
    errors ? `${errors} more error${errors === 1 ? '' : 's'}` : '',
    warnings ? `${warnings} more warning${warnings === 1 ? '' : 's'}` : '',
  ].filter(Boolean);
  return `and ${parts.join(' and ')} (only the first ${MAX_ISSUES} issues are listed)`;
}
