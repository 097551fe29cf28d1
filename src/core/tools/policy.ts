import { DEFAULT_EXECUTION_POLICY, NETWORK_POLICIES, PRIVILEGE_LEVELS, type ExecutionPolicy } from './model';

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
export interface PolicyRefusal {
  readonly refused: string;
}

/** The longest timeout or budget a policy may ask for: a day (larger values are refused, not clamped silently). */
export const MAX_POLICY_MS = 24 * 3_600_000;
/** The most retries a policy may ask for. */
export const MAX_POLICY_RETRIES = 10;

const BACKOFFS = ['exponential', 'linear', 'fixed'] as const;

type Field =
  | 'timeout'
  | 'max_retries'
  | 'backoff'
  | 'worktree_required'
  | 'network_policy'
  | 'privilege_level'
  | 'budget_cpu_ms'
  | 'budget_wall_ms';

class Refused extends Error {
  constructor(
    readonly field: string,
    why: string,
  ) {
    super(why);
  }
}

/** A whole number of ms in [0, MAX_POLICY_MS] from a number or a decimal string (uint64 as grpc-js hands it). */
function millis(field: string, value: unknown): number {
  if (value === undefined || value === null || value === '') return 0;
  const n = typeof value === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0)
    throw new Refused(field, `must be a non-negative number of milliseconds, not ${describe(value)}`);
  if (n > MAX_POLICY_MS) throw new Refused(field, `must be at most ${MAX_POLICY_MS} ms (a day), not ${n}`);
  return Math.round(n);
}

function retries(field: string, value: unknown): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0)
    throw new Refused(field, `must be a non-negative integer, not ${describe(value)}`);
  if (value > MAX_POLICY_RETRIES) throw new Refused(field, `must be at most ${MAX_POLICY_RETRIES}, not ${value}`);
  return value;
}

/** One of `allowed`, case-insensitive; empty = `fallback`; anything else refused naming the allowed values. */
function oneOf<T extends string>(field: string, value: unknown, allowed: readonly T[], fallback: T, upper: boolean): T {
  if (value === undefined || value === null || value === '') return fallback;
  if (typeof value !== 'string')
    throw new Refused(field, `must be a string, one of ${allowed.join(', ')}, not ${describe(value)}`);
  const normal = upper ? value.trim().toUpperCase() : value.trim().toLowerCase();
  const found = allowed.find((a) => a === normal);
  if (!found) throw new Refused(field, `must be one of ${allowed.join(', ')} (any case), not '${value.slice(0, 64)}'`);
  return found;
}

function bool(field: string, value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw new Refused(field, `must be true or false, not ${describe(value)}`);
  return value;
}

