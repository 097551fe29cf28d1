import * as fs from 'node:fs';
import * as path from 'node:path';
import { MIB } from '../limits';

/**
 * Payloads from this size that come through `Router.submit` are written as files in the payload folder, off the
 * event loop, instead of into SQLite (whose insert, commit and checkpoint of 16 MiB hold the event loop 0.1–0.2 s).
 */
export const FILE_PAYLOAD_MIN_BYTES = MIB;

/** The payload folder's name in the data folder (CoordinatorHost; storeMigration.ts moves it with the store). */
export const PAYLOAD_FOLDER_NAME = 'payloads';

/** A payload kept as a file: its id (a fresh UUID, the file's name), its size and, for untokened messages, its content digest. */
export interface PayloadFile {
  readonly fileId: string;
  readonly bytes: number;
  readonly digest?: string;
}

/** A file id is one of our UUIDs: nothing an agent sent ever becomes part of a path. */
const FILE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The payload folder (`<data folder>/payloads`): one file per large payload, named by its file id. Written with async
 * fs and made durable (file and folder synced) before the transaction that references it commits; read back
 * asynchronously for delivery; unlinked after the commit that removed its last owner (sqliteRouterRepository.ts,
 * `router_payload_files`). Files nobody references (a crash between write and commit, or commit and unlink) are
 * swept after start.
 */
export class PayloadFiles {
  /** Files being written or waiting for the commit that references them: the sweep leaves them alone. */
  private readonly pending = new Set<string>();
  private folderReady: Promise<void> | undefined;

  constructor(readonly dir: string) {}

  path(fileId: string): string {
    if (!FILE_ID.test(fileId)) throw new Error(`not a payload file id: ${fileId.slice(0, 64)}`);
    return path.join(this.dir, fileId);
  }

  /** Writes the payload as `<id>.tmp`, syncs it, renames it to `<id>` and syncs the folder: durable when this resolves. */
  async write(fileId: string, payload: Uint8Array): Promise<void> {
    const target = this.path(fileId);
    const tmp = `${target}.tmp`;
    this.pending.add(fileId);
    try {
      // The folder is its user's only, whatever the umask (the mode is masked by it, so chmod after).
      this.folderReady ??= fs.promises
        .mkdir(this.dir, { recursive: true, mode: 0o700 })
        .then(() => fs.promises.chmod(this.dir, 0o700));
      await this.folderReady;
      const handle = await fs.promises.open(tmp, 'wx', 0o600);
      try {
        await handle.chmod(0o600);
        await handle.writeFile(payload);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await fs.promises.rename(tmp, target);
      await this.syncFolder();
    } catch (err) {
      this.pending.delete(fileId);
      await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
      await fs.promises.rm(target, { force: true }).catch(() => undefined);
      throw err;
    }
  }

  /** The write's transaction has committed (the file has an owner) or was refused: the sweep may look at it again. */
  settled(fileId: string): void {
    this.pending.delete(fileId);
  }

  /** Reads a payload off the event loop (delivery). */
  async read(fileId: string, bytes: number): Promise<Uint8Array> {
    const data = await fs.promises.readFile(this.path(fileId));
    if (data.byteLength !== bytes)
      throw new Error(`the payload file ${this.path(fileId)} has ${data.byteLength} bytes, not ${bytes}`);
    return data;
  }

  /**
   * Reads a payload on the event loop. Only for readers off the hot path (a message's detail, a requeue, the
   * reused-sequence comparison), never for delivery.
   */
  readSync(fileId: string, bytes: number): Uint8Array {
    const data = fs.readFileSync(this.path(fileId));
    if (data.byteLength !== bytes)
      throw new Error(`the payload file ${this.path(fileId)} has ${data.byteLength} bytes, not ${bytes}`);
    return data;
  }

  /** The first `max` bytes of a payload (a dead letter's excerpt): one small read. */
  prefixSync(fileId: string, max: number): Uint8Array {
    const fd = fs.openSync(this.path(fileId), 'r');
    try {
      const buffer = Buffer.alloc(max);
      return buffer.subarray(0, fs.readSync(fd, buffer, 0, max, 0));
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Deletes a file no owner references any more (after the commit that removed its last owner). */
  async unlink(fileId: string): Promise<void> {
    await fs.promises.rm(this.path(fileId), { force: true });
  }

  /**
   * At start: why the referenced files are not all there with their sizes (the first few missing or truncated,
   * named), or undefined when they are. A synchronous stat per file, once.
   */
  missing(referenced: ReadonlyArray<{ readonly fileId: string; readonly bytes: number }>): string | undefined {
    const problems: string[] = [];
    let count = 0;
    for (const { fileId, bytes } of referenced) {
      let size: number | undefined;
      try {
        size = fs.statSync(this.path(fileId)).size;
      } catch {
        size = undefined;
      }
      if (size === bytes) continue;
      count++;
      if (problems.length < 3)
        problems.push(
          size === undefined
            ? `${this.path(fileId)} is missing`
            : `${this.path(fileId)} has ${size} bytes, not ${bytes}`,
        );
    }
    return count === 0
      ? undefined
      : `${count} payload file${count === 1 ? '' : 's'} referenced by the store ${count === 1 ? 'is' : 'are'} not intact (${problems.join('; ')}${count > problems.length ? '; …' : ''})`;
  }

  /**
   * Deletes the files in the folder that nobody references (`referenced` asked just before each unlink) and
   * leftover `.tmp` files, except those being written now. Answers the names deleted.
   */
  async sweep(referenced: (fileId: string) => boolean): Promise<string[]> {
    let names: string[];
    try {
      names = await fs.promises.readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const deleted: string[] = [];
    for (const name of names) {
      const fileId = name.endsWith('.tmp') ? name.slice(0, -4) : name;
      if (!FILE_ID.test(fileId) || this.pending.has(fileId)) continue;
      if (!name.endsWith('.tmp') && referenced(fileId)) continue;
      await fs.promises.rm(path.join(this.dir, name), { force: true });
      deleted.push(name);
    }
    return deleted;
  }

  private async syncFolder(): Promise<void> {
    let handle: fs.promises.FileHandle | undefined;
    try {
      handle = await fs.promises.open(this.dir, 'r');
      await handle.sync();
    } catch (err) {
      // Some platforms (Windows) cannot open or sync a folder; the rename is then as durable as they make it.
      if (!['EISDIR', 'EPERM', 'EINVAL', 'EBADF'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
    } finally {
      await handle?.close();
    }
  }
}
