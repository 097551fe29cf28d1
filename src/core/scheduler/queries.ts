import type { SchedulerMemory } from './memory';
import type { SchedulerRepository, TaskRecord } from './model';
import { RUNNING_STATES } from './state';
import { before } from './taskQueue';

export interface TaskQuery {
  /** Only tasks for (target) or on (assigned) this agent. */
  readonly agentId?: string;
  /** Also terminal tasks (newest ended first, after the open ones); default true. */
  readonly includeFinished?: boolean;
  /** At most this many finished tasks (default 200). */
  readonly finishedLimit?: number;
  /** At most this many open tasks, the first in dispatch order (default all); `counts()` says how many there are. */
  readonly openLimit?: number;
}

/** How many tasks are open, by where they are. */
export interface TaskCounts {
  readonly queued: number;
  /** Dispatched, running or being preempted. */
  readonly running: number;
}

/** The scheduler's reads: open tasks from memory, finished ones from the store. */
export class TaskQueries {
  constructor(
    private readonly memory: SchedulerMemory,
    private readonly tasksStored: SchedulerRepository,
  ) {}

  task(taskId: string): TaskRecord | undefined {
    return this.memory.open.get(taskId) ?? this.tasksStored.get(taskId);
  }

  /** Open tasks in dispatch order (priority, then arrival), then finished ones, newest first. */
  tasks(query: TaskQuery = {}): TaskRecord[] {
    const mine = (t: TaskRecord) => !query.agentId || t.target === query.agentId || t.assignedAgentId === query.agentId;
    const all = [...this.memory.open.values()].filter(mine).sort((a, b) => (before(a, b) ? -1 : 1));
    const open = query.openLimit === undefined ? all : all.slice(0, Math.max(0, query.openLimit));
    if (query.includeFinished === false) return open;
    const limit = query.finishedLimit ?? 200;
    const finished = this.tasksStored
      .listFinished(query.agentId ? Math.max(limit * 4, 1000) : limit)
      .filter(mine)
      .slice(0, limit);
    return [...open, ...finished];
  }

  counts(): TaskCounts {
    let running = 0;
    for (const task of this.memory.open.values()) if (RUNNING_STATES.has(task.state)) running++;
    return { queued: this.memory.open.size - running, running };
  }

  /** Whether the task is known and not terminal (the activity buffer's reconciliation). */
  isActive(_agentId: string, taskId: string): boolean {
    return this.memory.open.has(taskId);
  }

  /** Open scheduler tasks for the agent: the one it runs (or a cancelled one awaiting `terminate`) and those queued for its id. */
  loadOf(agentId: string): number {
    const memory = this.memory;
    let n = memory.slots.has(agentId) ? 1 : 0;
    n += memory.queues.get(agentId)?.size ?? 0;
    for (const task of memory.gateHeld) if (task.target === agentId) n++;
    return n;
  }
}
