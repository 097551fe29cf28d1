import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { PruneResult } from '../retention';
import type { CommitParticipant, WriteStage } from '../store/store';
import { WriteBuffer } from '../store/writeBuffer';
import type { Envelope } from './envelope';
import type { Lane } from './lanes';
import type { MessageState } from './lifecycle';
import { writeMessageRow, type StagedRow } from './messageRows';
import { PAYLOAD_DETACH_MIN_BYTES } from './memoryBudget';
import type { PayloadFile } from './payloadFiles';
import type {
  DeadLetter,
  DeadLetterFilter,
  DedupEntry,
  DeliveryStatus,
  HistoryEntry,
  MessageRecord,
  RouterRepository,
} from './model';
import type { MessageListFilter, MessageSummary } from './model';

type Row = Record<string, unknown>;

/** Envelope fields other than the payload, as stored in the `envelope` JSON column. */
function envelopeJson(envelope: Envelope): string {
  const { payload: _payload, ...rest } = envelope;
  return JSON.stringify(rest);
}

/**
 * A released payload (a message finished with, `releasePayload`) is stored as TEXT in the payload column, in place
 * of the BLOB: the content digest of an untokened message, else ''. The column's type is the flag.
 */
function envelopeFrom(json: unknown, payload: unknown): Envelope {
  const bytes =
    typeof payload === 'string' || payload === null ? new Uint8Array(0) : new Uint8Array(payload as Uint8Array);
  return { ...(JSON.parse(String(json)) as Omit<Envelope, 'payload'>), payload: bytes };
}

/**
 * A message read back leaves a payload of PAYLOAD_DETACH_MIN_BYTES or more in the store (`stored_bytes`), so that
 * recovery and lookups never load megabytes into memory; `payload()` reads it when it is needed. SQLite's length()
 * of a column reads no overflow page, and the CASE loads the bytes only for smaller payloads.
 */
const PAYLOAD_COLUMNS = `CASE WHEN typeof(e.payload) = 'blob' AND length(e.payload) >= ${PAYLOAD_DETACH_MIN_BYTES} THEN NULL ELSE e.payload END AS payload,
  CASE WHEN typeof(e.payload) = 'blob' AND length(e.payload) >= ${PAYLOAD_DETACH_MIN_BYTES} THEN length(e.payload) END AS stored_bytes,
  f.file_id AS file_id, f.bytes AS file_bytes, f.digest AS file_digest`;

/** A message's envelope with its payload file, if it has one (owner `m:<id>`; schema v6). */
const MESSAGE_JOIN = `router_messages m JOIN router_envelopes e ON e.id = m.id LEFT JOIN router_payload_files f ON f.owner = 'm:' || m.id`;

/** Messages whose ids wait for the bulk index fill: at most this many, or for at most INDEX_FILL_INTERVAL_MS. */
const INDEX_FILL_BATCH = 4096;
const INDEX_FILL_INTERVAL_MS = 1000;
/** Retention passes over messages still live when it reaches them; it looks at every message again this often. */
const RETENTION_PASS_MS = 24 * 3_600_000;
const LIVE = `(delivery != 'done' OR state NOT IN ('FULFILLED', 'REJECTED', 'FAILED', 'TIMED_OUT'))`;

/**
 * The router's tables in the SQLite store (schema versions 4 and 6: payload files).
 *
 * Messages and their envelopes are keyed by an arrival-ordered integer, so that accepting a message appends instead
 * of writing a random page of a message-id tree. The message-id lookup (`router_message_ids`) is filled in
 * bulk, at most every INDEX_FILL_BATCH messages or INDEX_FILL_INTERVAL_MS, as part of a commit; until then
 * `unindexed` answers for the newest messages. After a crash, the messages beyond the filled range are read
 * back into `unindexed`, so nothing depends on the fill having run.
 *
 * Once `stageWrites` handed its stage to the store, a message's row is written once per commit: inserting or
 * updating it inside a transaction stages the record, and the store's flush just before COMMIT writes its state as
 * it is then (a message accepted and delivered in one commit is one INSERT, not an INSERT and an UPDATE). The
 * envelope and payload are taken when the message is inserted. Every read of these tables flushes first.
 */
