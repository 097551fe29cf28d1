import { createHash } from 'node:crypto';
import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import type { Speaker } from '../policy/model';
import type { AgentDirectory } from '../registry/model';
import { MAX_PRIORITY, MIN_PRIORITY, TERMINAL_TASK_STATES } from '../scheduler/model';
import { knows, mayActAs, speakerName } from './access';
import type { HandoffChanges } from './changes';
import { contextRefusal } from './context';
import type { HandoffTasks, HandoffWorktrees } from './deps';
import type {
  HandoffBudget,
  HandoffDelegationPolicy,
  HandoffRecord,
  HandoffRepository,
  HandoffWorktree,
} from './model';
import type { HandoffNotices } from './notices';
import type { HandoffOptions } from './options';
import { denied, fail, identifier, invalid, LIMITS, nonNegative, precondition, text } from './refusals';
import { missingCapabilities } from './routing';
import { deadlineOf, expiryOf, type HandoffMemory } from './state';
import type { Targets } from './targets';

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

export interface RequestDeps {
  readonly clock: Clock;
  readonly handoffs: Pick<HandoffRepository, 'get' | 'put'>;
  readonly agents: Pick<AgentDirectory, 'get'>;
  readonly tasks: Pick<HandoffTasks, 'task'>;
  readonly worktrees: Pick<HandoffWorktrees, 'placeOf'>;
  readonly options: HandoffOptions;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  readonly notices: HandoffNotices;
  readonly targets: Targets;
  /** queries.ts: the refusal of work already transferred. */
  readonly refusalFor: (producerId: string, correlationId: string) => string | undefined;
  readonly answerBy: (record: HandoffRecord) => number | null;
}

/** TaskRecord.submittedBy of the tasks the workflow engine submits (`workflow:<workflow_id>`): they are not handed off. */
const WORKFLOW_SUBMITTER = 'workflow:';

/**
 * RequestHandoff: validated (ids, budget envelope, the context snapshot against the HandoffContext schema when its
 * content type says so, the task handed off, the parent delegation, the bounds), routed (the named agent, else the best
 * capable one, else a person when the options say so) and written with its event and the target's notice.
 */
export class HandoffRequests {
  constructor(private readonly deps: RequestDeps) {}

