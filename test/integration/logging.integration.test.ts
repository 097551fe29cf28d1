import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { expectStatus } from '../support/clients';
import { useHost } from '../support/host';

describe('LoggingService over gRPC', () => {
  const fixture = useHost('sw4rm-int-logging-');

  it('stores an agent\'s event as source "agent" with the agent as actor, queryable through the log', async () => {
    const agentTs = Date.UTC(2026, 4, 1, 12, 0, 0, 250);
    const response = await fixture.clients.ingest({
      ts: { seconds: String(Math.floor(agentTs / 1000)), nanos: 250_000_000 },
      correlation_id: 'task-42',
      agent_id: 'alpha',
      event_type: 'task.completed',
      level: 'warn',
      details_json: JSON.stringify({ files_changed: 3, branch: 'sw4rm/alpha' }),
    });
    assert.deepEqual(response, { ok: true });

    const events = fixture.host.coordinator.log.query({ correlationId: 'task-42' });
    assert.equal(events.length, 1);
    const [event] = events;
    assert.equal(event.source, 'agent');
    assert.equal(event.actor, 'alpha');
    assert.equal(event.eventType, 'task.completed');
    assert.equal(event.level, 'WARN');
    assert.match(event.ts, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.deepEqual(event.details, { files_changed: 3, branch: 'sw4rm/alpha', agent_ts: '2026-05-01T12:00:00.250Z' });
    assert.deepEqual(
      fixture.host.coordinator.log.query({ actor: 'alpha' }).map((e) => e.id),
      [event.id],
    );
  });

  it('uses the x-correlation-id when the event carries none, and keeps non-object details', async () => {
    await fixture.clients.ingest(
      { agent_id: 'beta', event_type: 'progress', details_json: '[1,2,3]' },
      { correlationId: 'from-metadata' },
    );
    const [event] = fixture.host.coordinator.log.query({ correlationId: 'from-metadata' });
    assert.ok(event);
    assert.equal(event.level, 'INFO');
    assert.deepEqual(event.details, { value: [1, 2, 3] });
  });

  it('refuses details_json that is not JSON with INVALID_ARGUMENT and VALIDATION_ERROR, storing nothing', async () => {
    const before = fixture.host.coordinator.store.events.count();
    const error = await expectStatus(
      fixture.clients.ingest({ agent_id: 'alpha', event_type: 'x', details_json: '{not json' }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(error.details, /^VALIDATION_ERROR: /);
    assert.match(error.details, /details_json is not valid JSON/);
    assert.equal(fixture.host.coordinator.store.events.count(), before);
  });

  it('refuses control characters in the fields that become the one-line log (agent_id, correlation_id, event_type)', async () => {
    // The Output channel and the CLI's stderr show one line per event (formatEvent). A newline in an
    // agent-supplied field would let an agent forge coordinator log lines.
    const forged = 'x\n2026-01-01T00:00:00.000Z INFO  registry agent.deregistered [c] {"agent_id":"beta"}';
    const before = fixture.host.coordinator.store.events.count();
    for (const event of [
      { agent_id: forged, event_type: 'note' },
      { agent_id: 'alpha', event_type: 'note', correlation_id: forged },
      { agent_id: 'alpha', event_type: forged },
    ]) {
      const error = await expectStatus(fixture.clients.ingest(event), grpc.status.INVALID_ARGUMENT);
      assert.match(error.details, /^VALIDATION_ERROR: /);
    }
    assert.equal(fixture.host.coordinator.store.events.count(), before);
  });

  it('refuses an event without a type, with an unknown level, or with oversized details', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ agent_id: 'alpha' }, /event_type must not be empty/],
      [{ agent_id: 'alpha', event_type: 'x', level: 'LOUD' }, /level 'LOUD'/],
      [
        { agent_id: 'alpha', event_type: 'x', details_json: JSON.stringify({ blob: 'x'.repeat(70 * 1024) }) },
        /larger than/,
      ],
      [{ agent_id: 'alpha', event_type: 'e'.repeat(129) }, /event_type is longer/],
    ];
    for (const [event, why] of cases) {
      const error = await expectStatus(fixture.clients.ingest(event), grpc.status.INVALID_ARGUMENT);
      assert.match(error.details, /^VALIDATION_ERROR: /);
      assert.match(error.details, why);
    }
  });
});
