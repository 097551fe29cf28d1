// What the bridge's two commands (dist/sw4rm-mcp.js, dist/sw4rm-hook.js) read from their environment: the agent's own
// credential in SW4RM_TOKEN and the bridge URL they talk to (SW4RM_MCP_URL, SW4RM_HOOK_URL), each checked the same way.

/** Exit code when the command line or environment does not say where the bridge is or who the agent is (2 blocks the tool in Claude Code, Gemini and Codex). */
export const EXIT_USAGE = 2;

export interface BridgeEnv {
  readonly url: URL;
  readonly token: string;
}

export interface BridgeEnvSpec {
  /** The command's name, which starts every problem (`sw4rm-mcp`, `sw4rm-hook`). */
  readonly command: string;
  /** The variable that holds the URL (`SW4RM_MCP_URL`, `SW4RM_HOOK_URL`). */
  readonly urlVariable: string;
  /** What follows "<variables> is/are not set" (where to get them). */
  readonly missingHint: string;
}

/**
 * The bridge URL (http or https) and the token, both trimmed; or the problem: `<command>: <what is wrong>`, naming
 * every missing variable.
 */
export function readBridgeEnv(env: NodeJS.ProcessEnv, spec: BridgeEnvSpec): BridgeEnv | string {
  const { command, urlVariable } = spec;
  const missing = [urlVariable, 'SW4RM_TOKEN'].filter((name) => (env[name] ?? '').trim() === '');
  if (missing.length > 0)
    return `${command}: ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not set${spec.missingHint}`;
  let url: URL;
  try {
    url = new URL(env[urlVariable]!.trim());
  } catch {
    return `${command}: ${urlVariable} is not a URL: ${JSON.stringify(env[urlVariable])}`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return `${command}: ${urlVariable} must be an http(s) URL, not ${url.protocol}`;
  return { url, token: env.SW4RM_TOKEN!.trim() };
}
