import type { SchemaStep } from '../store/schema';

/** The scheduler's tables. Append steps with the next free version; never edit one that has shipped. */
export const SCHEDULER_SCHEMA: readonly SchemaStep[] = [
  {
    version: 9,
    area: 'scheduler',
    description:
      'tasks (RFC §7, §9): one row per task, its record as JSON; open tasks by arrival order, finished ones by end time',
    statements: [
      `CREATE TABLE scheduler_tasks (
         task_id TEXT PRIMARY KEY,
         seq INTEGER NOT NULL UNIQUE,
         state TEXT NOT NULL,
         ended_at INTEGER,
         record TEXT NOT NULL
       )`,
      'CREATE INDEX scheduler_tasks_open ON scheduler_tasks (seq) WHERE ended_at IS NULL',
      'CREATE INDEX scheduler_tasks_ended ON scheduler_tasks (ended_at) WHERE ended_at IS NOT NULL',
    ],
  },
];
