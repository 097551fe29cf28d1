/**
 * The environment an external agent needs: one SW4RM_*_ADDR per service (all the same host:port, since one
 * port serves every service) plus SW4RM_TOKEN when auth is on. The reference SDKs read the first ten names.
 */
export const SERVICE_ADDRESS_VARIABLES = [
  'SW4RM_ROUTER_ADDR',
  'SW4RM_REGISTRY_ADDR',
  'SW4RM_SCHEDULER_ADDR',
  'SW4RM_HITL_ADDR',
  'SW4RM_WORKTREE_ADDR',
  'SW4RM_TOOL_ADDR',
  'SW4RM_CONNECTOR_ADDR',
  'SW4RM_NEGOTIATION_ADDR',
  'SW4RM_REASONING_ADDR',
  'SW4RM_LOGGING_ADDR',
  'SW4RM_SCHEDULER_POLICY_ADDR',
  'SW4RM_NEGOTIATION_ROOM_ADDR',
  'SW4RM_HANDOFF_ADDR',
  'SW4RM_WORKFLOW_ADDR',
  'SW4RM_ACTIVITY_ADDR',
] as const;

export function agentEnvironment(host: string, port: number, token: string | undefined): Record<string, string> {
  const address = `${connectHost(host)}:${port}`;
  const env: Record<string, string> = {};
  for (const name of SERVICE_ADDRESS_VARIABLES) env[name] = address;
  if (token !== undefined) env.SW4RM_TOKEN = token;
  return env;
}

/** Lines a POSIX shell can paste: `export NAME=value`. */
export function formatEnvironment(env: Record<string, string>): string {
  return (
    Object.entries(env)
      .map(([name, value]) => `export ${name}=${value}`)
      .join('\n') + '\n'
  );
}

/** A wildcard bind address is reached through loopback; IPv6 literals get brackets. */
function connectHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
