import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { CoordinatorStore, LATEST_SCHEMA_VERSION, COORDINATOR_SCHEMA } from '../../src/core/coordinatorStore';
import type { EventQuery, StructuredEvent } from '../../src/core/log/model';
import { validateDescriptor } from '../../src/core/registry/descriptor';
import type { AgentRecord } from '../../src/core/registry/model';
import type { SchemaStep } from '../../src/core/store/schema';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { StoreOpenError } from '../../src/core/store/store';
import { fingerprint, validDescriptor, writeGarbage } from '../support/fixtures';
import { makeTempDir, removeTempDir } from '../support/tempDir';

function agentRecord(agentId: string, state = 'INITIALIZING'): AgentRecord {
  const verdict = validateDescriptor(validDescriptor(agentId));
  assert.ok(verdict.ok);
  return {
    descriptor: verdict.descriptor,
    state,
    registeredAt: 1_000,
    updatedAt: 2_000,
    lastHeartbeatAt: null,
    health: { load: 'low' },
    presence: 'online',
  };
}

function event(eventType: string, correlationId: string, actor: string): StructuredEvent {
  return {
    ts: '2026-01-01T00:00:00.000Z',
    correlationId,
    actor,
    eventType,
    level: 'INFO',
    source: 'coordinator',
    details: { n: 1 },
  };
}

/** Reads a PRAGMA through a second, independent connection. */
function pragma(file: string, name: string): unknown {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const row = db.prepare(`PRAGMA ${name}`).get() as Record<string, unknown>;
    return Object.values(row)[0];
  } finally {
    db.close();
  }
}

async function expectOpenError(open: () => unknown): Promise<StoreOpenError> {
  try {
    open();
  } catch (err) {
    assert.ok(err instanceof StoreOpenError, `expected StoreOpenError, got ${String(err)}`);
    return err;
  }
  assert.fail('the store opened');
}

/** A made-up migration one past the latest, so these tests stay right as the schema grows. */
const NEXT_VERSION = LATEST_SCHEMA_VERSION + 1;
const NEXT: SchemaStep = {
  version: NEXT_VERSION,
  area: 'test',
  description: 'agent notes',
  statements: [
    'ALTER TABLE agents ADD COLUMN note TEXT',
    `CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)`,
  ],
};

