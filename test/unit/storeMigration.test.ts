import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { validateDescriptor } from '../../src/core/registry/descriptor';
import type { AgentRecord } from '../../src/core/registry/model';
import { defaultDataFolder, STORES_FOLDER_NAME } from '../../src/extension/dataFolder';
import { describeMigration, migrateStore, MOVED_NOTE_FILE_NAME, STORE_FILES } from '../../src/server/storeMigration';
import { validDescriptor } from '../support/fixtures';
import { makeTempDir, removeTempDir } from '../support/tempDir';

function agentRecord(agentId: string): AgentRecord {
  const verdict = validateDescriptor(validDescriptor(agentId));
  assert.ok(verdict.ok);
  return {
    descriptor: verdict.descriptor,
    state: 'RUNNABLE',
    registeredAt: 1_000,
    updatedAt: 2_000,
    lastHeartbeatAt: null,
    health: { load: 'low' },
    presence: 'online',
  };
}

/** A data folder as a coordinator leaves it: a store with one agent, the operator token and the enrolment token. */
function writeStore(dir: string, agentId: string): void {
  const store = CoordinatorStore.open(dir, { lockWaitMs: 0 });
  store.agents.upsert(agentRecord(agentId));
  store.close();
  fs.writeFileSync(path.join(dir, 'token'), `operator-${agentId}\n`, { mode: 0o600 });
  fs.writeFileSync(path.join(dir, 'enrolment-token'), `enrolment-${agentId}\n`, { mode: 0o600 });
}

function agentIn(dir: string, agentId: string): AgentRecord | undefined {
  const store = CoordinatorStore.open(dir, { lockWaitMs: 0 });
  try {
    return store.agents.get(agentId);
  } finally {
    store.close();
  }
}

const storeFiles = (dir: string) => STORE_FILES.filter((name) => fs.existsSync(path.join(dir, name)));

describe('the default data folder (src/extension/dataFolder.ts)', () => {
  const global = '/home/u/.config/Code/User/globalStorage/sw4rm.sw4rm-coordinator';

  it('is a folder under the global storage keyed by the workspace folders, the same at every call', () => {
    const folder = defaultDataFolder(global, ['/work/my repo']);
    assert.equal(path.dirname(folder), path.join(global, STORES_FOLDER_NAME));
    assert.match(path.basename(folder), /^my_repo-[0-9a-f]{16}$/);
    assert.equal(defaultDataFolder(global, ['/work/my repo']), folder);
    assert.equal(defaultDataFolder(global, ['/work/my repo/']), folder, 'a trailing slash is the same folder');
  });

  it('differs for other folders, and not for the order of a multi-root workspace', () => {
    const a = defaultDataFolder(global, ['/work/a']);
    assert.notEqual(defaultDataFolder(global, ['/other/a']), a, 'another checkout with the same name');
    assert.notEqual(defaultDataFolder(global, ['/work/a', '/work/b']), a);
    assert.equal(
      path.basename(defaultDataFolder(global, ['/work/b', '/work/a'])).slice(-16),
      path.basename(defaultDataFolder(global, ['/work/a', '/work/b'])).slice(-16),
    );
  });
});

