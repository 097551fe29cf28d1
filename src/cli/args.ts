import { FIELD_LIMITS } from '../core/fieldLimits';
import { POLICY_INPUT_KEYS } from '../core/hitl/policy';
import { POLICY_SETTING_KEYS } from '../core/policy/settings';
import { MIB } from '../core/limits';
import { MESSAGE_TYPES } from '../core/router/envelope';
import {
  DEFAULT_ROUTER_OPTIONS,
  MAX_MEMORY_BUDGET_MIB,
  MAX_MESSAGE_RETENTION_HOURS,
  MAX_STORE_BUDGET_MIB,
  MIN_MEMORY_BUDGET_MIB,
  MIN_STORE_BUDGET_MIB,
  UNADDRESSED_POLICIES,
  type UnaddressedPolicy,
} from '../core/router/router';
import type { AuthMode } from '../server/auth';
import { CONNECTION_LIMIT_BOUNDS, DEFAULT_CONNECTION_LIMITS } from '../server/connections';
import { DEFAULT_BRIDGE_PORT } from '../server/bridge/bridgeServer';
import { DEFAULT_SCHEDULER_OPTIONS } from '../core/scheduler/model';
import { DEFAULT_HANDOFF_OPTIONS, HANDOFF_OPTION_BOUNDS } from '../core/handoff/handoffs';
import { DEFAULT_LAUNCHES_OPTIONS, INBOX_ACK_TIMEOUT_MINUTES } from '../core/launch/launches';
import {
  DEFAULT_SNAPSHOT_RETENTION_DAYS,
  MAX_SNAPSHOT_RETENTION_DAYS,
  MIN_SNAPSHOT_RETENTION_DAYS,
} from '../core/worktree/operations';
import {
  checkCopyGlob,
  DEFAULT_SETUP_TIMEOUT_SECONDS,
  MAX_SETUP_TIMEOUT_SECONDS,
  SetupConfigError,
  settingsSetupConfig,
} from '../core/worktree/setup';

/** A payload limit may not exceed what the transport admits (the largest default, 16 MB). */
const TRANSPORT_MAX_PAYLOAD = 16 * MIB;

