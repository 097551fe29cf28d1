import { createHash } from 'node:crypto';
import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import type { IdSource } from '../ids';
import { PAYLOAD_LIMITS } from '../limits';
import type { EventLog } from '../log/eventLog';
import { NegotiationError, type NegotiationErrorKind, type Speaker } from '../policy/speaker';
import type { AgentDirectory, AgentRecord, RegistryChange } from '../registry/model';
import { schedulePruning } from '../retention';
import type { CoordinatorOutbox } from '../router/model';
import { MAX_PRIORITY, MIN_PRIORITY, TERMINAL_TASK_STATES, type TaskRecord } from '../scheduler/model';
import type { BindingStatus } from '../worktree/bindings';
import { contextKindOf, contextRefusal } from './context';
import {
  TERMINAL_HANDOFF_STATES,
  type HandoffAttempt, type HandoffBudget, type HandoffChange, type HandoffDelegationPolicy, type HandoffQueries, type HandoffRecord,
  type HandoffState, type HandoffStorage, type HandoffWorktree, type TransferredEntry, type TransferredWork,
} from './model';
import { missingCapabilities, rankCandidates, unavailability } from './routing';

/** What RequestHandoff asks (the server reads the proto and the call metadata into this). */
export interface HandoffRequestInput {
  readonly requestId: string;
  readonly fromAgent: string;
  /** '' = capability routing. */
  readonly toAgent: string;
  readonly reason: string;
  readonly context: Buffer;
  /** Metadata sw4rm-context-content-type; '' = opaque bytes. */
  readonly contextContentType: string;
  readonly capabilitiesRequired: readonly string[];
  readonly priority: number;
  /** The request's `timeout` in ms; null when absent (or zero): the default. */
  readonly timeoutMs: number | null;
  readonly budget: HandoffBudget | null;
  readonly delegationPolicy: HandoffDelegationPolicy | null;
  /** Metadata sw4rm-task-id, sw4rm-correlation-id, sw4rm-parent-request-id; '' when absent. */
  readonly taskId: string;
  readonly correlationId: string;
  readonly parentRequestId: string;
  /** Metadata `sw4rm-handoff-worktree: carry`. */
  readonly carryWorktree: boolean;
}

/** RejectHandoff's HandoffResponse. */
export interface HandoffRejection {
  readonly requestId: string;
  /** accepting_agent: the agent answering. */
  readonly agentId: string;
  readonly reason: string;
  /** common.ErrorCode by name ('' = unspecified). */
  readonly code: string;
  readonly retryAfterMs: number;
  readonly redirectTo: string;
}

export interface HandoffOptions {
  /** How long the requester waits for an acceptance in all when the request names no `timeout` (ms). */
  readonly defaultTimeoutMs: number;
  /**
   * How long one target has to answer before the handoff is offered to the next candidate (rerouting allowed, one
   * available), within the requester's wait; with nobody else, the target keeps it until the wait ends.
   */
  readonly answerWindowMs: number;
  /** The longest `timeout` a request may ask (ms); a longer one is refused. */
  readonly maxTimeoutMs: number;
  /** On a rejection or a timeout, offer the handoff to the next capable agent (README, "Handoffs", "Routing"). */
  readonly reroute: boolean;
  /** When no agent can take it, the handoff waits for a person (awaitingOperator) instead of being refused or ended. */
  readonly routeToOperator: boolean;
  /** Ended handoffs are deleted this many days after they ended (their transferred-work refusals end with them). */
  readonly retentionDays: number;
  /** Open (PENDING or ACCEPTED) handoffs at most, in all and per requesting agent; beyond, RequestHandoff is refused BUFFER_FULL. */
  readonly maxOpen: number;
  readonly maxOpenPerAgent: number;
  /**
   * PENDING handoffs waiting for one agent's answer at most: a named target beyond it is refused BUFFER_FULL, capability
   * routing and redirects pass it by (GetPendingHandoffs stays answerable).
   */
  readonly maxPendingPerTarget: number;
  /**
   * Completed transfers the router's refusal keeps in memory (the newest); once more were ever completed, a message that
   * misses memory is looked up in the store (an indexed lookup).
   */
  readonly maxTransfersInMemory: number;
}

export const DEFAULT_HANDOFF_OPTIONS: HandoffOptions = {
  defaultTimeoutMs: 300_000,
  answerWindowMs: 60_000,
  maxTimeoutMs: 86_400_000,
  reroute: true,
  routeToOperator: false,
  retentionDays: 30,
  maxOpen: 10_000,
  maxOpenPerAgent: 256,
  maxPendingPerTarget: 64,
  maxTransfersInMemory: 100_000,
};

/** The bounds of the options a setting or a flag may give. */
export const HANDOFF_OPTION_BOUNDS = {
  defaultTimeoutSeconds: { min: 1, max: 86_400 },
  retentionDays: { min: 1, max: 3650 },
} as const;

/**
 * GetPendingHandoffs answers at most this many bytes of handoffs (contexts and fields, estimated): most gRPC clients
 * receive 4 MiB at most. One handoff is always answered, however large (its context is at most 1 MiB).
 */
export const PENDING_ANSWER_BYTES = 3.5 * 1024 * 1024;
/** What a listed handoff costs besides its context, reason and capabilities (ids, budget, policy, framing), estimated. */
const PENDING_RECORD_OVERHEAD = 2048;
/** Targets tried at most per handoff (the first included); then it ends as if no agent could take it. */
export const MAX_ATTEMPTS = 32;
/** CancelDelegation's grace_period_ms at most (forwarded to the parties; README, "Handoffs"). */
export const MAX_GRACE_PERIOD_MS = 3_600_000;
/** A timeout whose transaction failed is decided again this much later (ms). */
export const EXPIRY_RETRY_MS = 1_000;
/** How often retention runs and how many ended handoffs one run deletes at most. */
export const HANDOFF_RETENTION_INTERVAL_MS = 3_600_000;
export const HANDOFF_RETENTION_BATCH = 100;
/** The NOTIFICATION payloads' `type` (README, "Handoffs"). */
export const HANDOFF_REQUEST_NOTICE = 'handoff_request';
export const HANDOFF_STATUS_NOTICE = 'handoff_status';
const NOTICE_CONTENT_TYPE = 'application/json';

/** What the handoff area needs of the scheduler. */
export interface HandoffTasks {
  task(taskId: string): TaskRecord | undefined;
  loadOf(agentId: string): number;
  handOff(taskId: string, note: string, ctx: CallContext): TaskRecord | undefined;
}

/** What the handoff area needs of the worktree bindings (WorktreeBindings). */
export interface HandoffWorktrees {
  placeOf(agentId: string): { readonly repoId: string; readonly worktreeId: string; readonly branch: string } | undefined;
  status(agentId: string): BindingStatus;
  list(): BindingStatus[];
  bind(agentId: string, repoId: string, worktreeId: string, ctx: CallContext, within?: (b: BindingStatus) => void): Promise<BindingStatus>;
  requestSwitch(agentId: string, targetWorktreeId: string, ctx: CallContext,
    options: { requiresHitl?: boolean; reason?: string; facts?: Readonly<Record<string, string>> }, within?: (b: BindingStatus) => void): Promise<BindingStatus>;
  /** Fires after every committed change of a binding (a carried worktree's switch decided). */
  readonly onDidChange: Event<BindingStatus>;
}

/** The fact a carried worktree's switch request names its handoff by (README, "Handoffs"). */
export const SWITCH_HANDOFF_FACT = 'handoff_request_id';

export interface HandoffDeps {
  readonly store: HandoffStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly agents: AgentDirectory;
  readonly outbox: CoordinatorOutbox;
  readonly tasks: HandoffTasks;
  readonly worktrees: HandoffWorktrees;
  /** HitlService.cancel: a carried worktree's switch the handoff no longer waits for is withdrawn. */
  readonly cancelInvocation: (invocationId: string, by: string, reason: string, ctx: CallContext) => void;
  /** HitlService.get: an invocation's state and facts (a switch's SWITCH_HANDOFF_FACT), undefined when unknown. */
  readonly invocation: (invocationId: string) => { readonly state: string; readonly facts: Readonly<Record<string, unknown>> } | undefined;
}

const LIMITS = FIELD_LIMITS.handoff;
/** TaskRecord.submittedBy of the tasks the workflow engine submits (`workflow:<workflow_id>`): they are not handed off. */
const WORKFLOW_SUBMITTER = 'workflow:';
const ACTOR = 'handoff';
const EMPTY = Buffer.alloc(0);
/** An in-memory record: everything but the context bytes (read from the store when needed). */
type OpenRecord = HandoffRecord;
type Ended = Extract<HandoffState, 'REJECTED' | 'EXPIRED' | 'CANCELLED' | 'COMPLETED'>;
/**
 * Why the current target is replaced: it rejected, its answer window passed, it left (deregistered or FAILED) — or the
 * agent that had accepted it left (the handoff went back to PENDING).
 */
type Trigger = 'rejected' | 'expired' | 'left' | 'acceptor_left';

const fail = (kind: NegotiationErrorKind, code: string, message: string) => new NegotiationError(kind, code, message);
const invalid = (message: string) => fail('invalid', 'VALIDATION_ERROR', message);
const denied = (message: string) => fail('permission', 'PERMISSION_DENIED', message);
const precondition = (message: string) => fail('precondition', 'FAILED_PRECONDITION', message);

function identifier(field: string, value: string, max: number, required: boolean): string {
  if (required && value === '') throw invalid(`${field} is required`);
  const refusal = identifierRefusal(field, value, max);
  if (refusal !== undefined) throw invalid(refusal);
  if (value !== value.trim()) throw invalid(`${field} '${value.slice(0, 80)}' has leading or trailing spaces`);
  return value;
}

function text(field: string, value: string, max: number): string {
  if (value.length > max) throw invalid(`${field} is longer than ${max} characters (${value.length})`);
  if (value.includes('\u0000')) throw invalid(`${field} contains NUL`);
  return value;
}

function nonNegative(field: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) throw invalid(`${field} must be a non-negative number, not ${String(value)}`);
  return value;
}

function speakerName(speaker: Speaker): string {
  return speaker.kind === 'coordinator' ? 'coordinator' : speaker.label;
}

function mayActAs(speaker: Speaker, agentId: string): boolean {
  return speaker.kind !== 'agent' || (agentId !== '' && speaker.mayActAs(agentId));
}

function transferKey(fromAgent: string, correlationId: string): string {
  return `${fromAgent}\u0000${correlationId}`;
}

function transferRefusal(entry: TransferredEntry): string {
  return `handoff ${entry.requestId} completed: ${entry.acceptedBy} owns this work (correlation_id '${entry.correlationId}'; RFC §17.6: the origin may not act on it)`;
}

function withoutContext(record: HandoffRecord): OpenRecord {
  return { ...record, context: EMPTY };
}

/** A copy whose mutable parts (attempts, the worktree carry) are its own: a transaction changes the copy, never memory. */
function draftOf(record: OpenRecord): OpenRecord {
  return { ...record, attempts: record.attempts.map((a) => ({ ...a })), worktree: record.worktree && { ...record.worktree } };
}

function currentAttempt(record: HandoffRecord): HandoffAttempt | undefined {
  const last = record.attempts[record.attempts.length - 1];
  return last && last.outcome === '' ? last : undefined;
}

