/**
 * Field limits: the one table of how long each string field and how long each list of a built RPC may be
 * (README "Limits"). Lengths are in UTF-16 code units (what proto-loader's strings measure) unless the name
 * says bytes. Identifiers additionally refuse NUL and other control characters, and U+FFFD: proto-loader
 * decodes invalid UTF-8 as U+FFFD, so an identifier holding it was not valid UTF-8 on the wire.
 */
export const FIELD_LIMITS = {
  envelope: {
    producer_id: 256,
    correlation_id: 256,
    idempotency_token: 256,
    parent_correlation_id: 256,
    repo_id: 256,
    worktree_id: 256,
    hlc_timestamp: 128,
    content_type: 256,
  },
  registry: {
    agent_id: 128,
    name: 200,
    description_words: 200,
    description_bytes: 8192,
    /** capabilities, modalities_supported, reasoning_connectors: entries per list and characters per entry. */
    list_entries: 256,
    list_entry: 512,
    public_key_bytes: 4096,
    heartbeat_state: 64,
    health_entries: 32,
    health_key: 128,
    health_value: 1024,
    deregister_reason: 4096,
  },
  hitl: {
    invocation_id: 128,
    requester: 256,
    correlation_id: 256,
    subject_field: 256,
    summary: 4096,
    proposed_actions: 32,
    proposed_action: 256,
  },
  worktree: {
    /** WorktreeService and WORKTREE_CONTROL: the agent whose binding it is, and the repository it binds in. */
    agent_id: 256,
    repo_id: 256,
  },
  scheduler: {
    /** SubmitTask `task_id`, the scope's `repo_id` and `worktree_id`, the target (agent id or `type:<name>`). */
    task_id: 128,
    target: 256,
    scope_repo_id: 256,
    scope_worktree_id: 256,
    /** The scope's path globs and declared resources: entries per list and characters per entry. */
    scope_entries: 64,
    scope_entry: 512,
    /** The scope as submitted (text or JSON). */
    scope_text: 65_536,
  },
  activity: {
    /** An activity entry (RFC §10): the ids it names, and its description (cut past 200 words, or past the characters). */
    agent_id: 256,
    task_id: 256,
    repo_id: 256,
    worktree_id: 256,
    branch: 256,
    description_words: 200,
    description_chars: 4096,
    /** ActivityService.AppendArtifact (activity.proto). */
    negotiation_id: 256,
    artifact_version: 64,
    artifact_content_type: 256,
    artifact_created_at: 64,
    artifact_content_bytes: 1024 * 1024,
  },
  logging: {
    event_type: 128,
    agent_id: 128,
    correlation_id: 256,
  },
  /** SchedulerPolicyService (server/services/schedulerPolicyService.ts): ids and texts of its requests. */
  policy: {
    negotiation_id: 256,
    profiles: 64,
    from_agent: 256,
    notes: 16_384,
    action: 64,
    rationale: 4096,
  },
  /** NegotiationRoomService (room/room.ts). */
  room: {
    artifact_id: 256,
    negotiation_room_id: 256,
    /** producer_id, critic_id and each requested critic: registry agent ids. */
    agent_id: 128,
    artifact_content_type: 256,
    artifact_bytes: 512 * 1024,
    requested_critics: 16,
    /** strengths, weaknesses, recommendations: entries per list and characters per entry. */
    vote_list_entries: 32,
    vote_list_entry: 1000,
    /** SchedulerPolicyService.HitlAction's rationale for a room (the HITL decision's limit). */
    rationale: 4096,
  },
  /** NegotiationService (negotiation/negotiations.ts; README, "Debates"). */
  negotiation: {
    negotiation_id: 256,
    topic: 1024,
    /** Open: participants per negotiation (each an agent id: registry.agent_id). */
    participants: 32,
    content_type: 256,
    /** A proposal's or a decision's bytes: its base64 must fit a NEGOTIATION envelope (1 MiB) with the event's fields. */
    payload_bytes: 512 * 1024,
    /**
     * A JSON proposal's values (jsonShape's count: 1 + each `{`, `[` and `,` outside strings; counted before JSON.parse):
     * a Counter parses the draft and the previous round (and the one before unless its bytes are the same) and
     * serializes two of them, and V8's walks of a 512 KiB object of 30,000 keys took 10–90 ms each. At 5,000 they add
     * a few ms to the round's own cost (README, "Debates"); at 10,000, 15–20 ms.
     */
    payload_json_values: 5_000,
    notes: 4096,
    reason: 4096,
    decided_by: 16,
    /** Metadata sw4rm-proposal-schema (a JSON Schema as text). */
    schema_bytes: 64 * 1024,
    /** Metadata sw4rm-negotiation-preferences (JSON). */
    preferences_bytes: 64 * 1024,
    profile: 64,
  },
  /**
   * HandoffService (handoff/handoffs.ts; README, "Handoffs"). Chosen so that a handoff_request NOTIFICATION without its
   * context always fits the 32 KiB NOTIFICATION limit; the context itself travels there only when it fits.
   */
  handoff: {
    request_id: 256,
    /** from_agent, to_agent, accepting_agent, redirect_to_agent_id, GetPendingHandoffs' agent_id: registry agent ids. */
    agent_id: 128,
    reason: 2048,
    /** capabilities_required: entries and characters per entry. */
    capabilities: 32,
    capability: 256,
    /** context_snapshot: the most bytes (a larger context goes by reference, e.g. a file in the worktree). */
    context_bytes: 1024 * 1024,
    rejection_reason: 2048,
    /** Metadata sw4rm-context-content-type, sw4rm-task-id, sw4rm-correlation-id, sw4rm-parent-request-id. */
    content_type: 256,
    task_id: 128,
    correlation_id: 256,
    /** CancelDelegation's reason, and the operator's rejection reason. */
    cancel_reason: 2048,
  },
  /** ConnectorService.RegisterProvider (tools/descriptors.ts). */
  connector: {
    tools: 256,
    tool_name: 128,
    schema_bytes: 64 * 1024,
    side_effects: 256,
    description: 1024,
  },
} as const;

const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Why an identifier cannot be accepted (too long, a control character such as NUL, or U+FFFD from invalid
 * UTF-8), or undefined. `field` names it in the reason, e.g. "repo_id is longer than 256 characters".
 */
export function identifierRefusal(field: string, value: string, max: number): string | undefined {
  if (value.length > max) return `${field} is longer than ${max} characters (${value.length})`;
  if (CONTROL.test(value)) return `${field} contains control characters (NUL included)`;
  if (value.includes('\uFFFD')) return `${field} is not valid UTF-8 (U+FFFD)`;
  return undefined;
}
