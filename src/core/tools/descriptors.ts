import * as vm from 'node:vm';
import { Ajv, type ValidateFunction } from 'ajv';
import standaloneCode from 'ajv/dist/standalone';
import { createHash } from 'node:crypto';
import { FIELD_LIMITS } from '../fieldLimits';
import { yieldTurn } from '../inTurns';
import { parseBoundedJson } from '../json';
import type { JsonSchema, SideEffectClass, ToolDescriptor } from './toolDescriptor';
import { SchemaThread, schemaWorkerScript, type SchemaSource } from './schemaThread';

export type { SchemaSource } from './schemaThread';

/** A tool descriptor as connector.proto carries it (schemas as JSON text). */
export interface WireToolDescriptor {
  readonly tool_name?: string;
  readonly input_schema?: string;
  readonly output_schema?: string;
  readonly idempotent?: boolean;
  readonly needs_worktree?: boolean;
  readonly default_timeout_s?: number;
  readonly max_concurrency?: number;
  readonly side_effects?: string;
}

/** The bounds of one registration (README, "ConnectorService"). */
export const DESCRIPTOR_LIMITS = {
  /** Tools in one RegisterProvider. */
  maxTools: FIELD_LIMITS.connector.tools,
  /** Characters of a tool_name: [A-Za-z0-9_.-]. */
  maxToolNameChars: FIELD_LIMITS.connector.tool_name,
  /** UTF-8 bytes of one input_schema or output_schema text. */
  maxSchemaBytes: FIELD_LIMITS.connector.schema_bytes,
  /** Characters of the description taken from the input schema. */
  maxDescriptionChars: FIELD_LIMITS.connector.description,
  maxConcurrency: 1024,
  maxDefaultTimeoutS: 86_400,
} as const;

export const SIDE_EFFECT_CLASSES: readonly SideEffectClass[] = ['none', 'filesystem', 'git', 'network', 'process'];

/** The longest side_effects text (every class listed once fits easily). */
const MAX_SIDE_EFFECTS_CHARS = FIELD_LIMITS.connector.side_effects;
const TOOL_NAME = /^[A-Za-z0-9_.-]+$/;
/** A schema given as a URL (connector.proto: "JSON Schema or URL"). */
const URL_TEXT = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

/** One checked tool with its compiled schemas. */
export interface CheckedTool {
  readonly descriptor: ToolDescriptor;
  readonly input: ValidateFunction;
  readonly output: ValidateFunction | undefined;
}

export type DescriptorsVerdict =
  | { readonly ok: true; readonly tools: readonly CheckedTool[] }
  /** `reason` is `<field path>: <why>`; the code is VALIDATION_ERROR. */
  | { readonly ok: false; readonly reason: string };

/**
 * The schema compiler of one registration. Strict mode, as the engine checks args; a fresh instance per
 * registration (schemas are not added to it by `$id`), so one provider's `$id`s never clash with another's and a
 * replaced registration's compiled schemas go with it.
 */
export function schemaCompiler(): Ajv {
  return new Ajv({ allErrors: false, strict: true, addUsedSchema: false });
}

/** ajv's errors as `<path> <message>` (the first one: allErrors is off). */
function ajvErrors(
  errors: readonly { instancePath: string; message?: string; params?: Record<string, unknown> }[] | null | undefined,
): string {
  const first = errors?.[0];
  if (!first) return 'is not a valid JSON Schema';
  const allowed = Array.isArray(first.params?.allowedValues)
    ? ` (${(first.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')})`
    : '';
  return `${first.instancePath || '/'} ${first.message ?? 'is invalid'}${allowed}`;
}

/** The bounds on what an agent's schema may make the coordinator do (README, "Tool providers: ConnectorService"). */
export const SCHEMA_SAFETY = {
  /** Schema nodes after every local `$ref` is expanded in place (memoised counts: a chain of doubling refs is caught). */
  maxExpandedNodes: 10_000,
  /** `uniqueItems: true` over non-scalar items needs `maxItems` at most this (the check is quadratic in the items). */
  maxUniqueItems: 1_000,
} as const;

