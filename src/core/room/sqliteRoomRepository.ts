import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { ProposalRecord, ProposalSummary, RoomDecision, RoomRepository, VoteRecord } from './model';

type Row = Record<string, unknown>;

/** The repository's statements (exported so that a test can check their query plans). */
export const ROOM_SQL = {
  putProposal: `INSERT INTO room_proposals (artifact_id, revision, room_id, finished, updated_at, record, artifact, is_latest) VALUES (?, ?, ?, ?, ?, ?, ?, 1)
    ON CONFLICT(artifact_id, revision) DO UPDATE SET finished = excluded.finished, updated_at = excluded.updated_at, record = excluded.record`,
  /** After a new revision: the older ones are no longer the artifact's latest. */
  unmarkOlder: 'UPDATE room_proposals SET is_latest = 0 WHERE artifact_id = ? AND revision < ? AND is_latest = 1',
  latest: 'SELECT record, artifact FROM room_proposals WHERE artifact_id = ? ORDER BY revision DESC LIMIT 1',
  revision: 'SELECT record, artifact FROM room_proposals WHERE artifact_id = ? AND revision = ?',
  listLatest: 'SELECT record FROM room_proposals WHERE is_latest = 1 ORDER BY finished ASC, updated_at DESC LIMIT ?',
  countInRoom: 'SELECT COUNT(*) AS n FROM room_proposals WHERE room_id = ?',
  // UNION ALL (the two parts may both hold an artifact whose id is its room's id: deduplicated by the caller);
  // `+finished` keeps the second part on the primary key (artifact_id) rather than the index on finished.
  escalatedFor: `SELECT artifact_id, revision, record FROM room_proposals WHERE room_id = ?1 AND finished = 0
    UNION ALL SELECT artifact_id, revision, record FROM room_proposals WHERE artifact_id = ?2 AND +finished = 0`,
  unfinished: 'SELECT record, artifact FROM room_proposals WHERE finished = 0 ORDER BY updated_at',
  putVote: `INSERT INTO room_votes (artifact_id, revision, critic_id, record) VALUES (?, ?, ?, ?)
    ON CONFLICT(artifact_id, revision, critic_id) DO UPDATE SET record = excluded.record`,
  votes: 'SELECT record FROM room_votes WHERE artifact_id = ? AND revision = ? ORDER BY critic_id',
  putDecision: 'INSERT INTO room_decisions (artifact_id, revision, record) VALUES (?, ?, ?)',
  decision: 'SELECT record FROM room_decisions WHERE artifact_id = ? AND revision = ? ORDER BY id DESC LIMIT 1',
} as const;

function summaryOf(row: Row): ProposalSummary {
  return JSON.parse(String(row.record)) as ProposalSummary;
}

function proposalOf(row: Row): ProposalRecord {
  return {
    ...(JSON.parse(String(row.record)) as Omit<ProposalRecord, 'artifact'>),
    artifact: Buffer.from(row.artifact as Uint8Array),
  };
}

/**
 * Negotiation rooms (schema versions 14, 15): each revision of an artifact (its bytes in a BLOB column), one vote per
 * critic per revision (a re-vote replaces it), every decision in order (ESCALATED_TO_HITL, then the final one).
 */
export class SqliteRoomRepository implements RoomRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = Object.fromEntries(Object.entries(ROOM_SQL).map(([name, sql]) => [name, p(sql)]));
  }

  putProposal(proposal: ProposalRecord): void {
    const { artifact, ...rest } = proposal;
    this.s.putProposal.run(
      proposal.artifactId,
      proposal.revision,
      proposal.roomId,
      proposal.state === 'decided' ? 1 : 0,
      proposal.updatedAt,
      JSON.stringify(rest),
      artifact,
    );
    this.s.unmarkOlder.run(proposal.artifactId, proposal.revision);
  }

  latest(artifactId: string): ProposalRecord | undefined {
    const row = this.s.latest.get(artifactId) as Row | undefined;
    return row ? proposalOf(row) : undefined;
  }

  revision(artifactId: string, revision: number): ProposalRecord | undefined {
    const row = this.s.revision.get(artifactId, revision) as Row | undefined;
    return row ? proposalOf(row) : undefined;
  }

  listLatest(limit: number): ProposalSummary[] {
    return (this.s.listLatest.all(Math.max(0, Math.floor(limit))) as Row[]).map(summaryOf);
  }

  escalatedFor(id: string): ProposalSummary[] {
    const seen = new Set<string>();
    return (this.s.escalatedFor.all(id, id) as Row[])
      .filter((row) => {
        const k = `${String(row.revision)}#${String(row.artifact_id)}`;
        if (seen.has(k)) return false;
        seen.add(k);
        return true;
      })
      .map(summaryOf)
      .filter((p) => p.state === 'escalated');
  }

  countInRoom(roomId: string): number {
    return Number((this.s.countInRoom.get(roomId) as Row).n);
  }

  listUnfinished(): ProposalRecord[] {
    return (this.s.unfinished.all() as Row[]).map(proposalOf);
  }

  putVote(vote: VoteRecord): void {
    this.s.putVote.run(vote.artifactId, vote.revision, vote.criticId, JSON.stringify(vote));
  }

  votes(artifactId: string, revision: number): VoteRecord[] {
    return (this.s.votes.all(artifactId, revision) as Row[]).map((row) => JSON.parse(String(row.record)) as VoteRecord);
  }

  putDecision(decision: RoomDecision): void {
    this.s.putDecision.run(decision.artifactId, decision.revision, JSON.stringify(decision));
  }

  decision(artifactId: string, revision: number): RoomDecision | undefined {
    const row = this.s.decision.get(artifactId, revision) as Row | undefined;
    return row ? (JSON.parse(String(row.record)) as RoomDecision) : undefined;
  }
}
