import type { SchemaStep } from '../store/schema';

/** The router's tables. Append steps with the next free version; never edit one that has shipped. */
export const ROUTER_SCHEMA: readonly SchemaStep[] = [
  {
    version: 2,
    area: 'router',
    description: 'router: messages, payloads, outcome cache, deliveries, dead letters',
    statements: [
      `CREATE TABLE messages (
         message_id TEXT PRIMARY KEY,
         producer_id TEXT NOT NULL,
         recipient_id TEXT NOT NULL,
         dedup_key TEXT NOT NULL,
         tracked INTEGER NOT NULL,
         lane TEXT NOT NULL,
         ack_for TEXT NOT NULL,
         envelope TEXT NOT NULL,
         accepted_at INTEGER NOT NULL,
         state TEXT NOT NULL,
         error_code TEXT NOT NULL,
         updated_at INTEGER NOT NULL,
         ack_deadline INTEGER,
         expires_at INTEGER,
         delivery TEXT NOT NULL,
         delivery_seq INTEGER,
         delivered_at INTEGER,
         lease_until INTEGER,
         delivery_attempts INTEGER NOT NULL,
         history TEXT NOT NULL
       )`,
      `CREATE INDEX messages_live ON messages(delivery, state)`,
      // Payloads live apart, so that the many small updates of a message's lifecycle never rewrite them.
      `CREATE TABLE message_payloads (message_id TEXT PRIMARY KEY, payload BLOB NOT NULL)`,
      `CREATE TABLE dedup (
         producer_id TEXT NOT NULL,
         key TEXT NOT NULL,
         original_message_id TEXT NOT NULL,
         latest_message_id TEXT NOT NULL,
         attempts TEXT NOT NULL,
         status TEXT NOT NULL,
         outcome_state TEXT NOT NULL,
         error_code TEXT NOT NULL,
         result TEXT,
         cached_at INTEGER NOT NULL,
         expires_at INTEGER NOT NULL,
         PRIMARY KEY (producer_id, key)
       )`,
      `CREATE INDEX dedup_expiry ON dedup(expires_at)`,
      `CREATE TABLE deliveries (
         agent_id TEXT NOT NULL,
         seq INTEGER NOT NULL,
         message_id TEXT NOT NULL,
         delivered_at INTEGER NOT NULL,
         PRIMARY KEY (agent_id, seq)
       )`,
      `CREATE TABLE dead_letters (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         message_id TEXT NOT NULL,
         producer_id TEXT NOT NULL,
         recipient_id TEXT NOT NULL,
         correlation_id TEXT NOT NULL,
         idempotency_token TEXT NOT NULL,
         message_type TEXT NOT NULL,
         content_type TEXT NOT NULL,
         size INTEGER NOT NULL,
         final_state TEXT NOT NULL,
         error_code TEXT NOT NULL,
         reason TEXT NOT NULL,
         attempts TEXT NOT NULL,
         route TEXT NOT NULL,
         created_at INTEGER NOT NULL,
         failed_at INTEGER NOT NULL,
         excerpt TEXT NOT NULL,
         envelope TEXT NOT NULL,
         payload BLOB NOT NULL,
         requeued_at INTEGER,
         requeued_as TEXT
       )`,
      `CREATE INDEX dead_letters_failed ON dead_letters(failed_at)`,
    ],
  },
  {
    version: 4,
    area: 'router',
    description:
      'router: messages and envelopes keyed by arrival order, message ids indexed in bulk, deliveries without rowid',
    // Random message ids as primary keys cost a random page write per insert in two trees; arrival-ordered
    // integer keys append. The id lookup lives in router_message_ids, which the repository fills in bulk.
    statements: [
      `CREATE TABLE router_messages (
         id INTEGER PRIMARY KEY,
         message_id TEXT NOT NULL,
         producer_id TEXT NOT NULL,
         recipient_id TEXT NOT NULL,
         dedup_key TEXT NOT NULL,
         tracked INTEGER NOT NULL,
         lane TEXT NOT NULL,
         ack_for TEXT NOT NULL,
         accepted_at INTEGER NOT NULL,
         state TEXT NOT NULL,
         error_code TEXT NOT NULL,
         updated_at INTEGER NOT NULL,
         ack_deadline INTEGER,
         expires_at INTEGER,
         delivery TEXT NOT NULL,
         delivery_seq INTEGER,
         delivered_at INTEGER,
         lease_until INTEGER,
         delivery_attempts INTEGER NOT NULL,
         history TEXT NOT NULL
       )`,
      // Only messages not yet finished with are in this index, so it stays as small as the live set.
      `CREATE INDEX router_messages_live ON router_messages(id)
         WHERE delivery != 'done' OR state NOT IN ('FULFILLED', 'REJECTED', 'FAILED', 'TIMED_OUT')`,
      // What never changes after acceptance lives apart, so that the lifecycle's updates rewrite small rows.
      `CREATE TABLE router_envelopes (id INTEGER PRIMARY KEY, envelope TEXT NOT NULL, payload BLOB NOT NULL)`,
      `CREATE TABLE router_message_ids (message_id TEXT PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID`,
      `CREATE TABLE router_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`,
      `INSERT INTO router_messages (id, message_id, producer_id, recipient_id, dedup_key, tracked, lane, ack_for, accepted_at, state, error_code,
           updated_at, ack_deadline, expires_at, delivery, delivery_seq, delivered_at, lease_until, delivery_attempts, history)
         SELECT rowid, message_id, producer_id, recipient_id, dedup_key, tracked, lane, ack_for, accepted_at, state, error_code,
           updated_at, ack_deadline, expires_at, delivery, delivery_seq, delivered_at, lease_until, delivery_attempts, history
         FROM messages ORDER BY rowid`,
      `INSERT INTO router_envelopes (id, envelope, payload)
         SELECT m.rowid, m.envelope, p.payload FROM messages m JOIN message_payloads p USING (message_id)`,
      `INSERT INTO router_message_ids (message_id, id) SELECT message_id, id FROM router_messages`,
      `INSERT INTO router_meta (key, value) VALUES ('message_ids_through', (SELECT COALESCE(MAX(id), 0) FROM router_messages))`,
      `DROP TABLE message_payloads`,
      `DROP TABLE messages`,
      // Keyed by its own primary key (WITHOUT ROWID): one tree instead of a table and its key index, so a
      // delivery writes one page fewer.
      `CREATE TABLE deliveries_v4 (
         agent_id TEXT NOT NULL,
         seq INTEGER NOT NULL,
         message_id TEXT NOT NULL,
         delivered_at INTEGER NOT NULL,
         PRIMARY KEY (agent_id, seq)
       ) WITHOUT ROWID`,
      `INSERT INTO deliveries_v4 SELECT agent_id, seq, message_id, delivered_at FROM deliveries`,
      `DROP TABLE deliveries`,
      `ALTER TABLE deliveries_v4 RENAME TO deliveries`,
    ],
  },
  {
    version: 6,
    area: 'router',
    description: 'router: payloads of 1 MiB or more kept as files in <data folder>/payloads, shared by their owners',
    // An owner is a message (`m:<router_envelopes id>`) or a dead letter (`d:<dead_letters id>`); fan-out copies, a
    // dead letter and its requeue share one file. A file with no owner row left is deleted after the commit.
    statements: [
      `CREATE TABLE router_payload_files (owner TEXT PRIMARY KEY, file_id TEXT NOT NULL, bytes INTEGER NOT NULL, digest TEXT) WITHOUT ROWID`,
      `CREATE INDEX router_payload_files_file ON router_payload_files(file_id)`,
    ],
  },
];
