import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { HitlInvocation, HitlInvocations } from '../hitl/model';
import type { IdSource } from '../ids';
import type { Guard } from '../kernel/guard';
import type { KeyedTimers } from '../kernel/timers';
import type { Transition, Transitions } from '../kernel/transitions';
import type { EventRecorder } from '../log/model';
import type { Speaker } from '../policy/model';
import type { AgentDirectory, RegistryChange } from '../registry/model';
import type { Refusal } from '../router/model';
import type { TaskRecord, TaskRunner } from '../scheduler/model';
import type { StartIndexes } from './indexes';
import type {
  NodeRecord,
  NodeStatus,
  WorkflowDetail,
  WorkflowNodeDetail,
  WorkflowRecord,
  WorkflowsChange,
  WorkflowState,
  WorkflowStorage,
  WorkflowSummary,
} from './model';
import type { DataWrites, LiveWorkflow } from './state';
import type { WorkflowEventInput } from './eventTrigger';

/** The other areas' types the parts use, imported here once (the area's one gateway to them). */
export type { EventRecorder, Refusal, Speaker };

export interface WorkflowDeps {
  readonly store: WorkflowStorage;
  readonly log: EventRecorder;
  readonly clock: Clock;
  readonly ids: IdSource;
  /** The scheduler: a node runs as one of its tasks. */
  readonly tasks: TaskRunner;
  /** Who is registered: a node whose agent is not yet registered starts when it registers. */
  readonly agents: AgentDirectory;
  /** A FAILED node with `on_failure: hitl` asks a person. */
  readonly hitl: HitlInvocations;
}

/** The actor of the engine's own events and the component of its internal errors. */
export const ACTOR = 'workflow';

/**
 * What the workflow parts share: the engine's dependencies, its kernel (one Transitions, one Guard, one KeyedTimers),
 * and its memory. Built once by Workflows.
 */
export interface Core {
  readonly deps: WorkflowDeps;
  readonly transitions: Transitions;
  readonly guard: Guard;
  /** The workflows that run (RUNNING, WAITING), by id: changed only in `tx.install` effects. */
  readonly live: Map<string, LiveWorkflow>;
  readonly indexes: StartIndexes;
  /** Timers of READY nodes with a fireAt, by node key (state.ts nodeKey); armed and disarmed through `tx`. */
  readonly timers: KeyedTimers<string>;
  /** HITL invocations being watched. */
  readonly watched: Set<string>;
  /** Listeners hear of a change once it is durable (the store's afterCommit: `tx.whenDurable`); the read cache drops it at once. */
  notify(tx: Transition, change: WorkflowsChange): void;
}

/** How a workflow moves on (progress.ts). */
export interface ProgressPart {
  setStatus(
    tx: Transition,
    live: LiveWorkflow,
    node: NodeRecord,
    to: NodeStatus,
    reason: string,
    by: string,
    details?: Record<string, unknown>,
  ): void;
  notifyNode(tx: Transition, live: LiveWorkflow, node: NodeRecord): void;
  putNode(live: LiveWorkflow, node: NodeRecord): void;
  setWorkflow(
    tx: Transition,
    live: LiveWorkflow,
    to: WorkflowState,
    reason: string,
    by: string,
    details: Record<string, unknown>,
  ): void;
  persist(live: LiveWorkflow): void;
  settle(tx: Transition, live: LiveWorkflow, by: string): void;
  letGo(tx: Transition, live: LiveWorkflow, nodeId: string): void;
  skipDependents(tx: Transition, live: LiveWorkflow, nodeId: string, status: 'FAILED' | 'SKIPPED', by: string): void;
  skip(tx: Transition, live: LiveWorkflow, start: string, reason: string, by: string): void;
  consider(tx: Transition, live: LiveWorkflow, nodeId: string, by: string): void;
  ready(tx: Transition, live: LiveWorkflow, nodeId: string, reason: string, by: string): void;
  armOrQueue(tx: Transition, live: LiveWorkflow, node: NodeRecord): void;
  reset(
    tx: Transition,
    live: LiveWorkflow,
    nodeId: string,
    reason: string,
    by: string,
    resetLoops: boolean,
    ctx?: CallContext,
  ): void;
  kick(tx: Transition, live: LiveWorkflow, by: string): void;
  queueStart(live: LiveWorkflow, nodeId: string): void;
  unblock(live: LiveWorkflow, nodeId: string): void;
}