/** Keywords whose values are data, not schemas: never walked. */
const DATA_KEYWORDS = new Set(['const', 'enum', 'default', 'examples', 'description', 'title', '$comment']);
const SCALAR_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null']);
/** Keywords whose values map names to schemas (a property called "pattern" or "default" is a schema, not data). */
const MAP_KEYWORDS = new Set([
  'properties',
  'patternProperties',
  '$defs',
  'definitions',
  'dependentSchemas',
  'dependencies',
]);

/** A JSON Pointer token. */
function token(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * Why a regular expression is not accepted in an agent's schema, or undefined. No ReDoS checker library is installed,
 * so the check is conservative and documented: refused are a quantified group that holds a quantifier or an
 * alternation (`(a+)+`, `(a|a)*`, `(a{1,9}){1,9}`), back-references (`\1`, `\k<n>`) and lookarounds, and patterns longer
 * than 1,000 characters. A pattern that does not compile is refused too.
 */
export function unsafePatternReason(pattern: string): string | undefined {
  if (pattern.length > 1000) return 'is longer than 1000 characters';
  try {
    new RegExp(pattern, 'u');
  } catch (err) {
    return `is not a valid regular expression (${(err as Error).message.slice(0, 120)})`;
  }
  // A stack of open groups: does the group hold a quantifier or an alternation?
  const stack: { risky: boolean }[] = [];
  let lastGroupRisky: boolean | undefined; // the group just closed (a quantifier right after applies to it)
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    const afterGroup = lastGroupRisky;
    lastGroupRisky = undefined;
    if (c === '\\') {
      const next = pattern[i + 1] ?? '';
      if (/[1-9]/.test(next) || next === 'k') return 'has a back-reference (refused: it can take exponential time)';
      i++;
      continue;
    }
    if (c === '[') {
      // A character class: skip to its end (escapes inside are skipped too).
      i++;
      if (pattern[i] === '^') i++;
      if (pattern[i] === ']') i++;
      while (i < pattern.length && pattern[i] !== ']') i += pattern[i] === '\\' ? 2 : 1;
      continue;
    }
    if (c === '(') {
      if (
        pattern.startsWith('(?=', i) ||
        pattern.startsWith('(?!', i) ||
        pattern.startsWith('(?<=', i) ||
        pattern.startsWith('(?<!', i)
      ) {
        return 'has a lookaround (refused in agent schemas)';
      }
      stack.push({ risky: false });
      continue;
    }
    if (c === ')') {
      const group = stack.pop();
      lastGroupRisky = group?.risky ?? false;
      if (stack.length > 0 && lastGroupRisky) stack[stack.length - 1].risky = true;
      continue;
    }
    if (c === '|') {
      if (stack.length > 0) stack[stack.length - 1].risky = true;
      continue;
    }
    const quantifier = c === '*' || c === '+' || c === '?' || (c === '{' && /^\{\d+(,\d*)?\}/.test(pattern.slice(i)));
    if (quantifier) {
      if (afterGroup === true && c !== '?')
        return 'has a nested quantifier or a quantified alternation (refused: it can take exponential time)';
      if (c === '{') i = pattern.indexOf('}', i);
      if (pattern[i + 1] === '?' || pattern[i + 1] === '+') i++;
      if (c !== '?' && stack.length > 0) stack[stack.length - 1].risky = true;
    }
  }
  return undefined;
}

