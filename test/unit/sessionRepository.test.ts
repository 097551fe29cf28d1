import { strict as assert } from 'node:assert';
import { DatabaseSync } from 'node:sqlite';
import { COORDINATOR_SCHEMA, LATEST_SCHEMA_VERSION } from '../../src/core/coordinatorStore';
import type { SessionRecord, StoredEntry, TranscriptEntry } from '../../src/core/sessions/model';
import { SESSION_SQL } from '../../src/core/sessions/sqliteSessionRepository';
import { StoreFixture } from '../support/coordinatorFixture';

function record(agentId: string, extra: Partial<SessionRecord> = {}): SessionRecord {
  return {
    agentId,
    profileId: 'claude-code',
    state: 'idle',
    sessionId: `acp-${agentId}`,
    agentName: 'claude-agent-acp',
    agentVersion: '0.23.1',
    loadSession: true,
    turn: null,
    exitCode: null,
    error: null,
    startedAt: 1_000,
    updatedAt: 2_000,
    dropped: 0,
    ...extra,
  };
}

/** Entries seq `from`..`to` (inclusive): agent text naming its seq. */
function texts(from: number, to: number): StoredEntry[] {
  const out: StoredEntry[] = [];
  for (let seq = from; seq <= to; seq++)
    out.push({ seq, entry: { kind: 'agent', at: seq, turn: 1, text: `text ${seq}` } });
  return out;
}

const seqs = (entries: readonly StoredEntry[]): number[] => entries.map((e) => e.seq);

