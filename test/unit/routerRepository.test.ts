import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { v4 as uuidv4 } from 'uuid';
import { CoordinatorStore, LATEST_SCHEMA_VERSION, COORDINATOR_SCHEMA } from '../../src/core/coordinatorStore';
import type { Envelope } from '../../src/core/router/envelope';
import type { DedupEntry, MessageRecord } from '../../src/core/router/model';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { reasonCode, RouterHarness } from '../support/routerHarness';
import { makeTempDir, removeTempDir } from '../support/tempDir';

function envelope(overrides: Partial<Envelope> = {}): Envelope {
  const payload = Buffer.from('{"a":1}');
  return {
    messageId: uuidv4(),
    idempotencyToken: 'tok',
    producerId: 'p',
    correlationId: 'c',
    sequenceNumber: '18446744073709551615',
    retryCount: 2,
    messageType: 'DATA',
    contentType: 'application/json',
    contentLength: String(payload.byteLength),
    repoId: 'r',
    worktreeId: 'w',
    hlcTimestamp: 'h',
    ttlMs: 500,
    timestampMs: 1_700_000_000_123,
    payload,
    parentCorrelationId: 'parent',
    ...overrides,
  };
}

function record(overrides: Partial<MessageRecord> = {}): MessageRecord {
  return {
    envelope: envelope(),
    recipientId: 'q',
    dedupKey: 't:tok',
    tracked: true,
    lane: 'STANDARD',
    ackFor: '',
    acceptedAt: 1_000,
    state: 'SENT',
    errorCode: '',
    updatedAt: 1_000,
    ackDeadline: 11_000,
    expiresAt: null,
    delivery: 'queued',
    deliverySeq: null,
    deliveredAt: null,
    leaseUntil: null,
    deliveryAttempts: 0,
    history: [{ at: 1_000, event: 'accepted' }],
    ...overrides,
  };
}

