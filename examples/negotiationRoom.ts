/* eslint-disable @typescript-eslint/no-explicit-any -- the canonical protos are loaded at run time (proto-loader): their clients are untyped */
/**
 * A negotiation room (RFC §17.5) end to end, written against the canonical protos only (no coordinator code), to copy as a
 * start. README: "Negotiation rooms (for agent authors)".
 *
 *   npm run example:room
 *
 * Three agents in one process, each with its own registration and inbox stream: a producer and two critics.
 * - The producer submits a PLAN (NegotiationRoomService.SubmitProposal, requested_critics = the two critics) and blocks in
 *   WaitForDecision. Revision 1 has no testing step; when the decision is REVISION_REQUESTED it submits revision 2 (the
 *   same artifact_id) with one, waits again and prints the decision.
 * - Each critic receives a NEGOTIATION envelope from `coordinator` (JSON `{kind: "review_request", artifact_id,
 *   negotiation_room_id, revision, artifact_type, producer_id, critic_id, ct, payload_b64, …}`), ACKs it, decodes the
 *   artifact and votes (SubmitVote: score 0–10, confidence 0–1, passed, strengths, weaknesses, recommendations).
 *   critic A scores the plan's length, critic B whether it has a testing step.
 *
 * Environment: SW4RM_REGISTRY_ADDR (SW4RM_ROUTER_ADDR, SW4RM_NEGOTIATION_ROOM_ADDR) and SW4RM_TOKEN, as SW4RM: Copy Agent
 * Environment or `npm start` print them. Optional: SW4RM_PROTOS_DIR.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';

const env = process.env;
const suffix = randomUUID().slice(0, 8);
const PRODUCER = `room-producer-${suffix}`;
const CRITIC_A = `room-critic-a-${suffix}`;
const CRITIC_B = `room-critic-b-${suffix}`;
const callDeadlineMs = 30_000;

interface Envelope {
  message_id: string;
  producer_id: string;
  correlation_id: string;
  message_type: string;
  content_type: string;
  payload: Buffer;
}

interface Vote {
  critic_id: string;
  score: number;
  confidence: number;
  passed: boolean;
  strengths: string[];
  weaknesses: string[];
  recommendations: string[];
}
interface Decision {
  artifact_id: string;
  outcome: string;
  votes: Vote[];
  aggregated_score: {
    mean: number;
    min_score: number;
    max_score: number;
    std_dev: number;
    weighted_mean: number;
    vote_count: number;
  };
  policy_version: string;
  reason: string;
  negotiation_room_id: string;
}

type ServiceClient = grpc.Client & Record<string, any>;

function say(who: string, line: string): void {
  console.log(`${who.replace(`-${suffix}`, '').padEnd(13)} ${line}`);
}

const registryAddress = env.SW4RM_REGISTRY_ADDR;
if (!registryAddress) {
  console.error(
    'SW4RM_REGISTRY_ADDR is not set. Copy the agent environment from the editor (SW4RM: Copy Agent Environment) or from `npm start`.',
  );
  process.exit(2);
}
const sw4rm = grpc.loadPackageDefinition(
  protoLoader.loadSync(['registry.proto', 'router.proto', 'negotiation_room.proto'], {
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
const room: ServiceClient = new sw4rm.negotiation_room.NegotiationRoomService(
  env.SW4RM_NEGOTIATION_ROOM_ADDR || registryAddress,
  insecure,
);

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
  deadlineMs = callDeadlineMs,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    client[method](
      request,
      metadata(agentId),
      { deadline: Date.now() + deadlineMs },
      (err: grpc.ServiceError | null, response: Res) => (err ? reject(err) : resolve(response)),
    );
  });
}

function errorText(err: unknown): string {
  const status = err as grpc.ServiceError;
  return status.code !== undefined ? `${grpc.status[status.code]}: ${status.details}` : String(err);
}

// ---------------------------------------------------------------------------------------------------------------
// Agents: registration, inbox, ACKs

let sequence = Date.now() * 1000;
const streams: grpc.ClientReadableStream<unknown>[] = [];
/** Each agent's chain of message handlers: `leave()` lets the last ones (a critic's FULFILLED ACK) finish first. */
const handling: (() => Promise<void>)[] = [];
/** Set when the example is done: messages that arrive after it (a late notice) are left to the coordinator. */
let leaving = false;

