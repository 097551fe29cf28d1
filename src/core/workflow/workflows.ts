import type { CallContext } from '../context';
import type { Disposable } from '../events';
import { Guard } from '../kernel/guard';
import { KeyedTimers } from '../kernel/timers';
import { CommitEmitter, Transitions, type AfterCommit, type Transition } from '../kernel/transitions';
import { COORDINATOR_SPEAKER } from '../policy/model';
import { Access } from './access';
import { Completion } from './completion';
import { Control } from './control';
import { ACTOR, type Core, type Parts, type Refusal, type Speaker, type WorkflowDeps } from './core';
import { Create, type CreateResult } from './create';
import { DataLog } from './data';
import { Dispatch } from './dispatch';
import type { WorkflowEventInput, WorkflowEventSink } from './eventTrigger';
import { Failures } from './failure';
import { StartIndexes } from './indexes';
import type {
  WorkflowDefinition,
  WorkflowDetail,
  WorkflowNodeDetail,
  WorkflowQueries,
  WorkflowsChange,
  WorkflowSummary,
} from './model';
import { Progress } from './progress';
import { Queries } from './queries';
import { Restore } from './restore';
import { unkey, type LiveWorkflow } from './state';
import { Triggers } from './triggers';

export type { WorkflowDeps } from './core';
export type { CreateResult } from './create';
export { WorkflowError } from './errors';
export { MAX_KEPT_INPUTS } from './dispatch';
export { ANSWER_NODES } from './queries';
export { WORKFLOW_COMPONENT, WORKFLOW_HITL_ACTIONS } from './notices';
export {
  MAX_AUTOMATIC_RETRIES,
  MAX_WORKFLOW_DATA_BYTES,
  automaticRetryDelay,
  inputsOf,
  outputOf,
  taskIdOf,
} from './state';

/**
 * The workflow engine (RFC §17.7; README, "Workflows"; the area: ./README.md): CreateWorkflow (validated first,
 * O(V+E)), StartWorkflow, GetWorkflowState, ResumeWorkflow, Run Node (MANUAL), Cancel. A node runs when every
 * dependency is COMPLETED, as a scheduler task for its agent (`wf:<workflow_id>:<node_id>:<run>`, submitted in the
 * transaction that marks it RUNNING); its output (the FULFILLED ACK's `result`) is written to workflow_data by
 * output_mapping, then its `route` decides the conditional edges. The engine learns of a task's end inside the
 * scheduler's transaction that ends it, so a node's COMPLETED and its task's COMPLETED commit together; after a
 * restart it reads every running workflow back, reconciles RUNNING nodes with their tasks, re-arms timers and watches
 * the HITL invocations it asked.
 *
 * Every node transition is one `workflow.node` event (from, to, reason) and every workflow transition one
 * `workflow.state` event, correlation_id = workflow_id, in the transaction of the change; a node transition writes one
 * node row. This class wires the parts (one file each, README.md) and delegates; every change goes through its
 * Transitions.
 */
export class Workflows implements WorkflowQueries, WorkflowEventSink, Disposable {
  private readonly changed = new CommitEmitter<WorkflowsChange>();
  readonly onDidChange: AfterCommit<WorkflowsChange> = this.changed.event;
  private readonly guard: Guard;
  private readonly timers: KeyedTimers<string>;
  private readonly parts: Parts;
  private readonly creation: Create;
  private readonly control: Control;
  private readonly triggers: Triggers;
  private readonly subscriptions: Disposable[] = [];
  /** The workflows that run, by id (Core.live; workflowRecovery.test reads it here). */
  private readonly live = new Map<string, LiveWorkflow>();
  /** The changes each open transition announced, told together once it is durable. */
  private readonly pendingChanges = new WeakMap<Transition, WorkflowsChange[]>();

  constructor(deps: WorkflowDeps) {
    this.guard = new Guard((context, err) => deps.log.internalError(ACTOR, context, err));
    this.timers = new KeyedTimers<string>(deps.clock, this.guard, (k) => unkey(k)[0]);
    const live = this.live;
    const parts = {} as { -readonly [K in keyof Parts]: Parts[K] };
    const core: Core = {
      deps,
      transitions: new Transitions(deps.store, this.guard),
      guard: this.guard,
      live,
      indexes: new StartIndexes(),
      timers: this.timers,
      watched: new Set(),
      notify: (tx, change) => {
        parts.queries.forgetRead(change.workflowId);
        // One durable callback per transition for all of its changes, in order (as the one afterCommit per batch before).
        const pending = this.pendingChanges.get(tx);
        if (pending) {
          pending.push(change);
          return;
        }
        const changes = [change];
        this.pendingChanges.set(tx, changes);
        tx.whenDurable(() => {
          for (const c of changes) this.changed.fire(c);
        });
      },
    };
    parts.access = new Access(deps.log);
    parts.queries = new Queries(deps.store, deps.tasks, live);
    parts.data = new DataLog(deps.store);
    parts.progress = new Progress(core, parts);
    parts.failure = new Failures(core, parts);
    parts.completion = new Completion(core, parts);
    parts.dispatch = new Dispatch(core, parts);
    parts.restore = new Restore(core, parts, (tx, l, by) => this.kick(tx, l, by));
    this.parts = parts;
    this.creation = new Create(core, parts);
    this.control = new Control(core, parts);
    this.triggers = new Triggers(core, parts);
    this.subscriptions.push(
      deps.tasks.onDidEndTask((task) => parts.completion.taskEnded(task)),
      deps.agents.onDidChange((change) => parts.dispatch.agentChanged(change)),
    );
  }

