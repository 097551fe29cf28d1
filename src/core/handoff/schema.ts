import type { SchemaStep } from '../store/schema';

/** The handoff area's table. Append steps with the next free version; never edit one that has shipped. */
export const HANDOFF_SCHEMA: readonly SchemaStep[] = [
  {
    version: 16,
    area: 'handoff',
    description:
      'handoffs (RFC §17.6): one JSON record per request with its context bytes; indexes for open ones, completed transfers and retention',
    statements: [
      `CREATE TABLE handoffs (
         request_id TEXT PRIMARY KEY,
         state TEXT NOT NULL,
         open INTEGER NOT NULL,
         from_agent TEXT NOT NULL,
         correlation_id TEXT NOT NULL,
         updated_at INTEGER NOT NULL,
         ended_at INTEGER,
         context_bytes INTEGER NOT NULL,
         record TEXT NOT NULL,
         context BLOB NOT NULL
       )`,
      // listOpen (open = 1) and listRecent (ORDER BY open DESC, updated_at DESC) read this index only.
      'CREATE INDEX handoffs_by_update ON handoffs (open, updated_at)',
      // Retention: ended handoffs by when they ended.
      'CREATE INDEX handoffs_ended ON handoffs (ended_at) WHERE open = 0',
      // The router's transferred-work refusals: the newest rebuilt at start, older ones looked up (Handoffs.refusalFor).
      "CREATE INDEX handoffs_transferred ON handoffs (from_agent, correlation_id) WHERE state = 'COMPLETED'",
    ],
  },
];
