import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import { Coordinator } from '../../src/core/coordinator';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { CoordinatorHost } from '../../src/server/host';
import { ConfigurationError, CoordinatorServer } from '../../src/server/server';
import { CoordinatorClients, expectStatus } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { clientsFor, startHost, stopHost } from '../support/host';
import { PROTOS_DIR } from '../support/paths';
import { makeTempDir, removeTempDir } from '../support/tempDir';

describe('authentication', () => {
  let dataDir: string;
  let host: CoordinatorHost | undefined;
  let clients: CoordinatorClients | undefined;

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-int-auth-');
  });

  afterEach(async () => {
    clients?.close();
    clients = undefined;
    await stopHost(host);
    host = undefined;
    removeTempDir(dataDir);
  });

  describe('auth "token"', () => {
    beforeEach(async () => {
      host = await startHost(dataDir, { auth: 'token' });
      clients = clientsFor(host);
    });

    it('lets a call with the right bearer token through', async () => {
      assert.ok(host!.token && host!.token.length >= 32);
      assert.equal((await clients!.registerAgent(descriptorMessage('alpha'))).accepted, true);
      assert.deepEqual(
        await clients!.heartbeat('alpha', 'RUNNABLE', {}, { authorization: `bearer   ${host!.token}` }),
        { ok: true },
        'the scheme is case-insensitive and spaces after it are allowed',
      );
    });

    it('refuses a call without a token with UNAUTHENTICATED, before any handler runs', async () => {
      const error = await expectStatus(
        clients!.registerAgent(descriptorMessage('alpha'), { token: null }),
        grpc.status.UNAUTHENTICATED,
      );
      assert.match(error.details, /missing credentials/);
      assert.match(error.details, /SW4RM_TOKEN/);
      assert.equal(host!.coordinator.registry.list().length, 0);
      assert.equal(host!.coordinator.log.query({ eventType: 'agent.registration_rejected' }).length, 0);
    });

    it('refuses a wrong token with UNAUTHENTICATED', async () => {
      const wrong = host!.token!.slice(0, -1) + (host!.token!.endsWith('A') ? 'B' : 'A');
      const error = await expectStatus(
        clients!.registerAgent(descriptorMessage('alpha'), { token: wrong }),
        grpc.status.UNAUTHENTICATED,
      );
      assert.match(error.details, /wrong token/);
      assert.ok(!error.details.includes(host!.token!), 'the error never reveals the token');
      await expectStatus(clients!.heartbeat('alpha', 'RUNNABLE', {}, { token: 'short' }), grpc.status.UNAUTHENTICATED);
      assert.equal(host!.coordinator.registry.list().length, 0);
    });

    for (const header of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer ', 'Bearer a b', 'Token abc']) {
      it(`refuses a malformed authorization header ${JSON.stringify(header)} with UNAUTHENTICATED`, async () => {
        const error = await expectStatus(
          clients!.deregisterAgent('alpha', '', { authorization: header }),
          grpc.status.UNAUTHENTICATED,
        );
        assert.match(error.details, /malformed authorization header|missing credentials/);
      });
    }

    it('refuses the bare token without the Bearer scheme', async () => {
      await expectStatus(
        clients!.heartbeat('alpha', 'RUNNABLE', {}, { authorization: host!.token! }),
        grpc.status.UNAUTHENTICATED,
      );
    });

    it('protects every service, not only the registry', async () => {
      await expectStatus(clients!.ingest({ event_type: 'x' }, { token: null }), grpc.status.UNAUTHENTICATED);
    });

    it('answers health checks without a token', async () => {
      assert.deepEqual(await clients!.healthCheck(''), { status: 'SERVING' });
    });
  });

  describe('auth "none"', () => {
    it('serves calls without a token on loopback, and creates no token', async () => {
      host = await startHost(dataDir, { auth: 'none' });
      assert.equal(host.token, undefined);
      assert.equal(host.environment().SW4RM_TOKEN, undefined);
      clients = new CoordinatorClients(`127.0.0.1:${host.port}`, undefined);
      assert.equal((await clients.registerAgent(descriptorMessage('alpha'))).accepted, true);
      assert.deepEqual(await clients.heartbeat('alpha', 'RUNNABLE', {}, { authorization: 'Bearer whatever' }), {
        ok: true,
      });
    });

    for (const address of ['0.0.0.0', '::', '192.168.1.10']) {
      it(`refuses to bind ${address} without auth, with a ConfigurationError`, () => {
        const store = CoordinatorStore.open(dataDir);
        const coordinator = new Coordinator({ store });
        try {
          assert.throws(
            () => new CoordinatorServer({ coordinator, protosDir: PROTOS_DIR, host: address, port: 0, auth: 'none' }),
            (err: unknown) => err instanceof ConfigurationError && /requires auth "token"/.test(err.message),
          );
        } finally {
          coordinator.dispose();
        }
      });
    }

    it('refuses auth "token" without a token', () => {
      const store = CoordinatorStore.open(dataDir);
      const coordinator = new Coordinator({ store });
      try {
        assert.throws(
          () =>
            new CoordinatorServer({ coordinator, protosDir: PROTOS_DIR, host: '127.0.0.1', port: 0, auth: 'token' }),
          ConfigurationError,
        );
      } finally {
        coordinator.dispose();
      }
    });

    it('makes CoordinatorHost.start reject a non-loopback address without auth, leaving the store closed', async () => {
      await assert.rejects(startHost(dataDir, { host: '0.0.0.0', auth: 'none' }), ConfigurationError);
      // The store was closed on the way out: it opens again at once.
      CoordinatorStore.open(dataDir).close();
    });
  });
});
