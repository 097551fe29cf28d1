import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { TOKEN_FILE_NAME } from '../../src/core/auth/token';
import { CoordinatorStore, COORDINATOR_SCHEMA, LATEST_SCHEMA_VERSION } from '../../src/core/coordinatorStore';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { StoreOpenError } from '../../src/core/store/store';
import type { CoordinatorHost } from '../../src/server/host';
import { PortInUseError } from '../../src/server/server';
import { CoordinatorClients } from '../support/clients';
import { descriptorMessage, fingerprint, writeGarbage } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ host: '127.0.0.1', port }, () => probe.close(() => resolve(true)));
  });
}

describe('CoordinatorHost', () => {
  const dirs: string[] = [];
  const hosts: CoordinatorHost[] = [];
  const openClients: CoordinatorClients[] = [];

  function tempDir(): string {
    const dir = makeTempDir('sw4rm-int-host-');
    dirs.push(dir);
    return dir;
  }

  async function start(dataDir: string, overrides = {}): Promise<CoordinatorHost> {
    const host = await startHost(dataDir, overrides);
    hosts.push(host);
    return host;
  }

  async function stop(host: CoordinatorHost): Promise<void> {
    hosts.splice(hosts.indexOf(host), 1);
    await stopHost(host);
  }

  function connect(host: CoordinatorHost, token = host.token): CoordinatorClients {
    const clients = new CoordinatorClients(`127.0.0.1:${host.port}`, token);
    openClients.push(clients);
    return clients;
  }

  afterEach(async () => {
    for (const clients of openClients.splice(0)) clients.close();
    for (const host of hosts.splice(0)) await stopHost(host);
    for (const dir of dirs.splice(0)) removeTempDir(dir);
  });

  describe('persistence across restarts', () => {
    it('brings registered agents back disconnected, online again on their next heartbeat, with the same token', async () => {
      const dataDir = tempDir();
      const first = await start(dataDir);
      const firstClients = connect(first);
      for (const id of ['alpha', 'beta'])
        assert.equal((await firstClients.registerAgent(descriptorMessage(id))).accepted, true);
      await firstClients.heartbeat('alpha', 'RUNNABLE');
      const token = first.token;
      const tokenFile = path.join(dataDir, TOKEN_FILE_NAME);
      assert.equal(fs.readFileSync(tokenFile, 'utf8').trim(), token);
      assert.equal(fs.statSync(tokenFile).mode & 0o777, 0o600);
      firstClients.close();
      await stop(first);

      const second = await start(dataDir);

      assert.equal(second.token, token, 'agents keep their SW4RM_TOKEN across restarts');
      const registry = second.coordinator.registry;
      assert.deepEqual(
        registry.list().map((a) => [a.descriptor.agentId, a.state, a.presence]),
        [
          ['alpha', 'RUNNABLE', 'disconnected'],
          ['beta', 'INITIALIZING', 'disconnected'],
        ],
      );
      assert.equal(registry.get('alpha')?.descriptor.name, 'Agent alpha');
      const clients = connect(second, token);
      assert.deepEqual(await clients.heartbeat('alpha', 'RUNNABLE'), { ok: true });
      assert.equal(registry.get('alpha')?.presence, 'online');
      assert.equal(registry.get('beta')?.presence, 'disconnected');
      const events = second.coordinator.log.query({ eventType: 'agent.presence_changed', actor: 'alpha' });
      assert.deepEqual(
        events.map((e) => e.details.to),
        ['online'],
      );
      assert.ok(
        second.coordinator.log.query({ eventType: 'agent.registered' }).length >= 2,
        "the earlier run's events are kept",
      );
    });

    it('can restart on the port it had, once it has stopped', async () => {
      const dataDir = tempDir();
      const first = await start(dataDir);
      const port = first.port;
      await stop(first);
      const second = await start(dataDir, { port });
      assert.equal(second.port, port);
      assert.deepEqual(await connect(second).healthCheck(''), { status: 'SERVING' });
    });
  });

  describe('a store it cannot use', () => {
    it('refuses a corrupt store file, naming it, and leaves the file unchanged', async () => {
      const dataDir = tempDir();
      const file = path.join(dataDir, STORE_FILE_NAME);
      const garbage = writeGarbage(file);
      const before = fingerprint(file);

      await assert.rejects(start(dataDir), (err: unknown) => {
        assert.ok(err instanceof StoreOpenError, String(err));
        assert.equal(err.reason, 'corrupt');
        assert.ok(err.message.includes(file), err.message);
        assert.match(err.message, /Move the file aside/);
        return true;
      });

      const after = fingerprint(file);
      assert.ok(after.bytes.equals(garbage));
      assert.equal(after.mtimeMs, before.mtimeMs);
      assert.ok(!fs.existsSync(`${file}-wal`));
    });

    it('refuses a store written by a newer coordinator', async () => {
      const dataDir = tempDir();
      CoordinatorStore.open(dataDir, {
        schema: [
          ...COORDINATOR_SCHEMA,
          { version: LATEST_SCHEMA_VERSION + 1, area: 'test', description: 'future', statements: [] },
        ],
      }).close();
      await assert.rejects(
        start(dataDir),
        (err: unknown) => err instanceof StoreOpenError && err.reason === 'newer-schema',
      );
    });
  });

  describe('a port that is taken', () => {
    it('refuses with PortInUseError offering a different port that is actually free', async () => {
      const a = await start(tempDir());
      const bDir = tempDir();

      const error = await start(bDir, { port: a.port }).then(
        () => assert.fail('a second coordinator bound the same port'),
        (err: unknown) => err,
      );

      assert.ok(error instanceof PortInUseError, String(error));
      assert.equal(error.port, a.port);
      assert.equal(error.host, '127.0.0.1');
      assert.notEqual(error.freePort, a.port);
      assert.ok(error.freePort > 0);
      assert.ok(
        error.message.includes(`Port ${a.port}`) && error.message.includes(`--port ${error.freePort}`),
        error.message,
      );
      assert.equal(await canListen(error.freePort), true, `port ${error.freePort} can be bound`);
      assert.deepEqual(await connect(a).healthCheck(''), { status: 'SERVING' }, 'the first coordinator is unaffected');
      // The refused host closed its store: it can be opened and used again at once.
      const b = await start(bDir);
      assert.ok(b.port > 0);
    });

    it("leaves the running coordinator's store alone when a second one on the same data folder is refused", async () => {
      const dataDir = tempDir();
      const a = await start(dataDir);
      const clients = connect(a);
      await clients.registerAgent(descriptorMessage('alpha'));
      await clients.heartbeat('alpha', 'RUNNABLE');
      const eventsBefore = a.coordinator.store.events.count();

      await assert.rejects(
        start(dataDir, { port: a.port, lockWaitMs: 50 }),
        (err: unknown) => err instanceof StoreOpenError && err.reason === 'locked',
      );

      // A refused start must have no effect on the live coordinator's store.
      assert.equal(a.coordinator.store.agents.get('alpha')?.presence, 'online', 'the stored presence of a live agent');
      assert.deepEqual(
        a.coordinator.store.events
          .query({ afterId: 0 })
          .slice(eventsBefore)
          .map((e) => e.eventType),
        [],
        'no events written by the refused coordinator',
      );
    });

    it('refuses a port held by another program', async () => {
      const blocker = net.createServer();
      await new Promise<void>((resolve) => blocker.listen({ host: '127.0.0.1', port: 0 }, resolve));
      const port = (blocker.address() as net.AddressInfo).port;
      try {
        await assert.rejects(
          start(tempDir(), { port }),
          (err: unknown) => err instanceof PortInUseError && err.freePort !== port,
        );
      } finally {
        await new Promise((resolve) => blocker.close(resolve));
      }
    });
  });
});
