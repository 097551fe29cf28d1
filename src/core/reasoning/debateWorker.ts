/**
 * The worker thread that runs the built-in debate scorer off the event loop (debateThread.ts): each request
 * `{id, a, b, intensity}` is answered `{id, ok, verdict}` by scoreDebate. Bundled on its own as dist/debateWorker.js.
 */
import { parentPort } from 'node:worker_threads';
import { lowerThisThreadsPriority } from '../workerThread';
import { scoreDebate } from './debateScorer';

lowerThisThreadsPriority();

parentPort?.on('message', (request: { id: number; a: string; b: string; intensity: string }) => {
  try {
    parentPort?.postMessage({
      id: request.id,
      ok: true,
      verdict: scoreDebate(request.a, request.b, request.intensity),
    });
  } catch (err) {
    parentPort?.postMessage({
      id: request.id,
      ok: false,
      why: `the built-in scorer failed (${(err as Error).message.slice(0, 120)})`,
    });
  }
});
