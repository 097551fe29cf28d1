import { createHash } from 'node:crypto';
import type { TaskRecord } from '../scheduler/model';
import type { CompiledRoute } from './cel';
import {
  countsOf,
  NODE_STATUSES,
  type NodeCounts,
  type NodeRecord,
  type NodeStatus,
  type WorkflowDefinition,
  type WorkflowNodeDefinition,
  type WorkflowRecord,
  type WorkflowState,
} from './model';
import { PathError, getPath, isPlainObject, writePath } from './paths';
import { parseBoundedJson } from '../json';
import { DEFAULT_MAX_ITERATIONS } from './validate';

/**
 * The pure state of the workflow engine: a running workflow's record with its indexes (LiveWorkflow), and the
 * transitions of its nodes and of the workflow as plain-data functions. No store, no timers, no emitters, no log: the
 * operation parts (control.ts, completion.ts, failure.ts, progress.ts, dispatch.ts…) write the rows and events and
 * call these to change the memory they stand for. Unit-tested without a store (test/unit/workflowState.test.ts).
 */

/** workflow_data (StartWorkflow, ResumeWorkflow, after each node's outputs): at most this many bytes of JSON. */
export const MAX_WORKFLOW_DATA_BYTES = 1024 * 1024;
/** How often a rule or a fallback (not a person) may approve a retry of one node, between resumes. */
export const MAX_AUTOMATIC_RETRIES = 3;
/** The wait before automatic retry `n` (1-based): 1 s, doubled each time, at most a minute. */
export function automaticRetryDelay(n: number): number {
  return Math.min(1_000 * 2 ** Math.max(0, n - 1), 60_000);
}
/** The scheduler's longest task id: longer `wf:<workflow_id>:<node_id>:<run>` ids use a digest (taskIdOf). */
const MAX_TASK_ID = 128;
export const TYPE_TARGET = 'type:';
export const ACTIVE: ReadonlySet<WorkflowState> = new Set(['RUNNING', 'WAITING']);
export const ENDED: ReadonlySet<WorkflowState> = new Set(['COMPLETED', 'FAILED', 'CANCELLED']);

/** A workflow the engine runs (RUNNING or WAITING): its record, its compiled definition, and indexes kept in step. */
export interface LiveWorkflow {
  readonly record: WorkflowRecord;
  readonly defs: ReadonlyMap<string, WorkflowNodeDefinition>;
  readonly dependents: ReadonlyMap<string, readonly string[]>;
  readonly routes: ReadonlyMap<string, CompiledRoute>;
  /** The agent ids its nodes name (`type:` targets name none): who may read it and send its events. */
  readonly agents: ReadonlySet<string>;
  /** workflow_data, written in place (writePath: values cloned first), never copied whole. */
  readonly data: Record<string, unknown>;
  /** Its JSON size in bytes, kept up to date by each write (an upper bound by a byte per object a write created; exact after a snapshot). */
  dataBytes: number;
  /** The last workflow_data row written (the snapshot or a write), and the characters written since the snapshot. */
  dataSeq: number;
  dataLogChars: number;
  readonly counts: NodeCounts;
  /** FAILED nodes nobody is asked about: the workflow ends FAILED once nothing runs (and starts nothing new meanwhile). */
  readonly failed: Set<string>;
  /** FAILED nodes with a pending HITL invocation. */
  readonly asking: Set<string>;
  /** READY MANUAL nodes waiting for Run Node. */
  readonly manual: Set<string>;
  /** READY EVENT nodes waiting for their event, by event name. */
  readonly events: Map<string, Set<string>>;
  /** READY nodes with a time to run (fireAt): SCHEDULE nodes, EVENT nodes whose event came. */
  readonly due: Set<string>;
  /**
   * READY nodes whose task the scheduler refused for now: node → the agent it waits for to register, or '' for room in
   * the scheduler's queue (kept in step with StartIndexes' queueBlocked / agentBlocked by block and unblock).
   */
  readonly blocked: Map<string, string>;
  /** READY nodes not started because a node FAILED for good: queued again once no node is failed (a resume). */
  readonly held: Set<string>;
  /**
   * Per node, how many of its dependencies are not COMPLETED (`openDeps`) and how many of those are SKIPPED or FAILED
   * for good (`badDeps`), kept in step by reindex from each node's class (`depClass`): a dependency's end touches its
   * dependents' counts, never their other dependencies.
   */
  readonly openDeps: Map<string, number>;
  readonly badDeps: Map<string, number>;
  readonly depClass: Map<string, DepClass>;
  /** The workflow row must be written (state, reason, a node's status: its counts and updated_at changed). */
  dirty: boolean;
}

