import type { Coordinator } from '../../core/coordinator';
import type { CallContext } from '../../core/context';

/**
 * The MCP bridge (README, "The MCP bridge"): the coordinator's second door. An MCP-capable CLI agent joins the
 * swarm through tools instead of an SDK; every tool calls the same core methods the gRPC adapters call, with the
 * same CallContext, so identity, confinement, validation, back-pressure and logging are the core's, once.
 *
 * Who a bridged call acts as is fixed by the credential it carries (an agent credential: `Authorization: Bearer
 * sw4rm.<id>.<secret>`): no tool takes an agent id naming the caller, so no tool can act as another agent.
 */
export interface BridgeCaller {
  /** The agent the credential acts as. */
  readonly agentId: string;
  /** The credential's id (for the log: `agent:<credential id>` is the call context's principal). */
  readonly credentialId: string;
}

/** JSON Schema (draft 2020-12 subset ajv compiles) of a tool's arguments; always `type: 'object'`. */
export type JsonSchemaObject = { readonly type: 'object'; readonly [key: string]: unknown };

/** What a tool answers: a JSON value shown to the model as text and given as MCP `structuredContent`. */
export type BridgeToolOutput = Record<string, unknown>;

/** What every tool's `run` gets besides its (already schema-validated) arguments. */
export interface BridgeToolContext {
  readonly coordinator: Coordinator;
  readonly caller: BridgeCaller;
  /** One per tool call: a fresh correlation id and the caller's principal (`agent:<credential id>`). */
  readonly ctx: CallContext;
  /** Aborted when the MCP client cancels the call or its HTTP request closes (a blocking tool stops waiting). */
  readonly signal: AbortSignal;
  /**
   * Whether the tool's answer reached the caller's connection (MCP tool calls only): true once it was written (the
   * HTTP response finished, every byte handed to the operating system; without HTTP, e.g. an in-memory transport, as
   * soon as the tool answered); false when it never will be: the credential was revoked or the call cancelled before
   * it answered, the tool failed, or the connection closed first. A tool that takes something for the caller
   * (read_inbox) confirms it only on true, so what the caller never received is delivered again.
   */
  readonly answerWritten?: Promise<boolean>;
}

/**
 * One bridge tool. `inputSchema` is what `tools/list` shows and what the arguments are checked against (ajv,
 * `additionalProperties: false` everywhere) before `run`; a refusal is a BridgeToolError, never a thrown string.
 */
export interface BridgeTool {
  /** snake_case, unique across the bridge (`send_message`, `read_inbox`, …). */
  readonly name: string;
  /** One or two sentences for the model: what it does, when to use it. */
  readonly description: string;
  readonly inputSchema: JsonSchemaObject;
  /** Optional: MCP tool annotations (readOnlyHint, destructiveHint, idempotentHint, openWorldHint). */
  readonly annotations?: Readonly<Record<string, boolean | string>>;
  run(args: Record<string, unknown>, tool: BridgeToolContext): Promise<BridgeToolOutput> | BridgeToolOutput;
}

/**
 * A refusal with the SW4RM error code (the spec's codes: VALIDATION_ERROR, PERMISSION_DENIED, NOT_FOUND,
 * FAILED_PRECONDITION, OVERLOADED / BUFFER_FULL, ALREADY_EXISTS, DEADLINE_EXCEEDED, INTERNAL_ERROR, … as the
 * core gives them). The bridge answers it as an MCP tool error: `isError: true`, text `<CODE>: <message>`,
 * `structuredContent: { error: { code, message, retryable } }`.
 */
export class BridgeToolError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly retryable = false,
  ) {
    super(message);
    this.name = 'BridgeToolError';
  }
}

/** Where a launched agent reaches the bridge: the launch area's type (src/core/launch/model.ts). */
export type { BridgeEndpoints } from '../../core/launch/model';

/**
 * A route of the bridge's HTTP server besides `/mcp` (the approval hooks: src/server/bridge/hookRoute.ts). The
 * server has authenticated the agent credential already (401 otherwise) and read the body (bounded, JSON).
 */
export interface BridgeHttpRoute {
  readonly method: 'POST';
  /** Exact path, e.g. `/hooks/pre-tool-use`. */
  readonly path: string;
  /**
   * The body handed over as its text (size and shape checked, not parsed), for a route that parses it once itself;
   * otherwise parsed JSON. A body that is empty is `undefined` either way.
   */
  readonly bodyAsText?: true;
  handle(request: BridgeHttpRequest, tool: BridgeToolContext): Promise<BridgeHttpAnswer>;
}

export interface BridgeHttpRequest {
  readonly body: unknown;
  readonly query: URLSearchParams;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

export interface BridgeHttpAnswer {
  readonly status: number;
  /** Sent as JSON. */
  readonly body: unknown;
}
