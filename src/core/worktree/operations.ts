import type { Clock } from '../clock';
import { isoUtc } from '../clock';
import { DisposableStore, Emitter, type Disposable, type Event } from '../events';
import type { HitlService } from '../hitl/hitlService';
import { parseInvocationRequest } from '../hitl/request';
import type { IdSource } from '../ids';
import { Guard } from '../kernel/guard';
import type { EventLog } from '../log/eventLog';
import { KeyedQueue } from '../keyedQueue';
import type {
  BindWorktreeRequest,
  WorktreeInfo,
  WorktreeMergeInfo,
  WorktreeMergeOptions,
  WorktreeMergeResult,
  WorktreePruneCandidate,
  WorktreeRemoval,
  WorktreeRepositoryInfo,
  WorktreesChange,
  WorktreeSetupEvent,
  StoredMerge,
  WorktreeStorage,
} from './model';
import type { BindingStatus, WorkspaceWorktrees, WorktreeBindings } from './bindings';
import type { Git } from './git';
import { MergeBack, type MergePreview, type UndoResult } from './mergeBack';
import type { Repository } from './repositories';
import { runWorktreeSetup, type SetupResult } from './setup';
import { checkWorktreeId, type Snapshot, type Snapshots } from './snapshots';
import type { AgentWorktree, Worktrees } from './worktrees';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/** The component name of merge-back approvals (the HITL invocation's origin). */
export const MERGE_COMPONENT = 'worktree-merge';
export const DEFAULT_SNAPSHOT_RETENTION_DAYS = 30;
export const MIN_SNAPSHOT_RETENTION_DAYS = 1;
export const MAX_SNAPSHOT_RETENTION_DAYS = 3650;
const DAY_MS = 86_400_000;

export interface WorktreeOperationsOptions {
  /** Snapshots are deleted this many days after they were taken, never sooner (sw4rm.snapshotRetentionDays, --snapshot-retention). */
  readonly snapshotRetentionDays: number;
  /** How often expired snapshots are looked for. */
  readonly expiryIntervalMs: number;
  /**
   * The setup configuration from settings or flags (the `.sw4rm/worktree.json` format: `{copy, setup}`); when given it
   * replaces the repository's file. Undefined: each repository's file.
   */
  readonly setup: unknown;
  /** Whether the setup command of a repository's own `.sw4rm/worktree.json` may run (the editor: workspace trust). */
  readonly trustRepositoryCommand: boolean;
  /** The diff an approval carries is cut at this many bytes (the whole invocation must stay under 256 KiB). */
  readonly maxApprovalDiffBytes: number;
}

export const DEFAULT_WORKTREE_OPERATIONS_OPTIONS: WorktreeOperationsOptions = {
  snapshotRetentionDays: DEFAULT_SNAPSHOT_RETENTION_DAYS,
  expiryIntervalMs: 3_600_000,
  setup: undefined,
  trustRepositoryCommand: false,
  maxApprovalDiffBytes: 96 * 1024,
};

/** Refused before anything changed: `kind` says how (the API's error codes), `reason` why (e.g. `bound`, `target_dirty`). */
export class WorktreeOperationError extends SwarmError {
  constructor(
    readonly kind: 'not_found' | 'invalid' | 'refused',
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'WorktreeOperationError';
  }

  override get errorKind(): ErrorKind {
    return this.kind === 'refused' ? 'precondition' : this.kind;
  }

  override get errorCode(): Sw4rmCode {
    return this.errorKind === 'not_found'
      ? 'NOT_FOUND'
      : this.errorKind === 'invalid'
        ? 'VALIDATION_ERROR'
        : 'FAILED_PRECONDITION';
  }
}

export interface WorktreeOperationsDeps {
  readonly store: WorktreeStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly hitl: HitlService;
  readonly git: Git;
  readonly snapshots: Snapshots;
  readonly workspace: WorkspaceWorktrees;
  readonly bindings: WorktreeBindings;
}

const ACTOR = 'worktree';
const LIST_CAP = 200;

