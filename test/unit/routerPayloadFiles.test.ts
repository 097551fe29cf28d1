import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import type { DatabaseSync } from 'node:sqlite';
import * as os from 'node:os';
import * as path from 'node:path';
import { v4 as uuidv4 } from 'uuid';
import { MIB } from '../../src/core/limits';
import { contentDigest } from '../../src/core/router/contentDigest';
import { FILE_PAYLOAD_MIN_BYTES } from '../../src/core/router/payloadFiles';
import { STORE_USAGE_READ_MS } from '../../src/core/router/storeUsage';
import type { Envelope } from '../../src/core/router/envelope';
import type { SendResult } from '../../src/core/router/router';
import { StoreOpenError } from '../../src/core/store/store';
import { Coordinator } from '../../src/core/coordinator';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { CollectingSink, RouterHarness, assertRefused, ctx } from '../support/routerHarness';

function database(h: RouterHarness): DatabaseSync {
  return (h.store as unknown as { engine: { database: DatabaseSync } }).engine.database;
}

const P = 'producer';
const C = 'consumer';
const D = 'other';

/** A valid JSON payload of `size` bytes: {"to":…,"pad":"xxxx…"}. */
function jsonPayload(size: number, fill = 'x', to?: string): Uint8Array {
  const head = to ? `{"to":"${to}","pad":"` : '{"pad":"';
  return Buffer.from(head + fill.repeat(size - head.length - 2) + '"}', 'utf8');
}

/** Waits for asynchronous file work (reads, writes, unlinks on libuv's pool) by turns of the event loop, not by time. */
/**
 * Waits for real file I/O (the thread pool) to let `condition` hold: event-loop turns, up to 30 s of wall time. No
 * coordinator timer is involved (those run on the ManualClock); a fixed count of turns was too short on a busy machine.
 */
