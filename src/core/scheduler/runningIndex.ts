import type { RunningTasks, TaskRecord, TaskScope } from './model';
import { touchesFiles } from './overlap';

interface RunningEntry {
  readonly key: string;
  readonly task: TaskRecord;
  /** Start order: entries are listed by it (a key replaced in place keeps its order). */
  readonly order: number;
  readonly type: string | undefined;
  /** The task's `agentType` when it was indexed (it does not change while the task runs). */
  readonly agentType: string;
}

/**
 * The running tasks, indexed incrementally (RunningTasks): by slot key (the scheduler's agent id), by task id, by agent
 * type (a count for max_parallel_instances; by priority then seq for preemption), by repository and by declared resource
 * (the overlap candidates). `set` and `deleteTask` cost O(log n) (the priority buckets are sorted arrays).
 */
export class RunningIndex implements RunningTasks {
  private readonly byKey = new Map<string, RunningEntry>();
  private readonly byTask = new Map<string, RunningEntry>();
  private readonly byType = new Map<string, Set<RunningEntry>>();
  /** agentType → priority → entries by seq ascending. */
  private readonly byRank = new Map<string, Map<number, RunningEntry[]>>();
  /** Tasks touching files: by repository ('' = none named). */
  private readonly byRepo = new Map<string, Set<RunningEntry>>();
  private readonly byResource = new Map<string, Set<RunningEntry>>();
  private nextOrder = 0;

  constructor(private readonly typeOf: (task: TaskRecord) => string | undefined) {}

  get size(): number {
    return this.byKey.size;
  }

  /** What runs under `key` now: `task`, or nothing (undefined). The same key keeps its place in the order. */
  set(key: string, task: TaskRecord | undefined): void {
    const previous = this.byKey.get(key);
    if (previous) this.remove(previous);
    if (!task) {
      if (previous) this.byKey.delete(key);
      return;
    }
    const stale = this.byTask.get(task.taskId);
    if (stale && stale.key !== key) this.delete(stale);
    const entry: RunningEntry = {
      key,
      task,
      order: previous ? previous.order : this.nextOrder++,
      type: this.typeOf(task),
      agentType: task.agentType,
    };
    this.byKey.set(key, entry);
    this.byTask.set(task.taskId, entry);
    if (entry.type !== undefined) addTo(this.byType, entry.type, entry);
    let ranks = this.byRank.get(entry.agentType);
    if (!ranks) this.byRank.set(entry.agentType, (ranks = new Map()));
    let bucket = ranks.get(task.priority);
    if (!bucket) ranks.set(task.priority, (bucket = []));
    bucket.splice(seqIndex(bucket, task.seq), 0, entry);
    if (touchesFiles(task.scope)) addTo(this.byRepo, task.scope.repoId, entry);
    for (const resource of new Set(task.scope.resources)) addTo(this.byResource, resource, entry);
  }

  /** The task no longer runs (ended), whatever key it was under. */
  deleteTask(taskId: string): void {
    const entry = this.byTask.get(taskId);
    if (entry) this.delete(entry);
  }

  has(taskId: string): boolean {
    return this.byTask.has(taskId);
  }

  /** Every running task, in start order (O(n log n): for tests and diagnostics, not the dispatch path). */
  tasks(): TaskRecord[] {
    return [...this.byKey.values()].sort((a, b) => a.order - b.order).map((e) => e.task);
  }

  countOfType(type: string, exceptTaskId?: string): number {
    const count = this.byType.get(type)?.size ?? 0;
    const except = exceptTaskId === undefined ? undefined : this.byTask.get(exceptTaskId);
    return except && except.type === type ? count - 1 : count;
  }

  mayOverlap(scope: TaskScope): readonly TaskRecord[] {
    const found = new Set<RunningEntry>();
    const addAll = (entries: Iterable<RunningEntry> | undefined) => {
      if (entries) for (const e of entries) found.add(e);
    };
    for (const resource of scope.resources) addAll(this.byResource.get(resource));
    if (touchesFiles(scope)) {
      if (scope.repoId === '') for (const entries of this.byRepo.values()) addAll(entries);
      else {
        addAll(this.byRepo.get(scope.repoId));
        addAll(this.byRepo.get(''));
      }
    }
    if (found.size === 0) return [];
    return [...found].sort((a, b) => a.order - b.order).map((e) => e.task);
  }

  /**
   * The running tasks whose `agentType` was `agentType` with a priority numerically above `priority`, from the
   * numerically highest priority, then the latest arrival (highest seq) first: the preemption candidates in order.
   */
  *byPreemptionRank(agentType: string, priority: number): Generator<TaskRecord> {
    const ranks = this.byRank.get(agentType);
    if (!ranks) return;
    const priorities = [...ranks.keys()].filter((p) => p > priority).sort((a, b) => b - a);
    for (const p of priorities) {
      const bucket = ranks.get(p);
      if (!bucket) continue;
      for (let i = bucket.length - 1; i >= 0; i--) yield bucket[i].task;
    }
  }

  private delete(entry: RunningEntry): void {
    this.remove(entry);
    this.byKey.delete(entry.key);
  }

  /** Out of every index but byKey. */
  private remove(entry: RunningEntry): void {
    if (this.byTask.get(entry.task.taskId) === entry) this.byTask.delete(entry.task.taskId);
    if (entry.type !== undefined) deleteFrom(this.byType, entry.type, entry);
    const ranks = this.byRank.get(entry.agentType);
    const bucket = ranks?.get(entry.task.priority);
    if (ranks && bucket) {
      const at = bucket.indexOf(entry, Math.max(0, seqIndex(bucket, entry.task.seq) - 1));
      if (at >= 0) bucket.splice(at, 1);
      if (bucket.length === 0) ranks.delete(entry.task.priority);
      if (ranks.size === 0) this.byRank.delete(entry.agentType);
    }
    if (touchesFiles(entry.task.scope)) deleteFrom(this.byRepo, entry.task.scope.repoId, entry);
    for (const resource of new Set(entry.task.scope.resources)) deleteFrom(this.byResource, resource, entry);
  }
}

/** The first index in `bucket` (sorted by seq) whose seq is not below `seq`. */
function seqIndex(bucket: readonly RunningEntry[], seq: number): number {
  let lo = 0;
  let hi = bucket.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (bucket[mid].task.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function addTo<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(value);
}

function deleteFrom<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  const set = map.get(key);
  if (set?.delete(value) && set.size === 0) map.delete(key);
}