export class SqliteRouterRepository implements RouterRepository {
  private readonly s: Record<string, StatementSync>;
  /** Store ids of the records this repository inserted or loaded. */
  private readonly ids = new WeakMap<MessageRecord, number>();
  /** message_id → id of messages beyond `indexedThrough`. */
  private readonly unindexed = new Map<string, number>();
  private indexedThrough: number;
  /** Retention has looked at every message up to this id; it starts again from 0 after a restart and once a day. */
  private retentionCursor = 0;
  private retentionPassFrom = -Infinity;
  private lastFillAt = performance.now();
  /** The highest id given to a message: ids are given on insert, in arrival order, and never go back. */
  private lastId: number;
  /** Staged rows by id. */
  private staging: WriteBuffer<number, StagedRow> | undefined;

  constructor(private readonly db: DatabaseSync) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      insertMessage:
        p(`INSERT INTO router_messages (id, message_id, producer_id, recipient_id, dedup_key, tracked, lane, ack_for,
        accepted_at, state, error_code, updated_at, ack_deadline, expires_at, delivery, delivery_seq, delivered_at, lease_until,
        delivery_attempts, history) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      insertEnvelope: p('INSERT INTO router_envelopes (id, envelope, payload) VALUES (?, ?, ?)'),
      updateMessage:
        p(`UPDATE router_messages SET state = ?, error_code = ?, updated_at = ?, ack_deadline = ?, expires_at = ?, delivery = ?,
        delivery_seq = ?, delivered_at = ?, lease_until = ?, delivery_attempts = ?, history = ? WHERE id = ? AND message_id = ?`),
      indexedId: p('SELECT id FROM router_message_ids WHERE message_id = ?'),
      getMessage: p(
        `SELECT m.*, e.envelope, ${PAYLOAD_COLUMNS} FROM ${MESSAGE_JOIN} WHERE m.id = ? AND m.message_id = ?`,
      ),
      payload: p(`SELECT payload FROM router_envelopes WHERE id = ? AND typeof(payload) = 'blob'`),
      liveMessages: p(`SELECT m.*, e.envelope, ${PAYLOAD_COLUMNS} FROM ${MESSAGE_JOIN}
        WHERE ${LIVE} ORDER BY m.accepted_at, m.id`),
      countByState: p('SELECT state, COUNT(*) AS n FROM router_messages GROUP BY state'),
      // Retention: finished messages last changed before the cutoff, in a range of arrival order.
      finishedIn: p(
        `SELECT id, message_id FROM router_messages WHERE id > ? AND id <= ? AND updated_at < ? AND NOT ${LIVE}`,
      ),
      // Where retention stops: a message too young to go, or finished but changed too recently (it goes next time).
      firstRecentIn: p(
        `SELECT MIN(id) AS id FROM router_messages WHERE id > ? AND id <= ? AND (accepted_at >= ? OR (updated_at >= ? AND NOT ${LIVE}))`,
      ),
      releasePayload: p(`UPDATE router_envelopes SET payload = ? WHERE id = ? AND typeof(payload) = 'blob'`),
      storeBytes:
        p(`SELECT ((SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM pragma_freelist_count()))
        * (SELECT page_size FROM pragma_page_size()) AS bytes`),
      deleteIds: p('DELETE FROM router_message_ids WHERE message_id IN (SELECT value FROM json_each(?))'),
      deleteEnvelopes: p('DELETE FROM router_envelopes WHERE id IN (SELECT value FROM json_each(?))'),
      deleteMessages: p('DELETE FROM router_messages WHERE id IN (SELECT value FROM json_each(?))'),
      indexedThrough: p(`SELECT value FROM router_meta WHERE key = 'message_ids_through'`),
      unindexed: p('SELECT message_id, id FROM router_messages WHERE id > ? ORDER BY id'),
      fillIndex: p(
        'INSERT OR IGNORE INTO router_message_ids (message_id, id) SELECT message_id, id FROM router_messages WHERE id > ? AND id <= ?',
      ),
      maxId: p('SELECT COALESCE(MAX(id), 0) AS id FROM router_messages'),
      setIndexedThrough: p(`INSERT OR REPLACE INTO router_meta (key, value) VALUES ('message_ids_through', ?)`),
      getDedup: p('SELECT * FROM dedup WHERE producer_id = ? AND key = ?'),
      putDedup:
        p(`INSERT INTO dedup (producer_id, key, original_message_id, latest_message_id, attempts, status, outcome_state, error_code,
        result, cached_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(producer_id, key) DO UPDATE SET original_message_id = excluded.original_message_id, latest_message_id = excluded.latest_message_id, attempts = excluded.attempts,
        status = excluded.status, outcome_state = excluded.outcome_state, error_code = excluded.error_code, result = excluded.result,
        cached_at = excluded.cached_at, expires_at = excluded.expires_at`),
      // Through the expiry index, the longest expired first; an operation under way never expires.
      pruneDedup:
        p(`DELETE FROM dedup WHERE rowid IN (SELECT rowid FROM dedup WHERE expires_at < ? AND status != 'in_progress'
        ORDER BY expires_at LIMIT ?)`),
      // The last seq is the newest delivery kept: pruning always keeps the newest ones.
      lastSeq: p('SELECT MAX(seq) AS last_seq FROM deliveries WHERE agent_id = ?'),
      recordDelivery: p(
        'INSERT OR REPLACE INTO deliveries (agent_id, seq, message_id, delivered_at) VALUES (?, ?, ?, ?)',
      ),
      deliveryAt: p('SELECT message_id FROM deliveries WHERE agent_id = ? AND seq = ?'),
      oldestDelivery: p('SELECT MIN(seq) AS seq FROM deliveries WHERE agent_id = ?'),
      pruneDeliveries: p(
        `DELETE FROM deliveries WHERE agent_id = ? AND seq <= (SELECT MAX(seq) FROM deliveries WHERE agent_id = ?) - ?`,
      ),
      addDeadLetter:
        p(`INSERT INTO dead_letters (message_id, producer_id, recipient_id, correlation_id, idempotency_token, message_type,
        content_type, size, final_state, error_code, reason, attempts, route, created_at, failed_at, excerpt, envelope, payload)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      deadLetter: p('SELECT * FROM dead_letters WHERE id = ?'),
      markRequeued: p('UPDATE dead_letters SET requeued_at = ?, requeued_as = ? WHERE id = ?'),
      countDeadLetters: p('SELECT COUNT(*) AS n FROM dead_letters WHERE requeued_at IS NULL'),
      countAllDeadLetters: p('SELECT COUNT(*) AS n FROM dead_letters'),
      pruneDeadLettersAge: p('DELETE FROM dead_letters WHERE failed_at < ?'),
      pruneDeadLettersCount: p('DELETE FROM dead_letters WHERE id <= (SELECT MAX(id) FROM dead_letters) - ?'),
      // The newest dead letter whose payload bytes, summed from the newest down, exceed the bound: it and all older go.
      addFileOwner: p('INSERT INTO router_payload_files (owner, file_id, bytes, digest) VALUES (?, ?, ?, ?)'),
      fileOwner: p('SELECT file_id, bytes, digest FROM router_payload_files WHERE owner = ?'),
      deleteFileOwner: p('DELETE FROM router_payload_files WHERE owner = ? RETURNING file_id'),
      deleteMessageFileOwners: p(
        `DELETE FROM router_payload_files WHERE owner IN (SELECT 'm:' || value FROM json_each(?)) RETURNING file_id`,
      ),
      // Owners of dead letters that retention deleted (only the few dead letters with files have rows here).
      deleteGoneDeadLetterOwners: p(`DELETE FROM router_payload_files WHERE owner >= 'd:' AND owner < 'd;'
        AND CAST(substr(owner, 3) AS INTEGER) NOT IN (SELECT id FROM dead_letters) RETURNING file_id`),
      fileReferenced: p('SELECT 1 AS n FROM router_payload_files WHERE file_id = ? LIMIT 1'),
      payloadFiles: p('SELECT file_id, MAX(bytes) AS bytes FROM router_payload_files GROUP BY file_id'),
      payloadFileBytes: p(
        'SELECT COALESCE(SUM(bytes), 0) AS bytes FROM (SELECT MAX(bytes) AS bytes FROM router_payload_files GROUP BY file_id)',
      ),
      pruneDeadLettersBytes:
        p(`DELETE FROM dead_letters WHERE id <= (SELECT id FROM (SELECT id, SUM(size) OVER (ORDER BY id DESC) AS total
        FROM dead_letters) WHERE total > ? ORDER BY id DESC LIMIT 1)`),
    };
    this.indexedThrough = Number((this.s.indexedThrough.get() as Row | undefined)?.value ?? 0);
    this.lastId = Number((this.s.maxId.get() as Row).id);
    for (const row of this.s.unindexed.all(this.indexedThrough) as Row[])
      this.unindexed.set(String(row.message_id), Number(row.id));
  }

