import { Worker } from 'node:worker_threads';

/**
 * One worker thread answering requests in arrival order (`{id, ...request}` → `{id, ...answer}`): for work on agents'
 * input whose time grows faster than its size (ajv schema compiles, YAML parsing), kept off the coordinator's event
 * loop. Started on first use and unref'd while idle. A worker that dies or spends more than `timeoutMs` on one request
 * is ended; what it had is answered `failed(why)` (never a rejection), and the next use starts another.
 */
export class WorkerThread<Request extends object, Answer extends object> {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, (answer: Answer) => void>();
  private nextId = 1;
  /** The timer of the request the worker is on (the oldest pending one). */
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly script: string,
    private readonly failed: (why: string) => Answer,
    private readonly options: { readonly timeoutMs: number; readonly maxOldGenerationSizeMb: number; readonly what: string },
  ) {}

  run(request: Request): Promise<Answer> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      if (this.pending.size === 1) {
        worker.ref();
        this.arm(worker);
      }
      worker.postMessage({ ...request, id });
    });
  }

  private start(): Worker {
    const worker = new Worker(this.script, { resourceLimits: { maxOldGenerationSizeMb: this.options.maxOldGenerationSizeMb } });
    worker.unref();
    worker.on('message', (message: { id: number } & Answer) => {
      const resolve = this.pending.get(message.id);
      if (!resolve) return;
      this.pending.delete(message.id);
      clearTimeout(this.timer);
      this.timer = undefined;
      if (this.pending.size === 0) worker.unref();
      else this.arm(worker);
      const { id: _id, ...answer } = message;
      resolve(answer as unknown as Answer);
    });
    worker.on('error', (err) => this.fail(worker, `${this.options.what} failed (${err.message.slice(0, 120)})`));
    worker.on('exit', (code) => this.fail(worker, `${this.options.what} stopped (exit code ${code})`));
    this.worker = worker;
    return worker;
  }

  /** The worker answers in order: the timer runs for the oldest pending request only, from when the worker took it. */
  private arm(worker: Worker): void {
    this.timer = setTimeout(() => this.fail(worker, `${this.options.what} took more than ${this.options.timeoutMs / 1000} s (refused)`), this.options.timeoutMs);
    this.timer.unref();
  }

  private fail(worker: Worker, why: string): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    void worker.terminate();
    clearTimeout(this.timer);
    this.timer = undefined;
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const resolve of waiting) resolve(this.failed(why));
  }

  dispose(): void {
    const worker = this.worker;
    if (worker) this.fail(worker, 'the coordinator is stopping');
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