  /**
   * Validates and stores a definition (DEFINED). An empty workflow_id gets a uuid. The same workflow_id again is
   * answered as created when the definition is the same (`created` false: a retry), refused ALREADY_EXISTS otherwise.
   * `speaker`: who asks (omitted: the editor or the coordinator itself, which may do everything). An agent credential may create a workflow only when it
   * may act as every node's agent (as SubmitTask lets it submit only for agents it may act as); a `type:` target is
   * the operator's alone. Refused PERMISSION_DENIED (WorkflowError `permission`) otherwise.
   */
  create(
    input: WorkflowDefinition,
    by: string,
    ctx: CallContext,
    speaker: Speaker = COORDINATOR_SPEAKER,
  ): CreateResult {
    return this.creation.create(input, by, ctx, speaker);
  }

  /**
   * Starts a DEFINED workflow with initial workflow_data (a JSON object; '' = {}): its roots become READY. Only its
   * creator (or a credential that may act as it) and the operator may (`speaker`; omitted: the editor, allowed).
   */
  start(
    workflowId: string,
    dataText: string,
    by: string,
    _ctx: CallContext,
    speaker: Speaker = COORDINATOR_SPEAKER,
  ): WorkflowDetail {
    return this.control.start(workflowId, dataText, by, speaker);
  }

  /** Runs a READY MANUAL node now (the editor's Run Node). */
  runNode(workflowId: string, nodeId: string, by: string, ctx: CallContext): WorkflowDetail {
    return this.control.runNode(workflowId, nodeId, by, ctx);
  }

  /**
   * ResumeWorkflow: `nodeId` and every node downstream of it back to PENDING, `dataText` merged over workflow_data by
   * top-level key, the workflow running again (control.ts says when it is refused). Only its creator (or a credential
   * that may act as it) and the operator may (`speaker`; omitted: the editor, allowed).
   */
  resume(
    workflowId: string,
    nodeId: string,
    dataText: string,
    by: string,
    ctx: CallContext,
    speaker: Speaker = COORDINATOR_SPEAKER,
  ): WorkflowDetail {
    return this.control.resume(workflowId, nodeId, dataText, by, ctx, speaker);
  }

  /** Cancels a workflow: running tasks cancelled, nodes not finished SKIPPED, pending questions withdrawn, CANCELLED. */
  cancel(workflowId: string, reason: string, by: string, ctx: CallContext): WorkflowDetail {
    return this.control.cancel(workflowId, reason, by, ctx);
  }

  list(limit?: number): WorkflowSummary[] {
    return this.parts.queries.list(limit);
  }

  /**
   * A workflow's definition, data and its nodes' states, the first `maxNodes` in the author's order (all when omitted),
   * without any node's inputs: O(maxNodes) for a running workflow, whatever its size (the Workflows view asks for 500).
   */
  detail(workflowId: string, maxNodes?: number): WorkflowDetail | undefined {
    return this.parts.queries.detailOf(
      workflowId,
      maxNodes === undefined ? Infinity : Math.max(0, Math.floor(maxNodes)),
      false,
    );
  }

  /**
   * GetWorkflowState: every node (the server bounds what it sends). Only its creator, an agent one of its nodes names,
   * or the operator may read it (`speaker`; omitted: the editor, allowed); an unknown id is undefined for anyone.
   */
  state(workflowId: string, speaker: Speaker = COORDINATOR_SPEAKER, by = 'operator'): WorkflowDetail | undefined {
    const live = this.live.get(workflowId);
    const record = live?.record ?? this.parts.queries.storedRecord(workflowId);
    if (!record) return undefined;
    this.parts.access.checkRead(record, live, by, speaker);
    return this.parts.queries.detailOf(workflowId, Infinity, false);
  }

  /** One node with its inputs (what it was given at its last run, or would be given now), its workflow's summary and data. */
  nodeDetail(workflowId: string, nodeId: string): WorkflowNodeDetail | undefined {
    return this.parts.queries.nodeDetail(workflowId, nodeId);
  }

  /** A workflow event (eventTrigger.ts): taken in the envelope's transaction; the nodes start right after. */
  takeEvent(
    input: WorkflowEventInput,
    _ctx: { readonly correlationId: string },
    settle: (result: Record<string, unknown>) => void,
  ): Refusal | undefined {
    return this.triggers.takeEvent(input, settle);
  }

  /**
   * After a restart: every RUNNING / WAITING workflow read back. RUNNING nodes are reconciled with their task (COMPLETED
   * while we were down → its output applied; still open → waited for; gone → FAILED), HITL answers given meanwhile
   * applied, READY nodes started or their timers re-armed. A COMPLETED node is never run again by this.
   */
  restore(ctx: CallContext): void {
    this.parts.restore.restore(ctx);
  }

  /** Every node of a restored workflow that can move does (progress.ts kick); kept on the facade as the seam workflowRecovery.test injects a restore fault at. */
  private kick(tx: Transition, live: LiveWorkflow, by: string): void {
    this.parts.progress.kick(tx, live, by);
  }

  dispose(): void {
    if (this.guard.isStopped) return;
    this.guard.stop();
    for (const s of this.subscriptions) s.dispose();
    this.timers.clear();
    this.changed.dispose();
  }
}
