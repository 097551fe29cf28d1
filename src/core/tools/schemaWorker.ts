/**
 * The worker thread that compiles agents' JSON Schemas off the event loop (schemaThread.ts): each request
 * `{id, text, what}` is answered `{id, ok, source | why}` by descriptors.schemaSourceOf. Bundled on its own as dist/schemaWorker.js.
 */
import { parentPort } from 'node:worker_threads';
import { lowerThisThreadsPriority } from '../workerThread';
import { schemaSourceOf } from './descriptors';

// On a loaded machine the coordinator's event loop is scheduled before ajv's seconds of compiling.
lowerThisThreadsPriority();

parentPort?.on('message', (request: { id: number; text: string; what: 'input' | 'output' }) => {
  let answer;
  try {
    answer = schemaSourceOf(request.text, request.what);
  } catch (err) {
    answer = { ok: false as const, why: `the schema could not be compiled: ${(err as Error).message.slice(0, 120)}` };
  }
  parentPort?.postMessage({ id: request.id, ...answer });
});
