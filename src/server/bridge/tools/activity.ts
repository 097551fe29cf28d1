import { ARTIFACT_KINDS } from '../../../core/activity/activityBuffer';
import { FIELD_LIMITS } from '../../../core/fieldLimits';
import { isoUtc } from '../../../core/clock';
import { speakerOfBridgeCaller } from '../../speaker';
import type { BridgeTool } from '../model';
import { fromReason, refusal, refusing } from './errors';

const L = FIELD_LIMITS.activity;
const HELD = new Set(['DISPATCHED', 'RUNNING', 'PREEMPTING']);

/**
 * report_activity: the caller's entry in the activity buffer (RFC §10: one entry per running task, made by the scheduler
 * when it sent the task) gets the caller's own words for what it is doing now, through ActivityBuffer.begin — the call
 * the scheduler makes, which replaces the entry of the same ⟨agent, task⟩ (logged `activity.added` with `replaced`),
 * keeping its repository, worktree, branch and start time. The buffer holds entries of running tasks only
 * (reconciliation purges the others), so an agent holding no task is refused FAILED_PRECONDITION.
 */
export const REPORT_ACTIVITY: BridgeTool = {
  name: 'report_activity',
  description:
    "Say what you are doing now on your current task (at most 200 words): it shows in the editor's Activity view. " +
    'Needs a task from the scheduler (current_task).',
  inputSchema: {
    type: 'object',
    properties: {
      description: {
        type: 'string',
        minLength: 1,
        maxLength: L.description_chars,
        description: 'What you are doing, at most 200 words (longer is cut).',
      },
      task_id: {
        type: 'string',
        minLength: 1,
        maxLength: L.task_id,
        description: 'Default: the task you are running.',
      },
    },
    required: ['description'],
    additionalProperties: false,
  },
  annotations: { idempotentHint: true },
  async run(args, { coordinator, caller, ctx }) {
    const { activity, scheduler, clock } = coordinator;
    const task =
      typeof args.task_id === 'string'
        ? scheduler.task(args.task_id)
        : scheduler
            .tasks({ agentId: caller.agentId, includeFinished: false })
            .find((t) => t.assignedAgentId === caller.agentId && HELD.has(t.state));
    if (!task || task.assignedAgentId !== caller.agentId || !HELD.has(task.state)) {
      throw refusal(
        'FAILED_PRECONDITION',
        typeof args.task_id === 'string'
          ? `task '${args.task_id}' is not a task you are running: activity is reported for your running task`
          : 'you hold no task: the activity buffer shows running tasks (current_task); send a message or use request_decision otherwise',
      );
    }
    const entry = activity.entries({ agentId: caller.agentId, taskId: task.taskId })[0];
    const place = coordinator.worktrees.placeOf(caller.agentId);
    await refusing(() =>
      activity.begin(
        {
          agentId: caller.agentId,
          taskId: task.taskId,
          repoId: entry?.repoId ?? (task.scope.repoId || place?.repoId || ''),
          worktreeId: entry?.worktreeId ?? (task.scope.worktreeId || place?.worktreeId || ''),
          branch: entry?.branch ?? place?.branch ?? '',
          timestamp: entry?.timestamp ?? clock.now(),
          description: args.description as string,
        },
        ctx,
      ),
    );
    await coordinator.store.whenDurable();
    const now = activity.entries({ agentId: caller.agentId, taskId: task.taskId })[0];
    return {
      task_id: task.taskId,
      description: now?.description ?? '',
      started_at: now ? isoUtc(now.timestamp) : null,
    };
  },
};

/**
 * append_artifact: ActivityService.AppendArtifact's core call (ActivityBuffer.appendArtifact) with the caller as the
 * speaker, its refusals as SW4RM codes: only a participant of the negotiation may append (PERMISSION_DENIED otherwise,
 * logged `activity.artifact_refused`, for an unknown negotiation alike), the check the gRPC adapter's call gets.
 */
export const APPEND_ARTIFACT: BridgeTool = {
  name: 'append_artifact',
  description:
    'Stores an artifact you produced (a contract, diff, decision, score or note) under a negotiation you take part in; ' +
    'the other participants and the editor list them in order.',
  inputSchema: {
    type: 'object',
    properties: {
      negotiation_id: {
        type: 'string',
        minLength: 1,
        maxLength: L.negotiation_id,
        description: 'The negotiation the artifact belongs to (you must be one of its participants).',
      },
      kind: { enum: [...ARTIFACT_KINDS] },
      content: {
        type: 'string',
        description: 'The artifact: text, or base64 with encoding "base64" (at most 1 MiB of content).',
      },
      encoding: { enum: ['utf8', 'base64'] },
      content_type: {
        type: 'string',
        maxLength: L.artifact_content_type,
        description: 'Default text/plain (utf8) or application/octet-stream (base64).',
      },
      version: { type: 'string', maxLength: L.artifact_version },
    },
    required: ['negotiation_id', 'kind', 'content'],
    additionalProperties: false,
  },
  async run(args, { coordinator, caller, ctx }) {
    const base64 = args.encoding === 'base64';
    const text = args.content as string;
    if (base64 && (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0))
      throw refusal('VALIDATION_ERROR', 'content is not valid base64 (RFC 4648, padded)');
    const content = base64 ? Buffer.from(text, 'base64') : Buffer.from(text, 'utf8');
    const result = coordinator.activity.appendArtifact(
      {
        negotiationId: args.negotiation_id as string,
        kind: args.kind as string,
        version: (args.version as string | undefined) ?? '',
        contentType:
          (args.content_type as string | undefined) ??
          (base64 ? 'application/octet-stream' : 'text/plain; charset=utf-8'),
        content,
        createdAt: '',
      },
      ctx,
      speakerOfBridgeCaller(caller, coordinator.credentials),
    );
    if (!result.ok) throw fromReason(result.reason);
    await coordinator.store.whenDurable();
    return { negotiation_id: args.negotiation_id, kind: args.kind, bytes: content.length };
  },
};

export const ACTIVITY_TOOLS: readonly BridgeTool[] = [REPORT_ACTIVITY, APPEND_ARTIFACT];
