import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ValidateFunction } from 'ajv';
import type { Coordinator } from '../../core/coordinator';
import { principalName } from '../../core/credentials/credentials';
import { revokedError, untilRevoked } from './revocation';
import { BridgeToolError, type BridgeCaller, type BridgeTool, type BridgeToolOutput } from './model';

/** The server's name and version in the MCP handshake. */
export const BRIDGE_SERVER_INFO = { name: 'sw4rm-coordinator', version: '0.5.0' } as const;

/** How the bridge tells the model to use it (MCP `instructions`). */
export const BRIDGE_INSTRUCTIONS =
  'You are an agent in a SW4RM swarm coordinated from the editor. Check your inbox with read_inbox when you start, ' +
  'after each step of work and whenever you wait; messages wait for you durably. Use send_message to talk to other ' +
  'agents (list_agents names them), request_decision to ask the person at the editor, and complete_task / fail_task ' +
  'when a task you were given ends.';

/** Tool schemas compiled once per tool set (the set is the same for every request). */
const compiled = new WeakMap<readonly BridgeTool[], ReadonlyMap<string, ValidateFunction>>();

function validators(tools: readonly BridgeTool[]): ReadonlyMap<string, ValidateFunction> {
  let map = compiled.get(tools);
  if (map === undefined) {
    const ajv = new Ajv({ allErrors: false, strict: true, addUsedSchema: false });
    const names = new Set<string>();
    map = new Map(
      tools.map((tool) => {
        if (names.has(tool.name)) throw new Error(`two bridge tools are named ${tool.name}`);
        names.add(tool.name);
        return [tool.name, ajv.compile(tool.inputSchema)] as const;
      }),
    );
    compiled.set(tools, map);
  }
  return map;
}

function errorResult(code: string, message: string, retryable: boolean): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: `${code}: ${message}` }],
    structuredContent: { error: { code, message, retryable } },
  };
}

function okResult(output: BridgeToolOutput): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(output, null, 2) }], structuredContent: output };
}

/**
 * An MCP server (the official SDK's low-level Server, so tools keep their own JSON Schemas) serving `tools` to
 * one authenticated caller. The HTTP door makes one per request (stateless Streamable HTTP); tests connect one to
 * an in-memory transport. Arguments are checked against the tool's schema first: a refusal is a tool error
 * `VALIDATION_ERROR: <path> <reason>`. Any other exception is logged and answered INTERNAL_ERROR.
 */
export function createBridgeMcpServer(
  coordinator: Coordinator,
  tools: readonly BridgeTool[],
  caller: BridgeCaller,
  revoked?: AbortSignal,
  written?: (requestId: RequestId) => Promise<boolean>,
): Server {
  const checks = validators(tools);
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  const server = new Server(BRIDGE_SERVER_INFO, { capabilities: { tools: {} }, instructions: BRIDGE_INSTRUCTIONS });
  const principal = principalName({ kind: 'agent', credentialId: caller.credentialId, agentId: caller.agentId });

  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema as { type: 'object'; [key: string]: unknown },
      ...(tool.annotations ? { annotations: tool.annotations } : {}),
    })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const tool = byName.get(request.params.name);
    if (tool === undefined)
      return errorResult(
        'NOT_FOUND',
        `no tool named ${JSON.stringify(request.params.name.slice(0, 128))}; tools/list names them`,
        false,
      );
    const args = request.params.arguments ?? {};
    const check = checks.get(tool.name)!;
    if (!check(args)) {
      const first = check.errors?.[0];
      const where = first?.instancePath ? first.instancePath : '(arguments)';
      const extraKey =
        first?.params && 'additionalProperty' in first.params ? ` '${String(first.params.additionalProperty)}'` : '';
      return errorResult(
        'VALIDATION_ERROR',
        `${tool.name}: ${where} ${first?.message ?? 'is invalid'}${extraKey}`,
        false,
      );
    }
    const ctx = { correlationId: coordinator.ids.uuid(), principal };
    // Revoking the credential ends the call at once (UNAUTHENTICATED): the tool's signal fires (it stops waiting, as on
    // a client cancel) and whatever it answers later is dropped.
    if (revoked?.aborted) {
      const refused = revokedError(revoked);
      return errorResult(refused.code, refused.message, false);
    }
    const signal = revoked === undefined ? extra.signal : AbortSignal.any([extra.signal, revoked]);
    // The tool learns whether its answer reached the caller (answerWritten): false unless the answer is sent.
    let settle: (written: boolean) => void = () => undefined;
    const answerWritten = new Promise<boolean>((resolve) => {
      settle = resolve;
    });
    try {
      const run = Promise.resolve().then(() => tool.run(args, { coordinator, caller, ctx, signal, answerWritten }));
      const output = await (revoked === undefined ? run : untilRevoked(run, revoked));
      // Revoked or cancelled as it answered: the answer is not sent (revoked: UNAUTHENTICATED; cancelled: nothing).
      if (revoked?.aborted) {
        settle(false);
        const refused = revokedError(revoked);
        return errorResult(refused.code, refused.message, false);
      }
      if (extra.signal.aborted) settle(false);
      else if (written === undefined) settle(true);
      else written(extra.requestId).then(settle, () => settle(false));
      return okResult(output);
    } catch (err) {
      settle(false);
      if (err instanceof BridgeToolError) return errorResult(err.code, err.message, err.retryable);
      coordinator.log.internalError('bridge', ctx.correlationId, err);
      return errorResult('INTERNAL_ERROR', err instanceof Error ? err.message : String(err), true);
    }
  });
  return server;
}
