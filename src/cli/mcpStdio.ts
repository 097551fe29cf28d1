// The MCP bridge's stdio entry point (esbuild.mjs bundles it as dist/sw4rm-mcp.js): for MCP clients that only
// launch commands. It reads SW4RM_MCP_URL and SW4RM_TOKEN and relays JSON-RPC messages both ways between its
// stdin/stdout (StdioServerTransport) and the coordinator's Streamable HTTP endpoint (StreamableHTTPClientTransport
// with `Authorization: Bearer <token>`). stdout carries JSON-RPC only; what goes wrong is said on stderr, and a
// request the coordinator refused (401, 403…) is answered with a JSON-RPC error, never left hanging.
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { EXIT_USAGE, readBridgeEnv, type BridgeEnv } from './bridgeEnv';

/** The JSON-RPC error code of a request the bridge could not be asked (the SDK's ConnectionClosed is -32000 too). */
export const PROXY_ERROR_CODE = -32000;

export type ProxyConfig = BridgeEnv;

/** Where to relay and with which credential, or the message (one line) that says what is missing. */
export function proxyConfig(env: NodeJS.ProcessEnv): ProxyConfig | string {
  const read = readBridgeEnv(env, {
    command: 'sw4rm-mcp',
    urlVariable: 'SW4RM_MCP_URL',
    missingHint:
      ". This command relays MCP between stdio and the SW4RM coordinator's bridge: set SW4RM_MCP_URL to the bridge URL " +
      "(e.g. http://127.0.0.1:50052/mcp) and SW4RM_TOKEN to the agent's own credential (an agent launched by SW4RM: Launch Agent… has both).",
  });
  return typeof read === 'string' ? `${read}\n` : read;
}

/** The answer to each request in `message` that could not be relayed: a JSON-RPC error with the reason. */
export function failedRequests(message: JSONRPCMessage | JSONRPCMessage[], reason: string): JSONRPCMessage[] {
  const messages = Array.isArray(message) ? message : [message];
  return messages
    .filter(
      (m): m is JSONRPCMessage & { id: string | number; method: string } =>
        'method' in m && 'id' in m && m.id !== undefined,
    )
    .map((m) => ({
      jsonrpc: '2.0' as const,
      id: m.id,
      error: {
        code: PROXY_ERROR_CODE,
        message: `sw4rm-mcp: the coordinator's bridge refused or could not be reached: ${reason}`,
      },
    }));
}

/** The protocol version an initialize result carries (the HTTP side sends it as mcp-protocol-version from then on). */
export function negotiatedVersion(message: JSONRPCMessage): string | undefined {
  if (!('result' in message)) return undefined;
  const result = message.result as { protocolVersion?: unknown; serverInfo?: unknown } | undefined;
  return result !== undefined && typeof result.protocolVersion === 'string' && result.serverInfo !== undefined
    ? result.protocolVersion
    : undefined;
}

/** Relays until stdin closes. */
export async function runProxy(config: ProxyConfig, stderr: (text: string) => void): Promise<void> {
  const stdio = new StdioServerTransport();
  const remote = new StreamableHTTPClientTransport(config.url, {
    requestInit: { headers: { Authorization: `Bearer ${config.token}` } },
  });
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await remote.close().catch(() => undefined);
    await stdio.close().catch(() => undefined);
  };
  remote.onmessage = (message) => {
    const version = negotiatedVersion(message);
    if (version !== undefined) remote.setProtocolVersion(version);
    stdio.send(message).catch((err: unknown) => stderr(`sw4rm-mcp: could not write to stdout: ${String(err)}\n`));
  };
  remote.onerror = (err) => stderr(`sw4rm-mcp: ${err.message}\n`);
  stdio.onmessage = (message) => {
    remote.send(message).catch(async (err: unknown) => {
      const reason = err instanceof Error ? err.message : String(err);
      stderr(`sw4rm-mcp: ${reason}\n`);
      for (const answer of failedRequests(message, reason)) await stdio.send(answer).catch(() => undefined);
    });
  };
  stdio.onerror = (err) => stderr(`sw4rm-mcp: stdin: ${err.message}\n`);
  stdio.onclose = () => void close();
  await remote.start();
  await stdio.start();
  await new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
  });
  await close();
}

if (require.main === module) {
  const config = proxyConfig(process.env);
  if (typeof config === 'string') {
    process.stderr.write(config);
    process.exitCode = EXIT_USAGE;
  } else {
    runProxy(config, (text) => process.stderr.write(text)).catch((err: unknown) => {
      process.stderr.write(`sw4rm-mcp: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    });
  }
}
