/**
 * The worker thread that compiles agents' JSON Schemas off the event loop (schemaThread.ts): each request
 * `{id, text, what}` is answered `{id, ok, source | why}` by descriptors.schemaSourceOf. Bundled on its own as dist/schemaWorker.js.
 */
import * as os from 'node:os';
import { parentPort } from 'node:worker_threads';
import { schemaSourceOf } from './descriptors';

// The lowest CPU priority for this thread only (Linux: nice is per thread; elsewhere it would be the whole process's):
// on a loaded machine the coordinator's event loop is then scheduled before ajv's seconds of compiling.
if (process.platform === 'linux') {
  try {
    os.setPriority(0, 19);
  } catch {
    // Not permitted: compiled at the normal priority.
  }
}

parentPort?.on('message', (request: { id: number; text: string; what: 'input' | 'output' }) => {
  let answer;
  try {
    answer = schemaSourceOf(request.text, request.what);
  } catch (err) {
    answer = { ok: false as const, why: `the schema could not be compiled: ${(err as Error).message.slice(0, 120)}` };
  }
  parentPort?.postMessage({ id: request.id, ...answer });
});
