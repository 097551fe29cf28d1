import * as grpc from '@grpc/grpc-js';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TOKEN_FILE_NAME } from '../core/auth/token';
import { systemClock } from '../core/clock';
import { CoordinatorStore } from '../core/coordinatorStore';
import { CredentialError, Credentials } from '../core/credentials/credentials';
import type { CredentialInfo, MintedCredential } from '../core/credentials/model';
import { Emitter } from '../core/events';
import { randomIds } from '../core/ids';
import { EventLog } from '../core/log/eventLog';
import type { AgentDirectory } from '../core/registry/model';
import { StoreOpenError } from '../core/store/store';
import { agentEnvironment } from '../server/agentEnvironment';
import { readEndpoint } from '../server/endpoint';
import {
  CREDENTIALS_SERVICE, credentialInfo, loadCredentialsDefinition, type CredentialMessage,
} from '../server/services/credentialsService';

export const CREDENTIALS_USAGE = `Usage: sw4rm-coordinator credentials [--data-dir <folder>] (--agent <id> [--label <text>] | --list | --revoke <credential id>)

  --agent <id>      mint a credential for agent <id> and print its environment (SW4RM_AGENT_ID, SW4RM_TOKEN)
  --list            list every credential (revoked ones included); never a secret
  --revoke <id>     revoke a credential: calls with it are refused, streams opened with it end
  --data-dir <dir>  the coordinator's data folder (default .sw4rm)

While the coordinator of that data folder runs, the command asks it (operator token from <data folder>/token);
otherwise it opens the store itself.
`;

interface Request {
  readonly dataDir: string;
  readonly action: { kind: 'mint'; agentId: string; label?: string } | { kind: 'list' } | { kind: 'revoke'; id: string };
}

/** `sw4rm-coordinator credentials …`: answers the exit status; output goes to `out`, problems to `err`. */
export async function credentialsCommand(argv: readonly string[], out: (text: string) => void, err: (text: string) => void): Promise<number> {
  let request: Request;
  try {
    request = parse(argv);
  } catch (problem) {
    err(`sw4rm-coordinator credentials: ${(problem as Error).message}\n\n${CREDENTIALS_USAGE}`);
    return 2;
  }
  const by = `cli:${os.userInfo().username}`;
  try {
    const endpoint = readEndpoint(request.dataDir);
    const answer = (endpoint && await viaCoordinator(request, endpoint, by)) ?? viaStore(request, by);
    out(render(request, answer));
    return 0;
  } catch (problem) {
    err(`sw4rm-coordinator credentials: ${(problem as Error).message}\n`);
    return 1;
  }
}

type Answer = MintedCredential | CredentialInfo[] | CredentialInfo;

function parse(argv: readonly string[]): Request {
  let dataDir = '.sw4rm';
  let action: Request['action'] | undefined;
  let label: string | undefined;
  const value = (i: number, flag: string) => {
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) throw new Error(`${flag} needs a value`);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const set = (next: Request['action']) => {
      if (action) throw new Error('give one of --agent, --list, --revoke');
      action = next;
    };
    if (flag === '--data-dir') dataDir = value(i++, flag);
    else if (flag === '--agent') set({ kind: 'mint', agentId: value(i++, flag) });
    else if (flag === '--label') label = value(i++, flag);
    else if (flag === '--list') set({ kind: 'list' });
    else if (flag === '--revoke') set({ kind: 'revoke', id: value(i++, flag) });
    else throw new Error(`unknown option ${flag}`);
  }
  if (!action) throw new Error('give one of --agent, --list, --revoke');
  if (action.kind === 'mint' && label !== undefined) action = { ...action, label };
  return { dataDir: path.resolve(dataDir), action };
}

