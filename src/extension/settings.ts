import * as path from 'node:path';
import * as vscode from 'vscode';
import type { AuthMode } from '../server/auth';
import type { ConnectionLimits } from '../server/connectionLimits';
import { DEFAULT_BRIDGE_PORT } from '../server/bridge/defaults';
import type { ApprovalSettingValues } from './approvalSettings';
import { defaultDataFolder } from './dataFolder';
import { SETTINGS_SECTION, Settings } from './contributions';
import { connectionSettings } from './connectionSettings';
import { routerSettings, type RouterSettings } from './routerSettings';
import { worktreeSettings, type WorktreeSettings } from './worktreeSettings';
import { schedulerSettings, type SchedulerSettings } from './schedulerSettings';
import { toolSettings, type ToolSettings } from './toolSettings';
import { negotiationSettings, type NegotiationSettings } from './negotiationSettings';
import { handoffSettings, type HandoffSettings } from './handoffSettings';
import { agentInboxSettings, type AgentInboxSettings } from './agentInboxSettings';

export interface CoordinatorSettings {
  readonly port: number;
  /** The MCP bridge's port on 127.0.0.1 (sw4rm.bridge.port; 0 = any free port; a busy one falls back to a free one). */
  readonly bridgePort: number;
  readonly host: string;
  readonly auth: AuthMode;
  /** Absolute folder of the store. */
  readonly dataDir: string;
  /**
   * Where earlier releases kept the store by default (this window's workspace storage), when `dataDir` is the
   * default: a store found there is moved to `dataDir` once (src/server/storeMigration.ts).
   */
  readonly legacyDataDir: string | undefined;
  readonly heartbeatDebounceMs: number;
  readonly autoStart: boolean;
  /** Inbox capacity, deduplication window, PRIVILEGED rate and payload limits, ready for CoordinatorHost.start. */
  readonly router: RouterSettings;
  /** Connection limits and what was ignored or clamped in their settings. */
  readonly connections: { readonly limits: ConnectionLimits; readonly warnings: readonly string[] };
  /** Where worktrees go, their setup, snapshot retention (sw4rm.worktrees.*). */
  readonly worktrees: WorktreeSettings;
  /** max_parallel_instances, the conflict threshold, the unavailable-engine policy (sw4rm.scheduler.*). */
  readonly scheduler: SchedulerSettings;
  /** The built-in `process` tool provider (sw4rm.tools.process.*). */
  readonly tools: ToolSettings;
  /** The negotiation policy (sw4rm.negotiation.*): given at start, and applied live on a change. */
  readonly negotiation: NegotiationSettings;
  /** Handoffs: default timeout, rerouting, routing to the operator, retention (sw4rm.handoffs.*; at the next start). */
  readonly handoffs: HandoffSettings;
  /** The ACK timeout of messages to launched agents that pull their inbox through the bridge (sw4rm.agents.inboxAckTimeoutMinutes; at the next start). */
  readonly agentInbox: AgentInboxSettings;
}

/**
 * Reads the sw4rm.* settings; an empty data folder means this workspace's folder in the extension's global storage
 * (dataFolder.ts: found again after any restart, unlike the window's workspace storage, which may change).
 */
