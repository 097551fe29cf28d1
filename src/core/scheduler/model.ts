import type { CallContext } from '../context';
import type { Event } from '../events';
import type { Transactions } from '../store/store';
import type { ScopeWire, TaskScope } from './scope';
import type { WaitingReason } from './waiting';

/** What other areas use of scope.ts and waiting.ts (neither imports this file). */
export { isScopeRefusal, parseScope, type ScopeRefusal, type ScopeWire, type TaskScope } from './scope';
export { describeWaiting, type WaitingReason } from './waiting';

/** RFC §7.1: priorities run from -19 (highest) to 20 (lowest); 0 is the default. */
export const MIN_PRIORITY = -19;
export const MAX_PRIORITY = 20;
export const DEFAULT_PRIORITY = 0;

/**
 * A task's life. QUEUED: waiting (its `waiting` says why); DISPATCHED: the CONTROL `run` went to the agent, not yet
 * acknowledged; RUNNING: the agent acknowledged it (RECEIVED/READ); PREEMPTING: a `preempt_request` went out and the
 * scheduler waits for the agent to yield (or for the non-preemptible section to end, or the forced-preemption grace);
 * COMPLETED (ACK FULFILLED), FAILED (ACK FAILED / REJECTED, forced_preemption, a timeout, the agent shut down…),
 * CANCELLED (by the operator or the submitter) are terminal.
 */
export const TASK_STATES = [
  'QUEUED',
  'DISPATCHED',
  'RUNNING',
  'PREEMPTING',
  'COMPLETED',
  'FAILED',
  'CANCELLED',
] as const;
export type TaskState = (typeof TASK_STATES)[number];
export const TERMINAL_TASK_STATES: ReadonlySet<TaskState> = new Set(['COMPLETED', 'FAILED', 'CANCELLED']);

/** One task as the scheduler keeps (and persists) it. */
export interface TaskRecord {
  readonly taskId: string;
  /**
   * Who it is for: an agent id, or `type:<agent type>` for any agent of that type (an agent's type is its descriptor's
   * `name`). `assignedAgentId` is the agent it runs on once dispatched.
   */
  readonly target: string;
  assignedAgentId: string;
  readonly priority: number;
  /** Arrival order: strictly increasing across restarts (persisted); FIFO within a priority. */
  readonly seq: number;
  readonly params: Buffer;
  readonly contentType: string;
  /** The scope as submitted (text) and as parsed. */
  readonly scopeText: string;
  readonly scope: TaskScope;
  /** The job identity (RFC §9.2, `jobKey` in scheduler/concurrency.ts): the same job twice is refused unless a human allows it. */
  readonly jobKey: string;
  /** Who submitted it: an agent id, `operator`, `editor:<name>`, `cli:<name>`. */
  readonly submittedBy: string;
  readonly submittedAt: number;
  state: TaskState;
  waiting: WaitingReason | null;
  /** The CONTROL `run` envelope of the current dispatch (its ACKs move the task), '' when none. */
  runMessageId: string;
  /** The CONTROL `preempt_request` envelope sent for the current preemption, '' when none. */
  preemptMessageId: string;
  /** The task that caused the current preemption, '' when none. */
  preemptedBy: string;
  /** When the agent declared a non-preemptible section, until when (epoch ms); null when none. */
  nonPreemptibleUntil: number | null;
  /** How many times its run was sent to an agent (a yield or a withdrawn dispatch puts it back in the queue). */
  dispatches: number;
  /**
   * How many times a dispatch was withdrawn before the agent started (run refused, not delivered, not sent, the agent
   * re-registered or failed); MAX_WITHDRAWN_DISPATCHES of them end the task FAILED. Yields do not count.
   */
  withdrawals: number;
  /** For FAILED / CANCELLED: the error code (`forced_preemption`, `agent_shutdown`, an ACK's error_code…). */
  errorCode: string;
  /** The agent's ACK note, a refusal's reason or the operator's reason. */
  note: string;
  startedAt: number | null;
  endedAt: number | null;
  updatedAt: number;
  /** The agent type (descriptor name) of `assignedAgentId` while dispatched ('' when none). */
  agentType: string;
  /** The CONTROL `terminate` sent for the current forced preemption or cancellation, '' when none. */
  terminateMessageId: string;
  /**
   * The FULFILLED ACK of its `run` carried a `result` (README, "Tasks for agent authors"): that value as JSON text (at most
   * 4 KiB, the ACK payload's limit); '' when none, and for tasks that did not complete.
   */
  result: string;
  /**
   * While PREEMPTING: when the scheduler stops waiting (epoch ms) — for the yield (then it sends `terminate`), or, once
   * `terminate` went out, for its answer (then the task is FAILED forced_preemption). Re-armed after a restart.
   */
  deadline: number | null;
}

