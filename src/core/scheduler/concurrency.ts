import { createHash } from 'node:crypto';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { HitlChange, HitlService } from '../hitl/hitlService';
import type { HitlInvocation, InvocationRequest } from '../hitl/model';
import { parseInvocationRequest } from '../hitl/request';
import type { EventLog } from '../log/eventLog';
import {
  TERMINAL_TASK_STATES,
  type DispatchGate, type GateAdmission, type GateVerdict, type ParallelismScorer, type ParallelismVerdict,
  type RunningTasks, type SchedulerOptions, type TaskRecord, type TaskScope, type WaitingReason,
} from './model';
import { scopesOverlap, touchesFiles, type ScopeOverlap } from './overlap';
import { SchedulerError } from './errors';

export interface ConcurrencyDeps {
  readonly log: EventLog;
  readonly clock: Clock;
  readonly hitl: HitlService;
  readonly scorer: ParallelismScorer;
  /**
   * The agent type (descriptor `name`) of a registered agent, to count running instances per type. Without it (or for
   * an agent no longer registered) a running task counts for the type of its `type:<agent type>` target only.
   */
  readonly agentTypeOf?: (agentId: string) => string | undefined;
}

/** The HITL invocations this gate opens are `internal` from this component, requested by it. */
export const GATE_COMPONENT = 'scheduler';
const REQUESTER = 'scheduler';

/** The CONFLICT decision: approve = run in parallel; deny (and anything else) = serialise (README). */
export const CONFLICT_ACTIONS = ['approve: run_in_parallel', 'deny: serialise (run one after the other)'];
export const DUPLICATE_ACTIONS = ['approve: run the duplicate job as well', 'deny: refuse it (DUPLICATE_DETECTED)'];

type AdmissionState =
  | { readonly state: 'pending'; readonly invocationId: string; readonly duplicateOf: string }
  | { readonly state: 'allowed'; readonly invocationId: string; readonly duplicateOf: string }
  | { readonly state: 'refused'; readonly invocationId: string; readonly duplicateOf: string; readonly reason: string };

type PairDecision =
  /** The scorer's answer is awaited (an asynchronous scorer); the object's identity tells a late verdict it still counts. */
  | { readonly state: 'scoring' }
  | { readonly state: 'pending'; readonly invocationId: string }
  | { readonly state: 'parallel' }
  | { readonly state: 'serialise' };

type InvocationUse =
  /** `duplicates`: the open tasks of the same job when it was asked; a task that ends leaves the list (see `forget`). */
  | { readonly kind: 'duplicate'; readonly taskId: string; readonly duplicateOf: string; readonly duplicates: Set<string> }
  | { readonly kind: 'conflict'; readonly taskId: string; readonly otherTaskId: string; readonly confidence: number | null };

/** Job identity (RFC §9.2): sha256 of the target, the content type ('' = application/json) and the params bytes, length-prefixed. */
export function jobKeyOf(target: string, contentType: string, params: Buffer): string {
  const hash = createHash('sha256');
  for (const part of [Buffer.from(target, 'utf8'), Buffer.from(contentType || 'application/json', 'utf8'), params]) {
    const length = Buffer.alloc(8);
    length.writeBigUInt64BE(BigInt(part.length));
    hash.update(length).update(part);
  }
  return hash.digest('hex');
}

/**
 * RFC §9: max_parallel_instances per agent type, job uniqueness (a duplicate job only with a human's approval), scope
 * conflicts (overlap → the parallelism scorer → below the threshold a HITL CONFLICT invocation, whose decision —
 * serialise or run in parallel — is followed; an unavailable scorer → conservative).
 *
 * Decisions are kept per task (duplicates) and per unordered pair of tasks (conflicts: asked once per pair). They live
 * in the HITL invocations this gate opens (origin internal, component `scheduler`, the task ids in their facts): on
 * construction the pending and settled ones are read back, so a decision asked before a restart is still waited for
 * and followed. Invocations cancelled (by `forget` or an operator) are not read back: a restart asks again.
 */
export class ConcurrencyControl implements DispatchGate, Disposable {
  private readonly changed = new Emitter<void>();
  readonly onDidChange: Event<void> = this.changed.event;
  private readonly admissions = new Map<string, AdmissionState>();
  private readonly pairs = new Map<string, PairDecision>();
  private readonly invocations = new Map<string, InvocationUse>();
  /** The last waiting reason logged per task, so that a task waiting on a limit is logged once, not per attempt. */
  private readonly lastLogged = new Map<string, string>();
  /** Inside admit/mayStart/forget: decisions taken there are answered directly, not announced (no re-entrant dispatch). */
  private depth = 0;
  private disposed = false;
  private readonly subscription: Disposable;

