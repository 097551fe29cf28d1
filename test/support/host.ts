import { CoordinatorHost, type HostOptions } from '../../src/server/host';
import { CoordinatorClients } from './clients';
import { PROTOS_DIR } from './paths';
import { makeTempDir, removeTempDir } from './tempDir';

/** Starts a real coordinator on 127.0.0.1, any free port, token auth, unless told otherwise. */
export function startHost(dataDir: string, overrides: Partial<HostOptions> = {}): Promise<CoordinatorHost> {
  return CoordinatorHost.start({
    dataDir,
    protosDir: PROTOS_DIR,
    host: '127.0.0.1',
    port: 0,
    auth: 'token',
    bridgePort: 0,
    ...overrides,
  });
}

/** Clients connected to `host` carrying its token. */
export function clientsFor(host: CoordinatorHost): CoordinatorClients {
  return new CoordinatorClients(`127.0.0.1:${host.port}`, host.token);
}

/** Stops a host quickly: the tests close their clients first, so nothing is left in flight. */
export async function stopHost(host: CoordinatorHost | undefined): Promise<void> {
  if (host) await host.stop(500);
}

/** A host per test: a fresh data folder, a started coordinator and connected clients, torn down afterwards. */
export interface HostFixture {
  dataDir: string;
  host: CoordinatorHost;
  clients: CoordinatorClients;
}

/** Registers beforeEach/afterEach hooks that give every test of the suite its own running coordinator. */
export function useHost(prefix: string, overrides: Partial<HostOptions> = {}): HostFixture {
  const fixture = {} as HostFixture;
  beforeEach(async () => {
    fixture.dataDir = makeTempDir(prefix);
    fixture.host = await startHost(fixture.dataDir, overrides);
    fixture.clients = clientsFor(fixture.host);
  });
  afterEach(async () => {
    fixture.clients.close();
    await stopHost(fixture.host);
    removeTempDir(fixture.dataDir);
  });
  return fixture;
}
