/* eslint-disable @typescript-eslint/no-explicit-any -- the canonical protos are loaded at run time (proto-loader): their clients are untyped */
/**
 * An example tool provider (RFC §18), written against the canonical protos only (no coordinator code), to copy as a start.
 * README: "Write a tool provider".
 *
 *   npm run example:provider                # the provider: registers, streams its inbox, RegisterProvider, answers TOOL_CALLs
 *   npm run example:provider -- --call      # the same provider, which then calls its own tools through the coordinator:
 *                                           # ToolService.Call, a refused call, CallStream, Cancel mid-stream, a TOOL_CALL envelope
 *
 * The agent registers (RegistryService.RegisterAgent), opens its inbox (RouterService.StreamIncoming), then registers as a
 * provider (ConnectorService.RegisterProvider, provider_id = its agent id) with two tools:
 * - `word_count` {text} → {words, characters}: unary, idempotent (the coordinator may retry it), input and output schemas.
 * - `count_slowly` {n} → frames {i} one per 200 ms, then {counted}: streams; stops on a CONTROL `cancel_tool_call`.
 * The coordinator sends it TOOL_CALL envelopes (correlation_id = call_id, JSON `{call_id, tool_name, args, stream, attempt,
 * execution_policy, …}`); it ACKs them like any message and answers with TOOL_RESULT envelopes to `coordinator` (one per
 * frame: `{call_id, frame_no, final, content_type, result}`) or a TOOL_ERROR `{call_id, error_code, message}`.
 *
 * Environment: SW4RM_REGISTRY_ADDR (SW4RM_ROUTER_ADDR, SW4RM_CONNECTOR_ADDR, SW4RM_TOOL_ADDR) and SW4RM_TOKEN, as SW4RM: Copy
 * Agent Environment or `npm start` print them. Optional: SW4RM_AGENT_ID (default tool-provider-<pid>), SW4RM_PROTOS_DIR.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';

const env = process.env;
const agentId = env.SW4RM_AGENT_ID || `tool-provider-${process.pid}`;
const frameMs = 200;
const callDeadlineMs = 30_000;

interface Envelope {
  message_id: string;
  producer_id: string;
  correlation_id: string;
  message_type: string;
  content_type: string;
  payload: Buffer;
}

interface ToolFrame {
  call_id: string;
  frame_no: string;
  final: boolean;
  content_type: string;
  data: Buffer;
  summary: Buffer;
}

type ServiceClient = grpc.Client & Record<string, any>;

function say(line: string): void {
  console.log(`${new Date().toISOString().slice(11, 23)} ${line}`);
}

const registryAddress = env.SW4RM_REGISTRY_ADDR;
if (!registryAddress) {
  console.error(
    'SW4RM_REGISTRY_ADDR is not set. Copy the agent environment from the editor (SW4RM: Copy Agent Environment) or from `npm start`.',
  );
  process.exit(2);
}
const sw4rm = grpc.loadPackageDefinition(
  protoLoader.loadSync(['registry.proto', 'router.proto', 'connector.proto', 'tool.proto'], {
    includeDirs: [env.SW4RM_PROTOS_DIR || path.join(__dirname, '..', 'protos')],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  }) as any,
).sw4rm as any;
const insecure = grpc.credentials.createInsecure();
const registry: ServiceClient = new sw4rm.registry.RegistryService(registryAddress, insecure);
const router: ServiceClient = new sw4rm.router.RouterService(env.SW4RM_ROUTER_ADDR || registryAddress, insecure);
const connector: ServiceClient = new sw4rm.connector.ConnectorService(
  env.SW4RM_CONNECTOR_ADDR || registryAddress,
  insecure,
);
const tools: ServiceClient = new sw4rm.tool.ToolService(env.SW4RM_TOOL_ADDR || registryAddress, insecure);

/** The token authenticates; `sw4rm-agent-id` names the agent we act as (needed with the operator or an enrolment token). */
function metadata(extra: Record<string, string> = {}): grpc.Metadata {
  const md = new grpc.Metadata();
  if (env.SW4RM_TOKEN) md.set('authorization', `Bearer ${env.SW4RM_TOKEN}`);
  md.set('sw4rm-agent-id', agentId);
  md.set('x-correlation-id', randomUUID());
  for (const [key, value] of Object.entries(extra)) md.set(key, value);
  return md;
}

function call<Res>(client: ServiceClient, method: string, request: unknown, md = metadata()): Promise<Res> {
  return new Promise((resolve, reject) => {
    client[method](
      request,
      md,
      { deadline: Date.now() + callDeadlineMs },
      (err: grpc.ServiceError | null, response: Res) => (err ? reject(err) : resolve(response)),
    );
  });
}

