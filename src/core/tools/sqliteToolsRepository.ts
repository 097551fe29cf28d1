import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { ProviderRecord, ToolCallRecord, ToolsRepository } from './model';

type Row = Record<string, unknown>;

/** Outcomes of a call that has not ended. */
const UNFINISHED = ['running', 'queued', 'awaiting_approval'];

/**
 * Registered providers and recent tool calls (schema version 11) in the SQLite store, one JSON record per row.
 * A call keeps the `seq` it was first written with (its start order): updates replace its record, never its place.
 */
export class SqliteToolsRepository implements ToolsRepository {
  private readonly s: Record<string, StatementSync>;
  private nextSeq: number;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      upsertProvider: p(`INSERT INTO tool_providers (provider_id, record, registered_at) VALUES (?, ?, ?)
        ON CONFLICT(provider_id) DO UPDATE SET record = excluded.record, registered_at = excluded.registered_at`),
      deleteProvider: p('DELETE FROM tool_providers WHERE provider_id = ?'),
      listProviders: p('SELECT record FROM tool_providers ORDER BY provider_id'),
      upsertCall: p(`INSERT INTO tool_calls (call_id, seq, record, outcome, started_at) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT(call_id) DO UPDATE SET record = excluded.record, outcome = excluded.outcome`),
      recentCalls: p('SELECT record FROM tool_calls ORDER BY seq DESC LIMIT ?'),
      call: p('SELECT record FROM tool_calls WHERE call_id = ?'),
      unfinished: p(
        `SELECT record FROM tool_calls WHERE outcome IN (${UNFINISHED.map(() => '?').join(', ')}) ORDER BY seq`,
      ),
      maxSeq: p('SELECT COALESCE(MAX(seq), 0) AS seq FROM tool_calls'),
      // The seq below which calls go: the keep-th newest's. Deleting by seq walks the index from the oldest.
      cutoff: p('SELECT seq FROM tool_calls ORDER BY seq DESC LIMIT 1 OFFSET ?'),
      prune: p('DELETE FROM tool_calls WHERE seq IN (SELECT seq FROM tool_calls WHERE seq <= ? ORDER BY seq LIMIT ?)'),
    };
    this.nextSeq = Number((this.s.maxSeq.get() as Row).seq) + 1;
  }

  upsertProvider(record: ProviderRecord): void {
    this.s.upsertProvider.run(record.providerId, JSON.stringify(record), record.registeredAt);
  }

  deleteProvider(providerId: string): void {
    this.s.deleteProvider.run(providerId);
  }

  listProviders(): ProviderRecord[] {
    return (this.s.listProviders.all() as Row[]).map((row) => JSON.parse(String(row.record)) as ProviderRecord);
  }

  upsertCall(record: ToolCallRecord): void {
    // The seq is only used by an insert; an update keeps the row's own (ON CONFLICT leaves seq alone). Gaps are harmless.
    this.s.upsertCall.run(record.callId, this.nextSeq++, JSON.stringify(record), record.outcome, record.startedAt);
  }

  recentCalls(limit: number): ToolCallRecord[] {
    return (this.s.recentCalls.all(Math.max(0, Math.floor(limit))) as Row[]).map(
      (row) => JSON.parse(String(row.record)) as ToolCallRecord,
    );
  }

  call(callId: string): ToolCallRecord | undefined {
    const row = this.s.call.get(callId) as Row | undefined;
    return row ? (JSON.parse(String(row.record)) as ToolCallRecord) : undefined;
  }

  unfinishedCalls(): ToolCallRecord[] {
    return (this.s.unfinished.all(...UNFINISHED) as Row[]).map(
      (row) => JSON.parse(String(row.record)) as ToolCallRecord,
    );
  }

  pruneCalls(keep: number, batch: number): number {
    const row = this.s.cutoff.get(Math.max(0, Math.floor(keep))) as Row | undefined;
    if (!row) return 0;
    return Number(this.s.prune.run(Number(row.seq), Math.max(0, Math.floor(batch))).changes);
  }
}