/** The node a local `$ref` ('#' or '#/json/pointer') points to, or undefined. */
function resolveLocal(root: unknown, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !Object.prototype.hasOwnProperty.call(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/**
 * Why an agent's schema is not safe to validate untrusted data with (`<JSON pointer>: <why>`), or undefined. Checked:
 * the size of the schema with every `$ref` expanded in place (at most SCHEMA_SAFETY.maxExpandedNodes; counts are
 * memoised per node, and a ref back into a node being counted, a recursive schema, counts once: its cost is bounded by
 * the data), only local `#/...` refs (no `$dynamicRef`/`$recursiveRef`, no `$id` or anchor below the root), regular expressions
 * (`pattern`, `patternProperties` names; unsafePatternReason), `uniqueItems: true` only over scalar items or with
 * `maxItems` ≤ SCHEMA_SAFETY.maxUniqueItems; then ajv's json-schema-secure meta-schema (a `pattern` or `format` needs
 * a `maxLength`, `patternProperties` a `propertyNames.maxLength`, …).
 */
export function unsafeSchemaReason(schema: Record<string, unknown>): string | undefined {
  const sizes = new Map<object, number>();
  const counting = new Set<object>();
  let refusal: string | undefined;
  const limit = SCHEMA_SAFETY.maxExpandedNodes;
  const refuse = (path: string, why: string): number => {
    refusal ??= `${path || '/'}: ${why}`;
    return Infinity;
  };
  const checkSchemaObject = (node: Record<string, unknown>, path: string): void => {
    if (typeof node.pattern === 'string') {
      const why = unsafePatternReason(node.pattern);
      if (why) refuse(`${path}/pattern`, `the pattern ${why}`);
    }
    if (node.patternProperties !== null && typeof node.patternProperties === 'object') {
      for (const key of Object.keys(node.patternProperties)) {
        const why = unsafePatternReason(key);
        if (why) refuse(`${path}/patternProperties/${token(key)}`, `the pattern ${why}`);
      }
    }
    if (node.format === 'regex') refuse(`${path}/format`, '"format": "regex" is refused in agent schemas');
    if ('$dynamicRef' in node || '$recursiveRef' in node)
      refuse(path, '$dynamicRef and $recursiveRef are refused in agent schemas');
    // A nested $id or an anchor would move what '#/...' means under it: only the root may have an $id.
    if (path !== '' && ('$id' in node || '$anchor' in node || '$dynamicAnchor' in node))
      refuse(path, '$id and anchors are accepted only at the root of an agent schema');
    if (node.uniqueItems === true) {
      const items = node.items as Record<string, unknown> | undefined;
      const types =
        items && typeof items === 'object' && !Array.isArray(items) ? ([] as unknown[]).concat(items.type ?? []) : [];
      const scalar = types.length > 0 && types.every((t) => typeof t === 'string' && SCALAR_TYPES.has(t));
      const bounded = typeof node.maxItems === 'number' && node.maxItems <= SCHEMA_SAFETY.maxUniqueItems;
      if (!scalar && !bounded) {
        refuse(
          `${path}/uniqueItems`,
          `uniqueItems over items that are not all scalar needs "maxItems" ≤ ${SCHEMA_SAFETY.maxUniqueItems} (the check is quadratic)`,
        );
      }
    }
  };
  const size = (node: unknown, path: string, isMap = false): number => {
    if (refusal !== undefined) return Infinity;
    if (node === null || typeof node !== 'object') return 1;
    const known = sizes.get(node);
    if (known !== undefined) return known;
    if (counting.has(node)) return 1; // recursion: compiled as a call, its cost bounded by the data
    counting.add(node);
    let total = 1;
    if (!Array.isArray(node) && !isMap) checkSchemaObject(node as Record<string, unknown>, path);
    for (const [key, value] of Object.entries(node)) {
      if (refusal !== undefined) break;
      const schemaKeyword = !Array.isArray(node) && !isMap;
      if (DATA_KEYWORDS.has(key) && schemaKeyword) continue;
      if (key === '$ref' && schemaKeyword && typeof value === 'string') {
        if (value !== '#' && !value.startsWith('#/'))
          return refuse(
            `${path}/$ref`,
            `only local '#/...' refs are accepted in agent schemas (${JSON.stringify(value.slice(0, 80))})`,
          );
        const target = resolveLocal(schema, value);
        // A ref to nothing is refused by ajv when it compiles ("can't resolve reference").
        total += target === undefined ? 1 : size(target, value.slice(1));
      } else {
        const sub = size(value, `${path}/${token(key)}`, schemaKeyword && MAP_KEYWORDS.has(key));
        // Definitions are checked where they stand but counted where they are used (by their $refs).
        if (!(schemaKeyword && (key === '$defs' || key === 'definitions'))) total += sub;
      }
      if (total > limit && !isMap) {
        // a map's total is checked by the schema holding it (a $defs map's is not counted)
        counting.delete(node);
        return refuse(
          path,
          `the schema expands to more than ${limit} nodes with its $refs followed (refused: validating it could take exponential time and memory)`,
        );
      }
    }
    counting.delete(node);
    sizes.set(node, total);
    return total;
  };
  size(schema, '');
  if (refusal !== undefined) return refusal;
  if (!secureSchema(schema)) {
    const first = secureSchema.errors?.[0];
    const needs =
      typeof first?.params?.missingProperty === 'string' ? ` (needs "${first.params.missingProperty}")` : '';
    return `${first?.instancePath || '/'}: is not accepted by the secure meta-schema: ${first?.message ?? 'is unsafe'}${needs}`;
  }
  return undefined;
}

/** ajv's json-schema-secure meta-schema, compiled once (a second check after unsafeSchemaReason's own). */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a JSON file of ajv's package (bundled by esbuild)
const secureMetaSchema = require('ajv/lib/refs/json-schema-secure.json') as Record<string, unknown>;
const secureSchema: ValidateFunction = new Ajv({ allErrors: false, strict: false, validateSchema: false }).compile(
  secureMetaSchema,
);

export type SchemaVerdict =
  | { readonly ok: true; readonly schema: JsonSchema; readonly validate: ValidateFunction }
  | { readonly ok: false; readonly why: string };

/**
 * The validator code ajv may generate for one agent schema, in bytes. The coordinator's thread evaluates that code and
 * V8 compiles it on its first call: about 0.1 ms per KiB here, so 256 KiB stays well within the 50 ms event-loop bound
 * (README, "Limits"). A tool schema of 20 KB with descriptions generates far less; 1,000 bare properties generate ~1 MiB.
 */
export const MAX_VALIDATOR_SOURCE_BYTES = 256 * 1024;

/**
 * One schema text: bounded, parsed, an object, valid against ajv's meta-schema, safe (unsafeSchemaReason), compiled by
 * a fresh ajv to standalone code of at most MAX_VALIDATOR_SOURCE_BYTES. The expensive part (ajv's code generation grows
 * faster than the schema: 0.6–1.6 s at 64 KiB): run on the schema worker (schemaWorker.ts, schemaCompilation.ts).
 */
export function schemaSourceOf(text: string, what: 'input' | 'output'): SchemaSource {
  const trimmed = text.trim();
  if (URL_TEXT.test(trimmed)) return { ok: false, why: 'schema URLs are not fetched: inline the schema' };
  const parsed = parseBoundedJson(trimmed, { what: 'the schema', maxBytes: DESCRIPTOR_LIMITS.maxSchemaBytes });
  if (!parsed.ok) return { ok: false, why: parsed.reason };
  const schema = parsed.value;
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema))
    return { ok: false, why: 'must be a JSON Schema object' };
  const record = schema as Record<string, unknown>;
  if (what === 'input' && 'type' in record && record.type !== 'object') {
    return {
      ok: false,
      why: `args are a JSON object: the input schema's type must be "object", not ${JSON.stringify(record.type)}`,
    };
  }
  const ajv = new Ajv({ allErrors: false, strict: true, addUsedSchema: false, code: { source: true } });
  let valid: boolean;
  try {
    valid = ajv.validateSchema(record) as boolean;
  } catch (err) {
    return { ok: false, why: (err as Error).message };
  }
  if (!valid) return { ok: false, why: ajvErrors(ajv.errors) };
  // An agent's schema is refused when validating with it could freeze or exhaust the coordinator.
  const unsafe = unsafeSchemaReason(record);
  if (unsafe !== undefined) return { ok: false, why: unsafe };
  let source: string;
  try {
    source = standaloneCode(ajv, ajv.compile(record));
  } catch (err) {
    // Strict mode (unknown keywords, ambiguous types) and unresolvable $refs are refused when compiled.
    return { ok: false, why: (err as Error).message.split('\n')[0].slice(0, 300) };
  }
  const bytes = Buffer.byteLength(source);
  if (bytes > MAX_VALIDATOR_SOURCE_BYTES) {
    return {
      ok: false,
      why: `compiles to ${Math.ceil(bytes / 1024)} KiB of validator code, more than ${MAX_VALIDATOR_SOURCE_BYTES / 1024} KiB (refused: evaluating it would hold the coordinator; use fewer properties or shared $defs)`,
    };
  }
  return { ok: true, source };
}

