import type { Clock } from '../clock';
import type { Disposable } from '../events';
import type { IdSource } from '../ids';
import { schedulePruning } from '../retention';
import type { EventLog } from './eventLog';
import type { LogStorage } from './model';

/** About a million events: the last few hours of a busy coordinator, some hundred MB at most. */
export const DEFAULT_MAX_EVENTS = 1_000_000;
const EVENT_RETENTION_INTERVAL_MS = 60_000;
/** Events deleted per run at most: ~3 ms of work, ~20 ms when the commit also checkpoints. */
const EVENT_PRUNE_BATCH = 5_000;

/**
 * Bounds the event log: every minute, the oldest events beyond the newest `maxEvents` are deleted, at most
 * EVENT_PRUNE_BATCH per run; a backlog is worked off by catch-up runs (see schedulePruning).
 */
export function scheduleEventRetention(
  store: LogStorage,
  log: EventLog,
  clock: Clock,
  ids: IdSource,
  maxEvents: number,
): Disposable {
  return schedulePruning(clock, EVENT_RETENTION_INTERVAL_MS, () => {
    try {
      const pruned = store.transaction(() => store.events.prune(maxEvents, EVENT_PRUNE_BATCH));
      if (pruned.deleted > 0) {
        log.record({
          correlationId: ids.uuid(),
          actor: 'coordinator',
          eventType: 'events.pruned',
          details: { pruned: pruned.deleted, kept: maxEvents },
        });
      }
      return pruned.more;
    } catch (err) {
      // A timer must not throw into the event loop (it would end the CLI); the next run tries again.
      log.internalError('coordinator', ids.uuid(), err, { during: 'event retention' });
      return false;
    }
  });
}
