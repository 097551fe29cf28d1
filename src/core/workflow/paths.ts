import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';
/**
 * Dotted paths into workflow_data and node outputs (README, "Workflows": input_mapping and output_mapping).
 * `review.score` is the key `score` of the object under `review`; a segment that is a decimal number also indexes a
 * list when reading (`items.0`). `setPath` writes into a copy (every object on the path copied); `writePath` writes in
 * place, in O(the path's depth + the value's size), and answers how to undo it and what it did to the JSON's size —
 * the workflow engine's writes, whose values it clones first so that nothing read before changes underneath.
 */

/** Why a path cannot be used. */
export class PathError extends SwarmError {
  constructor(message: string) {
    super(message);
    this.name = 'PathError';
  }

  override get errorKind(): ErrorKind {
    return 'invalid';
  }

  override get errorCode(): Sw4rmCode {
    return 'VALIDATION_ERROR';
  }
}

const FORBIDDEN = new Set(['__proto__', 'constructor', 'prototype']);

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function segments(path: string): string[] {
  const parts = path.split('.');
  if (path === '' || parts.some((p) => p === ''))
    throw new PathError(`'${path.slice(0, 200)}' is not a dotted path (an empty segment)`);
  const bad = parts.find((p) => FORBIDDEN.has(p));
  if (bad !== undefined) throw new PathError(`'${path.slice(0, 200)}' names '${bad}', which no path may`);
  return parts;
}

/** The value at `path` in `root`, undefined when any segment is missing. */
export function getPath(root: unknown, path: string): unknown {
  let current: unknown = root;
  for (const part of segments(path)) {
    if (Array.isArray(current)) {
      if (!/^(0|[1-9]\d*)$/.test(part)) return undefined;
      current = current[Number(part)];
    } else if (isPlainObject(current)) {
      if (!Object.hasOwn(current, part)) return undefined;
      current = current[part];
    } else {
      return undefined;
    }
  }
  return current;
}

/**
 * A copy of `root` with `value` at `path` (only the objects on the path are copied). A segment whose current value is
 * not an object (a string, a number, a list) cannot be written through: PathError names it.
 */
export function setPath(root: Record<string, unknown>, path: string, value: unknown): Record<string, unknown> {
  const parts = segments(path);
  const copy = (o: Record<string, unknown>): Record<string, unknown> => ({ ...o });
  const top = copy(root);
  let current = top;
  for (let i = 0; i < parts.length - 1; i++) {
    const part = parts[i];
    const next = Object.hasOwn(current, part) ? current[part] : undefined;
    if (next !== undefined && !isPlainObject(next)) {
      throw new PathError(
        `cannot write '${path.slice(0, 200)}': '${parts
          .slice(0, i + 1)
          .join('.')
          .slice(0, 200)}' holds ${describe(next)}, not an object`,
      );
    }
    const child = next === undefined ? {} : copy(next);
    define(current, part, child);
    current = child;
  }
  define(current, parts[parts.length - 1], value);
  return top;
}

/** An own, enumerable property even for names like `__proto__` that plain assignment would treat specially. */
function define(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return `a ${typeof value}`;
}

/** What `writePath` did: how to undo it (nothing else written since), and the change of the root's JSON size in bytes. */
export interface PathWrite {
  readonly undo: () => void;
  /**
   * Bytes the root's JSON grew by (negative when it shrank). An upper bound: a key added to an object that was empty
   * counts the comma it did not need (one byte); an exact count (JSON.stringify) resets it.
   */
  readonly bytes: number;
}

/** Bytes of `value` as JSON (UTF-8). */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? 'null', 'utf8');
}

/**
 * Writes `value` at `path` (a dotted path, or its segments as given, e.g. a top-level key holding dots) in `root`
 * itself, creating missing objects on the way. A segment whose current value is not an object cannot be written
 * through: PathError names it, and nothing was changed.
 */
export function writePath(root: Record<string, unknown>, path: string | readonly string[], value: unknown): PathWrite {
  const parts = typeof path === 'string' ? segments(path) : path;
  if (parts.length === 0) throw new PathError('an empty path names no key');
  const shown = typeof path === 'string' ? path : parts.join('.');
  let current = root;
  for (let i = 0; i < parts.length - 1; i++) {
    const part = parts[i];
    const next = Object.hasOwn(current, part) ? current[part] : undefined;
    if (next === undefined) {
      // The rest of the path is created: one new key here holding it.
      const top: Record<string, unknown> = {};
      let inner = top;
      for (let j = i + 1; j < parts.length - 1; j++) {
        const child: Record<string, unknown> = {};
        define(inner, parts[j], child);
        inner = child;
      }
      define(inner, parts[parts.length - 1], value);
      const parent = current;
      define(parent, part, top);
      return {
        undo: () => {
          delete parent[part];
        },
        bytes: jsonBytes(part) + 1 + jsonBytes(top) + 1,
      };
    }
    if (!isPlainObject(next)) {
      throw new PathError(
        `cannot write '${shown.slice(0, 200)}': '${parts
          .slice(0, i + 1)
          .join('.')
          .slice(0, 200)}' holds ${describe(next)}, not an object`,
      );
    }
    current = next;
  }
  const last = parts[parts.length - 1];
  const parent = current;
  const had = Object.hasOwn(parent, last);
  const old = had ? parent[last] : undefined;
  define(parent, last, value);
  return {
    undo: () => {
      if (had) define(parent, last, old);
      else delete parent[last];
    },
    bytes: had ? jsonBytes(value) - jsonBytes(old) : jsonBytes(last) + 1 + jsonBytes(value) + 1,
  };
}
