import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import type { HitlInvocation } from '../../core/hitl/model';
import { parseBody, parseInvocationRequest } from '../../core/hitl/request';
import { principalOf } from '../auth';
import { callContext } from '../callContext';
import { statusOf } from '../errorStatus';

/** hitl.proto HitlInvocation as proto-loader hands it over (keepCase, enums as strings). */
interface HitlInvocationMessage {
  reason_type?: string | number;
  context?: Buffer;
  proposed_actions?: string[];
  priority?: number;
}

interface HitlDecisionMessage {
  action: string;
  decision_payload: Buffer;
  rationale: string;
}

/** The Decide call answers this long before its own gRPC deadline, so that the fallback reaches the caller. */
const DEADLINE_MARGIN_MS = 250;

/**
 * sw4rm.hitl.HitlService.Decide: opens an invocation and blocks until it is decided, its deadline passes
 * (the fallback comes back, saying so in its rationale) or it is cancelled. The requester is the call's
 * `sw4rm-agent-id` metadata (else the context's agent_id). An `invocation_id` in the context lets a caller
 * whose call broke re-attach to its invocation instead of opening another one.
 */
export class HitlServiceAdapter {
  static readonly serviceName = 'sw4rm.hitl.HitlService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { hitl, ids, clock } = this.coordinator;
    return {
      Decide: (
        call: grpc.ServerUnaryCall<HitlInvocationMessage, HitlDecisionMessage>,
        callback: grpc.sendUnaryData<HitlDecisionMessage>,
      ) => {
        const ctx = callContext(call, ids);
        let invocation: HitlInvocation;
        try {
          const now = clock.now();
          let request = parseInvocationRequest(parseBody(call.request.context ?? Buffer.alloc(0)), {
            reasonType: call.request.reason_type === undefined ? undefined : String(call.request.reason_type),
            proposedActions: call.request.proposed_actions,
            priority: call.request.priority,
            // An agent credential's own agent asks when the caller names none (the identity check refused any other).
            requester: metadataText(call.metadata, 'sw4rm-agent-id') ?? agentOf(call),
            correlationId: ctx.correlationId,
            now,
          });
          const callDeadline = deadlineMs(call.getDeadline());
          if (callDeadline !== undefined) {
            const latest = now + Math.max(0, callDeadline - Date.now() - DEADLINE_MARGIN_MS);
            if (request.deadlineAt === undefined || request.deadlineAt > latest)
              request = { ...request, deadlineAt: latest };
          }
          invocation = hitl.open(request, { kind: 'rpc' }, ctx).invocation;
        } catch (err) {
          callback(errorStatus(err));
          return;
        }
        const metadata = new grpc.Metadata();
        metadata.set('sw4rm-hitl-invocation-id', invocation.id);
        call.sendMetadata(metadata);
        let answered = false;
        call.on('cancelled', () => {
          if (!answered) hitl.requesterDetached(invocation.id, ctx);
        });
        hitl
          .whenSettled(invocation.id)
          .then(async (settled) => {
            await this.coordinator.store.whenDurable();
            answered = true;
            const decision = settled.decision!;
            const trailer = new grpc.Metadata();
            trailer.set('sw4rm-hitl-state', settled.state);
            trailer.set('sw4rm-hitl-decided-by', decision.origin.by);
            trailer.set('sw4rm-hitl-automatic', String(decision.origin.automatic));
            callback(
              null,
              {
                action: decision.action,
                decision_payload:
                  decision.payload === null || decision.payload === undefined
                    ? Buffer.alloc(0)
                    : Buffer.from(JSON.stringify(decision.payload)),
                rationale: decision.rationale,
              },
              trailer,
            );
          })
          .catch((err: Error) => {
            answered = true;
            callback({
              code: grpc.status.UNAVAILABLE,
              details: `AGENT_SHUTDOWN: ${err.message}; call Decide again with context.invocation_id "${invocation.id}" to re-attach`,
            });
          });
      },
    };
  }
}

/** HitlRequestError by its code (PERMISSION_DENIED, RESOURCE_EXHAUSTED, INVALID_ARGUMENT), HitlStateError FAILED_PRECONDITION. */
const errorStatus = statusOf;

function agentOf(call: { readonly metadata: grpc.Metadata }): string | undefined {
  const principal = principalOf(call);
  return principal?.kind === 'agent' ? principal.agentId : undefined;
}

function metadataText(metadata: grpc.Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0];
  return typeof value === 'string' && value.trim() !== '' ? value.trim().slice(0, 256) : undefined;
}

/** A gRPC deadline as ms since the epoch, or undefined when the call has none. */
function deadlineMs(deadline: grpc.Deadline): number | undefined {
  const ms = deadline instanceof Date ? deadline.getTime() : deadline;
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}
