import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { MAX_LOG_DETAILS_BYTES, MIB, TRANSPORT_MAX_MESSAGE_BYTES } from '../../src/core/limits';
import { expectStatus } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { useHost } from '../support/host';

describe('message size limits on the server', () => {
  const fixture = useHost('sw4rm-int-limits-');

  it("reads messages above gRPC's 4 MB default, up to the largest payload (DATA, 16 MB) plus envelope", async () => {
    // 6 MB of words: the transport lets it through, and the registry answers with its own reason.
    const response = await fixture.clients.registerAgent(
      descriptorMessage('big', { description: 'word '.repeat((6 * MIB) / 5) }),
    );
    assert.equal(response.accepted, false);
    assert.match(response.reason, /^VALIDATION_ERROR: description has \d+ words/);
  });

  it('refuses a message larger than the transport maximum with RESOURCE_EXHAUSTED before any handler runs', async () => {
    const before = fixture.host.coordinator.store.events.count();
    const error = await expectStatus(
      fixture.clients.ingest({
        event_type: 'huge',
        details_json: JSON.stringify({ blob: 'x'.repeat(TRANSPORT_MAX_MESSAGE_BYTES) }),
      }),
      grpc.status.RESOURCE_EXHAUSTED,
    );
    assert.match(error.details, /larger than max/i);
    assert.equal(fixture.host.coordinator.store.events.count(), before, 'nothing was stored');
  });

  it('refuses an Ingest whose details_json exceeds its own limit with INVALID_ARGUMENT naming the limit', async () => {
    const error = await expectStatus(
      fixture.clients.ingest({
        event_type: 'chatty',
        details_json: JSON.stringify({ blob: 'x'.repeat(MAX_LOG_DETAILS_BYTES) }),
      }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(
      error.details,
      new RegExp(`VALIDATION_ERROR: details_json is larger than ${MAX_LOG_DETAILS_BYTES} bytes`),
    );
  });
});
