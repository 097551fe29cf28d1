import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { isoUtc } from '../../src/core/clock';
import { COORDINATOR_ID, StreamRefusal, UNSPECIFIED_ERROR } from '../../src/core/router/router';
import { RouterHarness, assertRefused, ctx, json, settle } from '../support/routerHarness';

const P = 'producer';
const C = 'consumer';

function strictlyIncreasing(seqs: number[]): boolean {
  return seqs.every((seq, i) => i === 0 || seq > seqs[i - 1]);
}

function refusal(fn: () => unknown): StreamRefusal {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof StreamRefusal, `expected a StreamRefusal, got ${String(err)}`);
    return err;
  }
  assert.fail('the stream was opened');
}

describe('Router delivery (RFC §5.5, §11, §14, §21.1)', () => {
  let h: RouterHarness;

  afterEach(() => h.dispose());

  describe('inbox streams', () => {
    beforeEach(() => {
      h = new RouterHarness({ leaseMs: 1_000, ackTimeoutMs: 60_000 });
      for (const id of [P, C]) h.register(id);
    });

    it("numbers every item of an agent's stream with a strictly increasing seq, across streams", async () => {
      const producer = h.stream(P).sink;
      const consumer = h.stream(C);
      const ms = [h.sendData(P, C), h.sendData(P, C), h.sendData(P, C)];
      h.acked(C, ms[0].messageId, 'RECEIVED');
      assertRefused(h.send(h.envelope(P), P), 'NO_ROUTE'); // an ephemeral NACK on the producer's stream
      h.acked(C, ms[1].messageId, 'FULFILLED');
      await settle();
      assert.deepEqual(consumer.sink.seqs, [1, 2, 3]);
      assert.deepEqual(producer.seqs, [1, 2, 3]);
      assert.ok(
        h.ackDelivery(C, consumer.sink, ms[2].messageId),
        'the two others were confirmed by their protocol ACKs',
      );
      consumer.handle.dispose();
      h.sendData(P, C);
      const again = h.stream(C).sink;
      assert.deepEqual(again.seqs, [4], 'a new stream continues the numbering');
      assert.ok(strictlyIncreasing([...consumer.sink.seqs, ...again.seqs]));
    });

    it('sends an unconfirmed delivery again after the lease, up to 5 attempts, then FAILED AGENT_UNAVAILABLE + DLQ + NACK', async () => {
      const producer = h.stream(P).sink;
      const consumer = h.stream(C).sink;
      const m = h.sendData(P, C);
      h.clock.advance(999);
      assert.deepEqual(consumer.ids(), [m.messageId]);
      h.clock.advance(1);
      assert.deepEqual(consumer.ids(), [m.messageId, m.messageId], 'redelivered after the lease');
      assert.deepEqual(consumer.seqs, [1, 2], 'a redelivery gets a new seq');
      assert.equal(h.eventsFor('message.redelivery_scheduled', m.messageId).length, 1);
      assert.equal(h.router.message(m.messageId)?.deliveryAttempts, 2);

      h.clock.advance(3_000);
      assert.equal(consumer.ids().length, 5);
      assert.equal(h.state(m.messageId), 'SENT');
      h.clock.advance(1_000);
      await settle();
      const record = h.router.message(m.messageId)!;
      assert.equal(record.state, 'FAILED');
      assert.equal(record.errorCode, 'AGENT_UNAVAILABLE');
      assert.equal(consumer.ids().length, 5, 'no sixth attempt');
      const [letter] = h.router.deadLetters();
      assert.equal(letter.messageId, m.messageId);
      assert.equal(letter.route.delivery_attempts, 5);
      assert.equal(letter.attempts.filter((a) => a.event === 'lease_expired').length, 5);
      assert.deepEqual(
        producer.acksFor(m.messageId).map((a) => [a.ack_stage, a.error_code]),
        [['FAILED', 'AGENT_UNAVAILABLE']],
      );
    });

    it('confirms a delivery by AckDelivery (recorded true): no redelivery; unknown seq or wrong message id → false', () => {
      const consumer = h.stream(C).sink;
      const m = h.sendData(P, C);
      assert.equal(h.router.ackDelivery(C, 99, '', 'DELIVERED', ctx()), false, 'unknown seq');
      assert.equal(
        h.router.ackDelivery(C, 1, '3b241101-e2bb-4255-8caf-4136c566a962', 'DELIVERED', ctx()),
        false,
        'seq of another message',
      );
      assert.equal(h.router.ackDelivery('nobody', 1, '', 'DELIVERED', ctx()), false, 'unknown agent');
      assert.equal(h.router.ackDelivery(C, 1, m.messageId, 'DELIVERED', ctx()), true);
      assert.equal(h.router.message(m.messageId)?.delivery, 'done');
      assert.equal(h.router.inboxStats(C).inFlight, 0);
      h.clock.advance(10_000);
      assert.deepEqual(consumer.ids(), [m.messageId]);
      assert.equal(
        h.state(m.messageId),
        'SENT',
        'AckDelivery is transport-level; the lifecycle waits for protocol ACKs',
      );
    });

    it('answers recorded false for a seq that was already acknowledged (router.proto DeliveryAckResponse)', () => {
      h.stream(C);
      const m = h.sendData(P, C);
      assert.equal(h.router.ackDelivery(C, 1, '', 'DELIVERED', ctx()), true, 'message_id is optional');
      assert.equal(
        h.router.ackDelivery(C, 1, m.messageId, 'DELIVERED', ctx()),
        false,
        '"false when the seq is unknown (already acknowledged or expired)"',
      );
    });

    it('confirms a delivery by a protocol ACK of the message', () => {
      const consumer = h.stream(C).sink;
      const m = h.sendData(P, C);
      h.acked(C, m.messageId, 'RECEIVED');
      h.clock.advance(5_000);
      assert.deepEqual(consumer.ids(), [m.messageId]);
    });

    it('redelivers what was not confirmed on a new stream, closing the superseded one', () => {
      const first = h.stream(C);
      const m = h.sendData(P, C);
      const second = h.stream(C);
      assert.deepEqual(
        first.sink.closes.map((c) => c.reason),
        ['superseded'],
      );
      assert.match(first.sink.closes[0].detail, /a newer stream for consumer replaced this one/);
      assert.deepEqual(second.sink.ids(), [m.messageId]);
      assert.deepEqual(second.sink.seqs, [2]);
      assert.equal(h.events('stream.superseded').length, 1);

      first.handle.dispose(); // the old stream's end must not detach the new one
      const m2 = h.sendData(P, C);
      assert.deepEqual(second.sink.ids(), [m.messageId, m2.messageId]);
      assert.equal(h.router.inboxStats(C).streaming, true);
    });

    it('fails a message at once on AckDelivery PERMANENT_FAILURE: FAILED, dead-lettered, NACK to the producer', async () => {
      const producer = h.stream(P).sink;
      h.stream(C);
      const m = h.sendData(P, C);
      assert.equal(h.router.ackDelivery(C, 1, m.messageId, 'PERMANENT_FAILURE', ctx()), true);
      await settle();
      assert.equal(h.state(m.messageId), 'FAILED');
      assert.equal(h.router.message(m.messageId)?.errorCode, UNSPECIFIED_ERROR);
      assert.equal(h.router.deadLetters()[0]?.messageId, m.messageId);
      assert.match(
        h.router.deadLetters()[0].reason,
        /reported a permanent delivery failure \(AckDelivery PERMANENT_FAILURE\)/,
      );
      assert.deepEqual(
        producer.acksFor(m.messageId).map((a) => [a.ack_stage, a.error_code]),
        [['FAILED', UNSPECIFIED_ERROR]],
      );
    });

    it("fails a forwarded ACK on AckDelivery PERMANENT_FAILURE without dead-lettering it (it is not the producer's message)", async () => {
      const producer = h.stream(P).sink;
      const consumer = h.stream(C).sink;
      const m = h.sendData(P, C);
      assert.ok(h.ackDelivery(C, consumer, m.messageId));
      h.acked(C, m.messageId, 'RECEIVED');
      const forwarded = producer.acks().find((a) => a.payload.ack_for_message_id === m.messageId);
      assert.ok(forwarded, 'the ACK was forwarded to the producer');
      assert.equal(
        h.router.ackDelivery(P, forwarded.seq, forwarded.envelope.messageId, 'PERMANENT_FAILURE', ctx()),
        true,
      );
      await settle();
      assert.equal(h.state(forwarded.envelope.messageId), 'FAILED');
      assert.deepEqual(h.router.deadLetters(), [], 'no dead letter for a forwarded ACK');
      assert.equal(h.state(m.messageId), 'RECEIVED', 'the acknowledged message goes on');
    });

    it('answers not recorded for a delivery whose message is gone from the store', () => {
      const consumer = h.stream(C).sink;
      const m = h.sendData(P, C);
      const seq = consumer.items[0].seq;
      // As the message retention does once it has passed (the deliveries table keeps the seq for resumption).
      const db = (h.store as unknown as { engine: { database: import('node:sqlite').DatabaseSync } }).engine.database;
      db.prepare('DELETE FROM router_message_ids WHERE message_id = ?').run(m.messageId);
      db.prepare('DELETE FROM router_envelopes WHERE id IN (SELECT id FROM router_messages WHERE message_id = ?)').run(
        m.messageId,
      );
      db.prepare('DELETE FROM router_messages WHERE message_id = ?').run(m.messageId);
      h.restart();
      assert.equal(h.router.ackDelivery(C, seq, m.messageId, 'DELIVERED', ctx()), false);
    });

    it('resumes after a seq: deliveries up to it count as processed, later ones are sent again', () => {
      const first = h.stream(C);
      const [m1, m2] = [h.sendData(P, C), h.sendData(P, C)];
      first.handle.dispose();
      const resumed = h.stream(C, 1).sink;
      assert.deepEqual(resumed.ids(), [m2.messageId]);
      assert.deepEqual(resumed.seqs, [3]);
      assert.equal(h.router.message(m1.messageId)?.delivery, 'done');
      const opened = h.events('stream.opened').at(-1)!;
      assert.equal(opened.details.resume_after, 1);
      assert.equal(opened.details.redeliver, 1);
    });

    it('resumes at the last seq delivered and refuses a seq beyond it (resume_out_of_range)', () => {
      h.stream(C);
      h.sendData(P, C);
      const beyond = refusal(() => h.stream(C, 2));
      assert.equal(beyond.code, 'resume_out_of_range');
      assert.match(beyond.message, /sw4rm-resume-after 2 is beyond the last delivered seq 1/);
      assert.deepEqual(h.stream(C, 1).sink.items, []);
    });

    it('refuses a stream for an agent that is not registered (not_registered)', () => {
      assert.equal(refusal(() => h.stream('ghost')).code, 'not_registered');
    });

    it('keeps waiting messages for an agent that is not streaming and delivers them when it streams', () => {
      const ms = [h.sendData(P, C), h.sendData(P, C)];
      assert.equal(h.router.inboxStats(C).queued, 2);
      assert.deepEqual(
        h.stream(C).sink.ids(),
        ms.map((m) => m.messageId),
      );
    });

    it('holds tracked deliveries beyond the delivery window until a protocol ACK confirms one', () => {
      h.dispose();
      h = new RouterHarness({ deliveryWindow: 1 });
      for (const id of [P, C]) h.register(id);
      const [m1, m2] = [h.sendData(P, C), h.sendData(P, C)];
      const consumer = h.stream(C).sink;
      assert.deepEqual(consumer.ids(), [m1.messageId], 'one unconfirmed delivery at a time');
      assert.ok(h.router.ackDelivery(C, 1, m1.messageId, 'DELIVERED', ctx()));
      assert.deepEqual(consumer.ids(), [m1.messageId, m2.messageId], 'AckDelivery opens the window');
      const m3 = h.sendData(P, C);
      assert.deepEqual(consumer.ids(), [m1.messageId, m2.messageId], 'm3 waits behind m2');
      h.acked(C, m2.messageId, 'RECEIVED'); // a protocol ACK confirms the delivery of m2 (README "The inbox stream")
      assert.deepEqual(
        consumer.ids(),
        [m1.messageId, m2.messageId, m3.messageId],
        'the protocol ACK opens the window too',
      );
    });
  });

  describe('resume window', () => {
    it('refuses a resume position older than the retained window (resume_expired), saying how to recover', () => {
      h = new RouterHarness({ resumeBacklog: 5, capacity: 1_000, deliveryWindow: 1_000 });
      for (const id of [P, C]) h.register(id);
      const stream = h.stream(C);
      for (let i = 0; i < 100; i++) h.sendData(P, C);
      stream.handle.dispose();
      const expired = refusal(() => h.stream(C, 10));
      assert.equal(expired.code, 'resume_expired');
      assert.match(expired.message, /resume position 10 has expired/);
      assert.match(expired.message, /Recover by opening the stream without sw4rm-resume-after/);
      const resumed = h.stream(C, 95).sink;
      assert.equal(resumed.items.length, 5, 'the five deliveries after seq 95 are sent again');
    });

    it('bounds the retained deliveries of a stream that only receives heartbeats', () => {
      h = new RouterHarness({ resumeBacklog: 5, heartbeatIntervalMs: 1_000 });
      h.register(C);
      const stream = h.stream(C);
      h.clock.advance(150_000);
      assert.equal(stream.sink.ofType('HEARTBEAT').length, 150);
      stream.handle.dispose();
      // The window is trimmed in steps (every 100 deliveries), never left to grow without bound.
      assert.ok(
        h.store.router.oldestDeliverySeq(C) >= 150 - 5 - 100,
        `deliveries from seq ${h.store.router.oldestDeliverySeq(C)} on are still kept (resumeBacklog 5, last seq 150)`,
      );
    });
  });

  describe('agents leaving and joining', () => {
    beforeEach(() => {
      h = new RouterHarness();
      for (const id of [P, C, 'sleeper']) h.register(id);
    });

    it('fails every pending message of a deregistered recipient with AGENT_UNAVAILABLE: DLQ entries and NACKs', async () => {
      const producer = h.stream(P).sink;
      const consumer = h.stream(C).sink;
      const inflight = h.sendData(P, C);
      const received = h.sendData(P, C);
      h.acked(C, received.messageId, 'RECEIVED');
      const done = h.sendData(P, C);
      h.acked(C, done.messageId, 'FULFILLED');
      const queued = h.sendData(P, 'sleeper');

      assert.ok(h.registry.deregister(C, 'crashed', ctx('bye')));
      assert.ok(h.registry.deregister('sleeper', 'gone', ctx('bye2')));
      await settle();

      assert.deepEqual(
        consumer.closes.map((c) => c.reason),
        ['deregistered'],
      );
      for (const m of [inflight, received, queued]) {
        const record = h.router.message(m.messageId)!;
        assert.equal(record.state, 'FAILED', m.messageId);
        assert.equal(record.errorCode, 'AGENT_UNAVAILABLE');
        assert.deepEqual(
          producer
            .acksFor(m.messageId)
            .filter((a) => a.error_code === 'AGENT_UNAVAILABLE')
            .map((a) => a.ack_stage),
          ['FAILED'],
        );
      }
      assert.equal(h.state(done.messageId), 'FULFILLED', 'finished messages are left alone');
      const letters = h.router
        .deadLetters({ errorCode: 'AGENT_UNAVAILABLE' })
        .map((l) => l.messageId)
        .sort();
      assert.deepEqual(letters, [inflight.messageId, received.messageId, queued.messageId].sort());
      assert.match(
        h.router.deadLetters({ recipientId: 'sleeper' })[0].reason,
        /sleeper deregistered before the message was done \(gone\)/,
      );
    });

    it('dead-letters nothing when a producer leaves after a successful exchange (ACKs forwarded to it are notices, not failures)', () => {
      h.stream(P);
      h.stream(C);
      const m = h.sendData(P, C);
      h.acked(C, m.messageId, 'RECEIVED');
      h.acked(C, m.messageId, 'FULFILLED');
      assert.ok(h.registry.deregister(P, 'finished', ctx('bye')));
      assert.equal(h.state(m.messageId), 'FULFILLED');
      assert.deepEqual(
        h.router.deadLetters().map((l) => [l.messageType, l.producerId, l.recipientId, l.errorCode]),
        [],
      );
    });

    it('announces joins and leaves to streaming agents as NOTIFICATION envelopes from the coordinator', () => {
      const producer = h.stream(P).sink;
      h.register('newbie');
      h.register('newbie'); // a re-registration is no join
      assert.ok(h.registry.deregister('newbie', 'finished', ctx()));
      const notes = producer.ofType('NOTIFICATION');
      assert.deepEqual(
        notes.map((n) => json(n.envelope)),
        [
          { event: 'agent.joined', agent_id: 'newbie', name: 'Agent newbie' },
          { event: 'agent.left', agent_id: 'newbie', reason: 'finished' },
        ],
      );
      assert.ok(
        notes.every((n) => n.envelope.producerId === COORDINATOR_ID && n.envelope.contentType === 'application/json'),
      );
      assert.equal(h.store.router.getMessage(notes[0].envelope.messageId), undefined, 'notices are live-only');
      assert.ok(h.ack(P, notes[0].envelope.messageId, 'RECEIVED').accepted, 'an agent may acknowledge a notice');
    });

    it('sends HEARTBEAT envelopes to streaming agents; a HEARTBEAT reply (or its ACK) refreshes presence', () => {
      h.dispose();
      h = new RouterHarness({ heartbeatIntervalMs: 1_000 }, { heartbeatDebounceMs: 5_000 });
      for (const id of [P, C]) h.register(id);
      const producer = h.stream(P).sink;
      h.clock.advance(1_000);
      const [beat] = producer.ofType('HEARTBEAT');
      assert.ok(beat, 'a HEARTBEAT after one interval');
      assert.deepEqual(json(beat.envelope), { kind: 'heartbeat', agent_id: P, sent_at: isoUtc(h.clock.now()) });
      assert.equal(beat.envelope.producerId, COORDINATOR_ID);

      h.clock.advance(4_000);
      assert.equal(producer.ofType('HEARTBEAT').length, 5);
      assert.equal(
        h.registry.get(P)?.presence,
        'unavailable',
        'heartbeats sent to an agent are not a sign of life from it',
      );
      assert.equal(h.registry.get(C)?.presence, 'unavailable');

      assert.ok(
        h.send(h.envelope(P, { messageType: 'HEARTBEAT', payload: { kind: 'heartbeat' } }), COORDINATOR_ID).accepted,
      );
      assert.equal(h.registry.get(P)?.presence, 'online', 'a HEARTBEAT reply is');
      h.clock.advance(5_000);
      assert.equal(h.registry.get(P)?.presence, 'unavailable');
      const last = producer.ofType('HEARTBEAT').at(-1)!;
      assert.ok(h.ack(P, last.envelope.messageId, 'RECEIVED').accepted);
      assert.equal(h.registry.get(P)?.presence, 'online', 'so is an ACK of a heartbeat');
    });
  });

  describe('restart', () => {
    it('recovers queued and in-flight messages, delivers them on the next stream and re-arms their ACK deadlines', async () => {
      h = new RouterHarness();
      for (const id of [P, C]) h.register(id);
      const first = h.stream(C);
      const inflight = h.sendData(P, C);
      first.handle.dispose();
      const queued = h.sendData(P, C);
      h.clock.advance(3_000);

      h.restart();
      assert.equal(h.events('router.recovered').at(-1)?.details.messages, 2);
      assert.equal(h.router.inboxStats(C).queueDepth, 2, 'the capacity count is rebuilt');
      const consumer = h.stream(C).sink;
      assert.deepEqual(consumer.ids(), [inflight.messageId, queued.messageId]);
      assert.deepEqual(consumer.seqs, [2, 3], 'seq continues where the previous run stopped');

      h.clock.advance(6_999);
      assert.equal(h.state(inflight.messageId), 'SENT');
      h.clock.advance(1);
      assert.equal(h.state(inflight.messageId), 'TIMED_OUT', 'the deadline counts from acceptance, across the restart');
      assert.equal(h.state(queued.messageId), 'TIMED_OUT');
      await settle();
      const producer = h.stream(P).sink;
      assert.deepEqual(
        producer.acks().map((a) => a.payload.error_code),
        ['ACK_TIMEOUT', 'ACK_TIMEOUT'],
      );
    });

    it('honours sw4rm-resume-after for deliveries made before a restart (what was processed is not sent again)', () => {
      h = new RouterHarness();
      for (const id of [P, C]) h.register(id);
      const first = h.stream(C);
      const [m1, m2] = [h.sendData(P, C), h.sendData(P, C)];
      assert.deepEqual(first.sink.seqs, [1, 2]);
      h.restart();
      const resumed = h.stream(C, 1).sink;
      assert.deepEqual(resumed.ids(), [m2.messageId], `only m2 is sent again, not m1 (${m1.messageId})`);
      assert.equal(h.router.message(m1.messageId)?.delivery, 'done');
    });

    it('keeps a RECEIVED message RECEIVED across a restart and lets the recipient finish it', () => {
      h = new RouterHarness();
      for (const id of [P, C]) h.register(id);
      h.stream(C);
      const m = h.sendData(P, C);
      h.acked(C, m.messageId, 'RECEIVED');
      h.restart();
      h.clock.advance(60_000);
      assert.equal(h.state(m.messageId), 'RECEIVED');
      assert.deepEqual(h.stream(C).sink.ids(), [], 'a confirmed delivery is not sent again');
      h.acked(C, m.messageId, 'FULFILLED');
      assert.equal(h.state(m.messageId), 'FULFILLED');
    });
  });

  describe('dead letters (RFC §21.1)', () => {
    beforeEach(() => {
      h = new RouterHarness();
      for (const id of [P, C, 'other']) h.register(id);
    });

    it('requeues a dead letter as a new attempt (same token, new id, retry_count + 1) and marks the entry requeued', () => {
      const consumer = h.stream(C).sink;
      const m = h.sendData(P, C, { idempotencyToken: 'T', payload: { n: 1 } });
      h.acked(C, m.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR', note: 'bad' });
      const [letter] = h.router.deadLetters();
      assert.equal(h.router.deadLetterCount(), 1);
      h.clock.advance(1_000);

      const result = h.router.requeue(letter.id, ctx('operator'));
      assert.ok(result.accepted, result.accepted ? '' : result.reason);
      const again = h.router.message(result.messageId)!;
      assert.notEqual(result.messageId, m.messageId);
      assert.equal(again.envelope.idempotencyToken, 'T');
      assert.equal(again.envelope.retryCount, 1);
      assert.equal(again.envelope.correlationId, m.correlationId);
      assert.deepEqual(Buffer.from(again.envelope.payload), Buffer.from(m.payload));
      assert.equal(again.state, 'SENT');
      assert.deepEqual(consumer.ids().slice(-1), [result.messageId], 'delivered to the original recipient');

      assert.equal(h.router.deadLetterCount(), 0);
      assert.deepEqual(h.router.deadLetters(), [], 'requeued entries are hidden by default');
      const [marked] = h.router.deadLetters({ includeRequeued: true });
      assert.equal(marked.requeuedAt, h.clock.now());
      assert.equal(marked.requeuedAs, result.messageId);
      assert.equal(h.events('dlq.requeued')[0].details.new_message_id, result.messageId);

      assertRefused(h.router.requeue(letter.id, ctx()), 'DUPLICATE_DETECTED', /already requeued/);
      assertRefused(h.router.requeue(9_999, ctx()), 'VALIDATION_ERROR', /no dead letter 9999/);

      h.acked(C, result.messageId, 'FULFILLED');
      assert.equal(
        h.store.router.getDedup(P, 't:T')?.outcomeState,
        'FULFILLED',
        'the requeued attempt settles the operation',
      );
    });

    it('requeues a dead letter without a token as a retry of the same (producer_id, sequence_number) operation', () => {
      h.stream(C);
      const m = h.sendData(P, C);
      h.acked(C, m.messageId, 'FAILED', { error_code: 'INTERNAL_ERROR' });
      const result = h.router.requeue(h.router.deadLetters()[0].id, ctx());
      assert.ok(result.accepted, result.accepted ? '' : result.reason);
      const requeued = h.router.message(result.messageId)!.envelope;
      assert.notEqual(requeued.messageId, m.messageId);
      assert.equal(requeued.sequenceNumber, m.sequenceNumber);
      assert.equal(requeued.retryCount, m.retryCount + 1);
      // The operation is under way again: the producer's own resend of that sequence number is refused.
      assertRefused(h.send({ ...m, messageId: randomUUID() }, C), 'ALREADY_IN_PROGRESS');
    });

    it('leaves the cached failure in place when the requeue itself is refused', () => {
      h.stream(C);
      const m = h.sendData(P, C, { idempotencyToken: 'tok-requeue' });
      h.acked(C, m.messageId, 'FAILED', { error_code: 'INTERNAL_ERROR' });
      const letter = h.router.deadLetters()[0];
      h.registry.deregister(C, 'gone', ctx());
      const refused = h.router.requeue(letter.id, ctx());
      assert.equal(refused.accepted, false);
      h.register(C);
      assertRefused(h.send({ ...m, messageId: randomUUID() }, C), 'DUPLICATE_DETECTED');
    });

    it('exports a diagnostic bundle, filtered by error class, producer, recipient and time', () => {
      const a = h.sendData(P, C);
      h.clock.advance(1_000);
      const b = h.sendData('other', C);
      h.acked(C, a.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
      h.clock.advance(1_000);
      h.acked(C, b.messageId, 'FAILED', { error_code: 'PERMISSION_DENIED' });

      const bundle = h.router.exportDeadLetters();
      assert.equal(bundle.exported_at, isoUtc(h.clock.now()));
      assert.deepEqual(bundle.filter, {});
      const entries = bundle.entries as Array<{ messageId: string }>;
      assert.deepEqual(entries.map((e) => e.messageId).sort(), [a.messageId, b.messageId].sort());

      const only = (filter: Parameters<typeof h.router.deadLetters>[0]) =>
        h.router.deadLetters(filter).map((l) => l.messageId);
      assert.deepEqual(only({ errorCode: 'PERMISSION_DENIED' }), [b.messageId]);
      assert.deepEqual(only({ producerId: P }), [a.messageId]);
      assert.deepEqual(only({ recipientId: 'other' }), []);
      assert.deepEqual(only({ since: h.clock.now() }), [b.messageId]);
      assert.deepEqual(only({ until: h.clock.now() - 1 }), [a.messageId]);
      const filtered = h.router.exportDeadLetters({ errorCode: 'VALIDATION_ERROR' });
      assert.deepEqual(
        (filtered.entries as Array<{ messageId: string }>).map((e) => e.messageId),
        [a.messageId],
      );
      assert.deepEqual(filtered.filter, { errorCode: 'VALIDATION_ERROR' });
    });
  });
});

describe('Router: forwarded ACKs a client never confirms', () => {
  it('holds at most 256 per agent for redelivery, recording the rest as delivered unconfirmed', () => {
    const h = new RouterHarness({ heartbeatIntervalMs: 0, capacity: 1000 });
    try {
      h.register('producer');
      h.register('consumer');
      const producerInbox = h.stream('producer');
      h.stream('consumer');
      for (let i = 0; i < 300; i++) {
        const data = h.sendData('producer', 'consumer');
        assert.equal(h.ack('consumer', data.messageId, 'FULFILLED').accepted, true);
      }
      assert.equal(
        producerInbox.sink.ofType('ACKNOWLEDGEMENT').length,
        300,
        'every ACK was written to the live stream',
      );
      assert.equal(h.router.inboxStats('producer').inFlight, 256);

      producerInbox.handle.dispose();
      const again = h.stream('producer');
      assert.equal(
        again.sink.ofType('ACKNOWLEDGEMENT').length,
        256,
        'only the held ones are repeated on the next stream',
      );
    } finally {
      h.dispose();
    }
  });
});
