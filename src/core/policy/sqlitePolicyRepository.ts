import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { PolicyRepository, PolicySet } from './model';

type Row = Record<string, unknown>;

/** Every version of the policy set (schema version 12), one JSON record per version. */
export class SqlitePolicyRepository implements PolicyRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      put: p(`INSERT INTO policy_versions (version, record, set_by, set_at) VALUES (?, ?, ?, ?)
        ON CONFLICT(version) DO UPDATE SET record = excluded.record, set_by = excluded.set_by, set_at = excluded.set_at`),
      latest: p('SELECT record FROM policy_versions ORDER BY version DESC LIMIT 1'),
      get: p('SELECT record FROM policy_versions WHERE version = ?'),
    };
  }

  latest(): PolicySet | undefined {
    const row = this.s.latest.get() as Row | undefined;
    return row ? (JSON.parse(String(row.record)) as PolicySet) : undefined;
  }

  get(version: number): PolicySet | undefined {
    const row = this.s.get.get(version) as Row | undefined;
    return row ? (JSON.parse(String(row.record)) as PolicySet) : undefined;
  }

  put(set: PolicySet): void {
    this.s.put.run(set.version, JSON.stringify(set), set.setBy, set.setAt);
  }
}
