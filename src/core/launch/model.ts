import type { Transactions } from '../store/store';

/**
 * The launch area (README, "Launch your first agent"): launch profiles (kinds of CLI coding agents), managed
 * agents started from the editor (an identity and credential minted for each, a worktree bound, the bridge and
 * approval wiring written into that worktree), and what happens to them when their process ends.
 */

/** The CLIs whose wiring the launch area knows; `custom` is any command (wiring from the profile's own fields). */
export type AgentCli = 'claude-code' | 'codex' | 'gemini' | 'aider' | 'copilot' | 'custom';

/** How a launched agent runs: in a terminal a person types in, or as an ACP session the coordinator drives. */
export type LaunchMode = 'terminal' | 'session';

/** How a profile's CLI reaches the MCP bridge. */
export type BridgeWiring =
  /** An MCP configuration file written into the worktree (path relative to the worktree root) in a known format. */
  | {
      readonly kind: 'mcp-config-file';
      readonly path: string;
      readonly format: 'claude-mcp-json' | 'gemini-settings' | 'cursor-mcp-json' | 'vscode-mcp-json';
      readonly transport: 'http' | 'stdio';
    }
  /** Command-line arguments appended to the command (`{mcpUrl}`, `{stdioCommand}`… placeholders, see launch/wiring.ts). */
  | { readonly kind: 'args'; readonly args: readonly string[] }
  /** No bridge (a CLI without MCP, e.g. Aider): the agent is launched isolated in its worktree, without swarm tools. */
  | { readonly kind: 'none' };

/** How a profile's CLI asks before running a tool (README, "Approvals for CLI agents"). */
export type ApprovalWiring =
  /** Claude Code: PreToolUse hook in `<worktree>/.claude/settings.local.json`, as an HTTP or a command hook. */
  | { readonly kind: 'claude-code-hooks'; readonly via: 'http' | 'command' }
  /** Gemini CLI: BeforeTool command hook in `<worktree>/.gemini/settings.json`. */
  | { readonly kind: 'gemini-hooks' }
  /** Copilot CLI: preToolUse command hook in `<worktree>/.github/hooks/sw4rm.json`. */
  | { readonly kind: 'copilot-hooks' }
  /** The CLI has no pre-tool hook: its own approval mode and the worktree's isolation are all there is. */
  | { readonly kind: 'none'; readonly note?: string };

export interface LaunchProfile {
  /** Unique, `[a-z0-9][a-z0-9-]{0,62}`; the agent ids launched from it are `<id>-<n>` unless named. */
  readonly id: string;
  /** Shown in the picker and the Agents view. */
  readonly name: string;
  readonly cli: AgentCli;
  /**
   * How the agent runs (README, "Run a workflow of coding agents"): `terminal`, in the editor's terminal where a person
   * types to it; `session`, an Agent Client Protocol session over stdio the coordinator drives (its tasks, workflow
   * nodes, handoffs and messages become prompt turns, its permission requests approvals; sessions/). A session
   * profile's bridge is the session's MCP server and its approvals the session's permission requests: its `bridge`
   * and `approvals` are `none`.
   */
  readonly mode: LaunchMode;
  /** argv: the program (looked up on PATH) and its arguments; never run through a shell. */
  readonly command: readonly string[];
  /** Added to the agent's environment (values may use `${env:NAME}`); SW4RM_* variables are the coordinator's. */
  readonly env: Readonly<Record<string, string>>;
  readonly bridge: BridgeWiring;
  readonly approvals: ApprovalWiring;
  /** Default true: the agent gets its own worktree. False: it runs in the repository's main checkout, unconfined. */
  readonly needsWorktree: boolean;
  /**
   * How the agent learns the swarm's rules (its inbox above all): an instructions file written into the worktree
   * (relative path, excluded from git) and/or a first prompt passed as trailing arguments (`{instructionsPath}`
   * placeholder). The README documents what each built-in profile uses.
   */
  readonly instructions: { readonly file?: string; readonly firstPromptArgs?: readonly string[] };
  /** Capabilities of the agent's descriptor (RegisterAgent), e.g. ['code', 'review']. */
  readonly capabilities: readonly string[];
  /** Where it came from: built in, the `sw4rm.agents.profiles` setting, or `<repo>/.sw4rm/agents.json`. */
  readonly source: 'builtin' | 'settings' | { readonly file: string };
  /** What the README says of it, shown in the picker's detail line. */
  readonly description: string;
}

/** A profile refused when reading settings or `.sw4rm/agents.json`: where, and why (shown, never silently dropped). */
export interface ProfileIssue {
  readonly source: string;
  /** JSON pointer of the offending value. */
  readonly path: string;
  readonly message: string;
}

/** Whether a profile's command can run here (checked before launching). */
export interface ProfileAvailability {
  readonly profileId: string;
  /** The resolved program path, when found on PATH (or given absolute and executable). */
  readonly resolved: string | null;
  /** Why not, for the user: "`claude` is not installed (not found on PATH). Install Claude Code: …". */
  readonly problem: string | null;
}

