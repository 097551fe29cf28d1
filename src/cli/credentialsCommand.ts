import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
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
import { Registry } from '../core/registry/registry';
import { StoreOpenError } from '../core/store/store';
import { agentEnvironment } from '../server/agentEnvironment';
import { readEndpoint } from '../server/endpoint';
import { LOADER_OPTIONS, serviceDefinition } from '../server/protos';
import { RegistryServiceAdapter } from '../server/services/registryService';
import {
  CREDENTIALS_SERVICE,
  credentialInfo,
  loadCredentialsDefinition,
  type CredentialMessage,
} from '../server/services/credentialsService';

export const CREDENTIALS_USAGE = `Usage: sw4rm-coordinator credentials [--data-dir <folder>] (--agent <id> [--label <text>] [--register [--name <text>]
         [--capability <c>]… [--description <text>]] | --list | --revoke <credential id>)

  --agent <id>      mint a credential for agent <id> and print its environment (SW4RM_AGENT_ID, SW4RM_TOKEN)
  --register        also register agent <id> with that credential (RegisterAgent: the registry's rules; registering an
                    id again updates it): an agent that talks only through the MCP bridge needs nothing else. Refused,
                    nothing is registered and the credential is not left active (the command exits 1 with the reason)
  --name, --capability (repeatable), --description   the agent's descriptor for --register
  --list            list every credential (revoked ones included); never a secret
  --revoke <id>     revoke a credential: calls with it are refused, streams opened with it end
  --data-dir <dir>  the coordinator's data folder (default .sw4rm)

While the coordinator of that data folder runs, the command asks it (operator token from <data folder>/token;
--register calls RegisterAgent with the agent's new credential); otherwise it opens the store itself.
`;

/** What --register sends as the agent's descriptor (the rest is the registry's defaults). */
interface Registration {
  readonly name?: string;
  readonly description?: string;
  readonly capabilities: readonly string[];
}

interface Request {
  readonly dataDir: string;
  readonly action:
    | { kind: 'mint'; agentId: string; label?: string; register?: Registration }
    | { kind: 'list' }
    | { kind: 'revoke'; id: string };
}

/** `sw4rm-coordinator credentials …`: answers the exit status; output goes to `out`, problems to `err`. */
export async function credentialsCommand(
  argv: readonly string[],
  out: (text: string) => void,
  err: (text: string) => void,
): Promise<number> {
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
    const answer = (endpoint && (await viaCoordinator(request, endpoint, by))) ?? viaStore(request, by);
    out(render(request, answer));
    return 0;
  } catch (problem) {
    err(`sw4rm-coordinator credentials: ${(problem as Error).message}\n`);
    return 1;
  }
}

/** A mint, with --register the registry's answer too (its reason: '' or the warnings it accepted). */
type Minted = MintedCredential & { readonly registered?: string };
type Answer = Minted | CredentialInfo[] | CredentialInfo;

function parse(argv: readonly string[]): Request {
  let dataDir = '.sw4rm';
  let action: Request['action'] | undefined;
  let label: string | undefined;
  let register = false;
  const descriptor: { name?: string; description?: string; capabilities: string[] } = { capabilities: [] };
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
    else if (flag === '--register') register = true;
    else if (flag === '--name') descriptor.name = value(i++, flag);
    else if (flag === '--description') descriptor.description = value(i++, flag);
    else if (flag === '--capability') descriptor.capabilities.push(value(i++, flag));
    else if (flag === '--list') set({ kind: 'list' });
    else if (flag === '--revoke') set({ kind: 'revoke', id: value(i++, flag) });
    else throw new Error(`unknown option ${flag}`);
  }
  if (!action) throw new Error('give one of --agent, --list, --revoke');
  const describes =
    descriptor.name !== undefined || descriptor.description !== undefined || descriptor.capabilities.length > 0;
  if (action.kind !== 'mint' && (register || label !== undefined))
    throw new Error('--register and --label go with --agent <id>');
  if (!register && describes) throw new Error('--name, --capability and --description go with --register');
  if (action.kind === 'mint')
    action = { ...action, ...(label === undefined ? {} : { label }), ...(register ? { register: descriptor } : {}) };
  return { dataDir: path.resolve(dataDir), action };
}

