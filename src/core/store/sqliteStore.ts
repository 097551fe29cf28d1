import * as fs from 'node:fs';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Emitter, type Event } from '../events';
import { schemaVersions, type SchemaStep } from './schema';
import {
  checkFilesAgainstMarker,
  CommitCounter,
  commitsPath,
  diagnoseOpenFailure,
  missingDataError,
  notWritable,
  readCommitCounter,
  readMarker,
  readOnlyError,
  syncWal,
  writeMarker,
  type StoreMarker,
  makePrivateDir,
  makePrivateFile,
  PRIVATE_FILE_MODE,
} from './storeState';
import { StoreFailedError, StoreOpenError, type CommitParticipant, type Store, type WriteStage } from './store';

export const STORE_FILE_NAME = 'coordinator.db';
const DEFAULT_LOCK_WAIT_MS = 5000;
/** Under load, commits are at least this far apart (every write waiting for durability shares them). */
const GROUP_COMMIT_WINDOW_MS = 1;
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
/** How often, at most, the marker's epoch follows the commits (one small commit, a log sync and a rename). */
const DEFAULT_MARK_INTERVAL_MS = 1000;
/**
 * The engine's own table (no area's): always empty, its AUTOINCREMENT counter in sqlite_sequence is the epoch
 * that the marker beside the store (storeState.ts) is compared with.
 */
const EPOCH_TABLE = 'sw4rm_store_epoch';

export interface SqliteStoreOptions {
  /** Every area's schema steps, in the order the composition root fixed (see schema.ts). */
  readonly schema: readonly SchemaStep[];
  /** How long to wait for the file's lock while a previous owner is still closing (a window reload). */
  readonly lockWaitMs?: number;
  /** Share one transaction among the writes of one event-loop turn (the running coordinator). */
  readonly groupCommit?: boolean;
  /** How often, at most, the marker records a newer epoch while commits happen (default 1 s; tests use 0). */
  readonly markIntervalMs?: number;
}

/**
 * The embedded storage engine: one SQLite file (node:sqlite, WAL mode) in the data folder. Opening refuses a
 * corrupt file or one written by a newer schema; it never resets anything silently. It knows no area: the
 * composition root hands `database` to each area's repository and the areas' schema steps to `open`.
 */
export class SqliteStore implements Store {
  private depth = 0;
  private readonly participants: CommitParticipant[] = [];
  private readonly stages: WriteStage[] = [];
  /** Group commit: an open transaction shared by every write of this turn of the event loop. */
  private batchOpen = false;
  private lastCommitAt = 0;
  private afterCommitQueue: Array<() => void> = [];
  private durableWaiters: Array<{ resolve: () => void; reject: (err: Error) => void }> = [];
  /** Set when a group commit failed; from then on the store refuses every transaction. */
  private failure: StoreFailedError | undefined;
  private readonly failed = new Emitter<StoreFailedError>();
  readonly onDidFail: Event<StoreFailedError> = this.failed.event;
  /** The next marker update, pending while commits since the last one are not yet covered by it. */
  private markTimer: NodeJS.Timeout | undefined;
  /** The epoch the marker last recorded. */
  private markedEpoch: number;
  /**
   * Every commit advances the epoch inside its transaction: one UPDATE of the epoch's row in sqlite_sequence, the
   * page the event log's AUTOINCREMENT writes in nearly every commit anyway. (An INSERT and a DELETE on the epoch
   * table, as at open, also wrote that table's page: one more page in the log per commit, and about 7 µs.)
   */
  private readonly epochAdvance;
  /** A unit of a group commit begins and ends with these: prepared once, not parsed twice per unit. */
  private readonly unitBegin;
  private readonly unitRelease;
  private readonly unitRollback;
  /** Set when writing the commit counter failed: said once, the store goes on (the marker still follows). */
  private counterFailed = false;

  private constructor(
    private readonly db: DatabaseSync,
    readonly location: string,
    readonly schemaVersion: number,
    private readonly groupCommit: boolean,
    private epoch: number,
    private readonly markIntervalMs: number,
    private readonly counter: CommitCounter,
  ) {
    this.markedEpoch = epoch;
    this.epochAdvance = db.prepare(`UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = '${EPOCH_TABLE}'`);
    this.unitBegin = db.prepare('SAVEPOINT unit');
    this.unitRelease = db.prepare('RELEASE unit');
    this.unitRollback = db.prepare('ROLLBACK TO unit');
  }

