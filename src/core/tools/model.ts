import type { CallContext } from '../context';

import type { Event } from '../events';
import type { Transactions } from '../store/store';
import type { ToolDescriptor } from './toolDescriptor';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/**
 * Tools (RFC §18): providers describe their tools (MCP-like descriptors, §18.1) and run calls (§18.2). Built in:
 * `workspace` (workspaceProvider.ts), `process` (processProvider.ts, off unless enabled), `reasoning` (served by the
 * inference engine agent: reasoning/). External providers are agents (ConnectorService.RegisterProvider, provider_id =
 * the agent's id) reached by TOOL_CALL envelopes (externalProvider.ts). Every call, whoever asks (ToolService.Call /
 * CallStream, a TOOL_CALL envelope to `coordinator`, the coordinator itself), runs through one engine (tools.ts).
 */

export type { JsonSchema, SideEffectClass, ToolDescriptor } from './toolDescriptor';
/** What other areas use of descriptors.ts (it does not import this file). */
export { compileSchemaText, compileSchemaTextAsync, type SchemaVerdict } from './descriptors';

/**
 * Why a call failed. `code` is the RFC error code the answer starts with (`permission_denied: …`); `kind` is what
 * the server maps to a gRPC status.
 */
export type ToolErrorKind =
  | 'invalid_argument'
  | 'not_found'
  | 'permission_denied'
  | 'failed_precondition'
  | 'resource_exhausted'
  | 'unimplemented'
  | 'internal'
  | 'deadline_exceeded'
  | 'unavailable'
  | 'cancelled'
  | 'already_exists';

const TOOL_KINDS: Readonly<Record<ToolErrorKind, ErrorKind>> = {
  invalid_argument: 'invalid',
  not_found: 'not_found',
  permission_denied: 'permission',
  failed_precondition: 'precondition',
  resource_exhausted: 'exhausted',
  unimplemented: 'unimplemented',
  internal: 'internal',
  deadline_exceeded: 'deadline',
  unavailable: 'unavailable',
  cancelled: 'cancelled',
  already_exists: 'exists',
};

export class ToolCallError extends SwarmError {
  constructor(
    readonly kind: ToolErrorKind,
    readonly code: string,
    detail: string,
  ) {
    super(detail);
    this.name = 'ToolCallError';
  }

  override get errorKind(): ErrorKind {
    return TOOL_KINDS[this.kind];
  }

