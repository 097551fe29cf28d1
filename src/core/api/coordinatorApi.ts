import type { CredentialInfo, CredentialsChange, MintedCredential } from '../credentials/model';
import type { Event } from '../events';
import type { AuditEntry, AuditQuery, HitlInvocation } from '../hitl/model';
import type { HitlPolicy } from '../hitl/policy';
import type { ToolRule } from '../toolApproval/model';
import type { AgentRecord } from '../registry/model';
import type { DeadLetter, DeadLetterFilter } from '../router/model';
import type { InboxStats, SendResult, StoreUsage } from '../router/router';
import type { CoordinatorSendInput, MessageDetail, MessageQuery, MessageSummary } from '../router/router';
import type { StoredEvent } from '../log/model';
import type { BindingStatus } from '../worktree/bindings';
import type { MergePreview, UndoResult } from '../worktree/mergeBack';
import type { Snapshot } from '../worktree/snapshots';
import type { SubmitResult, TaskChange, TaskRecord } from '../scheduler/model';
import type { TaskCounts, TaskQuery } from '../scheduler/scheduler';
import type { ActivityChange, ActivityEntry, ActivityFilter } from '../activity/model';
import type { ActivityUsage } from '../activity/activityBuffer';
import type { ProviderInfo, ToolCallRecord, ToolsChange, ToolsQueries } from '../tools/model';
import type { PolicySet, RoomThresholds } from '../policy/model';
import type { PolicySettings } from '../policy/policies';
import type { NegotiationDecision, NegotiationRecord, NegotiationSummary, RoundRecord } from '../negotiation/model';
import type { AggregatedScore, ProposalRecord, RoomArtifactSummary, RoomDecision, VoteRecord } from '../room/model';
import type { HandoffChange, HandoffRecord } from '../handoff/model';
import type { BridgeEndpoints, LaunchesChange, LaunchPlan, LaunchProfile, LaunchRecord, LaunchRequest, ProfileAvailability, ProfileIssue } from '../launch/model';
import type { ValidationIssue, WorkflowCreateResult, WorkflowDetail, WorkflowFileIssue, WorkflowNodeDetail, WorkflowsChange, WorkflowSummary } from '../workflow/model';
import type {
  BindWorktreeRequest, WorktreeInfo, WorktreeMergeInfo, WorktreeMergeOptions, WorktreeMergeResult, WorktreePruneCandidate,
  WorktreeRemoval, WorktreeRepositoryInfo, WorktreesChange, WorktreeSetupEvent,
} from '../worktree/model';
import { DEFAULT_CODE, SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/** The records of the worktree section are the worktree area's (src/core/worktree/model.ts). */
export type {
  BindWorktreeRequest, WorktreeInfo, WorktreeMergeInfo, WorktreeMergeOptions, WorktreeMergeResult, WorktreePruneCandidate,
  WorktreeRemoval, WorktreeRepositoryInfo, WorktreesChange, WorktreeSetupEvent,
};

export type { StoreUsage };
export type { ActivityChange, ActivityEntry, ActivityFilter, ActivityUsage, SubmitResult, TaskChange, TaskCounts, TaskQuery, TaskRecord };
/** The bounds of the store's disk budget in MiB (sw4rm.storeBudgetMiB, --store-budget). */
export { MAX_MEMORY_BUDGET_MIB, MAX_STORE_BUDGET_MIB, MIN_MEMORY_BUDGET_MIB, MIN_STORE_BUDGET_MIB } from '../router/router';

/**
 * Everything the editor asks of, tells and hears from the coordinator. Queries and changes answer Promises,
 * changes to the coordinator's state arrive as events, and only plain data crosses: records that can be
 * copied (structured clone, JSON), never live core objects. `InProcessCoordinatorApi` implements it over a
 * coordinator in the same thread; a coordinator in a worker thread or another process implements the same
 * interface, so no view changes then.
 */
export interface CoordinatorApi {
  // ---------------------------------------------------------------- agents and their inboxes

  /** Every registered agent, ordered by agent id. */
  agents(): Promise<AgentRecord[]>;
  agent(agentId: string): Promise<AgentRecord | undefined>;
  /** How many agents are registered, and how many of them were heard from within the debounce window. */
  agentCounts(): Promise<AgentCounts>;
  /** An agent's inbox counts (zeros for an agent that has none yet). */
  inboxStats(agentId: string): Promise<InboxStats>;
  /**
   * How many times a message from an agent (or one the coordinator sent through the router) was delivered to its
   * recipient's inbox stream since this coordinator started; ACKs, NACKs, replies, heartbeats and notices do not
   * count. Changes arrive as `onDidChangeInbox`.
   */
  deliveredMessageCount(): Promise<number>;
  /** The router's back-pressure metrics (RFC §13) in the Prometheus text format. */
  metricsText(): Promise<string>;
  /** Where the store lives, for messages to the user. */
  storeLocation(): Promise<string>;
  /**
   * The store's size against its disk budget (RouterOptions.storeBudgetBytes): the running estimate admission
   * checks, read back from the store every few seconds. Poll it at a low rate (the status bar warns at 80%).
   */
  storeUsage(): Promise<StoreUsage>;

  readonly onDidChangeAgents: Event<AgentsChange>;
  /** An agent's inbox changed (admitted, delivered, acknowledged…); fires often, listeners coalesce. */
  readonly onDidChangeInbox: Event<InboxChange>;

  // ---------------------------------------------------------------- dead letters (RFC §21.1)

  /** Dead letters matching `filter`, newest first (requeued ones only when the filter includes them). */
  deadLetters(filter?: DeadLetterFilter): Promise<DeadLetter[]>;
  deadLetter(id: number): Promise<DeadLetter | undefined>;
  /** Dead letters not yet requeued. */
  deadLetterCount(): Promise<number>;
  /** The diagnostic bundle (JSON) of the dead letters matching `filter`. */
  exportDeadLetters(filter?: DeadLetterFilter): Promise<Record<string, unknown>>;
  /** Sends a dead letter again as a new message; a refusal is an answer, not an error. */
  requeueDeadLetter(id: number, options?: { readonly correlationId?: string }): Promise<RequeueResult>;

  readonly onDidChangeDeadLetters: Event<DeadLettersChange>;

  // ---------------------------------------------------------------- approvals (human in the loop, RFC §15)

  /** Pending invocations first (highest priority, then nearest deadline), then settled ones, newest first. */
  approvals(query?: ApprovalsQuery): Promise<HitlInvocation[]>;
  approval(id: string): Promise<HitlInvocation | undefined>;
  pendingApprovalCount(): Promise<number>;
  approvalAudit(query?: AuditQuery): Promise<AuditEntry[]>;
  /** The audit as one JSON document: every invocation with its decision and every audit record. */
  exportApprovalAudit(query?: AuditQuery): Promise<Record<string, unknown>>;
  /**
   * An operator's decision; answers the settled invocation. Rejects with a CoordinatorApiError: `not_found`,
   * `settled` (someone or something decided first) or `invalid` (an unknown action, a bad payload, or a missing or
   * blank rationale: every human decision says why, RFC §15.1).
   */
  decideApproval(id: string, decision: ApprovalDecision, operator: string): Promise<HitlInvocation>;
  /** Withdraws a pending invocation; the requester is answered `deny`. Rejects like `decideApproval`. */
  cancelApproval(id: string, operator: string, reason: string): Promise<HitlInvocation>;

  approvalPolicy(): Promise<HitlPolicy>;
  /** Replaces the HITL policy; rules and pause apply to invocations opened from then on. */
  setApprovalPolicy(policy: HitlPolicy, by: string): Promise<void>;
  /** The tool-use rules of CLI agents' approval hooks (sw4rm.approvals.toolRules; README, "Approvals for CLI agents"). */
  toolApprovalRules(): Promise<readonly ToolRule[]>;
  /** Replaces them (already checked by parseToolRules); they apply to the next tool use. */
  setToolApprovalRules(rules: readonly ToolRule[], by: string): Promise<void>;
  approvalsPaused(): Promise<boolean>;
  /** Pauses (no rule decides; every new invocation waits for a human) or resumes approvals. */
  setApprovalsPaused(paused: boolean, by: string): Promise<void>;

  /** Declares a human operator present (RFC §15.3) until `detachOperator`; while none is, fallbacks apply. */
  attachOperator(name: string): Promise<OperatorAttachment>;
  /** Ends an attachment; an unknown or already detached one is ignored. */
  detachOperator(attachmentId: string): Promise<void>;

  readonly onDidChangeApprovals: Event<ApprovalsChange>;
  /** The policy was replaced through this API (settings, pause). */
  readonly onDidChangeApprovalPolicy: Event<ApprovalPolicyChange>;

  // ---------------------------------------------------------------- credentials (README, "Security model")

  /** The agent and enrolment credentials this coordinator minted, revoked ones included, newest first; never secrets. */
  credentials(): Promise<CredentialInfo[]>;
  /**
   * Mints a credential bound to `agentId` (registered or not yet: an agent may be given its credential before it
   * starts). The token is in the answer this once; the coordinator keeps only its hash. Rejects `invalid` for an
   * agent id the registry would refuse.
   */
  mintAgentCredential(agentId: string, by: string, label?: string): Promise<MintedCredential>;
  /** Revokes a credential: calls with it are refused from then on, and streams opened with it end. */
  revokeCredential(credentialId: string, by: string): Promise<CredentialInfo>;
  readonly onDidChangeCredentials: Event<CredentialsChange>;

  // ---------------------------------------------------------------- messages (the Messages view, Send Message…)

  /**
   * Recent routed messages matching `query` (agent as producer or recipient, correlation id, state, message type),
   * newest first, at most `query.limit` (200; 1,000 at most), among the newest MESSAGE_SCAN_WINDOW messages. They
   * change with every inbox change (`onDidChangeInbox`): refresh throttled.
   */
  messages(query?: MessageQuery): Promise<MessageSummary[]>;
  /** A message's envelope, payload as text (or why it is no longer stored) and lifecycle history; undefined once pruned. */
  message(messageId: string): Promise<MessageDetail | undefined>;
  /**
   * Sends a DATA message as `coordinator` to a registered agent through the router's normal admission path. A
   * refusal is an answer (its SW4RM code and reason), not an error.
   */
  sendMessage(message: CoordinatorSendInput, by: string): Promise<SendResult>;
  /** The newest `limit` (200) log events about an agent (its own, and those naming it), oldest first. */
  agentEvents(agentId: string, limit?: number): Promise<StoredEvent[]>;
  /** Deregisters an agent through the registry (its inbox's messages end as when it leaves); false if it was not registered. */
  deregisterAgent(agentId: string, by: string): Promise<boolean>;

  // ---------------------------------------------------------------- worktrees (RFC §16; README, "Worktrees")

  /** The workspace's git repositories as repo_ids, ordered by id. */
  worktreeRepositories(): Promise<WorktreeRepositoryInfo[]>;
  /**
   * Every agent worktree (branch `sw4rm/<id>`) of every repository, ordered by repo_id then worktree id, with the
   * agents bound to it (home or switched in) and its newest snapshot. Reads git: call it on changes, not in a loop.
   */
  worktrees(): Promise<WorktreeInfo[]>;
  /** Every agent's binding that is not UNBOUND, ordered by agent id. */
  worktreeBindings(): Promise<BindingStatus[]>;
  /**
   * Binds an agent to a worktree as its home (as WorktreeService.Bind does): an existing worktree, or a new one on
   * `sw4rm/<worktreeId>` from `base` (a branch or commit; default the repository's HEAD), set up after it is created
   * (copy globs, setup command; `onDidRunWorktreeSetup`). A failed bind is an answer (state BIND_FAILED, its
   * reason), not an error; a refused one (a bad id, a state that does not allow BIND) rejects `invalid`.
   */
  bindAgentToWorktree(request: BindWorktreeRequest, by: string): Promise<BindingStatus>;
  /** A worktree's snapshots, newest first (also those of a worktree already removed). Rejects `not_found` for an unknown repo_id. */
  worktreeSnapshots(repoId: string, worktreeId: string): Promise<Snapshot[]>;
  /**
   * Writes a snapshot's files back into its worktree, after snapshotting the current state (answered as `before`, so
   * the restore can be undone). Rejects `not_found` (no such worktree or snapshot).
   */
  restoreWorktreeSnapshot(repoId: string, worktreeId: string, snapshotRef: string, by: string): Promise<{ readonly before: Snapshot }>;
  /**
   * Removes a worktree through git. Without `confirmed`, one with uncommitted files or unmerged commits is refused
   * (`refused`, reason `dirty` / `unmerged`); with it, a snapshot is written first and the branch is kept. Never one an
   * agent is bound to (`refused`, reason `bound`) nor a locked one (`locked`).
   */
  removeWorktree(repoId: string, worktreeId: string, options: { readonly confirmed: boolean }, by: string): Promise<WorktreeRemoval>;
  /** What `pruneWorktrees` would forget: worktrees whose folder is gone, in every repository (or one). Deletes nothing. */
  pruneWorktreesPlan(repoId?: string): Promise<WorktreePruneCandidate[]>;
  /** Prunes exactly the candidates listed (those no longer stale are skipped); answers the ones pruned. */
  pruneWorktrees(candidates: readonly WorktreePruneCandidate[], by: string): Promise<WorktreePruneCandidate[]>;
  /**
   * Merge back, first step: what merging `sw4rm/<worktreeId>` into the target would do, computed without touching
   * anything (the predicted conflicts, the agent's commits, the changed files, the diff). Rejects `refused` with the
   * reason (the main checkout has uncommitted changes, the target is checked out in another worktree, …).
   */
  previewMerge(repoId: string, worktreeId: string, options: WorktreeMergeOptions): Promise<MergePreview>;
  /**
   * Merge back: previews, and unless conflicts are predicted asks for approval through a HITL invocation carrying the
   * diff (the Approvals view and panel; the approval policy applies), then merges, squashes or rebases. Answers how it
   * ended; a merged one can be undone with `undoMerge` (also after a restart).
   */
  mergeBack(repoId: string, worktreeId: string, options: WorktreeMergeOptions, by: string): Promise<WorktreeMergeResult>;
  /** Merges that can still be undone, newest first. */
  worktreeMerges(repoId?: string): Promise<WorktreeMergeInfo[]>;
  /** Undoes a merge: the target goes back to its pre-merge state from the snapshot. Rejects `not_found`, or `refused` if the target moved since. */
  undoMerge(mergeId: string, by: string): Promise<UndoResult>;

  /** A binding changed, a worktree was created, removed, pruned, restored or merged. Refresh throttled. */
  readonly onDidChangeWorktrees: Event<WorktreesChange>;
  /** A binding has been BIND_FAILED for the bind recovery timeout (60 s, RFC §16.3): tell the operator. */
  readonly onDidNeedWorktreeOperator: Event<BindingStatus>;
  /** Output of a worktree's setup (copied files, the setup command's output, how it ended), as it happens. */
  readonly onDidRunWorktreeSetup: Event<WorktreeSetupEvent>;

  // ---------------------------------------------------------------- tasks (RFC §7–§9; README, "Tasks")

  /** Open tasks in dispatch order (priority, then arrival), then finished ones, newest first. */
  tasks(query?: TaskQuery): Promise<TaskRecord[]>;
  task(taskId: string): Promise<TaskRecord | undefined>;
  /** How many tasks are queued and running (the Tasks view's counts when it lists only the first of them). */
  taskCounts(): Promise<TaskCounts>;
  /**
   * Submits a task as SubmitTask does, as `by` (`editor:<name>`). A refusal is an answer (`accepted: false`, its SW4RM
   * code and reason), not an error; an accepted one may say why it waits (max_parallel_instances, a conflict decision).
   */
  submitTask(submission: TaskSubmissionInput, by: string): Promise<SubmitResult>;
  /** Asks the agent running the task to yield (RFC §7.2). Rejects `not_found`, or `refused` when it is not running. */
  preemptTask(taskId: string, reason: string, by: string): Promise<TaskRecord>;
  /** Cancels a task (a running one is told `terminate`). Rejects `not_found`, or `refused` when it already ended. */
  cancelTask(taskId: string, reason: string, by: string): Promise<TaskRecord>;
  /** ShutdownAgent (RFC §8.4): SHUTTING_DOWN with `graceMs` (default 30 s), then out of the registry. Rejects `not_found` / `refused`. */
  shutdownAgent(agentId: string, graceMs: number | undefined, by: string): Promise<void>;
  /** The task's log events (correlation id = task id), oldest first, at most `limit` (200). */
  taskEvents(taskId: string, limit?: number): Promise<StoredEvent[]>;
  /** The task's CONTROL envelopes and their ACKs (correlation id = task id), newest first. */
  taskMessages(taskId: string): Promise<MessageSummary[]>;
  /** Replaces the max_parallel_instances limits per agent type (settings); tasks waiting on a limit are tried again. */
  setMaxParallelInstances(limits: Readonly<Record<string, number>>, defaultLimit: number, by: string): Promise<void>;
  readonly onDidChangeTasks: Event<TaskChange>;

  // ---------------------------------------------------------------- activity (RFC §10)

  /** Active entries matching `filter`, newest first. */
  activity(filter?: ActivityFilter): Promise<ActivityEntry[]>;
  /** Ended entries (the recent history) matching `filter`, newest ended first. */
  activityHistory(filter?: ActivityFilter, limit?: number): Promise<ActivityEntry[]>;
  /** How full the buffer is (a warning from 80%). */
  activityUsage(): Promise<ActivityUsage>;
  /** An entry was added or ended, or entries were purged (a live feed). */
  readonly onDidChangeActivity: Event<ActivityChange>;

  // ---------------------------------------------------------------- tools (RFC §18; README, "Tools view")

  /** Every tool provider (built in and agents), with its tools and whether it takes calls now. */
  toolProviders(): Promise<ProviderInfo[]>;
  /** The newest calls, newest first: at most `limit` (100). */
  toolCalls(limit?: number): Promise<ToolCallRecord[]>;
  /** A call's record and the frames kept for it (none after a restart); undefined when the call is no longer kept. */
  toolCallDetails(callId: string): Promise<ToolCallDetails | undefined>;
  /**
   * Cancels a call as its caller would (RFC §18.6): CANCELLED (the caller gets a terminal frame), ALREADY_COMPLETED or
   * NOT_FOUND, as an answer; logged as done by `by`.
   */
  cancelToolCall(callId: string, by: string): Promise<ToolCancelResult>;
  /** A provider registered, changed availability or left, or a call started, progressed or ended. Refresh throttled. */
  readonly onDidChangeTools: Event<ToolsChange>;

  // ---------------------------------------------------------------- negotiation policy (RFC §17.2)

  /** The negotiation policy set in force (its newest version). */
  negotiationPolicy(): Promise<PolicySet>;
  /**
   * The editor's sw4rm.negotiation.* settings (laid over the newest version): a new version when anything differs, the
   * same one otherwise. Rejects `invalid` with the field named (`policy.max_rounds: must be within …`).
   */
  applyNegotiationSettings(settings: PolicySettings): Promise<PolicySet>;
  // ---------------------------------------------------------------- negotiations (RFC §17; README, "Negotiations view")

  /** Debates: open and paused first, then the most recently updated; at most `limit` (100; 1,000 at most). */
  negotiations(limit?: number): Promise<NegotiationSummary[]>;
  /** A debate with its rounds, payloads as bounded text; undefined for an unknown id. */
  negotiationDetail(negotiationId: string): Promise<NegotiationDetailView | undefined>;
  /** Room artifacts (their newest revision): voting and escalated first, then the most recently updated; at most `limit` (100; 1,000 at most). */
  roomArtifacts(limit?: number): Promise<RoomArtifactSummary[]>;
  /** An artifact's newest revision, the previous one (for the diff), its votes, aggregate, thresholds and decision; undefined when unknown. */
  roomArtifactDetail(artifactId: string): Promise<RoomArtifactDetailView | undefined>;
  /** A debate or a room artifact changed state (opened, a round, a vote, escalated, decided…). Refresh throttled. */
  readonly onDidChangeNegotiations: Event<NegotiationsChange>;

  // ---------------------------------------------------------------- handoffs (RFC §17.6; README, "Handoffs")

  /** Handoffs: pending first, then the most recently updated; at most `limit` (100; 1,000 at most). */
  handoffs(limit?: number): Promise<HandoffView[]>;
  handoff(requestId: string): Promise<HandoffView | undefined>;
  /**
   * The operator takes a handoff that policy routed to a person (`awaitingOperator`): ACCEPTED by `operator:<by>`.
   * Rejects `not_found`, or `refused` when it is not waiting for a person.
   */
  acceptHandoff(requestId: string, by: string): Promise<HandoffView>;
  /** The operator declines it: REJECTED with `reason` (required). Same refusals as acceptHandoff. */
  rejectHandoff(requestId: string, reason: string, by: string): Promise<HandoffView>;
  readonly onDidChangeHandoffs: Event<HandoffChange>;

  // ---------------------------------------------------------------- workflows (RFC §17.7; README, "Workflows")

  /** Workflows: running and waiting first, then the most recently updated; at most `limit` (100; 1,000 at most). */
  workflows(limit?: number): Promise<WorkflowSummary[]>;
  /**
   * A workflow's definition, data and its nodes' states — the first `maxNodes` in the definition's order (every node
   * when omitted; summary.nodeCount and summary.counts cover all of them) — without any node's inputs; undefined for an
   * unknown id. The Workflows view asks for the nodes it shows: the answer costs that many nodes, not the workflow's size.
   */
  workflow(workflowId: string, maxNodes?: number): Promise<WorkflowDetail | undefined>;
  /**
   * Show Node Inputs and Outputs: one node with its inputs (as given to its last run, or, PENDING or READY, as it would be
   * given them now; none when SKIPPED), its workflow's summary and data; undefined for an unknown workflow or node.
   */
  workflowNode(workflowId: string, nodeId: string): Promise<WorkflowNodeDetail | undefined>;
  /**
   * Create Workflow from File: `text` is the file's JSON or YAML (workflow.proto's WorkflowDefinition in proto field
   * names), validated as CreateWorkflow validates; refusals come back with their place in the file, never thrown.
   */
  createWorkflowFromText(text: string, fileName: string, by: string): Promise<WorkflowCreateResult>;
  /**
   * StartWorkflow with initial data (JSON object text; '' = {}). Rejects `not_found` / `invalid` / `refused` (already started).
   * This and the three below answer the workflow with only its nodes that are not PENDING (at most 1,000).
   */
  startWorkflow(workflowId: string, data: string, by: string): Promise<WorkflowDetail>;
  /** Runs a MANUAL node that is READY (its dependencies COMPLETED). Rejects `not_found`, `refused` (not a MANUAL node or not ready). */
  runWorkflowNode(workflowId: string, nodeId: string, by: string): Promise<WorkflowDetail>;
  /** ResumeWorkflow: from `nodeId` again (it and what depends on it), with `data` (JSON object text) merged over workflow_data when given. */
  resumeWorkflow(workflowId: string, nodeId: string, data: string, by: string): Promise<WorkflowDetail>;
  /** Cancels a workflow: running tasks cancelled, nodes not finished SKIPPED, the workflow CANCELLED with `reason`. */
  cancelWorkflow(workflowId: string, reason: string, by: string): Promise<WorkflowDetail>;
  readonly onDidChangeWorkflows: Event<WorkflowsChange>;

  // ---------------------------------------------------------------- launched agents (README, "Launch your first agent")

  /**
   * The launch profiles: built in, then the `sw4rm.agents.profiles` setting's, then each repository's
   * `.sw4rm/agents.json` (a later one with the same id replaces an earlier one), with every refused entry as an issue.
   */
  launchProfiles(): Promise<{ readonly profiles: LaunchProfile[]; readonly issues: ProfileIssue[] }>;
  /** The `sw4rm.agents.profiles` setting's value as the editor read it (any JSON); answers its issues. */
  setLaunchProfileSettings(value: unknown): Promise<ProfileIssue[]>;
  /** Whether the profile's command is installed (found on PATH); asked before every launch. Rejects `not_found`. */
  profileAvailability(profileId: string): Promise<ProfileAvailability>;
  /**
   * SW4RM: Launch Agent…: registers a managed agent (descriptor from the profile), mints its agent credential,
   * creates and binds its worktree (setup first), writes the bridge, approval and instructions files into the worktree
   * (excluded from git by the worktree's own exclude file), and answers how to start the process. Rejects
   * `not_found` (profile, repository, worktree), `invalid` (agent id), `refused` (id taken by an agent not launched
   * here, worktree bound to another agent, command not installed, bridge not listening) with a message for the user.
   */
  launchAgent(request: LaunchRequest, by: string): Promise<LaunchPlan>;
  /** Relaunch: the same agent, worktree and credential again (a new credential if that one was revoked), wiring rewritten. */
  relaunchAgent(agentId: string, by: string): Promise<LaunchPlan>;
  /** The editor opened its terminal and the process runs: RUNNING. */
  launchStarted(agentId: string): Promise<LaunchRecord>;
  /**
   * Its process ended or its terminal was closed: EXITED with the exit code (null when unknown), and the agent's
   * registry lifecycle moves on (SHUTTING_DOWN); its history, worktree and inbox are kept. Idempotent.
   */
  launchExited(agentId: string, exitCode: number | null, by: string): Promise<LaunchRecord>;
  /** Every launched agent, newest first. */
  launches(): Promise<LaunchRecord[]>;
  launch(agentId: string): Promise<LaunchRecord | undefined>;
  readonly onDidChangeLaunches: Event<LaunchesChange>;
  /** Where the MCP bridge and the hook endpoint listen; undefined while the bridge is not listening. */
  bridgeEndpoints(): Promise<BridgeEndpoints | undefined>;
}

/** A handoff for the editor: the record without the context's bytes, the context as bounded text. */
export type HandoffView = Omit<HandoffRecord, 'context'> & { readonly context: PayloadText };

export type { BridgeEndpoints, LaunchesChange, LaunchPlan, LaunchProfile, LaunchRecord, LaunchRequest, ProfileAvailability, ProfileIssue };
export type { HandoffChange, HandoffRecord, ValidationIssue, WorkflowCreateResult, WorkflowDetail, WorkflowFileIssue, WorkflowNodeDetail, WorkflowsChange, WorkflowSummary };

/** The most bytes of one payload (a round's proposal, an artifact, a decision's result) shown as text. */
export const MAX_NEGOTIATION_PAYLOAD_SHOWN = 64 * 1024;

/**
 * A payload agents sent, for the editor: UTF-8 text (the first MAX_NEGOTIATION_PAYLOAD_SHOWN bytes), or nothing
 * but its size when the bytes are not UTF-8 (`binary`). Agent data: the views show it as text only.
 */
export interface PayloadText {
  readonly contentType: string;
  readonly bytes: number;
  readonly text: string;
  readonly binary: boolean;
  /** Only the first MAX_NEGOTIATION_PAYLOAD_SHOWN bytes are in `text`. */
  readonly truncated: boolean;
}

/** A debate's record for the editor: what it shows (not the core's delivery bookkeeping), the decision's result as text. */
export type NegotiationView = Pick<NegotiationRecord,
  'id' | 'correlationId' | 'topic' | 'participants' | 'intensity' | 'openedBy' | 'openedAt' | 'deadlineAt' | 'effective' | 'schema' | 'state'
  | 'rounds' | 'tokensUsed' | 'oscillations' | 'roundStartedAt' | 'pending' | 'abort' | 'updatedAt'> & {
  readonly decision: (Omit<NegotiationDecision, 'result'> & { readonly result: PayloadText }) | null;
};

export type RoundView = Omit<RoundRecord, 'payload'> & { readonly payload: PayloadText };

export interface NegotiationDetailView {
  readonly negotiation: NegotiationView;
  readonly rounds: readonly RoundView[];
}

export type ProposalView = Omit<ProposalRecord, 'artifact'> & { readonly artifact: PayloadText };

export interface RoomArtifactDetailView {
  readonly proposal: ProposalView;
  readonly previous: ProposalView | undefined;
  readonly votes: readonly VoteRecord[];
  readonly aggregate: AggregatedScore | null;
  readonly thresholds: RoomThresholds;
  readonly decision: RoomDecision | null;
}

export type NegotiationsChange =
  | { readonly kind: 'debate'; readonly id: string; readonly state: string }
  | { readonly kind: 'room'; readonly id: string; readonly roomId: string; readonly state: string };

/** One frame kept for a call's details: its number, whether final, its content type, its content as text (cut at 4 KiB). */
export type ToolCallFrameText = ReturnType<ToolsQueries['callFrames']>[number];

export interface ToolCallDetails {
  readonly record: ToolCallRecord;
  readonly frames: readonly ToolCallFrameText[];
}

export interface ToolCancelResult {
  readonly errorCode: 'CANCELLED' | 'NOT_FOUND' | 'ALREADY_COMPLETED';
  readonly message: string;
}

/** What the editor's Submit Task… form gives: SubmitTask's fields, params as text (JSON for application/json). */
export interface TaskSubmissionInput {
  /** '' lets the scheduler choose. */
  readonly taskId?: string;
  /** An agent id, or `type:<agent type>`. */
  readonly target: string;
  readonly priority: number;
  readonly params: string;
  readonly contentType?: string;
  readonly scope: string;
}

export interface AgentCounts {
  readonly registered: number;
  readonly online: number;
}

/** An agent joined, changed (descriptor, presence, state, heartbeat) or left. */
export type AgentsChange =
  | { readonly kind: 'joined' | 'updated' | 'presence' | 'state' | 'heartbeat'; readonly agentId: string; readonly agent: AgentRecord }
  | { readonly kind: 'left'; readonly agentId: string; readonly reason: string };

export interface InboxChange {
  readonly agentId: string;
}

export interface DeadLettersChange {
  readonly kind: 'added' | 'requeued' | 'pruned';
  /** The dead letter added or requeued. */
  readonly id?: number;
}

/**
 * Accepted with the new message's id, or refused with the SW4RM error code (e.g. DUPLICATE_DETECTED for one
 * already requeued) and why.
 */
export type RequeueResult = SendResult;

export interface ApprovalsQuery {
  readonly pendingOnly?: boolean;
  readonly limit?: number;
}

/** RFC §15.1: approve / deny / modify / defer, with a rationale (required, not blank); `modify` carries the edited payload (JSON). */
export interface ApprovalDecision {
  readonly action: string;
  readonly rationale?: string;
  readonly payload?: unknown;
}

export interface ApprovalsChange {
  readonly kind: 'opened' | 'settled' | 'extended';
  readonly invocation: HitlInvocation;
}

export interface ApprovalPolicyChange {
  readonly policy: HitlPolicy;
  readonly by: string;
}

export interface OperatorAttachment {
  readonly id: string;
  readonly name: string;
}

/**
 * Why a change was refused, in terms the user can act on; the message is meant to be shown as it is.
 * - `not_found`: no such invocation;
 * - `settled`: the invocation was already settled;
 * - `invalid`: the request itself cannot be accepted (`sw4rmCode` says which SW4RM error, e.g. VALIDATION_ERROR);
 * - `refused`: the operation would lose or break something now (`sw4rmCode` names the reason); the message says what to do;
 * - `stopped`: the coordinator behind this API has stopped.
 */
export type CoordinatorApiErrorCode = 'not_found' | 'settled' | 'invalid' | 'refused' | 'stopped';

export class CoordinatorApiError extends SwarmError {
  /**
   * `sw4rmCode`: the SW4RM error code, if any; for `refused`, the reason the operation was refused (a worktree's
   * `bound`, `dirty`, `unmerged`, `locked`…, a merge's `target_dirty`, `checked_out_elsewhere`…).
   */
  constructor(readonly code: CoordinatorApiErrorCode, message: string, readonly sw4rmCode?: string) {
    super(message);
    this.name = 'CoordinatorApiError';
  }

  override get errorKind(): ErrorKind {
    return this.code === 'settled' || this.code === 'refused' ? 'precondition' : this.code === 'stopped' ? 'unavailable' : this.code;
  }

  override get errorCode(): Sw4rmCode {
    return this.sw4rmCode ?? DEFAULT_CODE[this.errorKind];
  }
}
