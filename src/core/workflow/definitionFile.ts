/**
 * Workflow definition files (Create Workflow from File) and proto-shaped JSON (CreateWorkflowRequest.definition).
 *
 * The definition file — workflow.proto's WorkflowDefinition with proto field names, as JSON (`*.json`) or YAML (any
 * other name; YAML 1.2, so JSON text is YAML too):
 *
 * ```yaml
 * workflow_id: review            # optional: empty or absent, the coordinator assigns one
 * metadata: { owner: docs-team } # optional: map of strings
 * nodes:                         # required: a map keyed by node id, in the author's order
 *   draft:
 *     agent_id: type:writer      # required: an agent id, or type:<agent type>
 *     input_mapping: { request: task }     # workflow data key (dotted path) → node input
 *     output_mapping: { patch: draft.patch } # node output key → workflow data key (dotted path)
 *   review:
 *     node_id: review            # optional: when given, equal to the key
 *     agent_id: type:reviewer
 *     dependencies: [draft]      # node ids that must be COMPLETED first
 *     trigger_type: DEPENDENCY   # DEPENDENCY (default), MANUAL, SCHEDULE, EVENT, or the enum number;
 *                                # TRIGGER_TYPE_UNSPECIFIED / 0 is DEPENDENCY
 *     output_mapping: { score: review.score }
 *     metadata:                  # map of strings; numbers and booleans are taken as their text
 *       route: "score > 0.5 ? 'ship' : 'revise'"   # conditional edges (cel.ts)
 *       # schedule (SCHEDULE, cron.ts), event (EVENT), priority, scope, on_failure, max_iterations: model.ts
 * ```
 *
 * Shape rules (definitionFromJson; each refusal an issue with its path, `invalid_field` unless said): the fields are
 * exactly the proto's (lowerCamelCase spellings such as `agentId` are accepted too, as proto3 JSON allows; both spellings
 * of one field are refused, `duplicate_field`); an unknown field is refused (`unknown_field`: a misspelt `dependecies`
 * would otherwise drop the dependencies silently);
 * `created_at` is accepted and ignored (the coordinator records its own creation time); `nodes` must be a map, not a
 * list; `node_id` may be omitted (the key is the id) and must equal the key when given; strings must be strings
 * (`null` counts as absent, as in proto3 JSON); trigger_type is a name or a number 0–4. Then validate.ts checks the
 * workflow itself.
 *
 * Files (parseDefinitionText): JSON by jsonc-parser in strict mode (no comments, no trailing commas), YAML by `yaml`'s
 * parseDocument (core schema; anchors and aliases allowed, bounded; keys must be scalars; a repeated key is an error in
 * both). Every issue is placed in the file: 1-based line and column of the offending key or value — the value for a
 * scalar, the key for a map or a list, and for a missing field the key of the map that lacks it — with an exclusive end;
 * 0 when no place is known. Syntax errors carry the parser's position (`invalid_syntax`).
 */
import { printParseErrorCode, parseTree, type Node as JsonNode, type ParseError as JsonParseError } from 'jsonc-parser';
import { isAlias, isMap, isPair, isScalar, isSeq, parseDocument, type Document, type Pair } from 'yaml';
import { jsonDepth } from '../json';
import { IssueList, type PathSegment, MAX_ISSUES, bounded, issuePath, moreMessage, parseIssuePath, quote } from './issues';
import type { TriggerType, ValidationIssue, WorkflowDefinition, WorkflowFileIssue, WorkflowNodeDefinition } from './model';
import { type ValidatedWorkflow, WORKFLOW_LIMITS, validateWithAllIssues } from './validate';

export const DEFINITION_FILE_LIMITS = {
  /** The largest definition text, in characters (1 MiB), refused before it is parsed. */
  maxChars: 1024 * 1024,
  /** Nesting (a definition needs 4: nodes → node → metadata → value). */
  maxDepth: 32,
  /** Values a YAML file may expand to through aliases. */
  maxValues: 4_000_000,
} as const;

