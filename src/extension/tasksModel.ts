import {
  DEFAULT_PRIORITY,
  MAX_PRIORITY,
  MIN_PRIORITY,
  TERMINAL_TASK_STATES,
  describeWaiting,
  formatEvent,
  type AgentRecord,
  type MessageSummary,
  type StoredEvent,
  type SubmitResult,
  type TaskRecord,
  type TaskScope,
  type WaitingReason,
} from '../core/api';
import { shortId } from './messagesModel';
import { notificationText } from './notificationText';

/** The Tasks view's groups, in the order they are shown. */
export const TASK_GROUPS = ['running', 'queued', 'done'] as const;
export type TaskGroup = (typeof TASK_GROUPS)[number];

export const TASK_GROUP_LABELS: Readonly<Record<TaskGroup, string>> = {
  running: 'Running',
  queued: 'Queued',
  done: 'Done',
};

/** Running: the `run` went out (DISPATCHED), the agent took it (RUNNING) or is asked to yield (PREEMPTING). */
export function taskGroupOf(task: Pick<TaskRecord, 'state'>): TaskGroup {
  if (TERMINAL_TASK_STATES.has(task.state)) return 'done';
  return task.state === 'QUEUED' ? 'queued' : 'running';
}

/** The tasks of each group, in the order the core answered (dispatch order for open tasks, newest ended first for done). */
export function groupTasks(tasks: readonly TaskRecord[]): Record<TaskGroup, TaskRecord[]> {
  const groups: Record<TaskGroup, TaskRecord[]> = { running: [], queued: [], done: [] };
  for (const task of tasks) groups[taskGroupOf(task)].push(task);
  return groups;
}

/**
 * A group's count: `12`; Running and Queued list only the first of their tasks (`first 200 of 100,000`, `total` from
 * the core's counts); Done the newest (`newest 50` when that many are listed).
 */
export function taskGroupDescription(
  group: TaskGroup,
  listed: number,
  total: number | undefined,
  doneListed: number,
): string {
  if (group === 'done') return listed >= doneListed ? `newest ${listed}` : String(listed);
  const all = Math.max(total ?? listed, listed);
  return all > listed ? `first ${listed.toLocaleString('en-US')} of ${all.toLocaleString('en-US')}` : String(listed);
}

/** Why a queued task waits, in words (RFC §9.1 feedback): the scheduler's own text, the same as SubmitTask's reason. */
export const waitingText: (reason: WaitingReason) => string = describeWaiting;

/** A scope in a few words: `repo@worktree path,path · resource:name`, at most `max` characters. */
export function scopeShort(scope: TaskScope, max = 60): string {
  const parts: string[] = [];
  const where = scope.repoId + (scope.worktreeId ? `@${scope.worktreeId}` : '');
  if (where) parts.push(scope.paths.length ? `${where}/${scope.paths.join(',')}` : where);
  else if (scope.paths.length) parts.push(scope.paths.join(','));
  for (const resource of scope.resources) parts.push(`resource:${resource}`);
  const text = parts.join(' · ') || '(no scope)';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The agent a task is on (once dispatched) or for: `echo-1`, `type:Echo → echo-2`. */
export function taskAgent(task: Pick<TaskRecord, 'target' | 'assignedAgentId'>): string {
  if (!task.assignedAgentId || task.assignedAgentId === task.target) return task.target;
  return `${task.target} → ${task.assignedAgentId}`;
}

/** RFC §7.1: -19 is the highest priority, 20 the lowest. */
export function priorityText(priority: number): string {
  return `P${priority}`;
}

export interface TaskRow {
  readonly label: string;
  readonly description: string;
  /** Plain text (ids, notes and scopes come from agents and submitters). */
  readonly tooltip: string;
}

/**
 * A row of the Tasks view: the task id, then priority · agent · state · scope; a queued task says why it waits right
 * after its state (the part that matters, before a narrow view cuts the row).
 */
export function taskRow(task: TaskRecord): TaskRow {
  const state = task.errorCode ? `${task.state} ${task.errorCode}` : task.state;
  const waiting = task.state === 'QUEUED' && task.waiting ? waitingText(task.waiting) : '';
  const description = [
    priorityText(task.priority),
    taskAgent(task),
    waiting ? `${state}: ${waiting}` : state,
    scopeShort(task.scope, 40),
  ].join(' · ');
  const tooltip = [
    `task ${task.taskId}`,
    `${state} · priority ${task.priority} (-19 highest, 20 lowest)`,
    `for ${task.target}${task.assignedAgentId && task.assignedAgentId !== task.target ? `, on ${task.assignedAgentId}` : ''}`,
    `scope ${task.scopeText}`,
    ...(waiting ? [waiting] : []),
    ...(task.note ? [`note: ${task.note}`] : []),
    `submitted by ${task.submittedBy} at ${new Date(task.submittedAt).toISOString()}`,
    ...(task.startedAt !== null ? [`started ${new Date(task.startedAt).toISOString()}`] : []),
    ...(task.endedAt !== null ? [`ended ${new Date(task.endedAt).toISOString()}`] : []),
  ].join('\n');
  return { label: task.taskId, description, tooltip };
}

/** The `contextValue` of a task row: `task+<STATE>`, so that menus offer Preempt on running and Cancel on open tasks. */
export function taskContextValue(task: Pick<TaskRecord, 'state'>): string {
  return `task+${task.state}`;
}

/** Params as text: JSON pretty-printed when it parses, else the bytes as UTF-8. */
function paramsText(task: Pick<TaskRecord, 'params' | 'contentType'>): string {
  const text = Buffer.from(task.params).toString('utf8');
  if (!task.contentType || task.contentType === 'application/json') {
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      return text;
    }
  }
  return text;
}

