import { printParseErrorCode, parseTree, type Node as JsonNode, type ParseError as JsonParseError } from 'jsonc-parser';
import { isAlias, isMap, isPair, isScalar, isSeq, parseDocument, type Document, type Pair } from 'yaml';
import { jsonDepth } from '../json';
import { KEY_ORDER, type JsonMap, setOwn, spellings } from './definitionShape';
import { type PathSegment, MAX_ISSUES, quote } from './issues';
import type { ValidationIssue, WorkflowFileIssue } from './model';

// The text parsers of definition files (JSON by jsonc-parser, strict; YAML by `yaml`): a file's value, maps with their
// key order, and where a path is in the text (1-based line and column) — definitionFile.ts' reference says how.

export const DEFINITION_FILE_LIMITS = {
  /** The largest definition text, in characters (1 MiB), refused before it is parsed. */
  maxChars: 1024 * 1024,
  /** Nesting (a definition needs 4: nodes → node → metadata → value). */
  maxDepth: 32,
  /** Values a YAML file may expand to through aliases. */
  maxValues: 4_000_000,
} as const;

/** Offsets → 1-based line and column (UTF-16 code units, as editors count). */
export class LineIndex {
  private readonly starts: number[] = [0];
  constructor(text: string) {
    for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) this.starts.push(i + 1);
  }
  position(offset: number): { line: number; column: number } {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid] <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - this.starts[lo] + 1 };
  }
  lineEnd(offset: number, text: string): number {
    const nl = text.indexOf('\n', offset);
    return nl < 0 ? text.length : nl > offset && text[nl - 1] === '\r' ? nl - 1 : nl;
  }
}

export type Span = readonly [start: number, end: number];

/** A parsed file: its value (maps with their key order) and where a path is in the text. */
export interface ParsedFile {
  readonly value?: unknown;
  readonly issues: WorkflowFileIssue[];
  /** Where the path is: its value, or (`key`) the key that names it. */
  locate(path: readonly PathSegment[], key?: boolean): Span | undefined;
}

/** Issues about a key itself (not its value): placed at the key. */
export const KEY_CODES = new Set(['unknown_field', 'duplicate_field']);

export function placed(issue: ValidationIssue, span: Span | undefined, lines: LineIndex): WorkflowFileIssue {
  if (!span) return { ...issue, line: 0, column: 0, endLine: 0, endColumn: 0 };
  const start = lines.position(span[0]);
  const end = lines.position(Math.max(span[1], span[0]));
  return { ...issue, line: start.line, column: start.column, endLine: end.line, endColumn: end.column };
}

class Converter {
  values = 0;
  readonly issues: WorkflowFileIssue[] = [];
  constructor(
    readonly text: string,
    readonly lines: LineIndex,
  ) {}
  refuse(code: string, span: Span | undefined, message: string): void {
    this.issues.push(placed({ severity: 'error', code, path: '', message }, span, this.lines));
  }
  private refusedSize = false;
  count(span: Span | undefined, values = 1): boolean {
    this.values += values;
    if (this.values <= DEFINITION_FILE_LIMITS.maxValues) return true;
    if (!this.refusedSize)
      this.refuse(
        'limit_exceeded',
        span,
        `the file holds (or expands through aliases to) more than ${DEFINITION_FILE_LIMITS.maxValues} values`,
      );
    this.refusedSize = true;
    return false;
  }
}

// ---- JSON (jsonc-parser, strict)

const JSON_ERRORS: Readonly<Record<string, string>> = {
  InvalidSymbol: 'an unexpected character',
  InvalidNumberFormat: 'a malformed number',
  PropertyNameExpected: 'a property name in double quotes was expected',
  ValueExpected: 'a value was expected',
  ColonExpected: 'a colon was expected',
  CommaExpected: 'a comma was expected',
  CloseBraceExpected: 'a closing } was expected',
  CloseBracketExpected: 'a closing ] was expected',
  EndOfFileExpected: 'the text goes on after the JSON value',
  InvalidCommentToken: 'comments are not allowed in JSON',
  UnexpectedEndOfComment: 'comments are not allowed in JSON',
  UnexpectedEndOfString: 'a string is not closed',
  UnexpectedEndOfNumber: 'a number is cut short',
  InvalidUnicode: 'an invalid \\u escape',
  InvalidEscapeCharacter: 'an invalid escape in a string',
  InvalidCharacter: 'a control character in a string',
};

