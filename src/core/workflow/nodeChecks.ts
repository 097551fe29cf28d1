import { identifierRefusal } from '../fieldLimits';
import { isScopeRefusal, parseScope } from '../scheduler/model';
import { scheduleError } from './cron';
import { IssueList, issuePath, quote } from './issues';
import { WORKFLOW_LIMITS } from './limits';
import { TRIGGER_TYPES, type WorkflowNodeDefinition } from './model';

// The checks of one node's fields and of the workflow's own (validate.ts' header lists the codes).

/** Anything an id may not hold (whitespace, `,` `:` `/`, control characters, U+FFFD): one scan for the usual case. */
const ID_REFUSED = /[\s,:/\u0000-\u001f\u007f\uFFFD]/;
const BLANK = /^\s*$/;

/** Why a node id or workflow id cannot be used ([code, message]), or undefined. */
export function idRefusal(what: string, id: unknown): [string, string] | undefined {
  if (typeof id !== 'string') return ['invalid_field', `${what} must be a string`];
  if (id !== '' && id.length <= WORKFLOW_LIMITS.maxIdChars && !ID_REFUSED.test(id)) return undefined;
  if (id === '') return ['invalid_field', `${what} is empty`];
  if (id.length > WORKFLOW_LIMITS.maxIdChars)
    return [
      'limit_exceeded',
      `${what} ${quote(id, 40)} is longer than ${WORKFLOW_LIMITS.maxIdChars} characters (${id.length})`,
    ];
  const why = identifierRefusal(what, id, WORKFLOW_LIMITS.maxIdChars);
  if (why) return ['invalid_field', why];
  return ['invalid_field', `${what} ${quote(id)} contains whitespace, ',', ':' or '/'`];
}

/** Own enumerable keys of a map (0 when it is not one). */
export function countEntries(map: unknown): number {
  if (map === null || typeof map !== 'object') return 0;
  let c = 0;
  for (const key in map) if (Object.prototype.hasOwnProperty.call(map, key)) c++;
  return c;
}

export function hasOwn(map: object, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(map, key);
}

const WHOLE_NUMBER = /^\s*-?\d{1,6}\s*$/;
const TYPE_WITHOUT_NAME = /^type:\s*$/;

function isWholeNumber(text: string, min: number, max: number): boolean {
  if (!WHOLE_NUMBER.test(text)) return false;
  const n = Number(text);
  return n >= min && n <= max;
}

export function checkNode(issues: IssueList, i: number, node: WorkflowNodeDefinition): void {
  const id = node.nodeId;
  const agent = node.agentId;
  if (typeof agent !== 'string' || BLANK.test(agent)) {
    issues.error(
      i,
      'invalid_field',
      issuePath('nodes', id, 'agent_id'),
      `node ${quote(id)} has no agent_id: give the agent that runs it (an agent id, or type:<agent type>)`,
    );
  } else {
    const why = identifierRefusal('agent_id', agent, WORKFLOW_LIMITS.maxAgentIdChars);
    if (why)
      issues.error(
        i,
        agent.length > WORKFLOW_LIMITS.maxAgentIdChars ? 'limit_exceeded' : 'invalid_field',
        issuePath('nodes', id, 'agent_id'),
        why,
      );
    else if (TYPE_WITHOUT_NAME.test(agent))
      issues.error(i, 'invalid_field', issuePath('nodes', id, 'agent_id'), 'agent_id "type:" names no agent type');
  }
  if (!(TRIGGER_TYPES as readonly string[]).includes(node.trigger)) {
    issues.error(
      i,
      'invalid_field',
      issuePath('nodes', id, 'trigger_type'),
      `trigger_type ${quote(String(node.trigger))} is not one of ${TRIGGER_TYPES.join(', ')}`,
    );
  }
  checkMapping(issues, i, node, 'input_mapping', node.inputMapping, true);
  checkMapping(issues, i, node, 'output_mapping', node.outputMapping, false);

  const metadata = node.metadata;
  if (
    !checkStringMap(
      issues,
      i,
      metadata,
      id,
      'metadata',
      WORKFLOW_LIMITS.maxMetadataEntries,
      WORKFLOW_LIMITS.maxMetadataKeyChars,
      WORKFLOW_LIMITS.maxMetadataValueChars,
    )
  )
    return;
  if (hasOwn(metadata, 'priority') && !isWholeNumber(metadata.priority, -19, 20)) {
    issues.error(
      i,
      'invalid_field',
      mapPath(id, 'metadata', 'priority'),
      `priority ${quote(metadata.priority)} is not a whole number from -19 to 20`,
    );
  }
  if (hasOwn(metadata, 'scope')) {
    const scope = parseScope(metadata.scope);
    if (isScopeRefusal(scope)) issues.error(i, 'invalid_field', mapPath(id, 'metadata', 'scope'), scope);
  }
  if (hasOwn(metadata, 'on_failure') && metadata.on_failure !== 'fail' && metadata.on_failure !== 'hitl') {
    issues.error(
      i,
      'invalid_field',
      mapPath(id, 'metadata', 'on_failure'),
      `on_failure ${quote(metadata.on_failure)} is neither "fail" nor "hitl"`,
    );
  }
  if (hasOwn(metadata, 'max_iterations') && !isWholeNumber(metadata.max_iterations, 1, WORKFLOW_LIMITS.maxIterations)) {
    issues.error(
      i,
      'invalid_field',
      mapPath(id, 'metadata', 'max_iterations'),
      `max_iterations ${quote(metadata.max_iterations)} is not a whole number from 1 to ${WORKFLOW_LIMITS.maxIterations}`,
    );
  }
  if (node.trigger === 'SCHEDULE') {
    if (!hasOwn(metadata, 'schedule'))
      issues.error(
        i,
        'invalid_schedule',
        issuePath('nodes', id, 'metadata'),
        `node ${quote(id)} is a SCHEDULE node without metadata schedule (a 5-field cron expression, UTC)`,
      );
    else {
      const why = scheduleError(metadata.schedule);
      if (why) issues.error(i, 'invalid_schedule', mapPath(id, 'metadata', 'schedule'), why);
    }
  } else if (hasOwn(metadata, 'schedule')) {
    issues.warning(
      i,
      'unused_metadata',
      mapPath(id, 'metadata', 'schedule'),
      `schedule is read only for SCHEDULE nodes; node ${quote(id)} is ${node.trigger}`,
    );
  }
  if (node.trigger === 'EVENT') {
    if (!hasOwn(metadata, 'event') || BLANK.test(metadata.event))
      issues.error(
        i,
        'invalid_event',
        hasOwn(metadata, 'event') ? mapPath(id, 'metadata', 'event') : issuePath('nodes', id, 'metadata'),
        `node ${quote(id)} is an EVENT node without metadata event (the event name it waits for)`,
      );
  } else if (hasOwn(metadata, 'event')) {
    issues.warning(
      i,
      'unused_metadata',
      mapPath(id, 'metadata', 'event'),
      `event is read only for EVENT nodes; node ${quote(id)} is ${node.trigger}`,
    );
  }
}

