import { isoUtc, type Clock } from '../clock';
import { Emitter, type Disposable, type Event } from '../events';
import type { IdSource } from '../ids';
import { Guard } from '../kernel/guard';
import type { EventLog } from '../log/eventLog';
import type { CallContext } from '../context';
import { schedulePruning } from '../retention';
import {
  HITL_ACTIONS,
  type AuditEntry,
  type AuditQuery,
  type DecisionOrigin,
  type HitlAction,
  type HitlDecision,
  type HitlInvocation,
  type HitlRepository,
  type HitlStorage,
  type InvocationOrigin,
  type InvocationRequest,
  type InvocationState,
  type DecisionInput,
  type HitlChange,
  type HitlInvocations,
  HitlStateError,
} from './model';
import { applyFallback, DEFAULT_HITL_POLICY, matchRule, type HitlPolicy } from './policy';
import { HitlRequestError, MAX_INVOCATION_BYTES } from './request';

export { HitlStateError, type DecisionInput, type HitlChange } from './model';

/** Settled invocations are looked at hourly; one run deletes at most this many (records are up to 256 KB). */
const SETTLED_RETENTION_INTERVAL_MS = 3_600_000;
const SETTLED_PRUNE_BATCH = 200;

/** Called inside the settling transaction, so the answer to the requester commits with the decision. */
export type Responder = (invocation: HitlInvocation) => void;

const MAX_RATIONALE = 4096;

/** Why a decision without a rationale is refused (shown to the operator as it is). */
export const RATIONALE_REQUIRED =
  'A rationale is required: say why you decide this (it is recorded in the audit trail and sent to the requester).';

/**
 * Human-in-the-loop (RFC §15): invocations, decisions, deadlines with fallback, auto rules, operator
 * presence and the audit trail. Every change is persisted with its audit record and log event in one
 * transaction; pending invocations survive a restart and their deadlines are re-armed.
 */
export class HitlService implements HitlInvocations {
  private readonly repo: HitlRepository;
  private readonly changed = new Emitter<HitlChange>();
  readonly onDidChange: Event<HitlChange> = this.changed.event;
  private readonly deadlineTimers = new Map<string, Disposable>();
  private readonly unavailableTimers = new Map<string, Disposable>();
  private readonly waiters = new Map<
    string,
    Array<{ resolve: (i: HitlInvocation) => void; reject: (e: Error) => void }>
  >();
  private readonly responders = new Map<InvocationOrigin['kind'], Responder>();
  private readonly operators = new Map<number, string>();
  private nextOperator = 1;
  private current: HitlPolicy;
  private disposed = false;
  /** Timer work never throws into the event loop: a fault is logged under a fresh correlation id; stopped on dispose. */
  private readonly guard = new Guard((_during, err) => this.log.internalError('hitl', this.ids.uuid(), err));
  private readonly retentionTimer: Disposable;

  constructor(
    private readonly store: HitlStorage,
    private readonly log: EventLog,
    private readonly clock: Clock,
    private readonly ids: IdSource,
    policy: HitlPolicy = DEFAULT_HITL_POLICY,
  ) {
    this.repo = store.hitl;
    this.current = policy;
    this.restore();
    this.retentionTimer = schedulePruning(this.clock, SETTLED_RETENTION_INTERVAL_MS, () => {
      let more = false;
      this.guard.run('retention', () => {
        more = this.pruneSettled(this.clock.now());
      });
      return more;
    });
  }

  get policy(): HitlPolicy {
    return this.current;
  }

  /** Replaces the policy. Rules and "pause" apply to invocations opened from now on. */
  setPolicy(policy: HitlPolicy, by = 'settings'): void {
    const before = this.current;
    this.current = policy;
    if (before.paused !== policy.paused) {
      this.log.record({
        correlationId: this.ids.uuid(),
        actor: by,
        eventType: policy.paused ? 'hitl.paused' : 'hitl.resumed',
        details: { paused: policy.paused },
      });
    }
  }

