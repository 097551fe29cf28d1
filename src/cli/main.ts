import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { parsePolicy, type HitlPolicy } from '../core/hitl/policy';
import { MIB, PAYLOAD_LIMITS } from '../core/limits';
import { formatEvent } from '../core/log/eventLog';
import { DEFAULT_LANE_OPTIONS } from '../core/router/lanes';
import type { StoredEvent } from '../core/log/model';
import type { PolicySettings } from '../core/policy/policies';
import { parsePolicySettings, POLICY_SETTING_KEYS, type PolicySettingValues } from '../core/policy/settings';
import { StoreOpenError } from '../core/store/store';
import { createGit } from '../core/worktree/git';
import { discoverRepositories, type Repository } from '../core/worktree/repositories';
import { settingsSetupConfig } from '../core/worktree/setup';
import { formatEnvironment } from '../server/agentEnvironment';
import { describeOpenFilesLimit, readOpenFilesLimit } from '../server/connections';
import { CoordinatorHost } from '../server/host';
import { ConfigurationError, PortInUseError } from '../server/server';
import { parseArgs, UsageError, USAGE } from './args';
import { credentialsCommand } from './credentialsCommand';
import { OperatorConsole } from './operatorConsole';

/** The bundle lives in dist/; the protos ship beside it in ../protos. */
const PROTOS_DIR = path.join(__dirname, '..', 'protos');

/** Routine per-message events stay in the store (and --verbose); warnings and everything else are printed. */
function isPerMessage(event: StoredEvent): boolean {
  return event.level === 'INFO' && /^(message|dedup|stream)\./.test(event.eventType);
}

