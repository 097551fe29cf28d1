/** Every command, view, context key and setting id the extension contributes, in one place (package.json must match). */
export const Commands = {
  start: 'sw4rm.start',
  stop: 'sw4rm.stop',
  restart: 'sw4rm.restart',
  simulateCrash: 'sw4rm.simulateCrash',
  copyAgentEnvironment: 'sw4rm.copyAgentEnvironment',
  showLog: 'sw4rm.showLog',
  showMetrics: 'sw4rm.showMetrics',
  requeueDeadLetter: 'sw4rm.dlq.requeue',
  exportDeadLetters: 'sw4rm.dlq.export',
  filterDeadLetters: 'sw4rm.dlq.filter',
  clearDeadLetterFilter: 'sw4rm.dlq.clearFilter',
  refreshDeadLetters: 'sw4rm.dlq.refresh',
  reviewApproval: 'sw4rm.approvals.review',
  cancelApproval: 'sw4rm.approvals.cancel',
  exportApprovalsAudit: 'sw4rm.approvals.exportAudit',
  refreshApprovals: 'sw4rm.approvals.refresh',
  pauseApprovals: 'sw4rm.approvals.pause',
  resumeApprovals: 'sw4rm.approvals.resume',
  mintAgentCredential: 'sw4rm.credentials.mint',
  revokeCredential: 'sw4rm.credentials.revoke',
  copyMetrics: 'sw4rm.metrics.copy',
  exportMetrics: 'sw4rm.metrics.export',
  openMessage: 'sw4rm.messages.open',
  filterMessages: 'sw4rm.messages.filter',
  clearMessageFilter: 'sw4rm.messages.clearFilter',
  refreshMessages: 'sw4rm.messages.refresh',
  sendMessage: 'sw4rm.sendMessage',
  copyAgentId: 'sw4rm.agent.copyId',
  showAgentMessages: 'sw4rm.agent.showMessages',
  showAgentLogEvents: 'sw4rm.agent.showLogEvents',
  deregisterAgent: 'sw4rm.agent.deregister',
  openWalkthrough: 'sw4rm.openWalkthrough',
  bindAgentToWorktree: 'sw4rm.worktrees.bind',
  openWorktreeInNewWindow: 'sw4rm.worktrees.openInNewWindow',
  showWorktreeChanges: 'sw4rm.worktrees.showChanges',
  mergeBackWorktree: 'sw4rm.worktrees.mergeBack',
  undoWorktreeMerge: 'sw4rm.worktrees.undoMerge',
  restoreWorktreeSnapshot: 'sw4rm.worktrees.restoreSnapshot',
  removeWorktree: 'sw4rm.worktrees.remove',
  pruneWorktrees: 'sw4rm.worktrees.prune',
  refreshWorktrees: 'sw4rm.worktrees.refresh',
  submitTask: 'sw4rm.tasks.submit',
  preemptTask: 'sw4rm.tasks.preempt',
  cancelTask: 'sw4rm.tasks.cancel',
  showTaskDetails: 'sw4rm.tasks.showDetails',
  refreshTasks: 'sw4rm.tasks.refresh',
  shutdownAgent: 'sw4rm.agent.shutdown',
  toggleActivityGrouping: 'sw4rm.activity.toggleGrouping',
  showToolCallDetails: 'sw4rm.tools.showCallDetails',
  cancelToolCall: 'sw4rm.tools.cancelCall',
  copyToolCallId: 'sw4rm.tools.copyCallId',
  refreshTools: 'sw4rm.tools.refresh',
  openNegotiation: 'sw4rm.negotiations.open',
  refreshNegotiations: 'sw4rm.negotiations.refresh',
  createWorkflowFromFile: 'sw4rm.workflows.createFromFile',
  startWorkflow: 'sw4rm.workflows.start',
  runWorkflowNode: 'sw4rm.workflows.runNode',
  resumeWorkflowFromNode: 'sw4rm.workflows.resumeFromNode',
  cancelWorkflow: 'sw4rm.workflows.cancel',
  showWorkflowNode: 'sw4rm.workflows.showNode',
  refreshWorkflows: 'sw4rm.workflows.refresh',
  showHandoff: 'sw4rm.handoffs.show',
  acceptHandoff: 'sw4rm.handoffs.accept',
  rejectHandoff: 'sw4rm.handoffs.reject',
  launchAgent: 'sw4rm.launchAgent',
  relaunchAgent: 'sw4rm.relaunchAgent',
  showAgentTerminal: 'sw4rm.showAgentTerminal',
} as const;

export const Views = {
  container: 'sw4rm',
  agents: 'sw4rm.agents',
  deadLetters: 'sw4rm.deadLetters',
  approvals: 'sw4rm.approvals',
  credentials: 'sw4rm.credentials',
  messages: 'sw4rm.messages',
  worktrees: 'sw4rm.worktrees',
  tasks: 'sw4rm.tasks',
  activity: 'sw4rm.activity',
  tools: 'sw4rm.tools',
  negotiations: 'sw4rm.negotiations',
  workflows: 'sw4rm.workflows',
} as const;