export interface CliOptions {
  readonly host: string;
  readonly port: number;
  /** The MCP bridge's port on 127.0.0.1 (0 = any free port; a busy one falls back to a free one). */
  readonly bridgePort: number;
  readonly dataDir: string;
  readonly auth: AuthMode;
  readonly heartbeatDebounceSeconds: number;
  readonly capacity: number;
  readonly dedupWindowSeconds: number;
  readonly messageRetentionHours: number;
  /** The store's disk budget in MiB: admission refuses BUFFER_FULL beyond it. */
  readonly storeBudgetMiB: number;
  /** The coordinator's memory budget in MiB: admission refuses BUFFER_FULL beyond it. */
  readonly memoryBudgetMiB: number;
  readonly maxConnections: number;
  readonly unauthenticatedIdleSeconds: number;
  readonly requestBodySeconds: number;
  readonly privilegedRatePerSecond: number;
  readonly payloadLimits: Readonly<Record<string, number>>;
  /** A message with no recipient: refused NO_ROUTE, or a copy to every other registered agent. */
  readonly unaddressed: UnaddressedPolicy;
  readonly verbose: boolean;
  readonly help: boolean;
  /** The terminal is an attached HITL operator (commands on stdin). */
  readonly operator: boolean;
  /** A JSON file with the HITL policy (deadline, fallbacks, rules, pause). */
  readonly hitlPolicyFile: string | undefined;
  /** The workspace folders (`--workspace DIR`, repeatable): every git repository in them is a repo_id. */
  readonly workspaceFolders: readonly string[];
  /** Where agent worktrees go (`<folder>/<repo_id>/<id>`); '' = the sibling `<repo>.sw4rm-worktrees`. */
  readonly worktreesFolder: string;
  /** Setup of every new worktree: globs copied from the main checkout, a command line, its timeout (they replace `.sw4rm/worktree.json`). */
  readonly setupCopy: readonly string[];
  readonly setupCommand: string;
  readonly setupTimeoutSeconds: number;
  /** Whether a repository's own `.sw4rm/worktree.json` command may run. */
  readonly trustRepositorySetup: boolean;
  readonly snapshotRetentionDays: number;
  /** RFC §9.1 max_parallel_instances per agent type (`--max-parallel TYPE=N`, repeatable); types not listed are unlimited. */
  readonly maxParallel: Readonly<Record<string, number>>;
  /** RFC §9.3: a parallelism confidence below this escalates a scope conflict to a human (`--conflict-threshold X`, 0-1). */
  readonly conflictThreshold: number;
  /** The built-in `process` tool provider (run_command) is on (`--process-tools`; README, "The process provider"). */
  readonly processTools: boolean;
  /** run_command may run when its network_policy cannot be enforced here (`--accept-unenforced-network`). */
  readonly acceptUnenforcedNetwork: boolean;
  /** A JSON file with the negotiation policy (`--negotiation-policy`; README, "Negotiation policy"), laid over the stored one at start. */
  readonly negotiationPolicyFile: string | undefined;
  /** Handoffs (README, "Handoffs"): the default timeout, rerouting on reject / timeout, routing to the operator, retention. */
  readonly handoffTimeoutSeconds: number;
  readonly handoffReroute: boolean;
  readonly handoffToOperator: boolean;
  readonly handoffRetentionDays: number;
  /** Minutes a message to a launched agent that pulls its inbox through the MCP bridge waits to be read (README, "The MCP bridge"). */
  readonly inboxAckTimeoutMinutes: number;
}

