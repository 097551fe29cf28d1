import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** The host tells the launch area where its MCP bridge listens: what a launch wires into the worktree and the environment. */
describe('the host gives the launches its bridge endpoints (real coordinator, real bridge on port 0)', function () {
  this.timeout(60_000);
  let dir: string;

  beforeEach(() => {
    dir = makeTempDir('sw4rm-int-bridge-endpoints-');
  });

  afterEach(() => removeTempDir(dir));

  it("answers the listening bridge's endpoints through the API, and none once it stopped", async () => {
    const host = await startHost(path.join(dir, 'data'));
    const api = new InProcessCoordinatorApi(host.coordinator);
    try {
      const endpoints = await api.bridgeEndpoints();
      assert.ok(endpoints, 'the launches know the bridge');
      assert.deepEqual(endpoints, host.bridgeEndpoints);
      assert.match(endpoints.mcpUrl, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      assert.notEqual(endpoints.mcpUrl, 'http://127.0.0.1:0/mcp', 'the port it listens on, not the one asked for');
      assert.equal(endpoints.grpcAddress, `127.0.0.1:${host.port}`);
    } finally {
      api.dispose();
      await stopHost(host);
    }
    assert.equal(host.coordinator.launches.bridgeEndpoints(), undefined);
  });

  it('answers none when the bridge is off', async () => {
    const host = await startHost(path.join(dir, 'data'), { bridge: false });
    const api = new InProcessCoordinatorApi(host.coordinator);
    try {
      assert.equal(await api.bridgeEndpoints(), undefined);
    } finally {
      api.dispose();
      await stopHost(host);
    }
  });
});
