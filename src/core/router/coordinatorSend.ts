import type { CallContext } from '../context';
import type { AgentRecord } from '../registry/model';
import { COORDINATOR_ID } from './coordinatorMessages';
import type { Envelope } from './envelope';
import type { OutboxMessage } from './model';
import type { Admitting, RouterShared, SendResult } from './parts';

/** What the coordinator as a producer uses of the router. */
export interface CoordinatorSendCore extends Pick<RouterShared, 'clock' | 'ids'> {
  readonly admission: Pick<Admitting, 'send'>;
}

/** The content types a message from the editor may have. */
export const COORDINATOR_SEND_CONTENT_TYPES = ['application/json', 'text/plain'] as const;
export type CoordinatorSendContentType = (typeof COORDINATOR_SEND_CONTENT_TYPES)[number];

/** A DATA message the person at the editor sends to an agent, as `coordinator`. */
export interface CoordinatorSendInput {
  readonly to: string;
  readonly contentType: CoordinatorSendContentType;
  /** The payload as text (UTF-8 on the wire); JSON for application/json. */
  readonly payload: string;
  /** A new one when omitted. */
  readonly correlationId?: string;
}

/**
 * The coordinator as a producer, for admission: STANDARD lane, no modalities of its own. It is never in the
 * registry, so no RPC can send as it; only `CoordinatorSend` hands it to admission.
 */
const COORDINATOR_PRODUCER: AgentRecord = {
  descriptor: {
    agentId: COORDINATOR_ID,
    name: 'coordinator',
    description: "the coordinator itself (messages sent from the editor, the scheduler's commands)",
    capabilities: [],
    communicationClass: 'STANDARD',
    modalitiesSupported: [],
    reasoningConnectors: [],
    publicKey: '',
    registrationType: 'STANDARD_AGENT',
    maxConcurrentDelegations: 0,
  },
  state: 'RUNNABLE',
  registeredAt: 0,
  updatedAt: 0,
  lastHeartbeatAt: null,
  health: {},
  presence: 'online',
};

/**
 * Messages the coordinator itself sends on the operator's behalf (Send Message… in the editor): tracked DATA
 * envelopes from `coordinator` through the normal admission path — validation, recipient, modality, TTL,
 * deduplication, disk budget, capacity, the durable commit and its events. The recipient's ACKs come back to
 * `coordinator` (admission routes an ACK whose target's producer is no registered agent there) and move the
 * message through its lifecycle like any other.
 */
export class CoordinatorSend {
  /** Sequence numbers increase per producer; from the clock, so that a restarted coordinator never reuses one. */
  private lastSequence = 0;

  constructor(private readonly core: CoordinatorSendCore) {}

  send(input: CoordinatorSendInput, ctx: CallContext): SendResult {
    if (!(COORDINATOR_SEND_CONTENT_TYPES as readonly string[]).includes(input.contentType)) {
      const reason = `VALIDATION_ERROR: a message from the editor is ${COORDINATOR_SEND_CONTENT_TYPES.join(' or ')}, not ${String(input.contentType).slice(0, 80)}`;
      return { accepted: false, code: 'VALIDATION_ERROR', reason };
    }
    return this.sendEnvelope(
      {
        to: input.to,
        messageType: 'DATA',
        contentType: input.contentType,
        payload: Buffer.from(input.payload, 'utf8'),
        correlationId: input.correlationId ?? '',
      },
      ctx,
    );
  }

  /**
   * A tracked envelope of any type from `coordinator` (the editor's Send Message…, the scheduler's CONTROL commands
   * through CoordinatorOutbox.sendToAgent): built here, admitted like any other. Call it inside your transaction to
   * commit your change with the message.
   */
  sendEnvelope(input: OutboxMessage, ctx: CallContext): SendResult {
    const core = this.core;
    const now = core.clock.now();
    this.lastSequence = Math.max(this.lastSequence + 1, now);
    const payload = input.payload;
    const envelope: Envelope = {
      messageId: core.ids.uuid(),
      idempotencyToken: '',
      producerId: COORDINATOR_ID,
      correlationId: input.correlationId || core.ids.uuid(),
      sequenceNumber: String(this.lastSequence),
      retryCount: 0,
      messageType: input.messageType,
      contentType: input.contentType,
      contentLength: String(payload.byteLength),
      repoId: '',
      worktreeId: '',
      hlcTimestamp: '',
      ttlMs: input.ttlMs ?? 0,
      timestampMs: now,
      payload,
      parentCorrelationId: '',
    };
    return core.admission.send(
      envelope,
      ctx,
      { to: input.to, receivedAt: now, ackTimeout: input.ackTimeout },
      COORDINATOR_PRODUCER,
    );
  }
}
