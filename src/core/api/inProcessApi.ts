import type { Coordinator } from '../coordinator';
import { CredentialError } from '../credentials/credentials';
import type { CredentialInfo, CredentialsChange, MintedCredential } from '../credentials/model';
import { Emitter, type Disposable } from '../events';
import { HitlStateError } from '../hitl/hitlService';
import type { AuditEntry, AuditQuery, HitlInvocation } from '../hitl/model';
import type { HitlPolicy } from '../hitl/policy';
import { HitlRequestError } from '../hitl/request';
import type { AgentRecord } from '../registry/model';
import type { DeadLetter, DeadLetterFilter } from '../router/model';
import type { InboxStats, StoreUsage } from '../router/router';
import type { CoordinatorSendInput, MessageDetail, MessageQuery, MessageSummary, SendResult } from '../router/router';
import type { StoredEvent } from '../log/model';
import { BindingRequestError, BindingStateError, type BindingStatus } from '../worktree/bindings';
import { MergeRefusedError, type MergePreview, type UndoResult } from '../worktree/mergeBack';
import { WorktreeOperationError } from '../worktree/operations';
import { InvalidWorktreeIdError, type Snapshot } from '../worktree/snapshots';
import { WorktreeRefusedError } from '../worktree/worktrees';
import { SchedulerError, type TaskCounts, type TaskQuery } from '../scheduler/scheduler';
import type { SubmitResult, TaskChange, TaskRecord } from '../scheduler/model';
import type { ActivityChange, ActivityEntry, ActivityFilter } from '../activity/model';
import type { ActivityUsage } from '../activity/activityBuffer';
import type { CallContext } from '../context';
import type { ProviderInfo, ToolCallRecord, ToolsChange } from '../tools/model';
import type { PolicySet } from '../policy/model';
import type { PolicySettings } from '../policy/policies';
import { NegotiationError } from '../policy/speaker';
import {
  CoordinatorApiError,
  type AgentCounts, type AgentsChange, type ApprovalDecision, type ApprovalPolicyChange, type ApprovalsChange, type ApprovalsQuery,
  type BindWorktreeRequest, type CoordinatorApi, type DeadLettersChange, type InboxChange, type OperatorAttachment, type RequeueResult,
  type WorktreeInfo, type WorktreeMergeInfo, type WorktreeMergeOptions, type WorktreeMergeResult, type WorktreePruneCandidate, type WorktreeRemoval,
  type WorktreeRepositoryInfo, type WorktreesChange, type WorktreeSetupEvent, type TaskSubmissionInput,
  type ToolCallDetails, type ToolCancelResult,
  MAX_NEGOTIATION_PAYLOAD_SHOWN, type NegotiationDetailView, type NegotiationsChange, type PayloadText, type ProposalView, type RoomArtifactDetailView,
} from './coordinatorApi';
import type { NegotiationSummary } from '../negotiation/model';
import type { ProposalRecord, RoomArtifactSummary } from '../room/model';
import type { Event } from '../events';
import type { ToolRule } from '../toolApproval/model';
import type { HandoffChange, HandoffRecord } from '../handoff/model';
import type { ValidationIssue, WorkflowCreateResult, WorkflowDetail, WorkflowFileIssue, WorkflowNodeDetail, WorkflowsChange, WorkflowSummary } from '../workflow/model';
import { parseDefinitionTextOffThread } from '../workflow/definitionThread';
import { WorkflowError } from '../workflow/workflows';
import type { HandoffView } from './coordinatorApi';
import { LaunchError } from '../launch/launches';
import type { BridgeEndpoints, LaunchesChange, LaunchPlan, LaunchProfile, LaunchRecord, LaunchRequest, ProfileAvailability, ProfileIssue } from '../launch/model';

/** The calls Recent calls asks for when no limit is given, and the most it may ask for. */
const DEFAULT_TOOL_CALLS = 100;
const MAX_TOOL_CALLS = 1_000;
/** Debates and room artifacts the Negotiations view asks for when no limit is given, and the most it may ask for. */
const DEFAULT_NEGOTIATIONS = 100;
const MAX_NEGOTIATIONS = 1_000;
/** Workflows the Workflows view asks for when no limit is given, and the most it may ask for. */
const DEFAULT_WORKFLOWS = 100;
const MAX_WORKFLOWS = 1_000;

/**
 * The CoordinatorApi over a coordinator in this thread. Every call does its work at once (before the first
 * `await` of its caller), so the order of calls is the order of effects, as with direct calls; the answer is
 * a Promise all the same. Core events are passed on as they happen. After `dispose` (the coordinator is
 * stopping) calls reject with CoordinatorApiError `stopped` and no event fires.
 */
