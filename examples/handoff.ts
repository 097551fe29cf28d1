/* eslint-disable @typescript-eslint/no-explicit-any -- the canonical protos are loaded at run time (proto-loader): their clients are untyped */
/**
 * A handoff (RFC §17.6) end to end, written against the canonical protos only (no coordinator code), to copy as a start.
 * README: "Handoffs (for agent authors)".
 *
 *   npm run example:handoff
 *
 * Two agents in one process, each with its own registration and inbox stream:
 * - the planner (capability `plan`) has worked on a task and hands it off: HandoffService.RequestHandoff with no to_agent
 *   (capability routing) and capabilities_required [`security_review`, a capability only this run's reviewer holds, so
 *   that no other agent of your coordinator is chosen], its conversation and tool state as a HandoffContext
 *   (metadata `sw4rm-context-content-type: application/vnd.sw4rm.handoff-context+json`, validated by the coordinator)
 *   and the work's correlation id (metadata `sw4rm-correlation-id`);
 * - the reviewer receives a NOTIFICATION from `coordinator` (JSON `{type: "handoff_request", request_id, from_agent,
 *   reason, capabilities_required, context_encoding, context, …}`), ACKs it, reads the whole request again with
 *   GetPendingHandoffs (what an agent does after a restart), and accepts it (AcceptHandoff);
 * - the planner learns it by a `handoff_status` NOTIFICATION (`event: "accepted"`), stops working on it and calls
 *   CompleteHandoff(COMPLETED): the work is the reviewer's. The reviewer, told `completed`, resumes from the context;
 * - the planner then tries to send about the work once more: the router refuses it (PERMISSION_DENIED).
 *
 * Environment: SW4RM_REGISTRY_ADDR (SW4RM_ROUTER_ADDR, SW4RM_HANDOFF_ADDR) and SW4RM_TOKEN, as SW4RM: Copy Agent
 * Environment or `npm start` print them. Optional: SW4RM_PROTOS_DIR.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';

const env = process.env;
const suffix = randomUUID().slice(0, 8);
const PLANNER = `handoff-planner-${suffix}`;
const REVIEWER = `handoff-reviewer-${suffix}`;
const ONLY_THIS_RUN = `handoff-example-${suffix}`;
const WORK = `audit-${suffix}`;
const REQUEST = `review-${suffix}`;
const CONTEXT_CONTENT_TYPE = 'application/vnd.sw4rm.handoff-context+json';
const callDeadlineMs = 30_000;

interface Envelope {
  message_id: string;
  producer_id: string;
  correlation_id: string;
  message_type: string;
  content_type: string;
  payload: Buffer;
}

/** The HandoffContext (handoff-context.txt): conversation_history, tool_state, metadata. */
interface HandoffContext {
  conversation_history: Array<{
    role: string;
    content: string;
    timestamp?: string;
    name?: string;
    tool_call_id?: string;
  }>;
  tool_state: Record<string, unknown>;
  metadata: Record<string, unknown>;
}

type ServiceClient = grpc.Client & Record<string, any>;

function say(who: string, line: string): void {
  console.log(`${who.replace(`-${suffix}`, '').padEnd(16)} ${line}`);
}

