import { IssueList, type PathSegment, issuePath, quote } from './issues';
import { WORKFLOW_LIMITS } from './limits';
import type { TriggerType, WorkflowDefinition, WorkflowNodeDefinition } from './model';

// Proto-shaped JSON (workflow.proto's WorkflowDefinition, proto names or camelCase) → WorkflowDefinition: the shape
// rules of definitionFile.ts' reference, each refusal an issue with its path.

const TOP_FIELDS: Readonly<Record<string, string>> = {
  workflow_id: 'workflowId',
  nodes: 'nodes',
  created_at: 'createdAt',
  metadata: 'metadata',
};
const NODE_FIELDS: Readonly<Record<string, string>> = {
  node_id: 'nodeId',
  agent_id: 'agentId',
  dependencies: 'dependencies',
  trigger_type: 'triggerType',
  input_mapping: 'inputMapping',
  output_mapping: 'outputMapping',
  metadata: 'metadata',
};
/** lowerCamelCase spelling → proto name, for both field sets. */
const ALIASES: ReadonlyMap<string, string> = new Map(
  [...Object.entries(TOP_FIELDS), ...Object.entries(NODE_FIELDS)]
    .filter(([proto, camel]) => proto !== camel)
    .map(([proto, camel]) => [camel, proto]),
);
/** workflow.proto TriggerType numbers. */
const TRIGGER_NUMBERS: readonly TriggerType[] = ['DEPENDENCY', 'EVENT', 'SCHEDULE', 'MANUAL', 'DEPENDENCY'];
const TRIGGER_NAMES: Readonly<Record<string, TriggerType>> = {
  TRIGGER_TYPE_UNSPECIFIED: 'DEPENDENCY',
  EVENT: 'EVENT',
  SCHEDULE: 'SCHEDULE',
  MANUAL: 'MANUAL',
  DEPENDENCY: 'DEPENDENCY',
};

/** Maps built from files remember their key order here (a JS object puts integer-like keys first). */
export const KEY_ORDER = Symbol('keyOrder');

export type JsonMap = Record<string, unknown> & { [KEY_ORDER]?: readonly string[] };

export function keysOf(map: JsonMap): readonly string[] {
  return map[KEY_ORDER] ?? Object.keys(map);
}

export function isMapValue(value: unknown): value is JsonMap {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof Uint8Array);
}

/** An own, enumerable property even for the key `__proto__` (which plain assignment would take as the prototype). */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__')
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

export function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (value instanceof Uint8Array) return 'binary data';
  if (typeof value === 'object') return 'a map';
  return `a ${typeof value}`;
}

export interface Shaped {
  readonly definition?: WorkflowDefinition;
  readonly issues: IssueList;
}

/** Reads the fields of `map`: proto names, their camelCase spellings; unknown fields refused. */
function fieldsOf(
  issues: IssueList,
  node: number,
  map: JsonMap,
  fields: Readonly<Record<string, string>>,
  at: readonly PathSegment[],
  what: string,
): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const key of keysOf(map)) {
    const proto = Object.prototype.hasOwnProperty.call(fields, key) ? key : ALIASES.get(key);
    if (proto === undefined || !Object.prototype.hasOwnProperty.call(fields, proto)) {
      issues.error(
        node,
        'unknown_field',
        issuePath(...at, key),
        `unknown field ${quote(key, 40)} in ${what}; its fields are ${Object.keys(fields).join(', ')}`,
      );
      continue;
    }
    if (out.has(proto)) {
      issues.error(
        node,
        'duplicate_field',
        issuePath(...at, key),
        `${what} gives ${proto} twice (as ${proto} and ${fields[proto]})`,
      );
      continue;
    }
    const v = map[key];
    if (v !== null && v !== undefined) out.set(proto, v);
  }
  return out;
}

function stringField(
  issues: IssueList,
  node: number,
  value: unknown,
  at: readonly PathSegment[],
  what: string,
): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  issues.error(node, 'invalid_field', issuePath(...at), `${what} must be a string, not ${typeName(value)}`);
  return '';
}