  /** From now on, rows written inside a transaction wait for the store's flush (see the class comment). */
  stageWrites(): WriteStage {
    this.staging ??= new WriteBuffer<number, StagedRow>((entries) => {
      for (const [id, row] of entries) this.writeRow(id, row);
    });
    return this.staging;
  }

  /** Writes what is staged, before a read of the tables it goes to. */
  private flush(): void {
    if (this.staging !== undefined && this.staging.size > 0) this.staging.flush();
  }

  insertMessage(r: MessageRecord): void {
    const e = r.envelope;
    const id = this.lastId + 1;
    // The bytes of a file-backed payload are in the payload file (durable before this transaction commits); the
    // row keeps an empty BLOB.
    const row: StagedRow = {
      record: r,
      insert: r.payloadFile
        ? { envelope: envelopeJson(e), payload: EMPTY, file: r.payloadFile }
        : { envelope: envelopeJson(e), payload: e.payload },
    };
    if (this.staging !== undefined && this.db.isTransaction) this.staging.stage(id, row);
    else this.writeRow(id, row);
    this.lastId = id;
    this.ids.set(r, id);
    this.unindexed.set(e.messageId, id);
  }

  updateMessage(r: MessageRecord): void {
    const id = this.ids.get(r) ?? this.idOf(r.envelope.messageId);
    if (id === undefined) return;
    const staging = this.staging;
    if (staging === undefined || !this.db.isTransaction) {
      this.writeRow(id, { record: r });
      return;
    }
    const staged = staging.get(id);
    // Staged already: the flush writes the record as it is then.
    if (staged?.record === r) return;
    // Another copy of the message (one read back) was staged: it is written first, as it was updated first.
    if (staged !== undefined) staging.flush();
    staging.stage(id, { record: r });
  }

