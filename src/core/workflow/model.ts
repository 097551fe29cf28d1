import type { Event } from '../events';
import type { Transactions } from '../store/store';

/** RFC §17.7 trigger types (workflow.proto TriggerType); TRIGGER_TYPE_UNSPECIFIED is read as DEPENDENCY. */
export const TRIGGER_TYPES = ['DEPENDENCY', 'MANUAL', 'SCHEDULE', 'EVENT'] as const;
export type TriggerType = (typeof TRIGGER_TYPES)[number];

/** RFC §17.7 node states (workflow.proto NodeStatus). */
export const NODE_STATUSES = ['PENDING', 'READY', 'RUNNING', 'COMPLETED', 'FAILED', 'SKIPPED'] as const;
export type NodeStatus = (typeof NODE_STATUSES)[number];

/**
 * Node metadata keys the coordinator reads (README, "Workflows"); every other key is the author's own.
 * - `route`: a CEL expression evaluated when the node COMPLETES (conditional edges, graph-design-notes): it answers a
 *   node id, a list of node ids or a bool; a dependent not chosen is SKIPPED; a chosen node that is not a dependent is a
 *   loop back (that node and what depends on it run again, at most `max_iterations` times).
 * - `schedule`: a cron expression (5 fields, UTC) for SCHEDULE nodes; `event`: the event name an EVENT node waits for.
 * - `priority` (-19…20), `scope` (the task scope, scheduler/scope.ts syntax): how the node's scheduler task is submitted.
 * - `on_failure`: `fail` (default: the workflow ends FAILED) or `hitl` (a person decides: retry, skip or fail).
 * - `max_iterations`: how often loop backs may re-run the node (default 10).
 * - `event_from`: EVENT nodes: a comma-separated list of agent ids; only they (and the operator) may send the node's
 *   event — it narrows the default (the workflow's creator and the agents its nodes name), never widens it.
 */
export const NODE_METADATA_KEYS = [
  'route',
  'schedule',
  'event',
  'priority',
  'scope',
  'on_failure',
  'max_iterations',
  'event_from',
] as const;

/** A node as defined (workflow.proto WorkflowNode). Maps keep the author's order. */
export interface WorkflowNodeDefinition {
  readonly nodeId: string;
  /** The agent that executes it: an agent id or `type:<agent type>` (a scheduler target). */
  readonly agentId: string;
  readonly dependencies: readonly string[];
  readonly trigger: TriggerType;
  /** workflow data key (a dotted path) → node input name. */
  readonly inputMapping: Readonly<Record<string, string>>;
  /** node output key → workflow data key (a dotted path). */
  readonly outputMapping: Readonly<Record<string, string>>;
  readonly metadata: Readonly<Record<string, string>>;
}

/** A workflow as defined (workflow.proto WorkflowDefinition), nodes in the author's order. */
export interface WorkflowDefinition {
  readonly workflowId: string;
  readonly nodes: readonly WorkflowNodeDefinition[];
  readonly metadata: Readonly<Record<string, string>>;
}

/**
 * One finding of validation. `path` names the field the way the definition file spells it: `nodes.<id>.dependencies[1]`,
 * `nodes.<id>.metadata.route`, `workflow_id` — the editor maps it onto the file's line and column.
 * `code`: the SW4RM-style code (`workflow_cycle_detected`, `unknown_dependency`, `self_dependency`, `no_root`,
 * `invalid_route`, `invalid_schedule`, `invalid_field`, `unreachable_node`…).
 */
export interface ValidationIssue {
  readonly severity: 'error' | 'warning';
  readonly code: string;
  readonly path: string;
  readonly message: string;
  /** For workflow_cycle_detected: the nodes of one cycle, in order (the last depends on the first). */
  readonly cycle?: readonly string[];
}

/** One refusal (or warning) of a definition file, placed in the file (1-based lines and columns; 0 when unknown). */
export interface WorkflowFileIssue extends ValidationIssue {
  readonly line: number;
  readonly column: number;
  readonly endLine: number;
  readonly endColumn: number;
}

