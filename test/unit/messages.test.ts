import { strict as assert } from 'node:assert';
import { type MessageDetail } from '../../src/core/api';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { COORDINATOR_ID } from '../../src/core/router/router';
import { MAX_MESSAGE_LIMIT } from '../../src/core/router/messageQueries';
import { RouterHarness, assertRefused, ctx, json, settle } from '../support/routerHarness';

/** What crosses the API is plain data: a structured clone is equal to it. */
function assertPlain(value: unknown): void {
  assert.deepEqual(structuredClone(value), value);
}

describe("messages: the Messages view's queries and Send Message… (real store, ManualClock)", () => {
  let h: RouterHarness;

  beforeEach(() => {
    h = new RouterHarness({ ackTimeoutMs: 10_000, leaseMs: 30_000 });
    h.register('a');
    h.register('b');
    h.register('c');
  });

  afterEach(() => h.dispose());

  describe('recent messages', () => {
    it('lists the newest first, bounded, without payloads, and filters by agent, correlation id, state and type', () => {
      const first = h.sendData('a', 'b', { correlationId: 'corr-1', payload: { n: 1 } });
      h.clock.advance(1_000);
      const second = h.sendData('b', 'c', { correlationId: 'corr-2', payload: { n: 2 } });
      h.clock.advance(1_000);
      const third = h.sendData('c', 'a', { correlationId: 'corr-1', messageType: 'CONTROL', payload: { n: 3 } });

      const all = h.router.messages();
      assert.deepEqual(
        all.map((m) => m.messageId),
        [third.messageId, second.messageId, first.messageId],
      );
      assert.deepEqual(all[2], {
        messageId: first.messageId,
        messageType: 'DATA',
        producerId: 'a',
        recipientId: 'b',
        state: 'SENT',
        errorCode: '',
        correlationId: 'corr-1',
        contentType: 'application/json',
        size: first.payload.byteLength,
        tracked: true,
        acceptedAt: h.clock.now() - 2_000,
        updatedAt: h.clock.now() - 2_000,
      });
      assert.deepEqual(
        h.router.messages({ limit: 2 }).map((m) => m.messageId),
        [third.messageId, second.messageId],
      );
      // An agent as producer or as recipient.
      assert.deepEqual(
        h.router.messages({ agentId: 'a' }).map((m) => m.messageId),
        [third.messageId, first.messageId],
      );
      assert.deepEqual(
        h.router.messages({ correlationId: 'corr-1' }).map((m) => m.messageId),
        [third.messageId, first.messageId],
      );
      assert.deepEqual(
        h.router.messages({ messageType: 'CONTROL' }).map((m) => m.messageId),
        [third.messageId],
      );
      assert.deepEqual(
        h.router.messages({ agentId: 'b', messageType: 'DATA', correlationId: 'corr-2' }).map((m) => m.messageId),
        [second.messageId],
      );
      assert.deepEqual(h.router.messages({ agentId: 'nobody' }), []);

      const { sink } = h.stream('b');
      h.ackDelivery('b', sink, first.messageId);
      h.acked('b', first.messageId, 'RECEIVED');
      assert.deepEqual(
        h.router.messages({ state: 'RECEIVED' }).map((m) => m.messageId),
        [first.messageId],
      );
      // The ACK itself, forwarded to its producer, is a routed message of its own.
      const acks = h.router.messages({ messageType: 'ACKNOWLEDGEMENT' });
      assert.equal(acks.length, 1);
      assert.equal(acks[0].producerId, 'b');
      assert.equal(acks[0].recipientId, 'a');
      assert.equal(acks[0].tracked, false);
    });

    it('caps the limit and looks back only over the newest messages of the scan window', () => {
      for (let i = 0; i < 5; i++) h.sendData('a', 'b', { correlationId: `w-${i}` });
      assert.equal(h.router.messages({ limit: MAX_MESSAGE_LIMIT * 10 }).length, 5);
      assert.equal(h.router.messages({ limit: 0 }).length, 1);
      // The repository's window: the newest 2 messages are looked at, so the oldest correlation is not found there.
      assert.deepEqual(h.store.router.recentMessages({ correlationId: 'w-0' }, 2, 10), []);
      assert.deepEqual(
        h.store.router.recentMessages({ correlationId: 'w-4' }, 2, 10).map((m) => m.correlationId),
        ['w-4'],
      );
      assert.equal(h.store.router.recentMessages({ correlationId: 'w-0' }, 5, 10).length, 1);
    });
  });

  describe("a message's detail", () => {
    it('has the envelope, the payload as text and every state of the lifecycle with its time and the ACK that caused it', () => {
      const { sink } = h.stream('b');
      const m = h.sendData('a', 'b', {
        correlationId: 'corr-d',
        payload: { text: '<b>not html</b>' },
        idempotencyToken: 'tok-1',
      });
      h.ackDelivery('b', sink, m.messageId);
      const acks: string[] = [];
      for (const stage of ['RECEIVED', 'READ', 'FULFILLED']) {
        h.clock.advance(500);
        const ack = h.ackEnvelope('b', m.messageId, stage);
        assert.ok(h.send(ack).accepted);
        acks.push(ack.messageId);
      }
      const detail = h.router.messageDetail(m.messageId)!;
      assertPlain(detail);
      assert.equal(detail.state, 'FULFILLED');
      assert.equal(detail.envelope.message_id, m.messageId);
      assert.equal(detail.envelope.idempotency_token, 'tok-1');
      assert.equal(detail.envelope.correlation_id, 'corr-d');
      assert.equal(detail.envelope.message_type, 'DATA');
      assert.equal(detail.payload.encoding, 'utf-8');
      assert.equal(detail.payload.text, JSON.stringify({ text: '<b>not html</b>' }, null, 2));
      const states = detail.history.filter((s) => s.state);
      assert.deepEqual(
        states.map((s) => s.state),
        ['SENT', 'RECEIVED', 'READ', 'FULFILLED'],
      );
      assert.deepEqual(
        states.slice(1).map((s) => s.ackMessageId),
        acks,
        'each step names the ACK that caused it',
      );
      assert.deepEqual(
        states.map((s) => s.at - states[0].at),
        [0, 500, 1_000, 1_500],
      );
      assert.equal(states[3].time, new Date(states[3].at).toISOString());
      assert.ok(
        detail.history.some((s) => s.event === 'delivered' && !s.state),
        'steps that change no state are listed too',
      );
    });

    it("says that a finished message's large payload was released rather than showing nothing", () => {
      const { sink } = h.stream('b');
      const big = h.sendData('a', 'b', { payload: { blob: 'x'.repeat(5_000) } });
      h.ackDelivery('b', sink, big.messageId);
      h.acked('b', big.messageId, 'FULFILLED');
      const detail = h.router.messageDetail(big.messageId)!;
      assert.equal(detail.payload.text, undefined);
      assert.equal(detail.payload.bytes, big.payload.byteLength);
      assert.match(detail.payload.note!, /no longer stored: payloads of 4 KiB or more are released/);
      // Also after a restart, read back from the store.
      h.restart();
      assert.match(h.router.messageDetail(big.messageId)!.payload.note!, /no longer stored/);
    });

    it('shows bytes that are not UTF-8 as base64, and a late ACK as a step that changes no state', () => {
      h.register('any', { modalitiesSupported: ['application/octet-stream'] });
      const { sink } = h.stream('any');
      const m = h.sendData('a', 'any', {
        contentType: 'application/octet-stream',
        payload: new Uint8Array([0xff, 0xfe, 0x00]),
      });
      h.ackDelivery('any', sink, m.messageId);
      h.acked('any', m.messageId, 'FULFILLED');
      h.acked('any', m.messageId, 'READ');
      const detail = h.router.messageDetail(m.messageId)!;
      assert.deepEqual(
        { ...detail.payload },
        { bytes: 3, text: '//4A', encoding: 'base64', note: 'The payload is not UTF-8 text; shown as base64.' },
      );
      const late = detail.history.filter((s) => s.event === 'ack_read');
      assert.equal(late.length, 1);
      assert.equal(late[0].state, undefined);
      assert.ok(late[0].ackMessageId);
      assert.equal(h.router.messageDetail('00000000-0000-4000-8000-000000000000'), undefined);
    });
  });

  describe('sending as the coordinator (Send Message…)', () => {
    it("admits a DATA message from coordinator, delivers it, and the recipient's ACKs take it to FULFILLED", async () => {
      const { sink } = h.stream('b');
      const result = h.router.sendFromCoordinator(
        { to: 'b', contentType: 'application/json', payload: '{"text":"hello"}' },
        ctx('send-1'),
      );
      assert.ok(result.accepted);
      const delivered = sink.items.find((i) => i.envelope.messageId === result.messageId);
      assert.ok(delivered, "delivered to the recipient's stream");
      assert.equal(delivered.envelope.producerId, COORDINATOR_ID);
      assert.equal(delivered.envelope.messageType, 'DATA');
      assert.equal(delivered.envelope.contentType, 'application/json');
      assert.deepEqual(json(delivered.envelope), { text: 'hello' });
      assert.equal(h.eventsFor('message.accepted', result.messageId)[0].actor, COORDINATOR_ID);

      h.ackDelivery('b', sink, result.messageId);
      for (const stage of ['RECEIVED', 'READ', 'FULFILLED']) h.acked('b', result.messageId, stage);
      await settle();
      assert.equal(h.state(result.messageId), 'FULFILLED');
      const detail = h.router.messageDetail(result.messageId)!;
      assert.deepEqual(
        detail.history.filter((s) => s.state).map((s) => s.state),
        ['SENT', 'RECEIVED', 'READ', 'FULFILLED'],
      );
      // The ACKs went to the coordinator: nothing was forwarded to any agent.
      assert.deepEqual(h.router.messages({ messageType: 'ACKNOWLEDGEMENT' }), []);

      // Sequence numbers increase, so a second message is a new operation, not a duplicate.
      const again = h.router.sendFromCoordinator(
        { to: 'b', contentType: 'text/plain', payload: 'hello' },
        ctx('send-2'),
      );
      assert.ok(again.accepted, again.accepted ? '' : again.reason);
    });

    it('refuses through the normal admission rules, with the SW4RM code', () => {
      h.register('json-only', { modalitiesSupported: ['application/json'] });
      assertRefused(
        h.router.sendFromCoordinator({ to: 'nobody', contentType: 'text/plain', payload: 'x' }, ctx()),
        'NO_ROUTE',
        /no agent 'nobody'/,
      );
      assertRefused(
        h.router.sendFromCoordinator({ to: COORDINATOR_ID, contentType: 'text/plain', payload: 'x' }, ctx()),
        'UNSUPPORTED_MESSAGE_TYPE',
      );
      assertRefused(
        h.router.sendFromCoordinator({ to: 'b', contentType: 'application/json', payload: '{not json' }, ctx()),
        'VALIDATION_ERROR',
      );
      assertRefused(
        h.router.sendFromCoordinator({ to: 'json-only', contentType: 'text/plain', payload: 'x' }, ctx()),
        'UNSUPPORTED_MESSAGE_TYPE',
      );
      assertRefused(
        h.router.sendFromCoordinator({ to: 'b', contentType: 'image/png' as 'text/plain', payload: 'x' }, ctx()),
        'VALIDATION_ERROR',
      );
      for (let i = 0; i < 10; i++)
        assert.ok(
          h.router.sendFromCoordinator({ to: 'c', contentType: 'text/plain', payload: `m${i}` }, ctx()).accepted,
        );
      assertRefused(
        h.router.sendFromCoordinator({ to: 'c', contentType: 'text/plain', payload: 'one too many' }, ctx()),
        'BUFFER_FULL',
        /capacity 10/,
      );
      assert.ok(h.events('message.refused').length >= 5, 'refusals are logged');
    });

    it('is the only way to send as coordinator: an envelope naming producer coordinator is refused', () => {
      assertRefused(h.send(h.envelope(COORDINATOR_ID), 'b'), 'PERMISSION_DENIED');
    });

    it('times out like any message when the recipient never acknowledges it', () => {
      const result = h.router.sendFromCoordinator(
        { to: 'b', contentType: 'text/plain', payload: 'anyone there?' },
        ctx(),
      );
      assert.ok(result.accepted);
      h.clock.advance(10_001);
      assert.equal(h.state(result.messageId), 'TIMED_OUT');
      assert.equal(h.router.messageDetail(result.messageId)!.errorCode, 'ACK_TIMEOUT');
    });
  });

  describe('through the CoordinatorApi', () => {
    let api: InProcessCoordinatorApi;
    beforeEach(() => {
      api = new InProcessCoordinatorApi(h.coordinator);
    });
    afterEach(() => api.dispose());

    it('sends, lists and details messages as plain data, and logs who sent it', async () => {
      const sent = await api.sendMessage(
        { to: 'b', contentType: 'text/plain', payload: 'from the editor' },
        'operator@editor',
      );
      assert.ok(sent.accepted);
      const listed = await api.messages({ agentId: 'b' });
      assertPlain(listed);
      assert.equal(listed[0].messageId, sent.messageId);
      assert.equal(listed[0].producerId, COORDINATOR_ID);
      const detail = (await api.message(sent.messageId)) as MessageDetail;
      assertPlain(detail);
      assert.equal(detail.payload.text, 'from the editor');
      const logged = h.events('operator.message_sent');
      assert.equal(logged.length, 1);
      assert.equal(logged[0].actor, 'operator@editor');
      assert.equal(logged[0].details.message_id, sent.messageId);

      const refused = await api.sendMessage(
        { to: 'nobody', contentType: 'text/plain', payload: 'x' },
        'operator@editor',
      );
      assert.equal(refused.accepted, false);
      assert.equal(!refused.accepted && refused.code, 'NO_ROUTE');
    });

    it("answers an agent's log events and deregisters it through the registry", async () => {
      h.sendData('a', 'b');
      const events = await api.agentEvents('b');
      assertPlain(events);
      assert.ok(
        events.some((e) => e.eventType === 'agent.registered' && e.actor === 'b'),
        'its own events',
      );
      assert.ok(
        events.some((e) => e.eventType === 'message.accepted' && e.details.to === 'b'),
        'events naming it',
      );
      assert.ok(
        events.every(
          (e) => e.actor === 'b' || e.details.agent_id === 'b' || e.details.to === 'b' || e.details.producer_id === 'b',
        ),
      );
      assert.ok(!events.some((e) => e.eventType === 'agent.registered' && e.actor === 'c'));

      assert.equal(await api.deregisterAgent('b', 'operator@editor'), true);
      assert.equal(h.registry.get('b'), undefined);
      const gone = h.events('agent.deregistered').find((e) => e.details.agent_id === 'b')!;
      assert.equal(gone.details.reason, 'deregistered by operator@editor from the editor');
      assert.equal(await api.deregisterAgent('b', 'operator@editor'), false);
    });
  });
});
