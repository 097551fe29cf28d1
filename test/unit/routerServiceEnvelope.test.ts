// The RouterService adapter's envelope for an inbox stream (src/server/services/routerService.ts, envelopeToMessage).
import { strict as assert } from 'node:assert';
import type { Envelope } from '../../src/core/router/envelope';
import { envelopeFromMessage, envelopeToMessage } from '../../src/server/services/routerService';
import { envelope as wireEnvelope } from '../support/routerClient';

/**
 * A core envelope as the service decodes one, carrying `payload` as given: a plain Uint8Array (not a Buffer), as a
 * payload file read back or a row read from SQLite may be.
 */
function envelope(payload: Uint8Array): Envelope {
  const decoded = envelopeFromMessage(wireEnvelope({ producer_id: 'producer', sequence_number: 1 }));
  return { ...decoded, payload, contentLength: String(payload.byteLength) };
}

describe('RouterService: the envelope written to an inbox stream', () => {
  it('carries a view of the payload, not a copy (a 16 MB payload read back for delivery is not copied a third time)', () => {
    // A payload that is part of a larger buffer (as a payload file read back, or a row read from SQLite, may be).
    const memory = new Uint8Array(64 * 1024);
    memory.fill(0x78);
    const payload = memory.subarray(1024, 1024 + 32 * 1024);
    const message = envelopeToMessage(envelope(payload));
    assert.ok(Buffer.isBuffer(message.payload), 'protobuf gets a Buffer');
    assert.equal(message.payload!.buffer, memory.buffer, 'the same memory');
    assert.equal(message.payload!.byteOffset, 1024);
    assert.equal(message.payload!.byteLength, payload.byteLength, 'only the payload bytes, not the whole buffer');
    assert.ok(message.payload!.equals(payload));
  });

  it('carries an empty payload as an empty Buffer', () => {
    const message = envelopeToMessage(envelope(new Uint8Array(0)));
    assert.equal(message.payload!.byteLength, 0);
  });
});