/** The modules ajv's standalone code requires (bundled: the code is evaluated with this table as its `require`). */
const AJV_RUNTIME: Readonly<Record<string, unknown>> = {
  /* eslint-disable @typescript-eslint/no-require-imports -- ajv's runtime parts, by the names its generated code uses */
  'ajv/dist/runtime/ucs2length': require('ajv/dist/runtime/ucs2length'),
  'ajv/dist/runtime/equal': require('ajv/dist/runtime/equal'),
  'ajv/dist/runtime/uri': require('ajv/dist/runtime/uri'),
  'ajv/dist/runtime/validation_error': require('ajv/dist/runtime/validation_error'),
  /* eslint-enable @typescript-eslint/no-require-imports */
};

function runtimeRequire(id: string): unknown {
  if (!Object.prototype.hasOwnProperty.call(AJV_RUNTIME, id))
    throw new Error(`the schema's validator code requires '${id.slice(0, 100)}'`);
  return AJV_RUNTIME[id];
}

/** A validator from ajv's standalone code (schemaSourceOf): evaluated on this thread, V8 compiling it on first call. */
export function validatorFromSource(source: string): ValidateFunction {
  const factory = vm.runInThisContext(`(function (require, module, exports) {${source}\n})`, {
    filename: 'sw4rm-agent-schema.js',
  }) as (r: (id: string) => unknown, m: { exports: unknown }, e: unknown) => void;
  const module = { exports: {} as unknown };
  factory(runtimeRequire, module, module.exports);
  if (typeof module.exports !== 'function') throw new Error("the schema's validator code exports no function");
  return module.exports as ValidateFunction;
}

