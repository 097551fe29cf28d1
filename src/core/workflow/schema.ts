import type { SchemaStep } from '../store/schema';

/** The workflow area's tables. Append steps with the next free version; never edit one that has shipped. */
export const WORKFLOW_SCHEMA: readonly SchemaStep[] = [
  {
    version: 17,
    area: 'workflow',
    description: 'DAG workflows (RFC §17.7): each workflow (its definition written once, its run state and node counts) and one row per node',
    statements: [
      `CREATE TABLE workflows (
         workflow_id TEXT PRIMARY KEY,
         active INTEGER NOT NULL,
         updated_at INTEGER NOT NULL,
         record TEXT NOT NULL,
         counts TEXT NOT NULL,
         definition TEXT NOT NULL
       )`,
      'CREATE INDEX workflows_by_update ON workflows (active DESC, updated_at DESC)',
      `CREATE TABLE workflow_nodes (
         workflow_id TEXT NOT NULL,
         node_id TEXT NOT NULL,
         record TEXT NOT NULL,
         PRIMARY KEY (workflow_id, node_id)
       ) WITHOUT ROWID`,
    ],
  },
];
