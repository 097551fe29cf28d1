import type { Transactions } from '../store/store';
import type { MergeRecord } from './mergeBack';

/** RFC §16.1: the five states of an agent's worktree binding. */
export const BINDING_STATES = ['UNBOUND', 'BOUND_HOME', 'SWITCH_PENDING', 'BOUND_NON_HOME', 'BIND_FAILED'] as const;
export type BindingState = typeof BINDING_STATES[number];

/**
 * What moves a binding (RFC §16 WORKTREE_CONTROL operations, plus the two the coordinator triggers itself: a
 * BIND retry after a failure and the end of a switch's TTL).
 */
export type BindingOperation = 'BIND' | 'UNBIND' | 'SWITCH_REQUEST' | 'SWITCH_APPROVE' | 'SWITCH_REJECT' | 'SWITCH_REVOKE' | 'BIND_RETRY' | 'TTL_EXPIRED';

/** RFC §16.3: why a BIND failed. */
export type BindFailureReason = 'worktree_not_found' | 'permission_denied' | 'filesystem_error' | 'worktree_locked';

export interface BindFailure {
  readonly reason: BindFailureReason;
  readonly detail: string;
  /** When the binding entered BIND_FAILED (epoch ms). */
  readonly since: number;
  /** Automatic retries made so far (at most MAX_BIND_RETRIES). */
  readonly retries: number;
  /** When the next automatic retry runs; null when none is left. */
  readonly nextRetryAt: number | null;
  /** Whether the operator was notified (after the bind recovery timeout, RFC §16.3). */
  readonly notified: boolean;
}

/** A switch asked for and not yet settled (SWITCH_PENDING), or granted (BOUND_NON_HOME). */
export interface SwitchGrant {
  readonly targetWorktreeId: string;
  readonly targetPath: string;
  /** The HITL WORKTREE_OVERRIDE invocation that decides it. */
  readonly invocationId: string;
  readonly requestedAt: number;
  /** The TTL asked for by ApproveSwitch (ms), used when the invocation is approved; null: the default. */
  readonly ttlMs: number | null;
}

/** One agent's binding as the coordinator keeps (and persists) it. */
export interface Binding {
  readonly agentId: string;
  state: BindingState;
  /** The repository and home worktree asked for by the last BIND ('' when UNBOUND). */
  repoId: string;
  homeWorktreeId: string;
  homePath: string;
  /** The worktree the agent works in now: its home, or the granted non-home one ('' when not bound). */
  worktreeId: string;
  worktreePath: string;
  switch: SwitchGrant | null;
  /** BOUND_NON_HOME: when the agent goes home (epoch ms). */
  nonHomeUntil: number | null;
  failure: BindFailure | null;
  updatedAt: number;
}

/** A merge-back that can be undone: what MergeBack did, who asked, the approval that allowed it (persisted, schema v8). */
export interface StoredMerge {
  readonly id: string;
  readonly repoId: string;
  readonly by: string;
  /** The HITL invocation that approved it. */
  readonly invocationId: string | null;
  readonly record: MergeRecord;
}

/** The worktree area's tables: one binding per agent; the merges that can still be undone. */
export interface WorktreeRepository {
  put(binding: Binding): void;
  get(agentId: string): Binding | undefined;
  list(): Binding[];
  putMerge(merge: StoredMerge): void;
  getMerge(id: string): StoredMerge | undefined;
  /** Newest first. */
  listMerges(): StoredMerge[];
  deleteMerge(id: string): void;
}

/** What the bindings are handed of the store: their repository and transactions. */
export interface WorktreeStorage extends Transactions {
  readonly worktree: WorktreeRepository;
}