function errorText(err: unknown): string {
  const status = err as grpc.ServiceError;
  return status.code !== undefined ? `${grpc.status[status.code]}: ${status.details}` : String(err);
}

// ---------------------------------------------------------------------------------------------------------------
// Sending envelopes

let sequence = Date.now() * 1000;

async function send(messageType: string, correlationId: string, payload: unknown, to = 'coordinator'): Promise<void> {
  const bytes = Buffer.from(JSON.stringify(payload));
  const envelope = {
    message_id: randomUUID(),
    producer_id: agentId,
    correlation_id: correlationId,
    sequence_number: String(++sequence),
    message_type: messageType,
    content_type: 'application/json',
    content_length: String(bytes.length),
    payload: bytes,
  };
  const { accepted, reason } = await call<{ accepted: boolean; reason: string }>(
    router,
    'SendMessage',
    { msg: envelope },
    metadata(to ? { 'sw4rm-to': to } : {}),
  );
  if (!accepted) say(`${messageType} refused: ${reason}`);
}

/** A protocol ACK (RECEIVED, then FULFILLED when done): an ACKNOWLEDGEMENT routed back to the envelope's producer. */
async function ack(
  msg: Envelope,
  stage: 'RECEIVED' | 'FULFILLED' | 'FAILED',
  note = '',
  errorCode = '',
): Promise<void> {
  try {
    await send(
      'ACKNOWLEDGEMENT',
      msg.correlation_id,
      {
        ack_for_message_id: msg.message_id,
        ack_stage: stage,
        ...(errorCode ? { error_code: errorCode } : {}),
        ...(note ? { note } : {}),
      },
      '',
    );
  } catch (err) {
    say(`ACK ${stage} not sent: ${errorText(err)}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The tools

const TOOLS = [
  {
    tool_name: 'word_count',
    input_schema: JSON.stringify({
      type: 'object',
      properties: { text: { type: 'string', maxLength: 100_000 } },
      required: ['text'],
      additionalProperties: false,
    }),
    output_schema: JSON.stringify({
      type: 'object',
      properties: { words: { type: 'integer' }, characters: { type: 'integer' } },
      required: ['words', 'characters'],
    }),
    idempotent: true,
    needs_worktree: false,
    default_timeout_s: 10,
    max_concurrency: 4,
    side_effects: 'none',
  },
  {
    tool_name: 'count_slowly',
    input_schema: JSON.stringify({
      type: 'object',
      properties: { n: { type: 'integer', minimum: 1, maximum: 100 } },
      required: ['n'],
      additionalProperties: false,
    }),
    output_schema: JSON.stringify({
      type: 'object',
      properties: { counted: { type: 'integer' } },
      required: ['counted'],
    }),
    idempotent: false,
    needs_worktree: false,
    default_timeout_s: 60,
    max_concurrency: 2,
    side_effects: 'none',
  },
];

/** Calls running here, by call_id: the cancel flag count_slowly looks at between frames. */
const running = new Map<string, { cancelled: boolean; wake?: () => void }>();

async function onToolCall(
  msg: Envelope,
  request: { call_id: string; tool_name: string; args: Record<string, unknown>; stream: boolean; attempt: number },
): Promise<void> {
  const callId = request.call_id;
  const result = (frameNo: number, final: boolean, value: unknown) =>
    send('TOOL_RESULT', callId, {
      call_id: callId,
      frame_no: frameNo,
      final,
      content_type: 'application/json',
      result: value,
    });
  await ack(msg, 'RECEIVED');
  say(
    `TOOL_CALL ${request.tool_name} ${JSON.stringify(request.args)} (call ${callId}, attempt ${request.attempt}${request.stream ? ', streaming' : ''})`,
  );
  switch (request.tool_name) {
    case 'word_count': {
      // The coordinator checked the args against the input schema before sending the call.
      const text = String(request.args.text);
      await result(0, true, { words: text.split(/\s+/).filter((w) => w !== '').length, characters: [...text].length });
      break;
    }
    case 'count_slowly': {
      const n = Number(request.args.n);
      const state: { cancelled: boolean; wake?: () => void } = { cancelled: false };
      running.set(callId, state);
      let i = 0;
      while (i < n && !state.cancelled) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, frameMs);
          state.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        if (state.cancelled) break;
        i++;
        await result(i - 1, false, { i });
      }
      running.delete(callId);
      if (state.cancelled) {
        // The coordinator has already given the caller its terminal frame: nothing more to send for this call.
        say(`count_slowly ${callId}: cancelled after ${i} frames`);
        await ack(msg, 'FULFILLED', `cancelled after ${i} frames`);
        return;
      }
      await result(i, true, { counted: i });
      break;
    }
    default:
      await send('TOOL_ERROR', callId, {
        call_id: callId,
        error_code: 'unknown_tool',
        message: `no tool '${request.tool_name}' here`,
      });
  }
  await ack(msg, 'FULFILLED');
}

async function react(msg: Envelope): Promise<void> {
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(Buffer.from(msg.payload).toString('utf8')) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  if (msg.producer_id === 'coordinator' && msg.message_type === 'TOOL_CALL' && json) {
    // Worked in the background: the inbox must stay free for a cancel_tool_call.
    void onToolCall(msg, json as never);
  } else if (
    msg.producer_id === 'coordinator' &&
    msg.message_type === 'CONTROL' &&
    json?.command === 'cancel_tool_call'
  ) {
    const callId = String(json.call_id);
    say(`cancel_tool_call ${callId}: ${String(json.reason ?? '')}`);
    const state = running.get(callId);
    if (state) {
      state.cancelled = true;
      state.wake?.();
    }
    await ack(msg, 'RECEIVED');
    await ack(msg, 'FULFILLED', state ? 'stopping' : 'not running here');
  } else if (msg.message_type === 'TOOL_RESULT' || msg.message_type === 'TOOL_ERROR') {
    // Answers to our own TOOL_CALL envelopes (--call): the final one is the coordinator's reply.
    const waiter = envelopeAnswers.get(msg.correlation_id);
    if (waiter) waiter(msg);
    else
      say(
        `${msg.message_type} from ${msg.producer_id} (correlation ${msg.correlation_id}): ${Buffer.from(msg.payload).toString('utf8')}`,
      );
    if (msg.message_type === 'TOOL_RESULT' && json?.final === false) await ack(msg, 'FULFILLED');
  } else if (
    msg.message_type !== 'ACKNOWLEDGEMENT' &&
    msg.message_type !== 'HEARTBEAT' &&
    msg.message_type !== 'NOTIFICATION'
  ) {
    await ack(msg, 'FULFILLED', 'this example only answers tool calls');
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The inbox

let inbox: grpc.ClientReadableStream<{ msg: Envelope; seq: string }> | undefined;
let leaving = false;
let queue: Promise<void> = Promise.resolve();

function openInbox(): Promise<void> {
  return new Promise((resolve) => {
    const stream: grpc.ClientReadableStream<{ msg: Envelope; seq: string }> = router.StreamIncoming(
      { agent_id: agentId },
      metadata(),
    );
    inbox = stream;
    stream.on('metadata', () => resolve());
    stream.on('data', (item: { msg: Envelope; seq: string }) => {
      queue = queue.then(async () => {
        try {
          await call(router, 'AckDelivery', { agent_id: agentId, seq: item.seq, message_id: item.msg.message_id });
          await react(item.msg);
        } catch (err) {
          say(`handling #${item.seq} failed: ${errorText(err)}`);
        }
      });
    });
    stream.on('error', () => undefined);
    stream.on('status', (status: grpc.StatusObject) => {
      if (!leaving) say(`inbox stream ended (${grpc.status[status.code]}: ${status.details})`);
      resolve();
    });
    // The server sends its headers when the stream is attached; give it a moment either way.
    setTimeout(resolve, 1_000);
  });
}

