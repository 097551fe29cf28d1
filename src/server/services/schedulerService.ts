import * as grpc from '@grpc/grpc-js';
import type { ActivityEntry } from '../../core/activity/model';
import type { Coordinator } from '../../core/coordinator';
import { FIELD_LIMITS, identifierRefusal } from '../../core/fieldLimits';
import { principalName } from '../../core/credentials/credentials';
import { principalOf } from '../auth';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';
import { statusOf } from '../errorStatus';
import { CoreError } from '../../core/kernel/errors';

/** ShutdownAgent without a grace_period (or a zero one): RFC §8.4's default drain time. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000;
/** The longest grace a ShutdownAgent may give: longer would keep a gone agent's tasks for good. */
export const MAX_SHUTDOWN_GRACE_MS = 86_400_000;
/** Task ids: the scheduler's field limit (SubmitTask's own fields are checked by Scheduler.submit). */
const MAX_TASK_ID = FIELD_LIMITS.scheduler.task_id;
/** PurgeActivity: task ids per call; RequestPreemption: characters of its reason. */
const MAX_PURGE_TASK_IDS = 10_000;
const MAX_REASON = 4096;
/** The trailer that says why RequestPreemption answered enqueued=false or ShutdownAgent ok=false (the proto has no field for it). */
export const REASON_TRAILER = 'sw4rm-reason';

interface DurationMessage {
  seconds?: string | number;
  nanos?: number;
}

interface SubmitTaskMessage {
  agent_id?: string;
  task_id?: string;
  priority?: number;
  params?: Buffer;
  content_type?: string;
  scope?: string;
}

interface ActivityEntryMessage {
  task_id: string;
  repo_id: string;
  worktree_id: string;
  branch: string;
  description: string;
  timestamp: string;
}

/** Bad input the proto has no refusal field for: INVALID_ARGUMENT, the SW4RM code first in the details. */
class InvalidArgument extends CoreError {
  constructor(message: string) {
    super('invalid', 'VALIDATION_ERROR', message);
  }
}

/** The gRPC status of a refused operation (statusOf: SchedulerError by its kind, InvalidArgument INVALID_ARGUMENT). */
const errorStatus = statusOf;

function check(refusal: string | undefined): void {
  if (refusal !== undefined) throw new InvalidArgument(refusal);
}

function requiredAgentId(agentId: string): string {
  if (agentId.trim() === '') throw new InvalidArgument('agent_id is required');
  check(identifierRefusal('agent_id', agentId, FIELD_LIMITS.registry.agent_id));
  return agentId;
}

/** grace_period → ms: absent or zero is the 30 s default; negative, or over a day, is refused. */
export function graceMsOf(duration: DurationMessage | null | undefined): number {
  if (!duration) return DEFAULT_SHUTDOWN_GRACE_MS;
  const seconds = Number(duration.seconds ?? 0);
  const nanos = duration.nanos ?? 0;
  if (!Number.isFinite(seconds)) throw new InvalidArgument('grace_period is not a number of seconds');
  if (seconds < 0 || nanos < 0) throw new InvalidArgument('grace_period may not be negative');
  const ms = seconds * 1000 + Math.floor(nanos / 1e6);
  if (ms === 0) return DEFAULT_SHUTDOWN_GRACE_MS;
  if (ms > MAX_SHUTDOWN_GRACE_MS)
    throw new InvalidArgument(`grace_period may be at most ${MAX_SHUTDOWN_GRACE_MS / 1000} s`);
  return ms;
}

/**
 * Who submitted a task, as the Tasks view shows it: the agent id of an agent credential, `operator`,
 * `enrolment:<credential id>`, or `anonymous` (auth none).
 */
function submitterOf(call: { readonly metadata: grpc.Metadata }): string {
  const principal = principalOf(call);
  if (principal === undefined) return 'anonymous';
  return principal.kind === 'agent' ? principal.agentId : principalName(principal);
}

function entryMessage(e: ActivityEntry): ActivityEntryMessage {
  return {
    task_id: e.taskId,
    repo_id: e.repoId,
    worktree_id: e.worktreeId,
    branch: e.branch,
    description: e.description,
    timestamp: new Date(e.timestamp).toISOString(),
  };
}

