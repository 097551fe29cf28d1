import { formatPatch, structuredPatch } from 'diff';

/**
 * A unified diff of two texts whose cost is bounded, whatever the texts (README, "Limits"): the common prefix and
 * suffix (whole lines) are stripped in linear time; what remains is diffed by `diff` only when it is at most
 * BOUNDED_DIFF_LIMITS.maxMiddleLines lines and maxMiddleChars characters, with an edit-length and a time bound;
 * otherwise (or when the diff gives up) the result is a coarse diff: the file names, sizes and the changed line
 * range, saying it is coarse. Never quadratic in the size of the texts.
 */
export const BOUNDED_DIFF_LIMITS = {
  /** The changed middle (either side) above this many lines: coarse, not diffed. */
  maxMiddleLines: 2_000,
  /** …or above this many characters. */
  maxMiddleChars: 128 * 1024,
  /** The line diff gives up (coarse) beyond this many changed lines… */
  maxEditLength: 200,
  /** …or after this long (milliseconds of real time). */
  timeoutMs: 10,
  /** Context lines around each hunk. */
  context: 3,
} as const;

export interface BoundedDiff {
  readonly unified: string;
  /** True when the diff is coarse (files, sizes and the changed line range, not the lines). */
  readonly coarse: boolean;
}

/** Number of '\n' in text[from, to). Linear. */
function countLines(text: string, from: number, to: number): number {
  let n = 0;
  let i = text.indexOf('\n', from);
  while (i !== -1 && i < to) {
    n++;
    i = text.indexOf('\n', i + 1);
  }
  return n;
}

/** The start of the line `lines` lines before the line starting at `at` (at is a line start), not before 0. */
function linesBack(text: string, at: number, lines: number): number {
  let p = at;
  for (let k = 0; k < lines && p > 0; k++) {
    const nl = text.lastIndexOf('\n', p - 2);
    p = nl === -1 ? 0 : nl + 1;
  }
  return p;
}

/** The end of `lines` more lines after `at` (at is a line start), not past end. */
function linesForward(text: string, at: number, end: number, lines: number): number {
  let p = at;
  for (let k = 0; k < lines && p < end; k++) {
    const nl = text.indexOf('\n', p);
    p = nl === -1 || nl >= end ? end : nl + 1;
  }
  return p;
}

/** The common prefix and suffix of a and b in whole lines: a[0,prefix) == b[0,prefix); the last `suffix` characters are equal; both start a line. */
export function commonLines(a: string, b: string): { prefix: number; suffix: number } {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  const prefix = i === 0 || (i === a.length && i === b.length) ? i : a.lastIndexOf('\n', i - 1) + 1;
  const room = n - prefix;
  let s = 0;
  while (s < room && a.charCodeAt(a.length - 1 - s) === b.charCodeAt(b.length - 1 - s)) s++;
  // The suffix must start a line in both texts.
  const startsLine = (text: string, at: number): boolean => at === prefix || text.charCodeAt(at - 1) === 10;
  if (s > 0 && !(startsLine(a, a.length - s) && startsLine(b, b.length - s))) {
    const tail = a.length - s;
    const nl = a.indexOf('\n', tail);
    s = nl === -1 ? 0 : a.length - (nl + 1);
  }
  return { prefix, suffix: s };
}

/** The size of a text for a person: characters and lines. */
function size(text: string): string {
  const lines = text.length === 0 ? 0 : countLines(text, 0, text.length) + (text.endsWith('\n') ? 0 : 1);
  return `${text.length} characters, ${lines} lines`;
}

/** A coarse diff of a and b: the files, their sizes, the changed line range; the lines themselves are not shown. */
export function coarseDiff(
  fromName: string,
  toName: string,
  before: string,
  after: string | undefined,
  why: string,
): BoundedDiff {
  if (after === undefined) {
    return {
      unified: `--- ${fromName}\n+++ ${toName}\n(coarse diff: ${why}; the lines are not shown)\nbefore: ${size(before)}\nafter: not computed\n`,
      coarse: true,
    };
  }
  const { prefix, suffix } = commonLines(before, after);
  const firstLine = countLines(before, 0, prefix) + 1;
  const oldMiddle = before.length - suffix - prefix;
  const newMiddle = after.length - suffix - prefix;
  const oldLines =
    countLines(before, prefix, before.length - suffix) +
    (oldMiddle > 0 && before.charCodeAt(before.length - suffix - 1) !== 10 ? 1 : 0);
  const newLines =
    countLines(after, prefix, after.length - suffix) +
    (newMiddle > 0 && after.charCodeAt(after.length - suffix - 1) !== 10 ? 1 : 0);
  const unified = [
    `--- ${fromName}`,
    `+++ ${toName}`,
    `(coarse diff: ${why}; the lines are not shown)`,
    `before: ${size(before)}`,
    `after: ${size(after)}`,
    `changed: ${oldLines} lines (${oldMiddle} characters) from line ${firstLine} replaced by ${newLines} lines (${newMiddle} characters)`,
  ].join('\n');
  return { unified: `${unified}\n`, coarse: true };
}