export class InProcessCoordinatorApi implements CoordinatorApi, Disposable {
  private readonly agentsChanged = new Emitter<AgentsChange>();
  readonly onDidChangeAgents = this.agentsChanged.event;
  private readonly inboxChanged = new Emitter<InboxChange>();
  readonly onDidChangeInbox = this.inboxChanged.event;
  private readonly deadLettersChanged = new Emitter<DeadLettersChange>();
  readonly onDidChangeDeadLetters = this.deadLettersChanged.event;
  private readonly approvalsChanged = new Emitter<ApprovalsChange>();
  readonly onDidChangeApprovals = this.approvalsChanged.event;
  private readonly policyChanged = new Emitter<ApprovalPolicyChange>();
  readonly onDidChangeApprovalPolicy = this.policyChanged.event;
  private readonly credentialsChanged = new Emitter<CredentialsChange>();
  readonly onDidChangeCredentials = this.credentialsChanged.event;
  private readonly worktreesChanged = new Emitter<WorktreesChange>();
  readonly onDidChangeWorktrees = this.worktreesChanged.event;
  private readonly worktreeOperatorNeeded = new Emitter<BindingStatus>();
  readonly onDidNeedWorktreeOperator = this.worktreeOperatorNeeded.event;
  private readonly worktreeSetupRan = new Emitter<WorktreeSetupEvent>();
  readonly onDidRunWorktreeSetup = this.worktreeSetupRan.event;
  private readonly tasksChanged = new Emitter<TaskChange>();
  readonly onDidChangeTasks = this.tasksChanged.event;
  private readonly activityChanged = new Emitter<ActivityChange>();
  readonly onDidChangeActivity = this.activityChanged.event;
  private readonly toolsChanged = new Emitter<ToolsChange>();
  readonly onDidChangeTools = this.toolsChanged.event;
  private readonly negotiationsChanged = new Emitter<NegotiationsChange>();
  readonly onDidChangeNegotiations = this.negotiationsChanged.event;
  private readonly subscriptions: Disposable[];
  private readonly operators = new Map<string, Disposable>();
  private nextOperator = 1;
  private disposed = false;

  constructor(private readonly coordinator: Coordinator) {
    const { registry, router, hitl, credentials, worktreeOperations } = coordinator;
    this.subscriptions = [
      registry.onDidChange((change) => this.agentsChanged.fire(change.kind === 'left'
        ? { kind: 'left', agentId: change.agentId, reason: change.reason }
        : { kind: change.kind, agentId: change.agent.descriptor.agentId, agent: change.agent })),
      router.onDidChange(({ agentId }) => this.inboxChanged.fire({ agentId })),
      router.onDidChangeDeadLetters(({ kind, id }) => this.deadLettersChanged.fire(id === undefined ? { kind } : { kind, id })),
      hitl.onDidChange(({ kind, invocation }) => this.approvalsChanged.fire({ kind, invocation })),
      credentials.onDidChange((change) => this.credentialsChanged.fire(change)),
      worktreeOperations.onDidChange((change) => this.worktreesChanged.fire(change)),
      worktreeOperations.onDidNeedOperator((binding) => this.worktreeOperatorNeeded.fire(binding)),
      worktreeOperations.onDidRunSetup((event) => this.worktreeSetupRan.fire(event)),
      coordinator.scheduler.onDidChange((change) => this.tasksChanged.fire(change)),
      coordinator.activity.onDidChange((change) => this.activityChanged.fire(change)),
      coordinator.tools.onDidChange((change) => this.toolsChanged.fire({ kind: change.kind, id: change.id })),
      coordinator.negotiations.onDidChange((change) => this.negotiationsChanged.fire({ kind: 'debate', id: change.negotiationId, state: change.state })),
      coordinator.room.onDidChange((change) => this.negotiationsChanged.fire({ kind: 'room', id: change.artifactId, roomId: change.roomId, state: change.state })),
    ];
  }

  // ---------------------------------------------------------------- agents

  agents(): Promise<AgentRecord[]> {
    return this.run((c) => c.registry.list());
  }

  agent(agentId: string): Promise<AgentRecord | undefined> {
    return this.run((c) => c.registry.get(agentId));
  }

  agentCounts(): Promise<AgentCounts> {
    return this.run((c) => ({ registered: c.registry.list().length, online: c.registry.onlineCount() }));
  }

  inboxStats(agentId: string): Promise<InboxStats> {
    return this.run((c) => c.router.inboxStats(agentId));
  }

  deliveredMessageCount(): Promise<number> {
    return this.run((c) => c.router.deliveredMessageCount());
  }

  metricsText(): Promise<string> {
    return this.run((c) => c.router.metricsText());
  }

  storeLocation(): Promise<string> {
    return this.run((c) => c.store.location);
  }

  storeUsage(): Promise<StoreUsage> {
    return this.run((c) => c.router.storeUsage());
  }

  // ---------------------------------------------------------------- dead letters

  deadLetters(filter?: DeadLetterFilter): Promise<DeadLetter[]> {
    return this.run((c) => c.router.deadLetters(filter));
  }

  deadLetter(id: number): Promise<DeadLetter | undefined> {
    return this.run((c) => c.router.deadLetter(id));
  }

