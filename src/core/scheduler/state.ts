import { STATE_TIMEOUT_CODES, isAgentState } from '../registry/model';
import type { TaskRecord, TaskScope, TaskState, WaitingReason } from './model';

/**
 * The pure state part of the scheduler: a task's record and its transitions (QUEUED → DISPATCHED → RUNNING →
 * PREEMPTING → COMPLETED / FAILED / CANCELLED, and back to QUEUED on a yield or a withdrawn dispatch) as functions
 * from a record to the next one. Each answers a new record and leaves its argument as it is: the engine writes the
 * new record in its transaction and installs it into the live one (`Object.assign`) only once the store took it.
 * No store, no timers, no emitters, no log: time comes in as `now`.
 */

/** A target naming an agent type rather than an agent id: `type:<agent type>`. */
export const TYPE_PREFIX = 'type:';
/** A dispatch withdrawn before the agent started (run refused, timed out, not delivered) this many times ends the task. */
export const MAX_WITHDRAWN_DISPATCHES = 3;
/** The states in which a task holds its agent. */
export const RUNNING_STATES: ReadonlySet<TaskState> = new Set(['DISPATCHED', 'RUNNING', 'PREEMPTING']);
/** The waiting reasons the gate gives (its held tasks). */
export const GATE_WAITING: ReadonlySet<string> = new Set([
  'conflict_decision',
  'serialised_after',
  'max_parallel_instances',
]);
/** The ACK note of a `preempt_request` that declares a non-preemptible section: `non_preemptible:<ms>`. */
const NON_PREEMPTIBLE = /^non_preemptible:(\d{1,12})$/;

export type EndState = 'COMPLETED' | 'FAILED' | 'CANCELLED';

/** The agent type a target names (`type:<name>`), undefined for an agent id. */
export function targetType(target: string): string | undefined {
  return target.startsWith(TYPE_PREFIX) ? target.slice(TYPE_PREFIX.length) : undefined;
}

/** What a new task is made of (the submission, validated). */
export interface NewTask {
  readonly taskId: string;
  readonly target: string;
  readonly priority: number;
  readonly seq: number;
  readonly params: Buffer;
  readonly contentType: string;
  readonly scopeText: string;
  readonly scope: TaskScope;
  readonly jobKey: string;
  readonly submittedBy: string;
}

/** A new task: QUEUED, never dispatched. */
export function queuedTask(fields: NewTask, now: number): TaskRecord {
  return {
    taskId: fields.taskId,
    target: fields.target,
    assignedAgentId: '',
    priority: fields.priority,
    seq: fields.seq,
    params: fields.params,
    contentType: fields.contentType,
    scopeText: fields.scopeText,
    scope: fields.scope,
    jobKey: fields.jobKey,
    submittedBy: fields.submittedBy,
    submittedAt: now,
    state: 'QUEUED',
    waiting: null,
    runMessageId: '',
    preemptMessageId: '',
    preemptedBy: '',
    nonPreemptibleUntil: null,
    dispatches: 0,
    withdrawals: 0,
    errorCode: '',
    note: '',
    startedAt: null,
    endedAt: null,
    updatedAt: now,
    agentType: '',
    terminateMessageId: '',
    deadline: null,
    result: '',
  };
}

/** Why a task just submitted waits, from what is known of its target when it arrives (null: it may go at once). */
export function waitingAtSubmit(
  target: string,
  of: {
    /** For a type target: how many agents of the type are idle. */
    readonly idleOfType: number;
    /** For an agent target: whether the agent holds a task, its state (undefined: not registered) and whether it is idle. */
    readonly busy: boolean;
    readonly agentState: string | undefined;
    readonly idle: boolean;
  },
): WaitingReason | null {
  const type = targetType(target);
  if (type !== undefined) return of.idleOfType > 0 ? null : { kind: 'no_agent_of_type', agentType: type };
  if (of.busy) return { kind: 'agent_busy', agentId: target };
  if (of.agentState !== undefined && !of.idle)
    return { kind: 'agent_not_runnable', agentId: target, state: of.agentState };
  return null;
}

/** Whether two waiting reasons say the same (a change of reason is stored and shown; the same one is not). */
export function sameWaiting(a: WaitingReason | null, b: WaitingReason | null): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The task waits for another reason. */
export function waitingFor(task: TaskRecord, waiting: WaitingReason | null, now: number): TaskRecord {
  return { ...task, waiting, updatedAt: now };
}

/** QUEUED → DISPATCHED: its `run` went to `agentId` as `runMessageId`. */
export function dispatched(
  task: TaskRecord,
  agentId: string,
  agentType: string,
  runMessageId: string,
  now: number,
): TaskRecord {
  return {
    ...task,
    state: 'DISPATCHED',
    assignedAgentId: agentId,
    agentType,
    runMessageId,
    waiting: null,
    dispatches: task.dispatches + 1,
    updatedAt: now,
  };
}

/** DISPATCHED → RUNNING: the agent acknowledged its run. */
export function started(task: TaskRecord, now: number): TaskRecord {
  return { ...task, state: 'RUNNING', startedAt: task.startedAt ?? now, updatedAt: now };
}

