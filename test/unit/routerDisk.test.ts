import { strict as assert } from 'node:assert';
import type { DatabaseSync } from 'node:sqlite';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { MIB } from '../../src/core/limits';
import { DEFAULT_ROUTER_OPTIONS } from '../../src/core/router/router';
import { PAYLOAD_RELEASE_MIN_BYTES } from '../../src/core/router/routerCore';
import { STORE_USAGE_READ_MS } from '../../src/core/router/storeUsage';
import { routerSettings, storeWarning } from '../../src/extension/routerSettings';
import { RouterHarness, assertRefused, ctx } from '../support/routerHarness';

const P = 'producer';
const C = 'consumer';

function database(h: RouterHarness): DatabaseSync {
  return (h.store as unknown as { engine: { database: DatabaseSync } }).engine.database;
}

/** The stored payload of a message: its type in the column ('blob' while held, 'text' once released) and its length. */
function storedPayload(h: RouterHarness, messageId: string): { type: string; length: number } {
  const row = database(h)
    .prepare(
      `SELECT typeof(e.payload) AS type, length(e.payload) AS length FROM router_envelopes e
    JOIN router_messages m ON m.id = e.id WHERE m.message_id = ?`,
    )
    .get(messageId) as { type: string; length: number } | undefined;
  assert.ok(row, `${messageId} is stored`);
  return { type: row.type, length: row.length };
}

const bytes = (n: number, fill = 7): Uint8Array => new Uint8Array(n).fill(fill);

