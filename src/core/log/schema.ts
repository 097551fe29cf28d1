import type { SchemaStep } from '../store/schema';

/** The event log's table. Append steps with the next free version; never edit one that has shipped. */
export const LOG_SCHEMA: readonly SchemaStep[] = [
  {
    version: 1,
    area: 'log',
    description: 'structured events',
    statements: [
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
    ],
  },
];
