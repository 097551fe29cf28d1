import * as fs from 'node:fs';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';

/** What the schema worker answers for one schema text: ajv's standalone validator code, or why not. */
export type SchemaSource = { readonly ok: true; readonly source: string } | { readonly ok: false; readonly why: string };

/** Where the worker's script is: beside this module (tsc output) or beside the bundle (dist/schemaWorker.js). */
export function schemaWorkerScript(dir: string = __dirname): string | undefined {
  const script = path.join(dir, 'schemaWorker.js');
  return fs.existsSync(script) ? script : undefined;
}

/** How long one schema may take on the worker (ajv takes 0.6–1.6 s at the 64 KiB limit here): then it is refused. */
export const SCHEMA_WORKER_TIMEOUT_MS = 20_000;

interface Pending { readonly resolve: (source: SchemaSource) => void }

/**
 * Compiles agents' JSON Schemas with ajv on one worker thread, in arrival order (schemaWorker.ts runs
 * descriptors.schemaSourceOf there): ajv's code generation grows faster than the schema and held the coordinator's
 * event loop 0.6–0.7 s at the 64 KiB limit. Started on first use and unref'd while idle. A worker that dies or
 * spends more than SCHEMA_WORKER_TIMEOUT_MS on one schema is ended; what it had is refused (a refusal is an answer,
 * never a rejection), and the next use starts another.
 */
export class SchemaThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  /** The timer of the schema the worker is on (the oldest pending one). */
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly script: string, private readonly timeoutMs = SCHEMA_WORKER_TIMEOUT_MS) {}

  compile(text: string, what: 'input' | 'output'): Promise<SchemaSource> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, { resolve });
      if (this.pending.size === 1) {
        worker.ref();
        this.arm(worker);
      }
      worker.postMessage({ id, text, what });
    });
  }

  private start(): Worker {
    const worker = new Worker(this.script, { resourceLimits: { maxOldGenerationSizeMb: 256 } });
    worker.unref();
    worker.on('message', (answer: { id: number } & SchemaSource) => {
      const pending = this.pending.get(answer.id);
      if (!pending) return;
      this.pending.delete(answer.id);
      clearTimeout(this.timer);
      this.timer = undefined;
      if (this.pending.size === 0) worker.unref();
      else this.arm(worker);
      pending.resolve(answer.ok ? { ok: true, source: answer.source } : { ok: false, why: answer.why });
    });
    worker.on('error', (err) => this.fail(worker, `the schema could not be compiled (${err.message.slice(0, 120)})`));
    worker.on('exit', (code) => this.fail(worker, `the schema compiler stopped (exit code ${code})`));
    this.worker = worker;
    return worker;
  }

  /** The worker answers in order: the timer runs for the oldest pending schema only, from when the worker took it. */
  private arm(worker: Worker): void {
    this.timer = setTimeout(() => this.fail(worker, `compiling the schema took more than ${this.timeoutMs / 1000} s (refused)`), this.timeoutMs);
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
    for (const pending of waiting) pending.resolve({ ok: false, why });
  }

  dispose(): void {
    const worker = this.worker;
    if (worker) this.fail(worker, 'the coordinator is stopping');
  }
}