/** map<string, string>; `scalars`: numbers and booleans are taken as their text (metadata). */
function stringMap(
  issues: IssueList,
  node: number,
  value: unknown,
  at: readonly PathSegment[],
  what: string,
  scalars: boolean,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === undefined) return out;
  if (!isMapValue(value)) {
    issues.error(node, 'invalid_field', issuePath(...at), `${what} must be a map of strings, not ${typeName(value)}`);
    return out;
  }
  for (const key of keysOf(value)) {
    const v = value[key];
    if (typeof v === 'string') setOwn(out, key, v);
    else if (scalars && ((typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean'))
      setOwn(out, key, String(v));
    else
      issues.error(
        node,
        'invalid_field',
        issuePath(...at, key),
        `${what} ${quote(key, 40)} must be a string${scalars ? ' (or a number or a boolean)' : ''}, not ${typeName(v)}`,
      );
  }
  return out;
}

export function shape(value: unknown): Shaped {
  const issues = new IssueList();
  if (!isMapValue(value)) {
    issues.error(
      -1,
      'invalid_field',
      '',
      `a workflow definition is a map with workflow_id, nodes and metadata, not ${typeName(value)}`,
    );
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
    issues.error(
      -1,
      'invalid_field',
      'nodes',
      'nodes is a map keyed by node id (workflow.proto map<string, WorkflowNode>), not a list',
    );
  } else if (!isMapValue(rawNodes)) {
    issues.error(-1, 'invalid_field', 'nodes', `nodes must be a map keyed by node id, not ${typeName(rawNodes)}`);
  } else {
    const keys = keysOf(rawNodes);
    if (keys.length > WORKFLOW_LIMITS.maxNodes) {
      issues.error(
        -1,
        'limit_exceeded',
        'nodes',
        `a workflow has at most ${WORKFLOW_LIMITS.maxNodes} nodes (this one has ${keys.length})`,
      );
      return { issues };
    }
    const totals = rawTotals(rawNodes, keys, top.get('metadata'));
    if (totals.dependencies > WORKFLOW_LIMITS.maxTotalDependencies) {
      issues.error(
        -1,
        'limit_exceeded',
        'nodes',
        `a workflow has at most ${WORKFLOW_LIMITS.maxTotalDependencies} dependencies in all (this one has ${totals.dependencies})`,
      );
      return { issues };
    }
    if (totals.mapEntries > WORKFLOW_LIMITS.maxMapEntries) {
      issues.error(
        -1,
        'limit_exceeded',
        'nodes',
        `a workflow has at most ${WORKFLOW_LIMITS.maxMapEntries} map entries in all (metadata, input_mapping, output_mapping; this one has ${totals.mapEntries})`,
      );
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
function rawTotals(
  rawNodes: JsonMap,
  keys: readonly string[],
  metadata: unknown,
): { dependencies: number; mapEntries: number } {
  const entries = (v: unknown) => (isMapValue(v) ? keysOf(v).length : 0);
  let dependencies = 0;
  let mapEntries = entries(metadata);
  for (const key of keys) {
    const node = rawNodes[key];
    if (!isMapValue(node)) continue;
    for (const field of [
      'dependencies',
      'input_mapping',
      'inputMapping',
      'output_mapping',
      'outputMapping',
      'metadata',
    ]) {
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
    issues.error(
      i,
      'invalid_field',
      issuePath(...at),
      `node ${quote(key)} must be a map (agent_id, dependencies, …), not ${typeName(value)}`,
    );
    return undefined;
  }
  const f = fieldsOf(issues, i, value, NODE_FIELDS, at, `node ${quote(key)}`);
  const nodeId = stringField(issues, i, f.get('node_id'), [...at, 'node_id'], 'node_id');
  if (nodeId !== '' && nodeId !== key) {
    issues.error(
      i,
      'invalid_field',
      issuePath(...at, 'node_id'),
      `node_id ${quote(nodeId)} differs from its key ${quote(key)} in nodes`,
    );
  }
  const agentId = stringField(issues, i, f.get('agent_id'), [...at, 'agent_id'], 'agent_id');
  const dependencies: string[] = [];
  const rawDeps = f.get('dependencies');
  if (rawDeps !== undefined) {
    if (!Array.isArray(rawDeps)) {
      issues.error(
        i,
        'invalid_field',
        issuePath(...at, 'dependencies'),
        `dependencies must be a list of node ids, not ${typeName(rawDeps)}`,
      );
    } else {
      for (let k = 0; k < rawDeps.length; k++) {
        const d = rawDeps[k];
        if (typeof d === 'string') dependencies.push(d);
        else {
          issues.error(
            i,
            'invalid_field',
            issuePath(...at, 'dependencies', k),
            `a dependency is a node id (a string), not ${typeName(d)}`,
          );
          dependencies.push('');
        }
      }
    }
  }
  let trigger: TriggerType = 'DEPENDENCY';
  const rawTrigger = f.get('trigger_type');
  if (typeof rawTrigger === 'string' && Object.prototype.hasOwnProperty.call(TRIGGER_NAMES, rawTrigger))
    trigger = TRIGGER_NAMES[rawTrigger];
  else if (
    typeof rawTrigger === 'number' &&
    Number.isInteger(rawTrigger) &&
    rawTrigger >= 0 &&
    rawTrigger < TRIGGER_NUMBERS.length
  )
    trigger = TRIGGER_NUMBERS[rawTrigger];
  else if (rawTrigger !== undefined) {
    issues.error(
      i,
      'invalid_field',
      issuePath(...at, 'trigger_type'),
      `trigger_type ${quote(String(rawTrigger), 40)} is not DEPENDENCY, MANUAL, SCHEDULE, EVENT (or TRIGGER_TYPE_UNSPECIFIED, read as DEPENDENCY) or their numbers 0–4`,
    );
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

/** Both alternatives of a path segment: the proto name and its camelCase spelling. */
export function spellings(segment: string): string[] {
  const camel = TOP_FIELDS[segment] ?? NODE_FIELDS[segment];
  return camel && camel !== segment ? [segment, camel] : [segment];
}
