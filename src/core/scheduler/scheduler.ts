import { ActivityBufferFullError, type ActivitySink } from '../activity/model';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import type { IdSource } from '../ids';
import { PAYLOAD_LIMITS } from '../limits';
import type { EventLog } from '../log/eventLog';
import { STATE_TIMEOUT_CODES, isAgentState, pathTo, refusalReason } from '../registry/lifecycle';
import type { AgentLifecycle, AgentRecord, RegistryChange, TransitionCause } from '../registry/model';
import type { CoordinatorOutbox, OutboxUpdate } from '../router/model';
import type { WorktreeLocator } from '../worktree/model';
import {
  MAX_PRIORITY, MIN_PRIORITY, TERMINAL_TASK_STATES,
  type ControlCommand, type DispatchGate, type RunningTasks, type ScopeWire, type SchedulerOptions, type SchedulerStorage, type SubmitResult, type TaskChange, type TaskRecord,
  type TaskRunner, type TaskState, type TaskSubmission, type WaitingReason,
} from './model';
import { RunningIndex } from './concurrency';
import { formatScope, isScopeRefusal, parseScope, toWire } from './scope';
import { TargetQueue, before, mergedOrder } from './taskQueue';

export interface SchedulerDeps {
  readonly store: SchedulerStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly agents: AgentLifecycle;
  readonly outbox: CoordinatorOutbox;
  readonly activity: ActivitySink;
  readonly places: WorktreeLocator;
  readonly gate: DispatchGate;
}

/** Why an operation on a task or agent was refused (the API maps it onto CoordinatorApiError, the server onto a status). */
export class SchedulerError extends Error {
  constructor(readonly code: 'not_found' | 'refused' | 'invalid', message: string, readonly sw4rmCode?: string) {
    super(message);
    this.name = 'SchedulerError';
  }
}

export interface TaskQuery {
  /** Only tasks for (target) or on (assigned) this agent. */
  readonly agentId?: string;
  /** Also terminal tasks (newest ended first, after the open ones); default true. */
  readonly includeFinished?: boolean;
  /** At most this many finished tasks (default 200). */
  readonly finishedLimit?: number;
  /** At most this many open tasks, the first in dispatch order (default all); `counts()` says how many there are. */
  readonly openLimit?: number;
}

/** How many tasks are open, by where they are. */
export interface TaskCounts {
  readonly queued: number;
  /** Dispatched, running or being preempted. */
  readonly running: number;
}

/** A dispatch withdrawn before the agent started (run refused, timed out, not delivered) this many times ends the task. */
export const MAX_WITHDRAWN_DISPATCHES = 3;
/** How many queued candidates one dispatch attempt asks the gate about before it gives up for now (bounded work). */
const MAX_CANDIDATES = 32;
/** Reconciliation of the activity buffer and pruning of finished tasks. */
const HOUSEKEEPING_MS = 60_000;
const TYPE_PREFIX = 'type:';
const SCHEDULER = 'scheduler';
/** The ACK note of a `preempt_request` that declares a non-preemptible section: `non_preemptible:<ms>`. */
const NON_PREEMPTIBLE = /^non_preemptible:(\d{1,12})$/;
/** The waiting reasons the gate gives (its held tasks). */
const GATE_WAITING: ReadonlySet<string> = new Set(['conflict_decision', 'serialised_after', 'max_parallel_instances']);
const RUNNING_STATES: ReadonlySet<TaskState> = new Set(['DISPATCHED', 'RUNNING', 'PREEMPTING']);

/** What occupies an agent: its task (dispatched, running, preempting), or a cancelled task whose `terminate` is pending. */
interface Slot {
  readonly taskId: string;
  /** The cancelled task kept until the agent answers `terminate` (it is no longer open). */
  readonly cancelled?: TaskRecord;
}

/**
 * The scheduler (RFC §7, §9): tasks queued by priority then arrival, dispatched to agents as CONTROL `run` envelopes,
 * completed by the agent's ACKs, preempted cooperatively (forced after a non-preemptible section's maximum), persisted.
 * Every task's log events and CONTROL envelopes carry correlation_id = task_id.
 *
 * Structure (so that submit + dispatch stay O(log n) with 100,000 queued tasks and 1,000 agents): open tasks by id;
 * queued tasks per target (agent id or `type:<name>`) in a TargetQueue (40 FIFOs), except those the gate holds (gateHeld:
 * out of the queue until a task ends or the gate changes, so they never hold up the tasks behind them); idle agents by id and by type;
 * what each agent runs (slots) and, kept in step with them, the running tasks indexed by type, repository and resource
 * (runningIndex: what the gate's mayStart and preemption ask, never a walk over every running task); open tasks by job key
 * (for the gate's duplicate check).
 */
export class Scheduler implements TaskRunner, Disposable {
  private readonly changed = new Emitter<TaskChange>();
  readonly onDidChange: Event<TaskChange> = this.changed.event;
  private readonly ended = new Emitter<TaskRecord>();
  /** A task ended: fired inside the transaction that records its end (TaskRunner.onDidEndTask). */
  readonly onDidEndTask: Event<TaskRecord> = this.ended.event;

  private readonly open = new Map<string, TaskRecord>();
  private readonly queues = new Map<string, TargetQueue>();
  private readonly byJob = new Map<string, Set<TaskRecord>>();
  private readonly slots = new Map<string, Slot>();
  private readonly idle = new Set<string>();
  private readonly idleByType = new Map<string, Set<string>>();
  /** Each agent's state as the scheduler last saw it (the timeout that failed an agent is the one of its previous state). */
  private readonly agentStates = new Map<string, string>();
  /** Agents told to shut down by this process (the reason); after a restart the agent's SHUTTING_DOWN state says it. */
  private readonly shuttingDown = new Map<string, string>();
  private readonly timers = new Map<string, Disposable>();
  /**
   * Queued tasks the gate last answered `waiting` (a limit, a serialisation, a decision), kept out of their TargetQueue
   * so that they never hold up the tasks behind them; put back in it when a task ends or the gate changes.
   */
  private readonly gateHeld = new Set<TaskRecord>();
  private readonly subscriptions: Disposable[] = [];
  /** The open tasks in the slots, indexed for the gate and preemption (kept in step with slots and open: syncRunning). */
  private readonly runningIndex: RunningIndex;
  /** Each idle agent's type (its key in idleByType). */
  private readonly idleType = new Map<string, string>();
  private lastSeq: number;
  private readonly dirty = new Set<string>();
  private pumping = false;
  private pumpQueued = false;
  private housekeepingTimer: Disposable | undefined;
  private reconcileFailure = '';
  private disposed = false;

  constructor(private readonly deps: SchedulerDeps, private readonly options: SchedulerOptions) {
    const store = deps.store;
    this.runningIndex = new RunningIndex((task) => deps.gate.typeOf(task));
    this.lastSeq = store.scheduler.maxSeq();
    for (const task of store.scheduler.listOpen()) this.restore(task);
    // Cancelled tasks whose agent had not answered `terminate`: the agent stays occupied, the grace runs on.
    for (const task of store.scheduler.listTerminating()) {
      if (!this.slots.has(task.assignedAgentId)) {
        this.slots.set(task.assignedAgentId, { taskId: task.taskId, cancelled: task });
        this.armCancelGrace(task);
      } else {
        store.transaction(() => this.settleTerminate(task));
      }
    }
    for (const agent of deps.agents.list()) {
      this.agentStates.set(agent.descriptor.agentId, agent.state);
      this.refreshIdle(agent.descriptor.agentId);
    }
    // A task restored on an agent that is no longer registered cannot finish: cleaned up as if the agent left.
    for (const agentId of [...this.slots.keys()]) {
      const state = deps.agents.get(agentId)?.state;
      if (state === undefined) this.onAgentLeft(agentId, 'not registered when the coordinator started');
      else if (state === 'FAILED_STATE' || state === 'INITIALIZING') this.onAgentUnavailable(agentId, 'AGENT_UNAVAILABLE', `agent ${agentId} was ${state} when the coordinator started`);
    }
    this.subscriptions.push(
      deps.agents.onDidChange((change) => this.safely('agent_change', () => this.onAgentChange(change))),
      deps.outbox.onDidUpdateOutbox((update) => this.safely('outbox_update', () => this.onOutbox(update))),
      deps.gate.onDidChange(() => this.safely('gate_change', () => this.onGateChange())),
    );
    this.housekeeping();
    // Tasks the gate held when the coordinator stopped are asked again (a decision taken meanwhile applies now).
    if (this.gateHeld.size > 0) this.safely('gate_change', () => this.onGateChange());
    for (const agentId of this.idle) this.dirty.add(agentId);
    this.schedulePump();
  }

