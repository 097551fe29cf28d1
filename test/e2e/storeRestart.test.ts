import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ExampleAgentProcess } from '../support/exampleAgentProcess';
import { disposeAfter, startWithCoordinator, type CodeServerHarness } from './harness';

const EXTENSION_ID = 'sw4rm.sw4rm-coordinator';

/** The example agent kept-1 with the environment the editor handed out. */
const startAgent = (env: Record<string, string>): ExampleAgentProcess =>
  new ExampleAgentProcess({
    ...env,
    SW4RM_AGENT_ID: 'kept-1',
    SW4RM_AGENT_NAME: 'Kept Agent',
    SW4RM_HEARTBEAT_MS: '1000',
  });

/** The data folders under the extension's global storage (one per workspace), with their token files. */
function dataFolders(userDataDir: string): Array<{ dir: string; token: string; enrolment: string }> {
  const stores = path.join(userDataDir, 'User', 'globalStorage', EXTENSION_ID, 'stores');
  if (!fs.existsSync(stores)) return [];
  return fs.readdirSync(stores).map((name) => {
    const dir = path.join(stores, name);
    const read = (file: string) =>
      fs.existsSync(path.join(dir, file)) ? fs.readFileSync(path.join(dir, file), 'utf8') : '';
    return { dir, token: read('token'), enrolment: read('enrolment-token') };
  });
}

/** Store files anywhere in the editor's workspace storage (where releases before this one kept the store). */
function storesInWorkspaceStorage(userDataDir: string): string[] {
  const root = path.join(userDataDir, 'User', 'workspaceStorage');
  if (!fs.existsSync(root)) return [];
  return fs
    .readdirSync(root)
    .map((id) => path.join(root, id, EXTENSION_ID, 'coordinator.db'))
    .filter((file) => fs.existsSync(file));
}

describe('the store after a restart of the editor process (code-server + Chromium)', function () {
  let harness: CodeServerHarness | undefined;
  let agent: ExampleAgentProcess | undefined;
  let tempDir: string | undefined;

  after(async function () {
    await agent?.kill();
    await disposeAfter(harness, this.currentTest, 'store-restart');
    if (tempDir) fs.rmSync(tempDir, { recursive: true, force: true });
  });

  it('finds the same store, agent and tokens when code-server is started again on the same user data', async function () {
    this.timeout(360_000);
    let port: number;
    ({ harness, port } = await startWithCoordinator({ name: 'sw4rm-restart-e2e' }));
    tempDir = harness.tempDir;
    const userDataDir = harness.userDataDir;

    const env = await harness.copyAgentEnvironment('kept-1');
    await harness.openViewContainer('SW4RM');
    agent = startAgent(env);
    await agent.waitForLine(/registered as kept-1/);
    await harness.waitForText(
      (t) => t.includes('kept-1'),
      15_000,
      () => harness!.viewText('Agents'),
    );
    // Killed, it never deregisters: the registry keeps it.
    agent.signal('SIGKILL');

    const before = dataFolders(userDataDir);
    assert.equal(before.length, 1, `one data folder under the global storage: ${JSON.stringify(before)}`);
    assert.match(before[0].token, /^[A-Za-z0-9_-]{32,}\n$/);
    assert.match(before[0].enrolment, /^sw4rm\./);
    assert.deepEqual(storesInWorkspaceStorage(userDataDir), [], 'nothing in the workspace storage');

    // Stop the code-server process (and its extension host) and start a new one on the same user data.
    await harness.dispose(true);
    ({ harness } = await startWithCoordinator({ restartIn: tempDir, port, name: 'sw4rm-restart-e2e' }));
    await harness.openViewContainer('SW4RM');
    const shown = await harness.waitForText(
      (t) => t.includes('kept-1'),
      20_000,
      () => harness!.viewText('Agents'),
    );
    assert.match(shown, /Kept Agent/);
    await harness.screenshot('store-after-restart');

    assert.deepEqual(dataFolders(userDataDir), before, 'the same data folder, operator token and enrolment token');
    assert.deepEqual(storesInWorkspaceStorage(userDataDir), []);

    // The agent's own credential, minted before the restart, is still known to the coordinator.
    agent = startAgent(env);
    await agent.waitForLine(/registered as kept-1|UNAUTHENTICATED/);
    assert.doesNotMatch(agent.output, /UNAUTHENTICATED/);
    agent.signal('SIGINT');
  });
});