describe('SqliteRouterRepository (schema version 4)', () => {
  let dataDir: string;
  let store: CoordinatorStore;

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-router-repo-');
    store = CoordinatorStore.open(dataDir);
  });

  afterEach(() => {
    store.close();
    removeTempDir(dataDir);
  });

  it('creates the router tables at schema version 4 or later', () => {
    assert.ok(LATEST_SCHEMA_VERSION >= 4);
    store.close();
    const db = new DatabaseSync(path.join(dataDir, STORE_FILE_NAME), { readOnly: true });
    try {
      const tables = (
        db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as Array<{ name: string }>
      ).map((t) => t.name);
      for (const table of [
        'router_messages',
        'router_envelopes',
        'router_message_ids',
        'router_meta',
        'dedup',
        'deliveries',
        'dead_letters',
      ])
        assert.ok(tables.includes(table), table);
    } finally {
      db.close();
      store = CoordinatorStore.open(dataDir);
    }
  });

  it('stores a message with every envelope field and the payload bytes, and updates its state', () => {
    const r = record({
      envelope: envelope({
        payload: Uint8Array.from([0, 255, 1]),
        contentLength: '3',
        contentType: 'application/octet-stream',
      }),
    });
    store.router.insertMessage(r);
    const loaded = store.router.getMessage(r.envelope.messageId)!;
    assert.deepEqual(
      { ...loaded, envelope: { ...loaded.envelope, payload: [...loaded.envelope.payload] } },
      { ...r, envelope: { ...r.envelope, payload: [0, 255, 1] } },
    );
    r.state = 'RECEIVED';
    r.delivery = 'done';
    r.history.push({ at: 2_000, event: 'ack_received' });
    store.router.updateMessage(r);
    const updated = store.router.getMessage(r.envelope.messageId)!;
    assert.equal(updated.state, 'RECEIVED');
    assert.deepEqual(
      updated.history.map((x) => x.event),
      ['accepted', 'ack_received'],
    );
    assert.equal(store.router.getMessage('nope'), undefined);
  });

  it('lists as live what is not terminal or not yet delivered, and counts by state', () => {
    const states: Array<Partial<MessageRecord>> = [
      { state: 'SENT', delivery: 'queued' },
      { state: 'RECEIVED', delivery: 'done' },
      { state: 'RETRYING', delivery: 'done' },
      { state: 'FULFILLED', delivery: 'done' },
      { state: 'TIMED_OUT', delivery: 'done' },
      { state: 'FULFILLED', delivery: 'inflight', tracked: false },
    ];
    const records = states.map((s) => record({ envelope: envelope(), ...s }));
    for (const r of records) store.router.insertMessage(r);
    assert.deepEqual(
      store.router.liveMessages().map((r) => r.envelope.messageId),
      [records[0], records[1], records[2], records[5]].map((r) => r.envelope.messageId),
    );
    assert.deepEqual(store.router.countByState(), { SENT: 1, RECEIVED: 1, RETRYING: 1, FULFILLED: 2, TIMED_OUT: 1 });
  });

  it('keeps outcome entries per producer and key, upserts them and prunes expired finished ones', () => {
    const entry: DedupEntry = {
      producerId: 'p',
      key: 't:x',
      originalMessageId: 'm1',
      latestMessageId: 'm1',
      attempts: ['m1'],
      status: 'in_progress',
      outcomeState: '',
      errorCode: '',
      result: null,
      cachedAt: 0,
      expiresAt: 10,
    };
    store.router.putDedup(entry);
    store.router.putDedup({
      ...entry,
      producerId: 'q',
      status: 'done',
      outcomeState: 'FULFILLED',
      result: { ok: true },
    });
    store.router.putDedup({ ...entry, latestMessageId: 'm2', attempts: ['m1', 'm2'] });
    assert.deepEqual(store.router.getDedup('p', 't:x'), { ...entry, latestMessageId: 'm2', attempts: ['m1', 'm2'] });
    assert.deepEqual(store.router.getDedup('q', 't:x')?.result, { ok: true });
    assert.deepEqual(
      store.router.pruneDedup(11, 10),
      { deleted: 1, more: false },
      'only the finished entry is pruned; in_progress never expires',
    );
    assert.equal(store.router.getDedup('q', 't:x'), undefined);
    assert.ok(store.router.getDedup('p', 't:x'));
  });

  it('prunes expired outcomes in bounded batches, the longest expired first, and says when more are due', () => {
    const done = (key: string, expiresAt: number): DedupEntry => ({
      producerId: 'p',
      key,
      originalMessageId: key,
      latestMessageId: key,
      attempts: [key],
      status: 'done',
      outcomeState: 'FULFILLED',
      errorCode: '',
      result: null,
      cachedAt: 0,
      expiresAt,
    });
    store.transaction(() => {
      for (const [key, expiresAt] of [
        ['s:3', 30],
        ['s:1', 10],
        ['s:4', 1_000],
        ['s:2', 20],
      ] as const)
        store.router.putDedup(done(key, expiresAt));
    });
    assert.deepEqual(store.router.pruneDedup(100, 2), { deleted: 2, more: true }, 'a full batch: more may be due');
    assert.deepEqual(
      ['s:1', 's:2', 's:3', 's:4'].filter((k) => store.router.getDedup('p', k)),
      ['s:3', 's:4'],
      'the two longest expired went first',
    );
    assert.deepEqual(store.router.pruneDedup(100, 2), { deleted: 1, more: false });
    assert.deepEqual(store.router.pruneDedup(100, 2), { deleted: 0, more: false });
    assert.ok(store.router.getDedup('p', 's:4'), 'not yet expired: kept');
  });

  it('overwrites every field of an outcome entry on upsert, the original attempt included', () => {
    const entry: DedupEntry = {
      producerId: 'p',
      key: 't:x',
      originalMessageId: 'old',
      latestMessageId: 'old',
      attempts: ['old'],
      status: 'done',
      outcomeState: 'FULFILLED',
      errorCode: '',
      result: null,
      cachedAt: 0,
      expiresAt: 10,
    };
    store.router.putDedup(entry);
    const fresh: DedupEntry = {
      ...entry,
      originalMessageId: 'new',
      latestMessageId: 'new',
      attempts: ['new'],
      status: 'in_progress',
      outcomeState: '',
      cachedAt: 20,
      expiresAt: 30,
    };
    store.router.putDedup(fresh);
    assert.deepEqual(store.router.getDedup('p', 't:x'), fresh);
  });

  it('finds a message by id before and after the bulk index fill, and after a restart', () => {
    const records = [record(), record(), record()];
    store.transaction(() => {
      for (const r of records) store.router.insertMessage(r);
    });
    assert.equal(store.router.unindexedCount, 3, 'new ids wait for the bulk fill');
    for (const r of records)
      assert.equal(store.router.getMessage(r.envelope.messageId)?.envelope.messageId, r.envelope.messageId);
    store.transaction(() => store.router.fillIndex())();
    assert.equal(store.router.unindexedCount, 0);
    records[1].state = 'FULFILLED';
    store.router.updateMessage(records[1]);
    for (const r of records)
      assert.equal(store.router.getMessage(r.envelope.messageId)?.state, r.state, 'found through the index');
    const later = record();
    store.router.insertMessage(later);
    store.close();
    store = CoordinatorStore.open(dataDir);
    assert.equal(store.router.unindexedCount, 0, 'closing indexes what is left');
    for (const r of [...records, later]) assert.equal(store.router.getMessage(r.envelope.messageId)?.state, r.state);
  });

  it('keeps a commit whose ride-along index fill fails, and fills on a later commit', () => {
    const router = store.router;
    const fill = router.fillIndex.bind(router);
    const due = router.indexFillDue.bind(router);
    router.indexFillDue = () => true;
    router.fillIndex = () => {
      throw new Error('disk trouble');
    };
    const originalError = console.error;
    console.error = () => undefined;
    const r = record();
    try {
      store.transaction(() => router.insertMessage(r));
    } finally {
      console.error = originalError;
      router.fillIndex = fill;
      router.indexFillDue = due;
    }
    assert.equal(
      router.getMessage(r.envelope.messageId)?.envelope.messageId,
      r.envelope.messageId,
      'the message was committed',
    );
    assert.equal(router.unindexedCount, 1, 'still answered from memory');
    store.transaction(() => router.fillIndex())();
    assert.equal(router.unindexedCount, 0);
    assert.equal(router.getMessage(r.envelope.messageId)?.state, 'SENT');
  });

  it('after a crash, finds the messages the bulk fill had not reached', () => {
    const r = record();
    store.router.insertMessage(r);
    // A crash: the connection goes away without close(), so nothing more is indexed.
    (store as unknown as { engine: { database: DatabaseSync } }).engine.database.close();
    store = CoordinatorStore.open(dataDir);
    assert.equal(store.router.unindexedCount, 1, 'read back from the messages beyond the filled range');
    assert.equal(store.router.getMessage(r.envelope.messageId)?.envelope.messageId, r.envelope.messageId);
    assert.deepEqual(
      store.router.liveMessages().map((m) => m.envelope.messageId),
      [r.envelope.messageId],
    );
  });

  it('forgets a message whose insert was rolled back, even when its row id is reused', () => {
    const gone = record();
    assert.throws(
      () =>
        store.transaction(() => {
          store.router.insertMessage(gone);
          throw new Error('handler failed');
        }),
      /handler failed/,
    );
    assert.equal(store.router.getMessage(gone.envelope.messageId), undefined);
    const kept = record();
    store.router.insertMessage(kept);
    assert.equal(
      store.router.getMessage(gone.envelope.messageId),
      undefined,
      'the reused row belongs to another message',
    );
    gone.state = 'FULFILLED';
    store.router.updateMessage(gone);
    assert.equal(
      store.router.getMessage(kept.envelope.messageId)?.state,
      'SENT',
      'an update of the rolled-back record touches nothing',
    );
  });

  it('migrates messages and payloads of a schema-3 store, keeping every field and the live set', () => {
    store.close();
    removeTempDir(dataDir);
    dataDir = makeTempDir('sw4rm-router-repo-v3-');
    const db = new DatabaseSync(path.join(dataDir, STORE_FILE_NAME));
    for (const migration of COORDINATOR_SCHEMA.filter((m) => m.version <= 3))
      for (const statement of migration.statements) db.exec(statement);
    db.exec('PRAGMA user_version = 3');
    const ids = [uuidv4(), uuidv4()];
    for (const [i, id] of ids.entries()) {
      db.prepare(
        `INSERT INTO messages (message_id, producer_id, recipient_id, dedup_key, tracked, lane, ack_for, envelope, accepted_at, state,
        error_code, updated_at, ack_deadline, expires_at, delivery, delivery_seq, delivered_at, lease_until, delivery_attempts, history)
        VALUES (?, 'p', 'q', 's:1', 1, 'STANDARD', '', ?, 1000, ?, '', 1000, NULL, NULL, ?, NULL, NULL, NULL, 0, '[]')`,
      ).run(
        id,
        JSON.stringify({ messageId: id, producerId: 'p', messageType: 'DATA' }),
        i === 0 ? 'FULFILLED' : 'SENT',
        i === 0 ? 'done' : 'queued',
      );
      db.prepare('INSERT INTO message_payloads (message_id, payload) VALUES (?, ?)').run(
        id,
        Buffer.from(`payload ${i}`),
      );
      db.prepare('INSERT INTO deliveries (agent_id, seq, message_id, delivered_at) VALUES (?, ?, ?, 1000)').run(
        'q',
        i + 1,
        id,
      );
    }
    db.close();
    store = CoordinatorStore.open(dataDir);
    assert.equal(store.schemaVersion, LATEST_SCHEMA_VERSION);
    assert.equal(store.router.unindexedCount, 0, 'migrated messages are indexed');
    assert.equal(Buffer.from(store.router.getMessage(ids[0])!.envelope.payload).toString(), 'payload 0');
    assert.equal(store.router.getMessage(ids[1])?.state, 'SENT');
    assert.deepEqual(
      store.router.liveMessages().map((m) => m.envelope.messageId),
      [ids[1]],
    );
    assert.deepEqual(store.router.countByState(), { FULFILLED: 1, SENT: 1 });
    assert.equal(store.router.deliveryAt('q', 2), ids[1], 'deliveries are kept');
    assert.equal(store.router.lastSeq('q'), 2);
  });

  it('prunes finished messages changed before the cutoff, in arrival order within the scan limit, never the newest, and looks again later', () => {
    const finished = { state: 'FULFILLED', delivery: 'done' } as const;
    const old1 = record({ ...finished, acceptedAt: 1_000, updatedAt: 1_000 });
    const live = record({ state: 'SENT', delivery: 'queued', acceptedAt: 1_000, updatedAt: 1_000 });
    const old2 = record({ state: 'TIMED_OUT', delivery: 'done', acceptedAt: 1_500, updatedAt: 2_000 });
    const changedLately = record({ ...finished, acceptedAt: 2_000, updatedAt: 9_000 });
    const young = record({ ...finished, acceptedAt: 6_000, updatedAt: 6_000 });
    const newest = record({ ...finished, acceptedAt: 1_000, updatedAt: 1_000 });
    const all = [old1, live, old2, changedLately, young, newest];
    store.transaction(() => {
      for (const r of all) store.router.insertMessage(r);
    });
    const present = () => all.filter((r) => store.router.getMessage(r.envelope.messageId) !== undefined);

    assert.deepEqual(
      store.router.pruneMessages(5_000, 1),
      { deleted: 1, more: true },
      'the scan limit: only the oldest message is looked at, more to look at',
    );
    assert.deepEqual(present(), [live, old2, changedLately, young, newest]);
    assert.deepEqual(
      store.router.pruneMessages(5_000, 100),
      { deleted: 1, more: false },
      'old2; the scan stops at a message finished after the cutoff',
    );
    assert.deepEqual(present(), [live, changedLately, young, newest]);
    assert.deepEqual(
      store.router.pruneMessages(5_000, 100),
      { deleted: 0, more: false },
      'nothing more before the cutoff',
    );
    assert.deepEqual(store.router.countByState(), { SENT: 1, FULFILLED: 3 });
    assert.deepEqual(
      store.router.pruneMessages(10_000, 100),
      { deleted: 2, more: false },
      'a later cutoff takes the rest that is finished',
    );
    assert.deepEqual(present(), [live, newest], 'a live message is never deleted, nor the newest one');

    // Ids keep growing, so a message after a prune is found by the scan.
    const later = record({ ...finished, acceptedAt: 1_000, updatedAt: 1_000 });
    all.push(later);
    store.router.insertMessage(later);
    assert.equal(store.router.pruneMessages(10_000, 100).deleted, 1, 'newest goes now that a newer message exists');
    live.state = 'FULFILLED';
    live.delivery = 'done';
    store.router.updateMessage(live);
    assert.equal(store.router.pruneMessages(10_000, 100).deleted, 0, 'the scan passed live by while it was live');
    assert.equal(
      store.router.pruneMessages(10_000 + 24 * 3_600_000, 100).deleted,
      1,
      'a day later the scan starts from the oldest again',
    );
    assert.deepEqual(present(), [later]);

    const stuck = record({ state: 'SENT', delivery: 'queued', acceptedAt: 1_000, updatedAt: 1_000 });
    const last = record({ ...finished, acceptedAt: 1_000, updatedAt: 1_000 });
    all.push(stuck, last);
    store.transaction(() => {
      store.router.insertMessage(stuck);
      store.router.insertMessage(last);
    });
    assert.equal(store.router.pruneMessages(10_000 + 24 * 3_600_000, 100).deleted, 1, 'later; stuck is passed by');
    stuck.state = 'FAILED';
    stuck.delivery = 'done';
    store.router.updateMessage(stuck);
    assert.equal(store.router.pruneMessages(10_000 + 24 * 3_600_000, 100).deleted, 0);
    store.close();
    store = CoordinatorStore.open(dataDir);
    assert.equal(
      store.router.pruneMessages(10_000 + 24 * 3_600_000, 100).deleted,
      1,
      'after a restart, retention looks from the oldest again',
    );
    assert.deepEqual(present(), [last]);
    store.close();
    const db = new DatabaseSync(path.join(dataDir, STORE_FILE_NAME), { readOnly: true });
    try {
      for (const table of ['router_messages', 'router_envelopes', 'router_message_ids']) {
        assert.equal(
          (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n,
          1,
          `${table} holds only the newest message`,
        );
      }
    } finally {
      db.close();
      store = CoordinatorStore.open(dataDir);
    }
  });

  it('records deliveries per agent with the last seq, and prunes all but the newest `keep`', () => {
    for (let seq = 1; seq <= 10; seq++) store.router.recordDelivery('a', seq, `m${seq}`, seq);
    store.router.recordDelivery('b', 1, 'x', 1);
    assert.equal(store.router.lastSeq('a'), 10);
    assert.equal(store.router.lastSeq('nobody'), 0);
    assert.equal(store.router.deliveryAt('a', 4), 'm4');
    assert.equal(store.router.oldestDeliverySeq('a'), 1);
    store.router.pruneDeliveries('a', 3);
    assert.equal(store.router.oldestDeliverySeq('a'), 8);
    assert.equal(store.router.deliveryAt('a', 4), undefined);
    assert.equal(store.router.oldestDeliverySeq('b'), 1, 'other agents are untouched');
    assert.equal(store.router.oldestDeliverySeq('nobody'), 0);
  });
});

