import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { AgentDescriptor, AgentPresence } from './descriptor';
import type { AgentRecord, AgentRepository } from './model';

interface AgentRow {
  agent_id: string;
  descriptor: string;
  state: string;
  registered_at: number;
  updated_at: number;
  last_heartbeat_at: number | null;
  health: string;
  presence: string;
}

/** The registry's table in the SQLite store. */
export class SqliteAgentRepository implements AgentRepository {
  private readonly upsertStmt: StatementSync;
  private readonly getStmt: StatementSync;
  private readonly listStmt: StatementSync;
  private readonly deleteStmt: StatementSync;

  constructor(db: DatabaseSync) {
    this.upsertStmt = db.prepare(
      `INSERT INTO agents (agent_id, descriptor, state, registered_at, updated_at, last_heartbeat_at, health, presence)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(agent_id) DO UPDATE SET descriptor = excluded.descriptor, state = excluded.state,
         registered_at = excluded.registered_at, updated_at = excluded.updated_at,
         last_heartbeat_at = excluded.last_heartbeat_at, health = excluded.health, presence = excluded.presence`,
    );
    this.getStmt = db.prepare('SELECT * FROM agents WHERE agent_id = ?');
    this.listStmt = db.prepare('SELECT * FROM agents ORDER BY agent_id');
    this.deleteStmt = db.prepare('DELETE FROM agents WHERE agent_id = ?');
  }

  upsert(record: AgentRecord): void {
    this.upsertStmt.run(
      record.descriptor.agentId,
      JSON.stringify(record.descriptor),
      record.state,
      record.registeredAt,
      record.updatedAt,
      record.lastHeartbeatAt,
      JSON.stringify(record.health),
      record.presence,
    );
  }

  get(agentId: string): AgentRecord | undefined {
    const row = this.getStmt.get(agentId) as AgentRow | undefined;
    return row ? toAgentRecord(row) : undefined;
  }

  list(): AgentRecord[] {
    return (this.listStmt.all() as unknown as AgentRow[]).map(toAgentRecord);
  }

  delete(agentId: string): boolean {
    return Number(this.deleteStmt.run(agentId).changes) > 0;
  }
}

function toAgentRecord(row: AgentRow): AgentRecord {
  return {
    descriptor: JSON.parse(row.descriptor) as AgentDescriptor,
    state: row.state,
    registeredAt: row.registered_at,
    updatedAt: row.updated_at,
    lastHeartbeatAt: row.last_heartbeat_at,
    health: JSON.parse(row.health) as Record<string, string>,
    presence: row.presence as AgentPresence,
  };
}