/** Show Task Details: the record, its CONTROL messages and their ACKs, its log events (plain text). */
export function taskDetailText(
  task: TaskRecord,
  messages: readonly MessageSummary[],
  events: readonly StoredEvent[],
): string {
  const time = (ms: number | null) => (ms === null ? '—' : new Date(ms).toISOString());
  const lines = [
    `Task ${task.taskId}`,
    '',
    `state           ${task.state}${task.errorCode ? ` (${task.errorCode})` : ''}`,
    ...(task.state === 'QUEUED' && task.waiting ? [`waiting         ${waitingText(task.waiting)}`] : []),
    `target          ${task.target}`,
    `assigned agent  ${task.assignedAgentId || '—'}`,
    `priority        ${task.priority}`,
    `scope           ${task.scopeText}`,
    `job key         ${task.jobKey}`,
    `submitted by    ${task.submittedBy} at ${time(task.submittedAt)}`,
    `started         ${time(task.startedAt)}`,
    `ended           ${time(task.endedAt)}`,
    `dispatches      ${task.dispatches}`,
    ...(task.preemptedBy ? [`preempted by    ${task.preemptedBy}`] : []),
    ...(task.nonPreemptibleUntil !== null ? [`non-preemptible until ${time(task.nonPreemptibleUntil)}`] : []),
    ...(task.note ? [`note            ${task.note}`] : []),
    `content type    ${task.contentType || 'application/json'}`,
    '',
    'Parameters:',
    paramsText(task),
    '',
    `Messages (correlation id ${task.taskId}), newest first: ${messages.length}`,
    ...messages.map(
      (m) =>
        `${new Date(m.updatedAt).toISOString()} ${m.messageType} ${m.state}${m.errorCode ? ` ${m.errorCode}` : ''} ` +
        `${m.producerId} → ${m.recipientId} ${m.messageId}`,
    ),
    '',
    `Log events (correlation id ${task.taskId}), oldest first: ${events.length}`,
    ...events.map((e) => formatEvent(e)),
  ];
  return lines.join('\n') + '\n';
}

/** Submit Task…: the agents and agent types a task may be for (an agent id, or `type:<descriptor name>`). */
export function taskTargets(
  agents: readonly AgentRecord[],
): Array<{ readonly target: string; readonly description: string }> {
  const byId = [...agents]
    .sort((a, b) => a.descriptor.agentId.localeCompare(b.descriptor.agentId))
    .map((a) => ({
      target: a.descriptor.agentId,
      description: `agent · ${a.descriptor.name} · ${a.state}`,
    }));
  const types = new Map<string, number>();
  for (const a of agents) types.set(a.descriptor.name, (types.get(a.descriptor.name) ?? 0) + 1);
  const byType = [...types]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, count]) => ({
      target: `type:${name}`,
      description: `any RUNNABLE agent of type ${name} (${count} registered)`,
    }));
  return [...byType, ...byId];
}

