import type { Event } from '../../events';
import type { StoredEvent } from '../../log/model';
import type { MessageSummary } from '../../router/router';
import type { SubmitResult, TaskChange, TaskRecord } from '../../scheduler/model';
import type { TaskCounts, TaskQuery } from '../../scheduler/scheduler';

export type { SubmitResult, TaskChange, TaskCounts, TaskQuery, TaskRecord };

/**
 * Tasks (RFC §7–§9; README, "Tasks"): the scheduler's queue, its commands, and ShutdownAgent. Part of
 * CoordinatorApi (coordinatorApi.ts).
 */
export interface SchedulerApi {
  /** Open tasks in dispatch order (priority, then arrival), then finished ones, newest first. */
  tasks(query?: TaskQuery): Promise<TaskRecord[]>;
  task(taskId: string): Promise<TaskRecord | undefined>;
  /** How many tasks are queued and running (the Tasks view's counts when it lists only the first of them). */
  taskCounts(): Promise<TaskCounts>;
  /**
   * Submits a task as SubmitTask does, as `by` (`editor:<name>`). A refusal is an answer (`accepted: false`, its SW4RM
   * code and reason), not an error; an accepted one may say why it waits (max_parallel_instances, a conflict decision).
   */
  submitTask(submission: TaskSubmissionInput, by: string): Promise<SubmitResult>;
  /** Asks the agent running the task to yield (RFC §7.2). Rejects `not_found`, or `refused` when it is not running. */
  preemptTask(taskId: string, reason: string, by: string): Promise<TaskRecord>;
  /** Cancels a task (a running one is told `terminate`). Rejects `not_found`, or `refused` when it already ended. */
  cancelTask(taskId: string, reason: string, by: string): Promise<TaskRecord>;
  /** ShutdownAgent (RFC §8.4): SHUTTING_DOWN with `graceMs` (default 30 s), then out of the registry. Rejects `not_found` / `refused`. */
  shutdownAgent(agentId: string, graceMs: number | undefined, by: string): Promise<void>;
  /** The task's log events (correlation id = task id), oldest first, at most `limit` (200). */
  taskEvents(taskId: string, limit?: number): Promise<StoredEvent[]>;
  /** The task's CONTROL envelopes and their ACKs (correlation id = task id), newest first. */
  taskMessages(taskId: string): Promise<MessageSummary[]>;
  /** Replaces the max_parallel_instances limits per agent type (settings); tasks waiting on a limit are tried again. */
  setMaxParallelInstances(limits: Readonly<Record<string, number>>, defaultLimit: number, by: string): Promise<void>;
  readonly onDidChangeTasks: Event<TaskChange>;
}

/** What the editor's Submit Task… form gives: SubmitTask's fields, params as text (JSON for application/json). */
export interface TaskSubmissionInput {
  /** '' lets the scheduler choose. */
  readonly taskId?: string;
  /** An agent id, or `type:<agent type>`. */
  readonly target: string;
  readonly priority: number;
  readonly params: string;
  readonly contentType?: string;
  readonly scope: string;
}
