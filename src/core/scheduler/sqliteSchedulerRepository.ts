import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { TERMINAL_TASK_STATES, type SchedulerRepository, type TaskRecord } from './model';

type Row = Record<string, unknown>;

/** Tasks (schema version 9) in the SQLite store, each one JSON record; `params` as base64. */
export class SqliteSchedulerRepository implements SchedulerRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      put: p(`INSERT INTO scheduler_tasks (task_id, seq, state, ended_at, record) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT(task_id) DO UPDATE SET state = excluded.state, ended_at = excluded.ended_at, record = excluded.record`),
      get: p('SELECT record FROM scheduler_tasks WHERE task_id = ?'),
      listOpen: p('SELECT record FROM scheduler_tasks WHERE ended_at IS NULL ORDER BY seq'),
      listFinished: p(
        'SELECT record FROM scheduler_tasks WHERE ended_at IS NOT NULL ORDER BY ended_at DESC, seq DESC LIMIT ?',
      ),
      listTerminating: p(
        `SELECT record FROM scheduler_tasks WHERE state = 'CANCELLED' AND json_extract(record, '$.deadline') IS NOT NULL ORDER BY seq`,
      ),
      maxSeq: p('SELECT COALESCE(MAX(seq), 0) AS seq FROM scheduler_tasks'),
      countFinished: p('SELECT COUNT(*) AS n FROM scheduler_tasks WHERE ended_at IS NOT NULL'),
      pruneFinished: p(`DELETE FROM scheduler_tasks WHERE task_id IN (
        SELECT task_id FROM scheduler_tasks WHERE ended_at IS NOT NULL ORDER BY ended_at ASC, seq ASC LIMIT ?)`),
    };
  }

  put(task: TaskRecord): void {
    const ended = TERMINAL_TASK_STATES.has(task.state) ? (task.endedAt ?? task.updatedAt) : null;
    this.s.put.run(
      task.taskId,
      task.seq,
      task.state,
      ended,
      JSON.stringify({ ...task, params: task.params.toString('base64') }),
    );
  }

  get(taskId: string): TaskRecord | undefined {
    const row = this.s.get.get(taskId) as Row | undefined;
    return row ? revive(row) : undefined;
  }

  listOpen(): TaskRecord[] {
    return (this.s.listOpen.all() as Row[]).map(revive);
  }

  listFinished(limit: number): TaskRecord[] {
    return (this.s.listFinished.all(Math.max(0, Math.floor(limit))) as Row[]).map(revive);
  }

  listTerminating(): TaskRecord[] {
    return (this.s.listTerminating.all() as Row[]).map(revive);
  }

  maxSeq(): number {
    return Number((this.s.maxSeq.get() as Row).seq);
  }

  pruneFinished(keep: number): number {
    const excess = Number((this.s.countFinished.get() as Row).n) - Math.max(0, keep);
    if (excess <= 0) return 0;
    return Number(this.s.pruneFinished.run(excess).changes);
  }
}

function revive(row: Row): TaskRecord {
  const record = JSON.parse(String(row.record)) as TaskRecord & { params: string };
  // Records written before a field existed read with its default.
  return {
    ...record,
    withdrawals: record.withdrawals ?? 0,
    result: record.result ?? '',
    params: Buffer.from(record.params, 'base64'),
  };
}
