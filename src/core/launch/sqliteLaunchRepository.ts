import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { LaunchRecord, LaunchRepository } from './model';

type Row = Record<string, unknown>;

/** The repository's statements (exported so that a test can read them). */
export const LAUNCH_SQL = {
  upsert: `INSERT INTO launches (agent_id, state, launched_at, record) VALUES (?, ?, ?, ?)
    ON CONFLICT(agent_id) DO UPDATE SET state = excluded.state, launched_at = excluded.launched_at, record = excluded.record`,
  get: 'SELECT record FROM launches WHERE agent_id = ?',
  list: 'SELECT record FROM launches ORDER BY launched_at DESC, agent_id',
  delete: 'DELETE FROM launches WHERE agent_id = ?',
} as const;

/** Launched agents (schema version 18): one JSON record per agent id. A launch is a person's action: few rows, never pruned. */
export class SqliteLaunchRepository implements LaunchRepository {
  private readonly s: Record<keyof typeof LAUNCH_SQL, StatementSync>;

  constructor(db: DatabaseSync) {
    this.s = Object.fromEntries(Object.entries(LAUNCH_SQL).map(([name, sql]) => [name, db.prepare(sql)])) as Record<
      keyof typeof LAUNCH_SQL,
      StatementSync
    >;
  }

  upsert(record: LaunchRecord): void {
    this.s.upsert.run(record.agentId, record.state, record.launchedAt, JSON.stringify(record));
  }

  get(agentId: string): LaunchRecord | undefined {
    const row = this.s.get.get(agentId) as Row | undefined;
    return row ? (JSON.parse(String(row.record)) as LaunchRecord) : undefined;
  }

  list(): LaunchRecord[] {
    return (this.s.list.all() as Row[]).map((row) => JSON.parse(String(row.record)) as LaunchRecord);
  }

  delete(agentId: string): boolean {
    return Number(this.s.delete.run(agentId).changes) > 0;
  }
}
