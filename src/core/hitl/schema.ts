import type { SchemaStep } from '../store/schema';

/** The HITL tables. Append steps with the next free version; never edit one that has shipped. */
export const HITL_SCHEMA: readonly SchemaStep[] = [
  {
    version: 3,
    area: 'hitl',
    description: 'human-in-the-loop: invocations and their audit trail',
    statements: [
      `CREATE TABLE hitl_invocations (
         invocation_id TEXT PRIMARY KEY,
         state TEXT NOT NULL,
         created_at INTEGER NOT NULL,
         updated_at INTEGER NOT NULL,
         record TEXT NOT NULL
       )`,
      `CREATE INDEX hitl_invocations_state ON hitl_invocations(state, updated_at)`,
      `CREATE TABLE hitl_audit (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         invocation_id TEXT NOT NULL,
         at INTEGER NOT NULL,
         kind TEXT NOT NULL,
         actor TEXT NOT NULL,
         automatic INTEGER NOT NULL,
         details TEXT NOT NULL
       )`,
      `CREATE INDEX hitl_audit_invocation ON hitl_audit(invocation_id, id)`,
    ],
  },
];