export const USAGE = `Usage: sw4rm-coordinator [options]

Runs the SW4RM coordinator headless: all SW4RM services on one gRPC port.

Options:
  --host <address>          address to bind (default 127.0.0.1; non-loopback needs --auth token)
  --port <port>             TCP port (default 50051; 0 = any free port)
  --bridge-port <port>      the MCP bridge's port on 127.0.0.1 (default 50052; 0 = any free port; in use: a free one)
  --inbox-ack-timeout-minutes <min>  minutes a message to an agent launched with the MCP bridge waits
                            to be read (read_inbox) before it is TIMED_OUT (default ${DEFAULT_LAUNCHES_OPTIONS.bridgedAckTimeoutMs / 60_000},
                            ${INBOX_ACK_TIMEOUT_MINUTES.min}-${INBOX_ACK_TIMEOUT_MINUTES.max}); every other agent has the RFC's 10 s
  --data-dir <folder>       store folder (default .sw4rm)
  --auth <token|none>       agent authentication (default token)
  --heartbeat-debounce <s>  seconds without heartbeat before an agent is unavailable (default 30)
  --capacity <n>            messages an agent's inbox admits before BUFFER_FULL (default 10)
  --dedup-window <s>        seconds retry outcomes are remembered (default 3600)
  --message-retention <h>   hours finished messages stay in the store (default 24; never less than
                            the dedup window)
  --store-budget <MiB>      disk budget of the store; a message that would exceed it is refused
                            BUFFER_FULL (default 2048, from 16)
  --memory-budget <MiB>     memory budget for payloads held, in flight to streams or being validated;
                            a message that would exceed it is refused BUFFER_FULL (default 128, 32-4096)
  --max-connections <n>     connections at once per address (default 1000, 10-100000)
  --idle-unauthenticated <s>  a connection without an authenticated call is closed after this (default 10)
  --request-body-timeout <s>  a request's message must arrive within this (default 30)
  --privileged-rate <n>     PRIVILEGED messages per producer per second before demotion (default 50)
  --payload-limit TYPE=N    payload limit in bytes for a message type, e.g. DATA=1048576 (repeatable)
  --unaddressed <refuse|fanout>  a message with no recipient: refused NO_ROUTE (default), or a copy
                            to every other registered agent (what the reference router does)
  --operator                this terminal is a HITL operator: pending approvals are printed, decisions
                            typed on stdin (type "help"); without it nobody is there to approve, and
                            every invocation gets its fallback within 5 s
  --hitl-policy <file>      HITL policy JSON (README, "Approvals") with the keys
                            ${POLICY_INPUT_KEYS.join(', ')}
  --workspace <folder>      a workspace folder (repeatable): every git repository in it, nested and bare
                            ones included, becomes a repo_id (its folder name, made unique)
  --worktrees-folder <folder>  agent worktrees go in <folder>/<repo_id>/<id> (default: the sibling
                            folder <repo>.sw4rm-worktrees of each repository)
  --setup-copy <glob>       a file glob copied from the main checkout into every new worktree
                            (repeatable; never linked); with --setup-command it replaces each
                            repository's .sw4rm/worktree.json
  --setup-command <line>    a command line run by the shell in every new worktree (e.g. "npm ci")
  --setup-timeout <s>       the setup command is stopped after this (default ${DEFAULT_SETUP_TIMEOUT_SECONDS}, 1-${MAX_SETUP_TIMEOUT_SECONDS})
  --trust-repository-setup  run the setup command of a repository's own .sw4rm/worktree.json (without
                            it, only its copies are made)
  --snapshot-retention <days>  days a worktree snapshot is kept, never deleted sooner (default
                            ${DEFAULT_SNAPSHOT_RETENTION_DAYS}, ${MIN_SNAPSHOT_RETENTION_DAYS}-${MAX_SNAPSHOT_RETENTION_DAYS})
  --max-parallel TYPE=N     at most N tasks running at once on agents of type TYPE (the descriptor's
                            name; repeatable; default unlimited); more are queued, the submitter told why
  --conflict-threshold <x>  tasks with overlapping scopes whose parallelism confidence is below x
                            (0-1, default ${DEFAULT_SCHEDULER_OPTIONS.conflictThreshold}) wait for a human's CONFLICT decision
  --process-tools           turn on the built-in tool provider "process": agents may run programs
                            (run_command) in their worktree, with CPU, wall and network limits
  --accept-unenforced-network  run_command may run when its network_policy cannot be enforced here
                            (refused PERMISSION_DENIED without it)
  --negotiation-policy <file>  negotiation policy JSON (README, "Negotiation policy") with the keys
                            ${POLICY_SETTING_KEYS.join(', ')}; laid over the stored policy
  --handoff-timeout <s>     seconds the requester of a handoff waits for an acceptance when the request
                            names no timeout (default ${DEFAULT_HANDOFF_OPTIONS.defaultTimeoutMs / 1000}, ${HANDOFF_OPTION_BOUNDS.defaultTimeoutSeconds.min}-${HANDOFF_OPTION_BOUNDS.defaultTimeoutSeconds.max})
  --no-handoff-reroute      a rejected or timed-out handoff ends there (default: it is offered to the
                            next capable agent)
  --handoff-to-operator     a handoff no agent can take waits for a person (the operator) instead of
                            being refused NO_ROUTE or ended
  --handoff-retention <days>  days an ended handoff is kept (default ${DEFAULT_HANDOFF_OPTIONS.retentionDays}, ${HANDOFF_OPTION_BOUNDS.retentionDays.min}-${HANDOFF_OPTION_BOUNDS.retentionDays.max})
  -v, --verbose             print every event to stderr, per-message ones included
  -h, --help                show this help
`;

export class UsageError extends Error {}

/** The descriptor's `name` limit: a longer type could never match an agent. */
export const MAX_AGENT_TYPE_LENGTH = FIELD_LIMITS.registry.name;
/** More parallel instances than this is no limit at all; say "unlimited" by leaving the type out. */
export const MAX_PARALLEL_INSTANCES = 100_000;

