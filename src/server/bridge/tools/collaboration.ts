import { isoUtc } from '../../../core/clock';
import { FIELD_LIMITS } from '../../../core/fieldLimits';
import type { Speaker } from '../../../core/policy/speaker';
import { ARTIFACT_TYPES, type ArtifactType } from '../../../core/room/model';
import { MAX_PRIORITY, MIN_PRIORITY } from '../../../core/scheduler/model';
import { speakerOfBridgeCaller } from '../../speaker';
import type { BridgeToolContext, BridgeTool } from '../model';
import { refusing } from './errors';

const H = FIELD_LIMITS.handoff;
const R = FIELD_LIMITS.room;
/** The handoff area's own bound on `timeout` applies (HandoffOptions.maxTimeoutMs); this only keeps the number sane. */
const MAX_TIMEOUT_SECONDS = 7 * 24 * 3600;

/** The caller as the handoff and room areas see a speaker: its agent credential, as speakerOf makes it for a gRPC call. */
function speaker({ coordinator, caller }: BridgeToolContext): Speaker {
  return speakerOfBridgeCaller(caller, coordinator.credentials);
}

/**
 * request_handoff: HandoffService.RequestHandoff's core call (Handoffs.request) with from_agent = the caller. A retry
 * with the same request_id and the same request changes nothing (the area's rule); the answer is the handoff's state.
 */
export const REQUEST_HANDOFF: BridgeTool = {
  name: 'request_handoff',
  description:
    'Hand your work off to another agent (to_agent), or to any agent holding capabilities_required. The receiver gets the reason and context; ' +
    'the answer says whom it went to and its state. Give a request_id to retry safely.',
  inputSchema: {
    type: 'object',
    properties: {
      to_agent: {
        type: 'string',
        minLength: 1,
        maxLength: H.agent_id,
        description: 'The agent to hand off to; leave out to route by capabilities_required.',
      },
      reason: { type: 'string', minLength: 1, maxLength: H.reason },
      context: { description: 'What the receiver needs to continue: a JSON value (sent as application/json) or text.' },
      capabilities_required: {
        type: 'array',
        items: { type: 'string', minLength: 1, maxLength: H.capability },
        maxItems: H.capabilities,
      },
      priority: { type: 'integer', minimum: MIN_PRIORITY, maximum: MAX_PRIORITY },
      timeout_seconds: {
        type: 'number',
        exclusiveMinimum: 0,
        maximum: MAX_TIMEOUT_SECONDS,
        description: "How long to wait for an acceptance; default: the coordinator's.",
      },
      task_id: {
        type: 'string',
        minLength: 1,
        maxLength: H.task_id,
        description: 'The scheduler task being handed off (closed when the handoff completes).',
      },
      carry_worktree: { type: 'boolean', description: 'Bind the receiver to your worktree.' },
      request_id: {
        type: 'string',
        minLength: 1,
        maxLength: H.request_id,
        description: 'Yours; default a new id. A retry with the same id and request changes nothing.',
      },
    },
    required: ['reason'],
    additionalProperties: false,
  },
  async run(args, tool) {
    const { coordinator, caller, ctx } = tool;
    const context =
      args.context === undefined
        ? Buffer.alloc(0)
        : Buffer.from(typeof args.context === 'string' ? args.context : JSON.stringify(args.context), 'utf8');
    const record = await refusing(() =>
      coordinator.handoffs.request(
        {
          requestId: (args.request_id as string | undefined) ?? coordinator.ids.uuid(),
          fromAgent: caller.agentId,
          toAgent: (args.to_agent as string | undefined) ?? '',
          reason: args.reason as string,
          context,
          contextContentType:
            args.context === undefined ? '' : typeof args.context === 'string' ? 'text/plain' : 'application/json',
          capabilitiesRequired: (args.capabilities_required as string[] | undefined) ?? [],
          priority: (args.priority as number | undefined) ?? 0,
          timeoutMs: args.timeout_seconds === undefined ? null : Math.ceil((args.timeout_seconds as number) * 1000),
          budget: null,
          delegationPolicy: null,
          taskId: (args.task_id as string | undefined) ?? '',
          correlationId: '',
          parentRequestId: '',
          carryWorktree: args.carry_worktree === true,
        },
        speaker(tool),
        ctx,
      ),
    );
    await coordinator.store.whenDurable();
    return {
      request_id: record.requestId,
      state: record.state,
      to_agent: record.toAgent,
      requested_to: record.requestedTo,
      awaiting_operator: record.awaitingOperator,
      task_id: record.taskId,
      requested_at: isoUtc(record.requestedAt),
      expires_at: record.expiresAt === null ? null : isoUtc(record.expiresAt),
    };
  },
};

