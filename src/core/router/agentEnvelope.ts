import { createHash } from 'node:crypto';
import type { Clock } from '../clock';
import type { IdSource } from '../ids';
import type { Envelope } from './envelope';

/**
 * Envelopes the coordinator sends on an agent's behalf, as that agent's own SDK would: the MCP bridge's tools (an agent's
 * send_message, ack_message, complete_task) and the session area's driver (the ACKs of the tasks and messages it turns
 * into prompt turns). producer_id is always that agent; every envelope carries an idempotency token, so a retried
 * operation is the same operation to the router's deduplication.
 */

/**
 * Sequence numbers of these envelopes: increasing per process, from the clock (ms × 1000) so that a restarted
 * coordinator does not reuse the numbers of its previous run. The router deduplicates by the token, so the number only
 * has to be valid (≥ 1).
 */
let sequence = 0;
export function nextAgentSequence(now: number): string {
  sequence = Math.max(sequence + 1, Math.floor(now) * 1000);
  return String(sequence);
}

/** A token derived from its parts: the same parts always give the same token (a retried call is the same operation). */
export function derivedToken(kind: string, ...parts: string[]): string {
  const digest = createHash('sha256');
  for (const part of parts) digest.update(part).update('\u0000');
  return `mcp-${kind}:${digest.digest('hex').slice(0, 40)}`;
}

/** The envelope `producerId` sends through the router. */
export function agentEnvelope(
  source: { readonly clock: Clock; readonly ids: IdSource },
  producerId: string,
  messageType: string,
  payload: Uint8Array,
  contentType: string,
  correlationId: string,
  idempotencyToken: string,
): Envelope {
  const now = source.clock.now();
  return {
    messageId: source.ids.uuid(),
    idempotencyToken,
    producerId,
    correlationId,
    sequenceNumber: nextAgentSequence(now),
    retryCount: 0,
    messageType,
    contentType,
    contentLength: String(payload.byteLength),
    repoId: '',
    worktreeId: '',
    hlcTimestamp: '',
    ttlMs: 0,
    timestampMs: now,
    payload,
    parentCorrelationId: '',
  };
}

/** The payload of a protocol ACK of `messageId` at `stage` (RFC §11.1), with the extra fields (note, error_code, result). */
export function ackPayload(messageId: string, stage: string, extra: Record<string, unknown> = {}): Uint8Array {
  return Buffer.from(JSON.stringify({ ack_for_message_id: messageId, ack_stage: stage, ...extra }), 'utf8');
}