/**
 * Handoffs (RFC §17.6; README, "Handoffs"): RequestHandoff validated (ids, budget envelope, the context snapshot against
 * the HandoffContext schema when its content type says so, the task handed off), routed to the named agent or by
 * capability (routing.ts), announced to the target by a NOTIFICATION envelope in the transaction of the change; the
 * target accepts or rejects, a rejection or the end of its answer window (Clock) moves it to the next candidate when
 * rerouting is allowed, or to a person when no agent can take it and the options say so; `timeout` bounds the
 * requester's whole wait (then EXPIRED); CompleteHandoff transfers the work (the origin's task
 * closed, its further sends about it refused by the router: TransferredWork); CancelDelegation cancels a delegation and
 * its children. Every transition is one `handoff.*` event in its transaction; the requester learns each outcome by a
 * `handoff_status` NOTIFICATION. Everything persists; timers come back after a restart.
 */
export class Handoffs implements HandoffQueries, TransferredWork, Disposable {
  private readonly changed = new Emitter<HandoffChange>();
  readonly onDidChange: Event<HandoffChange> = this.changed.event;
  /** Open (PENDING or ACCEPTED) handoffs by request id, without their context bytes. */
  private readonly open = new Map<string, OpenRecord>();
  private readonly timers = new Map<string, Disposable>();
  /**
   * The newest maxTransfersInMemory COMPLETED handoffs by (from_agent, correlation_id), for the router's refusal;
   * `transferKeys` by request id, oldest first (eviction, retention). `beyondMemory`: more were ever completed than
   * memory keeps, so a miss asks the store.
   */
  private readonly transferred = new Map<string, TransferredEntry>();
  private readonly transferKeys = new Map<string, string>();
  private beyondMemory = false;
  private readonly subscriptions: Disposable[] = [];
  private readonly pruning: Disposable;
  private disposed = false;

  constructor(private readonly deps: HandoffDeps, private readonly options: HandoffOptions = DEFAULT_HANDOFF_OPTIONS) {
    this.pruning = schedulePruning(deps.clock, HANDOFF_RETENTION_INTERVAL_MS, () => this.pruneEnded());
    this.subscriptions.push(deps.agents.onDidChange((change) => this.safely('agent_change', () => this.onAgentChange(change))));
    this.subscriptions.push(deps.worktrees.onDidChange((binding) => this.safely('worktree_change', () => this.followSwitch(binding.agentId))));
  }

  // ---------------------------------------------------------------- queries

  recent(limit: number): HandoffRecord[] {
    return this.deps.store.handoffs.listRecent(limit);
  }

  get(requestId: string): HandoffRecord | undefined {
    return this.deps.store.handoffs.get(requestId);
  }

  /**
   * TransferredWork: the router asks this of every message an agent sends. A map lookup (nothing at all while none
   * completed); only once more transfers were completed than memory keeps does a miss ask the store (an indexed lookup).
   */
  refusalFor(producerId: string, correlationId: string): string | undefined {
    if (this.transferred.size === 0 && !this.beyondMemory) return undefined;
    const entry = this.transferred.get(transferKey(producerId, correlationId));
    if (entry) return transferRefusal(entry);
    if (!this.beyondMemory) return undefined;
    const stored = this.deps.store.handoffs.transferred(producerId, correlationId);
    return stored && transferRefusal(stored);
  }

  /** Open handoffs (tests and the editor's counts). */
  openCount(): number {
    return this.open.size;
  }

  /** Completed transfers held in memory (at most maxTransfersInMemory). */
  transfersInMemory(): number {
    return this.transferred.size;
  }

  /**
   * GetPendingHandoffs: the PENDING handoffs whose current target is `agentId` (context included), by priority (-19
   * first) then age, as many as fit `maxBytes` (at least one); `more`: how many were left out (the agent answers these
   * and asks again). Only the agent itself (or the operator) may ask. A time that ran out is decided first.
   */
  pending(agentId: string, speaker: Speaker, maxBytes = PENDING_ANSWER_BYTES): { readonly records: HandoffRecord[]; readonly more: number } {
    identifier('agent_id', agentId, LIMITS.agent_id, true);
    if (!mayActAs(speaker, agentId)) throw denied(`${speakerName(speaker)} may not read the pending handoffs of '${agentId}'`);
    const waiting = () => [...this.open.values()].filter((r) => r.state === 'PENDING' && !r.awaitingOperator && r.toAgent === agentId);
    for (const r of waiting()) this.catchUp(r.requestId);
    const mine = waiting().sort((a, b) => a.priority - b.priority || a.requestedAt - b.requestedAt || (a.requestId < b.requestId ? -1 : 1));
    const records: HandoffRecord[] = [];
    let bytes = 0;
    for (const r of mine) {
      const cost = r.contextBytes + Buffer.byteLength(r.reason) + r.capabilitiesRequired.reduce((n, c) => n + c.length, 0) + PENDING_RECORD_OVERHEAD;
      if (records.length > 0 && bytes + cost > maxBytes) break;
      const full = this.deps.store.handoffs.get(r.requestId);
      if (!full) continue;
      records.push(full);
      bytes += cost;
    }
    return { records, more: mine.length - records.length };
  }

  // ---------------------------------------------------------------- RequestHandoff

  request(input: HandoffRequestInput, speaker: Speaker, ctx: CallContext): HandoffRecord {
    const requestId = identifier('request_id', input.requestId, LIMITS.request_id, true);
    const fromAgent = identifier('from_agent', input.fromAgent, LIMITS.agent_id, true);
    if (!mayActAs(speaker, fromAgent)) throw denied(`${speakerName(speaker)} may not request a handoff as '${fromAgent}'`);
    const digest = requestDigest(input);
    const existing = this.open.get(requestId) ?? this.deps.store.handoffs.get(requestId);
    if (existing) {
      // A retry whose answer was lost: the same request changes nothing, whatever became of it.
      if (existing.requestDigest === digest) return this.full(existing);
      const more = this.knows(existing, speaker) ? ` (from '${existing.fromAgent}', now ${existing.state})` : '';
      throw fail('exists', 'DUPLICATE_DETECTED', `request_id '${requestId}' was already used for another handoff${more}; a new request needs a new request_id`);
    }
    const work = this.refusalFor(fromAgent, input.correlationId || input.taskId || requestId);
    if (work !== undefined) throw denied(work);
    const from = this.deps.agents.get(fromAgent);
    if (!from) throw fail('not_found', 'NOT_FOUND', `from_agent '${fromAgent}' is not a registered agent; RegisterAgent first`);
    const toAgent = identifier('to_agent', input.toAgent, LIMITS.agent_id, false);
    if (toAgent === fromAgent) throw invalid(`to_agent is from_agent '${fromAgent}': an agent cannot hand off to itself`);
    const reason = text('reason', input.reason, LIMITS.reason);
    if (reason.trim() === '') throw invalid('reason is required: say why the work is handed off (RFC §17.6)');
    const capabilities = this.checkCapabilities(input.capabilitiesRequired);
    if (!Number.isInteger(input.priority) || input.priority < MIN_PRIORITY || input.priority > MAX_PRIORITY) {
      throw invalid(`priority must be an integer from ${MIN_PRIORITY} (highest) to ${MAX_PRIORITY} (lowest), not ${String(input.priority)}`);
    }
    const now = this.deps.clock.now();
    let timeoutMs = this.options.defaultTimeoutMs;
    if (input.timeoutMs !== null && !(Number.isFinite(input.timeoutMs) && input.timeoutMs >= 0)) throw invalid(`timeout must be a non-negative duration, not ${String(input.timeoutMs)}`);
    if (input.timeoutMs !== null && input.timeoutMs > 0) {
      if (input.timeoutMs > this.options.maxTimeoutMs) throw invalid(`timeout is ${input.timeoutMs} ms; at most ${this.options.maxTimeoutMs} ms`);
      timeoutMs = Math.ceil(input.timeoutMs);
    }
    const budget = input.budget ? this.checkBudget(input.budget, now) : null;
    const policy = input.delegationPolicy ? checkPolicy(input.delegationPolicy) : null;
    const contentType = identifier('sw4rm-context-content-type', input.contextContentType, LIMITS.content_type, false);
    const contextProblem = contextRefusal(input.context, contentType);
    if (contextProblem !== undefined) throw invalid(contextProblem);
    const taskId = identifier('sw4rm-task-id', input.taskId, LIMITS.task_id, false);
    if (taskId !== '') this.checkTask(taskId, fromAgent);
    const correlationId = identifier('sw4rm-correlation-id', input.correlationId, LIMITS.correlation_id, false) || taskId || requestId;
    const parentRequestId = identifier('sw4rm-parent-request-id', input.parentRequestId, LIMITS.request_id, false);
    if (parentRequestId === requestId) throw invalid('sw4rm-parent-request-id names the request itself');
    if (parentRequestId !== '') this.checkParent(parentRequestId, fromAgent, budget);
    let worktree: HandoffWorktree | null = null;
    if (input.carryWorktree) {
      const place = this.deps.worktrees.placeOf(fromAgent);
      if (!place) throw precondition(`sw4rm-handoff-worktree: carry asks to carry the worktree of '${fromAgent}', which is not bound to one (WorktreeService.Bind first)`);
      worktree = { repoId: place.repoId, worktreeId: place.worktreeId, outcome: '', detail: '', invocationId: '' };
    }
    if (this.open.size >= this.options.maxOpen) {
      throw fail('exhausted', 'BUFFER_FULL', `${this.open.size} handoffs are open (at most ${this.options.maxOpen}); wait for some to end`);
    }
    const ofAgent = [...this.open.values()].filter((r) => r.fromAgent === fromAgent).length;
    if (ofAgent >= this.options.maxOpenPerAgent) {
      throw fail('exhausted', 'BUFFER_FULL', `'${fromAgent}' already has ${ofAgent} open handoffs (at most ${this.options.maxOpenPerAgent})`);
    }

    // Routing: the named agent, else the best capable one, else a person (when the options say so).
    let target: { agentId: string; via: 'requested' | 'capability' } | undefined;
    if (toAgent !== '') {
      target = { agentId: this.checkNamedTarget(toAgent, capabilities), via: 'requested' };
    } else {
      const best = this.candidates(capabilities, new Set([fromAgent]))[0];
      if (best) target = { agentId: best.agentId, via: 'capability' };
      else if (!this.options.routeToOperator) throw fail('precondition', 'NO_ROUTE', this.noRoute(capabilities, fromAgent));
    }
    const deadlineAt = this.deadlineOf(budget, now);
    const record: HandoffRecord = {
      requestId, fromAgent, requestedTo: toAgent, toAgent: target?.agentId ?? '', reason, context: Buffer.from(input.context),
      contextBytes: input.context.byteLength, contextContentType: contentType, capabilitiesRequired: capabilities, priority: input.priority,
      timeoutMs: deadlineAt === null ? timeoutMs : Math.max(1, Math.min(timeoutMs, deadlineAt - now)),
      budget, delegationPolicy: policy, taskId, correlationId, parentRequestId, carryWorktree: input.carryWorktree, worktree, requestDigest: digest,
      state: 'PENDING', awaitingOperator: target === undefined,
      attempts: target ? [{ agentId: target.agentId, at: now, outcome: '', reason: '', code: '', endedAt: null, via: target.via }] : [],
      acceptedBy: '', rejectionReason: '', rejectionCode: '', endReason: '', completedBy: '',
      expiresAt: null, requestedAt: now, updatedAt: now, endedAt: null,
    };
    record.expiresAt = this.expiryOf(record, now);
    const hctx: CallContext = { ...ctx, correlationId };
    this.deps.store.transaction(() => {
      this.deps.store.handoffs.put(record);
      const notice = target ? this.notifyTarget(record, hctx) : undefined;
      this.record(record, fromAgent, 'handoff.requested', {
        to_agent: record.toAgent, requested_to: toAgent, via: target?.via ?? 'operator', awaiting_operator: record.awaitingOperator,
        capabilities_required: capabilities, priority: record.priority, timeout_ms: record.timeoutMs, expires_at: isoUtc(record.expiresAt!),
        answer_by: isoUtc(this.answerBy(record)!),
        context_bytes: record.contextBytes, context_content_type: contentType, task_id: taskId, parent_request_id: parentRequestId,
        carry_worktree: worktree ? { repo_id: worktree.repoId, worktree_id: worktree.worktreeId } : undefined,
        budget: budget ?? undefined, delegation_policy: policy ?? undefined, requested_by: speakerName(speaker), principal: ctx.principal,
        notification: notice,
      }, notice && !notice.sent ? 'WARN' : 'INFO');
    });
    this.opened(record);
    return record;
  }

