import type * as grpc from '@grpc/grpc-js';
import { MAX_INVOCATION_BYTES } from '../core/hitl/request';
import { jsonBoundsRefusal } from '../core/json';

/**
 * Who a call acts as (README, "Security model"), declared once per RPC for all 57 canonical RPCs. A claim names
 * where in the request (or its metadata) an agent id says "I am this agent": an agent credential may only claim its
 * own agent, an enrolment credential the agents it enrolled (and, on RegisterAgent, an agent id nobody holds), the
 * operator anyone. `src/server/server.ts` checks every claim of every call before the handler runs, built RPCs
 * and UNIMPLEMENTED ones alike; the generated tests in test/integration/identity*.test.ts try each one.
 */
export type Claim =
  /** A request field, as a dotted path (`msg.producer_id`); an empty value claims nothing. */
  | { readonly field: string }
  /** A metadata key. */
  | { readonly metadata: string }
  /** A JSON object carried in a bytes field, and the keys in it that name the agent. */
  | { readonly json: string; readonly keys: readonly string[]; readonly maxBytes: number };

export interface IdentityRule {
  /** Every place that names the agent the caller acts as; empty when nothing in the request does. */
  readonly actsAs: readonly Claim[];
  /** RegisterAgent: an enrolment credential may claim an agent id nobody holds yet. */
  readonly registers?: boolean;
  /** Only the operator may call it (our own services). */
  readonly operatorOnly?: boolean;
  /** What the fields mean, or why none names an agent. */
  readonly note: string;
}

const field = (path: string): Claim => ({ field: path });
const none = (note: string): IdentityRule => ({ actsAs: [], note });
const acts = (note: string, ...claims: Claim[]): IdentityRule => ({ actsAs: claims, note });

