import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { isoUtc } from '../../core/clock';
import { FIELD_LIMITS } from '../../core/fieldLimits';
import type { HandoffBudget, HandoffDelegationPolicy, HandoffRecord } from '../../core/handoff/model';
import { NegotiationError } from '../../core/policy/speaker';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';
import { statusOf } from '../errorStatus';
import { speakerOf } from '../speaker';

/** RequestHandoff's call metadata (README, "Handoffs"). */
export const CONTEXT_CONTENT_TYPE_METADATA = 'sw4rm-context-content-type';
export const TASK_ID_METADATA = 'sw4rm-task-id';
export const CORRELATION_ID_METADATA = 'sw4rm-correlation-id';
export const PARENT_REQUEST_ID_METADATA = 'sw4rm-parent-request-id';
export const WORKTREE_METADATA = 'sw4rm-handoff-worktree';
/** The one value of sw4rm-handoff-worktree. */
export const WORKTREE_CARRY = 'carry';
/**
 * GetPendingHandoffs' trailers (README, "Handoffs"): `sw4rm-pending-handoffs`, JSON (printable ASCII: anything else
 * \u-escaped) `{"more": n, "handoffs": {"<request_id>": {…}}}` with what HandoffRequest has no field for; and
 * `sw4rm-pending-more`: how many pending handoffs the answer left out (ask again after answering these).
 */
export const PENDING_TRAILER = 'sw4rm-pending-handoffs';
export const PENDING_MORE_TRAILER = 'sw4rm-pending-more';
/** The JSON trailer's size at most (bytes): gRPC clients commonly accept 8 KiB of metadata in all. */
export const PENDING_TRAILER_BYTES = 6 * 1024;

const LIMITS = FIELD_LIMITS.handoff;

interface DurationMessage {
  seconds?: string | number;
  nanos?: number;
}
type Wire = Record<string, unknown>;

const invalid = (message: string) => new NegotiationError('invalid', 'VALIDATION_ERROR', message);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number => (typeof v === 'number' ? v : typeof v === 'string' && v !== '' ? Number(v) : 0);

/** A metadata value as text ('' when absent); larger than `max` characters is refused. */
function metadataText(metadata: grpc.Metadata, key: string, max: number): string {
  const values = metadata.get(key);
  if (values.length > 1) throw invalid(`metadata ${key} is given ${values.length} times`);
  const value = values[0];
  if (value === undefined) return '';
  const text = typeof value === 'string' ? value : Buffer.from(value).toString('utf8');
  if (text.length > max) throw invalid(`metadata ${key} is longer than ${max} characters`);
  return text.trim();
}

/** google.protobuf.Duration → ms; absent or zero → null (the default). */
function timeoutMs(duration: DurationMessage | null | undefined): number | null {
  if (!duration) return null;
  const seconds = Number(duration.seconds ?? 0);
  const nanos = Number(duration.nanos ?? 0);
  if (!Number.isFinite(seconds) || !Number.isFinite(nanos) || seconds < 0 || nanos < 0)
    throw invalid('timeout must be a non-negative duration');
  const ms = seconds * 1000 + Math.ceil(nanos / 1e6);
  return ms > 0 ? ms : null;
}

function budgetOf(b: Wire | null | undefined): HandoffBudget | null {
  if (!b) return null;
  return {
    tokenBudgetRemaining: num(b.token_budget_remaining),
    wallTimeRemainingMs: num(b.wall_time_remaining_ms),
    deadlineEpochMs: num(b.deadline_epoch_ms),
    currentDepth: num(b.current_depth),
    maxDelegationDepth: num(b.max_delegation_depth),
  };
}

function policyOf(p: Wire | null | undefined): HandoffDelegationPolicy | null {
  if (!p) return null;
  return {
    maxRetriesOnOverloaded: num(p.max_retries_on_overloaded),
    initialBackoffMs: num(p.initial_backoff_ms),
    backoffMultiplier: num(p.backoff_multiplier),
    maxBackoffMs: num(p.max_backoff_ms),
    allowSpilloverRouting: p.allow_spillover_routing === true,
    maxRedirects: num(p.max_redirects),
  };
}

