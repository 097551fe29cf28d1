import { SchedulerError } from './errors';
import type { SchedulerOptions, TaskRecord } from './model';

/** The max_parallel_instances limits (per agent type, and the default): each a whole number ≥ 0 (0 = unlimited), or refused. */
export function checkLimits(limits: Readonly<Record<string, number>>, defaultLimit: number): void {
  const check = (value: unknown, what: string) => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
      throw new SchedulerError(
        'invalid',
        `max_parallel_instances ${what} must be a whole number ≥ 0 (0 = unlimited), not ${JSON.stringify(value)}`,
        'VALIDATION_ERROR',
      );
    }
  };
  check(defaultLimit, 'default');
  for (const [type, value] of Object.entries(limits)) check(value, `for '${type}'`);
}

/** The limit of an agent type: its own, else the default (0 = unlimited). */
export function limitFor(options: SchedulerOptions, agentType: string): number {
  return options.maxParallelInstances[agentType] ?? options.defaultMaxParallelInstances;
}

/**
 * The agent type a running task counts for: its agent's (when still registered), else the type of its
 * `type:<agent type>` target, else none.
 */
export function typeOfTask(
  task: TaskRecord,
  agentTypeOf: ((agentId: string) => string | undefined) | undefined,
): string | undefined {
  const registered = task.assignedAgentId ? agentTypeOf?.(task.assignedAgentId) : undefined;
  if (registered !== undefined) return registered;
  return task.target.startsWith('type:') ? task.target.slice('type:'.length) : undefined;
}