/** What a node is to its dependents: not done yet, COMPLETED, or SKIPPED / FAILED for good (they are SKIPPED). */
export type DepClass = 'open' | 'done' | 'bad';

export function depClassOf(node: NodeRecord): DepClass {
  if (node.status === 'COMPLETED') return 'done';
  return node.status === 'SKIPPED' || (node.status === 'FAILED' && !node.invocationId) ? 'bad' : 'open';
}

/** A new workflow's nodes: every one PENDING, nothing run. */
export function pendingNode(nodeId: string): NodeRecord {
  return {
    nodeId,
    status: 'PENDING',
    startedAt: null,
    completedAt: null,
    output: '',
    error: '',
    waiting: '',
    taskId: '',
    runs: 0,
    readyAt: null,
    fireAt: null,
    loops: 0,
    invocationId: '',
    retries: 0,
    inputs: '',
  };
}

/**
 * A workflow made live from its record: `data` replaces its stored data (StartWorkflow), `dataLog` is where its stored
 * writes stand (the last seq and the characters since the snapshot). Every index worked out from the node records.
 */
export function buildLive(
  record: WorkflowRecord,
  dependents: ReadonlyMap<string, readonly string[]>,
  routes: ReadonlyMap<string, CompiledRoute>,
  dataLog: { readonly seq: number; readonly chars: number },
  data?: Record<string, unknown>,
): LiveWorkflow {
  const live: LiveWorkflow = {
    record,
    defs: new Map(record.definition.nodes.map((n) => [n.nodeId, n])),
    dependents,
    routes,
    agents: agentsOf(record.definition),
    data: data ?? (JSON.parse(record.data) as Record<string, unknown>),
    dataBytes: Buffer.byteLength(record.data),
    dataSeq: dataLog.seq,
    dataLogChars: dataLog.chars,
    counts: countsOf([]),
    failed: new Set(),
    asking: new Set(),
    manual: new Set(),
    events: new Map(),
    due: new Set(),
    blocked: new Map(),
    held: new Set(),
    openDeps: new Map(),
    badDeps: new Map(),
    depClass: new Map(),
    dirty: false,
  };
  reindexAll(live, () => undefined);
  return live;
}

export function nodeOf(live: LiveWorkflow, nodeId: string): NodeRecord {
  return live.record.nodes.get(nodeId)!;
}

/**
 * Every live index and count worked out again from the node records: O(V + E), at load. `unblock(nodeId)`: a node that
 * is not READY leaves the blocked index (the engine's own indexes follow).
 */
export function reindexAll(live: LiveWorkflow, unblock: (nodeId: string) => void): void {
  for (const status of NODE_STATUSES) live.counts[status] = 0;
  for (const node of live.record.nodes.values()) live.counts[node.status]++;
  for (const set of [live.failed, live.asking, live.manual, live.due, live.held]) set.clear();
  live.events.clear();
  live.depClass.clear();
  live.badDeps.clear();
  live.openDeps.clear();
  for (const def of live.record.definition.nodes)
    if (def.dependencies.length > 0) live.openDeps.set(def.nodeId, def.dependencies.length);
  for (const node of live.record.nodes.values()) reindex(live, node, unblock);
}

/**
 * Keeps the live indexes (failed, asking, manual, events, due, dependency counts) in step with one node; a node that
 * is not READY is unblocked (`unblock`) and no longer held.
 */
