import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import type { CoordinatorHost } from '../../src/server/host';
import { CANONICAL_SERVICES } from '../../src/server/protos';
import { expectStatus, unary, type CoordinatorClients, type HealthCheckResponse } from '../support/clients';
import { clientsFor, startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

describe('grpc.health.v1.Health', () => {
  let dataDir: string;
  let host: CoordinatorHost | undefined;
  let clients: CoordinatorClients;

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-int-health-');
    host = await startHost(dataDir);
    clients = clientsFor(host);
  });

  afterEach(async () => {
    clients.close();
    await stopHost(host);
    host = undefined;
    removeTempDir(dataDir);
  });

  it('answers SERVING for the whole server and for every canonical service', async () => {
    assert.deepEqual(await clients.healthCheck(''), { status: 'SERVING' });
    assert.deepEqual(await clients.healthCheck('sw4rm.registry.RegistryService'), { status: 'SERVING' });
    for (const service of CANONICAL_SERVICES) {
      assert.deepEqual(await clients.healthCheck(service), { status: 'SERVING' }, service);
    }
  });

  it('answers NOT_FOUND for a service it does not serve', async () => {
    const error = await expectStatus(clients.healthCheck('sw4rm.nothing.NoService'), grpc.status.NOT_FOUND);
    assert.match(error.details, /sw4rm\.nothing\.NoService/);
  });

  it('lists every service as SERVING', async () => {
    const response = await unary<{ statuses: Record<string, HealthCheckResponse> }>(
      clients.health,
      'List',
      {},
      new grpc.Metadata(),
    );
    assert.deepEqual(Object.keys(response.statuses).sort(), ['', ...CANONICAL_SERVICES].sort());
    for (const status of Object.values(response.statuses)) assert.equal(status.status, 'SERVING');
  });

  it('tells a watcher SERVICE_UNKNOWN for a service it does not serve', async () => {
    const watch = clients.healthWatch('sw4rm.nothing.NoService');
    const first = await new Promise<HealthCheckResponse>((resolve, reject) => {
      watch.once('data', resolve);
      watch.once('error', reject);
    });
    assert.equal(first.status, 'SERVICE_UNKNOWN');
    watch.cancel();
  });

  it('tells a watcher NOT_SERVING when the server drains, then ends the watch', async () => {
    const watch = clients.healthWatch('sw4rm.registry.RegistryService');
    const statuses: string[] = [];
    let ended: grpc.StatusObject | undefined;
    watch.on('data', (response: HealthCheckResponse) => statuses.push(response.status));
    watch.on('status', (status: grpc.StatusObject) => {
      ended = status;
    });
    watch.on('error', () => undefined);
    await pollUntil('the first watch answer', () => (statuses.length > 0 ? true : undefined));
    assert.deepEqual(statuses, ['SERVING']);

    const stopping = host!.stop(5_000);
    host = undefined;
    const started = Date.now();
    await stopping;

    const status = await pollUntil('the watch to end', () => ended);
    assert.deepEqual(statuses, ['SERVING', 'NOT_SERVING']);
    assert.equal(status.code, grpc.status.OK);
    assert.ok(Date.now() - started < 4_000, 'an open watch does not hold the drain for its whole grace period');
  });
});
