import { strict as assert } from 'node:assert';
import { CollectingSink, RouterHarness, assertRefused } from '../support/routerHarness';

const P = 'producer';
const C = 'consumer';

/**
 * RFC §11.2 without an idempotency token: `(producer_id, sequence_number)` deduplicates retries, not distinct
 * messages. The reference JS SDK sends sequence_number 1 for every message; a reused sequence number with other
 * content (message type, content type, payload) is a distinct operation, logged `dedup.sequence_reused`.
 */
describe('Router deduplication by sequence number (RFC §11.2, reused sequence numbers)', () => {
  let h: RouterHarness;
  let producer: CollectingSink;
  let consumer: CollectingSink;

  beforeEach(() => {
    h = new RouterHarness();
    for (const id of [P, C]) h.register(id);
    producer = h.stream(P).sink;
    consumer = h.stream(C).sink;
  });

  afterEach(() => h.dispose());

  const seq1 = (payload: Record<string, unknown>, extra: { messageType?: string; contentType?: string } = {}) =>
    h.envelope(P, { sequenceNumber: 1, payload, ...extra });

  it('accepts a second message with the same sequence number and other content, with a sequence_reused warning', () => {
    const m1 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 1 } });
    const m2 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 2 } });
    assert.deepEqual(consumer.ids('DATA'), [m1.messageId, m2.messageId]);
    const [warning, ...more] = h.events('dedup.sequence_reused');
    assert.equal(more.length, 0);
    assert.equal(warning.level, 'WARN');
    assert.equal(warning.details.message_id, m2.messageId);
    assert.equal(warning.details.original_message_id, m1.messageId);
    assert.equal(warning.details.sequence_number, '1');
    assert.match(String(h.router.message(m2.messageId)?.dedupKey), /^s:1#[0-9a-f]{32}$/);
    assert.equal(h.router.message(m1.messageId)?.dedupKey, 's:1');
  });

  it('tells content apart by message type and content type too', () => {
    h.sendData(P, C, { sequenceNumber: 1, payload: { n: 1 } });
    assert.ok(h.send(seq1({ n: 1 }, { messageType: 'CONTROL' }), C).accepted);
    assert.ok(h.send(seq1({ n: 1 }, { contentType: 'application/json; charset=utf-8' }), C).accepted);
    assert.equal(h.events('dedup.sequence_reused').length, 2);
  });

  it('still refuses a retry with identical content: ALREADY_IN_PROGRESS while under way, DUPLICATE_DETECTED once settled', () => {
    const m1 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 1 } });
    assertRefused(h.send(seq1({ n: 1 }), C), 'ALREADY_IN_PROGRESS', new RegExp(`under way as ${m1.messageId}`));
    h.acked(C, m1.messageId, 'FULFILLED');
    const reason = assertRefused(h.send(seq1({ n: 1 }), C), 'DUPLICATE_DETECTED');
    assert.equal(JSON.parse(reason.slice('DUPLICATE_DETECTED: '.length)).original_message_id, m1.messageId);
    assert.equal(h.events('dedup.sequence_reused').length, 0);
  });

  it('catches a retry of the second distinct message under its own key, and accepts a third distinct one', () => {
    const m1 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 1 } });
    const m2 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 2 } });
    assertRefused(h.send(seq1({ n: 2 }), C), 'ALREADY_IN_PROGRESS', new RegExp(`under way as ${m2.messageId}`));
    h.acked(C, m2.messageId, 'FULFILLED');
    const reason = assertRefused(h.send(seq1({ n: 2 }), C), 'DUPLICATE_DETECTED');
    assert.equal(JSON.parse(reason.slice('DUPLICATE_DETECTED: '.length)).original_message_id, m2.messageId);
    assertRefused(h.send(seq1({ n: 1 }), C), 'ALREADY_IN_PROGRESS', new RegExp(`under way as ${m1.messageId}`));
    const m3 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 3 } });
    assert.deepEqual(consumer.ids('DATA'), [m1.messageId, m2.messageId, m3.messageId]);
    assert.equal(h.events('dedup.sequence_reused').length, 2, 'only when a distinct operation is new');
  });

  it('retries the distinct message after its own timeout (retryable under its own key), not the original', () => {
    h.dispose();
    h = new RouterHarness({ ackTimeoutMs: 1000 });
    for (const id of [P, C]) h.register(id);
    h.stream(P);
    h.stream(C);
    const m1 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 1 } });
    h.acked(C, m1.messageId, 'RECEIVED');
    const m2 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 2 } });
    h.clock.advance(1001);
    assert.equal(h.state(m2.messageId), 'TIMED_OUT');
    const retry = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 2 }, retryCount: 1 });
    assert.equal(h.state(m2.messageId), 'RETRYING');
    assert.equal(h.state(m1.messageId), 'RECEIVED');
    assert.equal(h.router.message(retry.messageId)?.dedupKey, h.router.message(m2.messageId)?.dedupKey);
  });

  it('keeps both operations apart after a coordinator restart (the outcome cache and the messages are in the store)', () => {
    const m1 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 1 } });
    const m2 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 2 } });
    h.restart();
    h.stream(P);
    h.stream(C);
    assertRefused(h.send(seq1({ n: 1 }), C), 'ALREADY_IN_PROGRESS', new RegExp(`under way as ${m1.messageId}`));
    assertRefused(h.send(seq1({ n: 2 }), C), 'ALREADY_IN_PROGRESS', new RegExp(`under way as ${m2.messageId}`));
    assert.ok(h.send(seq1({ n: 3 }), C).accepted);
  });

  it('does not look at content when an idempotency token names the operation', () => {
    h.sendData(P, C, { sequenceNumber: 1, idempotencyToken: 'T', payload: { n: 1 } });
    assertRefused(
      h.send(h.envelope(P, { sequenceNumber: 2, idempotencyToken: 'T', payload: { n: 2 } }), C),
      'ALREADY_IN_PROGRESS',
    );
    assert.equal(h.events('dedup.sequence_reused').length, 0);
  });

  it('keeps ACKs with a reused sequence number apart (the reference SDK numbers its ACKs 1 too)', () => {
    const m1 = h.sendData(P, C, { sequenceNumber: 5, payload: { n: 1 } });
    const m2 = h.sendData(P, C, { sequenceNumber: 6, payload: { n: 2 } });
    assert.ok(
      h.send(
        h.envelope(C, {
          sequenceNumber: 1,
          messageType: 'ACKNOWLEDGEMENT',
          payload: { ack_for_message_id: m1.messageId, ack_stage: 'RECEIVED' },
        }),
      ).accepted,
    );
    assert.ok(
      h.send(
        h.envelope(C, {
          sequenceNumber: 1,
          messageType: 'ACKNOWLEDGEMENT',
          payload: { ack_for_message_id: m2.messageId, ack_stage: 'RECEIVED' },
        }),
      ).accepted,
    );
    assert.equal(h.state(m1.messageId), 'RECEIVED');
    assert.equal(h.state(m2.messageId), 'RECEIVED');
    assert.equal(producer.acks().filter((a) => a.payload.ack_stage === 'RECEIVED').length, 2);
  });

  it('requeues a dead-lettered message that reused a sequence number as a retry of its own operation', () => {
    h.sendData(P, C, { sequenceNumber: 1, payload: { n: 1 } });
    const m2 = h.sendData(P, C, { sequenceNumber: 1, payload: { n: 2 } });
    h.acked(C, m2.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
    const [letter] = h.router.deadLetters();
    assert.equal(letter.messageId, m2.messageId);
    const result = h.router.requeue(letter.id, { correlationId: 'requeue' });
    assert.ok(result.accepted, result.accepted ? '' : result.reason);
    assert.equal(h.router.message(result.messageId)?.dedupKey, h.router.message(m2.messageId)?.dedupKey);
  });
});
