import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import { MIB, TRANSPORT_MAX_MESSAGE_BYTES } from '../limits';
import type { EventLog } from '../log/eventLog';
import { COORDINATOR_SPEAKER, NegotiationError, type Speaker } from '../policy/speaker';
import {
  ActivityBufferFullError,
  type ActivityChange,
  type ActivityEntry,
  type ActivityFilter,
  type ActivityOptions,
  type ActivitySink,
  type ActivityStorage,
  type Artifact,
} from './model';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

export interface ActivityUsage {
  readonly active: number;
  readonly maxEntries: number;
  readonly maxPerAgent: number;
  /** Whether `active` is at or above 80% of `maxEntries` (RFC §10.1 warning). */
  readonly warning: boolean;
  /** Ended entries kept in the history. */
  readonly history: number;
}

/** RFC §10.1: a warning when the buffer exceeds 80% of its capacity. */
export const ACTIVITY_WARNING_RATIO = 0.8;
/**
 * Per negotiation at most this many artifacts, this many content bytes in all, and per kind this many content bytes —
 * so that listing one kind always fits in one gRPC answer (TRANSPORT_MAX_MESSAGE_BYTES less 1 MiB for the other
 * fields of up to 1,000 artifacts). Beyond them AppendArtifact answers `ok: false`, `BUFFER_FULL: …`.
 */
export const ARTIFACT_LIMITS = {
  perNegotiation: 1_000,
  bytesPerNegotiation: 64 * MIB,
  bytesPerKind: TRANSPORT_MAX_MESSAGE_BYTES - MIB,
} as const;

/** The artifact kinds of activity.proto. */
export const ARTIFACT_KINDS: readonly string[] = ['contract', 'diff', 'decision', 'score', 'note'];
/** Ended entries evicted per run (one transaction), so that a large backlog never holds the event loop long. */
export const HISTORY_EVICTION_BATCH = 500;

const LIMITS = FIELD_LIMITS.activity;

/** An entry the buffer cannot take as given: an id too long, with control characters or invalid UTF-8. */
export class ActivityEntryInvalidError extends SwarmError {
  readonly code = 'VALIDATION_ERROR';
  constructor(message: string) {
    super(`VALIDATION_ERROR: ${message}`);
    this.name = 'ActivityEntryInvalidError';
  }

  override get errorKind(): ErrorKind {
    return 'invalid';
  }

  override get errorCode(): Sw4rmCode {
    return this.code;
  }
}

const keyOf = (agentId: string, taskId: string) => `${agentId}\u0000${taskId}`;

/**
 * The activity buffer (RFC §10, §10.1): active entries with their limits (activity_buffer_full, never a silent drop; a
 * warning at 80%), the recent history with eviction, filtered reads, a live feed; and negotiation artifacts (activity.proto).
 * Persisted; advisory: it never blocks scheduling.
 */
export class ActivityBuffer implements ActivitySink, Disposable {
  private readonly active = new Map<string, ActivityEntry>();
  private readonly perAgent = new Map<string, number>();
  /** Ended entries, oldest ended first. */
  private history_: ActivityEntry[] = [];
  private warned = false;
  private evictionTimer: Disposable | undefined;
  private readonly changed = new Emitter<ActivityChange>();
  readonly onDidChange: Event<ActivityChange> = this.changed.event;

  /**
   * `participantsOf` names the participants of a negotiation (undefined: no such negotiation): only they, the operator
   * and the coordinator's own work may append or list its artifacts.
   */
  constructor(
    private readonly store: ActivityStorage,
    private readonly log: EventLog,
    private readonly clock: Clock,
    private readonly options: ActivityOptions,
    private readonly participantsOf: (negotiationId: string) => readonly string[] | undefined = () => undefined,
  ) {
    this.restore();
  }

  /** Entries of an earlier run come back: active ones stay active (reconciliation purges those whose task ended). */
  private restore(): void {
    for (const entry of this.store.activity.listEntries()) {
      if (entry.endedAt === null) this.addActive(entry);
      else this.history_.push(entry);
    }
    this.history_.sort((a, b) => (a.endedAt ?? 0) - (b.endedAt ?? 0));
    this.checkWarning({ correlationId: 'restore:activity' });
    this.evictHistory();
  }