/** A unified diff of before → after (like createTwoFilesPatch with 3 lines of context), or a coarse one (see BOUNDED_DIFF_LIMITS). */
export function boundedDiff(fromName: string, toName: string, before: string, after: string): BoundedDiff {
  const L = BOUNDED_DIFF_LIMITS;
  const { prefix, suffix } = commonLines(before, after);
  const oldEnd = before.length - suffix;
  const newEnd = after.length - suffix;
  if (oldEnd - prefix > L.maxMiddleChars || newEnd - prefix > L.maxMiddleChars) {
    return coarseDiff(fromName, toName, before, after, `the change is larger than ${L.maxMiddleChars} characters`);
  }
  if (countLines(before, prefix, oldEnd) > L.maxMiddleLines || countLines(after, prefix, newEnd) > L.maxMiddleLines) {
    return coarseDiff(fromName, toName, before, after, `the change spans more than ${L.maxMiddleLines} lines`);
  }
  // The middle with its context lines; the hunks' line numbers are shifted by the lines cut before it.
  const from = linesBack(before, prefix, L.context);
  const offset = countLines(before, 0, from);
  const oldTo = linesForward(before, oldEnd, before.length, L.context);
  const newTo = linesForward(after, newEnd, after.length, L.context);
  const patch = structuredPatch(
    fromName,
    toName,
    before.slice(from, oldTo),
    after.slice(from, newTo),
    undefined,
    undefined,
    { context: L.context, maxEditLength: L.maxEditLength, timeout: L.timeoutMs },
  );
  if (patch === undefined) {
    return coarseDiff(
      fromName,
      toName,
      before,
      after,
      `the line diff gave up (more than ${L.maxEditLength} changed lines, or ${L.timeoutMs} ms)`,
    );
  }
  for (const hunk of patch.hunks) {
    hunk.oldStart += offset;
    hunk.newStart += offset;
  }
  return { unified: formatPatch(patch), coarse: false };
}

/** The bounds of the edited text an Edit / MultiEdit is applied to for its diff (README, "Limits"). */
export const EDIT_LIMITS = {
  /** The edited text: at most this many characters (beyond: no diff, coarse). */
  maxResultChars: 1024 * 1024,
  /** The characters scanned and written over all the edits of one file. */
  maxProcessedChars: 8 * 1024 * 1024,
  /** Replacements over all the edits of one file. */
  maxReplacements: 100_000,
} as const;

export interface TextEdit {
  readonly content?: string;
  readonly oldString?: string;
  readonly newString?: string;
  readonly replaceAll?: boolean;
}

export type EditOutcome =
  | { readonly kind: 'ok'; readonly after: string; readonly notFound: number }
  | { readonly kind: 'too_large'; readonly why: string };

/**
 * Applies the edits of one file to `before` as the CLI would (a content replaces everything; an empty old string
 * appends; replace_all replaces every occurrence, else the first), with the work bounded by EDIT_LIMITS: it stops
 * (too_large) as soon as the result, the characters processed or the replacements pass their bound. Linear in the
 * characters processed. `notFound`: edits whose old string is not in the text (skipped).
 */
export function applyEdits(
  before: string,
  exists: boolean,
  edits: readonly TextEdit[],
  limits: typeof EDIT_LIMITS = EDIT_LIMITS,
): EditOutcome {
  let after = before;
  let processed = 0;
  let replacements = 0;
  let notFound = 0;
  const tooLarge = (why: string): EditOutcome => ({ kind: 'too_large', why });
  for (const edit of edits) {
    if (edit.content !== undefined) {
      if (edit.content.length > limits.maxResultChars)
        return tooLarge(`the new content is larger than ${limits.maxResultChars} characters`);
      after = edit.content;
      continue;
    }
    const oldString = edit.oldString ?? '';
    const newString = edit.newString ?? '';
    if (oldString === '') {
      const next = exists || after !== '' ? after.length + newString.length : newString.length;
      if (next > limits.maxResultChars)
        return tooLarge(`the edited text would be larger than ${limits.maxResultChars} characters`);
      processed += next;
      if (processed > limits.maxProcessedChars)
        return tooLarge(`the edits process more than ${limits.maxProcessedChars} characters`);
      after = exists || after !== '' ? after + newString : newString;
      continue;
    }
    const parts: string[] = [];
    let length = 0;
    let at = 0;
    let found = false;
    for (;;) {
      const hit = after.indexOf(oldString, at);
      if (hit === -1) break;
      found = true;
      if (++replacements > limits.maxReplacements)
        return tooLarge(`the edits make more than ${limits.maxReplacements} replacements`);
      length += hit - at + newString.length;
      processed += hit - at + oldString.length + newString.length;
      if (length + (after.length - hit - oldString.length) > limits.maxResultChars)
        return tooLarge(`the edited text would be larger than ${limits.maxResultChars} characters`);
      if (processed > limits.maxProcessedChars)
        return tooLarge(`the edits process more than ${limits.maxProcessedChars} characters`);
      parts.push(after.slice(at, hit), newString);
      at = hit + oldString.length;
      if (!edit.replaceAll) break;
    }
    processed += after.length - at;
    if (processed > limits.maxProcessedChars)
      return tooLarge(`the edits process more than ${limits.maxProcessedChars} characters`);
    if (!found) {
      notFound++;
      continue;
    }
    parts.push(after.slice(at));
    after = parts.join('');
  }
  return { kind: 'ok', after, notFound };
}