const REGISTRY_SERVICE = RegistryServiceAdapter.serviceName;

/** A unary client of one service at `address`, every call with `token` (when given) and a 5 s deadline. */
function unaryClient(address: string, definition: grpc.ServiceDefinition, name: string, token: string | undefined) {
  const Client = grpc.makeClientConstructor(definition, name);
  const client = new Client(address, grpc.credentials.createInsecure()) as grpc.Client &
    Record<string, (...args: unknown[]) => unknown>;
  const metadata = new grpc.Metadata();
  if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
  return {
    call: <T>(method: string, body: object) =>
      new Promise<T>((resolve, reject) => {
        client[method](body, metadata, { deadline: Date.now() + 5_000 }, (e: grpc.ServiceError | null, r: T) =>
          e ? reject(e) : resolve(r),
        );
      }),
    close: () => client.close(),
  };
}

/** The failure a gRPC error stands for: its details (INVALID_ARGUMENT without a code: VALIDATION_ERROR). */
function failure(error: grpc.ServiceError): Error {
  const details = error.details || error.message;
  return new Error(
    error.code === grpc.status.INVALID_ARGUMENT && !/^[A-Z_]+: /.test(details)
      ? `VALIDATION_ERROR: ${details}`
      : details,
  );
}

/** Asks the running coordinator (operator-only RPCs); undefined when none answers at the recorded address. */
async function viaCoordinator(
  request: Request,
  endpoint: { host: string; port: number },
  by: string,
): Promise<Answer | undefined> {
  const protos = path.join(__dirname, '..', 'protos');
  const address = agentEnvironment(endpoint.host, endpoint.port, undefined).SW4RM_REGISTRY_ADDR;
  const tokenFile = path.join(request.dataDir, TOKEN_FILE_NAME);
  const operatorToken = fs.existsSync(tokenFile) ? fs.readFileSync(tokenFile, 'utf8').trim() : undefined;
  const operator = unaryClient(
    address,
    loadCredentialsDefinition(protos)[CREDENTIALS_SERVICE] as grpc.ServiceDefinition,
    CREDENTIALS_SERVICE,
    operatorToken,
  );
  const { action } = request;
  let minted: MintedCredential;
  let registering = false;
  try {
    if (action.kind === 'list')
      return (await operator.call<{ credentials: CredentialMessage[] }>('ListCredentials', {})).credentials.map(
        credentialInfo,
      );
    if (action.kind === 'revoke')
      return credentialInfo(
        (await operator.call<{ credential: CredentialMessage }>('RevokeCredential', { credential_id: action.id, by }))
          .credential,
      );
    const r = await operator.call<{ credential: CredentialMessage; token: string }>('MintAgentCredential', {
      agent_id: action.agentId,
      label: action.label ?? '',
      by,
    });
    minted = { credential: credentialInfo(r.credential), token: r.token };
    if (action.register === undefined) return minted;
    registering = true;
  } catch (e) {
    const error = e as grpc.ServiceError;
    if (error.code === grpc.status.UNAVAILABLE || error.code === grpc.status.DEADLINE_EXCEEDED) return undefined; // not running: the store
    throw failure(error);
  } finally {
    if (!registering) operator.close();
  }
  try {
    return {
      ...minted,
      registered: await registerAgent(protos, address, minted.token, action.agentId, action.register!),
    };
  } catch (problem) {
    // Refused (or not answered): the agent is not registered, and its new credential must not stay active.
    const id = minted.credential.id;
    const revoked = await operator.call('RevokeCredential', { credential_id: id, by }).then(
      () => true,
      () => false,
    );
    throw new Error(
      `${(problem as Error).message} (nothing registered; ${
        revoked
          ? `the credential ${id} minted for it is revoked)`
          : `the credential ${id} minted for it could not be revoked: run --revoke ${id})`
      }`,
    );
  } finally {
    operator.close();
  }
}