const TOP_FIELDS: Readonly<Record<string, string>> = { workflow_id: 'workflowId', nodes: 'nodes', created_at: 'createdAt', metadata: 'metadata' };
const NODE_FIELDS: Readonly<Record<string, string>> = {
  node_id: 'nodeId', agent_id: 'agentId', dependencies: 'dependencies', trigger_type: 'triggerType',
  input_mapping: 'inputMapping', output_mapping: 'outputMapping', metadata: 'metadata',
};
/** lowerCamelCase spelling → proto name, for both field sets. */
const ALIASES: ReadonlyMap<string, string> = new Map(
  [...Object.entries(TOP_FIELDS), ...Object.entries(NODE_FIELDS)].filter(([proto, camel]) => proto !== camel).map(([proto, camel]) => [camel, proto]),
);
/** workflow.proto TriggerType numbers. */
const TRIGGER_NUMBERS: readonly TriggerType[] = ['DEPENDENCY', 'EVENT', 'SCHEDULE', 'MANUAL', 'DEPENDENCY'];
const TRIGGER_NAMES: Readonly<Record<string, TriggerType>> = {
  TRIGGER_TYPE_UNSPECIFIED: 'DEPENDENCY', EVENT: 'EVENT', SCHEDULE: 'SCHEDULE', MANUAL: 'MANUAL', DEPENDENCY: 'DEPENDENCY',
};

/** Maps built from files remember their key order here (a JS object puts integer-like keys first). */
const KEY_ORDER = Symbol('keyOrder');

type JsonMap = Record<string, unknown> & { [KEY_ORDER]?: readonly string[] };

function keysOf(map: JsonMap): readonly string[] {
  return map[KEY_ORDER] ?? Object.keys(map);
}

function isMapValue(value: unknown): value is JsonMap {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof Uint8Array);
}

/** An own, enumerable property even for the key `__proto__` (which plain assignment would take as the prototype). */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (value instanceof Uint8Array) return 'binary data';
  if (typeof value === 'object') return 'a map';
  return `a ${typeof value}`;
}

// ---------------------------------------------------------------- proto-shaped JSON → WorkflowDefinition

interface Shaped {
  readonly definition?: WorkflowDefinition;
  readonly issues: IssueList;
}

export function definitionFromJson(value: unknown): { readonly definition?: WorkflowDefinition; readonly issues: readonly ValidationIssue[] } {
  const shaped = shape(value);
  return { definition: shaped.issues.hasErrors ? undefined : shaped.definition, issues: shaped.issues.list() };
}

/** Reads the fields of `map`: proto names, their camelCase spellings; unknown fields refused. */
function fieldsOf(issues: IssueList, node: number, map: JsonMap, fields: Readonly<Record<string, string>>, at: readonly PathSegment[], what: string): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const key of keysOf(map)) {
    const proto = Object.prototype.hasOwnProperty.call(fields, key) ? key : ALIASES.get(key);
    if (proto === undefined || !Object.prototype.hasOwnProperty.call(fields, proto)) {
      issues.error(node, 'unknown_field', issuePath(...at, key), `unknown field ${quote(key, 40)} in ${what}; its fields are ${Object.keys(fields).join(', ')}`);
      continue;
    }
    if (out.has(proto)) {
      issues.error(node, 'duplicate_field', issuePath(...at, key), `${what} gives ${proto} twice (as ${proto} and ${fields[proto]})`);
      continue;
    }
    const v = map[key];
    if (v !== null && v !== undefined) out.set(proto, v);
  }
  return out;
}

function stringField(issues: IssueList, node: number, value: unknown, at: readonly PathSegment[], what: string): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  issues.error(node, 'invalid_field', issuePath(...at), `${what} must be a string, not ${typeName(value)}`);
  return '';
}

