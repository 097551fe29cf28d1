import * as fs from 'node:fs';
import * as path from 'node:path';
import { WorkerThread } from '../workerThread';

/** What the schema worker answers for one schema text: ajv's standalone validator code, or why not. */
export type SchemaSource =
  { readonly ok: true; readonly source: string } | { readonly ok: false; readonly why: string };

/** Where the worker's script is: beside this module (tsc output) or beside the bundle (dist/schemaWorker.js). */
export function schemaWorkerScript(dir: string = __dirname): string | undefined {
  const script = path.join(dir, 'schemaWorker.js');
  return fs.existsSync(script) ? script : undefined;
}

/** How long one schema may take on the worker (ajv takes 0.6–1.6 s at the 64 KiB limit here): then it is refused. */
export const SCHEMA_WORKER_TIMEOUT_MS = 20_000;

/**
 * Compiles agents' JSON Schemas with ajv on one worker thread, in arrival order (schemaWorker.ts runs
 * descriptors.schemaSourceOf there): ajv's code generation grows faster than the schema and held the coordinator's
 * event loop 0.6–0.7 s at the 64 KiB limit. A schema the worker fails on, or spends more than
 * SCHEMA_WORKER_TIMEOUT_MS on, is refused (WorkerThread).
 */
export class SchemaThread {
  private readonly thread: WorkerThread<{ text: string; what: 'input' | 'output' }, SchemaSource>;

  constructor(script: string, timeoutMs = SCHEMA_WORKER_TIMEOUT_MS) {
    this.thread = new WorkerThread<{ text: string; what: 'input' | 'output' }, SchemaSource>(
      script,
      (why) => ({ ok: false, why }),
      { timeoutMs, maxOldGenerationSizeMb: 256, what: 'compiling the schema' },
    );
  }

  compile(text: string, what: 'input' | 'output'): Promise<SchemaSource> {
    return this.thread.run({ text, what });
  }

  dispose(): void {
    this.thread.dispose();
  }
}
