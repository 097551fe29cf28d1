import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** A fresh empty folder under the system temp folder. */
export function makeTempDir(prefix = 'sw4rm-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function removeTempDir(dir: string | undefined): void {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
}
