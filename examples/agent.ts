/**
 * An example SW4RM agent written against the canonical protos only (no coordinator code), to copy as a start.
 *
 * It registers, heartbeats and streams its inbox. For every delivery it confirms the delivery (AckDelivery by seq)
 * and acknowledges the message RECEIVED, READ and FULFILLED; a DATA message with a JSON payload {"text": "…"}
 * is answered to its producer with {"text": "echo: …"} and the same correlation_id; a DATA message with
 * {"ask_approval": "…"} makes it ask a human through the coordinator (a HITL_INVOCATION) and print the decision.
 * When the inbox stream breaks (the coordinator restarted, the network failed) it reconnects with capped exponential backoff and jitter,
 * resuming after the last seq it processed, and registers again if the coordinator no longer knows it.
 * Ctrl+C deregisters it. It prints one line for everything it does.
 *
 * Environment: SW4RM_REGISTRY_ADDR, SW4RM_ROUTER_ADDR and SW4RM_TOKEN (from "SW4RM: Copy Agent Environment", an
 * editor terminal, or the output of `npm start`). Optional: SW4RM_AGENT_ID (default example-agent-<pid>),
 * SW4RM_AGENT_NAME, SW4RM_HEARTBEAT_MS (default 5000), SW4RM_RECONNECT_MIN_MS and SW4RM_RECONNECT_MAX_MS
 * (reconnect backoff, default 500 and 30000), SW4RM_PROTOS_DIR.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';

const env = process.env;
const agentId = env.SW4RM_AGENT_ID || `example-agent-${process.pid}`;
const heartbeatMs = Number(env.SW4RM_HEARTBEAT_MS || 5000);
const reconnectMinMs = Number(env.SW4RM_RECONNECT_MIN_MS || 500);
const reconnectMaxMs = Number(env.SW4RM_RECONNECT_MAX_MS || 30_000);
const callDeadlineMs = 10_000;

/** common.proto Envelope as proto-loader hands it over (keepCase, longs and enums as strings). */
interface Envelope {
  message_id: string;
  producer_id: string;
  correlation_id: string;
  message_type: string;
  content_type: string;
  payload: Buffer;
}

interface StreamItem {
  msg: Envelope;
  seq: string;
}

