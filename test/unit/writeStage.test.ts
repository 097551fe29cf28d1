import { strict as assert } from 'node:assert';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { StructuredEvent } from '../../src/core/log/model';
import { WriteBuffer } from '../../src/core/store/writeBuffer';
import { makeTempDir, removeTempDir } from '../support/tempDir';

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
    let dir: string;
    let store: CoordinatorStore;
    beforeEach(() => {
      dir = makeTempDir('sw4rm-stage-');
      store = CoordinatorStore.open(dir, { groupCommit: true });
    });
    afterEach(() => {
      store.close();
      removeTempDir(dir);
    });

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
      store.close();
      store = CoordinatorStore.open(dir, { groupCommit: true });
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
  });
});
