/* eslint-disable @typescript-eslint/no-explicit-any -- the canonical protos are loaded at run time (proto-loader): their clients are untyped */
/**
 * Sends one text message to an agent and prints what comes back: the recipient's ACKs and its reply.
 *
 *   npm run example:send -- <agent-id> "hello"
 *
 * Only registered agents may send, so the sender registers itself (as example-sender-<pid>, or SW4RM_SENDER_ID),
 * streams its own inbox (where ACKs and replies arrive), sends a DATA message with the JSON payload
 * {"text": "hello"} to <agent-id>, acknowledges the reply, and deregisters. It exits 0 once the reply came and the
 * message was FULFILLED, 1 when the message was refused or failed, or nothing came within SW4RM_SEND_TIMEOUT_MS
 * (default 15000). Same environment as examples/agent.ts.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';

const [recipient, ...words] = process.argv.slice(2);
if (!recipient || words.length === 0) {
  console.error('usage: npm run example:send -- <agent-id> "text"');
  process.exit(2);
}
const text = words.join(' ');
const senderId = process.env.SW4RM_SENDER_ID || `example-sender-${process.pid}`;
const timeoutMs = Number(process.env.SW4RM_SEND_TIMEOUT_MS || 15_000);
const address = process.env.SW4RM_ROUTER_ADDR || process.env.SW4RM_REGISTRY_ADDR;
if (!address) {
  console.error(
    'SW4RM_ROUTER_ADDR is not set. Copy the agent environment from the editor (SW4RM: Copy Agent Environment) or from `npm start`.',
  );
  process.exit(2);
}

const packages = grpc.loadPackageDefinition(
  protoLoader.loadSync(['registry.proto', 'router.proto'], {
    includeDirs: [process.env.SW4RM_PROTOS_DIR || path.join(__dirname, '..', 'protos')],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  }),
) as any;
const registry: grpc.Client = new packages.sw4rm.registry.RegistryService(
  process.env.SW4RM_REGISTRY_ADDR || address,
  grpc.credentials.createInsecure(),
);
const router: grpc.Client = new packages.sw4rm.router.RouterService(address, grpc.credentials.createInsecure());

interface Envelope {
  message_id: string;
  producer_id: string;
  correlation_id: string;
  message_type: string;
  payload: Buffer;
}

function metadata(to?: string): grpc.Metadata {
  const md = new grpc.Metadata();
  if (process.env.SW4RM_TOKEN) md.set('authorization', `Bearer ${process.env.SW4RM_TOKEN}`);
  if (to) md.set('sw4rm-to', to);
  return md;
}

function rpc<T>(client: grpc.Client, method: string, request: unknown, to?: string): Promise<T> {
  return new Promise((resolve, reject) => {
    (client as any)[method](request, metadata(to), { deadline: Date.now() + 10_000 }, (err: Error | null, res: T) =>
      err ? reject(err) : resolve(res),
    );
  });
}

let sequence = Date.now() * 1000;

function envelope(messageType: string, payload: object, correlationId: string) {
  const bytes = Buffer.from(JSON.stringify(payload));
  return {
    message_id: randomUUID(),
    producer_id: senderId,
    correlation_id: correlationId,
    sequence_number: String(++sequence),
    message_type: messageType,
    content_type: 'application/json',
    content_length: String(bytes.length),
    payload: bytes,
  };
}

async function post(messageType: string, payload: object, correlationId: string, to?: string): Promise<string> {
  const msg = envelope(messageType, payload, correlationId);
  const { accepted, reason } = await rpc<{ accepted: boolean; reason: string }>(router, 'SendMessage', { msg }, to);
  if (!accepted) throw new Error(`${messageType} refused: ${reason}`);
  return msg.message_id;
}

async function main(): Promise<number> {
  const registered = await rpc<{ accepted: boolean; reason: string }>(registry, 'RegisterAgent', {
    agent: {
      agent_id: senderId,
      name: 'Example sender',
      modalities_supported: ['application/json'],
      reasoning_connectors: ['sw4rm://reasoning/none'],
    },
  });
  if (!registered.accepted) throw new Error(`registration refused: ${registered.reason}`);

  const correlationId = randomUUID();
  let sentId = '';
  let replied = false;
  let fulfilled = false;
  let failure = '';
  const inbox: grpc.ClientReadableStream<{ msg: Envelope; seq: string }> = (router as any).StreamIncoming(
    { agent_id: senderId },
    metadata(),
  );
  inbox.on('error', () => undefined);
  inbox.on(
    'data',
    ({ msg, seq }) =>
      void (async () => {
        await rpc(router, 'AckDelivery', { agent_id: senderId, seq, message_id: msg.message_id }).catch(
          () => undefined,
        );
        const body = JSON.parse(Buffer.from(msg.payload).toString('utf8') || 'null');
        if (msg.message_type === 'ACKNOWLEDGEMENT' && body?.ack_for_message_id === sentId) {
          console.log(`${msg.producer_id} acknowledged: ${body.ack_stage}${body.note ? ` (${body.note})` : ''}`);
          if (body.ack_stage === 'FULFILLED') fulfilled = true;
          else if (!['RECEIVED', 'READ'].includes(body.ack_stage))
            failure = `${body.ack_stage} ${body.error_code ?? ''} ${body.note ?? ''}`.trim();
        } else if (msg.message_type === 'DATA' && msg.correlation_id === correlationId) {
          console.log(`reply from ${msg.producer_id}: ${body?.text ?? JSON.stringify(body)}`);
          await post('ACKNOWLEDGEMENT', { ack_for_message_id: msg.message_id, ack_stage: 'RECEIVED' }, correlationId);
          await post('ACKNOWLEDGEMENT', { ack_for_message_id: msg.message_id, ack_stage: 'FULFILLED' }, correlationId);
          replied = true;
        }
      })().catch((err: Error) => {
        failure = err.message;
      }),
  );

  try {
    sentId = await post('DATA', { text }, correlationId, recipient);
    console.log(`sent to ${recipient}: ${text}`);
    const deadline = Date.now() + timeoutMs;
    while (!(replied && fulfilled) && !failure && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    if (failure) console.error(`failed: ${failure}`);
    else if (!(replied && fulfilled))
      console.error(`no ${replied ? 'FULFILLED acknowledgement' : 'reply'} within ${timeoutMs} ms`);
    return replied && fulfilled && !failure ? 0 : 1;
  } finally {
    inbox.cancel();
    await rpc(registry, 'DeregisterAgent', { agent_id: senderId, reason: 'message sent' }).catch(() => undefined);
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error & { details?: string }) => {
    console.error(`failed: ${err.details ?? err.message}`);
    process.exit(1);
  },
);