/**
 * What the editor and the operator console do with worktrees (issue 15), over the area's modules: setup after a
 * worktree is made (whoever made it: WorktreeService.Bind, a WORKTREE_CONTROL envelope, the editor), removal and
 * prune, snapshots with their retention, merge-back approved through HITL with one-click undo (persisted). Every
 * operation is logged and announced on `onDidChange`.
 */
export class WorktreeOperations implements Disposable {
  private readonly changed = new Emitter<WorktreesChange>();
  readonly onDidChange: Event<WorktreesChange> = this.changed.event;
  private readonly setupOutput = new Emitter<WorktreeSetupEvent>();
  readonly onDidRunSetup: Event<WorktreeSetupEvent> = this.setupOutput.event;
  readonly onDidNeedOperator: Event<BindingStatus>;
  private readonly mergeBacks = new Map<string, MergeBack>();
  private readonly setups = new Map<string, Promise<SetupResult | undefined>>();
  /** One git-changing operation at a time per repository. */
  private readonly queue = new KeyedQueue();
  private readonly subscriptions = new DisposableStore();
  private expiryTimer: Disposable | undefined;
  private disposed = false;
  /** Log writes after the fact never throw into the caller: a fault is logged, and a fault logging it (the store is stopping) dropped. */
  private readonly guard = new Guard((_during, err) => {
    try {
      this.deps.log.internalError(ACTOR, 'worktree-operations', err);
    } catch {
      /* the store is stopping */
    }
  });

  constructor(
    private readonly deps: WorktreeOperationsDeps,
    private readonly options: WorktreeOperationsOptions = DEFAULT_WORKTREE_OPERATIONS_OPTIONS,
  ) {
    if (!(
      options.snapshotRetentionDays >= MIN_SNAPSHOT_RETENTION_DAYS &&
      options.snapshotRetentionDays <= MAX_SNAPSHOT_RETENTION_DAYS
    )) {
      throw new Error(
        `snapshot retention must be ${MIN_SNAPSHOT_RETENTION_DAYS} to ${MAX_SNAPSHOT_RETENTION_DAYS} days, not ${options.snapshotRetentionDays}`,
      );
    }
    this.onDidNeedOperator = deps.bindings.onDidNeedOperator;
    this.subscriptions.add(deps.bindings.onDidChange((binding) => this.fire({ kind: 'binding', binding })));
    this.cancelOrphanedApprovals();
    this.armExpiry();
  }

  /**
   * A merge-back approval still pending from before a restart has no merge waiting on it any more (the caller that
   * asked is gone): it is cancelled, saying so, rather than left for someone to approve into nothing.
   */
  private cancelOrphanedApprovals(): void {
    for (const invocation of this.deps.hitl.list({ pendingOnly: true, limit: 10_000 })) {
      if (invocation.origin.kind !== 'internal' || invocation.origin.component !== MERGE_COMPONENT) continue;
      this.deps.hitl.cancel(
        invocation.id,
        'coordinator',
        'the coordinator restarted while this merge waited; run Merge Back again',
        { correlationId: this.deps.ids.uuid() },
      );
    }
  }

  // ---------------------------------------------------------------- queries

  repositories(): WorktreeRepositoryInfo[] {
    return [...this.deps.workspace.repositories]
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((r) => ({ repoId: r.id, path: r.path, worktreesRoot: this.worktreesOf(r.id).root }));
  }

  async list(): Promise<WorktreeInfo[]> {
    const bindings = this.deps.bindings.list();
    const result: WorktreeInfo[] = [];
    for (const { repoId } of this.repositories()) {
      const worktrees = this.worktreesOf(repoId);
      const newest = new Map<string, Snapshot>();
      for (const s of await this.deps.snapshots.list(worktrees.repository.path)) newest.set(s.worktreeId, s); // oldest first: the last wins
      for (const w of (await worktrees.list()).sort((a, b) => a.id.localeCompare(b.id))) {
        const boundAgents: { agentId: string; state: string; home: boolean }[] = [];
        for (const b of bindings) {
          if (b.repoId !== repoId || b.state === 'UNBOUND') continue;
          if (b.homeWorktreeId === w.id) boundAgents.push({ agentId: b.agentId, state: b.state, home: true });
          else if (b.worktreeId === w.id || b.switch?.targetWorktreeId === w.id)
            boundAgents.push({ agentId: b.agentId, state: b.state, home: false });
        }
        const { id, head: _head, ...facts } = w;
        result.push({ repoId, worktreeId: id, ...facts, boundAgents, lastSnapshot: newest.get(id) });
      }
    }
    return result;
  }

