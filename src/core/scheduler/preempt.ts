import type { CallContext } from '../context';
import type { Transition } from '../kernel/transitions';
import type { OutboxUpdate } from '../router/model';
import { preemptTarget } from './access';
import type { SchedulerContext } from './context';
import type { TaskRecord } from './model';
import { preemptCommand } from './notices';
import { declaredSection, nonPreemptible, preempting, targetType } from './state';

/** What preemption needs of the other parts. */
export interface PreemptNeeds {
  armDeadline(task: TaskRecord, base: TaskRecord, tx: Transition): void;
  schedulePump(): void;
}

/**
 * Cooperative preemption (RFC §7.1, C.5): which running task yields for a waiting one of numerically lower priority
 * (or when the operator asks), the `preempt_request`, a declared non-preemptible section, and the yield: the task back
 * in the queue at its priority and seq, the agent SUSPENDED. What follows an unanswered request is in timeouts.ts.
 */
export class Preemption {
  constructor(
    private readonly core: SchedulerContext,
    private readonly needs: PreemptNeeds,
  ) {}

  /** A new task numerically lower than a running one it could take: that agent is asked to yield (RFC §7.1). */
  considerPreemption(task: TaskRecord, ctx: CallContext): void {
    const memory = this.core.memory;
    let victim: TaskRecord | undefined;
    const type = targetType(task.target);
    if (type !== undefined) {
      if (memory.idleByType.get(type)?.size) return;
      // The numerically highest priority first, then the latest arrival: the first that can be asked is the victim.
      for (const running of memory.runningIndex.byPreemptionRank(type, task.priority)) {
        if (running.agentType !== type || running.state === 'PREEMPTING' || running.priority <= task.priority) continue;
        if (memory.shuttingDown.has(running.assignedAgentId)) continue;
        victim = running;
        break;
      }
    } else {
      const running = memory.runningOn(task.target);
      if (running && running.state !== 'PREEMPTING' && running.priority > task.priority) victim = running;
    }
    if (victim)
      this.requestPreemption(
        victim,
        task.taskId,
        task.priority,
        `task ${task.taskId} of priority ${task.priority} is waiting`,
        { ...ctx, correlationId: victim.taskId },
      );
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
    const target = preemptTarget(this.core.memory, agentId, taskId);
    if ('refusal' in target) return { enqueued: false, reason: target.refusal };
    const task = target.task;
    const sent = this.requestPreemption(task, '', task.priority, reason || 'preemption requested', {
      ...ctx,
      correlationId: task.taskId,
    });
    return sent
      ? { enqueued: true, reason: '' }
      : { enqueued: false, reason: `the preempt_request could not be sent to ${task.assignedAgentId}` };
  }

  private requestPreemption(
    task: TaskRecord,
    byTaskId: string,
    byPriority: number,
    reason: string,
    ctx: CallContext,
  ): boolean {
    const { deps, options } = this.core;
    const agentId = task.assignedAgentId;
    const now = this.core.now();
    return this.core.run('preempt', (tx) => {
      const sent = this.core.sendControl(
        agentId,
        preemptCommand(task.taskId, reason, byTaskId, byPriority),
        task.taskId,
        ctx,
      );
      if (!sent.accepted) {
        this.core.event(
          task,
          'task.preempt_unsent',
          { agent_id: agentId, code: sent.code, reason: sent.reason },
          'WARN',
        );
        return false;
      }
      const from = task.state;
      const next = preempting(task, sent.messageId, byTaskId, now + options.maxNonPreemptibleMs, now);
      deps.store.scheduler.put(next);
      this.core.event(next, 'task.preempt_requested', {
        agent_id: agentId,
        by_task_id: byTaskId,
        by_priority: byPriority,
        reason,
        preempt_message_id: sent.messageId,
        yield_by_ms: options.maxNonPreemptibleMs,
      });
      this.core.stateEvent(next, from, { agent_id: agentId });
      this.core.install(tx, task, next);
      this.needs.armDeadline(task, next, tx);
      this.core.notifyChanged(tx, task);
      return true;
    });
  }

  /** An ACK of the task's `preempt_request`: a non-preemptible section declared, the yield, or no answer (the deadline stands). */
  onPreemptUpdate(task: TaskRecord, update: OutboxUpdate, ctx: CallContext): void {
    if (task.state !== 'PREEMPTING') return;
    const declared = declaredSection(update.note);
    if ((update.state === 'RECEIVED' || update.state === 'READ') && declared !== undefined) {
      this.core.run('non_preemptible', (tx) => {
        const ms = Math.min(declared, this.core.options.maxNonPreemptibleMs);
        const next = nonPreemptible(task, ms, this.core.now());
        this.core.deps.store.scheduler.put(next);
        this.core.event(next, 'task.non_preemptible', {
          agent_id: task.assignedAgentId,
          declared_ms: declared,
          until_ms: ms,
        });
        this.core.install(tx, task, next);
        this.needs.armDeadline(task, next, tx);
        this.core.notifyChanged(tx, task);
      });
    } else if (update.state === 'FULFILLED' && update.note === 'yielded') {
      this.yielded(task, ctx);
    } else if (update.state === 'FAILED' || update.state === 'REJECTED' || update.state === 'TIMED_OUT') {
      // The agent would not (or did not) take the request: the deadline still stands, then `terminate`.
      this.core.event(
        task,
        'task.preempt_unanswered',
        { agent_id: task.assignedAgentId, state: update.state, error_code: update.errorCode, note: update.note },
        'WARN',
      );
    }
  }

  /** The agent yielded at a safe point: the task goes back to the queue at its priority and seq; the agent SUSPENDED. */
  yielded(task: TaskRecord, ctx: CallContext): void {
    const memory = this.core.memory;
    const agentId = task.assignedAgentId;
    const by = task.preemptedBy;
    this.core.run('yield', (tx) => {
      tx.disarm(this.core.timers, task.taskId);
      const from = task.state;
      this.core.endActivity(agentId, task.taskId, '', ctx);
      tx.install(() => memory.vacate(agentId, task.taskId));
      const next = this.core.requeue(tx, task, task, { kind: 'preempted', byTaskId: by });
      this.core.event(next, 'task.yielded', { agent_id: agentId, by_task_id: by });
      this.core.stateEvent(next, from, { agent_id: agentId, reason: 'yielded' });
      this.core.moveAgent(
        agentId,
        ['SUSPENDED'],
        { by: 'task', reason: `yielded task ${task.taskId}`, taskId: task.taskId },
        ctx,
      );
      tx.install(() => {
        this.core.refreshIdle(agentId);
        memory.dirty.add(agentId);
      });
      this.core.notifyChanged(tx, task);
      tx.after(() => this.needs.schedulePump());
    });
  }
}