  constructor(private readonly deps: ConcurrencyDeps, private options: SchedulerOptions) {
    this.restore();
    this.subscription = deps.hitl.onDidChange((change) => this.onHitl(change));
  }

  /** The limits in force (for the API and tests). */
  get limits(): { readonly maxParallelInstances: Readonly<Record<string, number>>; readonly defaultMaxParallelInstances: number } {
    return { maxParallelInstances: this.options.maxParallelInstances, defaultMaxParallelInstances: this.options.defaultMaxParallelInstances };
  }

  /** Replaces the max_parallel_instances limits (settings, API); tasks waiting on a limit are tried again. */
  setMaxParallelInstances(limits: Readonly<Record<string, number>>, defaultLimit: number): void {
    const check = (value: unknown, what: string) => {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
        throw new SchedulerError('invalid', `max_parallel_instances ${what} must be a whole number ≥ 0 (0 = unlimited), not ${JSON.stringify(value)}`, 'VALIDATION_ERROR');
      }
    };
    check(defaultLimit, 'default');
    for (const [type, value] of Object.entries(limits)) check(value, `for '${type}'`);
    this.options = { ...this.options, maxParallelInstances: { ...limits }, defaultMaxParallelInstances: defaultLimit };
    this.changed.fire();
  }

  jobKey(target: string, contentType: string, params: Buffer): string {
    return jobKeyOf(target, contentType, params);
  }

  admit(task: TaskRecord, open: readonly TaskRecord[], ctx: CallContext): GateAdmission {
    const duplicates = open.filter((t) => t.taskId !== task.taskId && t.jobKey === task.jobKey && !TERMINAL_TASK_STATES.has(t.state));
    if (duplicates.length === 0) return undefined;
    const first = duplicates[0];
    return this.guarded(() => {
      let invocation: HitlInvocation;
      try {
        invocation = this.deps.hitl.open(this.duplicateRequest(task, duplicates), { kind: 'internal', component: GATE_COMPONENT }, ctx).invocation;
      } catch (err) {
        const reason = `the same job is already ${first.state.toLowerCase()} as task '${first.taskId}', and no approval could be asked: ${message(err)}`;
        this.log(task.taskId, 'scheduler.duplicate_refused', { task_id: task.taskId, duplicate_of: first.taskId, job_key: task.jobKey, reason }, 'WARN');
        return { refused: true, code: 'DUPLICATE_DETECTED', reason };
      }
      const use: InvocationUse & { kind: 'duplicate' } = { kind: 'duplicate', taskId: task.taskId, duplicateOf: first.taskId, duplicates: new Set(duplicates.map((t) => t.taskId)) };
      this.invocations.set(invocation.id, use);
      this.admissions.set(task.taskId, { state: 'pending', invocationId: invocation.id, duplicateOf: first.taskId });
      this.log(task.taskId, 'scheduler.duplicate_detected', {
        task_id: task.taskId, duplicate_of: first.taskId, duplicates: duplicates.map((t) => t.taskId).slice(0, 20),
        job_key: task.jobKey, invocation_id: invocation.id,
      });
      const settled = this.deps.hitl.get(invocation.id);
      if (settled && settled.state !== 'pending') {
        const outcome = this.applyDuplicate(settled, use);
        if (outcome.state === 'allowed') return undefined;
        if (outcome.state === 'refused') return { refused: true, code: 'DUPLICATE_DETECTED', reason: outcome.reason };
      }
      return { pending: invocation.id };
    });
  }

  mayStart(task: TaskRecord, agentType: string, running: RunningTasks, ctx: CallContext): GateVerdict {
    return this.guarded(() => {
      const admission = this.admissions.get(task.taskId);
      if (admission?.state === 'pending') {
        return this.wait(task, { kind: 'conflict_decision', invocationId: admission.invocationId, withTaskId: admission.duplicateOf });
      }
      if (admission?.state === 'refused') return { go: false, refuse: { code: 'DUPLICATE_DETECTED', reason: admission.reason } };

      const limit = this.limitFor(agentType);
      if (limit > 0) {
        const count = running.countOfType(agentType, task.taskId);
        if (count >= limit) return this.wait(task, { kind: 'max_parallel_instances', agentType, limit, running: count }, 'scheduler.limit_reached');
      }

      // Only the running tasks that could overlap (same repository, shared resource): a pair decision exists only for
      // pairs whose scopes overlap (or duplicates allowed in parallel), so the others need not be looked at.
      for (const other of running.mayOverlap(task.scope)) {
        if (other.taskId === task.taskId) continue;
        const key = pairKey(task.taskId, other.taskId);
        let decision = this.pairs.get(key);
        if (!decision) {
          const overlap = scopesOverlap(task.scope, other.scope);
          if (!overlap.overlap) continue;
          decision = this.check(task, other, overlap, ctx);
        }
        if (decision.state === 'parallel') continue;
        if (decision.state === 'scoring') return this.wait(task, { kind: 'conflict_check', withTaskId: other.taskId }, 'scheduler.conflict_checking');
        if (decision.state === 'pending') return this.wait(task, { kind: 'conflict_decision', invocationId: decision.invocationId, withTaskId: other.taskId });
        return this.wait(task, { kind: 'serialised_after', taskId: other.taskId });
      }
      this.lastLogged.delete(task.taskId);
      return { go: true };
    });
  }

  forget(taskId: string, ctx: CallContext): void {
    this.guarded(() => {
      const toCancel: string[] = [];
      const admission = this.admissions.get(taskId);
      if (admission) {
        this.admissions.delete(taskId);
        this.invocations.delete(admission.invocationId);
        if (admission.state === 'pending') toCancel.push(admission.invocationId);
      }
      for (const [key, decision] of this.pairs) {
        if (!pairHas(key, taskId)) continue;
        this.pairs.delete(key);
        if (decision.state === 'pending') {
          this.invocations.delete(decision.invocationId);
          toCancel.push(decision.invocationId);
        }
      }
      this.lastLogged.delete(taskId);
      // A duplicate waiting for its approval no longer duplicates a task that ended: once none of the tasks of its
      // job is left, the question is withdrawn and the duplicate admitted (announced, so that the scheduler tries it).
      let released = false;
      for (const [invocationId, use] of this.invocations) {
        if (use.kind !== 'duplicate' || !use.duplicates.delete(taskId)) continue;
        const pending = this.admissions.get(use.taskId);
        if (pending?.state !== 'pending' || pending.invocationId !== invocationId) continue;
        const next = use.duplicates.values().next();
        if (!next.done) {
          this.admissions.set(use.taskId, { ...pending, duplicateOf: next.value });
          continue;
        }
        this.invocations.delete(invocationId);
        toCancel.push(invocationId);
        this.admissions.set(use.taskId, { state: 'allowed', invocationId, duplicateOf: use.duplicateOf });
        this.log(use.taskId, 'scheduler.duplicate_decided', {
          task_id: use.taskId, duplicate_of: use.duplicateOf, decision: 'allowed', by: 'original_ended', invocation_id: invocationId,
        });
        released = true;
      }
      for (const id of toCancel) {
        if (this.deps.hitl.get(id)?.state !== 'pending') continue;
        try {
          this.deps.hitl.cancel(id, REQUESTER, `task '${taskId}' ended: the decision is no longer needed`, ctx);
        } catch (err) {
          this.deps.log.internalError(REQUESTER, ctx.correlationId, err, { cancelling_invocation: id });
        }
      }
      // Announced after the caller (the scheduler ending the task) has finished, not from inside it.
      if (released) queueMicrotask(() => { if (!this.disposed) this.changed.fire(); });
    });
  }

  dispose(): void {
    this.disposed = true;
    this.subscription.dispose();
    this.changed.dispose();
  }

  // ---------------------------------------------------------------- conflicts

  /**
   * First look at an overlapping pair: the scorer, then go, a HITL CONFLICT invocation, or the unavailable-engine policy.
   * A scorer answering a Promise leaves the pair `scoring` (the task waits); its verdict is decided when it arrives, unless
   * the pair was forgotten meanwhile (a task ended: the late verdict is dropped), and announced so the scheduler tries again.
   */
  private check(task: TaskRecord, other: TaskRecord, overlap: ScopeOverlap, ctx: CallContext): PairDecision {
    let answer: ParallelismVerdict | Promise<ParallelismVerdict>;
    try {
      answer = this.deps.scorer.check(task.scope, other.scope, ctx);
    } catch (err) {
      return this.scored(task, other, overlap, { error: err }, ctx);
    }
    if (!isPromiseLike(answer)) return this.scored(task, other, overlap, { verdict: answer }, ctx);
    const key = pairKey(task.taskId, other.taskId);
    const scoring: PairDecision = { state: 'scoring' };
    this.pairs.set(key, scoring);
    this.log(task.taskId, 'scheduler.conflict_check_started', { task_id: task.taskId, other_task_id: other.taskId, reasons: overlap.reasons.slice(0, 20) });
    const settle = (outcome: { verdict: ParallelismVerdict } | { error: unknown }) => {
      if (this.disposed || this.pairs.get(key) !== scoring) {
        if (!this.disposed) this.log(task.taskId, 'scheduler.conflict_check_dropped', { task_id: task.taskId, other_task_id: other.taskId, reason: 'a task of the pair ended while its check ran' });
        return;
      }
      try {
        this.guarded(() => this.scored(task, other, overlap, outcome, ctx));
      } catch (err) {
        this.deps.log.internalError(REQUESTER, task.taskId, err, { other_task_id: other.taskId });
        this.pairs.set(key, { state: 'serialise' });
      }
      this.changed.fire();
    };
    answer.then((verdict) => settle({ verdict }), (error: unknown) => settle({ error }));
    return scoring;
  }

  /** The scorer's answer (or its failure) for an overlapping pair: go, escalate below the threshold, or the unavailable-engine policy. */
  private scored(task: TaskRecord, other: TaskRecord, overlap: ScopeOverlap, outcome: { verdict: ParallelismVerdict } | { error: unknown }, ctx: CallContext): PairDecision {
    const key = pairKey(task.taskId, other.taskId);
    const base = { task_id: task.taskId, other_task_id: other.taskId, reasons: overlap.reasons.slice(0, 20), threshold: this.options.conflictThreshold };
    const refusal = 'verdict' in outcome ? verdictRefusal(outcome.verdict) : message(outcome.error);
    if (refusal !== undefined || !('verdict' in outcome)) {
      const error = refusal ?? 'the parallelism check failed';
      this.log(task.taskId, 'scheduler.engine_unavailable', { ...base, error, policy: this.options.unavailableEngine }, 'WARN');
      if (this.options.unavailableEngine === 'escalate') return this.escalate(task, other, overlap, null, `the parallelism check failed: ${error}`, ctx);
      return this.decide(key, task.taskId, other.taskId, { state: 'serialise' }, { by: 'policy', policy: 'unavailableEngine=serialise', confidence: null });
    }
    const verdict = outcome.verdict;
    if (verdict.confidence >= this.options.conflictThreshold) {
      this.log(task.taskId, 'scheduler.conflict_checked', { ...base, confidence: verdict.confidence, notes: verdict.notes, outcome: 'run_in_parallel' });
      this.pairs.set(key, { state: 'parallel' });
      return { state: 'parallel' };
    }
    this.log(task.taskId, 'scheduler.conflict_checked', { ...base, confidence: verdict.confidence, notes: verdict.notes, outcome: 'escalated' });
    return this.escalate(task, other, overlap, verdict.confidence, verdict.notes, ctx);
  }

  private escalate(task: TaskRecord, other: TaskRecord, overlap: ScopeOverlap, confidence: number | null, notes: string, ctx: CallContext): PairDecision {
    const key = pairKey(task.taskId, other.taskId);
    let invocation: HitlInvocation;
    try {
      invocation = this.deps.hitl.open(this.conflictRequest(task, other, overlap, confidence, notes), { kind: 'internal', component: GATE_COMPONENT }, ctx).invocation;
    } catch (err) {
      this.log(task.taskId, 'scheduler.conflict_escalation_failed', { task_id: task.taskId, other_task_id: other.taskId, error: message(err) }, 'WARN');
      return this.decide(key, task.taskId, other.taskId, { state: 'serialise' }, { by: 'policy', policy: 'escalation failed: serialise', confidence });
    }
    const use: InvocationUse = { kind: 'conflict', taskId: task.taskId, otherTaskId: other.taskId, confidence };
    this.invocations.set(invocation.id, use);
    this.pairs.set(key, { state: 'pending', invocationId: invocation.id });
    const settled = this.deps.hitl.get(invocation.id);
    if (settled && settled.state !== 'pending') return this.applyConflict(settled, use);
    return { state: 'pending', invocationId: invocation.id };
  }

  /** Records a pair's decision; logged unless `quiet` (a decision already logged before a restart). */
  private decide(key: string, taskId: string, otherTaskId: string, decision: PairDecision, how: { by: string; policy?: string; action?: string; invocationId?: string; confidence: number | null }, quiet = false): PairDecision {
    this.pairs.set(key, decision);
    if (quiet) return decision;
    this.log(taskId, 'scheduler.conflict_decided', {
      task_id: taskId, other_task_id: otherTaskId, decision: decision.state === 'parallel' ? 'run_in_parallel' : 'serialise',
      by: how.by, policy: how.policy, action: how.action, invocation_id: how.invocationId, confidence: how.confidence,
    });
    return decision;
  }

  /** The one rule for a settled CONFLICT invocation: approve (or modify to run_in_parallel) = parallel, anything else = serialise. */
  private applyConflict(invocation: HitlInvocation, use: InvocationUse & { kind: 'conflict' }, quiet = false): PairDecision {
    const action = invocation.decision?.action ?? 'deny';
    const parallel = action === 'approve' || (action === 'modify' && modifiedToParallel(invocation.decision?.payload));
    return this.decide(pairKey(use.taskId, use.otherTaskId), use.taskId, use.otherTaskId, parallel ? { state: 'parallel' } : { state: 'serialise' }, {
      by: invocation.decision?.origin.kind ?? invocation.state, action, invocationId: invocation.id, confidence: use.confidence,
      policy: invocation.decision?.origin.policy ?? invocation.decision?.origin.rule,
    }, quiet);
  }

  // ---------------------------------------------------------------- duplicates

  /**
   * The one rule for a settled duplicate invocation: only an approval decided (by a human or an approving rule) allows
   * the duplicate, and then it may also run alongside the tasks it duplicates (the pairs are not asked again as a
   * CONFLICT); a denial, a timeout or a cancellation refuses it. Logged unless `quiet` (already logged before a restart).
   */
  private applyDuplicate(invocation: HitlInvocation, use: InvocationUse & { kind: 'duplicate' }, quiet = false): AdmissionState {
    const action = invocation.decision?.action ?? 'deny';
    const allowed = invocation.state === 'decided' && action === 'approve';
    const reason = allowed ? '' : `a duplicate of task '${use.duplicateOf}' (the same target, content type and params): ${
      invocation.state === 'timed_out' ? 'no approval before the deadline' : invocation.state === 'cancelled' ? 'its approval was cancelled' : `${action} by ${invocation.decision?.origin.by ?? 'the operator'}`
    }${invocation.decision?.rationale ? ` (${invocation.decision.rationale.slice(0, 300)})` : ''}`;
    const state: AdmissionState = allowed
      ? { state: 'allowed', invocationId: invocation.id, duplicateOf: use.duplicateOf }
      : { state: 'refused', invocationId: invocation.id, duplicateOf: use.duplicateOf, reason };
    this.admissions.set(use.taskId, state);
    if (allowed) for (const other of use.duplicates) this.pairs.set(pairKey(use.taskId, other), { state: 'parallel' });
    if (quiet) return state;
    this.log(use.taskId, 'scheduler.duplicate_decided', {
      task_id: use.taskId, duplicate_of: use.duplicateOf, decision: allowed ? 'allowed' : 'refused', action, state: invocation.state,
      by: invocation.decision?.origin.kind, invocation_id: invocation.id,
    });
    return state;
  }

  // ---------------------------------------------------------------- HITL

  private onHitl(change: HitlChange): void {
    if (change.kind !== 'settled') return;
    const use = this.invocations.get(change.invocation.id);
    if (!use) return;
    if (use.kind === 'duplicate') {
      if (this.admissions.get(use.taskId)?.state !== 'pending') return;
      this.applyDuplicate(change.invocation, use);
    } else {
      if (this.pairs.get(pairKey(use.taskId, use.otherTaskId))?.state !== 'pending') return;
      this.applyConflict(change.invocation, use);
    }
    if (this.depth === 0) this.changed.fire();
  }

  /** Reads back the decisions of all this gate's invocations (pending and settled, not cancelled) after a restart. */
  private restore(): void {
    let restored = 0;
    for (const invocation of this.deps.hitl.listOfComponent(GATE_COMPONENT)) {
      if (invocation.origin.kind !== 'internal' || invocation.origin.component !== GATE_COMPONENT || invocation.state === 'cancelled') continue;
      const facts = invocation.context.facts;
      const taskId = typeof facts.task_id === 'string' ? facts.task_id : '';
      if (taskId === '') continue;
      if (facts.gate === 'duplicate' && typeof facts.duplicate_of === 'string') {
        const listed = Array.isArray(facts.duplicates) ? facts.duplicates.filter((id): id is string => typeof id === 'string') : [];
        const use = { kind: 'duplicate' as const, taskId, duplicateOf: facts.duplicate_of, duplicates: new Set(listed.length > 0 ? listed : [facts.duplicate_of]) };
        this.invocations.set(invocation.id, use);
        this.admissions.set(taskId, { state: 'pending', invocationId: invocation.id, duplicateOf: use.duplicateOf });
        if (invocation.state !== 'pending') this.applyDuplicate(invocation, use, true);
        restored++;
      } else if (facts.gate === 'conflict' && typeof facts.other_task_id === 'string') {
        const use = { kind: 'conflict' as const, taskId, otherTaskId: facts.other_task_id, confidence: typeof facts.confidence === 'number' ? facts.confidence : null };
        this.invocations.set(invocation.id, use);
        this.pairs.set(pairKey(taskId, use.otherTaskId), { state: 'pending', invocationId: invocation.id });
        if (invocation.state !== 'pending') this.applyConflict(invocation, use, true);
        restored++;
      }
    }
    if (restored > 0) {
      this.deps.log.record({ correlationId: 'scheduler', actor: REQUESTER, eventType: 'scheduler.gate_restored', details: { invocations: restored } });
    }
  }

  private duplicateRequest(task: TaskRecord, duplicates: readonly TaskRecord[]): InvocationRequest {
    const first = duplicates[0];
    return parseInvocationRequest({
      reason_type: 'TASK_ESCALATION',
      subject: { repo_id: task.scope.repoId, worktree_id: task.scope.worktreeId, task_id: task.taskId },
      summary: `Task ${task.taskId} repeats a job already ${first.state.toLowerCase()} (task ${first.taskId}): run it anyway?`,
      facts: {
        gate: 'duplicate', task_id: task.taskId, duplicate_of: first.taskId, duplicates: duplicates.map((t) => t.taskId).slice(0, 20),
        job_key: task.jobKey, target: task.target, content_type: task.contentType || 'application/json', scope: task.scopeText.slice(0, 1000),
        submitted_by: task.submittedBy, duplicate_submitted_by: first.submittedBy,
      },
      risk_notes: 'RFC §9.2: the same job (target, content type and params) twice at once is refused unless a human allows it.',
      proposed_actions: DUPLICATE_ACTIONS,
      suggested_action: 'deny',
    }, { requester: REQUESTER, correlationId: task.taskId, now: this.deps.clock.now() });
  }

  private conflictRequest(task: TaskRecord, other: TaskRecord, overlap: ScopeOverlap, confidence: number | null, notes: string): InvocationRequest {
    return parseInvocationRequest({
      reason_type: 'CONFLICT',
      subject: { repo_id: task.scope.repoId || other.scope.repoId, worktree_id: task.scope.worktreeId || other.scope.worktreeId, task_id: task.taskId },
      summary: `Task ${task.taskId} and running task ${other.taskId} may touch the same things${confidence === null ? ' (the parallelism check is unavailable)' : ` (confidence ${confidence} < threshold ${this.options.conflictThreshold})`}: run them in parallel?`,
      facts: {
        gate: 'conflict', task_id: task.taskId, other_task_id: other.taskId,
        task_target: task.target, other_target: other.target, other_agent: other.assignedAgentId,
        task_scope: scopeFacts(task.scope), other_scope: scopeFacts(other.scope),
        overlap: overlap.reasons.slice(0, 20), confidence, threshold: this.options.conflictThreshold, notes: notes.slice(0, 2000),
      },
      risk_notes: 'approve runs both at once; deny (or no answer) serialises: the task waits until the other ends (RFC Appendix D C.6, QUEUE_TASKS).',
      proposed_actions: CONFLICT_ACTIONS,
      suggested_action: 'deny',
      ...(confidence === null ? {} : { score: confidence }),
    }, { requester: REQUESTER, correlationId: task.taskId, now: this.deps.clock.now() });
  }

  // ---------------------------------------------------------------- helpers

  private limitFor(agentType: string): number {
    return this.options.maxParallelInstances[agentType] ?? this.options.defaultMaxParallelInstances;
  }

  /** A RunningTasks index of `tasks` (in that order), with this gate's `typeOf`: for tests and one-off questions. */
  runningOf(tasks: readonly TaskRecord[]): RunningIndex {
    const index = new RunningIndex((t) => this.typeOf(t));
    tasks.forEach((t, i) => index.set(String(i), t));
    return index;
  }

  typeOf(task: TaskRecord): string | undefined {
    const registered = task.assignedAgentId ? this.deps.agentTypeOf?.(task.assignedAgentId) : undefined;
    if (registered !== undefined) return registered;
    return task.target.startsWith('type:') ? task.target.slice('type:'.length) : undefined;
  }

  /** A waiting verdict; the event (when given) is logged when the task's waiting reason changes, not on every attempt. */
  private wait(task: TaskRecord, waiting: WaitingReason, eventType?: string): GateVerdict {
    if (eventType) {
      const text = JSON.stringify(waiting);
      if (this.lastLogged.get(task.taskId) !== text) {
        this.lastLogged.set(task.taskId, text);
        this.log(task.taskId, eventType, { task_id: task.taskId, ...waitingDetails(waiting) });
      }
    }
    return { go: false, waiting };
  }

  private log(taskId: string, eventType: string, details: Record<string, unknown>, level: 'INFO' | 'WARN' = 'INFO'): void {
    this.deps.log.record({ correlationId: taskId, actor: REQUESTER, eventType, level, details });
  }

  private guarded<T>(fn: () => T): T {
    this.depth++;
    try {
      return fn();
    } finally {
      this.depth--;
    }
  }
}

