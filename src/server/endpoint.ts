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
  writeSecretFile(path.join(dataDir, ENDPOINT_FILE_NAME), JSON.stringify({ host, port, pid: process.pid } satisfies Endpoint));
}

/** Removes the file if it still names this coordinator's port (a newer coordinator may have replaced it). */
export function removeEndpoint(dataDir: string, port: number): void {
  const file = path.join(dataDir, ENDPOINT_FILE_NAME);
  if (readEndpoint(dataDir)?.port === port) fs.rmSync(file, { force: true });
}

export function readEndpoint(dataDir: string): Endpoint | undefined {
  try {
    const value = JSON.parse(fs.readFileSync(path.join(dataDir, ENDPOINT_FILE_NAME), 'utf8')) as Partial<Endpoint>;
    return typeof value.host === 'string' && typeof value.port === 'number' ? { host: value.host, port: value.port, pid: Number(value.pid) } : undefined;
  } catch {
    return undefined;
  }
}
