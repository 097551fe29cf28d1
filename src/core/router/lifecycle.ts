import type { ErrorCode } from './envelope';

/** Message lifecycle of RFC §11: SENT → RECEIVED → READ → FULFILLED, with the error states. */
export type MessageState =
  'SENT' | 'RECEIVED' | 'READ' | 'FULFILLED' | 'REJECTED' | 'FAILED' | 'TIMED_OUT' | 'RETRYING';

export const TERMINAL_STATES: ReadonlySet<MessageState> = new Set(['FULFILLED', 'REJECTED', 'FAILED', 'TIMED_OUT']);

/** Forward order of the non-error stages; a stage may be skipped but never taken back. */
const PROGRESS: Readonly<Record<string, number>> = { SENT: 0, RECEIVED: 1, READ: 2, FULFILLED: 3 };

/** AckStage of common.proto, by name and number. */
export type AckStage = 'RECEIVED' | 'READ' | 'FULFILLED' | 'REJECTED' | 'FAILED' | 'TIMED_OUT';
const ACK_STAGES: readonly AckStage[] = ['RECEIVED', 'READ', 'FULFILLED', 'REJECTED', 'FAILED', 'TIMED_OUT'];

export function isTerminal(state: MessageState): boolean {
  return TERMINAL_STATES.has(state);
}

/**
 * Whether an ACK of `stage` moves a message in `state` forward. Terminal states never change by an ACK
 * (late ACKs are reconciled separately); stages are monotonic.
 */
export function advances(state: MessageState, stage: AckStage): boolean {
  if (isTerminal(state)) return false;
  if (stage === 'REJECTED' || stage === 'FAILED') return true;
  if (stage === 'TIMED_OUT') return false;
  const from = PROGRESS[state === 'RETRYING' ? 'SENT' : state];
  return PROGRESS[stage] > from;
}

/** Error codes after which a retry of the same logical operation may succeed. */
export const RETRYABLE_CODES: ReadonlySet<string> = new Set<ErrorCode>([
  'BUFFER_FULL',
  'ACK_TIMEOUT',
  'AGENT_UNAVAILABLE',
  'OVERLOADED',
  'TOOL_TIMEOUT',
  'TTL_EXPIRED',
]);

/** A parsed ACKNOWLEDGEMENT payload: `{ack_for_message_id, ack_stage, error_code, note}`. */
export interface AckPayload {
  readonly ackForMessageId: string;
  readonly stage: AckStage;
  readonly errorCode: string;
  readonly note: string;
  /** The whole JSON object, kept as the cached result of a FULFILLED operation. */
  readonly raw: Record<string, unknown>;
}

const ERROR_CODE_NUMBERS: Readonly<Record<number, string>> = {
  0: '',
  1: 'BUFFER_FULL',
  2: 'NO_ROUTE',
  3: 'ACK_TIMEOUT',
  4: 'AGENT_UNAVAILABLE',
  5: 'AGENT_SHUTDOWN',
  6: 'VALIDATION_ERROR',
  7: 'PERMISSION_DENIED',
  8: 'UNSUPPORTED_MESSAGE_TYPE',
  9: 'OVERSIZE_PAYLOAD',
  10: 'TOOL_TIMEOUT',
  11: 'PARTIAL_DELIVERY',
  12: 'FORCED_PREEMPTION',
  13: 'TTL_EXPIRED',
  14: 'DUPLICATE_DETECTED',
  15: 'ALREADY_IN_PROGRESS',
  16: 'OVERLOADED',
  20: 'REDIRECT',
  99: 'INTERNAL_ERROR',
};

/** Parses an ACK payload object; answers a reason string when it is not one. */
export function parseAck(value: Record<string, unknown> | undefined): AckPayload | string {
  if (!value) return 'an ACKNOWLEDGEMENT needs a JSON object payload {ack_for_message_id, ack_stage, error_code, note}';
  const ackFor = value.ack_for_message_id;
  if (typeof ackFor !== 'string' || ackFor === '')
    return 'ack_for_message_id is required in an ACKNOWLEDGEMENT payload';
  const rawStage = value.ack_stage;
  let stage: AckStage | undefined;
  if (typeof rawStage === 'number' && Number.isInteger(rawStage)) stage = ACK_STAGES[rawStage - 1];
  else if (typeof rawStage === 'string') {
    const name = rawStage
      .trim()
      .toUpperCase()
      .replace(/^ACK_STAGE_/, '');
    stage = (ACK_STAGES as readonly string[]).includes(name)
      ? (name as AckStage)
      : /^\d+$/.test(name)
        ? ACK_STAGES[Number(name) - 1]
        : undefined;
  }
  if (!stage)
    return `ack_stage ${JSON.stringify(rawStage)?.slice(0, 40)} is not one of ${ACK_STAGES.join(', ')} (or 1–6)`;
  const rawCode = value.error_code;
  let errorCode = '';
  if (typeof rawCode === 'number') errorCode = ERROR_CODE_NUMBERS[rawCode] ?? String(rawCode);
  else if (typeof rawCode === 'string')
    errorCode = rawCode
      .trim()
      .toUpperCase()
      .replace(/^ERROR_CODE_UNSPECIFIED$/, '');
  if (errorCode.length > 64) return 'error_code is longer than 64 characters';
  const note = typeof value.note === 'string' ? value.note.slice(0, 1024) : '';
  return { ackForMessageId: ackFor, stage, errorCode, note, raw: value };
}

/** The JSON payload of a NACK the router sends (RFC §21: precipitating id, failed stage, error code). */
export function nackPayload(
  ackForMessageId: string,
  stage: 'REJECTED' | 'FAILED' | 'TIMED_OUT',
  code: string,
  note: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { ack_for_message_id: ackForMessageId, ack_stage: stage, error_code: code, note, ...extra };
}