export function readSettings(context: vscode.ExtensionContext): CoordinatorSettings {
  const config = vscode.workspace.getConfiguration(SETTINGS_SECTION);
  const auth = config.get<string>(Settings.auth, 'token') === 'none' ? 'none' : 'token';
  const configured = config.get<string>(Settings.dataDir, '').trim();
  const folders = (vscode.workspace.workspaceFolders ?? [])
    .filter((f) => f.uri.scheme === 'file')
    .map((f) => f.uri.fsPath);
  const folder = folders[0];
  const storage = defaultDataFolder(context.globalStorageUri.fsPath, folders);
  const dataDir =
    configured === ''
      ? storage
      : path.isAbsolute(configured)
        ? configured
        : path.resolve(folder ?? storage, configured);
  const legacyDataDir = configured === '' ? context.storageUri?.fsPath : undefined;
  return {
    port: config.get<number>(Settings.port, 50051),
    bridgePort: bridgePortOf(config.get<unknown>(Settings.bridgePort)),
    host: config.get<string>(Settings.host, '127.0.0.1').trim() || '127.0.0.1',
    auth,
    dataDir,
    legacyDataDir,
    heartbeatDebounceMs:
      Math.min(86_400, Math.max(1, config.get<number>(Settings.heartbeatDebounceSeconds, 30))) * 1000,
    autoStart: config.get<boolean>(Settings.autoStart, true),
    router: routerSettings({
      inboxCapacity: config.get<unknown>(Settings.inboxCapacity),
      deduplicationWindowSeconds: config.get<unknown>(Settings.deduplicationWindowSeconds),
      messageRetentionHours: config.get<unknown>(Settings.messageRetentionHours),
      storeBudgetMiB: config.get<unknown>(Settings.storeBudgetMiB),
      memoryBudgetMiB: config.get<unknown>(Settings.memoryBudgetMiB),
      privilegedRatePerSecond: config.get<unknown>(Settings.privilegedRatePerSecond),
      payloadLimits: config.get<unknown>(Settings.payloadLimits),
      unaddressedMessages: config.get<unknown>(Settings.unaddressedMessages),
    }),
    connections: connectionSettings({
      maxConnections: config.get<unknown>(Settings.maxConnections),
      unauthenticatedIdleSeconds: config.get<unknown>(Settings.unauthenticatedIdleSeconds),
      requestBodyTimeoutSeconds: config.get<unknown>(Settings.requestBodyTimeoutSeconds),
    }),
    worktrees: worktreeSettings({
      folder: config.get<unknown>(Settings.worktreesFolder),
      setupCopy: config.get<unknown>(Settings.worktreesSetupCopy),
      setupCommand: config.get<unknown>(Settings.worktreesSetupCommand),
      setupTimeoutSeconds: config.get<unknown>(Settings.worktreesSetupTimeoutSeconds),
      snapshotRetentionDays: config.get<unknown>(Settings.worktreesSnapshotRetentionDays),
    }),
    scheduler: readSchedulerSettings(),
    tools: toolSettings({
      processEnabled: config.get<unknown>(Settings.toolsProcessEnabled),
      processAcceptUnenforcedNetworkPolicy: config.get<unknown>(Settings.toolsProcessAcceptUnenforcedNetworkPolicy),
    }),
    negotiation: readNegotiationSettings(),
    handoffs: handoffSettings({
      defaultTimeoutSeconds: config.get<unknown>(Settings.handoffsDefaultTimeoutSeconds),
      reroute: config.get<unknown>(Settings.handoffsReroute),
      routeToOperator: config.get<unknown>(Settings.handoffsRouteToOperator),
      retentionDays: config.get<unknown>(Settings.handoffsRetentionDays),
    }),
    agentInbox: agentInboxSettings({
      inboxAckTimeoutMinutes: config.get<unknown>(Settings.agentsInboxAckTimeoutMinutes),
    }),
  };
}

/** sw4rm.bridge.port: a port number, else the default (the schema bounds it; a hand-edited value may not be). */
export function bridgePortOf(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 65535
    ? value
    : DEFAULT_BRIDGE_PORT;
}

/** Settings whose change needs a restart of the coordinator to take effect. */
export const SERVER_SETTINGS: readonly string[] = [
  Settings.port,
  Settings.bridgePort,
  Settings.agentsInboxAckTimeoutMinutes,
  Settings.host,
  Settings.auth,
  Settings.dataDir,
  Settings.heartbeatDebounceSeconds,
  Settings.inboxCapacity,
  Settings.deduplicationWindowSeconds,
  Settings.messageRetentionHours,
  Settings.privilegedRatePerSecond,
  Settings.storeBudgetMiB,
  Settings.payloadLimits,
  Settings.unaddressedMessages,
  Settings.memoryBudgetMiB,
  Settings.maxConnections,
  Settings.unauthenticatedIdleSeconds,
  Settings.requestBodyTimeoutSeconds,
  Settings.worktreesFolder,
  Settings.worktreesSetupCopy,
  Settings.worktreesSetupCommand,
  Settings.worktreesSetupTimeoutSeconds,
  Settings.worktreesSnapshotRetentionDays,
  Settings.schedulerConflictThreshold,
  Settings.schedulerOnUnavailableEngine,
  Settings.toolsProcessEnabled,
  Settings.toolsProcessAcceptUnenforcedNetworkPolicy,
  Settings.handoffsDefaultTimeoutSeconds,
  Settings.handoffsReroute,
  Settings.handoffsRouteToOperator,
  Settings.handoffsRetentionDays,
];

