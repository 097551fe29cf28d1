import type { HostOptions } from '../server/host';
import type { CoordinatorSettings } from './settings';
import { schedulerOptionsOf } from './schedulerSettings';
import { toolOptionsOf } from './toolSettings';
import { negotiationOptionsOf } from './negotiationSettings';
import { handoffOptionsOf } from './handoffSettings';

/** What the editor adds to the settings when it starts its coordinator. */
export interface HostStartContext {
  readonly dataDir: string;
  readonly protosDir: string;
  /** The port to use (a port chosen after a conflict overrides the setting). */
  readonly port: number;
  readonly hitl: HostOptions['hitl'];
  readonly onEvent: HostOptions['onEvent'];
  /** The workspace's folders on disk: their git repositories are the repo_ids agents bind in. */
  readonly workspaceFolders: readonly string[];
  /** Whether the workspace is trusted: only then may a repository's own `.sw4rm/worktree.json` run its setup command. */
  readonly trusted: boolean;
}

/**
 * The options the editor starts its CoordinatorHost with: every group of sw4rm.* settings that configures the host
 * (server, router, connections, worktrees, scheduler, tools, negotiation, handoffs, launched agents' inboxes) goes through here, so that a setting cannot be read and then left out
 * (test/unit/hostOptions.test.ts checks each group arrives). No `vscode` here.
 */
export function hostOptionsOf(settings: CoordinatorSettings, context: HostStartContext): HostOptions {
  return {
    dataDir: context.dataDir,
    protosDir: context.protosDir,
    host: settings.host,
    port: context.port,
    bridgePort: settings.bridgePort,
    auth: settings.auth,
    heartbeatDebounceMs: settings.heartbeatDebounceMs,
    router: settings.router.options,
    connections: settings.connections.limits,
    hitl: context.hitl,
    onEvent: context.onEvent,
    workspaceFolders: context.workspaceFolders,
    worktreesFolder: settings.worktrees.folder,
    worktreeOperations: {
      setup: settings.worktrees.setup,
      snapshotRetentionDays: settings.worktrees.snapshotRetentionDays,
      trustRepositoryCommand: context.trusted,
    },
    scheduler: schedulerOptionsOf(settings.scheduler),
    tools: toolOptionsOf(settings.tools),
    negotiation: negotiationOptionsOf(settings.negotiation),
    handoffs: handoffOptionsOf(settings.handoffs),
    launches: settings.agentInbox.options,
  };
}
