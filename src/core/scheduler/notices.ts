import { FIELD_LIMITS } from '../fieldLimits';
import type { ControlCommand, ScopeWire, TaskRecord } from './model';
import { toWire } from './scope';

/** What the scheduler tells agents (the CONTROL commands' payloads) and what views and submitters read of a task. */

export function runCommand(
  taskId: string,
  params: unknown,
  contentType: string,
  scope: ScopeWire,
  priority: number,
): ControlCommand {
  return { command: 'run', task_id: taskId, params, content_type: contentType, scope, priority };
}

/** The `run` command of a stored task. */
export function runCommandOf(task: TaskRecord): ControlCommand {
  const params = paramsOnWire(task.params, task.contentType);
  return runCommand(
    task.taskId,
    'value' in params ? params.value : null,
    task.contentType,
    toWire(task.scope),
    task.priority,
  );
}

export function preemptCommand(taskId: string, reason: string, byTaskId: string, byPriority: number): ControlCommand {
  return { command: 'preempt_request', task_id: taskId, reason, by_task_id: byTaskId, by_priority: byPriority };
}

export function terminateCommand(taskId: string, graceMs: number, reason: string): ControlCommand {
  return { command: 'terminate', task_id: taskId, grace_ms: graceMs, reason };
}

export function shutdownCommand(reason: string, graceMs: number): ControlCommand {
  return { command: 'shutdown', reason, drain_timeout_seconds: Math.ceil(graceMs / 1000) };
}

/** The correlation id of the `shutdown` command sent to `agentId`. */
export function shutdownCorrelation(agentId: string): string {
  return `shutdown:${agentId}`;
}

/**
 * The params as the `run` command carries them: JSON content types as the JSON value (must parse); text/* as a string;
 * anything else as base64 text.
 */
export function paramsOnWire(params: Uint8Array, contentType: string): { value: unknown } | { refusal: string } {
  const base = contentType.split(';')[0].trim().toLowerCase();
  const bytes = Buffer.from(params);
  if (base === 'application/json' || base.endsWith('+json')) {
    if (bytes.byteLength === 0) return { value: null };
    try {
      return { value: JSON.parse(bytes.toString('utf8')) };
    } catch (err) {
      return { refusal: `params are not valid JSON for ${base}: ${(err as Error).message.slice(0, 200)}` };
    }
  }
  if (base.startsWith('text/')) return { value: bytes.toString('utf8') };
  return { value: bytes.toString('base64') };
}

/** The activity entry's description: the params' `description` or `title`, else their text, at most 200 words. */
export function describeTask(task: TaskRecord): string {
  let text = '';
  const params = paramsOnWire(task.params, task.contentType);
  if ('value' in params) {
    const v = params.value;
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      if (typeof o.description === 'string') text = o.description;
      else if (typeof o.title === 'string') text = o.title;
    }
    if (!text) text = typeof v === 'string' ? v : (JSON.stringify(v) ?? '');
  }
  const words = text.split(/\s+/).filter((w) => w !== '');
  const limit = FIELD_LIMITS.registry.description_words;
  return words.length > limit ? `${words.slice(0, limit).join(' ')}…` : words.join(' ').slice(0, 4096);
}

export { describeWaiting } from './waiting';
