import type { StoredEvent } from '../../log/model';
import type { MessageSummary } from '../../router/router';
import type { SubmitResult, TaskChange, TaskRecord } from '../../scheduler/model';
import { SchedulerError, type TaskCounts, type TaskQuery } from '../../scheduler/scheduler';
import type { SchedulerApi, TaskSubmissionInput } from '../sections/scheduler';
import type { InProcessHost } from './host';

/** CoordinatorApi's task section (the scheduler, ShutdownAgent) over a coordinator in this thread. */
export function schedulerSection(host: InProcessHost): SchedulerApi {
  const tasksChanged = host.emitter<TaskChange>();
  host.subscribe(host.coordinator.scheduler.onDidChange((change) => tasksChanged.fire(change)));
  return {
    onDidChangeTasks: tasksChanged.event,

    tasks(query?: TaskQuery): Promise<TaskRecord[]> {
      return host.run((c) => c.scheduler.tasks(query));
    },

    task(taskId: string): Promise<TaskRecord | undefined> {
      return host.run((c) => c.scheduler.task(taskId));
    },

    taskCounts(): Promise<TaskCounts> {
      return host.run((c) => c.scheduler.counts());
    },

    submitTask(submission: TaskSubmissionInput, by: string): Promise<SubmitResult> {
      return host.run((c) =>
        c.scheduler.submit(
          {
            taskId: submission.taskId ?? '',
            target: submission.target,
            priority: submission.priority,
            params: Buffer.from(submission.params, 'utf8'),
            contentType: submission.contentType ?? '',
            scope: submission.scope,
            submittedBy: by,
          },
          { correlationId: submission.taskId || c.ids.uuid(), principal: 'operator' },
        ),
      );
    },

    preemptTask(taskId: string, reason: string, by: string): Promise<TaskRecord> {
      return host.run((c) => {
        const task = c.scheduler.task(taskId);
        if (!task) throw new SchedulerError('not_found', `There is no task ${taskId}.`);
        const answer = c.scheduler.preempt(task.assignedAgentId, taskId, reason || `preempted by ${by}`, {
          correlationId: taskId,
          principal: 'operator',
        });
        if (!answer.enqueued) throw new SchedulerError('refused', answer.reason);
        return c.scheduler.task(taskId) ?? task;
      });
    },

    cancelTask(taskId: string, reason: string, by: string): Promise<TaskRecord> {
      return host.run((c) =>
        c.scheduler.cancel(taskId, reason || `cancelled by ${by}`, { correlationId: taskId, principal: 'operator' }),
      );
    },

    shutdownAgent(agentId: string, graceMs: number | undefined, by: string): Promise<void> {
      return host.run((c) => {
        const answer = c.scheduler.shutdownAgent(agentId, graceMs ?? 30_000, `shut down by ${by}`, {
          correlationId: c.ids.uuid(),
          principal: 'operator',
        });
        if (!answer.ok) throw new SchedulerError(c.registry.get(agentId) ? 'refused' : 'not_found', answer.reason);
      });
    },

    taskEvents(taskId: string, limit = 200): Promise<StoredEvent[]> {
      return host.run((c) => c.log.query({ correlationId: taskId, limit }));
    },

    taskMessages(taskId: string): Promise<MessageSummary[]> {
      return host.run((c) => c.router.messages({ correlationId: taskId }));
    },

    setMaxParallelInstances(limits: Readonly<Record<string, number>>, defaultLimit: number, by: string): Promise<void> {
      return host.run((c) => {
        c.concurrency.setMaxParallelInstances(limits, defaultLimit);
        c.log.record({
          correlationId: c.ids.uuid(),
          actor: by,
          eventType: 'scheduler.limits_changed',
          details: { max_parallel_instances: limits, default: defaultLimit },
        });
      });
    },
  };
}