interface RunningEntry {
  readonly key: string;
  readonly task: TaskRecord;
  /** Start order: entries are listed by it (a key replaced in place keeps its order). */
  readonly order: number;
  readonly type: string | undefined;
  /** The task's `agentType` when it was indexed (it does not change while the task runs). */
  readonly agentType: string;
}

/**
 * The running tasks, indexed incrementally (RunningTasks): by slot key (the scheduler's agent id), by task id, by agent
 * type (a count for max_parallel_instances; by priority then seq for preemption), by repository and by declared resource
 * (the overlap candidates). `set` and `deleteTask` cost O(log n) (the priority buckets are sorted arrays).
 */
export class RunningIndex implements RunningTasks {
  private readonly byKey = new Map<string, RunningEntry>();
  private readonly byTask = new Map<string, RunningEntry>();
  private readonly byType = new Map<string, Set<RunningEntry>>();
  /** agentType → priority → entries by seq ascending. */
  private readonly byRank = new Map<string, Map<number, RunningEntry[]>>();
  /** Tasks touching files: by repository ('' = none named). */
  private readonly byRepo = new Map<string, Set<RunningEntry>>();
  private readonly byResource = new Map<string, Set<RunningEntry>>();
  private nextOrder = 0;

  constructor(private readonly typeOf: (task: TaskRecord) => string | undefined) {}

