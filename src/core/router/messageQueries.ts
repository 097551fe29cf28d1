import { isoUtc } from '../clock';
import type { Envelope } from './envelope';
import { advances, isTerminal, type AckStage, type MessageState } from './lifecycle';
import { PAYLOAD_RELEASE_MIN_BYTES } from './memoryBudget';
import type { MessageListFilter, MessageRecord, MessageSummary, RouterRepository } from './model';
import type { RouterShared } from './parts';

/** What the message queries use of the router. */
export interface MessageQueriesCore extends Pick<RouterShared, 'message' | 'envelopeOf'> {
  readonly repo: Pick<RouterRepository, 'recentMessages'>;
}

export type { MessageListFilter, MessageSummary };

/** What a list of recent messages may ask for. */
export interface MessageQuery extends MessageListFilter {
  /** At most this many rows (default DEFAULT_MESSAGE_LIMIT, at most MAX_MESSAGE_LIMIT). */
  readonly limit?: number;
}

export const DEFAULT_MESSAGE_LIMIT = 200;
export const MAX_MESSAGE_LIMIT = 1000;
/**
 * A query looks at the newest this many messages in arrival order, never further back: a filter that matches
 * little costs a bounded scan (a few milliseconds), not a read of a day's messages.
 */
export const MESSAGE_SCAN_WINDOW = 20_000;
/** The most payload bytes a message's detail carries as text. */
export const MAX_PAYLOAD_SHOWN = 256 * 1024;

/** One step of a message's lifecycle history, as the detail shows it. */
export interface MessageHistoryStep {
  readonly at: number;
  /** `at` as UTC ISO-8601. */
  readonly time: string;
  /** The router's name for the step (accepted, delivered, ack_received, timed_out, …). */
  readonly event: string;
  /** The state the message entered with this step; absent when the step left the state as it was. */
  readonly state?: MessageState;
  readonly detail?: string;
  /** The message id of the protocol ACK that caused the step. */
  readonly ackMessageId?: string;
}

/** A message's payload as text (never markup): what it holds, or why it is not there. */
export interface MessagePayloadView {
  /** The payload's size as the producer declared it. */
  readonly bytes: number;
  /** UTF-8 text (JSON pretty-printed), base64 for bytes that are not UTF-8; undefined when it is not available. */
  readonly text?: string;
  readonly encoding?: 'utf-8' | 'base64';
  /** Why the text is missing or partial, in words for the user. */
  readonly note?: string;
}

/** Everything the editor shows of one message: plain data. */
export interface MessageDetail extends MessageSummary {
  /** The envelope's fields other than the payload, by their proto names. */
  readonly envelope: Readonly<Record<string, string | number | null>>;
  readonly payload: MessagePayloadView;
  readonly history: readonly MessageHistoryStep[];
  readonly lane: string;
  readonly delivery: string;
  readonly deliverySeq: number | null;
  readonly deliveredAt: number | null;
  readonly deliveryAttempts: number;
  readonly ackDeadline: number | null;
  readonly expiresAt: number | null;
  /** For an ACK: the message it acknowledges; for a fan-out copy: the producer's message it copies. */
  readonly ackFor: string;
}

const ACK_EVENT = /^ack_(received|read|fulfilled|rejected|failed|timed_out)$/;
const ACK_DETAIL = /^ACK (\S+)/;
/** History events that end a message in an error state (ackLifecycle.finish). */
const FINISH_EVENTS: Readonly<Record<string, MessageState>> = {
  rejected: 'REJECTED',
  failed: 'FAILED',
  timed_out: 'TIMED_OUT',
};

/**
 * The Messages view's queries over the router's store: recent messages (newest first, bounded, filtered) and one
 * message's detail (envelope, payload as text, lifecycle history with the ACK behind each step). Reads only.
 */
export class MessageQueries {
  constructor(private readonly core: MessageQueriesCore) {}

  recent(query: MessageQuery = {}): MessageSummary[] {
    const limit = Math.max(1, Math.min(Math.floor(query.limit ?? DEFAULT_MESSAGE_LIMIT), MAX_MESSAGE_LIMIT));
    const filter: MessageListFilter = {
      ...(query.agentId ? { agentId: query.agentId } : {}),
      ...(query.correlationId ? { correlationId: query.correlationId } : {}),
      ...(query.state ? { state: query.state } : {}),
      ...(query.messageType ? { messageType: query.messageType } : {}),
    };
    return this.core.repo.recentMessages(filter, MESSAGE_SCAN_WINDOW, limit);
  }

  detail(messageId: string): MessageDetail | undefined {
    const record = this.core.message(messageId);
    if (!record) return undefined;
    // A payload of PAYLOAD_DETACH_MIN_BYTES or more lives in the store only (memoryBudget.ts): read it for the view.
    return messageDetail(
      record.storedPayloadBytes === undefined ? record : { ...record, envelope: this.core.envelopeOf(record) },
    );
  }
}

