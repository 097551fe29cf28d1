import type { CallContext } from '../context';
import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import { Transitions } from '../kernel/transitions';
import { PAYLOAD_LIMITS } from '../limits';
import { submitRefusal } from './access';
import { SCHEDULER, type SchedulerContext } from './context';
import {
  MAX_PRIORITY,
  MIN_PRIORITY,
  type SubmitResult,
  type TaskChange,
  type TaskRecord,
  type TaskScope,
  type TaskSubmission,
  type WaitingReason,
} from './model';
import { describeWaiting, paramsOnWire, runCommand } from './notices';
import { formatScope, isScopeRefusal, parseScope, toWire } from './scope';
import { queuedTask, targetType, waitingAtSubmit, TYPE_PREFIX } from './state';

/** What a submission needs of the other parts once its task is queued. */
export interface SubmitNeeds {
  considerPreemption(task: TaskRecord, ctx: CallContext): void;
  wakeFor(task: TaskRecord): void;
  pump(): void;
}

/** A submission that passed validation. */
interface Valid {
  readonly taskId: string;
  readonly target: string;
  readonly agentType: string | undefined;
  readonly scope: TaskScope;
  readonly contentType: string;
}

/**
 * SubmitTask (RFC §7.1, §9): what makes a submission valid (priority, target, ids, scope, content type, params, the
 * size of its `run`), whether it may enter (access.ts), the gate's admission, and the task queued; then the preemption
 * it may cause and a dispatch round.
 */
export class Submit {
  constructor(
    private readonly core: SchedulerContext,
    private readonly needs: SubmitNeeds,
  ) {}

  submit(submission: TaskSubmission, ctx: CallContext): SubmitResult {
    const { memory, deps, options } = this.core;
    const refused = (code: string, reason: string): SubmitResult => {
      deps.log.record({
        correlationId: submission.taskId || ctx.correlationId,
        actor: SCHEDULER,
        eventType: 'task.refused',
        level: 'WARN',
        details: {
          task_id: submission.taskId,
          target: String(submission.target).slice(0, 256),
          code,
          reason,
          submitted_by: submission.submittedBy,
        },
      });
      return { accepted: false, code, reason: `${code}: ${reason}` };
    };
    const valid = this.validate(submission);
    if ('refusal' in valid) return refused('VALIDATION_ERROR', valid.refusal);
    if ('oversize' in valid) return refused('OVERSIZE_PAYLOAD', valid.oversize);
    const { taskId, target, agentType, scope, contentType } = valid;
    const refusal = submitRefusal(
      { memory, tasks: deps.store.scheduler, agents: deps.agents, maxQueuedTasks: options.maxQueuedTasks },
      taskId,
      target,
      agentType,
    );
    if (refusal) return refused(refusal.code, refusal.reason);
    const now = this.core.now();
    const priority = submission.priority;
    const fresh = queuedTask(
      {
        taskId,
        target,
        priority,
        seq: memory.lastSeq + 1,
        params: Buffer.from(submission.params),
        contentType,
        scopeText: submission.scope,
        scope,
        jobKey: deps.gate.jobKey(target, contentType, submission.params),
        submittedBy: submission.submittedBy,
      },
      now,
    );
    const sameJob = [...(memory.byJob.get(fresh.jobKey) ?? [])];
    const admission = deps.gate.admit(fresh, sameJob, { ...ctx, correlationId: taskId });
    if (admission && 'refused' in admission) return refused(admission.code, admission.reason);
    // The record is new and in nobody's memory but the gate's (which saw it as it is): its waiting reason is set on it.
    const task = fresh;
    task.waiting =
      admission && 'pending' in admission
        ? { kind: 'conflict_decision', invocationId: admission.pending, withTaskId: sameJob[0]?.taskId ?? '' }
        : this.initialWaiting(target);
    const held = admission !== undefined;
    // Inside another area's transition, what follows the queueing waits for its commit (the task is queued only then).
    const nested = Transitions.inTransition;
    const followUp = (): void => {
      // A task waiting for the gate's admission cannot take an agent yet: nobody is asked to yield for it.
      if (!memory.gateHeld.has(task)) this.needs.considerPreemption(task, ctx);
      this.needs.wakeFor(task);
      this.needs.pump();
    };
    this.core.run('submit', (tx) => {
      deps.store.scheduler.put(task);
      this.core.event(task, 'task.submitted', {
        target,
        priority,
        seq: task.seq,
        scope: formatScope(scope),
        content_type: contentType,
        params_bytes: task.params.byteLength,
        submitted_by: submission.submittedBy,
        waiting: task.waiting?.kind,
        job_key: task.jobKey,
      });
      tx.install(() => {
        memory.lastSeq = task.seq;
        if (held) memory.gateHeld.add(task);
        memory.enqueue(task);
      });
      tx.notify<TaskChange>(this.core.changed, { kind: 'submitted', task });
      if (nested) tx.after(followUp);
    });
    if (!nested) followUp();
    const current = memory.open.get(taskId) ?? deps.store.scheduler.get(taskId) ?? task;
    return {
      accepted: true,
      task: current,
      reason: current.state === 'QUEUED' && current.waiting ? describeWaiting(current.waiting) : '',
    };
  }