  /** Sends the decisions of invocations from `kind` back to their requesters (e.g. envelopes through the router). */
  registerResponder(kind: InvocationOrigin['kind'], responder: Responder): Disposable {
    this.responders.set(kind, responder);
    return { dispose: () => this.responders.delete(kind) };
  }

  // ---------------------------------------------------------------- operators (RFC §15.3, §15.4)

  /**
   * Declares a human operator present (the editor window, an operator console). While none is, every pending
   * invocation gets its fallback after `unavailableAfterMs` (at most 5 s).
   */
  attachOperator(name: string): Disposable {
    const handle = this.nextOperator++;
    const first = this.operators.size === 0;
    this.operators.set(handle, name);
    this.log.record({
      correlationId: this.ids.uuid(),
      actor: name,
      eventType: 'hitl.operator_attached',
      details: { operators: this.operators.size },
    });
    if (first) {
      for (const timer of this.unavailableTimers.values()) timer.dispose();
      this.unavailableTimers.clear();
    }
    return {
      dispose: () => {
        if (!this.operators.delete(handle) || this.disposed) return;
        this.log.record({
          correlationId: this.ids.uuid(),
          actor: name,
          eventType: 'hitl.operator_detached',
          details: { operators: this.operators.size },
        });
        if (this.operators.size === 0)
          for (const invocation of this.repo.list({ pendingOnly: true })) this.armUnavailable(invocation);
      },
    };
  }

  get operatorNames(): string[] {
    return [...new Set(this.operators.values())];
  }

  // ---------------------------------------------------------------- invocations

  /**
   * Opens an invocation (or re-attaches to the requester's own one with the same invocation_id). Auto rules
   * may decide it at once; otherwise it waits for a human, its deadline, or the no-operator fallback.
   */
  open(
    request: InvocationRequest,
    origin: InvocationOrigin,
    ctx: CallContext,
  ): { invocation: HitlInvocation; reattached: boolean } {
    const now = this.clock.now();
    if (request.invocationId !== undefined) {
      const existing = this.repo.get(request.invocationId);
      if (existing) {
        if (existing.requester !== request.requester) {
          throw new HitlRequestError(
            'PERMISSION_DENIED',
            `invocation_id '${request.invocationId}' belongs to another requester`,
          );
        }
        this.audit(existing, 'reattached', request.requester, false, { origin: origin.kind }, ctx);
        return { invocation: existing, reattached: true };
      }
    }
    const policy = this.current;
    const pendingOfRequester = this.repo
      .list({ pendingOnly: true })
      .filter((i) => i.requester === request.requester).length;
    if (pendingOfRequester >= policy.maxPendingPerRequester) {
      throw new HitlRequestError(
        'BUFFER_FULL',
        `${request.requester} already has ${pendingOfRequester} pending HITL invocations (at most ${policy.maxPendingPerRequester})`,
      );
    }
    const deadlineAt = Math.min(request.deadlineAt ?? now + policy.defaultDeadlineMs, now + policy.maxDeadlineMs);
    const invocation: HitlInvocation = {
      id: request.invocationId ?? this.ids.uuid(),
      reasonType: request.reasonType,
      requester: request.requester,
      correlationId: request.correlationId,
      subject: request.subject,
      context: request.context,
      proposedActions: request.proposedActions,
      suggestedAction: request.suggestedAction,
      priority: request.priority,
      requestedFallback: request.requestedFallback,
      origin,
      createdAt: now,
      deadlineAt,
      originalDeadlineAt: deadlineAt,
      extensions: 0,
      state: 'pending',
      decision: null,
      updatedAt: now,
    };
    const rule = policy.paused ? undefined : matchRule(policy.rules, invocation);
    this.store.transaction(() => {
      this.repo.put(invocation);
      this.audit(
        invocation,
        'opened',
        request.requester,
        false,
        {
          reason_type: invocation.reasonType,
          subject: invocation.subject,
          deadline: isoUtc(deadlineAt),
          origin,
          priority: invocation.priority,
          proposed_actions: invocation.proposedActions,
          paused: policy.paused || undefined,
        },
        ctx,
        'hitl.opened',
      );
      if (rule) {
        this.settle(
          invocation,
          'decided',
          {
            action: rule.action,
            rationale: `Automatic ${rule.action} by rule '${rule.name}'.`,
            payload: null,
            decidedAt: now,
            origin: { kind: 'rule', by: 'policy', automatic: true, rule: rule.name },
          },
          ctx,
        );
      }
    });
    this.changed.fire({ kind: 'opened', invocation });
    if (rule) this.afterSettle(invocation);
    else {
      this.armDeadline(invocation);
      if (this.operators.size === 0) this.armUnavailable(invocation);
    }
    return { invocation, reattached: false };
  }

