// CONTRACT SKELETON (s6-api): helper A replaces every body; nothing here is called done.
import type { ActivitySink } from '../activity/model';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable, Event } from '../events';
import type { IdSource } from '../ids';
import type { EventLog } from '../log/eventLog';
import type { AgentLifecycle } from '../registry/model';
import type { CoordinatorOutbox } from '../router/model';
import type { WorktreeLocator } from '../worktree/model';
import type { DispatchGate, SchedulerOptions, SchedulerStorage, SubmitResult, TaskChange, TaskRecord, TaskSubmission } from './model';

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
}

/**
 * The scheduler (RFC §7, §9): tasks queued by priority then arrival, dispatched to agents as CONTROL `run` envelopes,
 * completed by the agent's ACKs, preempted cooperatively (forced after a non-preemptible section's maximum), persisted.
 * Every task's log events and CONTROL envelopes carry correlation_id = task_id.
 */
export class Scheduler implements Disposable {
  readonly onDidChange: Event<TaskChange>;

  constructor(private readonly deps: SchedulerDeps, private readonly options: SchedulerOptions) {
    void this.deps; void this.options;
    this.onDidChange = () => ({ dispose() { /* skeleton */ } });
  }

  /** SubmitTask (RFC §7.1, §9): validated, admitted by the gate, queued, dispatched when it can be. */
  submit(_submission: TaskSubmission, _ctx: CallContext): SubmitResult {
    throw new Error('Scheduler.submit: not built yet (s6 helper A)');
  }

  /** RequestPreemption: a preempt_request to the agent running `taskId` (or the agent's running task when taskId is ''). */
  preempt(_agentId: string, _taskId: string, _reason: string, _ctx: CallContext): { readonly enqueued: boolean; readonly reason: string } {
    throw new Error('Scheduler.preempt: not built yet (s6 helper A)');
  }

  /** Cancels a task: a queued one at once; a running one is told `terminate` (grace) and ends CANCELLED. */
  cancel(_taskId: string, _reason: string, _ctx: CallContext): TaskRecord {
    throw new Error('Scheduler.cancel: not built yet (s6 helper A)');
  }

  /** ShutdownAgent (RFC §8.4): SHUTTING_DOWN with a grace period, CONTROL `shutdown`, no new tasks; cleanup on the way out. */
  shutdownAgent(_agentId: string, _graceMs: number, _reason: string, _ctx: CallContext): { readonly ok: boolean; readonly reason: string } {
    throw new Error('Scheduler.shutdownAgent: not built yet (s6 helper A)');
  }

  task(_taskId: string): TaskRecord | undefined {
    throw new Error('Scheduler.task: not built yet (s6 helper A)');
  }

  /** Open tasks in dispatch order (priority, then arrival), then finished ones, newest first. */
  tasks(_query?: TaskQuery): TaskRecord[] {
    throw new Error('Scheduler.tasks: not built yet (s6 helper A)');
  }

  /** Whether the task is known and not terminal (the activity buffer's reconciliation). */
  isActive(_agentId: string, _taskId: string): boolean {
    throw new Error('Scheduler.isActive: not built yet (s6 helper A)');
  }

  dispose(): void { /* skeleton */ }
}
