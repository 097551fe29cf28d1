import type { SchemaStep } from '../store/schema';

/** The negotiation room's tables. Append steps with the next free version; never edit one that has shipped. */
export const ROOM_SCHEMA: readonly SchemaStep[] = [
  {
    version: 14,
    area: 'room',
    description: 'negotiation rooms (RFC §17.5): each revision of a submitted artifact, the critics\' votes, the decisions',
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
];
