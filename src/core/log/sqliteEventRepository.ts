import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { PruneResult } from '../retention';
import {
  AGENT_EVENTS_SCAN_WINDOW,
  type EventQuery,
  type EventRepository,
  type StoredEvent,
  type StructuredEvent,
} from './model';

interface EventRow {
  id: number;
  ts: string;
  correlation_id: string;
  actor: string;
  event_type: string;
  level: string;
  source: string;
  details: string;
}

/** The event log's table in the SQLite store. */
export class SqliteEventRepository implements EventRepository {
  private readonly appendStmt: StatementSync;
  private readonly countStmt: StatementSync;
  private readonly boundsStmt: StatementSync;
  private readonly pruneStmt: StatementSync;

  constructor(private readonly db: DatabaseSync) {
    this.appendStmt = db.prepare(
      'INSERT INTO events (ts, correlation_id, actor, event_type, level, source, details) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    this.countStmt = db.prepare('SELECT COUNT(*) AS n FROM events');
    // Two subqueries: SQLite answers MIN or MAX from the end of the tree only when each stands alone.
    this.boundsStmt = db.prepare('SELECT (SELECT MIN(id) FROM events) AS first, (SELECT MAX(id) FROM events) AS last');
    this.pruneStmt = db.prepare('DELETE FROM events WHERE id <= ?');
  }

  prune(keep: number, limit: number): PruneResult {
    const { first, last } = this.boundsStmt.get() as { first: number | null; last: number | null };
    if (first === null || last === null) return { deleted: 0, more: false };
    // Ids are arrival order; the oldest `limit` ids at most, and never beyond the newest `keep`.
    const keepBound = last - Math.max(0, Math.floor(keep));
    const limitBound = first + Math.max(1, Math.floor(limit)) - 1;
    const deleted = Number(this.pruneStmt.run(Math.min(keepBound, limitBound)).changes);
    return { deleted, more: limitBound < keepBound };
  }

  append(event: StructuredEvent): number {
    const result = this.appendStmt.run(
      event.ts,
      event.correlationId,
      event.actor,
      event.eventType,
      event.level,
      event.source,
      JSON.stringify(event.details),
    );
    return Number(result.lastInsertRowid);
  }

  query(query: EventQuery = {}): StoredEvent[] {
    const where: string[] = [];
    const params: Array<string | number> = [];
    if (query.afterId !== undefined) {
      where.push('id > ?');
      params.push(query.afterId);
    }
    if (query.eventType !== undefined) {
      where.push('event_type = ?');
      params.push(query.eventType);
    }
    if (query.correlationId !== undefined) {
      where.push('correlation_id = ?');
      params.push(query.correlationId);
    }
    if (query.actor !== undefined) {
      where.push('actor = ?');
      params.push(query.actor);
    }
    if (query.agentId !== undefined) {
      where.push(`id > (SELECT COALESCE(MAX(id), 0) FROM events) - ${AGENT_EVENTS_SCAN_WINDOW}`);
      where.push(
        `(actor = ? OR json_extract(details, '$.agent_id') = ? OR json_extract(details, '$.to') = ? OR json_extract(details, '$.producer_id') = ?)`,
      );
      params.push(query.agentId, query.agentId, query.agentId, query.agentId);
    }
    const limit = Math.max(1, Math.min(query.limit ?? 1000, 100_000));
    const sql = `SELECT * FROM (SELECT * FROM events ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
                 ORDER BY id DESC LIMIT ${limit}) ORDER BY id ASC`;
    return (this.db.prepare(sql).all(...params) as unknown as EventRow[]).map((row) => ({
      id: row.id,
      ts: row.ts,
      correlationId: row.correlation_id,
      actor: row.actor,
      eventType: row.event_type,
      level: row.level as StoredEvent['level'],
      source: row.source as StoredEvent['source'],
      details: JSON.parse(row.details) as Record<string, unknown>,
    }));
  }

  count(): number {
    return Number((this.countStmt.get() as { n: number }).n);
  }
}