  /** The submission's fields checked, in the order a submitter is told of the first problem. */
  private validate(submission: TaskSubmission): Valid | { readonly refusal: string } | { readonly oversize: string } {
    const limits = FIELD_LIMITS.scheduler;
    const priority = submission.priority;
    if (!Number.isInteger(priority) || priority < MIN_PRIORITY || priority > MAX_PRIORITY) {
      return {
        refusal: `priority must be an integer from ${MIN_PRIORITY} (highest) to ${MAX_PRIORITY} (lowest), not ${String(priority).slice(0, 40)}`,
      };
    }
    const target = submission.target ?? '';
    if (target === '') return { refusal: 'agent_id is required: an agent id or type:<agent type>' };
    const targetRefusal = identifierRefusal('agent_id', target, limits.target);
    if (targetRefusal) return { refusal: targetRefusal };
    const agentType = target.startsWith(TYPE_PREFIX) ? target.slice(TYPE_PREFIX.length) : undefined;
    if (agentType === '') return { refusal: 'type: needs an agent type (the descriptor name), e.g. type:coder' };
    if (agentType === undefined && target.includes(':'))
      return { refusal: `agent_id ${target.slice(0, 80)} is neither an agent id (no ':') nor type:<agent type>` };
    if (submission.taskId) {
      const idRefusal = identifierRefusal('task_id', submission.taskId, limits.task_id);
      if (idRefusal) return { refusal: idRefusal };
    }
    const scope = parseScope(submission.scope);
    if (isScopeRefusal(scope)) return { refusal: scope };
    const contentType = submission.contentType || 'application/json';
    const contentRefusal = identifierRefusal('content_type', contentType, FIELD_LIMITS.envelope.content_type);
    if (contentRefusal) return { refusal: contentRefusal };
    const params = paramsOnWire(submission.params, contentType);
    if (typeof params === 'object' && params !== null && 'refusal' in params) return { refusal: params.refusal };
    const taskId = submission.taskId || this.core.deps.ids.uuid();
    const size = Buffer.byteLength(
      JSON.stringify(runCommand(taskId, params.value, contentType, toWire(scope), priority)),
      'utf8',
    );
    if (size > PAYLOAD_LIMITS.CONTROL) {
      return {
        oversize: `the run command for these params is ${size} bytes; a CONTROL envelope holds at most ${PAYLOAD_LIMITS.CONTROL}`,
      };
    }
    return { taskId, target, agentType, scope, contentType };
  }

  private initialWaiting(target: string): WaitingReason | null {
    const { memory, deps } = this.core;
    const type = targetType(target);
    return waitingAtSubmit(target, {
      idleOfType: type === undefined ? 0 : (memory.idleByType.get(type)?.size ?? 0),
      busy: type === undefined && memory.slots.has(target),
      agentState: type === undefined ? deps.agents.get(target)?.state : undefined,
      idle: memory.idle.has(target),
    });
  }
}