  get size(): number {
    return this.byKey.size;
  }

  /** What runs under `key` now: `task`, or nothing (undefined). The same key keeps its place in the order. */
  set(key: string, task: TaskRecord | undefined): void {
    const previous = this.byKey.get(key);
    if (previous) this.remove(previous);
    if (!task) {
      if (previous) this.byKey.delete(key);
      return;
    }
    const stale = this.byTask.get(task.taskId);
    if (stale && stale.key !== key) this.delete(stale);
    const entry: RunningEntry = { key, task, order: previous ? previous.order : this.nextOrder++, type: this.typeOf(task), agentType: task.agentType };
    this.byKey.set(key, entry);
    this.byTask.set(task.taskId, entry);
    if (entry.type !== undefined) addTo(this.byType, entry.type, entry);
    let ranks = this.byRank.get(entry.agentType);
    if (!ranks) this.byRank.set(entry.agentType, ranks = new Map());
    let bucket = ranks.get(task.priority);
    if (!bucket) ranks.set(task.priority, bucket = []);
    bucket.splice(seqIndex(bucket, task.seq), 0, entry);
    if (touchesFiles(task.scope)) addTo(this.byRepo, task.scope.repoId, entry);
    for (const resource of new Set(task.scope.resources)) addTo(this.byResource, resource, entry);
  }

