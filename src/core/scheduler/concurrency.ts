import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { HitlChange, HitlInvocation, HitlInvocations } from '../hitl/model';
import type { EventRecorder } from '../log/model';
import {
  TERMINAL_TASK_STATES,
  type DispatchGate,
  type GateAdmission,
  type GateVerdict,
  type ParallelismScorer,
  type ParallelismVerdict,
  type RunningTasks,
  type SchedulerOptions,
  type TaskRecord,
  type WaitingReason,
} from './model';
import { scopesOverlap, type ScopeOverlap } from './overlap';
import {
  conflictIsParallel,
  isPromiseLike,
  pairHas,
  pairKey,
  verdictRefusal,
  type ConflictUse,
  type PairDecision,
} from './conflicts';
import { GATE_COMPONENT, REQUESTER, conflictRequest, duplicateRequest, invocationUseOf } from './gateRequests';
import { checkLimits, limitFor, typeOfTask } from './gateLimits';
import { duplicateAdmission, jobKeyOf, type AdmissionState, type DuplicateUse } from './jobIdentity';
import { RunningIndex } from './runningIndex';

// The gate's parts, importable from here as before.
export { CONFLICT_ACTIONS, DUPLICATE_ACTIONS, GATE_COMPONENT } from './gateRequests';
export { verdictRefusal } from './conflicts';
export { jobKeyOf } from './jobIdentity';
export { RunningIndex } from './runningIndex';

export interface ConcurrencyDeps {
  readonly log: EventRecorder;
  readonly clock: Clock;
  readonly hitl: HitlInvocations;
  readonly scorer: ParallelismScorer;
  /**
   * The agent type (descriptor `name`) of a registered agent, to count running instances per type. Without it (or for
   * an agent no longer registered) a running task counts for the type of its `type:<agent type>` target only.
   */
  readonly agentTypeOf?: (agentId: string) => string | undefined;
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
type InvocationUse = DuplicateUse | ConflictUse;

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

  constructor(
    private readonly deps: ConcurrencyDeps,
    private options: SchedulerOptions,
  ) {
    this.restore();
    this.subscription = deps.hitl.onDidChange((change) => this.onHitl(change));
  }

  /** The limits in force (for the API and tests). */
  get limits(): {
    readonly maxParallelInstances: Readonly<Record<string, number>>;
    readonly defaultMaxParallelInstances: number;
  } {
    return {
      maxParallelInstances: this.options.maxParallelInstances,
      defaultMaxParallelInstances: this.options.defaultMaxParallelInstances,
    };
  }

  /** Replaces the max_parallel_instances limits (settings, API); tasks waiting on a limit are tried again. */
  setMaxParallelInstances(limits: Readonly<Record<string, number>>, defaultLimit: number): void {
    checkLimits(limits, defaultLimit);
    this.options = { ...this.options, maxParallelInstances: { ...limits }, defaultMaxParallelInstances: defaultLimit };
    this.changed.fire();
  }

  jobKey(target: string, contentType: string, params: Buffer): string {
    return jobKeyOf(target, contentType, params);
  }