/** One more dispatch withdrawn before the agent started. */
export function withdrawnOnce(task: TaskRecord): TaskRecord {
  return { ...task, withdrawals: task.withdrawals + 1 };
}

/** Whether the withdrawals counted end the task. */
export function withdrawnTooOften(task: TaskRecord): boolean {
  return task.withdrawals >= MAX_WITHDRAWN_DISPATCHES;
}

/** Back to QUEUED at its priority and original seq, with nothing of its last dispatch. */
export function requeued(task: TaskRecord, waiting: WaitingReason, now: number): TaskRecord {
  return {
    ...task,
    state: 'QUEUED',
    waiting,
    runMessageId: '',
    preemptMessageId: '',
    terminateMessageId: '',
    preemptedBy: '',
    nonPreemptibleUntil: null,
    deadline: null,
    assignedAgentId: '',
    agentType: '',
    updatedAt: now,
  };
}

/** → PREEMPTING: a `preempt_request` went out as `messageId`; the agent has until `deadline` to yield. */
export function preempting(
  task: TaskRecord,
  messageId: string,
  byTaskId: string,
  deadline: number,
  now: number,
): TaskRecord {
  return { ...task, state: 'PREEMPTING', preemptMessageId: messageId, preemptedBy: byTaskId, deadline, updatedAt: now };
}

/** The milliseconds of a non-preemptible section an ACK note declares (`non_preemptible:<ms>`), undefined when none. */
export function declaredSection(note: string): number | undefined {
  const declared = NON_PREEMPTIBLE.exec(note);
  return declared ? Number(declared[1]) : undefined;
}

/** The agent declared a non-preemptible section of `ms` (already cut to the maximum): the yield waits until its end. */
export function nonPreemptible(task: TaskRecord, ms: number, now: number): TaskRecord {
  return { ...task, nonPreemptibleUntil: now + ms, deadline: now + ms, updatedAt: now };
}

/** A `terminate` went out as `messageId`: its answer is awaited until `deadline`. */
export function terminateSent(task: TaskRecord, messageId: string, deadline: number, now: number): TaskRecord {
  return { ...task, terminateMessageId: messageId, deadline, updatedAt: now };
}

/** No `terminate` could be sent to an open task: it ends now as the grace would (memory only: the store keeps its deadline). */
export function terminateUnsent(task: TaskRecord, now: number): TaskRecord {
  return { ...task, terminateMessageId: 'unsent', deadline: now };
}

/** A cancelled task's `terminate` is answered or given up: no deadline any more (it is not restored again). */
export function settled(task: TaskRecord): TaskRecord {
  return { ...task, deadline: null };
}

/** → COMPLETED, FAILED or CANCELLED: only a completed task keeps a result, only one that did not complete an error code. */
export function ended(
  task: TaskRecord,
  state: EndState,
  code: string,
  note: string,
  result: string,
  now: number,
): TaskRecord {
  return {
    ...task,
    state,
    errorCode: state === 'COMPLETED' ? '' : code,
    note: note.slice(0, 4096),
    result: state === 'COMPLETED' ? result : '',
    endedAt: now,
    updatedAt: now,
    waiting: null,
    deadline: null,
  };
}

/** How long until the task's deadline (0 when past), undefined when it has none. */
export function msUntilDeadline(task: TaskRecord, now: number): number | undefined {
  return task.deadline === null ? undefined : Math.max(0, task.deadline - now);
}

// ------------------------------------------------------------------------------------------ the agent's way

/** The agent was sent its run but has not acknowledged it yet. */
export function notStarted(state: string | undefined): boolean {
  return state === 'SCHEDULED' || state === 'RESUMED';
}

/** The §8.3 error code of the timeout that moves an agent out of `state` into FAILED (resource_timeout, suspend_timeout…). */
export function agentFailureCode(state: string | undefined): string | undefined {
  return state !== undefined && isAgentState(state) ? STATE_TIMEOUT_CODES[state]?.errorCode : undefined;
}

/** States in which the agent is working on (or starting) its task. */
const WORKING_STATES: ReadonlySet<string> = new Set([
  'SCHEDULED',
  'RESUMED',
  'RUNNING',
  'WAITING',
  'WAITING_RESOURCES',
]);

/** Where the agent goes after its task ended: through COMPLETED when it was working on it, then RUNNABLE. */
export function doneWay(state: string | undefined): string[] {
  return state !== undefined && WORKING_STATES.has(state) ? ['COMPLETED', 'RUNNABLE'] : ['RUNNABLE'];
}

/** Where the agent goes when its run was withdrawn before it started: back to idle (SUSPENDED if it was resumed). */
export function withdrawWay(state: string | undefined): string[] {
  if (state === 'SCHEDULED') return ['RUNNABLE'];
  if (state === 'RESUMED') return ['SUSPENDED'];
  return doneWay(state);
}

/** The code a task ends with when its agent left the registry for `reason` (shutdown asked for or not). */
export function leftCode(reason: string, shutdownAsked: boolean): string {
  return /agent_shutdown_timeout/.test(reason)
    ? 'agent_shutdown_timeout'
    : shutdownAsked || /shut down/.test(reason)
      ? 'agent_shutdown'
      : 'AGENT_UNAVAILABLE';
}
