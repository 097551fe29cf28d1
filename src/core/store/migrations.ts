/**
 * Versioned schema. The store's `PRAGMA user_version` is the number of migrations applied.
 * Append new migrations; never edit one that has shipped.
 */
export interface Migration {
  readonly version: number;
  readonly description: string;
  readonly statements: readonly string[];
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'agents and structured events',
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
      `CREATE TABLE events (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         ts TEXT NOT NULL,
         correlation_id TEXT NOT NULL,
         actor TEXT NOT NULL,
         event_type TEXT NOT NULL,
         level TEXT NOT NULL,
         source TEXT NOT NULL,
         details TEXT NOT NULL
       )`,
      `CREATE INDEX events_correlation ON events(correlation_id)`,
      `CREATE INDEX events_type ON events(event_type)`,
    ],
  },
];

export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;