/** submit_proposal: NegotiationRoomService.SubmitProposal's core call (NegotiationRoom.submitProposal), producer_id = the caller. */
export const SUBMIT_PROPOSAL: BridgeTool = {
  name: 'submit_proposal',
  description:
    'Submit an artifact (requirements, a plan, code, a deployment) to a negotiation room for the requested critics to vote on. ' +
    'A new revision of your artifact: the same artifact_id after a REVISION_REQUESTED decision.',
  inputSchema: {
    type: 'object',
    properties: {
      artifact_type: { enum: [...ARTIFACT_TYPES] },
      artifact: { type: 'string', minLength: 1, description: 'The artifact (text; at most 512 KiB).' },
      artifact_content_type: { type: 'string', maxLength: R.artifact_content_type, description: 'Default text/plain.' },
      requested_critics: {
        type: 'array',
        items: { type: 'string', minLength: 1, maxLength: R.agent_id },
        minItems: 1,
        maxItems: R.requested_critics,
      },
      artifact_id: {
        type: 'string',
        minLength: 1,
        maxLength: R.artifact_id,
        description: 'Default: a new id. Yours again for a revision.',
      },
      negotiation_room_id: {
        type: 'string',
        minLength: 1,
        maxLength: R.negotiation_room_id,
        description: 'Default: a new room.',
      },
    },
    required: ['artifact_type', 'artifact', 'requested_critics'],
    additionalProperties: false,
  },
  async run(args, tool) {
    const { coordinator, caller, ctx } = tool;
    const result = await refusing(() =>
      coordinator.room.submitProposal(
        {
          artifactType: args.artifact_type as ArtifactType,
          artifactId: (args.artifact_id as string | undefined) ?? '',
          producerId: caller.agentId,
          artifact: Buffer.from(args.artifact as string, 'utf8'),
          contentType: (args.artifact_content_type as string | undefined) ?? 'text/plain',
          requestedCritics: args.requested_critics as string[],
          roomId: (args.negotiation_room_id as string | undefined) ?? '',
          createdAt: null,
        },
        speaker(tool),
        ctx,
      ),
    );
    await coordinator.store.whenDurable();
    return {
      artifact_id: result.artifactId,
      negotiation_room_id: result.roomId,
      revision: result.revision,
      producer_id: caller.agentId,
    };
  },
};

const LIST = {
  type: 'array',
  items: { type: 'string', maxLength: R.vote_list_entry },
  maxItems: R.vote_list_entries,
} as const;

/** submit_vote: NegotiationRoomService.SubmitVote's core call (NegotiationRoom.submitVote), critic_id = the caller. */
export const SUBMIT_VOTE: BridgeTool = {
  name: 'submit_vote',
  description:
    'Vote on an artifact you were asked to critique (its review request names artifact_id and negotiation_room_id): a score 0–10, ' +
    'your confidence 0–1, whether it passes, and your strengths / weaknesses / recommendations.',
  inputSchema: {
    type: 'object',
    properties: {
      artifact_id: { type: 'string', minLength: 1, maxLength: R.artifact_id },
      negotiation_room_id: { type: 'string', minLength: 1, maxLength: R.negotiation_room_id },
      score: { type: 'number', minimum: 0, maximum: 10 },
      confidence: { type: 'number', minimum: 0, maximum: 1 },
      passed: { type: 'boolean' },
      strengths: LIST,
      weaknesses: LIST,
      recommendations: LIST,
    },
    required: ['artifact_id', 'score', 'confidence', 'passed'],
    additionalProperties: false,
  },
  async run(args, tool) {
    const { coordinator, caller, ctx } = tool;
    const result = await refusing(() =>
      coordinator.room.submitVote(
        {
          artifactId: args.artifact_id as string,
          criticId: caller.agentId,
          score: args.score as number,
          confidence: args.confidence as number,
          passed: args.passed === true,
          strengths: (args.strengths as string[] | undefined) ?? [],
          weaknesses: (args.weaknesses as string[] | undefined) ?? [],
          recommendations: (args.recommendations as string[] | undefined) ?? [],
          roomId: (args.negotiation_room_id as string | undefined) ?? '',
          votedAt: null,
        },
        speaker(tool),
        ctx,
      ),
    );
    await coordinator.store.whenDurable();
    return { artifact_id: result.artifactId, critic_id: result.criticId };
  },
};

export const COLLABORATION_TOOLS: readonly BridgeTool[] = [REQUEST_HANDOFF, SUBMIT_PROPOSAL, SUBMIT_VOTE];
