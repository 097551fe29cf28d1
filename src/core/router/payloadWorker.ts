/**
 * The worker thread that validates large payloads (rule 5) off the event loop. Started by PayloadChecker; it
 * answers each request `{id, kind, base, payload}` with `{id, refusal, payload}`, the payload's memory transferred back. Bundled on its own as dist/payloadWorker.js.
 */
import { parentPort } from 'node:worker_threads';
import { contentRefusal, type ContentKind } from './payloadContent';

interface Request { readonly id: number; readonly kind: ContentKind; readonly base: string; readonly payload: Uint8Array }

parentPort?.on('message', (request: Request) => {
  let refusal: string | undefined;
  try {
    refusal = contentRefusal(request.kind, request.payload, request.base, 'scan');
  } catch (err) {
    refusal = `the payload could not be validated: ${(err as Error).message.slice(0, 120)}`;
  }
  // The payload's memory goes back to the event loop that sent it (transferred, not copied).
  const buffer = request.payload.buffer as ArrayBuffer;
  parentPort?.postMessage({ id: request.id, refusal, payload: request.payload }, buffer.byteLength > 0 ? [buffer] : []);
});
