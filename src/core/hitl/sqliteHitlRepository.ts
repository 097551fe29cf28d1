import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { AuditEntry, AuditQuery, HitlInvocation, HitlRepository } from './model';
import type { PruneResult } from '../retention';

type Row = Record<string, unknown>;

/** Settled invocations listed at most (pending ones are always all listed). */
const DEFAULT_SETTLED_LIMIT = 1_000;

/** The HITL tables in the SQLite store (schema version 3). An invocation is one JSON record. */
export class SqliteHitlRepository implements HitlRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      put: p(`INSERT INTO hitl_invocations (invocation_id, state, created_at, updated_at, record) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT(invocation_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, record = excluded.record`),
      get: p('SELECT record FROM hitl_invocations WHERE invocation_id = ?'),
      pending: p(`SELECT record FROM hitl_invocations WHERE state = 'pending' ORDER BY created_at`),
      settled: p(`SELECT record FROM hitl_invocations WHERE state != 'pending' ORDER BY updated_at DESC LIMIT ?`),
      ofComponent: p(`SELECT record FROM hitl_invocations WHERE json_extract(record, '$.origin.kind') = 'internal'
        AND json_extract(record, '$.origin.component') = ? ORDER BY created_at`),
      appendAudit: p(
        'INSERT INTO hitl_audit (invocation_id, at, kind, actor, automatic, details) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      auditOf: p(
        'SELECT * FROM (SELECT * FROM hitl_audit WHERE invocation_id = ? AND id > ? ORDER BY id DESC LIMIT ?) ORDER BY id',
      ),
      auditAll: p('SELECT * FROM (SELECT * FROM hitl_audit WHERE id > ? ORDER BY id DESC LIMIT ?) ORDER BY id'),
      settledBefore:
        p(`SELECT invocation_id FROM hitl_invocations WHERE state IN ('decided', 'timed_out', 'cancelled') AND updated_at < ?
        ORDER BY updated_at LIMIT ?`),
      deleteAudit: p('DELETE FROM hitl_audit WHERE invocation_id IN (SELECT value FROM json_each(?))'),
      deleteInvocations: p('DELETE FROM hitl_invocations WHERE invocation_id IN (SELECT value FROM json_each(?))'),
    };
  }

  put(invocation: HitlInvocation): void {
    this.s.put.run(
      invocation.id,
      invocation.state,
      invocation.createdAt,
      invocation.updatedAt,
      JSON.stringify(invocation),
    );
  }

  get(id: string): HitlInvocation | undefined {
    const row = this.s.get.get(id) as Row | undefined;
    return row ? parse(row) : undefined;
  }

  list(options: { pendingOnly?: boolean; limit?: number } = {}): HitlInvocation[] {
    const pending = (this.s.pending.all() as Row[]).map(parse);
    if (options.pendingOnly) return pending;
    const settled = (this.s.settled.all(options.limit ?? DEFAULT_SETTLED_LIMIT) as Row[]).map(parse);
    return [...pending, ...settled];
  }

  listOfComponent(component: string): HitlInvocation[] {
    return (this.s.ofComponent.all(component) as Row[]).map(parse);
  }

  appendAudit(entry: Omit<AuditEntry, 'id'>): number {
    const result = this.s.appendAudit.run(
      entry.invocationId,
      entry.at,
      entry.kind,
      entry.actor,
      entry.automatic ? 1 : 0,
      JSON.stringify(entry.details),
    );
    return Number(result.lastInsertRowid);
  }

  pruneSettled(settledBefore: number, limit: number): PruneResult & { readonly auditEntries: number } {
    const batch = Math.max(1, Math.floor(limit));
    const ids = (this.s.settledBefore.all(settledBefore, batch) as Row[]).map((row) => String(row.invocation_id));
    if (ids.length === 0) return { deleted: 0, more: false, auditEntries: 0 };
    const list = JSON.stringify(ids);
    const auditEntries = Number(this.s.deleteAudit.run(list).changes);
    const deleted = Number(this.s.deleteInvocations.run(list).changes);
    return { deleted, more: ids.length === batch, auditEntries };
  }

  audit(query: AuditQuery = {}): AuditEntry[] {
    const after = query.afterId ?? 0;
    const limit = query.limit ?? 10_000;
    const rows = (
      query.invocationId !== undefined
        ? this.s.auditOf.all(query.invocationId, after, limit)
        : this.s.auditAll.all(after, limit)
    ) as Row[];
    return rows.map((row) => ({
      id: Number(row.id),
      invocationId: String(row.invocation_id),
      at: Number(row.at),
      kind: String(row.kind),
      actor: String(row.actor),
      automatic: Number(row.automatic) === 1,
      details: JSON.parse(String(row.details)) as Record<string, unknown>,
    }));
  }
}

function parse(row: Row): HitlInvocation {
  return JSON.parse(String(row.record)) as HitlInvocation;
}