async function until(what: string, condition: () => boolean, wallMs = 45_000): Promise<void> {
  const deadline = Date.now() + wallMs;
  while (Date.now() < deadline) {
    if (condition()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.fail(`timed out waiting for ${what}`);
}

describe('Router payload files: payloads of 1 MiB or more are files written off the event loop', function () {
  // Real file I/O of megabytes: on a busy machine a test may take longer than the unit rung's default 10 s.
  this.timeout(60_000);
  let h: RouterHarness;
  let payloadDir: string;
  const open = (options: ConstructorParameters<typeof RouterHarness>[0] = {}) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-payloads-'));
    payloadDir = path.join(dataDir, 'payloads');
    h = new RouterHarness({ payloadDir, ...options });
    h.register(P);
    h.register(C);
    h.register(D);
  };
  afterEach(() => h.dispose());

  const files = (): string[] => (fs.existsSync(payloadDir) ? fs.readdirSync(payloadDir).sort() : []);
  const submit = async (envelope: Envelope, to?: string): Promise<SendResult> =>
    h.router.submit(envelope, ctx(`submit-${envelope.messageId}`), to === undefined ? {} : { to });
  const accepted = async (envelope: Envelope, to?: string): Promise<Envelope> => {
    const result = await submit(envelope, to);
    assert.ok(result.accepted, result.accepted ? '' : result.reason);
    return envelope;
  };
  const delivered = async (sink: CollectingSink, messageId: string): Promise<Envelope> => {
    await until(`the delivery of ${messageId}`, () => sink.items.some((i) => i.envelope.messageId === messageId));
    return sink.items.find((i) => i.envelope.messageId === messageId)!.envelope;
  };
  /** Delivery confirmed and FULFILLED: the message is finished with (RouterCore.retire). */
  const finish = (agentId: string, sink: CollectingSink, messageId: string) => {
    assert.ok(h.ackDelivery(agentId, sink, messageId));
    h.acked(agentId, messageId, 'FULFILLED');
  };

  it('writes the payload as a file named by a fresh id, stores an empty BLOB, and delivers every byte read asynchronously', async () => {
    open();
    const payload = jsonPayload(2 * MIB);
    const m = await accepted(h.envelope(P, { payload: Buffer.from(payload) }), C);
    const [name] = files();
    assert.match(name, /^[0-9a-f-]{36}$/, 'one file, named by a UUID (nothing the agent sent)');
    assert.equal(fs.statSync(path.join(payloadDir, name)).size, payload.byteLength);
    const record = h.router.message(m.messageId)!;
    assert.equal(record.payloadFile?.fileId, name);
    assert.equal(record.storedPayloadBytes, payload.byteLength);
    assert.equal(record.envelope.payload.byteLength, 0);
    const row = database(h)
      .prepare('SELECT length(payload) AS n FROM router_envelopes ORDER BY id DESC LIMIT 1')
      .get() as { n: number };
    assert.equal(row.n, 0, 'the envelope row keeps an empty BLOB');

    const { sink } = h.stream(C);
    assert.equal(
      sink.items.length,
      0,
      'attach does not read the file on the event loop: the delivery waits for the async read',
    );
    assert.equal(
      h.router.memoryUsage().reading,
      payload.byteLength,
      'the bytes being read count against the memory budget',
    );
    const got = await delivered(sink, m.messageId);
    assert.deepEqual(Buffer.from(got.payload), Buffer.from(payload));
    assert.equal(h.router.memoryUsage().reading, 0, 'dropped once written to the stream');
  });

  it('keeps payloads under FILE_PAYLOAD_MIN_BYTES, and every payload sent without submit, in SQLite', async () => {
    open();
    await accepted(h.envelope(P, { payload: jsonPayload(FILE_PAYLOAD_MIN_BYTES - 1) }), C);
    h.sendData(P, C, { payload: jsonPayload(2 * MIB) });
    assert.deepEqual(files(), []);
  });

  it('delivers a file-backed message whole after a restart', async () => {
    open();
    const payload = jsonPayload(3 * MIB, 'r');
    const m = await accepted(h.envelope(P, { payload: Buffer.from(payload) }), C);
    h.restart();
    const record = h.router.message(m.messageId)!;
    assert.equal(record.payloadFile?.bytes, payload.byteLength);
    const { sink } = h.stream(C);
    assert.deepEqual(Buffer.from((await delivered(sink, m.messageId)).payload), Buffer.from(payload));
  });

  it('unlinks the file after the commit that releases the message, keeping the digest computed off the event loop', async () => {
    open();
    const envelope = h.envelope(P, { payload: jsonPayload(MIB + 5) });
    const digest = contentDigest(envelope);
    const m = await accepted({ ...envelope, payload: Buffer.from(envelope.payload) }, C);
    const { sink } = h.stream(C);
    await delivered(sink, m.messageId);
    assert.equal(files().length, 1);
    finish(C, sink, m.messageId);
    await until('the unlink', () => files().length === 0);
    const released = h.router.message(m.messageId)!;
    assert.equal(released.payloadReleased, true);
    assert.equal(released.contentDigest, digest, 'the digest the worker computed is the one definition');
    const owners = database(h).prepare('SELECT COUNT(*) AS n FROM router_payload_files').get() as { n: number };
    assert.equal(owners.n, 0);
  });

  it('refuses after the write and deletes the file (no recipient)', async () => {
    open();
    const result = await submit(h.envelope(P, { payload: jsonPayload(MIB) }), 'nobody');
    assertRefused(result, 'NO_ROUTE');
    await until('the unlink', () => files().length === 0);
  });

  it('refuses invalid JSON on the worker without writing a file', async () => {
    open();
    const bad = Buffer.from(jsonPayload(MIB));
    bad[bad.length - 1] = 0x2c;
    assertRefused(await submit(h.envelope(P, { payload: bad }), C), 'VALIDATION_ERROR');
    assert.deepEqual(files(), []);
  });

  it('without the worker (payloadWorker: false) still refuses invalid JSON, and deletes the file it wrote', async () => {
    open({ payloadWorker: false });
    const bad = Buffer.from(jsonPayload(MIB));
    bad[bad.length - 1] = 0x2c;
    assertRefused(await submit(h.envelope(P, { payload: bad }), C), 'VALIDATION_ERROR');
    await until('the unlink', () => files().length === 0);
    const envelope = h.envelope(P, { payload: jsonPayload(MIB) });
    const digest = contentDigest(envelope);
    const m = await accepted({ ...envelope, payload: Buffer.from(envelope.payload) }, C);
    assert.equal(
      h.router.message(m.messageId)!.payloadFile?.digest,
      digest,
      'the digest computed on the event loop is the same',
    );
  });

  it('shares one file among fan-out copies until the last copy is released', async () => {
    open({ unaddressed: 'fanout' });
    const m = await accepted(h.envelope(P, { payload: jsonPayload(MIB), idempotencyToken: 'fan' }));
    assert.equal(files().length, 1, 'one file for both copies');
    const copies = h.router
      .messages({})
      .filter((s) => s.producerId === P)
      .map((s) => h.router.message(s.messageId)!);
    assert.equal(copies.length, 2);
    assert.equal(copies[0].payloadFile?.fileId, copies[1].payloadFile?.fileId);
    const c = h.stream(C).sink;
    const d = h.stream(D).sink;
    const toC = copies.find((r) => r.recipientId === C)!.envelope.messageId;
    const toD = copies.find((r) => r.recipientId === D)!.envelope.messageId;
    await delivered(c, toC);
    await delivered(d, toD);
    finish(C, c, toC);
    await until('the release', () => h.router.message(toC)!.payloadReleased === true);
    for (let i = 0; i < 200; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(files().length, 1, 'the other copy still owns the file');
    finish(D, d, toD);
    await until('the unlink after the last copy', () => files().length === 0);
    void m;
  });

  it('keeps the file for the dead letter after the message is released, and a requeue shares it', async () => {
    open();
    const payload = jsonPayload(MIB, 'd');
    const m = await accepted(h.envelope(P, { payload: Buffer.from(payload), idempotencyToken: 'dl-1' }), C);
    const { sink } = h.stream(C);
    await delivered(sink, m.messageId);
    assert.ok(h.ackDelivery(C, sink, m.messageId));
    h.acked(C, m.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
    const [letter] = h.router.deadLetters();
    assert.equal(letter.size, payload.byteLength);
    assert.match(letter.excerpt, /^\{"pad":"ddd/, 'the excerpt comes from the first bytes of the file');
    assert.equal(h.router.message(m.messageId)!.payloadReleased, true, 'the message released its payload');
    for (let i = 0; i < 200; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(files().length, 1, 'the dead letter keeps the file');

    const requeued = h.router.requeue(letter.id, ctx('requeue'));
    assert.ok(requeued.accepted, requeued.accepted ? '' : requeued.reason);
    assert.equal(files().length, 1, 'the requeue shares the file: no bytes copied');
    assert.equal(h.router.message(requeued.messageId)!.payloadFile?.fileId, files()[0]);
    assert.deepEqual(Buffer.from((await delivered(sink, requeued.messageId)).payload), Buffer.from(payload));
    finish(C, sink, requeued.messageId);
    for (let i = 0; i < 200; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(files().length, 1, 'the dead letter still owns it');

    // Dead-letter retention deletes the dead letter's owner row; the file goes after that commit.
    h.store.transaction(() => h.store.router.pruneDeadLetters(0, Number.MAX_SAFE_INTEGER));
    await until('the unlink after retention', () => files().length === 0);
  });

  it('refuses to start (missing-data) when a referenced file is missing or cut short, naming it', async () => {
    open();
    const m = await accepted(h.envelope(P, { payload: jsonPayload(MIB) }), C);
    const file = path.join(payloadDir, h.router.message(m.messageId)!.payloadFile!.fileId);
    // Stopped: a coordinator started on the store refuses; the file put back, the restart starts.
    h.restart(() => {
      const refusal = (): StoreOpenError => {
        const store = CoordinatorStore.open(h.dataDir);
        try {
          new Coordinator({ store, clock: h.clock, router: { payloadDir, heartbeatIntervalMs: 0 } }).dispose();
        } catch (err) {
          store.close();
          assert.ok(err instanceof StoreOpenError, String(err));
          return err;
        }
        return assert.fail('the store started');
      };
      fs.truncateSync(file, 1000);
      const truncated = refusal();
      assert.equal(truncated.reason, 'missing-data');
      assert.ok(truncated.message.includes(`${file} has 1000 bytes, not ${MIB}`), truncated.message);
      assert.match(truncated.message, /Restore the folder/);
      fs.rmSync(file);
      const missing = refusal();
      assert.ok(missing.message.includes(`${file} is missing`), missing.message);
      // Put back, it starts again.
      fs.writeFileSync(file, jsonPayload(MIB));
    });
    assert.equal(h.router.message(m.messageId)!.storedPayloadBytes, MIB);
  });

  it('sweeps files nobody references after start, and logs it', async () => {
    open();
    const m = await accepted(h.envelope(P, { payload: jsonPayload(MIB) }), C);
    const kept = h.router.message(m.messageId)!.payloadFile!.fileId;
    const stray = uuidv4();
    fs.writeFileSync(path.join(payloadDir, stray), 'left by a crash between write and commit');
    fs.writeFileSync(path.join(payloadDir, `${uuidv4()}.tmp`), 'half written');
    fs.writeFileSync(path.join(payloadDir, 'README'), 'not ours: left alone');
    h.restart();
    const swept = await h.router.payloadFilesSwept;
    assert.equal(swept.length, 2);
    assert.deepEqual(files(), ['README', kept].sort());
    assert.equal(h.events('router.payload_files_swept').length, 1);
  });

  it('counts the payload files against the disk budget', async () => {
    open();
    const before = h.router.storeUsage().bytes;
    await accepted(h.envelope(P, { payload: jsonPayload(4 * MIB) }), C);
    h.clock.advance(STORE_USAGE_READ_MS);
    const after = h.router.storeUsage().bytes;
    assert.ok(after - before >= 4 * MIB, `read back from the store: ${before} → ${after}`);
    assert.ok(after - before < 5 * MIB, 'the bytes are not also in SQLite');
  });
  it('reads payload files back for delivery within half the memory budget, however many streams open at once (bench/memory.ts)', async () => {
    // 32 MiB budget: what is being read back and what is in flight to streams stay within 16 MiB together.
    open({ memoryBudgetBytes: 32 * MIB });
    const agents = Array.from({ length: 6 }, (_, i) => `reader-${i}`);
    for (const agent of agents) h.register(agent);
    const ids = new Map<string, string>();
    for (const agent of agents)
      ids.set(agent, (await accepted(h.envelope(P, { payload: jsonPayload(4 * MIB) }), agent)).messageId);
    const sinks = agents.map((agent) => ({ agent, sink: h.stream(agent).sink }));
    const confirmed = new Set<string>();
    let most = 0;
    const check = () => {
      const usage = h.router.memoryUsage();
      most = Math.max(most, usage.reading + usage.inflight);
      assert.ok(
        usage.reading + usage.inflight <= 16 * MIB,
        `reading ${usage.reading} + in flight ${usage.inflight} passed half the budget`,
      );
    };
    check();
    await until('every delivery', () => {
      check();
      for (const { agent, sink } of sinks) {
        const id = ids.get(agent)!;
        if (!confirmed.has(id) && sink.items.some((i) => i.envelope.messageId === id)) {
          assert.ok(h.ackDelivery(agent, sink, id));
          confirmed.add(id);
        }
      }
      return confirmed.size === agents.length;
    });
    assert.equal(most, 16 * MIB, 'four 4 MiB payloads at once, not six');
    assert.equal(h.router.memoryUsage().reading, 0);
  });
  it('bounds the large payloads being validated and written at once by the memory budget: the one over it is refused BUFFER_FULL at once', async () => {
    open({ memoryBudgetBytes: 32 * MIB });
    const envelopes = Array.from({ length: 5 }, () => h.envelope(P, { payload: jsonPayload(7 * MIB) }));
    // Sent together, none awaited: four of 7 MiB fit the 32 MiB budget while they are checked and written; the fifth
    // would take it over and is refused before any work (no worker, no file).
    const pending = envelopes.map((e) => h.router.submit(e, ctx(`together-${e.messageId}`), { to: C }));
    assert.equal(h.router.memoryUsage().checking, 4 * 7 * MIB, 'four counted while they are validated and written');
    const results = await Promise.all(pending);
    for (const result of results.slice(0, 4)) assert.ok(result.accepted, result.accepted ? '' : result.reason);
    assertRefused(results[4], 'BUFFER_FULL');
    assert.equal(h.router.memoryUsage().checking, 0);
    assert.equal(files().length, 4, 'no file for the refused one');
  });
});