/** map<string, string>; `scalars`: numbers and booleans are taken as their text (metadata). */
function stringMap(issues: IssueList, node: number, value: unknown, at: readonly PathSegment[], what: string, scalars: boolean): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === undefined) return out;
  if (!isMapValue(value)) {
    issues.error(node, 'invalid_field', issuePath(...at), `${what} must be a map of strings, not ${typeName(value)}`);
    return out;
  }
  for (const key of keysOf(value)) {
    const v = value[key];
    if (typeof v === 'string') setOwn(out, key, v);
    else if (scalars && ((typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean')) setOwn(out, key, String(v));
    else issues.error(node, 'invalid_field', issuePath(...at, key), `${what} ${quote(key, 40)} must be a string${scalars ? ' (or a number or a boolean)' : ''}, not ${typeName(v)}`);
  }
  return out;
}

function shape(value: unknown): Shaped {
  const issues = new IssueList();
  if (!isMapValue(value)) {
    issues.error(-1, 'invalid_field', '', `a workflow definition is a map with workflow_id, nodes and metadata, not ${typeName(value)}`);
    return { issues };
  }
  const top = fieldsOf(issues, -1, value, TOP_FIELDS, [], 'the workflow definition');
  const workflowId = stringField(issues, -1, top.get('workflow_id'), ['workflow_id'], 'workflow_id');
  const metadata = stringMap(issues, -1, top.get('metadata'), ['metadata'], 'metadata', true);
  const rawNodes = top.get('nodes');
  const nodes: WorkflowNodeDefinition[] = [];
  if (rawNodes === undefined) {
    issues.error(-1, 'invalid_field', 'nodes', 'the workflow definition has no nodes (a map of node id → node)');
  } else if (Array.isArray(rawNodes)) {
    issues.error(-1, 'invalid_field', 'nodes', 'nodes is a map keyed by node id (workflow.proto map<string, WorkflowNode>), not a list');
  } else if (!isMapValue(rawNodes)) {
    issues.error(-1, 'invalid_field', 'nodes', `nodes must be a map keyed by node id, not ${typeName(rawNodes)}`);
  } else {
    const keys = keysOf(rawNodes);
    if (keys.length > WORKFLOW_LIMITS.maxNodes) {
      issues.error(-1, 'limit_exceeded', 'nodes', `a workflow has at most ${WORKFLOW_LIMITS.maxNodes} nodes (this one has ${keys.length})`);
      return { issues };
    }
    const totals = rawTotals(rawNodes, keys, top.get('metadata'));
    if (totals.dependencies > WORKFLOW_LIMITS.maxTotalDependencies) {
      issues.error(-1, 'limit_exceeded', 'nodes', `a workflow has at most ${WORKFLOW_LIMITS.maxTotalDependencies} dependencies in all (this one has ${totals.dependencies})`);
      return { issues };
    }
    if (totals.mapEntries > WORKFLOW_LIMITS.maxMapEntries) {
      issues.error(-1, 'limit_exceeded', 'nodes', `a workflow has at most ${WORKFLOW_LIMITS.maxMapEntries} map entries in all (metadata, input_mapping, output_mapping; this one has ${totals.mapEntries})`);
      return { issues };
    }
    for (let i = 0; i < keys.length; i++) {
      const node = shapeNode(issues, i, keys[i], rawNodes[keys[i]]);
      if (node) nodes.push(node);
    }
  }
  return { definition: { workflowId, nodes, metadata }, issues };
}

/** Dependencies and map entries of a definition not yet shaped (both spellings of each field counted): plain counts. */
function rawTotals(rawNodes: JsonMap, keys: readonly string[], metadata: unknown): { dependencies: number; mapEntries: number } {
  const entries = (v: unknown) => (isMapValue(v) ? keysOf(v).length : 0);
  let dependencies = 0;
  let mapEntries = entries(metadata);
  for (const key of keys) {
    const node = rawNodes[key];
    if (!isMapValue(node)) continue;
    for (const field of ['dependencies', 'input_mapping', 'inputMapping', 'output_mapping', 'outputMapping', 'metadata']) {
      if (!Object.prototype.hasOwnProperty.call(node, field)) continue;
      const v = node[field];
      if (field === 'dependencies') dependencies += Array.isArray(v) ? v.length : 0;
      else mapEntries += entries(v);
    }
  }
  return { dependencies, mapEntries };
}

function shapeNode(issues: IssueList, i: number, key: string, value: unknown): WorkflowNodeDefinition | undefined {
  const at = ['nodes', key];
  if (!isMapValue(value)) {
    issues.error(i, 'invalid_field', issuePath(...at), `node ${quote(key)} must be a map (agent_id, dependencies, …), not ${typeName(value)}`);
    return undefined;
  }
  const f = fieldsOf(issues, i, value, NODE_FIELDS, at, `node ${quote(key)}`);
  const nodeId = stringField(issues, i, f.get('node_id'), [...at, 'node_id'], 'node_id');
  if (nodeId !== '' && nodeId !== key) {
    issues.error(i, 'invalid_field', issuePath(...at, 'node_id'), `node_id ${quote(nodeId)} differs from its key ${quote(key)} in nodes`);
  }
  const agentId = stringField(issues, i, f.get('agent_id'), [...at, 'agent_id'], 'agent_id');
  const dependencies: string[] = [];
  const rawDeps = f.get('dependencies');
  if (rawDeps !== undefined) {
    if (!Array.isArray(rawDeps)) {
      issues.error(i, 'invalid_field', issuePath(...at, 'dependencies'), `dependencies must be a list of node ids, not ${typeName(rawDeps)}`);
    } else {
      for (let k = 0; k < rawDeps.length; k++) {
        const d = rawDeps[k];
        if (typeof d === 'string') dependencies.push(d);
        else {
          issues.error(i, 'invalid_field', issuePath(...at, 'dependencies', k), `a dependency is a node id (a string), not ${typeName(d)}`);
          dependencies.push('');
        }
      }
    }
  }
  let trigger: TriggerType = 'DEPENDENCY';
  const rawTrigger = f.get('trigger_type');
  if (typeof rawTrigger === 'string' && Object.prototype.hasOwnProperty.call(TRIGGER_NAMES, rawTrigger)) trigger = TRIGGER_NAMES[rawTrigger];
  else if (typeof rawTrigger === 'number' && Number.isInteger(rawTrigger) && rawTrigger >= 0 && rawTrigger < TRIGGER_NUMBERS.length) trigger = TRIGGER_NUMBERS[rawTrigger];
  else if (rawTrigger !== undefined) {
    issues.error(i, 'invalid_field', issuePath(...at, 'trigger_type'), `trigger_type ${quote(String(rawTrigger), 40)} is not DEPENDENCY, MANUAL, SCHEDULE, EVENT (or TRIGGER_TYPE_UNSPECIFIED, read as DEPENDENCY) or their numbers 0–4`);
  }
  return {
    // The key is the id (validate.ts then checks it): paths name nodes by their keys, where the author finds them.
    nodeId: key,
    agentId,
    dependencies,
    trigger,
    inputMapping: stringMap(issues, i, f.get('input_mapping'), [...at, 'input_mapping'], 'input_mapping', false),
    outputMapping: stringMap(issues, i, f.get('output_mapping'), [...at, 'output_mapping'], 'output_mapping', false),
    metadata: stringMap(issues, i, f.get('metadata'), [...at, 'metadata'], 'metadata', true),
  };
}

// ---------------------------------------------------------------- files

/** Offsets → 1-based line and column (UTF-16 code units, as editors count). */
class LineIndex {
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

type Span = readonly [start: number, end: number];

/** A parsed file: its value (maps with their key order) and where a path is in the text. */
interface ParsedFile {
  readonly value?: unknown;
  readonly issues: WorkflowFileIssue[];
  /** Where the path is: its value, or (`key`) the key that names it. */
  locate(path: readonly PathSegment[], key?: boolean): Span | undefined;
}

/** Issues about a key itself (not its value): placed at the key. */
const KEY_CODES = new Set(['unknown_field', 'duplicate_field']);

function placed(issue: ValidationIssue, span: Span | undefined, lines: LineIndex): WorkflowFileIssue {
  if (!span) return { ...issue, line: 0, column: 0, endLine: 0, endColumn: 0 };
  const start = lines.position(span[0]);
  const end = lines.position(Math.max(span[1], span[0]));
  return { ...issue, line: start.line, column: start.column, endLine: end.line, endColumn: end.column };
}

/** Both alternatives of a path segment: the proto name and its camelCase spelling. */
function spellings(segment: string): string[] {
  const camel = TOP_FIELDS[segment] ?? NODE_FIELDS[segment];
  return camel && camel !== segment ? [segment, camel] : [segment];
}

class Converter {
  values = 0;
  readonly issues: WorkflowFileIssue[] = [];
  constructor(readonly text: string, readonly lines: LineIndex) {}
  refuse(code: string, span: Span | undefined, message: string): void {
    this.issues.push(placed({ severity: 'error', code, path: '', message }, span, this.lines));
  }
  private refusedSize = false;
  count(span: Span | undefined, values = 1): boolean {
    this.values += values;
    if (this.values <= DEFINITION_FILE_LIMITS.maxValues) return true;
    if (!this.refusedSize) this.refuse('limit_exceeded', span, `the file holds (or expands through aliases to) more than ${DEFINITION_FILE_LIMITS.maxValues} values`);
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

function parseJsonFile(text: string, lines: LineIndex): ParsedFile {
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
      conv.refuse('invalid_syntax', [err.offset, err.offset + Math.max(err.length, 1)], `JSON: ${JSON_ERRORS[name] ?? name}`);
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
          conv.refuse('invalid_syntax', [keyNode.offset, keyNode.offset + keyNode.length], `the key ${quote(key, 40)} appears twice in this map`);
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
      for (const p of object.children ?? []) { const k = p.children?.[0]?.value; if (typeof k === 'string' && !map.has(k)) map.set(k, p); }
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
          if (property) { key = property.children![0]; next = property.children![1]; break; }
        }
      }
      if (!next) break;
      node = next;
      const container = node.type === 'object' || node.type === 'array';
      anchor = key && (container || wantKey) ? [key.offset, key.offset + key.length] : !container ? [node.offset, node.offset + node.length] : [node.offset, node.offset + 1];
    }
    return anchor;
  };
  return { value, issues: conv.issues, locate };
}

// ---- YAML (yaml, parseDocument)

function parseYamlFile(text: string, lines: LineIndex): ParsedFile {
  const conv = new Converter(text, lines);
  // uniqueKeys off: yaml's own check compares every key with every other (quadratic in a 100,000-node map); the
  // conversion below finds repeated keys with a Set.
  const doc = parseDocument(text, { uniqueKeys: false, prettyErrors: false, strict: true, version: '1.2', schema: 'core', merge: false, keepSourceTokens: false });
  for (const err of doc.errors.slice(0, MAX_ISSUES)) {
    conv.refuse('invalid_syntax', [err.pos[0], err.pos[1]], `YAML: ${err.message.split('\n')[0]} (${err.code})`);
  }
  if (doc.errors.length) return { issues: conv.issues, locate: () => undefined };
  for (const warning of doc.warnings.slice(0, MAX_ISSUES)) {
    conv.issues.push(placed({ severity: 'warning', code: 'yaml_warning', path: '', message: `YAML: ${warning.message.split('\n')[0]} (${warning.code})` }, [warning.pos[0], warning.pos[1]], lines));
  }
  const spanOf = (node: unknown): Span | undefined => {
    const range = (node as { range?: readonly number[] | null } | null)?.range;
    return range ? [range[0], range[1]] : undefined;
  };
  const keyText = (key: unknown): string | undefined => {
    if (!isScalar(key)) return undefined;
    const v = key.value;
    if (typeof v === 'string') return v;
    if (typeof v === 'number' || typeof v === 'boolean' || v === null) return typeof key.source === 'string' ? key.source : String(v);
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
      conv.refuse('limit_exceeded', spanOf(node), `the file nests deeper than ${DEFINITION_FILE_LIMITS.maxDepth} levels`);
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
    if (!conv.count(spanOf(node), 1)) { ok = false; return { value: undefined, size: 0 }; }
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
      for (const p of yamlMap.items as Pair[]) { if (!isPair(p)) continue; const k = keyText(p.key); if (k !== undefined && !map.has(k)) map.set(k, p); }
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
          if (pair) { key = pair.key; next = pair.value ?? pair.key; break; }
        }
      }
      if (next === undefined || next === null) break;
      node = next;
      const span = spanOf(node);
      if (!span) break;
      const container = isMap(node) || isSeq(node);
      // A container, or an empty value (`nodes:` with nothing after it), is shown by its key.
      anchor = !container && span[1] > span[0] && !(wantKey && key) ? span : key ? spanOf(key) ?? span : [span[0], lines.lineEnd(span[0], text)];
    }
    return anchor;
  };
  return { value: ok ? value : undefined, issues: conv.issues, locate };
}

