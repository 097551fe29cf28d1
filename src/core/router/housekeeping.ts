import { isoUtc } from '../clock';
import type { Disposable } from '../events';
import { schedulePruning } from '../retention';
import type { RouterRepository, RouterStorage } from './model';
import type { RouterOptions } from './options';
import type { Outcomes, RouterShared } from './parts';

/** What housekeeping uses of the router. */
export interface HousekeepingCore extends Pick<RouterShared, 'log' | 'clock' | 'ids' | 'guard' | 'deadLettersChanged'> {
  readonly store: Pick<RouterStorage, 'transaction'>;
  readonly repo: Pick<RouterRepository, 'pruneDedup' | 'pruneDeadLetters' | 'pruneMessages'>;
  readonly options: Pick<
    RouterOptions,
    'dedupWindowMs' | 'dlqMaxEntries' | 'dlqRetentionMs' | 'dlqMaxBytes' | 'messageRetentionMs'
  >;
  readonly dedup: Pick<Outcomes, 'prune'>;
}

/**
 * Retention of finished messages runs every RETENTION_INTERVAL_MS and looks at up to RETENTION_SCAN_PER_RUN
 * stored messages: about 7 ms of work (deleting is ~7 µs per message). With a backlog it runs again
 * after CATCH_UP_MS (retention.ts), which keeps up with ~10,000 finished messages a second.
 */
const RETENTION_INTERVAL_MS = 10_000;
const RETENTION_SCAN_PER_RUN = 1_000;
/**
 * Housekeeping (expired outcomes, dead-letter retention) runs every HOUSEKEEPING_INTERVAL_MS; one run deletes at
 * most DEDUP_PRUNE_BATCH expired outcomes (~2 µs each, ~8 ms a run), and a backlog is worked off every CATCH_UP_MS.
 */
const HOUSEKEEPING_INTERVAL_MS = 60_000;
const DEDUP_PRUNE_BATCH = 4_000;

/** The router's bounded storage: expired outcomes, the dead-letter retention, and finished messages. */
export class Housekeeping implements Disposable {
  private readonly housekeepingTimer: Disposable;
  private readonly retentionTimer: Disposable;

  /** Starts both pruning jobs. */
  constructor(private readonly core: HousekeepingCore) {
    this.housekeepingTimer = this.pruningTimer(HOUSEKEEPING_INTERVAL_MS, (now) => this.housekeeping(now));
    this.retentionTimer = this.pruningTimer(RETENTION_INTERVAL_MS, (now) => this.pruneMessages(now));
  }

  dispose(): void {
    this.housekeepingTimer.dispose();
    this.retentionTimer.dispose();
  }

  /** A pruning job (retention.ts) whose failures are logged like every other timer's. */
  private pruningTimer(intervalMs: number, run: (now: number) => boolean): Disposable {
    return schedulePruning(this.core.clock, intervalMs, () => {
      let more = false;
      this.core.guard.run('', () => {
        more = run(this.core.clock.now());
      });
      return more;
    });
  }

  /** Forgets expired outcomes (one bounded batch) and applies the dead-letter retention (age, count, payload bytes); answers whether more expired outcomes wait. */
  private housekeeping(now: number): boolean {
    const core = this.core;
    const expired = core.store.transaction(() => {
      const result = core.repo.pruneDedup(now, DEDUP_PRUNE_BATCH);
      if (result.deleted > 0) {
        core.log.record({
          correlationId: core.ids.uuid(),
          actor: 'router',
          eventType: 'dedup.outcomes_expired',
          details: {
            entries: result.deleted,
            expired_before: isoUtc(now),
            window_seconds: core.options.dedupWindowMs / 1000,
          },
        });
      }
      return result;
    });
    core.dedup.prune(now);
    if (
      core.repo.pruneDeadLetters(
        core.options.dlqMaxEntries,
        now - core.options.dlqRetentionMs,
        core.options.dlqMaxBytes,
      ) > 0
    )
      core.deadLettersChanged.fire({ kind: 'pruned' });
    return expired.more;
  }

  /** Retention of finished messages (RouterOptions.messageRetentionMs), one bounded run; answers whether more wait. */
  private pruneMessages(now: number): boolean {
    const core = this.core;
    const retentionMs = Math.max(core.options.messageRetentionMs, core.options.dedupWindowMs);
    const finishedBefore = now - retentionMs;
    return core.store.transaction(() => {
      const result = core.repo.pruneMessages(finishedBefore, RETENTION_SCAN_PER_RUN);
      if (result.deleted > 0) {
        core.log.record({
          correlationId: core.ids.uuid(),
          actor: 'router',
          eventType: 'router.messages_pruned',
          details: {
            messages: result.deleted,
            finished_before: isoUtc(finishedBefore),
            retention_hours: retentionMs / 3_600_000,
          },
        });
      }
      return result.more;
    });
  }
}