/** A target typed by hand: an agent id (no ':'), or `type:<name>`. Answers the problem, or undefined when it may be sent. */
export function targetProblem(text: string): string | undefined {
  const value = text.trim();
  if (!value) return 'Name an agent id or type:<agent type>.';
  if (value.startsWith('type:')) return value.length > 5 ? undefined : 'Name the agent type after type:.';
  return value.includes(':') ? 'An agent id cannot contain ":"; for an agent type write type:<name>.' : undefined;
}

/** The priority field: a whole number from -19 (highest) to 20 (lowest). Answers the problem, or undefined. */
export function priorityProblem(text: string): string | undefined {
  const value = text.trim();
  if (!/^[+-]?\d+$/.test(value)) return `A whole number from ${MIN_PRIORITY} (highest) to ${MAX_PRIORITY} (lowest).`;
  const n = Number(value);
  return n < MIN_PRIORITY || n > MAX_PRIORITY
    ? `${n} is outside ${MIN_PRIORITY}..${MAX_PRIORITY} (${MIN_PRIORITY} is the highest priority).`
    : undefined;
}

export const DEFAULT_PRIORITY_TEXT = String(DEFAULT_PRIORITY);

/** What the scope field accepts (RFC §9.2), shown under it. */
export const SCOPE_SYNTAX_HINT =
  'repo:<repo_id>[/<path glob>], worktree:<id>, path:<glob>, resource:<name> (separated by spaces or commas), ' +
  'or JSON {"repo_id", "worktree_id", "paths": [...], "resources": [...]}';

/** The scope field: something must be declared (the coordinator checks the syntax and answers VALIDATION_ERROR). */
export function scopeProblem(text: string): string | undefined {
  return text.trim() ? undefined : `A task declares what it touches: ${SCOPE_SYNTAX_HINT}.`;
}

/** The parameters field (application/json): valid JSON; empty means {}. */
export function paramsProblem(text: string): string | undefined {
  if (!text.trim()) return undefined;
  try {
    JSON.parse(text);
    return undefined;
  } catch (err) {
    return `Not valid JSON: ${err instanceof Error ? err.message : String(err)}`;
  }
}

export function paramsOf(text: string): string {
  return text.trim() ? text : '{}';
}

/**
 * What SubmitTask answered, for the person who submitted: accepted (and why it waits), or the refusal (the core's reason
 * starts with its code: `DUPLICATE_DETECTED: …`). Notification text: the task id is the submitter's or an agent's choice.
 */
export function submitResultText(result: SubmitResult): { readonly ok: boolean; readonly text: string } {
  if (!result.accepted) return { ok: false, text: notificationText(`Task refused: ${result.reason}`) };
  const task = result.task;
  const waiting = result.reason || (task.state === 'QUEUED' && task.waiting ? waitingText(task.waiting) : '');
  const where =
    task.state === 'QUEUED'
      ? `queued${waiting ? `: ${waiting}` : ''}`
      : `${task.state} on ${task.assignedAgentId || task.target}`;
  return { ok: true, text: notificationText(`Task ${task.taskId} accepted (priority ${task.priority}), ${where}.`) };
}

/** A submission that failed before the scheduler answered, in the shape of a refusal (`CODE: message`). */
export function submitFailure(code: string, message: string): SubmitResult {
  return { accepted: false, code, reason: `${code}: ${message}` };
}

/** What Preempt Task or Cancel Task did, as notification text (task ids come from agents and submitters). */
export function taskActionText(action: 'preempt' | 'cancel', taskId: string, state: string): string {
  return notificationText(
    action === 'preempt'
      ? `Asked the agent running ${taskTitle(taskId)} to yield (${state}).`
      : `Task ${taskId}: ${state}.`,
  );
}

/** The task id to show in narrow places (a notification's button, a tab title). */
export function taskTitle(taskId: string): string {
  return `task ${shortId(taskId)}`;
}