  /** A human decision (RFC §15.1: approve / deny / modify / defer with a rationale). Applies at once. */
  decide(id: string, input: DecisionInput, operator: string, ctx: CallContext): HitlInvocation {
    const action = String(input.action ?? '')
      .trim()
      .toLowerCase();
    if (!(HITL_ACTIONS as readonly string[]).includes(action)) {
      throw new HitlRequestError(
        'VALIDATION_ERROR',
        `action must be one of ${HITL_ACTIONS.join(', ')}, not ${JSON.stringify(input.action)}`,
      );
    }
    const rationale = String(input.rationale ?? '').trim();
    // RFC §15.1: the integration point accepts a decision "with a clear action … and rationale", and the audit
    // records why. Only humans decide here (rules and fallbacks write their own rationale), so none may be blank.
    if (rationale === '') throw new HitlRequestError('VALIDATION_ERROR', RATIONALE_REQUIRED);
    if (rationale.length > MAX_RATIONALE)
      throw new HitlRequestError('VALIDATION_ERROR', `the rationale is longer than ${MAX_RATIONALE} characters`);
    if (action === 'modify') {
      // The payload goes back to the requester inside the decision, so it is bounded like an invocation.
      const json = input.payload === undefined ? undefined : JSON.stringify(input.payload);
      if (json === undefined)
        throw new HitlRequestError('VALIDATION_ERROR', 'modify needs the edited payload (a JSON value)');
      if (Buffer.byteLength(json) > MAX_INVOCATION_BYTES) {
        throw new HitlRequestError(
          'OVERSIZE_PAYLOAD',
          `the edited payload is ${Buffer.byteLength(json)} bytes of JSON; at most ${MAX_INVOCATION_BYTES}`,
        );
      }
    }
    const invocation = this.pending(id);
    this.store.transaction(() =>
      this.settle(
        invocation,
        'decided',
        {
          action: action as HitlAction,
          rationale,
          payload: action === 'modify' ? input.payload : null,
          decidedAt: this.clock.now(),
          origin: { kind: 'human', by: operator, automatic: false },
        },
        ctx,
      ),
    );
    this.afterSettle(invocation);
    return invocation;
  }

  /** Withdraws a pending invocation; the requester is answered `deny`, recorded as a cancellation. */
  cancel(id: string, by: string, reason: string, ctx: CallContext): HitlInvocation {
    const invocation = this.pending(id);
    this.store.transaction(() =>
      this.settle(
        invocation,
        'cancelled',
        {
          action: 'deny',
          rationale: `Cancelled by ${by}${reason ? `: ${reason}` : ''}.`,
          payload: null,
          decidedAt: this.clock.now(),
          origin: { kind: 'cancel', by, automatic: false },
        },
        ctx,
      ),
    );
    this.afterSettle(invocation);
    return invocation;
  }

  /** Records that the requester stopped waiting (its Decide call ended); the invocation stays pending. */
  requesterDetached(id: string, ctx: CallContext): void {
    const invocation = this.repo.get(id);
    if (invocation?.state === 'pending')
      this.audit(invocation, 'requester_detached', invocation.requester, false, {}, ctx);
  }

  /** Resolves when the invocation is settled (at once if it already is). */
  whenSettled(id: string): Promise<HitlInvocation> {
    const invocation = this.repo.get(id);
    if (!invocation) return Promise.reject(new HitlStateError('not_found', `no HITL invocation '${id}'`));
    if (invocation.state !== 'pending') return Promise.resolve(invocation);
    return new Promise((resolve, reject) => {
      const list = this.waiters.get(id) ?? [];
      list.push({ resolve, reject });
      this.waiters.set(id, list);
    });
  }

