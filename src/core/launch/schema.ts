import type { SchemaStep } from '../store/schema';

/** The launch area's tables. Append steps with the next free version; never edit one that has shipped. */
export const LAUNCH_SCHEMA: readonly SchemaStep[] = [
  {
    version: 18,
    area: 'launch',
    description:
      'Launched agents (README, "Launch profiles"): one JSON record per managed agent (profile, repository, worktree, credential id, launch state), newest first by launch time',
    statements: [
      `CREATE TABLE launches (
         agent_id TEXT PRIMARY KEY,
         state TEXT NOT NULL,
         launched_at INTEGER NOT NULL,
         record TEXT NOT NULL
       )`,
      'CREATE INDEX launches_by_time ON launches (launched_at DESC)',
    ],
  },
];