/** One day: longer would hide a dead agent for good. */
export const MAX_DEBOUNCE_SECONDS = 86_400;

export function parseArgs(argv: readonly string[]): CliOptions {
  const options = {
    host: '127.0.0.1',
    port: 50051,
    bridgePort: DEFAULT_BRIDGE_PORT,
    dataDir: '.sw4rm',
    auth: 'token' as AuthMode,
    heartbeatDebounceSeconds: 30,
    capacity: 10,
    dedupWindowSeconds: 3600,
    messageRetentionHours: DEFAULT_ROUTER_OPTIONS.messageRetentionMs / 3_600_000,
    storeBudgetMiB: DEFAULT_ROUTER_OPTIONS.storeBudgetBytes / MIB,
    memoryBudgetMiB: DEFAULT_ROUTER_OPTIONS.memoryBudgetBytes / MIB,
    maxConnections: DEFAULT_CONNECTION_LIMITS.maxConnections,
    unauthenticatedIdleSeconds: DEFAULT_CONNECTION_LIMITS.unauthenticatedIdleMs / 1000,
    requestBodySeconds: DEFAULT_CONNECTION_LIMITS.requestBodyMs / 1000,
    privilegedRatePerSecond: 50,
    payloadLimits: {} as Record<string, number>,
    unaddressed: DEFAULT_ROUTER_OPTIONS.unaddressed,
    verbose: false,
    help: false,
    operator: false,
    hitlPolicyFile: undefined as string | undefined,
    workspaceFolders: [] as string[],
    worktreesFolder: '',
    setupCopy: [] as string[],
    setupCommand: '',
    setupTimeoutSeconds: DEFAULT_SETUP_TIMEOUT_SECONDS,
    trustRepositorySetup: false,
    snapshotRetentionDays: DEFAULT_SNAPSHOT_RETENTION_DAYS,
    maxParallel: {} as Record<string, number>,
    conflictThreshold: DEFAULT_SCHEDULER_OPTIONS.conflictThreshold,
    processTools: false,
    acceptUnenforcedNetwork: false,
    negotiationPolicyFile: undefined as string | undefined,
    handoffTimeoutSeconds: DEFAULT_HANDOFF_OPTIONS.defaultTimeoutMs / 1000,
    handoffReroute: DEFAULT_HANDOFF_OPTIONS.reroute,
    handoffToOperator: DEFAULT_HANDOFF_OPTIONS.routeToOperator,
    handoffRetentionDays: DEFAULT_HANDOFF_OPTIONS.retentionDays,
    inboxAckTimeoutMinutes: DEFAULT_LAUNCHES_OPTIONS.bridgedAckTimeoutMs / 60_000,
  };
  const positiveInteger = (flag: string, v: string, max: number): number => {
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < 1 || n > max)
      throw new UsageError(`${flag} must be a whole number from 1 to ${max}, not '${v}'`);
    return n;
  };
  const wholeIn = (flag: string, v: string, min: number, max: number): number => {
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < min || n > max)
      throw new UsageError(`${flag} must be a whole number from ${min} to ${max}, not '${v}'`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [flag, inline] =
      arg.startsWith('--') && arg.includes('=')
        ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]
        : [arg, undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || (inline === undefined && v.startsWith('--')))
        throw new UsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case '--host':
        options.host = value();
        break;
      case '--port': {
        const v = value();
        const port = Number(v);
        if (!/^\d+$/.test(v) || port > 65535)
          throw new UsageError(`--port must be a number from 0 to 65535, not '${v}'`);
        options.port = port;
        break;
      }
      case '--bridge-port': {
        const v = value();
        const port = Number(v);
        if (!/^\d+$/.test(v) || port > 65535)
          throw new UsageError(`--bridge-port must be a number from 0 to 65535, not '${v}'`);
        options.bridgePort = port;
        break;
      }
      case '--inbox-ack-timeout-minutes': {
        const { min, max } = INBOX_ACK_TIMEOUT_MINUTES;
        options.inboxAckTimeoutMinutes = wholeIn(flag, value(), min, max);
        break;
      }
      case '--data-dir':
        options.dataDir = value();
        break;
      case '--auth': {
        const v = value();
        if (v !== 'token' && v !== 'none') throw new UsageError(`--auth must be 'token' or 'none', not '${v}'`);
        options.auth = v;
        break;
      }
      case '--heartbeat-debounce': {
        const v = Number(value());
        if (!(v > 0 && v <= MAX_DEBOUNCE_SECONDS))
          throw new UsageError(
            `--heartbeat-debounce must be a positive number of seconds, at most ${MAX_DEBOUNCE_SECONDS}`,
          );
        options.heartbeatDebounceSeconds = v;
        break;
      }
      case '--capacity':
        options.capacity = positiveInteger(flag, value(), 1_000_000);
        break;
      case '--dedup-window':
        options.dedupWindowSeconds = positiveInteger(flag, value(), 30 * 86_400);
        break;
      case '--message-retention':
        options.messageRetentionHours = positiveInteger(flag, value(), MAX_MESSAGE_RETENTION_HOURS);
        break;
      case '--store-budget': {
        const v = value();
        const n = Number(v);
        if (!/^\d+$/.test(v) || n < MIN_STORE_BUDGET_MIB || n > MAX_STORE_BUDGET_MIB) {
          throw new UsageError(
            `--store-budget must be a whole number of MiB from ${MIN_STORE_BUDGET_MIB} to ${MAX_STORE_BUDGET_MIB}, not '${v}'`,
          );
        }
        options.storeBudgetMiB = n;
        break;
      }
      case '--memory-budget':
        options.memoryBudgetMiB = wholeIn(flag, value(), MIN_MEMORY_BUDGET_MIB, MAX_MEMORY_BUDGET_MIB);
        break;
      case '--max-connections':
        options.maxConnections = wholeIn(
          flag,
          value(),
          CONNECTION_LIMIT_BOUNDS.maxConnections.min,
          CONNECTION_LIMIT_BOUNDS.maxConnections.max,
        );
        break;
      case '--idle-unauthenticated': {
        const { min, max } = CONNECTION_LIMIT_BOUNDS.unauthenticatedIdleSeconds;
        options.unauthenticatedIdleSeconds = wholeIn(flag, value(), min, max);
        break;
      }
      case '--request-body-timeout': {
        const { min, max } = CONNECTION_LIMIT_BOUNDS.requestBodySeconds;
        options.requestBodySeconds = wholeIn(flag, value(), min, max);
        break;
      }
      case '--privileged-rate':
        options.privilegedRatePerSecond = positiveInteger(flag, value(), 100_000);
        break;
      case '--payload-limit': {
        const v = value();
        const match = /^([A-Z_]+)=(\d+)$/.exec(v);
        if (!match) throw new UsageError(`--payload-limit takes TYPE=BYTES, e.g. DATA=1048576, not '${v}'`);
        if (!(MESSAGE_TYPES as readonly string[]).includes(match[1]))
          throw new UsageError(`--payload-limit: '${match[1]}' is not a message type (${MESSAGE_TYPES.join(', ')})`);
        options.payloadLimits[match[1]] = positiveInteger('--payload-limit', match[2], TRANSPORT_MAX_PAYLOAD);
        break;
      }
      case '--unaddressed': {
        const v = value();
        if (!(UNADDRESSED_POLICIES as readonly string[]).includes(v))
          throw new UsageError(`--unaddressed must be ${UNADDRESSED_POLICIES.join(' or ')}, not '${v}'`);
        options.unaddressed = v as UnaddressedPolicy;
        break;
      }
      case '--operator':
        options.operator = true;
        break;
      case '--hitl-policy':
        options.hitlPolicyFile = value();
        break;
      case '--negotiation-policy':
        options.negotiationPolicyFile = value();
        break;
      case '--workspace':
        options.workspaceFolders.push(value());
        break;
      case '--worktrees-folder':
        options.worktreesFolder = value();
        break;
      case '--setup-copy': {
        const v = value();
        try {
          options.setupCopy.push(checkCopyGlob(v));
        } catch (err) {
          throw new UsageError(`--setup-copy: ${(err as Error).message}`);
        }
        break;
      }
      case '--setup-command':
        options.setupCommand = value();
        break;
      case '--setup-timeout':
        options.setupTimeoutSeconds = wholeIn(flag, value(), 1, MAX_SETUP_TIMEOUT_SECONDS);
        break;
      case '--trust-repository-setup':
        options.trustRepositorySetup = true;
        break;
      case '--snapshot-retention':
        options.snapshotRetentionDays = wholeIn(
          flag,
          value(),
          MIN_SNAPSHOT_RETENTION_DAYS,
          MAX_SNAPSHOT_RETENTION_DAYS,
        );
        break;
      case '--max-parallel': {
        const v = value();
        const match = /^([^=\s]+)=(\d+)$/.exec(v);
        if (!match)
          throw new UsageError(
            `--max-parallel takes TYPE=N (an agent type, the descriptor's name, and a whole number), e.g. coder=2, not '${v}'`,
          );
        if (match[1].length > MAX_AGENT_TYPE_LENGTH)
          throw new UsageError(`--max-parallel: the agent type is longer than ${MAX_AGENT_TYPE_LENGTH} characters`);
        options.maxParallel[match[1]] = positiveInteger('--max-parallel', match[2], MAX_PARALLEL_INSTANCES);
        break;
      }
      case '--conflict-threshold': {
        const v = value();
        const x = Number(v);
        if (!/^\d+(\.\d+)?$|^\.\d+$/.test(v) || !(x >= 0 && x <= 1))
          throw new UsageError(`--conflict-threshold must be a number from 0 to 1, not '${v}'`);
        options.conflictThreshold = x;
        break;
      }
      case '--process-tools':
      case '--accept-unenforced-network':
        // A switch: `--process-tools=false` must not turn the provider on.
        if (inline !== undefined) throw new UsageError(`${flag} takes no value`);
        if (flag === '--process-tools') options.processTools = true;
        else options.acceptUnenforcedNetwork = true;
        break;
      case '--handoff-timeout': {
        const { min, max } = HANDOFF_OPTION_BOUNDS.defaultTimeoutSeconds;
        options.handoffTimeoutSeconds = wholeIn(flag, value(), min, max);
        break;
      }
      case '--handoff-retention': {
        const { min, max } = HANDOFF_OPTION_BOUNDS.retentionDays;
        options.handoffRetentionDays = wholeIn(flag, value(), min, max);
        break;
      }
      case '--no-handoff-reroute':
      case '--handoff-to-operator':
        if (inline !== undefined) throw new UsageError(`${flag} takes no value`);
        if (flag === '--no-handoff-reroute') options.handoffReroute = false;
        else options.handoffToOperator = true;
        break;
      case '-v':
      case '--verbose':
        options.verbose = true;
        break;
      case '-h':
      case '--help':
        options.help = true;
        break;
      default:
        throw new UsageError(`unknown option '${arg}'`);
    }
  }
  // The setup flags as a whole (e.g. how many globs), checked as the coordinator will read them.
  try {
    settingsSetupConfig(options.setupCopy, options.setupCommand, options.setupTimeoutSeconds);
  } catch (err) {
    if (err instanceof SetupConfigError) throw new UsageError(`--setup-copy / --setup-command: ${err.message}`);
    throw err;
  }
  return options;
}
