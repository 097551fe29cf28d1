import * as fs from 'node:fs';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Emitter, type Event } from '../events';
import { schemaVersions, type SchemaStep } from './schema';
import { StoreFailedError, StoreOpenError, type CommitParticipant, type Store } from './store';

export const STORE_FILE_NAME = 'coordinator.db';
const DEFAULT_LOCK_WAIT_MS = 5000;
/** Under load, commits are at least this far apart (every write waiting for durability shares them). */
const GROUP_COMMIT_WINDOW_MS = 1;
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;

export interface SqliteStoreOptions {
  /** Every area's schema steps, in the order the composition root fixed (see schema.ts). */
  readonly schema: readonly SchemaStep[];
  /** How long to wait for the file's lock while a previous owner is still closing (a window reload). */
  readonly lockWaitMs?: number;
  /** Share one transaction among the writes of one event-loop turn (the running coordinator). */
  readonly groupCommit?: boolean;
}

/**
 * The embedded storage engine: one SQLite file (node:sqlite, WAL mode) in the data folder. Opening refuses a
 * corrupt file or one written by a newer schema; it never resets anything silently. It knows no area: the
 * composition root hands `database` to each area's repository and the areas' schema steps to `open`.
 */
export class SqliteStore implements Store {
  private depth = 0;
  private readonly participants: CommitParticipant[] = [];
  /** Group commit: an open transaction shared by every write of this turn of the event loop. */
  private batchOpen = false;
  private lastCommitAt = 0;
  private afterCommitQueue: Array<() => void> = [];
  private durableWaiters: Array<{ resolve: () => void; reject: (err: Error) => void }> = [];
  /** Set when a group commit failed; from then on the store refuses every transaction. */
  private failure: StoreFailedError | undefined;
  private readonly failed = new Emitter<StoreFailedError>();
  readonly onDidFail: Event<StoreFailedError> = this.failed.event;

  private constructor(
    private readonly db: DatabaseSync,
    readonly location: string,
    readonly schemaVersion: number,
    private readonly groupCommit: boolean,
  ) {}

  /** The open connection, for the areas' repositories (they prepare their statements on it). */
  get database(): DatabaseSync {
    return this.db;
  }

  /** Adds work that rides along with commits when it is due (see CommitParticipant). */
  addCommitParticipant(participant: CommitParticipant): void {
    this.participants.push(participant);
  }

  /**
   * Opens (creating if needed) the store file in `dataDir`, applying pending migrations. The file is locked
   * for as long as the store is open, so a second coordinator on the same folder is refused before it reads
   * or writes anything; `lockWaitMs` lets a previous owner that is still closing (a window reload) finish.
   */
  static open(dataDir: string, options: SqliteStoreOptions): SqliteStore {
    const versions = schemaVersions(options.schema);
    const location = path.join(dataDir, STORE_FILE_NAME);
    let db: DatabaseSync;
    try {
      fs.mkdirSync(dataDir, { recursive: true });
      db = new DatabaseSync(location);
    } catch (err) {
      throw new StoreOpenError(location, 'unreadable',
        `Cannot open the SW4RM store ${location}: ${(err as Error).message}. Check that the data folder ${dataDir} is a writable folder.`);
    }
    try {
      SqliteStore.lock(db, location, options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS);
      const version = SqliteStore.checkIntegrity(db, location);
      const latest = versions.length ? versions[versions.length - 1].version : 0;
      if (version > latest) {
        throw new StoreOpenError(location, 'newer-schema',
          `The SW4RM store ${location} has schema version ${version}, but this coordinator knows versions up to ${latest}. ` +
          'It was written by a newer version: update the extension, or point the coordinator at another data folder. The file was not changed.');
      }
      db.exec('PRAGMA journal_mode = WAL');
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
          db.exec('ROLLBACK');
          const step = current ? ` (${current.description}) of the ${current.area} area` : '';
          throw new StoreOpenError(location, 'unreadable',
            `Migrating the SW4RM store ${location} to schema version ${pending.version}${step} failed: ${(err as Error).message}. The file was left at version ${version}.`);
        }
      }
      return new SqliteStore(db, location, Math.max(version, latest), options.groupCommit ?? false);
    } catch (err) {
      db.close();
      throw err;
    }
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
        throw new StoreOpenError(location, 'locked',
          `The SW4RM store ${location} is in use by another running coordinator (another editor window on this folder, or sw4rm-coordinator). ` +
          'Stop that one, or give this one another data folder (setting sw4rm.dataDir or --data-dir).');
      }
      // Anything else (e.g. "file is not a database") is diagnosed by the integrity check that follows.
    }
  }

  private static checkIntegrity(db: DatabaseSync, location: string): number {
    const corrupt = (detail: string) => new StoreOpenError(location, 'corrupt',
      `The SW4RM store ${location} is damaged (${detail}). The coordinator will not start on it and has not changed it. ` +
      `Move the file aside (for example rename it to ${path.basename(location)}.corrupt, keeping it for diagnosis) and start again to create a new store, ` +
      'or restore it from a backup.');
    try {
      const check = db.prepare('PRAGMA quick_check').all() as Array<Record<string, unknown>>;
      const verdict = check.map((row) => String(Object.values(row)[0])).join('; ');
      if (verdict !== 'ok') throw corrupt(verdict);
      const row = db.prepare('PRAGMA user_version').get() as { user_version: number };
      return row.user_version;
    } catch (err) {
      if (err instanceof StoreOpenError) throw err;
      throw corrupt((err as Error).message);
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
      this.db.exec('SAVEPOINT unit');
      this.depth++;
      try {
        const result = fn();
        this.db.exec('RELEASE unit');
        return result;
      } catch (err) {
        this.db.exec('ROLLBACK TO unit');
        this.db.exec('RELEASE unit');
        throw err;
      } finally {
        this.depth--;
      }
    }
    this.db.exec('BEGIN IMMEDIATE');
    this.depth++;
    try {
      const result = fn();
      const maintained = this.maintain();
      this.db.exec('COMMIT');
      this.depth--;
      maintained();
      this.runAfterCommit();
      return result;
    } catch (err) {
      this.db.exec('ROLLBACK');
      this.depth--;
      throw err;
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
    try {
      maintained = this.maintain();
      this.db.exec('COMMIT');
      this.lastCommitAt = performance.now();
    } catch (err) {
      try { this.db.exec('ROLLBACK'); } catch { /* the transaction is already gone */ }
      this.afterCommitQueue = [];
      // The units of this batch already changed their callers' memory (queues, outcomes, timers) as if their
      // writes were durable. Going on would deliver messages whose producers were told they failed, so the
      // store takes nothing more and its owner restarts from what is stored, as after a crash.
      this.failure = new StoreFailedError(this.location, err as Error);
      for (const waiter of waiters) waiter.reject(this.failure);
      this.failed.fire(this.failure);
      return;
    }
    maintained();
    this.runAfterCommit();
    for (const waiter of waiters) waiter.resolve();
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
    return () => { for (const fn of done) fn(); };
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

  close(): void {
    if (!this.db.isOpen) return;
    this.commitBatch();
    // Finish what participants have left (the router's index), so that the next start has nothing to read back.
    if (this.participants.some((p) => p.pendingAtClose()) && !this.failure) {
      try {
        this.db.exec('BEGIN IMMEDIATE');
        const maintained = this.maintain(true);
        this.db.exec('COMMIT');
        maintained();
      } catch {
        try { this.db.exec('ROLLBACK'); } catch { /* nothing open */ }
      }
    }
    this.db.close();
  }
}

function noop(): void {}