  bindingList(): BindingStatus[] {
    return this.deps.bindings
      .list()
      .filter((b) => b.state !== 'UNBOUND')
      .sort((a, b) => a.agentId.localeCompare(b.agentId));
  }

  /** A worktree's snapshots, newest first (those of a removed worktree too). */
  async snapshotsOf(repoId: string, worktreeId: string): Promise<Snapshot[]> {
    const worktrees = this.worktreesOf(repoId);
    return (await this.deps.snapshots.list(worktrees.repository.path, this.checkId(worktreeId))).reverse();
  }

  merges(repoId?: string): WorktreeMergeInfo[] {
    return this.deps.store.worktree
      .listMerges()
      .filter((m) => repoId === undefined || m.repoId === repoId)
      .map(mergeInfo);
  }

  /** The setup of a worktree made just now, when it runs (tests, the console); undefined when none is running or known. */
  setupOf(repoId: string, worktreeId: string): Promise<SetupResult | undefined> | undefined {
    return this.setups.get(`${repoId}\0${worktreeId}`);
  }

  // ---------------------------------------------------------------- operations

  async bind(request: BindWorktreeRequest, by: string): Promise<BindingStatus> {
    const correlationId = this.deps.ids.uuid();
    this.deps.log.record({
      correlationId,
      actor: by,
      eventType: 'worktree.bind_requested',
      details: {
        agent_id: String(request.agentId).slice(0, 256),
        repo_id: String(request.repoId).slice(0, 256),
        worktree_id: String(request.worktreeId).slice(0, 256),
        base: request.base === undefined ? null : String(request.base).slice(0, 256),
      },
    });
    return this.deps.bindings.bind(request.agentId, request.repoId, request.worktreeId, { correlationId }, undefined, {
      base: request.base,
    });
  }

  restore(repoId: string, worktreeId: string, snapshotRef: string, by: string): Promise<{ readonly before: Snapshot }> {
    const worktrees = this.worktreesOf(repoId);
    this.checkId(worktreeId);
    return this.queue.run(repoId, async () => {
      const worktree = await worktrees.get(worktreeId);
      if (!worktree || worktree.prunable) {
        throw new WorktreeOperationError(
          'not_found',
          'worktree_not_found',
          `no worktree '${worktreeId}' in '${repoId}' to restore into; bind an agent to it again (its kept branch is reused), then restore`,
        );
      }
      const snapshot = (await this.deps.snapshots.list(worktrees.repository.path, worktreeId)).find(
        (s) => s.ref === snapshotRef,
      );
      if (!snapshot)
        throw new WorktreeOperationError(
          'not_found',
          'snapshot_not_found',
          `no snapshot '${snapshotRef.slice(0, 200)}' of worktree '${worktreeId}'`,
        );
      const { before } = await this.deps.snapshots.restore(worktree.path, worktreeId, snapshot);
      this.deps.log.record({
        correlationId: this.deps.ids.uuid(),
        actor: by,
        eventType: 'worktree.snapshot_restored',
        details: {
          repo_id: repoId,
          worktree_id: worktreeId,
          snapshot: snapshot.ref,
          commit: snapshot.commit,
          before: before.ref,
        },
      });
      this.fire({ kind: 'restored', repoId, worktreeId });
      return { before };
    });
  }

  remove(
    repoId: string,
    worktreeId: string,
    options: { readonly confirmed: boolean },
    by: string,
  ): Promise<WorktreeRemoval> {
    const worktrees = this.worktreesOf(repoId);
    this.checkId(worktreeId);
    return this.queue.run(repoId, async () => {
      const removed = await worktrees.remove(worktreeId, {
        isBound: (id) => this.deps.bindings.isBound(repoId, id),
        force: options.confirmed,
      });
      this.deps.log.record({
        correlationId: this.deps.ids.uuid(),
        actor: by,
        eventType: 'worktree.removed',
        details: {
          repo_id: repoId,
          worktree_id: worktreeId,
          confirmed: options.confirmed,
          snapshot: removed.snapshot.ref,
          branch_kept: removed.branchKept,
        },
      });
      this.fire({ kind: 'removed', repoId, worktreeId });
      return { repoId, worktreeId, snapshot: removed.snapshot, branchKept: removed.branchKept };
    });
  }

