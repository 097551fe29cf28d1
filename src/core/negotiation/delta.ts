import { diffLines, structuredPatch } from 'diff';
import { baseContentType } from '../router/model';
import type { DeltaSummary } from './model';

/** The bounds of a DeltaSummary and of a diff artifact (README, "Debates"). */
export const DELTA_LIMITS = {
  /** changed_paths kept per round (pathCount says how many changed in all). */
  maxPaths: 1000,
  /** A JSON Pointer longer than this is cut (with `…`). */
  maxPathChars: 512,
  /** A JSON value with an array longer than this is not diffed structurally (method `json-coarse`). */
  maxArrayItems: 500,
  /**
   * Nor two versions whose arrays together cost more than this: jsondiffpatch compares two arrays at one path by a
   * longest common subsequence (items before × items after, ≤ (before² + after²) / 2), so Σ items² over every array of
   * both versions is at most twice this. 250,000 cells take about 8 ms here; 9 arrays of 2,000 numbers took 0.64 s.
   */
  maxArrayCells: 250_000,
  /** Nor one with more leaves than this (either version): jsondiffpatch takes about 5 µs a leaf (20,000 took 0.13 s). */
  maxLeaves: 3_000,
  /** Two texts are line-diffed only when what differs (after their common prefix and suffix) is at most this many lines… */
  maxMiddleLines: 1_000,
  /** …and this many characters. */
  maxMiddleChars: 64 * 1024,
  /** The line diff gives up (method `text-coarse`) beyond this many changed lines… */
  maxEditLength: 200,
  /** …or after this long (milliseconds of real time; 1,000 lines and 250 ms held the event loop 0.1 s at 512 KiB). */
  textTimeoutMs: 10,
} as const;

/** Is this content type JSON (`application/json`, `…+json`)? */
export function isJsonContentType(contentType: string): boolean {
  const base = baseContentType(contentType);
  return base !== undefined && (base === 'application/json' || base.endsWith('+json'));
}

/**
 * jsondiffpatch is an ES module; the core compiles to CommonJS (tests) and is bundled by esbuild (the extension, the CLI),
 * so it is loaded by `require` (Node loads ES modules that way since 20.19 / 22.12).
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const jsondiffpatch = require('jsondiffpatch') as {
  create(options: { arrays?: { detectMove?: boolean } }): { diff(a: unknown, b: unknown): unknown };
};
const differ = jsondiffpatch.create({ arrays: { detectMove: false } });

/**
 * Is this JSON value small enough to diff structurally? Walks it once, stopping as soon as an array is longer than
 * DELTA_LIMITS.maxArrayItems or the leaves exceed DELTA_LIMITS.maxLeaves (jsondiffpatch is quadratic in array length).
 */
export function diffable(value: unknown): boolean {
  return arrayCells(value) !== undefined;
}

/**
 * Σ items² over the arrays of a JSON value (what its arrays cost jsondiffpatch), or undefined when the value is not
 * diffable: an array longer than DELTA_LIMITS.maxArrayItems, more than DELTA_LIMITS.maxLeaves leaves, or more than
 * twice DELTA_LIMITS.maxArrayCells. One walk, stopping at the first bound passed.
 */
function arrayCells(value: unknown): number | undefined {
  let leaves = 0;
  let cells = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') {
      if (++leaves > DELTA_LIMITS.maxLeaves) return undefined;
      continue;
    }
    const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
    if (Array.isArray(v)) {
      if (v.length > DELTA_LIMITS.maxArrayItems) return undefined;
      cells += v.length * v.length;
      if (cells > 2 * DELTA_LIMITS.maxArrayCells) return undefined;
    }
    if (children.length === 0 && ++leaves > DELTA_LIMITS.maxLeaves) return undefined;
    for (const child of children) stack.push(child);
  }
  return cells;
}

/** The summary of a change too large to diff: equal (canonical JSON / bytes) → 0, else 1, path `/`. */
function coarse(equal: boolean, method: 'json-coarse' | 'text-coarse'): DeltaSummary {
  return equal
    ? { magnitude: 0, changedPaths: [], pathCount: 0, method }
    : { magnitude: 1, changedPaths: ['/'], pathCount: 1, method };
}

/** The jsondiffpatch delta between two JSON values (undefined when equal). */
export function jsonDelta(before: unknown, after: unknown): unknown {
  return differ.diff(before, after);
}

function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Leaves of a JSON value: scalars, and empty arrays/objects (each counts as one). */
export function leafCount(value: unknown): number {
  if (value === null || typeof value !== 'object') return 1;
  const children = Array.isArray(value) ? value : Object.values(value as Record<string, unknown>);
  if (children.length === 0) return 1;
  let n = 0;
  for (const child of children) n += leafCount(child);
  return n;
}

