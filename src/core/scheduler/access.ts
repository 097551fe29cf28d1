import type { AgentLifecycle } from '../registry/model';
import { SchedulerError } from './errors';
import type { SchedulerMemory } from './memory';
import type { SchedulerRepository, TaskRecord } from './model';
import { RUNNING_STATES } from './state';

/**
 * Who and what the scheduler's operations may act on, from what it holds: a submission's target and room in the queue,
 * the task a cancel or a preemption names, the agent a shutdown names. (Whether a caller may ask at all, its
 * credential, is the server's and the API's: they check it before they call.)
 */

/** A refusal with its SW4RM code. */
export interface Refusal {
  readonly code: string;
  readonly reason: string;
}

/**
 * Whether a valid submission may enter the queue: a task id not seen before, an agent target that is registered and
 * not shutting down (a `type:` target waits for an agent of the type), room under `maxQueuedTasks`.
 */
export function submitRefusal(
  of: {
    readonly memory: SchedulerMemory;
    readonly tasks: SchedulerRepository;
    readonly agents: AgentLifecycle;
    readonly maxQueuedTasks: number;
  },
  taskId: string,
  target: string,
  agentType: string | undefined,
): Refusal | undefined {
  const { memory } = of;
  if (memory.open.has(taskId) || of.tasks.get(taskId))
    return { code: 'DUPLICATE_DETECTED', reason: `task ${taskId.slice(0, 128)} was already submitted` };
  if (agentType === undefined) {
    const agent = of.agents.get(target);
    if (!agent) return { code: 'NO_ROUTE', reason: `no agent '${target.slice(0, 128)}' is registered` };
    if (agent.state === 'SHUTTING_DOWN' || memory.shuttingDown.has(target))
      return { code: 'AGENT_SHUTDOWN', reason: `agent ${target} is shutting down` };
  }
  if (memory.open.size >= of.maxQueuedTasks) {
    return {
      code: 'BUFFER_FULL',
      reason: `the scheduler holds ${memory.open.size} open tasks (limit ${of.maxQueuedTasks})`,
    };
  }
  return undefined;
}

/** The open task a cancel names; SchedulerError `refused` when it already ended, `not_found` when unknown. */
export function cancelTarget(memory: SchedulerMemory, tasks: SchedulerRepository, taskId: string): TaskRecord {
  const task = memory.open.get(taskId);
  if (task) return task;
  const done = tasks.get(taskId);
  if (done) throw new SchedulerError('refused', `Task ${taskId} already ended ${done.state}.`);
  throw new SchedulerError('not_found', `There is no task ${taskId}.`);
}

/** The running task a preemption names (`taskId`, or the one `agentId` runs when it is ''), or why there is none to ask. */
export function preemptTarget(
  memory: SchedulerMemory,
  agentId: string,
  taskId: string,
): { readonly task: TaskRecord } | { readonly refusal: string } {
  const slot = memory.slots.get(agentId);
  const id = taskId || (slot && !slot.cancelled ? slot.taskId : '');
  const task = id ? memory.open.get(id) : undefined;
  if (!task || !RUNNING_STATES.has(task.state) || (agentId && task.assignedAgentId !== agentId)) {
    return {
      refusal: id ? `task ${id} is not running${agentId ? ` on ${agentId}` : ''}` : `agent ${agentId} runs no task`,
    };
  }
  if (task.state === 'PREEMPTING') return { refusal: `task ${task.taskId} is already being preempted` };
  return { task };
}

/** Why the agent cannot be shut down (not registered, already shutting down), undefined when it can. */
export function shutdownRefusal(memory: SchedulerMemory, agents: AgentLifecycle, agentId: string): string | undefined {
  const agent = agents.get(agentId);
  if (!agent) return `no agent '${agentId.slice(0, 128)}' is registered`;
  if (agent.state === 'SHUTTING_DOWN' || memory.shuttingDown.has(agentId))
    return `agent ${agentId} is already shutting down`;
  return undefined;
}
