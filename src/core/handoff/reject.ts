import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Speaker } from '../policy/model';
import { knows, mayActAs, speakerName } from './access';
import type { HandoffChanges } from './changes';
import type { HandoffRecord, HandoffRepository } from './model';
import type { MoveOn } from './moveOn';
import { denied, identifier, LIMITS, nonNegative, notFound, precondition, text } from './refusals';
import { rejected, type HandoffMemory } from './state';

/** RejectHandoff's HandoffResponse. */
export interface HandoffRejection {
  readonly requestId: string;
  /** accepting_agent: the agent answering. */
  readonly agentId: string;
  readonly reason: string;
  /** common.ErrorCode by name ('' = unspecified). */
  readonly code: string;
  readonly retryAfterMs: number;
  readonly redirectTo: string;
}

export interface RejectDeps {
  readonly clock: Clock;
  readonly handoffs: Pick<HandoffRepository, 'get'>;
  readonly memory: HandoffMemory;
  readonly changes: HandoffChanges;
  readonly moveOn: MoveOn;
  readonly catchUp: (requestId: string) => void;
}

/**
 * RejectHandoff: only the current target; reason, code and retry_after_ms kept; a redirect_to_agent_id that can take it
 * is the next target; else the next candidate (rerouting allowed), the operator (option), or the handoff ends REJECTED.
 */
export function reject(deps: RejectDeps, input: HandoffRejection, speaker: Speaker, ctx: CallContext): HandoffRecord {
  const requestId = identifier('request_id', input.requestId, LIMITS.request_id, true);
  const agentId = identifier('accepting_agent', input.agentId, LIMITS.agent_id, true);
  if (!mayActAs(speaker, agentId)) throw denied(`${speakerName(speaker)} may not answer as '${agentId}'`);
  const reason = text('rejection_reason', input.reason, LIMITS.rejection_reason);
  const code = identifier('rejection_code', input.code === 'ERROR_CODE_UNSPECIFIED' ? '' : input.code, 64, false);
  const retryAfterMs = nonNegative('retry_after_ms', input.retryAfterMs);
  const redirectTo = identifier('redirect_to_agent_id', input.redirectTo, LIMITS.agent_id, false);
  deps.catchUp(requestId);
  const { memory, changes } = deps;
  const record = memory.get(requestId) ?? deps.handoffs.get(requestId);
  if (!record) throw notFound(requestId);
  // A retry of this agent's rejection (its answer was lost; the handoff may have moved on since): nothing changes.
  if (record.attempts.some((a) => a.agentId === agentId && (a.outcome === 'rejected' || a.outcome === 'redirected')))
    return changes.full(record);
  if (!knows(record, speaker)) throw denied(`handoff '${requestId}' is not offered to '${agentId}'`);
  if (record.state !== 'PENDING')
    throw precondition(`handoff '${requestId}' is ${record.state}: it can no longer be rejected`);
  if (record.awaitingOperator)
    throw precondition(`handoff '${requestId}' waits for the operator; an agent may not reject it now`);
  if (record.toAgent !== agentId)
    throw denied(`only the current target '${record.toAgent}' may reject handoff '${requestId}'; '${agentId}' is not`);
  const open = memory.get(requestId)!;
  const hctx: CallContext = { ...ctx, correlationId: open.correlationId };
  return changes.full(
    changes.change(
      open,
      (draft) => {
        rejected(draft, { reason, code, retryAfterMs, redirectTo }, deps.clock.now());
        deps.moveOn.next(
          draft,
          'rejected',
          agentId,
          hctx,
          {
            rejected_by: agentId,
            rejection_reason: reason,
            rejection_code: code,
            retry_after_ms: retryAfterMs || undefined,
            redirect_to: redirectTo || undefined,
          },
          redirectTo,
        );
      },
      'reject',
    ),
  );
}