  deadLetterCount(): Promise<number> {
    return this.run((c) => c.router.deadLetterCount());
  }

  exportDeadLetters(filter?: DeadLetterFilter): Promise<Record<string, unknown>> {
    return this.run((c) => c.router.exportDeadLetters(filter));
  }

  requeueDeadLetter(id: number, options: { readonly correlationId?: string } = {}): Promise<RequeueResult> {
    return this.run((c) => c.router.requeue(id, { correlationId: options.correlationId || c.ids.uuid() }));
  }

  // ---------------------------------------------------------------- approvals

  approvals(query: ApprovalsQuery = {}): Promise<HitlInvocation[]> {
    return this.run((c) => c.hitl.list(query));
  }

  approval(id: string): Promise<HitlInvocation | undefined> {
    return this.run((c) => c.hitl.get(id));
  }

  pendingApprovalCount(): Promise<number> {
    return this.run((c) => c.hitl.pendingCount());
  }

  approvalAudit(query?: AuditQuery): Promise<AuditEntry[]> {
    return this.run((c) => c.hitl.auditTrail(query));
  }

  exportApprovalAudit(query?: AuditQuery): Promise<Record<string, unknown>> {
    return this.run((c) => c.hitl.exportAudit(query));
  }

  decideApproval(id: string, decision: ApprovalDecision, operator: string): Promise<HitlInvocation> {
    return this.run((c) => c.hitl.decide(id, { action: decision.action, rationale: decision.rationale, payload: decision.payload }, operator,
      { correlationId: this.correlationOf(id) }));
  }

  cancelApproval(id: string, operator: string, reason: string): Promise<HitlInvocation> {
    return this.run((c) => c.hitl.cancel(id, operator, reason, { correlationId: this.correlationOf(id) }));
  }

  approvalPolicy(): Promise<HitlPolicy> {
    return this.run((c) => c.hitl.policy);
  }

  setApprovalPolicy(policy: HitlPolicy, by: string): Promise<void> {
    return this.run((c) => this.replacePolicy(c, policy, by));
  }

  toolApprovalRules(): Promise<readonly ToolRule[]> {
    return this.run((c) => c.toolApprovals.rules);
  }

  setToolApprovalRules(rules: readonly ToolRule[], by: string): Promise<void> {
    return this.run((c) => c.toolApprovals.setRules(rules, by));
  }

  approvalsPaused(): Promise<boolean> {
    return this.run((c) => c.hitl.policy.paused);
  }

  setApprovalsPaused(paused: boolean, by: string): Promise<void> {
    return this.run((c) => this.replacePolicy(c, { ...c.hitl.policy, paused }, by));
  }

  attachOperator(name: string): Promise<OperatorAttachment> {
    return this.run((c) => {
      const id = `operator-${this.nextOperator++}`;
      this.operators.set(id, c.hitl.attachOperator(name));
      return { id, name };
    });
  }

  detachOperator(attachmentId: string): Promise<void> {
    return this.run(() => {
      const operator = this.operators.get(attachmentId);
      this.operators.delete(attachmentId);
      operator?.dispose();
    });
  }

  // ---------------------------------------------------------------- credentials

  credentials(): Promise<CredentialInfo[]> {
    return this.run((c) => c.credentials.list());
  }

  mintAgentCredential(agentId: string, by: string, label?: string): Promise<MintedCredential> {
    return this.run((c) => c.credentials.mintAgent(agentId, by, label ?? `minted by ${by} for agent ${agentId}`, { correlationId: c.ids.uuid() }));
  }

  revokeCredential(credentialId: string, by: string): Promise<CredentialInfo> {
    return this.run((c) => c.credentials.revoke(credentialId, by, { correlationId: c.ids.uuid() }));
  }

  // ---------------------------------------------------------------- messages

  messages(query?: MessageQuery): Promise<MessageSummary[]> {
    return this.run((c) => c.router.messages(query));
  }

  message(messageId: string): Promise<MessageDetail | undefined> {
    return this.run((c) => c.router.messageDetail(messageId));
  }

  sendMessage(message: CoordinatorSendInput, by: string): Promise<SendResult> {
    return this.run((c) => {
      const correlationId = message.correlationId || c.ids.uuid();
      const result = c.router.sendFromCoordinator({ ...message, correlationId }, { correlationId });
      c.log.record({
        correlationId, actor: by, eventType: 'operator.message_sent', level: result.accepted ? 'INFO' : 'WARN',
        details: { to: message.to.slice(0, 128), content_type: message.contentType, ...(result.accepted ? { message_id: result.messageId } : { error_code: result.code }) },
      });
      return result;
    });
  }

  agentEvents(agentId: string, limit = 200): Promise<StoredEvent[]> {
    return this.run((c) => c.log.query({ agentId, limit: Math.max(1, Math.min(limit, 10_000)) }));
  }

