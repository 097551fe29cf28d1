import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { loadProtos } from '../../src/server/protos';
import { makeTempDir, removeTempDir } from '../support/tempDir';
import { disposeAfter, ROOT, startWithCoordinator, type CodeServerHarness } from './harness';

const POISON_AGENT = 'e2e-poison';

/**
 * A store whose next commit after registering POISON_AGENT fails for real: the registration inserts a row that
 * breaks a deferred foreign key, so SQLite refuses the COMMIT (as it would on a full disk).
 */
function poisonedStore(dataDir: string): void {
  CoordinatorStore.open(dataDir).close();
  const db = new DatabaseSync(path.join(dataDir, STORE_FILE_NAME));
  try {
    db.exec(`CREATE TABLE poison_parent (id INTEGER PRIMARY KEY);
      CREATE TABLE poison_child (parent INTEGER REFERENCES poison_parent(id) DEFERRABLE INITIALLY DEFERRED);
      CREATE TRIGGER poison AFTER INSERT ON agents WHEN NEW.agent_id = '${POISON_AGENT}' BEGIN INSERT INTO poison_child (parent) VALUES (42); END;`);
  } finally {
    db.close();
  }
}

/** RegisterAgent over the canonical protos, answering the response or the gRPC error. */
function register(
  address: string,
  token: string,
  agentId: string,
): Promise<{ accepted?: boolean; code?: number; details?: string }> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const sw4rm = (loadProtos(path.join(ROOT, 'protos')) as any).sw4rm;
  const client = new sw4rm.registry.RegistryService(address, grpc.credentials.createInsecure()) as grpc.Client;
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  const agent = {
    agent_id: agentId,
    name: agentId,
    description: 'Store failure e2e agent.',
    capabilities: ['e2e'],
    communication_class: 'STANDARD',
    modalities_supported: ['application/json'],
    reasoning_connectors: ['sw4rm://reasoning/none'],
  };
  return new Promise((resolve) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    (client as any).RegisterAgent(
      { agent },
      metadata,
      (err: grpc.ServiceError | null, response: { accepted: boolean }) => {
        client.close();
        resolve(err ? { code: err.code, details: err.details } : { accepted: response.accepted });
      },
    );
  });
}

describe('a store that cannot commit (code-server + Chromium)', function () {
  let harness: CodeServerHarness | undefined;
  let dataDir: string;
  let port: number;

  before(async function () {
    dataDir = makeTempDir('sw4rm-e2e-store-failure-');
    poisonedStore(dataDir);
    ({ harness, port } = await startWithCoordinator({
      userSettings: { 'sw4rm.dataDir': dataDir },
      name: 'sw4rm-store-failure-e2e',
      waitForCoordinator: false,
    }));
  });

  after(async function () {
    await disposeAfter(harness, this.currentTest, 'store-failure');
    removeTempDir(dataDir);
  });

  it('stops serving, says why, and offers Restart Coordinator, which recovers from the store', async function () {
    await harness!.waitForText(
      (t) => t.includes(`SW4RM :${port}`),
      60_000,
      () => harness!.statusBarText(),
    );
    // The terminals' enrolment credential: it registers every agent of this test.
    const env = await harness!.terminalEnvironment();
    const address = env.SW4RM_REGISTRY_ADDR;
    assert.deepEqual(await register(address, env.SW4RM_TOKEN, 'e2e-kept'), { accepted: true });

    const refused = await register(address, env.SW4RM_TOKEN, POISON_AGENT);
    assert.equal(refused.code, grpc.status.INTERNAL, JSON.stringify(refused));
    assert.match(refused.details ?? '', /could not commit/);

    await harness!.waitForText((t) => t.includes('could not commit') && t.includes('Restart Coordinator'), 30_000);
    await harness!.waitForText(
      (t) => t.includes('SW4RM stopped'),
      30_000,
      () => harness!.statusBarText(),
    );
    await harness!.screenshot('store-failure');

    await harness!.page
      .locator('.notification-toast .monaco-button', { hasText: /^Restart Coordinator$/ })
      .first()
      .click();
    await harness!.waitForText(
      (t) => t.includes(`SW4RM :${port} · 1 agent`),
      60_000,
      () => harness!.statusBarText(),
    );
    const after = await harness!.terminalEnvironment();
    assert.deepEqual(
      await register(after.SW4RM_REGISTRY_ADDR, after.SW4RM_TOKEN, 'e2e-after'),
      { accepted: true },
      'after the restart it serves again, from the store: e2e-kept is there, e2e-poison is not',
    );
    await harness!.waitForText(
      (t) => t.includes(`SW4RM :${port} · 2 agents`),
      30_000,
      () => harness!.statusBarText(),
    );
  });
});
