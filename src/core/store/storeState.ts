import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { StoreOpenError } from './store';

/**
 * The engine's marker beside the store file (`coordinator.db.state`): that a store exists here, its schema
 * version, whether its last stop was clean, and an epoch that the database holds too. It lets opening tell a
 * store that lost committed data (a deleted, emptied or damaged file or write-ahead log) from a new one.
 *
 * The epoch is only ever written to the marker after the same value was committed to the database and the
 * write-ahead log was synced, and the marker is replaced atomically (temp file + rename), so after any crash
 * the marker's epoch is at most the database's: a healthy store never reads as one that lost data.
 */
export interface StoreMarker {
  readonly format: 1;
  /** 'open' from the start of a run until its clean close; 'clean' after close checkpointed everything. */
  readonly state: 'open' | 'clean';
  readonly schemaVersion: number;
  /** The highest epoch known to be committed and durable in the database. */
  readonly epoch: number;
  readonly writtenAt: string;
}

export const MARKER_SUFFIX = '.state';
const WAL_MAGIC_LE = 0x377f0682;
const WAL_MAGIC_BE = 0x377f0683;
const WAL_HEADER_BYTES = 32;
const WAL_FRAME_HEADER_BYTES = 24;

export function markerPath(location: string): string {
  return `${location}${MARKER_SUFFIX}`;
}

/** The marker, or undefined when there is none or it cannot be read (then nothing is known, as before markers). */
export function readMarker(location: string): StoreMarker | undefined {
  let text: string;
  try {
    text = fs.readFileSync(markerPath(location), 'utf8');
  } catch {
    return undefined;
  }
  try {
    const value = JSON.parse(text) as Partial<StoreMarker>;
    if (value.format !== 1 || (value.state !== 'open' && value.state !== 'clean')) return undefined;
    if (!Number.isSafeInteger(value.epoch) || !Number.isSafeInteger(value.schemaVersion)) return undefined;
    return value as StoreMarker;
  } catch {
    return undefined;
  }
}

/**
 * The data folder and everything the store keeps in it are its user's only, whatever the umask (README, "Security
 * model"): folders 0700, files 0600. `mkdir` and `open` modes are masked by the umask and never widen an existing
 * entry, so each is created with the mode and chmod'ed after.
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** Creates `dir` if needed (its missing parents too, those as the umask makes them) and makes it 0700. */
export function makePrivateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  fs.chmodSync(dir, PRIVATE_DIR_MODE);
}