/**
 * What another area (the workflow engine) uses of the scheduler: it submits tasks, reads them, cancels them, and learns
 * of their end inside the transaction that records it.
 */
export interface TaskRunner {
  submit(submission: TaskSubmission, ctx: CallContext): SubmitResult;
  /** An open task, or a finished one still kept (SchedulerOptions.keepFinishedTasks); undefined when unknown or pruned. */
  task(taskId: string): TaskRecord | undefined;
  /** Throws SchedulerError (`not_found`, `refused` when it already ended). */
  cancel(taskId: string, reason: string, ctx: CallContext): TaskRecord;
  /**
   * A task ended (COMPLETED, FAILED or CANCELLED): fired inside the store transaction that records the end, after the
   * record was written, so that a listener commits its own change with it. A listener must not throw and must not call
   * the scheduler from inside (defer that, e.g. to a microtask): the scheduler is in the middle of ending the task.
   */
  readonly onDidEndTask: Event<TaskRecord>;
}

/** What SubmitTask (and the editor's Submit Task…) asks. */
export interface TaskSubmission {
  /** '' asks the scheduler to choose one (a uuid). */
  readonly taskId: string;
  /** An agent id or `type:<agent type>`. */
  readonly target: string;
  readonly priority: number;
  readonly params: Buffer;
  /** '' means application/json. */
  readonly contentType: string;
  readonly scope: string;
  readonly submittedBy: string;
}

/**
 * The answer to a submission. Accepted (queued or dispatched; `reason` tells the submitter when it is queued behind
 * max_parallel_instances or a conflict decision, RFC §9.1 feedback) or refused with a SW4RM-style code: VALIDATION_ERROR
 * (priority out of range, no scope, bad params), OVERSIZE_PAYLOAD, DUPLICATE_DETECTED (the same task id, or the same
 * job already queued or running), NO_ROUTE (no such agent), AGENT_SHUTDOWN (the agent is shutting down), BUFFER_FULL
 * (the queue's limit).
 */
export type SubmitResult =
  | { readonly accepted: true; readonly task: TaskRecord; readonly reason: string }
  | { readonly accepted: false; readonly code: string; readonly reason: string };

export interface SchedulerOptions {
  /** The most tasks queued (not terminal) at once; beyond it SubmitTask is refused BUFFER_FULL. */
  readonly maxQueuedTasks: number;
  /** RFC §9.1: the most tasks running at once per agent type (descriptor name); absent: unlimited. */
  readonly maxParallelInstances: Readonly<Record<string, number>>;
  /** The default for types not in `maxParallelInstances`; 0 = unlimited. */
  readonly defaultMaxParallelInstances: number;
  /** RFC §9.3: a parallelism confidence below this escalates to a HITL CONFLICT invocation. */
  readonly conflictThreshold: number;
  /**
   * RFC §9.3 availability: when the parallelism check cannot be made, `serialise` (run one after the other, the
   * conservative default) or `escalate` (ask a human).
   */
  readonly unavailableEngine: 'serialise' | 'escalate';
  /** RFC §7.2, C.5: the grace given with TERMINATE before the task is FAILED forced_preemption (ms). */
  readonly terminateGraceMs: number;
  /** The longest non-preemptible section an agent may declare (ms); longer declarations are cut to it. */
  readonly maxNonPreemptibleMs: number;
  /** Terminal tasks kept for the Tasks view and queries (newest first); older ones are deleted. */
  readonly keepFinishedTasks: number;
}