  deregisterAgent(agentId: string, by: string): Promise<boolean> {
    return this.run((c) => c.registry.deregister(agentId, `deregistered by ${by} from the editor`, { correlationId: c.ids.uuid() }));
  }

  // ---------------------------------------------------------------- worktrees

  worktreeRepositories(): Promise<WorktreeRepositoryInfo[]> {
    return this.run((c) => c.worktreeOperations.repositories());
  }

  worktrees(): Promise<WorktreeInfo[]> {
    return this.runAsync((c) => c.worktreeOperations.list());
  }

  worktreeBindings(): Promise<BindingStatus[]> {
    return this.run((c) => c.worktreeOperations.bindingList());
  }

  bindAgentToWorktree(request: BindWorktreeRequest, by: string): Promise<BindingStatus> {
    return this.runAsync((c) => c.worktreeOperations.bind(request, by));
  }

  worktreeSnapshots(repoId: string, worktreeId: string): Promise<Snapshot[]> {
    return this.runAsync((c) => c.worktreeOperations.snapshotsOf(repoId, worktreeId));
  }

  restoreWorktreeSnapshot(repoId: string, worktreeId: string, snapshotRef: string, by: string): Promise<{ readonly before: Snapshot }> {
    return this.runAsync((c) => c.worktreeOperations.restore(repoId, worktreeId, snapshotRef, by));
  }

  removeWorktree(repoId: string, worktreeId: string, options: { readonly confirmed: boolean }, by: string): Promise<WorktreeRemoval> {
    return this.runAsync((c) => c.worktreeOperations.remove(repoId, worktreeId, { confirmed: options.confirmed === true }, by));
  }

  pruneWorktreesPlan(repoId?: string): Promise<WorktreePruneCandidate[]> {
    return this.runAsync((c) => c.worktreeOperations.prunePlan(repoId));
  }

  pruneWorktrees(candidates: readonly WorktreePruneCandidate[], by: string): Promise<WorktreePruneCandidate[]> {
    return this.runAsync((c) => c.worktreeOperations.prune(candidates, by));
  }

  previewMerge(repoId: string, worktreeId: string, options: WorktreeMergeOptions): Promise<MergePreview> {
    return this.runAsync((c) => c.worktreeOperations.previewMerge(repoId, worktreeId, options));
  }

  mergeBack(repoId: string, worktreeId: string, options: WorktreeMergeOptions, by: string): Promise<WorktreeMergeResult> {
    return this.runAsync((c) => c.worktreeOperations.mergeBack(repoId, worktreeId, options, by));
  }

  worktreeMerges(repoId?: string): Promise<WorktreeMergeInfo[]> {
    return this.run((c) => c.worktreeOperations.merges(repoId));
  }

  undoMerge(mergeId: string, by: string): Promise<UndoResult> {
    return this.runAsync((c) => c.worktreeOperations.undoMerge(mergeId, by));
  }

  // ---------------------------------------------------------------- tasks and activity

  tasks(query?: TaskQuery): Promise<TaskRecord[]> {
    return this.run((c) => c.scheduler.tasks(query));
  }

  task(taskId: string): Promise<TaskRecord | undefined> {
    return this.run((c) => c.scheduler.task(taskId));
  }

  taskCounts(): Promise<TaskCounts> {
    return this.run((c) => c.scheduler.counts());
  }

  submitTask(submission: TaskSubmissionInput, by: string): Promise<SubmitResult> {
    return this.run((c) => c.scheduler.submit({
      taskId: submission.taskId ?? '', target: submission.target, priority: submission.priority,
      params: Buffer.from(submission.params, 'utf8'), contentType: submission.contentType ?? '', scope: submission.scope, submittedBy: by,
    }, { correlationId: submission.taskId || c.ids.uuid(), principal: 'operator' }));
  }

  preemptTask(taskId: string, reason: string, by: string): Promise<TaskRecord> {
    return this.run((c) => {
      const task = c.scheduler.task(taskId);
      if (!task) throw new SchedulerError('not_found', `There is no task ${taskId}.`);
      const answer = c.scheduler.preempt(task.assignedAgentId, taskId, reason || `preempted by ${by}`, { correlationId: taskId, principal: 'operator' });
      if (!answer.enqueued) throw new SchedulerError('refused', answer.reason);
      return c.scheduler.task(taskId) ?? task;
    });
  }

  cancelTask(taskId: string, reason: string, by: string): Promise<TaskRecord> {
    return this.run((c) => c.scheduler.cancel(taskId, reason || `cancelled by ${by}`, { correlationId: taskId, principal: 'operator' }));
  }

  shutdownAgent(agentId: string, graceMs: number | undefined, by: string): Promise<void> {
    return this.run((c) => {
      const answer = c.scheduler.shutdownAgent(agentId, graceMs ?? 30_000, `shut down by ${by}`, { correlationId: c.ids.uuid(), principal: 'operator' });
      if (!answer.ok) throw new SchedulerError(c.registry.get(agentId) ? 'refused' : 'not_found', answer.reason);
    });
  }