async function main(): Promise<number> {
  if (process.argv[2] === 'credentials') {
    return credentialsCommand(
      process.argv.slice(3),
      (text) => process.stdout.write(text),
      (text) => process.stderr.write(text),
    );
  }
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`sw4rm-coordinator: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (options.help) {
    process.stdout.write(USAGE);
    return 0;
  }

  let hitl: HitlPolicy | undefined;
  if (options.hitlPolicyFile) {
    try {
      const parsed = parsePolicy(
        JSON.parse(fs.readFileSync(options.hitlPolicyFile, 'utf8')) as Record<string, unknown>,
      );
      if (parsed.problems.length > 0) throw new Error(parsed.problems.join('; '));
      hitl = parsed.policy;
    } catch (err) {
      process.stderr.write(`sw4rm-coordinator: --hitl-policy ${options.hitlPolicyFile}: ${(err as Error).message}\n`);
      return 2;
    }
  }

  let negotiation: PolicySettings | undefined;
  if (options.negotiationPolicyFile) {
    try {
      const raw = JSON.parse(fs.readFileSync(options.negotiationPolicyFile, 'utf8')) as unknown;
      if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
        throw new Error(`must be a JSON object with the keys ${POLICY_SETTING_KEYS.join(', ')}`);
      const unknown = Object.keys(raw).filter((key) => !(POLICY_SETTING_KEYS as readonly string[]).includes(key));
      const parsed = parsePolicySettings(raw as PolicySettingValues, '');
      const problems = [
        ...unknown.map((key) => `${key} is not a key (${POLICY_SETTING_KEYS.join(', ')})`),
        ...parsed.warnings.map((w) => w.replace(/; ignored\.$/, '')),
      ];
      if (problems.length > 0) throw new Error(problems.join('; '));
      negotiation = parsed.settings;
    } catch (err) {
      process.stderr.write(
        `sw4rm-coordinator: --negotiation-policy ${options.negotiationPolicyFile}: ${(err as Error).message}\n`,
      );
      return 2;
    }
  }

  // The workspace's git repositories (the worktree area's repo_ids); a --workspace that is no folder is a usage error.
  const notFolders = options.workspaceFolders.filter(
    (folder) => !fs.statSync(folder, { throwIfNoEntry: false })?.isDirectory(),
  );
  if (notFolders.length > 0) {
    process.stderr.write(`sw4rm-coordinator: --workspace ${notFolders[0]}: not a folder\n`);
    return 2;
  }
  let repositories: Repository[];
  try {
    repositories = await discoverRepositories(
      createGit(),
      options.workspaceFolders.map((folder) => path.resolve(folder)),
    );
  } catch (err) {
    process.stderr.write(
      `sw4rm-coordinator: cannot read the workspace's git repositories: ${(err as Error).message}\n`,
    );
    return 1;
  }

  let host: CoordinatorHost;
  try {
    host = await CoordinatorHost.start({
      dataDir: path.resolve(options.dataDir),
      protosDir: PROTOS_DIR,
      repositories,
      host: options.host,
      port: options.port,
      bridgePort: options.bridgePort,
      auth: options.auth,
      heartbeatDebounceMs: options.heartbeatDebounceSeconds * 1000,
      onEvent: (event) => {
        if (options.verbose || !isPerMessage(event)) process.stderr.write(formatEvent(event) + '\n');
      },
      router: {
        capacity: options.capacity,
        dedupWindowMs: options.dedupWindowSeconds * 1000,
        messageRetentionMs: options.messageRetentionHours * 3_600_000,
        storeBudgetBytes: options.storeBudgetMiB * MIB,
        memoryBudgetBytes: options.memoryBudgetMiB * MIB,
        lanes: { ...DEFAULT_LANE_OPTIONS, privilegedRatePerSecond: options.privilegedRatePerSecond },
        payloadLimits: { ...PAYLOAD_LIMITS, ...options.payloadLimits },
        unaddressed: options.unaddressed,
      },
      hitl,
      worktreesFolder: options.worktreesFolder ? path.resolve(options.worktreesFolder) : undefined,
      worktreeOperations: {
        setup: settingsSetupConfig(options.setupCopy, options.setupCommand, options.setupTimeoutSeconds),
        trustRepositoryCommand: options.trustRepositorySetup,
        snapshotRetentionDays: options.snapshotRetentionDays,
      },
      scheduler: { maxParallelInstances: options.maxParallel, conflictThreshold: options.conflictThreshold },
      tools: {
        process: { enabled: options.processTools, acceptUnenforcedNetworkPolicy: options.acceptUnenforcedNetwork },
      },
      negotiation,
      handoffs: {
        defaultTimeoutMs: options.handoffTimeoutSeconds * 1000,
        reroute: options.handoffReroute,
        routeToOperator: options.handoffToOperator,
        retentionDays: options.handoffRetentionDays,
      },
      launches: { bridgedAckTimeoutMs: options.inboxAckTimeoutMinutes * 60_000 },
      connections: {
        maxConnections: options.maxConnections,
        unauthenticatedIdleMs: options.unauthenticatedIdleSeconds * 1000,
        requestBodyMs: options.requestBodySeconds * 1000,
      },
    });
  } catch (err) {
    if (err instanceof PortInUseError || err instanceof StoreOpenError || err instanceof ConfigurationError) {
      process.stderr.write(`sw4rm-coordinator: ${err.message}\n`);
      return 1;
    }
    throw err;
  }

  // A policy file the coordinator refused as a whole (a profile outside the guardrails…): the stored policy stayed.
  if (host.coordinator.policies.settingsRefusal !== undefined) {
    process.stderr.write(
      `sw4rm-coordinator: --negotiation-policy ${options.negotiationPolicyFile}: ${host.coordinator.policies.settingsRefusal}\n`,
    );
    await host.stop(0);
    return 2;
  }

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      process.stderr.write(`sw4rm-coordinator: ${signal} received, draining\n`);
      host.stop().then(
        () => resolve(0),
        (err) => {
          process.stderr.write(`sw4rm-coordinator: error while stopping: ${(err as Error).stack}\n`);
          resolve(1);
        },
      );
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
    // The environment on stdout says "ready", and scripts and tests may signal us as soon as they see it: print it only
    // once the handlers are in place, so that such a signal drains instead of killing the process.
    process.stdout.write(
      `# SW4RM coordinator serving on ${options.host}:${host.port} (auth ${options.auth}, store ${host.coordinator.store.location})\n`,
    );
    if (host.bridgeEndpoints)
      process.stdout.write(
        `# MCP bridge for agents: ${host.bridgeEndpoints.mcpUrl} (stdio: ${host.bridgeEndpoints.stdioCommand.join(' ')})\n`,
      );
    for (const repo of repositories)
      process.stdout.write(`# Repository ${repo.id}: ${repo.path}${repo.bare ? ' (bare)' : ''}\n`);
    process.stdout.write('# Agent environment:\n');
    process.stdout.write(formatEnvironment(host.environment()));
    // Node raises its soft RLIMIT_NOFILE to the hard limit and no further: show both (Linux), and how to raise them when low.
    const openFiles = describeOpenFilesLimit(readOpenFilesLimit(), options.maxConnections);
    if (openFiles) {
      process.stdout.write(openFiles.line);
      if (openFiles.warning) process.stderr.write(openFiles.warning);
    }
    if (options.operator) attachOperatorConsole(host);
    // A new worktree's setup output, as it comes (its end is also an event: worktree.setup_finished / setup_failed).
    host.coordinator.worktreeOperations.onDidRunSetup((event) => {
      if (event.kind === 'output')
        process.stderr.write(
          event.text
            .split('\n')
            .filter(Boolean)
            .map((l) => `setup ${event.repoId}/${event.worktreeId}: ${l}\n`)
            .join(''),
        );
    });
    // A failed commit ends this process with status 1: a supervisor (or the user) starts a new one, which
    // recovers from the store exactly as after a crash.
    host.onDidFail((err) => {
      if (stopping) return;
      stopping = true;
      process.stderr.write(`sw4rm-coordinator: ${err.message}\n`);
      // No grace: every call would fail now, and timers must not find the store refusing them for long.
      host.stop(0).then(
        () => resolve(1),
        () => resolve(1),
      );
    });
  });
}

/** Stdin is the operator's keyboard; when it closes, the operator has left (and fallbacks apply again). */
function attachOperatorConsole(host: CoordinatorHost): void {
  const operator = new OperatorConsole(
    host.coordinator.hitl,
    `cli:${os.userInfo().username}`,
    (text) => process.stdout.write(text),
    host.coordinator.worktreeOperations,
  );
  const input = readline.createInterface({ input: process.stdin, terminal: false });
  // One command at a time, answered in the order typed (worktree commands run git; a merge answers once its approval is open).
  let previous = Promise.resolve();
  input.on('line', (line) => {
    previous = previous
      .then(() => operator.runAsync(line))
      .then(
        (text) => {
          process.stdout.write(text);
        },
        (err: unknown) => {
          process.stdout.write(`error: ${(err as Error).message}\n`);
        },
      );
  });
  input.on('close', () => operator.dispose());
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`sw4rm-coordinator: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