describe('Router message retention', () => {
  it('deletes finished messages after the retention but never within the dedup window, keeps live ones, and logs it', () => {
    const h = new RouterHarness({ messageRetentionMs: 60_000, dedupWindowMs: 3_600_000 });
    try {
      h.register('p');
      h.register('c');
      const done = h.sendData('p', 'c');
      const ack = h.ackEnvelope('c', done.messageId, 'FULFILLED');
      assert.ok(h.send(ack).accepted);
      const unanswered = h.sendData('p', 'c');
      h.clock.advance(30 * 60_000);
      assert.equal(
        h.state(done.messageId),
        'FULFILLED',
        'kept for the dedup window, although messageRetentionMs is shorter',
      );
      assert.equal(h.state(unanswered.messageId), 'TIMED_OUT');
      h.clock.advance(31 * 60_000);
      assert.equal(h.router.message(done.messageId), undefined, 'finished an hour ago: deleted');
      assert.equal(h.router.message(unanswered.messageId), undefined, 'timed out an hour ago: deleted');
      assert.ok(
        h.router.message(ack.messageId),
        'the ACK forwarded to p, which never streamed, is not finished with: kept',
      );
      const pruned = h.events('router.messages_pruned');
      assert.equal(
        pruned.reduce((sum, e) => sum + Number(e.details.messages), 0),
        2,
        'each deletion is logged',
      );
      assert.ok(pruned.every((e) => e.details.retention_hours === 1));
      assert.equal(
        reasonCode(h.ack('c', done.messageId, 'FULFILLED')),
        'NO_ROUTE',
        'a late ACK of a deleted message has no route',
      );
    } finally {
      h.dispose();
    }
  });
});

