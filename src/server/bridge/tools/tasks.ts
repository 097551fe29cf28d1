import { isoUtc } from '../../../core/clock';
import type { Coordinator } from '../../../core/coordinator';
import type { CallContext } from '../../../core/context';
import { FIELD_LIMITS } from '../../../core/fieldLimits';
import type { Envelope } from '../../../core/router/envelope';
import { TERMINAL_TASK_STATES, type TaskRecord } from '../../../core/scheduler/model';
import { paramsOnWire } from '../../../core/scheduler/scheduler';
import { toWire } from '../../../core/scheduler/scope';
import type { BridgeCaller, BridgeTool, BridgeToolOutput } from '../model';
import { refusal } from './errors';

const TASK_ID = { type: 'string', minLength: 1, maxLength: FIELD_LIMITS.scheduler.task_id, description: 'Default: the task you are running (current_task).' } as const;
/** States in which a task is the agent's: its `run` went to the agent and the task has not ended. */
const HELD = new Set(['DISPATCHED', 'RUNNING', 'PREEMPTING']);

/**
 * A protocol ACK from the bridged agent, built as a gRPC agent would send it (README, "Routing messages":
 * an ACKNOWLEDGEMENT envelope `{ack_for_message_id, ack_stage, error_code, note, …}`) and admitted by the same
 * Router.send: the router checks that the caller is the message's recipient (PERMISSION_DENIED otherwise), routes it
 * to `coordinator`, and the scheduler reads it in Scheduler.onOutbox exactly as it reads a gRPC agent's ACK.
 * The idempotency token names the operation (this stage of this message), so a retried call is DUPLICATE_DETECTED.
 */
export function acknowledgeAs(coordinator: Coordinator, caller: BridgeCaller, ackFor: string, stage: 'RECEIVED' | 'FULFILLED' | 'FAILED',
  extra: Record<string, unknown>, ctx: CallContext, what: string): void {
  const payload = Buffer.from(JSON.stringify({ ack_for_message_id: ackFor, ack_stage: stage, ...extra }), 'utf8');
  const envelope: Envelope = {
    messageId: coordinator.ids.uuid(), idempotencyToken: `bridge:ack:${stage}:${ackFor}`, producerId: caller.agentId,
    correlationId: ctx.correlationId, sequenceNumber: '1', retryCount: 0, messageType: 'ACKNOWLEDGEMENT', contentType: 'application/json',
    contentLength: String(payload.byteLength), repoId: '', worktreeId: '', hlcTimestamp: '', ttlMs: 0, timestampMs: coordinator.clock.now(),
    payload, parentCorrelationId: '',
  };
  const sent = coordinator.router.send(envelope, ctx);
  if (!sent.accepted) {
    const reason = sent.reason.startsWith(`${sent.code}: `) ? sent.reason.slice(sent.code.length + 2) : sent.reason;
    throw refusal(sent.code, `${what}: ${reason}`);
  }
}

/** The caller's task: the one named (which must have been sent to it), else the one it holds now; undefined when none. */
function heldTask(coordinator: Coordinator, caller: BridgeCaller, taskId: unknown): TaskRecord | undefined {
  if (typeof taskId === 'string') {
    const task = coordinator.scheduler.task(taskId);
    if (!task) throw refusal('NOT_FOUND', `no task '${taskId}' is known (open, or among the finished ones kept)`);
    return task;
  }
  return coordinator.scheduler.tasks({ agentId: caller.agentId, includeFinished: false })
    .find((t) => t.assignedAgentId === caller.agentId && HELD.has(t.state));
}

function taskJson(task: TaskRecord): BridgeToolOutput {
  const params = paramsOnWire(task.params, task.contentType);
  return {
    task_id: task.taskId,
    state: task.state,
    priority: task.priority,
    params: 'value' in params ? params.value : null,
    content_type: task.contentType,
    scope: toWire(task.scope),
    submitted_by: task.submittedBy,
    submitted_at: isoUtc(task.submittedAt),
    started_at: task.startedAt === null ? null : isoUtc(task.startedAt),
    ...(task.state === 'PREEMPTING' ? { preempt_requested: true } : {}),
    ...(TERMINAL_TASK_STATES.has(task.state) ? { ended_at: task.endedAt === null ? null : isoUtc(task.endedAt), note: task.note, error_code: task.errorCode, result: parseResult(task.result) } : {}),
  };
}