export function reindex(live: LiveWorkflow, node: NodeRecord, unblock: (nodeId: string) => void): void {
  const id = node.nodeId;
  const def = live.defs.get(id)!;
  const cls = depClassOf(node);
  const was = live.depClass.get(id) ?? 'open';
  if (cls !== was) {
    if (cls === 'open') live.depClass.delete(id);
    else live.depClass.set(id, cls);
    const open = (was === 'done' ? 1 : 0) - (cls === 'done' ? 1 : 0);
    const bad = (cls === 'bad' ? 1 : 0) - (was === 'bad' ? 1 : 0);
    for (const d of live.dependents.get(id) ?? []) {
      if (open !== 0) live.openDeps.set(d, (live.openDeps.get(d) ?? 0) + open);
      if (bad !== 0) live.badDeps.set(d, (live.badDeps.get(d) ?? 0) + bad);
    }
  }
  live.failed.delete(id);
  live.asking.delete(id);
  live.manual.delete(id);
  live.due.delete(id);
  const event = def.metadata.event ?? '';
  live.events.get(event)?.delete(id);
  if (node.status === 'FAILED') (node.invocationId ? live.asking : live.failed).add(id);
  if (node.status !== 'READY') {
    unblock(id);
    live.held.delete(id);
    return;
  }
  if (node.fireAt !== null) live.due.add(id);
  else if (def.trigger === 'MANUAL') live.manual.add(id);
  else if (def.trigger === 'EVENT') {
    let set = live.events.get(event);
    if (!set) live.events.set(event, (set = new Set()));
    set.add(id);
  }
}

/** One node transition in memory: the counts, the status, the indexes; the workflow row is due (dirty). */
export function moveNode(
  live: LiveWorkflow,
  node: NodeRecord,
  to: NodeStatus,
  now: number,
  unblock: (nodeId: string) => void,
): NodeStatus {
  const from = node.status;
  live.counts[from]--;
  live.counts[to]++;
  node.status = to;
  reindex(live, node, unblock);
  live.record.updatedAt = now;
  // The stored counts and updated_at (what the list reads) follow: one small row, written once per transaction (persist).
  live.dirty = true;
  return from;
}

/** The workflow's own transition in memory: its state and reason; the workflow row is due (dirty). */
export function moveWorkflow(live: LiveWorkflow, to: WorkflowState, reason: string, now: number): WorkflowState {
  const record = live.record;
  const from = record.state;
  record.state = to;
  record.reason = reason;
  record.updatedAt = now;
  live.dirty = true;
  return from;
}

/** A PENDING node's next step from its dependency counts: SKIPPED (one is SKIPPED / FAILED for good), READY (all COMPLETED), or none yet. */
export function nextForPending(
  live: LiveWorkflow,
  nodeId: string,
): { readonly skip: string } | { readonly ready: string } | undefined {
  const def = live.defs.get(nodeId)!;
  if ((live.badDeps.get(nodeId) ?? 0) > 0) {
    // Read the dependencies only to name the one that makes it SKIPPED (once per node).
    const dep = def.dependencies.find((d) => depClassOf(nodeOf(live, d)) === 'bad') ?? def.dependencies[0];
    return { skip: `dependency '${dep}' ${nodeOf(live, dep).status}` };
  }
  if ((live.openDeps.get(nodeId) ?? 0) === 0)
    return {
      ready: def.dependencies.length
        ? `dependencies COMPLETED: ${def.dependencies.join(', ').slice(0, 512)}`
        : 'a root: no dependencies',
    };
  return undefined;
}

/**
 * The workflow's state from its nodes: FAILED once a node failed for good and nothing runs; COMPLETED when every node
 * is COMPLETED or SKIPPED; WAITING while a person is asked (a FAILED node's question, a READY MANUAL node); RUNNING
 * otherwise. The reason says what it waits for (`waitingFor`: the words for nodes that wait on time, events, agents).
 */