  private checkCapabilities(list: readonly string[]): string[] {
    if (list.length > LIMITS.capabilities) throw invalid(`capabilities_required names ${list.length} capabilities; at most ${LIMITS.capabilities}`);
    const seen = new Set<string>();
    list.forEach((raw, i) => {
      const cap = identifier(`capabilities_required[${i}]`, raw, LIMITS.capability, true);
      if (/\s/.test(cap)) throw invalid(`capabilities_required[${i}] '${cap.slice(0, 80)}' contains spaces`);
      if (seen.has(cap)) throw invalid(`capabilities_required names '${cap}' twice`);
      seen.add(cap);
    });
    return [...seen];
  }

  private checkBudget(budget: HandoffBudget, now: number): HandoffBudget {
    for (const [field, value] of Object.entries(budget)) nonNegative(`budget.${field}`, value as number);
    if (budget.maxDelegationDepth > 0 && budget.currentDepth >= budget.maxDelegationDepth) {
      throw fail('precondition', 'VALIDATION_ERROR',
        `budget.current_depth ${budget.currentDepth} has reached max_delegation_depth ${budget.maxDelegationDepth}: the work may not be delegated further`);
    }
    if (budget.deadlineEpochMs > 0 && budget.deadlineEpochMs <= now) {
      throw fail('deadline', 'TTL_EXPIRED', `budget.deadline_epoch_ms ${isoUtc(budget.deadlineEpochMs)} has passed (now ${isoUtc(now)})`);
    }
    return { ...budget };
  }

  /** The budget's deadline: deadline_epoch_ms, or the request time plus wall_time_remaining_ms, whichever is sooner. */
  private deadlineOf(budget: HandoffBudget | null, requestedAt: number): number | null {
    if (!budget) return null;
    const candidates = [budget.deadlineEpochMs > 0 ? budget.deadlineEpochMs : Infinity, budget.wallTimeRemainingMs > 0 ? requestedAt + budget.wallTimeRemainingMs : Infinity];
    const deadline = Math.min(...candidates);
    return Number.isFinite(deadline) ? deadline : null;
  }

  /** When a wait that starts at `from` ends: the timeout from then, cut to the budget's deadline. */
  private expiryOf(record: HandoffRecord, from: number): number {
    const deadline = this.deadlineOf(record.budget, record.requestedAt);
    return deadline === null ? from + record.timeoutMs : Math.min(from + record.timeoutMs, deadline);
  }

  /**
   * When the current target (or the operator) must have answered: the target's answer window (answerWindowMs from when
   * it was offered the handoff) or, once that passed with nobody else to offer it to, the end of the requester's wait —
   * never past it. null when not PENDING. The handoff's timer is armed for it.
   */
  answerBy(record: HandoffRecord): number | null {
    if (record.state !== 'PENDING' || record.expiresAt === null) return null;
    const attempt = currentAttempt(record);
    if (record.awaitingOperator || !attempt || attempt.windowEndedAt !== undefined) return record.expiresAt;
    return Math.min(attempt.at + this.options.answerWindowMs, record.expiresAt);
  }

  /**
   * A time that has run out is decided before an answer is taken: with a real clock the timer's callback may still be
   * queued behind this call. Then the answer finds the handoff rerouted or ended (and is refused).
   */
  private catchUp(requestId: string): void {
    const record = this.open.get(requestId);
    const due = record ? this.answerBy(record) : null;
    if (due !== null && due <= this.deps.clock.now()) this.timeUp(requestId);
  }

  /**
   * sw4rm-parent-request-id: a handoff the requester accepted (ACCEPTED, or COMPLETED: the work is now its own). Depth: a
   * child's budget.current_depth must exceed its parent's; its depth (current_depth, or the parent's + 1 without a
   * budget) must stay below max_delegation_depth — the child's, else the parent's — when one is set.
   */
  private checkParent(parentRequestId: string, fromAgent: string, budget: HandoffBudget | null): void {
    const parent = this.open.get(parentRequestId) ?? this.deps.store.handoffs.get(parentRequestId);
    if (!parent || parent.acceptedBy !== fromAgent || (parent.state !== 'ACCEPTED' && parent.state !== 'COMPLETED')) {
      throw precondition(`sw4rm-parent-request-id '${parentRequestId}' is not a handoff '${fromAgent}' has accepted: a delegation is made under a handoff its requester accepted`);
    }
    const parentDepth = parent.budget?.currentDepth ?? 0;
    if (budget && budget.currentDepth <= parentDepth) {
      throw invalid(`budget.current_depth ${budget.currentDepth} must exceed its parent's (${parentRequestId}: ${parentDepth}): a delegation is one level deeper`);
    }
    const depth = budget ? budget.currentDepth : parentDepth + 1;
    const max = budget && budget.maxDelegationDepth > 0 ? Math.min(budget.maxDelegationDepth, parent.budget?.maxDelegationDepth || Infinity) : parent.budget?.maxDelegationDepth ?? 0;
    if (max > 0 && depth >= max) {
      throw fail('precondition', 'VALIDATION_ERROR', `the delegation's depth ${depth} has reached max_delegation_depth ${max} (its parent ${parentRequestId} is at depth ${parentDepth}): the work may not be delegated further`);
    }
  }

  private checkTask(taskId: string, fromAgent: string): void {
    const task = this.deps.tasks.task(taskId);
    if (!task) throw fail('not_found', 'NOT_FOUND', `sw4rm-task-id '${taskId}' is not a task of the scheduler`);
    if (TERMINAL_TASK_STATES.has(task.state)) throw precondition(`sw4rm-task-id '${taskId}' already ended ${task.state}: there is nothing to hand off`);
    if (task.submittedBy.startsWith(WORKFLOW_SUBMITTER)) {
      throw precondition(`task '${taskId}' was submitted by the workflow engine (${task.submittedBy.slice(0, 200)}): the agent of a workflow node is fixed by the workflow's definition, so its task cannot be handed off; resume the node instead (ResumeWorkflow)`);
    }
    if (task.assignedAgentId !== fromAgent && task.target !== fromAgent) {
      throw denied(`task '${taskId}' belongs to '${task.assignedAgentId || task.target}', not '${fromAgent}': only its agent may hand it off`);
    }
    const other = [...this.open.values()].find((r) => r.taskId === taskId);
    if (other) throw precondition(`task '${taskId}' is already being handed off by handoff '${other.requestId}' (${other.state})`);
  }

  /** The named target: registered (NO_ROUTE), holding every required capability, not shutting down, not over its delegations. */
  private checkNamedTarget(agentId: string, capabilities: readonly string[]): string {
    const agent = this.deps.agents.get(agentId);
    if (!agent) throw fail('not_found', 'NO_ROUTE', `to_agent '${agentId}' is not a registered agent`);
    const missing = missingCapabilities(agent, capabilities);
    if (missing.length > 0) {
      throw fail('precondition', 'NO_ROUTE', `to_agent '${agentId}' lacks the required capabilities ${missing.join(', ')} (it registered: ${agent.descriptor.capabilities.join(', ') || 'none'})`);
    }
    if (agent.state === 'SHUTTING_DOWN') throw fail('unavailable', 'AGENT_SHUTDOWN', `to_agent '${agentId}' is shutting down`);
    const cap = agent.descriptor.maxConcurrentDelegations;
    const carried = this.handoffLoad(agentId);
    if (cap > 0 && carried >= cap) {
      throw fail('exhausted', 'OVERLOADED', `to_agent '${agentId}' takes at most ${cap} delegations at once (max_concurrent_delegations) and has ${carried}`);
    }
    const waiting = this.waitingFor(agentId);
    if (waiting >= this.options.maxPendingPerTarget) {
      throw fail('exhausted', 'BUFFER_FULL', `to_agent '${agentId}' already has ${waiting} handoffs waiting for its answer (at most ${this.options.maxPendingPerTarget}); try again later or another agent`);
    }
    return agentId;
  }

  /** PENDING handoffs offered to `agentId` (waiting for its answer). */
  private waitingFor(agentId: string): number {
    let n = 0;
    for (const r of this.open.values()) if (r.state === 'PENDING' && !r.awaitingOperator && r.toAgent === agentId) n++;
    return n;
  }

  /** Why `agentId` may not be offered another handoff now (maxPendingPerTarget), or undefined. */
  private fullUp(agentId: string, waiting = this.waitingFor(agentId)): string | undefined {
    return waiting >= this.options.maxPendingPerTarget ? `${waiting} handoffs waiting for its answer (at most ${this.options.maxPendingPerTarget})` : undefined;
  }

  /** Why no agent could be chosen, for the NO_ROUTE refusal: the registered agents that hold the capabilities and why each is out. */
  private noRoute(capabilities: readonly string[], fromAgent: string, tried: ReadonlySet<string> = new Set()): string {
    const capable = this.deps.agents.list().filter((a) => a.descriptor.agentId !== fromAgent && missingCapabilities(a, capabilities).length === 0);
    const wanted = capabilities.length > 0 ? `holding ${capabilities.join(', ')}` : '(no capability required)';
    if (capable.length === 0) return `no registered agent other than '${fromAgent}' ${capabilities.length > 0 ? `holds the capabilities ${capabilities.join(', ')}` : 'is registered'}`;
    const why = capable.slice(0, 5).map((a) => {
      const id = a.descriptor.agentId;
      if (tried.has(id)) return `${id}: tried already`;
      const cap = a.descriptor.maxConcurrentDelegations;
      return `${id}: ${unavailability(a) ?? (cap > 0 && this.handoffLoad(id) >= cap ? `at its max_concurrent_delegations (${cap})` : this.fullUp(id) ?? 'available')}`;
    });
    return `no agent ${wanted} can take the handoff now (${why.join('; ')}${capable.length > 5 ? `; and ${capable.length - 5} more` : ''})`;
  }

  private candidates(capabilities: readonly string[], exclude: ReadonlySet<string>) {
    // One pass over the open handoffs for every agent's count (not one per agent).
    const carried = new Map<string, number>();
    const waiting = new Map<string, number>();
    for (const r of this.open.values()) {
      const holder = r.state === 'PENDING' ? r.toAgent : r.acceptedBy;
      if (holder !== '') carried.set(holder, (carried.get(holder) ?? 0) + 1);
      if (r.state === 'PENDING' && holder !== '' && !r.awaitingOperator) waiting.set(holder, (waiting.get(holder) ?? 0) + 1);
    }
    const full = [...waiting].filter(([, n]) => n >= this.options.maxPendingPerTarget).map(([id]) => id);
    return rankCandidates({
      agents: this.deps.agents.list(), required: capabilities, exclude: full.length === 0 ? exclude : new Set([...exclude, ...full]),
      tasks: (id) => this.deps.tasks.loadOf(id), handoffs: (id) => carried.get(id) ?? 0,
    });
  }

