import type { SchemaStep } from '../store/schema';

/** The registry's tables. Append steps with the next free version; never edit one that has shipped. */
export const REGISTRY_SCHEMA: readonly SchemaStep[] = [
  {
    version: 1,
    area: 'registry',
    description: 'agents',
    statements: [
      `CREATE TABLE agents (
         agent_id TEXT PRIMARY KEY,
         descriptor TEXT NOT NULL,
         state TEXT NOT NULL,
         registered_at INTEGER NOT NULL,
         updated_at INTEGER NOT NULL,
         last_heartbeat_at INTEGER,
         health TEXT NOT NULL DEFAULT '{}',
         presence TEXT NOT NULL DEFAULT 'online'
       )`,
    ],
  },
];