  /** The open connection, for the areas' repositories (they prepare their statements on it). */
  get database(): DatabaseSync {
    return this.db;
  }

  /** Adds work that rides along with commits when it is due (see CommitParticipant). */
  addCommitParticipant(participant: CommitParticipant): void {
    this.participants.push(participant);
  }

  /** Adds a repository's held-back writes, flushed before every commit (see WriteStage). */
  addWriteStage(stage: WriteStage): void {
    this.stages.push(stage);
  }

  /** Marks every stage (a savepoint or unit begins); undefined when there is none. */
  private markStages(): number[] | undefined {
    const stages = this.stages;
    if (stages.length === 0) return undefined;
    const marks = new Array<number>(stages.length);
    for (let i = 0; i < stages.length; i++) marks[i] = stages[i].mark();
    return marks;
  }

  private rewindStages(marks: number[] | undefined): void {
    if (marks === undefined) return;
    for (let i = 0; i < marks.length; i++) this.stages[i].rewind(marks[i]);
  }

  private flushStages(): void {
    for (const stage of this.stages) stage.flush();
  }

  private endStages(): void {
    for (const stage of this.stages) stage.ended();
  }

  /**
   * Opens (creating if needed) the store file in `dataDir`, applying pending migrations. The file is locked
   * for as long as the store is open, so a second coordinator on the same folder is refused before it reads
   * or writes anything; `lockWaitMs` lets a previous owner that is still closing (a window reload) finish.
   */
  static open(dataDir: string, options: SqliteStoreOptions): SqliteStore {
    const versions = schemaVersions(options.schema);
    const location = path.join(dataDir, STORE_FILE_NAME);
    const latest = versions.length ? versions[versions.length - 1].version : 0;
    const fresh = !fs.existsSync(location);
    const failure = (err: unknown, doing: string): StoreOpenError | undefined =>
      diagnoseOpenFailure(err, dataDir, location, fresh ? 'created' : doing);
    const blocked = notWritable(dataDir, location);
    if (blocked) throw readOnlyError(dataDir, location, blocked);
    const walNote = SqliteStore.checkMarker(location);
    let db: DatabaseSync;
    try {
      makePrivateDir(dataDir);
      // SQLite gives its -wal and -shm the mode of the database file: create that one 0600 first.
      fs.closeSync(fs.openSync(location, 'a', PRIVATE_FILE_MODE));
      makePrivateFile(location);
      db = new DatabaseSync(location);
    } catch (err) {
      throw (
        failure(err, 'opened') ??
        new StoreOpenError(
          location,
          'unreadable',
          `Cannot open the SW4RM store ${location}: ${(err as Error).message}. Check that the data folder ${dataDir} is a writable folder.`,
        )
      );
    }
    try {
      SqliteStore.lock(db, location, options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS);
      const version = SqliteStore.checkIntegrity(db, dataDir, location);
      if (version > latest) {
        throw new StoreOpenError(
          location,
          'newer-schema',
          `The SW4RM store ${location} has schema version ${version}, but this coordinator knows versions up to ${latest}. ` +
            'It was written by a newer version: update the extension, or point the coordinator at another data folder. The file was not changed.',
        );
      }
      // After the lock: a previous owner that was closing has finished, so the marker is its last word.
      const marker = readMarker(location);
      if (marker) SqliteStore.checkEpoch(db, location, marker, readCommitCounter(location), walNote);
      db.exec('PRAGMA journal_mode = WAL');
      for (const file of [location, `${location}-wal`, `${location}-shm`]) makePrivateFile(file);
      // NORMAL in WAL mode: a commit survives a crash of the process (kill -9); only a power loss may take back
      // the last commits. Checkpoints (which sync, and stall the event loop for their duration) run every ~4 MB of
      // WAL: about 8 ms each on a development machine, against 26 ms at 16 MB, for the same total work.
      db.exec('PRAGMA synchronous = NORMAL');
      db.exec('PRAGMA wal_autocheckpoint = 1000');
      db.exec('PRAGMA cache_size = -32000');
      db.exec('PRAGMA temp_store = MEMORY');
      db.exec('PRAGMA foreign_keys = ON');
      for (const pending of versions.filter((v) => v.version > version)) {
        db.exec('BEGIN IMMEDIATE');
        let current: SchemaStep | undefined;
        try {
          for (current of pending.steps) {
            for (const statement of current.statements) db.exec(statement);
          }
          db.exec(`PRAGMA user_version = ${pending.version}`);
          db.exec('COMMIT');
        } catch (err) {
          try {
            db.exec('ROLLBACK');
          } catch {
            /* SQLite already rolled it back (a full disk does) */
          }
          const step = current ? ` (${current.description}) of the ${current.area} area` : '';
          throw (
            failure(err, `migrated to schema version ${pending.version}`) ??
            new StoreOpenError(
              location,
              'unreadable',
              `Migrating the SW4RM store ${location} to schema version ${pending.version}${step} failed: ${(err as Error).message}. The file was left at version ${version}.`,
            )
          );
        }
      }
      const schemaVersion = Math.max(version, latest);
      // Commit a new epoch before saying "open": from here until a clean close, the log holds at least this
      // commit, so an unclean stop always leaves a non-empty log behind.
      db.exec('BEGIN IMMEDIATE');
      let epoch: number;
      try {
        db.exec(`CREATE TABLE IF NOT EXISTS ${EPOCH_TABLE} (epoch INTEGER PRIMARY KEY AUTOINCREMENT)`);
        epoch = SqliteStore.nextEpoch(db);
        db.exec('COMMIT');
      } catch (err) {
        try {
          db.exec('ROLLBACK');
        } catch {
          /* SQLite already rolled it back */
        }
        throw err;
      }
      syncWal(location);
      for (const file of [location, `${location}-wal`, `${location}-shm`]) makePrivateFile(file);
      const counter = CommitCounter.open(location);
      try {
        counter.write(epoch);
        writeMarker(location, { state: 'open', schemaVersion, epoch });
      } catch (err) {
        counter.close();
        throw err;
      }
      return new SqliteStore(
        db,
        location,
        schemaVersion,
        options.groupCommit ?? false,
        epoch,
        options.markIntervalMs ?? DEFAULT_MARK_INTERVAL_MS,
        counter,
      );
    } catch (err) {
      db.close();
      if (err instanceof StoreOpenError) throw err;
      throw (
        failure(err, 'opened') ??
        new StoreOpenError(
          location,
          'unreadable',
          `Cannot open the SW4RM store ${location}: ${(err as Error).message}. The coordinator did not start on it.`,
        )
      );
    }
  }