export function settledState(
  live: LiveWorkflow,
  waitingFor: (live: LiveWorkflow) => string,
): { readonly to: WorkflowState; readonly reason: string } {
  const record = live.record;
  const c = live.counts;
  let to: WorkflowState;
  let reason: string;
  if (live.failed.size > 0) {
    const first = live.failed.values().next().value as string;
    const error = nodeOf(live, first).error;
    if (c.RUNNING === 0) {
      to = 'FAILED';
      reason = `node ${first} FAILED: ${error}`;
    } else {
      to = record.state;
      reason = `node ${first} FAILED: ${error}; ${c.RUNNING} running node(s) finish first, then the workflow ends FAILED`;
    }
  } else if (c.COMPLETED + c.SKIPPED === record.nodes.size) {
    to = 'COMPLETED';
    reason = '';
  } else if (live.asking.size > 0 || live.manual.size > 0) {
    to = 'WAITING';
    const asks = firstOf(live.asking, 5).map(
      (id) => `decide on FAILED node ${id} (approve = retry, modify = skip with an output, deny = fail)`,
    );
    const manual = firstOf(live.manual, 5).map((id) => `Run Node ${id}`);
    reason = `waiting for a person: ${[...asks, ...manual].join('; ')}`;
  } else {
    to = 'RUNNING';
    reason = c.RUNNING > 0 ? '' : waitingFor(live);
  }
  return { to, reason: reason.slice(0, 4096) };
}

/** A node back to PENDING's fields (its task, timer and question let go by the caller); `resetLoops` for a resume. */
export function clearRun(node: NodeRecord, resetLoops: boolean): void {
  node.invocationId = '';
  node.readyAt = null;
  node.fireAt = null;
  node.error = '';
  node.startedAt = null;
  node.completedAt = null;
  node.taskId = '';
  node.inputs = '';
  node.waiting = '';
  if (resetLoops) {
    node.loops = 0;
    node.retries = 0;
  }
}

/** The node and every node downstream of it by dependencies (each once, the given ones first). */
export function downstream(live: LiveWorkflow, from: readonly string[]): string[] {
  const seen = new Set<string>(from);
  const order = [...from];
  for (let i = 0; i < order.length; i++) {
    for (const d of live.dependents.get(order[i]) ?? []) {
      if (!seen.has(d)) {
        seen.add(d);
        order.push(d);
      }
    }
  }
  return order;
}

// ---------------------------------------------------------------- workflow_data

/** Writes made into workflow_data in place, not stored yet: their paths and values, their size, how to undo them. */
export interface DataWrites {
  readonly writes: ReadonlyArray<readonly [readonly string[], unknown]>;
  readonly bytes: number;
  readonly undo: () => void;
}

/**
 * Writes into workflow_data in place (each value cloned), all or none: a path through a value that is not an object,
 * or workflow_data beyond MAX_WORKFLOW_DATA_BYTES (counted from each write's size, never by serialising it all),
 * undoes the writes before it. The caller stores them (commitWrites) or undoes them (a later refusal).
 */
export function applyWrites(
  live: LiveWorkflow,
  writes: ReadonlyArray<readonly [string | readonly string[], unknown]>,
): DataWrites | { readonly error: string; readonly kind: 'path' | 'size' } {
  const undos: Array<() => void> = [];
  const undo = () => {
    for (let i = undos.length - 1; i >= 0; i--) undos[i]();
  };
  const done: Array<[readonly string[], unknown]> = [];
  let bytes = 0;
  try {
    for (const [path, value] of writes) {
      const copy = structuredClone(value);
      const write = writePath(live.data, path, copy);
      undos.push(write.undo);
      bytes += write.bytes;
      done.push([typeof path === 'string' ? path.split('.') : path, copy]);
    }
  } catch (err) {
    undo();
    if (err instanceof PathError) return { error: err.message, kind: 'path' };
    throw err;
  }
  if (live.dataBytes + bytes > MAX_WORKFLOW_DATA_BYTES) {
    undo();
    return {
      error: `workflow_data would be ${live.dataBytes + bytes} bytes; at most ${MAX_WORKFLOW_DATA_BYTES}`,
      kind: 'size',
    };
  }
  return { writes: done, bytes, undo };
}

// ---------------------------------------------------------------- the definition, read

/** A definition in a canonical form (nodes by id, map keys sorted): two definitions are the same workflow when equal. */
export function canonical(definition: WorkflowDefinition): string {
  const sorted = (o: Readonly<Record<string, string>>) =>
    Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const nodes = [...definition.nodes]
    .sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0))
    .map((n) => ({
      nodeId: n.nodeId,
      agentId: n.agentId,
      dependencies: [...n.dependencies].sort(),
      trigger: n.trigger,
      inputMapping: sorted(n.inputMapping),
      outputMapping: sorted(n.outputMapping),
      metadata: sorted(n.metadata),
    }));
  return JSON.stringify({ workflowId: definition.workflowId, nodes, metadata: sorted(definition.metadata) });
}

