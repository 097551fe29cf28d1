import * as fs from 'node:fs';
import * as path from 'node:path';
import { writeSecretFile } from '../core/auth/token';

/** Where a running coordinator says which address it serves, for `sw4rm-coordinator credentials` (README). */
export const ENDPOINT_FILE_NAME = 'endpoint.json';

export interface Endpoint {
  readonly host: string;
  readonly port: number;
  readonly pid: number;
}

export function writeEndpoint(dataDir: string, host: string, port: number): void {
  writeSecretFile(
    path.join(dataDir, ENDPOINT_FILE_NAME),
    JSON.stringify({ host, port, pid: process.pid } satisfies Endpoint),
  );
}

/** Removes the file if it still names this coordinator's port (a newer coordinator may have replaced it). */
export function removeEndpoint(dataDir: string, port: number): void {
  const file = path.join(dataDir, ENDPOINT_FILE_NAME);
  if (readEndpoint(dataDir)?.port === port) fs.rmSync(file, { force: true });
}

/**
 * The endpoint of the coordinator running on `dataDir`, or undefined. A file left behind by a coordinator that
 * crashed names a process that is gone: it is ignored, so the operator token is never sent to whatever listens on
 * that port now.
 */
export function readEndpoint(dataDir: string): Endpoint | undefined {
  let value: Partial<Endpoint>;
  try {
    value = JSON.parse(fs.readFileSync(path.join(dataDir, ENDPOINT_FILE_NAME), 'utf8')) as Partial<Endpoint>;
  } catch {
    return undefined;
  }
  if (typeof value.host !== 'string' || typeof value.port !== 'number' || !Number.isSafeInteger(value.pid))
    return undefined;
  return processAlive(value.pid!) ? { host: value.host, port: value.port, pid: value.pid! } : undefined;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, but another user's
  }
}