  private writeRow(id: number, row: StagedRow): void {
    writeMessageRow(this.s, id, row);
  }

  getMessage(messageId: string): MessageRecord | undefined {
    const id = this.idOf(messageId);
    if (id === undefined) return undefined;
    this.flush();
    const row = this.s.getMessage.get(id, messageId) as Row | undefined;
    return row ? this.toMessage(row) : undefined;
  }

  liveMessages(): MessageRecord[] {
    this.flush();
    return (this.s.liveMessages.all() as Row[]).map((row) => this.toMessage(row));
  }

  countByState(): Record<string, number> {
    this.flush();
    const counts: Record<string, number> = {};
    for (const row of this.s.countByState.all() as Row[]) counts[String(row.state)] = Number(row.n);
    return counts;
  }

  /**
   * Deletes finished messages (terminal and delivered) last changed before `finishedBefore`, oldest first,
   * with their envelopes and id-index entries. Looks at messages in arrival order from where the last call
   * stopped, at most `scanLimit` of them, and stops at the first one accepted at or after the cutoff (all later
   * ones are newer) or finished after it (it goes on a later call). A message still live when looked at is
   * passed over; the scan starts again from the oldest message after a restart and once a day, so it goes
   * once it is finished. The newest message is never deleted. Answers how many were deleted, and whether the
   * scan stopped at its limit with more to look at.
   */
  pruneMessages(finishedBefore: number, scanLimit: number): PruneResult {
    this.flush();
    if (finishedBefore - this.retentionPassFrom >= RETENTION_PASS_MS) {
      this.retentionCursor = 0;
      this.retentionPassFrom = finishedBefore;
    }
    // The newest message always stays: ids are arrival order and must never start again from a lower one
    // (SQLite gives a new row MAX(id) + 1), or the id index fill and this scan would pass new messages by.
    const newestKept = Number((this.s.maxId.get() as Row).id) - 1;
    const end = Math.min(newestKept, this.retentionCursor + Math.max(1, scanLimit));
    if (end <= this.retentionCursor) return { deleted: 0, more: false };
    const recent = (this.s.firstRecentIn.get(this.retentionCursor, end, finishedBefore, finishedBefore) as Row).id;
    const through = recent === null ? end : Number(recent) - 1;
    if (through <= this.retentionCursor) return { deleted: 0, more: false };
    const rows = this.s.finishedIn.all(this.retentionCursor, through, finishedBefore) as Row[];
    if (rows.length > 0) {
      for (const row of rows) this.unindexed.delete(String(row.message_id));
      this.s.deleteIds.run(JSON.stringify(rows.map((row) => row.message_id)));
      const ids = JSON.stringify(rows.map((row) => row.id));
      this.s.deleteEnvelopes.run(ids);
      this.s.deleteMessages.run(ids);
      this.orphans(this.s.deleteMessageFileOwners.all(ids) as Row[]);
    }
    this.retentionCursor = through;
    // More to look at when the scan stopped at its limit, not at a message too recent or at the newest.
    return { deleted: rows.length, more: recent === null && end < newestKept };
  }