async function start(): Promise<void> {
  const registered = await call<{ accepted: boolean; reason: string }>(registry, 'RegisterAgent', {
    agent: {
      agent_id: agentId,
      name: 'example-tool-provider',
      description: 'Provides word_count and count_slowly (examples/toolProvider.ts).',
      capabilities: ['tools'],
      communication_class: 'STANDARD',
      modalities_supported: ['application/json'],
    },
  });
  if (!registered.accepted) throw new Error(`registration refused: ${registered.reason}`);
  await call(registry, 'Heartbeat', { agent_id: agentId, state: 'RUNNABLE', health: {} });
  await openInbox();
  const provider = await call<{ ok: boolean; reason: string }>(connector, 'RegisterProvider', {
    provider_id: agentId,
    tools: TOOLS,
  });
  if (!provider.ok) throw new Error(`RegisterProvider refused: ${provider.reason}`);
  say(`registered as ${agentId}; provider ${agentId} with tools ${TOOLS.map((t) => t.tool_name).join(', ')}`);
}

async function leave(why: string): Promise<void> {
  if (leaving) return;
  leaving = true;
  try {
    await call(registry, 'DeregisterAgent', { agent_id: agentId, reason: why });
    say('deregistered');
  } catch (err) {
    say(`deregister failed: ${errorText(err)}`);
  }
  inbox?.cancel();
  for (const client of [registry, router, connector, tools]) client.close();
}