  /** The task no longer runs (ended), whatever key it was under. */
  deleteTask(taskId: string): void {
    const entry = this.byTask.get(taskId);
    if (entry) this.delete(entry);
  }

  has(taskId: string): boolean {
    return this.byTask.has(taskId);
  }

  /** Every running task, in start order (O(n log n): for tests and diagnostics, not the dispatch path). */
  tasks(): TaskRecord[] {
    return [...this.byKey.values()].sort((a, b) => a.order - b.order).map((e) => e.task);
  }

  countOfType(type: string, exceptTaskId?: string): number {
    const count = this.byType.get(type)?.size ?? 0;
    const except = exceptTaskId === undefined ? undefined : this.byTask.get(exceptTaskId);
    return except && except.type === type ? count - 1 : count;
  }

  mayOverlap(scope: TaskScope): readonly TaskRecord[] {
    const found = new Set<RunningEntry>();
    const addAll = (entries: Iterable<RunningEntry> | undefined) => { if (entries) for (const e of entries) found.add(e); };
    for (const resource of scope.resources) addAll(this.byResource.get(resource));
    if (touchesFiles(scope)) {
      if (scope.repoId === '') for (const entries of this.byRepo.values()) addAll(entries);
      else {
        addAll(this.byRepo.get(scope.repoId));
        addAll(this.byRepo.get(''));
      }
    }
    if (found.size === 0) return [];
    return [...found].sort((a, b) => a.order - b.order).map((e) => e.task);
  }

