import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { ProposalRecord, RoomDecision, RoomRepository, VoteRecord } from './model';

type Row = Record<string, unknown>;

function proposalOf(row: Row): ProposalRecord {
  return { ...(JSON.parse(String(row.record)) as Omit<ProposalRecord, 'artifact'>), artifact: Buffer.from(row.artifact as Uint8Array) };
}

/**
 * Negotiation rooms (schema version 14): each revision of an artifact (its bytes in a BLOB column), one vote per
 * critic per revision (a re-vote replaces it), every decision in order (ESCALATED_TO_HITL, then the final one).
 */
export class SqliteRoomRepository implements RoomRepository {
  private readonly s: Record<string, StatementSync>;

  constructor(db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      putProposal: p(`INSERT INTO room_proposals (artifact_id, revision, room_id, finished, updated_at, record, artifact) VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(artifact_id, revision) DO UPDATE SET finished = excluded.finished, updated_at = excluded.updated_at, record = excluded.record`),
      latest: p('SELECT record, artifact FROM room_proposals WHERE artifact_id = ? ORDER BY revision DESC LIMIT 1'),
      revision: p('SELECT record, artifact FROM room_proposals WHERE artifact_id = ? AND revision = ?'),
      listLatest: p(`SELECT record, artifact FROM room_proposals p WHERE revision = (SELECT MAX(revision) FROM room_proposals q WHERE q.artifact_id = p.artifact_id)
        ORDER BY finished ASC, updated_at DESC LIMIT ?`),
      countInRoom: p('SELECT COUNT(*) AS n FROM room_proposals WHERE room_id = ?'),
      unfinished: p('SELECT record, artifact FROM room_proposals WHERE finished = 0 ORDER BY updated_at'),
      putVote: p(`INSERT INTO room_votes (artifact_id, revision, critic_id, record) VALUES (?, ?, ?, ?)
        ON CONFLICT(artifact_id, revision, critic_id) DO UPDATE SET record = excluded.record`),
      votes: p('SELECT record FROM room_votes WHERE artifact_id = ? AND revision = ? ORDER BY critic_id'),
      putDecision: p('INSERT INTO room_decisions (artifact_id, revision, record) VALUES (?, ?, ?)'),
      decision: p('SELECT record FROM room_decisions WHERE artifact_id = ? AND revision = ? ORDER BY id DESC LIMIT 1'),
    };
  }

  putProposal(proposal: ProposalRecord): void {
    const { artifact, ...rest } = proposal;
    this.s.putProposal.run(proposal.artifactId, proposal.revision, proposal.roomId, proposal.state === 'decided' ? 1 : 0,
      proposal.updatedAt, JSON.stringify(rest), artifact);
  }

  latest(artifactId: string): ProposalRecord | undefined {
    const row = this.s.latest.get(artifactId) as Row | undefined;
    return row ? proposalOf(row) : undefined;
  }

  revision(artifactId: string, revision: number): ProposalRecord | undefined {
    const row = this.s.revision.get(artifactId, revision) as Row | undefined;
    return row ? proposalOf(row) : undefined;
  }

  listLatest(limit: number): ProposalRecord[] {
    return (this.s.listLatest.all(Math.max(0, Math.floor(limit))) as Row[]).map(proposalOf);
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
