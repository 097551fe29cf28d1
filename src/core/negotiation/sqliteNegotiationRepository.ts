import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { PruneResult } from '../retention';
import type { NegotiationDecision, NegotiationRecord, NegotiationRepository, RoundRecord } from './model';

type Row = Record<string, unknown>;

/** A decision's result bytes travel as base64 inside the JSON record. */
type StoredRecord = Omit<NegotiationRecord, 'decision'> & {
  decision: (Omit<NegotiationDecision, 'result'> & { result: string }) | null;
};

function finished(record: NegotiationRecord): number {
  return record.state === 'decided' || record.state === 'aborted' ? 1 : 0;
}

function toStored(record: NegotiationRecord): StoredRecord {
  return {
    ...record,
    decision: record.decision ? { ...record.decision, result: record.decision.result.toString('base64') } : null,
  };
}

function fromStored(text: string): NegotiationRecord {
  const stored = JSON.parse(text) as StoredRecord;
  return {
    ...stored,
    decision: stored.decision ? { ...stored.decision, result: Buffer.from(stored.decision.result, 'base64') } : null,
  };
}

function roundOf(row: Row): RoundRecord {
  return {
    ...(JSON.parse(String(row.record)) as Omit<RoundRecord, 'payload'>),
    payload: Buffer.from(row.payload as Uint8Array),
  };
}

/**
 * Debates (schema version 13): one JSON record per negotiation, its rounds with the payload bytes in a BLOB column.
 */
export class SqliteNegotiationRepository implements NegotiationRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      put: p(`INSERT INTO negotiations (negotiation_id, finished, updated_at, record) VALUES (?, ?, ?, ?)
        ON CONFLICT(negotiation_id) DO UPDATE SET finished = excluded.finished, updated_at = excluded.updated_at, record = excluded.record`),
      get: p('SELECT record FROM negotiations WHERE negotiation_id = ?'),
      list: p('SELECT record FROM negotiations ORDER BY finished ASC, updated_at DESC LIMIT ?'),
      countOpenBy: p(
        "SELECT COUNT(*) AS n FROM negotiations WHERE finished = 0 AND json_extract(record, '$.openedByAgent') = ?",
      ),
      finishedBefore: p(
        'SELECT negotiation_id FROM negotiations WHERE finished = 1 AND updated_at < ? ORDER BY updated_at LIMIT ?',
      ),
      finishedBeyond: p(
        'SELECT negotiation_id FROM negotiations WHERE finished = 1 ORDER BY updated_at DESC LIMIT ? OFFSET ?',
      ),
      deleteRounds: p('DELETE FROM negotiation_rounds WHERE negotiation_id IN (SELECT value FROM json_each(?))'),
      deleteNegotiations: p('DELETE FROM negotiations WHERE negotiation_id IN (SELECT value FROM json_each(?))'),
      unfinished: p('SELECT record FROM negotiations WHERE finished = 0 ORDER BY updated_at'),
      putRound: p(`INSERT INTO negotiation_rounds (negotiation_id, n, record, payload) VALUES (?, ?, ?, ?)
        ON CONFLICT(negotiation_id, n) DO UPDATE SET record = excluded.record, payload = excluded.payload`),
      rounds: p('SELECT record, payload FROM negotiation_rounds WHERE negotiation_id = ? ORDER BY n'),
      latestRound: p('SELECT record, payload FROM negotiation_rounds WHERE negotiation_id = ? ORDER BY n DESC LIMIT 1'),
    };
  }

  put(record: NegotiationRecord): void {
    this.s.put.run(record.id, finished(record), record.updatedAt, JSON.stringify(toStored(record)));
  }

  get(id: string): NegotiationRecord | undefined {
    const row = this.s.get.get(id) as Row | undefined;
    return row ? fromStored(String(row.record)) : undefined;
  }

  list(limit: number): NegotiationRecord[] {
    return (this.s.list.all(Math.max(0, Math.floor(limit))) as Row[]).map((row) => fromStored(String(row.record)));
  }

  countOpenBy(agentId: string): number {
    return Number((this.s.countOpenBy.get(agentId) as Row).n);
  }

  pruneFinished(updatedBefore: number, keep: number, limit: number): PruneResult & { readonly rounds: number } {
    const batch = Math.max(1, Math.floor(limit));
    const ids = new Set(
      (this.s.finishedBefore.all(updatedBefore, batch) as Row[]).map((row) => String(row.negotiation_id)),
    );
    if (ids.size < batch) {
      for (const row of this.s.finishedBeyond.all(batch - ids.size, Math.max(0, Math.floor(keep))) as Row[])
        ids.add(String(row.negotiation_id));
    }
    if (ids.size === 0) return { deleted: 0, more: false, rounds: 0 };
    const list = JSON.stringify([...ids]);
    const rounds = Number(this.s.deleteRounds.run(list).changes);
    const deleted = Number(this.s.deleteNegotiations.run(list).changes);
    return { deleted, more: ids.size >= batch, rounds };
  }

  listUnfinished(): NegotiationRecord[] {
    return (this.s.unfinished.all() as Row[]).map((row) => fromStored(String(row.record)));
  }

  putRound(round: RoundRecord): void {
    const { payload, ...rest } = round;
    this.s.putRound.run(round.negotiationId, round.n, JSON.stringify(rest), payload);
  }

  rounds(negotiationId: string): RoundRecord[] {
    return (this.s.rounds.all(negotiationId) as Row[]).map(roundOf);
  }

  latestRound(negotiationId: string): RoundRecord | undefined {
    const row = this.s.latestRound.get(negotiationId) as Row | undefined;
    return row ? roundOf(row) : undefined;
  }
}