  request(input: HandoffRequestInput, speaker: Speaker, ctx: CallContext): HandoffRecord {
    const { memory, options, changes, targets } = this.deps;
    const requestId = identifier('request_id', input.requestId, LIMITS.request_id, true);
    const fromAgent = identifier('from_agent', input.fromAgent, LIMITS.agent_id, true);
    if (!mayActAs(speaker, fromAgent))
      throw denied(`${speakerName(speaker)} may not request a handoff as '${fromAgent}'`);
    const digest = requestDigest(input);
    const existing = memory.get(requestId) ?? this.deps.handoffs.get(requestId);
    if (existing) {
      // A retry whose answer was lost: the same request changes nothing, whatever became of it.
      if (existing.requestDigest === digest) return changes.full(existing);
      const more = knows(existing, speaker) ? ` (from '${existing.fromAgent}', now ${existing.state})` : '';
      throw fail(
        'exists',
        'DUPLICATE_DETECTED',
        `request_id '${requestId}' was already used for another handoff${more}; a new request needs a new request_id`,
      );
    }
    const work = this.deps.refusalFor(fromAgent, input.correlationId || input.taskId || requestId);
    if (work !== undefined) throw denied(work);
    const from = this.deps.agents.get(fromAgent);
    if (!from)
      throw fail('not_found', 'NOT_FOUND', `from_agent '${fromAgent}' is not a registered agent; RegisterAgent first`);
    const toAgent = identifier('to_agent', input.toAgent, LIMITS.agent_id, false);
    if (toAgent === fromAgent)
      throw invalid(`to_agent is from_agent '${fromAgent}': an agent cannot hand off to itself`);
    const reason = text('reason', input.reason, LIMITS.reason);
    if (reason.trim() === '') throw invalid('reason is required: say why the work is handed off (RFC §17.6)');
    const capabilities = checkCapabilities(input.capabilitiesRequired);
    if (!Number.isInteger(input.priority) || input.priority < MIN_PRIORITY || input.priority > MAX_PRIORITY) {
      throw invalid(
        `priority must be an integer from ${MIN_PRIORITY} (highest) to ${MAX_PRIORITY} (lowest), not ${String(input.priority)}`,
      );
    }
    const now = this.deps.clock.now();
    let timeoutMs = options.defaultTimeoutMs;
    if (input.timeoutMs !== null && !(Number.isFinite(input.timeoutMs) && input.timeoutMs >= 0))
      throw invalid(`timeout must be a non-negative duration, not ${String(input.timeoutMs)}`);
    if (input.timeoutMs !== null && input.timeoutMs > 0) {
      if (input.timeoutMs > options.maxTimeoutMs)
        throw invalid(`timeout is ${input.timeoutMs} ms; at most ${options.maxTimeoutMs} ms`);
      timeoutMs = Math.ceil(input.timeoutMs);
    }
    const budget = input.budget ? checkBudget(input.budget, now) : null;
    const policy = input.delegationPolicy ? checkPolicy(input.delegationPolicy) : null;
    const contentType = identifier('sw4rm-context-content-type', input.contextContentType, LIMITS.content_type, false);
    const contextProblem = contextRefusal(input.context, contentType);
    if (contextProblem !== undefined) throw invalid(contextProblem);
    const taskId = identifier('sw4rm-task-id', input.taskId, LIMITS.task_id, false);
    if (taskId !== '') this.checkTask(taskId, fromAgent);
    const correlationId =
      identifier('sw4rm-correlation-id', input.correlationId, LIMITS.correlation_id, false) || taskId || requestId;
    const parentRequestId = identifier('sw4rm-parent-request-id', input.parentRequestId, LIMITS.request_id, false);
    if (parentRequestId === requestId) throw invalid('sw4rm-parent-request-id names the request itself');
    if (parentRequestId !== '') this.checkParent(parentRequestId, fromAgent, budget);
    let worktree: HandoffWorktree | null = null;
    if (input.carryWorktree) {
      const place = this.deps.worktrees.placeOf(fromAgent);
      if (!place)
        throw precondition(
          `sw4rm-handoff-worktree: carry asks to carry the worktree of '${fromAgent}', which is not bound to one (WorktreeService.Bind first)`,
        );
      worktree = { repoId: place.repoId, worktreeId: place.worktreeId, outcome: '', detail: '', invocationId: '' };
    }
    if (memory.size >= options.maxOpen) {
      throw fail(
        'exhausted',
        'BUFFER_FULL',
        `${memory.size} handoffs are open (at most ${options.maxOpen}); wait for some to end`,
      );
    }
    const ofAgent = memory.openOf(fromAgent);
    if (ofAgent >= options.maxOpenPerAgent) {
      throw fail(
        'exhausted',
        'BUFFER_FULL',
        `'${fromAgent}' already has ${ofAgent} open handoffs (at most ${options.maxOpenPerAgent})`,
      );
    }

    // Routing: the named agent, else the best capable one, else a person (when the options say so).
    let target: { agentId: string; via: 'requested' | 'capability' } | undefined;
    if (toAgent !== '') {
      target = { agentId: this.checkNamedTarget(toAgent, capabilities), via: 'requested' };
    } else {
      const best = targets.candidates(capabilities, new Set([fromAgent]))[0];
      if (best) target = { agentId: best.agentId, via: 'capability' };
      else if (!options.routeToOperator)
        throw fail('precondition', 'NO_ROUTE', targets.noRoute(capabilities, fromAgent));
    }
    const deadlineAt = deadlineOf(budget, now);
    const record: HandoffRecord = {
      requestId,
      fromAgent,
      requestedTo: toAgent,
      toAgent: target?.agentId ?? '',
      reason,
      context: Buffer.from(input.context),
      contextBytes: input.context.byteLength,
      contextContentType: contentType,
      capabilitiesRequired: capabilities,
      priority: input.priority,
      timeoutMs: deadlineAt === null ? timeoutMs : Math.max(1, Math.min(timeoutMs, deadlineAt - now)),
      budget,
      delegationPolicy: policy,
      taskId,
      correlationId,
      parentRequestId,
      carryWorktree: input.carryWorktree,
      worktree,
      requestDigest: digest,
      state: 'PENDING',
      awaitingOperator: target === undefined,
      attempts: target
        ? [{ agentId: target.agentId, at: now, outcome: '', reason: '', code: '', endedAt: null, via: target.via }]
        : [],
      acceptedBy: '',
      rejectionReason: '',
      rejectionCode: '',
      endReason: '',
      completedBy: '',
      expiresAt: null,
      requestedAt: now,
      updatedAt: now,
      endedAt: null,
    };
    record.expiresAt = expiryOf(record, now);
    const hctx: CallContext = { ...ctx, correlationId };
    changes.run((tx) => {
      this.deps.handoffs.put(record);
      const notice = target ? this.deps.notices.toTarget(record, hctx) : undefined;
      changes.event(
        record,
        fromAgent,
        'handoff.requested',
        {
          to_agent: record.toAgent,
          requested_to: toAgent,
          via: target?.via ?? 'operator',
          awaiting_operator: record.awaitingOperator,
          capabilities_required: capabilities,
          priority: record.priority,
          timeout_ms: record.timeoutMs,
          expires_at: isoUtc(record.expiresAt!),
          answer_by: isoUtc(this.deps.answerBy(record)!),
          context_bytes: record.contextBytes,
          context_content_type: contentType,
          task_id: taskId,
          parent_request_id: parentRequestId,
          carry_worktree: worktree ? { repo_id: worktree.repoId, worktree_id: worktree.worktreeId } : undefined,
          budget: budget ?? undefined,
          delegation_policy: policy ?? undefined,
          requested_by: speakerName(speaker),
          principal: ctx.principal,
          notification: notice,
        },
        notice && !notice.sent ? 'WARN' : 'INFO',
      );
      changes.settle(tx, record);
    }, 'request');
    return record;
  }