  /**
   * Before SQLite touches the files (it would recreate a missing file or drop a log it cannot use): refuses when
   * the marker says a store was here and the files show that committed data is gone. Answers what looks wrong
   * with the write-ahead log but may not have lost anything (a tool that opened the store after a crash folds
   * the log into the file and removes it): the epoch decides that once the file is open.
   */
  private static checkMarker(location: string): string | undefined {
    const marker = readMarker(location);
    if (!marker) return undefined; // a store from before markers, or none yet: nothing is known
    const check = checkFilesAgainstMarker(location, marker);
    if (!check) return undefined;
    // A previous owner closing right now writes "clean" before it removes its log: read the marker again.
    const again = readMarker(location);
    const recheck = again && checkFilesAgainstMarker(location, again);
    if (!recheck) return undefined;
    if (recheck.certain) throw missingDataError(location, recheck.problem);
    return recheck.problem;
  }

  /**
   * Refuses a database whose epoch is behind the marker's or the commit counter's: commits made before either was
   * written are gone. The counter is read only beside a marker (deleting the marker accepts the file, as the
   * refusal says).
   */
  private static checkEpoch(
    db: DatabaseSync,
    location: string,
    marker: StoreMarker,
    counted: number | undefined,
    walNote: string | undefined,
  ): void {
    const table = db
      .prepare(`SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = '${EPOCH_TABLE}'`)
      .get();
    const epoch = table ? SqliteStore.currentEpoch(db) : 0;
    const required = Math.max(marker.epoch, counted ?? 0);
    if (table && epoch >= required) return;
    // Closing this connection folds a log it could read into the file (SQLite does that on every close).
    const folded = (() => {
      try {
        return fs.statSync(`${location}-wal`).size > 0;
      } catch {
        return false;
      }
    })();
    if (walNote)
      throw missingDataError(
        location,
        `${walNote}, and the file alone lacks commits the store had made (epoch ${epoch} of ${required})`,
        folded,
      );
    if (!table)
      throw missingDataError(
        location,
        `the file is not the store that was here (it has no record of the ${required} epochs the store had committed)`,
        folded,
      );
    const when =
      required > marker.epoch
        ? `(its commit counter ${path.basename(commitsPath(location))} says so)`
        : `(at or before ${marker.writtenAt})`;
    throw missingDataError(
      location,
      `it holds the store as of epoch ${epoch}, but epoch ${required} was committed ${when}; ` +
        `${marker.state === 'open' ? 'the previous run stopped without closing, and the end of its write-ahead log is gone or damaged' : 'the file is older than the store that was closed here'}`,
      folded,
    );
  }

