import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import type { Envelope } from '../../core/router/envelope';
import type { MessageState } from '../../core/router/lifecycle';
import { StreamRefusal, type InboxSink, type SendResult } from '../../core/router/router';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';

/** common.proto Envelope as proto-loader hands it over (keepCase, longs and enums as strings). */
export interface EnvelopeMessage {
  message_id?: string;
  idempotency_token?: string;
  producer_id?: string;
  correlation_id?: string;
  sequence_number?: string | number;
  retry_count?: number;
  message_type?: string | number;
  content_type?: string;
  content_length?: string | number;
  repo_id?: string;
  worktree_id?: string;
  hlc_timestamp?: string;
  ttl_ms?: string | number;
  timestamp?: { seconds?: string | number; nanos?: number } | null;
  payload?: Buffer;
  state?: string | number;
  parent_correlation_id?: string;
}

/** Proto → core. Numbers that do not fit are passed on as NaN/strings for the core's validation to refuse. */
export function envelopeFromMessage(m: EnvelopeMessage): Envelope {
  const ts = m.timestamp;
  const timestampMs =
    ts && (Number(ts.seconds ?? 0) !== 0 || (ts.nanos ?? 0) !== 0)
      ? Number(ts.seconds ?? 0) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6)
      : null;
  return {
    messageId: m.message_id ?? '',
    idempotencyToken: m.idempotency_token ?? '',
    producerId: m.producer_id ?? '',
    correlationId: m.correlation_id ?? '',
    sequenceNumber: String(m.sequence_number ?? '0'),
    retryCount: Number(m.retry_count ?? 0),
    messageType: String(m.message_type ?? 'MESSAGE_TYPE_UNSPECIFIED'),
    contentType: m.content_type ?? '',
    contentLength: String(m.content_length ?? '0'),
    repoId: m.repo_id ?? '',
    worktreeId: m.worktree_id ?? '',
    hlcTimestamp: m.hlc_timestamp ?? '',
    ttlMs: Number(m.ttl_ms ?? 0),
    timestampMs:
      timestampMs !== null && Number.isFinite(timestampMs) && Math.abs(timestampMs) <= 8.64e15
        ? timestampMs
        : timestampMs === null
          ? null
          : NaN,
    payload: m.payload ?? Buffer.alloc(0),
    parentCorrelationId: m.parent_correlation_id ?? '',
  };
}

/** common.proto EnvelopeState of each lifecycle state; RETRYING (a timed-out attempt being retried) is TIMED_OUT. */
const ENVELOPE_STATES: Readonly<Record<MessageState, string>> = {
  SENT: 'ENVELOPE_STATE_SENT',
  RECEIVED: 'ENVELOPE_STATE_RECEIVED',
  READ: 'ENVELOPE_STATE_READ',
  FULFILLED: 'ENVELOPE_STATE_FULFILLED',
  REJECTED: 'ENVELOPE_STATE_REJECTED',
  FAILED: 'ENVELOPE_STATE_FAILED',
  TIMED_OUT: 'ENVELOPE_STATE_TIMED_OUT',
  RETRYING: 'ENVELOPE_STATE_TIMED_OUT',
};

/**
 * Core → proto, with `state` the message's lifecycle state. An inbox stream writes only messages that are SENT:
 * the first protocol ACK confirms a delivery, so a message RECEIVED or later is never written to a stream again,
 * and the coordinator's own envelopes are SENT when written. Hence the default.
 */
export function envelopeToMessage(e: Envelope, state: MessageState = 'SENT'): EnvelopeMessage {
  return {
    message_id: e.messageId,
    idempotency_token: e.idempotencyToken,
    producer_id: e.producerId,
    correlation_id: e.correlationId,
    sequence_number: e.sequenceNumber,
    retry_count: e.retryCount,
    message_type: e.messageType,
    content_type: e.contentType,
    content_length: e.contentLength,
    repo_id: e.repoId,
    worktree_id: e.worktreeId,
    hlc_timestamp: e.hlcTimestamp,
    ttl_ms: String(e.ttlMs),
    timestamp:
      e.timestampMs === null
        ? null
        : { seconds: String(Math.floor(e.timestampMs / 1000)), nanos: (e.timestampMs % 1000) * 1e6 },
    // A view of the payload, not a copy: serializing copies it once more, and a 16 MB payload copied here was
    // a third 16 MB buffer per delivery waiting for the garbage collector (bench/memory.ts).
    payload: Buffer.from(e.payload.buffer, e.payload.byteOffset, e.payload.byteLength),
    state: ENVELOPE_STATES[state],
    parent_correlation_id: e.parentCorrelationId,
  };
}