  admit(task: TaskRecord, open: readonly TaskRecord[], ctx: CallContext): GateAdmission {
    const duplicates = open.filter(
      (t) => t.taskId !== task.taskId && t.jobKey === task.jobKey && !TERMINAL_TASK_STATES.has(t.state),
    );
    if (duplicates.length === 0) return undefined;
    const first = duplicates[0];
    return this.guarded(() => {
      let invocation: HitlInvocation;
      try {
        invocation = this.deps.hitl.open(
          duplicateRequest(task, duplicates, this.deps.clock.now()),
          { kind: 'internal', component: GATE_COMPONENT },
          ctx,
        ).invocation;
      } catch (err) {
        const reason = `the same job is already ${first.state.toLowerCase()} as task '${first.taskId}', and no approval could be asked: ${message(err)}`;
        this.log(
          task.taskId,
          'scheduler.duplicate_refused',
          { task_id: task.taskId, duplicate_of: first.taskId, job_key: task.jobKey, reason },
          'WARN',
        );
        return { refused: true, code: 'DUPLICATE_DETECTED', reason };
      }
      const use: DuplicateUse = {
        kind: 'duplicate',
        taskId: task.taskId,
        duplicateOf: first.taskId,
        duplicates: new Set(duplicates.map((t) => t.taskId)),
      };
      this.invocations.set(invocation.id, use);
      this.admissions.set(task.taskId, { state: 'pending', invocationId: invocation.id, duplicateOf: first.taskId });
      this.log(task.taskId, 'scheduler.duplicate_detected', {
        task_id: task.taskId,
        duplicate_of: first.taskId,
        duplicates: duplicates.map((t) => t.taskId).slice(0, 20),
        job_key: task.jobKey,
        invocation_id: invocation.id,
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
        return this.wait(task, {
          kind: 'conflict_decision',
          invocationId: admission.invocationId,
          withTaskId: admission.duplicateOf,
        });
      }
      if (admission?.state === 'refused')
        return { go: false, refuse: { code: 'DUPLICATE_DETECTED', reason: admission.reason } };

      const limit = limitFor(this.options, agentType);
      if (limit > 0) {
        const count = running.countOfType(agentType, task.taskId);
        if (count >= limit)
          return this.wait(
            task,
            { kind: 'max_parallel_instances', agentType, limit, running: count },
            'scheduler.limit_reached',
          );
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
        if (decision.state === 'scoring')
          return this.wait(task, { kind: 'conflict_check', withTaskId: other.taskId }, 'scheduler.conflict_checking');
        if (decision.state === 'pending')
          return this.wait(task, {
            kind: 'conflict_decision',
            invocationId: decision.invocationId,
            withTaskId: other.taskId,
          });
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
          task_id: use.taskId,
          duplicate_of: use.duplicateOf,
          decision: 'allowed',
          by: 'original_ended',
          invocation_id: invocationId,
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
      if (released)
        queueMicrotask(() => {
          if (!this.disposed) this.changed.fire();
        });
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
    this.log(task.taskId, 'scheduler.conflict_check_started', {
      task_id: task.taskId,
      other_task_id: other.taskId,
      reasons: overlap.reasons.slice(0, 20),
    });
    const settle = (outcome: { verdict: ParallelismVerdict } | { error: unknown }) => {
      if (this.disposed || this.pairs.get(key) !== scoring) {
        if (!this.disposed)
          this.log(task.taskId, 'scheduler.conflict_check_dropped', {
            task_id: task.taskId,
            other_task_id: other.taskId,
            reason: 'a task of the pair ended while its check ran',
          });
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
    answer.then(
      (verdict) => settle({ verdict }),
      (error: unknown) => settle({ error }),
    );
    return scoring;
  }

  /** The scorer's answer (or its failure) for an overlapping pair: go, escalate below the threshold, or the unavailable-engine policy. */
  private scored(
    task: TaskRecord,
    other: TaskRecord,
    overlap: ScopeOverlap,
    outcome: { verdict: ParallelismVerdict } | { error: unknown },
    ctx: CallContext,
  ): PairDecision {
    const key = pairKey(task.taskId, other.taskId);
    const base = {
      task_id: task.taskId,
      other_task_id: other.taskId,
      reasons: overlap.reasons.slice(0, 20),
      threshold: this.options.conflictThreshold,
    };
    const refusal = 'verdict' in outcome ? verdictRefusal(outcome.verdict) : message(outcome.error);
    if (refusal !== undefined || !('verdict' in outcome)) {
      const error = refusal ?? 'the parallelism check failed';
      this.log(
        task.taskId,
        'scheduler.engine_unavailable',
        { ...base, error, policy: this.options.unavailableEngine },
        'WARN',
      );
      if (this.options.unavailableEngine === 'escalate')
        return this.escalate(task, other, overlap, null, `the parallelism check failed: ${error}`, ctx);
      return this.decide(
        key,
        task.taskId,
        other.taskId,
        { state: 'serialise' },
        { by: 'policy', policy: 'unavailableEngine=serialise', confidence: null },
      );
    }
    const verdict = outcome.verdict;
    if (verdict.confidence >= this.options.conflictThreshold) {
      this.log(task.taskId, 'scheduler.conflict_checked', {
        ...base,
        confidence: verdict.confidence,
        notes: verdict.notes,
        outcome: 'run_in_parallel',
      });
      this.pairs.set(key, { state: 'parallel' });
      return { state: 'parallel' };
    }
    this.log(task.taskId, 'scheduler.conflict_checked', {
      ...base,
      confidence: verdict.confidence,
      notes: verdict.notes,
      outcome: 'escalated',
    });
    return this.escalate(task, other, overlap, verdict.confidence, verdict.notes, ctx);
  }

  private escalate(
    task: TaskRecord,
    other: TaskRecord,
    overlap: ScopeOverlap,
    confidence: number | null,
    notes: string,
    ctx: CallContext,
  ): PairDecision {
    const key = pairKey(task.taskId, other.taskId);
    let invocation: HitlInvocation;
    try {
      invocation = this.deps.hitl.open(
        conflictRequest(task, other, overlap, confidence, notes, this.options.conflictThreshold, this.deps.clock.now()),
        { kind: 'internal', component: GATE_COMPONENT },
        ctx,
      ).invocation;
    } catch (err) {
      this.log(
        task.taskId,
        'scheduler.conflict_escalation_failed',
        { task_id: task.taskId, other_task_id: other.taskId, error: message(err) },
        'WARN',
      );
      return this.decide(
        key,
        task.taskId,
        other.taskId,
        { state: 'serialise' },
        { by: 'policy', policy: 'escalation failed: serialise', confidence },
      );
    }
    const use: InvocationUse = { kind: 'conflict', taskId: task.taskId, otherTaskId: other.taskId, confidence };
    this.invocations.set(invocation.id, use);
    this.pairs.set(key, { state: 'pending', invocationId: invocation.id });
    const settled = this.deps.hitl.get(invocation.id);
    if (settled && settled.state !== 'pending') return this.applyConflict(settled, use);
    return { state: 'pending', invocationId: invocation.id };
  }

  /** Records a pair's decision; logged unless `quiet` (a decision already logged before a restart). */
  private decide(
    key: string,
    taskId: string,
    otherTaskId: string,
    decision: PairDecision,
    how: { by: string; policy?: string; action?: string; invocationId?: string; confidence: number | null },
    quiet = false,
  ): PairDecision {
    this.pairs.set(key, decision);
    if (quiet) return decision;
    this.log(taskId, 'scheduler.conflict_decided', {
      task_id: taskId,
      other_task_id: otherTaskId,
      decision: decision.state === 'parallel' ? 'run_in_parallel' : 'serialise',
      by: how.by,
      policy: how.policy,
      action: how.action,
      invocation_id: how.invocationId,
      confidence: how.confidence,
    });
    return decision;
  }

  /** The one rule for a settled CONFLICT invocation: approve (or modify to run_in_parallel) = parallel, anything else = serialise. */
  private applyConflict(invocation: HitlInvocation, use: ConflictUse, quiet = false): PairDecision {
    const action = invocation.decision?.action ?? 'deny';
    const parallel = conflictIsParallel(invocation);
    return this.decide(
      pairKey(use.taskId, use.otherTaskId),
      use.taskId,
      use.otherTaskId,
      parallel ? { state: 'parallel' } : { state: 'serialise' },
      {
        by: invocation.decision?.origin.kind ?? invocation.state,
        action,
        invocationId: invocation.id,
        confidence: use.confidence,
        policy: invocation.decision?.origin.policy ?? invocation.decision?.origin.rule,
      },
      quiet,
    );
  }

  // ---------------------------------------------------------------- duplicates

  /**
   * The one rule for a settled duplicate invocation: only an approval decided (by a human or an approving rule) allows
   * the duplicate, and then it may also run alongside the tasks it duplicates (the pairs are not asked again as a
   * CONFLICT); a denial, a timeout or a cancellation refuses it. Logged unless `quiet` (already logged before a restart).
   */
  private applyDuplicate(invocation: HitlInvocation, use: DuplicateUse, quiet = false): AdmissionState {
    const action = invocation.decision?.action ?? 'deny';
    const state = duplicateAdmission(invocation, use);
    const allowed = state.state === 'allowed';
    this.admissions.set(use.taskId, state);
    if (allowed) for (const other of use.duplicates) this.pairs.set(pairKey(use.taskId, other), { state: 'parallel' });
    if (quiet) return state;
    this.log(use.taskId, 'scheduler.duplicate_decided', {
      task_id: use.taskId,
      duplicate_of: use.duplicateOf,
      decision: allowed ? 'allowed' : 'refused',
      action,
      state: invocation.state,
      by: invocation.decision?.origin.kind,
      invocation_id: invocation.id,
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
      const use = invocationUseOf(invocation);
      if (!use) continue;
      this.invocations.set(invocation.id, use);
      if (use.kind === 'duplicate') {
        this.admissions.set(use.taskId, {
          state: 'pending',
          invocationId: invocation.id,
          duplicateOf: use.duplicateOf,
        });
        if (invocation.state !== 'pending') this.applyDuplicate(invocation, use, true);
      } else {
        this.pairs.set(pairKey(use.taskId, use.otherTaskId), { state: 'pending', invocationId: invocation.id });
        if (invocation.state !== 'pending') this.applyConflict(invocation, use, true);
      }
      restored++;
    }
    if (restored > 0) {
      this.deps.log.record({
        correlationId: 'scheduler',
        actor: REQUESTER,
        eventType: 'scheduler.gate_restored',
        details: { invocations: restored },
      });
    }
  }

  // ---------------------------------------------------------------- helpers

  /** A RunningTasks index of `tasks` (in that order), with this gate's `typeOf`: for tests and one-off questions. */
  runningOf(tasks: readonly TaskRecord[]): RunningIndex {
    const index = new RunningIndex((t) => this.typeOf(t));
    tasks.forEach((t, i) => index.set(String(i), t));
    return index;
  }

  typeOf(task: TaskRecord): string | undefined {
    return typeOfTask(task, this.deps.agentTypeOf);
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

  private log(
    taskId: string,
    eventType: string,
    details: Record<string, unknown>,
    level: 'INFO' | 'WARN' = 'INFO',
  ): void {
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

function waitingDetails(waiting: WaitingReason): Record<string, unknown> {
  const { kind, ...rest } = waiting;
  return {
    waiting: kind,
    ...Object.fromEntries(Object.entries(rest).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v])),
  };
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