const registryAddress = env.SW4RM_REGISTRY_ADDR;
if (!registryAddress) {
  console.error(
    'SW4RM_REGISTRY_ADDR is not set. Copy the agent environment from the editor (SW4RM: Copy Agent Environment) or from `npm start`.',
  );
  process.exit(2);
}
const sw4rm = grpc.loadPackageDefinition(
  protoLoader.loadSync(['registry.proto', 'router.proto', 'handoff.proto'], {
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
const handoffs: ServiceClient = new sw4rm.handoff.HandoffService(env.SW4RM_HANDOFF_ADDR || registryAddress, insecure);

/** The token authenticates; `sw4rm-agent-id` names the agent we act as (needed with the operator or an enrolment token). */
function metadata(agentId: string, extra: Record<string, string> = {}): grpc.Metadata {
  const md = new grpc.Metadata();
  if (env.SW4RM_TOKEN) md.set('authorization', `Bearer ${env.SW4RM_TOKEN}`);
  md.set('sw4rm-agent-id', agentId);
  md.set('x-correlation-id', randomUUID());
  for (const [key, value] of Object.entries(extra)) md.set(key, value);
  return md;
}

function call<Res>(
  client: ServiceClient,
  method: string,
  agentId: string,
  request: unknown,
  extra: Record<string, string> = {},
): Promise<Res> {
  return new Promise((resolve, reject) => {
    client[method](
      request,
      metadata(agentId, extra),
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
// Agents: registration, inbox, ACKs, sends

let sequence = Date.now() * 1000;
const streams: grpc.ClientReadableStream<unknown>[] = [];
/** Set when the example leaves: what still arrives (the coordinator's notices that an agent left) is not handled. */
let leaving = false;

function envelope(
  agentId: string,
  messageType: string,
  correlationId: string,
  body: Record<string, unknown>,
): Record<string, unknown> {
  const bytes = Buffer.from(JSON.stringify(body));
  return {
    message_id: randomUUID(),
    producer_id: agentId,
    correlation_id: correlationId,
    sequence_number: String(++sequence),
    message_type: messageType,
    content_type: 'application/json',
    content_length: String(bytes.length),
    payload: bytes,
  };
}

/** A protocol ACK: an ACKNOWLEDGEMENT routed back to the envelope's producer (here `coordinator`). */
async function ack(agentId: string, msg: Envelope, stage: 'RECEIVED' | 'FULFILLED'): Promise<void> {
  const { accepted, reason } = await call<{ accepted: boolean; reason: string }>(router, 'SendMessage', agentId, {
    msg: envelope(agentId, 'ACKNOWLEDGEMENT', msg.correlation_id, {
      ack_for_message_id: msg.message_id,
      ack_stage: stage,
    }),
  });
  if (!accepted) say(agentId, `ACK ${stage} refused: ${reason}`);
}

async function register(
  agentId: string,
  capabilities: string[],
  description: string,
  onNotice: (body: Record<string, unknown>) => Promise<void>,
): Promise<void> {
  const registered = await call<{ accepted: boolean; reason: string }>(registry, 'RegisterAgent', agentId, {
    agent: {
      agent_id: agentId,
      name: agentId.replace(`-${suffix}`, ''),
      description,
      capabilities,
      communication_class: 'STANDARD',
      modalities_supported: ['application/json'],
    },
  });
  if (!registered.accepted) throw new Error(`registration of ${agentId} refused: ${registered.reason}`);
  // RUNNABLE: capability routing offers handoffs only to agents that are online and can take work.
  await call(registry, 'Heartbeat', agentId, { agent_id: agentId, state: 'RUNNABLE', health: {} });
  await new Promise<void>((resolve) => {
    const stream: grpc.ClientReadableStream<{ msg: Envelope; seq: string }> = router.StreamIncoming(
      { agent_id: agentId },
      metadata(agentId),
    );
    streams.push(stream);
    let queue: Promise<void> = Promise.resolve();
    stream.on('metadata', () => resolve());
    stream.on('data', (item: { msg: Envelope; seq: string }) => {
      queue = queue.then(async () => {
        if (leaving) return;
        try {
          await call(router, 'AckDelivery', agentId, {
            agent_id: agentId,
            seq: item.seq,
            message_id: item.msg.message_id,
          });
          const msg = item.msg;
          if (msg.message_type !== 'NOTIFICATION' || msg.producer_id !== 'coordinator') return;
          await ack(agentId, msg, 'RECEIVED');
          const body = JSON.parse(Buffer.from(msg.payload).toString('utf8')) as Record<string, unknown>;
          await onNotice(body);
          await ack(agentId, msg, 'FULFILLED');
        } catch (err) {
          say(agentId, `handling #${item.seq} failed: ${errorText(err)}`);
        }
      });
    });
    stream.on('error', () => undefined);
    stream.on('status', () => resolve());
    setTimeout(resolve, 1_000);
  });
}

// ---------------------------------------------------------------------------------------------------------------
// The reviewer: offered the work, it accepts; told it is complete, it resumes from the context

let resumed: () => void;
const reviewerDone = new Promise<void>((resolve) => {
  resumed = resolve;
});
let context: HandoffContext | undefined;

async function reviewer(body: Record<string, unknown>): Promise<void> {
  if (body.type === 'handoff_request' && body.request_id === REQUEST) {
    say(
      REVIEWER,
      `handoff_request ${String(body.request_id).replace(`-${suffix}`, '')} from ${String(body.from_agent).replace(`-${suffix}`, '')}: "${String(body.reason)}" (${body.context_bytes} bytes of ${body.context_content_type})`,
    );
    // The context travels in the notice when it fits (32 KiB); GetPendingHandoffs always has it, as it had after a restart.
    const { pending_requests: pending } = await call<{
      pending_requests: Array<{ request_id: string; context_snapshot: Buffer; timeout: { seconds: string } }>;
    }>(handoffs, 'GetPendingHandoffs', REVIEWER, { agent_id: REVIEWER });
    const mine = pending.find((p) => p.request_id === REQUEST);
    if (!mine) throw new Error('the handoff is not pending for the reviewer');
    context = JSON.parse(Buffer.from(mine.context_snapshot).toString('utf8')) as HandoffContext;
    say(
      REVIEWER,
      `GetPendingHandoffs: ${pending.length} pending, ${mine.timeout.seconds} s left to answer; the context has ${context.conversation_history.length} messages`,
    );
    await call(handoffs, 'AcceptHandoff', REVIEWER, { request_id: REQUEST, accepted: true, accepting_agent: REVIEWER });
    say(REVIEWER, 'AcceptHandoff');
  } else if (body.type === 'handoff_status' && body.request_id === REQUEST && body.event === 'completed') {
    const last = context?.conversation_history.at(-1);
    say(REVIEWER, `handoff_status completed: the work is mine; resuming after "${last?.content ?? ''}"`);
    resumed();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The planner: hands its work off, completes it once accepted, and is then refused when it acts on it

let accepted: () => void;
const plannerAccepted = new Promise<void>((resolve) => {
  accepted = resolve;
});

async function planner(body: Record<string, unknown>): Promise<void> {
  if (body.type !== 'handoff_status' || body.request_id !== REQUEST) return;
  say(
    PLANNER,
    `handoff_status ${body.event}: ${body.status}${body.accepted_by ? ` by ${String(body.accepted_by).replace(`-${suffix}`, '')}` : ''}`,
  );
  if (body.event === 'accepted') accepted();
}

async function main(): Promise<void> {
  await register(
    REVIEWER,
    ['security_review', ONLY_THIS_RUN],
    'Reviewer of the handoff example: takes over security reviews.',
    reviewer,
  );
  await register(PLANNER, ['plan'], 'Planner of the handoff example: hands a security review off.', planner);
  say(PLANNER, `registered ${PLANNER}, ${REVIEWER}`);

  const handoffContext: HandoffContext = {
    conversation_history: [
      { role: 'user', content: 'Review the login change for security issues', timestamp: new Date().toISOString() },
      { role: 'assistant', content: 'I planned the review; a security specialist should do it.' },
      { role: 'tool', name: 'git_diff', tool_call_id: 'call-1', content: '+ if (token == expected) { … }' },
    ],
    tool_state: { cached_results: { 'call-1': { files: ['src/login.ts'] } } },
    metadata: { agent_id: PLANNER, work: WORK },
  };
  await call(
    handoffs,
    'RequestHandoff',
    PLANNER,
    {
      request_id: REQUEST,
      from_agent: PLANNER,
      to_agent: '',
      reason: 'needs a security review',
      context_snapshot: Buffer.from(JSON.stringify(handoffContext)),
      capabilities_required: ['security_review', ONLY_THIS_RUN],
      priority: 0,
      timeout: { seconds: 60, nanos: 0 },
    },
    { 'sw4rm-context-content-type': CONTEXT_CONTENT_TYPE, 'sw4rm-correlation-id': WORK },
  );
  say(PLANNER, `RequestHandoff ${REQUEST.replace(`-${suffix}`, '')} (capabilities security_review): PENDING`);

  await plannerAccepted;
  // Accepted: the planner stops working on it, then records the transfer.
  const done = await call<{ success: boolean; message: string }>(handoffs, 'CompleteHandoff', PLANNER, {
    request_id: REQUEST,
    status: 'COMPLETED',
  });
  say(PLANNER, `CompleteHandoff: success ${done.success}`);
  await reviewerDone;

  // From now on the router refuses the planner's messages about the transferred work.
  const sent = await call<{ accepted: boolean; reason: string }>(
    router,
    'SendMessage',
    PLANNER,
    { msg: envelope(PLANNER, 'DATA', WORK, { note: 'one more finding' }) },
    { 'sw4rm-to': REVIEWER },
  );
  say(
    PLANNER,
    sent.accepted
      ? 'SendMessage about the work was accepted (unexpected)'
      : `SendMessage about the work: ${sent.reason.split(' (')[0].replace(new RegExp(`-${suffix}`, 'g'), '')}`,
  );
  process.exitCode = sent.accepted ? 1 : 0;
}

async function leave(): Promise<void> {
  leaving = true;
  for (const agentId of [PLANNER, REVIEWER]) {
    try {
      await call(registry, 'DeregisterAgent', agentId, { agent_id: agentId, reason: 'the handoff example is done' });
    } catch (err) {
      say(agentId, `deregister failed: ${errorText(err)}`);
    }
  }
  say(PLANNER, 'deregistered the two agents');
  for (const stream of streams) stream.cancel();
  for (const client of [registry, router, handoffs]) client.close();
}

main().then(leave, async (err) => {
  console.error(`the handoff example failed: ${errorText(err)}`);
  process.exitCode = 1;
  await leave();
});