describe('session repository (schema version 19, on a real store file)', () => {
  let fixture: StoreFixture;

  beforeEach(() => {
    fixture = new StoreFixture({ prefix: 'sw4rm-sessions-' });
  });

  afterEach(() => fixture.dispose());

  it('opens at version 19 or later with both tables in the file', () => {
    assert.ok(LATEST_SCHEMA_VERSION >= 19);
    assert.equal(fixture.store.schemaVersion, LATEST_SCHEMA_VERSION);
    let tables: string[] = [];
    // The store holds its file's lock while open: read the file while it is closed.
    fixture.reopen(() => {
      const db = new DatabaseSync(fixture.store.location, { readOnly: true });
      try {
        tables = (
          db
            .prepare(
              `SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('agent_sessions', 'session_entries') ORDER BY name`,
            )
            .all() as Array<{ name: string }>
        ).map((r) => r.name);
      } finally {
        db.close();
      }
    });
    assert.deepEqual(tables, ['agent_sessions', 'session_entries']);
  });

  it('puts, gets and lists records; a second put replaces the record', () => {
    const { store } = fixture;
    assert.equal(store.sessions.get('a1'), undefined);
    assert.deepEqual(store.sessions.list(), []);
    const working = record('a1', {
      state: 'working',
      turn: { number: 3, origin: { kind: 'task', taskId: 't-1' }, startedAt: 1_500 },
    });
    store.transaction(() => {
      store.sessions.put(record('b2'));
      store.sessions.put(record('a1'));
      store.sessions.put(working);
    });
    assert.deepEqual(store.sessions.get('a1'), working);
    assert.deepEqual(store.sessions.get('b2'), record('b2'));
    assert.deepEqual(store.sessions.list(), [working, record('b2')], 'one record per agent, in agent id order');
  });

  it('putEntries inserts, and replaces the entry of a seq already stored', () => {
    const { store } = fixture;
    store.transaction(() => store.sessions.putEntries('a1', texts(0, 2)));
    assert.deepEqual(store.sessions.entries('a1'), texts(0, 2));

    const tool = (status: string): TranscriptEntry => ({
      kind: 'tool',
      at: 10,
      turn: 1,
      toolCallId: 'call-1',
      title: 'Write a.txt',
      toolKind: 'edit',
      status,
      paths: ['a.txt'],
      diffs: [{ path: 'a.txt', oldText: null, newText: 'hello\n' }],
      output: '',
    });
    store.transaction(() => store.sessions.putEntries('a1', [{ seq: 1, entry: tool('pending') }]));
    store.transaction(() => store.sessions.putEntries('a1', [{ seq: 1, entry: tool('completed') }, ...texts(3, 3)]));
    const entries = store.sessions.entries('a1');
    assert.deepEqual(seqs(entries), [0, 1, 2, 3], 'seq 1 replaced, not added');
    assert.deepEqual(entries[1], { seq: 1, entry: tool('completed') });
    assert.deepEqual(entries[2], texts(2, 2)[0]);
    assert.deepEqual(store.sessions.entries('other'), [], "another agent's transcript is apart");
  });

  it('entries: all in ascending seq order without a limit, else the last `limit` in ascending order', () => {
    const { store } = fixture;
    // Written out of order, and another agent's between: answered by seq.
    store.transaction(() => {
      store.sessions.putEntries('a1', texts(5, 9));
      store.sessions.putEntries('b2', texts(0, 20));
      store.sessions.putEntries('a1', texts(0, 4));
    });
    assert.deepEqual(store.sessions.entries('a1'), texts(0, 9));
    assert.deepEqual(store.sessions.entries('a1', 3), texts(7, 9));
    assert.deepEqual(store.sessions.entries('a1', 1), texts(9, 9));
    assert.deepEqual(store.sessions.entries('a1', 10), texts(0, 9));
    assert.deepEqual(store.sessions.entries('a1', 50), texts(0, 9), 'a limit past the count answers all');
    assert.deepEqual(store.sessions.entries('a1', 0), []);
    assert.deepEqual(seqs(store.sessions.entries('b2', 4)), [17, 18, 19, 20]);
  });

  it('dropEntriesBefore removes the seqs below its bound for that agent only, and answers how many', () => {
    const { store } = fixture;
    store.transaction(() => {
      store.sessions.putEntries('a1', texts(0, 9));
      store.sessions.putEntries('b2', texts(0, 9));
    });
    assert.equal(
      store.transaction(() => store.sessions.dropEntriesBefore('a1', 4)),
      4,
    );
    assert.deepEqual(store.sessions.entries('a1'), texts(4, 9));
    assert.equal(
      store.transaction(() => store.sessions.dropEntriesBefore('a1', 4)),
      0,
      'nothing left below 4',
    );
    assert.equal(
      store.transaction(() => store.sessions.dropEntriesBefore('a1', 8)),
      4,
    );
    assert.deepEqual(store.sessions.entries('a1'), texts(8, 9));
    assert.deepEqual(store.sessions.entries('b2'), texts(0, 9), "another agent's entries are kept");
  });

  it('delete removes the record and every entry of the agent, and answers whether there was a record', () => {
    const { store } = fixture;
    store.transaction(() => {
      store.sessions.put(record('a1'));
      store.sessions.putEntries('a1', texts(0, 5));
      store.sessions.put(record('b2'));
      store.sessions.putEntries('b2', texts(0, 2));
    });
    assert.equal(
      store.transaction(() => store.sessions.delete('a1')),
      true,
    );
    assert.equal(store.sessions.get('a1'), undefined);
    assert.deepEqual(store.sessions.entries('a1'), []);
    assert.deepEqual(store.sessions.list(), [record('b2')]);
    assert.deepEqual(store.sessions.entries('b2'), texts(0, 2));
    assert.equal(
      store.transaction(() => store.sessions.delete('a1')),
      false,
      'nothing to delete the second time',
    );
    // Entries stored before any record are removed too.
    store.transaction(() => store.sessions.putEntries('c3', texts(0, 1)));
    assert.equal(
      store.transaction(() => store.sessions.delete('c3')),
      false,
    );
    assert.deepEqual(store.sessions.entries('c3'), []);
  });

  it('keeps records and entries across closing and reopening the store', () => {
    const exited = record('a1', { state: 'exited', exitCode: 1, error: 'the process ended', dropped: 2 });
    fixture.store.transaction(() => {
      fixture.store.sessions.put(exited);
      fixture.store.sessions.putEntries('a1', texts(2, 6));
    });
    fixture.reopen();
    assert.deepEqual(fixture.store.sessions.get('a1'), exited);
    assert.deepEqual(fixture.store.sessions.list(), [exited]);
    assert.deepEqual(fixture.store.sessions.entries('a1'), texts(2, 6));
    assert.deepEqual(fixture.store.sessions.entries('a1', 2), texts(5, 6));
  });
});

describe('session repository: queries', () => {
  /** EXPLAIN QUERY PLAN's detail lines for a statement (its parameters bound to placeholders). */
  function plan(db: DatabaseSync, sql: string): string[] {
    const params = (sql.match(/\?/g) ?? []).map(() => 'x');
    return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail);
  }

  it('reads, drops and deletes of one agent use the primary key: no whole-table scan, no sort', () => {
    const db = new DatabaseSync(':memory:');
    for (const step of COORDINATOR_SCHEMA) for (const sql of step.statements) db.exec(sql);
    try {
      for (const name of ['get', 'list', 'entries', 'lastEntries', 'dropEntriesBefore', 'deleteEntries'] as const) {
        const lines = plan(db, SESSION_SQL[name]);
        const shown = `${name}: ${lines.join(' | ')}`;
        assert.doesNotMatch(lines.join('\n'), /TEMP B-TREE/, shown);
        if (name !== 'list') {
          for (const line of lines) assert.match(line, /^SEARCH .* USING (PRIMARY KEY|INDEX)/, shown);
        }
      }
    } finally {
      db.close();
    }
  });
});