/** The verdict for a text whose source verdict is known: the schema parsed again (64 KiB at most) and the code evaluated. */
export function schemaVerdictOf(text: string, source: SchemaSource): SchemaVerdict {
  if (!source.ok) return source;
  try {
    return { ok: true, schema: JSON.parse(text.trim()) as JsonSchema, validate: validatorFromSource(source.source) };
  } catch (err) {
    return { ok: false, why: (err as Error).message.split('\n')[0].slice(0, 300) };
  }
}

/** Compiled agent schemas kept (validators and refusals), by digest of their text: a repeat never compiles again. */
const SCHEMA_CACHE = { maxEntries: 1024, maxSourceBytes: 32 * 1024 * 1024 } as const;
const verdicts = new Map<string, { readonly verdict: SchemaVerdict; readonly bytes: number }>();
let cachedBytes = 0;
const inFlight = new Map<string, Promise<SchemaVerdict>>();
let thread: SchemaThread | null | undefined;
let compilations = 0;

function cacheKey(text: string, what: 'input' | 'output'): string {
  return createHash('sha256').update(what).update('\0').update(text.trim()).digest('hex');
}

function cached(key: string): SchemaVerdict | undefined {
  const hit = verdicts.get(key);
  if (!hit) return undefined;
  verdicts.delete(key);
  verdicts.set(key, hit);
  return hit.verdict;
}

function keep(key: string, verdict: SchemaVerdict, bytes: number): SchemaVerdict {
  verdicts.delete(key);
  verdicts.set(key, { verdict, bytes });
  cachedBytes += bytes;
  while (verdicts.size > SCHEMA_CACHE.maxEntries || (cachedBytes > SCHEMA_CACHE.maxSourceBytes && verdicts.size > 1)) {
    const [oldest, entry] = verdicts.entries().next().value as [string, { bytes: number }];
    verdicts.delete(oldest);
    cachedBytes -= entry.bytes;
  }
  return verdict;
}

/** How many agent schemas were compiled since the process started (a cached verdict does not count). */
export function schemaCompilations(): number {
  return compilations;
}

/** Whether agent schemas compile on the worker thread (false when its script is not beside this module). */
export function schemaWorkerAvailable(): boolean {
  if (thread === undefined) {
    const script = schemaWorkerScript();
    thread = script === undefined ? null : new SchemaThread(script);
  }
  return thread !== null;
}

/**
 * One agent schema text, checked and compiled (schemaSourceOf) on the schema worker, off the event loop: this thread
 * only parses the text again and evaluates the generated code (at most MAX_VALIDATOR_SOURCE_BYTES). Verdicts are
 * cached by digest of the text, refusals too; the same text compiling meanwhile is waited for, not compiled twice.
 * Without the worker's script (not built), compiles on this thread as compileSchemaText does.
 */
export function compileSchemaTextAsync(text: string, what: 'input' | 'output'): Promise<SchemaVerdict> {
  const key = cacheKey(text, what);
  const hit = cached(key);
  if (hit) return Promise.resolve(hit);
  const running = inFlight.get(key);
  if (running) return running;
  if (!schemaWorkerAvailable()) return Promise.resolve(compileSchemaText(text, what));
  compilations++;
  const work = thread!.compile(text, what).then((source) => {
    inFlight.delete(key);
    return keep(key, schemaVerdictOf(text, source), source.ok ? source.source.length : 0);
  });
  inFlight.set(key, work);
  return work;
}