  get(id: string): HitlInvocation | undefined {
    return this.repo.get(id);
  }

  /** Pending first (highest priority, then nearest deadline), then settled ones, newest first. */
  list(options: { pendingOnly?: boolean; limit?: number } = {}): HitlInvocation[] {
    const all = this.repo.list(options);
    const pending = all
      .filter((i) => i.state === 'pending')
      .sort((a, b) => b.priority - a.priority || a.deadlineAt - b.deadlineAt);
    const settled = all.filter((i) => i.state !== 'pending').sort((a, b) => b.updatedAt - a.updatedAt);
    return [...pending, ...settled];
  }

  /**
   * Every invocation an internal component opened (origin `internal`, this `component`), pending and settled, oldest
   * first, however many there are (a component reading back its own decisions after a restart).
   */
  listOfComponent(component: string): HitlInvocation[] {
    return this.repo.listOfComponent(component);
  }

  pendingCount(): number {
    return this.repo.list({ pendingOnly: true }).length;
  }

  auditTrail(query?: AuditQuery): AuditEntry[] {
    return this.repo.audit(query);
  }

  /** The audit as one JSON document: every invocation with its decision and every audit record. */
  exportAudit(query: AuditQuery = {}): Record<string, unknown> {
    const entries = this.repo.audit({ limit: 1_000_000, ...query });
    const ids = query.invocationId ? [query.invocationId] : [...new Set(entries.map((e) => e.invocationId))];
    return {
      exported_at: isoUtc(this.clock.now()),
      invocations: ids
        .map((id) => this.repo.get(id))
        .filter((i): i is HitlInvocation => i !== undefined)
        .map(invocationJson),
      audit: entries.map((e) => ({
        id: e.id,
        invocation_id: e.invocationId,
        at: isoUtc(e.at),
        kind: e.kind,
        actor: e.actor,
        automatic: e.automatic,
        details: e.details,
      })),
    };
  }

  dispose(): void {
    this.disposed = true;
    this.guard.stop();
    this.retentionTimer.dispose();
    for (const timer of [...this.deadlineTimers.values(), ...this.unavailableTimers.values()]) timer.dispose();
    this.deadlineTimers.clear();
    this.unavailableTimers.clear();
    for (const list of this.waiters.values()) for (const w of list) w.reject(new Error('the coordinator is stopping'));
    this.waiters.clear();
    this.changed.dispose();
  }

  // ---------------------------------------------------------------- internals

  /** Retention (policy.settledRetentionMs): one bounded batch of settled invocations and their audit; answers whether more are due. */
  private pruneSettled(now: number): boolean {
    const settledBefore = now - this.current.settledRetentionMs;
    return this.store.transaction(() => {
      const result = this.repo.pruneSettled(settledBefore, SETTLED_PRUNE_BATCH);
      if (result.deleted > 0) {
        this.log.record({
          correlationId: this.ids.uuid(),
          actor: 'hitl',
          eventType: 'hitl.settled_pruned',
          details: {
            invocations: result.deleted,
            audit_entries: result.auditEntries,
            settled_before: isoUtc(settledBefore),
            retention_days: this.current.settledRetentionMs / 86_400_000,
          },
        });
      }
      return result.more;
    });
  }

  private pending(id: string): HitlInvocation {
    const invocation = this.repo.get(id);
    if (!invocation) throw new HitlStateError('not_found', `no HITL invocation '${id}'`);
    if (invocation.state !== 'pending') {
      throw new HitlStateError(
        'settled',
        `HITL invocation '${id}' is already ${invocation.state} (${invocation.decision?.action ?? ''} by ${invocation.decision?.origin.by ?? '?'})`,
      );
    }
    return invocation;
  }

