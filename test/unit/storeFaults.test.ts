import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { SchemaStep } from '../../src/core/store/schema';
import { SqliteStore, STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { diagnoseOpenFailure, markerPath, readCommitCounter, readMarker } from '../../src/core/store/storeState';
import { StoreOpenError } from '../../src/core/store/store';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** The engine alone, with one table of its own: these tests are about the files, not the areas. */
const ROWS: SchemaStep[] = [
  {
    version: 1,
    area: 'test',
    description: 'rows',
    statements: ['CREATE TABLE rows (id INTEGER PRIMARY KEY, text TEXT NOT NULL)'],
  },
];
const ENGINE_MODULE = path.join(__dirname, '../../src/core/store/sqliteStore.js');

function open(dataDir: string, groupCommit = false): SqliteStore {
  return SqliteStore.open(dataDir, { schema: ROWS, markIntervalMs: 0, groupCommit });
}

function insert(store: SqliteStore, n: number, from = 0): void {
  const statement = store.database.prepare('INSERT INTO rows (text) VALUES (?)');
  for (let i = 0; i < n; i++) store.transaction(() => statement.run(`row ${from + i} ${'x'.repeat(200)}`));
}

function rowCount(store: SqliteStore): number {
  return Number((store.database.prepare('SELECT COUNT(*) AS n FROM rows').get() as { n: number }).n);
}

function refusal(dataDir: string): StoreOpenError {
  try {
    open(dataDir).close();
  } catch (err) {
    assert.ok(err instanceof StoreOpenError, `expected StoreOpenError, got ${String(err)}`);
    return err;
  }
  assert.fail('the store opened');
}

/** What a user is told to do must never be to throw a store away without saying that data is lost. */
function assertMissingData(err: StoreOpenError, ...named: string[]): void {
  assert.equal(err.reason, 'missing-data', err.message);
  for (const file of named) assert.ok(err.message.includes(file), `names ${file}: ${err.message}`);
  assert.match(err.message, /has lost committed data/);
  assert.match(err.message, /Restore .* from a backup/);
  assert.match(err.message, /Only if you accept losing what is missing/);
  assert.match(err.message, /has not changed it|SQLite folded what the write-ahead log still held into the file/);
}

/**
 * A real crash: a child process opens the store, commits `rows` rows one by one, lets the marker follow, and
 * kills itself with SIGKILL (nothing is closed, the write-ahead log stays as the kernel has it).
 */
function crashAfter(
  dataDir: string,
  rows: number,
  groupCommit = false,
  { markIntervalMs = 0, killAtOnce = false } = {},
): void {
  const kill = killAtOnce
    ? "process.kill(process.pid, 'SIGKILL')"
    : "setTimeout(() => process.kill(process.pid, 'SIGKILL'), 50)";
  const script = `
    const { SqliteStore } = require(${JSON.stringify(ENGINE_MODULE)});
    const store = SqliteStore.open(${JSON.stringify(dataDir)}, { schema: ${JSON.stringify(ROWS)}, markIntervalMs: ${markIntervalMs}, groupCommit: ${groupCommit} });
    const insert = store.database.prepare('INSERT INTO rows (text) VALUES (?)');
    const before = store.database.prepare('SELECT COUNT(*) AS n FROM rows').get().n;
    for (let i = 0; i < ${rows}; i++) store.transaction(() => insert.run('row ' + (before + i) + ' ' + 'x'.repeat(200)));
    store.whenDurable().then(() => ${kill});
  `;
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
  assert.equal(child.signal, 'SIGKILL', `the child should have died of SIGKILL: ${child.status} ${child.stderr}`);
}

describe('store faults that are never silent', () => {
  let dataDir: string;
  let file: string;
  let wal: string;
  let store: SqliteStore | undefined;

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-store-faults-');
    file = path.join(dataDir, STORE_FILE_NAME);
    wal = `${file}-wal`;
  });

  afterEach(() => {
    store?.close();
    store = undefined;
    removeTempDir(dataDir);
  });

  describe('a healthy store always opens', () => {
    it('after a crash with its write-ahead log intact, with every row', () => {
      crashAfter(dataDir, 30);
      assert.equal(readMarker(file)?.state, 'open', 'the crashed run never closed');
      assert.ok(fs.statSync(wal).size > 0, 'the committed rows are in the write-ahead log');
      store = open(dataDir);
      assert.equal(rowCount(store), 30);
    });

    it('after crash upon crash (group commit too), with every row', () => {
      crashAfter(dataDir, 30);
      crashAfter(dataDir, 30, true);
      crashAfter(dataDir, 5);
      store = open(dataDir);
      assert.equal(rowCount(store), 65);
    });

    it('after a crash at once after its last commit, the marker a second behind (the default), with every row', () => {
      crashAfter(dataDir, 30, false, { markIntervalMs: 1000, killAtOnce: true });
      crashAfter(dataDir, 30, true, { markIntervalMs: 1000, killAtOnce: true });
      store = open(dataDir);
      assert.equal(rowCount(store), 60);
    });

    it('after a clean close: an empty log, a "clean" marker, every row', () => {
      store = open(dataDir);
      insert(store, 30);
      store.close();
      store = undefined;
      assert.ok(!fs.existsSync(wal) || fs.statSync(wal).size === 0, 'everything is in the database file');
      assert.equal(readMarker(file)?.state, 'clean');
      store = open(dataDir);
      assert.equal(rowCount(store), 30);
      assert.equal(readMarker(file)?.state, 'open');
    });

    it('a store from before markers opens as before and gains one', () => {
      const db = new DatabaseSync(file);
      db.exec('PRAGMA journal_mode = WAL');
      db.exec(`${ROWS[0].statements[0]}; INSERT INTO rows (text) VALUES ('old'); PRAGMA user_version = 1`);
      db.close();
      assert.ok(!fs.existsSync(markerPath(file)));
      store = open(dataDir);
      assert.equal(rowCount(store), 1);
      assert.equal(readMarker(file)?.state, 'open');
      store.close();
      store = undefined;
      assert.equal(readMarker(file)?.state, 'clean');
    });

    it('a marker that cannot be read counts as none (it never makes a healthy store refuse)', () => {
      store = open(dataDir);
      insert(store, 3);
      store.close();
      store = undefined;
      fs.writeFileSync(markerPath(file), '{"format":1,"sta');
      store = open(dataDir);
      assert.equal(rowCount(store), 3);
    });

    it('the marker follows the commits (group commit), never ahead of the database', async () => {
      store = open(dataDir, true);
      const first = readMarker(file)!.epoch;
      insert(store, 10);
      await store.whenDurable();
      // The marker follows in its own commit after this one (markIntervalMs 0 here): wait for it, not for a time.
      await pollUntil(
        'the marker to follow the commit',
        () => (readMarker(file)!.epoch > first ? true : undefined),
        5_000,
      );
      const marked = readMarker(file)!;
      assert.equal(marked.state, 'open');
      assert.ok(marked.epoch > first, `${marked.epoch} > ${first}`);
      const db = store.database.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'sw4rm_store_epoch'`).get() as {
        seq: number;
      };
      assert.ok(Number(db.seq) >= marked.epoch);
    });
  });

  describe('every commit advances the epoch, at the cost of no page of its own', () => {
    /** Like the event log: a table with an AUTOINCREMENT key, so that its commits write sqlite_sequence's page. */
    const LOGGED: SchemaStep[] = [
      {
        version: 1,
        area: 'test',
        description: 'log',
        statements: ['CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL)'],
      },
    ];
    const seq = (s: SqliteStore): number =>
      Number(
        (
          s.database.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'sw4rm_store_epoch'`).get() as {
            seq: number;
          }
        ).seq,
      );

    it('each commit adds one to the epoch and to the counter, past 2^32 too', () => {
      store = SqliteStore.open(dataDir, { schema: LOGGED, markIntervalMs: 60_000 });
      const append = store.database.prepare('INSERT INTO log (text) VALUES (?)');
      const first = seq(store);
      for (let i = 1; i <= 3; i++) {
        store.transaction(() => append.run(`entry ${i}`));
        assert.equal(seq(store), first + i);
        assert.equal(readCommitCounter(file), first + i);
      }
      // An epoch past 2^32 (the counter's 32-bit halves), set while the store is closed (open reads it; then only the
      // store's own connection writes the row).
      store.close();
      store = undefined;
      const far = 2 ** 32 + 5;
      const db = new DatabaseSync(file);
      db.exec(`UPDATE sqlite_sequence SET seq = ${far} WHERE name = 'sw4rm_store_epoch'`);
      db.close();
      store = SqliteStore.open(dataDir, { schema: LOGGED, markIntervalMs: 60_000 });
      assert.equal(seq(store), far + 1, 'open commits an epoch of its own');
      store.transaction(() => store!.database.prepare('INSERT INTO log (text) VALUES (?)').run('past 2^32'));
      assert.equal(seq(store), far + 2);
      assert.equal(readCommitCounter(file), far + 2);
      assert.equal(
        Number((store.database.prepare('SELECT COUNT(*) AS n FROM sw4rm_store_epoch').get() as { n: number }).n),
        0,
        'the epoch table stays empty',
      );
    });

    it('a commit that writes sqlite_sequence anyway writes no more pages to the log for its epoch', () => {
      store = SqliteStore.open(dataDir, { schema: LOGGED, markIntervalMs: 60_000 });
      store.database.exec('PRAGMA wal_autocheckpoint = 0');
      const append = store.database.prepare('INSERT INTO log (text) VALUES (?)');
      store.transaction(() => append.run('first'));
      const pageSize = Number((store.database.prepare('PRAGMA page_size').get() as { page_size: number }).page_size);
      const before = fs.statSync(wal).size;
      const commits = 20;
      for (let i = 0; i < commits; i++) store.transaction(() => append.run(`entry ${i}`));
      const frames = (fs.statSync(wal).size - before) / (pageSize + 24);
      // The log's leaf page and sqlite_sequence's (its id and the epoch): two frames a commit. (An INSERT and a DELETE on
      // the epoch table wrote that table's page too: three.)
      assert.equal(frames / commits, 2, `${frames} frames for ${commits} commits`);
    });
  });

  describe('refuses when committed data is known to be missing, and changes nothing', () => {
    it('the write-ahead log deleted after a crash', () => {
      crashAfter(dataDir, 30);
      fs.rmSync(wal);
      const before = fs.readFileSync(file);
      const err = refusal(dataDir);
      assertMissingData(err, file, wal);
      assert.match(err.message, /stopped without closing the store, and its write-ahead log .* is gone/);
      assert.ok(fs.readFileSync(file).equals(before), 'the store file is unchanged');
      assert.ok(!fs.existsSync(wal));
      assert.equal(refusal(dataDir).reason, 'missing-data', 'and again on the next start');
    });

    it('the write-ahead log emptied after a crash', () => {
      crashAfter(dataDir, 30);
      fs.truncateSync(wal, 0);
      assert.match(refusal(dataDir).message, /write-ahead log .* is empty/);
    });

    it('the write-ahead log cut in half after a crash', () => {
      crashAfter(dataDir, 30);
      fs.truncateSync(wal, Math.floor(fs.statSync(wal).size / 2));
      const err = refusal(dataDir);
      assertMissingData(err, file);
      assert.match(err.message, /holds the store as of epoch \d+, but epoch \d+ was committed/);
      assert.match(
        err.message,
        /SQLite folded what the write-ahead log still held/,
        'says what its close did to the files',
      );
      assert.equal(refusal(dataDir).reason, 'missing-data', 'and again on the next start');
    });

    // Issue 30, 6c: the marker follows the commits about once a second; the commit counter covers that second.
    for (const groupCommit of [false, true]) {
      it(`the write-ahead log cut in half at once after the last commit, the marker a second behind${groupCommit ? ' (group commit)' : ''}`, () => {
        // Group commit makes the rows one commit: enough of them that half the log falls inside it, not inside open's.
        crashAfter(dataDir, groupCommit ? 200 : 30, groupCommit, { markIntervalMs: 1000, killAtOnce: true });
        const marked = readMarker(file)!.epoch;
        const counted = readCommitCounter(file)!;
        assert.ok(counted > marked, `the counter (${counted}) is ahead of the marker (${marked})`);
        fs.truncateSync(wal, Math.floor(fs.statSync(wal).size / 2));
        const err = refusal(dataDir);
        assertMissingData(err, file);
        assert.match(
          err.message,
          new RegExp(
            `holds the store as of epoch \\d+, but epoch ${counted} was committed \\(its commit counter coordinator\\.db\\.commits says so\\)`,
          ),
        );
        assert.equal(refusal(dataDir).reason, 'missing-data', 'and again on the next start');
      });
    }

    it('the write-ahead log without only its last commit, at once after it', () => {
      crashAfter(dataDir, 30, false, { markIntervalMs: 1000, killAtOnce: true });
      const size = fs.statSync(wal).size;
      const pageSize = fs.readFileSync(wal).readUInt32BE(8);
      // The last frame is the last commit's commit frame: without it, that commit is gone and every one before stays.
      fs.truncateSync(wal, size - (pageSize + 24));
      const err = refusal(dataDir);
      assertMissingData(err, file);
      assert.match(err.message, /commit counter/);
    });

    it('the write-ahead log overwritten with garbage after a crash', () => {
      crashAfter(dataDir, 30);
      const size = fs.statSync(wal).size;
      const garbage = Buffer.alloc(size);
      for (let i = 0; i < size; i++) garbage[i] = (i * 7919 + 13) & 0xff;
      fs.writeFileSync(wal, garbage);
      const err = refusal(dataDir);
      assertMissingData(err, wal);
      assert.match(err.message, /is damaged \(it does not start with a write-ahead log header\)/);
      assert.ok(fs.readFileSync(wal).equals(garbage), 'the log is left for diagnosis');
    });

    it('an empty (0-byte) store file where a store was', () => {
      store = open(dataDir);
      insert(store, 3);
      store.close();
      store = undefined;
      fs.truncateSync(file, 0);
      const err = refusal(dataDir);
      assertMissingData(err, file);
      assert.match(err.message, /is empty \(0 bytes\)/);
      assert.equal(fs.statSync(file).size, 0);
    });

    it('the store file deleted where a store was', () => {
      store = open(dataDir);
      store.close();
      store = undefined;
      fs.rmSync(file);
      const err = refusal(dataDir);
      assertMissingData(err, file);
      assert.match(err.message, /is gone/);
      assert.ok(!fs.existsSync(file), 'no new store was created in its place');
    });

    it('another SQLite file in its place', () => {
      store = open(dataDir);
      store.close();
      store = undefined;
      fs.rmSync(file);
      const other = new DatabaseSync(file);
      other.exec(`${ROWS[0].statements[0]}; PRAGMA user_version = 1`);
      other.close();
      assert.match(refusal(dataDir).message, /not the store that was here/);
    });

    it('an older copy of the file after a clean close; deleting the marker accepts it, as the message says', () => {
      store = open(dataDir);
      insert(store, 2);
      store.close();
      store = undefined;
      const backup = fs.readFileSync(file);
      crashAfter(dataDir, 5);
      store = open(dataDir);
      store.close();
      store = undefined;
      fs.writeFileSync(file, backup);
      const err = refusal(dataDir);
      assertMissingData(err, file, markerPath(file));
      assert.match(err.message, /older than the store that was closed here/);
      fs.rmSync(markerPath(file));
      store = open(dataDir);
      assert.equal(rowCount(store), 2);
    });
  });

  describe('a read-only data folder or store file: not damaged', () => {
    /** As root, permissions do not stop this process: the attempt runs in a child as `nobody`. */
    function attempt(dir: string): { reason?: string; message?: string; opened?: boolean } {
      const script = `
        const { SqliteStore } = require(${JSON.stringify(ENGINE_MODULE)});
        try { SqliteStore.open(process.argv[1], { schema: ${JSON.stringify(ROWS)} }).close(); console.log(JSON.stringify({ opened: true })); }
        catch (e) { console.log(JSON.stringify({ reason: e.reason, message: e.message })); }
      `;
      const asRoot = process.getuid?.() === 0;
      const child = spawnSync(process.execPath, ['-e', script, dir], {
        encoding: 'utf8',
        ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
      });
      assert.equal(child.status, 0, child.stderr);
      return JSON.parse(child.stdout) as { reason?: string; message?: string };
    }

    function healthyStore(): void {
      store = open(dataDir);
      insert(store, 3);
      store.close();
      store = undefined;
    }

    it('a folder this user may not write', function () {
      if (process.platform === 'win32') this.skip();
      healthyStore();
      fs.chmodSync(dataDir, 0o555);
      try {
        const result = attempt(dataDir);
        assert.equal(result.reason, 'read-only', result.message);
        assert.match(
          result.message!,
          new RegExp(
            `data folder ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is read-only or not writable by this user`,
          ),
        );
        assert.match(result.message!, /The store is not damaged and was not changed/);
        assert.doesNotMatch(result.message!, /aside|damaged \(/);
      } finally {
        fs.chmodSync(dataDir, 0o700);
      }
      store = open(dataDir);
      assert.equal(rowCount(store), 3, 'the store is intact');
    });

    it('a store file this user may not write, in a folder it may', function () {
      if (process.platform === 'win32') this.skip();
      healthyStore();
      fs.chmodSync(dataDir, 0o777);
      fs.chmodSync(file, 0o644);
      try {
        const result = attempt(dataDir);
        assert.equal(result.reason, 'read-only', result.message);
        assert.ok(result.message!.includes(`${file} in the data folder`), result.message);
        assert.match(result.message!, /not damaged/);
      } finally {
        fs.chmodSync(dataDir, 0o700);
      }
    });
  });

  describe('diagnosing what went wrong while opening', () => {
    const writable = (): boolean => true;

    it('a full disk (ENOSPC from the file system, SQLITE_FULL from SQLite): the folder, the free space, no stack', () => {
      const enospc = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28 });
      const sqliteFull = Object.assign(new Error('database or disk is full'), {
        code: 'ERR_SQLITE_ERROR',
        errcode: 13,
        errstr: 'database or disk is full',
      });
      for (const err of [enospc, sqliteFull]) {
        const d = diagnoseOpenFailure(err, dataDir, file, 'created', writable);
        assert.ok(d instanceof StoreOpenError);
        assert.equal(d.reason, 'disk-full');
        assert.ok(d.message.includes(`data folder ${dataDir} is full (`), d.message);
        assert.match(d.message, / free\): the store .* could not be created/);
        assert.match(d.message, /Free some disk space/);
        assert.doesNotMatch(d.message, /aside/);
      }
    });

    it('"disk I/O error" or "unable to open" where the folder is not writable: read-only, not damaged', () => {
      const ioerr = Object.assign(new Error('disk I/O error'), {
        code: 'ERR_SQLITE_ERROR',
        errcode: 10 | (13 << 8),
        errstr: 'disk I/O error',
      });
      const cantopen = Object.assign(new Error('unable to open database file'), {
        code: 'ERR_SQLITE_ERROR',
        errcode: 14,
      });
      const readonly = Object.assign(new Error('attempt to write a readonly database'), {
        code: 'ERR_SQLITE_ERROR',
        errcode: 8,
      });
      const eacces = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' });
      for (const err of [ioerr, cantopen, readonly, eacces]) {
        const d = diagnoseOpenFailure(err, dataDir, file, 'opened', (f) => f !== dataDir);
        assert.equal(d?.reason, 'read-only', String(err));
        assert.match(d.message, /is read-only or not writable by this user/);
        assert.match(d.message, /not damaged/);
      }
      const erofs = Object.assign(new Error('EROFS: read-only file system'), { code: 'EROFS' });
      assert.equal(diagnoseOpenFailure(erofs, dataDir, file, 'opened', writable)?.reason, 'read-only');
    });

    it('a real I/O error where everything is writable stays an I/O error (the caller reports it)', () => {
      const ioerr = Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 10 });
      assert.equal(diagnoseOpenFailure(ioerr, dataDir, file, 'opened', writable), undefined);
      assert.equal(
        diagnoseOpenFailure(new Error('file is not a database'), dataDir, file, 'opened', writable),
        undefined,
      );
    });

    it('a first start on a really full disk (a tiny tmpfs; needs root and mount, else skipped)', function () {
      const mountPoint = path.join(dataDir, 'tiny');
      fs.mkdirSync(mountPoint);
      if (process.platform !== 'linux' || process.getuid?.() !== 0) this.skip(); // mounting a tmpfs needs root on Linux
      const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mountPoint], { encoding: 'utf8' });
      if (mounted.status !== 0) this.skip(); // no CAP_SYS_ADMIN here: the injected errors above cover the diagnosis
      try {
        fs.writeFileSync(path.join(mountPoint, 'filler'), Buffer.alloc(40_000));
        const folder = path.join(mountPoint, 'data');
        try {
          SqliteStore.open(folder, { schema: ROWS, markIntervalMs: 0 }).close();
          assert.fail('the store opened on a full disk');
        } catch (err) {
          assert.ok(err instanceof StoreOpenError, String(err));
          assert.equal(err.reason, 'disk-full', err.message);
          assert.ok(err.message.includes(`data folder ${folder} is full (`), err.message);
          assert.match(err.message, /could not be created \(database or disk is full\)\. Nothing was stored yet\./);
        }
        fs.rmSync(path.join(mountPoint, 'filler'));
        store = SqliteStore.open(folder, { schema: ROWS, markIntervalMs: 0 });
        insert(store, 1);
        store.close();
        store = undefined;
      } finally {
        spawnSync('umount', [mountPoint]);
      }
    });

    it('SQLITE_FULL while migrating reaches the user as "disk full", and the store stays at its version', () => {
      store = open(dataDir);
      insert(store, 1);
      store.close();
      store = undefined;
      const tooBig: SchemaStep = {
        version: 2,
        area: 'test',
        description: 'a step that fills the disk',
        statements: [
          'PRAGMA max_page_count = 8',
          'CREATE TABLE big (b BLOB)',
          'INSERT INTO big VALUES (zeroblob(200000))',
        ],
      };
      try {
        SqliteStore.open(dataDir, { schema: [...ROWS, tooBig], markIntervalMs: 0 }).close();
        assert.fail('the store opened');
      } catch (err) {
        assert.ok(err instanceof StoreOpenError, String(err));
        assert.equal(err.reason, 'disk-full', err.message);
        assert.match(err.message, /could not be migrated to schema version 2 \(database or disk is full\)/);
      }
      store = open(dataDir);
      assert.equal(rowCount(store), 1);
    });
  });
});