  // ------------------------------------------------------------------------------------------ submit

  /** SubmitTask (RFC §7.1, §9): validated, admitted by the gate, queued, dispatched when it can be. */
  submit(submission: TaskSubmission, ctx: CallContext): SubmitResult {
    const refused = (code: string, reason: string): SubmitResult => {
      this.deps.log.record({
        correlationId: submission.taskId || ctx.correlationId, actor: SCHEDULER, eventType: 'task.refused', level: 'WARN',
        details: { task_id: submission.taskId, target: String(submission.target).slice(0, 256), code, reason, submitted_by: submission.submittedBy },
      });
      return { accepted: false, code, reason: `${code}: ${reason}` };
    };
    const limits = FIELD_LIMITS.scheduler;
    const priority = submission.priority;
    if (!Number.isInteger(priority) || priority < MIN_PRIORITY || priority > MAX_PRIORITY) {
      return refused('VALIDATION_ERROR', `priority must be an integer from ${MIN_PRIORITY} (highest) to ${MAX_PRIORITY} (lowest), not ${String(priority).slice(0, 40)}`);
    }
    const target = submission.target ?? '';
    if (target === '') return refused('VALIDATION_ERROR', 'agent_id is required: an agent id or type:<agent type>');
    const targetRefusal = identifierRefusal('agent_id', target, limits.target);
    if (targetRefusal) return refused('VALIDATION_ERROR', targetRefusal);
    const agentType = target.startsWith(TYPE_PREFIX) ? target.slice(TYPE_PREFIX.length) : undefined;
    if (agentType === '') return refused('VALIDATION_ERROR', 'type: needs an agent type (the descriptor name), e.g. type:coder');
    if (agentType === undefined && target.includes(':')) return refused('VALIDATION_ERROR', `agent_id ${target.slice(0, 80)} is neither an agent id (no ':') nor type:<agent type>`);
    if (submission.taskId) {
      const idRefusal = identifierRefusal('task_id', submission.taskId, limits.task_id);
      if (idRefusal) return refused('VALIDATION_ERROR', idRefusal);
    }
    const scope = parseScope(submission.scope);
    if (isScopeRefusal(scope)) return refused('VALIDATION_ERROR', scope);
    const contentType = submission.contentType || 'application/json';
    const contentRefusal = identifierRefusal('content_type', contentType, FIELD_LIMITS.envelope.content_type);
    if (contentRefusal) return refused('VALIDATION_ERROR', contentRefusal);
    const params = paramsOnWire(submission.params, contentType);
    if (typeof params === 'object' && params !== null && 'refusal' in params) return refused('VALIDATION_ERROR', params.refusal);
    const taskId = submission.taskId || this.deps.ids.uuid();
    const size = Buffer.byteLength(JSON.stringify(runCommand(taskId, params.value, contentType, toWire(scope), priority)), 'utf8');
    if (size > PAYLOAD_LIMITS.CONTROL) {
      return refused('OVERSIZE_PAYLOAD', `the run command for these params is ${size} bytes; a CONTROL envelope holds at most ${PAYLOAD_LIMITS.CONTROL}`);
    }
    if (this.open.has(taskId) || this.deps.store.scheduler.get(taskId)) return refused('DUPLICATE_DETECTED', `task ${taskId.slice(0, 128)} was already submitted`);
    if (agentType === undefined) {
      const agent = this.deps.agents.get(target);
      if (!agent) return refused('NO_ROUTE', `no agent '${target.slice(0, 128)}' is registered`);
      if (agent.state === 'SHUTTING_DOWN' || this.shuttingDown.has(target)) return refused('AGENT_SHUTDOWN', `agent ${target} is shutting down`);
    }
    if (this.open.size >= this.options.maxQueuedTasks) {
      return refused('BUFFER_FULL', `the scheduler holds ${this.open.size} open tasks (limit ${this.options.maxQueuedTasks})`);
    }
    const now = this.deps.clock.now();
    const task: TaskRecord = {
      taskId, target, assignedAgentId: '', priority, seq: this.lastSeq + 1, params: Buffer.from(submission.params), contentType,
      scopeText: submission.scope, scope, jobKey: this.deps.gate.jobKey(target, contentType, submission.params), submittedBy: submission.submittedBy,
      submittedAt: now, state: 'QUEUED', waiting: null, runMessageId: '', preemptMessageId: '', preemptedBy: '', nonPreemptibleUntil: null,
      dispatches: 0, withdrawals: 0, errorCode: '', note: '', startedAt: null, endedAt: null, updatedAt: now, agentType: '', terminateMessageId: '', deadline: null,
      result: '',
    };
    const sameJob = [...(this.byJob.get(task.jobKey) ?? [])];
    const admission = this.deps.gate.admit(task, sameJob, { ...ctx, correlationId: taskId });
    if (admission && 'refused' in admission) return refused(admission.code, admission.reason);
    if (admission && 'pending' in admission) task.waiting = { kind: 'conflict_decision', invocationId: admission.pending, withTaskId: sameJob[0]?.taskId ?? '' };
    else task.waiting = this.initialWaiting(task);
    if (admission) this.gateHeld.add(task);
    this.lastSeq = task.seq;
    this.deps.store.transaction(() => {
      this.deps.store.scheduler.put(task);
      this.event(task, 'task.submitted', {
        target, priority, seq: task.seq, scope: formatScope(scope), content_type: contentType, params_bytes: task.params.byteLength,
        submitted_by: submission.submittedBy, waiting: task.waiting?.kind, job_key: task.jobKey,
      });
    });
    this.enqueue(task);
    this.changed.fire({ kind: 'submitted', task });
    // A task waiting for the gate's admission cannot take an agent yet: nobody is asked to yield for it.
    if (!this.gateHeld.has(task)) this.considerPreemption(task, ctx);
    this.wakeFor(task);
    this.pump();
    const current = this.open.get(taskId) ?? this.deps.store.scheduler.get(taskId) ?? task;
    return { accepted: true, task: current, reason: current.state === 'QUEUED' && current.waiting ? describeWaiting(current.waiting) : '' };
  }

  private initialWaiting(task: TaskRecord): WaitingReason | null {
    if (task.target.startsWith(TYPE_PREFIX)) {
      const type = task.target.slice(TYPE_PREFIX.length);
      return this.idleByType.get(type)?.size ? null : { kind: 'no_agent_of_type', agentType: type };
    }
    const slot = this.slots.get(task.target);
    if (slot) return { kind: 'agent_busy', agentId: task.target };
    const agent = this.deps.agents.get(task.target);
    if (agent && !this.idle.has(task.target)) return { kind: 'agent_not_runnable', agentId: task.target, state: agent.state };
    return null;
  }

  // ------------------------------------------------------------------------------------------ queries

  task(taskId: string): TaskRecord | undefined {
    return this.open.get(taskId) ?? this.deps.store.scheduler.get(taskId);
  }

  /** Open tasks in dispatch order (priority, then arrival), then finished ones, newest first. */
  tasks(query: TaskQuery = {}): TaskRecord[] {
    const mine = (t: TaskRecord) => !query.agentId || t.target === query.agentId || t.assignedAgentId === query.agentId;
    const all = [...this.open.values()].filter(mine).sort((a, b) => (before(a, b) ? -1 : 1));
    const open = query.openLimit === undefined ? all : all.slice(0, Math.max(0, query.openLimit));
    if (query.includeFinished === false) return open;
    const limit = query.finishedLimit ?? 200;
    const finished = this.deps.store.scheduler.listFinished(query.agentId ? Math.max(limit * 4, 1000) : limit).filter(mine).slice(0, limit);
    return [...open, ...finished];
  }

  counts(): TaskCounts {
    let running = 0;
    for (const task of this.open.values()) if (RUNNING_STATES.has(task.state)) running++;
    return { queued: this.open.size - running, running };
  }

  /** Whether the task is known and not terminal (the activity buffer's reconciliation). */
  isActive(_agentId: string, taskId: string): boolean {
    return this.open.has(taskId);
  }

  // ------------------------------------------------------------------------------------------ dispatch

