import { strict as assert } from 'node:assert';
import { v1 as uuidv1, v4 as uuidv4 } from 'uuid';
import {
  DEFAULT_PAYLOAD_LIMIT,
  MESSAGE_TYPES,
  baseContentType,
  checkEnvelope,
  jsonObject,
  modalityAccepts,
  payloadExcerpt,
  payloadLimit,
  type Envelope,
} from '../../src/core/router/envelope';
import {
  RETRYABLE_CODES,
  advances,
  isTerminal,
  nackPayload,
  parseAck,
  type AckPayload,
  type MessageState,
} from '../../src/core/router/lifecycle';
import { PAYLOAD_LIMITS } from '../../src/core/limits';

function envelope(overrides: Partial<Envelope> & { body?: string | Uint8Array } = {}): Envelope {
  const { body, ...rest } = overrides;
  const payload =
    body === undefined ? Buffer.from('{"task":"x"}') : typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return {
    messageId: uuidv4(),
    idempotencyToken: '',
    producerId: 'alpha',
    correlationId: uuidv4(),
    sequenceNumber: '1',
    retryCount: 0,
    messageType: 'DATA',
    contentType: 'application/json',
    contentLength: String(payload.byteLength),
    repoId: '',
    worktreeId: '',
    hlcTimestamp: '',
    ttlMs: 0,
    timestampMs: null,
    payload,
    parentCorrelationId: '',
    ...rest,
  };
}

function refusedWith(e: Envelope, code: string, detail: RegExp, limits?: Record<string, number>): void {
  const refusal = checkEnvelope(e, limits);
  assert.ok(refusal, `expected ${code}, the envelope passed`);
  assert.equal(refusal.code, code, refusal.detail);
  assert.match(refusal.detail, detail);
}

