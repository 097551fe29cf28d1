import type { SchemaStep } from '../store/schema';

/** The policy area's tables. Append steps with the next free version; never edit one that has shipped. */
export const POLICY_SCHEMA: readonly SchemaStep[] = [
  {
    version: 12,
    area: 'policy',
    description:
      'negotiation policy (RFC §17.2): every version of the policy set (base policy, profiles, guardrails, room thresholds), kept for audit',
    statements: [
      `CREATE TABLE policy_versions (
         version INTEGER PRIMARY KEY,
         record TEXT NOT NULL,
         set_by TEXT NOT NULL,
         set_at INTEGER NOT NULL
       )`,
    ],
  },
];
