import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { useCliProcesses } from '../support/cli';
import { CoordinatorClients } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';

describe('headless coordinator on a store that lost committed data', () => {
  const { run, dataDir } = useCliProcesses('sw4rm-int-store-faults-');

  it('exits 1 with the reason, naming the files, when the write-ahead log was deleted after kill -9; with the log it starts', async () => {
    const file = path.join(dataDir(), STORE_FILE_NAME);
    const wal = `${file}-wal`;
    const first = run('--port', '0', '--data-dir', dataDir());
    const env = await first.environment();
    const clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    try {
      assert.deepEqual(await clients.registerAgent(descriptorMessage('alpha')), { accepted: true, reason: '' });
    } finally {
      clients.close();
    }
    first.signal('SIGKILL');
    await first.exit();
    assert.equal(first.exitSignal, 'SIGKILL');

    // The log intact: a crash is not a fault, the store starts with what was committed.
    const wal0 = fs.readFileSync(wal);
    const second = run('--port', '0', '--data-dir', dataDir());
    await second.environment();
    second.signal('SIGKILL');
    await second.exit();

    fs.rmSync(wal);
    const before = fs.readFileSync(file);
    const third = run('--port', '0', '--data-dir', dataDir());
    assert.equal(await third.exit(), 1, third.stderr);
    assert.match(third.stderr, /^sw4rm-coordinator: The SW4RM store .*coordinator\.db has lost committed data/m);
    assert.ok(third.stderr.includes(wal), third.stderr);
    assert.match(third.stderr, /stopped without closing the store, and its write-ahead log .* is gone/);
    assert.match(third.stderr, /Restore coordinator\.db .* from a backup/);
    assert.ok(!/\n\s+at /.test(third.stderr), `a clear message, not a stack trace:\n${third.stderr}`);
    assert.equal(third.stdout.includes('export SW4RM_'), false, 'it never served');
    assert.ok(fs.readFileSync(file).equals(before), 'the store file was not changed');
    assert.ok(wal0.length > 0);
  });
});