/**
 * Walks a jsondiffpatch delta (docs/deltas.md): `[new]` added, `[old, new]` modified, `[old, 0, 0]` deleted,
 * `['', to, 3]` moved, an object of keys (arrays: `_t: 'a'`, `_<i>` old index, `<i>` new index). Each change is
 * reported once with its JSON Pointer and the leaves it touches.
 */
function walk(delta: unknown, pointer: string, out: { paths: string[]; leaves: number }): void {
  if (Array.isArray(delta)) {
    out.paths.push(pointer === '' ? '/' : pointer);
    if (delta.length === 1) out.leaves += leafCount(delta[0]);
    else if (delta.length === 2) out.leaves += Math.max(leafCount(delta[0]), leafCount(delta[1]));
    else if (delta.length === 3 && delta[2] === 0) out.leaves += leafCount(delta[0]);
    else out.leaves += 1; // a move (3) or a text diff (2, never produced here)
    return;
  }
  if (delta === null || typeof delta !== 'object') return;
  const node = delta as Record<string, unknown>;
  const isArray = node._t === 'a';
  for (const [key, child] of Object.entries(node)) {
    if (isArray && key === '_t') continue;
    const name = isArray && key.startsWith('_') ? key.slice(1) : key;
    walk(child, `${pointer}/${escapePointer(name)}`, out);
  }
}

function bounded(paths: string[]): { changedPaths: string[]; pathCount: number } {
  const unique = [
    ...new Set(
      paths.map((p) => (p.length > DELTA_LIMITS.maxPathChars ? `${p.slice(0, DELTA_LIMITS.maxPathChars)}…` : p)),
    ),
  ].sort();
  return { changedPaths: unique.slice(0, DELTA_LIMITS.maxPaths), pathCount: unique.length };
}

const clamp01 = (x: number) => (Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 1);

/**
 * The structural DeltaSummary of two JSON values: the changed leaves (added, removed or modified) over the leaves of
 * the larger version, in [0, 1]; changed_paths the JSON Pointers of the changes, sorted, bounded.
 */
export function jsonDeltaSummary(before: unknown, after: unknown): { summary: DeltaSummary; delta: unknown } {
  const cellsBefore = arrayCells(before);
  const cellsAfter = cellsBefore === undefined ? undefined : arrayCells(after);
  if (
    cellsBefore === undefined ||
    cellsAfter === undefined ||
    (cellsBefore + cellsAfter) / 2 > DELTA_LIMITS.maxArrayCells
  ) {
    // Too large to diff: equal by their JSON text (key order counts), a linear native comparison.
    return { summary: coarse(JSON.stringify(before) === JSON.stringify(after), 'json-coarse'), delta: undefined };
  }
  const delta = jsonDelta(before, after);
  if (delta === undefined) return { summary: { magnitude: 0, changedPaths: [], pathCount: 0, method: 'json' }, delta };
  const out = { paths: [] as string[], leaves: 0 };
  walk(delta, '', out);
  const magnitude = clamp01(out.leaves / Math.max(1, leafCount(before), leafCount(after)));
  return { summary: { magnitude, ...bounded(out.paths), method: 'json' }, delta };
}