  releasePayload(r: MessageRecord, contentDigest: string | undefined): void {
    this.flush();
    const id = this.ids.get(r) ?? this.idOf(r.envelope.messageId);
    if (id === undefined) return;
    this.s.releasePayload.run(contentDigest ?? '', id);
    if (r.payloadFile) this.orphans(this.s.deleteFileOwner.all(`m:${id}`) as Row[]);
  }

  onPayloadFileOrphaned: (fileId: string) => void = () => undefined;

  /** Reports the files among those whose owner rows were just deleted that have no owner left. */
  private orphans(deleted: Row[]): void {
    if (deleted.length === 0) return;
    for (const fileId of new Set(deleted.map((row) => String(row.file_id)))) {
      if (!this.s.fileReferenced.get(fileId)) this.onPayloadFileOrphaned(fileId);
    }
  }

  sharePayloadFile(deadLetterId: number, file: PayloadFile): void {
    this.s.addFileOwner.run(`d:${deadLetterId}`, file.fileId, file.bytes, file.digest ?? null);
  }

  payloadFiles(): Array<{ fileId: string; bytes: number }> {
    this.flush();
    return (this.s.payloadFiles.all() as Row[]).map((row) => ({
      fileId: String(row.file_id),
      bytes: Number(row.bytes),
    }));
  }

  payloadFileReferenced(fileId: string): boolean {
    this.flush();
    return this.s.fileReferenced.get(fileId) !== undefined;
  }

  payloadFileBytes(): number {
    this.flush();
    return Number((this.s.payloadFileBytes.get() as Row).bytes);
  }

  payload(r: MessageRecord): Uint8Array | undefined {
    this.flush();
    const id = this.ids.get(r) ?? this.idOf(r.envelope.messageId);
    const row = id === undefined ? undefined : (this.s.payload.get(id) as Row | undefined);
    return row ? (row.payload as Uint8Array) : undefined;
  }

  storeBytes(): number {
    this.flush();
    return Number((this.s.storeBytes.get() as Row).bytes);
  }

  /** The bulk fill of the message-id index, riding along with a commit when due (the store runs it). */
  readonly indexFill: CommitParticipant = {
    name: 'filling the message-id index',
    due: () => this.indexFillDue(),
    pendingAtClose: () => this.unindexedCount > 0,
    run: () => this.fillIndex(),
  };