/** A node FAILED and what a person answers (failure.ts). */
export interface FailurePart {
  fail(tx: Transition, live: LiveWorkflow, nodeId: string, reason: string, by: string, final?: boolean): void;
  finalFailure(tx: Transition, live: LiveWorkflow, node: NodeRecord, error: string, by: string): void;
  watch(workflowId: string, nodeId: string, invocationId: string): void;
  applyHitl(tx: Transition, live: LiveWorkflow, node: NodeRecord, invocation: HitlInvocation, by: string): void;
  withdraw(node: NodeRecord, reason: string, by: string, ctx: CallContext): void;
}

/** A node's end from its task's end (completion.ts). */
export interface CompletionPart {
  taskEnded(task: TaskRecord): void;
  applyOutcome(tx: Transition, live: LiveWorkflow, node: NodeRecord, task: TaskRecord, by: string): void;
  complete(
    tx: Transition,
    live: LiveWorkflow,
    nodeId: string,
    output: Record<string, unknown>,
    reason: string,
    by: string,
  ): void;
}

/** Submitting READY nodes (dispatch.ts). */
export interface DispatchPart {
  agentChanged(change: RegistryChange): void;
  scheduleDrain(): void;
  drain(): void;
  startNode(live: LiveWorkflow, nodeId: string, reason: string, by: string, ctx: CallContext): void;
}

/** workflow_data in the store (data.ts). */
export interface DataPart {
  commitWrites(live: LiveWorkflow, written: DataWrites): void;
  snapshotData(live: LiveWorkflow): void;
}

/** Workflows from the store (restore.ts). */
export interface RestorePart {
  restore(ctx: CallContext): void;
  reload(tx: Transition, workflowId: string, except: string): LiveWorkflow;
  abandon(workflowId: string, reason: string, fromScheduler?: boolean): void;
  load(record: WorkflowRecord, data?: Record<string, unknown>): LiveWorkflow;
}

/** Who may call (access.ts). */
export interface AccessPart {
  checkCreate(definition: WorkflowRecord['definition'], by: string, speaker: Speaker): void;
  checkCreator(action: 'start' | 'resume', record: WorkflowRecord, by: string, speaker: Speaker): void;
  checkRead(record: WorkflowRecord, live: LiveWorkflow | undefined, by: string, speaker: Speaker): void;
  eventSenderRefusal(
    input: WorkflowEventInput,
    record: WorkflowRecord,
    live: LiveWorkflow | undefined,
  ): Refusal | undefined;
  eventTargets(
    input: WorkflowEventInput,
    live: LiveWorkflow,
    candidates: readonly string[],
  ): { readonly waiting: readonly string[] } | Refusal;
}

/** The reads (queries.ts). */
export interface QueriesPart {
  list(limit?: number): WorkflowSummary[];
  nodeDetail(workflowId: string, nodeId: string): WorkflowNodeDetail | undefined;
  answer(workflowId: string): WorkflowDetail;
  detailOf(workflowId: string, maxNodes: number, startedOnly: boolean): WorkflowDetail | undefined;
  storedRecord(workflowId: string): WorkflowRecord | undefined;
  forgetRead(workflowId: string): void;
  stored(workflowId: string): WorkflowRecord;
  liveOrRefuse(workflowId: string, what: string): LiveWorkflow;
}

/** The parts of the engine, for the parts that call one another (wired by Workflows). */
export interface Parts {
  readonly progress: ProgressPart;
  readonly failure: FailurePart;
  readonly completion: CompletionPart;
  readonly dispatch: DispatchPart;
  readonly data: DataPart;
  readonly restore: RestorePart;
  readonly access: AccessPart;
  readonly queries: QueriesPart;
}