  /**
   * The running tasks whose `agentType` was `agentType` with a priority numerically above `priority`, from the
   * numerically highest priority, then the latest arrival (highest seq) first: the preemption candidates in order.
   */
  *byPreemptionRank(agentType: string, priority: number): Generator<TaskRecord> {
    const ranks = this.byRank.get(agentType);
    if (!ranks) return;
    const priorities = [...ranks.keys()].filter((p) => p > priority).sort((a, b) => b - a);
    for (const p of priorities) {
      const bucket = ranks.get(p);
      if (!bucket) continue;
      for (let i = bucket.length - 1; i >= 0; i--) yield bucket[i].task;
    }
  }

  private delete(entry: RunningEntry): void {
    this.remove(entry);
    this.byKey.delete(entry.key);
  }

  /** Out of every index but byKey. */
  private remove(entry: RunningEntry): void {
    if (this.byTask.get(entry.task.taskId) === entry) this.byTask.delete(entry.task.taskId);
    if (entry.type !== undefined) deleteFrom(this.byType, entry.type, entry);
    const ranks = this.byRank.get(entry.agentType);
    const bucket = ranks?.get(entry.task.priority);
    if (ranks && bucket) {
      const at = bucket.indexOf(entry, Math.max(0, seqIndex(bucket, entry.task.seq) - 1));
      if (at >= 0) bucket.splice(at, 1);
      if (bucket.length === 0) ranks.delete(entry.task.priority);
      if (ranks.size === 0) this.byRank.delete(entry.agentType);
    }
    if (touchesFiles(entry.task.scope)) deleteFrom(this.byRepo, entry.task.scope.repoId, entry);
    for (const resource of new Set(entry.task.scope.resources)) deleteFrom(this.byResource, resource, entry);
  }
}

