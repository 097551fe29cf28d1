import type { SchemaStep } from '../store/schema';

/** The activity area's tables. Append steps with the next free version; never edit one that has shipped. */
export const ACTIVITY_SCHEMA: readonly SchemaStep[] = [
  {
    version: 10,
    area: 'activity',
    description:
      'the activity buffer (RFC §10): active entries and the recent history, one per agent and task; artifacts of negotiations (activity.proto)',
    statements: [
      `CREATE TABLE activity_entries (
         agent_id TEXT NOT NULL,
         task_id TEXT NOT NULL,
         ended_at INTEGER,
         record TEXT NOT NULL,
         PRIMARY KEY (agent_id, task_id)
       )`,
      `CREATE TABLE activity_artifacts (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         negotiation_id TEXT NOT NULL,
         kind TEXT NOT NULL,
         version TEXT NOT NULL,
         content_type TEXT NOT NULL,
         content BLOB NOT NULL,
         created_at TEXT NOT NULL
       )`,
      'CREATE INDEX activity_artifacts_by_negotiation ON activity_artifacts (negotiation_id, kind, id)',
    ],
  },
];