export function affectsServer(event: vscode.ConfigurationChangeEvent): boolean {
  return SERVER_SETTINGS.some((key) => event.affectsConfiguration(`${SETTINGS_SECTION}.${key}`));
}

/** The sw4rm.approvals.* settings, raw; `approvalSettings` (approvalSettings.ts) turns them into a HITL policy. */
export function readApprovalSettings(): ApprovalSettingValues {
  const config = vscode.workspace.getConfiguration(SETTINGS_SECTION);
  return {
    defaultDeadlineSeconds: config.get<unknown>(Settings.approvalsDefaultDeadlineSeconds),
    fallbacks: config.get<unknown>(Settings.approvalsFallbacks),
    rules: config.get<unknown>(Settings.approvalsRules),
    pauseAll: config.get<unknown>(Settings.approvalsPauseAll),
    retentionDays: config.get<unknown>(Settings.approvalsRetentionDays),
    toolRules: config.get<unknown>(Settings.approvalsToolRules),
  };
}

export function affectsApprovals(event: vscode.ConfigurationChangeEvent): boolean {
  return event.affectsConfiguration(`${SETTINGS_SECTION}.approvals`);
}

/** sw4rm.scheduler.*; the limits (max_parallel_instances) apply live, the rest at the next start. */
export function readSchedulerSettings(): SchedulerSettings {
  const config = vscode.workspace.getConfiguration(SETTINGS_SECTION);
  return schedulerSettings({
    maxParallelInstances: config.get<unknown>(Settings.schedulerMaxParallelInstances),
    defaultMaxParallelInstances: config.get<unknown>(Settings.schedulerDefaultMaxParallelInstances),
    conflictThreshold: config.get<unknown>(Settings.schedulerConflictThreshold),
    onUnavailableEngine: config.get<unknown>(Settings.schedulerOnUnavailableEngine),
  });
}

export function affectsSchedulerLimits(event: vscode.ConfigurationChangeEvent): boolean {
  return (
    event.affectsConfiguration(`${SETTINGS_SECTION}.${Settings.schedulerMaxParallelInstances}`) ||
    event.affectsConfiguration(`${SETTINGS_SECTION}.${Settings.schedulerDefaultMaxParallelInstances}`)
  );
}

/** A setting's value only where the user set it (a workspace folder, the workspace, the user): never its declared default. */
function explicitValue(config: vscode.WorkspaceConfiguration, key: string): unknown {
  const seen = config.inspect<unknown>(key);
  return seen === undefined ? undefined : (seen.workspaceFolderValue ?? seen.workspaceValue ?? seen.globalValue);
}

/**
 * sw4rm.negotiation.*: applied to the running coordinator at once (a new policy version when anything differs).
 * tieBreak and proposalSchemas are read only where set, so that their declared defaults do not count as set.
 */
export function readNegotiationSettings(): NegotiationSettings {
  const config = vscode.workspace.getConfiguration(SETTINGS_SECTION);
  return negotiationSettings({
    basePolicy: config.get<unknown>(Settings.negotiationBasePolicy),
    profiles: config.get<unknown>(Settings.negotiationProfiles),
    guardrails: config.get<unknown>(Settings.negotiationGuardrails),
    room: config.get<unknown>(Settings.negotiationRoom),
    tieBreak: explicitValue(config, Settings.negotiationTieBreak),
    proposalSchemas: explicitValue(config, Settings.negotiationProposalSchemas),
  });
}

export function affectsNegotiation(event: vscode.ConfigurationChangeEvent): boolean {
  return event.affectsConfiguration(`${SETTINGS_SECTION}.negotiation`);
}

/** sw4rm.agents.profiles as the user wrote it (any JSON): the coordinator reads it (CoordinatorApi.setLaunchProfileSettings). */
export function readLaunchProfileSettings(): unknown {
  return vscode.workspace.getConfiguration(SETTINGS_SECTION).get<unknown>(Settings.agentsProfiles);
}

export function affectsLaunchProfiles(event: vscode.ConfigurationChangeEvent): boolean {
  return event.affectsConfiguration(`${SETTINGS_SECTION}.${Settings.agentsProfiles}`);
}
