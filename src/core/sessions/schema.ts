import type { SchemaStep } from '../store/schema';

/** The sessions area's tables. Append steps with the next free version; never edit one that has shipped. */
export const SESSIONS_SCHEMA: readonly SchemaStep[] = [
  {
    version: 19,
    area: 'sessions',
    description:
      'Agent sessions over the Agent Client Protocol (README, "Agents in session mode"): one JSON record per agent (its state, ACP session id, running turn, exit), and its transcript, one JSON entry per row by seq',
    statements: [
      `CREATE TABLE agent_sessions (
         agent_id TEXT PRIMARY KEY,
         state TEXT NOT NULL,
         updated_at INTEGER NOT NULL,
         record TEXT NOT NULL
       )`,
      // Keyed by (agent, seq) (WITHOUT ROWID): an entry rewritten in place by its seq, the last N read backwards
      // along the key, and the oldest dropped as a range of it.
      `CREATE TABLE session_entries (
         agent_id TEXT NOT NULL,
         seq INTEGER NOT NULL,
         entry TEXT NOT NULL,
         PRIMARY KEY (agent_id, seq)
       ) WITHOUT ROWID`,
    ],
  },
];
