import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { Binding, StoredMerge, WorktreeRepository } from './model';

type Row = Record<string, unknown>;

/** The worktree bindings (schema version 7) and undoable merges (version 8) in the SQLite store, each one JSON record. */
export class SqliteWorktreeRepository implements WorktreeRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      put: p(`INSERT INTO worktree_bindings (agent_id, state, updated_at, record) VALUES (?, ?, ?, ?)
        ON CONFLICT(agent_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, record = excluded.record`),
      get: p('SELECT record FROM worktree_bindings WHERE agent_id = ?'),
      list: p('SELECT record FROM worktree_bindings ORDER BY agent_id'),
      putMerge: p(`INSERT INTO worktree_merges (merge_id, repo_id, merged_at, record) VALUES (?, ?, ?, ?)
        ON CONFLICT(merge_id) DO UPDATE SET record = excluded.record`),
      getMerge: p('SELECT record FROM worktree_merges WHERE merge_id = ?'),
      listMerges: p('SELECT record FROM worktree_merges ORDER BY merged_at DESC, merge_id DESC'),
      deleteMerge: p('DELETE FROM worktree_merges WHERE merge_id = ?'),
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

  putMerge(merge: StoredMerge): void {
    this.s.putMerge.run(merge.id, merge.repoId, merge.record.mergedAt, JSON.stringify(merge));
  }

  getMerge(id: string): StoredMerge | undefined {
    const row = this.s.getMerge.get(id) as Row | undefined;
    return row ? (JSON.parse(String(row.record)) as StoredMerge) : undefined;
  }

  listMerges(): StoredMerge[] {
    return (this.s.listMerges.all() as Row[]).map((row) => JSON.parse(String(row.record)) as StoredMerge);
  }

  deleteMerge(id: string): void {
    this.s.deleteMerge.run(id);
  }
}