// ---------------------------------------------------------------------------------------------------------------
// The caller (--call): the provider calls its own tools through the coordinator, which checks and routes every call

const envelopeAnswers = new Map<string, (msg: Envelope) => void>();

function toolCall(toolName: string, args: unknown, extra: Record<string, unknown> = {}) {
  return {
    call_id: `example-${randomUUID().slice(0, 8)}`,
    provider_id: agentId,
    tool_name: toolName,
    content_type: 'application/json',
    args: Buffer.from(JSON.stringify(args)),
    ...extra,
  };
}

function frameText(frame: ToolFrame): string {
  const summary = frame.summary.length > 0 ? ` summary ${frame.summary.toString('utf8')}` : '';
  const data = frame.data.length > 0 ? frame.data.toString('utf8') : '(no data)';
  return `frame ${frame.frame_no}${frame.final ? ' (final)' : ''}: ${data}${summary}`;
}

async function unary(title: string, request: ReturnType<typeof toolCall>): Promise<void> {
  try {
    const frame = await call<ToolFrame>(tools, 'Call', request);
    console.log(`${title} → ${frameText(frame)}`);
  } catch (err) {
    console.log(`${title} → ${errorText(err)}`);
  }
}

/** CallStream; with `cancelAfter`, Cancel once that many frames arrived. */
function streamed(title: string, request: ReturnType<typeof toolCall>, cancelAfter?: number): Promise<void> {
  return new Promise((resolve) => {
    const stream = tools.CallStream(request, metadata());
    let frames = 0;
    stream.on('data', (frame: ToolFrame) => {
      console.log(`${title} → ${frameText(frame)}`);
      if (++frames === cancelAfter) {
        call<{ call_id: string; error_code: string; message: string }>(tools, 'Cancel', {
          call_id: request.call_id,
          provider_id: request.provider_id,
        }).then(
          (answer) =>
            console.log(`${title} → Cancel: ${answer.error_code}${answer.message ? ` (${answer.message})` : ''}`),
          (err) => console.log(`${title} → Cancel: ${errorText(err)}`),
        );
      }
    });
    stream.on('error', (err: grpc.ServiceError) => console.log(`${title} → ${errorText(err)}`));
    stream.on('end', () => resolve());
    stream.on('status', () => resolve());
  });
}

/** A TOOL_CALL envelope to `coordinator`: the same engine, answered in the inbox (TOOL_RESULT frames, the last one final). */
async function byEnvelope(title: string, toolName: string, args: unknown): Promise<void> {
  const correlationId = randomUUID();
  const done = new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      console.log(`${title} → no answer within 10 s`);
      resolve();
    }, 10_000);
    envelopeAnswers.set(correlationId, (msg) => {
      const json = JSON.parse(Buffer.from(msg.payload).toString('utf8')) as Record<string, unknown>;
      console.log(`${title} → ${msg.message_type} ${JSON.stringify(json)}`);
      if (msg.message_type === 'TOOL_ERROR' || json.final !== false) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  await send('TOOL_CALL', correlationId, { provider_id: agentId, tool_name: toolName, args, stream: true });
  await done;
  envelopeAnswers.delete(correlationId);
}

async function callDemo(): Promise<void> {
  await unary('Call word_count', toolCall('word_count', { text: 'the quick brown fox' }));
  await unary('Call word_count with a number', toolCall('word_count', { text: 42 }));
  await streamed('CallStream count_slowly n=3', toolCall('count_slowly', { n: 3 }));
  await streamed('CallStream count_slowly n=20, cancelled after 3 frames', toolCall('count_slowly', { n: 20 }), 3);
  await byEnvelope('TOOL_CALL envelope count_slowly n=2', 'count_slowly', { n: 2 });
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.length > 1 || (args.length === 1 && args[0] !== '--call')) {
    console.error('usage: npm run example:provider [-- --call]');
    process.exit(2);
  }
  await start();
  process.on('SIGINT', () => void leave('SIGINT received').then(() => process.exit(0)));
  process.on('SIGTERM', () => void leave('SIGTERM received').then(() => process.exit(0)));
  if (args[0] === '--call') {
    await callDemo();
    await leave('demo done');
  }
}

main().catch(async (err) => {
  console.error(errorText(err));
  await leave('failed');
  process.exitCode = 1;
});
