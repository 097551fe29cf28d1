import type { HitlInvocation } from '../hitl/model';
import type { ParallelismVerdict } from './model';

/** What the gate knows of a pair of tasks whose scopes overlap. */
export type PairDecision =
  /** The scorer's answer is awaited (an asynchronous scorer); the object's identity tells a late verdict it still counts. */
  | { readonly state: 'scoring' }
  | { readonly state: 'pending'; readonly invocationId: string }
  | { readonly state: 'parallel' }
  | { readonly state: 'serialise' };

/** A CONFLICT invocation the gate opened for a pair; `confidence` null: the scorer was unavailable. */
export interface ConflictUse {
  readonly kind: 'conflict';
  readonly taskId: string;
  readonly otherTaskId: string;
  readonly confidence: number | null;
}

/** The key of an unordered pair of tasks (asked once per pair). */
export function pairKey(a: string, b: string): string {
  return a < b ? JSON.stringify([a, b]) : JSON.stringify([b, a]);
}

export function pairHas(key: string, taskId: string): boolean {
  const [a, b] = JSON.parse(key) as [string, string];
  return a === taskId || b === taskId;
}

/** The one rule for a settled CONFLICT invocation: approve (or modify to run_in_parallel) = parallel, anything else = serialise. */
export function conflictIsParallel(invocation: HitlInvocation): boolean {
  const action = invocation.decision?.action ?? 'deny';
  return action === 'approve' || (action === 'modify' && modifiedToParallel(invocation.decision?.payload));
}

/** `modify` with payload "run_in_parallel" or {"decision": "run_in_parallel"} runs in parallel; any other payload serialises. */
function modifiedToParallel(payload: unknown): boolean {
  const value =
    typeof payload === 'string'
      ? payload
      : payload && typeof payload === 'object'
        ? (payload as Record<string, unknown>).decision
        : undefined;
  return value === 'run_in_parallel';
}

/** Why a scorer's verdict cannot be used (a confidence outside [0, 1], notes not text), or undefined. */
export function verdictRefusal(verdict: unknown): string | undefined {
  const v = verdict as Partial<ParallelismVerdict> | null;
  if (!v || typeof v !== 'object') return 'the scorer answered no verdict';
  if (typeof v.confidence !== 'number' || !(v.confidence >= 0 && v.confidence <= 1))
    return `the scorer answered a confidence outside [0, 1]: ${String(v.confidence)}`;
  if (typeof v.notes !== 'string') return 'the scorer answered notes that are not text';
  return undefined;
}

export function isPromiseLike<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}