/** A managed agent's launch lifecycle (its registry state is the RFC's; this is the process's). */
export type LaunchState =
  /** Registered, worktree bound, wiring written; the editor is opening its terminal. */
  | 'STARTING'
  /** Its terminal is open and its process running. */
  | 'RUNNING'
  /** Its process ended or its terminal was closed: the agent is gone (registry SHUTTING_DOWN, offline) but kept. */
  | 'EXITED'
  /** Preparing it failed (worktree, wiring): why is in `error`. */
  | 'FAILED';

export interface LaunchRecord {
  readonly agentId: string;
  readonly profileId: string;
  /** The profile as it was when launched (Relaunch uses the current profile of that id if there is one). */
  readonly profileName: string;
  readonly cli: AgentCli;
  /** The profile's mode when launched; a record written before modes existed is `terminal`. */
  readonly mode?: LaunchMode;
  readonly repoId: string;
  /** Null for a profile with needsWorktree false. */
  readonly worktreeId: string | null;
  /** The directory the command runs in: the worktree, or the main checkout. */
  readonly cwd: string;
  /** The agent credential minted for it (its id; the secret is never stored). */
  readonly credentialId: string;
  readonly state: LaunchState;
  readonly launchedAt: number;
  readonly updatedAt: number;
  /** How many times it was (re)launched. */
  readonly launches: number;
  readonly exitCode: number | null;
  readonly error: string | null;
  /** The files the launch wrote into the worktree (relative paths), all excluded from git. */
  readonly wroteFiles: readonly string[];
  /**
   * Whether it reaches its inbox through the MCP bridge (launches.ts `pullsInbox`: its profile wires the bridge, or it is
   * a custom command, which gets the bridge's address): it pulls its inbox with read_inbox, and its messages wait the
   * launch area's longer ACK timeout (LaunchesOptions.bridgedAckTimeoutMs) instead of the RFC's 10 s.
   */
  readonly bridged: boolean;
}

/** What the editor asks for. */
export interface LaunchRequest {
  readonly profileId: string;
  readonly repoId: string;
  /** A new worktree from `branch` (default: the repository's HEAD), or an existing worktree's id. */
  readonly worktree:
    { readonly kind: 'new'; readonly fromBranch?: string } | { readonly kind: 'existing'; readonly worktreeId: string };
  /** Default `<profile id>-<n>`. */
  readonly agentId?: string;
}

/**
 * What the editor needs to start the process: the command resolved (placeholders filled), the directory, and the
 * environment to add (SW4RM_AGENT_ID, SW4RM_TOKEN — the agent's own credential, never the operator's —,
 * SW4RM_MCP_URL, SW4RM_HOOK_URL, SW4RM_ADDRESS, the profile's env). The token is here and in the process's
 * environment only; it is never written to a file.
 */
export interface LaunchPlan {
  readonly record: LaunchRecord;
  /** `session`: the coordinator started the agent itself (no terminal to open); `terminal`: the editor runs `command`. */
  readonly mode: LaunchMode;
  readonly command: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  /** The terminal's title: `SW4RM: <agent id> (<profile name>)`. */
  readonly title: string;
}

export type LaunchesChange =
  | { readonly kind: 'launched' | 'state'; readonly record: LaunchRecord }
  | { readonly kind: 'forgotten'; readonly agentId: string };

export interface LaunchRepository {
  upsert(record: LaunchRecord): void;
  get(agentId: string): LaunchRecord | undefined;
  list(): LaunchRecord[];
  delete(agentId: string): boolean;
}

export interface LaunchStorage extends Transactions {
  readonly launches: LaunchRepository;
}

/** Where a launched agent reaches the bridge (the host sets them once its bridge listens: Launches.setEndpoints). */
export interface BridgeEndpoints {
  /** Streamable HTTP endpoint, e.g. `http://127.0.0.1:50052/mcp`. */
  readonly mcpUrl: string;
  /** The PreToolUse hook endpoint, e.g. `http://127.0.0.1:50052/hooks/pre-tool-use`; `?cli=<cli>` selects the answer format. */
  readonly hookUrl: string;
  /** argv of the stdio entry point (`node …/dist/sw4rm-mcp.js`); it reads SW4RM_MCP_URL and SW4RM_TOKEN from its environment. */
  readonly stdioCommand: readonly string[];
  /** argv of the command hook (`node …/dist/sw4rm-hook.js`); `--cli <cli>` is appended; reads SW4RM_HOOK_URL and SW4RM_TOKEN. */
  readonly hookCommand: readonly string[];
  /** The gRPC address agents with an SDK use (SW4RM_ADDRESS). */
  readonly grpcAddress: string;
  /**
   * What stdioCommand and hookCommand need in their own environment: `{ ELECTRON_RUN_AS_NODE: '1' }` when
   * `process.execPath` is Electron (the desktop editor), else nothing. Given to those commands only (the MCP config's
   * `env`, a prefix of the hook command line), never to the agent's whole environment, where it would break any
   * Electron program the agent starts (`code --wait`).
   */
  readonly commandEnv: Readonly<Record<string, string>>;
}