  private enqueue(task: TaskRecord): void {
    this.open.set(task.taskId, task);
    let jobs = this.byJob.get(task.jobKey);
    if (!jobs) this.byJob.set(task.jobKey, jobs = new Set());
    jobs.add(task);
    if (task.state === 'QUEUED') {
      if (!this.gateHeld.has(task)) this.queueOf(task.target).insert(task);
    } else if (RUNNING_STATES.has(task.state)) {
      this.slots.set(task.assignedAgentId, { taskId: task.taskId });
      this.syncRunning(task.assignedAgentId);
    }
  }

  private queueOf(target: string): TargetQueue {
    let queue = this.queues.get(target);
    if (!queue) this.queues.set(target, queue = new TargetQueue());
    return queue;
  }

  /** Takes `task` out of its target's queue; an emptied queue is dropped. */
  private unqueue(task: TaskRecord): void {
    const queue = this.queues.get(task.target);
    if (!queue) return;
    queue.remove(task);
    if (queue.size === 0) this.queues.delete(task.target);
  }

  /** The gate holds `task`: out of its queue, into gateHeld. */
  private hold(task: TaskRecord): void {
    this.gateHeld.add(task);
    this.unqueue(task);
  }

  /** Every task the gate held goes back into its queue (to be asked again), and an idle agent is woken for each. */
  private releaseHeld(): void {
    for (const task of [...this.gateHeld]) {
      this.gateHeld.delete(task);
      if (task.state !== 'QUEUED' || this.open.get(task.taskId) !== task) continue;
      this.queueOf(task.target).insert(task);
      this.wakeFor(task);
    }
  }

  /** The queued tasks for `target` (an agent id): in its queue and held by the gate. */
  private queuedFor(target: string): TaskRecord[] {
    const queued = [...(this.queues.get(target)?.ordered() ?? [])];
    for (const task of this.gateHeld) if (task.target === target) queued.push(task);
    return queued;
  }

  /**
   * A decision settled or a limit changed: the tasks the gate held are asked again at once, so that a denied duplicate
   * ends now (not when an agent is next free); idle agents try again.
   */
  private onGateChange(): void {
    for (const task of [...this.gateHeld]) {
      if (task.state !== 'QUEUED' || !this.open.has(task.taskId)) {
        this.gateHeld.delete(task);
        continue;
      }
      const type = task.target.startsWith(TYPE_PREFIX) ? task.target.slice(TYPE_PREFIX.length) : this.deps.agents.get(task.target)?.descriptor.name;
      if (type === undefined) continue;
      const ctx: CallContext = { correlationId: task.taskId };
      const verdict = this.deps.gate.mayStart(task, type, this.running(), ctx);
      if (verdict.go) {
        this.gateHeld.delete(task);
        this.queueOf(task.target).insert(task);
        this.wakeFor(task);
      } else if ('refuse' in verdict) this.end(task, 'FAILED', verdict.refuse.code, verdict.refuse.reason, ctx, 'gate');
      else this.setWaiting(task, verdict.waiting);
    }
    for (const agentId of this.idle) this.dirty.add(agentId);
    this.schedulePump();
  }

  /** Marks one idle agent that could take `task` for the next dispatch round. */
  private wakeFor(task: TaskRecord): void {
    if (!task.target.startsWith(TYPE_PREFIX)) {
      if (this.idle.has(task.target)) this.dirty.add(task.target);
      return;
    }
    const first = this.idleByType.get(task.target.slice(TYPE_PREFIX.length))?.values().next();
    if (first && !first.done) this.dirty.add(first.value);
  }

  private schedulePump(): void {
    if (this.pumpQueued || this.disposed) return;
    this.pumpQueued = true;
    queueMicrotask(() => {
      this.pumpQueued = false;
      this.safely('dispatch', () => this.pump());
    });
  }

  /** Tries to give every agent marked dirty its next task. Re-entrant calls only mark: the running loop picks them up. */
  private pump(): void {
    if (this.pumping || this.disposed) return;
    this.pumping = true;
    try {
      const tried = new Set<string>();
      while (this.dirty.size > 0) {
        const agentId = this.dirty.values().next().value as string;
        this.dirty.delete(agentId);
        if (tried.has(agentId)) continue;
        tried.add(agentId);
        this.tryDispatch(agentId);
      }
    } finally {
      this.pumping = false;
    }
  }

  /** The running tasks (the open tasks in the slots), as the gate asks about them. */
  private running(): RunningTasks {
    return this.runningIndex;
  }

  /** The slot of `agentId` changed (or its task left `open`): the running index follows. O(log n). */
  private syncRunning(agentId: string): void {
    const slot = this.slots.get(agentId);
    this.runningIndex.set(agentId, slot ? this.open.get(slot.taskId) : undefined);
  }

  /** Gives `agentId` the first eligible queued task for it (by id or by its type), when it is idle. */
  private tryDispatch(agentId: string): void {
    if (!this.idle.has(agentId)) return;
    const agent = this.deps.agents.get(agentId);
    if (!agent) return;
    const type = agent.descriptor.name;
    // Tasks the gate holds leave the queue, so each round looks further; a round that held or ended none is the last.
    for (;;) {
      const candidates: TaskRecord[] = [];
      for (const task of mergedOrder(this.queues.get(agentId), this.queues.get(TYPE_PREFIX + type))) {
        candidates.push(task);
        if (candidates.length >= MAX_CANDIDATES) break;
      }
      if (candidates.length === 0) return;
      let progressed = false;
      for (const task of candidates) {
        if (task.state !== 'QUEUED' || !this.open.has(task.taskId)) continue;
        const ctx: CallContext = { correlationId: task.taskId };
        const verdict = this.deps.gate.mayStart(task, type, this.running(), ctx);
        if (verdict.go) {
          this.dispatch(task, agent, ctx);
          if (!this.idle.has(agentId)) return;
          progressed = true;
          continue;
        }
        progressed = true;
        if ('refuse' in verdict) {
          this.end(task, 'FAILED', verdict.refuse.code, verdict.refuse.reason, ctx, 'gate');
          continue;
        }
        this.hold(task);
        this.setWaiting(task, verdict.waiting);
      }
      if (!progressed || !this.idle.has(agentId)) return;
    }
  }

  private setWaiting(task: TaskRecord, waiting: WaitingReason | null): void {
    if (JSON.stringify(task.waiting) === JSON.stringify(waiting)) return;
    task.waiting = waiting;
    task.updatedAt = this.deps.clock.now();
    this.deps.store.transaction(() => {
      this.deps.store.scheduler.put(task);
      this.event(task, 'task.waiting', { waiting: waiting?.kind ?? '', reason: waiting ? describeWaiting(waiting) : '' });
    });
    this.changed.fire({ kind: 'changed', task });
  }

  private dispatch(task: TaskRecord, agent: AgentRecord, ctx: CallContext): void {
    const agentId = agent.descriptor.agentId;
    const now = this.deps.clock.now();
    const resumed = agent.state === 'SUSPENDED';
    let refusal: { code: string; reason: string } | undefined;
    this.deps.store.transaction(() => {
      this.beginActivity(task, agentId, ctx);
      const params = paramsOnWire(task.params, task.contentType);
      const command = runCommand(task.taskId, 'value' in params ? params.value : null, task.contentType, toWire(task.scope), task.priority);
      const sent = this.sendControl(agentId, command, task.taskId, ctx);
      if (!sent.accepted) {
        refusal = { code: sent.code, reason: sent.reason };
        this.endActivity(agentId, task.taskId, '', ctx);
        return;
      }
      this.unqueue(task);
      this.gateHeld.delete(task);
      const from = task.state;
      task.state = 'DISPATCHED';
      task.assignedAgentId = agentId;
      task.agentType = agent.descriptor.name;
      task.runMessageId = sent.messageId;
      task.waiting = null;
      task.dispatches++;
      task.updatedAt = now;
      this.deps.store.scheduler.put(task);
      this.event(task, 'task.dispatched', { agent_id: agentId, run_message_id: sent.messageId, dispatches: task.dispatches, resumed });
      this.stateEvent(task, from, { agent_id: agentId });
      this.slots.set(agentId, { taskId: task.taskId });
      this.syncRunning(agentId);
      this.moveAgent(agentId, resumed ? ['RESUMED'] : ['SCHEDULED'], { by: 'task', reason: `task ${task.taskId} dispatched`, taskId: task.taskId }, ctx);
      this.refreshIdle(agentId);
    });
    if (refusal) {
      this.withdrawn(task, agentId, refusal.code, `the run could not be sent to ${agentId}: ${refusal.reason}`, ctx, false);
      return;
    }
    this.changed.fire({ kind: 'changed', task });
  }

