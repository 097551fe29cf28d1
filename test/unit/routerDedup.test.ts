import { strict as assert } from 'node:assert';
import { isoUtc } from '../../src/core/clock';
import { CollectingSink, RouterHarness, assertRefused } from '../support/routerHarness';

const P = 'producer';
const C = 'consumer';
const WINDOW_MS = 3_600_000;
const HOUSEKEEPING_MS = 60_000;

function detailOf(reason: string): Record<string, unknown> {
  assert.ok(reason.startsWith('DUPLICATE_DETECTED: '), reason);
  return JSON.parse(reason.slice('DUPLICATE_DETECTED: '.length)) as Record<string, unknown>;
}

describe('Router deduplication (RFC §11.2, §11.3, §21)', () => {
  let h: RouterHarness;
  let producer: CollectingSink;

  beforeEach(() => {
    h = new RouterHarness();
    for (const id of [P, C, 'other']) h.register(id);
    producer = h.stream(P).sink;
    h.stream(C);
  });

  afterEach(() => h.dispose());

  function retryOf(token: string, retryCount = 1, producerId = P) {
    return h.envelope(producerId, { idempotencyToken: token, retryCount });
  }

  it('refuses a retry while the operation is in progress with ALREADY_IN_PROGRESS, naming the attempt under way', () => {
    const m1 = h.sendData(P, C, { idempotencyToken: 'T' });
    const m2 = retryOf('T');
    const reason = assertRefused(
      h.send(m2, C),
      'ALREADY_IN_PROGRESS',
      new RegExp(`under way as ${m1.messageId} \\(SENT\\)`),
    );
    assert.ok(reason);
    const [nack] = producer.acksFor(m2.messageId);
    assert.equal(nack.error_code, 'ALREADY_IN_PROGRESS');
    assert.equal(nack.original_message_id, m1.messageId);
    assert.equal(nack.original_status, 'SENT');
    assert.equal(h.state(m2.messageId), undefined, 'the refused retry is not stored');

    h.acked(C, m1.messageId, 'RECEIVED');
    assertRefused(h.send(retryOf('T', 2), C), 'ALREADY_IN_PROGRESS', /\(RECEIVED\)/);
  });

  it('logs the ALREADY_IN_PROGRESS cache decision with a link to the original attempt (RFC §19)', () => {
    const m1 = h.sendData(P, C, { idempotencyToken: 'T' });
    const m2 = retryOf('T');
    assertRefused(h.send(m2, C), 'ALREADY_IN_PROGRESS');
    const linked = h.coordinator.log
      .query({ limit: 100_000 })
      .filter((e) => e.details.message_id === m2.messageId && e.details.original_message_id === m1.messageId);
    assert.ok(linked.length > 0, 'an event about the refused retry names original_message_id');
  });

  it('answers a retry from the store once its settled outcome has left memory, and keeps operations under way in memory', () => {
    h.dispose();
    h = new RouterHarness({ outcomesInMemory: 2 });
    for (const id of [P, C]) h.register(id);
    producer = h.stream(P).sink;
    h.stream(C);
    const underWay = h.sendData(P, C, { idempotencyToken: 'W' });
    const first = h.sendData(P, C, { idempotencyToken: 'T1' });
    h.acked(C, first.messageId, 'FULFILLED', { result: { n: 1 } });
    for (const token of ['T2', 'T3', 'T4'])
      h.acked(C, h.sendData(P, C, { idempotencyToken: token }).messageId, 'FULFILLED');

    const detail = detailOf(assertRefused(h.send(retryOf('T1'), C), 'DUPLICATE_DETECTED'));
    assert.equal(detail.original_message_id, first.messageId);
    assert.deepEqual((detail.cached_result as Record<string, unknown>).result, { n: 1 });
    assertRefused(h.send(retryOf('W'), C), 'ALREADY_IN_PROGRESS', new RegExp(underWay.messageId));
  });

  it('answers DUPLICATE_DETECTED with original_message_id, original_status, cached_at and cached_result once FULFILLED', () => {
    const m1 = h.sendData(P, C, { idempotencyToken: 'T' });
    h.clock.advance(1_500);
    h.acked(C, m1.messageId, 'FULFILLED', { note: 'created', result: { user: 'alice' } });
    const cachedAt = h.clock.now();
    h.clock.advance(5_000);

    const m2 = retryOf('T');
    const detail = detailOf(assertRefused(h.send(m2, C), 'DUPLICATE_DETECTED'));
    assert.equal(detail.original_message_id, m1.messageId);
    assert.equal(detail.original_status, 'FULFILLED');
    assert.equal(detail.cached_at, isoUtc(cachedAt));
    const cached = detail.cached_result as Record<string, unknown>;
    assert.deepEqual(cached.result, { user: 'alice' });
    assert.equal(cached.note, 'created');
    assert.equal(cached.ack_for_message_id, m1.messageId);
    assert.equal(detail.cached_error, undefined);

    const [nack] = producer.acksFor(m2.messageId);
    assert.equal(nack.status, 'DUPLICATE_DETECTED');
    assert.equal(nack.error_code, 'DUPLICATE_DETECTED');
    assert.equal(nack.original_message_id, m1.messageId);
    assert.equal(nack.ack_stage, 'FULFILLED', 'a duplicate of a fulfilled operation is answered with its outcome');

    const [decision] = h.events('dedup.duplicate_detected');
    assert.equal(decision.details.message_id, m2.messageId);
    assert.equal(decision.details.original_message_id, m1.messageId);
    assert.equal(decision.details.original_status, 'FULFILLED');
    assert.equal(decision.details.key, 't:T');
    assert.equal(h.events('dedup.outcome_cached').length, 1);
    assert.equal(h.events('dedup.outcome_cached')[0].details.original_message_id, m1.messageId);
  });

  it('answers DUPLICATE_DETECTED with cached_error once the operation failed with a non-retryable error', () => {
    const m1 = h.sendData(P, C, { idempotencyToken: 'T' });
    h.acked(C, m1.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR', note: 'title is required' });
    const detail = detailOf(assertRefused(h.send(retryOf('T'), C), 'DUPLICATE_DETECTED'));
    assert.equal(detail.original_message_id, m1.messageId);
    assert.equal(detail.original_status, 'REJECTED');
    assert.deepEqual(detail.cached_error, { error_code: 'VALIDATION_ERROR', note: 'title is required' });
    assert.equal(detail.cached_result, undefined);
    assert.equal(h.events('dedup.duplicate_detected').length, 1);
  });

  for (const [stage, code] of [
    ['REJECTED', 'BUFFER_FULL'],
    ['FAILED', 'AGENT_UNAVAILABLE'],
    ['FAILED', 'TOOL_TIMEOUT'],
    ['FAILED', 'OVERLOADED'],
  ] as const) {
    it(`accepts a retry after a retryable failure (${stage} ${code})`, () => {
      const m1 = h.sendData(P, C, { idempotencyToken: 'T' });
      h.acked(C, m1.messageId, stage, { error_code: code });
      const m2 = retryOf('T');
      assert.ok(h.send(m2, C).accepted);
      assert.equal(h.eventsFor('message.accepted', m2.messageId)[0].details.retry_of, m1.messageId);
      assert.equal(h.state(m1.messageId), stage, 'a retryable failure other than a timeout keeps its state');
      const entry = h.store.router.getDedup(P, 't:T');
      assert.equal(entry?.status, 'in_progress');
      assert.deepEqual(entry?.attempts, [m1.messageId, m2.messageId]);
    });
  }

  it('deduplicates by (producer_id, sequence_number) when there is no token', () => {
    const m1 = h.sendData(P, C, { sequenceNumber: 7 });
    const again = h.envelope(P, { sequenceNumber: 7 });
    assertRefused(h.send(again, C), 'ALREADY_IN_PROGRESS');
    h.acked(C, m1.messageId, 'FULFILLED');
    const detail = detailOf(assertRefused(h.send(h.envelope(P, { sequenceNumber: 7 }), C), 'DUPLICATE_DETECTED'));
    assert.equal(detail.original_message_id, m1.messageId);
    assert.ok(h.send(h.envelope(P, { sequenceNumber: 8 }), C).accepted, 'another sequence number is another message');
    assert.ok(h.send(h.envelope('other', { sequenceNumber: 7 }), C).accepted, 'sequence numbers are per producer');
  });

  it('refuses the very same message_id sent twice', () => {
    const m1 = h.sendData(P, C);
    assertRefused(h.send({ ...m1 }, C), 'ALREADY_IN_PROGRESS');
    h.acked(C, m1.messageId, 'FULFILLED');
    assertRefused(h.send({ ...m1 }, C), 'DUPLICATE_DETECTED');
  });

  it('scopes tokens to their producer: the same token from another producer is independent (no cache poisoning)', () => {
    const mine = h.sendData(P, C, { idempotencyToken: 'shared-token' });
    h.acked(C, mine.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });

    const theirs = h.envelope('other', { idempotencyToken: 'shared-token' });
    assert.ok(h.send(theirs, C).accepted, "another producer's cached failure does not answer this one");
    assert.equal(h.eventsFor('message.accepted', theirs.messageId)[0].details.retry_of, undefined);
    // While theirs is in progress, mine still answers from its own cache, and the other way round.
    assertRefused(h.send(retryOf('shared-token'), C), 'DUPLICATE_DETECTED');
    assertRefused(h.send(retryOf('shared-token', 1, 'other'), C), 'ALREADY_IN_PROGRESS');
    h.acked(C, theirs.messageId, 'FULFILLED');
    assert.equal(h.store.router.getDedup(P, 't:shared-token')?.outcomeState, 'REJECTED');
    assert.equal(h.store.router.getDedup('other', 't:shared-token')?.outcomeState, 'FULFILLED');
  });

  it('forgets an outcome after the deduplication window (3600 s, pruned by housekeeping): the token is then new', () => {
    const m1 = h.sendData(P, C, { idempotencyToken: 'T' });
    h.acked(C, m1.messageId, 'FULFILLED');
    h.clock.advance(WINDOW_MS - 1);
    assertRefused(h.send(retryOf('T'), C), 'DUPLICATE_DETECTED', /"original_status":"FULFILLED"/);

    h.clock.advance(1 + HOUSEKEEPING_MS);
    assert.equal(h.store.router.getDedup(P, 't:T'), undefined, 'housekeeping removed the expired outcome');
    const fresh = h.envelope(P, { idempotencyToken: 'T' });
    assert.ok(h.send(fresh, C).accepted);
    assert.equal(
      h.eventsFor('message.accepted', fresh.messageId)[0].details.retry_of,
      undefined,
      'a new operation, not a retry',
    );
    assert.equal(h.store.router.getDedup(P, 't:T')?.originalMessageId, fresh.messageId);
  });

  it('removes a large backlog of expired outcomes in bounded runs, each logged, and keeps those within the window', () => {
    const BATCH = 4_000;
    const inWindow = h.sendData(P, C, { idempotencyToken: 'young' });
    h.store.transaction(() => {
      for (let i = 0; i < BATCH + 150; i++) {
        h.store.router.putDedup({
          producerId: 'other',
          key: `s:${i}`,
          originalMessageId: `m${i}`,
          latestMessageId: `m${i}`,
          attempts: [`m${i}`],
          status: 'done',
          outcomeState: 'FULFILLED',
          errorCode: '',
          result: null,
          cachedAt: h.clock.now() - WINDOW_MS - 1_000,
          expiresAt: h.clock.now() - 1_000,
        });
      }
    });
    const left = () =>
      [0, BATCH - 1, BATCH, BATCH + 149].filter((i) => h.store.router.getDedup('other', `s:${i}`)).length;
    const expiredEvents = () => h.events('dedup.outcomes_expired').map((e) => e.details.entries);
    h.clock.advance(HOUSEKEEPING_MS);
    assert.deepEqual(expiredEvents(), [BATCH], 'one run deletes one batch and logs it');
    h.clock.advance(100);
    assert.deepEqual(expiredEvents(), [BATCH, 150], 'the rest goes on the catch-up run, 100 ms later');
    assert.equal(left(), 0, 'all expired outcomes are gone');
    assert.equal(
      h.store.router.getDedup(P, 't:young')?.originalMessageId,
      inWindow.messageId,
      'an outcome within its window is kept',
    );
    h.clock.advance(HOUSEKEEPING_MS - 100);
    assert.deepEqual(expiredEvents(), [BATCH, 150], 'caught up: nothing more until the next interval');
  });

  it('treats an expired outcome as gone even before housekeeping removes it, also across a restart', () => {
    const m1 = h.sendData(P, C, { idempotencyToken: 'T' });
    h.acked(C, m1.messageId, 'FULFILLED');
    h.clock.advance(WINDOW_MS + 1); // expired; the next housekeeping pass has not run yet
    const fresh = h.envelope(P, { idempotencyToken: 'T' });
    assert.ok(h.send(fresh, C).accepted);
    assert.equal(h.eventsFor('message.accepted', fresh.messageId)[0].details.retry_of, undefined);

    h.restart();
    const reason = assertRefused(h.send(retryOf('T'), C), 'ALREADY_IN_PROGRESS');
    assert.ok(reason.includes(fresh.messageId), reason);
    const entry = h.store.router.getDedup(P, 't:T');
    assert.equal(
      entry?.originalMessageId,
      fresh.messageId,
      "the persisted outcome cache names the new operation's first attempt",
    );
  });

  it('keeps an operation in progress beyond the window (it never expires while under way)', () => {
    h.sendData(P, C, { idempotencyToken: 'T' });
    h.clock.advance(10_000); // the first attempt times out (retryable), so a retry is admitted
    const m2 = retryOf('T');
    assert.ok(h.send(m2, C).accepted);
    h.acked(C, m2.messageId, 'RECEIVED');
    h.clock.advance(WINDOW_MS + 2 * HOUSEKEEPING_MS);
    assertRefused(h.send(retryOf('T', 2), C), 'ALREADY_IN_PROGRESS');
  });

  it('persists the outcome cache: a restarted coordinator still answers DUPLICATE_DETECTED', () => {
    const m1 = h.sendData(P, C, { idempotencyToken: 'T' });
    h.acked(C, m1.messageId, 'FULFILLED');
    h.restart();
    const detail = detailOf(assertRefused(h.send(retryOf('T'), C), 'DUPLICATE_DETECTED'));
    assert.equal(detail.original_message_id, m1.messageId);
  });
});