  /**
   * sw4rm-parent-request-id: a handoff the requester accepted (ACCEPTED, or COMPLETED: the work is now its own). Depth: a
   * child's budget.current_depth must exceed its parent's; its depth (current_depth, or the parent's + 1 without a
   * budget) must stay below max_delegation_depth — the child's, else the parent's — when one is set.
   */
  private checkParent(parentRequestId: string, fromAgent: string, budget: HandoffBudget | null): void {
    const parent = this.deps.memory.get(parentRequestId) ?? this.deps.handoffs.get(parentRequestId);
    if (!parent || parent.acceptedBy !== fromAgent || (parent.state !== 'ACCEPTED' && parent.state !== 'COMPLETED')) {
      throw precondition(
        `sw4rm-parent-request-id '${parentRequestId}' is not a handoff '${fromAgent}' has accepted: a delegation is made under a handoff its requester accepted`,
      );
    }
    const parentDepth = parent.budget?.currentDepth ?? 0;
    if (budget && budget.currentDepth <= parentDepth) {
      throw invalid(
        `budget.current_depth ${budget.currentDepth} must exceed its parent's (${parentRequestId}: ${parentDepth}): a delegation is one level deeper`,
      );
    }
    const depth = budget ? budget.currentDepth : parentDepth + 1;
    const max =
      budget && budget.maxDelegationDepth > 0
        ? Math.min(budget.maxDelegationDepth, parent.budget?.maxDelegationDepth || Infinity)
        : (parent.budget?.maxDelegationDepth ?? 0);
    if (max > 0 && depth >= max) {
      throw fail(
        'precondition',
        'VALIDATION_ERROR',
        `the delegation's depth ${depth} has reached max_delegation_depth ${max} (its parent ${parentRequestId} is at depth ${parentDepth}): the work may not be delegated further`,
      );
    }
  }

  private checkTask(taskId: string, fromAgent: string): void {
    const task = this.deps.tasks.task(taskId);
    if (!task) throw fail('not_found', 'NOT_FOUND', `sw4rm-task-id '${taskId}' is not a task of the scheduler`);
    if (TERMINAL_TASK_STATES.has(task.state))
      throw precondition(`sw4rm-task-id '${taskId}' already ended ${task.state}: there is nothing to hand off`);
    if (task.submittedBy.startsWith(WORKFLOW_SUBMITTER)) {
      throw precondition(
        `task '${taskId}' was submitted by the workflow engine (${task.submittedBy.slice(0, 200)}): the agent of a workflow node is fixed by the workflow's definition, so its task cannot be handed off; resume the node instead (ResumeWorkflow)`,
      );
    }
    if (task.assignedAgentId !== fromAgent && task.target !== fromAgent) {
      throw denied(
        `task '${taskId}' belongs to '${task.assignedAgentId || task.target}', not '${fromAgent}': only its agent may hand it off`,
      );
    }
    const other = [...this.deps.memory.records()].find((r) => r.taskId === taskId);
    if (other)
      throw precondition(
        `task '${taskId}' is already being handed off by handoff '${other.requestId}' (${other.state})`,
      );
  }