interface AckPayload {
  ack_for_message_id?: string;
  ack_stage?: string | number;
  error_code?: string | number;
  note?: string;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type ServiceClient = grpc.Client & Record<string, any>;

function say(line: string): void {
  console.log(`${new Date().toISOString().slice(11, 23)} ${line}`);
}

function requiredEnv(name: string): string {
  const value = env[name];
  if (!value) {
    console.error(
      `${name} is not set. Copy the agent environment from the editor (SW4RM: Copy Agent Environment) or from \`npm start\`.`,
    );
    process.exit(2);
  }
  return value;
}

function loadClients(): { registry: ServiceClient; router: ServiceClient } {
  const protosDir = env.SW4RM_PROTOS_DIR || path.join(__dirname, '..', 'protos');
  const definition = protoLoader.loadSync(['registry.proto', 'router.proto'], {
    includeDirs: [protosDir],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const sw4rm = (grpc.loadPackageDefinition(definition) as any).sw4rm;
  const registryAddress = requiredEnv('SW4RM_REGISTRY_ADDR');
  // The channel's own reconnect backoff must not outgrow ours, or calls keep failing after the coordinator is back.
  const options: grpc.ChannelOptions = {
    'grpc.initial_reconnect_backoff_ms': reconnectMinMs,
    'grpc.max_reconnect_backoff_ms': reconnectMaxMs,
  };
  const credentials = grpc.credentials.createInsecure();
  return {
    registry: new sw4rm.registry.RegistryService(registryAddress, credentials, options),
    router: new sw4rm.router.RouterService(env.SW4RM_ROUTER_ADDR || registryAddress, credentials, options),
  };
}

const { registry, router } = loadClients();

/** Metadata for every call: the bearer token (whichever kind SW4RM_TOKEN is) and a correlation id for the log. */
function metadata(extra: Record<string, string> = {}): grpc.Metadata {
  const md = new grpc.Metadata();
  if (env.SW4RM_TOKEN) md.set('authorization', `Bearer ${env.SW4RM_TOKEN}`);
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

/** A status as `CODE: details`, without grpc-js's empty "Resolution note". */
function statusText(status: { code?: grpc.status; details?: string; message?: string }): string {
  const details = (status.details || status.message || '').replace(/\.? Resolution note:\s*$/, '');
  return status.code !== undefined ? `${grpc.status[status.code]}: ${details}` : details;
}

function errorText(err: unknown): string {
  return err instanceof Error ? statusText(err as grpc.ServiceError) : String(err);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Capped exponential backoff with jitter: between half and all of min·2^attempt, at most the maximum. */
function backoffMs(attempt: number): number {
  const ceiling = Math.min(reconnectMaxMs, reconnectMinMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

// ---------------------------------------------------------------------------------------------------------------
// Registration and heartbeats

let leaving = false;
let state = 'RUNNABLE';

async function register(): Promise<void> {
  const response = await call<{ accepted: boolean; reason: string }>(registry, 'RegisterAgent', {
    agent: {
      agent_id: agentId,
      name: env.SW4RM_AGENT_NAME || 'Example agent',
      description: 'Answers DATA messages with a JSON payload {"text": "…"} with {"text": "echo: …"}.',
      capabilities: ['example', 'echo'],
      communication_class: 'STANDARD',
      modalities_supported: ['application/json', 'text/plain'],
      reasoning_connectors: ['sw4rm://reasoning/none'],
    },
  });
  if (!response.accepted) {
    console.error(`registration refused: ${response.reason}`);
    process.exit(1);
  }
  say(`registered as ${agentId}${response.reason ? ` (${response.reason})` : ''}`);
}

/** Registers, retrying with backoff while the coordinator cannot be reached; any other failure ends the agent. */
async function registerUntilDone(): Promise<void> {
  for (let attempt = 0; !leaving; attempt++) {
    try {
      await register();
      return;
    } catch (err) {
      const code = (err as grpc.ServiceError).code;
      if (code !== grpc.status.UNAVAILABLE && code !== grpc.status.DEADLINE_EXCEEDED) {
        console.error(`registration failed: ${errorText(err)}`);
        process.exit(1);
      }
      const wait = backoffMs(attempt);
      say(`coordinator unreachable (${errorText(err)}); registering again in ${wait} ms`);
      await sleep(wait);
    }
  }
}

let heartbeatFailing = false;

async function heartbeat(): Promise<void> {
  try {
    const { ok } = await call<{ ok: boolean }>(registry, 'Heartbeat', {
      agent_id: agentId,
      state,
      health: { pid: String(process.pid) },
    });
    if (heartbeatFailing) say('heartbeat answered again');
    heartbeatFailing = false;
    if (!ok && !leaving) {
      say('heartbeat refused: the coordinator does not know this agent; registering again');
      await registerUntilDone();
    }
  } catch (err) {
    // One line per outage, not one per beat.
    if (!heartbeatFailing) say(`heartbeat failed: ${errorText(err)}`);
    heartbeatFailing = true;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Sending

// Sequence numbers must increase per producer, and without an idempotency token (producer_id, sequence_number) is
// what the router deduplicates by. Starting from the clock keeps an agent restarted with the same id from reusing
// the numbers of its previous run (which would be refused DUPLICATE_DETECTED).
let sequence = Date.now() * 1000;

/** Sends an envelope; answers its message_id when the router accepted it. */
async function send(
  messageType: string,
  payload: unknown,
  correlationId: string,
  to?: string,
): Promise<string | undefined> {
  const bytes = Buffer.from(JSON.stringify(payload));
  const msg = {
    message_id: randomUUID(),
    producer_id: agentId,
    correlation_id: correlationId,
    sequence_number: String(++sequence),
    message_type: messageType,
    content_type: 'application/json',
    content_length: String(bytes.length),
    payload: bytes,
  };
  try {
    const { accepted, reason } = await call<{ accepted: boolean; reason: string }>(
      router,
      'SendMessage',
      { msg },
      metadata(to ? { 'sw4rm-to': to } : {}),
    );
    if (!accepted) say(`${messageType} refused: ${reason}`);
    return accepted ? msg.message_id : undefined;
  } catch (err) {
    say(`${messageType} not sent: ${errorText(err)}`);
    return undefined;
  }
}

/** A protocol ACK: an ACKNOWLEDGEMENT envelope; the router routes it to the producer of the acknowledged message. */
function acknowledge(
  msg: Envelope,
  stage: 'RECEIVED' | 'READ' | 'FULFILLED',
  note?: string,
): Promise<string | undefined> {
  return send(
    'ACKNOWLEDGEMENT',
    { ack_for_message_id: msg.message_id, ack_stage: stage, ...(note ? { note } : {}) },
    msg.correlation_id,
  );
}

// ---------------------------------------------------------------------------------------------------------------
// The inbox

function parseJson(msg: Envelope): unknown {
  try {
    return JSON.parse(Buffer.from(msg.payload).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** What the agent sent, by message_id, to say which message an ACK is for (the newest 100). */
const sentReplies = new Map<string, string>();

function remember(messageId: string, what: string): void {
  sentReplies.set(messageId, what);
  if (sentReplies.size > 100) sentReplies.delete(sentReplies.keys().next().value!);
}

/** What the agent does with one message it received. */
async function react(msg: Envelope): Promise<void> {
  const from = msg.producer_id;
  const json = parseJson(msg) as Record<string, unknown> | undefined;

  // Never acknowledge an acknowledgement: just report it (these are ACKs of our replies, or NACKs).
  if (msg.message_type === 'ACKNOWLEDGEMENT') {
    const ack = (json ?? {}) as AckPayload;
    const code = ack.error_code && ack.error_code !== 'ERROR_CODE_UNSPECIFIED' ? ` ${ack.error_code}` : '';
    const what = sentReplies.get(ack.ack_for_message_id ?? '') ?? `message ${ack.ack_for_message_id}`;
    say(`${from} acknowledged ${what}: ${ack.ack_stage}${code}${ack.note ? ` (${ack.note})` : ''}`);
    return;
  }
  // The coordinator's heartbeats and notices are not tracked: they get no protocol ACK. DATA from the coordinator
  // (Send Message… in the editor) is tracked like any message and acknowledged below, without a reply.
  if (from === 'coordinator' && msg.message_type !== 'DATA') {
    if (msg.message_type === 'HEARTBEAT')
      await send(
        'HEARTBEAT',
        { kind: 'heartbeat_reply', agent_id: agentId },
        msg.correlation_id || randomUUID(),
        'coordinator',
      );
    else if (msg.message_type === 'NOTIFICATION') say(`notice: ${json?.event} ${json?.agent_id ?? ''}`.trimEnd());
    else if (msg.message_type === 'CONTROL' && json?.type === 'HITL_DECISION') {
      say(
        `decision on ${json.invocation_id}: ${json.decision} by ${json.decided_by}${json.rationale ? ` (${json.rationale})` : ''}`,
      );
    } else say(`from coordinator: ${msg.message_type} ${Buffer.from(msg.payload).toString('utf8').slice(0, 200)}`);
    return;
  }

  await acknowledge(msg, 'RECEIVED');
  const text = typeof json?.text === 'string' ? json.text : undefined;
  say(`message from ${from}: ${text ?? `${msg.message_type} (${msg.content_type}, ${msg.payload.length} bytes)`}`);
  await acknowledge(msg, 'READ');
  if (msg.message_type === 'DATA' && typeof json?.ask_approval === 'string') {
    // Asks a human (RFC §15): a HITL_INVOCATION to `coordinator`; the decision comes back as a CONTROL envelope.
    const summary = json.ask_approval;
    const asked = await send(
      'HITL_INVOCATION',
      { reason_type: 'SECURITY_APPROVAL', summary, facts: { asked_by: from } },
      msg.correlation_id,
      'coordinator',
    );
    if (asked) say(`asked for approval: ${summary}`);
    await acknowledge(msg, 'FULFILLED', asked ? 'asked a human for approval' : 'the approval request was refused');
  } else if (from === 'coordinator') {
    await acknowledge(msg, 'FULFILLED');
  } else if (msg.message_type === 'DATA' && text !== undefined) {
    // The reply goes to the producer (metadata sw4rm-to) in the same conversation (correlation_id).
    const reply = `echo: ${text}`;
    const replyId = await send('DATA', { text: reply }, msg.correlation_id, from);
    if (replyId) {
      remember(replyId, `the reply "${reply}"`);
      say(`replied to ${from}: ${reply}`);
    }
    await acknowledge(msg, 'FULFILLED');
  } else {
    await acknowledge(msg, 'FULFILLED', 'the example agent answers only DATA {"text": "…"}; nothing to do');
  }
}

/** The last seq whose handling finished; a reconnected stream resumes after it, so nothing handled comes twice. */
let lastProcessedSeq = 0;
let inbox: grpc.ClientReadableStream<StreamItem> | undefined;
let reconnectAttempt = 0;
let reconnectTimer: NodeJS.Timeout | undefined;
/** Deliveries are handled one at a time, in seq order. */
let work: Promise<void> = Promise.resolve();

async function handle(item: StreamItem): Promise<void> {
  const seq = Number(item.seq);
  try {
    // Confirm the delivery first, so the router does not send it again.
    const { recorded } = await call<{ recorded: boolean }>(router, 'AckDelivery', {
      agent_id: agentId,
      seq: item.seq,
      message_id: item.msg.message_id,
    });
    if (!recorded) say(`delivery #${seq} was not recorded (already confirmed?)`);
  } catch (err) {
    say(`AckDelivery #${seq} failed: ${errorText(err)}`);
  }
  try {
    await react(item.msg);
  } catch (err) {
    say(`handling #${seq} failed: ${(err as Error).message}`);
  }
  lastProcessedSeq = Math.max(lastProcessedSeq, seq);
}

function openInbox(): void {
  if (leaving) return;
  const resume: Record<string, string> = lastProcessedSeq > 0 ? { 'sw4rm-resume-after': String(lastProcessedSeq) } : {};
  say(`opening inbox stream${lastProcessedSeq > 0 ? ` (resuming after seq ${lastProcessedSeq})` : ''}`);
  const stream: grpc.ClientReadableStream<StreamItem> = router.StreamIncoming({ agent_id: agentId }, metadata(resume));
  inbox = stream;
  let first = true;
  stream.on('data', (item: StreamItem) => {
    // The stream says nothing until its first item (the coordinator's heartbeat comes every 10 s).
    if (first) say('inbox stream open');
    first = false;
    reconnectAttempt = 0;
    work = work.then(() => handle(item));
  });
  // Every end arrives as 'status'; 'error' repeats it for non-OK codes.
  stream.on('error', () => undefined);
  stream.on('status', (status: grpc.StatusObject) => {
    if (inbox === stream) inbox = undefined;
    if (!leaving) void inboxEnded(status);
  });
}

async function inboxEnded(status: grpc.StatusObject): Promise<void> {
  const why = statusText(status);
  // Let what already arrived finish first, so the resume position is the last seq really handled.
  await work;
  switch (status.code) {
    case grpc.status.UNAUTHENTICATED:
    case grpc.status.PERMISSION_DENIED:
    case grpc.status.INVALID_ARGUMENT:
    case grpc.status.UNIMPLEMENTED:
      console.error(`inbox stream refused (${why}); stopping`);
      process.exit(1);
      break;
    case grpc.status.OUT_OF_RANGE:
      // The coordinator has no record of our position (its store was replaced): start again from what it has.
      lastProcessedSeq = 0;
      scheduleReconnect(`resume position refused (${why}); reopening without it`);
      return;
    case grpc.status.FAILED_PRECONDITION:
      if (/not registered/.test(status.details)) {
        say('inbox stream refused: the coordinator does not know this agent; registering again');
        await registerUntilDone();
        scheduleReconnect('registered again');
      } else {
        // The resume position expired: every message not yet confirmed is delivered again.
        lastProcessedSeq = 0;
        scheduleReconnect(`resume position refused (${why}); reopening without it`);
      }
      return;
    default:
      // UNAVAILABLE (the coordinator stopped or restarted), ABORTED (a newer stream replaced this one, or the agent
      // was deregistered), CANCELLED, INTERNAL…: reconnecting is worth a try.
      scheduleReconnect(`inbox stream ended (${why})`);
  }
}

function scheduleReconnect(why: string): void {
  if (leaving) return;
  const wait = backoffMs(reconnectAttempt++);
  say(`${why}; reconnecting in ${wait} ms`);
  reconnectTimer = setTimeout(openInbox, wait);
}

// ---------------------------------------------------------------------------------------------------------------
// Start and stop

async function leave(signal: string, heartbeatTimer: NodeJS.Timeout): Promise<void> {
  if (leaving) return;
  leaving = true;
  state = 'SHUTTING_DOWN';
  clearInterval(heartbeatTimer);
  clearTimeout(reconnectTimer);
  inbox?.cancel();
  try {
    const { ok } = await call<{ ok: boolean }>(registry, 'DeregisterAgent', {
      agent_id: agentId,
      reason: `${signal} received`,
    });
    say(ok ? 'deregistered' : 'deregister refused: the coordinator does not know this agent');
  } catch (err) {
    console.error(`deregister failed: ${errorText(err)}`);
  }
  registry.close();
  router.close();
  process.exit(0);
}

async function main(): Promise<void> {
  await registerUntilDone();
  await heartbeat();
  const heartbeatTimer = setInterval(() => void heartbeat(), heartbeatMs);
  openInbox();
  process.on('SIGINT', () => void leave('SIGINT', heartbeatTimer));
  process.on('SIGTERM', () => void leave('SIGTERM', heartbeatTimer));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