  /** Whether the bulk fill of the message-id index is due (called before a commit). */
  indexFillDue(now = performance.now()): boolean {
    return (
      this.unindexed.size >= INDEX_FILL_BATCH ||
      (this.unindexed.size > 0 && now - this.lastFillAt >= INDEX_FILL_INTERVAL_MS)
    );
  }

  /**
   * Adds every message beyond the filled range to the message-id index, inside the caller's transaction.
   * Answers what to do once that transaction has committed: forget the messages now indexed.
   */
  fillIndex(): () => void {
    this.flush();
    const through = Number((this.s.maxId.get() as Row).id);
    this.lastFillAt = performance.now();
    if (through <= this.indexedThrough) return () => undefined;
    this.s.fillIndex.run(this.indexedThrough, through);
    this.s.setIndexedThrough.run(through);
    return () => {
      this.indexedThrough = Math.max(this.indexedThrough, through);
      for (const [messageId, id] of this.unindexed) if (id <= through) this.unindexed.delete(messageId);
    };
  }

  /** Messages waiting for the index fill. */
  get unindexedCount(): number {
    return this.unindexed.size;
  }

  private idOf(messageId: string): number | undefined {
    const recent = this.unindexed.get(messageId);
    if (recent !== undefined) return recent;
    const row = this.s.indexedId.get(messageId) as Row | undefined;
    return row ? Number(row.id) : undefined;
  }

  private toMessage(row: Row): MessageRecord {
    const record = toMessage(row);
    this.ids.set(record, Number(row.id));
    return record;
  }

  getDedup(producerId: string, key: string): DedupEntry | undefined {
    const row = this.s.getDedup.get(producerId, key) as Row | undefined;
    if (!row) return undefined;
    return {
      producerId: String(row.producer_id),
      key: String(row.key),
      originalMessageId: String(row.original_message_id),
      latestMessageId: String(row.latest_message_id),
      attempts: JSON.parse(String(row.attempts)) as string[],
      status: row.status as DedupEntry['status'],
      outcomeState: row.outcome_state as DedupEntry['outcomeState'],
      errorCode: String(row.error_code),
      result: row.result === null ? null : (JSON.parse(String(row.result)) as Record<string, unknown>),
      cachedAt: Number(row.cached_at),
      expiresAt: Number(row.expires_at),
    };
  }

  putDedup(d: DedupEntry): void {
    this.s.putDedup.run(
      d.producerId,
      d.key,
      d.originalMessageId,
      d.latestMessageId,
      JSON.stringify(d.attempts),
      d.status,
      d.outcomeState,
      d.errorCode,
      d.result === null ? null : JSON.stringify(d.result),
      d.cachedAt,
      d.expiresAt,
    );
  }

  pruneDedup(now: number, limit: number): PruneResult {
    const batch = Math.max(1, Math.floor(limit));
    const deleted = Number(this.s.pruneDedup.run(now, batch).changes);
    return { deleted, more: deleted === batch };
  }

  lastSeq(agentId: string): number {
    const row = this.s.lastSeq.get(agentId) as Row | undefined;
    return row && row.last_seq !== null ? Number(row.last_seq) : 0;
  }

  recordDelivery(agentId: string, seq: number, messageId: string, at: number): void {
    this.s.recordDelivery.run(agentId, seq, messageId, at);
  }

  deliveryAt(agentId: string, seq: number): string | undefined {
    const row = this.s.deliveryAt.get(agentId, seq) as Row | undefined;
    return row ? String(row.message_id) : undefined;
  }

  oldestDeliverySeq(agentId: string): number {
    const row = this.s.oldestDelivery.get(agentId) as Row | undefined;
    return row && row.seq !== null ? Number(row.seq) : 0;
  }

  pruneDeliveries(agentId: string, keep: number): void {
    // The newest delivery always stays: it is where the agent's seq continues after a restart.
    this.s.pruneDeliveries.run(agentId, agentId, Math.max(1, keep));
  }

