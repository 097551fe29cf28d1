import { createHash } from 'node:crypto';
import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { HitlService } from '../hitl/hitlService';
import type { HitlInvocation } from '../hitl/model';
import { HitlRequestError, parseInvocationRequest } from '../hitl/request';
import type { IdSource } from '../ids';
import { parseBoundedJson } from '../json';
import type { EventLog } from '../log/eventLog';
import type { AgentDirectory, RegistryChange } from '../registry/model';
import { COORDINATOR_SPEAKER, type Speaker } from '../policy/speaker';
import type { Refusal } from '../router/envelope';
import { TERMINAL_TASK_STATES, type TaskRecord, type TaskRunner } from '../scheduler/model';
import { describeWaiting } from '../scheduler/scheduler';
import type { CompiledRoute } from './cel';
import { nextFireAfter } from './cron';
import { EVENT_DATA_KEY, type WorkflowEventInput, type WorkflowEventSink } from './eventTrigger';
import {
  countsOf, NODE_STATUSES,
  type NodeCounts, type NodeRecord, type NodeStatus, type ValidationIssue, type WorkflowDefinition, type WorkflowDetail, type WorkflowNodeDefinition,
  type WorkflowNodeDetail, type WorkflowNodeView, type WorkflowQueries, type WorkflowRecord, type WorkflowsChange, type WorkflowState, type WorkflowStorage, type WorkflowSummary,
} from './model';
import { PathError, getPath, isPlainObject, writePath } from './paths';
import { DEFAULT_MAX_ITERATIONS, validateDefinition } from './validate';

export interface WorkflowDeps {
  readonly store: WorkflowStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  /** The scheduler: a node runs as one of its tasks. */
  readonly tasks: TaskRunner;
  /** Who is registered: a node whose agent is not yet registered starts when it registers. */
  readonly agents: AgentDirectory;
  /** A FAILED node with `on_failure: hitl` asks a person. */
  readonly hitl: HitlService;
}

/**
 * Why a workflow operation was refused: `not_found` (no such workflow or node), `invalid` (the request itself: bad
 * JSON data, a definition that does not validate), `exists` (another definition has that workflow_id), `refused` (the
 * workflow's state does not allow it now; the message says what would), `permission` (the caller may not: README,
 * "Workflows: who may call"). `code` is the SW4RM-style code.
 */
export class WorkflowError extends Error {
  constructor(readonly kind: 'not_found' | 'invalid' | 'exists' | 'refused' | 'permission', readonly code: string, message: string) {
    super(message);
    this.name = 'WorkflowError';
  }
}

/** CreateWorkflow's answer: created (or the same definition again: `created` false), or refused with every issue. */
export type CreateResult =
  | { readonly ok: true; readonly workflowId: string; readonly created: boolean; readonly warnings: readonly ValidationIssue[] }
  | { readonly ok: false; readonly issues: readonly ValidationIssue[] };

/** workflow_data (StartWorkflow, ResumeWorkflow, after each node's outputs): at most this many bytes of JSON. */
export const MAX_WORKFLOW_DATA_BYTES = 1024 * 1024;
/** The most nodes start / runNode / resume / cancel answer (those not PENDING, in the author's order). */
export const ANSWER_NODES = 1_000;
/** A node's inputs are kept with it (Show Node Inputs and Outputs) up to this many characters of JSON; beyond, a note. */
export const MAX_KEPT_INPUTS = 64 * 1024;
/** Workflows that do not run kept after a read (the view reads an expanded one at every refresh). */
const RECENTLY_READ = 4;
/** A new workflow_data snapshot is stored once the writes since the last one hold more characters than it (at least this many). */
const DATA_SNAPSHOT_MIN_CHARS = 64 * 1024;
/** The scheduler's longest task id: longer `wf:<workflow_id>:<node_id>:<run>` ids use a digest (taskIdOf). */
const MAX_TASK_ID = 128;
/** The component name of the engine's HITL invocations (origin `internal`). */
export const WORKFLOW_COMPONENT = 'workflow';
/** What a person may answer about a FAILED node with `on_failure: hitl`, and what each does. */
export const WORKFLOW_HITL_ACTIONS = {
  approve: 'retry: the node runs again (a new run, a new task): at once when a person approves; after 1 s, 2 s, 4 s… and at most 3 times between resumes when a rule or a fallback approves',
  modify: 'skip it with an output: the node is not run again and counts as COMPLETED with the edited payload as its output (a JSON object); its output_mapping and route apply',
  deny: 'fail: the node stays FAILED, its dependents are SKIPPED and the workflow ends FAILED once nothing runs',
} as const;
/** How often a rule or a fallback (not a person) may approve a retry of one node, between resumes. */
export const MAX_AUTOMATIC_RETRIES = 3;
/** The wait before automatic retry `n` (1-based): 1 s, doubled each time, at most a minute. */
export function automaticRetryDelay(n: number): number {
  return Math.min(1_000 * 2 ** Math.max(0, n - 1), 60_000);
}
const ACTOR = 'workflow';
const TYPE_TARGET = 'type:';
/** The principal name of an agent credential: `agent:<id>` (src/core/credentials). */
const AGENT_PRINCIPAL = 'agent:';
const DEFAULT_LIST = 100;
const MAX_LIST = 1_000;
const ACTIVE: ReadonlySet<WorkflowState> = new Set(['RUNNING', 'WAITING']);
const ENDED: ReadonlySet<WorkflowState> = new Set(['COMPLETED', 'FAILED', 'CANCELLED']);

/** A workflow the engine runs (RUNNING or WAITING): its record, its compiled definition, and indexes kept in step. */
interface Live {
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
   * the scheduler's queue (kept in step with Workflows.queueBlocked / agentBlocked by block and unblock).
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

function emptyLiveSets(): Pick<Live, 'failed' | 'asking' | 'manual' | 'events' | 'due' | 'blocked' | 'held' | 'openDeps' | 'badDeps' | 'depClass'> {
  return {
    failed: new Set(), asking: new Set(), manual: new Set(), events: new Map(), due: new Set(), blocked: new Map(), held: new Set(),
    openDeps: new Map(), badDeps: new Map(), depClass: new Map(),
  };
}

/** What a node is to its dependents: not done yet, COMPLETED, or SKIPPED / FAILED for good (they are SKIPPED). */
type DepClass = 'open' | 'done' | 'bad';

function depClassOf(node: NodeRecord): DepClass {
  if (node.status === 'COMPLETED') return 'done';
  return node.status === 'SKIPPED' || (node.status === 'FAILED' && !node.invocationId) ? 'bad' : 'open';
}

/** Writes made into workflow_data in place, not stored yet: their paths and values, their size, how to undo them. */
interface DataWrites {
  readonly writes: ReadonlyArray<readonly [readonly string[], unknown]>;
  readonly bytes: number;
  readonly undo: () => void;
}

/** Submit refusals that are not the node's fault and pass: the node waits READY and is submitted again. */
const TEMPORARY_REFUSALS: ReadonlySet<string> = new Set(['NO_ROUTE', 'AGENT_SHUTDOWN', 'BUFFER_FULL']);

/** The first `max` values of a collection, without copying it. */
function firstOf<T>(values: Iterable<T>, max: number): T[] {
  const out: T[] = [];
  if (max <= 0) return out;
  for (const v of values) {
    out.push(v);
    if (out.length >= max) break;
  }
  return out;
}

function key(workflowId: string, nodeId: string): string {
  return `${workflowId}\u0000${nodeId}`;
}

function unkey(k: string): [string, string] {
  const i = k.indexOf('\u0000');
  return [k.slice(0, i), k.slice(i + 1)];
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

/** A definition in a canonical form (nodes by id, map keys sorted): two definitions are the same workflow when equal. */
function canonical(definition: WorkflowDefinition): string {
  const sorted = (o: Readonly<Record<string, string>>) => Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const nodes = [...definition.nodes].sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0)).map((n) => ({
    nodeId: n.nodeId, agentId: n.agentId, dependencies: [...n.dependencies].sort(), trigger: n.trigger,
    inputMapping: sorted(n.inputMapping), outputMapping: sorted(n.outputMapping), metadata: sorted(n.metadata),
  }));
  return JSON.stringify({ workflowId: definition.workflowId, nodes, metadata: sorted(definition.metadata) });
}

/** A JSON object from an agent or a person (StartWorkflow, ResumeWorkflow): '' is none. */
function readData(text: string, what: string): Record<string, unknown> | undefined {
  if (text.trim() === '') return undefined;
  const parsed = parseBoundedJson(text, { what, maxBytes: MAX_WORKFLOW_DATA_BYTES });
  if (!parsed.ok) throw new WorkflowError('invalid', parsed.limit === 'size' ? 'OVERSIZE_PAYLOAD' : 'VALIDATION_ERROR', parsed.reason);
  if (!isPlainObject(parsed.value)) throw new WorkflowError('invalid', 'VALIDATION_ERROR', `${what} must be a JSON object (its top-level keys are the workflow's data), not ${Array.isArray(parsed.value) ? 'a list' : typeof parsed.value}`);
  return parsed.value;
}

/** The agent ids a definition's nodes name (`type:<agent type>` targets name no agent). */
function agentsOf(definition: WorkflowDefinition): Set<string> {
  const agents = new Set<string>();
  for (const n of definition.nodes) if (!n.agentId.startsWith(TYPE_TARGET)) agents.add(n.agentId);
  return agents;
}

/** A node's `event_from`: the agents that may send its event, or undefined when it has none. */
function eventFrom(def: WorkflowNodeDefinition): string[] | undefined {
  const raw = def.metadata.event_from;
  if (raw === undefined) return undefined;
  return raw.split(',').map((id) => id.trim()).filter((id) => id !== '');
}

function maxIterations(def: WorkflowNodeDefinition): number {
  const raw = def.metadata.max_iterations;
  const n = raw === undefined ? NaN : Number(raw);
  return Number.isInteger(n) && n >= 0 ? n : DEFAULT_MAX_ITERATIONS;
}

function priorityOf(def: WorkflowNodeDefinition): number {
  const n = Number(def.metadata.priority ?? 0);
  return Number.isInteger(n) ? n : 0;
}

function asksPerson(def: WorkflowNodeDefinition): boolean {
  return def.metadata.on_failure === 'hitl';
}

/**
 * A node's output: the FULFILLED ACK's `result` (a JSON object as is; any other JSON value as {"result": value}), else
 * the note parsed as JSON when it is a JSON object, else {"note": note}.
 */
