import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { SessionRecord, SessionRepository, StoredEntry, TranscriptEntry } from './model';

type Row = Record<string, unknown>;

/** The repository's statements (exported so that a test can read them and check their query plans). */
export const SESSION_SQL = {
  put: `INSERT INTO agent_sessions (agent_id, state, updated_at, record) VALUES (?, ?, ?, ?)
    ON CONFLICT(agent_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, record = excluded.record`,
  get: 'SELECT record FROM agent_sessions WHERE agent_id = ?',
  list: 'SELECT record FROM agent_sessions ORDER BY agent_id',
  delete: 'DELETE FROM agent_sessions WHERE agent_id = ?',
  putEntry: `INSERT INTO session_entries (agent_id, seq, entry) VALUES (?, ?, ?)
    ON CONFLICT(agent_id, seq) DO UPDATE SET entry = excluded.entry`,
  entries: 'SELECT seq, entry FROM session_entries WHERE agent_id = ? ORDER BY seq',
  // The last `limit` entries, newest first (read backwards along the key; reversed by the caller).
  lastEntries: 'SELECT seq, entry FROM session_entries WHERE agent_id = ? ORDER BY seq DESC LIMIT ?',
  dropEntriesBefore: 'DELETE FROM session_entries WHERE agent_id = ? AND seq < ?',
  deleteEntries: 'DELETE FROM session_entries WHERE agent_id = ?',
} as const;

/**
 * Agent sessions (schema version 19): one JSON record per agent id in `agent_sessions`, and the agent's transcript in
 * `session_entries`, one JSON entry per (agent id, seq), rewritten in place when the entry changes. The transcript's
 * bound (TRANSCRIPT_MAX_ENTRIES) is kept by its owner through dropEntriesBefore. Writes run in the caller's transaction.
 */
export class SqliteSessionRepository implements SessionRepository {
  private readonly s: Record<keyof typeof SESSION_SQL, StatementSync>;

  constructor(db: DatabaseSync) {
    this.s = Object.fromEntries(Object.entries(SESSION_SQL).map(([name, sql]) => [name, db.prepare(sql)])) as Record<
      keyof typeof SESSION_SQL,
      StatementSync
    >;
  }

  put(record: SessionRecord): void {
    this.s.put.run(record.agentId, record.state, record.updatedAt, JSON.stringify(record));
  }

  get(agentId: string): SessionRecord | undefined {
    const row = this.s.get.get(agentId) as Row | undefined;
    return row ? (JSON.parse(String(row.record)) as SessionRecord) : undefined;
  }

  /** Every record, in agent id order. */
  list(): SessionRecord[] {
    return (this.s.list.all() as Row[]).map((row) => JSON.parse(String(row.record)) as SessionRecord);
  }

  putEntries(agentId: string, entries: readonly StoredEntry[]): void {
    for (const { seq, entry } of entries) this.s.putEntry.run(agentId, seq, JSON.stringify(entry));
  }

  /** In ascending seq order: all of them, or the last `limit` (none for a limit below 1). */
  entries(agentId: string, limit?: number): StoredEntry[] {
    if (limit === undefined) return (this.s.entries.all(agentId) as Row[]).map(entryOf);
    const last = Math.max(0, Math.floor(limit));
    if (last === 0) return [];
    return (this.s.lastEntries.all(agentId, last) as Row[]).map(entryOf).reverse();
  }

  dropEntriesBefore(agentId: string, seq: number): number {
    return Number(this.s.dropEntriesBefore.run(agentId, seq).changes);
  }

  /** Removes the record and every entry; answers whether there was a record. */
  delete(agentId: string): boolean {
    this.s.deleteEntries.run(agentId);
    return Number(this.s.delete.run(agentId).changes) > 0;
  }
}

function entryOf(row: Row): StoredEntry {
  return { seq: Number(row.seq), entry: JSON.parse(String(row.entry)) as TranscriptEntry };
}
