import type { CallContext } from '../context';

/**
 * Tools (RFC §18): providers describe their tools (MCP-like descriptors, §18.1) and run calls (§18.2). The built-in
 * provider `workspace` (workspaceProvider.ts) is the only one so far; external providers (ConnectorService.
 * RegisterProvider), routing, streaming frames and cancellation come with the tools issue and plug in here.
 */

/** A JSON Schema (draft 2020-12 subset that ajv checks), as a plain JSON value. */
export type JsonSchema = Readonly<Record<string, unknown>>;

/** What a tool may change (RFC §18.1 "side-effect classes"); `none` reads only. */
export type SideEffectClass = 'none' | 'filesystem' | 'git' | 'network' | 'process';

/** One tool as DescribeTools lists it (connector.proto ToolDescriptor). */
export interface ToolDescriptor {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
  readonly outputSchema: JsonSchema;
  /** Repeating the call with the same arguments leaves the same state (RFC §18.2: retries are safe). */
  readonly idempotent: boolean;
  /** Runs only for an agent bound to a worktree; otherwise `worktree_not_bound` (RFC §6.4). */
  readonly needsWorktree: boolean;
  /** Advertised; the built-in tools bound their work by sizes instead (README, "Workspace tools"). */
  readonly defaultTimeoutS: number;
  /** Calls of this tool running at once, coordinator-wide; one more is refused `BUFFER_FULL` (Tools.call). */
  readonly maxConcurrency: number;
  readonly sideEffects: SideEffectClass;
}

/**
 * Why a call failed. `code` is the RFC error code the answer starts with (`permission_denied: …`); `kind` is what
 * the server maps to a gRPC status.
 */
export type ToolErrorKind =
  | 'invalid_argument' | 'not_found' | 'permission_denied' | 'failed_precondition' | 'resource_exhausted'
  | 'unimplemented' | 'internal';

export class ToolCallError extends Error {
  constructor(readonly kind: ToolErrorKind, readonly code: string, detail: string) {
    super(detail);
    this.name = 'ToolCallError';
  }

  /** `<code>: <detail>`: how the answer's details read. */
  get details(): string {
    return `${this.code}: ${this.message}`;
  }
}

/** One call as it reaches a provider (tool.proto ToolCall without the transport). */
export interface ToolInvocation {
  /** The caller's call_id, or one the coordinator assigned (RFC §18.2). */
  readonly callId: string;
  readonly providerId: string;
  readonly toolName: string;
  /** `application/json` (or empty, meaning it). */
  readonly contentType: string;
  readonly args: Uint8Array;
}

/** What a provider's tool is handed: the checked arguments and who calls, in which worktree. */
export interface ToolRequest {
  readonly toolName: string;
  /** The arguments, parsed and valid against the tool's input schema. */
  readonly args: Record<string, unknown>;
  /** The agent the call acts as (its credential, or `sw4rm-agent-id` with the operator credential or auth `none`). */
  readonly callerAgentId: string;
  /** The caller's current worktree for a tool with needsWorktree (checked bound before the tool runs). */
  readonly worktreePath: string | undefined;
  readonly ctx: CallContext;
}

/** A provider of tools: describes them and runs a call to one of them, answering its JSON result. */
export interface ToolProvider {
  readonly id: string;
  describe(): readonly ToolDescriptor[];
  /** Answers the result (a JSON value), or throws a ToolCallError. */
  call(request: ToolRequest): Promise<unknown>;
}

/** A finished call: one final frame's content. */
export interface ToolResult {
  readonly callId: string;
  readonly contentType: 'application/json';
  readonly data: Buffer;
}