  taskEvents(taskId: string, limit = 200): Promise<StoredEvent[]> {
    return this.run((c) => c.log.query({ correlationId: taskId, limit }));
  }

  taskMessages(taskId: string): Promise<MessageSummary[]> {
    return this.run((c) => c.router.messages({ correlationId: taskId }));
  }

  setMaxParallelInstances(limits: Readonly<Record<string, number>>, defaultLimit: number, by: string): Promise<void> {
    return this.run((c) => {
      c.concurrency.setMaxParallelInstances(limits, defaultLimit);
      c.log.record({ correlationId: c.ids.uuid(), actor: by, eventType: 'scheduler.limits_changed', details: { max_parallel_instances: limits, default: defaultLimit } });
    });
  }

  activity(filter?: ActivityFilter): Promise<ActivityEntry[]> {
    return this.run((c) => c.activity.entries(filter));
  }

  activityHistory(filter?: ActivityFilter, limit?: number): Promise<ActivityEntry[]> {
    return this.run((c) => c.activity.history(filter, limit));
  }

  activityUsage(): Promise<ActivityUsage> {
    return this.run((c) => c.activity.usage());
  }

  // ---------------------------------------------------------------- tools

  toolProviders(): Promise<ProviderInfo[]> {
    return this.run((c) => c.tools.providers());
  }

  toolCalls(limit = DEFAULT_TOOL_CALLS): Promise<ToolCallRecord[]> {
    return this.run((c) => c.tools.recentCalls(Math.max(1, Math.min(Math.floor(limit) || DEFAULT_TOOL_CALLS, MAX_TOOL_CALLS))));
  }

  toolCallDetails(callId: string): Promise<ToolCallDetails | undefined> {
    return this.run((c) => {
      const record = c.tools.callRecord(callId);
      return record && { record, frames: [...c.tools.callFrames(callId)] };
    });
  }

  cancelToolCall(callId: string, by: string): Promise<ToolCancelResult> {
    return this.run((c) => {
      const record = c.tools.callRecord(callId);
      const ctx: CallContext = { correlationId: callId, principal: 'operator' };
      // The operator cancels as the caller would: the engine's own rules (CANCELLED / ALREADY_COMPLETED / NOT_FOUND).
      const result: ToolCancelResult = record
        ? c.tools.cancel(record.callerAgentId, record.providerId, callId, ctx)
        : { errorCode: 'NOT_FOUND', message: `no call '${callId.slice(0, 256)}' is kept` };
      c.log.record({
        correlationId: callId, actor: by, eventType: 'operator.tool_call_cancel', level: 'INFO',
        details: { call_id: callId.slice(0, 256), error_code: result.errorCode, ...(record ? { caller_agent_id: record.callerAgentId, provider_id: record.providerId, tool_name: record.toolName } : {}) },
      });
      return result;
    });
  }

  // ---------------------------------------------------------------- negotiations

  negotiations(limit = DEFAULT_NEGOTIATIONS): Promise<NegotiationSummary[]> {
    return this.run((c) => c.negotiations.list(boundedLimit(limit)));
  }

  negotiationDetail(negotiationId: string): Promise<NegotiationDetailView | undefined> {
    return this.run((c) => {
      const detail = c.negotiations.detail(negotiationId);
      if (!detail) return undefined;
      const r = detail.record;
      const decision = r.decision;
      return {
        negotiation: {
          id: r.id, correlationId: r.correlationId, topic: r.topic, participants: [...r.participants], intensity: r.intensity, openedBy: r.openedBy,
          openedAt: r.openedAt, deadlineAt: r.deadlineAt, effective: r.effective, schema: r.schema, state: r.state, rounds: r.rounds,
          tokensUsed: r.tokensUsed, oscillations: r.oscillations, roundStartedAt: r.roundStartedAt, pending: r.pending, abort: r.abort, updatedAt: r.updatedAt,
          decision: decision && { ...withoutKey(decision, 'result'), result: payloadText(decision.result, decision.contentType) },
        },
        rounds: detail.rounds.map((round) => ({ ...withoutKey(round, 'payload'), payload: payloadText(round.payload, round.contentType) })),
      };
    });
  }

  roomArtifacts(limit = DEFAULT_NEGOTIATIONS): Promise<RoomArtifactSummary[]> {
    return this.run((c) => c.room.listArtifacts(boundedLimit(limit)));
  }

  roomArtifactDetail(artifactId: string): Promise<RoomArtifactDetailView | undefined> {
    return this.run((c) => {
      const detail = c.room.artifactDetail(artifactId);
      if (!detail) return undefined;
      return {
        proposal: proposalView(detail.proposal),
        previous: detail.previous && proposalView(detail.previous),
        votes: detail.votes,
        aggregate: detail.aggregate,
        thresholds: detail.thresholds,
        decision: detail.decision,
      };
    });
  }

