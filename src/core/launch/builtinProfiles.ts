import type { AgentCli, LaunchMode, LaunchProfile } from './model';

/**
 * The built-in launch profiles (README, "Launch profiles"): one per CLI whose wiring the launch area knows, plus the
 * `custom` template. A profile of the `sw4rm.agents.profiles` setting or of `.sw4rm/agents.json` with the same id
 * replaces one of these; one with another id and a known `cli` takes the wiring of that CLI's built-in profile for
 * every field it leaves out (profiles.ts).
 *
 * Sources of each CLI's wiring (checked for issue 20; "ran" = run here against a real Streamable HTTP MCP server of the
 * official SDK that accepts only `Authorization: Bearer <token>`, the CLI's folder trust given in a temporary HOME):
 * - Claude Code: project `.mcp.json` `{"mcpServers": {name: {"type": "http", "url", "headers"}}}`; `${VAR}` and
 *   `${VAR:-default}` are expanded in command, args, env, url and headers (Claude Code docs, "Environment variable
 *   expansion in .mcp.json"). Ran with 2.1.328: `claude mcp list` Connected with the token from SW4RM_TOKEN (401 with
 *   another), once the folder is trusted and the server approved: the launch approves its own server in
 *   `.claude/settings.local.json` (`enabledMcpjsonServers`), else it stays "Pending approval". PreToolUse hooks in the
 *   same file (the approvals part's docs/hook-configs.md). `claude [prompt]`: the first prompt of the interactive session.
 * - Codex CLI: MCP servers come from config.toml tables `mcp_servers.<name>`, which `-c key=value` overrides per run
 *   (TOML values): `url` + `bearer_token_env_var` is a Streamable HTTP server whose bearer token Codex reads from the
 *   named environment variable, so nothing is written and the user's ~/.codex is untouched. Ran with 0.169.0: `codex -c
 *   … mcp get sw4rm --json` answers transport `streamable_http` with `bearer_token_env_var: "SW4RM_TOKEN"`. `codex
 *   [PROMPT]`: the first prompt. Codex 0.124+ has PreToolUse hooks too, but only a deny is enforced and a project's
 *   hooks must be trusted in Codex first; the launch contract has no wiring for them (approvals: none; Codex's own
 *   `--ask-for-approval` / `--sandbox` apply).
 * - Gemini CLI: project `.gemini/settings.json` `mcpServers.<name>.httpUrl` + `headers`; string values may name
 *   environment variables as `$VAR` or `${VAR}` (Gemini CLI configuration docs). Ran with 0.61.0: `gemini mcp list`
 *   Connected with the token from SW4RM_TOKEN in a trusted folder; in an untrusted one project servers are "Disabled"
 *   (Gemini CLI asks to trust the folder at its first start). BeforeTool hooks in the same file. `-i <prompt>`
 *   (--prompt-interactive) runs the first prompt and stays interactive.
 * - Aider: no MCP and no pre-tool hook; `--read <file>` puts the instructions in the chat read-only.
 * - Copilot CLI: reads a workspace `.mcp.json` (the Claude Code format) in a trusted folder (ran: `copilot mcp list`
 *   shows it as a workspace server); preToolUse hooks in `.github/hooks/*.json`; `-i <prompt>` starts interactive with a
 *   first prompt. Its expansion of `${SW4RM_TOKEN}` in the headers was not checked (no session without a sign-in).
 *
 * Session mode (ACP over stdio; issue 33): `claude-agent-acp` (npm `@zed-industries/claude-agent-acp`; ran here with
 * 0.23.1 against a scripted Messages API: loadSession true, MCP over http and sse, permission options allow_always /
 * allow / reject, Claude Code reads and writes files itself, never through fs/*); `codex-acp` (npm
 * `@zed-industries/codex-acp`); `gemini --experimental-acp` (Gemini CLI docs); `copilot --acp` (Copilot CLI docs).
 */