  /** The tools area's code: a SW4RM one (`VALIDATION_ERROR`) or the area's own (`worktree_not_bound`, `too_large`). */
  override get errorCode(): Sw4rmCode {
    return this.code;
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

/** RFC §18.5.2. Empty or unspecified = DENY_ALL. */
export const NETWORK_POLICIES = ['DENY_ALL', 'EGRESS_RESTRICTED', 'EGRESS_UNRESTRICTED', 'FULL_ACCESS'] as const;
export type NetworkPolicy = (typeof NETWORK_POLICIES)[number];
/** RFC §18.5.3. Empty or unspecified = MINIMAL. */
export const PRIVILEGE_LEVELS = ['MINIMAL', 'DEFAULT', 'ELEVATED', 'PRIVILEGED'] as const;
export type PrivilegeLevel = (typeof PRIVILEGE_LEVELS)[number];

/**
 * A call's execution policy (tool.proto ExecutionPolicy, RFC §18.5), parsed and defaulted (policy.ts
 * parseExecutionPolicy). README, "Execution policy", says per field who enforces it.
 */
export interface ExecutionPolicy {
  /** ms; 0 = the tool's default_timeout_s (0 there too = none). Coordinator-enforced → TOOL_TIMEOUT. */
  readonly timeoutMs: number;
  /** Retries after a retryable failure; honoured only for idempotent tools. */
  readonly maxRetries: number;
  /** `exponential` (default when empty), `linear` or `fixed`; anything else VALIDATION_ERROR. */
  readonly backoff: 'exponential' | 'linear' | 'fixed';
  readonly worktreeRequired: boolean;
  readonly networkPolicy: NetworkPolicy;
  readonly privilegeLevel: PrivilegeLevel;
  /** 0 = none. Enforced by the provider that runs the work (process provider: on the child; external: passed on). */
  readonly budgetCpuMs: number;
  /** 0 = none. Coordinator-enforced → WALL_TIMEOUT (and the process provider kills its child). */
  readonly budgetWallMs: number;
}

export const DEFAULT_EXECUTION_POLICY: ExecutionPolicy = {
  timeoutMs: 0,
  maxRetries: 0,
  backoff: 'exponential',
  worktreeRequired: false,
  networkPolicy: 'DENY_ALL',
  privilegeLevel: 'MINIMAL',
  budgetCpuMs: 0,
  budgetWallMs: 0,
};

/** One frame of a call's answer as the engine relays it (tool.proto ToolFrame); frame_no counts from 0 per call. */
export interface ToolFrame {
  readonly callId: string;
  readonly frameNo: number;
  readonly final: boolean;
  readonly contentType: string;
  readonly data: Buffer;
  /** JSON text or empty; a cancelled call's terminal frame: `{"cancelled":true,"partial_result":<frames before>,…}`. */
  readonly summary: Buffer;
}

/** What a provider's tool is handed: the checked arguments and who calls, in which worktree. */
export interface ToolRequest {
  readonly callId: string;
  readonly toolName: string;
  /** The arguments, parsed and valid against the tool's input schema. */
  readonly args: Record<string, unknown>;
  /** The agent the call acts as (its credential, or `sw4rm-agent-id` with the operator credential or auth `none`); `coordinator` for the coordinator's own calls. */
  readonly callerAgentId: string;
  /** The caller's current worktree for a tool with needsWorktree or policy.worktreeRequired (checked bound before the tool runs). */
  readonly worktreePath: string | undefined;
  readonly policy: ExecutionPolicy;
  /** The caller asked for frames (CallStream, or stream=true). */
  readonly stream: boolean;
  /** 1 for the first attempt, +1 per retry. */
  readonly attempt: number;
  /** Aborted when the call is cancelled, times out, or its caller goes away: stop and clean up (RFC §18.6). */
  readonly signal: AbortSignal;
  /** A non-final frame (streaming output); the engine numbers it. Ignored once the call has ended. */
  emit(data: Buffer, contentType?: string): void;
  readonly ctx: CallContext;
}

/** A provider of tools: describes them and runs a call to one of them, answering its final JSON result. */
export interface ToolProvider {
  readonly id: string;
  describe(): readonly ToolDescriptor[];
  /**
   * Answers the final result (a JSON value, or a Buffer of `contentType` for a raw final frame), or throws a
   * ToolCallError (its code is the TOOL_ERROR error_code). On `signal` abort it should stop promptly and settle.
   */
  call(request: ToolRequest): Promise<unknown>;
  /** Whether it can take calls now (an external provider's agent is online); built-ins: always. */
  available?(): boolean;
  /** Why not available, in words (the Tools view, DescribeTools' callers); asked only when available() is false. */
  unavailableReason?(): string;
}

/** A provider's final result that is not JSON: the final frame carries `data` as `contentType` (and `summary`). */
export class RawToolResult {
  constructor(
    readonly data: Buffer,
    readonly contentType: string,
    readonly summary?: Buffer,
  ) {}
}

/** A finished call: one final frame's content. */
export interface ToolResult {
  readonly callId: string;
  readonly contentType: string;
  readonly data: Buffer;
}

// ---------------------------------------------------------------- what the engine is asked (one shape for every path)

/** A call as any path brings it (ToolService, a TOOL_CALL envelope, the coordinator itself). */
export interface CallInput {
  /** Empty: the engine assigns one (uuid). */
  readonly callId?: string;
  readonly providerId: string;
  readonly toolName: string;
  readonly contentType: string;
  /** JSON text as bytes (empty = `{}`). */
  readonly args: Uint8Array;
  /** Raw policy, as parsed by parseExecutionPolicy from the proto or the envelope's JSON. */
  readonly policy: ExecutionPolicy;
  readonly stream: boolean;
  /** `grpc`, `envelope`, `bridge` (the MCP bridge's workspace_* tools) or `internal`: shown in the Tools view. */
  readonly via: 'grpc' | 'envelope' | 'bridge' | 'internal';
  /** via = envelope: the TOOL_CALL envelope's message id (kept in the record, to answer it after a restart). */
  readonly messageId?: string;
}

/** Where the engine sends a call's frames: in order, then exactly one of end / fail. */
export interface FrameSink {
  frame(frame: ToolFrame): void;
  /** The terminal frame (final = true). */
  end(frame: ToolFrame): void;
  /** TOOL_ERROR: the call failed (timeout, budget, validation, provider error, AGENT_UNAVAILABLE…). */
  fail(error: ToolCallError): void;
}

// ---------------------------------------------------------------- providers and calls as the Tools view sees them (persisted)

/** A provider as DescribeTools and the Tools view list it. */
export interface ProviderInfo {
  readonly providerId: string;
  /** `builtin` (workspace, process, reasoning) or `agent` (RegisterProvider). */
  readonly kind: 'builtin' | 'agent';
  /** An agent provider's agent is online; `reasoning` has an inference engine agent online; `process` is enabled. */
  readonly available: boolean;
  /** Why not available, in words ("agent offline since …", "disabled: sw4rm.tools.process.enabled"). */
  readonly unavailableReason: string;
  readonly tools: readonly ToolDescriptor[];
  /** ms since epoch; 0 for built-ins. */
  readonly registeredAt: number;
}

export type CallOutcome = 'running' | 'queued' | 'awaiting_approval' | 'ok' | 'cancelled' | 'error';

/** One call as kept for the Tools view and Cancel (the newest RECENT_CALLS, persisted). */
export interface ToolCallRecord {
  readonly callId: string;
  readonly callerAgentId: string;
  readonly providerId: string;
  readonly toolName: string;
  readonly via: CallInput['via'];
  readonly stream: boolean;
  readonly outcome: CallOutcome;
  /** TOOL_ERROR error_code when outcome = error, e.g. WALL_TIMEOUT, AGENT_UNAVAILABLE, VALIDATION_ERROR. */
  readonly errorCode: string;
  readonly errorMessage: string;
  readonly startedAt: number;
  /** 0 while running. */
  readonly endedAt: number;
  readonly frames: number;
  readonly bytes: number;
  readonly attempts: number;
  /** The args as text, cut at 4 KiB (for the details document). */
  readonly argsExcerpt: string;
  /** The policy as given (after defaults). */
  readonly policy: ExecutionPolicy;
  /** The HITL invocation that approved or denied an escalation, if any. */
  readonly invocationId: string;
  /** The TOOL_CALL envelope's message id (via = envelope), to answer it after a restart. */
  readonly messageId: string;
}

/** A registered external provider, as stored. */
export interface ProviderRecord {
  readonly providerId: string;
  readonly tools: readonly ToolDescriptor[];
  readonly registeredAt: number;
}

/** The tools area's persistence (schema v11: tool_providers, tool_calls). */
export interface ToolsRepository {
  upsertProvider(record: ProviderRecord): void;
  deleteProvider(providerId: string): void;
  listProviders(): ProviderRecord[];
  upsertCall(record: ToolCallRecord): void;
  /** Newest first. */
  recentCalls(limit: number): ToolCallRecord[];
  call(callId: string): ToolCallRecord | undefined;
  /** Calls left running or queued or awaiting approval (after a crash). */
  unfinishedCalls(): ToolCallRecord[];
  /** Keeps the newest `keep` calls; answers how many were deleted (at most `batch`). */
  pruneCalls(keep: number, batch: number): number;
}

export interface ToolsStorage extends Transactions {
  readonly tools: ToolsRepository;
}

/** What changed, for the Tools view (fired after the commit). */
export interface ToolsChange {
  readonly kind: 'provider' | 'call';
  readonly id: string;
}

/** What the Tools view and the API read (Tools implements it). */
export interface ToolsQueries {
  providers(): ProviderInfo[];
  recentCalls(limit: number): ToolCallRecord[];
  callRecord(callId: string): ToolCallRecord | undefined;
  /** The frames kept for a call's details (the newest 20 in memory, each cut at 4 KiB; empty after a restart). */
  callFrames(callId: string): readonly {
    readonly frameNo: number;
    readonly final: boolean;
    readonly contentType: string;
    readonly text: string;
  }[];
  readonly onDidChange: Event<ToolsChange>;
}