  /** Handoffs an agent is the PENDING target of or has ACCEPTED. */
  private handoffLoad(agentId: string): number {
    let n = 0;
    for (const r of this.open.values()) if ((r.state === 'PENDING' ? r.toAgent : r.acceptedBy) === agentId) n++;
    return n;
  }

  // ---------------------------------------------------------------- AcceptHandoff

  /**
   * AcceptHandoff: only the current target → ACCEPTED. With a worktree carry the receiver's binding moves first (BIND or
   * SWITCH_REQUEST through the worktree state machine) and the acceptance commits in the same transaction; a carry the
   * state machine forbids refuses the accept (FAILED_PRECONDITION, the reason named).
   */
  async accept(requestId: string, agentId: string, speaker: Speaker, ctx: CallContext): Promise<HandoffRecord> {
    identifier('request_id', requestId, LIMITS.request_id, true);
    identifier('accepting_agent', agentId, LIMITS.agent_id, true);
    if (!mayActAs(speaker, agentId)) throw denied(`${speakerName(speaker)} may not accept as '${agentId}'`);
    this.catchUp(requestId);
    const record = this.open.get(requestId);
    const notOffered = () => denied(`handoff '${requestId}' is not offered to '${agentId}'`);
    if (!record) {
      const stored = this.deps.store.handoffs.get(requestId);
      if (!stored) throw fail('not_found', 'NOT_FOUND', `no handoff '${requestId}'`);
      if (stored.acceptedBy === agentId) return stored;
      if (!this.knows(stored, speaker)) throw notOffered();
      throw precondition(`handoff '${requestId}' is ${stored.state}: it can no longer be accepted`);
    }
    if (!this.knows(record, speaker)) throw notOffered();
    if (record.state === 'ACCEPTED') {
      if (record.acceptedBy === agentId) return this.deps.store.handoffs.get(requestId) ?? record;
      throw precondition(`handoff '${requestId}' was accepted by '${record.acceptedBy}'`);
    }
    if (record.awaitingOperator) throw precondition(`handoff '${requestId}' waits for the operator (no agent could take it); an agent may not accept it now`);
    if (record.toAgent !== agentId) throw denied(`only the current target '${record.toAgent}' may accept handoff '${requestId}'; '${agentId}' is not`);
    const hctx: CallContext = { ...ctx, correlationId: record.correlationId };
    if (record.worktree && record.worktree.outcome === '') return this.acceptCarrying(record, agentId, speaker, hctx);
    return this.full(this.change(record, (draft) => this.commitAccept(draft, agentId, 'agent', speaker, hctx, null)));
  }

  /** Whether `record` may still be accepted by `agentId` (checked again after the worktree's asynchronous work). */
  private acceptable(requestId: string, agentId: string): OpenRecord | undefined {
    const r = this.open.get(requestId);
    return r && r.state === 'PENDING' && !r.awaitingOperator && r.toAgent === agentId ? r : undefined;
  }

  private async acceptCarrying(record: OpenRecord, agentId: string, speaker: Speaker, ctx: CallContext): Promise<HandoffRecord> {
    const carry = record.worktree!;
    const place = this.deps.worktrees.placeOf(agentId);
    const refuse = (why: string) => precondition(`handoff '${record.requestId}' carries worktree '${carry.worktreeId}' of '${carry.repoId}', but ${why}`);
    /** The same agent's accept that ran meanwhile (a retry while git worked) is this one's answer. */
    const acceptedMeanwhile = (): HandoffRecord | undefined => {
      const now = this.open.get(record.requestId) ?? this.deps.store.handoffs.get(record.requestId);
      return now && now.state !== 'PENDING' && now.acceptedBy === agentId ? this.full(now) : undefined;
    };
    if (place && place.repoId === carry.repoId && place.worktreeId === carry.worktreeId) {
      return this.full(this.change(record, (draft) => this.commitAccept(draft, agentId, 'agent', speaker, ctx, { outcome: 'already_there', detail: `'${agentId}' works in it already`, invocationId: '' })));
    }
    const binding = this.deps.worktrees.status(agentId);
    let committed: OpenRecord | undefined;
    const within = (outcome: HandoffWorktree['outcome'], detail: (b: BindingStatus) => string) => (b: BindingStatus) => {
      const current = this.acceptable(record.requestId, agentId);
      // A BIND is rolled back when the handoff changed meanwhile (the receiver stays UNBOUND); a switch asked for is
      // withdrawn after it (throwing here would leave its HITL invocation half made).
      if (!current && outcome === 'bound') throw new CarryFailed('the handoff changed while the worktree was prepared');
      if (!current) return;
      if (outcome === 'bound' && b.state !== 'BOUND_HOME') throw new CarryFailed(`binding '${agentId}' to it failed: ${b.failure?.reason ?? b.state} ${b.failure?.detail ?? ''}`.trim());
      const draft = draftOf(current);
      this.commitAccept(draft, agentId, 'agent', speaker, ctx, { outcome, detail: detail(b), invocationId: b.switch?.invocationId ?? '' });
      // The last step of the binding's transaction: memory follows the store at once (a failure after it: reloaded below).
      this.install(draft);
      committed = draft;
    };
    /** The binding failed after this acceptance was written: its transaction was rolled back, and memory with it. */
    const undo = () => {
      if (committed) this.reload(record.requestId);
      committed = undefined;
    };
    if (binding.state === 'UNBOUND') {
      // RFC §16.2 BIND: UNBOUND → BOUND_HOME with the carried worktree as the receiver's home (refused while it is another
      // bound agent's home: one bound agent per home worktree).
      try {
        await this.deps.worktrees.bind(agentId, carry.repoId, carry.worktreeId, ctx,
          within('bound', (b) => `'${agentId}' bound to it (BIND, UNBOUND → BOUND_HOME) at ${b.worktreePath}`));
      } catch (err) {
        undo();
        const done = acceptedMeanwhile();
        if (done) return done;
        throw refuse(`the worktree state machine refused to bind '${agentId}' to it: ${(err as Error).message}`);
      }
    } else if (binding.state === 'BOUND_HOME' && binding.repoId === carry.repoId) {
      // RFC §16.2 SWITCH_REQUEST: BOUND_HOME → SWITCH_PENDING; a person (HITL WORKTREE_OVERRIDE) or a policy rule decides.
      let switched: BindingStatus;
      try {
        switched = await this.deps.worktrees.requestSwitch(agentId, carry.worktreeId, ctx,
          { reason: `handoff ${record.requestId} from ${record.fromAgent} carries its worktree`, facts: { [SWITCH_HANDOFF_FACT]: record.requestId } },
          within('switch_pending', (b) => `'${agentId}' asked to switch into it (SWITCH_REQUEST, BOUND_HOME → SWITCH_PENDING; HITL WORKTREE_OVERRIDE ${b.switch?.invocationId ?? ''})`));
      } catch (err) {
        undo();
        const done = acceptedMeanwhile();
        if (done) return done;
        throw refuse(`the worktree state machine refused the switch of '${agentId}' into it: ${(err as Error).message}`);
      }
      // The handoff changed while git ran (expired, rejected, rerouted): the switch asked for it is withdrawn (after a
      // crash here, by restore: its invocation names the handoff, which does not wait for it).
      if (!committed && switched.switch) this.withdrawSwitch(switched.switch.invocationId, record.requestId, 'it was no longer acceptable', ctx);
      // A switch decided as it was asked (a policy rule) is followed at once.
      if (committed) this.followSwitch(agentId);
    } else {
      throw refuse(`'${agentId}' is ${binding.state} in repository '${binding.repoId}': the worktree state machine (RFC §16.2) carries a worktree only into an UNBOUND agent (BIND) or one BOUND_HOME in the same repository (SWITCH_REQUEST)`);
    }
    if (!committed) {
      const done = acceptedMeanwhile();
      if (done) return done;
      const now = this.open.get(record.requestId) ?? this.deps.store.handoffs.get(record.requestId);
      throw precondition(`handoff '${record.requestId}' changed while the worktree was carried (now ${now?.state ?? 'gone'}${now?.toAgent && now.toAgent !== agentId ? `, offered to '${now.toAgent}'` : ''}); it was not accepted`);
    }
    return this.full(committed);
  }

  /** Inside a transaction: PENDING → ACCEPTED with its event and the requester's notice. */
  private commitAccept(record: OpenRecord, by: string, kind: 'agent' | 'operator', speaker: Speaker, ctx: CallContext,
    worktree: Pick<HandoffWorktree, 'outcome' | 'detail' | 'invocationId'> | null): void {
    const now = this.deps.clock.now();
    const attempt = currentAttempt(record);
    if (attempt) {
      attempt.outcome = 'accepted';
      attempt.endedAt = now;
    }
    record.state = 'ACCEPTED';
    record.acceptedBy = by;
    record.awaitingOperator = false;
    record.expiresAt = null;
    record.updatedAt = now;
    if (record.worktree) Object.assign(record.worktree, worktree ?? { outcome: 'not_applicable', detail: `accepted by ${by}: no agent to bind`, invocationId: '' });
    this.deps.store.handoffs.put(record);
    const notice = this.notifyParty(record, record.fromAgent, 'accepted', {}, ctx);
    this.record(record, by, 'handoff.accepted', {
      accepted_by: by, by_operator: kind === 'operator', attempt: record.attempts.length, waited_ms: now - (attempt?.at ?? record.requestedAt),
      worktree: record.worktree ? { repo_id: record.worktree.repoId, worktree_id: record.worktree.worktreeId, outcome: record.worktree.outcome, detail: record.worktree.detail, invocation_id: record.worktree.invocationId || undefined } : undefined,
      principal: ctx.principal, speaker: speakerName(speaker), requester_notice: notice,
    });
  }

  // ---------------------------------------------------------------- RejectHandoff