export const DEFAULT_SCHEDULER_OPTIONS: SchedulerOptions = {
  maxQueuedTasks: 100_000,
  maxParallelInstances: {},
  defaultMaxParallelInstances: 0,
  conflictThreshold: 0.7,
  unavailableEngine: 'serialise',
  terminateGraceMs: 3_000,
  maxNonPreemptibleMs: 300_000,
  keepFinishedTasks: 1_000,
};

/** The scheduler's table (schema v9): one row per task, the record as JSON, ordered by seq. */
export interface SchedulerRepository {
  put(task: TaskRecord): void;
  get(taskId: string): TaskRecord | undefined;
  /** Every task not terminal, by seq. */
  listOpen(): TaskRecord[];
  /** Terminal tasks, newest ended first, at most `limit`. */
  listFinished(limit: number): TaskRecord[];
  /** Cancelled tasks whose agent has not answered `terminate` yet (a deadline stored), by seq. */
  listTerminating(): TaskRecord[];
  /** The highest seq ever stored (0 when none). */
  maxSeq(): number;
  /** Deletes terminal tasks beyond the newest `keep`; answers how many. */
  pruneFinished(keep: number): number;
}

export interface SchedulerStorage extends Transactions {
  readonly scheduler: SchedulerRepository;
}

/**
 * The payloads of the CONTROL envelopes the scheduler sends an agent (content type application/json; README,
 * "Tasks for agent authors"). The agent answers each with protocol ACKs for that envelope's message_id:
 * - `run`: RECEIVED/READ (the agent started: SCHEDULED → RUNNING), then FULFILLED (task COMPLETED, the note is kept, and
 *   the ACK payload's `result` when it has one: TaskRecord.result, a workflow node's output) or FAILED with an error_code
 *   (task FAILED); FULFILLED with note `yielded` after a preempt_request also counts as the yield.
 * - `preempt_request`: FULFILLED with note `yielded` once at a safe point (the task goes back to the queue at its
 *   priority); or an ACK RECEIVED/READ with note `non_preemptible:<ms>` declares a non-preemptible section first
 *   (deferral, C.5).
 * - `terminate`: FULFILLED with note `terminated` within `grace_ms`, else the task is FAILED forced_preemption.
 * - `shutdown`: FULFILLED when the agent has stopped; the coordinator then deregisters it.
 */
export type ControlCommand =
  | {
      readonly command: 'run';
      readonly task_id: string;
      readonly params: unknown;
      readonly content_type: string;
      readonly scope: ScopeWire;
      readonly priority: number;
    }
  | {
      readonly command: 'preempt_request';
      readonly task_id: string;
      readonly reason: string;
      readonly by_task_id: string;
      readonly by_priority: number;
    }
  | { readonly command: 'terminate'; readonly task_id: string; readonly grace_ms: number; readonly reason: string }
  | { readonly command: 'shutdown'; readonly reason: string; readonly drain_timeout_seconds: number };

/** A task changed (submitted; dispatched, moved or ended). Pruned finished tasks fire nothing. */
export interface TaskChange {
  readonly kind: 'submitted' | 'changed';
  readonly task: TaskRecord;
}

/**
 * What the scheduler asks before it dispatches a task (RFC §9: max_parallel_instances, job uniqueness, scope
 * conflicts). Implemented by `ConcurrencyControl` (scheduler/concurrency.ts). It may open HITL invocations (CONFLICT
 * for a scope conflict, TASK_ESCALATION for a duplicate job) and remembers their decisions; when one settles it calls
 * `onDidChange` so that the scheduler tries to dispatch again.
 */
