import type { SchemaStep } from '../store/schema';

/** The workflow area's tables. Append steps with the next free version; never edit one that has shipped. */
export const WORKFLOW_SCHEMA: readonly SchemaStep[] = [
  {
    version: 17,
    area: 'workflow',
    description:
      'DAG workflows (RFC §17.7): each workflow (its run state and node counts), its definition (written once, in its own table), its workflow_data (a snapshot and the writes since), one row per node',
    statements: [
      `CREATE TABLE workflows (
         workflow_id TEXT PRIMARY KEY,
         active INTEGER NOT NULL,
         updated_at INTEGER NOT NULL,
         record TEXT NOT NULL,
         counts TEXT NOT NULL
       )`,
      'CREATE INDEX workflows_by_update ON workflows (active DESC, updated_at DESC)',
      // Apart from the run state: SQLite rewrites a whole row on UPDATE, and a 100,000-node definition is megabytes.
      `CREATE TABLE workflow_definitions (
         workflow_id TEXT PRIMARY KEY,
         definition TEXT NOT NULL
       )`,
      // workflow_data apart from the run state too: a snapshot (path '') and each write since (path: the JSON array of
      // its segments), in seq order; a node's output costs one small row, and the engine writes a new snapshot once the
      // writes since the last one outweigh it (amortised O(1) per write whatever the size of workflow_data).
      `CREATE TABLE workflow_data (
         workflow_id TEXT NOT NULL,
         seq INTEGER NOT NULL,
         path TEXT NOT NULL,
         value TEXT NOT NULL,
         PRIMARY KEY (workflow_id, seq)
       ) WITHOUT ROWID`,
      `CREATE TABLE workflow_nodes (
         workflow_id TEXT NOT NULL,
         node_id TEXT NOT NULL,
         record TEXT NOT NULL,
         PRIMARY KEY (workflow_id, node_id)
       ) WITHOUT ROWID`,
    ],
  },
];