describe('checkEnvelope (RFC §11, message-types.txt validation rules 1–8)', () => {
  it('passes a complete envelope, and one without payload and content_type', () => {
    assert.equal(checkEnvelope(envelope()), undefined);
    assert.equal(checkEnvelope(envelope({ body: '', contentType: '' })), undefined);
    for (const type of MESSAGE_TYPES) assert.equal(checkEnvelope(envelope({ messageType: type })), undefined, type);
  });

  describe('rule 1: required fields', () => {
    it('requires message_id as a UUIDv4', () => {
      refusedWith(envelope({ messageId: '' }), 'VALIDATION_ERROR', /message_id is required/);
      refusedWith(envelope({ messageId: 'msg001' }), 'VALIDATION_ERROR', /UUIDv4/);
      refusedWith(envelope({ messageId: uuidv1() }), 'VALIDATION_ERROR', /UUIDv4/);
      assert.equal(checkEnvelope(envelope({ messageId: uuidv4().toUpperCase() })), undefined, 'case does not matter');
    });

    it('requires producer_id and correlation_id: non-blank, at most 256 characters, no control characters', () => {
      refusedWith(envelope({ producerId: '' }), 'VALIDATION_ERROR', /producer_id is required/);
      refusedWith(envelope({ correlationId: '\t' }), 'VALIDATION_ERROR', /correlation_id/);
      refusedWith(envelope({ producerId: 'p'.repeat(257) }), 'VALIDATION_ERROR', /producer_id is longer than 256/);
      refusedWith(
        envelope({ correlationId: 'wf\u0000' }),
        'VALIDATION_ERROR',
        /correlation_id contains control characters/,
      );
      assert.equal(
        checkEnvelope(envelope({ correlationId: 'wf-1111' })),
        undefined,
        'correlation ids need not be UUIDs',
      );
    });

    it('requires sequence_number ≥ 1 as a whole number (64-bit values included)', () => {
      for (const bad of ['0', '', '-1', '1.5', 'one', ' 1'])
        refusedWith(envelope({ sequenceNumber: bad }), 'VALIDATION_ERROR', /sequence_number/);
      assert.equal(checkEnvelope(envelope({ sequenceNumber: '18446744073709551615' })), undefined);
    });

    it('requires retry_count ≥ 0 and a known message_type', () => {
      refusedWith(envelope({ retryCount: -1 }), 'VALIDATION_ERROR', /retry_count/);
      refusedWith(envelope({ retryCount: 0.5 }), 'VALIDATION_ERROR', /retry_count/);
      refusedWith(envelope({ messageType: 'MESSAGE_TYPE_UNSPECIFIED' }), 'VALIDATION_ERROR', /message_type/);
      refusedWith(
        envelope({ messageType: 'data' }),
        'VALIDATION_ERROR',
        /message_type 'data' is not one of CONTROL, DATA/,
      );
    });

    it('bounds the idempotency token', () => {
      refusedWith(
        envelope({ idempotencyToken: 'x'.repeat(257) }),
        'VALIDATION_ERROR',
        /idempotency_token is longer than 256/,
      );
      refusedWith(
        envelope({ idempotencyToken: 'a\nb' }),
        'VALIDATION_ERROR',
        /idempotency_token contains control characters/,
      );
      assert.equal(checkEnvelope(envelope({ idempotencyToken: 'alpha:create:abc123' })), undefined);
    });
  });

  describe('rules 2 and 4: payload metadata and consistency', () => {
    it('requires content_type with a payload, and a MIME type', () => {
      refusedWith(
        envelope({ contentType: '' }),
        'VALIDATION_ERROR',
        /content_type is required when a payload is present/,
      );
      refusedWith(envelope({ contentType: 'json' }), 'VALIDATION_ERROR', /is not a MIME type/);
      refusedWith(envelope({ contentType: 'application/json\r\nX: y' }), 'VALIDATION_ERROR', /is not a MIME type/);
    });

    it('requires content_length to equal the payload size', () => {
      refusedWith(
        envelope({ contentLength: '999' }),
        'VALIDATION_ERROR',
        /content_length is 999 but the payload has 12 bytes/,
      );
      refusedWith(
        envelope({ body: '', contentType: '', contentLength: '1' }),
        'VALIDATION_ERROR',
        /content_length is 1 but the payload has 0 bytes/,
      );
      refusedWith(
        envelope({ contentLength: '-12' }),
        'VALIDATION_ERROR',
        /content_length must be a non-negative integer/,
      );
    });
  });

  describe('rules 5 and 8: type safety and UTF-8', () => {
    it('requires JSON payloads to parse, for application/json and +json', () => {
      refusedWith(
        envelope({ body: '{"a":1' }),
        'VALIDATION_ERROR',
        /not valid JSON for content_type application\/json/,
      );
      refusedWith(
        envelope({ body: 'x', contentType: 'application/ld+json' }),
        'VALIDATION_ERROR',
        /application\/ld\+json/,
      );
      refusedWith(envelope({ body: Uint8Array.from([0x7b, 0xff, 0x7d]) }), 'VALIDATION_ERROR', /not valid JSON/);
      assert.equal(checkEnvelope(envelope({ body: '[1,2]' })), undefined, 'any JSON value');
      assert.equal(checkEnvelope(envelope({ body: '"s"', contentType: 'application/json; charset=utf-8' })), undefined);
    });

    it('requires text/* payloads to be UTF-8; binary types are not inspected', () => {
      refusedWith(
        envelope({ body: Uint8Array.from([0xc3, 0x28]), contentType: 'text/plain' }),
        'VALIDATION_ERROR',
        /text payloads must be UTF-8/,
      );
      assert.equal(checkEnvelope(envelope({ body: 'grüße ✓', contentType: 'text/markdown' })), undefined);
      assert.equal(
        checkEnvelope(envelope({ body: Uint8Array.from([0xff, 0x00]), contentType: 'application/octet-stream' })),
        undefined,
      );
    });
  });

  describe('size limits per message type', () => {
    it('uses the RFC table by default and 1 MiB for types it does not list', () => {
      assert.equal(payloadLimit('DATA'), 16 * 1024 * 1024);
      assert.equal(payloadLimit('ACKNOWLEDGEMENT'), 4 * 1024);
      assert.equal(payloadLimit('TOOL_RESULT'), DEFAULT_PAYLOAD_LIMIT);
      assert.equal(DEFAULT_PAYLOAD_LIMIT, 1024 * 1024);
      assert.deepEqual(PAYLOAD_LIMITS, {
        CONTROL: 65536,
        DATA: 16777216,
        ACKNOWLEDGEMENT: 4096,
        HITL_INVOCATION: 262144,
        TOOL_CALL: 1048576,
        NOTIFICATION: 32768,
      });
    });

    it("refuses a payload over its type's limit with OVERSIZE_PAYLOAD, using configured limits", () => {
      const body = 'x'.repeat(101);
      refusedWith(
        envelope({ body, contentType: 'text/plain' }),
        'OVERSIZE_PAYLOAD',
        /DATA payloads are limited to 100 bytes; this one has 101/,
        { DATA: 100 },
      );
      assert.equal(
        checkEnvelope(envelope({ body: 'x'.repeat(100), contentType: 'text/plain' }), { DATA: 100 }),
        undefined,
      );
      refusedWith(
        envelope({ messageType: 'CONTROL', body: 'x'.repeat(64 * 1024 + 1), contentType: 'text/plain' }),
        'OVERSIZE_PAYLOAD',
        /CONTROL payloads are limited to 65536/,
      );
    });
  });

  it('refuses a negative or non-finite ttl and an out-of-range timestamp', () => {
    refusedWith(envelope({ ttlMs: -1 }), 'VALIDATION_ERROR', /ttl_ms/);
    refusedWith(envelope({ ttlMs: Number.NaN }), 'VALIDATION_ERROR', /ttl_ms/);
    refusedWith(envelope({ timestampMs: Number.NaN }), 'VALIDATION_ERROR', /timestamp is out of range/);
  });
});

