import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PAYLOAD_FOLDER_NAME, PayloadFiles } from '../../src/core/router/payloadFiles';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** Every entry under `dir` (dir included) with its permission bits, as `relative path → octal mode`. */
function modes(dir: string): Map<string, { readonly dir: boolean; readonly mode: string }> {
  const out = new Map<string, { readonly dir: boolean; readonly mode: string }>();
  const walk = (at: string) => {
    const stat = fs.lstatSync(at);
    out.set(path.relative(dir, at) || '.', { dir: stat.isDirectory(), mode: (stat.mode & 0o777).toString(8) });
    if (stat.isDirectory()) for (const name of fs.readdirSync(at)) walk(path.join(at, name));
  };
  walk(dir);
  return out;
}

function assertPrivate(dir: string, expected: readonly string[]): void {
  const found = modes(dir);
  for (const name of expected) assert.ok(found.has(name), `${name} is there (found ${[...found.keys()].join(', ')})`);
  const wide = [...found].filter(([, m]) => m.mode !== (m.dir ? '700' : '600')).map(([name, m]) => `${name} ${m.mode}`);
  assert.deepEqual(wide, [], 'every folder 0700 and every file 0600');
}

/** The data folder is its user's only whatever the umask (README, "Security model"): folders 0700, files 0600. */
describe('the data folder and everything in it are private to the user, under umask 000 too', function () {
  this.timeout(60_000);
  let parent: string;
  let umask: number;

  beforeEach(() => {
    parent = makeTempDir('sw4rm-int-modes-');
    umask = process.umask(0);
  });

  afterEach(() => {
    process.umask(umask);
    removeTempDir(parent);
  });

  it('a new data folder: store, -wal (and -shm if any), state file, tokens, endpoint and payload files are 0600 in 0700 folders', async () => {
    const dataDir = path.join(parent, 'data');
    const host = await startHost(dataDir);
    try {
      await new PayloadFiles(path.join(dataDir, PAYLOAD_FOLDER_NAME)).write(
        '00000000-0000-4000-8000-000000000001',
        Buffer.alloc(1024, 1),
      );
      const db = STORE_FILE_NAME;
      assertPrivate(dataDir, [
        '.',
        db,
        `${db}-wal`,
        `${db}.state`,
        'token',
        PAYLOAD_FOLDER_NAME,
        `${PAYLOAD_FOLDER_NAME}/00000000-0000-4000-8000-000000000001`,
      ]);
    } finally {
      await stopHost(host);
    }
    assertPrivate(dataDir, ['.', STORE_FILE_NAME, `${STORE_FILE_NAME}.state`]);
  });

  it('an existing data folder left readable by others is made private again when the store opens', async () => {
    const dataDir = path.join(parent, 'data');
    await stopHost(await startHost(dataDir));
    fs.chmodSync(dataDir, 0o777);
    for (const name of fs.readdirSync(dataDir))
      if (fs.statSync(path.join(dataDir, name)).isFile()) fs.chmodSync(path.join(dataDir, name), 0o666);
    const host = await startHost(dataDir);
    try {
      assertPrivate(dataDir, ['.', STORE_FILE_NAME, `${STORE_FILE_NAME}-wal`, `${STORE_FILE_NAME}.state`, 'token']);
    } finally {
      await stopHost(host);
    }
  });
});