  /**
   * RejectHandoff: only the current target; reason, code and retry_after_ms kept; a redirect_to_agent_id that can take it
   * is the next target; else the next candidate (rerouting allowed), the operator (option), or the handoff ends REJECTED.
   */
  reject(input: HandoffRejection, speaker: Speaker, ctx: CallContext): HandoffRecord {
    const requestId = identifier('request_id', input.requestId, LIMITS.request_id, true);
    const agentId = identifier('accepting_agent', input.agentId, LIMITS.agent_id, true);
    if (!mayActAs(speaker, agentId)) throw denied(`${speakerName(speaker)} may not answer as '${agentId}'`);
    const reason = text('rejection_reason', input.reason, LIMITS.rejection_reason);
    const code = identifier('rejection_code', input.code === 'ERROR_CODE_UNSPECIFIED' ? '' : input.code, 64, false);
    const retryAfterMs = nonNegative('retry_after_ms', input.retryAfterMs);
    const redirectTo = identifier('redirect_to_agent_id', input.redirectTo, LIMITS.agent_id, false);
    this.catchUp(requestId);
    const record = this.open.get(requestId) ?? this.deps.store.handoffs.get(requestId);
    if (!record) throw fail('not_found', 'NOT_FOUND', `no handoff '${requestId}'`);
    // A retry of this agent's rejection (its answer was lost; the handoff may have moved on since): nothing changes.
    if (record.attempts.some((a) => a.agentId === agentId && (a.outcome === 'rejected' || a.outcome === 'redirected'))) return this.full(record);
    if (!this.knows(record, speaker)) throw denied(`handoff '${requestId}' is not offered to '${agentId}'`);
    if (record.state !== 'PENDING') throw precondition(`handoff '${requestId}' is ${record.state}: it can no longer be rejected`);
    if (record.awaitingOperator) throw precondition(`handoff '${requestId}' waits for the operator; an agent may not reject it now`);
    if (record.toAgent !== agentId) throw denied(`only the current target '${record.toAgent}' may reject handoff '${requestId}'; '${agentId}' is not`);
    const open = this.open.get(requestId)!;
    const hctx: CallContext = { ...ctx, correlationId: open.correlationId };
    return this.full(this.change(open, (draft) => {
      const now = this.deps.clock.now();
      const attempt = currentAttempt(draft)!;
      attempt.outcome = 'rejected';
      attempt.reason = reason;
      attempt.code = code;
      attempt.endedAt = now;
      if (retryAfterMs > 0) attempt.retryAfterMs = retryAfterMs;
      if (redirectTo !== '') attempt.redirectTo = redirectTo;
      draft.rejectionReason = reason;
      draft.rejectionCode = code;
      this.next(draft, 'rejected', agentId, hctx, { rejected_by: agentId, rejection_reason: reason, rejection_code: code, retry_after_ms: retryAfterMs || undefined, redirect_to: redirectTo || undefined }, redirectTo);
    }));
  }

  // ---------------------------------------------------------------- moving on: the next target, the operator, or the end

  /**
   * Inside a transaction, after the current target rejected, its window passed or it left, or its accepting agent left:
   * a redirect that can take it, else the best capable agent not tried (rerouting on, the delegation policy allowing it,
   * attempts left), else the operator (option; once), else the end (REJECTED); a target whose window passed or that
   * left, without a successor, changes nothing (answers false).
   */
  private next(record: OpenRecord, trigger: Trigger, actor: string, ctx: CallContext, details: Record<string, unknown>, redirectTo = ''): boolean {
    const now = this.deps.clock.now();
    const policy = record.delegationPolicy;
    const tried = new Set([record.fromAgent, ...record.attempts.map((a) => a.agentId)]);
    const redirects = record.attempts.filter((a) => a.via === 'redirect').length;
    const deadline = this.deadlineOf(record.budget, record.requestedAt);
    const notes: string[] = [];
    let mayReroute = true;
    const waitLeft = (record.expiresAt === null || record.expiresAt > now) && (deadline === null || deadline > now);
    if (record.expiresAt !== null && record.expiresAt <= now) { mayReroute = false; notes.push(`the requester's wait ended at ${isoUtc(record.expiresAt)}`); }
    if (policy && !policy.allowSpilloverRouting) { mayReroute = false; notes.push('delegation_policy.allow_spillover_routing is false'); }
    if (record.attempts.length >= MAX_ATTEMPTS) { mayReroute = false; notes.push(`${MAX_ATTEMPTS} targets tried`); }
    if (deadline !== null && deadline <= now) { mayReroute = false; notes.push(`the budget's deadline ${isoUtc(deadline)} passed`); }
    let next: { agentId: string; via: 'redirect' | 'capability' } | undefined;
    if (mayReroute && redirectTo !== '') {
      const why = policy && policy.maxRedirects > 0 && redirects >= policy.maxRedirects
        ? `delegation_policy.max_redirects ${policy.maxRedirects} reached`
        : this.redirectRefusal(record, redirectTo, tried);
      if (why === undefined) next = { agentId: redirectTo, via: 'redirect' };
      else notes.push(`redirect to '${redirectTo}' not followed: ${why}`);
    }
    if (!next && mayReroute && this.options.reroute) {
      const best = this.candidates(record.capabilitiesRequired, tried)[0];
      if (best) next = { agentId: best.agentId, via: 'capability' };
      else notes.push(this.noRoute(record.capabilitiesRequired, record.fromAgent, tried));
    } else if (!next && mayReroute) notes.push('rerouting is off (sw4rm.handoffs.reroute)');
    const previous = record.attempts[record.attempts.length - 1];
    if (next) {
      if (previous?.outcome === 'rejected' && next.via === 'redirect') previous.outcome = 'redirected';
      record.attempts.push({ agentId: next.agentId, at: now, outcome: '', reason: '', code: '', endedAt: null, via: next.via });
      record.toAgent = next.agentId;
      record.updatedAt = now;
      this.deps.store.handoffs.put(record);
      const targetNotice = this.notifyTarget(record, ctx);
      const requesterNotice = this.notifyParty(record, record.fromAgent, 'rerouted', { previous_agent: previous?.agentId ?? '', previous_outcome: trigger }, ctx);
      this.record(record, actor, 'handoff.rerouted', {
        ...details, trigger, from_target: previous?.agentId ?? '', to_agent: next.agentId, via: next.via, attempt: record.attempts.length,
        expires_at: isoUtc(record.expiresAt!), answer_by: isoUtc(this.answerBy(record)!), notes: notes.length ? notes : undefined, notification: targetNotice, requester_notice: requesterNotice,
      }, targetNotice.sent ? 'INFO' : 'WARN');
      return true;
    }
    // A target whose answer window passed keeps the offer while the wait lasts (it may still answer).
    if (trigger === 'expired') return false;
    if (this.options.routeToOperator && !record.awaitingOperator && waitLeft) {
      record.toAgent = '';
      record.awaitingOperator = true;
      record.updatedAt = now;
      this.deps.store.handoffs.put(record);
      const notice = this.notifyParty(record, record.fromAgent, 'awaiting_operator', { previous_agent: previous?.agentId ?? '', previous_outcome: trigger }, ctx);
      this.record(record, actor, 'handoff.awaiting_operator', {
        ...details, trigger, from_target: previous?.agentId ?? '', expires_at: isoUtc(record.expiresAt!), notes, requester_notice: notice,
      }, 'WARN');
      return true;
    }
    // Nobody else can take it: it stays offered to the agent that left (found by GetPendingHandoffs if it comes back) until it expires.
    if (trigger === 'left') return false;
    const nobody = notes.length ? `; not offered to anyone else: ${notes.join('; ')}` : '';
    const why = trigger === 'acceptor_left'
      ? `the accepting agent '${previous?.agentId ?? ''}' ${previous?.reason ?? 'left'}${nobody}`
      : `rejected by '${previous?.agentId ?? ''}'${nobody}`;
    if (trigger === 'acceptor_left') {
      record.rejectionReason = why.slice(0, LIMITS.rejection_reason);
      record.rejectionCode = 'AGENT_UNAVAILABLE';
    }
    this.end(record, 'REJECTED', actor, why, ctx, { ...details, trigger, from_target: previous?.agentId ?? '', notes: notes.length ? notes : undefined });
    return true;
  }

  /** Why a redirect target cannot take the handoff, or undefined when it can. */
  private redirectRefusal(record: OpenRecord, agentId: string, tried: ReadonlySet<string>): string | undefined {
    if (tried.has(agentId)) return agentId === record.fromAgent ? 'it is the requester' : 'it was tried already';
    const agent: AgentRecord | undefined = this.deps.agents.get(agentId);
    if (!agent) return 'not a registered agent';
    const missing = missingCapabilities(agent, record.capabilitiesRequired);
    if (missing.length > 0) return `it lacks ${missing.join(', ')}`;
    const down = unavailability(agent);
    if (down) return down;
    const cap = agent.descriptor.maxConcurrentDelegations;
    if (cap > 0 && this.handoffLoad(agentId) >= cap) return `it is at its max_concurrent_delegations (${cap})`;
    const full = this.fullUp(agentId);
    return full === undefined ? undefined : `it has ${full}`;
  }

  /** Inside a transaction: the handoff ends (REJECTED, EXPIRED, CANCELLED) with its event and the requester's notice. */
  private end(record: OpenRecord, state: Exclude<Ended, 'COMPLETED'>, actor: string, why: string, ctx: CallContext, details: Record<string, unknown>,
    extraNotices: readonly string[] = [], notice: Record<string, unknown> = {}): void {
    const now = this.deps.clock.now();
    record.state = state;
    record.expiresAt = null;
    record.updatedAt = now;
    record.endedAt = now;
    if (state !== 'REJECTED') record.endReason = why.slice(0, 4096);
    this.deps.store.handoffs.put(record);
    const event = state === 'REJECTED' ? 'rejected' : state === 'EXPIRED' ? 'expired' : 'cancelled';
    const notices: Record<string, unknown> = {};
    for (const party of new Set([record.fromAgent, ...extraNotices])) {
      if (party !== '' && !party.startsWith('operator:')) notices[party] = this.notifyParty(record, party, event, { reason: why, ...notice }, ctx);
    }
    this.record(record, actor, `handoff.${event}`, { ...details, reason: why, attempts: record.attempts.length, notices }, state === 'CANCELLED' ? 'INFO' : 'WARN');
  }

  // ---------------------------------------------------------------- timeouts and agents leaving

  private armTimer(record: OpenRecord): void {
    this.clearTimer(record.requestId);
    const due = this.answerBy(record);
    if (this.disposed || due === null) return;
    const requestId = record.requestId;
    this.timers.set(requestId, this.deps.clock.setTimer(Math.max(0, due - this.deps.clock.now()), () => {
      this.timers.delete(requestId);
      this.timeUp(requestId);
    }));
  }

  /** A timer fired: the timeout decided; when its transaction fails (rolled back: memory is untouched) it is tried again a moment later. */
  private timeUp(requestId: string): void {
    if (this.disposed) return;
    try {
      this.expire(requestId);
    } catch (err) {
      this.deps.log.internalError(ACTOR, this.open.get(requestId)?.correlationId ?? requestId, err, { during: 'timeout', request_id: requestId, retry_in_ms: EXPIRY_RETRY_MS });
      if (this.disposed || !this.open.has(requestId)) return;
      this.clearTimer(requestId);
      this.timers.set(requestId, this.deps.clock.setTimer(EXPIRY_RETRY_MS, () => {
        this.timers.delete(requestId);
        this.timeUp(requestId);
      }));
    }
  }

  private clearTimer(requestId: string): void {
    this.timers.get(requestId)?.dispose();
    this.timers.delete(requestId);
  }