  begin(input: Omit<ActivityEntry, 'endedAt' | 'outcome'>, ctx: CallContext): void {
    for (const [field, value, max] of [
      ['agent_id', input.agentId, LIMITS.agent_id],
      ['task_id', input.taskId, LIMITS.task_id],
      ['repo_id', input.repoId, LIMITS.repo_id],
      ['worktree_id', input.worktreeId, LIMITS.worktree_id],
      ['branch', input.branch, LIMITS.branch],
    ] as const) {
      const refusal =
        identifierRefusal(field, value, max) ??
        ((field === 'agent_id' || field === 'task_id') && value === '' ? `${field} is empty` : undefined);
      if (refusal) throw new ActivityEntryInvalidError(refusal);
    }
    const key = keyOf(input.agentId, input.taskId);
    const replaces = this.active.has(key);
    if (!replaces) this.refuseAtLimit(input.agentId, input.taskId, ctx);
    const { text: description, cut } = boundDescription(input.description);
    const entry: ActivityEntry = { ...input, description, endedAt: null, outcome: '' };
    this.store.transaction(() => {
      this.store.activity.putEntry(entry);
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'activity',
        eventType: 'activity.added',
        details: {
          agent_id: entry.agentId,
          task_id: entry.taskId,
          repo_id: entry.repoId,
          worktree_id: entry.worktreeId,
          branch: entry.branch,
          replaced: replaces || undefined,
          description_cut: cut
            ? {
                words: cut.words,
                chars: cut.chars,
                limit_words: LIMITS.description_words,
                limit_chars: LIMITS.description_chars,
              }
            : undefined,
        },
      });
    });
    // The same task again (it ran before and was preempted): its history row is this entry now.
    this.history_ = this.history_.filter((e) => keyOf(e.agentId, e.taskId) !== key);
    if (replaces) this.active.set(key, entry);
    else this.addActive(entry);
    this.checkWarning(ctx);
    this.changed.fire({ kind: 'added', entry });
  }

  end(agentId: string, taskId: string, outcome: ActivityEntry['outcome'], ctx: CallContext): void {
    const entry = this.active.get(keyOf(agentId, taskId));
    if (!entry) return;
    const ended = this.store.transaction(() => {
      const done = this.moveToHistory(entry, outcome || 'COMPLETED');
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'activity',
        eventType: 'activity.ended',
        details: { agent_id: agentId, task_id: taskId, outcome: done.outcome },
      });
      return done;
    });
    this.afterRemoval(ctx);
    this.changed.fire({ kind: 'ended', entry: ended });
  }

  reconcile(isActive: (agentId: string, taskId: string) => boolean, ctx: CallContext): number {
    const stale = [...this.active.values()].filter((e) => !isActive(e.agentId, e.taskId));
    if (!stale.length) return 0;
    this.store.transaction(() => {
      for (const entry of stale) this.moveToHistory(entry, 'reconciled');
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'activity',
        eventType: 'activity.reconciled',
        details: {
          count: stale.length,
          entries: stale.slice(0, 100).map((e) => ({ agent_id: e.agentId, task_id: e.taskId })),
          reason: 'their task is COMPLETED, FAILED or unknown (RFC §10)',
        },
      });
    });
    this.afterRemoval(ctx);
    for (const [agentId, taskIds] of byAgent(stale)) this.changed.fire({ kind: 'purged', agentId, taskIds });
    return stale.length;
  }

  /** Active entries matching `filter`, newest first. */
  entries(filter: ActivityFilter = {}): ActivityEntry[] {
    return [...this.active.values()].filter((e) => matches(e, filter)).sort((a, b) => b.timestamp - a.timestamp);
  }

  /** Ended entries matching `filter`, newest ended first, at most `limit` (default 200). */
  history(filter: ActivityFilter = {}, limit = 200): ActivityEntry[] {
    const found: ActivityEntry[] = [];
    for (let i = this.history_.length - 1; i >= 0 && found.length < limit; i--) {
      if (matches(this.history_[i], filter)) found.push(this.history_[i]);
    }
    return found;
  }

  /** PurgeActivity: the agent's active entries of `taskIds` (all of them when empty) leave the buffer; answers how many. */
  purge(agentId: string, taskIds: readonly string[], ctx: CallContext): number {
    const wanted = new Set(taskIds);
    const targets = [...this.active.values()].filter(
      (e) => e.agentId === agentId && (wanted.size === 0 || wanted.has(e.taskId)),
    );
    if (!targets.length) return 0;
    this.store.transaction(() => {
      for (const entry of targets) this.moveToHistory(entry, 'purged');
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'activity',
        eventType: 'activity.purged',
        details: {
          agent_id: agentId,
          count: targets.length,
          task_ids: targets.slice(0, 100).map((e) => e.taskId),
          all: wanted.size === 0 || undefined,
        },
      });
    });
    this.afterRemoval(ctx);
    this.changed.fire({ kind: 'purged', agentId, taskIds: targets.map((e) => e.taskId) });
    return targets.length;
  }

  usage(): ActivityUsage {
    return {
      active: this.active.size,
      maxEntries: this.options.maxEntries,
      maxPerAgent: this.options.maxPerAgent,
      warning: this.active.size >= this.options.maxEntries * ACTIVITY_WARNING_RATIO,
      history: this.history_.length,
    };
  }

  /**
   * AppendArtifact: checked (negotiation_id, kind, sizes; the negotiation's ARTIFACT_LIMITS), persisted; a refusal is
   * `{ ok: false, reason }` (`VALIDATION_ERROR: …` or `BUFFER_FULL: …`).
   */
  appendArtifact(
    artifact: Artifact,
    ctx: CallContext,
    speaker: Speaker = COORDINATOR_SPEAKER,
  ): { readonly ok: boolean; readonly reason: string } {
    const refuse = (code: string, reason: string) => {
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'activity',
        eventType: 'activity.artifact_refused',
        level: 'WARN',
        details: {
          negotiation_id: artifact.negotiationId.slice(0, LIMITS.negotiation_id),
          kind: artifact.kind.slice(0, 64),
          code,
          reason,
        },
      });
      return { ok: false, reason: `${code}: ${reason}` };
    };
    const reason = artifactRefusal(artifact);
    if (reason) return refuse('VALIDATION_ERROR', reason);
    const denied = this.accessRefusal(artifact.negotiationId, speaker, 'append artifacts to');
    if (denied) return refuse('PERMISSION_DENIED', denied);
    const createdAt = artifact.createdAt === '' ? isoUtc(this.clock.now()) : artifact.createdAt;
    const stored: Artifact = { ...artifact, content: Buffer.from(artifact.content), createdAt };
    return this.store.transaction(() => {
      const full = this.artifactsFull(stored);
      if (full) return refuse('BUFFER_FULL', full);
      this.store.activity.appendArtifact(stored);
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'activity',
        eventType: 'activity.artifact_appended',
        details: {
          negotiation_id: stored.negotiationId,
          kind: stored.kind,
          version: stored.version,
          content_type: stored.contentType,
          bytes: stored.content.length,
        },
      });
      return { ok: true, reason: '' };
    });
  }

  /** Why the negotiation cannot take this artifact (ARTIFACT_LIMITS), or undefined. */
  private artifactsFull(artifact: Artifact): string | undefined {
    const usage = this.store.activity.artifactUsage(artifact.negotiationId);
    let count = 0;
    let bytes = 0;
    for (const u of usage.values()) {
      count += u.count;
      bytes += u.bytes;
    }
    const size = artifact.content.length;
    const ofKind = usage.get(artifact.kind)?.bytes ?? 0;
    const what = `negotiation '${artifact.negotiationId}'`;
    if (count >= ARTIFACT_LIMITS.perNegotiation)
      return `${what} already holds ${count} artifacts, the most one negotiation may hold; continue under a new negotiation_id`;
    if (bytes + size > ARTIFACT_LIMITS.bytesPerNegotiation) {
      return `${what} holds ${bytes} bytes of content; ${size} more would exceed ${ARTIFACT_LIMITS.bytesPerNegotiation} per negotiation; continue under a new negotiation_id`;
    }
    if (ofKind + size > ARTIFACT_LIMITS.bytesPerKind) {
      return `${what} holds ${ofKind} bytes of '${artifact.kind}' artifacts; ${size} more would exceed ${ARTIFACT_LIMITS.bytesPerKind} per kind (what one ListArtifacts answer carries); continue under a new negotiation_id`;
    }
    return undefined;
  }

  /**
   * ListArtifacts: a negotiation's artifacts in the order appended, of one kind when `kind` is not ''. An agent that takes
   * no part in it is refused (NegotiationError 'permission', PERMISSION_DENIED; logged activity.artifact_refused).
   */
  listArtifacts(
    negotiationId: string,
    kind: string,
    speaker: Speaker = COORDINATOR_SPEAKER,
    ctx?: CallContext,
  ): Artifact[] {
    const denied = this.accessRefusal(negotiationId, speaker, 'list the artifacts of');
    if (denied) {
      this.log.record({
        correlationId: ctx?.correlationId ?? 'activity',
        actor: 'activity',
        eventType: 'activity.artifact_refused',
        level: 'WARN',
        details: {
          negotiation_id: negotiationId.slice(0, LIMITS.negotiation_id),
          kind: kind.slice(0, 64),
          code: 'PERMISSION_DENIED',
          reason: denied,
        },
      });
      throw new NegotiationError('permission', 'PERMISSION_DENIED', denied);
    }
    return this.store.activity.listArtifacts(negotiationId, kind);
  }

  /**
   * Why `speaker` may not touch the artifacts of `negotiationId`, or undefined: the operator and the coordinator may; an
   * agent only when it may act as one of the negotiation's participants (an unknown negotiation has none; the same
   * answer, so that a refusal does not tell whether it exists).
   */
  private accessRefusal(negotiationId: string, speaker: Speaker, what: string): string | undefined {
    if (speaker.kind !== 'agent') return undefined;
    const participants = this.participantsOf(negotiationId) ?? [];
    if (participants.some((p) => speaker.mayActAs(p))) return undefined;
    return `${speaker.label} may not ${what} negotiation '${negotiationId.slice(0, LIMITS.negotiation_id)}': only its participants and the operator may`;
  }

  dispose(): void {
    this.evictionTimer?.dispose();
    this.evictionTimer = undefined;
    this.changed.dispose();
  }

  private addActive(entry: ActivityEntry): void {
    this.active.set(keyOf(entry.agentId, entry.taskId), entry);
    this.perAgent.set(entry.agentId, (this.perAgent.get(entry.agentId) ?? 0) + 1);
  }

  /** RFC §10.1: at a limit a new entry is refused with activity_buffer_full (and logged), never dropped silently. */
  private refuseAtLimit(agentId: string, taskId: string, ctx: CallContext): void {
    const mine = this.perAgent.get(agentId) ?? 0;
    let error: ActivityBufferFullError | undefined;
    if (this.active.size >= this.options.maxEntries) {
      error = new ActivityBufferFullError(
        'coordinator',
        this.options.maxEntries,
        `activity_buffer_full: the activity buffer holds ${this.active.size} active entries, its limit (${this.options.maxEntries})`,
      );
    } else if (mine >= this.options.maxPerAgent) {
      error = new ActivityBufferFullError(
        'agent',
        this.options.maxPerAgent,
        `activity_buffer_full: ${agentId} has ${mine} active entries, the limit per agent (${this.options.maxPerAgent})`,
      );
    }
    if (!error) return;
    this.log.record({
      correlationId: ctx.correlationId,
      actor: 'activity',
      eventType: 'activity.refused',
      level: 'WARN',
      details: {
        agent_id: agentId,
        task_id: taskId,
        error_code: error.code,
        scope: error.scope,
        limit: error.limit,
        active: this.active.size,
        agent_active: mine,
      },
    });
    throw error;
  }

  /** Inside a transaction: the entry leaves the active buffer for the history. */
  private moveToHistory(entry: ActivityEntry, outcome: ActivityEntry['outcome']): ActivityEntry {
    const ended: ActivityEntry = { ...entry, endedAt: this.clock.now(), outcome };
    this.store.activity.putEntry(ended);
    this.active.delete(keyOf(entry.agentId, entry.taskId));
    const left = (this.perAgent.get(entry.agentId) ?? 1) - 1;
    if (left > 0) this.perAgent.set(entry.agentId, left);
    else this.perAgent.delete(entry.agentId);
    this.history_.push(ended);
    return ended;
  }

  private afterRemoval(ctx: CallContext): void {
    this.checkWarning(ctx);
    this.evictHistory();
  }

  /** The 80% warning (RFC §10.1), logged once each time the buffer crosses it upwards, and once when it is below again. */
  private checkWarning(ctx: CallContext): void {
    const above = this.active.size >= this.options.maxEntries * ACTIVITY_WARNING_RATIO;
    if (above === this.warned) return;
    this.warned = above;
    this.log.record({
      correlationId: ctx.correlationId,
      actor: 'activity',
      eventType: above ? 'activity.capacity_warning' : 'activity.capacity_normal',
      level: above ? 'WARN' : 'INFO',
      details: { active: this.active.size, max_entries: this.options.maxEntries, ratio: ACTIVITY_WARNING_RATIO },
    });
  }

  /**
   * History eviction (RFC §10.1): beyond `historyEntries` the oldest ended entries go, and any older than `historyMs`;
   * at most HISTORY_EVICTION_BATCH per run, the rest on the Clock right after; then a timer for the next to age out.
   */
  private evictHistory(): void {
    this.evictionTimer?.dispose();
    this.evictionTimer = undefined;
    const now = this.clock.now();
    const overCount = Math.max(0, this.history_.length - this.options.historyEntries);
    let n = 0;
    while (
      n < this.history_.length &&
      n < HISTORY_EVICTION_BATCH &&
      (n < overCount || (this.history_[n].endedAt ?? 0) + this.options.historyMs <= now)
    )
      n++;
    if (n > 0) {
      const evicted = this.history_.slice(0, n);
      this.store.transaction(() => {
        for (const entry of evicted) this.store.activity.deleteEntry(entry.agentId, entry.taskId);
        this.log.record({
          correlationId: 'activity:history',
          actor: 'activity',
          eventType: 'activity.history_evicted',
          details: {
            count: n,
            by_count: Math.min(n, overCount),
            history_entries: this.options.historyEntries,
            history_ms: this.options.historyMs,
          },
        });
      });
      this.history_ = this.history_.slice(n);
    }
    if (!this.history_.length) return;
    const more = this.history_.length > this.options.historyEntries;
    const delay = more ? 0 : Math.max(0, (this.history_[0].endedAt ?? 0) + this.options.historyMs - now);
    this.evictionTimer = this.clock.setTimer(delay, () => {
      try {
        this.evictHistory();
      } catch (err) {
        this.log.internalError('activity', 'activity:history', err);
      }
    });
  }
}

