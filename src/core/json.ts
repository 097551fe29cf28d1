/**
 * Bounded JSON: the one place where the coordinator parses JSON that an agent sent (router payloads, HITL
 * invocations, LoggingService.Ingest details_json). Before JSON.parse, a linear scan without recursion measures
 * the text's nesting depth (tracking strings and escapes) and stops at the first level beyond MAX_JSON_DEPTH;
 * the size is checked against the caller's limit first. A deeply nested text therefore costs a few
 * microseconds to refuse instead of seconds of JSON.parse and a stack overflow in whatever walks the value.
 */
import { MAX_JSON_DEPTH } from './limits';

export { MAX_JSON_DEPTH };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * The nesting depth of a JSON text (0 for a scalar, 1 for `{}` or `[]`…), or `maxDepth + 1` as soon as it
 * goes deeper than `maxDepth` (the scan stops there). Works on UTF-8 bytes or on a string: the characters it
 * looks at are ASCII, and bytes of a multi-byte UTF-8 sequence are all ≥ 0x80. It does not validate the text.
 */
export function jsonDepth(text: Uint8Array | string, maxDepth: number = MAX_JSON_DEPTH): number {
  const bytes = typeof text !== 'string';
  const length = text.length;
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < length; i++) {
    if (inString) {
      // Jump to the next quote (a native search: long strings cost next to nothing); escaped when an odd number
      // of backslashes precedes it.
      const quote = bytes ? (text as Uint8Array).indexOf(QUOTE, i) : (text as string).indexOf('"', i);
      if (quote < 0) return deepest;
      let backslashes = 0;
      while (quote - 1 - backslashes >= i && codeAt(text, bytes, quote - 1 - backslashes) === BACKSLASH) backslashes++;
      i = quote;
      if (backslashes % 2 === 0) inString = false;
      continue;
    }
    const c = bytes ? (text as Uint8Array)[i] : (text as string).charCodeAt(i);
    if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return maxDepth + 1;
      if (depth > deepest) deepest = depth;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return deepest;
}

function codeAt(text: Uint8Array | string, bytes: boolean, i: number): number {
  return bytes ? (text as Uint8Array)[i] : (text as string).charCodeAt(i);
}

export interface JsonBounds {
  /** What the text is, for the refusal ("the payload", "details_json"…). */
  readonly what: string;
  /** The largest text in UTF-8 bytes; none when the caller has checked the size already. */
  readonly maxBytes?: number;
  readonly maxDepth?: number;
  /**
   * The most JSON values the text may hold, as jsonShape counts them (each array or object and each comma outside
   * strings): when set, depth and values are measured by one jsonShape scan instead of jsonDepth.
   */
  readonly maxValues?: number;
}

export type JsonVerdict =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly limit: 'size' | 'depth' | 'values' | 'syntax'; readonly reason: string };

/** Which bound a JSON text is beyond (size, then depth, then values), and why; undefined when it is within them. */
export function jsonBoundsBreach(
  text: Uint8Array | string,
  bounds: JsonBounds,
): { readonly limit: 'size' | 'depth' | 'values'; readonly reason: string } | undefined {
  const maxDepth = bounds.maxDepth ?? MAX_JSON_DEPTH;
  if (bounds.maxBytes !== undefined) {
    const size = typeof text === 'string' ? Buffer.byteLength(text) : text.byteLength;
    if (size > bounds.maxBytes)
      return { limit: 'size', reason: `${bounds.what} is larger than ${bounds.maxBytes} bytes (${size})` };
  }
  const depthBreach = {
    limit: 'depth',
    reason: `${bounds.what} nests deeper than ${maxDepth} levels (JSON depth limit)`,
  } as const;
  if (bounds.maxValues === undefined) return jsonDepth(text, maxDepth) > maxDepth ? depthBreach : undefined;
  const shape = jsonShape(
    typeof text === 'string' ? text : Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString('utf8'),
    maxDepth,
    bounds.maxValues,
  );
  if (shape.depth > maxDepth) return depthBreach;
  if (shape.values > bounds.maxValues)
    return {
      limit: 'values',
      reason: `${bounds.what} holds more than ${bounds.maxValues} JSON values (JSON values limit)`,
    };
  return undefined;
}

/** Why a JSON text is beyond its bounds (size, then depth), or undefined when it is within them. */
export function jsonBoundsRefusal(text: Uint8Array | string, bounds: JsonBounds): string | undefined {
  return jsonBoundsBreach(text, bounds)?.reason;
}

/** Parses an agent's JSON text after checking its size, depth and (when bounded) values; never throws. */
export function parseBoundedJson(text: string, bounds: JsonBounds): JsonVerdict {
  const breach = jsonBoundsBreach(text, bounds);
  if (breach !== undefined) return { ok: false, ...breach };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return {
      ok: false,
      limit: 'syntax',
      reason: `${bounds.what} is not valid JSON: ${(err as Error).message.slice(0, 120)}`,
    };
  }
}

/**
 * How many values a JSON text holds (each array or object opened and each comma outside strings count one: an
 * over-estimate of the values beyond the first), stopping at `maxValues + 1`; and whether it nests deeper than
 * `maxDepth` (then `maxDepth + 1`). One linear scan, strings skipped by a native search. JSON.parse of a few
 * megabytes of `[{},{},…]` holds the event loop for hundreds of milliseconds; this bounds it before the parse.
 */
export function jsonShape(
  text: string,
  maxDepth: number,
  maxValues: number,
): { readonly depth: number; readonly values: number } {
  const length = text.length;
  let depth = 0;
  let deepest = 0;
  let values = 1;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // To the closing quote: escaped when an odd number of backslashes precedes it.
      let at = i + 1;
      for (;;) {
        const quote = text.indexOf('"', at);
        if (quote < 0) return { depth: deepest, values };
        let backslashes = 0;
        while (quote - 1 - backslashes > i && text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
        at = quote + 1;
        if (backslashes % 2 === 0) break;
      }
      i = at - 1;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return { depth: maxDepth + 1, values };
      if (depth > deepest) deepest = depth;
      if (++values > maxValues) return { depth: deepest, values };
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    } else if (c === 0x2c) {
      if (++values > maxValues) return { depth: deepest, values };
    }
  }
  return { depth: deepest, values };
}