/**
 * compileSchemaText on this thread: from the cache (compileSchemaTextAsync fills it), else compiled here, which
 * holds the event loop as long as ajv takes (0.6–1.6 s at 64 KiB). For texts that are not an agent's (the operator's
 * policy settings) or that compileSchemaTextAsync has just compiled.
 */
export function compileSchemaText(text: string, what: 'input' | 'output'): SchemaVerdict {
  const key = cacheKey(text, what);
  const hit = cached(key);
  if (hit) return hit;
  compilations++;
  const source = schemaSourceOf(text, what);
  return keep(key, schemaVerdictOf(text, source), source.ok ? source.source.length : 0);
}

/** The cached verdict of a text, or undefined (nothing is compiled). */
export function cachedSchemaVerdict(text: string, what: 'input' | 'output'): SchemaVerdict | undefined {
  return cached(cacheKey(text, what));
}

function sideEffectsOf(
  text: string,
): { readonly ok: true; readonly classes: readonly SideEffectClass[] } | { readonly ok: false; readonly why: string } {
  if (text.length > MAX_SIDE_EFFECTS_CHARS)
    return { ok: false, why: `is longer than ${MAX_SIDE_EFFECTS_CHARS} characters` };
  const names = text
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
  if (names.length === 0) return { ok: true, classes: ['none'] };
  const classes: SideEffectClass[] = [];
  for (const name of names) {
    if (!(SIDE_EFFECT_CLASSES as readonly string[]).includes(name)) {
      return {
        ok: false,
        why: `'${name.slice(0, 40)}' is not a side-effect class (one or more of ${SIDE_EFFECT_CLASSES.join(', ')}, comma-separated)`,
      };
    }
    if (!classes.includes(name as SideEffectClass)) classes.push(name as SideEffectClass);
  }
  if (classes.length > 1 && classes.includes('none'))
    return { ok: false, why: "'none' cannot be listed with other classes" };
  return { ok: true, classes };
}

/** A wire descriptor's numbers arrive as numbers from proto-loader; anything else (a long as text) is read as a number. */
function count(value: unknown): number {
  const n = typeof value === 'number' ? value : Number(value ?? 0);
  return Number.isFinite(n) ? n : NaN;
}

/** A tool's schemas compiled beforehand (off the event loop, compileSchemaTextAsync). */
interface CompiledTexts {
  readonly input: SchemaVerdict;
  readonly output: SchemaVerdict | undefined;
}

/** A tool's input schema text ({"type":"object"} when none is given). */
function inputTextOf(wire: WireToolDescriptor): string {
  const text = (wire.input_schema ?? '').trim();
  return text === '' ? '{"type":"object"}' : text;
}

