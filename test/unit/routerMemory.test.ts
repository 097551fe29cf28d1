import { strict as assert } from 'node:assert';
import { MIB } from '../../src/core/limits';
import { PAYLOAD_DETACH_MIN_BYTES, RECORD_OVERHEAD_BYTES } from '../../src/core/router/memoryBudget';
import { RouterHarness, assertRefused, ctx, settle } from '../support/routerHarness';

const P = 'producer';
const C = 'consumer';
const D = 'other';

const bytes = (n: number, fill = 7): Uint8Array => new Uint8Array(n).fill(fill);
const text = { contentType: 'text/plain; charset=utf-8' };

describe('Router memory bounds: payloads live in the store, a memory budget for what is held', () => {
  let h: RouterHarness;
  const open = (options: ConstructorParameters<typeof RouterHarness>[0] = {}) => {
    h = new RouterHarness(options);
    h.register(P);
    h.register(C);
    h.register(D);
  };
  afterEach(() => h.dispose());

  it('keeps no large payload in memory while it waits for an offline recipient, and delivers its bytes from the store', () => {
    open();
    const payload = bytes(1 * MIB, 5);
    const m = h.sendData(P, C, { payload, ...text });
    const record = h.router.message(m.messageId)!;
    assert.equal(record.envelope.payload.byteLength, 0, 'the queued record holds no payload');
    assert.equal(record.storedPayloadBytes, MIB);
    assert.equal(h.router.memoryUsage().messages, RECORD_OVERHEAD_BYTES, 'only the record counts against the budget');
    const sink = h.stream(C).sink;
    assert.deepEqual(Buffer.from(sink.items[0].envelope.payload), Buffer.from(payload), 'the stream gets every byte');
    assert.equal(record.envelope.payload.byteLength, 0, 'and memory still holds none');
  });

  it('keeps a payload under PAYLOAD_DETACH_MIN_BYTES in memory and counts it', () => {
    open();
    const m = h.sendData(P, C, { payload: bytes(PAYLOAD_DETACH_MIN_BYTES - 1), ...text });
    assert.equal(h.router.message(m.messageId)!.envelope.payload.byteLength, PAYLOAD_DETACH_MIN_BYTES - 1);
    assert.equal(h.router.memoryUsage().messages, RECORD_OVERHEAD_BYTES + PAYLOAD_DETACH_MIN_BYTES - 1);
  });

  it('reads nothing large back into memory after a restart, and still delivers the bytes', () => {
    open();
    const payload = bytes(2 * MIB, 9);
    const m = h.sendData(P, C, { payload, ...text });
    h.restart();
    const record = h.router.message(m.messageId)!;
    assert.equal(record.envelope.payload.byteLength, 0, 'recovery left the payload in the store');
    assert.equal(record.storedPayloadBytes, 2 * MIB);
    const sink = h.stream(C).sink;
    assert.deepEqual(Buffer.from(sink.items[0].envelope.payload), Buffer.from(payload));
  });

  it('dead-letters a stored payload with every byte, and requeue sends them', () => {
    open();
    const payload = bytes(300_000, 4);
    const m = h.sendData(P, C, { payload, ...text, idempotencyToken: 'op-1' });
    h.acked(C, m.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
    const [letter] = h.router.deadLetters();
    assert.equal(letter.size, 300_000);
    const sink = h.stream(C).sink;
    const requeued = h.router.requeue(letter.id, ctx('requeue'));
    assert.ok(requeued.accepted, requeued.accepted ? '' : requeued.reason);
    const delivered = sink.items.find((i) => i.envelope.messageId === requeued.messageId);
    assert.deepEqual(Buffer.from(delivered!.envelope.payload), Buffer.from(payload));
  });

  it('compares a reused sequence number against a stored payload by its bytes', () => {
    open();
    const first = h.sendData(P, C, { payload: bytes(10_000, 1), ...text, sequenceNumber: 7 });
    const same = h.send(h.envelope(P, { payload: bytes(10_000, 1), ...text, sequenceNumber: 7 }), C);
    assertRefused(same, 'ALREADY_IN_PROGRESS');
    const other = h.send(h.envelope(P, { payload: bytes(10_000, 2), ...text, sequenceNumber: 7 }), C);
    assert.ok(other.accepted, 'other content under the same sequence number is a distinct operation');
    assert.notEqual(first.messageId, other.accepted ? other.messageId : '');
  });

  it('refuses BUFFER_FULL, naming the memory budget, when a payload would take what is held over it', () => {
    open({ memoryBudgetBytes: 64 * 1024 });
    // Small payloads stay in memory: 14 of 4 KiB less one byte, plus their records, fill 64 KiB.
    let refused;
    for (let i = 0; i < 40 && !refused; i++) {
      const result = h.send(h.envelope(P, { payload: bytes(PAYLOAD_DETACH_MIN_BYTES - 1), ...text }), i % 2 ? C : D);
      if (!result.accepted) refused = result;
    }
    assert.ok(refused, 'the budget was reached');
    assertRefused(refused, 'BUFFER_FULL');
    assert.match(
      refused.accepted ? '' : refused.reason,
      /memory budget \(memoryBudgetBytes, the setting sw4rm\.memoryBudgetMiB\)/,
    );
    const usage = h.router.memoryUsage();
    assert.ok(usage.used <= usage.budget, `${usage.used} held within ${usage.budget}`);
  });

  it('lets a stream have at most deliveryWindowBytes unconfirmed; the next goes when one is confirmed', () => {
    open({ deliveryWindowBytes: 1 * MIB });
    const sink = h.stream(C).sink;
    const a = h.sendData(P, C, { payload: bytes(600_000, 1), ...text });
    const b = h.sendData(P, C, { payload: bytes(600_000, 2), ...text });
    assert.deepEqual(sink.ids(), [a.messageId], 'the second waits in the store');
    assert.equal(h.router.memoryUsage().inflight, 600_000);
    assert.ok(h.ackDelivery(C, sink, a.messageId));
    assert.deepEqual(sink.ids(), [a.messageId, b.messageId], 'confirmed: the next one goes');
    assert.equal(h.router.memoryUsage().inflight, 600_000);
  });

  it('always lets one payload larger than the window go, so nothing waits forever', () => {
    open({ deliveryWindowBytes: 100_000 });
    const sink = h.stream(C).sink;
    const a = h.sendData(P, C, { payload: bytes(500_000), ...text });
    assert.deepEqual(sink.ids(), [a.messageId]);
  });

  it('holds deliveries to every stream while half the memory budget is in flight, and lets them go as bytes are confirmed', async () => {
    open({ memoryBudgetBytes: 2 * MIB, deliveryWindowBytes: 16 * MIB });
    const toC = h.stream(C).sink;
    const toD = h.stream(D).sink;
    const a = h.sendData(P, C, { payload: bytes(700_000, 1), ...text });
    const b = h.sendData(P, D, { payload: bytes(700_000, 2), ...text });
    assert.deepEqual(toC.ids(), [a.messageId]);
    assert.deepEqual(toD.ids(), [], 'half the budget (1 MiB) would be passed: D waits');
    assert.ok(h.ackDelivery(C, toC, a.messageId));
    await settle();
    assert.deepEqual(toD.ids(), [b.messageId], 'C confirmed: D gets its message');
  });

  it('frees the bytes in flight of a stream that closes; they count again only when delivered again', async () => {
    open({ memoryBudgetBytes: 2 * MIB });
    const { sink, handle } = h.stream(C);
    const a = h.sendData(P, C, { payload: bytes(700_000, 1), ...text });
    assert.deepEqual(sink.ids(), [a.messageId]);
    assert.equal(h.router.memoryUsage().inflight, 700_000);
    handle.dispose();
    assert.equal(h.router.memoryUsage().inflight, 0, 'gRPC freed them with the stream');
    const again = h.stream(C).sink;
    assert.deepEqual(again.ids(), [a.messageId], 'redelivered on the next stream');
    assert.equal(h.router.memoryUsage().inflight, 700_000);
  });

  it('gives every byte back when messages finish: nothing stays counted', () => {
    open();
    const sink = h.stream(C).sink;
    const producer = h.stream(P).sink;
    for (let i = 0; i < 5; i++) {
      const m = h.sendData(P, C, { payload: bytes(i % 2 ? 100 : 200_000), ...text });
      assert.ok(h.ackDelivery(C, sink, m.messageId));
      h.acked(C, m.messageId, 'FULFILLED');
    }
    assert.ok(h.router.memoryUsage().messages > 0, 'the forwarded ACKs wait for the producer to confirm them');
    for (const item of [...producer.items])
      h.router.ackDelivery(P, item.seq, item.envelope.messageId, 'DELIVERED', ctx('confirm'));
    assert.deepEqual(h.router.memoryUsage(), {
      messages: 0,
      inflight: 0,
      checking: 0,
      reading: 0,
      used: 0,
      budget: 128 * MIB,
    });
  });
});