  /**
   * The dispatch to `agentId` was withdrawn before the agent started (run refused / not delivered / not sent, or the
   * agent re-registered or failed): the task goes back to the queue, or, after MAX_WITHDRAWN_DISPATCHES withdrawals
   * (yields do not count), ends FAILED with that code. A sent run's agent goes back to idle unless `moveAgent` is false.
   */
  private withdrawn(task: TaskRecord, agentId: string, code: string, reason: string, ctx: CallContext, wasSent: boolean, moveAgent = true): void {
    task.withdrawals++;
    const freeAgent = (): void => {
      this.endActivity(agentId, task.taskId, '', ctx);
      if (this.slots.get(agentId)?.taskId === task.taskId) this.slots.delete(agentId);
      this.syncRunning(agentId);
      if (moveAgent) this.moveAgent(agentId, withdrawWay(this.deps.agents.get(agentId)?.state), { by: 'task', reason: `run of ${task.taskId} withdrawn: ${code}`, taskId: task.taskId }, ctx);
    };
    if (task.withdrawals >= MAX_WITHDRAWN_DISPATCHES) {
      this.deps.store.transaction(() => {
        this.end(task, 'FAILED', code, `${reason} (${task.withdrawals} dispatches withdrawn)`, ctx, 'withdrawn');
        if (wasSent) freeAgent();
      });
      this.refreshIdle(agentId);
      this.schedulePump();
      return;
    }
    this.deps.store.transaction(() => {
      const from = task.state;
      this.clearTimer(task.taskId);
      if (wasSent) freeAgent();
      this.requeue(task, { kind: 'agent_not_runnable', agentId, state: this.deps.agents.get(agentId)?.state ?? 'unknown' });
      this.event(task, 'task.dispatch_withdrawn', { agent_id: agentId, code, reason, dispatches: task.dispatches, withdrawals: task.withdrawals }, 'WARN');
      this.stateEvent(task, from, { agent_id: agentId, error_code: code });
    });
    this.refreshIdle(agentId);
    this.changed.fire({ kind: 'changed', task });
    this.wakeFor(task);
    this.schedulePump();
  }

  /** Back to QUEUED at its priority and original seq. Runs inside the caller's transaction. */
  private requeue(task: TaskRecord, waiting: WaitingReason): void {
    task.state = 'QUEUED';
    task.waiting = waiting;
    task.runMessageId = '';
    task.preemptMessageId = '';
    task.terminateMessageId = '';
    task.preemptedBy = '';
    task.nonPreemptibleUntil = null;
    task.deadline = null;
    task.assignedAgentId = '';
    task.agentType = '';
    task.updatedAt = this.deps.clock.now();
    this.deps.store.scheduler.put(task);
    this.queueOf(task.target).insert(task);
  }

  // ------------------------------------------------------------------------------------------ agent ACKs

  private onOutbox(update: OutboxUpdate): void {
    // The `shutdown` command is known by its correlation id (stored with the envelope: also after a restart).
    if (update.correlationId === shutdownCorrelation(update.recipientId)) {
      this.onShutdownAck(update);
      return;
    }
    const slot = this.slots.get(update.recipientId);
    if (slot?.cancelled && slot.cancelled.terminateMessageId === update.messageId) {
      this.onCancelledTerminateAck(slot.cancelled, update);
      return;
    }
    const task = this.open.get(update.correlationId);
    if (!task || task.assignedAgentId !== update.recipientId) return;
    const ctx: CallContext = { correlationId: task.taskId };
    if (update.messageId === task.runMessageId) this.onRunUpdate(task, update, ctx);
    else if (update.messageId === task.preemptMessageId) this.onPreemptUpdate(task, update, ctx);
    else if (update.messageId === task.terminateMessageId) this.onTerminateUpdate(task, update, ctx);
  }

  private onRunUpdate(task: TaskRecord, update: OutboxUpdate, ctx: CallContext): void {
    const agentId = task.assignedAgentId;
    switch (update.state) {
      case 'RECEIVED':
      case 'READ': {
        if (task.state === 'DISPATCHED') {
          const from = task.state;
          task.state = 'RUNNING';
          task.startedAt ??= this.deps.clock.now();
          task.updatedAt = this.deps.clock.now();
          this.deps.store.scheduler.put(task);
          this.stateEvent(task, from, { agent_id: agentId, ack: update.state });
          this.changed.fire({ kind: 'changed', task });
        }
        this.moveAgent(agentId, ['RUNNING'], { by: 'task', reason: `task ${task.taskId} started (ACK ${update.state})`, taskId: task.taskId }, ctx, true);
        return;
      }
      case 'FULFILLED':
        if (update.note === 'yielded' && task.state === 'PREEMPTING') this.yielded(task, ctx);
        else this.finished(task, 'COMPLETED', '', update.note, ctx, update.result);
        return;
      case 'FAILED':
      case 'REJECTED':
      case 'TIMED_OUT':
        if (update.byAck && update.state === 'FAILED') {
          this.finished(task, 'FAILED', update.errorCode, update.note, ctx);
        } else if (!this.deps.agents.get(agentId)) {
          return; // the agent left: its cleanup ends the task
        } else if (update.state === 'REJECTED' || task.state === 'DISPATCHED' || notStarted(this.deps.agents.get(agentId)?.state)) {
          // Refused or never answered before the agent started (it is still SCHEDULED / RESUMED): back to the queue.
          this.withdrawn(task, agentId, update.errorCode, update.note, ctx, true);
        } else {
          // The router ended a run the agent had started (it left, a delivery failed): the task failed.
          this.finished(task, 'FAILED', update.errorCode, update.note, ctx);
        }
        return;
      default:
    }
  }

  /** The task ended by the agent's answer (or the router's end of its run): the agent is free again. */
  private finished(task: TaskRecord, state: 'COMPLETED' | 'FAILED', code: string, note: string, ctx: CallContext, result = ''): void {
    const agentId = task.assignedAgentId;
    this.end(task, state, code, note, ctx, 'agent', result);
    this.releaseAgent(agentId, task.taskId, `task ${task.taskId} ${state.toLowerCase()}`, ctx);
  }

  /** Frees the agent after its task: → COMPLETED → RUNNABLE (from wherever its run left it). */
  private releaseAgent(agentId: string, taskId: string, reason: string, ctx: CallContext): void {
    if (this.slots.get(agentId)?.taskId === taskId) this.slots.delete(agentId);
    this.syncRunning(agentId);
    const agent = this.deps.agents.get(agentId);
    if (agent && !this.shuttingDown.has(agentId)) this.moveAgent(agentId, doneWay(agent.state), { by: 'task', reason, taskId }, ctx);
    this.refreshIdle(agentId);
    this.dirty.add(agentId);
    this.schedulePump();
  }

  // ------------------------------------------------------------------------------------------ preemption

  /** A new task numerically lower than a running one it could take: that agent is asked to yield (RFC §7.1). */
  private considerPreemption(task: TaskRecord, ctx: CallContext): void {
    let victim: TaskRecord | undefined;
    if (task.target.startsWith(TYPE_PREFIX)) {
      const type = task.target.slice(TYPE_PREFIX.length);
      if (this.idleByType.get(type)?.size) return;
      // The numerically highest priority first, then the latest arrival: the first that can be asked is the victim.
      for (const running of this.runningIndex.byPreemptionRank(type, task.priority)) {
        if (running.agentType !== type || running.state === 'PREEMPTING' || running.priority <= task.priority) continue;
        if (this.shuttingDown.has(running.assignedAgentId)) continue;
        victim = running;
        break;
      }
    } else {
      const slot = this.slots.get(task.target);
      const running = slot && !slot.cancelled ? this.open.get(slot.taskId) : undefined;
      if (running && running.state !== 'PREEMPTING' && running.priority > task.priority) victim = running;
    }
    if (victim) this.requestPreemption(victim, task.taskId, task.priority, `task ${task.taskId} of priority ${task.priority} is waiting`, { ...ctx, correlationId: victim.taskId });
  }

