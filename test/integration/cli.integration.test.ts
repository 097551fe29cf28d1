import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { SERVICE_ADDRESS_VARIABLES } from '../../src/server/agentEnvironment';
import { useCliProcesses } from '../support/cli';
import { CoordinatorClients } from '../support/clients';
import { descriptorMessage, fingerprint, writeGarbage } from '../support/fixtures';

describe('headless coordinator (dist/cli.js)', () => {
  const { run, dataDir } = useCliProcesses('sw4rm-int-cli-');

  it('prints the agent environment, serves agents, and drains and exits 0 on SIGTERM', async () => {
    const cli = run('--port', '0', '--data-dir', dataDir());
    const env = await cli.environment();

    for (const name of SERVICE_ADDRESS_VARIABLES) assert.equal(env[name], env.SW4RM_REGISTRY_ADDR, name);
    assert.match(env.SW4RM_REGISTRY_ADDR, /^127\.0\.0\.1:\d+$/);
    assert.notEqual(env.SW4RM_REGISTRY_ADDR, '127.0.0.1:0');
    assert.match(env.SW4RM_TOKEN, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(fs.readFileSync(path.join(dataDir(), 'token'), 'utf8').trim(), env.SW4RM_TOKEN);
    assert.match(cli.stdout, new RegExp(`store ${dataDir().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/coordinator\\.db`));

    const clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    try {
      assert.deepEqual(await clients.registerAgent(descriptorMessage('alpha'), { correlationId: 'cli-reg' }), {
        accepted: true,
        reason: '',
      });
      assert.deepEqual(await clients.heartbeat('alpha', 'RUNNABLE'), { ok: true });
      assert.deepEqual(await clients.healthCheck(''), { status: 'SERVING' });
    } finally {
      clients.close();
    }

    cli.signal('SIGTERM');
    assert.equal(await cli.exit(), 0, cli.stderr);
    assert.match(cli.stderr, /SIGTERM received, draining/);
    assert.match(cli.stderr, /agent\.registered \[cli-reg\]/, 'every event is echoed to stderr');
    assert.match(cli.stderr, /server\.draining/);
  });

  /** Runs the CLI on dataDir(), registers agent 'alpha', stops it with `signal` and checks it exited 0. */
  async function registerAlphaAndStop(signal: NodeJS.Signals) {
    const first = run('--port', '0', '--data-dir', dataDir());
    const env = await first.environment();
    const clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    try {
      await clients.registerAgent(descriptorMessage('alpha'));
    } finally {
      clients.close();
    }
    first.signal(signal);
    assert.equal(await first.exit(), 0, first.stderr);
    return { first, env };
  }

  it('drains on SIGINT too, and keeps the store for the next run', async () => {
    const { first, env } = await registerAlphaAndStop('SIGINT');
    assert.match(first.stderr, /SIGINT received, draining/);

    const second = run('--port', '0', '--data-dir', dataDir());
    const env2 = await second.environment();
    assert.equal(env2.SW4RM_TOKEN, env.SW4RM_TOKEN, 'the token survives a restart');
    const clients2 = new CoordinatorClients(env2.SW4RM_REGISTRY_ADDR, env2.SW4RM_TOKEN);
    try {
      assert.deepEqual(await clients2.heartbeat('alpha', 'RUNNABLE'), { ok: true }, 'the agent is still registered');
    } finally {
      clients2.close();
    }
    second.signal('SIGTERM');
    assert.equal(await second.exit(), 0);
  });

  it('echoes the events of its own start-up to stderr, including agents restored as disconnected', async () => {
    await registerAlphaAndStop('SIGTERM');

    const second = run('--port', '0', '--data-dir', dataDir());
    await second.environment();
    second.signal('SIGTERM');
    assert.equal(await second.exit(), 0);

    // BRIEF: every state transition is a structured event visible to the person running the coordinator.
    // The restore transition (online -> disconnected) and coordinator.started / server.serving are recorded
    // before src/cli/main.ts subscribes to onDidRecord, so they never reach stderr.
    assert.match(second.stderr, /coordinator\.started/, 'coordinator.started is echoed');
    assert.match(
      second.stderr,
      /agent\.presence_changed \[restore:alpha\] .*"to":"disconnected"/,
      'the restore transition is echoed',
    );
  });

  it('exits 1 with the reason when the store cannot commit, having told no agent "accepted" for what was lost; a new run recovers', async () => {
    // A real commit failure: registering 'poison' inserts a row that breaks a deferred foreign key, so SQLite
    // refuses the COMMIT of that batch (as it would refuse one on a full disk).
    CoordinatorStore.open(dataDir()).close();
    const db = new DatabaseSync(path.join(dataDir(), STORE_FILE_NAME));
    db.exec(`CREATE TABLE poison_parent (id INTEGER PRIMARY KEY);
      CREATE TABLE poison_child (parent INTEGER REFERENCES poison_parent(id) DEFERRABLE INITIALLY DEFERRED);
      CREATE TRIGGER poison AFTER INSERT ON agents WHEN NEW.agent_id = 'poison' BEGIN INSERT INTO poison_child (parent) VALUES (42); END;`);
    db.close();

    const cli = run('--port', '0', '--data-dir', dataDir());
    const env = await cli.environment();
    const clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    try {
      assert.deepEqual(await clients.registerAgent(descriptorMessage('alpha')), { accepted: true, reason: '' });
      await assert.rejects(clients.registerAgent(descriptorMessage('poison')), (err: Error & { code?: number }) => {
        assert.equal(err.code, 13, `INTERNAL, not accepted: ${err.message}`);
        assert.match(err.message, /could not commit/);
        return true;
      });
    } finally {
      clients.close();
    }
    assert.equal(await cli.exit(), 1, cli.stderr);
    assert.match(
      cli.stderr,
      /sw4rm-coordinator: The SW4RM store .*coordinator\.db could not commit \(FOREIGN KEY constraint failed\)/,
    );

    const second = run('--port', '0', '--data-dir', dataDir());
    const env2 = await second.environment();
    const clients2 = new CoordinatorClients(env2.SW4RM_REGISTRY_ADDR, env2.SW4RM_TOKEN);
    try {
      assert.deepEqual(await clients2.heartbeat('alpha', 'RUNNABLE'), { ok: true }, 'what was committed is there');
      assert.deepEqual(await clients2.heartbeat('poison', 'RUNNABLE'), { ok: false }, 'what was rolled back is not');
    } finally {
      clients2.close();
    }
    second.signal('SIGTERM');
    assert.equal(await second.exit(), 0, second.stderr);
  });

  it('prints no token with --auth none', async () => {
    const cli = run('--port', '0', '--data-dir', dataDir(), '--auth', 'none');
    const env = await cli.environment();
    assert.equal(env.SW4RM_TOKEN, undefined);
    assert.ok(!fs.existsSync(path.join(dataDir(), 'token')));
    cli.signal('SIGTERM');
    assert.equal(await cli.exit(), 0);
  });

  it('exits 2 with the usage on a bad option', async () => {
    const cli = run('--auth', 'bogus', '--data-dir', dataDir());
    assert.equal(await cli.exit(), 2);
    assert.match(cli.stderr, /--auth must be 'token' or 'none', not 'bogus'/);
    assert.match(cli.stderr, /Usage: sw4rm-coordinator/);
    assert.equal(cli.stdout, '');
    assert.ok(!fs.existsSync(path.join(dataDir(), STORE_FILE_NAME)), 'nothing was created');
  });

  it('prints the usage and exits 0 with --help', async () => {
    const cli = run('--help');
    assert.equal(await cli.exit(), 0);
    assert.match(cli.stdout, /Usage: sw4rm-coordinator/);
  });

  it("exits 1 with the store's message on a corrupt store, leaving the file unchanged", async () => {
    const file = path.join(dataDir(), STORE_FILE_NAME);
    const garbage = writeGarbage(file);
    const before = fingerprint(file);

    const cli = run('--port', '0', '--data-dir', dataDir());

    assert.equal(await cli.exit(), 1, cli.stderr);
    assert.ok(cli.stderr.includes(file), cli.stderr);
    assert.match(cli.stderr, /is damaged/);
    assert.match(cli.stderr, /Move the file aside/);
    assert.ok(!/\n\s+at /.test(cli.stderr), 'a clear message, not a stack trace');
    assert.ok(fingerprint(file).bytes.equals(garbage));
    assert.equal(fingerprint(file).mtimeMs, before.mtimeMs);
  });

  it('exits 1 with a clear message, not a stack trace, when the data folder cannot be created', async () => {
    const notAFolder = path.join(dataDir(), 'plain-file');
    fs.writeFileSync(notAFolder, 'x');

    const cli = run('--port', '0', '--data-dir', notAFolder);

    assert.equal(await cli.exit(), 1, cli.stderr);
    assert.ok(cli.stderr.includes(notAFolder), cli.stderr);
    assert.ok(!/\n\s+at /.test(cli.stderr), `a clear message, not a stack trace:\n${cli.stderr}`);
  });

  it('exits 1 naming a free port when its port is taken', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen({ host: '127.0.0.1', port: 0 }, resolve));
    const taken = (blocker.address() as net.AddressInfo).port;
    try {
      const cli = run('--port', String(taken), '--data-dir', dataDir());
      assert.equal(await cli.exit(), 1, cli.stderr);
      assert.match(cli.stderr, new RegExp(`Port ${taken} on 127\\.0\\.0\\.1 is already in use`));
      const offered = /Port (\d+) is free/.exec(cli.stderr);
      assert.ok(offered, cli.stderr);
      const free = Number(offered[1]);
      assert.notEqual(free, taken);
      assert.match(cli.stderr, new RegExp(`--port ${free}`));
      assert.ok(!/\n\s+at /.test(cli.stderr), 'a clear message, not a stack trace');
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it('exits 1 when asked to bind a non-loopback address without auth', async () => {
    const cli = run('--host', '0.0.0.0', '--auth', 'none', '--port', '0', '--data-dir', dataDir());
    assert.equal(await cli.exit(), 1);
    assert.match(cli.stderr, /requires auth "token"/);
  });
});