/** The agent ids a definition's nodes name (`type:<agent type>` targets name no agent). */
export function agentsOf(definition: WorkflowDefinition): Set<string> {
  const agents = new Set<string>();
  for (const n of definition.nodes) if (!n.agentId.startsWith(TYPE_TARGET)) agents.add(n.agentId);
  return agents;
}

/** A node's `event_from`: the agents that may send its event, or undefined when it has none. */
export function eventFrom(def: WorkflowNodeDefinition): string[] | undefined {
  const raw = def.metadata.event_from;
  if (raw === undefined) return undefined;
  return raw
    .split(',')
    .map((id) => id.trim())
    .filter((id) => id !== '');
}

export function maxIterations(def: WorkflowNodeDefinition): number {
  const raw = def.metadata.max_iterations;
  const n = raw === undefined ? NaN : Number(raw);
  return Number.isInteger(n) && n >= 0 ? n : DEFAULT_MAX_ITERATIONS;
}

export function priorityOf(def: WorkflowNodeDefinition): number {
  const n = Number(def.metadata.priority ?? 0);
  return Number.isInteger(n) ? n : 0;
}

export function asksPerson(def: WorkflowNodeDefinition): boolean {
  return def.metadata.on_failure === 'hitl';
}

/**
 * The scheduler task of a node's run: `wf:<workflow_id>:<node_id>:<run>`, or, when that is longer than a task id may be
 * (128 characters), `wf:<the first 40 hex digits of SHA-256(workflow_id NUL node_id)>:<run>` (its params name both).
 */
export function taskIdOf(workflowId: string, nodeId: string, run: number): string {
  const plain = `wf:${workflowId}:${nodeId}:${run}`;
  if (plain.length <= MAX_TASK_ID) return plain;
  return `wf:${createHash('sha256').update(`${workflowId}\u0000${nodeId}`, 'utf8').digest('hex').slice(0, 40)}:${run}`;
}

/**
 * A node's output: the FULFILLED ACK's `result` (a JSON object as is; any other JSON value as {"result": value}), else
 * the note parsed as JSON when it is a JSON object, else {"note": note}.
 */
export function outputOf(
  task: Pick<TaskRecord, 'result' | 'note'>,
): { readonly output: Record<string, unknown> } | { readonly error: string } {
  if (task.result !== '') {
    const parsed = parseBoundedJson(task.result, { what: 'the ACK result' });
    if (!parsed.ok) return { error: `the output is not JSON: ${parsed.reason}` };
    return { output: isPlainObject(parsed.value) ? parsed.value : { result: parsed.value } };
  }
  if (task.note.trim().startsWith('{')) {
    const parsed = parseBoundedJson(task.note, { what: 'the ACK note' });
    if (parsed.ok && isPlainObject(parsed.value)) return { output: parsed.value };
  }
  return { output: { note: task.note } };
}

/** A workflow's inputs for one node: by input_mapping (data path → input name), or the whole workflow_data without one. */
export function inputsOf(
  def: WorkflowNodeDefinition,
  data: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const entries = Object.entries(def.inputMapping);
  if (entries.length === 0) return { ...data };
  const inputs: Record<string, unknown> = {};
  for (const [path, name] of entries) {
    const value = getPath(data, path);
    if (value !== undefined)
      Object.defineProperty(inputs, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return inputs;
}

/** The first `max` values of a collection, without copying it. */
export function firstOf<T>(values: Iterable<T>, max: number): T[] {
  const out: T[] = [];
  if (max <= 0) return out;
  for (const v of values) {
    out.push(v);
    if (out.length >= max) break;
  }
  return out;
}

/** A node's key in the engine's indexes: workflow id NUL node id. */
export function nodeKey(workflowId: string, nodeId: string): string {
  return `${workflowId}\u0000${nodeId}`;
}

export function unkey(k: string): [string, string] {
  const i = k.indexOf('\u0000');
  return [k.slice(0, i), k.slice(i + 1)];
}
