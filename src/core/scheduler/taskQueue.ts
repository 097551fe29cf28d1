import { MAX_PRIORITY, MIN_PRIORITY, type TaskRecord } from './model';

const BUCKETS = MAX_PRIORITY - MIN_PRIORITY + 1;

/** One priority's tasks in seq order; `head` skips the ones taken from the front without moving the array. */
interface Bucket {
  items: TaskRecord[];
  head: number;
}

/**
 * The queued tasks of one target (an agent id or `type:<agent type>`): one FIFO per priority (40 of them), each in seq
 * order. Taking the first task is O(1); putting a yielded task back at its original seq is a binary search. Nothing
 * here scans every queued task.
 */
export class TargetQueue {
  private readonly buckets: Bucket[] = Array.from({ length: BUCKETS }, () => ({ items: [], head: 0 }));
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Adds a task in (priority, seq) order: at the end of its priority for a new one, at its seq for a yielded one. */
  insert(task: TaskRecord): void {
    const bucket = this.buckets[task.priority - MIN_PRIORITY];
    const items = bucket.items;
    if (items.length === bucket.head || items[items.length - 1].seq < task.seq) {
      items.push(task);
    } else {
      const at = lowerBound(items, bucket.head, task.seq);
      if (items[at]?.taskId === task.taskId) return;
      items.splice(at, 0, task);
    }
    this.count++;
  }

  /** Takes `task` out; answers whether it was there. */
  remove(task: TaskRecord): boolean {
    const bucket = this.buckets[task.priority - MIN_PRIORITY];
    const items = bucket.items;
    const at = lowerBound(items, bucket.head, task.seq);
    if (at >= items.length || items[at].taskId !== task.taskId) return false;
    if (at === bucket.head) {
      bucket.head++;
      if (bucket.head === items.length) {
        bucket.items = [];
        bucket.head = 0;
      } else if (bucket.head >= 1024 && bucket.head * 2 >= items.length) {
        bucket.items = items.slice(bucket.head);
        bucket.head = 0;
      }
    } else {
      items.splice(at, 1);
    }
    this.count--;
    return true;
  }

  /** The tasks in dispatch order (priority, then seq). Stop iterating early: it is lazy. */
  *ordered(): IterableIterator<TaskRecord> {
    if (this.count === 0) return;
    for (const bucket of this.buckets) {
      for (let i = bucket.head; i < bucket.items.length; i++) yield bucket.items[i];
    }
  }
}

function lowerBound(items: readonly TaskRecord[], from: number, seq: number): number {
  let lo = from;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (items[mid].seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Two queues' tasks merged in dispatch order (an agent's own queue and its type's). */
export function* mergedOrder(a: TargetQueue | undefined, b: TargetQueue | undefined): IterableIterator<TaskRecord> {
  const ia = a?.ordered();
  const ib = b?.ordered();
  let x = ia?.next();
  let y = ib?.next();
  while ((x && !x.done) || (y && !y.done)) {
    if (y === undefined || y.done || (x && !x.done && before(x.value, y.value))) {
      yield (x as IteratorYieldResult<TaskRecord>).value;
      x = ia?.next();
    } else {
      yield y.value;
      y = ib?.next();
    }
  }
}

/** Dispatch order: numerically lower priority first, then arrival. */
export function before(a: TaskRecord, b: TaskRecord): boolean {
  return a.priority !== b.priority ? a.priority < b.priority : a.seq < b.seq;
}