/** RFC §10: a description of at most 200 words; a longer one is cut (with "…") and the event says so. */
export function boundDescription(description: string): { text: string; cut?: { words: number; chars: number } } {
  const trimmed = description.trim();
  const words = trimmed === '' ? [] : trimmed.split(/\s+/);
  let text = trimmed;
  let cut = false;
  if (words.length > LIMITS.description_words) {
    text = `${words.slice(0, LIMITS.description_words).join(' ')}…`;
    cut = true;
  }
  if (text.length > LIMITS.description_chars) {
    text = `${text.slice(0, LIMITS.description_chars - 1)}…`;
    cut = true;
  }
  return cut ? { text, cut: { words: words.length, chars: trimmed.length } } : { text };
}

function artifactRefusal(a: Artifact): string | undefined {
  if (a.negotiationId === '') return 'negotiation_id is required';
  const idRefusal = identifierRefusal('negotiation_id', a.negotiationId, LIMITS.negotiation_id);
  if (idRefusal) return idRefusal;
  if (!ARTIFACT_KINDS.includes(a.kind))
    return `kind must be one of ${ARTIFACT_KINDS.join(', ')} (got ${JSON.stringify(a.kind.slice(0, 64))})`;
  const versionRefusal = identifierRefusal('version', a.version, LIMITS.artifact_version);
  if (versionRefusal) return versionRefusal;
  const typeRefusal = identifierRefusal('content_type', a.contentType, LIMITS.artifact_content_type);
  if (typeRefusal) return typeRefusal;
  if (a.content.length > LIMITS.artifact_content_bytes)
    return `content is larger than ${LIMITS.artifact_content_bytes} bytes (${a.content.length})`;
  if (a.createdAt !== '') {
    const createdRefusal = identifierRefusal('created_at', a.createdAt, LIMITS.artifact_created_at);
    if (createdRefusal) return createdRefusal;
    if (!ISO_8601.test(a.createdAt) || Number.isNaN(Date.parse(a.createdAt)))
      return `created_at is not an ISO-8601 date and time (${a.createdAt})`;
  }
  return undefined;
}

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

function matches(entry: ActivityEntry, filter: ActivityFilter): boolean {
  return (
    (filter.agentId === undefined || entry.agentId === filter.agentId) &&
    (filter.repoId === undefined || entry.repoId === filter.repoId) &&
    (filter.worktreeId === undefined || entry.worktreeId === filter.worktreeId) &&
    (filter.taskId === undefined || entry.taskId === filter.taskId)
  );
}

function byAgent(entries: readonly ActivityEntry[]): Map<string, string[]> {
  const grouped = new Map<string, string[]>();
  for (const e of entries) grouped.set(e.agentId, [...(grouped.get(e.agentId) ?? []), e.taskId]);
  return grouped;
}
