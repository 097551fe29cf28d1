import { randomBytes, timingSafeEqual } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

export const TOKEN_FILE_NAME = 'token';

/**
 * The operator token (README, "Security model"): the editor's and the CLI console's SW4RM_TOKEN. A call with it
 * may act for any agent; agent and enrolment credentials (src/core/credentials/) are narrower.
 * The coordinator's bearer token: generated on first start, kept in the data folder readable by its owner
 * only (0600), and reused afterwards so that running agents keep working across restarts.
 */
export function loadOrCreateToken(dataDir: string): string {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dataDir, 0o700);
  const file = path.join(dataDir, TOKEN_FILE_NAME);
  const existing = readSecretFile(file);
  if (existing !== undefined && /^[A-Za-z0-9_-]{32,}$/.test(existing)) return existing;
  const token = randomBytes(32).toString('base64url');
  writeSecretFile(file, token);
  return token;
}

/** Writes a secret to `file` readable by its owner only (0600), replacing it atomically. */
export function writeSecretFile(file: string, secret: string): void {
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, secret + '\n', { mode: 0o600 });
  fs.chmodSync(temporary, 0o600);
  fs.renameSync(temporary, file);
}

/** The trimmed text of a secret file (mode set back to 0600), or undefined when there is none. */
export function readSecretFile(file: string): string | undefined {
  try {
    const text = fs.readFileSync(file, 'utf8').trim();
    fs.chmodSync(file, 0o600);
    return text;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Compares a presented token with the expected one in constant time. */
export function tokenMatches(expected: string, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}
