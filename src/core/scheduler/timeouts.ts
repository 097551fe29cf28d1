import type { CallContext } from '../context';
import type { Transition } from '../kernel/transitions';
import type { SchedulerContext } from './context';
import type { TaskRecord } from './model';
import { terminateCommand } from './notices';
import { msUntilDeadline, settled, terminateSent, terminateUnsent, type EndState } from './state';

/** What the deadlines need of the other parts. */
export interface TimeoutNeeds {
  end(
    task: TaskRecord,
    state: EndState,
    code: string,
    note: string,
    ctx: CallContext,
    cause: string,
  ): TaskRecord | undefined;
  schedulePump(): void;
}

/**
 * The scheduler's deadlines (RFC §7.2, C.5): a PREEMPTING task's yield wait (then `terminate`, then forced preemption:
 * the task FAILED `forced_preemption`, the agent FAILED), and a cancelled task's terminate grace (past it the agent is
 * FAILED and its slot freed). One timer per task id (KeyedTimers), armed and disarmed through the transition.
 */
export class Timeouts {
  constructor(
    private readonly core: SchedulerContext,
    private readonly needs: TimeoutNeeds,
  ) {}

  /** The deadline of `task` as `base` says (none: disarmed). `tx` undefined: at start, armed at once. */
  armDeadline(task: TaskRecord, base: TaskRecord, tx: Transition | undefined): void {
    this.core.arm(tx, task.taskId, msUntilDeadline(base, this.core.now()), () =>
      this.core.guard.run('deadline', () => this.onDeadline(task)),
    );
  }

  private onDeadline(task: TaskRecord): void {
    const { memory, options } = this.core;
    if (memory.open.get(task.taskId) !== task || task.state !== 'PREEMPTING') return;
    const ctx: CallContext = { correlationId: task.taskId };
    if (!task.terminateMessageId) {
      const reason = `no yield within ${task.nonPreemptibleUntil !== null ? 'the declared non-preemptible section' : `${options.maxNonPreemptibleMs} ms`}`;
      this.core.run('deadline', (tx) => this.sendTerminate(task, task, reason, ctx, true, tx));
      return;
    }
    // No answer to `terminate` within the grace: forced preemption; the agent FAILED.
    const agentId = task.assignedAgentId;
    this.core.run('deadline', (tx) => {
      this.needs.end(
        task,
        'FAILED',
        'forced_preemption',
        `no answer to terminate within ${options.terminateGraceMs} ms`,
        ctx,
        'forced',
      );
      tx.install(() => memory.vacate(agentId, task.taskId));
      this.core.moveAgent(
        agentId,
        ['FAILED_STATE'],
        {
          by: 'timeout',
          reason: `no answer to terminate of ${task.taskId} within ${options.terminateGraceMs} ms`,
          errorCode: 'forced_preemption',
          taskId: task.taskId,
        },
        ctx,
      );
      tx.install(() => this.core.refreshIdle(agentId));
      tx.after(() => this.needs.schedulePump());
    });
  }

  /**
   * CONTROL `terminate` with the grace to the agent of `task` (`base`: its record as it is in this transition). For an
   * open task (forced preemption) its deadline is armed here (at once when nothing could be sent: it ends as the grace
   * would); a cancelled one's by `armCancelGrace`. Answers the record as it becomes.
   */
  sendTerminate(
    task: TaskRecord,
    base: TaskRecord,
    reason: string,
    ctx: CallContext,
    open: boolean,
    tx: Transition,
  ): TaskRecord {
    const { deps, options } = this.core;
    const agentId = base.assignedAgentId;
    const now = this.core.now();
    const sent = this.core.sendControl(
      agentId,
      terminateCommand(task.taskId, options.terminateGraceMs, reason),
      task.taskId,
      ctx,
    );
    let next = base;
    if (!sent.accepted) {
      this.core.event(
        task,
        'task.terminate_unsent',
        { agent_id: agentId, code: sent.code, reason: sent.reason },
        'WARN',
      );
      // Nothing can reach the agent: an open task ends now as the grace would (in memory: the store keeps its deadline).
      if (open) next = terminateUnsent(base, now);
    } else {
      next = terminateSent(base, sent.messageId, now + options.terminateGraceMs, now);
      deps.store.scheduler.put(next);
      this.core.event(
        task,
        'task.terminate_sent',
        { agent_id: agentId, grace_ms: options.terminateGraceMs, reason, terminate_message_id: sent.messageId },
        'WARN',
      );
    }
    if (next !== base) this.core.install(tx, task, next);
    if (open) this.armDeadline(task, next, tx);
    return next;
  }

  /**
   * The grace of a cancelled task's `terminate` (from its deadline as `base` says; at once when none was sent): past it
   * the agent is FAILED forced_preemption and its slot freed. Restore arms it again from the store (`tx` undefined).
   */
  armCancelGrace(task: TaskRecord, base: TaskRecord, tx: Transition | undefined): void {
    const agentId = base.assignedAgentId;
    const graceMs = msUntilDeadline(base, this.core.now()) ?? 0;
    this.core.arm(tx, task.taskId, graceMs, () =>
      this.core.guard.run('cancel_grace', () => this.onCancelGrace(task, agentId)),
    );
  }

  private onCancelGrace(task: TaskRecord, agentId: string): void {
    const { memory, options } = this.core;
    if (memory.slots.get(agentId)?.cancelled !== task) return;
    const taskId = task.taskId;
    this.core.run('cancel_grace', (tx) => {
      tx.install(() => memory.vacate(agentId));
      this.settleTerminate(task, tx);
      this.core.moveAgent(
        agentId,
        ['FAILED_STATE'],
        {
          by: 'timeout',
          reason: `no answer to terminate of cancelled task ${taskId} within ${options.terminateGraceMs} ms`,
          errorCode: 'forced_preemption',
          taskId,
        },
        { correlationId: taskId },
      );
      tx.install(() => this.core.refreshIdle(agentId));
    });
  }

  /** The cancelled task's `terminate` is answered or given up: its deadline cleared in the store (not restored again). */
  settleTerminate(task: TaskRecord, tx: Transition): void {
    if (task.deadline === null) return;
    const next = settled(task);
    this.core.deps.store.scheduler.put(next);
    this.core.install(tx, task, next);
  }
}