describe('content types and modalities', () => {
  it('reduces a content type to lower-case type/subtype', () => {
    assert.equal(baseContentType('Application/JSON; charset=utf-8'), 'application/json');
    assert.equal(baseContentType(' text/plain '), 'text/plain');
    assert.equal(baseContentType('json'), undefined);
    assert.equal(baseContentType(''), undefined);
  });

  it('admits by exact base type or an empty declaration', () => {
    assert.ok(modalityAccepts(['application/json'], 'application/json; charset=utf-8'));
    assert.ok(modalityAccepts(['TEXT/Plain; charset=utf-8'], 'text/plain'));
    assert.ok(modalityAccepts([], 'anything/at-all'));
    assert.ok(modalityAccepts(['application/json'], ''), 'no payload, nothing to check');
    assert.ok(!modalityAccepts(['application/json'], 'text/plain'));
    assert.ok(!modalityAccepts(['image/*'], 'imagex/png'));
    assert.ok(!modalityAccepts(['text/plain'], 'not a type'));
  });

  it('admits by a type/* wildcard, which the registry accepts in modalities_supported', () => {
    assert.ok(modalityAccepts(['image/*'], 'image/png'));
    assert.ok(modalityAccepts(['text/*; charset=utf-8'], 'text/markdown'));
    assert.ok(!modalityAccepts(['image/*'], 'audio/ogg'));
  });

  it('reads the top-level JSON object of a payload, and nothing else', () => {
    assert.deepEqual(jsonObject(envelope({ body: '{"to":"b"}' })), { to: 'b' });
    assert.equal(jsonObject(envelope({ body: '[1]' })), undefined);
    assert.equal(jsonObject(envelope({ body: '{"to":"b"}', contentType: 'text/plain' })), undefined);
    assert.equal(jsonObject(envelope({ body: '', contentType: '' })), undefined);
  });

  it('makes printable payload excerpts for diagnostics', () => {
    assert.equal(payloadExcerpt(Buffer.from('line1\nline2')), 'line1 line2');
    assert.equal(payloadExcerpt(Buffer.from('abcdef'), 3), 'abc…');
    assert.equal(payloadExcerpt(Uint8Array.from([0xff, 0x00, 0x01])), 'base64:/wAB');
  });
});

