/**
 * An example SW4RM agent that executes workflow nodes (RFC §17.7), and a runner that creates and starts a workflow from a
 * definition file, written against the canonical protos only (no coordinator code), to copy as a start. README:
 * "Workflows".
 *
 *   npm run example:workflow                                            # the agent: executes the nodes it is sent
 *   npm run example:workflow -- --run examples/workflows/demo.yaml [--data '{"topic": "…"}']
 *                                                                       # CreateWorkflow + StartWorkflow, then prints
 *                                                                       # node states until the workflow ends
 *
 * The agent registers with the type SW4RM_AGENT_NAME (default `example-workflow`: nodes name it `type:example-workflow`),
 * heartbeats and streams its inbox. A node reaches it as a scheduler task: a CONTROL envelope
 * `{"command": "run", "task_id": "wf:<workflow_id>:<node_id>:<run>", "params": {"workflow_id", "node_id", "run",
 * "inputs"}}`. It ACKs RECEIVED, "works" (SW4RM_WORK_MS), and ACKs FULFILLED with the node's output in the ACK payload's
 * `result` (a JSON object; the coordinator writes it to workflow_data by the node's output_mapping). A
 * `preempt_request` finds the run already answered (a node here is short and the inbox is handled in order): it is
 * closed with FULFILLED note `completed`. Its output here:
 * `text` (the node and its run), `score` (0.4 × the run: a first review scores 0.4, a second 0.8, which drives the demo's
 * loop back) and `inputs_seen`. A node whose inputs hold `"fail": true` is answered ACK FAILED (the node FAILS).
 *
 * The runner reads a JSON or YAML file in workflow.proto's field names (`workflow_id`, `nodes: {<id>: {agent_id,
 * dependencies, trigger_type, input_mapping, output_mapping, metadata}}`), gives the workflow a fresh id
 * (`<the file's workflow_id>-<8 hex>`), creates and starts it with `workflow_data` (`--data`, default
 * `{"topic": "workflows"}`) and prints every node's change until the workflow is COMPLETED (exit 0), FAILED or
 * CANCELLED (exit 1). A READY MANUAL node or an EVENT node waits for the editor's Run Node or an event envelope.
 *
 * Environment: SW4RM_REGISTRY_ADDR, SW4RM_ROUTER_ADDR, SW4RM_WORKFLOW_ADDR and SW4RM_TOKEN (from "SW4RM: Copy Agent
 * Environment" or the output of `npm start`). Optional: SW4RM_AGENT_ID (default workflow-agent-<pid>), SW4RM_AGENT_NAME,
 * SW4RM_WORK_MS (default 200), SW4RM_HEARTBEAT_MS (default 5000), SW4RM_PROTOS_DIR.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';

const env = process.env;
const agentId = env.SW4RM_AGENT_ID || `workflow-agent-${process.pid}`;
const agentType = env.SW4RM_AGENT_NAME || 'example-workflow';
const workMs = Number(env.SW4RM_WORK_MS || 200);
const heartbeatMs = Number(env.SW4RM_HEARTBEAT_MS || 5000);
const callDeadlineMs = 10_000;

/** common.proto Envelope as proto-loader hands it over (keepCase, longs and enums as strings). */
interface Envelope {
  message_id: string;
  producer_id: string;
  correlation_id: string;
  message_type: string;
  payload: Buffer;
}

/** What a node's agent receives: the CONTROL `run` of its task. */
interface RunCommand {
  command: 'run';
  task_id: string;
  params: { workflow_id: string; node_id: string; run: number; inputs: Record<string, unknown> };
}

