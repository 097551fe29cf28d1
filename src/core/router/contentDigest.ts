import { createHash } from 'node:crypto';

/**
 * The digest of an envelope's content (message type, content type, payload bytes), as hex: the one definition,
 * used on the event loop (deduplication.ts) and on the payload worker for large file-backed payloads.
 */
export function contentDigest(envelope: {
  readonly messageType: string;
  readonly contentType: string;
  readonly payload: Uint8Array;
}): string {
  return createHash('sha256')
    .update(envelope.messageType)
    .update('\u0000')
    .update(envelope.contentType)
    .update('\u0000')
    .update(envelope.payload)
    .digest('hex');
}
