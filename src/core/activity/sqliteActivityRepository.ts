import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { ActivityEntry, ActivityRepository, Artifact } from './model';

type Row = Record<string, unknown>;

/** Activity entries and artifacts (schema version 10) in the SQLite store. */
export class SqliteActivityRepository implements ActivityRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      putEntry: p(`INSERT INTO activity_entries (agent_id, task_id, ended_at, record) VALUES (?, ?, ?, ?)
        ON CONFLICT(agent_id, task_id) DO UPDATE SET ended_at = excluded.ended_at, record = excluded.record`),
      deleteEntry: p('DELETE FROM activity_entries WHERE agent_id = ? AND task_id = ?'),
      listEntries: p('SELECT record FROM activity_entries'),
      appendArtifact:
        p(`INSERT INTO activity_artifacts (negotiation_id, kind, version, content_type, content, created_at)
        VALUES (?, ?, ?, ?, ?, ?)`),
      listArtifacts: p(`SELECT negotiation_id, kind, version, content_type, content, created_at FROM activity_artifacts
        WHERE negotiation_id = ? AND (? = '' OR kind = ?) ORDER BY id`),
      // length() of a BLOB column reads the size from the record, not the content.
      artifactUsage: p(`SELECT kind, COUNT(*) AS n, COALESCE(SUM(length(content)), 0) AS bytes FROM activity_artifacts
        WHERE negotiation_id = ? GROUP BY kind`),
    };
  }

  putEntry(entry: ActivityEntry): void {
    this.s.putEntry.run(entry.agentId, entry.taskId, entry.endedAt, JSON.stringify(entry));
  }

  deleteEntry(agentId: string, taskId: string): void {
    this.s.deleteEntry.run(agentId, taskId);
  }

  listEntries(): ActivityEntry[] {
    return (this.s.listEntries.all() as Row[]).map((row) => JSON.parse(String(row.record)) as ActivityEntry);
  }

  appendArtifact(artifact: Artifact): void {
    this.s.appendArtifact.run(
      artifact.negotiationId,
      artifact.kind,
      artifact.version,
      artifact.contentType,
      artifact.content,
      artifact.createdAt,
    );
  }

  artifactUsage(negotiationId: string): ReadonlyMap<string, { readonly count: number; readonly bytes: number }> {
    return new Map(
      (this.s.artifactUsage.all(negotiationId) as Row[]).map((row) => [
        String(row.kind),
        { count: Number(row.n), bytes: Number(row.bytes) },
      ]),
    );
  }

  listArtifacts(negotiationId: string, kind: string): Artifact[] {
    return (this.s.listArtifacts.all(negotiationId, kind, kind) as Row[]).map((row) => ({
      negotiationId: String(row.negotiation_id),
      kind: String(row.kind),
      version: String(row.version),
      contentType: String(row.content_type),
      content: Buffer.from(row.content as Uint8Array),
      createdAt: String(row.created_at),
    }));
  }
}
