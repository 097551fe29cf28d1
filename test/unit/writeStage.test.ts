import { strict as assert } from 'node:assert';
import { DatabaseSync } from 'node:sqlite';
import * as path from 'node:path';
import type { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { StructuredEvent } from '../../src/core/log/model';
import type { MessageRecord } from '../../src/core/router/model';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { WriteBuffer } from '../../src/core/store/writeBuffer';
import { envelopeFromMessage } from '../../src/server/services/routerService';
import { StoreFixture } from '../support/coordinatorFixture';
import { envelope } from '../support/routerClient';

function event(eventType: string): StructuredEvent {
  return {
    ts: '2026-01-01T00:00:00.000Z',
    correlationId: 'c',
    actor: 'test',
    eventType,
    level: 'INFO',
    source: 'coordinator',
    details: { eventType },
  };
}

/** A DATA message from p to q as the router accepts it: its envelope as the RouterService decodes one. */
function message(): MessageRecord {
  return {
    envelope: envelopeFromMessage(
      envelope({ producer_id: 'p', sequence_number: 1, correlation_id: 'c', payload: { a: 1 }, timestamp: null }),
    ),
    recipientId: 'q',
    dedupKey: 's:1',
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
  };
}

describe('write stages (rows held back until the commit)', () => {
  describe('WriteBuffer', () => {
    const buffer = (): { b: WriteBuffer<string, number>; written: Array<Array<readonly [string, number]>> } => {
      const written: Array<Array<readonly [string, number]>> = [];
      return { b: new WriteBuffer<string, number>((entries) => written.push([...entries])), written };
    };

    it('writes a key staged twice once, with its first value', () => {
      const { b, written } = buffer();
      b.stage('a', 1);
      b.stage('a', 2);
      b.stage('b', 3);
      b.flush();
      b.flush();
      assert.deepEqual(written, [
        [
          ['a', 1],
          ['b', 3],
        ],
      ]);
    });

    it('a rewind drops what was staged after the mark only', () => {
      const { b, written } = buffer();
      b.stage('before', 1);
      const mark = b.mark();
      b.stage('after', 2);
      b.stage('before', 3);
      b.rewind(mark);
      b.flush();
      assert.deepEqual(written, [[['before', 1]]]);
    });

    it('a rewind stages again what a flush after the mark wrote but was staged before it', () => {
      const { b, written } = buffer();
      b.stage('before', 1);
      const mark = b.mark();
      b.stage('after', 2);
      b.flush(); // a read inside the savepoint: SQLite undoes this write when the savepoint rolls back
      b.rewind(mark);
      b.flush();
      assert.deepEqual(written, [
        [
          ['before', 1],
          ['after', 2],
        ],
        [['before', 1]],
      ]);
    });

    it('a flush before the mark is not undone by its rewind', () => {
      const { b, written } = buffer();
      b.stage('early', 1);
      b.flush();
      const mark = b.mark();
      b.stage('late', 2);
      b.rewind(mark);
      b.flush();
      assert.deepEqual(written, [[['early', 1]]]);
    });
  });

  describe('through the store', () => {
    let fixture: StoreFixture;
    let store: CoordinatorStore;
    beforeEach(() => {
      fixture = new StoreFixture({ prefix: 'sw4rm-stage-', store: { groupCommit: true } });
      store = fixture.store;
    });
    afterEach(() => fixture.dispose());

    it('events of a group commit are in the file once it is durable, ids in order and never reused', async () => {
      const ids: number[] = [];
      for (let i = 0; i < 40; i++) store.transaction(() => ids.push(store.events.append(event(`e${i}`))));
      assert.throws(() =>
        store.transaction(() => {
          ids.push(store.events.append(event('rolled back')));
          throw new Error('unit fails');
        }),
      );
      store.transaction(() => ids.push(store.events.append(event('after'))));
      await store.whenDurable();
      const stored = store.events.query({ limit: 100 });
      assert.deepEqual(
        stored.map((e) => e.eventType),
        [...Array.from({ length: 40 }, (_, i) => `e${i}`), 'after'],
      );
      assert.deepEqual(
        stored.map((e) => e.id),
        [...ids.slice(0, 40), ids[41]],
      );
      assert.ok(ids.every((id, i) => i === 0 || id > ids[i - 1]));
      assert.deepEqual(stored[0].details, { eventType: 'e0' });
      fixture.reopen();
      store = fixture.store;
      assert.equal(store.events.count(), 41);
      store.transaction(() => assert.ok(store.events.append(event('next')) > ids[41]));
    });

    it('a read inside a unit that then fails keeps what earlier units staged', async () => {
      store.transaction(() => store.events.append(event('kept')));
      assert.throws(() =>
        store.savepoint(() => {
          store.events.append(event('dropped'));
          assert.equal(store.events.count(), 2); // the read flushes both
          throw new Error('unit fails');
        }),
      );
      await store.whenDurable();
      assert.deepEqual(
        store.events.query().map((e) => e.eventType),
        ['kept'],
      );
    });
    it('a message inserted and updated in one commit is one row with its last state, readable before and after', async () => {
      const r = message();
      store.transaction(() => store.router.insertMessage(r));
      store.transaction(() => {
        r.delivery = 'inflight';
        r.deliverySeq = 1;
        r.history.push({ at: 1_001, event: 'delivered' });
        store.router.updateMessage(r);
      });
      // A read inside the open commit sees what is staged.
      assert.equal(store.router.getMessage(r.envelope.messageId)?.delivery, 'inflight');
      store.transaction(() => {
        r.delivery = 'done';
        r.state = 'FULFILLED';
        store.router.updateMessage(r);
      });
      r.envelope = { ...r.envelope, payload: new Uint8Array(0) }; // as memory drops a large payload after acceptance
      await store.whenDurable();
      fixture.reopen(() => {
        const db = new DatabaseSync(path.join(fixture.dataDir, STORE_FILE_NAME), { readOnly: true });
        try {
          const rows = db.prepare('SELECT state, delivery, delivery_seq, history FROM router_messages').all();
          assert.equal(rows.length, 1);
          assert.equal(rows[0].state, 'FULFILLED');
          assert.equal(rows[0].delivery, 'done');
          assert.equal(rows[0].delivery_seq, 1);
          assert.equal(JSON.parse(String(rows[0].history)).length, 2);
          const payload = db.prepare('SELECT payload FROM router_envelopes').get()?.payload as Uint8Array;
          assert.equal(Buffer.from(payload).toString(), '{"a":1}');
        } finally {
          db.close();
        }
      });
      store = fixture.store;
      assert.equal(store.router.getMessage(r.envelope.messageId)?.state, 'FULFILLED');
    });

    it('a unit that fails leaves no row of the message it inserted, and the next message gets a new id', async () => {
      const dropped = message();
      assert.throws(() =>
        store.transaction(() => {
          store.router.insertMessage(dropped);
          throw new Error('unit fails');
        }),
      );
      const kept = message();
      store.transaction(() => store.router.insertMessage(kept));
      await store.whenDurable();
      assert.equal(store.router.getMessage(dropped.envelope.messageId), undefined);
      assert.equal(store.router.getMessage(kept.envelope.messageId)?.envelope.messageId, kept.envelope.messageId);
      assert.deepEqual(store.router.countByState(), { SENT: 1 });
    });

    it('a copy of a message read back and updated after the staged one is written last', async () => {
      const r = message();
      store.transaction(() => store.router.insertMessage(r));
      await store.whenDurable();
      store.transaction(() => {
        const copy = store.router.getMessage(r.envelope.messageId)!;
        r.state = 'RECEIVED';
        store.router.updateMessage(r);
        copy.state = 'READ';
        store.router.updateMessage(copy);
      });
      await store.whenDurable();
      assert.equal(store.router.getMessage(r.envelope.messageId)?.state, 'READ');
    });
  });
});
