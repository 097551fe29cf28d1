import type { CallContext } from '../context';
import type { Event } from '../events';
import type { Transactions } from '../store/store';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/**
 * One activity entry (RFC §10): who is working on what, right now. Created before a task runs, removed when it ends
 * (then kept a while in the history). `description` is at most 200 words.
 */
export interface ActivityEntry {
  readonly agentId: string;
  readonly taskId: string;
  readonly repoId: string;
  readonly worktreeId: string;
  readonly branch: string;
  /** When the entry was created (epoch ms); ISO-8601 UTC on the wire. */
  readonly timestamp: number;
  readonly description: string;
  /** Set once the entry left the active buffer (history only): when, and how its task ended. */
  readonly endedAt: number | null;
  readonly outcome: '' | 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'purged' | 'reconciled';
}

/** Filtered reads (RFC §10: by agent_id, repo_id, worktree_id or task_id); every field set must match. */
export interface ActivityFilter {
  readonly agentId?: string;
  readonly repoId?: string;
  readonly worktreeId?: string;
  readonly taskId?: string;
}

export interface ActivityOptions {
  /** RFC §10.1: active entries per coordinator (default 10,000); beyond it `activity_buffer_full`. */
  readonly maxEntries: number;
  /** RFC §10.1: active entries per agent (default 100). */
  readonly maxPerAgent: number;
  /** Ended entries kept in the history, newest first (count-based eviction). */
  readonly historyEntries: number;
  /** Ended entries older than this are evicted (time-based eviction, ms). */
  readonly historyMs: number;
}

export const DEFAULT_ACTIVITY_OPTIONS: ActivityOptions = {
  maxEntries: 10_000,
  maxPerAgent: 100,
  historyEntries: 1_000,
  historyMs: 24 * 3_600_000,
};

/** A refusal of a new entry: never a silent drop (RFC §10.1). */
export class ActivityBufferFullError extends SwarmError {
  readonly code = 'activity_buffer_full';
  constructor(
    readonly scope: 'coordinator' | 'agent',
    readonly limit: number,
    message: string,
  ) {
    super(message);
    this.name = 'ActivityBufferFullError';
  }

  override get errorKind(): ErrorKind {
    return 'exhausted';
  }

  override get errorCode(): Sw4rmCode {
    return 'BUFFER_FULL';
  }
}

/** An artifact of a negotiation (activity.proto): contract, diff, decision, score or note, persisted. */
export interface Artifact {
  readonly negotiationId: string;
  readonly kind: string;
  readonly version: string;
  readonly contentType: string;
  readonly content: Buffer;
  /** ISO-8601 as given, or the time it was appended. */
  readonly createdAt: string;
}

/** The activity area's tables (schema v10): active and ended entries; artifacts. */
export interface ActivityRepository {
  putEntry(entry: ActivityEntry): void;
  deleteEntry(agentId: string, taskId: string): void;
  listEntries(): ActivityEntry[];
  appendArtifact(artifact: Artifact): void;
  listArtifacts(negotiationId: string, kind: string): Artifact[];
  /** How many artifacts a negotiation holds and their content bytes, per kind (kinds it has none of are absent). */
  artifactUsage(negotiationId: string): ReadonlyMap<string, { readonly count: number; readonly bytes: number }>;
}

export interface ActivityStorage extends Transactions {
  readonly activity: ActivityRepository;
}

export type ActivityChange =
  | { readonly kind: 'added' | 'ended'; readonly entry: ActivityEntry }
  | { readonly kind: 'purged'; readonly agentId: string; readonly taskIds: readonly string[] };

/** What the scheduler uses of the activity buffer (advisory: a failure here never blocks scheduling, RFC §10). */
export interface ActivitySink {
  /** Before a task runs. Throws ActivityBufferFullError at a limit (the scheduler logs it and runs the task anyway). */
  begin(entry: Omit<ActivityEntry, 'endedAt' | 'outcome'>, ctx: CallContext): void;
  /** The task ended: the entry leaves the active buffer for the history. No-op when there is none. */
  end(agentId: string, taskId: string, outcome: ActivityEntry['outcome'], ctx: CallContext): void;
  /**
   * RFC §10 reconciliation: purges active entries whose task is COMPLETED, FAILED or unknown (`isActive(taskId)` false).
   * Answers how many were purged.
   */
  reconcile(isActive: (agentId: string, taskId: string) => boolean, ctx: CallContext): number;
  readonly onDidChange: Event<ActivityChange>;
}