  /**
   * RequestPreemption: a preempt_request to the agent running `taskId` (or the agent's running task when taskId is '').
   * The yielded task goes back to the queue.
   */
  preempt(agentId: string, taskId: string, reason: string, ctx: CallContext): { readonly enqueued: boolean; readonly reason: string } {
    const slot = this.slots.get(agentId);
    const id = taskId || (slot && !slot.cancelled ? slot.taskId : '');
    const task = id ? this.open.get(id) : undefined;
    if (!task || !RUNNING_STATES.has(task.state) || (agentId && task.assignedAgentId !== agentId)) {
      return { enqueued: false, reason: id ? `task ${id} is not running${agentId ? ` on ${agentId}` : ''}` : `agent ${agentId} runs no task` };
    }
    if (task.state === 'PREEMPTING') return { enqueued: false, reason: `task ${task.taskId} is already being preempted` };
    const sent = this.requestPreemption(task, '', task.priority, reason || 'preemption requested', { ...ctx, correlationId: task.taskId });
    return sent ? { enqueued: true, reason: '' } : { enqueued: false, reason: `the preempt_request could not be sent to ${task.assignedAgentId}` };
  }

  private requestPreemption(task: TaskRecord, byTaskId: string, byPriority: number, reason: string, ctx: CallContext): boolean {
    const agentId = task.assignedAgentId;
    const now = this.deps.clock.now();
    let ok = false;
    this.deps.store.transaction(() => {
      const command: ControlCommand = { command: 'preempt_request', task_id: task.taskId, reason, by_task_id: byTaskId, by_priority: byPriority };
      const sent = this.sendControl(agentId, command, task.taskId, ctx);
      if (!sent.accepted) {
        this.event(task, 'task.preempt_unsent', { agent_id: agentId, code: sent.code, reason: sent.reason }, 'WARN');
        return;
      }
      ok = true;
      const from = task.state;
      task.state = 'PREEMPTING';
      task.preemptMessageId = sent.messageId;
      task.preemptedBy = byTaskId;
      task.deadline = now + this.options.maxNonPreemptibleMs;
      task.updatedAt = now;
      this.deps.store.scheduler.put(task);
      this.event(task, 'task.preempt_requested', {
        agent_id: agentId, by_task_id: byTaskId, by_priority: byPriority, reason, preempt_message_id: sent.messageId, yield_by_ms: this.options.maxNonPreemptibleMs,
      });
      this.stateEvent(task, from, { agent_id: agentId });
    });
    if (ok) {
      this.armDeadline(task);
      this.changed.fire({ kind: 'changed', task });
    }
    return ok;
  }

  private onPreemptUpdate(task: TaskRecord, update: OutboxUpdate, ctx: CallContext): void {
    if (task.state !== 'PREEMPTING') return;
    const declared = NON_PREEMPTIBLE.exec(update.note);
    if ((update.state === 'RECEIVED' || update.state === 'READ') && declared) {
      const ms = Math.min(Number(declared[1]), this.options.maxNonPreemptibleMs);
      const now = this.deps.clock.now();
      task.nonPreemptibleUntil = now + ms;
      task.deadline = now + ms;
      task.updatedAt = now;
      this.deps.store.scheduler.put(task);
      this.event(task, 'task.non_preemptible', { agent_id: task.assignedAgentId, declared_ms: Number(declared[1]), until_ms: ms });
      this.armDeadline(task);
      this.changed.fire({ kind: 'changed', task });
    } else if (update.state === 'FULFILLED' && update.note === 'yielded') {
      this.yielded(task, ctx);
    } else if (update.state === 'FAILED' || update.state === 'REJECTED' || update.state === 'TIMED_OUT') {
      // The agent would not (or did not) take the request: the deadline still stands, then `terminate`.
      this.event(task, 'task.preempt_unanswered', { agent_id: task.assignedAgentId, state: update.state, error_code: update.errorCode, note: update.note }, 'WARN');
    }
  }

  /** The agent yielded at a safe point: the task goes back to the queue at its priority and seq; the agent SUSPENDED. */
  private yielded(task: TaskRecord, ctx: CallContext): void {
    const agentId = task.assignedAgentId;
    const by = task.preemptedBy;
    this.clearTimer(task.taskId);
    this.deps.store.transaction(() => {
      const from = task.state;
      this.endActivity(agentId, task.taskId, '', ctx);
      if (this.slots.get(agentId)?.taskId === task.taskId) this.slots.delete(agentId);
      this.syncRunning(agentId);
      this.requeue(task, { kind: 'preempted', byTaskId: by });
      this.event(task, 'task.yielded', { agent_id: agentId, by_task_id: by });
      this.stateEvent(task, from, { agent_id: agentId, reason: 'yielded' });
      this.moveAgent(agentId, ['SUSPENDED'], { by: 'task', reason: `yielded task ${task.taskId}`, taskId: task.taskId }, ctx);
    });
    this.refreshIdle(agentId);
    this.dirty.add(agentId);
    this.changed.fire({ kind: 'changed', task });
    this.schedulePump();
  }

  private armDeadline(task: TaskRecord): void {
    this.clearTimer(task.taskId);
    if (task.deadline === null) return;
    const ms = Math.max(0, task.deadline - this.deps.clock.now());
    this.timers.set(task.taskId, this.deps.clock.setTimer(ms, () => this.safely('deadline', () => {
      this.timers.delete(task.taskId);
      this.onDeadline(task);
    })));
  }

  private clearTimer(taskId: string): void {
    this.timers.get(taskId)?.dispose();
    this.timers.delete(taskId);
  }

  private onDeadline(task: TaskRecord): void {
    if (this.open.get(task.taskId) !== task || task.state !== 'PREEMPTING') return;
    const ctx: CallContext = { correlationId: task.taskId };
    if (!task.terminateMessageId) {
      this.sendTerminate(task, `no yield within ${task.nonPreemptibleUntil !== null ? 'the declared non-preemptible section' : `${this.options.maxNonPreemptibleMs} ms`}`, ctx);
      return;
    }
    // No answer to `terminate` within the grace: forced preemption; the agent FAILED.
    const agentId = task.assignedAgentId;
    this.deps.store.transaction(() => {
      this.end(task, 'FAILED', 'forced_preemption', `no answer to terminate within ${this.options.terminateGraceMs} ms`, ctx, 'forced');
      if (this.slots.get(agentId)?.taskId === task.taskId) this.slots.delete(agentId);
      this.syncRunning(agentId);
      this.moveAgent(agentId, ['FAILED_STATE'], {
        by: 'timeout', reason: `no answer to terminate of ${task.taskId} within ${this.options.terminateGraceMs} ms`, errorCode: 'forced_preemption', taskId: task.taskId,
      }, ctx);
    });
    this.refreshIdle(agentId);
    this.schedulePump();
  }

  /** CONTROL `terminate` with the grace; for an open task (forced preemption) its deadline is armed, a cancelled one's by `cancel`. */
  private sendTerminate(task: TaskRecord, reason: string, ctx: CallContext): boolean {
    const holder = task;
    const open = this.open.get(task.taskId) === task;
    const agentId = task.assignedAgentId;
    const now = this.deps.clock.now();
    let ok = false;
    this.deps.store.transaction(() => {
      const command: ControlCommand = { command: 'terminate', task_id: task.taskId, grace_ms: this.options.terminateGraceMs, reason };
      const sent = this.sendControl(agentId, command, task.taskId, ctx);
      if (!sent.accepted) {
        this.event(task, 'task.terminate_unsent', { agent_id: agentId, code: sent.code, reason: sent.reason }, 'WARN');
        return;
      }
      ok = true;
      holder.terminateMessageId = sent.messageId;
      holder.deadline = now + this.options.terminateGraceMs;
      holder.updatedAt = now;
      this.deps.store.scheduler.put(holder);
      this.event(task, 'task.terminate_sent', { agent_id: agentId, grace_ms: this.options.terminateGraceMs, reason, terminate_message_id: sent.messageId }, 'WARN');
    });
    if (!open) return ok;
    if (ok) this.armDeadline(task);
    else {
      // Nothing can reach the agent: end the task now as the grace would.
      holder.terminateMessageId = 'unsent';
      holder.deadline = now;
      this.armDeadline(task);
    }
    return ok;
  }

  private onTerminateUpdate(task: TaskRecord, update: OutboxUpdate, ctx: CallContext): void {
    if (update.state !== 'FULFILLED') return;
    this.clearTimer(task.taskId);
    this.finished(task, 'FAILED', 'forced_preemption', `terminated after ${update.note || 'terminate'} (preemption forced)`, ctx);
  }

  // ------------------------------------------------------------------------------------------ cancel

