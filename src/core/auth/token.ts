import { randomBytes, timingSafeEqual } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

export const TOKEN_FILE_NAME = 'token';

/**
 * The coordinator's bearer token: generated on first start, kept in the data folder readable by its owner
 * only (0600), and reused afterwards so that running agents keep working across restarts.
 */
export function loadOrCreateToken(dataDir: string): string {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, TOKEN_FILE_NAME);
  try {
    const existing = fs.readFileSync(file, 'utf8').trim();
    if (/^[A-Za-z0-9_-]{32,}$/.test(existing)) {
      fs.chmodSync(file, 0o600);
      return existing;
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const token = randomBytes(32).toString('base64url');
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, token + '\n', { mode: 0o600 });
  fs.renameSync(temporary, file);
  return token;
}

/** Compares a presented token with the expected one in constant time. */
export function tokenMatches(expected: string, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}