  /**
   * The handoff's timer fired. The requester's wait ended: EXPIRED. Only the current target's answer window passed: the
   * next candidate, or — nobody else — the target keeps it until the wait ends (its attempt's windowEndedAt). Early: re-armed.
   */
  private expire(requestId: string): void {
    const record = this.open.get(requestId);
    const due = record ? this.answerBy(record) : null;
    if (!record || due === null || record.expiresAt === null) return;
    const now = this.deps.clock.now();
    if (due > now) {
      this.armTimer(record);
      return;
    }
    const ctx: CallContext = { correlationId: record.correlationId };
    const expireAttempt = (draft: OpenRecord) => {
      const attempt = currentAttempt(draft);
      if (attempt) {
        attempt.outcome = 'expired';
        attempt.endedAt = now;
      }
      return attempt;
    };
    if (record.expiresAt <= now) {
      this.change(record, (draft) => {
        const attempt = expireAttempt(draft);
        const who = draft.awaitingOperator ? 'the operator' : `'${attempt?.agentId ?? ''}'`;
        const deadline = this.deadlineOf(draft.budget, draft.requestedAt);
        const cut = deadline !== null && deadline <= now ? `; the budget's deadline ${isoUtc(deadline)} passed` : '';
        this.end(draft, 'EXPIRED', ACTOR, `${who} did not answer in time: the requester's wait of ${draft.timeoutMs} ms ended at ${isoUtc(record.expiresAt!)}${cut}`, ctx,
          { trigger: 'expired', waited_for: draft.awaitingOperator ? 'operator' : attempt?.agentId ?? '', timeout_ms: draft.timeoutMs });
      });
      return;
    }
    // The target's answer window passed (the wait goes on).
    const draft = draftOf(record);
    this.deps.store.transaction(() => {
      const attempt = expireAttempt(draft)!;
      const details = { timed_out: attempt.agentId, answer_window_ms: this.options.answerWindowMs };
      if (this.next(draft, 'expired', ACTOR, ctx, details)) return;
      attempt.outcome = '';
      attempt.endedAt = null;
      attempt.windowEndedAt = now;
      draft.updatedAt = now;
      this.deps.store.handoffs.put(draft);
      this.record(draft, ACTOR, 'handoff.answer_window_ended', {
        ...details, to_agent: draft.toAgent, keeps_it_until: isoUtc(draft.expiresAt!),
        why: 'no other agent can be offered it now; the target may still answer',
      }, 'WARN');
    });
    this.install(draft);
  }

  /** An agent deregistered or went FAILED: the handoffs offered to it move on; those it had accepted go back to PENDING. */
  private onAgentChange(change: RegistryChange): void {
    let agentId: string;
    let why: string;
    if (change.kind === 'left') {
      agentId = change.agentId;
      why = `left (deregistered: ${change.reason})`;
    } else if (change.kind === 'state' && change.agent.state === 'FAILED_STATE') {
      agentId = change.agent.descriptor.agentId;
      why = 'failed (lifecycle state FAILED)';
    } else {
      return;
    }
    for (const record of [...this.open.values()]) {
      if (record.state === 'ACCEPTED' && record.acceptedBy === agentId) {
        this.safely('acceptor_left', () => this.acceptorLeft(record, why));
        continue;
      }
      if (record.state !== 'PENDING' || record.awaitingOperator || record.toAgent !== agentId) continue;
      const ctx: CallContext = { correlationId: record.correlationId };
      const draft = draftOf(record);
      this.safely('target_left', () => {
        const moved = this.deps.store.transaction(() => {
          const attempt = currentAttempt(draft)!;
          attempt.outcome = 'left';
          attempt.reason = why.slice(0, 500);
          attempt.endedAt = this.deps.clock.now();
          return this.next(draft, 'left', ACTOR, ctx, { left: agentId, left_reason: why.slice(0, 500) });
        });
        // Nobody else could take it: nothing changed (the draft is dropped), the attempt stays the current one (the agent may come back for it).
        if (moved) this.install(draft);
      });
    }
  }

  /** Why the agent that accepted `record` can no longer carry the work (not registered, or FAILED), or undefined. */
  private acceptorGone(record: HandoffRecord): string | undefined {
    if (record.state !== 'ACCEPTED' || record.acceptedBy === '' || record.acceptedBy.startsWith('operator:')) return undefined;
    const agent = this.deps.agents.get(record.acceptedBy);
    if (!agent) return 'left (it is not registered)';
    if (agent.state === 'FAILED_STATE') return 'failed (lifecycle state FAILED)';
    return undefined;
  }

  /**
   * The accepting agent left (deregistered) or failed: the handoff goes back to PENDING with a new wait (`timeout` from
   * now) and is offered to the next candidate like after a rejection (its attempt ends `left`); the origin is told.
   * Nobody else: the operator (option), else REJECTED (AGENT_UNAVAILABLE).
   */
  private acceptorLeft(record: OpenRecord, why: string): void {
    const ctx: CallContext = { correlationId: record.correlationId };
    const acceptor = record.acceptedBy;
    const pendingSwitch = record.worktree?.outcome === 'switch_pending' ? record.worktree.invocationId : '';
    this.change(record, (draft) => {
      const now = this.deps.clock.now();
      // The next acceptor is carried into the worktree afresh; the departed one's switch is withdrawn (below).
      if (draft.worktree) Object.assign(draft.worktree, { outcome: '', detail: '', invocationId: '' });
      const accepted = [...draft.attempts].reverse().find((a) => a.outcome === 'accepted' && a.agentId === acceptor);
      if (accepted) {
        accepted.outcome = 'left';
        accepted.reason = why.slice(0, 500);
        accepted.endedAt = now;
      }
      draft.state = 'PENDING';
      draft.acceptedBy = '';
      draft.expiresAt = this.expiryOf(draft, now);
      draft.updatedAt = now;
      this.next(draft, 'acceptor_left', ACTOR, ctx, { acceptor_left: acceptor, left_reason: why.slice(0, 500), withdrawn_switch: pendingSwitch || undefined });
    });
    if (pendingSwitch) this.withdrawSwitch(pendingSwitch, record.requestId, `its accepting agent '${acceptor}' ${why}`, ctx);
  }

  // ---------------------------------------------------------------- a carried worktree's switch

  /**
   * The binding of `agentId` changed: an ACCEPTED handoff it accepted whose carried worktree's switch was pending
   * follows the decision — `switched` (BOUND_NON_HOME in that worktree) or `switch_refused` (denied, cancelled, timed
   * out: back home) — in one transaction with its event, and the origin is told (`handoff_status` event `worktree`).
   */
  private followSwitch(agentId: string): void {
    for (const record of [...this.open.values()]) {
      const carry = record.worktree;
      if (record.state !== 'ACCEPTED' || record.acceptedBy !== agentId || !carry || carry.outcome !== 'switch_pending') continue;
      const b = this.deps.worktrees.status(agentId);
      if (b.state === 'SWITCH_PENDING' && b.switch?.invocationId === carry.invocationId) continue;
      const switched = b.state === 'BOUND_NON_HOME' && b.repoId === carry.repoId && b.worktreeId === carry.worktreeId;
      const decided = this.deps.invocation(carry.invocationId);
      const ctx: CallContext = { correlationId: record.correlationId };
      this.change(record, (draft) => {
        const w = draft.worktree!;
        w.outcome = switched ? 'switched' : 'switch_refused';
        w.detail = switched
          ? `'${agentId}' works in it (the switch was granted${b.nonHomeUntil !== null ? ` until ${isoUtc(b.nonHomeUntil)}` : ''})`
          : `the switch into it was not granted (HITL WORKTREE_OVERRIDE ${carry.invocationId} ${decided?.state ?? 'gone'}); '${agentId}' is ${b.state}${b.worktreeId ? ` in '${b.worktreeId}'` : ''}`;
        draft.updatedAt = this.deps.clock.now();
        this.deps.store.handoffs.put(draft);
        const worktree = { repo_id: w.repoId, worktree_id: w.worktreeId, outcome: w.outcome, detail: w.detail, invocation_id: w.invocationId };
        const notice = this.notifyParty(draft, draft.fromAgent, 'worktree', { worktree }, ctx);
        this.record(draft, ACTOR, switched ? 'handoff.worktree_switched' : 'handoff.worktree_switch_refused', {
          accepted_by: agentId, worktree, binding_state: b.state, invocation_state: decided?.state, requester_notice: notice,
        }, switched ? 'INFO' : 'WARN');
      });
    }
  }

  /** Withdraws a carried worktree's pending switch the handoff no longer waits for (HITL cancel; the binding goes home). */
  private withdrawSwitch(invocationId: string, requestId: string, why: string, ctx: CallContext): void {
    try {
      if (this.deps.invocation(invocationId)?.state !== 'pending') return;
      this.deps.cancelInvocation(invocationId, ACTOR, `handoff ${requestId} no longer waits for this switch: ${why}`, ctx);
    } catch (err) {
      this.deps.log.internalError(ACTOR, ctx.correlationId, err, { request_id: requestId, invocation_id: invocationId, during: 'withdraw switch' });
    }
  }

  /**
   * At start: a switch a handoff asked for (its invocation names the handoff) that the handoff does not wait for (any
   * more: cancelled, rerouted, its acceptor gone — the process died before the withdrawal) is withdrawn; one decided while
   * nobody listened is followed. Bounded by the bindings (one per agent). Answers how many were withdrawn.
   */
  private reconcileSwitches(): number {
    let withdrawn = 0;
    for (const b of this.deps.worktrees.list()) {
      if (b.state !== 'SWITCH_PENDING' || !b.switch) continue;
      const invocation = this.deps.invocation(b.switch.invocationId);
      const requestId = invocation?.facts[SWITCH_HANDOFF_FACT];
      if (invocation?.state !== 'pending' || typeof requestId !== 'string') continue;
      const r = this.open.get(requestId) ?? this.deps.store.handoffs.get(requestId);
      const waits = r !== undefined && (r.state === 'ACCEPTED' || r.state === 'COMPLETED') && r.acceptedBy === b.agentId
        && r.worktree?.outcome === 'switch_pending' && r.worktree.invocationId === b.switch.invocationId;
      if (waits) continue;
      withdrawn++;
      this.withdrawSwitch(b.switch.invocationId, requestId, `found at start: it is ${r?.state ?? 'gone'}`, { correlationId: r?.correlationId ?? requestId });
    }
    for (const r of [...this.open.values()]) if (r.state === 'ACCEPTED' && r.worktree?.outcome === 'switch_pending') this.safely('restore', () => this.followSwitch(r.acceptedBy));
    return withdrawn;
  }

  // ---------------------------------------------------------------- CompleteHandoff