function lineCount(text: string): number {
  if (text === '') return 0;
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

/**
 * The line DeltaSummary of two texts: changed lines (per changed block max(added, removed), so a modified line counts once)
 * over the lines of the longer text, in [0, 1];
 * changed_paths `/lines/<n>`: the first line (1-based, in the new text) of each changed block.
 */
/** The line count of `text` up to `end` ('\n's). */
function newlines(text: string, from: number, end: number, stopAbove = Infinity): number {
  let n = 0;
  for (let i = text.indexOf('\n', from); i !== -1 && i < end; i = text.indexOf('\n', i + 1)) if (++n > stopAbove) break;
  return n;
}

/**
 * The part of two texts that differs: their common prefix and suffix cut at line starts, `context` lines of each kept,
 * and how many lines the cut prefix had; undefined when a middle is larger than DELTA_LIMITS.maxMiddleLines or
 * maxMiddleChars. Linear, so two large texts rewritten throughout never reach the line diff, and the diff sees only
 * the middles (the `diff` package's own work on 512 KiB texts took 30–45 ms even when it gave up).
 */
function middles(
  before: string,
  after: string,
  context: number,
): { before: string; after: string; skippedLines: number } | undefined {
  const shorter = Math.min(before.length, after.length);
  let head = 0;
  while (head < shorter && before.charCodeAt(head) === after.charCodeAt(head)) head++;
  let tail = 0;
  while (
    tail < shorter - head &&
    before.charCodeAt(before.length - 1 - tail) === after.charCodeAt(after.length - 1 - tail)
  )
    tail++;
  // The prefix ends at a line start (the start of the line of the first difference), `context` lines earlier.
  head = head === 0 ? 0 : before.lastIndexOf('\n', head - 1) + 1;
  for (let k = 0; k < context && head > 0; k++) head = before.lastIndexOf('\n', head - 2) + 1;
  // The suffix starts at a line start (the same offset from the end in both texts), `context` lines later.
  let suffix = before.length - tail;
  if (suffix > 0 && before.charCodeAt(suffix - 1) !== 10) {
    const next = before.indexOf('\n', suffix);
    suffix = next === -1 ? before.length : next + 1;
  }
  for (let k = 0; k < context && suffix < before.length; k++) {
    const next = before.indexOf('\n', suffix);
    suffix = next === -1 ? before.length : next + 1;
  }
  tail = Math.min(before.length - suffix, shorter - head);
  const middle = { before: before.slice(head, before.length - tail), after: after.slice(head, after.length - tail) };
  for (const text of [middle.before, middle.after]) {
    if (
      text.length > DELTA_LIMITS.maxMiddleChars ||
      newlines(text, 0, text.length, DELTA_LIMITS.maxMiddleLines) > DELTA_LIMITS.maxMiddleLines
    )
      return undefined;
  }
  return { ...middle, skippedLines: newlines(before, 0, head) };
}

export function textDeltaSummary(before: string, after: string): DeltaSummary {
  const middle = middles(before, after, 0);
  if (middle === undefined) return coarse(before === after, 'text-coarse');
  const parts = diffLines(middle.before, middle.after, {
    maxEditLength: DELTA_LIMITS.maxEditLength,
    timeout: DELTA_LIMITS.textTimeoutMs,
  });
  if (parts === undefined) return coarse(before === after, 'text-coarse');
  let changed = 0;
  let line = 1 + middle.skippedLines;
  const paths: string[] = [];
  // A changed block (removed and/or added lines between unchanged ones) counts max(added, removed): a modified line once.
  let added = 0;
  let removed = 0;
  let inBlock = false;
  const close = () => {
    changed += Math.max(added, removed);
    added = 0;
    removed = 0;
    inBlock = false;
  };
  for (const part of parts) {
    const n = part.count ?? lineCount(part.value);
    if (part.added || part.removed) {
      if (!inBlock) paths.push(`/lines/${line}`);
      inBlock = true;
      if (part.added) {
        added += n;
        line += n;
      } else {
        removed += n;
      }
    } else {
      close();
      line += n;
    }
  }
  close();
  const magnitude = clamp01(changed / Math.max(1, lineCount(before), lineCount(after)));
  return { magnitude, ...bounded(paths), method: 'text' };
}

/** A unified diff of two texts (the text diff artifact); undefined when the diff gave up (DELTA_LIMITS). */
export function unifiedDiff(before: string, after: string, fromName: string, toName: string): string | undefined {
  const middle = middles(before, after, 3);
  if (middle === undefined) return undefined;
  const patch = structuredPatch(fromName, toName, middle.before, middle.after, '', '', {
    context: 3,
    maxEditLength: DELTA_LIMITS.maxEditLength,
    timeout: DELTA_LIMITS.textTimeoutMs,
  });
  if (patch === undefined) return undefined;
  const lines = [`--- ${fromName}`, `+++ ${toName}`];
  const at = (start: number, count: number) =>
    count === 0 && start === 0 && middle.skippedLines === 0 ? 0 : start + middle.skippedLines;
  for (const hunk of patch.hunks) {
    lines.push(
      `@@ -${at(hunk.oldStart, hunk.oldLines)},${hunk.oldLines} +${at(hunk.newStart, hunk.newLines)},${hunk.newLines} @@`,
      ...hunk.lines,
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Whether two JSON values are equal, object keys in any order (what comparing their canonicalJson says, in one linear
 * walk without sorting: canonicalJson of a 512 KiB object of 19,000 keys took 20–145 ms).
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  // Parsed JSON: no value is undefined, so equal key counts and every key of `a` in `b` mean the same keys.
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  if (keys.length !== Object.keys(right).length) return false;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    if (!Object.prototype.hasOwnProperty.call(right, key) || !jsonEqual(left[key], right[key])) return false;
  }
  return true;
}

/**
 * Whether two versions are the same contract: jsonEqual (key order aside) when both have at most
 * DELTA_LIMITS.maxLeaves leaves, else their JSON text compared (key order counts: jsonEqual of 19,000 keys took
 * 10–90 ms, Object.keys of such large objects being slow). Bounded either way.
 */
export function jsonSame(a: unknown, b: unknown): boolean {
  if (arrayCells(a) !== undefined && arrayCells(b) !== undefined) return jsonEqual(a, b);
  return JSON.stringify(a) === JSON.stringify(b);
}

/** JSON with object keys sorted: two values that differ only in key order compare equal (oscillation). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}