/** The path of a map field (`nodeId` undefined: the workflow's own) or of one of its keys. */
function mapPath(nodeId: string | undefined, field: string, key?: string): string {
  const base: (string | number)[] = nodeId === undefined ? [field] : ['nodes', nodeId, field];
  if (key !== undefined) base.push(key);
  return issuePath(...base);
}

/** A map of strings within its bounds; false when it is not a map at all. Allocates nothing unless it finds an issue. */
export function checkStringMap(
  issues: IssueList,
  i: number,
  map: unknown,
  nodeId: string | undefined,
  field: string,
  maxEntries: number,
  maxKey: number,
  maxValue: number,
): boolean {
  if (map === null || typeof map !== 'object' || Array.isArray(map)) {
    issues.error(i, 'invalid_field', mapPath(nodeId, field), `${field} must be a map of strings`);
    return false;
  }
  let ok = true;
  let entries = 0;
  for (const key in map) {
    if (!Object.prototype.hasOwnProperty.call(map, key)) continue;
    entries++;
    const value = (map as Record<string, unknown>)[key];
    if (typeof value !== 'string') {
      issues.error(i, 'invalid_field', mapPath(nodeId, field, key), `${field} ${quote(key)} must be a string`);
      ok = false;
    } else if (value.length > maxValue) {
      issues.error(
        i,
        'limit_exceeded',
        mapPath(nodeId, field, key),
        `${field} ${quote(key)} is longer than ${maxValue} characters (${value.length})`,
      );
    }
    if (key.length > maxKey)
      issues.error(
        i,
        'limit_exceeded',
        mapPath(nodeId, field, key),
        `${field} key ${quote(key, 40)} is longer than ${maxKey} characters`,
      );
  }
  if (entries > maxEntries)
    issues.error(i, 'limit_exceeded', mapPath(nodeId, field), `${field} has ${entries} entries; at most ${maxEntries}`);
  return ok;
}

/** Dot-separated keys, none empty. */
function isDataPath(text: string): boolean {
  return (
    text !== '' && text.charCodeAt(0) !== 0x2e && text.charCodeAt(text.length - 1) !== 0x2e && !text.includes('..')
  );
}

/**
 * input_mapping: workflow data key (a dotted path) → node input name; output_mapping: node output key → workflow data key
 * (a dotted path). Keys and values non-empty and bounded; data paths without empty segments; no input or data key twice.
 */
function checkMapping(
  issues: IssueList,
  i: number,
  node: WorkflowNodeDefinition,
  field: 'input_mapping' | 'output_mapping',
  mapping: unknown,
  input: boolean,
): void {
  const id = node.nodeId;
  if (
    !checkStringMap(
      issues,
      i,
      mapping,
      id,
      field,
      WORKFLOW_LIMITS.maxMappingEntries,
      WORKFLOW_LIMITS.maxMappingChars,
      WORKFLOW_LIMITS.maxMappingChars,
    )
  )
    return;
  // Which key wrote each input (or data key): made at the second entry.
  let seen: Map<string, string> | undefined;
  let firstKey: string | undefined;
  let firstValue = '';
  for (const key in mapping as Record<string, string>) {
    if (!Object.prototype.hasOwnProperty.call(mapping, key)) continue;
    const value = (mapping as Record<string, string>)[key];
    const dataPath = input ? key : value;
    if (key === '' || value === '') {
      issues.error(
        i,
        'invalid_field',
        mapPath(id, field, key),
        `${field} has an empty ${key === '' ? 'key' : 'value'}`,
      );
      continue;
    }
    if (!isDataPath(dataPath)) {
      issues.error(
        i,
        'invalid_field',
        mapPath(id, field, key),
        `${quote(dataPath)} is not a workflow data path (dot-separated keys, none empty)`,
      );
      continue;
    }
    if (firstKey === undefined) {
      firstKey = key;
      firstValue = value;
      continue;
    }
    seen ??= new Map([[firstValue, firstKey]]);
    const previous = seen.get(value);
    if (previous !== undefined) {
      issues.error(
        i,
        'invalid_field',
        mapPath(id, field, key),
        input
          ? `input ${quote(value)} is mapped from both ${quote(previous)} and ${quote(key)}`
          : `data key ${quote(value)} is written by both outputs ${quote(previous)} and ${quote(key)}`,
      );
    } else {
      seen.set(value, key);
    }
  }
}