  async prunePlan(repoId?: string): Promise<WorktreePruneCandidate[]> {
    const ids =
      repoId === undefined ? this.repositories().map((r) => r.repoId) : [this.worktreesOf(repoId).repository.id];
    const plan: WorktreePruneCandidate[] = [];
    for (const id of ids) for (const c of await this.worktreesOf(id).prunePlan()) plan.push({ ...c, repoId: id });
    return plan;
  }

  async prune(candidates: readonly WorktreePruneCandidate[], by: string): Promise<WorktreePruneCandidate[]> {
    const byRepo = new Map<string, WorktreePruneCandidate[]>();
    for (const c of candidates) {
      this.worktreesOf(c.repoId);
      byRepo.set(c.repoId, [...(byRepo.get(c.repoId) ?? []), c]);
    }
    const pruned: WorktreePruneCandidate[] = [];
    for (const [repoId, listed] of byRepo) {
      const done = await this.queue.run(repoId, () => this.worktreesOf(repoId).prune(listed));
      if (done.length === 0) continue;
      this.deps.log.record({
        correlationId: this.deps.ids.uuid(),
        actor: by,
        eventType: 'worktree.pruned',
        details: { repo_id: repoId, pruned: done.map((c) => c.name), listed: listed.map((c) => c.name) },
      });
      for (const c of done) pruned.push({ ...c, repoId });
      this.fire({ kind: 'pruned', repoId });
    }
    return pruned;
  }

  previewMerge(repoId: string, worktreeId: string, options: WorktreeMergeOptions): Promise<MergePreview> {
    const mergeBack = this.mergeBackOf(repoId);
    return mergeBack.preview(this.checkId(worktreeId), { ...options, maxDiffBytes: this.options.maxApprovalDiffBytes });
  }

  /**
   * Previews; unless conflicts are predicted, opens a HITL MANUAL_OVERRIDE invocation carrying the preview and its diff
   * and waits for its decision (approve merges; anything else does not); then merges and records the merge for undo.
   * `onApprovalOpened` sees the invocation as soon as it is open (the operator console prints its id).
   */
  async mergeBack(
    repoId: string,
    worktreeId: string,
    options: WorktreeMergeOptions,
    by: string,
    onApprovalOpened?: (invocationId: string) => void,
  ): Promise<WorktreeMergeResult> {
    const mergeBack = this.mergeBackOf(repoId);
    this.checkId(worktreeId);
    const correlationId = this.deps.ids.uuid();
    let invocationId: string | undefined;
    let decision = '';
    const outcome = await mergeBack.merge(
      worktreeId,
      { ...options, maxDiffBytes: this.options.maxApprovalDiffBytes },
      async (preview) => {
        const invocation = this.deps.hitl.open(
          this.approvalRequest(repoId, preview, by, correlationId),
          { kind: 'internal', component: MERGE_COMPONENT },
          { correlationId },
        ).invocation;
        invocationId = invocation.id;
        onApprovalOpened?.(invocation.id);
        const settled = await this.deps.hitl.whenSettled(invocation.id);
        decision = settled.decision?.action ?? settled.state;
        return settled.decision?.action === 'approve';
      },
      (run) => this.queue.run(repoId, run),
    );
    const base = {
      repo_id: repoId,
      worktree_id: worktreeId,
      strategy: options.strategy,
      target: outcome.preview.targetBranch,
    };
    if (outcome.status === 'conflicts') {
      this.deps.log.record({
        correlationId,
        actor: by,
        eventType: 'worktree.merge_conflicts_predicted',
        level: 'WARN',
        details: { ...base, conflicts: outcome.preview.conflicts.slice(0, LIST_CAP).map((c) => c.path) },
      });
      return { status: 'conflicts', preview: outcome.preview, conflicts: outcome.preview.conflicts };
    }
    if (outcome.status === 'not_approved') {
      this.deps.log.record({
        correlationId,
        actor: by,
        eventType: 'worktree.merge_not_approved',
        details: { ...base, invocation_id: invocationId, decision },
      });
      return { status: 'not_approved', preview: outcome.preview, invocationId: invocationId! };
    }
    const stored: StoredMerge = {
      id: this.deps.ids.uuid(),
      repoId,
      by,
      invocationId: invocationId ?? null,
      record: outcome.record,
    };
    this.deps.store.transaction(() => {
      this.deps.store.worktree.putMerge(stored);
      this.deps.log.record({
        correlationId,
        actor: by,
        eventType: 'worktree.merged',
        details: {
          ...base,
          merge_id: stored.id,
          invocation_id: invocationId,
          previous_head: outcome.record.previousHead,
          result_head: outcome.record.resultHead,
          snapshot: outcome.record.snapshot.ref,
          commits: outcome.preview.commits.length,
        },
      });
    });
    this.fire({ kind: 'merged', repoId, worktreeId });
    return { status: 'merged', preview: outcome.preview, merge: mergeInfo(stored) };
  }

