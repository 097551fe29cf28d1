import type { PruneResult } from '../retention';
import type { Transactions } from '../store/store';
import type { CallContext } from '../context';
import type { Event } from '../events';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';
import type { HitlInvocation, HitlPolicy, InvocationOrigin, InvocationRequest } from './records';

export * from './records';
/** What other areas use of request.ts and policy.ts (neither imports this file). */
export { HitlRequestError, MAX_INVOCATION_BYTES, parseInvocationRequest, type RequestFrame } from './request';
export { applyFallback, type FallbackOutcome } from './policy';

/** One audit record (RFC §15, §15.1): who, when, why, what changed. */
export interface AuditEntry {
  readonly id: number;
  readonly invocationId: string;
  readonly at: number;
  /** opened, decided, timed_out, cancelled, extended, hitl_unavailable, requester_detached, restored */
  readonly kind: string;
  readonly actor: string;
  readonly automatic: boolean;
  /** Why (rationale, rule, policy) and what changed (state before/after, payload, deadline). */
  readonly details: Readonly<Record<string, unknown>>;
}

export interface AuditQuery {
  readonly invocationId?: string;
  readonly afterId?: number;
  /** Newest `limit` entries, ascending; default 10,000. */
  readonly limit?: number;
}

/** The HITL tables. */
export interface HitlRepository {
  put(invocation: HitlInvocation): void;
  get(id: string): HitlInvocation | undefined;
  /** Pending first, then the most recently updated; at most `limit` (default 1,000) settled ones. */
  list(options?: { readonly pendingOnly?: boolean; readonly limit?: number }): HitlInvocation[];
  /** Every invocation opened by an internal component (origin `internal`, this `component`), pending and settled, oldest first. */
  listOfComponent(component: string): HitlInvocation[];
  appendAudit(entry: Omit<AuditEntry, 'id'>): number;
  audit(query?: AuditQuery): AuditEntry[];
  /**
   * Deletes up to `limit` settled invocations last changed before `settledBefore`, the oldest first, with their
   * audit entries; pending ones are never deleted. `auditEntries` counts the audit entries that went with them.
   */
  pruneSettled(settledBefore: number, limit: number): PruneResult & { readonly auditEntries: number };
}

/** What the HITL service is handed of the store: its own repository and transactions. */
export interface HitlStorage extends Transactions {
  readonly hitl: HitlRepository;
}

/** What an operator (or a component acting for one) decides. */
export interface DecisionInput {
  readonly action: string;
  readonly rationale?: string;
  /** For `modify`: the edited payload (any JSON value). */
  readonly payload?: unknown;
}

export interface HitlChange {
  readonly kind: 'opened' | 'settled' | 'extended';
  readonly invocation: HitlInvocation;
}

/**
 * The invocation asked for cannot take this decision: it is unknown or already settled. Either way FAILED_PRECONDITION
 * `VALIDATION_ERROR: …` over gRPC; the bridge answers an unknown one NOT_FOUND (its own case, bridge/tools/errors.ts).
 */
export class HitlStateError extends SwarmError {
  constructor(
    readonly reason: 'not_found' | 'settled',
    message: string,
  ) {
    super(message);
    this.name = 'HitlStateError';
  }

  override get errorKind(): ErrorKind {
    return 'precondition';
  }

  override get errorCode(): Sw4rmCode {
    return 'VALIDATION_ERROR';
  }
}

/**
 * What other areas call of the HITL service (HitlService implements it; the composition root hands in the instance):
 * ask a human, decide or withdraw for one, read an invocation, wait for its decision, follow changes.
 */
export interface HitlInvocations {
  readonly onDidChange: Event<HitlChange>;
  readonly policy: HitlPolicy;
  open(
    request: InvocationRequest,
    origin: InvocationOrigin,
    ctx: CallContext,
  ): { invocation: HitlInvocation; reattached: boolean };
  decide(id: string, input: DecisionInput, operator: string, ctx: CallContext): HitlInvocation;
  cancel(id: string, by: string, reason: string, ctx: CallContext): HitlInvocation;
  whenSettled(id: string): Promise<HitlInvocation>;
  get(id: string): HitlInvocation | undefined;
  listOfComponent(component: string): HitlInvocation[];
}
