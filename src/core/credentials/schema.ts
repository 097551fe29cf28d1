import type { SchemaStep } from '../store/schema';

/** The credentials tables. Append steps with the next free version; never edit one that has shipped. */
export const CREDENTIALS_SCHEMA: readonly SchemaStep[] = [
  {
    version: 5,
    area: 'credentials',
    description: 'agent and enrolment credentials (hashed secrets) and who owns each agent id',
    statements: [
      `CREATE TABLE credentials (
         id TEXT PRIMARY KEY,
         kind TEXT NOT NULL,
         agent_id TEXT,
         label TEXT NOT NULL,
         created_at INTEGER NOT NULL,
         created_by TEXT NOT NULL,
         revoked_at INTEGER,
         last_used_at INTEGER,
         secret_sha256 BLOB NOT NULL
       )`,
      `CREATE TABLE agent_owners (
         agent_id TEXT PRIMARY KEY,
         owner TEXT NOT NULL,
         since INTEGER NOT NULL
       )`,
    ],
  },
];