/** Asks the running coordinator (operator-only RPC); undefined when none answers at the recorded address. */
async function viaCoordinator(request: Request, endpoint: { host: string; port: number }, by: string): Promise<Answer | undefined> {
  const definition = loadCredentialsDefinition(path.join(__dirname, '..', 'protos'));
  const Client = grpc.makeClientConstructor(definition[CREDENTIALS_SERVICE] as grpc.ServiceDefinition, CREDENTIALS_SERVICE);
  const address = agentEnvironment(endpoint.host, endpoint.port, undefined).SW4RM_REGISTRY_ADDR;
  const client = new Client(address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, Function>;
  const metadata = new grpc.Metadata();
  const tokenFile = path.join(request.dataDir, TOKEN_FILE_NAME);
  if (fs.existsSync(tokenFile)) metadata.set('authorization', `Bearer ${fs.readFileSync(tokenFile, 'utf8').trim()}`);
  const call = <T>(method: string, body: object) => new Promise<T>((resolve, reject) => {
    client[method](body, metadata, { deadline: Date.now() + 5_000 }, (e: grpc.ServiceError | null, r: T) => (e ? reject(e) : resolve(r)));
  });
  try {
    const { action } = request;
    if (action.kind === 'mint') {
      const r = await call<{ credential: CredentialMessage; token: string }>('MintAgentCredential', { agent_id: action.agentId, label: action.label ?? '', by });
      return { credential: credentialInfo(r.credential), token: r.token };
    }
    if (action.kind === 'list') return (await call<{ credentials: CredentialMessage[] }>('ListCredentials', {})).credentials.map(credentialInfo);
    return credentialInfo((await call<{ credential: CredentialMessage }>('RevokeCredential', { credential_id: action.id, by })).credential);
  } catch (e) {
    const error = e as grpc.ServiceError;
    if (error.code === grpc.status.UNAVAILABLE || error.code === grpc.status.DEADLINE_EXCEEDED) return undefined; // not running: the store
    throw new Error(error.details || error.message);
  } finally {
    client.close();
  }
}

/** No coordinator runs: opens the store (it refuses if one does after all) and acts on it directly. */
function viaStore(request: Request, by: string): Answer {
  let store: CoordinatorStore;
  try {
    store = CoordinatorStore.open(request.dataDir, { lockWaitMs: 0 });
  } catch (e) {
    if (e instanceof StoreOpenError && e.reason === 'locked') {
      throw new Error(`the coordinator of ${request.dataDir} runs but did not answer at the address in endpoint.json; try again`);
    }
    throw e;
  }
  const log = new EventLog(store, systemClock);
  const credentials = new Credentials(store, OFFLINE_DIRECTORY, log, systemClock, randomIds);
  try {
    const ctx = { correlationId: randomIds.uuid(), principal: 'operator' };
    const { action } = request;
    if (action.kind === 'mint') return credentials.mintAgent(action.agentId, by, action.label ?? `minted by ${by} for agent ${action.agentId}`, ctx);
    if (action.kind === 'list') return credentials.list();
    return credentials.revoke(action.id, by, ctx);
  } catch (e) {
    if (e instanceof CredentialError) throw new Error(e.message);
    throw e;
  } finally {
    credentials.dispose();
    log.dispose();
    store.close();
  }
}

/** Minting, listing and revoking never ask who is registered (only enrolment does, in a running coordinator). */
const OFFLINE_DIRECTORY: AgentDirectory = {
  get: () => undefined,
  list: () => [],
  recordLiveness: () => false,
  onDidChange: new Emitter<never>().event,
};

function render(request: Request, answer: Answer): string {
  const { action } = request;
  if (action.kind === 'mint') {
    const minted = answer as MintedCredential;
    return `# credential ${minted.credential.id} for agent ${action.agentId} (shown once; revoke with --revoke ${minted.credential.id})\n` +
      `export SW4RM_AGENT_ID=${action.agentId}\nexport SW4RM_TOKEN=${minted.token}\n`;
  }
  const rows: CredentialInfo[] = Array.isArray(answer) ? answer : [answer as CredentialInfo];
  const time = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());
  return rows.map((c) => [c.id, c.kind, c.agentId ?? '-', c.revokedAt === null ? 'active' : `revoked ${time(c.revokedAt)}`,
    `created ${time(c.createdAt)} by ${c.createdBy}`, `last used ${time(c.lastUsedAt)}`, JSON.stringify(c.label)].join('\t')).join('\n') + (rows.length ? '\n' : '');
}
