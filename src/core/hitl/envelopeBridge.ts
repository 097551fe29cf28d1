import type { Clock } from '../clock';
import { DisposableStore, type Disposable } from '../events';
import type { Refusal } from '../router/envelope';
import type { CoordinatorMailbox } from '../router/model';
import { decisionJson, type HitlService } from './hitlService';
import { HitlRequestError, parseInvocationRequest } from './request';

/** The envelope type carrying a decision back to the requester (the RFC has no HITL_DECISION message type). */
export const DECISION_MESSAGE_TYPE = 'CONTROL';

/**
 * HITL over the messaging plane: a HITL_INVOCATION envelope addressed to `coordinator` opens an invocation;
 * its decision goes back to the producer as a CONTROL envelope `{"type":"HITL_DECISION", ...}` with the
 * invocation envelope's correlation_id, and the invocation message becomes FULFILLED with the decision as its
 * cached result.
 */
export function bindHitlToRouter(hitl: HitlService, router: CoordinatorMailbox, clock: Clock): Disposable {
  const bindings = new DisposableStore();
  bindings.add(
    router.handleAtCoordinator('HITL_INVOCATION', (envelope, json, ctx, expiresAt): Refusal | undefined => {
      if (!json)
        return {
          code: 'VALIDATION_ERROR',
          detail: 'a HITL_INVOCATION to the coordinator carries a JSON object payload (content_type application/json)',
        };
      let request;
      try {
        request = parseInvocationRequest(json, {
          requester: envelope.producerId,
          correlationId: envelope.correlationId,
          now: clock.now(),
        });
      } catch (err) {
        if (err instanceof HitlRequestError) return { code: err.code, detail: err.message };
        throw err;
      }
      if (request.deadlineAt === undefined && expiresAt !== null) request = { ...request, deadlineAt: expiresAt };
      if (request.invocationId !== undefined) {
        // Without an idempotency token, a resend of the same invocation_id is answered like a duplicate (RFC §11.2).
        const existing = hitl.get(request.invocationId);
        if (existing && existing.requester !== request.requester) {
          return {
            code: 'PERMISSION_DENIED',
            detail: `invocation_id '${request.invocationId}' belongs to another requester`,
          };
        }
        if (existing?.state === 'pending') {
          return {
            code: 'ALREADY_IN_PROGRESS',
            detail: `HITL invocation '${existing.id}' is pending`,
            extra: { invocation_id: existing.id, original_status: 'pending' },
          };
        }
        if (existing) {
          const cached = {
            invocation_id: existing.id,
            original_status: existing.state,
            cached_result: decisionJson(existing),
          };
          return { code: 'DUPLICATE_DETECTED', detail: JSON.stringify(cached), extra: cached };
        }
      }
      try {
        hitl.open(request, { kind: 'envelope', messageId: envelope.messageId }, ctx);
      } catch (err) {
        if (err instanceof HitlRequestError) return { code: err.code, detail: err.message };
        throw err;
      }
      return undefined;
    }),
  );
  bindings.add(
    hitl.registerResponder('envelope', (invocation) => {
      if (invocation.origin.kind !== 'envelope') return;
      router.replyFromCoordinator(
        invocation.origin.messageId,
        DECISION_MESSAGE_TYPE,
        { type: 'HITL_DECISION', ...decisionJson(invocation) },
        { correlationId: invocation.correlationId },
      );
    }),
  );
  return bindings;
}