  /** Inside a transaction: the new state, its audit record and event, and the answer to the requester. */
  private settle(
    invocation: HitlInvocation,
    state: Exclude<InvocationState, 'pending'>,
    decision: HitlDecision,
    ctx: CallContext,
  ): void {
    invocation.state = state;
    invocation.decision = decision;
    invocation.updatedAt = decision.decidedAt;
    this.repo.put(invocation);
    const kind = state === 'decided' ? 'decided' : state;
    this.audit(
      invocation,
      kind,
      decision.origin.by,
      decision.origin.automatic,
      {
        from: 'pending',
        to: state,
        action: decision.action,
        rationale: decision.rationale,
        payload: decision.payload ?? undefined,
        origin: decision.origin,
      },
      ctx,
      `hitl.${kind}`,
      decision.origin.kind === 'fallback' ? 'WARN' : 'INFO',
    );
    this.responders.get(invocation.origin.kind)?.(invocation);
  }

  private afterSettle(invocation: HitlInvocation): void {
    this.clearTimers(invocation.id);
    const waiting = this.waiters.get(invocation.id) ?? [];
    this.waiters.delete(invocation.id);
    for (const w of waiting) w.resolve(invocation);
    this.changed.fire({ kind: 'settled', invocation });
  }

  private audit(
    invocation: HitlInvocation,
    kind: string,
    actor: string,
    automatic: boolean,
    details: Record<string, unknown>,
    ctx: CallContext,
    eventType?: string,
    level: 'INFO' | 'WARN' = 'INFO',
  ): void {
    const write = () => {
      this.repo.appendAudit({ invocationId: invocation.id, at: this.clock.now(), kind, actor, automatic, details });
      this.log.record({
        correlationId: invocation.correlationId || ctx.correlationId,
        actor,
        eventType: eventType ?? `hitl.${kind}`,
        level,
        details: {
          invocation_id: invocation.id,
          reason_type: invocation.reasonType,
          requester: invocation.requester,
          automatic,
          ...details,
        },
      });
    };
    this.store.transaction(write);
  }

  private armDeadline(invocation: HitlInvocation): void {
    this.deadlineTimers.get(invocation.id)?.dispose();
    const delay = Math.max(0, invocation.deadlineAt - this.clock.now());
    this.deadlineTimers.set(
      invocation.id,
      this.clock.setTimer(delay, () =>
        this.guard.run(`deadline:${invocation.id}`, () => {
          this.deadlineTimers.delete(invocation.id);
          this.fallback(invocation.id, this.operators.size === 0 ? 'hitl_unavailable' : 'deadline');
        }),
      ),
    );
  }

  private armUnavailable(invocation: HitlInvocation): void {
    if (this.unavailableTimers.has(invocation.id)) return;
    this.unavailableTimers.set(
      invocation.id,
      this.clock.setTimer(this.current.unavailableAfterMs, () =>
        this.guard.run(`unavailable:${invocation.id}`, () => {
          this.unavailableTimers.delete(invocation.id);
          if (this.operators.size > 0) return;
          const current = this.repo.get(invocation.id);
          if (current?.state !== 'pending') return;
          // EXTEND_TIMEOUT waits for an operator until the (extended) deadline; the others decide now.
          if (this.current.fallbacks[current.reasonType].policy === 'EXTEND_TIMEOUT' && current.extensions > 0) return;
          this.fallback(current.id, 'hitl_unavailable');
        }),
      ),
    );
  }

  private clearTimers(id: string): void {
    this.deadlineTimers.get(id)?.dispose();
    this.deadlineTimers.delete(id);
    this.unavailableTimers.get(id)?.dispose();
    this.unavailableTimers.delete(id);
  }