  addDeadLetter(
    l: Omit<DeadLetter, 'id' | 'requeuedAt' | 'requeuedAs'>,
    payload: Uint8Array,
    envelope: Envelope,
  ): number {
    return Number(
      this.s.addDeadLetter.run(
        l.messageId,
        l.producerId,
        l.recipientId,
        l.correlationId,
        l.idempotencyToken,
        l.messageType,
        l.contentType,
        l.size,
        l.finalState,
        l.errorCode,
        l.reason,
        JSON.stringify(l.attempts),
        JSON.stringify(l.route),
        l.createdAt,
        l.failedAt,
        l.excerpt,
        envelopeJson(envelope),
        payload,
      ).lastInsertRowid,
    );
  }

  deadLetters(filter: DeadLetterFilter = {}): DeadLetter[] {
    const where: string[] = [];
    const params: Array<string | number> = [];
    if (filter.since !== undefined) {
      where.push('failed_at >= ?');
      params.push(filter.since);
    }
    if (filter.until !== undefined) {
      where.push('failed_at <= ?');
      params.push(filter.until);
    }
    if (filter.errorCode) {
      where.push('error_code = ?');
      params.push(filter.errorCode);
    }
    if (filter.recipientId) {
      where.push('recipient_id = ?');
      params.push(filter.recipientId);
    }
    if (filter.producerId) {
      where.push('producer_id = ?');
      params.push(filter.producerId);
    }
    if (!filter.includeRequeued) where.push('requeued_at IS NULL');
    const limit = Math.max(1, Math.min(filter.limit ?? 1000, Number.MAX_SAFE_INTEGER));
    const sql = `SELECT * FROM dead_letters ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY id DESC LIMIT ${limit}`;
    return (this.db.prepare(sql).all(...params) as Row[]).map(toDeadLetter);
  }

  deadLetter(id: number): { letter: DeadLetter; envelope: Envelope } | undefined {
    const row = this.s.deadLetter.get(id) as Row | undefined;
    if (!row) return undefined;
    const file = this.s.fileOwner.get(`d:${id}`) as Row | undefined;
    return {
      letter: toDeadLetter(row),
      envelope: envelopeFrom(row.envelope, row.payload),
      ...(file ? { payloadFile: fileOf(file) } : {}),
    };
  }

  markRequeued(id: number, at: number, newMessageId: string): void {
    this.s.markRequeued.run(at, newMessageId, id);
  }

  deadLetterCount(includeRequeued = false): number {
    return Number(((includeRequeued ? this.s.countAllDeadLetters : this.s.countDeadLetters).get() as Row).n);
  }

  pruneDeadLetters(maxEntries: number, olderThan: number, maxBytes = Number.MAX_SAFE_INTEGER): number {
    this.flush();
    const deleted =
      Number(this.s.pruneDeadLettersAge.run(olderThan).changes) +
      Number(this.s.pruneDeadLettersCount.run(maxEntries).changes) +
      Number(this.s.pruneDeadLettersBytes.run(Math.max(0, maxBytes)).changes);
    if (deleted > 0) this.orphans(this.s.deleteGoneDeadLetterOwners.all() as Row[]);
    return deleted;
  }

  /** Prepared on first use: the Messages view's query (messageQueries.ts). */
  private recentMessagesStatement: StatementSync | undefined;