/** The instructions file every built-in profile writes into the worktree (excluded from git). */
export const INSTRUCTIONS_FILE = '.sw4rm/AGENT.md';

/** The first prompt of the CLIs that take one: read the instructions file first. */
export const FIRST_PROMPT =
  'You are {agentId}, an agent of a SW4RM swarm working in this git worktree. Read {instructionsPath} now and follow it: it says how to check your inbox and work with the other agents.';

export const BUILTIN_PROFILES: readonly LaunchProfile[] = [
  {
    id: 'claude-code',
    name: 'Claude Code',
    cli: 'claude-code',
    command: ['claude'],
    mode: 'terminal',
    env: {},
    bridge: { kind: 'mcp-config-file', path: '.mcp.json', format: 'claude-mcp-json', transport: 'http' },
    approvals: { kind: 'claude-code-hooks', via: 'command' },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE, firstPromptArgs: [FIRST_PROMPT] },
    capabilities: ['code'],
    source: 'builtin',
    description:
      'Claude Code (`claude`): the bridge in `.mcp.json` (Streamable HTTP, token from SW4RM_TOKEN), tool approvals by a PreToolUse hook in `.claude/settings.local.json`, instructions in .sw4rm/AGENT.md and a first prompt.',
  },
  {
    id: 'codex',
    name: 'Codex CLI',
    cli: 'codex',
    command: ['codex'],
    mode: 'terminal',
    env: {},
    bridge: {
      kind: 'args',
      args: ['-c', 'mcp_servers.sw4rm.url="{mcpUrl}"', '-c', 'mcp_servers.sw4rm.bearer_token_env_var="SW4RM_TOKEN"'],
    },
    approvals: {
      kind: 'none',
      note: 'Codex CLI: no approval hook is wired; its own --ask-for-approval and --sandbox modes apply, and the agent stays in its worktree.',
    },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE, firstPromptArgs: [FIRST_PROMPT] },
    capabilities: ['code'],
    source: 'builtin',
    description:
      "Codex CLI (`codex`): the bridge by `-c mcp_servers.sw4rm.*` arguments (Streamable HTTP, token from SW4RM_TOKEN; ~/.codex untouched), no approval hook (Codex's own approval mode), instructions in .sw4rm/AGENT.md and a first prompt.",
  },
  {
    id: 'gemini',
    name: 'Gemini CLI',
    cli: 'gemini',
    command: ['gemini'],
    mode: 'terminal',
    env: {},
    bridge: { kind: 'mcp-config-file', path: '.gemini/settings.json', format: 'gemini-settings', transport: 'http' },
    approvals: { kind: 'gemini-hooks' },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE, firstPromptArgs: ['-i', FIRST_PROMPT] },
    capabilities: ['code'],
    source: 'builtin',
    description:
      'Gemini CLI (`gemini`): the bridge and a BeforeTool approval hook in `.gemini/settings.json` (token from SW4RM_TOKEN), instructions in .sw4rm/AGENT.md and a first prompt (-i).',
  },
  {
    id: 'aider',
    name: 'Aider',
    cli: 'aider',
    command: ['aider'],
    mode: 'terminal',
    env: {},
    bridge: { kind: 'none' },
    approvals: {
      kind: 'none',
      note: 'Aider has no hook before it edits files or runs commands: its own confirmations apply (leave --yes-always off), and the agent stays in its worktree.',
    },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE, firstPromptArgs: ['--read', '{instructionsPath}'] },
    capabilities: ['code'],
    source: 'builtin',
    description:
      'Aider (`aider`): no MCP, so no swarm tools; isolated in its worktree, shown in the views, instructions read with --read.',
  },
  {
    id: 'copilot',
    name: 'Copilot CLI',
    cli: 'copilot',
    command: ['copilot'],
    mode: 'terminal',
    env: {},
    bridge: { kind: 'mcp-config-file', path: '.mcp.json', format: 'claude-mcp-json', transport: 'http' },
    approvals: { kind: 'copilot-hooks' },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE, firstPromptArgs: ['-i', FIRST_PROMPT] },
    capabilities: ['code'],
    source: 'builtin',
    description:
      'GitHub Copilot CLI (`copilot`): the bridge in `.mcp.json`, tool approvals by a preToolUse hook in `.github/hooks/sw4rm.json`, instructions in .sw4rm/AGENT.md and a first prompt (-i).',
  },
  // Session mode (README, "Run a workflow of coding agents"): the coordinator is the agent's ACP client; the swarm's MCP
  // bridge is the session's MCP server (`session/new` mcpServers, Streamable HTTP with the agent's bearer token),
  // its tool approvals its `session/request_permission` requests.
  {
    id: 'claude-session',
    name: 'Claude Code (session)',
    cli: 'claude-code',
    mode: 'session',
    command: ['claude-agent-acp'],
    env: {},
    bridge: { kind: 'none' },
    approvals: { kind: 'none', note: 'ACP permission requests (the tool-approval rules)' },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE },
    capabilities: ['code'],
    source: 'builtin',
    description:
      'Claude Code driven by the swarm (`claude-agent-acp`, the ACP adapter of Claude Code): tasks, workflow nodes, handoffs and messages become its turns; its tool permission requests go through the approval rules.',
  },
  {
    id: 'codex-session',
    name: 'Codex (session)',
    cli: 'codex',
    mode: 'session',
    command: ['codex-acp'],
    env: {},
    bridge: { kind: 'none' },
    approvals: { kind: 'none', note: 'ACP permission requests (the tool-approval rules)' },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE },
    capabilities: ['code'],
    source: 'builtin',
    description:
      'Codex driven by the swarm (`codex-acp`, the ACP adapter of Codex): tasks, workflow nodes, handoffs and messages become its turns; its permission requests go through the approval rules.',
  },
  {
    id: 'gemini-session',
    name: 'Gemini CLI (session)',
    cli: 'gemini',
    mode: 'session',
    command: ['gemini', '--experimental-acp'],
    env: {},
    bridge: { kind: 'none' },
    approvals: { kind: 'none', note: 'ACP permission requests (the tool-approval rules)' },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE },
    capabilities: ['code'],
    source: 'builtin',
    description:
      'Gemini CLI driven by the swarm (`gemini --experimental-acp`): tasks, workflow nodes, handoffs and messages become its turns; its permission requests go through the approval rules.',
  },
  {
    id: 'copilot-session',
    name: 'Copilot CLI (session)',
    cli: 'copilot',
    mode: 'session',
    command: ['copilot', '--acp'],
    env: {},
    bridge: { kind: 'none' },
    approvals: { kind: 'none', note: 'ACP permission requests (the tool-approval rules)' },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE },
    capabilities: ['code'],
    source: 'builtin',
    description:
      'GitHub Copilot CLI driven by the swarm (`copilot --acp`): tasks, workflow nodes, handoffs and messages become its turns; its permission requests go through the approval rules.',
  },
  {
    id: 'custom',
    name: 'Custom command',
    cli: 'custom',
    command: [],
    mode: 'terminal',
    env: {},
    bridge: { kind: 'none' },
    approvals: { kind: 'none' },
    needsWorktree: true,
    instructions: { file: INSTRUCTIONS_FILE },
    capabilities: [],
    source: 'builtin',
    description:
      'A template: add a profile with your own command (cli "custom") to the sw4rm.agents.profiles setting or .sw4rm/agents.json. Every launched command gets SW4RM_MCP_URL, SW4RM_TOKEN and SW4RM_HOOK_URL.',
  },
];

/** The built-in profile of a CLI in a mode: the defaults of a user profile naming that CLI (and mode). */
export function builtinFor(cli: AgentCli, mode: LaunchMode = 'terminal'): LaunchProfile | undefined {
  return BUILTIN_PROFILES.find((p) => p.cli === cli && p.mode === mode);
}