  // ---- handoffs (RFC §17.6)
  private handoffsChanged: Emitter<HandoffChange> | undefined;
  /** Subscribed to the core on first use (this block keeps its own state, so that the sections merge cleanly). */
  get onDidChangeHandoffs(): Event<HandoffChange> {
    if (this.disposed) return () => ({ dispose: () => undefined });
    if (!this.handoffsChanged) {
      const emitter = this.handoffsChanged = new Emitter<HandoffChange>();
      this.subscriptions.push(this.coordinator.handoffs.onDidChange((change) => { if (!this.disposed) emitter.fire(change); }), emitter);
    }
    return this.handoffsChanged.event;
  }

  handoffs(limit = DEFAULT_NEGOTIATIONS): Promise<HandoffView[]> {
    return this.run((c) => c.handoffs.recent(boundedLimit(limit)).map((r) => this.handoffView(r)));
  }

  handoff(requestId: string): Promise<HandoffView | undefined> {
    return this.run((c) => {
      const record = c.handoffs.get(requestId);
      return record && this.handoffView(record);
    });
  }

  acceptHandoff(requestId: string, by: string): Promise<HandoffView> {
    return this.run((c) => this.handoffView(c.handoffs.acceptAsOperator(requestId, by, { correlationId: c.ids.uuid(), principal: 'operator' })));
  }

  rejectHandoff(requestId: string, reason: string, by: string): Promise<HandoffView> {
    return this.run((c) => this.handoffView(c.handoffs.rejectAsOperator(requestId, reason, by, { correlationId: c.ids.uuid(), principal: 'operator' })));
  }

  /** The record for the editor: the context as bounded text (a listed record holds only its first bytes; contextBytes is the size). */
  private handoffView(record: HandoffRecord): HandoffView {
    const { context, ...rest } = record;
    return { ...rest, context: { ...payloadText(context, record.contextContentType), bytes: record.contextBytes } };
  }

  negotiationPolicy(): Promise<PolicySet> {
    return this.run((c) => c.policies.current());
  }

  applyNegotiationSettings(settings: PolicySettings): Promise<PolicySet> {
    return this.run((c) => c.policies.applySettings(settings, { correlationId: c.ids.uuid() }));
  }

  // ---- workflows (RFC §17.7)
  /** Workflow changes, passed on while this API is not disposed. */
  readonly onDidChangeWorkflows: Event<WorkflowsChange> = (listener) =>
    this.coordinator.workflows.onDidChange((change) => {
      if (!this.disposed) listener(change);
    });

  workflows(limit?: number): Promise<WorkflowSummary[]> {
    return this.workflowRun((c) => c.workflows.list(Math.min(Math.max(1, Math.floor(limit ?? DEFAULT_WORKFLOWS) || DEFAULT_WORKFLOWS), MAX_WORKFLOWS)));
  }

  workflow(workflowId: string, maxNodes?: number): Promise<WorkflowDetail | undefined> {
    return this.workflowRun((c) => c.workflows.detail(workflowId, maxNodes));
  }

  workflowNode(workflowId: string, nodeId: string): Promise<WorkflowNodeDetail | undefined> {
    return this.workflowRun((c) => c.workflows.nodeDetail(workflowId, nodeId));
  }

  async createWorkflowFromText(text: string, fileName: string, by: string): Promise<WorkflowCreateResult> {
    // Parsed on the definition worker when large (yaml takes ~0.9 s per MiB), then created here.
    const parsed = await parseDefinitionTextOffThread(text, fileName);
    return this.workflowRun((c): WorkflowCreateResult => {
      const placed = parsed.issues;
      if (!parsed.definition || placed.some((i) => i.severity === 'error')) return { ok: false, issues: placed };
      const unplaced = (issues: readonly ValidationIssue[]): WorkflowFileIssue[] => issues.map((i) => {
        const at = placed.find((p) => p.path === i.path);
        return { ...i, line: at?.line ?? 0, column: at?.column ?? 0, endLine: at?.endLine ?? 0, endColumn: at?.endColumn ?? 0 };
      });
      try {
        const result = c.workflows.create(parsed.definition, by, { correlationId: parsed.definition.workflowId || c.ids.uuid(), principal: 'operator' });
        if (!result.ok) return { ok: false, issues: unplaced(result.issues) };
        return { ok: true, workflowId: result.workflowId, warnings: placed.filter((i) => i.severity === 'warning') };
      } catch (err) {
        if (err instanceof WorkflowError && err.kind === 'exists') {
          return { ok: false, issues: unplaced([{ severity: 'error', code: err.code, path: 'workflow_id', message: err.message }]) };
        }
        throw err;
      }
    });
  }

  startWorkflow(workflowId: string, data: string, by: string): Promise<WorkflowDetail> {
    return this.workflowRun((c) => c.workflows.start(workflowId, data, by, { correlationId: workflowId, principal: 'operator' }));
  }

