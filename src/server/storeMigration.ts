import * as fs from 'node:fs';
import * as path from 'node:path';
import { ENROLMENT_FILE_NAME } from '../core/auth/enrolment';
import { TOKEN_FILE_NAME } from '../core/auth/token';
import { CoordinatorStore } from '../core/coordinatorStore';
import { STORE_FILE_NAME } from '../core/store/sqliteStore';
import { COMMITS_SUFFIX, MARKER_SUFFIX } from '../core/store/storeState';
import { StoreOpenError } from '../core/store/store';
import { PAYLOAD_FOLDER_NAME } from '../core/router/payloadFiles';

/**
 * Every file of a data folder that belongs to its store, moved together: the database with its write-ahead log and
 * shared memory, the engine's marker and commit counter, the operator token and the enrolment credential's token. (endpoint.json is
 * not among them: it only says where a running coordinator serves, and the next start writes it anew.)
 */
export const STORE_FILES: readonly string[] = [
  STORE_FILE_NAME,
  `${STORE_FILE_NAME}-wal`,
  `${STORE_FILE_NAME}-shm`,
  `${STORE_FILE_NAME}${MARKER_SUFFIX}`,
  `${STORE_FILE_NAME}${COMMITS_SUFFIX}`,
  TOKEN_FILE_NAME,
  ENROLMENT_FILE_NAME,
  // The payload files (router/payloadFiles.ts) the database references: a folder, moved with it.
  PAYLOAD_FOLDER_NAME,
];

/** The note left in the old folder, saying where its store went. */
export const MOVED_NOTE_FILE_NAME = 'MOVED.txt';

export type StoreMigration =
  /** Nothing to move: the old folder holds no store (or is the new folder). */
  | { readonly kind: 'none'; readonly use: string }
  /** The store was moved; `files` are the names moved, in order. */
  | { readonly kind: 'moved'; readonly use: string; readonly files: readonly string[] }
  /** Both folders hold a store: the new one is used, the old one left as it is (never overwritten, never merged). */
  | { readonly kind: 'both'; readonly use: string; readonly left: string }
  /** The old store could not be moved now (in use, or refused to open): this start uses it where it is. */
  | { readonly kind: 'not-moved'; readonly use: string; readonly reason: string };

export interface StoreMigrationOptions {
  /** How long to wait for the old store's lock (a coordinator still closing); default the store's own 5 s. */
  readonly lockWaitMs?: number;
}

/**
 * Moves the store in `from` (the data folder of an earlier release) to `to`, once, and says which folder this start
 * must use. It never overwrites a store, and never moves one a coordinator uses: the old store is first opened
 * with its lock (refused when another coordinator holds it) and closed cleanly, so that what moves is the
 * database with everything committed folded in. The files go through `<to>.migrating` and that folder is renamed
 * to `to` at the end, so an interrupted move is finished by the next call and `to` never holds half a store.
 */
export function migrateStore(from: string, to: string, options: StoreMigrationOptions = {}): StoreMigration {
  if (path.resolve(from) === path.resolve(to)) return { kind: 'none', use: to };
  const staging = `${to}.migrating`;
  const resuming = fs.existsSync(staging);
  const present = storeFilesIn(from);
  if (!resuming && !present.some((name) => name === STORE_FILE_NAME || name === `${STORE_FILE_NAME}${MARKER_SUFFIX}`)) {
    return { kind: 'none', use: to };
  }
  if (storeFilesIn(to).length > 0) return { kind: 'both', use: to, left: from };

  if (!resuming) {
    // Taking the lock proves no coordinator uses the store; closing it checkpoints the log into the database.
    let store: CoordinatorStore;
    try {
      store = CoordinatorStore.open(from, { lockWaitMs: options.lockWaitMs });
    } catch (err) {
      if (err instanceof StoreOpenError) {
        const reason = err.reason === 'locked' ? `it is in use by another running coordinator` : err.message;
        return { kind: 'not-moved', use: from, reason };
      }
      throw err;
    }
    store.close();
  }

  fs.mkdirSync(staging, { recursive: true, mode: 0o700 });
  const moved: string[] = [];
  for (const name of storeFilesIn(from)) {
    if (fs.existsSync(path.join(staging, name))) {
      throw new Error(
        `Cannot move the SW4RM store from ${from} to ${to}: ${path.join(staging, name)} exists already. ` +
          `Nothing was overwritten; move the files of one of the two by hand.`,
      );
    }
    moveFile(path.join(from, name), path.join(staging, name));
    moved.push(name);
  }
  if (fs.existsSync(to)) {
    // An empty folder (or one without store files) is there already: move the files in one by one.
    for (const name of fs.readdirSync(staging)) moveFile(path.join(staging, name), path.join(to, name));
    fs.rmdirSync(staging);
  } else {
    fs.renameSync(staging, to);
  }
  fs.writeFileSync(
    path.join(from, MOVED_NOTE_FILE_NAME),
    `The SW4RM store of this workspace moved to ${to} on ${new Date().toISOString()} (${moved.join(', ')}).\n`,
  );
  return { kind: 'moved', use: to, files: moved };
}

/** What to write in the log about a migration, or undefined when there was nothing to do. */
export function describeMigration(from: string, migration: StoreMigration): string | undefined {
  switch (migration.kind) {
    case 'none':
      return undefined;
    case 'moved':
      return `SW4RM: moved the store from ${from} to ${migration.use} (${migration.files.join(', ')})`;
    case 'both':
      return (
        `SW4RM: a store exists in ${migration.use} and in the earlier data folder ${migration.left}; using ${migration.use}, ` +
        `the earlier one was left as it is (delete it, or set sw4rm.dataDir to ${migration.left} to use it instead)`
      );
    case 'not-moved':
      return (
        `SW4RM: the store in ${from} was not moved to its new folder (${migration.reason}); ` +
        'it is used where it is, and moved at a later start'
      );
  }
}

function storeFilesIn(dir: string): string[] {
  return STORE_FILES.filter((name) => fs.existsSync(path.join(dir, name)));
}

/** Renames a file, or copies and then removes it when the two folders are on different file systems. */
function moveFile(source: string, target: string): void {
  try {
    fs.renameSync(source, target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    if (fs.statSync(source).isDirectory()) {
      // The payload folder: each file copied and synced, then the source folder removed.
      fs.mkdirSync(target, { mode: 0o700 });
      for (const name of fs.readdirSync(source)) moveFile(path.join(source, name), path.join(target, name));
      fs.rmdirSync(source);
      return;
    }
    fs.copyFileSync(source, target, fs.constants.COPYFILE_EXCL);
    const fd = fs.openSync(target, 'r+');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.chmodSync(target, fs.statSync(source).mode & 0o777);
    fs.rmSync(source);
  }
}