/** The Problems view's source of Create Workflow from File's refusals (a DiagnosticCollection of that name). */
export const WORKFLOW_DIAGNOSTICS = 'sw4rm-workflows';

/** URI schemes of the extension's read-only documents (menus match them with `resourceScheme`). */
export { METRICS_SCHEME } from './metricsModel';

/** Webview panel types (each also an `onWebviewPanel:` activation event in package.json). */
export { HITL_PANEL_VIEW_TYPE } from '../../webview/hitl/protocol';
export { NEGOTIATION_PANEL_VIEW_TYPE } from '../../webview/negotiation/protocol';

/** Context keys the extension sets for `when` clauses in package.json. */
export const ContextKeys = {
  /** True while the coordinator of this window is serving. */
  running: 'sw4rm.running',
  /** True while the Dead Letters view has a filter. */
  deadLettersFiltered: 'sw4rm.dlq.filtered',
  /** True while sw4rm.approvals.pauseAll is on: no rule decides, every invocation waits for a human. */
  approvalsPaused: 'sw4rm.approvals.paused',
  /** True while the Messages view has a filter. */
  messagesFiltered: 'sw4rm.messages.filtered',
  /** The walkthrough's steps done by the coordinator's state (src/extension/walkthroughModel.ts). */
  walkthroughCoordinatorRunning: 'sw4rm.walkthrough.coordinatorRunning',
  walkthroughEnvironmentReady: 'sw4rm.walkthrough.environmentReady',
  walkthroughAgentRegistered: 'sw4rm.walkthrough.agentRegistered',
  walkthroughMessageDelivered: 'sw4rm.walkthrough.messageDelivered',
  walkthroughApprovalDecided: 'sw4rm.walkthrough.approvalDecided',
} as const;

/** The Get Started walkthrough (package.json `contributes.walkthroughs`), by the id the workbench opens it with. */
export const Walkthroughs = {
  gettingStarted: 'sw4rm.sw4rm-coordinator#gettingStarted',
} as const;

export const SETTINGS_SECTION = 'sw4rm';

export const Settings = {
  port: 'port',
  bridgePort: 'bridge.port',
  agentsInboxAckTimeoutMinutes: 'agents.inboxAckTimeoutMinutes',
  host: 'host',
  auth: 'auth',
  dataDir: 'dataDir',
  heartbeatDebounceSeconds: 'heartbeatDebounceSeconds',
  autoStart: 'autoStart',
  inboxCapacity: 'inboxCapacity',
  deduplicationWindowSeconds: 'deduplicationWindowSeconds',
  messageRetentionHours: 'messageRetentionHours',
  storeBudgetMiB: 'storeBudgetMiB',
  memoryBudgetMiB: 'memoryBudgetMiB',
  maxConnections: 'maxConnections',
  unauthenticatedIdleSeconds: 'unauthenticatedIdleSeconds',
  requestBodyTimeoutSeconds: 'requestBodyTimeoutSeconds',
  privilegedRatePerSecond: 'privilegedRatePerSecond',
  payloadLimits: 'payloadLimits',
  unaddressedMessages: 'unaddressedMessages',
  approvalsDefaultDeadlineSeconds: 'approvals.defaultDeadlineSeconds',
  approvalsFallbacks: 'approvals.fallbacks',
  approvalsRules: 'approvals.rules',
  approvalsToolRules: 'approvals.toolRules',
  approvalsPauseAll: 'approvals.pauseAll',
  approvalsRetentionDays: 'approvals.retentionDays',
  worktreesFolder: 'worktrees.folder',
  worktreesSetupCopy: 'worktrees.setupCopy',
  worktreesSetupCommand: 'worktrees.setupCommand',
  worktreesSetupTimeoutSeconds: 'worktrees.setupTimeoutSeconds',
  worktreesSnapshotRetentionDays: 'worktrees.snapshotRetentionDays',
  schedulerMaxParallelInstances: 'scheduler.maxParallelInstances',
  schedulerDefaultMaxParallelInstances: 'scheduler.defaultMaxParallelInstances',
  schedulerConflictThreshold: 'scheduler.conflictThreshold',
  schedulerOnUnavailableEngine: 'scheduler.onUnavailableEngine',
  toolsProcessEnabled: 'tools.process.enabled',
  toolsProcessAcceptUnenforcedNetworkPolicy: 'tools.process.acceptUnenforcedNetworkPolicy',
  negotiationBasePolicy: 'negotiation.basePolicy',
  negotiationProfiles: 'negotiation.profiles',
  negotiationGuardrails: 'negotiation.guardrails',
  negotiationRoom: 'negotiation.room',
  negotiationTieBreak: 'negotiation.tieBreak',
  negotiationProposalSchemas: 'negotiation.proposalSchemas',
  handoffsDefaultTimeoutSeconds: 'handoffs.defaultTimeoutSeconds',
  handoffsReroute: 'handoffs.reroute',
  handoffsRouteToOperator: 'handoffs.routeToOperator',
  handoffsRetentionDays: 'handoffs.retentionDays',
  agentsProfiles: 'agents.profiles',
} as const;

export const OUTPUT_CHANNEL_NAME = 'SW4RM';