  /** Cancels a task: a queued one at once; a running one is told `terminate` (grace) and ends CANCELLED. */
  cancel(taskId: string, reason: string, ctx: CallContext): TaskRecord {
    const task = this.open.get(taskId);
    if (!task) {
      const done = this.deps.store.scheduler.get(taskId);
      if (done) throw new SchedulerError('refused', `Task ${taskId} already ended ${done.state}.`);
      throw new SchedulerError('not_found', `There is no task ${taskId}.`);
    }
    this.close(task, 'cancelled', reason, `cancelled: ${reason}`, { ...ctx, correlationId: taskId }, 'operator');
    return task;
  }

  /**
   * A handoff of this task COMPLETED (RFC §17.6: the origin "MUST NOT continue work on the transferred context"): the
   * task ends CANCELLED with error code `handed_off` (cause `handoff`, its one `task.state_changed` event), and, when it
   * was dispatched, its agent is told `terminate` and stays occupied until it answers, exactly as for a cancel (a grace
   * past which the agent is FAILED). CANCELLED rather than COMPLETED: the task's work did not finish here, and the task
   * produces no result any more (the receiver's work is its own, reported under the handoff's correlation id, not as this
   * task's result). The handoff area refuses tasks the workflow engine submitted. Joins the caller's transaction. Answers the task, or undefined when it is
   * not open (ended meanwhile: nothing to close).
   */
  handOff(taskId: string, note: string, ctx: CallContext): TaskRecord | undefined {
    const task = this.open.get(taskId);
    if (!task) return undefined;
    this.close(task, 'handed_off', note, `handed off: ${note}`, { ...ctx, correlationId: taskId }, 'handoff');
    return task;
  }

  /** Open scheduler tasks for the agent: the one it runs (or a cancelled one awaiting `terminate`) and those queued for its id. */
  loadOf(agentId: string): number {
    let n = this.slots.has(agentId) ? 1 : 0;
    n += this.queues.get(agentId)?.size ?? 0;
    for (const task of this.gateHeld) if (task.target === agentId) n++;
    return n;
  }

  /** Ends an open task CANCELLED with `code`; a dispatched one's agent is told `terminate` with the cancel grace. */
  private close(task: TaskRecord, code: string, note: string, terminateReason: string, taskCtx: CallContext, cause: string): void {
    if (task.state === 'QUEUED') {
      this.end(task, 'CANCELLED', code, note, taskCtx, cause);
      return;
    }
    const agentId = task.assignedAgentId;
    this.clearTimer(task.taskId);
    this.end(task, 'CANCELLED', code, note, taskCtx, cause);
    // The agent stays occupied until it answers `terminate` (or the grace passes: then it is FAILED).
    this.slots.set(agentId, { taskId: task.taskId, cancelled: task });
    this.syncRunning(agentId);
    this.sendTerminate(task, terminateReason, taskCtx);
    this.armCancelGrace(task);
  }

  /**
   * The grace of a cancelled task's `terminate` (from its stored deadline; at once when none was sent): past it the
   * agent is FAILED forced_preemption and its slot freed. Restore arms it again from the store.
   */
  private armCancelGrace(task: TaskRecord): void {
    const agentId = task.assignedAgentId;
    const taskId = task.taskId;
    const taskCtx: CallContext = { correlationId: taskId };
    const graceMs = task.deadline === null ? 0 : Math.max(0, task.deadline - this.deps.clock.now());
    this.clearTimer(taskId);
    this.timers.set(taskId, this.deps.clock.setTimer(graceMs, () => this.safely('cancel_grace', () => {
      this.timers.delete(taskId);
      if (this.slots.get(agentId)?.cancelled !== task) return;
      this.slots.delete(agentId);
      this.syncRunning(agentId);
      this.deps.store.transaction(() => {
        this.settleTerminate(task);
        this.moveAgent(agentId, ['FAILED_STATE'], {
          by: 'timeout', reason: `no answer to terminate of cancelled task ${taskId} within ${this.options.terminateGraceMs} ms`, errorCode: 'forced_preemption', taskId,
        }, taskCtx);
      });
      this.refreshIdle(agentId);
    })));
  }

  /** The cancelled task's `terminate` is answered or given up: its deadline cleared in the store (not restored again). */
  private settleTerminate(task: TaskRecord): void {
    if (task.deadline === null) return;
    task.deadline = null;
    this.deps.store.scheduler.put(task);
  }

  private onCancelledTerminateAck(task: TaskRecord, update: OutboxUpdate): void {
    if (update.state !== 'FULFILLED') return;
    this.clearTimer(task.taskId);
    this.deps.store.transaction(() => this.settleTerminate(task));
    this.releaseAgent(task.assignedAgentId, task.taskId, `terminated cancelled task ${task.taskId}`, { correlationId: task.taskId });
  }

  // ------------------------------------------------------------------------------------------ ends

  /**
   * Ends an open task (COMPLETED, FAILED or CANCELLED): stored with its event, its activity entry ended, the gate told.
   * Does not move the agent (the caller does, as the cause requires). Joins the caller's transaction.
   */
  private end(task: TaskRecord, state: 'COMPLETED' | 'FAILED' | 'CANCELLED', code: string, note: string, ctx: CallContext, cause: string, result = ''): void {
    if (!this.open.has(task.taskId)) return;
    const now = this.deps.clock.now();
    const from = task.state;
    const agentId = task.assignedAgentId;
    this.clearTimer(task.taskId);
    this.deps.store.transaction(() => {
      if (from === 'QUEUED') this.unqueue(task);
      task.state = state;
      task.errorCode = state === 'COMPLETED' ? '' : code;
      task.note = note.slice(0, 4096);
      task.result = state === 'COMPLETED' ? result : '';
      task.endedAt = now;
      task.updatedAt = now;
      task.waiting = null;
      task.deadline = null;
      this.deps.store.scheduler.put(task);
      this.stateEvent(task, from, { agent_id: agentId, error_code: task.errorCode, note: task.note.slice(0, 512), cause }, state === 'FAILED' ? 'WARN' : 'INFO');
      if (agentId) this.endActivity(agentId, task.taskId, state, ctx);
      try {
        this.deps.gate.forget(task.taskId, ctx);
      } catch (err) {
        this.deps.log.internalError(SCHEDULER, task.taskId, err, { task_id: task.taskId, during: 'gate.forget' });
      }
      // Inside the transaction: a listener (the workflow engine) commits what the end means with it.
      this.ended.fire(task);
    });
    this.open.delete(task.taskId);
    const jobs = this.byJob.get(task.jobKey);
    jobs?.delete(task);
    if (jobs?.size === 0) this.byJob.delete(task.jobKey);
    this.runningIndex.deleteTask(task.taskId);
    this.changed.fire({ kind: 'changed', task });
    // Tasks the gate held (serialised after this one, behind a limit) may start now: wake an idle agent for each.
    this.gateHeld.delete(task);
    this.releaseHeld();
    this.schedulePump();
  }

  // ------------------------------------------------------------------------------------------ shutdown

  /** ShutdownAgent (RFC §8.4): SHUTTING_DOWN with a grace period, CONTROL `shutdown`, no new tasks; cleanup on the way out. */
  shutdownAgent(agentId: string, graceMs: number, reason: string, ctx: CallContext): { readonly ok: boolean; readonly reason: string } {
    const agent = this.deps.agents.get(agentId);
    if (!agent) return { ok: false, reason: `no agent '${agentId.slice(0, 128)}' is registered` };
    if (agent.state === 'SHUTTING_DOWN' || this.shuttingDown.has(agentId)) return { ok: false, reason: `agent ${agentId} is already shutting down` };
    const grace = Math.max(0, Math.floor(graceMs));
    let answer: { ok: boolean; reason: string } = { ok: true, reason: '' };
    this.deps.store.transaction(() => {
      const moved = this.deps.agents.transition(agentId, 'SHUTTING_DOWN', { by: 'operator', reason, timeoutMs: grace }, ctx);
      if (!moved.ok) {
        answer = { ok: false, reason: moved.reason };
        return;
      }
      const command: ControlCommand = { command: 'shutdown', reason, drain_timeout_seconds: Math.ceil(grace / 1000) };
      const sent = this.sendControl(agentId, command, shutdownCorrelation(agentId), ctx);
      this.shuttingDown.set(agentId, reason);
      this.deps.log.record({
        correlationId: ctx.correlationId, actor: SCHEDULER, eventType: 'agent.shutdown_requested',
        details: { agent_id: agentId, grace_ms: grace, reason, shutdown_message_id: sent.accepted ? sent.messageId : '', sent: sent.accepted, refusal: sent.accepted ? undefined : sent.reason },
        level: sent.accepted ? 'INFO' : 'WARN',
      });
    });
    if (!answer.ok) return answer;
    this.refreshIdle(agentId);
    // Tasks queued for this agent id can never run now.
    for (const task of this.queuedFor(agentId)) this.end(task, 'FAILED', 'agent_shutdown', `agent ${agentId} is shutting down`, { correlationId: task.taskId }, 'shutdown');
    return answer;
  }

