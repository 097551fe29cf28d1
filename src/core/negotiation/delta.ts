import { diffLines, structuredPatch } from 'diff';
import { baseContentType } from '../router/envelope';
import type { DeltaSummary } from './model';

/** The bounds of a DeltaSummary and of a diff artifact (README, "Debates"). */
export const DELTA_LIMITS = {
  /** changed_paths kept per round (pathCount says how many changed in all). */
  maxPaths: 1000,
  /** A JSON Pointer longer than this is cut (with `…`). */
  maxPathChars: 512,
  /** A JSON value with an array longer than this is not diffed structurally (method `json-coarse`). */
  maxArrayItems: 2_000,
  /** Nor one with more leaves than this (either version). */
  maxLeaves: 20_000,
  /** The line diff gives up (method `text-coarse`) beyond this many changed lines… */
  maxEditLength: 1_000,
  /** …or after this long (milliseconds of real time). */
  textTimeoutMs: 250,
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
const jsondiffpatch = require('jsondiffpatch') as { create(options: { arrays?: { detectMove?: boolean } }): { diff(a: unknown, b: unknown): unknown } };
const differ = jsondiffpatch.create({ arrays: { detectMove: false } });

/**
 * Is this JSON value small enough to diff structurally? Walks it once, stopping as soon as an array is longer than
 * DELTA_LIMITS.maxArrayItems or the leaves exceed DELTA_LIMITS.maxLeaves (jsondiffpatch is quadratic in array length).
 */
export function diffable(value: unknown): boolean {
  let leaves = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') {
      if (++leaves > DELTA_LIMITS.maxLeaves) return false;
      continue;
    }
    const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
    if (Array.isArray(v) && v.length > DELTA_LIMITS.maxArrayItems) return false;
    if (children.length === 0 && ++leaves > DELTA_LIMITS.maxLeaves) return false;
    for (const child of children) stack.push(child);
  }
  return true;
}

/** The summary of a change too large to diff: equal (canonical JSON / bytes) → 0, else 1, path `/`. */
function coarse(equal: boolean, method: 'json-coarse' | 'text-coarse'): DeltaSummary {
  return equal ? { magnitude: 0, changedPaths: [], pathCount: 0, method } : { magnitude: 1, changedPaths: ['/'], pathCount: 1, method };
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
  const unique = [...new Set(paths.map((p) => (p.length > DELTA_LIMITS.maxPathChars ? `${p.slice(0, DELTA_LIMITS.maxPathChars)}…` : p)))].sort();
  return { changedPaths: unique.slice(0, DELTA_LIMITS.maxPaths), pathCount: unique.length };
}

const clamp01 = (x: number) => (Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 1);

/**
 * The structural DeltaSummary of two JSON values: the changed leaves (added, removed or modified) over the leaves of
 * the larger version, in [0, 1]; changed_paths the JSON Pointers of the changes, sorted, bounded.
 */
export function jsonDeltaSummary(before: unknown, after: unknown): { summary: DeltaSummary; delta: unknown } {
  if (!diffable(before) || !diffable(after)) return { summary: coarse(canonicalJson(before) === canonicalJson(after), 'json-coarse'), delta: undefined };
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
export function textDeltaSummary(before: string, after: string): DeltaSummary {
  const parts = diffLines(before, after, { maxEditLength: DELTA_LIMITS.maxEditLength, timeout: DELTA_LIMITS.textTimeoutMs });
  if (parts === undefined) return coarse(before === after, 'text-coarse');
  let changed = 0;
  let line = 1;
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
  const patch = structuredPatch(fromName, toName, before, after, '', '', { context: 3, maxEditLength: DELTA_LIMITS.maxEditLength, timeout: DELTA_LIMITS.textTimeoutMs });
  if (patch === undefined) return undefined;
  const lines = [`--- ${fromName}`, `+++ ${toName}`];
  for (const hunk of patch.hunks) {
    lines.push(`@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@`, ...hunk.lines);
  }
  return `${lines.join('\n')}\n`;
}

/** JSON with object keys sorted: two values that differ only in key order compare equal (oscillation). */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}
