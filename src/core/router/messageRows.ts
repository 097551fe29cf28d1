import type { SQLInputValue, StatementSync } from 'node:sqlite';
import type { MessageRecord } from './model';
import type { PayloadFile } from './payloadFiles';

/**
 * A message's write as the repository stages it until the commit (sqliteRouterRepository.ts): the record, whose
 * state at the flush is what the row gets, with what never changes after acceptance when its row is new (the
 * envelope JSON and the payload as they were when the message was inserted).
 */
export interface StagedRow {
  readonly record: MessageRecord;
  readonly insert?: { readonly envelope: string; readonly payload: Uint8Array; readonly file?: PayloadFile };
}

/** The repository's prepared statements, by name: a row write uses insertMessage, insertEnvelope, updateMessage, addFileOwner. */
export type MessageRowStatements = Readonly<Record<string, StatementSync>>;

/** How many values `lifecycleValues` writes: the ten lifecycle columns and the history. */
const LIFECYCLE_VALUES = 11;
/**
 * The values arrays of the two statements, reused by every row write: each is filled and spread into its `run` at
 * once. Spread as the last argument of a call, an array costs nothing more; spread before other arguments, or made
 * anew for each write, it would be one or two arrays per row on the router's hot path. UPDATE_VALUES ends with the
 * row's key (id, message_id: the UPDATE's WHERE).
 */
const INSERT_VALUES: SQLInputValue[] = new Array<SQLInputValue>(LIFECYCLE_VALUES).fill(null);
const UPDATE_VALUES: SQLInputValue[] = new Array<SQLInputValue>(LIFECYCLE_VALUES + 2).fill(null);

/**
 * The columns a message's lifecycle changes (state … delivery_attempts) and its history, in the order both the
 * INSERT and the UPDATE list them, written into the start of `values`: one list, so the two cannot drift apart.
 */
function lifecycleValues(r: MessageRecord, values: SQLInputValue[]): SQLInputValue[] {
  values[0] = r.state;
  values[1] = r.errorCode;
  values[2] = r.updatedAt;
  values[3] = r.ackDeadline;
  values[4] = r.expiresAt;
  values[5] = r.delivery;
  values[6] = r.deliverySeq;
  values[7] = r.deliveredAt;
  values[8] = r.leaseUntil;
  values[9] = r.deliveryAttempts;
  values[10] = JSON.stringify(r.history);
  return values;
}

/** Writes a message's row (and, when it is new, its envelope and payload file owner) with the record's state now. */
export function writeMessageRow(s: MessageRowStatements, id: number, row: StagedRow): void {
  const r = row.record;
  const insert = row.insert;
  if (insert === undefined) {
    const values = lifecycleValues(r, UPDATE_VALUES);
    values[LIFECYCLE_VALUES] = id;
    values[LIFECYCLE_VALUES + 1] = r.envelope.messageId;
    s.updateMessage.run(...values);
    return;
  }
  const e = r.envelope;
  s.insertMessage.run(
    id,
    e.messageId,
    e.producerId,
    r.recipientId,
    r.dedupKey,
    r.tracked ? 1 : 0,
    r.lane,
    r.ackFor,
    r.acceptedAt,
    ...lifecycleValues(r, INSERT_VALUES),
  );
  s.insertEnvelope.run(id, insert.envelope, insert.payload);
  if (insert.file) s.addFileOwner.run(`m:${id}`, insert.file.fileId, insert.file.bytes, insert.file.digest ?? null);
}
