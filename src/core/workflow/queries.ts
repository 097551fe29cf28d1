import type { TaskRunner } from '../scheduler/model';
import type { QueriesPart } from './core';
import { WorkflowError } from './errors';
import {
  countsOf,
  type NodeCounts,
  type NodeRecord,
  type WorkflowDetail,
  type WorkflowNodeDefinition,
  type WorkflowNodeDetail,
  type WorkflowNodeView,
  type WorkflowRecord,
  type WorkflowStorage,
  type WorkflowSummary,
} from './model';
import { pendingWaiting, taskWaiting } from './notices';
import { inputsOf, type LiveWorkflow } from './state';

/** The most nodes start / runNode / resume / cancel answer (those not PENDING, in the author's order). */
export const ANSWER_NODES = 1_000;
/** Workflows that do not run kept after a read (the view reads an expanded one at every refresh). */
const RECENTLY_READ = 4;
const DEFAULT_LIST = 100;
const MAX_LIST = 1_000;

/**
 * The reads: the list, a workflow's detail (the first N nodes, no inputs: O(N) for a running one), one node with its
 * inputs, what the operations answer; a running workflow from memory, any other from the store (the last few read
 * kept, dropped as soon as anything of theirs changes).
 */
export class Queries implements QueriesPart {
  /** Workflows that do not run, as last read from the store (storedRecord), least recently read first. */
  private readonly recentlyRead = new Map<string, WorkflowRecord>();

  constructor(
    private readonly store: Pick<WorkflowStorage, 'workflows'>,
    private readonly tasks: Pick<TaskRunner, 'task'>,
    private readonly live: ReadonlyMap<string, LiveWorkflow>,
  ) {}

  list(limit = DEFAULT_LIST): WorkflowSummary[] {
    const n = Math.min(Math.max(1, Math.floor(limit) || DEFAULT_LIST), MAX_LIST);
    return this.store.workflows.listRecent(n).map((s) => {
      const live = this.live.get(s.workflowId);
      return live ? summaryOf(live.record, live.counts) : s;
    });
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
      summary: summaryOf(record, live?.counts ?? countsOf(record.nodes.values())),
      node: { ...view, inputs: inputsShown(definition, state, data) },
      data: live ? JSON.stringify(live.data) : record.data,
    };
  }

  /** What start, runNode, resume and cancel answer: the nodes that are not PENDING, at most ANSWER_NODES. */
  answer(workflowId: string): WorkflowDetail {
    return this.detailOf(workflowId, ANSWER_NODES, true)!;
  }

  detailOf(workflowId: string, maxNodes: number, startedOnly: boolean): WorkflowDetail | undefined {
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
      summary: summaryOf(record, live?.counts ?? countsOf(record.nodes.values())),
      definition: record.definition,
      warnings: record.warnings,
      data: live ? JSON.stringify(live.data) : record.data,
      nodes,
    };
  }

  /** A node as the editor and GetWorkflowState show it: its state with what it waits for worked out now, no inputs. */
  private viewOf(record: WorkflowRecord, definition: WorkflowNodeDefinition, state: NodeRecord): WorkflowNodeView {
    const task = state.status === 'RUNNING' && state.taskId ? this.tasks.task(state.taskId) : undefined;
    const waiting = task
      ? taskWaiting(task)
      : state.status === 'PENDING'
        ? pendingWaiting(record, definition)
        : state.waiting;
    return { definition, state: { ...state, waiting }, inputs: '' };
  }

  /**
   * A workflow that does not run, from the store; the last few read are kept (an expanded row of a large ended workflow
   * is read at every refresh of the view), dropped as soon as anything of theirs changes (forgetRead).
   */
  storedRecord(workflowId: string): WorkflowRecord | undefined {
    const cached = this.recentlyRead.get(workflowId);
    if (cached) {
      this.recentlyRead.delete(workflowId);
      this.recentlyRead.set(workflowId, cached);
      return cached;
    }
    const record = this.store.workflows.get(workflowId);
    if (!record) return undefined;
    this.recentlyRead.set(workflowId, record);
    if (this.recentlyRead.size > RECENTLY_READ)
      this.recentlyRead.delete(this.recentlyRead.keys().next().value as string);
    return record;
  }

  /** Something of the workflow changed: a stored record read before is stale. */
  forgetRead(workflowId: string): void {
    this.recentlyRead.delete(workflowId);
  }

  /** A workflow from the store, or NOT_FOUND. */
  stored(workflowId: string): WorkflowRecord {
    const record = this.store.workflows.get(workflowId);
    if (!record) throw new WorkflowError('not_found', 'NOT_FOUND', `no workflow '${workflowId.slice(0, 128)}'`);
    return record;
  }

  /** A running workflow, or FAILED_PRECONDITION saying what would let `what` be done. */
  liveOrRefuse(workflowId: string, what: string): LiveWorkflow {
    const live = this.live.get(workflowId);
    if (live) return live;
    const record = this.stored(workflowId);
    throw new WorkflowError(
      'refused',
      'FAILED_PRECONDITION',
      record.state === 'DEFINED'
        ? `workflow '${workflowId}' has not started: start it before you ${what}`
        : `workflow '${workflowId}' ended ${record.state}: resume it before you ${what}`,
    );
  }
}

/**
 * The inputs a node was given at its last run (kept with the node at its start), or, PENDING or READY, would be given
 * now; none for a SKIPPED node (it was given nothing).
 */
function inputsShown(def: WorkflowNodeDefinition, node: NodeRecord, data: Record<string, unknown>): string {
  if (node.status === 'SKIPPED') return '';
  if (node.status === 'PENDING' || node.status === 'READY') return JSON.stringify(inputsOf(def, data));
  return node.inputs ?? '';
}

function summaryOf(record: WorkflowRecord, counts: NodeCounts): WorkflowSummary {
  return {
    workflowId: record.workflowId,
    state: record.state,
    reason: record.reason,
    nodeCount: record.nodes.size,
    counts: { ...counts },
    createdAt: record.createdAt,
    startedAt: record.startedAt,
    completedAt: record.completedAt,
    updatedAt: record.updatedAt,
  };
}