  /**
   * CompleteHandoff(COMPLETED): a party (the requester or the accepting agent) or the operator; ACCEPTED only. The work
   * is transferred: the task handed off (if any) is closed (Scheduler.handOff), and from now on the router refuses the
   * requester's sends with the handoff's correlation id. Any other status is refused: CancelDelegation withdraws a handoff.
   */
  complete(requestId: string, status: string, speaker: Speaker, ctx: CallContext): { readonly success: boolean; readonly message: string } {
    identifier('request_id', requestId, LIMITS.request_id, true);
    if (status !== 'COMPLETED') {
      throw invalid(`status must be COMPLETED, not ${status || 'HANDOFF_STATUS_UNSPECIFIED'}: CompleteHandoff records that the work was transferred; to withdraw a handoff call CancelDelegation, to decline one RejectHandoff`);
    }
    const record = this.open.get(requestId) ?? this.deps.store.handoffs.get(requestId);
    if (!record) throw fail('not_found', 'NOT_FOUND', `no handoff '${requestId}'`);
    const party = this.partyOf(record, speaker);
    if (party === undefined) {
      throw denied(`only the parties of handoff '${requestId}' (its origin and the agent that accepted it) or the operator may complete it; ${speakerName(speaker)} is neither`);
    }
    if (record.state === 'COMPLETED') return { success: true, message: `handoff '${requestId}' was already completed by ${record.completedBy}` };
    if (record.state !== 'ACCEPTED') throw precondition(`handoff '${requestId}' is ${record.state}: only an ACCEPTED handoff can be completed`);
    const gone = this.acceptorGone(record);
    if (gone !== undefined) {
      // Its departure is recorded now (it goes back to PENDING) if that could not be done when it happened.
      this.safely('acceptor_left', () => this.acceptorLeft(this.open.get(requestId)!, gone));
      throw precondition(`handoff '${requestId}' cannot be completed: the accepting agent '${record.acceptedBy}' is not registered or failed (${gone}); it goes back to PENDING for another agent`);
    }
    const open = this.open.get(requestId)!;
    const hctx: CallContext = { ...ctx, correlationId: open.correlationId };
    let closing = false;
    const done = this.change(open, (draft) => {
      const now = this.deps.clock.now();
      draft.state = 'COMPLETED';
      draft.completedBy = party;
      draft.updatedAt = now;
      draft.endedAt = now;
      const accepted = draft.attempts.find((a) => a.outcome === 'accepted');
      if (accepted) accepted.outcome = 'completed';
      this.deps.store.handoffs.put(draft);
      const notices: Record<string, unknown> = {};
      for (const to of new Set([draft.fromAgent, draft.acceptedBy])) {
        if (!to.startsWith('operator:')) notices[to] = this.notifyParty(draft, to, 'completed', { completed_by: party }, hctx);
      }
      const task = draft.taskId === '' ? undefined : this.deps.tasks.task(draft.taskId);
      closing = task !== undefined && !TERMINAL_TASK_STATES.has(task.state);
      this.record(draft, party, 'handoff.completed', {
        completed_by: party, accepted_by: draft.acceptedBy, task_id: draft.taskId || undefined,
        task_closed: draft.taskId === '' ? undefined : closing, task_state: closing ? 'CANCELLED' : task?.state,
        transferred: { from_agent: draft.fromAgent, correlation_id: draft.correlationId }, principal: ctx.principal, notices,
      });
      // Last: the scheduler changes its memory as it closes the task (nothing of ours can fail after it).
      if (closing) closing = this.deps.tasks.handOff(draft.taskId, `handed off to ${draft.acceptedBy} by handoff ${draft.requestId}`, hctx) !== undefined;
    });
    this.addTransfer({ requestId, fromAgent: done.fromAgent, correlationId: done.correlationId, acceptedBy: done.acceptedBy });
    const task = done.taskId === '' ? '' : closing ? `; task '${done.taskId}' closed` : `; task '${done.taskId}' had ended already`;
    return { success: true, message: `handoff '${requestId}' completed: '${done.acceptedBy}' owns the work (correlation_id '${done.correlationId}')${task}` };
  }

  /** Which party of `record` the agent `speaker` is for CancelDelegation: its origin or the agent that accepted it (not an agent only offered it). */
  private cancellerOf(record: HandoffRecord, speaker: Speaker): string | undefined {
    if (speaker.kind !== 'agent') return undefined;
    return [record.fromAgent, record.acceptedBy].find((id) => id !== '' && !id.startsWith('operator:') && speaker.mayActAs(id));
  }

  /**
   * Whether a refusal may tell `speaker` about `record` (its state, parties, target): the operator and the coordinator,
   * its origin, an agent it was offered to, the agent that accepted it. Others learn only that the call was refused.
   */
  private knows(record: HandoffRecord, speaker: Speaker): boolean {
    if (speaker.kind !== 'agent') return true;
    return [record.fromAgent, record.acceptedBy, ...record.attempts.map((a) => a.agentId)]
      .some((id) => id !== '' && !id.startsWith('operator:') && speaker.mayActAs(id));
  }

  /** Who `speaker` is among the parties (the accepting agent first), `operator:<label>` for the operator, or undefined. */
  private partyOf(record: HandoffRecord, speaker: Speaker): string | undefined {
    if (speaker.kind === 'operator') return `operator:${speaker.label}`;
    if (speaker.kind === 'coordinator') return 'coordinator';
    if (record.acceptedBy !== '' && !record.acceptedBy.startsWith('operator:') && speaker.mayActAs(record.acceptedBy)) return record.acceptedBy;
    if (speaker.mayActAs(record.fromAgent)) return record.fromAgent;
    return undefined;
  }

  // ---------------------------------------------------------------- CancelDelegation

  /**
   * CancelDelegation: the open handoffs whose correlation id (or request id) is `correlationId` and that the caller is a
   * party of (its origin or the agent that accepted it; the operator: all of them), and, transitively, the open
   * handoffs made under them (sw4rm-parent-request-id), end CANCELLED; every party is told (with grace_period_ms). An
   * agent that is a party of none of the matches is refused (another requester's handoffs with the same correlation id
   * neither block nor are cancelled). acknowledged=false when nothing open matched.
   */
  cancelDelegation(correlationId: string, reason: string, gracePeriodMs: number, speaker: Speaker, ctx: CallContext): { readonly acknowledged: boolean; readonly message: string } {
    const key = identifier('correlation_id', correlationId, LIMITS.correlation_id, true);
    const why = text('reason', reason, LIMITS.cancel_reason).trim();
    const grace = nonNegative('grace_period_ms', gracePeriodMs);
    if (grace > MAX_GRACE_PERIOD_MS) throw invalid(`grace_period_ms is ${grace}; at most ${MAX_GRACE_PERIOD_MS}`);
    const matches = [...this.open.values()].filter((r) => r.correlationId === key || r.requestId === key);
    if (matches.length === 0) {
      const known = this.deps.store.handoffs.get(key);
      return { acknowledged: false, message: known && this.knows(known, speaker) ? `handoff '${key}' is ${known.state}: nothing to cancel` : `no open handoff has correlation id or request id '${key}'` };
    }
    const roots = speaker.kind === 'agent' ? matches.filter((r) => this.cancellerOf(r, speaker) !== undefined) : matches;
    if (roots.length === 0) {
      throw denied(`only the origin or the accepting agent of a delegation, or the operator, may cancel it; ${speakerName(speaker)} is neither for any open handoff with correlation id or request id '${key}'`);
    }
    const cancel = delegationTree(roots, this.open.values());
    const by = speaker.kind === 'operator' ? `operator:${speaker.label}` : speaker.kind === 'agent' ? this.cancellerOf(roots[0], speaker)! : 'coordinator';
    const drafts = cancel.map(({ record, parent }) => ({ draft: draftOf(record), parent }));
    const withdraw: Array<{ invocationId: string; requestId: string; correlationId: string }> = [];
    this.deps.store.transaction(() => {
      for (const { draft, parent } of drafts) {
        const attempt = currentAttempt(draft);
        if (attempt) {
          attempt.outcome = 'cancelled';
          attempt.endedAt = this.deps.clock.now();
        }
        if (draft.worktree?.outcome === 'switch_pending') {
          withdraw.push({ invocationId: draft.worktree.invocationId, requestId: draft.requestId, correlationId: draft.correlationId });
          Object.assign(draft.worktree, { outcome: 'withdrawn', detail: `the switch into it (HITL WORKTREE_OVERRIDE ${draft.worktree.invocationId}) was withdrawn: the handoff was cancelled` });
        }
        const text = `cancelled by ${by}${parent ? ` (cascade: its parent '${parent}' was cancelled)` : ''}${why ? `: ${why}` : ''}`;
        this.end(draft, 'CANCELLED', by, text, { ...ctx, correlationId: draft.correlationId },
          { cancelled_by: by, delegation: key, cascade_of: parent || undefined, grace_period_ms: grace, principal: ctx.principal },
          [draft.toAgent, draft.acceptedBy], { grace_period_ms: grace, delegation: key });
      }
    });
    for (const { draft } of drafts) this.install(draft);
    for (const w of withdraw) this.withdrawSwitch(w.invocationId, w.requestId, 'it was cancelled', { ...ctx, correlationId: w.correlationId });
    return { acknowledged: true, message: `cancelled ${cancel.length} handoff${cancel.length === 1 ? '' : 's'}: ${cancel.map((c) => c.record.requestId).join(', ').slice(0, 2000)}` };
  }

  // ---------------------------------------------------------------- the operator (CoordinatorApi)

  /** The operator takes a handoff that waits for a person: ACCEPTED by `operator:<by>`. */
  acceptAsOperator(requestId: string, by: string, ctx: CallContext): HandoffRecord {
    const record = this.awaitingOperator(requestId);
    const speaker: Speaker = { kind: 'operator', label: by };
    return this.full(this.change(record, (draft) => this.commitAccept(draft, `operator:${by}`, 'operator', speaker, { ...ctx, correlationId: record.correlationId }, null)));
  }

  /** The operator declines a handoff that waits for a person: REJECTED with the reason (required). */
  rejectAsOperator(requestId: string, reason: string, by: string, ctx: CallContext): HandoffRecord {
    const why = text('reason', reason, LIMITS.cancel_reason).trim();
    if (why === '') throw invalid('a reason is required: the requester is told why');
    const record = this.awaitingOperator(requestId);
    return this.full(this.change(record, (draft) => {
      draft.rejectionReason = why;
      draft.rejectionCode = '';
      this.end(draft, 'REJECTED', `operator:${by}`, `rejected by the operator ${by}: ${why}`, { ...ctx, correlationId: draft.correlationId }, { rejected_by: `operator:${by}` });
    }));
  }

  private awaitingOperator(requestId: string): OpenRecord {
    this.catchUp(requestId);
    const record = this.open.get(requestId);
    if (!record) {
      const stored = this.deps.store.handoffs.get(requestId);
      if (!stored) throw fail('not_found', 'NOT_FOUND', `no handoff '${requestId}'`);
      throw precondition(`handoff '${requestId}' is ${stored.state}: it does not wait for a person`);
    }
    if (record.state !== 'PENDING' || !record.awaitingOperator) {
      throw precondition(`handoff '${requestId}' is ${record.state}${record.state === 'PENDING' ? `, offered to '${record.toAgent}'` : ''}: it does not wait for a person`);
    }
    return record;
  }

  // ---------------------------------------------------------------- restart and retention

  /** At start: open handoffs back in memory with their timers (a passed expiry decided now), the transferred work rebuilt. */
  restore(ctx: CallContext): void {
    const newest = this.deps.store.handoffs.listTransferred(this.options.maxTransfersInMemory + 1);
    this.beyondMemory = newest.length > this.options.maxTransfersInMemory;
    for (const entry of newest.slice(0, this.options.maxTransfersInMemory).reverse()) this.addTransfer(entry);
    const open = this.deps.store.handoffs.listOpen();
    for (const record of open) this.open.set(record.requestId, record);
    // Accepted by an agent that left or failed while the coordinator was stopped (or whose departure was not recorded).
    let returned = 0;
    for (const record of open) {
      const gone = this.acceptorGone(record);
      if (gone === undefined) continue;
      returned++;
      this.safely('restore', () => this.acceptorLeft(record, gone));
    }
    const withdrawn = this.reconcileSwitches();
    let expired = 0;
    for (const record of open) {
      const due = this.answerBy(record);
      if (due === null) continue;
      if (record.expiresAt! <= this.deps.clock.now()) expired++;
      if (due <= this.deps.clock.now()) this.timeUp(record.requestId);
      else this.armTimer(record);
    }
    if (open.length > 0 || this.transferred.size > 0 || withdrawn > 0) {
      this.deps.log.record({
        correlationId: ctx.correlationId, actor: ACTOR, eventType: 'handoff.restored',
        details: { open: open.length, pending: open.filter((r) => r.state === 'PENDING').length, expired_while_stopped: expired, acceptor_gone: returned, switches_withdrawn: withdrawn, transferred: this.transferred.size, transfers_beyond_memory: this.beyondMemory },
      });
    }
  }

