// What the approval panel shows of a diff, as plain data: pure functions, no DOM, so that they are unit
// tested in Node. The panel (main.ts) turns the rows into elements with textContent only.
import { structuredPatch } from 'diff';

/** One line of a unified diff view. `+`/`-`/` ` is part of `text`, so the kind never relies on colour alone. */
export interface DiffLine {
  readonly kind: 'add' | 'del' | 'context' | 'hunk' | 'header' | 'note';
  readonly text: string;
  /** Line numbers in the old and new text, when known. */
  readonly oldLine?: number;
  readonly newLine?: number;
}

/** Lines of context kept around each change. */
export const CONTEXT_LINES = 3;

/**
 * The line diff's bounds: it gives up beyond this many changed lines or after this long (the `diff` package's
 * maxEditLength and timeout), and the panel says the texts differ too much to show line by line. Unbounded, two
 * 125 KB texts with every other line changed (an approval's context may be 256 KiB) took 9.9 s of the panel's one
 * thread, its buttons included (issue 30, item 1: the approval never waits on the diff).
 */
export const TEXT_DIFF_LIMITS = { maxEditLength: 1_000, timeoutMs: 30 } as const;

const lineCount = (t: string) => (t === '' ? 0 : t.split('\n').length - (t.endsWith('\n') ? 1 : 0));

/**
 * A unified line diff of two texts (the `diff` package's structured patch): hunk headers, then the
 * context, removed and added lines with their line numbers. No lines when the texts are equal.
 * "No newline at end of file" is shown only when the two texts differ in that.
 */
export function textDiffLines(before: string, after: string, context = CONTEXT_LINES): DiffLine[] {
  // An empty text has no last line to terminate; otherwise both sides unterminated is the common case of short texts.
  const unterminated = [before, after].filter((t) => t !== '').every((t) => !t.endsWith('\n'));
  const terminate = (t: string) => (unterminated && t !== '' ? `${t}\n` : t);
  const patch = structuredPatch('before', 'after', terminate(before), terminate(after), undefined, undefined, {
    context,
    maxEditLength: TEXT_DIFF_LIMITS.maxEditLength,
    timeout: TEXT_DIFF_LIMITS.timeoutMs,
  });
  if (!patch) {
    return [
      {
        kind: 'note',
        text: `The texts differ in too many lines to show line by line here (${lineCount(before)} lines, ${before.length} characters before; ${lineCount(after)} lines, ${after.length} characters after).`,
      },
    ];
  }
  const lines: DiffLine[] = [];
  for (const hunk of patch.hunks) {
    lines.push({ kind: 'hunk', text: `@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@` });
    let oldLine = hunk.oldStart;
    let newLine = hunk.newStart;
    for (const line of hunk.lines) {
      const mark = line[0];
      if (mark === '+') lines.push({ kind: 'add', text: line, newLine: newLine++ });
      else if (mark === '-') lines.push({ kind: 'del', text: line, oldLine: oldLine++ });
      else if (mark === '\\') lines.push({ kind: 'note', text: line });
      else lines.push({ kind: 'context', text: line, oldLine: oldLine++, newLine: newLine++ });
    }
  }
  return lines;
}

/** A ready-made unified diff (e.g. `git diff` output), classified line by line for colouring. */
export function unifiedDiffLines(unified: string): DiffLine[] {
  const text = unified.endsWith('\n') ? unified.slice(0, -1) : unified;
  if (text === '') return [];
  let inHunk = false;
  return text.split(/\r?\n/).map((line): DiffLine => {
    if (line.startsWith('@@')) {
      inHunk = true;
      return { kind: 'hunk', text: line };
    }
    if (
      !inHunk ||
      /^(diff --git |index |--- |\+\+\+ |new file mode |deleted file mode |similarity index |rename (from|to) )/.test(
        line,
      )
    ) {
      if (line.startsWith('diff --git ')) inHunk = false;
      return { kind: 'header', text: line };
    }
    if (line.startsWith('+')) return { kind: 'add', text: line };
    if (line.startsWith('-')) return { kind: 'del', text: line };
    if (line.startsWith('\\')) return { kind: 'note', text: line };
    return { kind: 'context', text: line };
  });
}

/** One structural change between two JSON values. */
export interface JsonChange {
  readonly kind: 'added' | 'removed' | 'changed' | 'moved' | 'text';
  /** Where, written like `$.dependencies["left-pad"][2]`. */
  readonly path: string;
  readonly before?: unknown;
  readonly after?: unknown;
  /** For `moved`: the new position. */
  readonly to?: string;
}