  undoMerge(mergeId: string, by: string): Promise<UndoResult> {
    const stored = this.deps.store.worktree.getMerge(mergeId);
    if (!stored)
      throw new WorktreeOperationError(
        'not_found',
        'merge_not_found',
        `no merge '${String(mergeId).slice(0, 80)}' that can be undone (undone already, or its snapshot expired)`,
      );
    const mergeBack = this.mergeBackOf(stored.repoId);
    return this.queue.run(stored.repoId, async () => {
      if (!this.deps.store.worktree.getMerge(mergeId))
        throw new WorktreeOperationError('not_found', 'merge_not_found', `the merge '${mergeId}' was undone meanwhile`);
      const result = await mergeBack.undo(stored.record);
      this.deps.store.transaction(() => {
        this.deps.store.worktree.deleteMerge(mergeId);
        this.deps.log.record({
          correlationId: this.deps.ids.uuid(),
          actor: by,
          eventType: 'worktree.merge_undone',
          details: {
            repo_id: stored.repoId,
            worktree_id: stored.record.worktreeId,
            merge_id: mergeId,
            head: result.head,
            target: stored.record.targetBranch,
            source_restored: result.sourceRestored,
          },
        });
      });
      this.fire({ kind: 'unmerged', repoId: stored.repoId, worktreeId: stored.record.worktreeId });
      return result;
    });
  }

  /**
   * Deletes the snapshots taken `snapshotRetentionDays` or more ago (never sooner), in every repository, and forgets
   * the merges whose pre-merge snapshot went with them (they can no longer be undone). Runs on a Clock timer.
   */
  async expireSnapshots(): Promise<Snapshot[]> {
    const retentionMs = this.options.snapshotRetentionDays * DAY_MS;
    const expired: Snapshot[] = [];
    for (const repository of this.deps.workspace.repositories) {
      const gone = await this.queue.run(repository.id, () => this.deps.snapshots.expire(repository.path, retentionMs));
      if (gone.length === 0 || this.disposed) continue;
      const refs = new Set(gone.map((s) => s.ref));
      const forgotten = this.deps.store.worktree
        .listMerges()
        .filter((m) => m.repoId === repository.id && refs.has(m.record.snapshot.ref));
      this.deps.store.transaction(() => {
        for (const m of forgotten) this.deps.store.worktree.deleteMerge(m.id);
        this.deps.log.record({
          correlationId: this.deps.ids.uuid(),
          actor: ACTOR,
          eventType: 'worktree.snapshots_expired',
          details: {
            repo_id: repository.id,
            retention_days: this.options.snapshotRetentionDays,
            count: gone.length,
            snapshots: gone.slice(0, LIST_CAP).map((s) => s.ref),
            merges_no_longer_undoable: forgotten.map((m) => m.id),
          },
        });
      });
      expired.push(...gone);
    }
    return expired;
  }

  dispose(): void {
    this.disposed = true;
    this.guard.stop();
    this.expiryTimer?.dispose();
    this.subscriptions.dispose();
    this.changed.dispose();
    this.setupOutput.dispose();
  }

  // ---------------------------------------------------------------- setup (called by WorkspaceWorktrees when git made a worktree)