/** One tool of a registration: `tools[i].<field>: <why>` when refused; `names` collects the names seen so far. */
function checkTool(
  wire: WireToolDescriptor,
  i: number,
  names: Set<string>,
  compiled?: CompiledTexts,
): { readonly ok: true; readonly tool: CheckedTool } | { readonly ok: false; readonly reason: string } {
  const at = (field: string, why: string) => ({ ok: false as const, reason: `tools[${i}].${field}: ${why}` });
  const name = wire.tool_name ?? '';
  if (name.length === 0) return at('tool_name', 'must not be empty');
  if (name.length > DESCRIPTOR_LIMITS.maxToolNameChars)
    return at('tool_name', `is longer than ${DESCRIPTOR_LIMITS.maxToolNameChars} characters`);
  if (!TOOL_NAME.test(name)) return at('tool_name', `'${name}' may contain only letters, digits, '_', '.' and '-'`);
  if (names.has(name)) return at('tool_name', `'${name}' is listed twice`);
  names.add(name);

  const concurrency = count(wire.max_concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 0 || concurrency > DESCRIPTOR_LIMITS.maxConcurrency) {
    return at('max_concurrency', `must be 0 (meaning 1) to ${DESCRIPTOR_LIMITS.maxConcurrency}`);
  }
  const timeout = count(wire.default_timeout_s);
  if (!Number.isInteger(timeout) || timeout < 0 || timeout > DESCRIPTOR_LIMITS.maxDefaultTimeoutS) {
    return at('default_timeout_s', `must be 0 (none) to ${DESCRIPTOR_LIMITS.maxDefaultTimeoutS} seconds`);
  }
  const effects = sideEffectsOf(wire.side_effects ?? '');
  if (!effects.ok) return at('side_effects', effects.why);

  // The schemas last: compiling is the expensive part.
  const input = compiled?.input ?? compileSchemaText(inputTextOf(wire), 'input');
  if (!input.ok) return at('input_schema', input.why);
  const outputText = (wire.output_schema ?? '').trim();
  let output: SchemaVerdict | undefined;
  if (outputText !== '') {
    output = compiled?.output ?? compileSchemaText(outputText, 'output');
    if (!output.ok) return at('output_schema', output.why);
  }

  const description =
    typeof input.schema.description === 'string'
      ? input.schema.description.slice(0, DESCRIPTOR_LIMITS.maxDescriptionChars)
      : '';
  return {
    ok: true,
    tool: {
      descriptor: {
        name,
        description,
        inputSchema: input.schema,
        outputSchema: output?.ok ? output.schema : {},
        idempotent: wire.idempotent === true,
        needsWorktree: wire.needs_worktree === true,
        defaultTimeoutS: timeout,
        maxConcurrency: concurrency === 0 ? 1 : concurrency,
        sideEffects: effects.classes[0],
        sideEffectClasses: effects.classes,
      },
      input: input.validate,
      output: output?.ok ? output.validate : undefined,
    },
  };
}

/**
 * The tools of one RegisterProvider, checked (RFC §18.1): names, schemas (compiled with `ajv`: an invalid schema is
 * refused with the path of the problem), bounds and side-effect classes. The first problem refuses the whole
 * registration: `tools[i].<field>: <why>`. Compiles on this thread (0.6–1.6 s for a 64 KiB schema): on the
 * coordinator's event loop use checkDescriptorsInTurns.
 */
export function checkDescriptors(tools: readonly WireToolDescriptor[]): DescriptorsVerdict {
  if (tools.length > DESCRIPTOR_LIMITS.maxTools)
    return {
      ok: false,
      reason: `tools: at most ${DESCRIPTOR_LIMITS.maxTools} tools per provider (${tools.length} given)`,
    };
  const names = new Set<string>();
  const checked: CheckedTool[] = [];
  for (const [i, wire] of tools.entries()) {
    const verdict = checkTool(wire, i, names);
    if (!verdict.ok) return verdict;
    checked.push(verdict.tool);
  }
  return { ok: true, tools: checked };
}

/**
 * checkDescriptors with every schema compiled on the schema worker (compileSchemaTextAsync), one tool at a time:
 * this thread only evaluates each schema's generated code (at most MAX_VALIDATOR_SOURCE_BYTES), one tool per turn.
 */
export async function checkDescriptorsInTurns(tools: readonly WireToolDescriptor[]): Promise<DescriptorsVerdict> {
  if (tools.length > DESCRIPTOR_LIMITS.maxTools)
    return {
      ok: false,
      reason: `tools: at most ${DESCRIPTOR_LIMITS.maxTools} tools per provider (${tools.length} given)`,
    };
  const names = new Set<string>();
  const checked: CheckedTool[] = [];
  for (const [i, wire] of tools.entries()) {
    if (i > 0) await yieldTurn();
    const input = await compileSchemaTextAsync(inputTextOf(wire), 'input');
    const outputText = (wire.output_schema ?? '').trim();
    const output = input.ok && outputText !== '' ? await compileSchemaTextAsync(outputText, 'output') : undefined;
    const verdict = checkTool(wire, i, names, { input, output });
    if (!verdict.ok) return verdict;
    checked.push(verdict.tool);
  }
  return { ok: true, tools: checked };
}

/** Compiles a stored or built-in descriptor's schemas (an empty output schema = none declared). */
export function compileDescriptor(
  ajv: Ajv,
  tool: ToolDescriptor,
): { readonly input: ValidateFunction; readonly output: ValidateFunction | undefined } {
  return {
    input: ajv.compile(tool.inputSchema),
    output: Object.keys(tool.outputSchema).length === 0 ? undefined : ajv.compile(tool.outputSchema),
  };
}