  private onShutdownAck(update: OutboxUpdate): void {
    if (update.state !== 'FULFILLED') return;
    const agentId = update.recipientId;
    // Deregistration reaches into the router, which is in the middle of this ACK: after it.
    queueMicrotask(() => this.safely('shutdown', () => {
      if (this.deps.agents.get(agentId)) this.deps.agents.deregister(agentId, 'shut down', { correlationId: update.correlationId });
    }));
  }

  /** The agent left the registry (shut down, timed out, deregistered): its task and queue are cleaned up. */
  private onAgentLeft(agentId: string, reason: string): void {
    this.agentStates.delete(agentId);
    const shutdown = this.shuttingDown.get(agentId);
    this.shuttingDown.delete(agentId);
    const code = /agent_shutdown_timeout/.test(reason) ? 'agent_shutdown_timeout' : shutdown || /shut down/.test(reason) ? 'agent_shutdown' : 'AGENT_UNAVAILABLE';
    const slot = this.slots.get(agentId);
    this.slots.delete(agentId);
    this.syncRunning(agentId);
    this.dropIdle(agentId);
    if (slot && !slot.cancelled) {
      const task = this.open.get(slot.taskId);
      if (task) this.end(task, 'FAILED', code, `agent ${agentId} left: ${reason}`, { correlationId: task.taskId }, 'agent_left');
    } else if (slot?.cancelled) {
      const cancelled = slot.cancelled;
      this.clearTimer(slot.taskId);
      this.deps.store.transaction(() => this.settleTerminate(cancelled));
    }
    if (code !== 'AGENT_UNAVAILABLE') {
      for (const task of this.queuedFor(agentId)) this.end(task, 'FAILED', code, `agent ${agentId} shut down`, { correlationId: task.taskId }, 'agent_left');
    }
  }

  // ------------------------------------------------------------------------------------------ agents

  private onAgentChange(change: RegistryChange): void {
    if (change.kind === 'left') {
      this.onAgentLeft(change.agentId, change.reason);
      return;
    }
    const agentId = change.agent.descriptor.agentId;
    const lastState = this.agentStates.get(agentId);
    this.agentStates.set(agentId, change.agent.state);
    // The type its task counts for (max_parallel_instances) is the registry's: kept in step.
    if (this.slots.has(agentId)) this.syncRunning(agentId);
    // One rule for an agent that can no longer run what it holds: re-registered (INITIALIZING: whatever it ran is gone
    // from its side) or FAILED (a heartbeat, resource_timeout, suspend_timeout…).
    if (this.slots.has(agentId) && (change.agent.state === 'FAILED_STATE' || change.agent.state === 'INITIALIZING')) {
      const code = change.agent.state === 'FAILED_STATE' ? (agentFailureCode(lastState) ?? 'AGENT_UNAVAILABLE') : 'AGENT_UNAVAILABLE';
      this.onAgentUnavailable(agentId, code, change.agent.state === 'INITIALIZING' ? `agent ${agentId} re-registered` : `agent ${agentId} is FAILED`);
    }
    this.refreshIdle(agentId);
    if (this.idle.has(agentId)) {
      this.dirty.add(agentId);
      this.schedulePump();
    }
  }

  /**
   * The agent holding a slot re-registered or failed: its task ends FAILED with `code` (one still DISPATCHED, never
   * started, goes back to the queue), a cancelled task's pending `terminate` is given up; the slot is freed. The agent
   * is not moved (it is where its registration or failure put it).
   */
  private onAgentUnavailable(agentId: string, code: string, reason: string): void {
    const slot = this.slots.get(agentId);
    if (!slot) return;
    this.slots.delete(agentId);
    this.syncRunning(agentId);
    this.clearTimer(slot.taskId);
    if (slot.cancelled) {
      const cancelled = slot.cancelled;
      this.deps.store.transaction(() => this.settleTerminate(cancelled));
      return;
    }
    const task = this.open.get(slot.taskId);
    if (!task) return;
    const ctx: CallContext = { correlationId: task.taskId };
    if (task.state !== 'DISPATCHED') {
      this.end(task, 'FAILED', code, reason, ctx, 'agent_unavailable');
      return;
    }
    // Never started: back to the queue (a withdrawal), the slot already freed, the agent left where it is.
    this.withdrawn(task, agentId, code, reason, ctx, true, false);
  }

  /** Idle = RUNNABLE or SUSPENDED, connected, nothing running, not shutting down. */
  private refreshIdle(agentId: string): void {
    const agent = this.deps.agents.get(agentId);
    const isIdle = agent !== undefined && (agent.state === 'RUNNABLE' || agent.state === 'SUSPENDED') && agent.presence !== 'disconnected'
      && !this.slots.has(agentId) && !this.shuttingDown.has(agentId);
    if (!isIdle) {
      this.dropIdle(agentId);
      return;
    }
    this.idle.add(agentId);
    const type = agent.descriptor.name;
    const was = this.idleType.get(agentId);
    if (was !== undefined && was !== type) this.dropIdleType(agentId, was);
    this.idleType.set(agentId, type);
    let ofType = this.idleByType.get(type);
    if (!ofType) this.idleByType.set(type, ofType = new Set());
    ofType.add(agentId);
  }

  private dropIdle(agentId: string): void {
    if (!this.idle.delete(agentId)) return;
    const type = this.idleType.get(agentId);
    this.idleType.delete(agentId);
    if (type !== undefined) this.dropIdleType(agentId, type);
  }

  private dropIdleType(agentId: string, type: string): void {
    const ids = this.idleByType.get(type);
    if (ids?.delete(agentId) && ids.size === 0) this.idleByType.delete(type);
  }

  /**
   * Walks the agent to each of `waypoints` in turn, by the shortest way the lifecycle table allows (`pathTo`: never
   * through INITIALIZING, FAILED, RECOVERING or SHUTTING_DOWN on the way); no way or a refused step is logged and stops the walk.
   */
  private moveAgent(agentId: string, waypoints: readonly string[], cause: TransitionCause, ctx: CallContext, quiet = false): void {
    for (const waypoint of waypoints) {
      const agent = this.deps.agents.get(agentId);
      if (!agent) return;
      const path = pathTo(agent.state, waypoint);
      const steps: readonly string[] = path ?? [waypoint];
      for (const to of steps) {
        const from = this.deps.agents.get(agentId)?.state ?? '';
        const result = path ? this.deps.agents.transition(agentId, to, cause, ctx) : { ok: false as const, reason: refusalReason(from, to) };
        if (!result.ok) {
          if (!quiet) {
            this.deps.log.record({
              correlationId: ctx.correlationId, actor: SCHEDULER, eventType: 'task.agent_transition_refused', level: 'WARN',
              details: { agent_id: agentId, from, to, reason: result.reason, task_id: cause.taskId },
            });
          }
          return;
        }
      }
    }
  }

  // ------------------------------------------------------------------------------------------ activity

  private beginActivity(task: TaskRecord, agentId: string, ctx: CallContext): void {
    try {
      const place = task.scope.repoId ? undefined : this.deps.places.placeOf(agentId);
      this.deps.activity.begin({
        agentId, taskId: task.taskId, repoId: task.scope.repoId || place?.repoId || '', worktreeId: task.scope.worktreeId || place?.worktreeId || '',
        branch: place && (!task.scope.repoId || place.repoId === task.scope.repoId) ? place.branch : (this.deps.places.placeOf(agentId)?.branch ?? ''),
        timestamp: this.deps.clock.now(), description: describeTask(task),
      }, ctx);
    } catch (err) {
      const full = err instanceof ActivityBufferFullError;
      this.deps.log.record({
        correlationId: task.taskId, actor: SCHEDULER, eventType: full ? 'task.activity_buffer_full' : 'task.activity_failed', level: 'WARN',
        details: { agent_id: agentId, code: full ? err.code : undefined, reason: (err as Error).message.slice(0, 512), note: 'the activity buffer is advisory: the task runs anyway' },
      });
    }
  }