/** A protocol ACK (RECEIVED, then FULFILLED): an ACKNOWLEDGEMENT routed back to the envelope's producer. */
async function ack(agentId: string, msg: Envelope, stage: 'RECEIVED' | 'FULFILLED'): Promise<void> {
  const bytes = Buffer.from(JSON.stringify({ ack_for_message_id: msg.message_id, ack_stage: stage }));
  const envelope = {
    message_id: randomUUID(),
    producer_id: agentId,
    correlation_id: msg.correlation_id,
    sequence_number: String(++sequence),
    message_type: 'ACKNOWLEDGEMENT',
    content_type: 'application/json',
    content_length: String(bytes.length),
    payload: bytes,
  };
  const { accepted, reason } = await call<{ accepted: boolean; reason: string }>(router, 'SendMessage', agentId, {
    msg: envelope,
  });
  if (!accepted) say(agentId, `ACK ${stage} refused: ${reason}`);
}

async function register(
  agentId: string,
  description: string,
  onMessage: (msg: Envelope) => Promise<void>,
): Promise<void> {
  const registered = await call<{ accepted: boolean; reason: string }>(registry, 'RegisterAgent', agentId, {
    agent: {
      agent_id: agentId,
      name: agentId.replace(`-${suffix}`, ''),
      description,
      capabilities: ['negotiation_room'],
      communication_class: 'STANDARD',
      modalities_supported: ['application/json'],
    },
  });
  if (!registered.accepted) throw new Error(`registration of ${agentId} refused: ${registered.reason}`);
  await call(registry, 'Heartbeat', agentId, { agent_id: agentId, state: 'RUNNABLE', health: {} });
  await new Promise<void>((resolve) => {
    const stream: grpc.ClientReadableStream<{ msg: Envelope; seq: string }> = router.StreamIncoming(
      { agent_id: agentId },
      metadata(agentId),
    );
    streams.push(stream);
    let queue: Promise<void> = Promise.resolve();
    handling.push(() => queue);
    stream.on('metadata', () => resolve());
    stream.on('data', (item: { msg: Envelope; seq: string }) => {
      if (leaving) return;
      queue = queue.then(async () => {
        try {
          await call(router, 'AckDelivery', agentId, {
            agent_id: agentId,
            seq: item.seq,
            message_id: item.msg.message_id,
          });
          await onMessage(item.msg);
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
// Critics

interface ReviewRequest {
  kind: string;
  artifact_id: string;
  negotiation_room_id: string;
  revision: number;
  artifact_type: string;
  producer_id: string;
  ct: string;
  payload_b64: string;
}

type Review = Omit<Vote, 'critic_id'>;

/** Critic A: a plan of more steps is more thorough. */
function reviewByLength(plan: { steps: string[] }): Review {
  const score = Math.min(10, 5 + plan.steps.length);
  return {
    score,
    confidence: 0.85,
    passed: score >= 7,
    strengths: [`${plan.steps.length} concrete steps`],
    weaknesses: plan.steps.length < 3 ? ['few steps'] : [],
    recommendations: [],
  };
}

/** Critic B: a plan must test what it builds. */
function reviewByTesting(plan: { steps: string[] }): Review {
  const tested = plan.steps.some((s) => /test/i.test(s));
  return tested
    ? {
        score: 9,
        confidence: 0.8,
        passed: true,
        strengths: ['tests the migration before it ships'],
        weaknesses: [],
        recommendations: [],
      }
    : {
        score: 4,
        confidence: 0.9,
        passed: false,
        strengths: [],
        weaknesses: ['no testing step'],
        recommendations: ['add a step that tests the migration on a copy of the data'],
      };
}

function critic(agentId: string, review: (plan: { steps: string[] }) => Review) {
  return async (msg: Envelope): Promise<void> => {
    if (msg.message_type !== 'NEGOTIATION' || msg.producer_id !== 'coordinator') {
      if (
        msg.message_type !== 'ACKNOWLEDGEMENT' &&
        msg.message_type !== 'HEARTBEAT' &&
        msg.message_type !== 'NOTIFICATION'
      )
        await ack(agentId, msg, 'FULFILLED');
      return;
    }
    await ack(agentId, msg, 'RECEIVED');
    const request = JSON.parse(Buffer.from(msg.payload).toString('utf8')) as ReviewRequest;
    if (request.kind !== 'review_request') return;
    // The artifact travels base64 in payload_b64; `ct` is its content type (application/json here).
    const plan = JSON.parse(Buffer.from(request.payload_b64, 'base64').toString('utf8')) as { steps: string[] };
    const vote = review(plan);
    say(
      agentId,
      `review_request ${request.artifact_type} revision ${request.revision} from ${request.producer_id.replace(`-${suffix}`, '')}: score ${vote.score}, confidence ${vote.confidence}, passed ${vote.passed}`,
    );
    await call(room, 'SubmitVote', agentId, {
      vote: {
        artifact_id: request.artifact_id,
        negotiation_room_id: request.negotiation_room_id,
        critic_id: agentId,
        ...vote,
      },
    });
    await ack(agentId, msg, 'FULFILLED');
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Producer

function printDecision(d: Decision): void {
  const a = d.aggregated_score;
  const r = (n: number) => Math.round(n * 1000) / 1000;
  say(PRODUCER, `decision ${d.outcome} (policy ${d.policy_version})`);
  say(
    PRODUCER,
    `  aggregate: mean ${r(a.mean)}, weighted mean ${r(a.weighted_mean)}, std dev ${r(a.std_dev)}, min ${a.min_score}, max ${a.max_score}, ${a.vote_count} votes`,
  );
  for (const v of d.votes)
    say(
      PRODUCER,
      `  ${v.critic_id.replace(`-${suffix}`, '')}: ${v.score} (confidence ${v.confidence}, passed ${v.passed})${v.recommendations.length ? ` — ${v.recommendations.join('; ')}` : ''}`,
    );
  say(PRODUCER, `  reason: ${d.reason}`);
}

async function propose(artifactId: string, roomId: string, steps: string[]): Promise<Decision> {
  const artifact = Buffer.from(JSON.stringify({ title: 'Add an index to the orders table', steps }));
  const submitted = await call<{ artifact_id: string; negotiation_room_id: string }>(room, 'SubmitProposal', PRODUCER, {
    proposal: {
      artifact_type: 'PLAN',
      artifact_id: artifactId,
      producer_id: PRODUCER,
      artifact,
      artifact_content_type: 'application/json',
      requested_critics: [CRITIC_A, CRITIC_B],
      negotiation_room_id: roomId,
    },
  });
  say(
    PRODUCER,
    `SubmitProposal PLAN ${submitted.artifact_id} in room ${submitted.negotiation_room_id}: ${steps.length} steps; WaitForDecision…`,
  );
  const { decision } = await call<{ decision: Decision }>(
    room,
    'WaitForDecision',
    PRODUCER,
    { artifact_id: submitted.artifact_id, negotiation_room_id: submitted.negotiation_room_id, timeout_seconds: 60 },
    70_000,
  );
  printDecision(decision);
  return decision;
}

async function main(): Promise<void> {
  await register(
    CRITIC_A,
    'Critic A of the room example: scores a plan by its number of steps.',
    critic(CRITIC_A, reviewByLength),
  );
  await register(
    CRITIC_B,
    'Critic B of the room example: a plan must have a testing step.',
    critic(CRITIC_B, reviewByTesting),
  );
  await register(PRODUCER, 'Producer of the room example: submits a plan and waits for the decision.', async (msg) => {
    if (
      msg.message_type !== 'ACKNOWLEDGEMENT' &&
      msg.message_type !== 'HEARTBEAT' &&
      msg.message_type !== 'NOTIFICATION'
    )
      await ack(PRODUCER, msg, 'FULFILLED');
  });
  say(PRODUCER, `registered ${PRODUCER}, ${CRITIC_A}, ${CRITIC_B}`);
  const artifactId = `plan-${suffix}`;
  const roomId = `room-${suffix}`;
  let decision = await propose(artifactId, roomId, ['write the migration', 'run it in production']);
  if (decision.outcome === 'REVISION_REQUESTED') {
    decision = await propose(artifactId, roomId, [
      'write the migration',
      'test it on a copy of the orders table',
      'run it in production',
    ]);
  }
  process.exitCode = decision.outcome === 'APPROVED' ? 0 : 1;
}

async function leave(): Promise<void> {
  // Take no new messages, let the ones in hand finish (a critic may still be sending the FULFILLED ACK of the review
  // that decided), then close the streams: deregistering an agent first would refuse what it still sends.
  leaving = true;
  await Promise.all(handling.map((pending) => pending()));
  for (const stream of streams) stream.cancel();
  for (const agentId of [PRODUCER, CRITIC_A, CRITIC_B]) {
    try {
      await call(registry, 'DeregisterAgent', agentId, { agent_id: agentId, reason: 'the room example is done' });
    } catch (err) {
      say(agentId, `deregister failed: ${errorText(err)}`);
    }
  }
  say(PRODUCER, 'deregistered the three agents');
  for (const client of [registry, router, room]) client.close();
}

main().then(leave, async (err) => {
  console.error(`the room example failed: ${errorText(err)}`);
  process.exitCode = 1;
  await leave();
});