describe('moving the store from the workspace storage (src/server/storeMigration.ts)', () => {
  let root: string;
  let from: string;
  let to: string;
  beforeEach(() => {
    root = makeTempDir('sw4rm-migrate-');
    from = path.join(root, 'workspaceStorage', 'abc', 'sw4rm.sw4rm-coordinator');
    to = path.join(root, 'globalStorage', 'sw4rm.sw4rm-coordinator', 'stores', 'repo-0123456789abcdef');
    fs.mkdirSync(from, { recursive: true });
  });
  afterEach(() => removeTempDir(root));

  it('moves every file of the store together, once, and leaves a note where it was', () => {
    writeStore(from, 'alpha');
    const migration = migrateStore(from, to, { lockWaitMs: 0 });
    assert.equal(migration.kind, 'moved');
    assert.equal(migration.use, to);
    assert.deepEqual(storeFiles(from), [], 'nothing of the store is left behind');
    assert.ok(fs.existsSync(path.join(to, 'coordinator.db')));
    assert.ok(fs.existsSync(path.join(to, 'coordinator.db.state')));
    assert.equal(fs.readFileSync(path.join(to, 'token'), 'utf8'), 'operator-alpha\n');
    assert.equal(fs.readFileSync(path.join(to, 'enrolment-token'), 'utf8'), 'enrolment-alpha\n');
    assert.equal(fs.statSync(path.join(to, 'token')).mode & 0o777, 0o600);
    assert.ok(!fs.existsSync(`${to}.migrating`));
    assert.deepEqual(agentIn(to, 'alpha')?.descriptor.agentId, 'alpha');
    assert.match(
      fs.readFileSync(path.join(from, MOVED_NOTE_FILE_NAME), 'utf8'),
      new RegExp(`moved to ${to.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
    );
    const message = describeMigration(from, migration);
    assert.ok(message?.includes(`moved the store from ${from} to ${to}`), message);
    assert.ok(message?.includes('coordinator.db, ') && message.includes('token'), message);

    assert.deepEqual(
      migrateStore(from, to, { lockWaitMs: 0 }),
      { kind: 'none', use: to },
      'a second start has nothing to move',
    );
    assert.equal(describeMigration(from, { kind: 'none', use: to }), undefined);
  });

  it('moves the payload folder with the store (a store started where it was, in use at an earlier start, has one)', () => {
    writeStore(from, 'alpha');
    fs.mkdirSync(path.join(from, 'payloads'));
    fs.writeFileSync(path.join(from, 'payloads', '0b7e6c1e-9a4c-4b8e-9d3f-2a1b0c9d8e7f'), 'sixteen megabytes');
    const migration = migrateStore(from, to, { lockWaitMs: 0 });
    assert.equal(migration.kind, 'moved');
    assert.ok(migration.kind === 'moved' && migration.files.includes('payloads'));
    assert.equal(
      fs.readFileSync(path.join(to, 'payloads', '0b7e6c1e-9a4c-4b8e-9d3f-2a1b0c9d8e7f'), 'utf8'),
      'sixteen megabytes',
    );
    assert.ok(!fs.existsSync(path.join(from, 'payloads')));
  });

  it('moves the store of a coordinator that was killed, with every commit still in its write-ahead log', () => {
    const running = path.join(root, 'running');
    const store = CoordinatorStore.open(running, { lockWaitMs: 0 });
    store.agents.upsert(agentRecord('beta'));
    // A copy of the files while the store is open is what a kill -9 leaves: the commit only in the -wal file.
    for (const name of fs.readdirSync(running)) fs.copyFileSync(path.join(running, name), path.join(from, name));
    store.close();
    assert.ok(fs.statSync(path.join(from, 'coordinator.db-wal')).size > 0);
    assert.equal(JSON.parse(fs.readFileSync(path.join(from, 'coordinator.db.state'), 'utf8')).state, 'open');

    const migration = migrateStore(from, to, { lockWaitMs: 0 });
    assert.equal(migration.kind, 'moved');
    assert.deepEqual(storeFiles(from), []);
    assert.equal(agentIn(to, 'beta')?.descriptor.agentId, 'beta');
  });

  it('never moves a store a coordinator has open: this start uses it where it is', () => {
    writeStore(from, 'alpha');
    const open = CoordinatorStore.open(from, { lockWaitMs: 0 });
    try {
      const before = storeFiles(from);
      const migration = migrateStore(from, to, { lockWaitMs: 0 });
      assert.equal(migration.kind, 'not-moved');
      assert.equal(migration.use, from);
      assert.match(
        describeMigration(from, migration)!,
        /was not moved .*in use by another running coordinator.*moved at a later start/,
      );
      assert.deepEqual(storeFiles(from), before);
      assert.ok(!fs.existsSync(to) && !fs.existsSync(`${to}.migrating`));
    } finally {
      open.close();
    }
    assert.equal(migrateStore(from, to, { lockWaitMs: 0 }).kind, 'moved', 'moved once the coordinator closed it');
  });

  it('never overwrites a store in the new folder: both are kept and the new one is used', () => {
    writeStore(from, 'old-agent');
    writeStore(to, 'new-agent');
    const migration = migrateStore(from, to, { lockWaitMs: 0 });
    assert.deepEqual(migration, { kind: 'both', use: to, left: from });
    assert.match(describeMigration(from, migration)!, /left as it is/);
    assert.equal(fs.readFileSync(path.join(to, 'token'), 'utf8'), 'operator-new-agent\n');
    assert.equal(fs.readFileSync(path.join(from, 'token'), 'utf8'), 'operator-old-agent\n');
    assert.equal(agentIn(to, 'old-agent'), undefined);
    assert.equal(agentIn(from, 'old-agent')?.descriptor.agentId, 'old-agent');
  });

  it('leaves a store that does not open where it is, untouched, and uses it (its error is shown at start)', () => {
    fs.writeFileSync(path.join(from, 'coordinator.db'), "not a database, but somebody's data");
    const migration = migrateStore(from, to, { lockWaitMs: 0 });
    assert.equal(migration.kind, 'not-moved');
    assert.equal(migration.use, from);
    assert.equal(fs.readFileSync(path.join(from, 'coordinator.db'), 'utf8'), "not a database, but somebody's data");
    assert.ok(!fs.existsSync(to));
  });

  it('has nothing to move from an empty or missing folder', () => {
    assert.deepEqual(migrateStore(from, to), { kind: 'none', use: to });
    assert.deepEqual(migrateStore(path.join(root, 'missing'), to), { kind: 'none', use: to });
    assert.deepEqual(migrateStore(to, to), { kind: 'none', use: to });
  });

  it('finishes a move that was interrupted half way, on the next start', () => {
    writeStore(from, 'gamma');
    // As if the previous start stopped after moving the database: it is in the staging folder, the rest is not.
    fs.mkdirSync(`${to}.migrating`, { recursive: true });
    fs.renameSync(path.join(from, 'coordinator.db'), path.join(`${to}.migrating`, 'coordinator.db'));
    const migration = migrateStore(from, to, { lockWaitMs: 0 });
    assert.equal(migration.kind, 'moved');
    assert.deepEqual(storeFiles(from), []);
    assert.equal(agentIn(to, 'gamma')?.descriptor.agentId, 'gamma');
    assert.equal(fs.readFileSync(path.join(to, 'token'), 'utf8'), 'operator-gamma\n');
  });

  it('moves into a new folder that exists but holds no store', () => {
    writeStore(from, 'delta');
    fs.mkdirSync(to, { recursive: true });
    fs.writeFileSync(path.join(to, 'unrelated.txt'), 'kept');
    assert.equal(migrateStore(from, to, { lockWaitMs: 0 }).kind, 'moved');
    assert.equal(agentIn(to, 'delta')?.descriptor.agentId, 'delta');
    assert.equal(fs.readFileSync(path.join(to, 'unrelated.txt'), 'utf8'), 'kept');
  });
});