/** Per canonical RPC path. A path missing here stops the server from starting (see `identityRule`). */
export const IDENTITY_RULES: Readonly<Record<string, IdentityRule>> = Object.freeze({
  // registry.proto
  '/sw4rm.registry.RegistryService/RegisterAgent': {
    ...acts('the agent registering', field('agent.agent_id')),
    registers: true,
  },
  '/sw4rm.registry.RegistryService/Heartbeat': acts('the agent beating', field('agent_id')),
  '/sw4rm.registry.RegistryService/DeregisterAgent': acts('the agent leaving', field('agent_id')),
  // router.proto
  '/sw4rm.router.RouterService/SendMessage': acts(
    'the producer (ACKs included: an ACK is sent by its recipient)',
    field('msg.producer_id'),
  ),
  '/sw4rm.router.RouterService/StreamIncoming': acts('whose inbox is streamed', field('agent_id')),
  '/sw4rm.router.RouterService/AckDelivery': acts('whose delivery is confirmed', field('agent_id')),
  // scheduler.proto
  '/sw4rm.scheduler.SchedulerService/SubmitTask': acts('the agent the task is submitted for', field('agent_id')),
  '/sw4rm.scheduler.SchedulerService/RequestPreemption': acts('the agent whose task is preempted', field('agent_id')),
  '/sw4rm.scheduler.SchedulerService/ShutdownAgent': acts(
    'the agent shut down (an agent may shut down only itself)',
    field('agent_id'),
  ),
  '/sw4rm.scheduler.SchedulerService/PollActivityBuffer': acts('whose activity buffer is read', field('agent_id')),
  '/sw4rm.scheduler.SchedulerService/PurgeActivity': acts('whose activity is purged', field('agent_id')),
  // scheduler_policy.proto (package sw4rm.scheduler)
  '/sw4rm.scheduler.SchedulerPolicyService/SetNegotiationPolicy': none(
    'no field names an agent (coordinator-wide policy)',
  ),
  '/sw4rm.scheduler.SchedulerPolicyService/GetNegotiationPolicy': none('no field names an agent'),
  '/sw4rm.scheduler.SchedulerPolicyService/SetPolicyProfiles': none(
    'no field names an agent (coordinator-wide profiles)',
  ),
  '/sw4rm.scheduler.SchedulerPolicyService/ListPolicyProfiles': none('no field names an agent'),
  '/sw4rm.scheduler.SchedulerPolicyService/GetEffectivePolicy': none('no field names an agent (negotiation_id only)'),
  '/sw4rm.scheduler.SchedulerPolicyService/SubmitEvaluation': none(
    'no field names an agent (negotiation_id and a report)',
  ),
  '/sw4rm.scheduler.SchedulerPolicyService/HitlAction': none(
    'no field names an agent (negotiation_id, action, rationale)',
  ),
  // worktree.proto
  '/sw4rm.worktree.WorktreeService/Bind': acts('the agent bound', field('agent_id')),
  '/sw4rm.worktree.WorktreeService/Unbind': acts('the agent unbound', field('agent_id')),
  '/sw4rm.worktree.WorktreeService/RequestSwitch': acts('the agent asking to switch', field('agent_id')),
  '/sw4rm.worktree.WorktreeService/ApproveSwitch': acts(
    "the agent whose switch is approved (who may approve is the worktree area's rule)",
    field('agent_id'),
  ),
  '/sw4rm.worktree.WorktreeService/RejectSwitch': acts('the agent whose switch is rejected', field('agent_id')),
  '/sw4rm.worktree.WorktreeService/Status': acts('whose binding is read', field('agent_id')),
  // tool.proto
  // tool.proto: no field names an agent; the caller is its agent credential's agent, else metadata sw4rm-agent-id (toolService.ts)
  '/sw4rm.tool.ToolService/Call': acts('the calling agent, whose worktree the tool works in', {
    metadata: 'sw4rm-agent-id',
  }),
  '/sw4rm.tool.ToolService/CallStream': acts('the calling agent, whose worktree the tool works in', {
    metadata: 'sw4rm-agent-id',
  }),
  '/sw4rm.tool.ToolService/Cancel': acts('the agent whose call is cancelled', { metadata: 'sw4rm-agent-id' }),
  // hitl.proto: the requester is metadata sw4rm-agent-id, else the context's requester / agent_id (hitlService.ts)
  '/sw4rm.hitl.HitlService/Decide': acts(
    'the requester',
    { metadata: 'sw4rm-agent-id' },
    { json: 'context', keys: ['requester', 'agent_id', 'agentId'], maxBytes: MAX_INVOCATION_BYTES },
  ),
  // negotiation.proto
  '/sw4rm.negotiation.NegotiationService/Open': none('no field names the caller (participants are the invited agents)'),
  '/sw4rm.negotiation.NegotiationService/Propose': acts('the proposer', field('from_agent')),
  '/sw4rm.negotiation.NegotiationService/Counter': acts('the counter-proposer', field('from_agent')),
  '/sw4rm.negotiation.NegotiationService/Evaluate': acts('the evaluator', field('from_agent')),
  '/sw4rm.negotiation.NegotiationService/Decide': none('no field names an agent (decided_by is consensus|hitl|policy)'),
  '/sw4rm.negotiation.NegotiationService/Abort': none('no field names an agent'),
  // negotiation_room.proto
  '/sw4rm.negotiation_room.NegotiationRoomService/SubmitProposal': acts(
    "the artifact's producer",
    field('proposal.producer_id'),
  ),
  '/sw4rm.negotiation_room.NegotiationRoomService/SubmitVote': acts('the critic voting', field('vote.critic_id')),
  '/sw4rm.negotiation_room.NegotiationRoomService/GetVotes': none('no field names an agent'),
  '/sw4rm.negotiation_room.NegotiationRoomService/GetDecision': none('no field names an agent'),
  '/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision': none('no field names an agent'),
  // handoff.proto
  '/sw4rm.handoff.HandoffService/RequestHandoff': acts(
    'the agent handing off (to_agent is the other side)',
    field('from_agent'),
  ),
  '/sw4rm.handoff.HandoffService/AcceptHandoff': acts('the agent accepting', field('accepting_agent')),
  '/sw4rm.handoff.HandoffService/RejectHandoff': acts(
    'the agent answering (HandoffResponse.accepting_agent)',
    field('accepting_agent'),
  ),
  '/sw4rm.handoff.HandoffService/GetPendingHandoffs': acts('whose pending handoffs are read', field('agent_id')),
  '/sw4rm.handoff.HandoffService/CompleteHandoff': none('no field names an agent (request_id, status)'),
  '/sw4rm.handoff.HandoffService/CancelDelegation': none('no field names an agent (correlation_id)'),
  // workflow.proto
  '/sw4rm.workflow.WorkflowService/CreateWorkflow': none(
    "no field names the caller; the handler lets an agent credential create a workflow only when it may act as every node's agent_id (type: targets: the operator only)",
  ),
  '/sw4rm.workflow.WorkflowService/StartWorkflow': none(
    "no field names an agent; the handler lets only the workflow's creator (or a credential that may act as it) and the operator start it",
  ),
  '/sw4rm.workflow.WorkflowService/GetWorkflowState': none(
    "no field names an agent; the handler lets the workflow's creator, an agent one of its nodes names, and the operator read it",
  ),
  '/sw4rm.workflow.WorkflowService/ResumeWorkflow': none(
    "no field names an agent; the handler lets only the workflow's creator (or a credential that may act as it) and the operator resume it",
  ),
  // connector.proto
  '/sw4rm.connector.ConnectorService/RegisterProvider': acts('the agent registering its tools', field('provider_id')),
  '/sw4rm.connector.ConnectorService/DescribeTools': none(
    "reads any provider's tools: provider_id names whose tools are listed, not the caller",
  ),
  // reasoning.proto
  '/sw4rm.reasoning.ReasoningProxy/CheckParallelism': none('no field names an agent'),
  '/sw4rm.reasoning.ReasoningProxy/EvaluateDebate': none('no field names an agent'),
  '/sw4rm.reasoning.ReasoningProxy/Summarize': none('no field names an agent (session_id)'),
  // activity.proto
  '/sw4rm.activity.ActivityService/AppendArtifact': none('no field names an agent (an artifact of a negotiation)'),
  '/sw4rm.activity.ActivityService/ListArtifacts': none('no field names an agent'),
  // logging.proto
  '/sw4rm.logging.LoggingService/Ingest': acts('the agent the event is logged as', field('agent_id')),
});

