import type { StatementSync } from 'node:sqlite';
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

/** Writes a message's row (and, when it is new, its envelope and payload file owner) with the record's state now. */
export function writeMessageRow(s: MessageRowStatements, id: number, row: StagedRow): void {
  const r = row.record;
  const insert = row.insert;
  if (insert === undefined) {
    s.updateMessage.run(
      r.state,
      r.errorCode,
      r.updatedAt,
      r.ackDeadline,
      r.expiresAt,
      r.delivery,
      r.deliverySeq,
      r.deliveredAt,
      r.leaseUntil,
      r.deliveryAttempts,
      JSON.stringify(r.history),
      id,
      r.envelope.messageId,
    );
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
    r.state,
    r.errorCode,
    r.updatedAt,
    r.ackDeadline,
    r.expiresAt,
    r.delivery,
    r.deliverySeq,
    r.deliveredAt,
    r.leaseUntil,
    r.deliveryAttempts,
    JSON.stringify(r.history),
  );
  s.insertEnvelope.run(id, insert.envelope, insert.payload);
  if (insert.file) s.addFileOwner.run(`m:${id}`, insert.file.fileId, insert.file.bytes, insert.file.digest ?? null);
}