const CLOSE_STATUS = {
  superseded: grpc.status.ABORTED,
  deregistered: grpc.status.ABORTED,
  shutdown: grpc.status.UNAVAILABLE,
} as const;

const REFUSAL_STATUS = {
  not_registered: grpc.status.FAILED_PRECONDITION,
  resume_out_of_range: grpc.status.OUT_OF_RANGE,
  resume_expired: grpc.status.FAILED_PRECONDITION,
} as const;

/** sw4rm.router.RouterService: SendMessage, StreamIncoming, AckDelivery over the core router. */
export class RouterServiceAdapter {
  static readonly serviceName = 'sw4rm.router.RouterService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { router, ids, log } = this.coordinator;
    return {
      SendMessage: (
        call: grpc.ServerUnaryCall<{ msg?: EnvelopeMessage | null }, unknown>,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        const receivedAt = this.coordinator.clock.now();
        if (!call.request.msg) {
          callback(null, { accepted: false, reason: 'VALIDATION_ERROR: the request carries no envelope' });
          return;
        }
        const ctx = callContext(call, ids);
        const answer = (result: SendResult) =>
          answerWhenDurable(
            this.coordinator.store,
            callback,
            result.accepted ? { accepted: true, reason: '' } : { accepted: false, reason: result.reason },
          );
        // Nothing was committed: the message is refused, never half-accepted.
        const fail = (err: unknown) => {
          log.internalError('router', ctx.correlationId, err);
          callback(null, { accepted: false, reason: `INTERNAL_ERROR: ${(err as Error).message}` });
        };
        try {
          const to = call.metadata.get('sw4rm-to')[0];
          // A large JSON or text payload is validated on a worker thread first (Router.submit), so it answers later.
          const result = router.submit(envelopeFromMessage(call.request.msg), ctx, {
            to: typeof to === 'string' ? to : undefined,
            receivedAt,
          });
          if (result instanceof Promise) result.then(answer, fail);
          else answer(result);
        } catch (err) {
          fail(err);
        }
      },
      StreamIncoming: (call: grpc.ServerWritableStream<{ agent_id?: string }, unknown>) => {
        const agentId = call.request.agent_id ?? '';
        const ctx = callContext(call, ids);
        const rawResume = call.metadata.get('sw4rm-resume-after')[0];
        let resumeAfter: number | undefined;
        if (rawResume !== undefined) {
          const text = String(rawResume).trim();
          if (!/^\d{1,15}$/.test(text)) {
            call.emit('error', {
              code: grpc.status.INVALID_ARGUMENT,
              details: 'sw4rm-resume-after must be the last seq you processed (a non-negative integer)',
            });
            return;
          }
          resumeAfter = Number(text);
        }
        let ended = false;
        const end = (code: grpc.status, details: string) => {
          if (ended) return;
          ended = true;
          call.emit('error', { code, details });
        };
        const sink: InboxSink = {
          deliver: (seq, envelope) => {
            if (!ended) call.write({ msg: envelopeToMessage(envelope), seq: String(seq) });
          },
          close: (reason, detail) => end(CLOSE_STATUS[reason], detail),
        };
        let handle: { dispose(): void };
        try {
          handle = router.attach(agentId, sink, ctx, resumeAfter);
        } catch (err) {
          if (err instanceof StreamRefusal) end(REFUSAL_STATUS[err.code], err.message);
          else end(grpc.status.INTERNAL, `INTERNAL_ERROR: ${(err as Error).message}`);
          return;
        }
        const detach = () => {
          ended = true;
          handle.dispose();
        };
        call.on('cancelled', detach);
        call.on('close', detach);
        call.on('error', detach);
      },
      AckDelivery: (
        call: grpc.ServerUnaryCall<
          { agent_id?: string; seq?: string | number; message_id?: string; outcome?: string | number },
          unknown
        >,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        const { agent_id = '', seq = '0', message_id = '', outcome = 'DELIVERY_ACK_OUTCOME_DELIVERED' } = call.request;
        const number = Number(seq);
        if (!Number.isSafeInteger(number) || number < 1) {
          callback(null, { recorded: false });
          return;
        }
        const permanent = outcome === 'DELIVERY_ACK_OUTCOME_PERMANENT_FAILURE' || outcome === 1 || outcome === '1';
        const recorded = router.ackDelivery(
          agent_id,
          number,
          message_id,
          permanent ? 'PERMANENT_FAILURE' : 'DELIVERED',
          callContext(call, ids),
        );
        answerWhenDurable(this.coordinator.store, callback, { recorded });
      },
    };
  }
}