  runWorkflowNode(workflowId: string, nodeId: string, by: string): Promise<WorkflowDetail> {
    return this.workflowRun((c) => c.workflows.runNode(workflowId, nodeId, by, { correlationId: workflowId, principal: 'operator' }));
  }

  resumeWorkflow(workflowId: string, nodeId: string, data: string, by: string): Promise<WorkflowDetail> {
    return this.workflowRun((c) => c.workflows.resume(workflowId, nodeId, data, by, { correlationId: workflowId, principal: 'operator' }));
  }

  cancelWorkflow(workflowId: string, reason: string, by: string): Promise<WorkflowDetail> {
    return this.workflowRun((c) => c.workflows.cancel(workflowId, reason, by, { correlationId: workflowId, principal: 'operator' }));
  }

  // ---- launched agents (README, "Launch profiles")
  /** Launch changes, passed on while this API is not disposed. */
  readonly onDidChangeLaunches: Event<LaunchesChange> = (listener) =>
    this.coordinator.launches.onDidChange((change) => {
      if (!this.disposed) listener(change);
    });

  launchProfiles(): Promise<{ readonly profiles: LaunchProfile[]; readonly issues: ProfileIssue[] }> {
    return this.run((c) => c.launches.profiles());
  }

  setLaunchProfileSettings(value: unknown): Promise<ProfileIssue[]> {
    return this.run((c) => c.launches.setSettingsProfiles(value));
  }

  profileAvailability(profileId: string): Promise<ProfileAvailability> {
    return this.run((c) => c.launches.availability(profileId));
  }

  launchAgent(request: LaunchRequest, by: string): Promise<LaunchPlan> {
    return this.runAsync((c) => c.launches.launch(request, by, { correlationId: c.ids.uuid(), principal: 'operator' }));
  }

  relaunchAgent(agentId: string, by: string): Promise<LaunchPlan> {
    return this.runAsync((c) => c.launches.relaunch(agentId, by, { correlationId: c.ids.uuid(), principal: 'operator' }));
  }

  launchStarted(agentId: string): Promise<LaunchRecord> {
    return this.run((c) => c.launches.started(agentId, { correlationId: c.ids.uuid(), principal: 'operator' }));
  }

  launchExited(agentId: string, exitCode: number | null, by: string): Promise<LaunchRecord> {
    return this.run((c) => c.launches.exited(agentId, exitCode, by, { correlationId: c.ids.uuid(), principal: 'operator' }));
  }

  launches(): Promise<LaunchRecord[]> {
    return this.run((c) => c.launches.list());
  }

  launch(agentId: string): Promise<LaunchRecord | undefined> {
    return this.run((c) => c.launches.get(agentId));
  }

  bridgeEndpoints(): Promise<BridgeEndpoints | undefined> {
    return this.run((c) => c.launches.bridgeEndpoints());
  }

  /** `run` with the workflow engine's refusals as CoordinatorApiError (not_found, invalid, refused; the SW4RM code kept). */
  private workflowRun<T>(work: (coordinator: Coordinator) => T): Promise<T> {
    return this.run((c) => {
      try {
        return work(c);
      } catch (err) {
        if (err instanceof WorkflowError) {
          // `permission` does not arise here (the editor is the operator): refused, should it ever.
          throw new CoordinatorApiError(err.kind === 'not_found' ? 'not_found' : err.kind === 'invalid' ? 'invalid' : 'refused', err.message, err.code);
        }
        throw err;
      }
    });
  }

  /** Detaches the operators attached through this API and stops answering; the coordinator itself is not touched. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    const operators = [...this.operators.values()];
    this.operators.clear();
    for (const operator of operators) {
      try {
        operator.dispose();
      } catch {
        // The coordinator is stopping (its store may have failed); its operators go with it.
      }
    }
    for (const subscription of this.subscriptions) subscription.dispose();
    for (const emitter of [this.agentsChanged, this.inboxChanged, this.deadLettersChanged, this.approvalsChanged, this.policyChanged, this.credentialsChanged]) emitter.dispose();
    for (const emitter of [this.worktreesChanged, this.worktreeOperatorNeeded, this.worktreeSetupRan]) emitter.dispose();
    this.tasksChanged.dispose();
    this.activityChanged.dispose();
    this.toolsChanged.dispose();
    this.negotiationsChanged.dispose();
  }

  /** Runs `work` now; its result or its error (translated for the user) is the Promise's. */
  private run<T>(work: (coordinator: Coordinator) => T): Promise<T> {
    if (this.disposed) return Promise.reject(new CoordinatorApiError('stopped', 'The SW4RM coordinator is not running.'));
    try {
      return Promise.resolve(work(this.coordinator));
    } catch (err) {
      return Promise.reject(translateError(err));
    }
  }