function describe(value: unknown): string {
  const text = typeof value === 'string' ? `'${value.slice(0, 64)}'` : (JSON.stringify(value) ?? String(value));
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

function build(read: (field: Field) => unknown, timeoutMs: () => number): ExecutionPolicy | PolicyRefusal {
  try {
    return {
      timeoutMs: timeoutMs(),
      maxRetries: retries('max_retries', read('max_retries')),
      backoff: oneOf('backoff', read('backoff'), BACKOFFS, DEFAULT_EXECUTION_POLICY.backoff, false),
      worktreeRequired: bool('worktree_required', read('worktree_required')),
      networkPolicy: oneOf(
        'network_policy',
        read('network_policy'),
        NETWORK_POLICIES,
        DEFAULT_EXECUTION_POLICY.networkPolicy,
        true,
      ),
      privilegeLevel: oneOf(
        'privilege_level',
        read('privilege_level'),
        PRIVILEGE_LEVELS,
        DEFAULT_EXECUTION_POLICY.privilegeLevel,
        true,
      ),
      budgetCpuMs: millis('budget_cpu_ms', read('budget_cpu_ms')),
      budgetWallMs: millis('budget_wall_ms', read('budget_wall_ms')),
    };
  } catch (err) {
    if (err instanceof Refused) return { refused: `execution_policy.${err.field}: ${err.message}` };
    throw err;
  }
}

/** tool.proto's ExecutionPolicy (absent = every default). */
export function parseExecutionPolicy(raw: ExecutionPolicyMessage | null | undefined): ExecutionPolicy | PolicyRefusal {
  if (!raw) return DEFAULT_EXECUTION_POLICY;
  return build(
    (field) => raw[field as Exclude<Field, 'timeout'>],
    () => {
      const timeout = raw.timeout;
      if (!timeout) return 0;
      const seconds = millis('timeout.seconds', timeout.seconds ?? 0);
      const nanos = timeout.nanos ?? 0;
      if (typeof nanos !== 'number' || !Number.isInteger(nanos) || nanos < 0 || nanos > 999_999_999)
        throw new Refused('timeout.nanos', `must be 0…999999999, not ${describe(nanos)}`);
      return millis('timeout', seconds * 1000 + Math.ceil(nanos / 1e6));
    },
  );
}

/**
 * A TOOL_CALL envelope's `execution_policy` (or `policy`) object: proto field names, and the RFC example's
 * `timeout_ms` / `retries` and message-types.txt's `timeout_seconds` / `retry_attempts`; unknown keys (e.g.
 * `isolation`, `resource_limits`) are ignored. Absent or null = every default.
 */
export function parsePolicyJson(raw: unknown): ExecutionPolicy | PolicyRefusal {
  if (raw === undefined || raw === null) return DEFAULT_EXECUTION_POLICY;
  if (typeof raw !== 'object' || Array.isArray(raw))
    return { refused: `execution_policy: must be a JSON object, not ${describe(raw)}` };
  const o = raw as Record<string, unknown>;
  const first = (...names: string[]): [string, unknown] => {
    for (const name of names) if (o[name] !== undefined && o[name] !== null) return [name, o[name]];
    return [names[0], undefined];
  };
  return build(
    (field) => {
      if (field === 'max_retries') {
        const [, value] = first('max_retries', 'retries', 'retry_attempts');
        return value;
      }
      return o[field];
    },
    () => {
      const [name, value] = first('timeout_ms', 'timeout_seconds', 'timeout');
      if (value === undefined) return 0;
      if (name === 'timeout_ms') return millis('timeout_ms', value);
      if (name === 'timeout_seconds') {
        if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
          throw new Refused('timeout_seconds', `must be a non-negative number of seconds, not ${describe(value)}`);
        return millis('timeout_seconds', value * 1000);
      }
      // `timeout` as the proto's JSON mapping writes a Duration: "1.5s", or {seconds, nanos}.
      if (typeof value === 'string' && /^\d+(\.\d+)?s$/.test(value))
        return millis('timeout', Number(value.slice(0, -1)) * 1000);
      if (typeof value === 'object' && !Array.isArray(value)) {
        const d = value as { seconds?: unknown; nanos?: unknown };
        return millis('timeout', Number(d.seconds ?? 0) * 1000 + Math.ceil(Number(d.nanos ?? 0) / 1e6));
      }
      throw new Refused('timeout', `must be a duration such as "30s", not ${describe(value)}`);
    },
  );
}

/** Whether `parsed` is a refusal. */
export function isPolicyRefusal(parsed: ExecutionPolicy | PolicyRefusal): parsed is PolicyRefusal {
  return 'refused' in parsed;
}

/** Why a policy needs a human before the call runs, or undefined (RFC §18.5.2, §18.5.3). */
export function escalationReason(policy: ExecutionPolicy): string | undefined {
  const reasons: string[] = [];
  if (policy.privilegeLevel === 'ELEVATED' || policy.privilegeLevel === 'PRIVILEGED')
    reasons.push(`privilege_level ${policy.privilegeLevel}`);
  if (policy.networkPolicy === 'FULL_ACCESS') reasons.push('network_policy FULL_ACCESS');
  return reasons.length > 0 ? `the call asks for ${reasons.join(' and ')}` : undefined;
}