describe('lifecycle (RFC §11)', () => {
  it('has the terminal states FULFILLED, REJECTED, FAILED and TIMED_OUT; RETRYING is not terminal', () => {
    const all: MessageState[] = [
      'SENT',
      'RECEIVED',
      'READ',
      'FULFILLED',
      'REJECTED',
      'FAILED',
      'TIMED_OUT',
      'RETRYING',
    ];
    assert.deepEqual(all.filter(isTerminal), ['FULFILLED', 'REJECTED', 'FAILED', 'TIMED_OUT']);
  });

  it('moves only forward through SENT → RECEIVED → READ → FULFILLED, skipping allowed', () => {
    assert.ok(advances('SENT', 'RECEIVED'));
    assert.ok(advances('SENT', 'FULFILLED'));
    assert.ok(advances('RECEIVED', 'READ'));
    assert.ok(advances('READ', 'FULFILLED'));
    assert.ok(!advances('READ', 'RECEIVED'));
    assert.ok(!advances('RECEIVED', 'RECEIVED'));
    assert.ok(advances('READ', 'REJECTED'));
    assert.ok(advances('RECEIVED', 'FAILED'));
    assert.ok(!advances('SENT', 'TIMED_OUT'), 'only the router times out');
    assert.ok(advances('RETRYING', 'RECEIVED'));
    for (const terminal of ['FULFILLED', 'REJECTED', 'FAILED', 'TIMED_OUT'] as const) {
      assert.ok(!advances(terminal, 'FULFILLED') && !advances(terminal, 'REJECTED'), terminal);
    }
  });

  it('knows which error codes a retry may mend', () => {
    for (const code of ['BUFFER_FULL', 'ACK_TIMEOUT', 'AGENT_UNAVAILABLE', 'OVERLOADED', 'TOOL_TIMEOUT', 'TTL_EXPIRED'])
      assert.ok(RETRYABLE_CODES.has(code), code);
    for (const code of ['VALIDATION_ERROR', 'PERMISSION_DENIED', 'NO_ROUTE', 'OVERSIZE_PAYLOAD', 'INTERNAL_ERROR', ''])
      assert.ok(!RETRYABLE_CODES.has(code), code);
  });

  describe('parseAck', () => {
    const parsed = (value: Record<string, unknown>) => {
      const result = parseAck(value);
      assert.equal(typeof result, 'object', String(result));
      return result as AckPayload;
    };

    it('takes ack_stage by name, ACK_STAGE_ name, number, or number as a string', () => {
      const id = uuidv4();
      assert.equal(parsed({ ack_for_message_id: id, ack_stage: 'received' }).stage, 'RECEIVED');
      assert.equal(parsed({ ack_for_message_id: id, ack_stage: 'ACK_STAGE_FULFILLED' }).stage, 'FULFILLED');
      assert.deepEqual(
        [1, 2, 3, 4, 5, 6].map((n) => parsed({ ack_for_message_id: id, ack_stage: n }).stage),
        ['RECEIVED', 'READ', 'FULFILLED', 'REJECTED', 'FAILED', 'TIMED_OUT'],
      );
      assert.equal(parsed({ ack_for_message_id: id, ack_stage: '4' }).stage, 'REJECTED');
    });

    it('normalises error codes by name or number and keeps the note and the whole object', () => {
      const ack = parsed({
        ack_for_message_id: 'm',
        ack_stage: 'REJECTED',
        error_code: 'buffer_full',
        note: 'full',
        extra: 1,
      });
      assert.deepEqual(ack, {
        ackForMessageId: 'm',
        stage: 'REJECTED',
        errorCode: 'BUFFER_FULL',
        note: 'full',
        raw: { ack_for_message_id: 'm', ack_stage: 'REJECTED', error_code: 'buffer_full', note: 'full', extra: 1 },
      });
      assert.equal(parsed({ ack_for_message_id: 'm', ack_stage: 4, error_code: 3 }).errorCode, 'ACK_TIMEOUT');
      assert.equal(parsed({ ack_for_message_id: 'm', ack_stage: 4, error_code: 99 }).errorCode, 'INTERNAL_ERROR');
      assert.equal(
        parsed({ ack_for_message_id: 'm', ack_stage: 4, error_code: 'ERROR_CODE_UNSPECIFIED' }).errorCode,
        '',
      );
      assert.equal(parsed({ ack_for_message_id: 'm', ack_stage: 1, note: 'n'.repeat(5000) }).note.length, 1024);
    });

    it('answers a reason for anything that is not an ACK', () => {
      assert.match(String(parseAck(undefined)), /needs a JSON object payload/);
      assert.match(String(parseAck({ ack_stage: 'RECEIVED' })), /ack_for_message_id is required/);
      assert.match(
        String(parseAck({ ack_for_message_id: 7, ack_stage: 'RECEIVED' })),
        /ack_for_message_id is required/,
      );
      assert.match(String(parseAck({ ack_for_message_id: 'm' })), /ack_stage undefined is not one of/);
      assert.match(String(parseAck({ ack_for_message_id: 'm', ack_stage: 0 })), /is not one of/);
      assert.match(
        String(parseAck({ ack_for_message_id: 'm', ack_stage: 'DONE' })),
        /"DONE" is not one of RECEIVED, READ/,
      );
      assert.match(
        String(parseAck({ ack_for_message_id: 'm', ack_stage: 1, error_code: 'X'.repeat(65) })),
        /error_code is longer than 64/,
      );
    });
  });

  it('builds NACK payloads with the precipitating id, failed stage and error code (RFC §21)', () => {
    assert.deepEqual(nackPayload('m1', 'TIMED_OUT', 'ACK_TIMEOUT', 'late', { x: 1 }), {
      ack_for_message_id: 'm1',
      ack_stage: 'TIMED_OUT',
      error_code: 'ACK_TIMEOUT',
      note: 'late',
      x: 1,
    });
  });
});
