import { strict as assert } from 'node:assert';
import { DatabaseSync } from 'node:sqlite';
import { COORDINATOR_SCHEMA } from '../../src/core/coordinatorStore';
import type { ProposalRecord } from '../../src/core/room/model';
import { ROOM_SQL, SqliteRoomRepository } from '../../src/core/room/sqliteRoomRepository';

/** A database holding every table of the coordinator's schema (its steps applied in order). */
function schemaDb(): DatabaseSync {
  const db = new DatabaseSync(':memory:');
  for (const step of COORDINATOR_SCHEMA) for (const sql of step.statements) db.exec(sql);
  return db;
}

/** EXPLAIN QUERY PLAN's detail lines for a statement (its parameters bound to placeholders). */
function plan(db: DatabaseSync, sql: string): string[] {
  const params = (sql.match(/\?/g) ?? []).map(() => 'x');
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail);
}

function proposal(artifactId: string, revision: number, extra: Partial<ProposalRecord> = {}): ProposalRecord {
  return {
    roomId: 'room-1',
    artifactId,
    revision,
    artifactType: 'PLAN',
    producerId: 'prod',
    contentType: 'text/plain',
    artifact: Buffer.alloc(1024, 120),
    requestedCritics: ['c1'],
    createdAt: 1,
    submittedAt: 1,
    voteDeadlineAt: 0,
    policyVersion: 'v1',
    state: 'voting',
    closed: false,
    invocationId: null,
    updatedAt: revision,
    ...extra,
  };
}

describe('room repository: queries', () => {
  it('listing, room lookups and counting use an index, never a whole-table scan or a sort, and read no artifact bytes', () => {
    const db = schemaDb();
    for (const name of ['listLatest', 'countInRoom', 'escalatedFor'] as const) {
      const sql = (ROOM_SQL as Record<string, string>)[name];
      assert.ok(sql, `a statement ${name}`);
      const lines = plan(db, sql);
      for (const line of lines) {
        assert.doesNotMatch(
          line,
          /^SCAN (room_proposals|p|q)\b(?!.*USING (COVERING )?INDEX)/,
          `${name}: ${lines.join(' | ')}`,
        );
        assert.doesNotMatch(line, /TEMP B-TREE/, `${name}: ${lines.join(' | ')}`);
      }
      if (name !== 'countInRoom') assert.doesNotMatch(sql, /\bartifact\b(?!_)/, `${name} reads no artifact column`);
    }
    db.close();
  });

  it("listLatest answers each artifact's newest revision, unfinished first then newest, without the bytes", () => {
    const db = schemaDb();
    const repo = new SqliteRoomRepository(db);
    repo.putProposal(proposal('a', 1, { state: 'decided', updatedAt: 10 }));
    repo.putProposal(proposal('a', 2, { updatedAt: 20 }));
    repo.putProposal(proposal('b', 1, { state: 'decided', updatedAt: 30 }));
    repo.putProposal(proposal('c', 1, { state: 'escalated', updatedAt: 5, roomId: 'room-2', invocationId: 'inv-1' }));
    const rows = repo.listLatest(10);
    assert.deepEqual(
      rows.map((r) => `${r.artifactId}@${r.revision}`),
      ['a@2', 'c@1', 'b@1'],
    );
    assert.ok(
      rows.every((r) => !('artifact' in r)),
      'no bytes',
    );
    // The newest revision's update moves it; an older revision stays out of the list.
    repo.putProposal(proposal('a', 2, { state: 'decided', updatedAt: 40 }));
    assert.deepEqual(
      repo.listLatest(10).map((r) => `${r.artifactId}@${r.revision}`),
      ['c@1', 'a@2', 'b@1'],
    );
    assert.deepEqual(
      repo.escalatedFor('room-2').map((r) => r.artifactId),
      ['c'],
    );
    assert.deepEqual(
      repo.escalatedFor('c').map((r) => r.artifactId),
      ['c'],
    );
    assert.deepEqual(repo.escalatedFor('room-1'), []);
    assert.equal(repo.countInRoom('room-1'), 3);
    db.close();
  });
});