  private static currentEpoch(db: DatabaseSync): number {
    const row = db.prepare(`SELECT seq FROM sqlite_sequence WHERE name = '${EPOCH_TABLE}'`).get() as
      { seq: number } | undefined;
    return row ? Number(row.seq) : 0;
  }

  /** Inside an open transaction: advances the epoch (the table stays empty; sqlite_sequence keeps the counter). */
  private static nextEpoch(db: DatabaseSync): number {
    const { lastInsertRowid } = db.prepare(`INSERT INTO ${EPOCH_TABLE} DEFAULT VALUES`).run();
    db.exec(`DELETE FROM ${EPOCH_TABLE}`);
    return Number(lastInsertRowid);
  }

  /** Takes the file's lock for the lifetime of the connection (SQLite EXCLUSIVE locking mode). */
  private static lock(db: DatabaseSync, location: string, waitMs: number): void {
    db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(waitMs))}`);
    db.exec('PRAGMA locking_mode = EXCLUSIVE');
    try {
      db.exec('BEGIN EXCLUSIVE');
      db.exec('COMMIT');
    } catch (err) {
      const code = (err as { errcode?: number }).errcode;
      if (code === SQLITE_BUSY || code === SQLITE_LOCKED) {
        throw new StoreOpenError(
          location,
          'locked',
          `The SW4RM store ${location} is in use by another running coordinator (another editor window on this folder, or sw4rm-coordinator). ` +
            'Stop that one, or give this one another data folder (setting sw4rm.dataDir or --data-dir).',
        );
      }
      // Anything else (e.g. "file is not a database") is diagnosed by the integrity check that follows.
    }
  }

  private static checkIntegrity(db: DatabaseSync, dataDir: string, location: string): number {
    const corrupt = (detail: string) =>
      new StoreOpenError(
        location,
        'corrupt',
        `The SW4RM store ${location} is damaged (${detail}). The coordinator will not start on it and has not changed it. ` +
          `Move the file aside (for example rename it to ${path.basename(location)}.corrupt, keeping it for diagnosis) and start again to create a new store, ` +
          'or restore it from a backup.',
      );
    try {
      const check = db.prepare('PRAGMA quick_check').all() as Array<Record<string, unknown>>;
      const verdict = check.map((row) => String(Object.values(row)[0])).join('; ');
      if (verdict !== 'ok') throw corrupt(verdict);
      const row = db.prepare('PRAGMA user_version').get() as { user_version: number };
      return row.user_version;
    } catch (err) {
      if (err instanceof StoreOpenError) throw err;
      // A folder it may not write, or a full disk, reads as "disk I/O error": never call a healthy store damaged.
      throw diagnoseOpenFailure(err, dataDir, location, 'opened') ?? corrupt((err as Error).message);
    }
  }

  /**
   * Without group commit, one SQLite transaction per call. With group commit (the running coordinator), every
   * call of one event-loop turn joins one open transaction as a savepoint, committed once at the end of the
   * turn; callers learn of durability through `whenDurable` / `afterCommit`.
   */
  transaction<T>(fn: () => T): T {
    if (this.failure) throw this.failure;
    if (this.depth > 0) return fn();
    if (this.groupCommit) {
      this.openBatch();
      this.unitBegin.run();
      const marks = this.markStages();
      this.depth++;
      try {
        const result = fn();
        this.unitRelease.run();
        return result;
      } catch (err) {
        this.unitRollback.run();
        this.unitRelease.run();
        this.rewindStages(marks);
        throw err;
      } finally {
        this.depth--;
      }
    }
    this.db.exec('BEGIN IMMEDIATE');
    const marks = this.markStages();
    this.depth++;
    try {
      const result = fn();
      this.flushStages();
      const maintained = this.maintain();
      const epoch = this.advanceEpoch();
      this.db.exec('COMMIT');
      this.endStages();
      this.depth--;
      this.committed(epoch);
      maintained();
      this.runAfterCommit();
      return result;
    } catch (err) {
      this.db.exec('ROLLBACK');
      this.rewindStages(marks);
      this.endStages();
      this.depth--;
      throw err;
    }
  }

  savepoint<T>(fn: () => T): T {
    if (this.depth === 0) return this.transaction(fn);
    if (this.failure) throw this.failure;
    const name = `nested${this.depth}`;
    this.db.exec(`SAVEPOINT ${name}`);
    const marks = this.markStages();
    this.depth++;
    try {
      const result = fn();
      this.db.exec(`RELEASE ${name}`);
      return result;
    } catch (err) {
      this.db.exec(`ROLLBACK TO ${name}`);
      this.db.exec(`RELEASE ${name}`);
      this.rewindStages(marks);
      throw err;
    } finally {
      this.depth--;
    }
  }

  afterCommit(fn: () => void): void {
    if (this.failure) return; // what it would reveal may have been rolled back
    if (this.batchOpen || this.depth > 0) this.afterCommitQueue.push(fn);
    else fn();
  }

  whenDurable(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (!this.batchOpen) return Promise.resolve();
    return new Promise((resolve, reject) => this.durableWaiters.push({ resolve, reject }));
  }

  /**
   * Opens the shared transaction. It commits at the end of this turn of the event loop, or, when the last
   * commit was less than GROUP_COMMIT_WINDOW_MS ago (the coordinator is busy), once that window has passed, so
   * that a burst shares one commit instead of paying one each.
   */
  private openBatch(): void {
    if (this.batchOpen) return;
    this.db.exec('BEGIN IMMEDIATE');
    this.batchOpen = true;
    const sinceLast = performance.now() - this.lastCommitAt;
    if (sinceLast >= GROUP_COMMIT_WINDOW_MS) setImmediate(() => this.commitBatch());
    else setTimeout(() => this.commitBatch(), GROUP_COMMIT_WINDOW_MS - sinceLast);
  }

  /** Commits the open batch; a failed commit rolls it back and fails everyone waiting on it. */
  private commitBatch(): void {
    if (!this.batchOpen) return;
    this.batchOpen = false;
    const waiters = this.durableWaiters;
    this.durableWaiters = [];
    let maintained: () => void;
    let epoch: number;
    try {
      this.flushStages();
      maintained = this.maintain();
      epoch = this.advanceEpoch();
      this.db.exec('COMMIT');
      this.endStages();
      this.lastCommitAt = performance.now();
    } catch (err) {
      try {
        this.db.exec('ROLLBACK');
      } catch {
        /* the transaction is already gone */
      }
      this.rewindStages(this.stages.map(() => 0));
      this.endStages();
      this.afterCommitQueue = [];
      // The units of this batch already changed their callers' memory (queues, outcomes, timers) as if their
      // writes were durable. Going on would deliver messages whose producers were told they failed, so the
      // store takes nothing more and its owner restarts from what is stored, as after a crash.
      this.failure = new StoreFailedError(this.location, err as Error);
      for (const waiter of waiters) waiter.reject(this.failure);
      this.failed.fire(this.failure);
      return;
    }
    this.committed(epoch);
    maintained();
    this.runAfterCommit();
    for (const waiter of waiters) waiter.resolve();
  }

  /**
   * Inside the transaction, just before its COMMIT: the epoch this commit makes. The row is there from open on
   * (nextEpoch's INSERT made it), and only this connection writes it (the file is locked EXCLUSIVE), so the
   * epoch in hand plus one is the row's new value; were the row ever missing, the INSERT makes it, as at open.
   */
  private advanceEpoch(): number {
    if (Number(this.epochAdvance.run().changes) === 1) return this.epoch + 1;
    return SqliteStore.nextEpoch(this.db);
  }

  /**
   * Right after a COMMIT returned, before anything it did is revealed or called durable: the counter records its
   * epoch, and the marker is due to follow.
   */
  private committed(epoch: number): void {
    this.epoch = epoch;
    try {
      this.counter.write(epoch);
    } catch (err) {
      if (!this.counterFailed)
        console.error("[sw4rm] writing the store's commit counter failed; the marker still follows the commits:", err);
      this.counterFailed = true;
    }
    this.scheduleMark();
  }

  /**
   * Runs the commit participants that are due (all that have work left when `atClose`), inside the transaction
   * just before COMMIT. Answers what to do after the commit succeeded.
   */
  private maintain(atClose = false): () => void {
    let after: Array<() => void> | undefined;
    for (const participant of this.participants) {
      if (!(atClose ? participant.pendingAtClose() : participant.due())) continue;
      // Optional work: if it fails, only it is undone, never the commit it rides along with; it is due again
      // with a later commit.
      this.db.exec('SAVEPOINT maintenance');
      try {
        (after ??= []).push(participant.run());
        this.db.exec('RELEASE maintenance');
      } catch (err) {
        this.db.exec('ROLLBACK TO maintenance');
        this.db.exec('RELEASE maintenance');
        console.error(`[sw4rm] ${participant.name} failed; it is retried with a later commit:`, err);
      }
    }
    if (!after) return noop;
    const done = after;
    return () => {
      for (const fn of done) fn();
    };
  }

  private runAfterCommit(): void {
    const queue = this.afterCommitQueue;
    this.afterCommitQueue = [];
    for (const fn of queue) {
      try {
        fn();
      } catch (err) {
        console.error('[sw4rm] work after a commit failed:', err);
      }
    }
  }

  /** After a commit: the marker follows within markIntervalMs (a healthy run stays at most that far behind). */
  private scheduleMark(): void {
    if (this.markTimer) return;
    this.markTimer = setTimeout(() => this.mark(), this.markIntervalMs);
    this.markTimer.unref?.();
  }

  /**
   * Syncs the log, and only then records the latest committed epoch in the marker: after any crash or power loss,
   * the marker's epoch is at most the database's.
   */
  private mark(): void {
    this.markTimer = undefined;
    if (!this.db.isOpen || this.failure) return;
    const epoch = this.epoch;
    if (epoch === this.markedEpoch) return;
    try {
      syncWal(this.location);
      writeMarker(this.location, { state: 'open', schemaVersion: this.schemaVersion, epoch });
      this.markedEpoch = epoch;
    } catch (err) {
      // The marker stays at an older epoch (never ahead of the database); it is tried again with a later commit.
      console.error('[sw4rm] updating the store marker failed; it is retried with a later commit:', err);
    }
  }

  close(): void {
    if (!this.db.isOpen) return;
    this.commitBatch();
    // Finish what participants have left (the router's index), so that the next start has nothing to read back.
    if (this.participants.some((p) => p.pendingAtClose()) && !this.failure) {
      try {
        this.db.exec('BEGIN IMMEDIATE');
        const maintained = this.maintain(true);
        const epoch = this.advanceEpoch();
        this.db.exec('COMMIT');
        this.committed(epoch);
        maintained();
      } catch {
        try {
          this.db.exec('ROLLBACK');
        } catch {
          /* nothing open */
        }
      }
    }
    if (this.markTimer) clearTimeout(this.markTimer);
    this.markTimer = undefined;
    // Everything into the database file and an empty log; only then "clean". If this fails the marker keeps
    // saying "open", which the next start handles as after a crash (the log is still there).
    try {
      const row = this.db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as { busy: number } | undefined;
      if (row && Number(row.busy) === 0) {
        writeMarker(this.location, { state: 'clean', schemaVersion: this.schemaVersion, epoch: this.epoch });
      }
    } catch (err) {
      console.error('[sw4rm] closing the store cleanly failed; the next start recovers from its write-ahead log:', err);
    }
    this.db.close();
    this.counter.close();
  }
}

function noop(): void {}