function parseResult(text: string): unknown {
  if (text === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** ACKs RECEIVED a `run` the agent has not started yet (the task goes RUNNING), as a gRPC agent does when it starts. */
function start(coordinator: Coordinator, caller: BridgeCaller, task: TaskRecord, ctx: CallContext): void {
  if (task.state === 'DISPATCHED' && task.runMessageId !== '') acknowledgeAs(coordinator, caller, task.runMessageId, 'RECEIVED', { note: 'started (MCP bridge)' }, ctx, `task '${task.taskId}'`);
}

/** complete_task / fail_task: the task's `run` answered FULFILLED or FAILED through the router, as a gRPC agent answers it. */
async function endTask(tool: Parameters<BridgeTool['run']>[1], taskId: unknown, outcome: 'COMPLETED' | 'FAILED', extra: Record<string, unknown>): Promise<BridgeToolOutput> {
  const { coordinator, caller, ctx } = tool;
  const task = heldTask(coordinator, caller, taskId);
  if (!task) throw refusal('FAILED_PRECONDITION', 'you hold no task: current_task answers the task the scheduler sent you; pass task_id to name one');
  if (TERMINAL_TASK_STATES.has(task.state)) {
    // A retry whose answer was lost: the same end again changes nothing.
    if (task.assignedAgentId === caller.agentId && task.state === outcome) return { ...taskJson(task), already_ended: true };
    throw refusal('FAILED_PRECONDITION', `task '${task.taskId}' already ended ${task.state}${task.errorCode ? ` (${task.errorCode})` : ''}`);
  }
  if (task.runMessageId === '') throw refusal('FAILED_PRECONDITION', `task '${task.taskId}' is ${task.state}: it has not been sent to an agent`);
  // The router refuses an ACK for a message sent to another agent (PERMISSION_DENIED): the caller ends only its own task.
  start(coordinator, caller, task, ctx);
  acknowledgeAs(coordinator, caller, task.runMessageId, outcome === 'COMPLETED' ? 'FULFILLED' : 'FAILED', extra, ctx, `task '${task.taskId}'`);
  await coordinator.store.whenDurable();
  return taskJson(coordinator.scheduler.task(task.taskId) ?? task);
}

export const CURRENT_TASK: BridgeTool = {
  name: 'current_task',
  description: 'The task the coordinator\'s scheduler gave you (its params and scope), or {"task": null} when you hold none. '
    + 'Calling it starts the task (it goes RUNNING); end it with complete_task or fail_task.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  annotations: { readOnlyHint: false, idempotentHint: true },
  async run(_args, { coordinator, caller, ctx }) {
    const task = heldTask(coordinator, caller, undefined);
    if (!task) return { task: null };
    start(coordinator, caller, task, ctx);
    await coordinator.store.whenDurable();
    return { task: taskJson(coordinator.scheduler.task(task.taskId) ?? task) };
  },
};

export const COMPLETE_TASK: BridgeTool = {
  name: 'complete_task',
  description: 'Ends your task COMPLETED with an optional result (any JSON, at most about 4 KiB: a workflow node\'s output) and note. '
    + 'Default: the task you are running.',
  inputSchema: {
    type: 'object',
    properties: {
      task_id: TASK_ID,
      result: { description: 'The task\'s result: any JSON value (kept as the task\'s result; a workflow reads it as the node\'s output).' },
      note: { type: 'string', maxLength: 1024, description: 'A short note on what was done.' },
    },
    additionalProperties: false,
  },
  annotations: { idempotentHint: true },
  run(args, tool) {
    return endTask(tool, args.task_id, 'COMPLETED', {
      note: (args.note as string | undefined) ?? '', ...(args.result !== undefined ? { result: args.result } : {}),
    });
  },
};

export const FAIL_TASK: BridgeTool = {
  name: 'fail_task',
  description: 'Ends your task FAILED, saying why. Default: the task you are running.',
  inputSchema: {
    type: 'object',
    properties: {
      task_id: TASK_ID,
      error: { type: 'string', minLength: 1, maxLength: 1024, description: 'Why the task failed.' },
      error_code: { type: 'string', maxLength: 64, pattern: '^[A-Za-z][A-Za-z0-9_]*$', description: 'Default TASK_FAILED.' },
    },
    required: ['error'],
    additionalProperties: false,
  },
  annotations: { idempotentHint: true },
  run(args, tool) {
    return endTask(tool, args.task_id, 'FAILED', { note: args.error, error_code: (args.error_code as string | undefined) ?? 'TASK_FAILED' });
  },
};

export const TASK_TOOLS: readonly BridgeTool[] = [CURRENT_TASK, COMPLETE_TASK, FAIL_TASK];
