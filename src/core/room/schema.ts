import type { SchemaStep } from '../store/schema';

/** The negotiation room's tables. Append steps with the next free version; never edit one that has shipped. */
export const ROOM_SCHEMA: readonly SchemaStep[] = [
  {
    version: 14,
    area: 'room',
    description:
      "negotiation rooms (RFC §17.5): each revision of a submitted artifact, the critics' votes, the decisions",
    statements: [
      `CREATE TABLE room_proposals (
         artifact_id TEXT NOT NULL,
         revision INTEGER NOT NULL,
         room_id TEXT NOT NULL,
         finished INTEGER NOT NULL,
         updated_at INTEGER NOT NULL,
         record TEXT NOT NULL,
         artifact BLOB NOT NULL,
         PRIMARY KEY (artifact_id, revision)
       )`,
      'CREATE INDEX room_proposals_by_update ON room_proposals (finished, updated_at)',
      `CREATE TABLE room_votes (
         artifact_id TEXT NOT NULL,
         revision INTEGER NOT NULL,
         critic_id TEXT NOT NULL,
         record TEXT NOT NULL,
         PRIMARY KEY (artifact_id, revision, critic_id)
       )`,
      `CREATE TABLE room_decisions (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         artifact_id TEXT NOT NULL,
         revision INTEGER NOT NULL,
         record TEXT NOT NULL
       )`,
      'CREATE INDEX room_decisions_by_artifact ON room_decisions (artifact_id, revision, id)',
    ],
  },
  {
    version: 15,
    area: 'room',
    description:
      'negotiation rooms: an is_latest flag and indexes so that listing, room lookups and counting read no whole table',
    statements: [
      'ALTER TABLE room_proposals ADD COLUMN is_latest INTEGER NOT NULL DEFAULT 0',
      `UPDATE room_proposals SET is_latest = 1
         WHERE revision = (SELECT MAX(q.revision) FROM room_proposals q WHERE q.artifact_id = room_proposals.artifact_id)`,
      'CREATE INDEX room_proposals_latest ON room_proposals (is_latest, finished ASC, updated_at DESC)',
      'CREATE INDEX room_proposals_by_room ON room_proposals (room_id, finished)',
    ],
  },
];