export function parseJsonFile(text: string, lines: LineIndex): ParsedFile {
  const conv = new Converter(text, lines);
  if (jsonDepth(text, DEFINITION_FILE_LIMITS.maxDepth) > DEFINITION_FILE_LIMITS.maxDepth) {
    conv.refuse('limit_exceeded', undefined, `the file nests deeper than ${DEFINITION_FILE_LIMITS.maxDepth} levels`);
    return { issues: conv.issues, locate: () => undefined };
  }
  const errors: JsonParseError[] = [];
  const root = parseTree(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  if (errors.length || !root) {
    const seen = new Set<number>();
    for (const err of errors.slice(0, MAX_ISSUES)) {
      if (seen.has(err.offset)) continue; // one error per place: the first says what was expected
      seen.add(err.offset);
      const name = printParseErrorCode(err.error);
      conv.refuse(
        'invalid_syntax',
        [err.offset, err.offset + Math.max(err.length, 1)],
        `JSON: ${JSON_ERRORS[name] ?? name}`,
      );
    }
    if (!errors.length) conv.refuse('invalid_syntax', [0, 0], 'JSON: the file is empty');
    return { issues: conv.issues, locate: () => undefined };
  }
  const convert = (node: JsonNode): unknown => {
    if (!conv.count([node.offset, node.offset + node.length])) return undefined;
    if (node.type === 'object') {
      const out: JsonMap = {};
      const order: string[] = [];
      const seen = new Set<string>();
      for (const property of node.children ?? []) {
        const [keyNode, valueNode] = property.children ?? [];
        if (!keyNode) continue;
        const key = String(keyNode.value);
        if (seen.has(key)) {
          conv.refuse(
            'invalid_syntax',
            [keyNode.offset, keyNode.offset + keyNode.length],
            `the key ${quote(key, 40)} appears twice in this map`,
          );
          continue;
        }
        seen.add(key);
        order.push(key);
        setOwn(out, key, valueNode ? convert(valueNode) : undefined);
      }
      Object.defineProperty(out, KEY_ORDER, { value: order, enumerable: false });
      return out;
    }
    if (node.type === 'array') return (node.children ?? []).map(convert);
    return node.value;
  };
  const value = convert(root);
  // Each object's keys in a Map, made at its first lookup: placing every issue is linear, not issues × keys.
  const keyMaps = new WeakMap<JsonNode, Map<string, JsonNode>>();
  const jsonKeys = (object: JsonNode): Map<string, JsonNode> => {
    let map = keyMaps.get(object);
    if (!map) {
      map = new Map();
      for (const p of object.children ?? []) {
        const k = p.children?.[0]?.value;
        if (typeof k === 'string' && !map.has(k)) map.set(k, p);
      }
      keyMaps.set(object, map);
    }
    return map;
  };
  const locate = (path: readonly PathSegment[], wantKey = false): Span | undefined => {
    let node: JsonNode = root;
    let anchor: Span = [root.offset, lines.lineEnd(root.offset, text)];
    for (const segment of path) {
      let next: JsonNode | undefined;
      let key: JsonNode | undefined;
      if (typeof segment === 'number' && node.type === 'array') next = node.children?.[segment];
      else if (typeof segment === 'string' && node.type === 'object') {
        for (const name of spellings(segment)) {
          const property = jsonKeys(node).get(name);
          if (property) {
            key = property.children![0];
            next = property.children![1];
            break;
          }
        }
      }
      if (!next) break;
      node = next;
      const container = node.type === 'object' || node.type === 'array';
      anchor =
        key && (container || wantKey)
          ? [key.offset, key.offset + key.length]
          : !container
            ? [node.offset, node.offset + node.length]
            : [node.offset, node.offset + 1];
    }
    return anchor;
  };
  return { value, issues: conv.issues, locate };
}

// ---- YAML (yaml, parseDocument)

export function parseYamlFile(text: string, lines: LineIndex): ParsedFile {
  const conv = new Converter(text, lines);
  // uniqueKeys off: yaml's own check compares every key with every other (quadratic in a 100,000-node map); the
  // conversion below finds repeated keys with a Set.
  const doc = parseDocument(text, {
    uniqueKeys: false,
    prettyErrors: false,
    strict: true,
    version: '1.2',
    schema: 'core',
    merge: false,
    keepSourceTokens: false,
  });
  for (const err of doc.errors.slice(0, MAX_ISSUES)) {
    conv.refuse('invalid_syntax', [err.pos[0], err.pos[1]], `YAML: ${err.message.split('\n')[0]} (${err.code})`);
  }
  if (doc.errors.length) return { issues: conv.issues, locate: () => undefined };
  for (const warning of doc.warnings.slice(0, MAX_ISSUES)) {
    conv.issues.push(
      placed(
        {
          severity: 'warning',
          code: 'yaml_warning',
          path: '',
          message: `YAML: ${warning.message.split('\n')[0]} (${warning.code})`,
        },
        [warning.pos[0], warning.pos[1]],
        lines,
      ),
    );
  }
  const spanOf = (node: unknown): Span | undefined => {
    const range = (node as { range?: readonly number[] | null } | null)?.range;
    return range ? [range[0], range[1]] : undefined;
  };
  const keyText = (key: unknown): string | undefined => {
    if (!isScalar(key)) return undefined;
    const v = key.value;
    if (typeof v === 'string') return v;
    if (typeof v === 'number' || typeof v === 'boolean' || v === null)
      return typeof key.source === 'string' ? key.source : String(v);
    return undefined;
  };
  // An alias shares the value its anchor converted to (as yaml's toJS does); what it would expand to is still counted
  // against DEFINITION_FILE_LIMITS.maxValues, so an alias bomb is refused without being expanded.
  const targets = new Map<unknown, unknown>();
  const converted = new Map<unknown, { value: unknown; size: number }>();
  let ok = true;
  const convert = (node: unknown, depth: number): { value: unknown; size: number } => {
    if (!ok) return { value: undefined, size: 0 };
    if (depth > DEFINITION_FILE_LIMITS.maxDepth) {
      conv.refuse(
        'limit_exceeded',
        spanOf(node),
        `the file nests deeper than ${DEFINITION_FILE_LIMITS.maxDepth} levels`,
      );
      ok = false;
      return { value: undefined, size: 0 };
    }
    if (isAlias(node)) {
      let target = targets.get(node);
      if (target === undefined) targets.set(node, (target = node.resolve(doc as Document) ?? null));
      const done = converted.get(target);
      const result = done ?? convert(target, depth + 1);
      // The anchor's own conversion counted it once; each further use counts it again.
      if (done && !conv.count(spanOf(node), done.size)) ok = false;
      return result;
    }
    if (!conv.count(spanOf(node), 1)) {
      ok = false;
      return { value: undefined, size: 0 };
    }
    let size = 1;
    let value: unknown;
    if (isMap(node)) {
      const out: JsonMap = {};
      const order: string[] = [];
      const seen = new Set<string>();
      for (const pair of node.items as Pair[]) {
        const key = keyText(pair.key);
        if (key === undefined) {
          conv.refuse('invalid_field', spanOf(pair.key), 'a key must be text (a scalar), not a list or a map');
          continue;
        }
        if (seen.has(key)) {
          conv.refuse('invalid_syntax', spanOf(pair.key), `the key ${quote(key, 40)} appears twice in this map`);
          continue;
        }
        seen.add(key);
        order.push(key);
        const child = pair.value === null ? { value: null, size: 0 } : convert(pair.value, depth + 1);
        size += child.size;
        setOwn(out, key, child.value);
      }
      Object.defineProperty(out, KEY_ORDER, { value: order, enumerable: false });
      value = out;
    } else if (isSeq(node)) {
      value = node.items.map((item) => {
        const child = convert(item, depth + 1);
        size += child.size;
        return child.value;
      });
    } else {
      value = isScalar(node) ? node.value : null;
    }
    const result = { value, size };
    if ((node as { anchor?: string }).anchor) converted.set(node, result);
    return result;
  };
  const value = doc.contents === null ? null : convert(doc.contents, 1).value;
  // Each map's keys in a Map, made at its first lookup: placing every issue is linear, not issues × keys.
  const keyMaps = new WeakMap<object, Map<string, Pair>>();
  const yamlKeys = (yamlMap: { items: unknown[] }): Map<string, Pair> => {
    let map = keyMaps.get(yamlMap);
    if (!map) {
      map = new Map();
      for (const p of yamlMap.items as Pair[]) {
        if (!isPair(p)) continue;
        const k = keyText(p.key);
        if (k !== undefined && !map.has(k)) map.set(k, p);
      }
      keyMaps.set(yamlMap, map);
    }
    return map;
  };
  const locate = (path: readonly PathSegment[], wantKey = false): Span | undefined => {
    let node: unknown = doc.contents;
    const start = spanOf(node)?.[0] ?? 0;
    let anchor: Span = [start, lines.lineEnd(start, text)];
    for (const segment of path) {
      if (isAlias(node)) node = node.resolve(doc as Document);
      let next: unknown;
      let key: unknown;
      if (typeof segment === 'number' && isSeq(node)) next = node.items[segment];
      else if (typeof segment === 'string' && isMap(node)) {
        for (const name of spellings(segment)) {
          const pair = yamlKeys(node).get(name);
          if (pair) {
            key = pair.key;
            next = pair.value ?? pair.key;
            break;
          }
        }
      }
      if (next === undefined || next === null) break;
      node = next;
      const span = spanOf(node);
      if (!span) break;
      const container = isMap(node) || isSeq(node);
      // A container, or an empty value (`nodes:` with nothing after it), is shown by its key.
      anchor =
        !container && span[1] > span[0] && !(wantKey && key)
          ? span
          : key
            ? (spanOf(key) ?? span)
            : [span[0], lines.lineEnd(span[0], text)];
    }
    return anchor;
  };
  return { value: ok ? value : undefined, issues: conv.issues, locate };
}
