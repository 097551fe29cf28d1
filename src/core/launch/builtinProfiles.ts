import type { AgentCli, LaunchProfile } from './model';

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
  {
    id: 'custom',
    name: 'Custom command',
    cli: 'custom',
    command: [],
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

/** The built-in profile of a CLI: the defaults of a user profile naming that CLI. */
export function builtinFor(cli: AgentCli): LaunchProfile | undefined {
  return BUILTIN_PROFILES.find((p) => p.cli === cli);
}