/**
 * The bounds of the panel's JSON diff (jsondiffpatch), the same as the core's for negotiation deltas (DELTA_LIMITS in
 * src/core/negotiation/delta.ts). jsondiffpatch compares two arrays at one path by a longest common subsequence, a
 * table of items before × items after: two arrays of 6,000 numbers took 2.2 s and 470 MB, and an approval's 256 KiB
 * context holds arrays of 60,000 (issue 32: one approval diff took its process to 1,030 MB and kept it).
 */
export const JSON_DIFF_LIMITS = {
  /** No array longer than this (either value)… */
  maxArrayItems: 500,
  /** …nor Σ items² over the arrays of both values above this (what the tables cost at most)… */
  maxArrayCells: 500_000,
  /** …nor more leaves than this in either value (jsondiffpatch takes about 5 µs a leaf). */
  maxLeaves: 3_000,
} as const;

/**
 * Why two JSON values are too large for the panel to diff structurally, or undefined when they are not. One walk of
 * each (no recursion, nothing built), stopping at the first bound passed: its cost is linear in what it walks, whatever
 * the values hold.
 */
export function jsonDiffRefusal(before: unknown, after: unknown): string | undefined {
  const L = JSON_DIFF_LIMITS;
  let cells = 0;
  for (const value of [before, after]) {
    let leaves = 0;
    const stack: unknown[] = [value];
    while (stack.length > 0) {
      const v = stack.pop();
      if (v === null || typeof v !== 'object') {
        if (++leaves > L.maxLeaves) return `more than ${L.maxLeaves} values`;
        continue;
      }
      const children = Array.isArray(v) ? (v as unknown[]) : Object.values(v as Record<string, unknown>);
      if (Array.isArray(v)) {
        if (v.length > L.maxArrayItems) return `an array of more than ${L.maxArrayItems} items`;
        cells += v.length * v.length;
        if (cells > L.maxArrayCells) return `arrays of more than ${L.maxArrayCells} item pairs to compare`;
      }
      if (children.length === 0 && ++leaves > L.maxLeaves) return `more than ${L.maxLeaves} values`;
      for (const child of children) stack.push(child);
    }
  }
  return undefined;
}

/**
 * Flattens a jsondiffpatch delta (https://github.com/benjamine/jsondiffpatch/blob/master/docs/deltas.md)
 * into a list of changes, in document order. The panel renders these itself; jsondiffpatch's HTML
 * formatter is never used, because the values are agent-supplied.
 */
export function jsonDeltaChanges(delta: unknown, path = '$'): JsonChange[] {
  if (delta === undefined) return [];
  if (Array.isArray(delta)) {
    switch (delta.length) {
      case 1:
        return [{ kind: 'added', path, after: delta[0] }];
      case 2:
        return [{ kind: 'changed', path, before: delta[0], after: delta[1] }];
      case 3:
        if (delta[2] === 0) return [{ kind: 'removed', path, before: delta[0] }];
        if (delta[2] === 2) return [{ kind: 'text', path, after: delta[0] }];
        break;
    }
    return [{ kind: 'changed', path, after: delta }];
  }
  if (!isRecord(delta)) return [];
  if (delta._t === 'a') return arrayChanges(delta, path);
  return Object.keys(delta).flatMap((key) => jsonDeltaChanges(delta[key], `${path}${propertyPath(key)}`));
}

function arrayChanges(delta: Record<string, unknown>, path: string): JsonChange[] {
  const changes: Array<{ order: number; changes: JsonChange[] }> = [];
  for (const key of Object.keys(delta)) {
    if (key === '_t') continue;
    const removedSide = key.startsWith('_');
    const index = Number(removedSide ? key.slice(1) : key);
    if (!Number.isInteger(index)) continue;
    const item = delta[key];
    if (removedSide && Array.isArray(item) && item.length === 3 && item[2] === 3) {
      changes.push({
        order: index,
        changes: [
          {
            kind: 'moved',
            path: `${path}[${index}]`,
            to: `${path}[${String(item[1])}]`,
            before: item[0] === '' ? undefined : item[0],
          },
        ],
      });
      continue;
    }
    changes.push({ order: index + (removedSide ? 0 : 0.5), changes: jsonDeltaChanges(item, `${path}[${index}]`) });
  }
  return changes.sort((a, b) => a.order - b.order).flatMap((c) => c.changes);
}

/** `.name` for identifiers, `["any key"]` otherwise. */
export function propertyPath(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/** A JSON value as text for the panel: strings as JSON strings (quoted, escapes visible), the rest pretty-printed. */
export function formatJsonValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
