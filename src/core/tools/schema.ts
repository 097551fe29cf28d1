import type { SchemaStep } from '../store/schema';

/** The tools area's tables. Append steps with the next free version; never edit one that has shipped. */
export const TOOLS_SCHEMA: readonly SchemaStep[] = [
  {
    version: 11,
    area: 'tools',
    description:
      'tools (RFC §18): registered agent providers with their descriptors; the recent tool calls, in the order they started',
    statements: [
      `CREATE TABLE tool_providers (
         provider_id TEXT PRIMARY KEY,
         record TEXT NOT NULL,
         registered_at INTEGER NOT NULL
       )`,
      `CREATE TABLE tool_calls (
         call_id TEXT PRIMARY KEY,
         seq INTEGER NOT NULL,
         record TEXT NOT NULL,
         outcome TEXT NOT NULL,
         started_at INTEGER NOT NULL
       )`,
      'CREATE INDEX tool_calls_by_seq ON tool_calls (seq)',
    ],
  },
];