/** The first index in `bucket` (sorted by seq) whose seq is not below `seq`. */
function seqIndex(bucket: readonly RunningEntry[], seq: number): number {
  let lo = 0;
  let hi = bucket.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (bucket[mid].task.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function addTo<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  let set = map.get(key);
  if (!set) map.set(key, set = new Set());
  set.add(value);
}

function deleteFrom<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  const set = map.get(key);
  if (set?.delete(value) && set.size === 0) map.delete(key);
}

function pairKey(a: string, b: string): string {
  return a < b ? JSON.stringify([a, b]) : JSON.stringify([b, a]);
}

function pairHas(key: string, taskId: string): boolean {
  const [a, b] = JSON.parse(key) as [string, string];
  return a === taskId || b === taskId;
}

/** `modify` with payload "run_in_parallel" or {"decision": "run_in_parallel"} runs in parallel; any other payload serialises. */
function modifiedToParallel(payload: unknown): boolean {
  const value = typeof payload === 'string' ? payload : payload && typeof payload === 'object' ? (payload as Record<string, unknown>).decision : undefined;
  return value === 'run_in_parallel';
}

function scopeFacts(scope: TaskScope): Record<string, unknown> {
  return { repo_id: scope.repoId, worktree_id: scope.worktreeId, paths: scope.paths.slice(0, 50), resources: scope.resources.slice(0, 50) };
}

function waitingDetails(waiting: WaitingReason): Record<string, unknown> {
  const { kind, ...rest } = waiting;
  return { waiting: kind, ...Object.fromEntries(Object.entries(rest).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v])) };
}

/** Why a scorer's verdict cannot be used (a confidence outside [0, 1], notes not text), or undefined. */
export function verdictRefusal(verdict: unknown): string | undefined {
  const v = verdict as Partial<ParallelismVerdict> | null;
  if (!v || typeof v !== 'object') return 'the scorer answered no verdict';
  if (typeof v.confidence !== 'number' || !(v.confidence >= 0 && v.confidence <= 1)) return `the scorer answered a confidence outside [0, 1]: ${String(v.confidence)}`;
  if (typeof v.notes !== 'string') return 'the scorer answered notes that are not text';
  return undefined;
}

function isPromiseLike<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