/** The rule of a path; throws for a path nobody declared, so that a new RPC cannot go unchecked. */
export function identityRule(
  path: string,
  rules: Readonly<Record<string, IdentityRule>> = IDENTITY_RULES,
): IdentityRule {
  const rule = Object.prototype.hasOwnProperty.call(rules, path) ? rules[path] : undefined;
  if (rule === undefined)
    throw new Error(
      `${path} has no identity rule: declare which fields name the acting agent in src/server/identity.ts`,
    );
  return rule;
}

/**
 * Runs `check` on every agent id the call claims to act as, in the table's order, and answers the first refusal
 * with the agent it concerned. Empty values claim nothing; fields are compared exactly, metadata and JSON trimmed
 * (as the handlers read them).
 */
export function firstRefusal(
  rule: IdentityRule,
  request: unknown,
  metadata: grpc.Metadata,
  check: (agentId: string) => string | undefined,
): { readonly agentId: string; readonly reason: string } | undefined {
  for (const claim of rule.actsAs) {
    for (const agentId of claimedBy(claim, request, metadata)) {
      const reason = check(agentId);
      if (reason !== undefined) return { agentId, reason };
    }
  }
  return undefined;
}

function claimedBy(claim: Claim, request: unknown, metadata: grpc.Metadata): string[] {
  if ('field' in claim) {
    const value = pathValue(request, claim.field);
    return typeof value === 'string' && value !== '' ? [value] : [];
  }
  if ('metadata' in claim)
    return metadata.get(claim.metadata).flatMap((value) => text(typeof value === 'string' ? value.trim() : ''));
  const bytes = pathValue(request, claim.json);
  if (!Buffer.isBuffer(bytes) || bytes.length === 0) return [];
  // Beyond its size or depth bounds it names nobody: the handler refuses it, and it is never parsed here.
  if (jsonBoundsRefusal(bytes, { what: claim.json, maxBytes: claim.maxBytes }) !== undefined) return [];
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString('utf8'));
  } catch {
    return []; // not JSON: it names nobody (the handler refuses it)
  }
  if (!isObject(body)) return [];
  // The keys count at the top level and in a nested `context` object, as HITL reads an invocation
  // (parseInvocationRequest): a requester named only in the nested object acts as much as one at the top.
  const sources = isObject(body.context) ? [body, body.context] : [body];
  return sources.flatMap((source) => claim.keys.flatMap((key) => text(source[key])));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Dotted paths split once: the check runs on every call. */
const splitPaths = new Map<string, readonly string[]>();

function pathValue(value: unknown, path: string): unknown {
  let parts = splitPaths.get(path);
  if (parts === undefined) splitPaths.set(path, (parts = path.split('.')));
  let node = value;
  for (const part of parts) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

function text(value: unknown): string[] {
  return typeof value === 'string' && value.trim() !== '' ? [value.trim()] : [];
}