describe('Router message retention under a backlog', () => {
  it('deletes a backlog in bounded runs: 1,000 messages per run, the rest on catch-up runs 100 ms apart', () => {
    const h = new RouterHarness({ messageRetentionMs: 3_600_000, dedupWindowMs: 3_600_000 });
    try {
      const finishedAt = h.clock.now() - 2 * 3_600_000;
      const old = Array.from({ length: 2_500 }, () =>
        record({ state: 'FULFILLED', delivery: 'done', acceptedAt: finishedAt, updatedAt: finishedAt }),
      );
      h.store.transaction(() => {
        for (const r of old) h.store.router.insertMessage(r);
      });
      const pruned = () => h.events('router.messages_pruned').map((e) => e.details.messages);
      h.clock.advance(10_000);
      assert.deepEqual(pruned(), [1_000], 'one bounded run');
      h.clock.advance(100);
      assert.deepEqual(pruned(), [1_000, 1_000], 'a catch-up run 100 ms later');
      h.clock.advance(100);
      assert.deepEqual(pruned(), [1_000, 1_000, 499], 'the rest, all but the newest message');
      h.clock.advance(9_000);
      assert.deepEqual(pruned(), [1_000, 1_000, 499], 'caught up: the next run is a full interval later');
      assert.equal(old.filter((r) => h.store.router.getMessage(r.envelope.messageId)).length, 1);
    } finally {
      h.dispose();
    }
  });
});

describe('Router DLQ retention (RFC §21.1)', () => {
  it('keeps at most dlqMaxEntries and drops entries older than the retention, on housekeeping', () => {
    const h = new RouterHarness({ dlqMaxEntries: 2, dlqRetentionMs: 3_600_000 });
    try {
      h.register('p');
      h.register('c');
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const m = h.sendData('p', 'c');
        h.acked('c', m.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR' });
        ids.push(m.messageId);
      }
      assert.equal(h.router.deadLetterCount(), 3);
      h.clock.advance(60_000);
      assert.deepEqual(
        h.router.deadLetters().map((l) => l.messageId),
        [ids[2], ids[1]],
        'the newest two are kept',
      );
      h.clock.advance(3_600_000);
      assert.equal(h.router.deadLetterCount(), 0, 'older than the retention');
    } finally {
      h.dispose();
    }
  });
});
