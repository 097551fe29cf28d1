import type { CallContext } from '../context';
import type { Disposable, Event } from '../events';
import type { AfterCommit } from '../kernel/transitions';
import { cancelTarget } from './access';
import { Acks } from './acks';
import { AgentChanges } from './agents';
import { SchedulerContext, type SchedulerDeps } from './context';
import { Dispatch } from './dispatch';
import { Ends } from './ends';
import type { SchedulerOptions, SubmitResult, TaskChange, TaskRecord, TaskRunner, TaskSubmission } from './model';
import { Preemption } from './preempt';
import { TaskQueries, type TaskCounts, type TaskQuery } from './queries';
import { Housekeeping, restoreFromStore } from './restore';
import { Submit } from './submit';
import { Timeouts } from './timeouts';

export type { SchedulerDeps } from './context';
export { SchedulerError } from './errors';
export type { TaskCounts, TaskQuery } from './queries';
export { MAX_WITHDRAWN_DISPATCHES } from './state';
export { describeWaiting, paramsOnWire } from './notices';

/**
 * The scheduler (RFC §7, §9): tasks queued by priority then arrival, dispatched to agents as CONTROL `run` envelopes,
 * completed by the agent's ACKs, preempted cooperatively (forced after a non-preemptible section's maximum), persisted.
 * Every task's log events and CONTROL envelopes carry correlation_id = task_id.
 *
 * A facade over its parts (README.md in this folder): it wires them and delegates. Each operation is one transition
 * (the kernel's `Transitions.run`): its rows, log events, envelopes and the agent's move in one transaction, its
 * memory, timers and notifications only once the store took it.
 */
export class Scheduler implements TaskRunner, Disposable {
  readonly onDidChange: AfterCommit<TaskChange>;
  /** A task ended: fired inside the transaction that records its end (TaskRunner.onDidEndTask). */
  readonly onDidEndTask: Event<TaskRecord>;

  private readonly core: SchedulerContext;
  private readonly queries: TaskQueries;
  private readonly ends: Ends;
  private readonly dispatching: Dispatch;
  private readonly preemption: Preemption;
  private readonly timeouts: Timeouts;
  private readonly acks: Acks;
  private readonly agentChanges: AgentChanges;
  private readonly submission: Submit;
  private readonly housekeeping: Housekeeping;
  private readonly subscriptions: Disposable[] = [];

  /** `options`: the object every part reads (kept here as before: a change to it applies to them all). */
  constructor(
    deps: SchedulerDeps,
    private readonly options: SchedulerOptions,
  ) {
    const core = (this.core = new SchedulerContext(deps, options));
    this.onDidChange = core.changed.event;
    this.onDidEndTask = core.ended.event;
    this.queries = new TaskQueries(core.memory, deps.store.scheduler);
    this.dispatching = new Dispatch(core, { end: (...a) => this.ends.end(...a) });
    this.timeouts = new Timeouts(core, {
      end: (...a) => this.ends.end(...a),
      schedulePump: () => this.dispatching.schedulePump(),
    });
    this.ends = new Ends(core, {
      releaseHeld: () => this.dispatching.releaseHeld(),
      schedulePump: () => this.dispatching.schedulePump(),
      sendTerminate: (...a) => this.timeouts.sendTerminate(...a),
      armCancelGrace: (...a) => this.timeouts.armCancelGrace(...a),
    });
    this.preemption = new Preemption(core, {
      armDeadline: (...a) => this.timeouts.armDeadline(...a),
      schedulePump: () => this.dispatching.schedulePump(),
    });
    this.agentChanges = new AgentChanges(core, {
      end: (...a) => this.ends.end(...a),
      withdrawn: (...a) => this.dispatching.withdrawn(...a),
      settleTerminate: (...a) => this.timeouts.settleTerminate(...a),
      schedulePump: () => this.dispatching.schedulePump(),
    });
    this.acks = new Acks(core, {
      finished: (...a) => this.ends.finished(...a),
      withdrawn: (...a) => this.dispatching.withdrawn(...a),
      yielded: (...a) => this.preemption.yielded(...a),
      onPreemptUpdate: (...a) => this.preemption.onPreemptUpdate(...a),
      onShutdownAck: (update) => this.agentChanges.onShutdownAck(update),
      releaseAgent: (...a) => this.ends.releaseAgent(...a),
      settleTerminate: (...a) => this.timeouts.settleTerminate(...a),
    });
    this.submission = new Submit(core, {
      considerPreemption: (task, ctx) => this.preemption.considerPreemption(task, ctx),
      wakeFor: (task) => this.dispatching.wakeFor(task),
      pump: () => this.dispatching.pump(),
    });
    this.housekeeping = new Housekeeping(core, (agentId, taskId) => this.isActive(agentId, taskId));

    restoreFromStore(core, {
      armDeadline: (...a) => this.timeouts.armDeadline(...a),
      armCancelGrace: (...a) => this.timeouts.armCancelGrace(...a),
      settleTerminate: (...a) => this.timeouts.settleTerminate(...a),
      onAgentLeft: (...a) => this.agentChanges.onAgentLeft(...a),
      onAgentUnavailable: (...a) => this.agentChanges.onAgentUnavailable(...a),
    });
    this.subscriptions.push(
      deps.agents.onDidChange((change) => core.hear('agent_change', () => this.agentChanges.onAgentChange(change))),
      deps.outbox.onDidUpdateOutbox((update) => core.hear('outbox_update', () => this.acks.onOutbox(update))),
      deps.gate.onDidChange(() => core.hear('gate_change', () => this.dispatching.onGateChange())),
    );
    this.housekeeping.run();
    // Tasks the gate held when the coordinator stopped are asked again (a decision taken meanwhile applies now).
    if (core.memory.gateHeld.size > 0) core.guard.run('gate_change', () => this.dispatching.onGateChange());
    for (const agentId of core.memory.idle) core.memory.dirty.add(agentId);
    this.dispatching.schedulePump();
  }

