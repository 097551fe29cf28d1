import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ENDPOINT_FILE_NAME, readEndpoint, writeEndpoint } from '../../src/server/endpoint';
import { makeTempDir, removeTempDir } from '../support/tempDir';

describe('endpoint.json (where `sw4rm-coordinator credentials` finds a running coordinator)', () => {
  let dataDir: string;
  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-endpoint-');
  });
  afterEach(() => removeTempDir(dataDir));

  it('answers the endpoint a live coordinator wrote', () => {
    writeEndpoint(dataDir, '127.0.0.1', 50123);
    assert.deepEqual(readEndpoint(dataDir), { host: '127.0.0.1', port: 50123, pid: process.pid });
  });

  it('ignores a file left by a coordinator that is gone, so the operator token goes to no other process on that port', () => {
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    fs.writeFileSync(
      path.join(dataDir, ENDPOINT_FILE_NAME),
      JSON.stringify({ host: '127.0.0.1', port: 50123, pid: gone }),
    );
    assert.equal(readEndpoint(dataDir), undefined);
  });
});
