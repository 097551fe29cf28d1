/**
 * A minimal SW4RM agent written against the canonical protos only (no coordinator code).
 * It registers, heartbeats, streams its inbox when the router offers one, and deregisters on Ctrl+C.
 *
 * Environment: SW4RM_REGISTRY_ADDR, SW4RM_ROUTER_ADDR, SW4RM_TOKEN (from "SW4RM: Copy Agent Environment"
 * or the output of `npm start`), and optionally SW4RM_AGENT_ID, SW4RM_AGENT_NAME, SW4RM_HEARTBEAT_MS,
 * SW4RM_PROTOS_DIR.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';

const env = process.env;
const protosDir = env.SW4RM_PROTOS_DIR ?? path.join(__dirname, '..', 'protos');
const agentId = env.SW4RM_AGENT_ID ?? `example-agent-${process.pid}`;
const heartbeatMs = Number(env.SW4RM_HEARTBEAT_MS ?? 5000);

function required(name: string): string {
  const value = env[name];
  if (!value) {
    console.error(`${name} is not set. Copy the agent environment from the editor (SW4RM: Copy Agent Environment) or from \`npm start\`.`);
    process.exit(2);
  }
  return value;
}

const definition = protoLoader.loadSync(['registry.proto', 'router.proto'], {
  includeDirs: [protosDir], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
});
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const sw4rm = (grpc.loadPackageDefinition(definition) as any).sw4rm;

function metadata(): grpc.Metadata {
  const md = new grpc.Metadata();
  if (env.SW4RM_TOKEN) md.set('authorization', `Bearer ${env.SW4RM_TOKEN}`);
  md.set('x-correlation-id', randomUUID());
  return md;
}

function unary<Req, Res>(client: grpc.Client, method: string, request: Req): Promise<Res> {
  return new Promise((resolve, reject) => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    (client as any)[method](request, metadata(), (err: grpc.ServiceError | null, response: Res) => (err ? reject(err) : resolve(response)));
  });
}

async function main(): Promise<void> {
  const credentials = grpc.credentials.createInsecure();
  const registry = new sw4rm.registry.RegistryService(required('SW4RM_REGISTRY_ADDR'), credentials) as grpc.Client;
  const router = new sw4rm.router.RouterService(env.SW4RM_ROUTER_ADDR ?? required('SW4RM_REGISTRY_ADDR'), credentials) as grpc.Client;

  const registered = await unary<unknown, { accepted: boolean; reason: string }>(registry, 'RegisterAgent', {
    agent: {
      agent_id: agentId,
      name: env.SW4RM_AGENT_NAME ?? 'Example agent',
      description: 'Registers, heartbeats and listens to its inbox.',
      capabilities: ['example', 'echo'],
      communication_class: 'STANDARD',
      modalities_supported: ['application/json', 'text/plain'],
      reasoning_connectors: ['sw4rm://reasoning/none'],
    },
  });
  if (!registered.accepted) {
    console.error(`registration refused: ${registered.reason}`);
    process.exit(1);
  }
  console.log(`registered as ${agentId}${registered.reason ? ` (${registered.reason})` : ''}`);

  let state = 'RUNNABLE';
  const beat = async () => {
    try {
      const { ok } = await unary<unknown, { ok: boolean }>(registry, 'Heartbeat', { agent_id: agentId, state, health: { pid: String(process.pid) } });
      if (!ok) console.error('heartbeat refused: the coordinator does not know this agent (was it deregistered?)');
    } catch (err) {
      console.error(`heartbeat failed: ${(err as Error).message}`);
    }
  };
  await beat();
  const timer = setInterval(beat, heartbeatMs);

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const inbox = (router as any).StreamIncoming({ agent_id: agentId }, metadata()) as grpc.ClientReadableStream<{ msg: unknown; seq: string }>;
  inbox.on('data', (item) => console.log(`inbox #${item.seq}: ${JSON.stringify(item.msg)}`));
  inbox.on('error', (err: grpc.ServiceError) => {
    if (err.code === grpc.status.UNIMPLEMENTED) console.log(`inbox not available yet: ${err.details}`);
    else if (err.code !== grpc.status.CANCELLED) console.error(`inbox stream failed: ${err.message}`);
  });

  let leaving = false;
  const leave = async (signal: string) => {
    if (leaving) return;
    leaving = true;
    state = 'SHUTTING_DOWN';
    clearInterval(timer);
    inbox.cancel();
    try {
      const { ok } = await unary<unknown, { ok: boolean }>(registry, 'DeregisterAgent', { agent_id: agentId, reason: `${signal} received` });
      console.log(ok ? 'deregistered' : 'deregister refused: unknown agent');
    } catch (err) {
      console.error(`deregister failed: ${(err as Error).message}`);
    }
    registry.close();
    router.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void leave('SIGINT'));
  process.on('SIGTERM', () => void leave('SIGTERM'));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
