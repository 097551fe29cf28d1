import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { ManualClock } from '../../src/core/clock';
import { Coordinator } from '../../src/core/coordinator';
import { CoordinatorStore, LATEST_SCHEMA_VERSION } from '../../src/core/coordinatorStore';
import type { Envelope } from '../../src/core/router/envelope';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { REPO_ROOT } from '../support/paths';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** Written by the release before the core became areas (see test/fixtures/store-v4/README.md). */
const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'store-v4', STORE_FILE_NAME);
const FULFILLED = '11111111-1111-4111-8111-111111111111';
const DEAD = '22222222-2222-4222-8222-222222222222';
const QUEUED = '33333333-3333-4333-8333-333333333333';
const PENDING_INVOCATION = '00000000-0000-4000-8000-000000000004';
const DECIDED_INVOCATION = '00000000-0000-4000-8000-000000000005';
const ctx = { correlationId: 'upgrade-test' };

/** Every row of every table, as text, to compare a file before and after. */
function dump(file: string): Record<string, string[]> {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const tables = db
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
      .all() as Array<{ name: string }>;
    return Object.fromEntries(
      tables.map(({ name }) => [
        name,
        db
          .prepare(`SELECT * FROM "${name}"`)
          .all()
          .map((row) =>
            JSON.stringify(row, (_k, v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v)),
          )
          .sort(),
      ]),
    );
  } finally {
    db.close();
  }
}

describe('a store written by the previous release (schema 4, before the core became areas)', () => {
  let dataDir: string;
  let file: string;

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-upgrade-');
    file = path.join(dataDir, STORE_FILE_NAME);
    fs.copyFileSync(FIXTURE, file);
  });

  afterEach(() => removeTempDir(dataDir));

  it('opens at the latest schema version, keeps every row of every table as it was, and adds only empty tables', () => {
    const before = dump(file);
    assert.ok(
      before.router_messages.length >= 5 && before.hitl_invocations.length === 2 && before.agents.length === 3,
      'the fixture has rows to keep',
    );
    const store = CoordinatorStore.open(dataDir);
    assert.equal(store.schemaVersion, LATEST_SCHEMA_VERSION);
    store.close();
    const after = dump(file);
    assert.deepEqual(
      Object.fromEntries(Object.keys(before).map((table) => [table, after[table]])),
      before,
      'every old row is kept as it was',
    );
    for (const table of Object.keys(after).filter((t) => !(t in before)))
      assert.deepEqual(after[table], [], `${table} is new and empty`);
  });

  it('serves what it holds: agents, messages, outcomes, dead letters, queued deliveries, approvals and events', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 20, 13, 0, 0));
    const coordinator = new Coordinator({
      store: CoordinatorStore.open(dataDir),
      clock,
      router: { heartbeatIntervalMs: 0 },
    });
    try {
      assert.deepEqual(
        coordinator.registry.list().map((a) => [a.descriptor.agentId, a.state, a.presence]),
        [
          ['alpha', 'RUNNABLE', 'disconnected'],
          ['beta', 'INITIALIZING', 'disconnected'],
          ['gamma', 'INITIALIZING', 'disconnected'],
        ],
      );

      assert.equal(coordinator.router.message(FULFILLED)?.state, 'FULFILLED');
      const retry = coordinator.router.send(
        envelopeFrom(coordinator.router.message(FULFILLED)!.envelope, {
          messageId: '55555555-5555-4555-8555-555555555555',
          sequenceNumber: '99',
          timestampMs: clock.now(),
        }),
        ctx,
        { to: 'beta' },
      );
      assert.equal(retry.accepted, false);
      assert.ok(
        !retry.accepted && retry.reason.startsWith('DUPLICATE_DETECTED: '),
        'the stored outcome answers a retry with the same token',
      );

      const letters = coordinator.router.deadLetters();
      assert.deepEqual(
        letters.map((l) => [l.messageId, l.finalState, l.recipientId]),
        [[DEAD, 'FAILED', 'beta']],
      );
      assert.deepEqual(
        JSON.parse(Buffer.from(coordinator.store.router.deadLetter(letters[0].id)!.envelope.payload).toString()),
        { step: 2 },
      );

      const delivered: Envelope[] = [];
      const handle = coordinator.router.attach(
        'gamma',
        { deliver: (_seq, envelope) => delivered.push(envelope), close: () => undefined },
        ctx,
      );
      await coordinator.store.whenDurable();
      assert.deepEqual(
        delivered.map((e) => [e.messageId, JSON.parse(Buffer.from(e.payload).toString()).text]),
        [[QUEUED, 'for gamma']],
        'the message queued for gamma by the old release reaches gamma',
      );
      handle.dispose();

      assert.equal(coordinator.hitl.get(DECIDED_INVOCATION)?.state, 'decided');
      assert.equal(coordinator.hitl.get(PENDING_INVOCATION)?.state, 'pending');
      const operator = coordinator.hitl.attachOperator('editor:upgrade');
      assert.equal(
        coordinator.hitl.decide(
          PENDING_INVOCATION,
          { action: 'approve', rationale: 'still answerable' },
          'editor:upgrade',
          ctx,
        ).state,
        'decided',
      );
      operator.dispose();
      assert.ok(
        coordinator.hitl.auditTrail({ invocationId: DECIDED_INVOCATION }).length >= 2,
        'the audit trail of the decided invocation is kept',
      );

      assert.deepEqual(
        coordinator.log.query({ eventType: 'agent.registered' }).map((e) => e.details.agent_id),
        ['alpha', 'beta', 'gamma'],
      );
    } finally {
      coordinator.dispose();
    }
  });
});

function envelopeFrom(original: Envelope, changes: Partial<Envelope>): Envelope {
  return { ...original, ...changes };
}
