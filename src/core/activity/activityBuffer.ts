// CONTRACT SKELETON (s6-api): helper C replaces every body; nothing here is called done.
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Disposable, Event } from '../events';
import type { EventLog } from '../log/eventLog';
import type { ActivityChange, ActivityEntry, ActivityFilter, ActivityOptions, ActivitySink, ActivityStorage, Artifact } from './model';

export interface ActivityUsage {
  readonly active: number;
  readonly maxEntries: number;
  readonly maxPerAgent: number;
  /** Whether `active` is at or above 80% of `maxEntries` (RFC §10.1 warning). */
  readonly warning: boolean;
}

/**
 * The activity buffer (RFC §10, §10.1): active entries with their limits (activity_buffer_full, never a silent drop; a
 * warning at 80%), the recent history with eviction, filtered reads, a live feed; and negotiation artifacts (activity.proto).
 * Persisted; advisory: it never blocks scheduling.
 */
export class ActivityBuffer implements ActivitySink, Disposable {
  readonly onDidChange: Event<ActivityChange>;

  constructor(private readonly store: ActivityStorage, private readonly log: EventLog, private readonly clock: Clock, private readonly options: ActivityOptions) {
    void this.store; void this.log; void this.clock; void this.options;
    this.onDidChange = () => ({ dispose() { /* skeleton */ } });
  }

  begin(_entry: Omit<ActivityEntry, 'endedAt' | 'outcome'>, _ctx: CallContext): void {
    throw new Error('ActivityBuffer.begin: not built yet (s6 helper C)');
  }

  end(_agentId: string, _taskId: string, _outcome: ActivityEntry['outcome'], _ctx: CallContext): void {
    throw new Error('ActivityBuffer.end: not built yet (s6 helper C)');
  }

  reconcile(_isActive: (agentId: string, taskId: string) => boolean, _ctx: CallContext): number {
    throw new Error('ActivityBuffer.reconcile: not built yet (s6 helper C)');
  }

  /** Active entries matching `filter`, newest first. */
  entries(_filter?: ActivityFilter): ActivityEntry[] {
    throw new Error('ActivityBuffer.entries: not built yet (s6 helper C)');
  }

  /** Ended entries matching `filter`, newest ended first, at most `limit` (default 200). */
  history(_filter?: ActivityFilter, _limit?: number): ActivityEntry[] {
    throw new Error('ActivityBuffer.history: not built yet (s6 helper C)');
  }

  /** PurgeActivity: the agent's active entries of `taskIds` (all of them when empty) leave the buffer; answers how many. */
  purge(_agentId: string, _taskIds: readonly string[], _ctx: CallContext): number {
    throw new Error('ActivityBuffer.purge: not built yet (s6 helper C)');
  }

  usage(): ActivityUsage {
    throw new Error('ActivityBuffer.usage: not built yet (s6 helper C)');
  }

  /** AppendArtifact: checked (negotiation_id, kind, sizes), persisted; a refusal is `{ ok: false, reason }`. */
  appendArtifact(_artifact: Artifact, _ctx: CallContext): { readonly ok: boolean; readonly reason: string } {
    throw new Error('ActivityBuffer.appendArtifact: not built yet (s6 helper C)');
  }

  /** ListArtifacts: a negotiation's artifacts in the order appended, of one kind when `kind` is not ''. */
  listArtifacts(_negotiationId: string, _kind: string): Artifact[] {
    throw new Error('ActivityBuffer.listArtifacts: not built yet (s6 helper C)');
  }

  dispose(): void { /* skeleton */ }
}
