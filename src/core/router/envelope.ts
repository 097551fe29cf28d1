import { validate as isUuid, version as uuidVersion } from 'uuid';
import { PAYLOAD_LIMITS, MIB, ROUTING_JSON_MAX_BYTES } from '../limits';
import { FIELD_LIMITS, identifierRefusal } from '../fieldLimits';
import { jsonBoundsRefusal } from '../json';
import { contentKind, contentRefusal, parseJsonContent } from './payloadContent';

/** Message types of RFC §11, by their canonical enum names. */
export const MESSAGE_TYPES = [
  'CONTROL',
  'DATA',
  'HEARTBEAT',
  'NOTIFICATION',
  'ACKNOWLEDGEMENT',
  'HITL_INVOCATION',
  'WORKTREE_CONTROL',
  'NEGOTIATION',
  'TOOL_CALL',
  'TOOL_RESULT',
  'TOOL_ERROR',
] as const;
export type MessageType = (typeof MESSAGE_TYPES)[number];

/** Error codes of RFC §11 / common.proto ErrorCode, by name. */
export type ErrorCode =
  | 'BUFFER_FULL'
  | 'NO_ROUTE'
  | 'ACK_TIMEOUT'
  | 'AGENT_UNAVAILABLE'
  | 'AGENT_SHUTDOWN'
  | 'VALIDATION_ERROR'
  | 'PERMISSION_DENIED'
  | 'UNSUPPORTED_MESSAGE_TYPE'
  | 'OVERSIZE_PAYLOAD'
  | 'TOOL_TIMEOUT'
  | 'FORCED_PREEMPTION'
  | 'TTL_EXPIRED'
  | 'DUPLICATE_DETECTED'
  | 'ALREADY_IN_PROGRESS'
  | 'OVERLOADED'
  | 'INTERNAL_ERROR';

export const ERROR_CODES: readonly ErrorCode[] = [
  'BUFFER_FULL',
  'NO_ROUTE',
  'ACK_TIMEOUT',
  'AGENT_UNAVAILABLE',
  'AGENT_SHUTDOWN',
  'VALIDATION_ERROR',
  'PERMISSION_DENIED',
  'UNSUPPORTED_MESSAGE_TYPE',
  'OVERSIZE_PAYLOAD',
  'TOOL_TIMEOUT',
  'FORCED_PREEMPTION',
  'TTL_EXPIRED',
  'DUPLICATE_DETECTED',
  'ALREADY_IN_PROGRESS',
  'OVERLOADED',
  'INTERNAL_ERROR',
];

/** The SW4RM envelope (common.proto Envelope) as the core sees it. 64-bit counters are decimal strings. */
export interface Envelope {
  readonly messageId: string;
  readonly idempotencyToken: string;
  readonly producerId: string;
  readonly correlationId: string;
  readonly sequenceNumber: string;
  readonly retryCount: number;
  /** Canonical enum name, or the number as a string when it is not a known value. */
  readonly messageType: string;
  readonly contentType: string;
  readonly contentLength: string;
  readonly repoId: string;
  readonly worktreeId: string;
  readonly hlcTimestamp: string;
  readonly ttlMs: number;
  /** Milliseconds since the epoch, null when the producer sent none. */
  readonly timestampMs: number | null;
  readonly payload: Uint8Array;
  readonly parentCorrelationId: string;
}

/** A refusal with its error code; `detail` is for people. */
export interface Refusal {
  readonly code: ErrorCode;
  readonly detail: string;
  /** Structured details for the NACK (e.g. the original outcome of a duplicate). */
  readonly extra?: Record<string, unknown>;
}

/** Payload limit for message types the size table does not list. */
export const DEFAULT_PAYLOAD_LIMIT = 1 * MIB;

export function payloadLimit(messageType: string, limits: Readonly<Record<string, number>> = PAYLOAD_LIMITS): number {
  return limits[messageType] ?? DEFAULT_PAYLOAD_LIMIT;
}

const MIME = /^([A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126})\/([A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126})(\s*;.*)?$/;
const CONTROL = /[\u0000-\u001f\u007f]/;