  recentMessages(filter: MessageListFilter, scanWindow: number, limit: number): MessageSummary[] {
    this.flush();
    // Newest first along the arrival-order key, within the newest `scanWindow` ids: a backward range scan that stops
    // after `limit` matches. Columns of router_messages are tested before the envelope's JSON is read.
    this.recentMessagesStatement ??= this.db
      .prepare(`SELECT m.message_id, m.producer_id, m.recipient_id, m.tracked, m.accepted_at, m.state,
        m.error_code, m.updated_at, json_extract(e.envelope, '$.messageType') AS message_type,
        json_extract(e.envelope, '$.correlationId') AS correlation_id, json_extract(e.envelope, '$.contentType') AS content_type,
        json_extract(e.envelope, '$.contentLength') AS content_length
      FROM router_messages m JOIN router_envelopes e ON e.id = m.id
      WHERE m.id > (SELECT COALESCE(MAX(id), 0) FROM router_messages) - :scan
        AND (:agent IS NULL OR m.producer_id = :agent OR m.recipient_id = :agent)
        AND (:state IS NULL OR m.state = :state)
        AND (:type IS NULL OR json_extract(e.envelope, '$.messageType') = :type)
        AND (:correlation IS NULL OR json_extract(e.envelope, '$.correlationId') = :correlation)
      ORDER BY m.id DESC LIMIT :limit`);
    const rows = this.recentMessagesStatement.all({
      scan: Math.max(1, Math.floor(scanWindow)),
      limit: Math.max(1, Math.floor(limit)),
      agent: filter.agentId ?? null,
      state: filter.state ?? null,
      type: filter.messageType ?? null,
      correlation: filter.correlationId ?? null,
    }) as Row[];
    return rows.map((row) => ({
      messageId: String(row.message_id),
      messageType: String(row.message_type ?? ''),
      producerId: String(row.producer_id),
      recipientId: String(row.recipient_id),
      state: row.state as MessageState,
      errorCode: String(row.error_code),
      correlationId: String(row.correlation_id ?? ''),
      contentType: String(row.content_type ?? ''),
      size: Number(row.content_length ?? 0) || 0,
      tracked: Number(row.tracked) === 1,
      acceptedAt: Number(row.accepted_at),
      updatedAt: Number(row.updated_at),
    }));
  }
}

function toMessage(row: Row): MessageRecord {
  const released = typeof row.payload === 'string';
  return {
    ...(released
      ? { payloadReleased: true as const, ...(row.payload ? { contentDigest: String(row.payload) } : {}) }
      : {}),
    ...(row.stored_bytes !== null && row.stored_bytes !== undefined
      ? { storedPayloadBytes: Number(row.stored_bytes) }
      : {}),
    ...(row.file_id !== null && row.file_id !== undefined
      ? { storedPayloadBytes: Number(row.file_bytes), payloadFile: fileOf(row) }
      : {}),
    envelope: envelopeFrom(row.envelope, row.payload),
    recipientId: String(row.recipient_id),
    dedupKey: String(row.dedup_key),
    tracked: Number(row.tracked) === 1,
    lane: row.lane as Lane,
    ackFor: String(row.ack_for),
    acceptedAt: Number(row.accepted_at),
    state: row.state as MessageState,
    errorCode: String(row.error_code),
    updatedAt: Number(row.updated_at),
    ackDeadline: row.ack_deadline === null ? null : Number(row.ack_deadline),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
    delivery: row.delivery as DeliveryStatus,
    deliverySeq: row.delivery_seq === null ? null : Number(row.delivery_seq),
    deliveredAt: row.delivered_at === null ? null : Number(row.delivered_at),
    leaseUntil: row.lease_until === null ? null : Number(row.lease_until),
    deliveryAttempts: Number(row.delivery_attempts),
    history: JSON.parse(String(row.history)) as HistoryEntry[],
  };
}

function fileOf(row: Row): PayloadFile {
  return {
    fileId: String(row.file_id),
    bytes: Number(row.file_bytes ?? row.bytes),
    ...((row.file_digest ?? row.digest) ? { digest: String(row.file_digest ?? row.digest) } : {}),
  };
}

const EMPTY = new Uint8Array(0);

function toDeadLetter(row: Row): DeadLetter {
  return {
    id: Number(row.id),
    messageId: String(row.message_id),
    producerId: String(row.producer_id),
    recipientId: String(row.recipient_id),
    correlationId: String(row.correlation_id),
    idempotencyToken: String(row.idempotency_token),
    messageType: String(row.message_type),
    contentType: String(row.content_type),
    size: Number(row.size),
    finalState: row.final_state as MessageState,
    errorCode: String(row.error_code),
    reason: String(row.reason),
    attempts: JSON.parse(String(row.attempts)) as HistoryEntry[],
    route: JSON.parse(String(row.route)) as Record<string, unknown>,
    createdAt: Number(row.created_at),
    failedAt: Number(row.failed_at),
    excerpt: String(row.excerpt),
    requeuedAt: row.requeued_at === null ? null : Number(row.requeued_at),
    requeuedAs: row.requeued_as === null ? null : String(row.requeued_as),
  };
}