export interface DispatchGate {
  /** RFC §9.2 job identity: the same target, content type and params (a digest). */
  jobKey(target: string, contentType: string, params: Buffer): string;
  /**
   * At submission: refuse the same job while one with the same `jobKey` is queued or running, unless a human allowed
   * it. Answers undefined (go on), a refusal, or `{ pending: invocationId }` (the task is queued, waiting for the
   * decision; `mayStart` then answers waiting, go once approved, or `refuse` once denied; `onDidChange` fires on the decision).
   */
  admit(task: TaskRecord, open: readonly TaskRecord[], ctx: CallContext): GateAdmission;
  /**
   * Whether `task` may start now on `agent` given the running tasks: `{ go: true }`, or `{ go: false, waiting }`.
   * Must be cheap for the common case (no limit, no overlap): it runs on every dispatch attempt, so it asks the
   * scheduler's index (`RunningTasks`) for a count and the few overlap candidates, never walks every running task.
   */
  mayStart(task: TaskRecord, agentType: string, running: RunningTasks, ctx: CallContext): GateVerdict;
  /** The agent type a running task counts for under max_parallel_instances (the `RunningTasks` index keys on it). */
  typeOf(task: TaskRecord): string | undefined;
  /** A task ended or was cancelled: forget its pending decisions (cancel their invocations if still open). */
  forget(taskId: string, ctx: CallContext): void;
  readonly onDidChange: Event<void>;
}

/**
 * The running tasks as the gate asks about them: an index the scheduler keeps as tasks start and end
 * (`RunningIndex`, scheduler/concurrency.ts), so that one dispatch attempt costs O(log n + candidates), not O(running).
 */
export interface RunningTasks {
  /** How many running tasks count for agent type `type` (the gate's `typeOf`), not counting the task `exceptTaskId`. */
  countOfType(type: string, exceptTaskId?: string): number;
  /**
   * The running tasks whose scope could overlap `scope`, in the order they started: those sharing a declared resource
   * and, when `scope` touches files (a repository, a worktree or paths), those touching files in the same repository
   * or naming none (a scope without a repository is compared with every one that touches files). A superset:
   * `scopesOverlap` (overlap.ts) judges each; a scope touching no files and declaring no resources gets none.
   */
  mayOverlap(scope: TaskScope): readonly TaskRecord[];
}

/**
 * Go; wait (the reason is shown); or end the task: `refuse` when a human denied a duplicate job (or its invocation timed
 * out) — the scheduler then ends the task FAILED with `code` and `reason`.
 */
export type GateVerdict =
  | { readonly go: true }
  | { readonly go: false; readonly waiting: WaitingReason }
  | { readonly go: false; readonly refuse: { readonly code: string; readonly reason: string } };

export type GateAdmission =
  undefined | { readonly refused: true; readonly code: string; readonly reason: string } | { readonly pending: string };

/** RFC §9.3: a parallelism check of two scopes. `confidence` in [0, 1]: how safe it is to run them in parallel. */
export interface ParallelismVerdict {
  readonly confidence: number;
  readonly notes: string;
}

/**
 * The Inference Engine's parallelism check; the built-in one is `BuiltInScopeScorer` (scheduler/scorer.ts), the
 * coordinator's is `InferenceEngine` (reasoning/inferenceEngine.ts: an engine agent when one is online, else the built-in).
 * A verdict answered at once is decided in the same `mayStart`; a Promise makes the task wait (`conflict_check`) until it
 * settles, and the gate then announces the decision (onDidChange).
 */
export interface ParallelismScorer {
  /**
   * Throws (or rejects) when the engine is unavailable: the gate then applies `unavailableEngine`. A Promise must
   * settle — by its own timeout, and at the latest when the scorer is disposed: the gate does not bound it (a pair
   * whose check never settled would wait until a task of the pair ends). InferenceEngine settles every check within
   * its timeoutMs (10 s) and rejects those under way at dispose.
   */
  check(a: TaskScope, b: TaskScope, ctx?: CallContext): ParallelismVerdict | Promise<ParallelismVerdict>;
}