  /** RFC §15.1 / §15.4: the configured fallback for the reason type, recorded as such. */
  private fallback(id: string, trigger: 'deadline' | 'hitl_unavailable'): void {
    const invocation = this.repo.get(id);
    if (!invocation || invocation.state !== 'pending') return;
    const now = this.clock.now();
    const setting = this.current.fallbacks[invocation.reasonType];
    const outcome = applyFallback(invocation, setting, trigger, now);
    const ctx: CallContext = { correlationId: invocation.correlationId || this.ids.uuid() };
    if (trigger === 'hitl_unavailable') {
      this.audit(
        invocation,
        'hitl_unavailable',
        'coordinator',
        true,
        {
          operators: 0,
          policy: setting.policy,
          fallback: outcome.kind === 'extend' ? 'extend' : outcome.action,
          detected_after_ms: now - invocation.updatedAt,
        },
        ctx,
        'hitl.unavailable',
        'WARN',
      );
    }
    if (outcome.kind === 'extend') {
      const before = invocation.deadlineAt;
      invocation.deadlineAt = outcome.deadlineAt;
      invocation.extensions = outcome.extension;
      invocation.updatedAt = now;
      this.store.transaction(() => {
        this.repo.put(invocation);
        this.audit(
          invocation,
          'extended',
          'policy',
          true,
          {
            policy: setting.policy,
            trigger,
            rationale: outcome.rationale,
            deadline_before: isoUtc(before),
            deadline_after: isoUtc(outcome.deadlineAt),
            extension: outcome.extension,
            max_extensions: setting.maxExtensions,
          },
          ctx,
          'hitl.extended',
          'WARN',
        );
      });
      this.armDeadline(invocation);
      this.changed.fire({ kind: 'extended', invocation });
      return;
    }
    const requested = invocation.requestedFallback === 'deny';
    const origin: DecisionOrigin = {
      kind: 'fallback',
      by: 'policy',
      automatic: true,
      policy: setting.policy,
      trigger: requested ? 'requested_fallback' : trigger,
    };
    this.store.transaction(() =>
      this.settle(
        invocation,
        'timed_out',
        {
          action: outcome.action,
          rationale: outcome.rationale,
          payload: null,
          decidedAt: now,
          origin,
        },
        ctx,
      ),
    );
    this.afterSettle(invocation);
  }

  /** After a restart: pending invocations come back pending, with their deadlines (and the no-operator wait) re-armed. */
  private restore(): void {
    const pending = this.repo.list({ pendingOnly: true });
    for (const invocation of pending) {
      this.audit(
        invocation,
        'restored',
        'coordinator',
        true,
        { deadline: isoUtc(invocation.deadlineAt) },
        { correlationId: invocation.correlationId },
      );
      this.armDeadline(invocation);
      this.armUnavailable(invocation);
    }
  }
}

/** The wire / export shape of an invocation (snake_case, ISO times). */
export function invocationJson(invocation: HitlInvocation): Record<string, unknown> {
  const { subject, context, decision } = invocation;
  return {
    invocation_id: invocation.id,
    reason_type: invocation.reasonType,
    state: invocation.state,
    requester: invocation.requester,
    correlation_id: invocation.correlationId,
    subject: { repo_id: subject.repoId, worktree_id: subject.worktreeId, task_id: subject.taskId },
    context: {
      summary: context.summary,
      facts: context.facts,
      diffs: context.diffs,
      risk: context.risk,
      prior_attempts: context.priorAttempts,
      inference: context.inference,
      score: context.score,
    },
    proposed_actions: invocation.proposedActions,
    suggested_action: invocation.suggestedAction,
    priority: invocation.priority,
    origin: invocation.origin,
    created_at: isoUtc(invocation.createdAt),
    deadline_ts: isoUtc(invocation.deadlineAt),
    extensions: invocation.extensions,
    decision: decision ? decisionJson(invocation) : null,
  };
}

/** RFC §15.2 HITL_DECISION payload, plus how the decision was made. */
export function decisionJson(invocation: HitlInvocation): Record<string, unknown> {
  const decision = invocation.decision;
  if (!decision) throw new Error(`invocation ${invocation.id} has no decision`);
  const payload = decision.payload;
  return {
    invocation_id: invocation.id,
    decision: decision.action,
    rationale: decision.rationale,
    patch_b64:
      payload === null || payload === undefined ? null : Buffer.from(JSON.stringify(payload)).toString('base64'),
    decision_payload: payload ?? null,
    state: invocation.state,
    decided_by: decision.origin.by,
    automatic: decision.origin.automatic,
    rule: decision.origin.rule,
    fallback:
      decision.origin.kind === 'fallback'
        ? { policy: decision.origin.policy, trigger: decision.origin.trigger }
        : undefined,
    decided_at: isoUtc(decision.decidedAt),
  };
}
