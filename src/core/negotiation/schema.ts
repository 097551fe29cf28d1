import type { SchemaStep } from '../store/schema';

/** The negotiation area's tables. Append steps with the next free version; never edit one that has shipped. */
export const NEGOTIATION_SCHEMA: readonly SchemaStep[] = [
  {
    version: 13,
    area: 'negotiation',
    description:
      'debates (RFC §17): one record per negotiation (state, effective policy, decision); its rounds with their payloads, evaluations and scores',
    statements: [
      `CREATE TABLE negotiations (
         negotiation_id TEXT PRIMARY KEY,
         finished INTEGER NOT NULL,
         updated_at INTEGER NOT NULL,
         record TEXT NOT NULL
       )`,
      'CREATE INDEX negotiations_by_update ON negotiations (finished, updated_at)',
      `CREATE TABLE negotiation_rounds (
         negotiation_id TEXT NOT NULL,
         n INTEGER NOT NULL,
         record TEXT NOT NULL,
         payload BLOB NOT NULL,
         PRIMARY KEY (negotiation_id, n)
       )`,
    ],
  },
];
