/**
 * An agent that joins the swarm through the MCP bridge only (no SDK, no gRPC): the official MCP TypeScript SDK's Client
 * over Streamable HTTP, to copy as a start. README: "The MCP bridge (for agent authors)", "Run the example".
 *
 *   node dist/example-mcp.js <peer agent id> [--wait-for-task <seconds>]
 *
 * (after `npm run build`; `npm run example:mcp -- <peer>` builds and runs it).
 *
 * Run it as a launch profile (SW4RM: Launch Agent…), which gives it its identity, worktree and environment. Environment,
 * exactly as a launched agent gets it: SW4RM_MCP_URL (the bridge, http://127.0.0.1:50052/mcp) and SW4RM_TOKEN (the
 * agent's OWN agent credential: the bridge refuses the operator token and enrolment credentials). The peer is the
 * first argument, else SW4RM_PEER. Optional: SW4RM_WAIT_MS (how long to wait for the peer's answer, default 30000).
 *
 * What it does, one printed line per step (no timestamps: the lines are stable):
 * - connects, lists the bridge's tools (tools/list) and the agents (list_agents; the credential's agent is `you`);
 * - sends the peer a DATA message {"text": "hello from <me>"} with an idempotency_key, then sends it again with the same
 *   key: the retry is answered `duplicate` with the first message's id (the peer gets one message);
 * - reads its inbox (read_inbox with wait_ms) until the peer has given its final answer on that message (an
 *   acknowledgement FULFILLED, REJECTED or FAILED) or SW4RM_WAIT_MS passed; it answers every message it reads with
 *   ack_message `fulfilled` — except a task's CONTROL `run`, which is the task current_task answers;
 * - if the scheduler gave it a task (current_task), completes it (complete_task) with a result; with --wait-for-task it
 *   first waits that long for one (read_inbox until a CONTROL `run` arrives: Submit Task… for it in the Tasks view).
 * It exits 0 when every step went well, 1 when a call was refused or the peer did not answer in time (or the router ended
 * the message: ACK_TIMEOUT when nobody received it within the ACK timeout), 2 when its environment or the peer is missing.
 */
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const env = process.env;
const mcpUrl = env.SW4RM_MCP_URL;
const token = env.SW4RM_TOKEN;
const args = process.argv.slice(2);
const waitFlag = args.indexOf('--wait-for-task');
const taskWaitMs = waitFlag < 0 ? 0 : Number(args[waitFlag + 1]) * 1000;
const peer = args.find((a, i) => !a.startsWith('--') && (waitFlag < 0 || i !== waitFlag + 1)) || env.SW4RM_PEER;
const waitMs = Number(env.SW4RM_WAIT_MS || 30_000);
/** One read_inbox waits at most this long: an acknowledgement alone does not end a wait (only a message does). */
const READ_WAIT_MS = 2_000;

for (const [name, value] of [
  ['SW4RM_MCP_URL', mcpUrl],
  ['SW4RM_TOKEN', token],
] as const) {
  if (!value) {
    console.error(
      `${name} is not set. Launch this example with SW4RM: Launch Agent… (a profile whose command runs it), which sets ` +
        'SW4RM_MCP_URL and SW4RM_TOKEN; headless, see README "The MCP bridge (for agent authors)", "Run the example".',
    );
    process.exit(2);
  }
}
if (!Number.isFinite(taskWaitMs) || taskWaitMs < 0) {
  console.error('--wait-for-task takes a number of seconds.');
  process.exit(2);
}
if (!peer) {
  console.error(
    'No peer: name the agent to message as the first argument or in SW4RM_PEER (list_agents shows the ids).',
  );
  process.exit(2);
}

/** A refused tool call: the bridge's `<CODE>: message`. */
class ToolRefusal extends Error {}

