import type { DatabaseSync, StatementSync } from 'node:sqlite';
import {
  LISTED_CONTEXT_BYTES,
  TERMINAL_HANDOFF_STATES,
  type HandoffRecord,
  type HandoffRepository,
  type TransferredEntry,
} from './model';

type Row = Record<string, unknown>;

/** The repository's statements (exported so that a test can check their query plans). */
export const HANDOFF_SQL = {
  insert: `INSERT INTO handoffs (request_id, state, open, from_agent, correlation_id, updated_at, ended_at, context_bytes, record, context)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT(request_id) DO UPDATE SET state = excluded.state, open = excluded.open, updated_at = excluded.updated_at,
      ended_at = excluded.ended_at, record = excluded.record`,
  get: 'SELECT record, context FROM handoffs WHERE request_id = ?',
  listOpen: 'SELECT record FROM handoffs WHERE open = 1 ORDER BY updated_at',
  listRecent: `SELECT record, substr(context, 1, ${LISTED_CONTEXT_BYTES}) AS context FROM handoffs ORDER BY open DESC, updated_at DESC LIMIT ?`,
  listTransferred: `SELECT request_id, from_agent, correlation_id, json_extract(record, '$.acceptedBy') AS accepted_by
    FROM handoffs WHERE state = 'COMPLETED' ORDER BY ended_at DESC LIMIT ?`,
  transferred: `SELECT request_id, from_agent, correlation_id, json_extract(record, '$.acceptedBy') AS accepted_by
    FROM handoffs WHERE state = 'COMPLETED' AND from_agent = ? AND correlation_id = ? ORDER BY ended_at DESC LIMIT 1`,
  endedBefore: `SELECT request_id, state, from_agent, correlation_id, json_extract(record, '$.acceptedBy') AS accepted_by
    FROM handoffs WHERE open = 0 AND ended_at < ? ORDER BY ended_at LIMIT ?`,
  delete: 'DELETE FROM handoffs WHERE request_id IN (SELECT value FROM json_each(?))',
} as const;

type StoredRecord = Omit<HandoffRecord, 'context'>;

function recordOf(row: Row, withContext: boolean): HandoffRecord {
  const stored = JSON.parse(String(row.record)) as StoredRecord;
  return { ...stored, context: withContext ? Buffer.from(row.context as Uint8Array) : Buffer.alloc(0) };
}

function transferredOf(row: Row): TransferredEntry {
  return {
    requestId: String(row.request_id),
    fromAgent: String(row.from_agent),
    correlationId: String(row.correlation_id),
    acceptedBy: String(row.accepted_by ?? ''),
  };
}

/**
 * Handoffs (schema version 16): one JSON record per request (the context bytes in a BLOB column, written once), open
 * ones and completed transfers indexed, ended ones pruned by when they ended.
 */
export class SqliteHandoffRepository implements HandoffRepository {
  private readonly s: Record<keyof typeof HANDOFF_SQL, StatementSync>;

  constructor(db: DatabaseSync) {
    this.s = Object.fromEntries(Object.entries(HANDOFF_SQL).map(([name, sql]) => [name, db.prepare(sql)])) as Record<
      keyof typeof HANDOFF_SQL,
      StatementSync
    >;
  }

  put(record: HandoffRecord): void {
    const { context, ...rest } = record;
    const open = TERMINAL_HANDOFF_STATES.has(record.state) ? 0 : 1;
    this.s.insert.run(
      record.requestId,
      record.state,
      open,
      record.fromAgent,
      record.correlationId,
      record.updatedAt,
      record.endedAt,
      record.contextBytes,
      JSON.stringify(rest),
      context,
    );
  }

  get(requestId: string): HandoffRecord | undefined {
    const row = this.s.get.get(requestId) as Row | undefined;
    return row ? recordOf(row, true) : undefined;
  }

  listOpen(): HandoffRecord[] {
    return (this.s.listOpen.all() as Row[]).map((row) => recordOf(row, false));
  }

  listRecent(limit: number): HandoffRecord[] {
    return (this.s.listRecent.all(Math.max(0, Math.floor(limit))) as Row[]).map((row) => recordOf(row, true));
  }

  listTransferred(limit: number): TransferredEntry[] {
    return (this.s.listTransferred.all(Math.max(0, Math.floor(limit))) as Row[]).map(transferredOf);
  }

  transferred(fromAgent: string, correlationId: string): TransferredEntry | undefined {
    const row = this.s.transferred.get(fromAgent, correlationId) as Row | undefined;
    return row ? transferredOf(row) : undefined;
  }

  pruneEnded(
    before: number,
    limit: number,
  ): { readonly deleted: number; readonly more: boolean; readonly transferred: readonly TransferredEntry[] } {
    const batch = Math.max(1, Math.floor(limit));
    const rows = this.s.endedBefore.all(before, batch) as Row[];
    if (rows.length === 0) return { deleted: 0, more: false, transferred: [] };
    const deleted = Number(this.s.delete.run(JSON.stringify(rows.map((row) => String(row.request_id)))).changes);
    return {
      deleted,
      more: rows.length >= batch,
      transferred: rows.filter((row) => row.state === 'COMPLETED').map(transferredOf),
    };
  }
}
