import { Worker } from 'node:worker_threads';
import { systemClock, type Clock } from './clock';
import type { Disposable } from './events';

/** A request waiting for the worker's answer. */
interface Pending<Request, Answer> {
  readonly request: Request;
  readonly resolve: (answer: Answer) => void;
}

/**
 * One worker thread answering requests in arrival order (`{id, ...request}` → `{id, ...answer}`): for work on agents'
 * input whose time grows faster than its size (ajv schema compiles, YAML parsing), kept off the coordinator's event
 * loop. Started on first use and unref'd while idle. A worker that dies (an exception, an exit, its memory limit) or
 * spends more than `timeoutMs` (on `clock`) on one request is ended, and that request — the one it was on, the oldest —
 * is answered `failed(why)` (never a rejection); the requests queued behind it go to a new worker, each with its own
 * time, so one caller's input that kills or stalls the worker costs no other caller its answer.
 */
export class WorkerThread<Request extends object, Answer extends object> {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending<Request, Answer>>();
  private nextId = 1;
  /** The timer of the request the worker is on (the oldest pending one). */
  private timer: Disposable | undefined;
  /** Workers started and not yet exited (terminated ones until their thread is gone). */
  private readonly alive = new Set<Worker>();
  private readonly clock: Clock;

  constructor(
    private readonly script: string,
    private readonly failed: (why: string) => Answer,
    private readonly options: {
      readonly timeoutMs: number;
      readonly maxOldGenerationSizeMb: number;
      readonly what: string;
      readonly clock?: Clock;
    },
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** Worker threads started and not yet exited: at most one in use, plus ended ones whose thread is still stopping. */
  get threads(): number {
    return this.alive.size;
  }

  run(request: Request): Promise<Answer> {
    const id = this.nextId++;
    return new Promise((resolve) => this.send(id, { request, resolve }));
  }

  private send(id: number, entry: Pending<Request, Answer>): void {
    const worker = this.worker ?? this.start();
    this.pending.set(id, entry);
    if (this.pending.size === 1) {
      worker.ref();
      this.arm(worker);
    }
    try {
      worker.postMessage({ ...entry.request, id });
    } catch (err) {
      // Not cloneable: this request is refused, the worker is untouched.
      this.pending.delete(id);
      if (this.pending.size === 0) {
        this.timer?.dispose();
        this.timer = undefined;
        worker.unref();
      }
      entry.resolve(this.failed(`${this.options.what} failed (${(err as Error).message.slice(0, 120)})`));
    }
  }

  private start(): Worker {
    const worker = new Worker(this.script, {
      resourceLimits: { maxOldGenerationSizeMb: this.options.maxOldGenerationSizeMb },
    });
    this.alive.add(worker);
    worker.unref();
    worker.on('message', (message: { id: number } & Answer) => {
      if (this.worker !== worker) return;
      const entry = this.pending.get(message.id);
      if (!entry) return;
      this.pending.delete(message.id);
      this.timer?.dispose();
      this.timer = undefined;
      if (this.pending.size === 0) worker.unref();
      else this.arm(worker);
      const { id: _id, ...answer } = message;
      entry.resolve(answer as unknown as Answer);
    });
    worker.on('error', (err) => this.fail(worker, `${this.options.what} failed (${err.message.slice(0, 120)})`));
    worker.on('exit', (code) => {
      this.alive.delete(worker);
      this.fail(worker, `${this.options.what} stopped (exit code ${code})`);
    });
    this.worker = worker;
    return worker;
  }

  /** The worker answers in order: the timer runs for the oldest pending request only, from when the worker took it. */
  private arm(worker: Worker): void {
    this.timer = this.clock.setTimer(this.options.timeoutMs, () => {
      this.timer = undefined;
      this.fail(worker, `${this.options.what} took more than ${this.options.timeoutMs / 1000} s (refused)`);
    });
  }

  /** Ends the worker: the request it was on is answered `why` (every pending one when `all`); the rest go to a new worker. */
  private fail(worker: Worker, why: string, all = false): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    void worker.terminate();
    this.timer?.dispose();
    this.timer = undefined;
    const waiting = [...this.pending];
    this.pending.clear();
    const [first, ...rest] = waiting;
    first?.[1].resolve(this.failed(why));
    for (const [id, entry] of rest) {
      if (all) entry.resolve(this.failed(why));
      else this.send(id, entry);
    }
  }

  dispose(): void {
    const worker = this.worker;
    if (worker) this.fail(worker, 'the coordinator is stopping', true);
  }
}

/**
 * Gives the calling worker thread the lowest CPU priority (Linux only: nice is per thread there; elsewhere it would be
 * the whole process's), so that on a loaded machine the coordinator's event loop is scheduled first.
 */
export function lowerThisThreadsPriority(): void {
  if (process.platform !== 'linux') return;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- only in a worker thread, on Linux
    (require('node:os') as typeof import('node:os')).setPriority(0, 19);
  } catch {
    // Not permitted: the normal priority.
  }
}