  /** A worktree was just made: announce it, and run its setup (the binding does not wait for it; README, "Worktree setup"). */
  worktreeCreated(repoId: string, worktree: AgentWorktree, details: { readonly reusedBranch: boolean }): void {
    if (this.disposed) return;
    const correlationId = this.deps.ids.uuid();
    this.guard.run('worktree.created', () =>
      this.deps.log.record({
        correlationId,
        actor: ACTOR,
        eventType: 'worktree.created',
        details: {
          repo_id: repoId,
          worktree_id: worktree.id,
          path: worktree.path,
          branch: worktree.branch,
          base_commit: worktree.baseCommit ?? null,
          base_ref: worktree.baseRef ?? null,
          reused_branch: details.reusedBranch,
        },
      }),
    );
    this.fire({ kind: 'created', repoId, worktreeId: worktree.id });
    const repository = this.deps.workspace.repositories.find((r) => r.id === repoId);
    if (!repository || repository.bare) return; // a bare repository has no main checkout to copy from or configure
    const key = `${repoId}\0${worktree.id}`;
    const run = this.runSetup(repository, worktree, correlationId).catch((err) => {
      this.guard.run('setup', () =>
        this.deps.log.internalError(ACTOR, correlationId, err, { repo_id: repoId, worktree_id: worktree.id }),
      );
      return undefined;
    });
    this.setups.set(key, run);
    void run.then(() => {
      if (this.setups.get(key) === run) this.setups.delete(key);
    });
  }

  private async runSetup(
    repository: Repository,
    worktree: AgentWorktree,
    correlationId: string,
  ): Promise<SetupResult | undefined> {
    const repoId = repository.id;
    const emit = (event: Omit<WorktreeSetupEvent, 'repoId' | 'worktreeId'>) => {
      if (!this.disposed) this.setupOutput.fire({ repoId, worktreeId: worktree.id, ...event });
    };
    const result = await runWorktreeSetup(repository.path, worktree.path, {
      clock: this.deps.clock,
      settings: this.options.setup,
      trustRepositoryCommand: this.options.trustRepositoryCommand,
      onOutput: (text) => emit({ kind: 'output', text }),
    });
    if (this.disposed) return result;
    if (result.source === 'none' && result.ok) return result; // nothing configured: nothing to say
    for (const file of result.copied) emit({ kind: 'output', text: `copied ${file}\n` });
    for (const s of result.skipped)
      emit({ kind: 'output', text: `skipped ${s.path}: ${s.reason}${s.detail ? ` (${s.detail})` : ''}\n` });
    if (result.commandSkipped) emit({ kind: 'output', text: `${result.commandSkipped}\n` });
    const summary = result.ok
      ? `setup of ${worktree.id} finished: ${result.copied.length} file${result.copied.length === 1 ? '' : 's'} copied${result.command ? `, ${result.command.argv.join(' ')} exited 0` : ''}`
      : `setup of ${worktree.id} failed: ${result.failure}; the worktree and its binding stay usable`;
    emit({ kind: 'finished', text: summary, ok: result.ok });
    this.guard.run('setup', () =>
      this.deps.log.record({
        correlationId,
        actor: ACTOR,
        eventType: result.ok ? 'worktree.setup_finished' : 'worktree.setup_failed',
        level: result.ok ? 'INFO' : 'WARN',
        details: {
          repo_id: repoId,
          worktree_id: worktree.id,
          source: result.source,
          copied: result.copied.slice(0, LIST_CAP),
          skipped: result.skipped.slice(0, LIST_CAP),
          command: result.command?.argv ?? null,
          exit_code: result.command?.exitCode ?? null,
          timed_out: result.command?.timedOut ?? false,
          duration_ms: result.command?.durationMs ?? null,
          command_skipped: result.commandSkipped ?? null,
          failure: result.failure ?? null,
          output_tail: result.command ? result.command.output.slice(-4096) : null,
        },
      }),
    );
    this.fire({ kind: 'setup', repoId, worktreeId: worktree.id });
    return result;
  }

  // ---------------------------------------------------------------- helpers