/** The `sw4rm-reason` trailer carrying a refusal's reason, or undefined when there is none. */
function reasonTrailer(reason: string | undefined): grpc.Metadata | undefined {
  if (reason === undefined) return undefined;
  const trailer = new grpc.Metadata();
  // Metadata values are ASCII: a reason with other characters is sent URI-encoded.
  trailer.set(REASON_TRAILER, /^[\x20-\x7e]*$/.test(reason) ? reason : encodeURIComponent(reason));
  return trailer;
}

/**
 * sw4rm.scheduler.SchedulerService over the core's Scheduler and ActivityBuffer (RFC §7, §8.4, §10): SubmitTask
 * (a refusal is accepted=false with reason "<CODE>: <why>"), RequestPreemption, ShutdownAgent (grace_period, default
 * 30 s), PollActivityBuffer (the agent's active entries, timestamps ISO-8601 UTC) and PurgeActivity. identity.ts checks
 * that an agent credential acts only for its own agent_id.
 */
export class SchedulerServiceAdapter {
  static readonly serviceName = 'sw4rm.scheduler.SchedulerService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { scheduler, activity, ids, store } = this.coordinator;
    type Unary<Req, Res> = (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => void;
    const unary =
      <Req, Res>(
        work: (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => void,
      ): Unary<Req, Res> =>
      (call, callback) => {
        try {
          work(call, callback);
        } catch (err) {
          callback(errorStatus(err));
        }
      };
    return {
      SubmitTask: unary<SubmitTaskMessage, { accepted: boolean; reason: string }>((call, callback) => {
        const {
          agent_id = '',
          task_id = '',
          priority = 0,
          params = Buffer.alloc(0),
          content_type = '',
          scope = '',
        } = call.request;
        // Scheduler.submit checks every field and logs a refusal (task.refused); its reason starts with the code.
        const result = scheduler.submit(
          {
            taskId: task_id,
            target: agent_id,
            priority,
            params: Buffer.from(params),
            contentType: content_type,
            scope,
            submittedBy: submitterOf(call),
          },
          callContext(call, ids),
        );
        answerWhenDurable(store, callback, { accepted: result.accepted, reason: result.reason });
      }),
      RequestPreemption: unary<{ agent_id?: string; task_id?: string; reason?: string }, { enqueued: boolean }>(
        (call, callback) => {
          const { agent_id = '', task_id = '', reason = '' } = call.request;
          requiredAgentId(agent_id);
          check(identifierRefusal('task_id', task_id, MAX_TASK_ID));
          if (reason.length > MAX_REASON) throw new InvalidArgument(`reason is longer than ${MAX_REASON} characters`);
          const answer = scheduler.preempt(agent_id, task_id, reason, callContext(call, ids));
          answerWhenDurable(
            store,
            callback,
            { enqueued: answer.enqueued },
            undefined,
            reasonTrailer(answer.enqueued ? undefined : answer.reason),
          );
        },
      ),
      ShutdownAgent: unary<{ agent_id?: string; grace_period?: DurationMessage | null }, { ok: boolean }>(
        (call, callback) => {
          const agentId = requiredAgentId(call.request.agent_id ?? '');
          const graceMs = graceMsOf(call.request.grace_period);
          const ctx = callContext(call, ids);
          const answer = scheduler.shutdownAgent(
            agentId,
            graceMs,
            `ShutdownAgent by ${ctx.principal ?? 'anonymous'}`,
            ctx,
          );
          answerWhenDurable(
            store,
            callback,
            { ok: answer.ok },
            undefined,
            reasonTrailer(answer.ok ? undefined : answer.reason),
          );
        },
      ),
      PollActivityBuffer: unary<{ agent_id?: string }, { entries: ActivityEntryMessage[] }>((call, callback) => {
        const agentId = requiredAgentId(call.request.agent_id ?? '');
        callback(null, { entries: activity.entries({ agentId }).map(entryMessage) });
      }),
      PurgeActivity: unary<{ agent_id?: string; task_ids?: string[] }, { purged: number }>((call, callback) => {
        const agentId = requiredAgentId(call.request.agent_id ?? '');
        const taskIds = call.request.task_ids ?? [];
        if (taskIds.length > MAX_PURGE_TASK_IDS)
          throw new InvalidArgument(
            `task_ids has ${taskIds.length} entries; at most ${MAX_PURGE_TASK_IDS} are allowed`,
          );
        for (const id of taskIds) check(identifierRefusal('task_ids entry', id, MAX_TASK_ID));
        const purged = activity.purge(agentId, taskIds, callContext(call, ids));
        answerWhenDurable(store, callback, { purged });
      }),
    };
  }
}