/** What Create Workflow from File answers: created (with its warnings), or refused with every issue placed in the file. */
export type WorkflowCreateResult =
  | { readonly ok: true; readonly workflowId: string; readonly warnings: readonly WorkflowFileIssue[] }
  | { readonly ok: false; readonly issues: readonly WorkflowFileIssue[] };

/** Workflow run states: DEFINED (created, not started), RUNNING, WAITING (for a person), and the three ends. */
export const WORKFLOW_STATES = ['DEFINED', 'RUNNING', 'WAITING', 'COMPLETED', 'FAILED', 'CANCELLED'] as const;
export type WorkflowState = (typeof WORKFLOW_STATES)[number];

/** A node's progress (workflow.proto NodeState, plus what the coordinator needs to go on after a restart). */
export interface NodeRecord {
  readonly nodeId: string;
  status: NodeStatus;
  startedAt: number | null;
  completedAt: number | null;
  /** The node's last output as JSON text ('' when none). */
  output: string;
  /** Why it FAILED or was SKIPPED ('' otherwise). */
  error: string;
  /**
   * What a PENDING / READY / RUNNING node waits for, in words that follow "waiting for" (`dependencies: a, b`,
   * `a person: Run Node`, `schedule '0 2 * * *': next 2026-…`, `event 'approved': …`, `its task wf:…`).
   */
  waiting: string;
  /** The scheduler task of the current run ('' when none). */
  taskId: string;
  /** How many times it was started (loop backs and resumes run it again); the current run's number. */
  runs: number;
  /** When it last became READY (ms since the epoch), null while PENDING: a SCHEDULE node's cron base. */
  readyAt: number | null;
  /**
   * A READY node that is due: when it runs (a SCHEDULE node's next cron time; an EVENT node's event arrival), null
   * otherwise. Stored so that the timer is armed again after a restart.
   */
  fireAt: number | null;
  /** Loop backs into this node since it was last resumed (at most its `max_iterations`). */
  loops: number;
  /** A FAILED node with `on_failure: hitl`: the HITL invocation asking a person ('' when none is pending). */
  invocationId: string;
  /** Retries a rule or a fallback approved (not a person) since it was last resumed: at most MAX_AUTOMATIC_RETRIES. */
  retries: number;
  /**
   * The inputs of its last run as given to its task (JSON text, kept with the node: the scheduler forgets finished
   * tasks), or a note in parentheses when they were larger than 64 KiB; '' before its first run and after a reset.
   */
  inputs: string;
}

export interface WorkflowRecord {
  readonly workflowId: string;
  readonly definition: WorkflowDefinition;
  /** Warnings found at creation (unreachable nodes…). */
  readonly warnings: readonly ValidationIssue[];
  state: WorkflowState;
  /** The shared workflow_data, JSON text of an object. */
  data: string;
  readonly nodes: Map<string, NodeRecord>;
  readonly createdAt: number;
  readonly createdBy: string;
  startedAt: number | null;
  completedAt: number | null;
  startedBy: string;
  /** Why it FAILED, is WAITING or was CANCELLED ('' otherwise). */
  reason: string;
  updatedAt: number;
}

/** What the editor reads (through CoordinatorApi). */
export interface WorkflowSummary {
  readonly workflowId: string;
  readonly state: WorkflowState;
  readonly reason: string;
  readonly nodeCount: number;
  /** How many nodes are in each status. */
  readonly counts: Readonly<Record<NodeStatus, number>>;
  readonly createdAt: number;
  readonly startedAt: number | null;
  readonly completedAt: number | null;
  readonly updatedAt: number;
}

export interface WorkflowNodeView {
  readonly definition: WorkflowNodeDefinition;
  readonly state: NodeRecord;
  /**
   * The inputs the node was given at its last run, or (PENDING, READY) would be given now, JSON text; '' for a SKIPPED
   * node, and in a WorkflowDetail (only WorkflowQueries.nodeDetail works them out: O(workflow_data) each).
   */
  readonly inputs: string;
}

