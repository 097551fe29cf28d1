import { type HitlInvocation, type InvocationRequest, parseInvocationRequest } from '../hitl/model';
import type { ConflictUse } from './conflicts';
import type { DuplicateUse } from './jobIdentity';
import type { TaskRecord, TaskScope } from './model';
import type { ScopeOverlap } from './overlap';

/** The HITL invocations this gate opens are `internal` from this component, requested by it. */
export const GATE_COMPONENT = 'scheduler';
export const REQUESTER = 'scheduler';

/** The CONFLICT decision: approve = run in parallel; deny (and anything else) = serialise (README). */
export const CONFLICT_ACTIONS = ['approve: run_in_parallel', 'deny: serialise (run one after the other)'];
export const DUPLICATE_ACTIONS = ['approve: run the duplicate job as well', 'deny: refuse it (DUPLICATE_DETECTED)'];

/** The TASK_ESCALATION invocation asking whether a duplicate job may run (its facts are read back on a restart). */
export function duplicateRequest(task: TaskRecord, duplicates: readonly TaskRecord[], now: number): InvocationRequest {
  const first = duplicates[0];
  return parseInvocationRequest(
    {
      reason_type: 'TASK_ESCALATION',
      subject: { repo_id: task.scope.repoId, worktree_id: task.scope.worktreeId, task_id: task.taskId },
      summary: `Task ${task.taskId} repeats a job already ${first.state.toLowerCase()} (task ${first.taskId}): run it anyway?`,
      facts: {
        gate: 'duplicate',
        task_id: task.taskId,
        duplicate_of: first.taskId,
        duplicates: duplicates.map((t) => t.taskId).slice(0, 20),
        job_key: task.jobKey,
        target: task.target,
        content_type: task.contentType || 'application/json',
        scope: task.scopeText.slice(0, 1000),
        submitted_by: task.submittedBy,
        duplicate_submitted_by: first.submittedBy,
      },
      risk_notes:
        'RFC §9.2: the same job (target, content type and params) twice at once is refused unless a human allows it.',
      proposed_actions: DUPLICATE_ACTIONS,
      suggested_action: 'deny',
    },
    { requester: REQUESTER, correlationId: task.taskId, now },
  );
}

/** The CONFLICT invocation asking whether two tasks whose scopes overlap may run in parallel. */
export function conflictRequest(
  task: TaskRecord,
  other: TaskRecord,
  overlap: ScopeOverlap,
  confidence: number | null,
  notes: string,
  threshold: number,
  now: number,
): InvocationRequest {
  return parseInvocationRequest(
    {
      reason_type: 'CONFLICT',
      subject: {
        repo_id: task.scope.repoId || other.scope.repoId,
        worktree_id: task.scope.worktreeId || other.scope.worktreeId,
        task_id: task.taskId,
      },
      summary: `Task ${task.taskId} and running task ${other.taskId} may touch the same things${confidence === null ? ' (the parallelism check is unavailable)' : ` (confidence ${confidence} < threshold ${threshold})`}: run them in parallel?`,
      facts: {
        gate: 'conflict',
        task_id: task.taskId,
        other_task_id: other.taskId,
        task_target: task.target,
        other_target: other.target,
        other_agent: other.assignedAgentId,
        task_scope: scopeFacts(task.scope),
        other_scope: scopeFacts(other.scope),
        overlap: overlap.reasons.slice(0, 20),
        confidence,
        threshold,
        notes: notes.slice(0, 2000),
      },
      risk_notes:
        'approve runs both at once; deny (or no answer) serialises: the task waits until the other ends (RFC Appendix D C.6, QUEUE_TASKS).',
      proposed_actions: CONFLICT_ACTIONS,
      suggested_action: 'deny',
      ...(confidence === null ? {} : { score: confidence }),
    },
    { requester: REQUESTER, correlationId: task.taskId, now },
  );
}

function scopeFacts(scope: TaskScope): Record<string, unknown> {
  return {
    repo_id: scope.repoId,
    worktree_id: scope.worktreeId,
    paths: scope.paths.slice(0, 50),
    resources: scope.resources.slice(0, 50),
  };
}

/**
 * What one of this gate's invocations was asked for, read back from its facts after a restart; undefined for one the
 * gate did not open or that was cancelled (by `forget` or an operator: a restart asks again).
 */
export function invocationUseOf(invocation: HitlInvocation): DuplicateUse | ConflictUse | undefined {
  if (
    invocation.origin.kind !== 'internal' ||
    invocation.origin.component !== GATE_COMPONENT ||
    invocation.state === 'cancelled'
  )
    return undefined;
  const facts = invocation.context.facts;
  const taskId = typeof facts.task_id === 'string' ? facts.task_id : '';
  if (taskId === '') return undefined;
  if (facts.gate === 'duplicate' && typeof facts.duplicate_of === 'string') {
    const listed = Array.isArray(facts.duplicates)
      ? facts.duplicates.filter((id): id is string => typeof id === 'string')
      : [];
    return {
      kind: 'duplicate',
      taskId,
      duplicateOf: facts.duplicate_of,
      duplicates: new Set(listed.length > 0 ? listed : [facts.duplicate_of]),
    };
  }
  if (facts.gate === 'conflict' && typeof facts.other_task_id === 'string') {
    return {
      kind: 'conflict',
      taskId,
      otherTaskId: facts.other_task_id,
      confidence: typeof facts.confidence === 'number' ? facts.confidence : null,
    };
  }
  return undefined;
}