  /** Starts `work` now (its synchronous part runs before this returns); its result or its error (translated) is the Promise's. */
  private runAsync<T>(work: (coordinator: Coordinator) => Promise<T>): Promise<T> {
    if (this.disposed) return Promise.reject(new CoordinatorApiError('stopped', 'The SW4RM coordinator is not running.'));
    try {
      return work(this.coordinator).catch((err: unknown) => Promise.reject(translateError(err)));
    } catch (err) {
      return Promise.reject(translateError(err));
    }
  }

  private replacePolicy(c: Coordinator, policy: HitlPolicy, by: string): void {
    c.hitl.setPolicy(policy, by);
    this.policyChanged.fire({ policy, by });
  }

  /** A decision is logged under the invocation's own correlation id (a new one when it has none). */
  private correlationOf(id: string): string {
    return this.coordinator.hitl.get(id)?.correlationId || this.coordinator.ids.uuid();
  }
}

function boundedLimit(limit: number): number {
  return Math.max(1, Math.min(Math.floor(limit) || DEFAULT_NEGOTIATIONS, MAX_NEGOTIATIONS));
}

function withoutKey<T extends object, K extends keyof T>(value: T, key: K): Omit<T, K> {
  const copy = { ...value };
  delete copy[key];
  return copy;
}

function proposalView(proposal: ProposalRecord): ProposalView {
  return { ...withoutKey(proposal, 'artifact'), artifact: payloadText(proposal.artifact, proposal.contentType) };
}

/**
 * Payload bytes as text for the editor: the first MAX_NEGOTIATION_PAYLOAD_SHOWN bytes decoded as UTF-8 (a cut may
 * split the last character: decoded leniently then), or no text at all for bytes that are not UTF-8.
 */
export function payloadText(bytes: Uint8Array, contentType: string): PayloadText {
  const truncated = bytes.byteLength > MAX_NEGOTIATION_PAYLOAD_SHOWN;
  const shown = truncated ? bytes.subarray(0, MAX_NEGOTIATION_PAYLOAD_SHOWN) : bytes;
  try {
    return { contentType, bytes: bytes.byteLength, text: new TextDecoder('utf-8', { fatal: true }).decode(shown), binary: false, truncated };
  } catch {
    if (truncated) {
      // Valid UTF-8 cut inside a character: only the last 1–3 bytes fail.
      try {
        const text = new TextDecoder('utf-8', { fatal: true }).decode(shown.subarray(0, lastCharBoundary(shown)));
        return { contentType, bytes: bytes.byteLength, text, binary: false, truncated };
      } catch {
        // binary below
      }
    }
    return { contentType, bytes: bytes.byteLength, text: '', binary: true, truncated: false };
  }
}

/** The length of `bytes` without a trailing incomplete UTF-8 sequence. */
function lastCharBoundary(bytes: Uint8Array): number {
  let end = bytes.byteLength;
  for (let back = 1; back <= 3 && end - back >= 0; back++) {
    const byte = bytes[end - back]!;
    if ((byte & 0xc0) !== 0x80) {
      const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
      return need > back ? end - back : end;
    }
  }
  return end;
}

/** The core's errors the user must see become CoordinatorApiErrors with the same message; others pass as they are. */
function translateError(err: unknown): unknown {
  if (err instanceof HitlStateError) return new CoordinatorApiError(err.reason === 'settled' ? 'settled' : 'not_found', err.message);
  if (err instanceof HitlRequestError) return new CoordinatorApiError('invalid', err.message, err.code);
  if (err instanceof CredentialError) return new CoordinatorApiError(err.code, err.message);
  if (err instanceof WorktreeOperationError) return new CoordinatorApiError(err.kind, err.message, err.reason);
  if (err instanceof WorktreeRefusedError) {
    return err.reason === 'not_found' ? new CoordinatorApiError('not_found', err.message, err.reason)
      : err.reason === 'bad_base' ? new CoordinatorApiError('invalid', err.message, err.reason)
        : new CoordinatorApiError('refused', err.message, err.reason);
  }
  if (err instanceof MergeRefusedError) return new CoordinatorApiError(err.reason === 'not_found' ? 'not_found' : 'refused', err.message, err.reason);
  if (err instanceof BindingStateError) return new CoordinatorApiError('invalid', err.message, 'INVALID_TRANSITION');
  if (err instanceof BindingRequestError) return new CoordinatorApiError(err.kind === 'not_found' ? 'not_found' : err.kind === 'invalid_argument' ? 'invalid' : 'refused', err.message, err.code);
  if (err instanceof SchedulerError) return new CoordinatorApiError(err.code, err.message, err.sw4rmCode);
  if (err instanceof InvalidWorktreeIdError) return new CoordinatorApiError('invalid', err.message, 'VALIDATION_ERROR');
  if (err instanceof LaunchError) return new CoordinatorApiError(err.kind, err.message, err.code);
  if (err instanceof NegotiationError) {
    return new CoordinatorApiError(err.kind === 'invalid' ? 'invalid' : err.kind === 'not_found' ? 'not_found' : 'refused', err.message, err.code);
  }
  return err;
}