function byPlace(a: WorkflowFileIssue, b: WorkflowFileIssue): number {
  return (a.severity === b.severity ? 0 : a.severity === 'error' ? -1 : 1) || a.line - b.line || a.column - b.column;
}

function boundedFileIssues(issues: WorkflowFileIssue[]): WorkflowFileIssue[] {
  const sorted = issues.filter((i) => i.code !== 'more_issues').sort(byPlace);
  return bounded(sorted, (rest) => ({
    severity: rest.errors ? 'error' : 'warning', code: 'more_issues', path: '', message: moreMessage(rest.errors, rest.warnings),
    line: 0, column: 0, endLine: 0, endColumn: 0,
  }));
}

/**
 * A definition file's text → the definition, its validation, and every issue placed in the file. `fileName` decides
 * the syntax: `*.json` is JSON, anything else YAML. `definition` and `validated` are given when the text could be read
 * into a definition without a shape error; the workflow may be created when `validated.ok`.
 */
export function parseDefinitionText(text: string, fileName: string): { readonly definition?: WorkflowDefinition; readonly validated?: ValidatedWorkflow; readonly issues: readonly WorkflowFileIssue[] } {
  if (typeof text !== 'string' || text.length > DEFINITION_FILE_LIMITS.maxChars) {
    const size = typeof text === 'string' ? text.length : 0;
    return { issues: [{ severity: 'error', code: 'limit_exceeded', path: '', message: `a definition file has at most ${DEFINITION_FILE_LIMITS.maxChars} characters (this one has ${size})`, line: 0, column: 0, endLine: 0, endColumn: 0 }] };
  }
  const lines = new LineIndex(text);
  const file = /\.json$/i.test(fileName) ? parseJsonFile(text, lines) : parseYamlFile(text, lines);
  if (file.issues.some((i) => i.severity === 'error') || file.value === undefined) return { issues: boundedFileIssues(file.issues) };

  const locate = (issue: ValidationIssue): WorkflowFileIssue => {
    const segments = parseIssuePath(issue.path);
    return placed(issue, segments ? file.locate(segments, KEY_CODES.has(issue.code)) : undefined, lines);
  };
  const shaped = shape(file.value);
  const shapeIssues = shaped.issues.all();
  const out: WorkflowFileIssue[] = [...file.issues, ...shapeIssues.map(locate)];
  if (!shaped.definition) return { issues: boundedFileIssues(out) };
  // A field the shape refused reads as empty in the definition: validation's word on the same path adds nothing.
  const refused = new Set(shapeIssues.map((i) => i.path));
  const { validated, all } = validateWithAllIssues(shaped.definition);
  for (const issue of all) if (!refused.has(issue.path)) out.push(locate(issue));
  if (shaped.issues.hasErrors) return { issues: boundedFileIssues(out) };
  return { definition: shaped.definition, validated, issues: boundedFileIssues(out) };
}
