/**
 * A minimal SW4RM agent written against the canonical protos only (no coordinator code).
 * It registers, heartbeats, streams its inbox (confirming each delivery, acknowledging each message RECEIVED and
 * FULFILLED, answering the coordinator's heartbeats), and deregisters on Ctrl+C.
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

interface Envelope {
  message_id: string;
  producer_id: string;
  message_type: string;
  payload: Buffer;
}

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

  let sequence = 0;
  const send = (messageType: string, payload: Record<string, unknown>, to?: string) => {
    const bytes = Buffer.from(JSON.stringify(payload));
    const md = metadata();
    if (to) md.set('sw4rm-to', to);
    return unary<unknown, { accepted: boolean; reason: string }>(router, 'SendMessage', {
      msg: {
        message_id: randomUUID(), producer_id: agentId, correlation_id: randomUUID(), sequence_number: String(++sequence),
        message_type: messageType, content_type: 'application/json', content_length: String(bytes.length), payload: bytes,
      },
    }).catch((err: Error) => ({ accepted: false, reason: err.message }));
  };

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const inbox = (router as any).StreamIncoming({ agent_id: agentId }, metadata()) as grpc.ClientReadableStream<{ msg: Envelope; seq: string }>;
  inbox.on('data', async (item) => {
    const { msg, seq } = item;
    // Confirm the delivery, so the router does not send it again.
    await unary(router, 'AckDelivery', { agent_id: agentId, seq, message_id: msg.message_id }).catch(() => undefined);
    if (msg.message_type === 'HEARTBEAT') {
      await send('HEARTBEAT', { kind: 'heartbeat_reply', agent_id: agentId }, 'coordinator');
      return;
    }
    console.log(`inbox #${seq}: ${msg.message_type} from ${msg.producer_id}: ${Buffer.from(msg.payload).toString('utf8').slice(0, 200)}`);
    if (msg.message_type === 'ACKNOWLEDGEMENT' || msg.message_type === 'NOTIFICATION') return;
    // A real agent does its work between RECEIVED and FULFILLED.
    for (const stage of ['RECEIVED', 'FULFILLED']) {
      const { accepted, reason } = await send('ACKNOWLEDGEMENT', { ack_for_message_id: msg.message_id, ack_stage: stage, note: 'example agent' });
      if (!accepted) console.error(`ACK ${stage} refused: ${reason}`);
    }
  });
  inbox.on('error', (err: grpc.ServiceError) => {
    if (err.code !== grpc.status.CANCELLED) console.error(`inbox stream failed: ${err.message}`);
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