export function outputOf(task: Pick<TaskRecord, 'result' | 'note'>): { readonly output: Record<string, unknown> } | { readonly error: string } {
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
export function inputsOf(def: WorkflowNodeDefinition, data: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const entries = Object.entries(def.inputMapping);
  if (entries.length === 0) return { ...data };
  const inputs: Record<string, unknown> = {};
  for (const [path, name] of entries) {
    const value = getPath(data, path);
    if (value !== undefined) Object.defineProperty(inputs, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return inputs;
}

/**
 * The workflow engine (RFC §17.7; README, "Workflows"): CreateWorkflow (validated first, O(V+E)), StartWorkflow,
 * GetWorkflowState, ResumeWorkflow, Run Node (MANUAL), Cancel. A node runs when every dependency is COMPLETED, as a
 * scheduler task for its agent (`wf:<workflow_id>:<node_id>:<run>`, submitted in the transaction that marks it RUNNING);
 * its output (the FULFILLED ACK's `result`) is written to workflow_data by output_mapping, then its `route` decides the
 * conditional edges. The engine learns of a task's end inside the scheduler's transaction that ends it, so a node's
 * COMPLETED and its task's COMPLETED commit together; after a restart it reads every running workflow back, reconciles
 * RUNNING nodes with their tasks, re-arms timers and watches the HITL invocations it asked.
 *
 * Every node transition is one `workflow.node` event (from, to, reason) and every workflow transition one
 * `workflow.state` event, correlation_id = workflow_id, in the transaction of the change; a node transition writes one
 * node row.
 */
export class Workflows implements WorkflowQueries, WorkflowEventSink, Disposable {
  private readonly changed = new Emitter<WorkflowsChange>();
  readonly onDidChange: Event<WorkflowsChange> = this.changed.event;
  private readonly live = new Map<string, Live>();
  /** Open tasks of RUNNING nodes: task id → node key. */
  private readonly byTask = new Map<string, string>();
  /** Timers of READY nodes with a fireAt, by node key. */
  private readonly timers = new Map<string, Disposable>();
  /** READY nodes to submit (DEPENDENCY nodes, fired timers, events, retries), by node key, in order. */
  private readonly toStart = new Set<string>();
  /** HITL invocations being watched. */
  private readonly watched = new Set<string>();
  /** READY nodes the scheduler refused BUFFER_FULL, by node key, first refused first: tried again as slots free. */
  private readonly queueBlocked = new Set<string>();
  /** READY nodes the scheduler refused NO_ROUTE / AGENT_SHUTDOWN, by the agent they wait for: tried again when it registers. */
  private readonly agentBlocked = new Map<string, Set<string>>();
  /** Tasks that ended since the last drain while nodes waited for room: how many queue-blocked nodes to try. */
  private freed = 0;
  /** Workflows that do not run, as last read from the store (storedRecord), least recently read first. */
  private readonly recentlyRead = new Map<string, WorkflowRecord>();
  private readonly subscriptions: Disposable[] = [];
  private readonly pendingChanges: WorkflowsChange[] = [];
  private drainQueued = false;
  private draining = false;
  private disposed = false;

  constructor(private readonly deps: WorkflowDeps) {
    this.subscriptions.push(
      deps.tasks.onDidEndTask((task) => this.taskEnded(task)),
      deps.agents.onDidChange((change) => this.agentChanged(change)),
    );
  }

  // ---------------------------------------------------------------- CreateWorkflow

  /**
   * Validates and stores a definition (DEFINED). An empty workflow_id gets a uuid. The same workflow_id again is
   * answered as created when the definition is the same (`created` false: a retry), refused ALREADY_EXISTS otherwise.
   * `speaker`: who asks (omitted: the editor or the coordinator itself, which may do everything). An agent credential may create a workflow only when it
   * may act as every node's agent (as SubmitTask lets it submit only for agents it may act as); a `type:` target is
   * the operator's alone. Refused PERMISSION_DENIED (WorkflowError `permission`) otherwise.
   */
  create(input: WorkflowDefinition, by: string, ctx: CallContext, speaker: Speaker = COORDINATOR_SPEAKER): CreateResult {
    const definition: WorkflowDefinition = input.workflowId === '' ? { ...input, workflowId: this.deps.ids.uuid() } : input;
    const validated = validateDefinition(definition);
    const warnings = validated.issues.filter((i) => i.severity === 'warning');
    if (!validated.ok) {
      const errors = validated.issues.filter((i) => i.severity === 'error');
      this.deps.log.record({
        correlationId: definition.workflowId || ctx.correlationId, actor: by, eventType: 'workflow.create_refused', level: 'WARN',
        details: { workflow_id: definition.workflowId.slice(0, 256), nodes: definition.nodes.length, codes: [...new Set(errors.map((e) => e.code))], first: errors[0]?.message.slice(0, 512) },
      });
      return { ok: false, issues: validated.issues };
    }
    if (speaker.kind === 'agent') {
      for (const n of definition.nodes) {
        if (n.agentId.startsWith(TYPE_TARGET)) {
          this.deny('create', definition.workflowId, by, `node ${n.nodeId} goes to ${n.agentId} (any agent of a type): only the operator may create a workflow with such a node`);
        }
        if (!speaker.mayActAs(n.agentId)) {
          this.deny('create', definition.workflowId, by, `${speaker.label} may not act as agent '${n.agentId}' (node ${n.nodeId}): an agent credential may create a `
            + 'workflow only for agents it may act as (as SubmitTask lets it submit only for them)');
        }
      }
    }
    const existing = this.live.get(definition.workflowId)?.record ?? this.deps.store.workflows.get(definition.workflowId);
    if (existing) {
      if (canonical(existing.definition) === canonical(definition)) return { ok: true, workflowId: existing.workflowId, created: false, warnings: existing.warnings };
      throw new WorkflowError('exists', 'ALREADY_EXISTS', `workflow '${definition.workflowId}' exists with another definition: choose another workflow_id (or leave it empty for a new one)`);
    }
    const now = this.deps.clock.now();
    const nodes = new Map<string, NodeRecord>();
    for (const n of definition.nodes) {
      nodes.set(n.nodeId, {
        nodeId: n.nodeId, status: 'PENDING', startedAt: null, completedAt: null, output: '', error: '', waiting: '',
        taskId: '', runs: 0, readyAt: null, fireAt: null, loops: 0, invocationId: '', retries: 0, inputs: '',
      });
    }
    const record: WorkflowRecord = {
      workflowId: definition.workflowId, definition, warnings, state: 'DEFINED', data: '{}', nodes, createdAt: now, createdBy: by,
      startedAt: null, completedAt: null, startedBy: '', reason: '', updatedAt: now,
    };
    this.deps.store.transaction(() => {
      this.deps.store.workflows.create(record);
      this.deps.log.record({
        correlationId: record.workflowId, actor: by, eventType: 'workflow.state',
        details: { workflow_id: record.workflowId, from: '', to: 'DEFINED', reason: 'created', nodes: nodes.size, warnings: warnings.length },
      });
    });
    this.notify({ workflowId: record.workflowId, state: 'DEFINED' });
    return { ok: true, workflowId: record.workflowId, created: true, warnings };
  }

  // ---------------------------------------------------------------- StartWorkflow

  /**
   * Starts a DEFINED workflow with initial workflow_data (a JSON object; '' = {}): its roots become READY. Only its
   * creator (or a credential that may act as it) and the operator may (`speaker`; omitted: the editor, allowed).
   */
  start(workflowId: string, dataText: string, by: string, ctx: CallContext, speaker: Speaker = COORDINATOR_SPEAKER): WorkflowDetail {
    const running = this.live.get(workflowId);
    const record = running?.record ?? this.stored(workflowId);
    if (!this.isCreator(record, speaker, by)) this.deny('start', workflowId, by, `only its creator (${record.createdBy}) or the operator may start workflow '${workflowId}'`);
    if (running) {
      throw new WorkflowError('refused', 'FAILED_PRECONDITION', `workflow '${workflowId}' was already started (${running.record.state}): use ResumeWorkflow to run a node again`);
    }
    if (record.state !== 'DEFINED') {
      throw new WorkflowError('refused', 'FAILED_PRECONDITION', `workflow '${workflowId}' was already started (${record.state}): use ResumeWorkflow to run a node again`);
    }
    const data = readData(dataText, 'workflow_data') ?? {};
    const live = this.load(record, data);
    const now = this.deps.clock.now();
    record.startedAt = now;
    record.startedBy = by;
    this.deps.store.transaction(() => {
      this.snapshotData(live);
      this.setWorkflow(live, 'RUNNING', '', by, { data_bytes: live.dataBytes });
      for (const def of record.definition.nodes) if (def.dependencies.length === 0) this.ready(live, def.nodeId, 'a root: no dependencies', by);
      this.settle(live, by);
    });
    this.drain();
    return this.answer(workflowId);
  }

  // ---------------------------------------------------------------- Run Node, Resume, Cancel

  /** Runs a READY MANUAL node now (the editor's Run Node). */
  runNode(workflowId: string, nodeId: string, by: string, ctx: CallContext): WorkflowDetail {
    const live = this.liveOrRefuse(workflowId, 'run a node');
    const def = live.defs.get(nodeId);
    if (!def) throw new WorkflowError('not_found', 'NOT_FOUND', `workflow '${workflowId}' has no node '${nodeId}'`);
    const node = this.node(live, nodeId);
    if (def.trigger !== 'MANUAL') throw new WorkflowError('refused', 'FAILED_PRECONDITION', `node '${nodeId}' is a ${def.trigger} node: it runs by itself, not by Run Node`);
    if (node.status !== 'READY') {
      throw new WorkflowError('refused', 'FAILED_PRECONDITION', `node '${nodeId}' is ${node.status}, not READY${node.waiting ? ` (${node.waiting})` : ''}`);
    }
    if (live.failed.size > 0) throw new WorkflowError('refused', 'FAILED_PRECONDITION', `workflow '${workflowId}' is failing (${live.record.reason}): resume it first`);
    this.startNode(live, nodeId, `Run Node by ${by}`, by, { ...ctx, correlationId: workflowId });
    this.drain();
    return this.answer(workflowId);
  }

  /**
   * ResumeWorkflow: `nodeId` and every node downstream of it (by dependencies) go back to PENDING (their earlier outputs
   * stay in workflow_data until a new run overwrites them), `dataText` (a JSON object, '' = none) is merged over
   * workflow_data by top-level key, and the workflow runs again; `nodeId` itself runs at once when its dependencies are
   * COMPLETED, whatever its trigger. Refused while it or a node downstream of it is RUNNING, when one of its
   * dependencies is SKIPPED or FAILED (resume from that one), and when a node FAILED for good is not downstream of it
   * (the workflow would end FAILED again at once: the message names it). Only its creator (or a credential that may
   * act as it) and the operator may (`speaker`; omitted: the editor, allowed).
   */
  resume(workflowId: string, nodeId: string, dataText: string, by: string, ctx: CallContext, speaker: Speaker = COORDINATOR_SPEAKER): WorkflowDetail {
    const active = this.live.get(workflowId);
    const record = active?.record ?? this.stored(workflowId);
    if (!this.isCreator(record, speaker, by)) this.deny('resume', workflowId, by, `only its creator (${record.createdBy}) or the operator may resume workflow '${workflowId}'`);
    if (record.state === 'DEFINED') throw new WorkflowError('refused', 'FAILED_PRECONDITION', `workflow '${workflowId}' has not started: use StartWorkflow`);
    const def = record.definition.nodes.find((n) => n.nodeId === nodeId);
    if (!def) throw new WorkflowError('not_found', 'NOT_FOUND', `workflow '${workflowId}' has no node '${nodeId}'`);
    const merge = readData(dataText, 'workflow_data');
    const live = active ?? this.load(record);
    const downstream = this.downstream(live, [nodeId]);
    const running = downstream.find((id) => this.node(live, id).status === 'RUNNING');
    if (running !== undefined) {
      throw new WorkflowError('refused', 'FAILED_PRECONDITION', running === nodeId
        ? `node '${nodeId}' is RUNNING: wait for it to end (or cancel its task) before resuming from it`
        : `node '${running}', downstream of '${nodeId}', is RUNNING: wait for it to end before resuming from '${nodeId}'`);
    }
    const blocking = def.dependencies.find((d) => this.node(live, d).status === 'SKIPPED' || this.node(live, d).status === 'FAILED');
    if (blocking !== undefined) {
      throw new WorkflowError('refused', 'FAILED_PRECONDITION', `node '${nodeId}' depends on '${blocking}', which is ${this.node(live, blocking).status}: resume from '${blocking}' (or a node before it)`);
    }
    // A node FAILED for good that this resume would not reset keeps the workflow failing: it would end FAILED again at once.
    const reset = new Set(downstream);
    const stranded = firstOf([...live.failed].filter((id) => !reset.has(id)), 10);
    if (stranded.length > 0) {
      throw new WorkflowError('refused', 'FAILED_PRECONDITION', `resuming from '${nodeId}' would leave FAILED node(s) ${stranded.join(', ')} failed (not downstream of '${nodeId}'), `
        + `and the workflow would end FAILED again: resume from ${stranded[0]} (or from a node upstream of every FAILED node)`);
    }
    // Merged by top-level key, in place (the last check: nothing is refused after this).
    const merged = merge ? this.applyWrites(live, Object.entries(merge).map(([k, v]): [readonly string[], unknown] => [[k], v])) : undefined;
    if (merged && 'error' in merged) {
      throw new WorkflowError('invalid', merged.kind === 'size' ? 'OVERSIZE_PAYLOAD' : 'VALIDATION_ERROR', `${merged.error} with this data`);
    }
    const wasActive = active !== undefined;
    const ctxWf: CallContext = { ...ctx, correlationId: workflowId };
    this.deps.store.transaction(() => {
      const reason = `resumed from ${nodeId} by ${by}`;
      for (const id of downstream) this.reset(live, id, reason, by, true, ctxWf);
      if (merged) this.commitWrites(live, merged);
      if (!wasActive) {
        record.completedAt = null;
        this.setWorkflow(live, 'RUNNING', '', by, { resumed_from: nodeId, merged_keys: merge ? Object.keys(merge).slice(0, 50) : [] });
      } else {
        this.deps.log.record({
          correlationId: workflowId, actor: by, eventType: 'workflow.resumed',
          details: { workflow_id: workflowId, node_id: nodeId, reset: downstream.length, merged_keys: merge ? Object.keys(merge).slice(0, 50) : [] },
        });
      }
      this.kick(live, by);
      // The node resumed from runs now whatever its trigger (a person asked for it), once its dependencies are COMPLETED.
      const node = this.node(live, nodeId);
      if (node.status === 'READY' && live.failed.size === 0) this.queueStart(live, nodeId);
      this.settle(live, by);
    });
    this.drain();
    return this.answer(workflowId);
  }

  /** Cancels a workflow: running tasks cancelled, nodes not finished SKIPPED, pending questions withdrawn, CANCELLED. */
  cancel(workflowId: string, reason: string, by: string, ctx: CallContext): WorkflowDetail {
    const active = this.live.get(workflowId);
    const record = active?.record ?? this.stored(workflowId);
    if (ENDED.has(record.state)) throw new WorkflowError('refused', 'FAILED_PRECONDITION', `workflow '${workflowId}' already ended ${record.state}`);
    const live = active ?? this.load(record);
    const why = `workflow cancelled by ${by}${reason ? `: ${reason}` : ''}`;
    const ctxWf: CallContext = { ...ctx, correlationId: workflowId };
    this.deps.store.transaction(() => {
      const cancelTasks: string[] = [];
      for (const node of record.nodes.values()) {
        const k = key(workflowId, node.nodeId);
        this.clearTimer(k);
        this.toStart.delete(k);
        if (node.invocationId) {
          this.withdraw(node, why, by, ctxWf);
          this.deps.store.workflows.putNode(workflowId, node);
        }
        if (node.status === 'RUNNING') {
          this.byTask.delete(node.taskId);
          cancelTasks.push(node.taskId);
        }
        if (node.status === 'PENDING' || node.status === 'READY' || node.status === 'RUNNING') {
          node.error = why;
          node.waiting = '';
          node.fireAt = null;
          node.completedAt = node.status === 'RUNNING' ? this.deps.clock.now() : node.completedAt;
          this.setStatus(live, node, 'SKIPPED', why, by);
        }
      }
      record.completedAt = this.deps.clock.now();
      this.setWorkflow(live, 'CANCELLED', why, by, {});
      for (const taskId of cancelTasks) {
        try {
          this.deps.tasks.cancel(taskId, why, ctxWf);
        } catch {
          // It ended meanwhile: nothing to cancel.
        }
      }
      this.persist(live);
    });
    this.live.delete(workflowId);
    return this.answer(workflowId);
  }

  // ---------------------------------------------------------------- reads

  list(limit = DEFAULT_LIST): WorkflowSummary[] {
    const n = Math.min(Math.max(1, Math.floor(limit) || DEFAULT_LIST), MAX_LIST);
    return this.deps.store.workflows.listRecent(n).map((s) => {
      const live = this.live.get(s.workflowId);
      return live ? this.summaryOf(live.record, live.counts) : s;
    });
  }

  /**
   * A workflow's definition, data and its nodes' states, the first `maxNodes` in the author's order (all when omitted),
   * without any node's inputs: O(maxNodes) for a running workflow, whatever its size (the Workflows view asks for 500).
   */
  detail(workflowId: string, maxNodes?: number): WorkflowDetail | undefined {
    return this.detailOf(workflowId, maxNodes === undefined ? Infinity : Math.max(0, Math.floor(maxNodes)), false);
  }

  /**
   * GetWorkflowState: every node (the server bounds what it sends). Only its creator, an agent one of its nodes names,
   * or the operator may read it (`speaker`; omitted: the editor, allowed); an unknown id is undefined for anyone.
   */
  state(workflowId: string, speaker: Speaker = COORDINATOR_SPEAKER, by = 'operator'): WorkflowDetail | undefined {
    const live = this.live.get(workflowId);
    const record = live?.record ?? this.storedRecord(workflowId);
    if (!record) return undefined;
    if (speaker.kind === 'agent' && !this.isCreator(record, speaker, by) && ![...(live?.agents ?? agentsOf(record.definition))].some((a) => speaker.mayActAs(a))) {
      this.deny('read', workflowId, by, `only its creator, an agent one of its nodes names, or the operator may read it (workflow '${workflowId}')`);
    }
    return this.detailOf(workflowId, Infinity, false);
  }

  /** The operator (and the coordinator) always; an agent when it created the workflow or may act as the agent that did. */
  private isCreator(record: WorkflowRecord, speaker: Speaker, by: string): boolean {
    if (speaker.kind !== 'agent') return true;
    if (record.createdBy === by) return true;
    return record.createdBy.startsWith(AGENT_PRINCIPAL) && speaker.mayActAs(record.createdBy.slice(AGENT_PRINCIPAL.length));
  }

  /** PERMISSION_DENIED, logged (`workflow.permission_denied`). */
  private deny(action: string, workflowId: string, by: string, reason: string): never {
    this.deps.log.record({
      correlationId: workflowId || 'workflow', actor: by, eventType: 'workflow.permission_denied', level: 'WARN',
      details: { workflow_id: workflowId.slice(0, 256), action, principal: by, reason: reason.slice(0, 512) },
    });
    throw new WorkflowError('permission', 'PERMISSION_DENIED', reason);
  }

  /** One node with its inputs (what it was given at its last run, or would be given now), its workflow's summary and data. */
  nodeDetail(workflowId: string, nodeId: string): WorkflowNodeDetail | undefined {
    const live = this.live.get(workflowId);
    const record = live?.record ?? this.storedRecord(workflowId);
    const definition = live ? live.defs.get(nodeId) : record?.definition.nodes.find((n) => n.nodeId === nodeId);
    const state = record?.nodes.get(nodeId);
    if (!record || !definition || !state) return undefined;
    const view = this.viewOf(record, definition, state);
    const data = live ? live.data : (JSON.parse(record.data) as Record<string, unknown>);
    return {
      summary: this.summaryOf(record, live?.counts ?? countsOf(record.nodes.values())),
      node: { ...view, inputs: this.inputsShown(definition, state, data) },
      data: live ? JSON.stringify(live.data) : record.data,
    };
  }

  /** What start, runNode, resume and cancel answer: the nodes that are not PENDING, at most ANSWER_NODES. */
  private answer(workflowId: string): WorkflowDetail {
    return this.detailOf(workflowId, ANSWER_NODES, true)!;
  }

  private detailOf(workflowId: string, maxNodes: number, startedOnly: boolean): WorkflowDetail | undefined {
    const live = this.live.get(workflowId);
    const record = live?.record ?? this.storedRecord(workflowId);
    if (!record) return undefined;
    const nodes: WorkflowNodeView[] = [];
    for (const definition of record.definition.nodes) {
      if (nodes.length >= maxNodes) break;
      const state = record.nodes.get(definition.nodeId)!;
      if (startedOnly && state.status === 'PENDING') continue;
      nodes.push(this.viewOf(record, definition, state));
    }
    return {
      summary: this.summaryOf(record, live?.counts ?? countsOf(record.nodes.values())),
      definition: record.definition, warnings: record.warnings, data: live ? JSON.stringify(live.data) : record.data, nodes,
    };
  }

  /** A node as the editor and GetWorkflowState show it: its state with what it waits for worked out now, no inputs. */
  private viewOf(record: WorkflowRecord, definition: WorkflowNodeDefinition, state: NodeRecord): WorkflowNodeView {
    const task = state.status === 'RUNNING' && state.taskId ? this.deps.tasks.task(state.taskId) : undefined;
    const waiting = task ? this.taskWaiting(task) : state.status === 'PENDING' ? this.pendingWaiting(record, definition) : state.waiting;
    return { definition, state: { ...state, waiting }, inputs: '' };
  }

  /**
   * A workflow that does not run, from the store; the last few read are kept (an expanded row of a large ended workflow
   * is read at every refresh of the view), dropped as soon as anything of theirs changes (notify).
   */
  private storedRecord(workflowId: string): WorkflowRecord | undefined {
    const cached = this.recentlyRead.get(workflowId);
    if (cached) {
      this.recentlyRead.delete(workflowId);
      this.recentlyRead.set(workflowId, cached);
      return cached;
    }
    const record = this.deps.store.workflows.get(workflowId);
    if (!record) return undefined;
    this.recentlyRead.set(workflowId, record);
    if (this.recentlyRead.size > RECENTLY_READ) this.recentlyRead.delete(this.recentlyRead.keys().next().value as string);
    return record;
  }

  /** What a PENDING node waits for: the workflow's start, or its dependencies not COMPLETED yet. */
  private pendingWaiting(record: WorkflowRecord, def: WorkflowNodeDefinition): string {
    if (record.state === 'DEFINED') return 'the workflow has not started';
    const open = def.dependencies.filter((d) => record.nodes.get(d)?.status !== 'COMPLETED');
    return open.length ? `dependencies: ${open.join(', ')}`.slice(0, 1024) : '';
  }

  /** What a RUNNING node waits for: its task, queued (and why) or on its agent. */
  private taskWaiting(task: TaskRecord): string {
    if (task.state === 'QUEUED') return `its task ${task.taskId}, queued: ${task.waiting ? describeWaiting(task.waiting) : 'next in line'}`;
    if (TERMINAL_TASK_STATES.has(task.state)) return '';
    return `its task ${task.taskId} on ${task.assignedAgentId} (${task.state})`;
  }

  /**
   * The inputs a node was given at its last run (kept with the node at its start), or, PENDING or READY, would be given
   * now; none for a SKIPPED node (it was given nothing).
   */
  private inputsShown(def: WorkflowNodeDefinition, node: NodeRecord, data: Record<string, unknown>): string {
    if (node.status === 'SKIPPED') return '';
    if (node.status === 'PENDING' || node.status === 'READY') return JSON.stringify(inputsOf(def, data));
    return node.inputs ?? '';
  }

  private summaryOf(record: WorkflowRecord, counts: NodeCounts): WorkflowSummary {
    return {
      workflowId: record.workflowId, state: record.state, reason: record.reason, nodeCount: record.nodes.size, counts: { ...counts },
      createdAt: record.createdAt, startedAt: record.startedAt, completedAt: record.completedAt, updatedAt: record.updatedAt,
    };
  }

  // ---------------------------------------------------------------- EVENT trigger

  /** A workflow event (eventTrigger.ts): taken in the envelope's transaction; the nodes start right after. */
  takeEvent(input: WorkflowEventInput, ctx: { readonly correlationId: string }, settle: (result: Record<string, unknown>) => void): Refusal | undefined {
    const live = this.live.get(input.workflowId);
    const record = live?.record ?? this.storedRecord(input.workflowId);
    if (!record) return { code: 'NO_ROUTE', detail: `no workflow '${input.workflowId.slice(0, 128)}' (correlation_id names the workflow)` };
    // Who may send it (README, "The EVENT filter"): the operator, the workflow's creator, an agent one of its nodes names.
    const operator = input.principal === 'operator';
    if (!operator) {
      const creator = record.createdBy === `${AGENT_PRINCIPAL}${input.producerId}` || (input.principal !== undefined && input.principal === record.createdBy);
      if (!creator && !(live?.agents ?? agentsOf(record.definition)).has(input.producerId)) {
        return {
          code: 'PERMISSION_DENIED',
          detail: `${input.producerId.slice(0, 128)} neither created workflow '${input.workflowId.slice(0, 128)}' nor is named by one of its nodes: only those agents and the operator may send its events`,
        };
      }
    }
    if (!live) return { code: 'NO_ROUTE', detail: `workflow '${input.workflowId.slice(0, 128)}' is ${record.state}: it takes no events` };
    const candidates = [...(live.events.get(input.event) ?? [])].filter((id) => input.nodeId === '' || id === input.nodeId);
    // A node's event_from narrows who may send its event (the operator excepted).
    const waiting = operator ? candidates : candidates.filter((id) => eventFrom(live.defs.get(id)!)?.includes(input.producerId) ?? true);
    if (candidates.length > 0 && waiting.length === 0) {
      const first = candidates[0];
      return {
        code: 'PERMISSION_DENIED',
        detail: `the event_from of node ${first} lists ${eventFrom(live.defs.get(first)!)!.join(', ').slice(0, 512)}: ${input.producerId.slice(0, 128)} may not send its event '${input.event.slice(0, 128)}'`,
      };
    }
    if (waiting.length === 0) {
      const named = live.record.definition.nodes.filter((n) => n.trigger === 'EVENT' && n.metadata.event === input.event && (input.nodeId === '' || n.nodeId === input.nodeId));
      const states = named.map((n) => `${n.nodeId} (${this.node(live, n.nodeId).status})`).join(', ');
      return {
        code: 'NO_ROUTE',
        detail: `no EVENT node of workflow '${input.workflowId.slice(0, 128)}' waits for '${input.event.slice(0, 128)}' now${named.length ? `: ${states.slice(0, 512)}` : ' (no node has that event)'}; an event is not kept for later`,
      };
    }
    if (live.failed.size > 0) return { code: 'NO_ROUTE', detail: `workflow '${input.workflowId.slice(0, 128)}' is failing (${live.record.reason.slice(0, 256)}): it starts no node` };
    const current = live.data[EVENT_DATA_KEY];
    if (current !== undefined && !isPlainObject(current)) {
      return { code: 'VALIDATION_ERROR', detail: `workflow_data.${EVENT_DATA_KEY} holds ${Array.isArray(current) ? 'a list' : typeof current}, so the event's data cannot be written to ${EVENT_DATA_KEY}.${input.event.slice(0, 128)}` };
    }
    const written = this.applyWrites(live, [[[EVENT_DATA_KEY, input.event], input.data]]);
    if ('error' in written) return { code: written.kind === 'size' ? 'OVERSIZE_PAYLOAD' : 'VALIDATION_ERROR', detail: `${written.error} with this event's data` };
    const now = this.deps.clock.now();
    this.deps.store.transaction(() => {
      this.commitWrites(live, written);
      for (const id of waiting) {
        const node = this.node(live, id);
        node.fireAt = now;
        node.waiting = `its task to be submitted (event '${input.event}' from ${input.producerId} came)`;
        this.deps.store.workflows.putNode(live.record.workflowId, node);
        this.reindex(live, node);
        this.queueStart(live, id);
      }
      this.deps.log.record({
        correlationId: live.record.workflowId, actor: input.producerId, eventType: 'workflow.event',
        details: { workflow_id: live.record.workflowId, event: input.event, node_ids: waiting, message_id: input.messageId },
      });
      this.settle(live, input.producerId);
      settle({ workflow_id: live.record.workflowId, workflow_event: input.event, node_ids: waiting });
    });
    this.scheduleDrain();
    return undefined;
  }

  // ---------------------------------------------------------------- restart

  /**
   * After a restart: every RUNNING / WAITING workflow read back. RUNNING nodes are reconciled with their task (COMPLETED
   * while we were down → its output applied; still open → waited for; gone → FAILED), HITL answers given meanwhile
   * applied, READY nodes started or their timers re-armed. A COMPLETED node is never run again by this.
   */
  restore(ctx: CallContext): void {
    let workflows = 0;
    for (const record of this.deps.store.workflows.listActive()) {
      try {
        this.restoreOne(record);
        workflows++;
      } catch (err) {
        // It cannot go on: it must not stay RUNNING with nobody running it (what restoreOne wrote was rolled back).
        this.deps.log.internalError(ACTOR, record.workflowId, err, { during: 'restore' });
        this.abandon(record.workflowId, `it could not be restored after the restart: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    this.deps.log.record({ correlationId: ctx.correlationId, actor: ACTOR, eventType: 'workflow.restored', details: { workflows, running_nodes: this.byTask.size } });
    this.drain();
  }

  private restoreOne(record: WorkflowRecord): void {
    const validated = validateDefinition(record.definition);
    if (!validated.ok) {
      // Stored by an older build whose rules differed: it cannot be run safely by these.
      const first = validated.issues.find((i) => i.severity === 'error');
      this.abandon(record.workflowId, `its definition no longer validates: ${first?.code}: ${first?.message}`);
      return;
    }
    const live = this.build(record, validated.dependents, validated.routes);
    this.live.set(record.workflowId, live);
    const by = 'coordinator';
    this.deps.store.transaction(() => {
      for (const node of record.nodes.values()) {
        if (node.status === 'RUNNING') {
          const task = node.taskId ? this.deps.tasks.task(node.taskId) : undefined;
          if (!task) {
            this.fail(live, node.nodeId, `its task ${node.taskId || '(none)'} is gone (pruned or lost while the coordinator was stopped): its outcome is unknown`, by);
          } else if (TERMINAL_TASK_STATES.has(task.state)) {
            this.applyOutcome(live, node, task, by);
          } else {
            this.byTask.set(task.taskId, key(record.workflowId, node.nodeId));
          }
        } else if (node.status === 'FAILED' && node.invocationId) {
          const invocation = this.deps.hitl.get(node.invocationId);
          if (!invocation) {
            node.invocationId = '';
            this.finalFailure(live, node, `${node.error} (its HITL invocation is gone)`, by);
          } else if (invocation.state !== 'pending') {
            this.applyHitl(live, node, invocation, by);
          } else {
            this.watch(live.record.workflowId, node.nodeId, invocation.id);
          }
        }
      }
      this.kick(live, by);
      this.settle(live, by);
    });
  }

  /**
   * A workflow that cannot go on (restore failed, its definition no longer validates, an internal error could not be
   * contained): read again from the store, whatever memory holds of it dropped; its RUNNING nodes FAILED with `reason`
   * and their tasks cancelled, pending questions withdrawn, the workflow FAILED with `reason`. A resume may go on from it.
   * `fromScheduler`: called inside the scheduler's end-of-task callback, which must not call the scheduler: the tasks
   * are cancelled right after it.
   */
  private abandon(workflowId: string, reason: string, fromScheduler = false): void {
    const by = 'coordinator';
    const ctx: CallContext = { correlationId: workflowId };
    this.forget(workflowId);
    const record = this.deps.store.workflows.get(workflowId);
    if (!record || ENDED.has(record.state)) return;
    try {
      this.deps.store.transaction(() => {
        const now = this.deps.clock.now();
        const nodeReason = `workflow FAILED: ${reason}`.slice(0, 4096);
        const cancel: string[] = [];
        for (const node of record.nodes.values()) {
          let changed = false;
          if (node.invocationId) {
            this.withdraw(node, nodeReason, by, ctx);
            changed = true;
          }
          if (node.status === 'RUNNING') {
            if (node.taskId) cancel.push(node.taskId);
            node.status = 'FAILED';
            node.error = nodeReason;
            node.waiting = '';
            node.completedAt = now;
            this.deps.log.record({
              correlationId: workflowId, actor: by, eventType: 'workflow.node', level: 'WARN',
              details: { workflow_id: workflowId, node_id: node.nodeId, from: 'RUNNING', to: 'FAILED', reason: nodeReason.slice(0, 1024), run: node.runs },
            });
            changed = true;
          } else if (node.status === 'READY') {
            node.waiting = `a resume: the workflow ended FAILED before this node started (ResumeWorkflow runs it)`;
            node.fireAt = null;
            changed = true;
          }
          if (changed) {
            this.deps.store.workflows.putNode(workflowId, node);
            this.notify({ workflowId, nodeId: node.nodeId, state: 'FAILED' });
          }
        }
        const from = record.state;
        record.state = 'FAILED';
        record.reason = reason.slice(0, 4096);
        record.completedAt = now;
        record.updatedAt = now;
        this.deps.store.workflows.putWorkflow(record, countsOf(record.nodes.values()));
        this.deps.log.record({
          correlationId: workflowId, actor: by, eventType: 'workflow.state', level: 'WARN',
          details: { workflow_id: workflowId, from, to: 'FAILED', reason: record.reason.slice(0, 1024) },
        });
        this.notify({ workflowId, state: 'FAILED' });
        const cancelAll = () => {
          for (const taskId of cancel) {
            try {
              if (!TERMINAL_TASK_STATES.has(this.deps.tasks.task(taskId)?.state ?? 'COMPLETED')) this.deps.tasks.cancel(taskId, `workflow ${workflowId} FAILED: ${reason}`.slice(0, 1024), ctx);
            } catch {
              // Ended meanwhile: nothing to cancel.
            }
          }
        };
        if (fromScheduler) queueMicrotask(() => this.safely(workflowId, () => this.deps.store.transaction(cancelAll)));
        else cancelAll();
      });
    } catch (err) {
      this.deps.log.internalError(ACTOR, workflowId, err, { during: 'abandon' });
    }
  }

  /** Drops everything memory holds of a workflow (indexes, timers, tasks watched), not the store. */
  private forget(workflowId: string): void {
    const live = this.live.get(workflowId);
    this.live.delete(workflowId);
    const record = live?.record ?? this.deps.store.workflows.get(workflowId);
    if (!record) return;
    for (const node of record.nodes.values()) {
      const k = key(workflowId, node.nodeId);
      this.clearTimer(k);
      this.toStart.delete(k);
      this.queueBlocked.delete(k);
      if (node.taskId && this.byTask.get(node.taskId) === k) this.byTask.delete(node.taskId);
    }
    for (const [agentId, keys] of this.agentBlocked) {
      for (const k of keys) if (unkey(k)[0] === workflowId) keys.delete(k);
      if (keys.size === 0) this.agentBlocked.delete(agentId);
    }
    if (this.queueBlocked.size === 0) this.freed = 0;
  }

  /**
   * An error while a task's end was applied (inside the scheduler's transaction, which commits whatever part of the
   * change was written): the node is FAILED with the error, its indexes are rebuilt from the records, its dependents
   * SKIPPED, and the workflow moves on (FAILED once nothing runs). If even that fails, the workflow is abandoned.
   */
  private recover(live: Live, nodeId: string, reason: string): void {
    const workflowId = live.record.workflowId;
    try {
      this.deps.store.transaction(() => {
        const node = this.node(live, nodeId);
        if (node.invocationId) this.withdraw(node, reason, ACTOR, { correlationId: workflowId });
        this.reindexAll(live);
        node.error = reason.slice(0, 4096);
        node.waiting = '';
        node.fireAt = null;
        node.completedAt = this.deps.clock.now();
        if (node.status !== 'FAILED') {
          this.setStatus(live, node, 'FAILED', reason, ACTOR, { internal_error: true });
        } else {
          this.deps.store.workflows.putNode(workflowId, node);
          this.reindex(live, node);
        }
        this.skipDependents(live, nodeId, 'FAILED', ACTOR);
        this.settle(live, ACTOR);
      });
    } catch (err) {
      this.deps.log.internalError(ACTOR, workflowId, err, { node_id: nodeId, during: 'recover' });
      this.abandon(workflowId, `an internal error left node ${nodeId} in an unknown state: ${reason}`, true);
    }
  }

  // ---------------------------------------------------------------- the scheduler's side

  /** Inside the scheduler's transaction that ended `task`: the node's outcome commits with it. */
  private taskEnded(task: TaskRecord): void {
    if (this.disposed) return;
    if (this.queueBlocked.size > 0) {
      // Any task that ends (a workflow's or not) frees a slot in the scheduler's queue: one node held back may go.
      this.freed = Math.min(this.freed + 1, this.queueBlocked.size);
      this.scheduleDrain();
    }
    const k = this.byTask.get(task.taskId);
    if (k === undefined) return;
    this.byTask.delete(task.taskId);
    const [workflowId, nodeId] = unkey(k);
    const live = this.live.get(workflowId);
    const node = live?.record.nodes.get(nodeId);
    if (!live || !node || node.status !== 'RUNNING' || node.taskId !== task.taskId) return;
    try {
      this.deps.store.transaction(() => {
        this.applyOutcome(live, node, task, task.assignedAgentId || ACTOR);
        this.settle(live, ACTOR);
      });
    } catch (err) {
      this.deps.log.internalError(ACTOR, workflowId, err, { node_id: nodeId, task_id: task.taskId, during: 'task_ended' });
      this.recover(live, nodeId, `internal error while applying the end of task ${task.taskId} (${task.state}): ${err instanceof Error ? err.message : String(err)}`);
    }
    // Submissions wait until the scheduler is done ending the task.
    this.scheduleDrain();
  }

  private applyOutcome(live: Live, node: NodeRecord, task: TaskRecord, by: string): void {
    if (task.state === 'COMPLETED') {
      const out = outputOf(task);
      if ('error' in out) this.fail(live, node.nodeId, `task ${task.taskId}: ${out.error}`, by);
      else this.complete(live, node.nodeId, out.output, `task ${task.taskId} COMPLETED`, by);
      return;
    }
    const code = task.errorCode ? `${task.errorCode}: ` : '';
    this.fail(live, node.nodeId, `task ${task.taskId} ${task.state}: ${code}${task.note || 'no reason given'}`, by);
  }

  private agentChanged(change: RegistryChange): void {
    if (this.disposed || change.kind !== 'joined') return;
    const keys = this.agentBlocked.get(change.agent.descriptor.agentId);
    if (!keys) return;
    for (const k of keys) this.toStart.add(k);
    this.scheduleDrain();
  }

  // ---------------------------------------------------------------- node transitions

  /** A node finished with `output`: output_mapping, then the route (SKIPPED dependents, loop backs), then its dependents. */
  private complete(live: Live, nodeId: string, output: Record<string, unknown>, reason: string, by: string): void {
    const def = live.defs.get(nodeId)!;
    const node = this.node(live, nodeId);
    const outputText = JSON.stringify(output);
    // Everything that may refuse is worked out first; the writes are undone on a refusal, so nothing is half done.
    const writes: Array<[string, unknown]> = [];
    try {
      for (const [outKey, dataPath] of Object.entries(def.outputMapping)) {
        const value = getPath(output, outKey);
        if (value === undefined) throw new PathError(`output_mapping: the output has no '${outKey}' (it has ${Object.keys(output).slice(0, 10).join(', ') || 'no key'})`);
        writes.push([dataPath, value]);
      }
    } catch (err) {
      node.output = outputText;
      this.fail(live, nodeId, err instanceof PathError ? (err.message.startsWith('output_mapping') ? err.message : `output_mapping: ${err.message}`) : String(err), by);
      return;
    }
    const written = this.applyWrites(live, writes);
    if ('error' in written) {
      node.output = outputText;
      this.fail(live, nodeId, `output_mapping: ${written.error}`, by);
      return;
    }
    const dependents = live.dependents.get(nodeId) ?? [];
    let chosen: ReadonlySet<string> | undefined;
    const loops: string[] = [];
    const route = live.routes.get(nodeId);
    if (route) {
      const choice = route.choose(live.data, output);
      if (!choice.ok) {
        written.undo();
        node.output = outputText;
        this.fail(live, nodeId, `route: ${choice.error}`, by);
        return;
      }
      chosen = new Set(choice.chosen);
      const deps = new Set(dependents);
      for (const target of choice.chosen) if (!deps.has(target)) loops.push(target);
      for (const target of loops) {
        const t = this.node(live, target);
        const max = maxIterations(live.defs.get(target)!);
        if (t.loops + 1 > max) {
          written.undo();
          node.output = outputText;
          this.fail(live, nodeId, `route: loop back to '${target}' refused: it has looped ${t.loops} time(s), its max_iterations is ${max}`, by);
          return;
        }
        let busy: string | undefined;
        let failed: string | undefined;
        for (const id of this.downstream(live, [target])) {
          const other = this.node(live, id);
          if (busy === undefined && id !== nodeId && other.status === 'RUNNING') busy = id;
          if (failed === undefined && other.status === 'FAILED' && !other.invocationId) failed = id;
        }
        if (failed !== undefined) {
          // Resetting it would undo a final failure (the workflow ends FAILED once nothing runs): only a resume may.
          written.undo();
          node.output = outputText;
          this.fail(live, nodeId, `route: loop back to '${target}' refused: '${failed}'${failed === target ? '' : ' (downstream of it)'} FAILED for good `
            + `(${this.node(live, failed).error.slice(0, 300)}): resume the workflow from it instead`, by);
          return;
        }
        if (busy !== undefined) {
          written.undo();
          node.output = outputText;
          this.fail(live, nodeId, `route: loop back to '${target}' refused: '${busy}' (downstream of it) is RUNNING`, by);
          return;
        }
      }
    }
    this.commitWrites(live, written);
    node.output = outputText;
    node.error = '';
    node.waiting = '';
    node.completedAt = this.deps.clock.now();
    this.setStatus(live, node, 'COMPLETED', reason, by, chosen ? { chosen: [...chosen] } : {});
    if (chosen) {
      for (const d of dependents) if (!chosen.has(d)) this.skip(live, d, `not chosen by the route of '${nodeId}'`, by);
    }
    for (const target of loops) {
      const t = this.node(live, target);
      const loopsBefore = t.loops;
      const why = `loop back from '${nodeId}' (iteration ${loopsBefore + 1})`;
      for (const id of this.downstream(live, [target])) this.reset(live, id, why, by, false);
      this.node(live, target).loops = loopsBefore + 1;
      this.deps.store.workflows.putNode(live.record.workflowId, this.node(live, target));
      this.consider(live, target, by);
    }
    for (const d of dependents) this.consider(live, d, by);
  }

  /**
   * A node FAILED (its task failed or was cancelled, its output or route could not be used, its task could not be
   * submitted). With `on_failure: hitl` a person is asked (the workflow WAITING) unless `final` (a retry could only fail
   * the same way: a submission refused for a reason that does not pass); otherwise its dependents are SKIPPED and the
   * workflow ends FAILED once nothing runs.
   */
  private fail(live: Live, nodeId: string, reason: string, by: string, final = false): void {
    const node = this.node(live, nodeId);
    const def = live.defs.get(nodeId)!;
    node.error = reason.slice(0, 4096);
    node.waiting = '';
    node.fireAt = null;
    node.completedAt = this.deps.clock.now();
    if (final || !asksPerson(def)) {
      this.setStatus(live, node, 'FAILED', reason, by);
      this.skipDependents(live, nodeId, 'FAILED', by);
      return;
    }
    let invocation: HitlInvocation;
    try {
      invocation = this.deps.hitl.open(this.question(live, def, node), { kind: 'internal', component: WORKFLOW_COMPONENT }, { correlationId: live.record.workflowId }).invocation;
    } catch (err) {
      if (!(err instanceof HitlRequestError)) throw err;
      node.error = `${reason} (a person could not be asked: ${err.code}: ${err.message})`.slice(0, 4096);
      this.setStatus(live, node, 'FAILED', node.error, by);
      this.skipDependents(live, nodeId, 'FAILED', by);
      return;
    }
    node.invocationId = invocation.id;
    node.waiting = `a person: approve (retry), modify (skip with an output) or deny (fail) — HITL ${invocation.id}`;
    this.setStatus(live, node, 'FAILED', reason, by, { invocation_id: invocation.id });
    // An auto rule may have answered inside open().
    if (invocation.state !== 'pending') this.applyHitl(live, node, invocation, 'policy');
    else this.watch(live.record.workflowId, nodeId, invocation.id);
  }

  /** A FAILED node whose question was answered deny (or not answered): final, its dependents SKIPPED. */
  private finalFailure(live: Live, node: NodeRecord, error: string, by: string): void {
    node.invocationId = '';
    node.waiting = '';
    node.error = error.slice(0, 4096);
    this.deps.store.workflows.putNode(live.record.workflowId, node);
    this.reindex(live, node);
    this.deps.log.record({
      correlationId: live.record.workflowId, actor: by, eventType: 'workflow.node', level: 'WARN',
      details: { workflow_id: live.record.workflowId, node_id: node.nodeId, from: 'FAILED', to: 'FAILED', reason: node.error.slice(0, 1024), final: true, run: node.runs },
    });
    this.notify({ workflowId: live.record.workflowId, nodeId: node.nodeId, state: live.record.state });
    this.skipDependents(live, node.nodeId, 'FAILED', by);
  }

  private question(live: Live, def: WorkflowNodeDefinition, node: NodeRecord) {
    const wf = live.record.workflowId;
    return parseInvocationRequest({
      reason_type: 'TASK_ESCALATION',
      summary: `Workflow ${wf.slice(0, 128)}: node ${def.nodeId.slice(0, 128)} (agent ${def.agentId.slice(0, 128)}, run ${node.runs}) FAILED: ${node.error.slice(0, 1000)}`.slice(0, 4096),
      facts: {
        workflow_id: wf, node_id: def.nodeId, agent_id: def.agentId, run: node.runs, task_id: node.taskId, error: node.error.slice(0, 4096),
        output: node.output.slice(0, 4096), actions: WORKFLOW_HITL_ACTIONS,
      },
      subject: { task_id: node.taskId },
      risk_notes: ['approve → the node runs again; modify → the node counts as COMPLETED with your edited payload as its output; deny → the workflow fails. No answer in time: the HITL fallback (deny by default) fails it.'],
      proposed_actions: ['approve', 'modify', 'deny'],
    }, { requester: `workflow:${wf}`, correlationId: wf, now: this.deps.clock.now() });
  }

  private watch(workflowId: string, nodeId: string, invocationId: string): void {
    if (this.watched.has(invocationId)) return;
    this.watched.add(invocationId);
    this.deps.hitl.whenSettled(invocationId).then((invocation) => {
      this.watched.delete(invocationId);
      this.safely(workflowId, () => {
        const live = this.live.get(workflowId);
        const node = live?.record.nodes.get(nodeId);
        if (!live || !node || node.status !== 'FAILED' || node.invocationId !== invocation.id) return;
        this.deps.store.transaction(() => {
          this.applyHitl(live, node, invocation, invocation.decision?.origin.by || 'hitl');
          this.settle(live, ACTOR);
        });
        this.drain();
      });
    }, () => { this.watched.delete(invocationId); /* the coordinator is stopping: restore() applies it at the next start */ });
  }

  /** A person's answer (or the fallback's) about a FAILED node: approve = retry, modify = COMPLETED with the payload, else fail. */
  private applyHitl(live: Live, node: NodeRecord, invocation: HitlInvocation, by: string): void {
    const d = invocation.decision;
    const who = d ? (d.origin.kind === 'human' ? `${d.origin.by} (a person)` : d.origin.kind === 'rule' ? `the HITL rule '${d.origin.rule ?? ''}'`
      : d.origin.kind === 'fallback' ? `the HITL fallback ${d.origin.policy ?? ''}` : `nobody (cancelled by ${d.origin.by})`) : 'nobody';
    const action = invocation.state === 'cancelled' ? 'deny' : d?.action ?? 'deny';
    const rationale = d?.rationale ? `: ${d.rationale.slice(0, 500)}` : '';
    node.invocationId = '';
    if (action === 'approve' && d?.origin.automatic) {
      // A rule or a fallback, not a person: bounded, and later (the Clock), never in the turn that failed it.
      const retries = node.retries ?? 0;
      if (retries >= MAX_AUTOMATIC_RETRIES) {
        this.finalFailure(live, node, `${node.error} — ${who} approved a retry, but it was retried automatically ${retries} times `
          + `(at most ${MAX_AUTOMATIC_RETRIES}): failed for good`, by);
        return;
      }
      const now = this.deps.clock.now();
      node.retries = retries + 1;
      node.error = '';
      node.readyAt = now;
      node.fireAt = now + automaticRetryDelay(node.retries);
      node.waiting = `its automatic retry ${node.retries} of ${MAX_AUTOMATIC_RETRIES} at ${isoUtc(node.fireAt)} (approved by ${who})`;
      this.setStatus(live, node, 'READY', `automatic retry ${node.retries} of ${MAX_AUTOMATIC_RETRIES} approved by ${who}${rationale}`, by,
        { invocation_id: invocation.id, fire_at: isoUtc(node.fireAt) });
      this.armOrQueue(live, node);
      return;
    }
    if (action === 'approve') {
      node.error = '';
      node.waiting = 'its task to be submitted (retry approved)';
      node.readyAt = this.deps.clock.now();
      node.fireAt = null;
      this.setStatus(live, node, 'READY', `retry approved by ${who}${rationale}`, by, { invocation_id: invocation.id });
      this.queueStart(live, node.nodeId);
      return;
    }
    if (action === 'modify') {
      const payload = d?.payload;
      const output = isPlainObject(payload) ? payload : { result: payload ?? null };
      this.complete(live, node.nodeId, output, `skipped with an output by ${who}${rationale}`, by);
      return;
    }
    this.finalFailure(live, node, `${node.error} — ${action === 'deny' ? 'denied' : `answered ${action}`} by ${who}${rationale}`, by);
  }

  /** The dependents of a FAILED or SKIPPED node that are still PENDING are SKIPPED, and theirs (iteratively: no recursion). */
  private skipDependents(live: Live, nodeId: string, status: 'FAILED' | 'SKIPPED', by: string): void {
    for (const d of live.dependents.get(nodeId) ?? []) this.skip(live, d, `dependency '${nodeId}' ${status}`, by);
  }

  private skip(live: Live, start: string, reason: string, by: string): void {
    const stack: Array<[string, string]> = [[start, reason]];
    while (stack.length > 0) {
      const [id, why] = stack.pop()!;
      const node = this.node(live, id);
      if (node.status !== 'PENDING' && node.status !== 'READY') continue;
      const k = key(live.record.workflowId, id);
      this.clearTimer(k);
      this.toStart.delete(k);
      this.unblock(live, id);
      node.error = why;
      node.waiting = '';
      node.fireAt = null;
      this.setStatus(live, node, 'SKIPPED', why, by);
      for (const d of live.dependents.get(id) ?? []) stack.push([d, `dependency '${id}' SKIPPED`]);
    }
  }

  /** A PENDING node whose dependencies all COMPLETED becomes READY; one with a SKIPPED or finally FAILED dependency is SKIPPED. */
  private consider(live: Live, nodeId: string, by: string): void {
    const node = this.node(live, nodeId);
    if (node.status !== 'PENDING') return;
    const def = live.defs.get(nodeId)!;
    if ((live.badDeps.get(nodeId) ?? 0) > 0) {
      // Read the dependencies only to name the one that makes it SKIPPED (once per node).
      const dep = def.dependencies.find((d) => depClassOf(this.node(live, d)) === 'bad') ?? def.dependencies[0];
      this.skip(live, nodeId, `dependency '${dep}' ${this.node(live, dep).status}`, by);
      return;
    }
    // A PENDING node's `waiting` (the dependencies not COMPLETED yet) is worked out when it is read, never written.
    if ((live.openDeps.get(nodeId) ?? 0) === 0) this.ready(live, nodeId, def.dependencies.length ? `dependencies COMPLETED: ${def.dependencies.join(', ').slice(0, 512)}` : 'a root: no dependencies', by);
  }

  /** PENDING → READY; what it then waits for depends on its trigger. */
  private ready(live: Live, nodeId: string, reason: string, by: string): void {
    const def = live.defs.get(nodeId)!;
    const node = this.node(live, nodeId);
    const now = this.deps.clock.now();
    node.readyAt = now;
    node.fireAt = null;
    node.error = '';
    switch (def.trigger) {
      case 'DEPENDENCY':
        node.waiting = 'its task to be submitted';
        break;
      case 'MANUAL':
        node.waiting = 'a person: Run Node';
        break;
      case 'SCHEDULE': {
        const fireAt = nextFireAfter(def.metadata.schedule ?? '', now);
        node.fireAt = fireAt;
        node.waiting = `schedule '${def.metadata.schedule}': next ${isoUtc(fireAt)}`;
        break;
      }
      case 'EVENT':
        node.waiting = `event '${def.metadata.event}': a NOTIFICATION to coordinator {"workflow_event": "${def.metadata.event}"} with correlation_id ${live.record.workflowId}`;
        break;
    }
    this.setStatus(live, node, 'READY', reason, by, node.fireAt !== null ? { fire_at: isoUtc(node.fireAt) } : {});
    this.armOrQueue(live, node);
  }

  /** A READY node: a DEPENDENCY node is queued to start, a due one (fireAt) gets its timer; others wait. */
  private armOrQueue(live: Live, node: NodeRecord): void {
    const def = live.defs.get(node.nodeId)!;
    if (node.fireAt !== null) {
      const k = key(live.record.workflowId, node.nodeId);
      const delay = node.fireAt - this.deps.clock.now();
      if (delay <= 0) {
        this.queueStart(live, node.nodeId);
        return;
      }
      this.clearTimer(k);
      this.timers.set(k, this.deps.clock.setTimer(delay, () => {
        this.timers.delete(k);
        this.safely(live.record.workflowId, () => {
          if (this.live.get(live.record.workflowId) !== live) return;
          this.queueStart(live, node.nodeId);
          this.drain();
        });
      }));
      return;
    }
    if (def.trigger === 'DEPENDENCY') this.queueStart(live, node.nodeId);
  }

  /** A node (and so everything downstream, by the caller) back to PENDING: its task, timer and question let go. */
  private reset(live: Live, nodeId: string, reason: string, by: string, resetLoops: boolean, ctx?: CallContext): void {
    const node = this.node(live, nodeId);
    const k = key(live.record.workflowId, nodeId);
    this.clearTimer(k);
    this.toStart.delete(k);
    this.unblock(live, nodeId);
    if (node.invocationId) this.withdraw(node, reason, by, ctx ?? { correlationId: live.record.workflowId });
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
    if (node.status === 'PENDING') this.deps.store.workflows.putNode(live.record.workflowId, node);
    else this.setStatus(live, node, 'PENDING', reason, by);
  }

  /** Cancels a pending HITL question about a node (it is no longer needed). */
  private withdraw(node: NodeRecord, reason: string, by: string, ctx: CallContext): void {
    const id = node.invocationId;
    node.invocationId = '';
    try {
      if (this.deps.hitl.get(id)?.state === 'pending') this.deps.hitl.cancel(id, by, reason, ctx);
    } catch {
      // Settled meanwhile: its answer finds the node no longer asking and is ignored.
    }
  }

  /**
   * Every node that can move does: PENDING nodes whose dependencies are done become READY (or SKIPPED), READY nodes are
   * queued or their timers armed. O(V + E); after a restart and a resume.
   */
  private kick(live: Live, by: string): void {
    for (const def of live.record.definition.nodes) {
      const node = this.node(live, def.nodeId);
      if (node.status === 'PENDING') this.consider(live, def.nodeId, by);
      else if (node.status === 'READY') {
        if (def.trigger === 'SCHEDULE' && node.fireAt === null) {
          // Its time was dropped when the workflow ended: the next cron time from now (a resume), not from when it
          // became READY, or every time missed while it was ended would fire at once.
          const now = this.deps.clock.now();
          node.readyAt = now;
          node.fireAt = nextFireAfter(def.metadata.schedule ?? '', now);
          node.waiting = `schedule '${def.metadata.schedule}': next ${isoUtc(node.fireAt)}`;
          this.deps.store.workflows.putNode(live.record.workflowId, node);
          this.reindex(live, node);
        }
        this.armOrQueue(live, node);
      }
    }
  }

  // ---------------------------------------------------------------- starting nodes

  private queueStart(live: Live, nodeId: string): void {
    this.toStart.add(key(live.record.workflowId, nodeId));
  }

  private scheduleDrain(): void {
    if (this.drainQueued || this.disposed) return;
    this.drainQueued = true;
    queueMicrotask(() => {
      this.drainQueued = false;
      this.drain();
    });
  }

  /**
   * Submits READY nodes, each in its own transaction with its task: first as many of the nodes the full queue held back
   * as tasks ended since (first held back first; the first refused again stops that), then the queued ones. A READY
   * node of a workflow with a node FAILED for good is held (never dropped). Never inside the scheduler's callbacks.
   */
  private drain(): void {
    if (this.draining || this.disposed) return;
    this.draining = true;
    try {
      for (;;) {
        let k: string;
        let fromQueue = false;
        if (this.freed > 0 && this.queueBlocked.size > 0) {
          k = this.queueBlocked.values().next().value as string;
          this.freed--;
          fromQueue = true;
        } else if (this.toStart.size > 0) {
          k = this.toStart.values().next().value as string;
          this.toStart.delete(k);
        } else {
          break;
        }
        const [workflowId, nodeId] = unkey(k);
        const live = this.live.get(workflowId);
        const node = live?.record.nodes.get(nodeId);
        if (!live || !node || node.status !== 'READY') {
          // Gone meanwhile (indexes are kept in step; this is a guard): it took no slot.
          if (fromQueue) {
            this.queueBlocked.delete(k);
            this.freed++;
          }
          continue;
        }
        if (live.failed.size > 0) {
          if (fromQueue) this.freed++;
          this.safely(workflowId, () => this.hold(live, node));
          continue;
        }
        this.safely(workflowId, () => this.startNode(live, nodeId, '', ACTOR, { correlationId: workflowId }));
        // Refused BUFFER_FULL again: the queue is full after all; the others wait for the next task to end.
        if (fromQueue && live.blocked.get(nodeId) === '') this.freed = 0;
      }
    } finally {
      this.draining = false;
    }
  }

  /** A READY node not started while a node of its workflow is FAILED for good: it waits, saying why, until a resume. */
  private hold(live: Live, node: NodeRecord): void {
    this.unblock(live, node.nodeId);
    live.held.add(node.nodeId);
    const first = live.failed.values().next().value as string;
    const waiting = `a resume: node ${first} FAILED (${this.node(live, first).error.slice(0, 200)}), so no new node starts; resume the workflow to run this one`.slice(0, 1024);
    if (node.waiting === waiting) return;
    node.waiting = waiting;
    this.deps.store.transaction(() => this.deps.store.workflows.putNode(live.record.workflowId, node));
    this.notify({ workflowId: live.record.workflowId, nodeId: node.nodeId, state: live.record.state });
  }

  /** A READY node the scheduler refused for now: `why` is the agent it waits for, '' for room in the queue. */
  private block(live: Live, nodeId: string, why: string): void {
    const before = live.blocked.get(nodeId);
    if (before === why) return;
    if (before !== undefined) this.unblock(live, nodeId);
    live.blocked.set(nodeId, why);
    const k = key(live.record.workflowId, nodeId);
    if (why === '') {
      this.queueBlocked.add(k);
    } else {
      let keys = this.agentBlocked.get(why);
      if (!keys) this.agentBlocked.set(why, keys = new Set());
      keys.add(k);
    }
  }

  private unblock(live: Live, nodeId: string): void {
    const why = live.blocked.get(nodeId);
    if (why === undefined) return;
    live.blocked.delete(nodeId);
    const k = key(live.record.workflowId, nodeId);
    if (why === '') {
      this.queueBlocked.delete(k);
      if (this.queueBlocked.size === 0) this.freed = 0;
    } else {
      const keys = this.agentBlocked.get(why);
      keys?.delete(k);
      if (keys?.size === 0) this.agentBlocked.delete(why);
    }
  }

  /** READY → RUNNING: the node's task submitted and the node marked in one transaction (or the refusal recorded). */
  private startNode(live: Live, nodeId: string, reason: string, by: string, ctx: CallContext): void {
    const def = live.defs.get(nodeId)!;
    const node = this.node(live, nodeId);
    if (node.status !== 'READY') return;
    const workflowId = live.record.workflowId;
    const run = node.runs + 1;
    const taskId = taskIdOf(workflowId, nodeId, run);
    const inputs = inputsOf(def, live.data);
    const inputsText = JSON.stringify(inputs);
    const params = Buffer.from(`{"workflow_id":${JSON.stringify(workflowId)},"node_id":${JSON.stringify(nodeId)},"run":${run},"inputs":${inputsText}}`, 'utf8');
    // Kept with the node (the scheduler forgets finished tasks): what this run was given.
    const kept = inputsText.length <= MAX_KEPT_INPUTS ? inputsText : `(not kept: the inputs were ${inputsText.length} characters of JSON; at most ${MAX_KEPT_INPUTS} are kept)`;
    const scope = def.metadata.scope?.trim() || JSON.stringify({ resources: [`workflow:${workflowId}/${nodeId}`] });
    this.deps.store.transaction(() => {
      const result = this.deps.tasks.submit({
        taskId, target: def.agentId, priority: priorityOf(def), params, contentType: 'application/json', scope, submittedBy: `workflow:${workflowId}`,
      }, ctx);
      if (!result.accepted) {
        if (TEMPORARY_REFUSALS.has(result.code)) {
          // Not the node's fault: it waits (visibly) and is submitted again when the agent registers or a task ends.
          this.block(live, nodeId, result.code === 'BUFFER_FULL' ? '' : def.agentId);
          const waiting = result.code === 'BUFFER_FULL' ? `room in the scheduler's queue (${result.reason}): submitted again when a task ends`
            : `agent ${def.agentId} to register (${result.reason}): submitted again when it does`;
          if (node.waiting !== waiting) {
            node.waiting = waiting.slice(0, 1024);
            this.deps.store.workflows.putNode(workflowId, node);
            this.deps.log.record({
              correlationId: workflowId, actor: ACTOR, eventType: 'workflow.node_blocked', level: 'WARN',
              details: { workflow_id: workflowId, node_id: nodeId, code: result.code, reason: result.reason.slice(0, 512) },
            });
            this.notify({ workflowId, nodeId, state: live.record.state });
          }
          this.settle(live, by);
          return;
        }
        // Refused for a reason a retry would meet again (OVERSIZE_PAYLOAD, VALIDATION_ERROR…): failed for good, nobody asked.
        node.runs = run;
        node.taskId = '';
        node.inputs = kept;
        this.fail(live, nodeId, `its task could not be submitted: ${result.reason}`, by, true);
        this.settle(live, by);
        return;
      }
      this.unblock(live, nodeId);
      node.runs = run;
      node.taskId = taskId;
      node.inputs = kept;
      node.startedAt = this.deps.clock.now();
      node.completedAt = null;
      node.fireAt = null;
      node.error = '';
      node.waiting = '';
      this.setStatus(live, node, 'RUNNING', reason || `task ${taskId} submitted to ${def.agentId}`, by, { task_id: taskId, agent_id: def.agentId });
      if (TERMINAL_TASK_STATES.has(result.task.state)) this.applyOutcome(live, node, result.task, by);
      else this.byTask.set(taskId, key(workflowId, nodeId));
      this.settle(live, by);
    });
  }

  // ---------------------------------------------------------------- the workflow as a whole

  /**
   * The workflow's state from its nodes (inside the caller's transaction): FAILED once a node failed for good and nothing
   * runs; COMPLETED when every node is COMPLETED or SKIPPED; WAITING while a person is asked (a FAILED node's question,
   * a READY MANUAL node); RUNNING otherwise. The reason says what it waits for. Writes the workflow row when it changed.
   */
  private settle(live: Live, by: string): void {
    const record = live.record;
    if (!ACTIVE.has(record.state)) return;
    const c = live.counts;
    let to: WorkflowState;
    let reason: string;
    if (live.failed.size > 0) {
      const first = live.failed.values().next().value as string;
      const error = this.node(live, first).error;
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
      const asks = firstOf(live.asking, 5).map((id) => `decide on FAILED node ${id} (approve = retry, modify = skip with an output, deny = fail)`);
      const manual = firstOf(live.manual, 5).map((id) => `Run Node ${id}`);
      reason = `waiting for a person: ${[...asks, ...manual].join('; ')}`;
    } else {
      to = 'RUNNING';
      reason = c.RUNNING > 0 ? '' : this.waitingFor(live);
    }
    reason = reason.slice(0, 4096);
    if (to !== record.state) {
      if (ENDED.has(to)) record.completedAt = this.deps.clock.now();
      this.setWorkflow(live, to, reason, by, {});
    } else if (reason !== record.reason) {
      record.reason = reason;
      live.dirty = true;
    }
    this.persist(live);
    if (ENDED.has(record.state)) {
      this.end(live, by);
      return;
    }
    if (live.failed.size === 0 && live.held.size > 0) {
      // The failure that held them was cleared (a resume): they go now.
      for (const id of live.held) this.queueStart(live, id);
      live.held.clear();
      this.scheduleDrain();
    }
  }

  /** Nothing runs and nobody is asked: what the workflow waits for (schedules, events, agents), in words. */
  private waitingFor(live: Live): string {
    const parts: string[] = [];
    for (const id of firstOf(live.due, 5)) parts.push(`${id}: ${this.node(live, id).waiting}`);
    for (const [event, ids] of live.events) {
      if (parts.length >= 10) break;
      if (ids.size > 0) parts.push(`event '${event}' for ${firstOf(ids, 5).join(', ')}`);
    }
    for (const [id, why] of firstOf(live.blocked, 5)) parts.push(why ? `agent ${why} for ${id}` : `room in the scheduler's queue for ${id}`);
    return parts.length ? `waiting for ${parts.slice(0, 10).join('; ')}` : '';
  }

  /** The workflow ended: its timers stop, its open questions are withdrawn, it leaves memory. */
  private end(live: Live, by: string): void {
    const workflowId = live.record.workflowId;
    for (const node of live.record.nodes.values()) {
      const k = key(workflowId, node.nodeId);
      this.clearTimer(k);
      this.toStart.delete(k);
      this.unblock(live, node.nodeId);
      if (node.invocationId) {
        this.withdraw(node, `workflow ${live.record.state}`, by, { correlationId: workflowId });
        this.deps.store.workflows.putNode(workflowId, node);
      } else if (node.status === 'READY') {
        // It stays READY (a resume picks it up) but waits for nothing any more.
        node.waiting = `a resume: the workflow ended ${live.record.state} before this node started (ResumeWorkflow runs it)`;
        node.fireAt = null;
        this.deps.store.workflows.putNode(workflowId, node);
      }
    }
    this.live.delete(workflowId);
  }

  private setWorkflow(live: Live, to: WorkflowState, reason: string, by: string, details: Record<string, unknown>): void {
    const record = live.record;
    const from = record.state;
    record.state = to;
    record.reason = reason;
    record.updatedAt = this.deps.clock.now();
    live.dirty = true;
    if (ACTIVE.has(to)) this.live.set(record.workflowId, live);
    this.deps.log.record({
      correlationId: record.workflowId, actor: by, eventType: 'workflow.state', level: to === 'FAILED' ? 'WARN' : 'INFO',
      details: { workflow_id: record.workflowId, from, to, reason: reason.slice(0, 1024), ...details },
    });
    this.notify({ workflowId: record.workflowId, state: to });
  }

  /** Writes the workflow's small row (state, reason, times, node counts; never its definition or data) when something of it changed. */
  private persist(live: Live): void {
    if (!live.dirty) return;
    live.dirty = false;
    live.record.updatedAt = this.deps.clock.now();
    this.deps.store.workflows.putWorkflow(live.record, live.counts);
  }

  /** One node transition: the row, the event, the indexes, the listeners. */
  private setStatus(live: Live, node: NodeRecord, to: NodeStatus, reason: string, by: string, details: Record<string, unknown> = {}): void {
    const from = node.status;
    live.counts[from]--;
    live.counts[to]++;
    node.status = to;
    this.deps.store.workflows.putNode(live.record.workflowId, node);
    this.reindex(live, node);
    live.record.updatedAt = this.deps.clock.now();
    // The stored counts and updated_at (what the list reads) follow: one small row, written once per transaction (persist).
    live.dirty = true;
    this.deps.log.record({
      correlationId: live.record.workflowId, actor: by, eventType: 'workflow.node', level: to === 'FAILED' ? 'WARN' : 'INFO',
      details: { workflow_id: live.record.workflowId, node_id: node.nodeId, from, to, reason: reason.slice(0, 1024), run: node.runs, ...details },
    });
    this.notify({ workflowId: live.record.workflowId, nodeId: node.nodeId, state: live.record.state });
  }

  /** Every live index and count worked out again from the node records: O(V + E), after an internal error and at load. */
  private reindexAll(live: Live): void {
    for (const status of NODE_STATUSES) live.counts[status] = 0;
    for (const node of live.record.nodes.values()) live.counts[node.status]++;
    for (const set of [live.failed, live.asking, live.manual, live.due, live.held]) set.clear();
    live.events.clear();
    live.depClass.clear();
    live.badDeps.clear();
    live.openDeps.clear();
    for (const def of live.record.definition.nodes) if (def.dependencies.length > 0) live.openDeps.set(def.nodeId, def.dependencies.length);
    for (const node of live.record.nodes.values()) this.reindex(live, node);
  }

  /** Keeps the live indexes (failed, asking, manual, events, due, dependency counts) in step with one node. */
  private reindex(live: Live, node: NodeRecord): void {
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
      this.unblock(live, id);
      live.held.delete(id);
      return;
    }
    if (node.fireAt !== null) live.due.add(id);
    else if (def.trigger === 'MANUAL') live.manual.add(id);
    else if (def.trigger === 'EVENT') {
      let set = live.events.get(event);
      if (!set) live.events.set(event, set = new Set());
      set.add(id);
    }
  }

  // ---------------------------------------------------------------- workflow_data

  /**
   * Writes into workflow_data in place (each value cloned), all or none: a path through a value that is not an object,
   * or workflow_data beyond MAX_WORKFLOW_DATA_BYTES (counted from each write's size, never by serialising it all),
   * undoes the writes before it. The caller stores them (commitWrites) or undoes them (a later refusal).
   */
  private applyWrites(live: Live, writes: ReadonlyArray<readonly [string | readonly string[], unknown]>): DataWrites | { readonly error: string; readonly kind: 'path' | 'size' } {
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
      return { error: `workflow_data would be ${live.dataBytes + bytes} bytes; at most ${MAX_WORKFLOW_DATA_BYTES}`, kind: 'size' };
    }
    return { writes: done, bytes, undo };
  }

  /** Stores writes applyWrites made (one row each, inside the caller's transaction); a new snapshot once they outweigh the last. */
  private commitWrites(live: Live, written: DataWrites): void {
    if (written.writes.length === 0) return;
    live.dataBytes += written.bytes;
    for (const [path, value] of written.writes) {
      const json = JSON.stringify(value);
      this.deps.store.workflows.appendData(live.record.workflowId, ++live.dataSeq, path, json);
      live.dataLogChars += json.length + path.reduce((n, p) => n + p.length + 3, 2);
    }
    if (live.dataLogChars > Math.max(DATA_SNAPSHOT_MIN_CHARS, live.dataBytes)) this.snapshotData(live);
  }

  /** Stores workflow_data whole (dropping the writes before): at start, and when the writes outweigh the last snapshot. O(|workflow_data|), amortised. */
  private snapshotData(live: Live): void {
    const json = JSON.stringify(live.data);
    live.dataBytes = Buffer.byteLength(json);
    this.deps.store.workflows.putData(live.record.workflowId, ++live.dataSeq, json);
    live.dataLogChars = 0;
  }

  // ---------------------------------------------------------------- helpers

  /** The node and every node downstream of it by dependencies (each once, the given ones first). */
  private downstream(live: Live, from: readonly string[]): string[] {
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

  private node(live: Live, nodeId: string): NodeRecord {
    return live.record.nodes.get(nodeId)!;
  }

  private stored(workflowId: string): WorkflowRecord {
    const record = this.deps.store.workflows.get(workflowId);
    if (!record) throw new WorkflowError('not_found', 'NOT_FOUND', `no workflow '${workflowId.slice(0, 128)}'`);
    return record;
  }

  private liveOrRefuse(workflowId: string, what: string): Live {
    const live = this.live.get(workflowId);
    if (live) return live;
    const record = this.stored(workflowId);
    throw new WorkflowError('refused', 'FAILED_PRECONDITION', record.state === 'DEFINED'
      ? `workflow '${workflowId}' has not started: start it before you ${what}`
      : `workflow '${workflowId}' ended ${record.state}: resume it before you ${what}`);
  }

  /** A stored workflow made live (not yet registered as running: setWorkflow does that when it becomes RUNNING); `data` replaces its stored data (StartWorkflow). */
  private load(record: WorkflowRecord, data?: Record<string, unknown>): Live {
    const validated = validateDefinition(record.definition);
    if (!validated.ok) {
      const first = validated.issues.find((i) => i.severity === 'error');
      throw new WorkflowError('refused', 'FAILED_PRECONDITION', `workflow '${record.workflowId}' no longer validates: ${first?.code}: ${first?.message}`);
    }
    return this.build(record, validated.dependents, validated.routes, data);
  }

  private build(record: WorkflowRecord, dependents: ReadonlyMap<string, readonly string[]>, routes: ReadonlyMap<string, CompiledRoute>, data?: Record<string, unknown>): Live {
    const log = this.deps.store.workflows.dataLog(record.workflowId);
    const live: Live = {
      record, defs: new Map(record.definition.nodes.map((n) => [n.nodeId, n])), dependents, routes, agents: agentsOf(record.definition),
      data: data ?? (JSON.parse(record.data) as Record<string, unknown>), dataBytes: Buffer.byteLength(record.data), dataSeq: log.seq, dataLogChars: log.chars,
      counts: countsOf([]), ...emptyLiveSets(), dirty: false,
    };
    this.reindexAll(live);
    return live;
  }

  private clearTimer(k: string): void {
    this.timers.get(k)?.dispose();
    this.timers.delete(k);
  }

  /** Listeners hear of a change once it is durable (after the commit). */
  private notify(change: WorkflowsChange): void {
    this.recentlyRead.delete(change.workflowId);
    this.pendingChanges.push(change);
    if (this.pendingChanges.length > 1) return;
    this.deps.store.afterCommit(() => {
      const changes = this.pendingChanges.splice(0);
      if (this.disposed) return;
      for (const c of changes) this.changed.fire(c);
    });
  }

  private safely(correlationId: string, fn: () => void): void {
    if (this.disposed) return;
    try {
      fn();
    } catch (err) {
      this.deps.log.internalError(ACTOR, correlationId, err);
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const s of this.subscriptions) s.dispose();
    for (const t of this.timers.values()) t.dispose();
    this.timers.clear();
    this.changed.dispose();
  }
}