  /** SubmitTask (RFC §7.1, §9): validated, admitted by the gate, queued, dispatched when it can be. */
  submit(submission: TaskSubmission, ctx: CallContext): SubmitResult {
    return this.submission.submit(submission, ctx);
  }

  task(taskId: string): TaskRecord | undefined {
    return this.queries.task(taskId);
  }

  /** Open tasks in dispatch order (priority, then arrival), then finished ones, newest first. */
  tasks(query: TaskQuery = {}): TaskRecord[] {
    return this.queries.tasks(query);
  }

  counts(): TaskCounts {
    return this.queries.counts();
  }

  /** Whether the task is known and not terminal (the activity buffer's reconciliation). */
  isActive(agentId: string, taskId: string): boolean {
    return this.queries.isActive(agentId, taskId);
  }

  /** Open scheduler tasks for the agent: the one it runs (or a cancelled one awaiting `terminate`) and those queued for its id. */
  loadOf(agentId: string): number {
    return this.queries.loadOf(agentId);
  }

  /**
   * RequestPreemption: a preempt_request to the agent running `taskId` (or the agent's running task when taskId is '').
   * The yielded task goes back to the queue.
   */
  preempt(
    agentId: string,
    taskId: string,
    reason: string,
    ctx: CallContext,
  ): { readonly enqueued: boolean; readonly reason: string } {
    return this.preemption.preempt(agentId, taskId, reason, ctx);
  }

  /** Cancels a task: a queued one at once; a running one is told `terminate` (grace) and ends CANCELLED. */
  cancel(taskId: string, reason: string, ctx: CallContext): TaskRecord {
    const task = cancelTarget(this.core.memory, this.core.deps.store.scheduler, taskId);
    this.ends.close(task, 'cancelled', reason, `cancelled: ${reason}`, { ...ctx, correlationId: taskId }, 'operator');
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
    const task = this.core.memory.open.get(taskId);
    if (!task) return undefined;
    this.ends.close(task, 'handed_off', note, `handed off: ${note}`, { ...ctx, correlationId: taskId }, 'handoff');
    return task;
  }

  /** ShutdownAgent (RFC §8.4): SHUTTING_DOWN with a grace period, CONTROL `shutdown`, no new tasks; cleanup on the way out. */
  shutdownAgent(
    agentId: string,
    graceMs: number,
    reason: string,
    ctx: CallContext,
  ): { readonly ok: boolean; readonly reason: string } {
    return this.agentChanges.shutdownAgent(agentId, graceMs, reason, ctx);
  }

  dispose(): void {
    const core = this.core;
    if (core.disposed) return;
    core.guard.stop();
    for (const s of this.subscriptions) s.dispose();
    core.timers.clear();
    this.housekeeping.dispose();
    core.changed.dispose();
    core.ended.dispose();
  }
}