/** RegistryService.RegisterAgent with the agent's own credential (its door: the identity rules apply); answers the reason of an acceptance. */
async function registerAgent(
  protos: string,
  address: string,
  token: string,
  agentId: string,
  registration: Registration,
): Promise<string> {
  const definition = protoLoader.loadSync('registry.proto', { ...LOADER_OPTIONS, includeDirs: [protos] });
  const registry = unaryClient(address, serviceDefinition(definition, REGISTRY_SERVICE), REGISTRY_SERVICE, token);
  try {
    const agent = {
      agent_id: agentId,
      name: registration.name ?? '',
      description: registration.description ?? '',
      capabilities: registration.capabilities,
    };
    const answer = await registry.call<{ accepted: boolean; reason: string }>('RegisterAgent', { agent });
    if (!answer.accepted) throw new Error(answer.reason);
    return answer.reason;
  } catch (e) {
    throw e instanceof Error && !('code' in e) ? e : failure(e as grpc.ServiceError);
  } finally {
    registry.close();
  }
}

/** No coordinator runs: opens the store (it refuses if one does after all) and acts on it directly. */
function viaStore(request: Request, by: string): Answer {
  let store: CoordinatorStore;
  try {
    store = CoordinatorStore.open(request.dataDir, { lockWaitMs: 0 });
  } catch (e) {
    if (e instanceof StoreOpenError && e.reason === 'locked') {
      throw new Error(
        `the coordinator of ${request.dataDir} runs but did not answer at the address in endpoint.json; try again`,
      );
    }
    throw e;
  }
  const log = new EventLog(store, systemClock);
  const { action } = request;
  // Only a registration asks the registry (which reads the agents on opening); minting, listing and revoking do not.
  const registry =
    action.kind === 'mint' && action.register !== undefined ? new Registry(store, log, systemClock) : undefined;
  const credentials = new Credentials(store, registry ?? OFFLINE_DIRECTORY, log, systemClock, randomIds);
  try {
    const ctx = { correlationId: randomIds.uuid(), principal: 'operator' };
    if (action.kind === 'list') return credentials.list();
    if (action.kind === 'revoke') return credentials.revoke(action.id, by, ctx);
    const label = action.label ?? `minted by ${by} for agent ${action.agentId}`;
    if (registry === undefined || action.register === undefined)
      return credentials.mintAgent(action.agentId, by, label, ctx);
    const { register } = action;
    // The registration and the credential are one transaction: refused (logged as the registry logs it), nothing is minted.
    const done = store.transaction((): Minted | { refused: string } => {
      const result = registry.register(
        {
          agentId: action.agentId,
          name: register.name,
          description: register.description,
          capabilities: register.capabilities,
        },
        ctx,
      );
      return result.accepted
        ? { ...credentials.mintAgent(action.agentId, by, label, ctx), registered: result.reason }
        : { refused: result.reason };
    });
    if ('refused' in done) throw new Error(`${done.refused} (nothing registered, no credential minted)`);
    return done;
  } catch (e) {
    if (e instanceof CredentialError)
      throw new Error(
        e.code === 'invalid' && !e.message.startsWith('VALIDATION_ERROR: ')
          ? `VALIDATION_ERROR: ${e.message}`
          : e.message,
      );
    throw e;
  } finally {
    credentials.dispose();
    registry?.dispose();
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
    const minted = answer as Minted;
    const registered =
      minted.registered === undefined
        ? ''
        : `# agent ${action.agentId} registered (${minted.registered || 'accepted'})\n`;
    return (
      `${registered}# credential ${minted.credential.id} for agent ${action.agentId} (shown once; revoke with --revoke ${minted.credential.id})\n` +
      `export SW4RM_AGENT_ID=${action.agentId}\nexport SW4RM_TOKEN=${minted.token}\n`
    );
  }
  const rows: CredentialInfo[] = Array.isArray(answer) ? answer : [answer as CredentialInfo];
  const time = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());
  return (
    rows
      .map((c) =>
        [
          c.id,
          c.kind,
          c.agentId ?? '-',
          c.revokedAt === null ? 'active' : `revoked ${time(c.revokedAt)}`,
          `created ${time(c.createdAt)} by ${c.createdBy}`,
          `last used ${time(c.lastUsedAt)}`,
          JSON.stringify(c.label),
        ].join('\t'),
      )
      .join('\n') + (rows.length ? '\n' : '')
  );
}