function say(line: string): void {
  console.log(line);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

/** Calls a tool and answers its structured output; a tool error (isError) throws `<CODE>: message`. */
async function call(client: Client, name: string, input: Json = {}): Promise<Json> {
  const result = await client.callTool({ name, arguments: input });
  if (result.isError) {
    const error = (result.structuredContent as { error?: { code: string; message: string } } | undefined)?.error;
    const text = (result.content as Array<{ type: string; text?: string }>)[0]?.text;
    throw new ToolRefusal(
      `${name} refused: ${error ? `${error.code}: ${error.message}` : (text ?? 'no reason given')}`,
    );
  }
  return (result.structuredContent ?? {}) as Json;
}

function compact(value: unknown): string {
  const text = JSON.stringify(value) ?? 'null';
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}

const FINAL_STAGES = new Set(['FULFILLED', 'REJECTED', 'FAILED']);

async function main(): Promise<number> {
  const client = new Client({ name: 'sw4rm-mcp-example', version: '1.0.0' });
  // The credential goes in every request's Authorization header; it is the agent's identity (no tool takes an agent id).
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl!), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  try {
    await client.connect(transport);
  } catch (err) {
    say(`connect to ${mcpUrl} failed: ${(err as Error).message}`);
    return 1;
  }
  try {
    const server = client.getServerVersion();
    say(`connected to ${mcpUrl} (${server?.name ?? 'unknown server'} ${server?.version ?? ''})`.replace(/ \)$/, ')'));

    const { tools } = await client.listTools();
    say(`tools/list: ${tools.length} tools (${tools.map((t) => t.name).join(', ')})`);

    const listed = await call(client, 'list_agents');
    const me = (listed.agents as Json[]).find((a) => a.you === true);
    say(
      `list_agents: ${listed.total} agents: ${(listed.agents as Json[]).map((a) => `${a.agent_id} (${a.you ? 'you' : a.presence})`).join(', ')}`,
    );
    if (!me) {
      say(
        "this credential's agent is not registered: launch it with SW4RM: Launch Agent…, or register it headless (README, " +
          '"The MCP bridge (for agent authors)", "Run the example")',
      );
      return 1;
    }
    const myId = String(me.agent_id);

    // Send, then retry with the same idempotency_key: the retry is the same operation, answered with the first outcome.
    const key = `hello-${randomUUID()}`;
    const text = `hello from ${myId}`;
    const sent = await call(client, 'send_message', { to: peer, payload: { text }, idempotency_key: key });
    say(`send_message to ${peer}: accepted ${sent.message_id}`);
    const retry = await call(client, 'send_message', { to: peer, payload: { text }, idempotency_key: key });
    say(
      `send_message again with the same idempotency_key: ${retry.duplicate ? `duplicate of ${retry.message_id}` : `a new message ${retry.message_id}`}`,
    );
    if (!retry.duplicate || retry.message_id !== sent.message_id) {
      say('the retry was not answered as a duplicate');
      return 1;
    }

    // One read of the inbox: every message answered with ack_message (a task's `run` is left to current_task), the
    // acknowledgements of what we sent reported. Answers whether a `run` came.
    const seen = new Set<string>();
    let answered: string | undefined;
    /** The router ended our message without the peer's answer (a NACK: ACK_TIMEOUT when nobody received it in time…). */
    let nacked: string | undefined;
    async function readInbox(waitForMs: number): Promise<boolean> {
      let run = false;
      const read = await call(client, 'read_inbox', { wait_ms: Math.max(0, Math.round(waitForMs)) });
      for (const message of read.messages as Json[]) {
        // Delivery is at least once: a message seen before (a read that broke off) is skipped.
        if (seen.has(message.message_id)) continue;
        seen.add(message.message_id);
        if (message.message_type === 'CONTROL' && message.payload?.command === 'run') {
          say(`read_inbox: task ${message.payload.task_id} (a run from ${message.from}): current_task answers it`);
          run = true;
          continue;
        }
        say(`read_inbox: ${message.message_type} from ${message.from}: ${compact(message.payload)}`);
        if (!message.needs_ack) continue;
        const acked = await call(client, 'ack_message', {
          message_id: message.message_id,
          outcome: 'fulfilled',
          result: { read_by: myId },
          reason: 'read by the MCP example agent',
        });
        say(`ack_message ${message.message_id}: fulfilled (${acked.state ?? 'done'})`);
      }
      for (const ack of (read.acknowledgements ?? []) as Json[]) {
        const which = ack.for_message_id === sent.message_id ? 'our message' : `message ${ack.for_message_id}`;
        say(
          `read_inbox: ${ack.from} acknowledged ${which}: ${ack.stage}${ack.error_code ? ` ${ack.error_code}` : ''}${ack.note ? ` (${ack.note})` : ''}`,
        );
        if (ack.for_message_id !== sent.message_id) continue;
        if (ack.error_code) nacked = `${ack.stage} ${ack.error_code}`;
        else if (FINAL_STAGES.has(ack.stage)) answered = ack.stage;
      }
      return run;
    }

    // Read until the peer gave its final answer on our message, or the wait is over.
    const deadline = Date.now() + waitMs;
    while (answered === undefined && nacked === undefined && Date.now() < deadline)
      await readInbox(Math.min(READ_WAIT_MS, deadline - Date.now()));
    if (nacked !== undefined) {
      say(`our message to ${peer} ended without an answer: ${nacked}`);
      return 1;
    }
    if (answered === undefined) {
      say(`no final answer from ${peer} within ${waitMs} ms (the message stays in its inbox until its ACK timeout)`);
      return 1;
    }

    // The task the scheduler gave us, if any: asking for it starts it; complete_task ends it with a result.
    let { task } = await call(client, 'current_task');
    if (task === null && taskWaitMs > 0) {
      say(`current_task: none yet; waiting up to ${taskWaitMs / 1000} s for one (Submit Task… for ${myId})`);
      const until = Date.now() + taskWaitMs;
      // A `run` is a message: read_inbox returns as soon as it arrives (at most 30 s per read).
      while (Date.now() < until && !(await readInbox(Math.min(30_000, until - Date.now()))));
      ({ task } = await call(client, 'current_task'));
    }
    if (task === null) {
      say('current_task: none');
    } else {
      say(`current_task: ${task.task_id} ${task.state}, params ${compact(task.params)}`);
      const done = await call(client, 'complete_task', {
        task_id: task.task_id,
        result: { done_by: myId, params: task.params, peer_answer: answered },
        note: 'done by the MCP example agent',
      });
      say(`complete_task ${done.task_id}: ${done.state}, result ${compact(done.result)}`);
    }
    say('done');
    return 0;
  } catch (err) {
    say(err instanceof ToolRefusal ? err.message : `failed: ${(err as Error).message}`);
    return 1;
  } finally {
    await client.close().catch(() => undefined);
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