/** The last content type asked of baseContentType and its answer: admission asks the same one several times. */
let lastContentType: string | undefined;
let lastBase: string | undefined;

/** `type/subtype` in lower case without parameters, or undefined when it is not a MIME type. */
export function baseContentType(contentType: string): string | undefined {
  if (contentType === lastContentType) return lastBase;
  const match = MIME.exec(contentType.trim());
  const base = match ? `${match[1]}/${match[2]}`.toLowerCase() : undefined;
  lastContentType = contentType;
  lastBase = base;
  return base;
}

/**
 * JSON payloads `checkEnvelope` parsed (rule 5), for `jsonObject` to take instead of parsing them again: each is
 * taken once, so what a caller does with the object is never seen by another. Keyed by the payload's bytes.
 */
const parsedPayloads = new WeakMap<Uint8Array, unknown>();

/**
 * The envelope rules of RFC §11 and message-types.txt (rules 1–8) that need no knowledge of the registry:
 * required fields, a UUIDv4 message_id, payload metadata and consistency, type safety of JSON and text,
 * and the payload size limit of the message type. With `content: 'checked'` rule 5 is left out: the caller
 * validated the payload off the event loop (payloadChecker.ts).
 */
export function checkEnvelope(
  envelope: Envelope,
  limits?: Readonly<Record<string, number>>,
  content: 'check' | 'checked' = 'check',
): Refusal | undefined {
  const invalid = (detail: string): Refusal => ({ code: 'VALIDATION_ERROR', detail });
  if (!envelope.messageId) return invalid('message_id is required');
  if (!isUuid(envelope.messageId) || uuidVersion(envelope.messageId) !== 4)
    return invalid('message_id must be a UUIDv4');
  for (const [field, value] of [
    ['producer_id', envelope.producerId],
    ['correlation_id', envelope.correlationId],
  ] as const) {
    if (!value || value.trim() === '') return invalid(`${field} is required`);
  }
  // Every identifier (README "Limits"): bounded, no control characters, valid UTF-8.
  const fields = FIELD_LIMITS.envelope;
  for (const [field, value, max] of [
    ['producer_id', envelope.producerId, fields.producer_id],
    ['correlation_id', envelope.correlationId, fields.correlation_id],
    ['idempotency_token', envelope.idempotencyToken, fields.idempotency_token],
    ['repo_id', envelope.repoId, fields.repo_id],
    ['worktree_id', envelope.worktreeId, fields.worktree_id],
    ['hlc_timestamp', envelope.hlcTimestamp, fields.hlc_timestamp],
    ['parent_correlation_id', envelope.parentCorrelationId, fields.parent_correlation_id],
  ] as const) {
    const refusal = typeof value === 'string' ? identifierRefusal(field, value, max) : `${field} must be text`;
    if (refusal !== undefined) return invalid(refusal);
  }
  if (!/^\d+$/.test(envelope.sequenceNumber) || BigInt(envelope.sequenceNumber) < 1n) {
    return invalid('sequence_number is required: a number from 1, increasing per producer');
  }
  if (!Number.isInteger(envelope.retryCount) || envelope.retryCount < 0)
    return invalid('retry_count must be a non-negative integer');
  if (!(MESSAGE_TYPES as readonly string[]).includes(envelope.messageType)) {
    return invalid(
      `message_type '${String(envelope.messageType).slice(0, 40)}' is not one of ${MESSAGE_TYPES.join(', ')}`,
    );
  }
  if (!/^\d+$/.test(envelope.contentLength)) return invalid('content_length must be a non-negative integer');
  const declared = Number(envelope.contentLength);
  const size = envelope.payload.byteLength;
  if (size > 0 || envelope.contentType !== '') {
    if (envelope.contentType === '') return invalid('content_type is required when a payload is present');
    if (envelope.contentType.length > FIELD_LIMITS.envelope.content_type) {
      return invalid(`content_type is longer than ${FIELD_LIMITS.envelope.content_type} characters`);
    }
    if (!baseContentType(envelope.contentType) || CONTROL.test(envelope.contentType)) {
      return invalid(`content_type '${envelope.contentType.slice(0, 80)}' is not a MIME type`);
    }
  }
  if (declared !== size)
    return invalid(`content_length is ${envelope.contentLength} but the payload has ${size} bytes`);
  const limit = payloadLimit(envelope.messageType, limits);
  if (size > limit)
    return {
      code: 'OVERSIZE_PAYLOAD',
      detail: `${envelope.messageType} payloads are limited to ${limit} bytes; this one has ${size}`,
    };
  if (!Number.isFinite(envelope.ttlMs) || envelope.ttlMs < 0) return invalid('ttl_ms must be a non-negative integer');
  if (envelope.timestampMs !== null && !Number.isFinite(envelope.timestampMs))
    return invalid('timestamp is out of range');
  // Rule 5: JSON is valid JSON, text is UTF-8 — unless it was checked off the event loop already (Router.submit).
  if (content === 'checked') return undefined;
  const base = baseContentType(envelope.contentType);
  const kind = contentKind(base);
  if (size > 0 && kind && base) {
    if (kind === 'json' && size <= ROUTING_JSON_MAX_BYTES) {
      // A payload admission reads for routing (jsonObject): parsed once, here.
      const parsed = parseJsonContent(envelope.payload, base);
      if ('refusal' in parsed) return invalid(parsed.refusal);
      parsedPayloads.set(envelope.payload, parsed.value);
      return undefined;
    }
    const refusal = contentRefusal(kind, envelope.payload, base);
    if (refusal !== undefined) return invalid(refusal);
  }
  return undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes UTF-8, throwing on invalid bytes (RFC: text payloads MUST be UTF-8). */
export function decodeUtf8(bytes: Uint8Array): string {
  return utf8.decode(bytes);
}

/**
 * The top-level object of a JSON payload (its `"to"`, an ACK, a message to the coordinator), or undefined when
 * the payload is not a JSON object, nests deeper than MAX_JSON_DEPTH, or is larger than ROUTING_JSON_MAX_BYTES:
 * a larger payload (only DATA may be) is not parsed for routing, so that admission never parses megabytes twice;
 * it is addressed by call metadata `sw4rm-to` (README "Limits").
 */
export function jsonObject(envelope: Envelope): Record<string, unknown> | undefined {
  const base = baseContentType(envelope.contentType);
  if (!base || !(base === 'application/json' || base.endsWith('+json')) || envelope.payload.byteLength === 0)
    return undefined;
  // Parsed by checkEnvelope already: within ROUTING_JSON_MAX_BYTES and MAX_JSON_DEPTH, valid JSON.
  if (parsedPayloads.has(envelope.payload)) {
    const value = parsedPayloads.get(envelope.payload);
    parsedPayloads.delete(envelope.payload);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  }
  if (jsonBoundsRefusal(envelope.payload, { what: 'the payload', maxBytes: ROUTING_JSON_MAX_BYTES }) !== undefined)
    return undefined;
  try {
    const value: unknown = JSON.parse(decodeUtf8(envelope.payload));
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Does an agent's declared modality list admit this content type? An empty list admits everything. */
export function modalityAccepts(modalities: readonly string[], contentType: string): boolean {
  if (modalities.length === 0 || contentType === '') return true;
  const base = baseContentType(contentType);
  if (!base) return false;
  const [type] = base.split('/');
  return modalities.some((declared) => {
    const wanted = declared.split(';')[0].trim().toLowerCase();
    return wanted === base || wanted === `${type}/*` || wanted === '*/*';
  });
}

/** A short, printable excerpt of a payload for diagnostics (DLQ, logs). */
export function payloadExcerpt(payload: Uint8Array, max = 256): string {
  const slice = payload.subarray(0, max);
  let text: string;
  try {
    text = decodeUtf8(slice);
  } catch {
    return `base64:${Buffer.from(slice).toString('base64')}${payload.byteLength > max ? '…' : ''}`;
  }
  return text.replace(/[\u0000-\u001f\u007f]/g, ' ') + (payload.byteLength > max ? '…' : '');
}