export interface WorkflowDetail {
  readonly summary: WorkflowSummary;
  readonly definition: WorkflowDefinition;
  readonly warnings: readonly ValidationIssue[];
  readonly data: string;
  /**
   * Nodes in the author's order: every node, or the first `maxNodes` asked for (summary.nodeCount counts them all);
   * the answers of start / runNode / resume / cancel hold only nodes that are not PENDING, at most ANSWER_NODES.
   */
  readonly nodes: readonly WorkflowNodeView[];
}

/** One node with its inputs, its workflow's summary and data (Show Node Inputs and Outputs). */
export interface WorkflowNodeDetail {
  readonly summary: WorkflowSummary;
  readonly node: WorkflowNodeView;
  readonly data: string;
}

export interface WorkflowsChange {
  readonly workflowId: string;
  /** Set when one node changed; absent for a change of the workflow as a whole. */
  readonly nodeId?: string;
  readonly state: WorkflowState;
}

export interface WorkflowQueries {
  list(limit: number): WorkflowSummary[];
  /** The workflow with its first `maxNodes` nodes (all when omitted), no node's inputs: O(maxNodes) for a running workflow. */
  detail(workflowId: string, maxNodes?: number): WorkflowDetail | undefined;
  /** One node with its inputs; undefined for an unknown workflow or node. */
  nodeDetail(workflowId: string, nodeId: string): WorkflowNodeDetail | undefined;
  readonly onDidChange: Event<WorkflowsChange>;
}

/** The workflow area's storage slice (schema v17: workflows, workflow_nodes). */
export interface WorkflowStorage extends Transactions {
  readonly workflows: WorkflowRepository;
}

/** How many nodes are in each status. */
export type NodeCounts = Record<NodeStatus, number>;

/** Nodes by status. */
export function countsOf(nodes: Iterable<Pick<NodeRecord, 'status'>>): NodeCounts {
  const counts = Object.fromEntries(NODE_STATUSES.map((s) => [s, 0])) as NodeCounts;
  for (const node of nodes) counts[node.status]++;
  return counts;
}

/**
 * The workflow tables. A workflow's definition is written once (create); its own fields (a small row), its
 * workflow_data (a snapshot and the writes since) and each node's state are separate rows, so that a node transition
 * writes its node row, the small workflow row and, for its output, one row per output_mapping entry — never the
 * definition or the whole workflow_data: a 100,000-node workflow costs per transition what a 3-node one does.
 */
export interface WorkflowRepository {
  /** Inserts a workflow's definition, its run state, its workflow_data (`record.data`, as the first snapshot) and every node (PENDING). */
  create(record: WorkflowRecord): void;
  /** Writes the workflow's own fields (state, times, reason; not its data) and its node counts (what listRecent answers). */
  putWorkflow(record: WorkflowRecord, counts: Readonly<NodeCounts>): void;
  /** Replaces workflow_data by a snapshot (`json`, the whole object) numbered `seq`: every earlier write is dropped. */
  putData(workflowId: string, seq: number, json: string): void;
  /** One write into workflow_data, numbered `seq` (after the snapshot's): `valueJson` at the key path `path` (its segments). */
  appendData(workflowId: string, seq: number, path: readonly string[], valueJson: string): void;
  /** The last `seq` written and how many characters the writes since the snapshot hold (when to write a new snapshot). */
  dataLog(workflowId: string): { readonly seq: number; readonly chars: number };
  /** Writes one node's state: O(1) per node transition, never the whole workflow. */
  putNode(workflowId: string, node: NodeRecord): void;
  /** A workflow with its nodes, and its workflow_data as JSON text (the snapshot with the writes since replayed). */
  get(workflowId: string): WorkflowRecord | undefined;
  /** Workflows not ended and started (RUNNING, WAITING): restore after a restart. */
  listActive(): WorkflowRecord[];
  /**
   * Summaries, active first, then by updatedAt descending, at most `limit`, without reading a node or a definition (the
   * counts are those last written by putWorkflow; the engine overlays its live counts for workflows it runs).
   */
  listRecent(limit: number): WorkflowSummary[];
}
