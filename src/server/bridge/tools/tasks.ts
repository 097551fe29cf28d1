import { isoUtc } from '../../../core/clock';
import type { Coordinator } from '../../../core/coordinator';
import { FIELD_LIMITS } from '../../../core/fieldLimits';
import { TERMINAL_TASK_STATES, type TaskRecord } from '../../../core/scheduler/model';
import { paramsOnWire } from '../../../core/scheduler/scheduler';
import { toWire } from '../../../core/scheduler/scope';
import {
  BridgeToolError,
  type BridgeCaller,
  type BridgeTool,
  type BridgeToolContext,
  type BridgeToolOutput,
} from '../model';
import { refusal } from './errors';
import { acknowledge } from './messaging';

const TASK_ID = {
  type: 'string',
  minLength: 1,
  maxLength: FIELD_LIMITS.scheduler.task_id,
  description: 'Default: the task you are running (current_task).',
} as const;
/** States in which a task is the agent's: its `run` went to the agent and the task has not ended. */
const HELD = new Set(['DISPATCHED', 'RUNNING', 'PREEMPTING']);

/**
 * The caller's protocol ACK of its task's `run` envelope, sent as a gRPC agent sends it (messaging.ts `acknowledge`: an
 * ACKNOWLEDGEMENT envelope through Router.submit, the token derived from the message and the stage): the router checks
 * that the caller is the run's recipient (PERMISSION_DENIED otherwise) and the scheduler reads it in Scheduler.onOutbox
 * exactly as it reads a gRPC agent's ACK, so TaskRecord.state / note / result (what workflows read) come from one path.
 */
async function acknowledgeRun(
  tool: BridgeToolContext,
  task: TaskRecord,
  stage: 'READ' | 'FULFILLED' | 'FAILED',
  extra: Record<string, unknown>,
): Promise<void> {
  try {
    await acknowledge(tool, { messageId: task.runMessageId, correlationId: task.taskId }, stage, extra);
  } catch (err) {
    if (err instanceof BridgeToolError)
      throw new BridgeToolError(err.code, `task '${task.taskId}': ${err.message}`, err.retryable);
    throw err;
  }
}

/** The caller's task: the one named (which must have been sent to it), else the one it holds now; undefined when none. */
function heldTask(coordinator: Coordinator, caller: BridgeCaller, taskId: unknown): TaskRecord | undefined {
  if (typeof taskId === 'string') {
    const task = coordinator.scheduler.task(taskId);
    if (!task) throw refusal('NOT_FOUND', `no task '${taskId}' is known (open, or among the finished ones kept)`);
    return task;
  }
  return coordinator.scheduler
    .tasks({ agentId: caller.agentId, includeFinished: false })
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
    ...(TERMINAL_TASK_STATES.has(task.state)
      ? {
          ended_at: task.endedAt === null ? null : isoUtc(task.endedAt),
          note: task.note,
          error_code: task.errorCode,
          result: parseResult(task.result),
        }
      : {}),
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

/** ACKs READ a `run` the agent has not started yet (the task goes RUNNING), as a gRPC agent does when it starts (read_inbox does the same). */
async function start(tool: BridgeToolContext, task: TaskRecord): Promise<void> {
  if (task.state === 'DISPATCHED' && task.runMessageId !== '')
    await acknowledgeRun(tool, task, 'READ', { note: 'started (MCP bridge)' });
}

/** complete_task / fail_task: the task's `run` answered FULFILLED or FAILED through the router, as a gRPC agent answers it. */
async function endTask(
  tool: BridgeToolContext,
  taskId: unknown,
  outcome: 'COMPLETED' | 'FAILED',
  extra: Record<string, unknown>,
): Promise<BridgeToolOutput> {
  const { coordinator, caller } = tool;
  const task = heldTask(coordinator, caller, taskId);
  if (!task)
    throw refusal(
      'FAILED_PRECONDITION',
      'you hold no task: current_task answers the task the scheduler sent you; pass task_id to name one',
    );
  if (TERMINAL_TASK_STATES.has(task.state)) {
    // A retry whose answer was lost: the same end again changes nothing.
    if (task.assignedAgentId === caller.agentId && task.state === outcome)
      return { ...taskJson(task), already_ended: true };
    throw refusal(
      'FAILED_PRECONDITION',
      `task '${task.taskId}' already ended ${task.state}${task.errorCode ? ` (${task.errorCode})` : ''}`,
    );
  }
  if (task.runMessageId === '')
    throw refusal('FAILED_PRECONDITION', `task '${task.taskId}' is ${task.state}: it has not been sent to an agent`);
  // The router refuses an ACK for a message sent to another agent (PERMISSION_DENIED): the caller ends only its own task.
  await start(tool, task);
  const preempt = task.state === 'PREEMPTING' ? task.preemptMessageId : '';
  await acknowledgeRun(tool, task, outcome === 'COMPLETED' ? 'FULFILLED' : 'FAILED', extra);
  // Asked to yield, the task ended first: the preempt_request is closed FULFILLED `completed`, as README's table says.
  if (preempt !== '')
    await acknowledge(tool, { messageId: preempt, correlationId: task.taskId }, 'FULFILLED', { note: 'completed' });
  return taskJson(coordinator.scheduler.task(task.taskId) ?? task);
}

export const CURRENT_TASK: BridgeTool = {
  name: 'current_task',
  description:
    'The task the coordinator\'s scheduler gave you (its params and scope), or {"task": null} when you hold none. ' +
    'Calling it starts the task (it goes RUNNING); end it with complete_task or fail_task.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  annotations: { readOnlyHint: false, idempotentHint: true },
  async run(_args, tool) {
    const { coordinator, caller } = tool;
    const task = heldTask(coordinator, caller, undefined);
    if (!task) return { task: null };
    await start(tool, task);
    return { task: taskJson(coordinator.scheduler.task(task.taskId) ?? task) };
  },
};

export const COMPLETE_TASK: BridgeTool = {
  name: 'complete_task',
  description:
    "Ends your task COMPLETED with an optional result (any JSON, at most about 4 KiB: a workflow node's output) and note. " +
    'Default: the task you are running.',
  inputSchema: {
    type: 'object',
    properties: {
      task_id: TASK_ID,
      result: {
        description:
          "The task's result: any JSON value (kept as the task's result; a workflow reads it as the node's output).",
      },
      note: { type: 'string', maxLength: 1024, description: 'A short note on what was done.' },
    },
    additionalProperties: false,
  },
  annotations: { idempotentHint: true },
  run(args, tool) {
    return endTask(tool, args.task_id, 'COMPLETED', {
      note: (args.note as string | undefined) ?? '',
      ...(args.result !== undefined ? { result: args.result } : {}),
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
      error_code: {
        type: 'string',
        maxLength: 64,
        pattern: '^[A-Za-z][A-Za-z0-9_]*$',
        description: 'Default TASK_FAILED.',
      },
    },
    required: ['error'],
    additionalProperties: false,
  },
  annotations: { idempotentHint: true },
  run(args, tool) {
    return endTask(tool, args.task_id, 'FAILED', {
      note: args.error,
      error_code: (args.error_code as string | undefined) ?? 'TASK_FAILED',
    });
  },
};

export const TASK_TOOLS: readonly BridgeTool[] = [CURRENT_TASK, COMPLETE_TASK, FAIL_TASK];