  /** The named target: registered (NO_ROUTE), holding every required capability, not shutting down, not over its delegations. */
  private checkNamedTarget(agentId: string, capabilities: readonly string[]): string {
    const agent = this.deps.agents.get(agentId);
    if (!agent) throw fail('not_found', 'NO_ROUTE', `to_agent '${agentId}' is not a registered agent`);
    const missing = missingCapabilities(agent, capabilities);
    if (missing.length > 0) {
      throw fail(
        'precondition',
        'NO_ROUTE',
        `to_agent '${agentId}' lacks the required capabilities ${missing.join(', ')} (it registered: ${agent.descriptor.capabilities.join(', ') || 'none'})`,
      );
    }
    if (agent.state === 'SHUTTING_DOWN')
      throw fail('unavailable', 'AGENT_SHUTDOWN', `to_agent '${agentId}' is shutting down`);
    const cap = agent.descriptor.maxConcurrentDelegations;
    const carried = this.deps.memory.loadOf(agentId);
    if (cap > 0 && carried >= cap) {
      throw fail(
        'exhausted',
        'OVERLOADED',
        `to_agent '${agentId}' takes at most ${cap} delegations at once (max_concurrent_delegations) and has ${carried}`,
      );
    }
    const waiting = this.deps.memory.waitingFor(agentId);
    if (waiting >= this.deps.options.maxPendingPerTarget) {
      throw fail(
        'exhausted',
        'BUFFER_FULL',
        `to_agent '${agentId}' already has ${waiting} handoffs waiting for its answer (at most ${this.deps.options.maxPendingPerTarget}); try again later or another agent`,
      );
    }
    return agentId;
  }
}

function checkCapabilities(list: readonly string[]): string[] {
  if (list.length > LIMITS.capabilities)
    throw invalid(`capabilities_required names ${list.length} capabilities; at most ${LIMITS.capabilities}`);
  const seen = new Set<string>();
  list.forEach((raw, i) => {
    const cap = identifier(`capabilities_required[${i}]`, raw, LIMITS.capability, true);
    if (/\s/.test(cap)) throw invalid(`capabilities_required[${i}] '${cap.slice(0, 80)}' contains spaces`);
    if (seen.has(cap)) throw invalid(`capabilities_required names '${cap}' twice`);
    seen.add(cap);
  });
  return [...seen];
}

function checkBudget(budget: HandoffBudget, now: number): HandoffBudget {
  for (const [field, value] of Object.entries(budget)) nonNegative(`budget.${field}`, value as number);
  if (budget.maxDelegationDepth > 0 && budget.currentDepth >= budget.maxDelegationDepth) {
    throw fail(
      'precondition',
      'VALIDATION_ERROR',
      `budget.current_depth ${budget.currentDepth} has reached max_delegation_depth ${budget.maxDelegationDepth}: the work may not be delegated further`,
    );
  }
  if (budget.deadlineEpochMs > 0 && budget.deadlineEpochMs <= now) {
    throw fail(
      'deadline',
      'TTL_EXPIRED',
      `budget.deadline_epoch_ms ${isoUtc(budget.deadlineEpochMs)} has passed (now ${isoUtc(now)})`,
    );
  }
  return { ...budget };
}

function checkPolicy(p: HandoffDelegationPolicy): HandoffDelegationPolicy {
  for (const [field, value] of Object.entries(p))
    if (typeof value === 'number') nonNegative(`delegation_policy.${field}`, value);
  return { ...p };
}

/** What makes two RequestHandoffs with one request_id the same request. */
function requestDigest(input: HandoffRequestInput): string {
  return createHash('sha256')
    .update(
      JSON.stringify([
        input.fromAgent,
        input.toAgent,
        input.reason,
        createHash('sha256').update(input.context).digest('hex'),
        input.contextContentType,
        input.capabilitiesRequired,
        input.priority,
        input.timeoutMs,
        input.budget,
        input.delegationPolicy,
        input.taskId,
        input.correlationId,
        input.parentRequestId,
        input.carryWorktree,
      ]),
    )
    .digest('hex');
}