  private endActivity(agentId: string, taskId: string, outcome: '' | 'COMPLETED' | 'FAILED' | 'CANCELLED', ctx: CallContext): void {
    try {
      this.deps.activity.end(agentId, taskId, outcome, ctx);
    } catch (err) {
      this.deps.log.record({
        correlationId: taskId, actor: SCHEDULER, eventType: 'task.activity_failed', level: 'WARN',
        details: { agent_id: agentId, reason: (err as Error).message.slice(0, 512) },
      });
    }
  }

  private housekeeping(): void {
    if (this.disposed) return;
    const ctx: CallContext = { correlationId: 'scheduler-housekeeping' };
    try {
      this.deps.activity.reconcile((agentId, taskId) => this.isActive(agentId, taskId), ctx);
      this.reconcileFailure = '';
    } catch (err) {
      // Logged once per distinct failure, not every minute.
      const reason = (err as Error).message.slice(0, 512);
      if (reason !== this.reconcileFailure) {
        this.reconcileFailure = reason;
        this.deps.log.record({ correlationId: ctx.correlationId, actor: SCHEDULER, eventType: 'task.activity_failed', level: 'WARN', details: { reason, during: 'reconcile' } });
      }
    }
    try {
      const pruned = this.deps.store.transaction(() => this.deps.store.scheduler.pruneFinished(this.options.keepFinishedTasks));
      if (pruned > 0) this.deps.log.record({ correlationId: ctx.correlationId, actor: SCHEDULER, eventType: 'task.pruned', details: { pruned, kept: this.options.keepFinishedTasks } });
    } catch (err) {
      this.deps.log.internalError(SCHEDULER, ctx.correlationId, err, { during: 'prune' });
    }
    this.housekeepingTimer = this.deps.clock.setTimer(HOUSEKEEPING_MS, () => this.housekeeping());
  }

  // ------------------------------------------------------------------------------------------ restart

  /** A task from the store at start: queued ones back in the queue; dispatched ones hold their agent; deadlines re-armed. */
  private restore(task: TaskRecord): void {
    // Held by the gate when it stopped: held again (onGateChange asks again, so a denied duplicate still ends at once).
    if (task.state === 'QUEUED' && task.waiting && GATE_WAITING.has(task.waiting.kind)) this.gateHeld.add(task);
    this.enqueue(task);
    if (task.state === 'PREEMPTING' && task.deadline !== null) this.armDeadline(task);
  }

  // ------------------------------------------------------------------------------------------ helpers

  /**
   * A CONTROL command to the agent through the router, with no router ACK deadline: the scheduler keeps its own (the
   * yield wait, the terminate grace, the shutdown grace); the router's TTL and the agent leaving still end it.
   */
  private sendControl(agentId: string, command: ControlCommand, correlationId: string, ctx: CallContext): ReturnType<CoordinatorOutbox['sendToAgent']> {
    return this.deps.outbox.sendToAgent({
      to: agentId, messageType: 'CONTROL', contentType: 'application/json', payload: Buffer.from(JSON.stringify(command), 'utf8'), correlationId, ackTimeout: false,
    }, ctx);
  }

  private event(task: TaskRecord, eventType: string, details: Record<string, unknown>, level: 'INFO' | 'WARN' = 'INFO'): void {
    this.deps.log.record({ correlationId: task.taskId, actor: SCHEDULER, eventType, level, details: { task_id: task.taskId, ...details } });
  }

  private stateEvent(task: TaskRecord, from: TaskState, details: Record<string, unknown>, level: 'INFO' | 'WARN' = 'INFO'): void {
    this.event(task, 'task.state_changed', { from, to: task.state, ...details }, level);
  }

  private safely(during: string, fn: () => void): void {
    if (this.disposed) return;
    try {
      fn();
    } catch (err) {
      this.deps.log.internalError(SCHEDULER, 'scheduler', err, { during });
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const s of this.subscriptions) s.dispose();
    for (const t of this.timers.values()) t.dispose();
    this.timers.clear();
    this.housekeepingTimer?.dispose();
    this.changed.dispose();
    this.ended.dispose();
  }
}

function runCommand(taskId: string, params: unknown, contentType: string, scope: ScopeWire, priority: number): ControlCommand {
  return { command: 'run', task_id: taskId, params, content_type: contentType, scope, priority };
}

/**
 * The params as the `run` command carries them: JSON content types as the JSON value (must parse); text/* as a string;
 * anything else as base64 text.
 */
export function paramsOnWire(params: Uint8Array, contentType: string): { value: unknown } | { refusal: string } {
  const base = contentType.split(';')[0].trim().toLowerCase();
  const bytes = Buffer.from(params);
  if (base === 'application/json' || base.endsWith('+json')) {
    if (bytes.byteLength === 0) return { value: null };
    try {
      return { value: JSON.parse(bytes.toString('utf8')) };
    } catch (err) {
      return { refusal: `params are not valid JSON for ${base}: ${(err as Error).message.slice(0, 200)}` };
    }
  }
  if (base.startsWith('text/')) return { value: bytes.toString('utf8') };
  return { value: bytes.toString('base64') };
}

/** The activity entry's description: the params' `description` or `title`, else their text, at most 200 words. */
function describeTask(task: TaskRecord): string {
  let text = '';
  const params = paramsOnWire(task.params, task.contentType);
  if ('value' in params) {
    const v = params.value;
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      if (typeof o.description === 'string') text = o.description;
      else if (typeof o.title === 'string') text = o.title;
    }
    if (!text) text = typeof v === 'string' ? v : JSON.stringify(v) ?? '';
  }
  const words = text.split(/\s+/).filter((w) => w !== '');
  const limit = FIELD_LIMITS.registry.description_words;
  return words.length > limit ? `${words.slice(0, limit).join(' ')}…` : words.join(' ').slice(0, 4096);
}

/** What a waiting task tells its submitter and the Tasks view. */
export function describeWaiting(w: WaitingReason): string {
  switch (w.kind) {
    case 'agent_busy': return `waiting for agent ${w.agentId} to finish its current task`;
    case 'agent_not_runnable': return `waiting for agent ${w.agentId} to become RUNNABLE (it is ${w.state})`;
    case 'no_agent_of_type': return `waiting for a RUNNABLE agent of type ${w.agentType}`;
    case 'max_parallel_instances': return `queued behind max_parallel_instances (${w.running} of ${w.limit} running for type ${w.agentType})`;
    case 'conflict_decision': return `waiting for a conflict decision (its scope overlaps task ${w.withTaskId})`;
    case 'conflict_check': return `waiting for the inference engine's parallelism check (its scope overlaps task ${w.withTaskId})`;
    case 'serialised_after': return `serialised after task ${w.taskId} (a conflict decision)`;
    // byTaskId is '' when the operator (or an agent's RequestPreemption) asked the task to yield, not a task.
    case 'preempted': return w.byTaskId ? `preempted by task ${w.byTaskId}` : 'preempted by the operator (RequestPreemption)';
  }
}

/** The correlation id of the `shutdown` command sent to `agentId`. */
function shutdownCorrelation(agentId: string): string {
  return `shutdown:${agentId}`;
}

/** The agent was sent its run but has not acknowledged it yet. */
function notStarted(state: string | undefined): boolean {
  return state === 'SCHEDULED' || state === 'RESUMED';
}

/** The §8.3 error code of the timeout that moves an agent out of `state` into FAILED (resource_timeout, suspend_timeout…). */
function agentFailureCode(state: string | undefined): string | undefined {
  return state !== undefined && isAgentState(state) ? STATE_TIMEOUT_CODES[state]?.errorCode : undefined;
}

/** States in which the agent is working on (or starting) its task. */
const WORKING_STATES: ReadonlySet<string> = new Set(['SCHEDULED', 'RESUMED', 'RUNNING', 'WAITING', 'WAITING_RESOURCES']);

/** Where the agent goes after its task ended: through COMPLETED when it was working on it, then RUNNABLE. */
function doneWay(state: string | undefined): string[] {
  return state !== undefined && WORKING_STATES.has(state) ? ['COMPLETED', 'RUNNABLE'] : ['RUNNABLE'];
}

/** Where the agent goes when its run was withdrawn before it started: back to idle (SUSPENDED if it was resumed). */
function withdrawWay(state: string | undefined): string[] {
  if (state === 'SCHEDULED') return ['RUNNABLE'];
  if (state === 'RESUMED') return ['SUSPENDED'];
  return doneWay(state);
}
