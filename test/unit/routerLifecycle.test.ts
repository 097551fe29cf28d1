import { strict as assert } from 'node:assert';
import { isoUtc } from '../../src/core/clock';
import { isTerminal } from '../../src/core/router/lifecycle';
import { COORDINATOR_ID, UNSPECIFIED_ERROR } from '../../src/core/router/router';
import { CollectingSink, RouterHarness, assertRefused, settle } from '../support/routerHarness';

const P = 'producer';
const C = 'consumer';
const ACK_TIMEOUT_MS = 10_000;

describe('Router lifecycle (RFC §11, §11.1, §21)', () => {
  let h: RouterHarness;
  let producer: CollectingSink;
  let consumer: CollectingSink;

  beforeEach(() => {
    h = new RouterHarness();
    h.register(P);
    h.register(C);
    h.register('other');
    producer = h.stream(P).sink;
    consumer = h.stream(C).sink;
  });

  afterEach(() => h.dispose());

  function transitions(messageId: string): Array<[unknown, unknown]> {
    return h.eventsFor('message.state_changed', messageId).map((e) => [e.details.from, e.details.to]);
  }

  describe('transitions by ACK envelopes from the recipient', () => {
    it('moves SENT → RECEIVED → READ → FULFILLED and logs every transition', () => {
      const m = h.sendData(P, C, { payload: { task: 'build' } });
      assert.equal(h.state(m.messageId), 'SENT');
      assert.deepEqual(consumer.ids(), [m.messageId], 'delivered on the consumer stream');

      h.acked(C, m.messageId, 'RECEIVED');
      assert.equal(h.state(m.messageId), 'RECEIVED');
      h.acked(C, m.messageId, 'READ');
      assert.equal(h.state(m.messageId), 'READ');
      h.acked(C, m.messageId, 'FULFILLED');
      assert.equal(h.state(m.messageId), 'FULFILLED');

      assert.deepEqual(transitions(m.messageId), [
        ['SENT', 'RECEIVED'],
        ['RECEIVED', 'READ'],
        ['READ', 'FULFILLED'],
      ]);
      assert.equal(h.store.router.getMessage(m.messageId)?.state, 'FULFILLED', 'the state is persisted');
      assert.equal(h.router.inboxStats(C).queueDepth, 0);
    });

    it('takes ack_stage by number and by ACK_STAGE_ name as well', () => {
      const m = h.sendData(P, C);
      h.acked(C, m.messageId, 1);
      assert.equal(h.state(m.messageId), 'RECEIVED');
      h.acked(C, m.messageId, 'ACK_STAGE_READ');
      assert.equal(h.state(m.messageId), 'READ');
      h.acked(C, m.messageId, '3');
      assert.equal(h.state(m.messageId), 'FULFILLED');
    });

    it('lets stages be skipped: SENT → FULFILLED directly', () => {
      const m = h.sendData(P, C);
      h.acked(C, m.messageId, 'FULFILLED');
      assert.equal(h.state(m.messageId), 'FULFILLED');
      assert.deepEqual(transitions(m.messageId), [['SENT', 'FULFILLED']]);
      h.clock.advance(ACK_TIMEOUT_MS * 2);
      assert.equal(h.state(m.messageId), 'FULFILLED', 'no timeout after a terminal ACK');
    });

    it("forwards every ACK envelope to the producer's stream, as the recipient sent it", () => {
      const m = h.sendData(P, C);
      const received = h.ackEnvelope(C, m.messageId, 'RECEIVED', { note: 'got it' });
      assert.ok(h.send(received).accepted);
      h.acked(C, m.messageId, 'FULFILLED');

      const acks = producer.acks();
      assert.deepEqual(
        acks.map((a) => [a.payload.ack_for_message_id, a.payload.ack_stage]),
        [
          [m.messageId, 'RECEIVED'],
          [m.messageId, 'FULFILLED'],
        ],
      );
      assert.equal(acks[0].envelope.messageId, received.messageId);
      assert.equal(acks[0].envelope.producerId, C);
      assert.equal(acks[0].payload.note, 'got it');
      assert.deepEqual(consumer.ids('ACKNOWLEDGEMENT'), [], 'the recipient does not get its own ACKs back');
    });

    it('REJECTED with a non-retryable code: terminal, dead-lettered with attempts, route and excerpt, no extra NACK', () => {
      const m = h.sendData(P, C, { payload: { task: 'refactor everything' }, idempotencyToken: 'op-1' });
      h.clock.advance(250);
      h.acked(C, m.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR', note: 'missing field title' });

      const record = h.router.message(m.messageId)!;
      assert.equal(record.state, 'REJECTED');
      assert.equal(record.errorCode, 'VALIDATION_ERROR');
      const [letter, ...more] = h.router.deadLetters();
      assert.deepEqual(more, []);
      assert.equal(letter.messageId, m.messageId);
      assert.equal(letter.finalState, 'REJECTED');
      assert.equal(letter.errorCode, 'VALIDATION_ERROR');
      assert.equal(letter.reason, 'missing field title');
      assert.equal(letter.producerId, P);
      assert.equal(letter.recipientId, C);
      assert.equal(letter.idempotencyToken, 'op-1');
      assert.equal(letter.messageType, 'DATA');
      assert.equal(letter.contentType, 'application/json');
      assert.equal(letter.size, m.payload.byteLength);
      assert.equal(letter.excerpt, '{"task":"refactor everything"}');
      assert.equal(letter.createdAt, record.acceptedAt);
      assert.equal(letter.failedAt, h.clock.now());
      assert.deepEqual(letter.route, {
        producer: P,
        recipient: C,
        lane: 'STANDARD',
        hops: ['router'],
        delivery_attempts: 1,
      });
      const steps = letter.attempts.map((a) => a.event);
      for (const step of ['accepted', 'delivered', 'ack_rejected', 'rejected'])
        assert.ok(steps.includes(step), `${step} in ${steps.join(',')}`);
      assert.ok(
        letter.attempts.every((a) => typeof a.at === 'number'),
        'every attempt has a timestamp',
      );
      assert.match(
        letter.attempts.find((a) => a.event === 'rejected')!.detail ?? '',
        /^VALIDATION_ERROR: missing field title/,
      );
      assert.equal(h.eventsFor('message.dead_lettered', m.messageId).length, 1);
      assert.equal(h.store.router.getDedup(P, 't:op-1')?.status, 'done');

      assert.deepEqual(
        producer.acksFor(m.messageId).map((a) => [a.ack_stage, a.error_code]),
        [['REJECTED', 'VALIDATION_ERROR']],
        "only the recipient's ACK reaches the producer (no NACK from the coordinator on top)",
      );
    });

    it("FAILED with a non-retryable code is dead-lettered; an uncoded refusal is ERROR_CODE_UNSPECIFIED (INTERNAL_ERROR is the coordinator's own)", () => {
      const a = h.sendData(P, C);
      const b = h.sendData(P, C);
      const c = h.sendData(P, C);
      h.acked(C, a.messageId, 'FAILED', { error_code: 'PERMISSION_DENIED', note: 'not allowed in this worktree' });
      h.acked(C, b.messageId, 'FAILED');
      h.acked(C, c.messageId, 'REJECTED', { error_code: 'ERROR_CODE_UNSPECIFIED' });
      assert.equal(h.state(a.messageId), 'FAILED');
      assert.equal(h.router.message(b.messageId)?.errorCode, UNSPECIFIED_ERROR);
      assert.equal(h.router.message(c.messageId)?.errorCode, UNSPECIFIED_ERROR);
      assert.deepEqual(
        h.router
          .deadLetters()
          .map((l) => [l.messageId, l.finalState, l.errorCode])
          .sort(),
        [
          [a.messageId, 'FAILED', 'PERMISSION_DENIED'],
          [b.messageId, 'FAILED', UNSPECIFIED_ERROR],
          [c.messageId, 'REJECTED', UNSPECIFIED_ERROR],
        ].sort(),
      );
      assert.match(h.router.message(b.messageId)!.history.at(-1)?.detail ?? '', /the recipient answered FAILED/);
    });

    it('REJECTED with a retryable code (buffer_full): terminal, no DLQ entry, the operation stays retryable', () => {
      const m = h.sendData(P, C, { idempotencyToken: 'op-bf' });
      h.acked(C, m.messageId, 'REJECTED', { error_code: 'buffer_full', note: 'queue full' });
      assert.equal(h.state(m.messageId), 'REJECTED');
      assert.equal(
        h.router.message(m.messageId)?.errorCode,
        'BUFFER_FULL',
        'error codes are normalised to their names',
      );
      assert.deepEqual(h.router.deadLetters(), []);
      const entry = h.store.router.getDedup(P, 't:op-bf');
      assert.equal(entry?.status, 'retryable');
      assert.equal(entry?.errorCode, 'BUFFER_FULL');
      const retry = h.envelope(P, { idempotencyToken: 'op-bf', retryCount: 1 });
      assert.ok(h.send(retry, C).accepted, 'a retry of a retryable failure is admitted');
    });

    it('takes error codes by number (1 = BUFFER_FULL)', () => {
      const m = h.sendData(P, C);
      h.acked(C, m.messageId, 'REJECTED', { error_code: 1 });
      assert.equal(h.router.message(m.messageId)?.errorCode, 'BUFFER_FULL');
      assert.deepEqual(h.router.deadLetters(), []);
    });

    it('ignores a stale or backward ACK for the state (logged message.ack_stale) but still forwards it', () => {
      const m = h.sendData(P, C);
      h.acked(C, m.messageId, 'READ');
      h.acked(C, m.messageId, 'RECEIVED');
      h.acked(C, m.messageId, 'READ');
      assert.equal(h.state(m.messageId), 'READ');
      const stale = h.eventsFor('message.ack_stale', m.messageId);
      assert.deepEqual(
        stale.map((e) => [e.details.state, e.details.ack_stage, e.level]),
        [
          ['READ', 'RECEIVED', 'WARN'],
          ['READ', 'READ', 'WARN'],
        ],
      );
      assert.deepEqual(
        producer.acksFor(m.messageId).map((a) => a.ack_stage),
        ['READ', 'RECEIVED', 'READ'],
      );
      assert.equal(
        h.router.message(m.messageId)!.history.filter((x) => x.event === 'ack_received').length,
        1,
        'the stale ACK is recorded',
      );
    });

    it('lets only the recipient acknowledge: PERMISSION_DENIED for anyone else, the producer included', () => {
      const m = h.sendData(P, C);
      assertRefused(h.ack('other', m.messageId, 'FULFILLED'), 'PERMISSION_DENIED', /only the recipient/);
      const own = h.ackEnvelope(P, m.messageId, 'FULFILLED');
      assertRefused(h.send(own), 'PERMISSION_DENIED');
      assert.equal(h.state(m.messageId), 'SENT');
      assert.deepEqual(producer.acksFor(m.messageId), [], 'nothing was forwarded');
      assert.deepEqual(
        producer.acksFor(own.messageId).map((a) => [a.ack_stage, a.error_code]),
        [['REJECTED', 'PERMISSION_DENIED']],
        "the producer's refused ACK comes back to its stream as a NACK",
      );
    });

    it('refuses an ACK for an id it never routed with NO_ROUTE', () => {
      assertRefused(
        h.ack(C, '3b241101-e2bb-4255-8caf-4136c566a962', 'RECEIVED'),
        'NO_ROUTE',
        /is not a message this coordinator routed/,
      );
    });

    it('refuses an ACK whose payload is not a valid ACK with VALIDATION_ERROR', () => {
      const m = h.sendData(P, C);
      assertRefused(
        h.send(h.envelope(C, { messageType: 'ACKNOWLEDGEMENT', payload: { ack_stage: 'RECEIVED' } })),
        'VALIDATION_ERROR',
        /ack_for_message_id is required/,
      );
      assertRefused(h.ack(C, m.messageId, 'DONE'), 'VALIDATION_ERROR', /ack_stage "DONE" is not one of/);
      assertRefused(h.ack(C, m.messageId, 9), 'VALIDATION_ERROR');
      assertRefused(
        h.send(h.envelope(C, { messageType: 'ACKNOWLEDGEMENT', payload: [1, 2] })),
        'VALIDATION_ERROR',
        /JSON object payload/,
      );
      assert.equal(h.state(m.messageId), 'SENT');
    });
  });

  describe('ack timeout (RFC §11: 10 s to RECEIVED)', () => {
    it('stays SENT until the deadline, then TIMED_OUT with a persisted NACK ACK_TIMEOUT and no DLQ entry', async () => {
      h.router.attach(P, new CollectingSink(), { correlationId: 'quiet' }).dispose(); // the producer is not streaming
      const m = h.sendData(P, C, { idempotencyToken: 'op-t' });
      await h.timesOutAfter(m.messageId, ACK_TIMEOUT_MS);
      assert.deepEqual(h.router.deadLetters(), [], 'a timeout is retryable: no DLQ entry');
      assert.equal(h.store.router.getDedup(P, 't:op-t')?.status, 'retryable');
      assert.deepEqual(transitions(m.messageId), [['SENT', 'TIMED_OUT']]);

      const later = h.stream(P).sink;
      const [nack] = later.acks().filter((a) => a.payload.ack_for_message_id === m.messageId);
      assert.ok(
        nack,
        `the NACK waits in the producer's inbox and arrives when it streams: ${JSON.stringify(later.items)}`,
      );
      assert.equal(nack.envelope.producerId, COORDINATOR_ID);
      assert.equal(nack.envelope.correlationId, m.correlationId, 'the NACK carries the correlation id of the message');
      assert.equal(nack.payload.ack_stage, 'TIMED_OUT');
      assert.equal(nack.payload.error_code, 'ACK_TIMEOUT');
      assert.ok(h.store.router.getMessage(nack.envelope.messageId), 'the NACK is persisted');
      const nacks = h.router.metrics().find((x) => x.agentId === P)!.nacks;
      assert.equal(nacks.ACK_TIMEOUT, 1);
    });

    it('is cancelled by RECEIVED before the deadline', async () => {
      const m = h.sendData(P, C);
      h.clock.advance(ACK_TIMEOUT_MS - 1);
      h.acked(C, m.messageId, 'RECEIVED');
      h.clock.advance(ACK_TIMEOUT_MS * 3);
      await settle();
      assert.equal(h.state(m.messageId), 'RECEIVED');
      assert.deepEqual(
        producer.acksFor(m.messageId).map((a) => a.ack_stage),
        ['RECEIVED'],
        'no NACK',
      );
    });

    it('delivers the NACK at once to a producer that is streaming', async () => {
      const m = h.sendData(P, C);
      h.clock.advance(ACK_TIMEOUT_MS);
      await settle();
      assert.deepEqual(
        producer.acksFor(m.messageId).map((a) => [a.ack_stage, a.error_code]),
        [['TIMED_OUT', 'ACK_TIMEOUT']],
      );
    });
  });

  describe('late ACK reconciliation (RFC §11.1)', () => {
    function timedOut(input: { idempotencyToken?: string } = {}) {
      const m = h.sendData(P, C, input);
      h.clock.advance(ACK_TIMEOUT_MS);
      assert.equal(h.state(m.messageId), 'TIMED_OUT');
      return { m, timedOutAt: h.clock.now() };
    }

    it('rule 1: TIMED_OUT + late ACK → recorded, state stays TIMED_OUT, logged with both timestamps', () => {
      const { m, timedOutAt } = timedOut();
      h.clock.advance(2_500);
      h.acked(C, m.messageId, 'RECEIVED');
      const record = h.router.message(m.messageId)!;
      assert.equal(record.state, 'TIMED_OUT');
      assert.ok(
        record.history.some((x) => x.event === 'ack_received'),
        'the late ACK is recorded',
      );
      const [event] = h.eventsFor('message.late_ack_after_timeout', m.messageId);
      assert.ok(event);
      assert.equal(event.details.timed_out_at, isoUtc(timedOutAt));
      assert.equal(event.details.late_ack_at, isoUtc(h.clock.now()));
      assert.equal(event.details.ack_stage, 'RECEIVED');
      assert.ok(
        producer.acksFor(m.messageId).some((a) => a.ack_stage === 'RECEIVED'),
        'the late ACK is still forwarded',
      );
    });

    it('rule 2: a retry after TIMED_OUT is accepted and the original becomes RETRYING', () => {
      const { m } = timedOut({ idempotencyToken: 'T' });
      const retry = h.envelope(P, { idempotencyToken: 'T', retryCount: 1, correlationId: m.correlationId });
      assert.ok(h.send(retry, C).accepted);
      assert.equal(h.state(m.messageId), 'RETRYING');
      assert.equal(h.state(retry.messageId), 'SENT');
      assert.deepEqual(transitions(m.messageId), [
        ['SENT', 'TIMED_OUT'],
        ['TIMED_OUT', 'RETRYING'],
      ]);
      assert.equal(h.eventsFor('message.accepted', retry.messageId)[0].details.retry_of, m.messageId);
      assert.ok(consumer.ids().includes(retry.messageId), 'the retry is delivered');
    });

    it('rule 2: a late ACK while the retry is still queued cancels the retry (REJECTED DUPLICATE_DETECTED); the original advances', () => {
      const c = h.stream(C); // a fresh stream we can close
      const m = h.sendData(P, C, { idempotencyToken: 'T' });
      assert.deepEqual(c.sink.ids(), [m.messageId]);
      c.handle.dispose(); // the consumer stops streaming
      h.clock.advance(ACK_TIMEOUT_MS);
      const retry = h.envelope(P, { idempotencyToken: 'T', retryCount: 1 });
      assert.ok(h.send(retry, C).accepted);
      assert.equal(h.router.inboxStats(C).queued, 1, 'the retry waits for the consumer');

      h.acked(C, m.messageId, 'RECEIVED');

      assert.equal(h.state(m.messageId), 'RECEIVED');
      assert.equal(h.state(retry.messageId), 'REJECTED');
      assert.equal(h.router.message(retry.messageId)?.errorCode, 'DUPLICATE_DETECTED');
      assert.equal(h.router.inboxStats(C).queued, 0);
      const [event] = h.eventsFor('message.late_ack_while_retrying', m.messageId);
      assert.equal(event.details.retry_message_id, retry.messageId);
      assert.match(String(event.details.decision), /retry cancelled/);
      assert.deepEqual(h.router.deadLetters(), [], 'a cancelled retry is not a dead letter');

      const again = h.stream(C).sink;
      assert.ok(!again.ids().includes(retry.messageId), 'the cancelled retry is never delivered');
      h.acked(C, m.messageId, 'FULFILLED');
      const third = h.envelope(P, { idempotencyToken: 'T', retryCount: 2 });
      const reason = assertRefused(h.send(third, C), 'DUPLICATE_DETECTED');
      assert.equal(JSON.parse(reason.slice(reason.indexOf('{'))).original_status, 'FULFILLED');
    });

    it('rule 2: a late ACK after the retry was delivered → both attempts are tracked', () => {
      const { m } = timedOut({ idempotencyToken: 'T' });
      const retry = h.envelope(P, { idempotencyToken: 'T', retryCount: 1 });
      assert.ok(h.send(retry, C).accepted);
      assert.ok(consumer.ids().includes(retry.messageId));

      h.acked(C, m.messageId, 'RECEIVED');

      assert.equal(h.state(m.messageId), 'RECEIVED');
      assert.equal(h.state(retry.messageId), 'SENT', 'the delivered retry is still tracked');
      const [event] = h.eventsFor('message.late_ack_while_retrying', m.messageId);
      assert.match(String(event.details.decision), /both attempts tracked/);
      h.acked(C, retry.messageId, 'RECEIVED');
      assert.equal(h.state(retry.messageId), 'RECEIVED');
    });

    it('rule 2: once the retry fulfils the operation, the revived original reaches a terminal state and frees its inbox slot', () => {
      const { m } = timedOut({ idempotencyToken: 'T' });
      const retry = h.envelope(P, { idempotencyToken: 'T', retryCount: 1 });
      assert.ok(h.send(retry, C).accepted);
      h.acked(C, m.messageId, 'RECEIVED'); // late, for the original: both attempts tracked
      h.acked(C, retry.messageId, 'FULFILLED'); // the retry completes the operation

      assert.equal(h.state(retry.messageId), 'FULFILLED');
      const original = h.state(m.messageId)!;
      assert.ok(isTerminal(original as never), `the original attempt of a settled operation is left ${original}`);
      assert.equal(h.router.inboxStats(C).queueDepth, 0, 'no attempt of a settled operation holds a capacity slot');
    });

    it('rule 2: an original left RETRYING does not stay RETRYING when its retry times out too', () => {
      const { m } = timedOut({ idempotencyToken: 'T' });
      const retry = h.envelope(P, { idempotencyToken: 'T', retryCount: 1 });
      assert.ok(h.send(retry, C).accepted);
      h.clock.advance(ACK_TIMEOUT_MS);
      assert.equal(h.state(retry.messageId), 'TIMED_OUT');
      // No further retry is under way: nothing is retrying the original any more (every message reaches a terminal state).
      assert.equal(h.state(m.messageId), 'TIMED_OUT');
    });

    it('rule 3: FULFILLED or REJECTED + late ACK → ignored for state, logged message.late_ack_ignored', () => {
      const done = h.sendData(P, C);
      const refused = h.sendData(P, C);
      h.acked(C, done.messageId, 'FULFILLED');
      h.acked(C, refused.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
      h.acked(C, done.messageId, 'RECEIVED');
      h.acked(C, done.messageId, 'REJECTED', { error_code: 'INTERNAL_ERROR' });
      h.acked(C, refused.messageId, 'FULFILLED');
      assert.equal(h.state(done.messageId), 'FULFILLED');
      assert.equal(h.state(refused.messageId), 'REJECTED');
      assert.deepEqual(
        h.eventsFor('message.late_ack_ignored', done.messageId).map((e) => [e.details.state, e.details.ack_stage]),
        [
          ['FULFILLED', 'RECEIVED'],
          ['FULFILLED', 'REJECTED'],
        ],
      );
      assert.deepEqual(
        h.eventsFor('message.late_ack_ignored', refused.messageId).map((e) => [e.details.state, e.details.ack_stage]),
        [['REJECTED', 'FULFILLED']],
      );
      assert.equal(h.router.deadLetters().length, 1, 'a late REJECTED adds no dead letter');
    });

    it('rule 4: a late FULFILLED for a TIMED_OUT message updates the outcome cache; the next retry gets DUPLICATE_DETECTED FULFILLED', () => {
      const { m } = timedOut({ idempotencyToken: 'T' });
      assert.equal(h.store.router.getDedup(P, 't:T')?.status, 'retryable');
      h.clock.advance(1_000);
      h.acked(C, m.messageId, 'FULFILLED', { result: { ticket: 42 } });
      assert.equal(h.state(m.messageId), 'TIMED_OUT', 'the state stays TIMED_OUT');
      const entry = h.store.router.getDedup(P, 't:T');
      assert.equal(entry?.status, 'done');
      assert.equal(entry?.outcomeState, 'FULFILLED');
      assert.equal(h.events('dedup.outcome_cached').filter((e) => e.details.fulfilled_by === m.messageId).length, 1);

      const retry = h.envelope(P, { idempotencyToken: 'T', retryCount: 1 });
      const reason = assertRefused(h.send(retry, C), 'DUPLICATE_DETECTED');
      const detail = JSON.parse(reason.slice('DUPLICATE_DETECTED: '.length)) as Record<string, unknown>;
      assert.equal(detail.original_message_id, m.messageId);
      assert.equal(detail.original_status, 'FULFILLED');
      assert.equal(detail.cached_at, isoUtc(h.clock.now()));
      assert.deepEqual((detail.cached_result as Record<string, unknown>).result, { ticket: 42 });
      assert.equal((detail.cached_result as Record<string, unknown>).fulfilled_message_id, m.messageId);
    });

    it('rule 4: a late FULFILLED for the original while RETRYING settles the operation on the earliest success', () => {
      const { m } = timedOut({ idempotencyToken: 'T' });
      const retry = h.envelope(P, { idempotencyToken: 'T', retryCount: 1 });
      assert.ok(h.send(retry, C).accepted);
      h.acked(C, m.messageId, 'FULFILLED');
      assert.equal(h.state(m.messageId), 'FULFILLED');
      const entry = h.store.router.getDedup(P, 't:T');
      assert.equal(entry?.outcomeState, 'FULFILLED');
      assert.equal(entry?.originalMessageId, m.messageId);
      assert.deepEqual(entry?.attempts, [m.messageId, retry.messageId]);
      const next = h.envelope(P, { idempotencyToken: 'T', retryCount: 2 });
      assertRefused(h.send(next, C), 'DUPLICATE_DETECTED');
    });
  });

  it('notifies of changes for views', () => {
    const seen: string[] = [];
    h.router.onDidChange((e) => seen.push(e.agentId));
    const m = h.sendData(P, C);
    h.acked(C, m.messageId, 'READ');
    assert.ok(seen.includes(C));
  });
});