export function messageDetail(record: MessageRecord): MessageDetail {
  const e = record.envelope;
  return {
    messageId: e.messageId,
    messageType: e.messageType,
    producerId: e.producerId,
    recipientId: record.recipientId,
    state: record.state,
    errorCode: record.errorCode,
    correlationId: e.correlationId,
    contentType: e.contentType,
    size: Number(e.contentLength) || e.payload.byteLength,
    tracked: record.tracked,
    acceptedAt: record.acceptedAt,
    updatedAt: record.updatedAt,
    envelope: envelopeFields(e),
    payload: payloadView(record),
    history: historySteps(record),
    lane: record.lane,
    delivery: record.delivery,
    deliverySeq: record.deliverySeq,
    deliveredAt: record.deliveredAt,
    deliveryAttempts: record.deliveryAttempts,
    ackDeadline: record.ackDeadline,
    expiresAt: record.expiresAt,
    ackFor: record.ackFor,
  };
}

function envelopeFields(e: Envelope): Record<string, string | number | null> {
  return {
    message_id: e.messageId,
    producer_id: e.producerId,
    correlation_id: e.correlationId,
    parent_correlation_id: e.parentCorrelationId,
    sequence_number: e.sequenceNumber,
    idempotency_token: e.idempotencyToken,
    retry_count: e.retryCount,
    message_type: e.messageType,
    content_type: e.contentType,
    content_length: e.contentLength,
    ttl_ms: e.ttlMs,
    timestamp: e.timestampMs === null ? null : isoUtc(e.timestampMs),
    repo_id: e.repoId,
    worktree_id: e.worktreeId,
    hlc_timestamp: e.hlcTimestamp,
  };
}

function payloadView(record: MessageRecord): MessagePayloadView {
  const e = record.envelope;
  const bytes = Number(e.contentLength) || e.payload.byteLength;
  if (record.payloadReleased) {
    return {
      bytes,
      note:
        `The payload (${bytes} bytes) is no longer stored: payloads of ${PAYLOAD_RELEASE_MIN_BYTES / 1024} KiB or more are released ` +
        'from the store once their message is finished (delivered and in a final state). A dead letter keeps its own copy.',
    };
  }
  if (e.payload.byteLength === 0) return { bytes: 0, text: '', encoding: 'utf-8', note: 'The message has no payload.' };
  const shown = e.payload.byteLength > MAX_PAYLOAD_SHOWN ? e.payload.subarray(0, MAX_PAYLOAD_SHOWN) : e.payload;
  const partial =
    shown.byteLength < e.payload.byteLength
      ? `The first ${MAX_PAYLOAD_SHOWN} of ${e.payload.byteLength} bytes.`
      : undefined;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(shown);
  } catch {
    if (!partial)
      return {
        bytes,
        text: Buffer.from(shown).toString('base64'),
        encoding: 'base64',
        note: 'The payload is not UTF-8 text; shown as base64.',
      };
    // A cut may split a character: the partial text is decoded leniently.
    text = new TextDecoder('utf-8').decode(shown);
  }
  if (!partial && /^application\/(.+\+)?json\b/i.test(e.contentType)) {
    try {
      // Admission checked the JSON's depth and size before it was accepted.
      text = JSON.stringify(JSON.parse(text), null, 2);
    } catch {
      // Shown as it was sent.
    }
  }
  return { bytes, text, encoding: 'utf-8', ...(partial ? { note: partial } : {}) };
}

/** The history with the state each step entered (walking the lifecycle's rules) and the ACK behind it. */
function historySteps(record: MessageRecord): MessageHistoryStep[] {
  let current: MessageState | undefined;
  return record.history.map((entry) => {
    let state: MessageState | undefined;
    const ack = ACK_EVENT.exec(entry.event);
    if (entry.event === 'accepted' && current === undefined) state = 'SENT';
    else if (!record.tracked || current === undefined) state = undefined;
    else if (ack) {
      const stage = ack[1].toUpperCase() as AckStage;
      state = advances(current === 'RETRYING' ? 'SENT' : current, stage) ? (stage as MessageState) : undefined;
    } else if (entry.event === 'retrying') state = 'RETRYING';
    else if (FINISH_EVENTS[entry.event] && !isTerminal(current)) state = FINISH_EVENTS[entry.event];
    else if (entry.event === 'read' || entry.event === 'fulfilled') {
      const stage = entry.event.toUpperCase() as AckStage;
      state = advances(current, stage) ? (stage as MessageState) : undefined;
    }
    if (state) current = state;
    const ackMessageId = ack && entry.detail ? ACK_DETAIL.exec(entry.detail)?.[1] : undefined;
    return {
      at: entry.at,
      time: isoUtc(entry.at),
      event: entry.event,
      ...(state ? { state } : {}),
      ...(entry.detail ? { detail: entry.detail } : {}),
      ...(ackMessageId ? { ackMessageId } : {}),
    };
  });
}
