import type { SchemaStep } from '../store/schema';

/** The worktree area's tables. Append steps with the next free version; never edit one that has shipped. */
export const WORKTREE_SCHEMA: readonly SchemaStep[] = [
  {
    version: 7,
    area: 'worktree',
    description: 'worktree bindings: one per agent, its state machine (RFC §16.1) as a JSON record',
    statements: [
      `CREATE TABLE worktree_bindings (
         agent_id TEXT PRIMARY KEY,
         state TEXT NOT NULL,
         updated_at INTEGER NOT NULL,
         record TEXT NOT NULL
       )`,
    ],
  },
  {
    version: 8,
    area: 'worktree',
    description:
      'merge-backs that can be undone (after a restart too): the MergeBack record as JSON, until undone or its snapshot expires',
    statements: [
      `CREATE TABLE worktree_merges (
         merge_id TEXT PRIMARY KEY,
         repo_id TEXT NOT NULL,
         merged_at INTEGER NOT NULL,
         record TEXT NOT NULL
       )`,
      'CREATE INDEX worktree_merges_by_time ON worktree_merges (merged_at)',
    ],
  },
];