  private approvalRequest(repoId: string, preview: MergePreview, by: string, correlationId: string) {
    const target = preview.targetBranch.replace(/^refs\/heads\//, '');
    return parseInvocationRequest(
      {
        reason_type: 'MANUAL_OVERRIDE',
        subject: { repo_id: repoId, worktree_id: preview.worktreeId, task_id: '' },
        summary: `Merge back ${preview.sourceBranch.replace(/^refs\/heads\//, '')} into ${target} (${preview.strategy}): ${preview.commits.length} commit${preview.commits.length === 1 ? '' : 's'}, ${preview.files.length} file${preview.files.length === 1 ? '' : 's'}`,
        facts: {
          operation: 'merge_back',
          repo_id: repoId,
          worktree_id: preview.worktreeId,
          strategy: preview.strategy,
          requested_by: by,
          source_branch: preview.sourceBranch,
          source_commit: preview.sourceCommit,
          target_branch: preview.targetBranch,
          target_commit: preview.targetCommit,
          target_path: preview.targetPath,
          source_uncommitted_files: preview.sourceDirty,
          commits: preview.commits.slice(0, LIST_CAP).map((c) => `${c.commit.slice(0, 12)} ${c.subject.slice(0, 200)}`),
          commit_count: preview.commits.length,
          files: preview.files.slice(0, LIST_CAP).map((f) => `${f.status}\t${f.path.slice(0, 300)}`),
          file_count: preview.files.length,
          message: preview.message?.slice(0, 4000) ?? null,
          diff_truncated: preview.diffTruncated,
        },
        ...(preview.diff !== ''
          ? {
              diffs: [
                { title: `${preview.sourceBranch.replace(/^refs\/heads\//, '')} → ${target}`, unified: preview.diff },
              ],
            }
          : {}),
        risk_notes: 'A snapshot of the main checkout is written before the merge; Undo Merge restores it.',
        proposed_actions: ['approve', 'deny'],
      },
      { requester: by.slice(0, 128) || 'operator', correlationId, now: this.deps.clock.now() },
    );
  }

  private worktreesOf(repoId: string): Worktrees {
    const worktrees = typeof repoId === 'string' ? this.deps.workspace.worktrees(repoId) : undefined;
    if (!worktrees) {
      const known = this.deps.workspace.repositories.map((r) => r.id);
      throw new WorktreeOperationError(
        'not_found',
        'repo_not_found',
        `no repository '${String(repoId).slice(0, 80)}' in the workspace${known.length ? ` (known: ${known.join(', ')})` : ''}`,
      );
    }
    return worktrees;
  }

  private mergeBackOf(repoId: string): MergeBack {
    const worktrees = this.worktreesOf(repoId);
    let mergeBack = this.mergeBacks.get(repoId);
    if (!mergeBack) {
      mergeBack = new MergeBack(this.deps.git, this.deps.snapshots, worktrees.repository, this.deps.clock);
      this.mergeBacks.set(repoId, mergeBack);
    }
    return mergeBack;
  }

  private checkId(worktreeId: string): string {
    try {
      return checkWorktreeId(worktreeId);
    } catch (err) {
      throw new WorktreeOperationError('invalid', 'VALIDATION_ERROR', (err as Error).message);
    }
  }

  private armExpiry(): void {
    if (this.disposed) return;
    this.expiryTimer = this.deps.clock.setTimer(this.options.expiryIntervalMs, () => {
      this.expireSnapshots()
        .catch((err) =>
          this.guard.run('snapshot-expiry', () =>
            this.deps.log.internalError(ACTOR, `snapshot-expiry:${isoUtc(this.deps.clock.now())}`, err),
          ),
        )
        .finally(() => this.armExpiry());
    });
  }

  private fire(change: WorktreesChange): void {
    if (!this.disposed) this.changed.fire(change);
  }
}

function mergeInfo(m: StoredMerge): WorktreeMergeInfo {
  return {
    id: m.id,
    repoId: m.repoId,
    worktreeId: m.record.worktreeId,
    strategy: m.record.strategy,
    targetBranch: m.record.targetBranch,
    previousHead: m.record.previousHead,
    resultHead: m.record.resultHead,
    mergedAt: m.record.mergedAt,
    by: m.by,
    invocationId: m.invocationId ?? undefined,
  };
}