/** workflow.proto NodeState and WorkflowState (keepCase, enums as names). */
interface NodeState {
  node_id: string;
  status: string;
  output: string;
  error: string;
}
interface WorkflowState {
  workflow_id: string;
  node_states: Record<string, NodeState>;
  workflow_data: string;
  metadata: Record<string, string>;
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

function loadClients(): { registry: ServiceClient; router: ServiceClient; workflows: ServiceClient } {
  const protosDir = env.SW4RM_PROTOS_DIR || path.join(__dirname, '..', 'protos');
  const definition = protoLoader.loadSync(['registry.proto', 'router.proto', 'workflow.proto'], {
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
  const credentials = grpc.credentials.createInsecure();
  return {
    registry: new sw4rm.registry.RegistryService(registryAddress, credentials),
    router: new sw4rm.router.RouterService(env.SW4RM_ROUTER_ADDR || registryAddress, credentials),
    workflows: new sw4rm.workflow.WorkflowService(env.SW4RM_WORKFLOW_ADDR || registryAddress, credentials),
  };
}

const { registry, router, workflows } = loadClients();

function metadata(extra: Record<string, string> = {}): grpc.Metadata {
  const md = new grpc.Metadata();
  if (env.SW4RM_TOKEN) md.set('authorization', `Bearer ${env.SW4RM_TOKEN}`);
  md.set('x-correlation-id', randomUUID());
  for (const [key, value] of Object.entries(extra)) md.set(key, value);
  return md;
}

function call<Res>(client: ServiceClient, method: string, request: unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    client[method](
      request,
      metadata(),
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
// The runner (--run <file>)

/** A definition file (JSON or YAML, proto field names) as the WorkflowDefinition message, with a fresh workflow_id. */
function definitionOf(file: string): {
  workflow_id: string;
  nodes: Record<string, unknown>;
  metadata: Record<string, string>;
} {
  const text = fs.readFileSync(file, 'utf8');
  const doc = (/\.json$/i.test(file) ? JSON.parse(text) : parseYaml(text)) as {
    workflow_id?: string;
    nodes?: Record<string, Record<string, unknown>>;
    metadata?: Record<string, string>;
  };
  if (!doc || typeof doc !== 'object' || !doc.nodes || typeof doc.nodes !== 'object')
    throw new Error(`${file}: no nodes`);
  const nodes: Record<string, unknown> = {};
  for (const [id, node] of Object.entries(doc.nodes)) nodes[id] = { node_id: id, ...node };
  const base = String(doc.workflow_id || path.basename(file).replace(/\.[^.]+$/, ''));
  return { workflow_id: `${base}-${randomUUID().slice(0, 8)}`, nodes, metadata: doc.metadata ?? {} };
}

async function runWorkflow(file: string, data: string): Promise<number> {
  const definition = definitionOf(file);
  const created = await call<{ workflow_id: string; success: boolean; error: string }>(workflows, 'CreateWorkflow', {
    definition,
  });
  if (!created.success) {
    console.error(`CreateWorkflow refused: ${created.error}`);
    return 1;
  }
  const id = created.workflow_id;
  say(`created workflow ${id} (${Object.keys(definition.nodes).length} nodes)`);
  const started = await call<{ success: boolean; error: string; state: WorkflowState | null }>(
    workflows,
    'StartWorkflow',
    { workflow_id: id, workflow_data: data },
  );
  if (!started.success) {
    console.error(`StartWorkflow refused: ${started.error}`);
    return 1;
  }
  say(`started ${id} with ${data}`);
  const seen = new Map<string, string>();
  let state = started.state;
  for (;;) {
    if (state) {
      for (const node of Object.values(state.node_states).sort((a, b) => a.node_id.localeCompare(b.node_id))) {
        const line = `${node.status}${node.output ? ` output ${node.output}` : ''}${node.error ? ` (${node.error})` : ''}`;
        if (seen.get(node.node_id) !== line) {
          seen.set(node.node_id, line);
          say(`node ${node.node_id}: ${line}`);
        }
      }
      const workflowState = state.metadata.state;
      if (workflowState === 'COMPLETED' || workflowState === 'FAILED' || workflowState === 'CANCELLED') {
        say(`workflow ${id} ${workflowState}${state.metadata.reason ? `: ${state.metadata.reason}` : ''}`);
        say(`workflow_data ${state.workflow_data}`);
        return workflowState === 'COMPLETED' ? 0 : 1;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
    const answer = await call<{ success: boolean; error: string; state: WorkflowState | null }>(
      workflows,
      'GetWorkflowState',
      { workflow_id: id },
    );
    if (!answer.success) {
      console.error(`GetWorkflowState: ${answer.error}`);
      return 1;
    }
    state = answer.state;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The agent

let sequence = Date.now() * 1000;
let leaving = false;

/** A protocol ACK of a coordinator envelope, with `result` for a FULFILLED run (the node's output). */
async function ack(
  msg: Envelope,
  stage: 'RECEIVED' | 'FULFILLED' | 'FAILED',
  extra: { note?: string; error_code?: string; result?: unknown } = {},
): Promise<void> {
  const bytes = Buffer.from(JSON.stringify({ ack_for_message_id: msg.message_id, ack_stage: stage, ...extra }));
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
  try {
    const { accepted, reason } = await call<{ accepted: boolean; reason: string }>(router, 'SendMessage', {
      msg: envelope,
    });
    if (!accepted) say(`ACK ${stage} refused: ${reason}`);
  } catch (err) {
    say(`ACK ${stage} not sent: ${errorText(err)}`);
  }
}

/** Executes one node: what a real agent would do with its inputs. Its output is a JSON object (at most 4 KiB with the ACK). */
async function execute(msg: Envelope, command: RunCommand): Promise<void> {
  const { workflow_id: workflowId, node_id: nodeId, run, inputs } = command.params;
  say(
    `run ${command.task_id}: node ${nodeId} of ${workflowId} (run ${run}), inputs ${JSON.stringify(inputs).slice(0, 200)}`,
  );
  await ack(msg, 'RECEIVED');
  await new Promise((resolve) => setTimeout(resolve, workMs));
  if (inputs && inputs.fail === true) {
    say(`node ${nodeId}: failing on purpose (inputs.fail)`);
    await ack(msg, 'FAILED', { error_code: 'VALIDATION_ERROR', note: 'inputs.fail was set' });
    return;
  }
  const result = {
    text: `${nodeId} v${run}`,
    score: Math.min(1, Math.round(0.4 * run * 10) / 10),
    inputs_seen: Object.keys(inputs ?? {}).sort(),
  };
  say(`node ${nodeId}: done, result ${JSON.stringify(result)}`);
  await ack(msg, 'FULFILLED', { note: 'done', result });
}

async function react(msg: Envelope): Promise<void> {
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(Buffer.from(msg.payload).toString('utf8')) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  if (msg.producer_id !== 'coordinator' || msg.message_type !== 'CONTROL' || typeof json?.command !== 'string') return;
  if (json.command === 'run') {
    const params = json.params as RunCommand['params'] | undefined;
    if (!params || typeof params.node_id !== 'string') {
      await ack(msg, 'FAILED', {
        error_code: 'VALIDATION_ERROR',
        note: 'not a workflow node: params.node_id is missing',
      });
      return;
    }
    await execute(msg, json as unknown as RunCommand);
  } else if (json.command === 'terminate') {
    await ack(msg, 'FULFILLED', { note: 'terminated' });
  } else if (json.command === 'shutdown') {
    await ack(msg, 'FULFILLED', { note: 'stopped' });
    await leave('shutdown', false);
  } else if (json.command === 'preempt_request') {
    // A node here is short: it finishes instead of yielding. The inbox is handled one envelope after the other, so the
    // run this asks about was answered (FULFILLED or FAILED) before we get here; the README's Tasks table: answer the
    // run as usual, then close the preempt_request with FULFILLED note `completed` (the task is not requeued).
    say(`preempt_request for ${String(json.task_id)}: the run finished first; closing it (completed)`);
    await ack(msg, 'FULFILLED', { note: 'completed' });
  } else {
    // A command this example does not know: taken, nothing done.
    await ack(msg, 'RECEIVED');
  }
}

let inbox: grpc.ClientReadableStream<{ msg: Envelope; seq: string }> | undefined;
let queue: Promise<void> = Promise.resolve();
let heartbeatTimer: NodeJS.Timeout | undefined;

function openInbox(): void {
  if (leaving) return;
  const stream: grpc.ClientReadableStream<{ msg: Envelope; seq: string }> = router.StreamIncoming(
    { agent_id: agentId },
    metadata(),
  );
  inbox = stream;
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
    if (inbox !== stream || leaving) return;
    say(`inbox stream ended (${grpc.status[status.code]}: ${status.details}); reopening in 1 s`);
    setTimeout(openInbox, 1_000);
  });
}

async function leave(why: string, deregister = true): Promise<void> {
  if (leaving) return;
  leaving = true;
  clearInterval(heartbeatTimer);
  if (deregister) {
    try {
      await call(registry, 'DeregisterAgent', { agent_id: agentId, reason: `${why} received` });
      say('deregistered');
    } catch (err) {
      say(`deregister failed: ${errorText(err)}`);
    }
  }
  inbox?.cancel();
  process.exit(0);
}

async function agent(): Promise<void> {
  const registered = await call<{ accepted: boolean; reason: string }>(registry, 'RegisterAgent', {
    agent: {
      agent_id: agentId,
      name: agentType,
      description: 'Executes workflow nodes: takes CONTROL run, answers FULFILLED with a result.',
      capabilities: ['example', 'workflow'],
      communication_class: 'STANDARD',
      modalities_supported: ['application/json'],
      reasoning_connectors: ['sw4rm://reasoning/none'],
    },
  });
  if (!registered.accepted) {
    console.error(`registration refused: ${registered.reason}`);
    process.exit(1);
  }
  await call(registry, 'Heartbeat', { agent_id: agentId, state: 'RUNNABLE' });
  say(`registered as ${agentId} (type ${agentType}): nodes with agent_id type:${agentType} or ${agentId} run here`);
  // After the first RUNNABLE, heartbeats say only "alive": the scheduler moves the agent's state.
  heartbeatTimer = setInterval(
    () =>
      void call(registry, 'Heartbeat', { agent_id: agentId, state: 'AGENT_STATE_UNSPECIFIED' }).catch(() => undefined),
    heartbeatMs,
  );
  openInbox();
  process.on('SIGINT', () => void leave('SIGINT'));
  process.on('SIGTERM', () => void leave('SIGTERM'));
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--run' && args[1]) {
    const dataAt = args.indexOf('--data');
    const data = dataAt > 0 && args[dataAt + 1] ? args[dataAt + 1] : JSON.stringify({ topic: 'workflows' });
    let code = 1;
    try {
      code = await runWorkflow(args[1], data);
    } catch (err) {
      console.error(errorText(err));
    }
    registry.close();
    router.close();
    workflows.close();
    process.exit(code);
  }
  if (args.length > 0) {
    console.error('usage: npm run example:workflow [-- --run <definition.json|yaml> [--data <workflow_data JSON>]]');
    process.exit(2);
  }
  await agent();
}

main().catch((err: unknown) => {
  console.error(errorText(err));
  process.exit(1);
});