describe('Router disk bounds: payloads released when finished with', () => {
  let h: RouterHarness;
  beforeEach(() => {
    h = new RouterHarness();
    h.register(P);
    h.register(C);
  });
  afterEach(() => h.dispose());

  it('drops the payload of a fulfilled message from router_envelopes; its record and history stay', () => {
    const consumer = h.stream(C).sink;
    const m = h.sendData(P, C, { payload: bytes(100_000), contentType: 'text/plain; charset=utf-8' });
    assert.deepEqual(storedPayload(h, m.messageId), { type: 'blob', length: 100_000 }, 'held while under way');
    assert.ok(h.ackDelivery(C, consumer, m.messageId));
    h.acked(C, m.messageId, 'RECEIVED');
    assert.equal(storedPayload(h, m.messageId).type, 'blob', 'not finished yet');
    h.acked(C, m.messageId, 'FULFILLED');
    const stored = storedPayload(h, m.messageId);
    assert.equal(stored.type, 'text', 'released');
    assert.ok(stored.length <= 64, 'only the content digest stays');
    const record = h.router.message(m.messageId);
    assert.ok(record);
    assert.equal(record.state, 'FULFILLED');
    assert.equal(record.payloadReleased, true, 'Router.message says the payload is gone');
    assert.equal(record.envelope.payload.byteLength, 0);
    assert.ok(
      record.history.some((e) => e.event === 'ack_fulfilled'),
      'the history stays',
    );
    h.restart();
    assert.equal(h.router.message(m.messageId)?.payloadReleased, true, 'after a restart too');
  });

  it('keeps the payload of a dead-lettered message in the DLQ, and requeue sends those bytes', () => {
    const payload = bytes(50_000, 3);
    const m = h.sendData(P, C, { payload, contentType: 'text/plain; charset=utf-8', idempotencyToken: 'op-1' });
    h.acked(C, m.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
    assert.equal(storedPayload(h, m.messageId).type, 'text', 'released from router_envelopes');
    const [letter] = h.router.deadLetters();
    assert.equal(letter.messageId, m.messageId);
    const dlq = database(h).prepare('SELECT length(payload) AS n FROM dead_letters WHERE id = ?').get(letter.id) as {
      n: number;
    };
    assert.equal(dlq.n, 50_000, 'the DLQ has its own copy');
    const consumer = h.stream(C).sink;
    const requeued = h.router.requeue(letter.id, ctx('requeue'));
    assert.ok(requeued.accepted, requeued.accepted ? '' : requeued.reason);
    const delivered = consumer.items.find((i) => i.envelope.messageId === requeued.messageId);
    assert.ok(delivered, 'the requeued message is delivered');
    assert.deepEqual(Buffer.from(delivered.envelope.payload), Buffer.from(payload), 'with the original bytes');
  });

  it('leaves a payload under PAYLOAD_RELEASE_MIN_BYTES in its row until the retention', () => {
    const consumer = h.stream(C).sink;
    const m = h.sendData(P, C, { payload: { small: true } });
    assert.ok(h.ackDelivery(C, consumer, m.messageId));
    h.acked(C, m.messageId, 'FULFILLED');
    assert.equal(storedPayload(h, m.messageId).type, 'blob');
    assert.equal(h.router.message(m.messageId)?.payloadReleased, undefined);
  });

  it('still tells a repeat from a distinct operation on a reused sequence number once the first is released', () => {
    const consumer = h.stream(C).sink;
    const big = (n: number) => ({ n, body: 'x'.repeat(PAYLOAD_RELEASE_MIN_BYTES) });
    const first = h.sendData(P, C, { sequenceNumber: 1, payload: big(1) });
    assert.ok(h.ackDelivery(C, consumer, first.messageId));
    h.acked(C, first.messageId, 'FULFILLED');
    assert.equal(storedPayload(h, first.messageId).type, 'text');
    assertRefused(h.send(h.envelope(P, { sequenceNumber: 1, payload: big(1) }), C), 'DUPLICATE_DETECTED');
    const other = h.send(h.envelope(P, { sequenceNumber: 1, payload: big(2) }), C);
    assert.ok(other.accepted, 'other content under the same sequence number is a distinct operation');
  });
});

describe('Router disk bounds: dead letters bounded by bytes', () => {
  it('drops the oldest dead letters beyond dlqMaxBytes of payload on housekeeping', () => {
    const h = new RouterHarness({ dlqMaxBytes: 2_500 });
    try {
      h.register(P);
      h.register(C);
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) {
        const m = h.sendData(P, C, { payload: bytes(1_000, i), contentType: 'text/plain; charset=utf-8' });
        h.acked(C, m.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
        ids.push(m.messageId);
      }
      assert.equal(h.router.deadLetterCount(), 4);
      h.clock.advance(60_000);
      assert.deepEqual(
        h.router.deadLetters().map((l) => l.messageId),
        [ids[3], ids[2]],
        'the newest 2,000 bytes are kept',
      );
    } finally {
      h.dispose();
    }
  });

  it('has documented defaults: 256 MiB of dead letters, a 2 GiB store', () => {
    assert.equal(DEFAULT_ROUTER_OPTIONS.dlqMaxBytes, 256 * MIB);
    assert.equal(DEFAULT_ROUTER_OPTIONS.storeBudgetBytes, 2048 * MIB);
  });
});

describe('Router disk bounds: the store budget at admission', () => {
  it('refuses with BUFFER_FULL naming the budget, and admits again once finished messages released their payloads', async () => {
    const h = new RouterHarness({ storeBudgetBytes: 2 * MIB, capacity: 100 });
    try {
      h.register(P);
      h.register(C);
      const api = new InProcessCoordinatorApi(h.coordinator);
      const before = await api.storeUsage();
      assert.equal(before.budget, 2 * MIB);
      assert.ok(before.bytes > 0 && before.bytes < MIB, `an empty store is small (${before.bytes})`);
      const sent: string[] = [];
      let refusal = '';
      for (let i = 0; i < 10 && !refusal; i++) {
        const e = h.envelope(P, { payload: bytes(300_000, i), contentType: 'text/plain; charset=utf-8' });
        const result = h.send(e, C);
        if (result.accepted) sent.push(e.messageId);
        else refusal = assertRefused(result, 'BUFFER_FULL', /disk budget/);
      }
      assert.ok(refusal, 'refused before ten 300 kB messages');
      assert.match(refusal, /2\.0 MiB disk budget/);
      assert.ok(sent.length >= 2, `some were admitted (${sent.length})`);
      const usage = await api.storeUsage();
      assert.ok(usage.bytes > 0.8 * usage.budget, 'the status bar would warn');
      assert.ok(storeWarning(usage));
      // The recipient takes them all (ACKs pass over the budget): finished, their payloads go, and the next read of the size shows it.
      const consumer = h.stream(C).sink;
      for (const id of sent) {
        assert.ok(h.ackDelivery(C, consumer, id));
        h.acked(C, id, 'FULFILLED');
      }
      assertRefused(
        h.send(h.envelope(P, { payload: bytes(300_000), contentType: 'text/plain; charset=utf-8' }), C),
        'BUFFER_FULL',
        /disk budget/,
      );
      h.clock.advance(STORE_USAGE_READ_MS);
      const after = h.send(h.envelope(P, { payload: bytes(300_000, 9), contentType: 'text/plain; charset=utf-8' }), C);
      assert.ok(after.accepted, after.accepted ? '' : after.reason);
      api.dispose();
    } finally {
      h.dispose();
    }
  });

  it('refuses any message over a budget the store already exceeds', () => {
    const h = new RouterHarness({ storeBudgetBytes: 1 });
    try {
      h.register(P);
      h.register(C);
      assertRefused(h.send(h.envelope(P), C), 'BUFFER_FULL', /disk budget/);
    } finally {
      h.dispose();
    }
  });
});

describe('sw4rm.storeBudgetMiB and the status bar warning', () => {
  const base = {
    inboxCapacity: undefined,
    deduplicationWindowSeconds: undefined,
    messageRetentionHours: undefined,
    privilegedRatePerSecond: undefined,
    payloadLimits: undefined,
  };

  it('turns MiB into storeBudgetBytes, 2048 by default, clamped to 16 MiB – 1 TiB', () => {
    assert.equal(routerSettings(base).options.storeBudgetBytes, 2048 * MIB);
    assert.equal(routerSettings({ ...base, storeBudgetMiB: 100 }).options.storeBudgetBytes, 100 * MIB);
    const low = routerSettings({ ...base, storeBudgetMiB: 1 });
    assert.equal(low.options.storeBudgetBytes, 16 * MIB);
    assert.match(low.warnings.join('\n'), /storeBudgetMiB 1 is outside 16–1048576; using 16/);
  });

  it('warns from 80% of the budget, with the bytes and the budget in the tooltip', () => {
    assert.equal(storeWarning(undefined), undefined);
    assert.equal(storeWarning({ bytes: 79 * MIB, budget: 100 * MIB }), undefined);
    const warning = storeWarning({ bytes: 82 * MIB, budget: 100 * MIB });
    assert.deepEqual(warning?.text, 'store 82%');
    assert.match(warning?.tooltip ?? '', /82\.0 MiB of 100\.0 MiB/);
    assert.match(warning?.tooltip ?? '', /BUFFER_FULL/);
    assert.equal(storeWarning({ bytes: 3 * MIB, budget: 2 * MIB })?.text, 'store 150%');
  });
});
