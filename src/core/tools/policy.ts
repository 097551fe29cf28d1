import { DEFAULT_EXECUTION_POLICY, type ExecutionPolicy } from './model';

/**
 * Execution policy (RFC §18.5): reading it from tool.proto's ExecutionPolicy or a TOOL_CALL envelope's JSON
 * (`execution_policy` / `policy`: proto names, the RFC example's `timeout_ms` / `retries`, message-types.txt's
 * `timeout_seconds` / `retry_attempts`), defaults (DENY_ALL, MINIMAL), and which policies need a human
 * (ELEVATED / PRIVILEGED / FULL_ACCESS → HITL TOOL_PRIVILEGE_ESCALATION). Owner: the engine part.
 */

/** The proto message as grpc-js hands it (Duration as {seconds, nanos}, uint64 as string or number). */
export interface ExecutionPolicyMessage {
  timeout?: { seconds?: string | number; nanos?: number } | null;
  max_retries?: number;
  backoff?: string;
  worktree_required?: boolean;
  network_policy?: string;
  privilege_level?: string;
  budget_cpu_ms?: string | number;
  budget_wall_ms?: string | number;
}

/** A refusal of a policy: VALIDATION_ERROR with the field named. */
export interface PolicyRefusal { readonly refused: string }

export function parseExecutionPolicy(_raw: ExecutionPolicyMessage | null | undefined): ExecutionPolicy | PolicyRefusal {
  void DEFAULT_EXECUTION_POLICY;
  throw new Error('not built yet');
}

export function parsePolicyJson(_raw: unknown): ExecutionPolicy | PolicyRefusal {
  throw new Error('not built yet');
}

/** Why a policy needs a human before the call runs, or undefined (RFC §18.5.2, §18.5.3). */
export function escalationReason(_policy: ExecutionPolicy): string | undefined {
  throw new Error('not built yet');
}
