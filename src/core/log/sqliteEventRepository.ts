import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { PruneResult } from '../retention';
import type { WriteStage } from '../store/store';
import { WriteBuffer } from '../store/writeBuffer';
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

const COLUMNS = '(id, ts, correlation_id, actor, event_type, level, source, details)';
const ROW = '(?, ?, ?, ?, ?, ?, ?, ?)';
/** Staged events go in statements of this many rows (and one row for the rest). */
const INSERT_ROWS = 16;

/** An event as its row: its id given, its details as JSON. */
interface Staged extends Omit<StructuredEvent, 'details'> {
  readonly id: number;
  readonly details: string;
}

/**
 * The event log's table in the SQLite store. Once `stageWrites` handed its stage to the store, the events of a
 * transaction are held back and inserted together just before its COMMIT, INSERT_ROWS to a statement: one
 * statement (and one AUTOINCREMENT bookkeeping write) for many events. Ids are given on `append`, in order,
 * from the highest id the table ever had; a rolled-back event leaves a gap, never a reused id.
 */
export class SqliteEventRepository implements EventRepository {
  private readonly appendStmt: StatementSync;
  private readonly insertMany: StatementSync;
  private lastId: number;
  private staging: WriteBuffer<Staged, undefined> | undefined;
  private readonly countStmt: StatementSync;
  private readonly boundsStmt: StatementSync;
  private readonly pruneStmt: StatementSync;

  constructor(private readonly db: DatabaseSync) {
    this.appendStmt = db.prepare(`INSERT INTO events ${COLUMNS} VALUES ${ROW}`);
    this.insertMany = db.prepare(`INSERT INTO events ${COLUMNS} VALUES ${Array(INSERT_ROWS).fill(ROW).join(', ')}`);
    // The AUTOINCREMENT counter is the highest id the table ever had (deleted ones too).
    const last = db
      .prepare(
        `SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0), COALESCE((SELECT MAX(id) FROM events), 0)) AS id`,
      )
      .get() as { id: number };
    this.lastId = Number(last.id);
    this.countStmt = db.prepare('SELECT COUNT(*) AS n FROM events');
    // Two subqueries: SQLite answers MIN or MAX from the end of the tree only when each stands alone.
    this.boundsStmt = db.prepare('SELECT (SELECT MIN(id) FROM events) AS first, (SELECT MAX(id) FROM events) AS last');
    this.pruneStmt = db.prepare('DELETE FROM events WHERE id <= ?');
  }

  /** From now on, events appended inside a transaction wait for the store's flush (see the class comment). */
  stageWrites(): WriteStage {
    this.staging ??= new WriteBuffer<Staged, undefined>((entries) => this.insert(entries.map(([event]) => event)));
    return this.staging;
  }

  private flush(): void {
    if (this.staging !== undefined && this.staging.size > 0) this.staging.flush();
  }

  private insert(events: readonly Staged[]): void {
    let i = 0;
    const params: Array<string | number> = [];
    for (; i + INSERT_ROWS <= events.length; i += INSERT_ROWS) {
      params.length = 0;
      for (let j = i; j < i + INSERT_ROWS; j++) pushRow(params, events[j]);
      this.insertMany.run(...params);
    }
    for (; i < events.length; i++) {
      params.length = 0;
      pushRow(params, events[i]);
      this.appendStmt.run(...params);
    }
  }

  prune(keep: number, limit: number): PruneResult {
    this.flush();
    const { first, last } = this.boundsStmt.get() as { first: number | null; last: number | null };
    if (first === null || last === null) return { deleted: 0, more: false };
    // Ids are arrival order; the oldest `limit` ids at most, and never beyond the newest `keep`.
    const keepBound = last - Math.max(0, Math.floor(keep));
    const limitBound = first + Math.max(1, Math.floor(limit)) - 1;
    const deleted = Number(this.pruneStmt.run(Math.min(keepBound, limitBound)).changes);
    return { deleted, more: limitBound < keepBound };
  }

  append(event: StructuredEvent): number {
    const id = ++this.lastId;
    // The details as they are now: the caller's object may change after the call.
    const staged: Staged = {
      id,
      ts: event.ts,
      correlationId: event.correlationId,
      actor: event.actor,
      eventType: event.eventType,
      level: event.level,
      source: event.source,
      details: JSON.stringify(event.details),
    };
    if (this.staging !== undefined && this.db.isTransaction) this.staging.stage(staged, undefined);
    else this.insert([staged]);
    return id;
  }

  query(query: EventQuery = {}): StoredEvent[] {
    this.flush();
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
    this.flush();
    return Number((this.countStmt.get() as { n: number }).n);
  }
}

function pushRow(params: Array<string | number>, event: Staged): void {
  params.push(
    event.id,
    event.ts,
    event.correlationId,
    event.actor,
    event.eventType,
    event.level,
    event.source,
    event.details,
  );
}
