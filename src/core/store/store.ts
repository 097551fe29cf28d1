import type { Event } from '../events';

/** What an area needs of the store besides its own repository: transactions and durability. */
export interface Transactions {
  /** Runs `fn` in one transaction: all of its writes commit together or none do. */
  transaction<T>(fn: () => T): T;
  /**
   * Inside an open transaction, runs `fn` under its own savepoint: a throw undoes its writes only, and the enclosing
   * transaction goes on. Outside one it is `transaction`. (A `transaction` called inside another joins it instead:
   * its writes stay until the enclosing one rolls back.)
   */
  savepoint<T>(fn: () => T): T;
  /**
   * Runs `fn` once everything written so far is durable: at once when nothing is pending, else after the
   * pending commit. Work that must not be seen before it is durable (stream writes, answers) goes here.
   */
  afterCommit(fn: () => void): void;
  /** Resolves when everything written so far is committed; rejects if that commit failed. */
  whenDurable(): Promise<void>;
}

/**
 * The storage engine: one file, transactions, durability, failure. It knows no area: each area brings its own
 * repository and schema steps (see ARCHITECTURE.md, "to add an area").
 */
export interface Store extends Transactions {
  /** Where the store lives, for messages to the user. */
  readonly location: string;
  readonly schemaVersion: number;
  /**
   * Fires once when a shared (group) commit fails. The store then refuses every further transaction: the
   * callers' memory may hold effects of the rolled-back writes, so the owner must stop and start afresh
   * from the store, exactly as after a crash.
   */
  readonly onDidFail: Event<StoreFailedError>;
  close(): void;
}

/**
 * Optional work that rides along with a commit when it is due (the router's bulk message-id index fill). It
 * runs inside the transaction just before COMMIT, under its own savepoint: if it fails, only it is undone.
 */
export interface CommitParticipant {
  /** For the console message when it fails. */
  readonly name: string;
  /** Whether it has work due with this commit (called before every commit: keep it cheap). */
  due(): boolean;
  /** Whether it has work left that should be done before the store closes. */
  pendingAtClose(): boolean;
  /** Does the work inside the open transaction; answers what to do once the commit succeeded. */
  run(): () => void;
}

/**
 * Writes a repository holds back while its transaction is open, so that a row written several times before one
 * (group) commit is written once, and rows of one kind go in one statement. The store flushes every stage inside
 * the transaction just before COMMIT (and before the commit participants run): a flush that fails fails the
 * commit, as any write would. A savepoint or unit that rolls back rewinds every stage to the mark taken when it
 * began. A repository writes through when no transaction is open, and flushes before it reads what it staged.
 */
export interface WriteStage {
  /** Writes everything staged, inside the open transaction. */
  flush(): void;
  /** Marks what is staged now (a savepoint or unit begins). Marks grow with every mark, stage and flush. */
  mark(): number;
  /**
   * The savepoint that began at `mark` rolled back: what was staged after it is dropped, and what a flush after it
   * wrote (SQLite undid that write) is staged again if it was staged before the mark.
   */
  rewind(mark: number): void;
  /** The transaction ended (committed, or rolled back after `rewind`): nothing of it can come back. */
  ended(): void;
}

/** A commit failed (disk full, I/O error): its writes were rolled back and the store takes no more. */
export class StoreFailedError extends Error {
  constructor(
    readonly location: string,
    cause: Error,
  ) {
    super(
      `The SW4RM store ${location} could not commit (${cause.message}). What was not yet committed was rolled back, and ` +
        'no agent was told it was accepted. The coordinator must restart to continue from what is stored; ' +
        'check free disk space and the data folder first.',
      { cause },
    );
    this.name = 'StoreFailedError';
  }
}

/**
 * Why the store cannot be opened: `missing-data`, committed data is known to be gone (an emptied or deleted file,
 * a lost or damaged write-ahead log after an unclean stop); `read-only`, the data folder or a file in it may not
 * be written by this user (the store is not damaged); `disk-full`, no space to create, migrate or open it.
 */
export type StoreOpenReason =
  'corrupt' | 'newer-schema' | 'unreadable' | 'locked' | 'missing-data' | 'read-only' | 'disk-full';

/** The store cannot be opened. The message names the file and what the user can do. */
export class StoreOpenError extends Error {
  constructor(
    readonly location: string,
    readonly reason: StoreOpenReason,
    message: string,
  ) {
    super(message);
    this.name = 'StoreOpenError';
  }
}