describe('SqliteStore', () => {
  let dataDir: string;
  let file: string;
  let store: CoordinatorStore | undefined;

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-store-');
    file = path.join(dataDir, STORE_FILE_NAME);
  });

  afterEach(() => {
    store?.close();
    store = undefined;
    removeTempDir(dataDir);
  });

  describe('opening', () => {
    it('creates a fresh store at the latest schema version in WAL mode', () => {
      store = CoordinatorStore.open(dataDir);
      assert.equal(store.location, file);
      assert.equal(store.schemaVersion, LATEST_SCHEMA_VERSION);
      store.agents.upsert(agentRecord('alpha'));
      assert.ok(fs.existsSync(`${file}-wal`), 'writes go through the write-ahead log');
      store.close();
      // The store holds the file's lock while open, so its header is read once it is closed.
      assert.equal(pragma(file, 'user_version'), LATEST_SCHEMA_VERSION);
      assert.equal(pragma(file, 'journal_mode'), 'wal');
    });

    it('refuses a second store on the same folder while the first is open, and changes nothing', async () => {
      store = CoordinatorStore.open(dataDir);
      store.agents.upsert(agentRecord('alpha'));
      const error = await expectOpenError(() => CoordinatorStore.open(dataDir, { lockWaitMs: 50 }));
      assert.equal(error.reason, 'locked');
      assert.ok(error.message.includes(file), 'the message names the file');
      assert.match(error.message, /another running coordinator/);
      assert.deepEqual(store.agents.get('alpha'), agentRecord('alpha'));
      store.close();
      store = CoordinatorStore.open(dataDir, { lockWaitMs: 50 });
      assert.deepEqual(store.agents.get('alpha'), agentRecord('alpha'), 'open again once the first one closed');
    });

    it('creates the data folder when it does not exist', () => {
      const nested = path.join(dataDir, 'a', 'b');
      store = CoordinatorStore.open(nested);
      assert.ok(fs.existsSync(path.join(nested, STORE_FILE_NAME)));
    });

    it('keeps its data across close and reopen', () => {
      store = CoordinatorStore.open(dataDir);
      store.agents.upsert(agentRecord('alpha'));
      store.events.append(event('agent.registered', 'c1', 'alpha'));
      store.close();

      store = CoordinatorStore.open(dataDir);
      assert.deepEqual(store.agents.get('alpha'), agentRecord('alpha'));
      assert.equal(store.events.count(), 1);
      assert.equal(store.schemaVersion, LATEST_SCHEMA_VERSION);
    });

    it('prunes the oldest events in bounded batches towards the newest `keep`, and says when more are due', () => {
      store = CoordinatorStore.open(dataDir);
      const events = store.events;
      assert.deepEqual(events.prune(5, 10), { deleted: 0, more: false }, 'an empty log');
      for (let i = 0; i < 30; i++) events.append(event('e', `c${i}`, 'a'));
      assert.deepEqual(events.prune(5, 10), { deleted: 10, more: true }, 'a batch of the oldest');
      assert.deepEqual(events.prune(5, 10), { deleted: 10, more: true });
      assert.deepEqual(events.prune(5, 10), { deleted: 5, more: false }, 'down to the newest five');
      assert.deepEqual(events.prune(5, 10), { deleted: 0, more: false });
      assert.deepEqual(
        events.query({ limit: 100 }).map((e) => e.correlationId),
        ['c25', 'c26', 'c27', 'c28', 'c29'],
      );
    });

    it('migrates an existing store forward and keeps its rows', () => {
      store = CoordinatorStore.open(dataDir);
      store.agents.upsert(agentRecord('alpha'));
      store.events.append(event('agent.registered', 'c1', 'alpha'));
      store.close();

      store = CoordinatorStore.open(dataDir, { schema: [...COORDINATOR_SCHEMA, NEXT] });

      assert.equal(store.schemaVersion, NEXT_VERSION);
      assert.deepEqual(store.agents.get('alpha'), agentRecord('alpha'));
      assert.equal(store.events.count(), 1);
      store.close();
      store = undefined;
      assert.equal(pragma(file, 'user_version'), NEXT_VERSION);
      const db = new DatabaseSync(file, { readOnly: true });
      try {
        const columns = (db.prepare('PRAGMA table_info(agents)').all() as Array<{ name: string }>).map((c) => c.name);
        assert.ok(columns.includes('note'));
        assert.equal((db.prepare(`SELECT COUNT(*) AS n FROM notes`).get() as { n: number }).n, 0);
      } finally {
        db.close();
      }
    });

    it('leaves the store at its version when a migration fails, and says which one', async () => {
      store = CoordinatorStore.open(dataDir);
      store.agents.upsert(agentRecord('alpha'));
      store.close();
      store = undefined;
      const broken: SchemaStep = {
        version: NEXT_VERSION,
        area: 'test',
        description: 'broken',
        statements: ['CREATE TABLE t (x)', 'NOT SQL AT ALL'],
      };

      const error = await expectOpenError(() =>
        CoordinatorStore.open(dataDir, { schema: [...COORDINATOR_SCHEMA, broken] }),
      );

      assert.match(error.message, new RegExp(`schema version ${NEXT_VERSION} \\(broken\\)`));
      assert.match(error.message, new RegExp(`left at version ${LATEST_SCHEMA_VERSION}`));
      assert.equal(pragma(file, 'user_version'), LATEST_SCHEMA_VERSION);
      store = CoordinatorStore.open(dataDir);
      assert.ok(store.agents.get('alpha'));
    });

    it('refuses a store written by a newer schema and leaves the file unchanged', async () => {
      store = CoordinatorStore.open(dataDir, { schema: [...COORDINATOR_SCHEMA, NEXT] });
      store.agents.upsert(agentRecord('alpha'));
      store.close();
      store = undefined;
      const before = fingerprint(file);

      const error = await expectOpenError(() => CoordinatorStore.open(dataDir));

      assert.equal(error.reason, 'newer-schema');
      assert.equal(error.location, file);
      assert.ok(error.message.includes(file), error.message);
      assert.match(error.message, new RegExp(`schema version ${NEXT_VERSION}`));
      assert.match(error.message, /not changed/);
      const after = fingerprint(file);
      assert.ok(after.bytes.equals(before.bytes), 'the bytes are the same');
      assert.equal(after.mtimeMs, before.mtimeMs);
      assert.equal(pragma(file, 'user_version'), NEXT_VERSION);
    });

    it('refuses a file that is not a store, naming it and saying what to do, and leaves it unchanged', async () => {
      const garbage = writeGarbage(file);
      const before = fingerprint(file);

      const error = await expectOpenError(() => CoordinatorStore.open(dataDir));

      assert.equal(error.reason, 'corrupt');
      assert.equal(error.name, 'StoreOpenError');
      assert.equal(error.location, file);
      assert.ok(error.message.includes(file), error.message);
      assert.match(error.message, /damaged/);
      assert.match(error.message, /Move the file aside/);
      assert.match(error.message, /not changed it/);
      const after = fingerprint(file);
      assert.ok(after.bytes.equals(garbage));
      assert.equal(after.mtimeMs, before.mtimeMs);
      assert.deepEqual(fs.readdirSync(dataDir), [STORE_FILE_NAME], 'no -wal or -shm file is left behind');
    });

    it('refuses a store whose pages were overwritten', async () => {
      store = CoordinatorStore.open(dataDir);
      for (let i = 0; i < 200; i++) store.events.append(event('e', `c${i}`, 'a'.repeat(200)));
      store.close();
      store = undefined;
      const bytes = fs.readFileSync(file);
      assert.ok(bytes.length > 8192);
      // Keep the header page (so SQLite recognises the file) and scribble over the rest.
      bytes.fill(0xa5, 4096);
      fs.writeFileSync(file, bytes);
      const before = fingerprint(file);

      const error = await expectOpenError(() => CoordinatorStore.open(dataDir));

      assert.equal(error.reason, 'corrupt');
      assert.ok(error.message.includes(file));
      assert.ok(fingerprint(file).bytes.equals(before.bytes));
    });
  });

  describe('transactions', () => {
    beforeEach(() => {
      store = CoordinatorStore.open(dataDir);
    });

    it('commits every write of the function together', () => {
      const value = store!.transaction(() => {
        store!.agents.upsert(agentRecord('alpha'));
        store!.events.append(event('agent.registered', 'c1', 'alpha'));
        return 42;
      });
      assert.equal(value, 42);
      assert.ok(store!.agents.get('alpha'));
      assert.equal(store!.events.count(), 1);
    });

    it('rolls every write back when the function throws, and rethrows', () => {
      store!.agents.upsert(agentRecord('before'));
      assert.throws(
        () =>
          store!.transaction(() => {
            store!.agents.upsert(agentRecord('alpha'));
            store!.agents.delete('before');
            store!.events.append(event('agent.registered', 'c1', 'alpha'));
            throw new Error('boom');
          }),
        /boom/,
      );
      assert.equal(store!.agents.get('alpha'), undefined);
      assert.ok(store!.agents.get('before'));
      assert.equal(store!.events.count(), 0);
    });

    it('joins a nested transaction to the outer one', () => {
      assert.throws(() =>
        store!.transaction(() => {
          store!.transaction(() => store!.agents.upsert(agentRecord('inner')));
          throw new Error('outer fails');
        }),
      );
      assert.equal(store!.agents.get('inner'), undefined);
      store!.transaction(() => store!.transaction(() => store!.agents.upsert(agentRecord('inner'))));
      assert.ok(store!.agents.get('inner'));
    });
  });

  describe('agents', () => {
    beforeEach(() => {
      store = CoordinatorStore.open(dataDir);
    });

    it('upserts, lists by id, and deletes', () => {
      store!.agents.upsert(agentRecord('beta'));
      store!.agents.upsert(agentRecord('alpha'));
      store!.agents.upsert(agentRecord('alpha', 'RUNNABLE'));
      assert.deepEqual(
        store!.agents.list().map((a) => [a.descriptor.agentId, a.state]),
        [
          ['alpha', 'RUNNABLE'],
          ['beta', 'INITIALIZING'],
        ],
      );
      assert.equal(store!.agents.delete('alpha'), true);
      assert.equal(store!.agents.delete('alpha'), false);
      assert.equal(store!.agents.get('alpha'), undefined);
    });
  });

  describe('events', () => {
    beforeEach(() => {
      store = CoordinatorStore.open(dataDir);
      const events = store.events;
      events.append(event('agent.registered', 'c1', 'alpha'));
      events.append(event('agent.registered', 'c2', 'beta'));
      events.append(event('agent.state_changed', 'c1', 'alpha'));
      events.append({
        ...event('agent.deregistered', 'c3', 'alpha'),
        level: 'WARN',
        source: 'agent',
        details: { nested: { a: [1, 2] } },
      });
    });

    it('keeps every field of an event', () => {
      const [last] = store!.events.query({ correlationId: 'c3' });
      assert.deepEqual(last, {
        id: 4,
        ts: '2026-01-01T00:00:00.000Z',
        correlationId: 'c3',
        actor: 'alpha',
        eventType: 'agent.deregistered',
        level: 'WARN',
        source: 'agent',
        details: { nested: { a: [1, 2] } },
      });
      assert.equal(store!.events.count(), 4);
    });

    it('filters by type, correlation id, actor and position, combined', () => {
      const ids = (q: EventQuery) => store!.events.query(q).map((e) => e.id);
      assert.deepEqual(ids({}), [1, 2, 3, 4]);
      assert.deepEqual(ids({ eventType: 'agent.registered' }), [1, 2]);
      assert.deepEqual(ids({ correlationId: 'c1' }), [1, 3]);
      assert.deepEqual(ids({ actor: 'alpha' }), [1, 3, 4]);
      assert.deepEqual(ids({ afterId: 2 }), [3, 4]);
      assert.deepEqual(ids({ actor: 'alpha', correlationId: 'c1', eventType: 'agent.state_changed' }), [3]);
      assert.deepEqual(ids({ eventType: 'nothing' }), []);
    });

    it('answers the newest `limit` events in ascending order', () => {
      assert.deepEqual(
        store!.events.query({ limit: 2 }).map((e) => e.id),
        [3, 4],
      );
      assert.deepEqual(
        store!.events.query({ actor: 'alpha', limit: 2 }).map((e) => e.id),
        [3, 4],
      );
      assert.deepEqual(
        store!.events.query({ limit: 0 }).map((e) => e.id),
        [4],
        'a limit below 1 still answers one',
      );
    });

    it('treats filter values as data, not SQL', () => {
      assert.deepEqual(store!.events.query({ actor: "alpha' OR '1'='1" }), []);
      assert.equal(store!.events.count(), 4);
    });
  });
});
