import type { CallContext } from '../context';
import type { Transition } from '../kernel/transitions';
import { SCHEDULER, type SchedulerContext } from './context';
import type { TaskRecord } from './model';
import { doneWay, ended, type EndState } from './state';

/** What ending a task needs of the other parts. */
export interface EndNeeds {
  /** Memory (an install effect): the tasks the gate held go back into their queues, an idle agent woken for each. */
  releaseHeld(): void;
  schedulePump(): void;
  /** CONTROL `terminate` to the agent of `task` (as `base` is now); answers the record as it becomes. */
  sendTerminate(
    task: TaskRecord,
    base: TaskRecord,
    reason: string,
    ctx: CallContext,
    open: boolean,
    tx: Transition,
  ): TaskRecord;
  /** The grace of a cancelled task's `terminate` (its deadline as `base` says). */
  armCancelGrace(task: TaskRecord, base: TaskRecord, tx: Transition): void;
}

/**
 * How a task ends: COMPLETED, FAILED or CANCELLED, stored with its event, its activity entry ended, the gate told, the
 * workflow engine told inside the transaction (onDidEndTask); the agent freed as the cause requires (released after
 * its answer; kept until it answers `terminate` when the task was cancelled or handed off while dispatched).
 */
export class Ends {
  constructor(
    private readonly core: SchedulerContext,
    private readonly needs: EndNeeds,
  ) {}

  /**
   * Ends an open task (`base`: the record as it is in this transition, by default `task`). Does not move the agent (the
   * caller does, as the cause requires). Answers the ended record, undefined when the task was not open.
   */
  end(
    task: TaskRecord,
    state: EndState,
    code: string,
    note: string,
    ctx: CallContext,
    cause: string,
    result = '',
    base: TaskRecord = task,
  ): TaskRecord | undefined {
    const { memory, deps } = this.core;
    if (!memory.open.has(task.taskId)) return undefined;
    return this.core.run('end', (tx) => {
      const from = base.state;
      const agentId = base.assignedAgentId;
      tx.disarm(this.core.timers, task.taskId);
      const next = ended(base, state, code, note, result, this.core.now());
      deps.store.scheduler.put(next);
      this.core.stateEvent(
        next,
        from,
        { agent_id: agentId, error_code: next.errorCode, note: next.note.slice(0, 512), cause },
        state === 'FAILED' ? 'WARN' : 'INFO',
      );
      if (agentId) this.core.endActivity(agentId, task.taskId, state, ctx);
      try {
        deps.gate.forget(task.taskId, ctx);
      } catch (err) {
        deps.log.internalError(SCHEDULER, task.taskId, err, { task_id: task.taskId, during: 'gate.forget' });
      }
      // Inside the transaction: a listener (the workflow engine) commits what the end means with it.
      this.core.ended.fire(next);
      tx.install(() => {
        Object.assign(task, next);
        memory.close(task, from === 'QUEUED');
        // Tasks the gate held (serialised after this one, behind a limit) may start now: wake an idle agent for each.
        this.needs.releaseHeld();
      });
      this.core.notifyChanged(tx, task);
      tx.after(() => this.needs.schedulePump());
      return next;
    });
  }

  /** The task ended by the agent's answer (or the router's end of its run): the agent is free again. */
  finished(
    task: TaskRecord,
    state: 'COMPLETED' | 'FAILED',
    code: string,
    note: string,
    ctx: CallContext,
    result = '',
  ): void {
    this.core.run('finished', (tx) => {
      const agentId = task.assignedAgentId;
      this.end(task, state, code, note, ctx, 'agent', result);
      this.releaseAgent(agentId, task.taskId, `task ${task.taskId} ${state.toLowerCase()}`, ctx, tx);
    });
  }

  /** Frees the agent after its task: → COMPLETED → RUNNABLE (from wherever its run left it). */
  releaseAgent(agentId: string, taskId: string, reason: string, ctx: CallContext, tx: Transition): void {
    const { memory, deps } = this.core;
    tx.install(() => memory.vacate(agentId, taskId));
    const agent = deps.agents.get(agentId);
    if (agent && !memory.shuttingDown.has(agentId))
      this.core.moveAgent(agentId, doneWay(agent.state), { by: 'task', reason, taskId }, ctx);
    tx.install(() => {
      this.core.refreshIdle(agentId);
      memory.dirty.add(agentId);
    });
    tx.after(() => this.needs.schedulePump());
  }

  /** Ends an open task CANCELLED with `code`; a dispatched one's agent is told `terminate` with the cancel grace. */
  close(
    task: TaskRecord,
    code: string,
    note: string,
    terminateReason: string,
    taskCtx: CallContext,
    cause: string,
  ): void {
    if (task.state === 'QUEUED') {
      this.end(task, 'CANCELLED', code, note, taskCtx, cause);
      return;
    }
    this.core.run('close', (tx) => {
      const agentId = task.assignedAgentId;
      const closed = this.end(task, 'CANCELLED', code, note, taskCtx, cause);
      if (!closed) return;
      // The agent stays occupied until it answers `terminate` (or the grace passes: then it is FAILED).
      tx.install(() => this.core.memory.occupy(agentId, { taskId: task.taskId, cancelled: task }));
      const terminating = this.needs.sendTerminate(task, closed, terminateReason, taskCtx, false, tx);
      this.needs.armCancelGrace(task, terminating, tx);
    });
  }
}