/** A stored handoff as handoff.proto HandoffRequest (GetPendingHandoffs): `timeout` is what remains of the target's time to answer (`answerBy`). */
export function requestMessage(r: HandoffRecord, now: number, answerBy: number | null): Wire {
  const remaining = Math.max(0, (answerBy ?? now) - now);
  return {
    request_id: r.requestId,
    from_agent: r.fromAgent,
    to_agent: r.toAgent,
    reason: r.reason,
    context_snapshot: r.context,
    capabilities_required: [...r.capabilitiesRequired],
    priority: r.priority,
    timeout: { seconds: String(Math.floor(remaining / 1000)), nanos: (remaining % 1000) * 1e6 },
    budget: r.budget && {
      token_budget_remaining: String(r.budget.tokenBudgetRemaining),
      wall_time_remaining_ms: String(r.budget.wallTimeRemainingMs),
      deadline_epoch_ms: String(r.budget.deadlineEpochMs),
      current_depth: r.budget.currentDepth,
      max_delegation_depth: r.budget.maxDelegationDepth,
    },
    delegation_policy: r.delegationPolicy && {
      max_retries_on_overloaded: r.delegationPolicy.maxRetriesOnOverloaded,
      initial_backoff_ms: String(r.delegationPolicy.initialBackoffMs),
      backoff_multiplier: r.delegationPolicy.backoffMultiplier,
      max_backoff_ms: String(r.delegationPolicy.maxBackoffMs),
      allow_spillover_routing: r.delegationPolicy.allowSpilloverRouting,
      max_redirects: r.delegationPolicy.maxRedirects,
    },
  };
}

/** What HandoffRequest has no field for, for the trailer (README, "Handoffs", GetPendingHandoffs). */
export function pendingExtra(r: HandoffRecord, answerBy: number | null): Wire {
  return {
    context_content_type: r.contextContentType,
    correlation_id: r.correlationId,
    task_id: r.taskId,
    parent_request_id: r.parentRequestId,
    carry_worktree: r.worktree ? { repo_id: r.worktree.repoId, worktree_id: r.worktree.worktreeId } : null,
    attempt: r.attempts.length,
    answer_by: answerBy === null ? null : isoUtc(answerBy),
    expires_at: r.expiresAt === null ? null : isoUtc(r.expiresAt),
    requested_at: isoUtc(r.requestedAt),
  };
}

/** JSON as printable ASCII (a metadata value): every character outside 0x20–0x7e \u-escaped (JSON.stringify escapes control characters). */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * GetPendingHandoffs' answer: the records as HandoffRequests and the trailers. Records whose trailer entry would pass
 * PENDING_TRAILER_BYTES are left out too (counted in `more`; one is always answered).
 */
export function pendingAnswer(
  page: { readonly records: readonly HandoffRecord[]; readonly more: number },
  now: number,
  answerBy: (r: HandoffRecord) => number | null,
): { readonly response: Wire; readonly trailer: grpc.Metadata } {
  const entries: Array<[string, Wire]> = [];
  let size = asciiJson({ more: page.more + page.records.length, handoffs: {} }).length;
  for (const r of page.records) {
    const entry = pendingExtra(r, answerBy(r));
    const cost = asciiJson({ [r.requestId]: entry }).length;
    if (entries.length > 0 && size + cost > PENDING_TRAILER_BYTES) break;
    entries.push([r.requestId, entry]);
    size += cost;
  }
  const answered = page.records.slice(0, entries.length);
  const more = page.more + page.records.length - answered.length;
  const trailer = new grpc.Metadata();
  trailer.set(PENDING_TRAILER, asciiJson({ more, handoffs: Object.fromEntries(entries) }));
  trailer.set(PENDING_MORE_TRAILER, String(more));
  return { response: { pending_requests: answered.map((r) => requestMessage(r, now, answerBy(r))) }, trailer };
}

/** AcceptHandoff's HandoffResponse must say accept: accepted true, no rejection fields (README, "Handoffs"). */
function acceptRefusal(r: Wire): string | undefined {
  if (r.accepted !== true)
    return 'AcceptHandoff with accepted false: the response says it does not accept; call RejectHandoff to decline';
  const code = str(r.rejection_code);
  for (const [field, set] of [
    ['rejection_reason', str(r.rejection_reason) !== ''],
    ['rejection_code', code !== '' && code !== 'ERROR_CODE_UNSPECIFIED' && code !== '0'],
    ['retry_after_ms', num(r.retry_after_ms) !== 0],
    ['redirect_to_agent_id', str(r.redirect_to_agent_id) !== ''],
  ] as const) {
    if (set)
      return `AcceptHandoff carries ${field}, which only a rejection has: call RejectHandoff to decline (or leave it empty to accept)`;
  }
  return undefined;
}

/**
 * sw4rm.handoff.HandoffService (handoff.proto; RFC §17.6) over the core's Handoffs: RequestHandoff (metadata
 * sw4rm-context-content-type, sw4rm-task-id, sw4rm-correlation-id, sw4rm-parent-request-id, sw4rm-handoff-worktree),
 * AcceptHandoff (accepted true, no rejection fields), RejectHandoff (accepted false), GetPendingHandoffs (bounded;
 * trailers), CompleteHandoff, CancelDelegation. Answers once durable; a refusal is
 * the NegotiationError's status with `<CODE>: <why>` as details (statusOf). identity.ts checks from_agent,
 * accepting_agent and agent_id against the caller's credential before a handler runs; the core checks the rest.
 */
