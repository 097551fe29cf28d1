import { isoUtc, type Clock } from '../clock';
import type { CallContext } from '../context';
import { PAYLOAD_LIMITS } from '../limits';
import type { CoordinatorOutbox } from '../router/model';
import { contextKindOf } from './context';
import type { HandoffRecord, HandoffRepository } from './model';
import { EMPTY } from './state';

/** The NOTIFICATION payloads' `type` (README, "Handoffs"). */
export const HANDOFF_REQUEST_NOTICE = 'handoff_request';
export const HANDOFF_STATUS_NOTICE = 'handoff_status';
const NOTICE_CONTENT_TYPE = 'application/json';

/** What a notice's send did, as the transition's event records it. */
export type Sent = Record<string, unknown> & { sent: boolean };

/**
 * The target's `handoff_request` payload (README, "Handoffs"). The context travels as UTF-8 text (JSON content types,
 * valid UTF-8) or base64, unless the payload would exceed the NOTIFICATION limit: then `context_omitted` is true and
 * GetPendingHandoffs has it.
 */
export function requestNotice(
  record: HandoffRecord,
  context: Buffer,
  now: number,
  answerBy: number | null,
): Record<string, unknown> {
  const base: Record<string, unknown> = {
    type: HANDOFF_REQUEST_NOTICE,
    request_id: record.requestId,
    from_agent: record.fromAgent,
    to_agent: record.toAgent,
    reason: record.reason,
    capabilities_required: record.capabilitiesRequired,
    priority: record.priority,
    attempt: record.attempts.length,
    answer_by: answerBy === null ? null : isoUtc(answerBy),
    expires_at: record.expiresAt === null ? null : isoUtc(record.expiresAt),
    timeout_ms: record.timeoutMs,
    correlation_id: record.correlationId,
    task_id: record.taskId,
    parent_request_id: record.parentRequestId,
    carry_worktree: record.worktree
      ? { repo_id: record.worktree.repoId, worktree_id: record.worktree.worktreeId }
      : null,
    budget: record.budget && {
      token_budget_remaining: record.budget.tokenBudgetRemaining,
      wall_time_remaining_ms: record.budget.wallTimeRemainingMs,
      deadline_epoch_ms: record.budget.deadlineEpochMs,
      current_depth: record.budget.currentDepth,
      max_delegation_depth: record.budget.maxDelegationDepth,
    },
    context_content_type: record.contextContentType,
    context_bytes: record.contextBytes,
    at: isoUtc(now),
  };
  const textual = contextKindOf(record.contextContentType) !== 'opaque' ? utf8(context) : undefined;
  const withContext = {
    ...base,
    context_encoding: textual !== undefined ? 'utf8' : 'base64',
    context: textual ?? context.toString('base64'),
    context_omitted: false,
  };
  if (fits(withContext)) return withContext;
  return fitNotice({ ...base, context_encoding: null, context: null, context_omitted: true });
}

/** A party's `handoff_status` payload: `event` (accepted, rerouted, …) and what the record says now, with `extra`. */
export function statusNotice(
  record: HandoffRecord,
  event: string,
  extra: Record<string, unknown>,
  now: number,
): Record<string, unknown> {
  const attempt = record.attempts[record.attempts.length - 1];
  return fitNotice({
    type: HANDOFF_STATUS_NOTICE,
    event,
    request_id: record.requestId,
    status: record.state,
    awaiting_operator: record.awaitingOperator,
    from_agent: record.fromAgent,
    to_agent: record.toAgent,
    accepted_by: record.acceptedBy,
    correlation_id: record.correlationId,
    task_id: record.taskId,
    attempt: record.attempts.length,
    last_agent: attempt?.agentId ?? '',
    rejection_reason: record.rejectionReason,
    rejection_code: record.rejectionCode,
    retry_after_ms: attempt?.retryAfterMs ?? 0,
    expires_at: record.expiresAt === null ? null : isoUtc(record.expiresAt),
    at: isoUtc(now),
    ...extra,
  });
}

function utf8(bytes: Buffer): string | undefined {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

function fits(payload: Record<string, unknown>): boolean {
  return Buffer.byteLength(JSON.stringify(payload), 'utf8') <= PAYLOAD_LIMITS.NOTIFICATION;
}

/** A notice that would not fit the NOTIFICATION limit (long reasons, many escapes) has its texts cut. */
function fitNotice(payload: Record<string, unknown>): Record<string, unknown> {
  if (fits(payload)) return payload;
  const cut: Record<string, unknown> = { ...payload, texts_cut: true };
  for (const key of ['reason', 'rejection_reason'])
    if (typeof cut[key] === 'string') cut[key] = (cut[key] as string).slice(0, 500);
  return cut;
}

export interface NoticeDeps {
  readonly outbox: CoordinatorOutbox;
  readonly handoffs: Pick<HandoffRepository, 'get'>;
  readonly clock: Clock;
  /** When the current target must answer (state.ts answerBy with the options' window). */
  readonly answerBy: (record: HandoffRecord) => number | null;
}

/** Sends the notices, inside the transaction of the change they tell of (the outbox writes the envelope in it). */
export class HandoffNotices {
  constructor(private readonly deps: NoticeDeps) {}

  /** The target's `handoff_request` NOTIFICATION; its outcome goes into the transition's event. */
  toTarget(record: HandoffRecord, ctx: CallContext): Sent {
    const context =
      record.context.byteLength > 0 || record.contextBytes === 0
        ? record.context
        : (this.deps.handoffs.get(record.requestId)?.context ?? EMPTY);
    const payload = requestNotice(record, context, this.deps.clock.now(), this.deps.answerBy(record));
    return this.send(record.toAgent, payload, record, ctx);
  }

  /** A party's `handoff_status` NOTIFICATION. */
  toParty(record: HandoffRecord, to: string, event: string, extra: Record<string, unknown>, ctx: CallContext): Sent {
    return this.send(to, statusNotice(record, event, extra, this.deps.clock.now()), record, ctx);
  }

  private send(to: string, payload: Record<string, unknown>, record: HandoffRecord, ctx: CallContext): Sent {
    const sent = this.deps.outbox.sendToAgent(
      {
        to,
        messageType: 'NOTIFICATION',
        contentType: NOTICE_CONTENT_TYPE,
        correlationId: record.correlationId,
        payload: Buffer.from(JSON.stringify(payload), 'utf8'),
      },
      ctx,
    );
    return sent.accepted
      ? { to, sent: true, message_id: sent.messageId }
      : { to, sent: false, code: sent.code, reason: sent.reason.slice(0, 300) };
  }
}
