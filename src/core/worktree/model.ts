import type { Transactions } from '../store/store';
import type { MergePreview, MergeStrategy, PredictedConflict } from './mergeBack';
import type { PruneCandidate } from './porcelain';
import type { Snapshot } from './snapshots';
import type { AgentWorktree } from './worktrees';
import type { MergeRecord } from './mergeBack';

/** RFC §16.1: the five states of an agent's worktree binding. */
export const BINDING_STATES = ['UNBOUND', 'BOUND_HOME', 'SWITCH_PENDING', 'BOUND_NON_HOME', 'BIND_FAILED'] as const;
export type BindingState = (typeof BINDING_STATES)[number];

/**
 * What moves a binding (RFC §16 WORKTREE_CONTROL operations, plus the two the coordinator triggers itself: a
 * BIND retry after a failure and the end of a switch's TTL).
 */
export type BindingOperation =
  | 'BIND'
  | 'UNBIND'
  | 'SWITCH_REQUEST'
  | 'SWITCH_APPROVE'
  | 'SWITCH_REJECT'
  | 'SWITCH_REVOKE'
  | 'BIND_RETRY'
  | 'TTL_EXPIRED';

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
  /** The base the BIND asked a new worktree to start from: a retry asks for the same (absent: HEAD). */
  readonly base?: string;
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

/** One agent's binding as callers see it (a copy). */
export type BindingStatus = Readonly<Binding>;

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

/**
 * What other areas may ask of the bindings (the tools area's file and git tools): the folder an agent works in now —
 * its home worktree, or the granted non-home one — or undefined when it is not bound (UNBOUND, BIND_FAILED).
 * WorktreeBindings offers it (`worktreePathOf`).
 */
export interface WorktreeLocator {
  worktreePathOf(agentId: string): string | undefined;
  /** Where the agent works now, when it is bound: repository, worktree and its branch (`sw4rm/<worktree id>`). */
  placeOf(
    agentId: string,
  ): { readonly repoId: string; readonly worktreeId: string; readonly branch: string } | undefined;
}

// ---------------------------------------------------------------- the records of the operations (the editor's API: src/core/api)

export interface WorktreeRepositoryInfo {
  readonly repoId: string;
  readonly path: string;
  /** Where its agent worktrees are created. */
  readonly worktreesRoot: string;
}

/**
 * An agent worktree as the editor lists it: git's facts of it (`AgentWorktree`: path, branch, base, ahead/behind,
 * uncommitted files, locked, prunable) with its repository, the agents bound to it and its newest snapshot.
 */
export interface WorktreeInfo extends Omit<AgentWorktree, 'id' | 'head'> {
  readonly repoId: string;
  readonly worktreeId: string;
  /** The agents whose home it is, and those switched into it, with their binding state. */
  readonly boundAgents: readonly { readonly agentId: string; readonly state: string; readonly home: boolean }[];
  readonly lastSnapshot: Snapshot | undefined;
}

export interface BindWorktreeRequest {
  readonly agentId: string;
  readonly repoId: string;
  readonly worktreeId: string;
  /** For a new worktree: the branch or commit it starts from (default HEAD). Ignored for an existing one. */
  readonly base?: string;
}

export interface WorktreeRemoval {
  readonly repoId: string;
  readonly worktreeId: string;
  /** The snapshot written before a confirmed removal of a dirty or unmerged worktree. */
  readonly snapshot: Snapshot | undefined;
  readonly branchKept: boolean;
}

export interface WorktreePruneCandidate extends PruneCandidate {
  readonly repoId: string;
}

export interface WorktreeMergeOptions {
  readonly strategy: MergeStrategy;
  /** The target branch; default the branch the main checkout has checked out. */
  readonly target?: string;
  /** Replaces the generated commit message (merge, squash). */
  readonly message?: string;
}

export type WorktreeMergeResult =
  | { readonly status: 'merged'; readonly preview: MergePreview; readonly merge: WorktreeMergeInfo }
  | { readonly status: 'not_approved'; readonly preview: MergePreview; readonly invocationId: string }
  | { readonly status: 'conflicts'; readonly preview: MergePreview; readonly conflicts: readonly PredictedConflict[] };

export interface WorktreeMergeInfo {
  readonly id: string;
  readonly repoId: string;
  readonly worktreeId: string;
  readonly strategy: MergeStrategy;
  readonly targetBranch: string;
  readonly previousHead: string;
  readonly resultHead: string;
  readonly mergedAt: number;
  readonly by: string;
  /** The approval that allowed it. */
  readonly invocationId: string | undefined;
}

export type WorktreesChange =
  | { readonly kind: 'binding'; readonly binding: Readonly<Binding> }
  | {
      readonly kind: 'created' | 'removed' | 'restored' | 'merged' | 'unmerged' | 'setup';
      readonly repoId: string;
      readonly worktreeId: string;
    }
  | { readonly kind: 'pruned'; readonly repoId: string };

export interface WorktreeSetupEvent {
  readonly repoId: string;
  readonly worktreeId: string;
  /** `output` as it arrives, then one `finished` (ok or failed, with why). */
  readonly kind: 'output' | 'finished';
  readonly text: string;
  readonly ok?: boolean;
}
