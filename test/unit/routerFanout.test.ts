import { strict as assert } from 'node:assert';
import { routerSettings } from '../../src/extension/routerSettings';
import { CollectingSink, RouterHarness, assertRefused, json, settle } from '../support/routerHarness';

const P = 'producer';

/**
 * Unaddressed messages (no sw4rm-to, no JSON "to"): NO_ROUTE by default (RFC §12: unicast); with
 * `unaddressed: 'fanout'` one unicast copy per other registered agent, each its own message and lifecycle.
 */
describe('Router: unaddressed messages', () => {
  let h: RouterHarness;

  afterEach(() => h.dispose());

  it('refuses an unaddressed message with NO_ROUTE by default', () => {
    h = new RouterHarness();
    for (const id of [P, 'a', 'b']) h.register(id);
    assertRefused(h.send(h.envelope(P, { payload: { n: 1 } })), 'NO_ROUTE', /no recipient/);
  });

  describe("with unaddressed: 'fanout'", () => {
    let producer: CollectingSink;
    let a: CollectingSink;
    let b: CollectingSink;

    beforeEach(() => {
      h = new RouterHarness({ unaddressed: 'fanout', ackTimeoutMs: 1000 });
      for (const id of [P, 'a', 'b']) h.register(id);
      producer = h.stream(P).sink;
      a = h.stream('a').sink;
      b = h.stream('b').sink;
    });

    function fanout(payload: Record<string, unknown> = { n: 1 }) {
      const envelope = h.envelope(P, { payload });
      const result = h.send(envelope);
      assert.ok(result.accepted, result.accepted ? '' : result.reason);
      const [copyA] = a
        .ofType('DATA')
        .map((i) => i.envelope)
        .filter((e) => h.router.message(e.messageId)?.ackFor === envelope.messageId);
      const [copyB] = b
        .ofType('DATA')
        .map((i) => i.envelope)
        .filter((e) => h.router.message(e.messageId)?.ackFor === envelope.messageId);
      assert.ok(copyA && copyB, 'each other agent got a copy');
      return { envelope, copyA, copyB };
    }

    it('delivers one copy with its own message_id to every other agent, never to the producer', () => {
      const { envelope, copyA, copyB } = fanout();
      assert.notEqual(copyA.messageId, envelope.messageId);
      assert.notEqual(copyA.messageId, copyB.messageId);
      for (const copy of [copyA, copyB]) {
        assert.equal(copy.producerId, P);
        assert.equal(copy.correlationId, envelope.correlationId);
        assert.deepEqual(json(copy), { n: 1 });
        assert.equal(h.state(copy.messageId), 'SENT');
      }
      assert.equal(producer.ofType('DATA').length, 0);
      assert.equal(
        h.state(envelope.messageId),
        undefined,
        "the producer's message itself is not stored; its copies are",
      );
      const [event] = h.events('message.fanned_out');
      assert.equal(event.details.message_id, envelope.messageId);
      assert.deepEqual(event.details.copies, [
        { to: 'a', message_id: copyA.messageId },
        { to: 'b', message_id: copyB.messageId },
      ]);
    });

    it("forwards each recipient's ACKs to the producer naming the producer's message_id, with the copy and the recipient", () => {
      const { envelope, copyA, copyB } = fanout();
      h.acked('a', copyA.messageId, 'RECEIVED');
      h.acked('b', copyB.messageId, 'FULFILLED');
      assert.equal(h.state(copyA.messageId), 'RECEIVED');
      assert.equal(h.state(copyB.messageId), 'FULFILLED');
      const acks = producer.acksFor(envelope.messageId).map((p) => [p.ack_stage, p.copy_message_id, p.recipient_id]);
      assert.deepEqual(acks, [
        ['RECEIVED', copyA.messageId, 'a'],
        ['FULFILLED', copyB.messageId, 'b'],
      ]);
    });

    it('times out and dead-letters a copy alone; the other copy goes on', async () => {
      const { envelope, copyA, copyB } = fanout();
      h.acked('b', copyB.messageId, 'RECEIVED');
      h.clock.advance(1001);
      await settle();
      assert.equal(h.state(copyA.messageId), 'TIMED_OUT');
      assert.equal(h.state(copyB.messageId), 'RECEIVED');
      const [nack] = producer.acksFor(envelope.messageId).filter((p) => p.error_code === 'ACK_TIMEOUT');
      assert.equal(nack.copy_message_id, copyA.messageId);
      assert.equal(nack.recipient_id, 'a');

      h.acked('b', copyB.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
      assert.equal(h.state(copyB.messageId), 'REJECTED');
      assert.deepEqual(
        h.router.deadLetters().map((d) => [d.messageId, d.recipientId]),
        [[copyB.messageId, 'b']],
      );
    });

    it('deduplicates a retry per recipient: only the copy that may be retried is sent again', () => {
      const { envelope, copyA, copyB } = fanout();
      const retry = { ...envelope, messageId: h.envelope(P).messageId, retryCount: 1 };
      assertRefused(h.send(retry), 'ALREADY_IN_PROGRESS');
      h.acked('b', copyB.messageId, 'RECEIVED');
      h.clock.advance(1001);
      assert.equal(h.state(copyA.messageId), 'TIMED_OUT');
      const again = { ...envelope, messageId: h.envelope(P).messageId, retryCount: 2 };
      assert.ok(h.send(again).accepted);
      assert.equal(h.state(copyA.messageId), 'RETRYING');
      assert.equal(a.ofType('DATA').length, 2);
      assert.equal(b.ofType('DATA').length, 1);
    });

    it('fans out messages that reuse a sequence number with other content (the reference SDK sends 1 every time)', () => {
      assert.ok(h.send(h.envelope(P, { sequenceNumber: 1, payload: { n: 1 } })).accepted);
      assert.ok(h.send(h.envelope(P, { sequenceNumber: 1, payload: { n: 2 } })).accepted);
      assert.deepEqual(
        a.ofType('DATA').map((i) => json(i.envelope)),
        [{ n: 1 }, { n: 2 }],
      );
      assertRefused(h.send(h.envelope(P, { sequenceNumber: 1, payload: { n: 2 } })), 'ALREADY_IN_PROGRESS');
    });

    it('refuses the whole message BUFFER_FULL when one recipient is full, writing no copy', () => {
      h.dispose();
      h = new RouterHarness({ unaddressed: 'fanout', capacity: 1 });
      for (const id of [P, 'a', 'b']) h.register(id);
      h.sendData(P, 'b', { payload: { fill: true } });
      assertRefused(h.send(h.envelope(P, { payload: { n: 1 } })), 'BUFFER_FULL', /inbox of b/);
      assert.equal(h.events('message.fanned_out').length, 0);
      assert.equal(h.router.inboxStats('a').queueDepth, 0);
    });

    it('skips agents that do not accept the content type, and answers NO_ROUTE when no other agent is left', () => {
      h.dispose();
      h = new RouterHarness({ unaddressed: 'fanout' });
      h.register(P);
      assertRefused(h.send(h.envelope(P)), 'NO_ROUTE', /no other registered agent/);
      h.register('texty', { modalitiesSupported: ['text/plain'] });
      assertRefused(h.send(h.envelope(P)), 'NO_ROUTE');
      h.register('jsony');
      assert.ok(h.send(h.envelope(P)).accepted);
      assert.equal(h.router.inboxStats('jsony').queueDepth, 1);
      assert.equal(h.router.inboxStats('texty').queueDepth, 0);
    });

    it('still routes addressed messages and ACKs as unicast', () => {
      const m = h.sendData(P, 'a', { payload: { n: 9 } });
      assert.equal(b.ofType('DATA').length, 0);
      h.acked('a', m.messageId, 'RECEIVED');
      assert.equal(producer.acksFor(m.messageId).length, 1);
      assert.equal(producer.acksFor(m.messageId)[0].copy_message_id, undefined);
    });
  });

  it('reads sw4rm.unaddressedMessages: refuse by default, fanout, anything else warned', () => {
    h = new RouterHarness();
    const base = {
      inboxCapacity: undefined,
      deduplicationWindowSeconds: undefined,
      messageRetentionHours: undefined,
      privilegedRatePerSecond: undefined,
      payloadLimits: undefined,
    };
    assert.equal(routerSettings(base).options.unaddressed, 'refuse');
    assert.equal(routerSettings({ ...base, unaddressedMessages: 'fanout' }).options.unaddressed, 'fanout');
    const odd = routerSettings({ ...base, unaddressedMessages: 'broadcast' });
    assert.equal(odd.options.unaddressed, 'refuse');
    assert.match(odd.warnings.join(' '), /sw4rm\.unaddressedMessages must be one of refuse, fanout/);
  });
});
