import type { CallContext } from '../context';
import type { Transition } from '../kernel/transitions';
import type { OutboxUpdate } from '../router/model';
import type { SchedulerContext } from './context';
import type { TaskRecord } from './model';
import { shutdownCorrelation } from './notices';
import { notStarted, started } from './state';

/** What the agents' answers need of the other parts. */
export interface AckNeeds {
  finished(
    task: TaskRecord,
    state: 'COMPLETED' | 'FAILED',
    code: string,
    note: string,
    ctx: CallContext,
    result?: string,
  ): void;
  withdrawn(task: TaskRecord, agentId: string, code: string, reason: string, ctx: CallContext, wasSent: boolean): void;
  yielded(task: TaskRecord, ctx: CallContext): void;
  onPreemptUpdate(task: TaskRecord, update: OutboxUpdate, ctx: CallContext): void;
  onShutdownAck(update: OutboxUpdate): void;
  releaseAgent(agentId: string, taskId: string, reason: string, ctx: CallContext, tx: Transition): void;
  settleTerminate(task: TaskRecord, tx: Transition): void;
}

/**
 * What an agent's ACKs of its CONTROL commands mean (onDidUpdateOutbox, by message id): its `run` started, completed,
 * failed, or was refused or never answered before it started (withdrawn); its `preempt_request` answered (preempt.ts);
 * its `terminate` answered (forced preemption ends, a cancelled task's agent freed); its `shutdown` answered.
 */
export class Acks {
  constructor(
    private readonly core: SchedulerContext,
    private readonly needs: AckNeeds,
  ) {}

  onOutbox(update: OutboxUpdate): void {
    const memory = this.core.memory;
    // The `shutdown` command is known by its correlation id (stored with the envelope: also after a restart).
    if (update.correlationId === shutdownCorrelation(update.recipientId)) {
      this.needs.onShutdownAck(update);
      return;
    }
    const slot = memory.slots.get(update.recipientId);
    if (slot?.cancelled && slot.cancelled.terminateMessageId === update.messageId) {
      this.onCancelledTerminateAck(slot.cancelled, update);
      return;
    }
    const task = memory.open.get(update.correlationId);
    if (!task || task.assignedAgentId !== update.recipientId) return;
    const ctx: CallContext = { correlationId: task.taskId };
    if (update.messageId === task.runMessageId) this.onRunUpdate(task, update, ctx);
    else if (update.messageId === task.preemptMessageId) this.needs.onPreemptUpdate(task, update, ctx);
    else if (update.messageId === task.terminateMessageId) this.onTerminateUpdate(task, update, ctx);
  }

  private onRunUpdate(task: TaskRecord, update: OutboxUpdate, ctx: CallContext): void {
    const agents = this.core.deps.agents;
    const agentId = task.assignedAgentId;
    switch (update.state) {
      case 'RECEIVED':
      case 'READ': {
        if (task.state === 'DISPATCHED') {
          this.core.run('started', (tx) => {
            const from = task.state;
            const next = started(task, this.core.now());
            this.core.deps.store.scheduler.put(next);
            this.core.stateEvent(next, from, { agent_id: agentId, ack: update.state });
            this.core.install(tx, task, next);
            this.core.notifyChanged(tx, task);
          });
        }
        this.core.moveAgent(
          agentId,
          ['RUNNING'],
          { by: 'task', reason: `task ${task.taskId} started (ACK ${update.state})`, taskId: task.taskId },
          ctx,
          true,
        );
        return;
      }
      case 'FULFILLED':
        if (update.note === 'yielded' && task.state === 'PREEMPTING') this.needs.yielded(task, ctx);
        else this.needs.finished(task, 'COMPLETED', '', update.note, ctx, update.result);
        return;
      case 'FAILED':
      case 'REJECTED':
      case 'TIMED_OUT':
        if (update.byAck && update.state === 'FAILED') {
          this.needs.finished(task, 'FAILED', update.errorCode, update.note, ctx);
        } else if (!agents.get(agentId)) {
          return; // the agent left: its cleanup ends the task
        } else if (
          update.state === 'REJECTED' ||
          task.state === 'DISPATCHED' ||
          notStarted(agents.get(agentId)?.state)
        ) {
          // Refused or never answered before the agent started (it is still SCHEDULED / RESUMED): back to the queue.
          this.needs.withdrawn(task, agentId, update.errorCode, update.note, ctx, true);
        } else {
          // The router ended a run the agent had started (it left, a delivery failed): the task failed.
          this.needs.finished(task, 'FAILED', update.errorCode, update.note, ctx);
        }
        return;
      default:
    }
  }

  private onTerminateUpdate(task: TaskRecord, update: OutboxUpdate, ctx: CallContext): void {
    if (update.state !== 'FULFILLED') return;
    this.needs.finished(
      task,
      'FAILED',
      'forced_preemption',
      `terminated after ${update.note || 'terminate'} (preemption forced)`,
      ctx,
    );
  }

  private onCancelledTerminateAck(task: TaskRecord, update: OutboxUpdate): void {
    if (update.state !== 'FULFILLED') return;
    this.core.run('terminated', (tx) => {
      tx.disarm(this.core.timers, task.taskId);
      this.needs.settleTerminate(task, tx);
      this.needs.releaseAgent(
        task.assignedAgentId,
        task.taskId,
        `terminated cancelled task ${task.taskId}`,
        { correlationId: task.taskId },
        tx,
      );
    });
  }
}
