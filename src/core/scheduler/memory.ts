import { RunningIndex } from './concurrency';
import type { TaskRecord } from './model';
import { RUNNING_STATES } from './state';
import { TargetQueue } from './taskQueue';

/** What occupies an agent: its task (dispatched, running, preempting), or a cancelled task whose `terminate` is pending. */
export interface Slot {
  readonly taskId: string;
  /** The cancelled task kept until the agent answers `terminate` (it is no longer open). */
  readonly cancelled?: TaskRecord;
}

/**
 * What the scheduler holds in memory, indexed so that submit + dispatch stay O(log n) with 100,000 queued tasks and
 * 1,000 agents: open tasks by id; queued tasks per target (agent id or `type:<name>`) in a TargetQueue (40 FIFOs),
 * except those the gate holds (gateHeld: out of the queue until a task ends or the gate changes, so they never hold up
 * the tasks behind them); idle agents by id and by type; what each agent runs (slots) and, kept in step with them, the
 * running tasks indexed by type, repository and resource (runningIndex: what the gate's mayStart and preemption ask,
 * never a walk over every running task); open tasks by job key (for the gate's duplicate check).
 *
 * No store, no timers, no emitters: the operations change it only in their transitions' `install` effects (and the
 * restore at start), so a rolled-back transaction leaves it as the store is.
 */
export class SchedulerMemory {
  readonly open = new Map<string, TaskRecord>();
  readonly queues = new Map<string, TargetQueue>();
  readonly byJob = new Map<string, Set<TaskRecord>>();
  readonly slots = new Map<string, Slot>();
  readonly idle = new Set<string>();
  readonly idleByType = new Map<string, Set<string>>();
  /** Each idle agent's type (its key in idleByType). */
  readonly idleType = new Map<string, string>();
  /** Each agent's state as the scheduler last saw it (the timeout that failed an agent is the one of its previous state). */
  readonly agentStates = new Map<string, string>();
  /** Agents told to shut down by this process (the reason); after a restart the agent's SHUTTING_DOWN state says it. */
  readonly shuttingDown = new Map<string, string>();
  /**
   * Queued tasks the gate last answered `waiting` (a limit, a serialisation, a decision), kept out of their TargetQueue
   * so that they never hold up the tasks behind them; put back in it when a task ends or the gate changes.
   */
  readonly gateHeld = new Set<TaskRecord>();
  /** The open tasks in the slots, indexed for the gate and preemption (kept in step with slots and open: syncRunning). */
  readonly runningIndex: RunningIndex;
  /** Idle agents to try at the next dispatch round. */
  readonly dirty = new Set<string>();
  /** The highest seq given (strictly increasing across restarts). */
  lastSeq: number;

  constructor(typeOf: (task: TaskRecord) => string | undefined, lastSeq: number) {
    this.runningIndex = new RunningIndex(typeOf);
    this.lastSeq = lastSeq;
  }

  /** An open task into the indexes: queued ones into their queue (unless the gate holds them), running ones into their slot. */
  enqueue(task: TaskRecord): void {
    this.open.set(task.taskId, task);
    let jobs = this.byJob.get(task.jobKey);
    if (!jobs) this.byJob.set(task.jobKey, (jobs = new Set()));
    jobs.add(task);
    if (task.state === 'QUEUED') {
      if (!this.gateHeld.has(task)) this.queueOf(task.target).insert(task);
    } else if (RUNNING_STATES.has(task.state)) {
      this.slots.set(task.assignedAgentId, { taskId: task.taskId });
      this.syncRunning(task.assignedAgentId);
    }
  }

  queueOf(target: string): TargetQueue {
    let queue = this.queues.get(target);
    if (!queue) this.queues.set(target, (queue = new TargetQueue()));
    return queue;
  }

  /** Takes `task` out of its target's queue; an emptied queue is dropped. */
  unqueue(task: TaskRecord): void {
    const queue = this.queues.get(task.target);
    if (!queue) return;
    queue.remove(task);
    if (queue.size === 0) this.queues.delete(task.target);
  }

  /** The gate holds `task`: out of its queue, into gateHeld. */
  hold(task: TaskRecord): void {
    this.gateHeld.add(task);
    this.unqueue(task);
  }

  /** The queued tasks for `target` (an agent id): in its queue and held by the gate. */
  queuedFor(target: string): TaskRecord[] {
    const queued = [...(this.queues.get(target)?.ordered() ?? [])];
    for (const task of this.gateHeld) if (task.target === target) queued.push(task);
    return queued;
  }

  /** The open task in the agent's slot (not a cancelled one awaiting `terminate`). */
  runningOn(agentId: string): TaskRecord | undefined {
    const slot = this.slots.get(agentId);
    return slot && !slot.cancelled ? this.open.get(slot.taskId) : undefined;
  }

  /** The agent holds `slot` now. */
  occupy(agentId: string, slot: Slot): void {
    this.slots.set(agentId, slot);
    this.syncRunning(agentId);
  }

  /** The agent's slot is freed if `taskId` holds it (every slot when `taskId` is undefined). */
  vacate(agentId: string, taskId?: string): void {
    if (taskId === undefined || this.slots.get(agentId)?.taskId === taskId) this.slots.delete(agentId);
    this.syncRunning(agentId);
  }

  /** The slot of `agentId` changed (or its task left `open`): the running index follows. O(log n). */
  syncRunning(agentId: string): void {
    const slot = this.slots.get(agentId);
    this.runningIndex.set(agentId, slot ? this.open.get(slot.taskId) : undefined);
  }

  /** An ended task leaves the open indexes (its queue, its job, the running index, the gate's held tasks). */
  close(task: TaskRecord, wasQueued: boolean): void {
    if (wasQueued) this.unqueue(task);
    this.open.delete(task.taskId);
    const jobs = this.byJob.get(task.jobKey);
    jobs?.delete(task);
    if (jobs?.size === 0) this.byJob.delete(task.jobKey);
    this.runningIndex.deleteTask(task.taskId);
    this.gateHeld.delete(task);
  }

  /** The agent is idle as an agent of `type` (its type may have changed: re-registered with another descriptor). */
  markIdle(agentId: string, type: string): void {
    this.idle.add(agentId);
    const was = this.idleType.get(agentId);
    if (was !== undefined && was !== type) this.dropIdleType(agentId, was);
    this.idleType.set(agentId, type);
    let ofType = this.idleByType.get(type);
    if (!ofType) this.idleByType.set(type, (ofType = new Set()));
    ofType.add(agentId);
  }

  dropIdle(agentId: string): void {
    if (!this.idle.delete(agentId)) return;
    const type = this.idleType.get(agentId);
    this.idleType.delete(agentId);
    if (type !== undefined) this.dropIdleType(agentId, type);
  }

  private dropIdleType(agentId: string, type: string): void {
    const ids = this.idleByType.get(type);
    if (ids?.delete(agentId) && ids.size === 0) this.idleByType.delete(type);
  }
}