export class HandoffServiceAdapter {
  static readonly serviceName = 'sw4rm.handoff.HandoffService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { handoffs, store, ids, credentials, clock } = this.coordinator;
    type Call = grpc.ServerUnaryCall<Wire, unknown>;
    const unary = (work: (call: Call) => unknown) => (call: Call, callback: grpc.sendUnaryData<unknown>) => {
      try {
        answerWhenDurable(store, callback, work(call));
      } catch (err) {
        callback(statusOf(err));
      }
    };
    return {
      RequestHandoff: unary((call) => {
        const r = call.request;
        const worktree = metadataText(call.metadata, WORKTREE_METADATA, 64);
        if (worktree !== '' && worktree !== WORKTREE_CARRY)
          throw invalid(
            `metadata ${WORKTREE_METADATA} may only be '${WORKTREE_CARRY}', not '${worktree.slice(0, 40)}'`,
          );
        handoffs.request(
          {
            requestId: str(r.request_id),
            fromAgent: str(r.from_agent),
            toAgent: str(r.to_agent),
            reason: str(r.reason),
            context: r.context_snapshot instanceof Uint8Array ? Buffer.from(r.context_snapshot) : Buffer.alloc(0),
            contextContentType: metadataText(call.metadata, CONTEXT_CONTENT_TYPE_METADATA, LIMITS.content_type),
            capabilitiesRequired: Array.isArray(r.capabilities_required) ? r.capabilities_required.map(str) : [],
            priority: num(r.priority),
            timeoutMs: timeoutMs(r.timeout as DurationMessage | null),
            budget: budgetOf(r.budget as Wire | null),
            delegationPolicy: policyOf(r.delegation_policy as Wire | null),
            taskId: metadataText(call.metadata, TASK_ID_METADATA, LIMITS.task_id),
            correlationId: metadataText(call.metadata, CORRELATION_ID_METADATA, LIMITS.correlation_id),
            parentRequestId: metadataText(call.metadata, PARENT_REQUEST_ID_METADATA, LIMITS.request_id),
            carryWorktree: worktree === WORKTREE_CARRY,
          },
          speakerOf(call, credentials),
          callContext(call, ids),
        );
        return {};
      }),
      AcceptHandoff: (call: Call, callback: grpc.sendUnaryData<unknown>) => {
        const r = call.request;
        let accepted: Promise<HandoffRecord>;
        try {
          const refusal = acceptRefusal(r);
          if (refusal !== undefined) throw invalid(refusal);
          accepted = handoffs.accept(
            str(r.request_id),
            str(r.accepting_agent),
            speakerOf(call, credentials),
            callContext(call, ids),
          );
        } catch (err) {
          callback(statusOf(err));
          return;
        }
        accepted.then(
          () => answerWhenDurable(store, callback, {}),
          (err: unknown) => callback(statusOf(err)),
        );
      },
      RejectHandoff: unary((call) => {
        const r = call.request;
        if (r.accepted === true)
          throw invalid(
            'RejectHandoff with accepted true: the response says it accepts; call AcceptHandoff to take the handoff',
          );
        const code = str(r.rejection_code) || (typeof r.rejection_code === 'number' ? String(r.rejection_code) : '');
        handoffs.reject(
          {
            requestId: str(r.request_id),
            agentId: str(r.accepting_agent),
            reason: str(r.rejection_reason),
            code,
            retryAfterMs: num(r.retry_after_ms),
            redirectTo: str(r.redirect_to_agent_id),
          },
          speakerOf(call, credentials),
          callContext(call, ids),
        );
        return {};
      }),
      GetPendingHandoffs: (call: Call, callback: grpc.sendUnaryData<unknown>) => {
        try {
          const page = handoffs.pending(str(call.request.agent_id), speakerOf(call, credentials));
          const { response, trailer } = pendingAnswer(page, clock.now(), (r) => handoffs.answerBy(r));
          answerWhenDurable(store, callback, response, undefined, trailer);
        } catch (err) {
          callback(statusOf(err));
        }
      },
      CompleteHandoff: unary((call) => {
        const status = call.request.status;
        return handoffs.complete(
          str(call.request.request_id),
          typeof status === 'number' ? String(status) : str(status),
          speakerOf(call, credentials),
          callContext(call, ids),
        );
      }),
      CancelDelegation: unary((call) => {
        const r = call.request;
        return handoffs.cancelDelegation(
          str(r.correlation_id),
          str(r.reason),
          num(r.grace_period_ms),
          speakerOf(call, credentials),
          callContext(call, ids),
        );
      }),
    };
  }
}
