/**
 * The worker thread that validates large payloads (rule 5) off the event loop. Started by PayloadChecker; it
 * answers each request `{id, kind, base, payload}` with `{id, refusal, payload}`, the payload's memory transferred back. Bundled on its own as dist/payloadWorker.js.
 */
import { parentPort } from 'node:worker_threads';
import { contentDigest } from './contentDigest';
import { contentRefusal, type ContentKind } from './payloadContent';

interface Request {
  readonly id: number;
  readonly kind: ContentKind | undefined;
  readonly base: string;
  readonly payload: Uint8Array;
  /** Set when the content digest is wanted too (a large untokened payload kept as a file). */
  readonly digest?: { readonly messageType: string; readonly contentType: string };
}

parentPort?.on('message', (request: Request) => {
  let refusal: string | undefined;
  let digest: string | undefined;
  try {
    if (request.kind) refusal = contentRefusal(request.kind, request.payload, request.base, 'scan');
    if (refusal === undefined && request.digest)
      digest = contentDigest({ ...request.digest, payload: request.payload });
  } catch (err) {
    refusal = `the payload could not be validated: ${(err as Error).message.slice(0, 120)}`;
  }
  // The payload's memory goes back to the event loop that sent it (transferred, not copied).
  const buffer = request.payload.buffer as ArrayBuffer;
  parentPort?.postMessage(
    { id: request.id, refusal, payload: request.payload, digest },
    buffer.byteLength > 0 ? [buffer] : [],
  );
});
