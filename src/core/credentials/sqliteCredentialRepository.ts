import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { AgentOwner, CredentialKind, CredentialRecord, CredentialRepository } from './model';

type Row = Record<string, unknown>;

/** The credentials tables in the SQLite store (schema version 5). Secrets are never stored, only their SHA-256. */
export class SqliteCredentialRepository implements CredentialRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      insert:
        p(`INSERT INTO credentials (id, kind, agent_id, label, created_at, created_by, revoked_at, last_used_at, secret_sha256)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      revoke: p('UPDATE credentials SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
      touch: p('UPDATE credentials SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)'),
      all: p('SELECT * FROM credentials ORDER BY created_at, rowid'),
      putOwner: p(
        'INSERT INTO agent_owners (agent_id, owner, since) VALUES (?, ?, ?) ON CONFLICT(agent_id) DO UPDATE SET owner = excluded.owner, since = excluded.since',
      ),
      owners: p('SELECT * FROM agent_owners'),
    };
  }

  insert(r: CredentialRecord): void {
    this.s.insert.run(
      r.id,
      r.kind,
      r.agentId,
      r.label,
      r.createdAt,
      r.createdBy,
      r.revokedAt,
      r.lastUsedAt,
      r.secretHash,
    );
  }

  revoke(id: string, at: number): void {
    this.s.revoke.run(at, id);
  }

  touch(uses: ReadonlyArray<readonly [id: string, at: number]>): void {
    for (const [id, at] of uses) this.s.touch.run(at, id, at);
  }

  all(): CredentialRecord[] {
    return (this.s.all.all() as Row[]).map((row) => ({
      id: String(row.id),
      kind: String(row.kind) as CredentialKind,
      agentId: row.agent_id === null ? null : String(row.agent_id),
      label: String(row.label),
      createdAt: Number(row.created_at),
      createdBy: String(row.created_by),
      revokedAt: row.revoked_at === null ? null : Number(row.revoked_at),
      lastUsedAt: row.last_used_at === null ? null : Number(row.last_used_at),
      secretHash: Buffer.from(row.secret_sha256 as Uint8Array),
    }));
  }

  putOwner(owner: AgentOwner): void {
    this.s.putOwner.run(owner.agentId, owner.owner, owner.since);
  }

  owners(): AgentOwner[] {
    return (this.s.owners.all() as Row[]).map((row) => ({
      agentId: String(row.agent_id),
      owner: String(row.owner),
      since: Number(row.since),
    }));
  }
}
