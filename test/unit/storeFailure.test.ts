import { strict as assert } from 'node:assert';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { v4 as uuidv4 } from 'uuid';
import { ManualClock } from '../../src/core/clock';
import { Coordinator } from '../../src/core/coordinator';
import { CoordinatorStore, LATEST_SCHEMA_VERSION, COORDINATOR_SCHEMA } from '../../src/core/coordinatorStore';
import type { StructuredEvent } from '../../src/core/log/model';
import type { Envelope } from '../../src/core/router/envelope';
import type { InboxSink } from '../../src/core/router/router';
import type { SchemaStep } from '../../src/core/store/schema';
import { StoreFailedError } from '../../src/core/store/store';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/**
 * A real commit failure, without mocks: recording an event of type `test.poison` inserts a row that breaks a
 * deferred foreign key, so every statement succeeds and SQLite refuses the COMMIT (as it would on a full disk).
 */
const POISON: SchemaStep = {
  version: LATEST_SCHEMA_VERSION + 1,
  area: 'test',
  description: 'test: an event that makes its commit fail',
  statements: [
    'CREATE TABLE poison_parent (id INTEGER PRIMARY KEY)',
    'CREATE TABLE poison_child (parent INTEGER REFERENCES poison_parent(id) DEFERRABLE INITIALLY DEFERRED)',
    `CREATE TRIGGER poison AFTER INSERT ON events WHEN NEW.event_type = 'test.poison'
       BEGIN INSERT INTO poison_child (parent) VALUES (42); END`,
  ],
};

function event(eventType: string): StructuredEvent {
  return {
    ts: '2026-01-01T00:00:00.000Z',
    correlationId: 'c',
    actor: 'test',
    eventType,
    level: 'INFO',
    source: 'coordinator',
    details: {},
  };
}