/** Makes `file` 0600 when it exists (SQLite creates its -wal and -shm itself). */
export function makePrivateFile(file: string): void {
  try {
    fs.chmodSync(file, PRIVATE_FILE_MODE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Replaces the marker atomically: a crash leaves the old one or the new one, never a mix. */
export function writeMarker(location: string, marker: Omit<StoreMarker, 'format' | 'writtenAt'>): void {
  const target = markerPath(location);
  const temp = `${target}.tmp`;
  const full: StoreMarker = { format: 1, ...marker, writtenAt: new Date().toISOString() };
  fs.writeFileSync(temp, `${JSON.stringify(full)}\n`, { mode: PRIVATE_FILE_MODE });
  fs.chmodSync(temp, PRIVATE_FILE_MODE);
  fs.renameSync(temp, target);
}

/**
 * The commit counter beside the store (`coordinator.db.commits`): the epoch of the latest commit, written right after
 * each COMMIT returns and before anyone is told the commit is durable. The marker follows the epoch only about once a
 * second (it syncs the log); the counter closes that window: a write-ahead log that lost its last commits (cut short,
 * its tail damaged) leaves the database behind the counter, and opening refuses. Not synced (a commit is not synced
 * either under synchronous = NORMAL): after a crash of the process it is exactly as written; after a power loss it may
 * be ahead of the database only if commits it recorded were really lost, which is what it is there to say.
 *
 * 16 bytes at offset 0: the epoch (u64 LE), then its bitwise complement (u64 LE); anything else reads as no counter.
 */
export const COMMITS_SUFFIX = '.commits';
const COMMITS_BYTES = 16;
const U64_MASK = 0xffff_ffff_ffff_ffffn;
const U32_SPAN = 0x1_0000_0000;

export function commitsPath(location: string): string {
  return `${location}${COMMITS_SUFFIX}`;
}

export class CommitCounter {
  private readonly record = Buffer.alloc(COMMITS_BYTES);

  private constructor(private fd: number | undefined) {}

  /** Opens (creating, 0600) the counter of the store at `location`. */
  static open(location: string): CommitCounter {
    const fd = fs.openSync(commitsPath(location), fs.constants.O_RDWR | fs.constants.O_CREAT, PRIVATE_FILE_MODE);
    try {
      fs.fchmodSync(fd, PRIVATE_FILE_MODE);
    } catch (err) {
      fs.closeSync(fd);
      throw err;
    }
    return new CommitCounter(fd);
  }

  /**
   * Records `epoch` in place (one pwrite of 16 bytes). The u64 halves are written as 32-bit words (an epoch is a safe
   * integer): the same bytes as writeBigUInt64LE, without a BigInt per commit.
   */
  write(epoch: number): void {
    if (this.fd === undefined) return;
    const low = epoch % U32_SPAN;
    const high = (epoch - low) / U32_SPAN;
    this.record.writeUInt32LE(low, 0);
    this.record.writeUInt32LE(high, 4);
    this.record.writeUInt32LE(~low >>> 0, 8);
    this.record.writeUInt32LE(~high >>> 0, 12);
    fs.writeSync(this.fd, this.record, 0, COMMITS_BYTES, 0);
  }

  close(): void {
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    fs.closeSync(fd);
  }
}

/** The counter's epoch, or undefined when there is none or it does not read back whole (then nothing is known). */
export function readCommitCounter(location: string): number | undefined {
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(commitsPath(location));
  } catch {
    return undefined;
  }
  if (bytes.length < COMMITS_BYTES) return undefined;
  const value = bytes.readBigUInt64LE(0);
  if ((value ^ U64_MASK) !== bytes.readBigUInt64LE(8) || value > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  return Number(value);
}

/** Makes what is in the write-ahead log durable (synchronous = NORMAL syncs it only at checkpoints). */
export function syncWal(location: string): void {
  let fd: number;
  try {
    fd = fs.openSync(`${location}-wal`, 'r+');
  } catch {
    return; // no log: everything is in the database file
  }
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function fileSize(file: string): number | undefined {
  try {
    return fs.statSync(file).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Whether a write-ahead log starts with a header SQLite accepts (magic, version, page size, checksum). */
export function walHeaderProblem(header: Buffer): string | undefined {
  if (header.length < WAL_HEADER_BYTES)
    return `it is ${header.length} bytes, shorter than its ${WAL_HEADER_BYTES}-byte header`;
  const magic = header.readUInt32BE(0);
  if (magic !== WAL_MAGIC_LE && magic !== WAL_MAGIC_BE) return 'it does not start with a write-ahead log header';
  const bigEndian = magic === WAL_MAGIC_BE;
  let s0 = 0;
  let s1 = 0;
  for (let i = 0; i < 24; i += 8) {
    const x0 = bigEndian ? header.readUInt32BE(i) : header.readUInt32LE(i);
    const x1 = bigEndian ? header.readUInt32BE(i + 4) : header.readUInt32LE(i + 4);
    s0 = (s0 + x0 + s1) >>> 0;
    s1 = (s1 + x1 + s0) >>> 0;
  }
  if (s0 !== header.readUInt32BE(24) || s1 !== header.readUInt32BE(28)) return 'its header checksum does not match';
  return undefined;
}

function readHead(file: string, bytes: number): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(bytes);
    const read = fs.readSync(fd, buffer, 0, bytes, 0);
    return buffer.subarray(0, read);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * What the files say against the marker, before SQLite opens them (SQLite would recreate a missing file, and drop
 * a log it cannot use as it closes). `certain`: committed data is gone whatever the database holds (the file is
 * missing or empty, or the log of an unclean stop is not a log). Otherwise what looks wrong with the log of an
 * unclean stop, which the database's epoch confirms or clears once it is open.
 */
export function checkFilesAgainstMarker(
  location: string,
  marker: StoreMarker,
): { problem: string; certain: boolean } | undefined {
  const dbSize = fileSize(location);
  if (dbSize === undefined) return { problem: `the store file ${location} is gone`, certain: true };
  // SQLite writes the file's first page before any commit goes to the log, so a store's file is never empty.
  if (dbSize === 0) return { problem: `the store file ${location} is empty (0 bytes)`, certain: true };
  if (marker.state === 'clean') return undefined;
  // The last run did not close: every commit since its last checkpoint lives only in the write-ahead log. A run
  // commits before it writes this marker, and the log never shrinks while the store is open.
  const unclean = 'the previous run stopped without closing the store, and its write-ahead log';
  const wal = `${location}-wal`;
  const walSize = fileSize(wal);
  if (walSize === undefined) return { problem: `${unclean} ${wal} is gone`, certain: false };
  if (walSize === 0) return { problem: `${unclean} ${wal} is empty`, certain: false };
  const header = readHead(wal, WAL_HEADER_BYTES);
  const problem = walHeaderProblem(header);
  // A run writes the log's header whole; one SQLite cannot read was never written by a healthy run.
  if (problem) return { problem: `${unclean} ${wal} is damaged (${problem})`, certain: true };
  if (walSize < WAL_HEADER_BYTES + WAL_FRAME_HEADER_BYTES + header.readUInt32BE(8)) {
    return { problem: `${unclean} ${wal} is cut short (${walSize} bytes, less than one commit)`, certain: false };
  }
  return undefined;
}

/** The refusal when committed data is known to be missing. */
export function missingDataError(location: string, what: string, logFolded = false): StoreOpenError {
  const marker = markerPath(location);
  const untouched = logFolded
    ? 'The coordinator will not start on it; SQLite folded what the write-ahead log still held into the file as it closed (nothing more was lost).'
    : 'The coordinator will not start on it and has not changed it.';
  return new StoreOpenError(
    location,
    'missing-data',
    `The SW4RM store ${location} has lost committed data: ${what}. ${untouched} ` +
      `Restore ${path.basename(location)} (with its ${path.basename(location)}-wal file, if the backup has one) from a backup, delete ${marker}, and start again. ` +
      `Only if you accept losing what is missing: delete ${marker} to start on what is left, or move the data folder ${path.dirname(location)} aside to start with an empty store.`,
  );
}

/** SQLite result codes (the low byte of node:sqlite's `errcode`). */
const SQLITE_PERM = 3;
const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;

/** Whether this process may write `file` (false when it exists and may not; a missing file is writable if its folder is). */
export type WritableProbe = (file: string) => boolean;

export const canWrite: WritableProbe = (file) => {
  try {
    fs.accessSync(file, fs.constants.W_OK);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
};

/** The folder or files the store needs to write and may not, if any. */
export function notWritable(dataDir: string, location: string, probe: WritableProbe = canWrite): string | undefined {
  for (const file of [dataDir, location, `${location}-wal`, markerPath(location), commitsPath(location)]) {
    if (!probe(file)) return file;
  }
  return undefined;
}

export function readOnlyError(dataDir: string, location: string, file: string): StoreOpenError {
  const who = (() => {
    try {
      return os.userInfo().username;
    } catch {
      return 'this user';
    }
  })();
  const what =
    file === dataDir
      ? `The data folder ${dataDir} is read-only or not writable by this user (${who})`
      : `${file} in the data folder ${dataDir} is read-only or not writable by this user (${who})`;
  return new StoreOpenError(
    location,
    'read-only',
    `${what}, so the SW4RM store ${location} cannot be opened. The store is not damaged and was not changed. ` +
      'Make the folder and its files writable by the user running the coordinator, or point it at another data folder (setting sw4rm.dataDir or --data-dir).',
  );
}

function freeSpace(dir: string): string | undefined {
  for (let d = dir; ; d = path.dirname(d)) {
    try {
      const stats = fs.statfsSync(d);
      return formatBytes(stats.bavail * stats.bsize);
    } catch {
      if (path.dirname(d) === d) return undefined;
    }
  }
}

function formatBytes(n: number): string {
  if (n < 1024) return `${n} bytes`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

function sqliteCode(err: unknown): number | undefined {
  const code = (err as { errcode?: unknown } | null)?.errcode;
  return typeof code === 'number' ? code & 0xff : undefined;
}

/**
 * What an error while opening the store means, when it is not the store's fault: a full disk, or a data folder
 * or file this process may not write. Undefined when it is neither (the caller reports it as it is).
 * `doing` says what was under way, e.g. "created" or "migrated to schema version 5".
 */
export function diagnoseOpenFailure(
  err: unknown,
  dataDir: string,
  location: string,
  doing: string,
  probe: WritableProbe = canWrite,
): StoreOpenError | undefined {
  const errno = (err as NodeJS.ErrnoException | null)?.code;
  const code = sqliteCode(err);
  const text = err instanceof Error ? err.message : String(err);
  if (errno === 'ENOSPC' || errno === 'EDQUOT' || code === SQLITE_FULL) {
    const free = freeSpace(dataDir);
    return new StoreOpenError(
      location,
      'disk-full',
      `The disk holding the SW4RM data folder ${dataDir} is full${free === undefined ? '' : ` (${free} free)`}: the store ${location} could not be ${doing} (${text}). ` +
        `${doing === 'created' ? 'Nothing was stored yet.' : 'The store is not damaged: what was committed before is kept.'} ` +
        'Free some disk space (or point the coordinator at a data folder on another disk) and start again.',
    );
  }
  const permission = errno === 'EACCES' || errno === 'EPERM' || errno === 'EROFS';
  const maybe =
    permission || code === SQLITE_READONLY || code === SQLITE_CANTOPEN || code === SQLITE_IOERR || code === SQLITE_PERM;
  if (!maybe) return undefined;
  const blocked = notWritable(dataDir, location, probe);
  if (blocked) return readOnlyError(dataDir, location, blocked);
  if (errno === 'EROFS') return readOnlyError(dataDir, location, dataDir);
  return undefined;
}