  /** One bounded retention run (logged `handoff.pruned`); answers whether it left more. */
  pruneEnded(): boolean {
    if (this.disposed) return false;
    try {
      const before = this.deps.clock.now() - this.options.retentionDays * 86_400_000;
      const result = this.deps.store.transaction(() => {
        const pruned = this.deps.store.handoffs.pruneEnded(before, HANDOFF_RETENTION_BATCH);
        if (pruned.deleted > 0) {
          this.deps.log.record({
            correlationId: this.deps.ids.uuid(), actor: ACTOR, eventType: 'handoff.pruned',
            details: { handoffs: pruned.deleted, transfers_ended: pruned.transferred.length, ended_before: isoUtc(before), retention_days: this.options.retentionDays },
          });
        }
        return pruned;
      });
      for (const entry of result.transferred) this.dropTransfer(entry.requestId);
      return result.more;
    } catch (err) {
      this.deps.log.internalError(ACTOR, 'handoff-retention', err);
      return false;
    }
  }

  dispose(): void {
    this.disposed = true;
    this.pruning.dispose();
    for (const s of this.subscriptions.splice(0)) s.dispose();
    for (const timer of this.timers.values()) timer.dispose();
    this.timers.clear();
    this.changed.dispose();
  }

  // ---------------------------------------------------------------- internals

  private opened(record: HandoffRecord): void {
    const open = withoutContext(record);
    this.open.set(record.requestId, open);
    this.armTimer(open);
    this.changed.fire({ requestId: record.requestId, state: record.state });
  }

  /**
   * Changes `record` in one transaction through a copy (draftOf): the copy replaces the memory record only once the
   * transaction returned, so a throw inside it (rolled back) leaves memory as the store is. Answers the new record.
   */
  private change(record: OpenRecord, fn: (draft: OpenRecord) => void): OpenRecord {
    const draft = draftOf(record);
    this.deps.store.transaction(() => fn(draft));
    this.install(draft);
    return draft;
  }

  /** After a committed change: the record replaces the memory one; an ended handoff leaves memory, a pending one's timer follows its expiry. */
  private install(record: OpenRecord): void {
    if (TERMINAL_HANDOFF_STATES.has(record.state)) {
      this.open.delete(record.requestId);
      this.clearTimer(record.requestId);
    } else {
      this.open.set(record.requestId, withoutContext(record));
      this.armTimer(record);
    }
    this.changed.fire({ requestId: record.requestId, state: record.state });
  }

  /** Memory back to what the store holds for `requestId` (after a transaction that wrote it was rolled back), timers re-armed. */
  private reload(requestId: string): void {
    const stored = this.deps.store.handoffs.get(requestId);
    if (!stored || TERMINAL_HANDOFF_STATES.has(stored.state)) {
      this.open.delete(requestId);
      this.clearTimer(requestId);
    } else {
      this.open.set(requestId, withoutContext(stored));
      this.armTimer(stored);
    }
    this.changed.fire({ requestId, state: stored?.state ?? 'CANCELLED' });
  }

  /** A completed transfer into memory; beyond maxTransfersInMemory the oldest leaves it (and misses ask the store from then on). */
  private addTransfer(entry: TransferredEntry): void {
    const k = transferKey(entry.fromAgent, entry.correlationId);
    this.transferred.set(k, entry);
    this.transferKeys.delete(entry.requestId);
    this.transferKeys.set(entry.requestId, k);
    while (this.transferKeys.size > this.options.maxTransfersInMemory) {
      const oldest = this.transferKeys.keys().next().value!;
      this.dropTransfer(oldest);
      this.beyondMemory = true;
    }
  }

  private dropTransfer(requestId: string): void {
    const k = this.transferKeys.get(requestId);
    if (k !== undefined && this.transferred.get(k)?.requestId === requestId) this.transferred.delete(k);
    this.transferKeys.delete(requestId);
  }

  /** The stored record (with its context), or the memory one when the store has none (never: a committed change). */
  private full(record: HandoffRecord): HandoffRecord {
    return this.deps.store.handoffs.get(record.requestId) ?? record;
  }

  /** The target's `handoff_request` NOTIFICATION (README, "Handoffs"); its outcome goes into the transition's event. */
  private notifyTarget(record: HandoffRecord, ctx: CallContext): Record<string, unknown> & { sent: boolean } {
    const context = record.context.byteLength > 0 || record.contextBytes === 0 ? record.context : this.deps.store.handoffs.get(record.requestId)?.context ?? EMPTY;
    const payload = requestNotice(record, context, this.deps.clock.now(), this.answerBy(record));
    return this.send(record.toAgent, payload, record, ctx);
  }

  /** A party's `handoff_status` NOTIFICATION. */
  private notifyParty(record: HandoffRecord, to: string, event: string, extra: Record<string, unknown>, ctx: CallContext): Record<string, unknown> & { sent: boolean } {
    const attempt = record.attempts[record.attempts.length - 1];
    const payload = {
      type: HANDOFF_STATUS_NOTICE, event, request_id: record.requestId, status: record.state, awaiting_operator: record.awaitingOperator,
      from_agent: record.fromAgent, to_agent: record.toAgent, accepted_by: record.acceptedBy, correlation_id: record.correlationId,
      task_id: record.taskId, attempt: record.attempts.length, last_agent: attempt?.agentId ?? '', rejection_reason: record.rejectionReason,
      rejection_code: record.rejectionCode, retry_after_ms: attempt?.retryAfterMs ?? 0,
      expires_at: record.expiresAt === null ? null : isoUtc(record.expiresAt), at: isoUtc(this.deps.clock.now()), ...extra,
    };
    return this.send(to, fitNotice(payload), record, ctx);
  }

  private send(to: string, payload: Record<string, unknown>, record: HandoffRecord, ctx: CallContext): Record<string, unknown> & { sent: boolean } {
    const sent = this.deps.outbox.sendToAgent({
      to, messageType: 'NOTIFICATION', contentType: NOTICE_CONTENT_TYPE, correlationId: record.correlationId,
      payload: Buffer.from(JSON.stringify(payload), 'utf8'),
    }, ctx);
    return sent.accepted ? { to, sent: true, message_id: sent.messageId } : { to, sent: false, code: sent.code, reason: sent.reason.slice(0, 300) };
  }

  private record(record: HandoffRecord, actor: string, eventType: string, details: Record<string, unknown>, level: 'INFO' | 'WARN' = 'INFO'): void {
    this.deps.log.record({
      correlationId: record.correlationId, actor, eventType, level,
      details: { request_id: record.requestId, from_agent: record.fromAgent, state: record.state, ...details },
    });
  }

  private safely(during: string, fn: () => void): void {
    if (this.disposed) return;
    try {
      fn();
    } catch (err) {
      this.deps.log.internalError(ACTOR, 'handoffs', err, { during });
    }
  }
}

/** A worktree carry that the binding could not complete (its transaction is rolled back). */
class CarryFailed extends Error {}

function checkPolicy(p: HandoffDelegationPolicy): HandoffDelegationPolicy {
  for (const [field, value] of Object.entries(p)) if (typeof value === 'number') nonNegative(`delegation_policy.${field}`, value);
  return { ...p };
}

/** What makes two RequestHandoffs with one request_id the same request. */
function requestDigest(input: HandoffRequestInput): string {
  return createHash('sha256').update(JSON.stringify([
    input.fromAgent, input.toAgent, input.reason, createHash('sha256').update(input.context).digest('hex'), input.contextContentType,
    input.capabilitiesRequired, input.priority, input.timeoutMs, input.budget, input.delegationPolicy, input.taskId, input.correlationId,
    input.parentRequestId, input.carryWorktree,
  ])).digest('hex');
}

/**
 * The target's `handoff_request` payload (README, "Handoffs"). The context travels as UTF-8 text (JSON content types,
 * valid UTF-8) or base64, unless the payload would exceed the NOTIFICATION limit: then `context_omitted` is true and
 * GetPendingHandoffs has it.
 */
export function requestNotice(record: HandoffRecord, context: Buffer, now: number, answerBy: number | null): Record<string, unknown> {
  const base: Record<string, unknown> = {
    type: HANDOFF_REQUEST_NOTICE, request_id: record.requestId, from_agent: record.fromAgent, to_agent: record.toAgent, reason: record.reason,
    capabilities_required: record.capabilitiesRequired, priority: record.priority, attempt: record.attempts.length,
    answer_by: answerBy === null ? null : isoUtc(answerBy),
    expires_at: record.expiresAt === null ? null : isoUtc(record.expiresAt), timeout_ms: record.timeoutMs, correlation_id: record.correlationId,
    task_id: record.taskId, parent_request_id: record.parentRequestId, carry_worktree: record.worktree ? { repo_id: record.worktree.repoId, worktree_id: record.worktree.worktreeId } : null,
    budget: record.budget && {
      token_budget_remaining: record.budget.tokenBudgetRemaining, wall_time_remaining_ms: record.budget.wallTimeRemainingMs,
      deadline_epoch_ms: record.budget.deadlineEpochMs, current_depth: record.budget.currentDepth, max_delegation_depth: record.budget.maxDelegationDepth,
    },
    context_content_type: record.contextContentType, context_bytes: record.contextBytes, at: isoUtc(now),
  };
  const textual = contextKindOf(record.contextContentType) !== 'opaque' ? utf8(context) : undefined;
  const withContext = { ...base, context_encoding: textual !== undefined ? 'utf8' : 'base64', context: textual ?? context.toString('base64'), context_omitted: false };
  if (fits(withContext)) return withContext;
  return fitNotice({ ...base, context_encoding: null, context: null, context_omitted: true });
}

function utf8(bytes: Buffer): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

function fits(payload: Record<string, unknown>): boolean {
  return Buffer.byteLength(JSON.stringify(payload), 'utf8') <= PAYLOAD_LIMITS.NOTIFICATION;
}

/** A notice that would not fit the NOTIFICATION limit (long reasons, many escapes) has its texts cut. */
function fitNotice(payload: Record<string, unknown>): Record<string, unknown> {
  if (fits(payload)) return payload;
  const cut: Record<string, unknown> = { ...payload, texts_cut: true };
  for (const key of ['reason', 'rejection_reason']) if (typeof cut[key] === 'string') cut[key] = (cut[key] as string).slice(0, 500);
  return cut;
}

/**
 * CancelDelegation's cascade: `roots`, then, breadth first, every record of `open` made under one of them
 * (parentRequestId), transitively, each with the parent it was reached from ('' for a root). Reads `open` once (a
 * parent → children map), so a deep or wide delegation tree costs O(open handoffs).
 */
export function delegationTree(roots: readonly HandoffRecord[], open: Iterable<HandoffRecord>): Array<{ record: HandoffRecord; parent: string }> {
  const children = new Map<string, HandoffRecord[]>();
  for (const record of open) {
    if (record.parentRequestId === '') continue;
    const list = children.get(record.parentRequestId);
    if (list) list.push(record);
    else children.set(record.parentRequestId, [record]);
  }
  const tree: Array<{ record: HandoffRecord; parent: string }> = roots.map((record) => ({ record, parent: '' }));
  const seen = new Set(roots.map((r) => r.requestId));
  for (let i = 0; i < tree.length; i++) {
    const parent = tree[i].record.requestId;
    for (const child of children.get(parent) ?? []) {
      if (seen.has(child.requestId)) continue;
      seen.add(child.requestId);
      tree.push({ record: child, parent });
    }
  }
  return tree;
}