describe('a failed group commit (disk full, I/O error)', () => {
  let dataDir: string;
  let store: CoordinatorStore | undefined;

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-store-failure-');
  });

  afterEach(() => {
    store?.close();
    store = undefined;
    removeTempDir(dataDir);
  });

  it('rolls its batch back, rejects its waiters, drops its after-commit work, and refuses every later transaction', async () => {
    store = CoordinatorStore.open(dataDir, { groupCommit: true, schema: [...COORDINATOR_SCHEMA, POISON] });
    const s = store;
    const failures: StoreFailedError[] = [];
    s.onDidFail((err) => failures.push(err));
    s.transaction(() => s.events.append(event('test.kept')));
    await s.whenDurable();

    const ran: string[] = [];
    s.transaction(() => s.events.append(event('test.lost')));
    s.afterCommit(() => ran.push('after the failed commit'));
    s.transaction(() => s.events.append(event('test.poison')));
    await assert.rejects(s.whenDurable(), (err: unknown) => {
      assert.ok(err instanceof StoreFailedError, String(err));
      assert.match(err.message, /could not commit \(FOREIGN KEY constraint failed\)/);
      assert.ok(err.message.includes(s.location), 'names the file');
      assert.match(err.message, /no agent was told it was accepted/);
      return true;
    });
    assert.equal(ran.length, 0, 'work waiting for the failed commit never runs');
    assert.equal(failures.length, 1, 'onDidFail fires once');

    assert.throws(
      () => s.transaction(() => s.events.append(event('test.after'))),
      StoreFailedError,
      'no write on top of diverged memory',
    );
    await assert.rejects(s.whenDurable(), StoreFailedError);
    s.afterCommit(() => ran.push('later'));
    assert.equal(ran.length, 0);
    assert.equal(failures.length, 1);

    s.close();
    store = CoordinatorStore.open(dataDir, { schema: [...COORDINATOR_SCHEMA, POISON] });
    assert.deepEqual(
      store.events.query({ limit: 10 }).map((e) => e.eventType),
      ['test.kept'],
      'only what was committed',
    );
  });

  it('lets no timer throw into the event loop once the store refuses writes: the failure is logged', async () => {
    store = CoordinatorStore.open(dataDir, { groupCommit: true, schema: [...COORDINATOR_SCHEMA, POISON] });
    const s = store;
    const clock = new ManualClock();
    const coordinator = new Coordinator({ store: s, clock, router: { heartbeatIntervalMs: 0 } });
    try {
      const ctx = { correlationId: 'timers' };
      assert.ok(
        coordinator.registry.register(
          { agentId: 'slow', name: 'slow', communicationClass: 'STANDARD', modalitiesSupported: [] },
          ctx,
        ).accepted,
      );
      await s.whenDurable();
      s.transaction(() => coordinator.log.record({ correlationId: 'poison', actor: 'test', eventType: 'test.poison' }));
      await assert.rejects(s.whenDurable(), StoreFailedError);
      // The init timeout of 'slow', housekeeping, message and event retention all fall due in these two minutes.
      assert.doesNotThrow(() => clock.advance(120_000));
      const logged = s.events.query({ eventType: 'registry.internal_error', limit: 10 });
      assert.deepEqual(
        logged.map((e) => e.details.agent_id),
        ['slow', 'slow'],
        'its presence and init timeouts could not be stored, and say so',
      );
      assert.ok(logged.every((e) => /could not commit/.test(String(e.details.error))));
      assert.ok(
        s.events.query({ eventType: 'coordinator.internal_error', limit: 10 }).length >= 1,
        'so does the event retention',
      );
    } finally {
      coordinator.dispose();
      store = undefined;
    }
  });

  it('never delivers a message whose commit failed, and refuses messages after it (the owner restarts from the store)', async () => {
    store = CoordinatorStore.open(dataDir, { groupCommit: true, schema: [...COORDINATOR_SCHEMA, POISON] });
    const s = store;
    const coordinator = new Coordinator({ store: s, router: { heartbeatIntervalMs: 0 } });
    const ctx = { correlationId: 'store-failure' };
    try {
      for (const agentId of ['p', 'c']) {
        assert.ok(
          coordinator.registry.register(
            { agentId, name: agentId, communicationClass: 'STANDARD', modalitiesSupported: ['application/json'] },
            ctx,
          ).accepted,
        );
        coordinator.registry.heartbeat(agentId, 'RUNNABLE', {}, ctx);
      }
      await s.whenDurable();
      const delivered: string[] = [];
      const consumer: InboxSink = { deliver: (_seq, e) => delivered.push(e.messageId), close: () => undefined };
      coordinator.router.attach('c', consumer, ctx);
      let sequence = 0;
      const data = (): Envelope => {
        const payload = Buffer.from('{"n":1}');
        return {
          messageId: uuidv4(),
          idempotencyToken: '',
          producerId: 'p',
          correlationId: uuidv4(),
          sequenceNumber: String(++sequence),
          retryCount: 0,
          messageType: 'DATA',
          contentType: 'application/json',
          contentLength: String(payload.byteLength),
          repoId: '',
          worktreeId: '',
          hlcTimestamp: '',
          ttlMs: 0,
          timestampMs: Date.now(),
          payload,
          parentCorrelationId: '',
        };
      };

      const committed = data();
      assert.ok(coordinator.router.send(committed, ctx, { to: 'c' }).accepted);
      await s.whenDurable();
      await nextTurn();
      assert.deepEqual(delivered, [committed.messageId]);

      const lost = data();
      assert.ok(
        coordinator.router.send(lost, ctx, { to: 'c' }).accepted,
        'admitted, but its answer waits for the commit',
      );
      coordinator.log.record({ correlationId: 'poison', actor: 'test', eventType: 'test.poison' });
      await assert.rejects(
        s.whenDurable(),
        StoreFailedError,
        'so the producer is answered with an error, never accepted',
      );
      // The consumer reconnects: a new stream is where unconfirmed deliveries are sent again.
      try {
        coordinator.router.attach('c', consumer, ctx);
      } catch (err) {
        assert.ok(err instanceof StoreFailedError, String(err));
      }
      for (let i = 0; i < 5; i++) await nextTurn();
      assert.deepEqual(delivered, [committed.messageId], 'the message whose commit failed is never delivered');
      assert.throws(() => coordinator.router.send(data(), ctx, { to: 'c' }), StoreFailedError);
    } finally {
      coordinator.dispose();
      store = undefined;
    }

    store = CoordinatorStore.open(dataDir, { schema: [...COORDINATOR_SCHEMA, POISON] });
    const restarted = new Coordinator({ store, router: { heartbeatIntervalMs: 0 } });
    try {
      assert.equal(
        restarted.router.stateCounts().SENT,
        1,
        'after the restart: the committed message, waiting for its ACK',
      );
      assert.equal(restarted.router.stateCounts().TIMED_OUT ?? 0, 0);
    } finally {
      restarted.dispose();
      store = undefined;
    }
  });
});
