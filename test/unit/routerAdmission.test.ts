import { strict as assert } from 'node:assert';
import { COORDINATOR_ID } from '../../src/core/router/router';
import { CollectingSink, RouterHarness, assertRefused, settle, type EnvelopeInput } from '../support/routerHarness';

const P = 'producer';
const C = 'consumer';

describe('Router admission (RFC §11, §12, §13, message-types.txt rules 1–8)', () => {
  let h: RouterHarness;
  let producer: CollectingSink;

  afterEach(() => h.dispose());

  describe('validation', () => {
    beforeEach(() => {
      h = new RouterHarness({ payloadLimits: { DATA: 64, ACKNOWLEDGEMENT: 4096 } });
      for (const id of [P, C]) h.register(id);
      producer = h.stream(P).sink;
    });

    const invalid: Array<[string, EnvelopeInput & { producerId?: string }, string, RegExp]> = [
      ['an empty message_id', { messageId: '' }, 'VALIDATION_ERROR', /message_id is required/],
      ['a message_id that is not a UUID', { messageId: 'msg001' }, 'VALIDATION_ERROR', /message_id must be a UUIDv4/],
      [
        'a UUIDv1 message_id',
        { messageId: 'c232ab00-9414-11ec-b3c8-9f6bdeced846' },
        'VALIDATION_ERROR',
        /message_id must be a UUIDv4/,
      ],
      ['an empty correlation_id', { correlationId: '' }, 'VALIDATION_ERROR', /correlation_id is required/],
      ['a blank correlation_id', { correlationId: '   ' }, 'VALIDATION_ERROR', /correlation_id is required/],
      [
        'a correlation_id with control characters',
        { correlationId: 'a\nb' },
        'VALIDATION_ERROR',
        /correlation_id contains control characters/,
      ],
      [
        'an overlong correlation_id',
        { correlationId: 'c'.repeat(257) },
        'VALIDATION_ERROR',
        /correlation_id is longer than 256/,
      ],
      [
        'an overlong idempotency_token',
        { idempotencyToken: 't'.repeat(257) },
        'VALIDATION_ERROR',
        /idempotency_token is longer than 256/,
      ],
      ['sequence_number 0', { sequenceNumber: '0' }, 'VALIDATION_ERROR', /sequence_number is required/],
      ['a negative sequence_number', { sequenceNumber: '-1' }, 'VALIDATION_ERROR', /sequence_number/],
      ['an empty sequence_number', { sequenceNumber: '' }, 'VALIDATION_ERROR', /sequence_number/],
      ['a negative retry_count', { retryCount: -1 }, 'VALIDATION_ERROR', /retry_count must be a non-negative integer/],
      [
        'message_type UNSPECIFIED',
        { messageType: 'MESSAGE_TYPE_UNSPECIFIED' },
        'VALIDATION_ERROR',
        /message_type 'MESSAGE_TYPE_UNSPECIFIED' is not one of/,
      ],
      ['an unknown message_type number', { messageType: '42' }, 'VALIDATION_ERROR', /message_type '42'/],
      [
        'content_length that does not match the payload',
        { payload: '{}', contentLength: '3' },
        'VALIDATION_ERROR',
        /content_length is 3 but the payload has 2 bytes/,
      ],
      [
        'a non-numeric content_length',
        { contentLength: 'two' },
        'VALIDATION_ERROR',
        /content_length must be a non-negative integer/,
      ],
      [
        'a payload without content_type',
        { contentType: '' },
        'VALIDATION_ERROR',
        /content_type is required when a payload is present/,
      ],
      [
        'a content_type that is not a MIME type',
        { contentType: 'json' },
        'VALIDATION_ERROR',
        /content_type 'json' is not a MIME type/,
      ],
      [
        'application/json that does not parse',
        { payload: '{"a":', contentType: 'application/json' },
        'VALIDATION_ERROR',
        /not valid JSON for content_type application\/json/,
      ],
      [
        '+json that does not parse',
        { payload: 'nope', contentType: 'application/problem+json' },
        'VALIDATION_ERROR',
        /not valid JSON/,
      ],
      [
        'text/* that is not UTF-8',
        { payload: Uint8Array.from([0x68, 0xff, 0xfe]), contentType: 'text/plain' },
        'VALIDATION_ERROR',
        /text payloads must be UTF-8/,
      ],
      ['a negative ttl_ms', { ttlMs: -5 }, 'VALIDATION_ERROR', /ttl_ms must be a non-negative integer/],
      [
        'a DATA payload over its configured limit',
        { payload: 'x'.repeat(65), contentType: 'text/plain' },
        'OVERSIZE_PAYLOAD',
        /DATA payloads are limited to 64 bytes; this one has 65/,
      ],
      [
        'a content type the recipient did not declare',
        { payload: Uint8Array.from([1, 2, 3]), contentType: 'image/png' },
        'UNSUPPORTED_MESSAGE_TYPE',
        /consumer accepts application\/json, text\/plain; charset=utf-8, not image\/png/,
      ],
      [
        'a ttl that passed before arrival',
        { ttlMs: 1_000, timestampMs: Date.UTC(2026, 0, 1) - 5_000 },
        'TTL_EXPIRED',
        /ttl_ms 1000 had passed on arrival/,
      ],
    ];

    for (const [what, input, code, detail] of invalid) {
      it(`refuses ${what} with ${code}, the reason starting with the code name`, () => {
        const envelope = h.envelope(P, input);
        assertRefused(h.send(envelope, C), code, detail);
        assert.equal(h.router.message(envelope.messageId), undefined, 'nothing is stored');
        assert.equal(h.router.inboxStats(C).queued, 0);
        const refused = h.events('message.refused').at(-1);
        assert.equal(refused?.details.error_code, code);
        assert.equal(refused?.level, 'WARN');
      });
    }

    it('admits a payload of exactly the configured limit, and an empty payload without content_type', () => {
      assert.ok(h.send(h.envelope(P, { payload: 'x'.repeat(64), contentType: 'text/plain' }), C).accepted);
      assert.ok(h.send(h.envelope(P, { payload: '', contentType: '' }), C).accepted);
    });

    it("applies each type's own limit (ACKNOWLEDGEMENT 4 KiB) and 1 MiB to types the table does not list", () => {
      const m = h.sendData(P, C);
      const bigAck = h.ackEnvelope(C, m.messageId, 'RECEIVED', { note: 'n'.repeat(5000) });
      assertRefused(h.send(bigAck), 'OVERSIZE_PAYLOAD', /ACKNOWLEDGEMENT payloads are limited to 4096 bytes/);
      const control = h.envelope(P, {
        messageType: 'CONTROL',
        payload: 'x'.repeat(1024 * 1024 + 1),
        contentType: 'text/plain',
      });
      assertRefused(h.send(control, C), 'OVERSIZE_PAYLOAD', /CONTROL payloads are limited to 1048576 bytes/);
    });

    it('accepts declared modalities by base type, ignoring parameters and case', () => {
      assert.ok(h.send(h.envelope(P, { payload: 'hi', contentType: 'Text/Plain; charset=UTF-8' }), C).accepted);
      assert.ok(h.send(h.envelope(P, { payload: '{}', contentType: 'application/json; charset=utf-8' }), C).accepted);
    });

    it('admits a content type matching a declared type/* wildcard', () => {
      h.register('viewer', { modalitiesSupported: ['image/*'] });
      assert.ok(
        h.registry.get('viewer')?.descriptor.modalitiesSupported.includes('image/*'),
        'the registry accepts the wildcard',
      );
      const result = h.send(
        h.envelope(P, { payload: Uint8Array.from([0x89, 0x50]), contentType: 'image/png' }),
        'viewer',
      );
      assert.ok(result.accepted, result.accepted ? '' : result.reason);
    });

    it('admits every content type for a recipient that declared no modalities', () => {
      h.register('open', { modalitiesSupported: [] });
      assert.ok(
        h.send(h.envelope(P, { payload: Uint8Array.from([1]), contentType: 'application/octet-stream' }), 'open')
          .accepted,
      );
    });

    it('counts ttl_ms from acceptance when the producer sent no timestamp', () => {
      const envelope = h.envelope(P, { ttlMs: 1_000, timestampMs: null });
      assert.ok(h.send(envelope, C).accepted);
      assert.equal(h.router.message(envelope.messageId)?.expiresAt, h.clock.now() + 1_000);
    });

    it("sends a NACK for a refusal to the producer's live stream: REJECTED with the code, for the refused message", () => {
      const envelope = h.envelope(P, { messageId: 'not-a-uuid' });
      assertRefused(h.send(envelope, C), 'VALIDATION_ERROR');
      const [nack] = producer.acksFor('not-a-uuid');
      assert.equal(nack.ack_stage, 'REJECTED');
      assert.equal(nack.error_code, 'VALIDATION_ERROR');
      assert.match(String(nack.note), /UUIDv4/);
      assert.equal(producer.items.at(-1)?.envelope.producerId, COORDINATOR_ID);
      assert.equal(
        h.store.router.getMessage(producer.items.at(-1)!.envelope.messageId),
        undefined,
        'a refusal NACK is not persisted',
      );
    });
  });

  describe('TTL while queued', () => {
    beforeEach(() => {
      h = new RouterHarness();
      for (const id of [P, C]) h.register(id);
      producer = h.stream(P).sink;
    });

    it('fails a message whose ttl passes while it waits: FAILED TTL_EXPIRED, dead-lettered, NACK to the producer', async () => {
      const m = h.sendData(P, C, { ttlMs: 5_000 });
      h.clock.advance(4_999);
      assert.equal(h.state(m.messageId), 'SENT');
      h.clock.advance(1);
      await settle();
      const record = h.router.message(m.messageId)!;
      assert.equal(record.state, 'FAILED');
      assert.equal(record.errorCode, 'TTL_EXPIRED');
      const [letter] = h.router.deadLetters();
      assert.equal(letter.messageId, m.messageId);
      assert.equal(letter.errorCode, 'TTL_EXPIRED');
      assert.deepEqual(
        producer.acksFor(m.messageId).map((a) => [a.ack_stage, a.error_code]),
        [['FAILED', 'TTL_EXPIRED']],
      );
      assert.equal(h.router.inboxStats(C).queued, 0, 'the expired message left the queue');
      assert.deepEqual(h.stream(C).sink.ids(), [], 'it is never delivered');
    });

    it('does not expire a message that was RECEIVED in time', () => {
      const consumer = h.stream(C).sink;
      const m = h.sendData(P, C, { ttlMs: 5_000 });
      assert.deepEqual(consumer.ids(), [m.messageId]);
      h.acked(C, m.messageId, 'RECEIVED');
      h.clock.advance(60_000);
      assert.equal(h.state(m.messageId), 'RECEIVED');
      assert.deepEqual(h.router.deadLetters(), []);
    });
  });

  describe('recipient resolution', () => {
    beforeEach(() => {
      h = new RouterHarness();
      for (const id of [P, C, 'other']) h.register(id);
      producer = h.stream(P).sink;
    });

    it('takes the recipient from sw4rm-to before a "to" in the payload', () => {
      const consumer = h.stream(C).sink;
      const other = h.stream('other').sink;
      const both = h.envelope(P, { payload: { to: 'other', x: 1 } });
      assert.ok(h.send(both, C).accepted);
      const payloadOnly = h.envelope(P, { payload: { to: 'other' } });
      assert.ok(h.send(payloadOnly).accepted);
      assert.deepEqual(consumer.ids(), [both.messageId]);
      assert.deepEqual(other.ids(), [payloadOnly.messageId]);
      assert.equal(h.router.message(both.messageId)?.recipientId, C);
    });

    it('routes an ACKNOWLEDGEMENT to the producer of ack_for_message_id', () => {
      const m = h.sendData(P, C);
      assert.ok(h.ack(C, m.messageId, 'RECEIVED').accepted);
      assert.deepEqual(
        producer.acksFor(m.messageId).map((a) => a.ack_stage),
        ['RECEIVED'],
      );
    });

    it('refuses with NO_ROUTE: no recipient, itself, an unregistered recipient', () => {
      assertRefused(h.send(h.envelope(P)), 'NO_ROUTE', /no recipient: set call metadata sw4rm-to or a top-level "to"/);
      assertRefused(h.send(h.envelope(P, { payload: { to: 42 } })), 'NO_ROUTE', /no recipient/);
      assertRefused(h.send(h.envelope(P), P), 'NO_ROUTE', /a producer never receives its own message/);
      assertRefused(h.send(h.envelope(P, { payload: { to: P } })), 'NO_ROUTE', /never receives its own/);
      assertRefused(h.send(h.envelope(P), 'ghost'), 'NO_ROUTE', /no agent 'ghost' is registered/);
    });

    it('refuses TOOL_CALL, TOOL_RESULT and TOOL_ERROR from an agent to another agent (they go to coordinator, which enforces the policy)', () => {
      const consumer = h.stream(C).sink;
      for (const messageType of ['TOOL_CALL', 'TOOL_RESULT', 'TOOL_ERROR']) {
        const payload = { call_id: 'c1', provider_id: C, tool_name: 't', args: {} };
        assertRefused(
          h.send(h.envelope(P, { messageType, payload }), C),
          'VALIDATION_ERROR',
          /^VALIDATION_ERROR: tool envelopes go to coordinator, which enforces the execution policy \(README, "Write a tool provider"\)$/,
        );
        assertRefused(
          h.send(h.envelope(P, { messageType, payload: { ...payload, to: C } })),
          'VALIDATION_ERROR',
          /tool envelopes go to coordinator/,
        );
      }
      assert.deepEqual(consumer.items, [], 'nothing reached the other agent');
      // The coordinator itself sends TOOL_CALL envelopes to provider agents (and TOOL_RESULT frames to callers).
      const sent = h.router.sendToAgent(
        {
          to: C,
          messageType: 'TOOL_CALL',
          contentType: 'application/json',
          payload: Buffer.from('{"call_id":"c2"}'),
          correlationId: 'c2',
        },
        { correlationId: 'c2' },
      );
      assert.ok(sent.accepted, sent.accepted ? '' : sent.reason);
      assert.deepEqual(
        consumer.ofType('TOOL_CALL').map((i) => i.envelope.messageId),
        [sent.messageId],
      );
      // Other types between agents are unaffected.
      assert.ok(h.send(h.envelope(P), C).accepted);
    });

    it('refuses an unregistered producer with PERMISSION_DENIED', () => {
      assertRefused(
        h.send(h.envelope('stranger'), C),
        'PERMISSION_DENIED',
        /producer_id 'stranger' is not a registered agent; RegisterAgent first/,
      );
    });

    it('keeps the coordinator\'s address for the coordinator: no agent may register as "coordinator"', () => {
      const result = h.registry.register({ agentId: COORDINATOR_ID, name: 'impostor' }, { correlationId: 'spoof' });
      assert.equal(
        result.accepted,
        false,
        "an agent registered under the coordinator's own id and could send envelopes as it",
      );
    });

    it('takes HEARTBEAT replies at the coordinator address and refuses other types there', () => {
      assert.ok(h.send(h.envelope(P, { messageType: 'HEARTBEAT' }), COORDINATOR_ID).accepted);
      assert.ok(
        h.send(h.envelope(P, { messageType: 'HEARTBEAT' })).accepted,
        'a HEARTBEAT without recipient goes to the coordinator',
      );
      assertRefused(
        h.send(h.envelope(P), COORDINATOR_ID),
        'UNSUPPORTED_MESSAGE_TYPE',
        /the coordinator takes HEARTBEAT replies, ACKNOWLEDGEMENTs, HITL_INVOCATION, WORKTREE_CONTROL, (TOOL_[A-Z]+, )*NOTIFICATION, not DATA/,
      );
    });

    it('still settles a message acknowledged after its producer left (the ACK has nowhere to go, the message must not stay open)', () => {
      h.stream(C);
      const m = h.sendData(P, C);
      h.acked(C, m.messageId, 'RECEIVED');
      assert.ok(h.registry.deregister(P, 'finished', { correlationId: 'bye' }));
      const result = h.ack(C, m.messageId, 'FULFILLED');
      assert.ok(result.accepted, `the recipient's ACK is refused: ${result.accepted ? '' : result.reason}`);
      assert.equal(h.state(m.messageId), 'FULFILLED');
      assert.equal(h.router.inboxStats(C).queueDepth, 0, 'the consumer gets its inbox slot back');
    });
  });

  describe('back-pressure (RFC §13)', () => {
    const CAPACITY = 3;
    let consumer: CollectingSink;

    beforeEach(() => {
      h = new RouterHarness({ capacity: CAPACITY });
      for (const id of [P, C]) h.register(id);
      producer = h.stream(P).sink;
      consumer = h.stream(C).sink;
    });

    it("refuses the capacity+1th unREAD message with BUFFER_FULL and an ephemeral NACK on the producer's stream", () => {
      const accepted = [h.sendData(P, C), h.sendData(P, C), h.sendData(P, C)];
      const fourth = h.envelope(P);
      assertRefused(
        h.send(fourth, C),
        'BUFFER_FULL',
        /^BUFFER_FULL: the inbox of consumer holds 3 messages not yet READ \(capacity 3\)$/,
      );
      const [nack] = producer.acksFor(fourth.messageId);
      assert.equal(nack.ack_stage, 'REJECTED');
      assert.equal(nack.error_code, 'BUFFER_FULL');
      assert.equal(h.router.message(fourth.messageId), undefined);
      assert.deepEqual(
        consumer.ids(),
        accepted.map((m) => m.messageId),
        'every accepted message is delivered; nothing is dropped',
      );
    });

    it('counts RECEIVED as not yet READ; READ (or a terminal state) frees a slot', () => {
      const [a, b] = [h.sendData(P, C), h.sendData(P, C), h.sendData(P, C)];
      h.acked(C, a.messageId, 'RECEIVED');
      assertRefused(h.send(h.envelope(P), C), 'BUFFER_FULL');
      h.acked(C, a.messageId, 'READ');
      assert.equal(h.router.inboxStats(C).queueDepth, 2);
      h.sendData(P, C);
      h.acked(C, b.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
      h.sendData(P, C);
      assertRefused(h.send(h.envelope(P), C), 'BUFFER_FULL');
    });

    it('counts a queued message for an agent that is not streaming the same way', () => {
      h.register('sleeper');
      for (let i = 0; i < CAPACITY; i++) h.sendData(P, 'sleeper');
      assertRefused(h.send(h.envelope(P), 'sleeper'), 'BUFFER_FULL');
      assert.deepEqual(h.router.inboxStats('sleeper'), {
        agentId: 'sleeper',
        queueDepth: 3,
        capacity: 3,
        inFlight: 0,
        queued: 3,
        streaming: false,
        lastDeliveryAt: null,
      });
    });

    it('never counts ACKs and NACKs against the capacity', () => {
      const ms = [h.sendData(P, C), h.sendData(P, C), h.sendData(P, C)];
      for (const m of ms) h.acked(C, m.messageId, 'READ');
      for (let i = 0; i < CAPACITY; i++) h.sendData(C, P);
      assert.equal(
        h.router.inboxStats(P).queueDepth,
        3,
        'only the three DATA messages count; the three forwarded ACKs do not',
      );
    });

    it('exposes the RFC §13 metrics: depth, capacity, rejects by reason, NACKs by code, latencies', async () => {
      h.sendData(P, C);
      h.sendData(P, C);
      h.clock.advance(2_000);
      h.sendData(P, C);
      assertRefused(h.send(h.envelope(P), C), 'BUFFER_FULL');
      assertRefused(h.send(h.envelope(P), C), 'BUFFER_FULL');
      h.clock.advance(9_000); // the first two time out (NACK ACK_TIMEOUT), the third is 1 s from its deadline
      await settle();

      const byAgent = new Map(h.router.metrics().map((m) => [m.agentId, m]));
      const c = byAgent.get(C)!;
      const p = byAgent.get(P)!;
      assert.equal(c.queueDepth, 1);
      assert.equal(c.capacity, CAPACITY);
      assert.equal(c.oldestEnqueuedAgeSeconds, 9);
      assert.equal(c.enqueueLatency.count, 3);
      assert.equal(c.dequeueLatency.count, 3);
      assert.equal(c.delivered, 3);
      assert.equal(c.rejects.BUFFER_FULL, 2, 'a full inbox counts against the recipient');
      assert.equal(p.rejects.BUFFER_FULL, undefined);
      assert.equal(p.nacks.BUFFER_FULL, 2);
      assert.equal(p.nacks.ACK_TIMEOUT, 2);

      const text = h.router.metricsText();
      for (const line of [
        'router_inbound_queue_depth{agent_id="consumer"} 1',
        'router_inbound_queue_capacity{agent_id="consumer"} 3',
        'router_enqueue_rejects_total{agent_id="consumer",reason="BUFFER_FULL"} 2',
        'router_nacks_total{agent_id="producer",error_code="BUFFER_FULL"} 2',
        'router_nacks_total{agent_id="producer",error_code="ACK_TIMEOUT"} 2',
        'router_enqueue_latency_seconds_count{agent_id="consumer"} 3',
        'agent_dequeue_latency_seconds_count{agent_id="consumer"} 3',
        'router_oldest_enqueued_age_seconds{agent_id="consumer"} 9',
        '# TYPE router_enqueue_rejects_total counter',
        '# TYPE router_inbound_queue_depth gauge',
      ]) {
        assert.ok(text.split('\n').includes(line), `${line} in\n${text}`);
      }
    });
  });
});
