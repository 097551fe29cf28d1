import * as fs from 'node:fs';
import * as path from 'node:path';
import { WorkerThread } from '../workerThread';
import { scoreDebate, type DebateVerdict } from './debateScorer';

/** What the debate worker answers: the built-in scorer's verdict, or why there is none. */
export type DebateAnswer =
  { readonly ok: true; readonly verdict: DebateVerdict } | { readonly ok: false; readonly why: string };

/**
 * Proposals of at most this many characters together are scored on the caller's thread (well under a millisecond);
 * longer ones on the debate worker: the built-in scorer took 0.14 s for two proposals of 20,000 leaves and 0.6–2.3 s for
 * two of 1 MiB (the text comparison's word counts), which EvaluateDebate takes.
 */
export const DEBATE_ON_THREAD_CHARS = 16 * 1024;

/** How long one comparison may take on the worker (the evaluate_debate tool's own timeout): then it fails. */
export const DEBATE_WORKER_TIMEOUT_MS = 10_000;

/** Where the worker's script is: beside this module (tsc output) or beside the bundle (dist/debateWorker.js). */
export function debateWorkerScript(dir: string = __dirname): string | undefined {
  const script = path.join(dir, 'debateWorker.js');
  return fs.existsSync(script) ? script : undefined;
}

let thread: WorkerThread<{ a: string; b: string; intensity: string }, DebateAnswer> | null | undefined;

/**
 * scoreDebate, on the debate worker when the proposals are longer than DEBATE_ON_THREAD_CHARS together, so the
 * coordinator's event loop waits for none of it (the same verdict either way). Without the worker's script (not
 * built), on this thread.
 */
export function scoreDebateOffThread(a: string, b: string, intensity = ''): Promise<DebateAnswer> {
  const here = (): DebateAnswer => ({ ok: true, verdict: scoreDebate(a, b, intensity) });
  if (a.length + b.length <= DEBATE_ON_THREAD_CHARS) return Promise.resolve(here());
  if (thread === undefined) {
    const script = debateWorkerScript();
    thread =
      script === undefined
        ? null
        : new WorkerThread<{ a: string; b: string; intensity: string }, DebateAnswer>(
            script,
            (why) => ({ ok: false, why }),
            {
              timeoutMs: DEBATE_WORKER_TIMEOUT_MS,
              maxOldGenerationSizeMb: 256,
              what: 'scoring the debate',
            },
          );
  }
  return thread === null ? Promise.resolve(here()) : thread.run({ a, b, intensity });
}
