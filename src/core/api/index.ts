/**
 * The one module of core the editor (src/extension) imports: the CoordinatorApi, the records that cross it,
 * and the few pure helpers and constants the editor's settings and views share with the core.
 */
export * from './coordinatorApi';

// Records that cross the API.
export type { AgentRecord } from '../registry/model';
export type { InboxStats } from '../router/router';
export type { DeadLetter, DeadLetterFilter } from '../router/model';
export type { CoordinatorSendInput, MessageDetail, MessageQuery, MessageSummary, SendResult } from '../router/router';
export type { MessageHistoryStep, MessagePayloadView } from '../router/messageQueries';
export type { StoredEvent } from '../log/model';
export { COORDINATOR_SEND_CONTENT_TYPES, type CoordinatorSendContentType } from '../router/coordinatorSend';
export { MESSAGE_SCAN_WINDOW } from '../router/messageQueries';
export { AGENT_EVENTS_SCAN_WINDOW } from '../log/model';
export type { AuditEntry, AuditQuery, HitlAction, HitlInvocation, ReasonType } from '../hitl/model';
export type { CredentialInfo, CredentialKind, CredentialsChange, MintedCredential } from '../credentials/model';
export type { BindingStatus } from '../worktree/bindings';
export type { BindingState, BindFailure, SwitchGrant } from '../worktree/model';
export type { Snapshot } from '../worktree/snapshots';
export type {
  MergePreview,
  MergeStrategy,
  PredictedConflict,
  MergeCommitSummary,
  MergeMessage,
  UndoResult,
} from '../worktree/mergeBack';

// Pure helpers and constants for settings, views and panels.
export { parsePolicy, type HitlPolicy } from '../hitl/policy';
export { parseToolRules } from '../toolApproval/rules';
export type { ToolRule, ToolRuleIssue } from '../toolApproval/model';
export { invocationJson } from '../hitl/hitlService';
export { MIB, PAYLOAD_LIMITS } from '../limits';
export { MESSAGE_TYPES } from '../router/envelope';
export { DEFAULT_LANE_OPTIONS } from '../router/lanes';
export { DEFAULT_ROUTER_OPTIONS, MAX_MESSAGE_RETENTION_HOURS, type RouterOptions } from '../router/router';
export { formatEvent } from '../log/eventLog';
/** The registry's rule for agent ids (and the rest of a descriptor): the editor checks an id it is about to mint for. */
export { MAX_AGENT_ID_LENGTH, validateDescriptor } from '../registry/descriptor';
export { StoreOpenError } from '../store/store';
/** The worktree id rule and the home worktree id the coordinator derives from an agent id (the editor proposes it). */
export { isWorktreeId } from '../worktree/snapshots';
export { homeWorktreeIdOf } from '../worktree/bindings';
/** The environment the coordinator runs git in (no GIT_* of the editor's own): the editor's own git reads use it too. */
export { cleanEnvironment, createGit, GitCommandError } from '../worktree/git';
export { systemClock, type Clock } from '../clock';
export type { Disposable, Event } from '../events';
export {
  DEFAULT_SNAPSHOT_RETENTION_DAYS,
  MAX_SNAPSHOT_RETENTION_DAYS,
  MIN_SNAPSHOT_RETENTION_DAYS,
} from '../worktree/operations';
export {
  DEFAULT_SETUP_TIMEOUT_SECONDS,
  MAX_SETUP_TIMEOUT_SECONDS,
  SETUP_CONFIG_FILE,
  settingsSetupConfig,
  type WorktreeSetupConfig,
} from '../worktree/setup';
/** The scheduler's and the activity buffer's records and bounds the Tasks and Activity views and Submit Task… use. */
export type { TaskScope, TaskState, WaitingReason } from '../scheduler/model';
export {
  DEFAULT_PRIORITY,
  DEFAULT_SCHEDULER_OPTIONS,
  MAX_PRIORITY,
  MIN_PRIORITY,
  TERMINAL_TASK_STATES,
  type SchedulerOptions,
} from '../scheduler/model';
/** Why a queued task waits, in words: what SubmitTask answers and what the Tasks view shows. */
export { describeWaiting } from '../scheduler/scheduler';
/** The tools area's records the Tools view and Show Tool Call Details use. */
export type {
  CallOutcome,
  ExecutionPolicy,
  ProviderInfo,
  SideEffectClass,
  ToolCallRecord,
  ToolDescriptor,
  ToolsChange,
} from '../tools/model';
/** The negotiation policy (RFC §17.2): its records, and reading sw4rm.negotiation.* / --negotiation-policy into PolicySettings. */
export type {
  DebateIntensity,
  EffectivePolicy,
  Guardrails,
  NegotiationPolicy,
  PolicyProfile,
  PolicySet,
  RoomThresholds,
  TieBreak,
} from '../policy/model';
export type { PolicyPatch, PolicySettings } from '../policy/policies';
export { parsePolicySettings, POLICY_SETTING_KEYS, type PolicySettingValues } from '../policy/settings';
/** The negotiation areas' records the Negotiations view and the negotiation panel use. */
export type {
  DeltaSummary,
  NegotiationState,
  NegotiationSummary,
  RoundEvaluation,
  StopReason,
} from '../negotiation/model';
export type {
  AggregatedScore,
  ArtifactState,
  ArtifactType,
  DecisionOutcome,
  RoomArtifactSummary,
  RoomDecision,
  ThresholdCheck,
  VoteRecord,
} from '../room/model';
export {
  HANDOFF_CONTEXT_CONTENT_TYPE,
  HANDOFF_STATES,
  TERMINAL_HANDOFF_STATES,
  type HandoffAttempt,
  type HandoffState,
} from '../handoff/model';
export type { HandoffWorktree } from '../handoff/model';
export { DEFAULT_HANDOFF_OPTIONS, HANDOFF_OPTION_BOUNDS, type HandoffOptions } from '../handoff/options';
export { DEFAULT_LAUNCHES_OPTIONS, INBOX_ACK_TIMEOUT_MINUTES, type LaunchesOptions } from '../launch/options';
export { NODE_METADATA_KEYS, NODE_STATUSES, TRIGGER_TYPES, WORKFLOW_STATES } from '../workflow/model';
export type {
  NodeRecord,
  NodeStatus,
  TriggerType,
  WorkflowDefinition,
  WorkflowNodeDefinition,
  WorkflowNodeDetail,
  WorkflowNodeView,
  WorkflowState,
} from '../workflow/model';
