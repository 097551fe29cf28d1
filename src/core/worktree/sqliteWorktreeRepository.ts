import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { Binding, WorktreeRepository } from './model';

type Row = Record<string, unknown>;

/** The worktree bindings in the SQLite store (schema version 7). A binding is one JSON record. */
export class SqliteWorktreeRepository implements WorktreeRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      put: p(`INSERT INTO worktree_bindings (agent_id, state, updated_at, record) VALUES (?, ?, ?, ?)
        ON CONFLICT(agent_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, record = excluded.record`),
      get: p('SELECT record FROM worktree_bindings WHERE agent_id = ?'),
      list: p('SELECT record FROM worktree_bindings ORDER BY agent_id'),
    };
  }

  put(binding: Binding): void {
    this.s.put.run(binding.agentId, binding.state, binding.updatedAt, JSON.stringify(binding));
  }

  get(agentId: string): Binding | undefined {
    const row = this.s.get.get(agentId) as Row | undefined;
    return row ? (JSON.parse(String(row.record)) as Binding) : undefined;
  }

  list(): Binding[] {
    return (this.s.list.all() as Row[]).map((row) => JSON.parse(String(row.record)) as Binding);
  }
}
