/**
 * An example SW4RM agent that takes tasks from the coordinator's scheduler (RFC §7, §8), written against the canonical
 * protos only (no coordinator code), to copy as a start. README: "Tasks, priorities and preemption".
 *
 *   npm run example:tasks                      # the agent: takes CONTROL `run` commands and works them in steps
 *   npm run example:tasks -- --submit [target] # submits a demo batch (operator token) to `target`, default type:example-tasks
 *
 * The agent registers (its type is its descriptor's name, SW4RM_AGENT_NAME, default `example-tasks`), heartbeats and
 * streams its inbox. The coordinator sends it CONTROL envelopes with a JSON payload `{"command": …}`:
 * - `run`: it ACKs RECEIVED (the task starts), works `params.steps` steps of SW4RM_STEP_MS each (a safe point after
 *   each), and ACKs FULFILLED with a note (the task's result), or FAILED with an error_code when `params.fail` is set.
 *   `params.non_preemptible_steps` makes the first steps of the task one non-preemptible section.
 *   A `run` that arrives while it is busy is ACKed REJECTED ALREADY_IN_PROGRESS: the task goes back to the queue.
 * - `preempt_request`: at the next safe point it ACKs FULFILLED with note `yielded` (the task goes back to the queue).
 *   Inside a non-preemptible section it first ACKs RECEIVED with note `non_preemptible:<ms>` (RFC §7.2 deferral: the
 *   section's maximum duration, a little more than it needs), and yields at the safe point that ends the section.
 *   A task that ends before a safe point lets it yield (the last step, or no section ends in time) answers the run,
 *   then closes the preempt_request FULFILLED `completed`.
 * - `terminate`: it stops at once and ACKs FULFILLED `terminated` (then its run envelope FULFILLED `terminated`).
 * - `shutdown`: it finishes the task if that fits in `drain_timeout_seconds`, else stops it (ACK FAILED AGENT_SHUTDOWN
 *   on the run), ACKs the shutdown FULFILLED and exits; the coordinator deregisters it.
 *
 * The submitter sends five tasks so that priority order and a preemption show in the agent's output: A (priority 5,
 * with a non-preemptible section), B and C (10), D (5, equal to A: no preemption) and URGENT (-10, preempts A).
 * The agent then runs A, URGENT (after A yields), A again, D, B, C.
 *
 * Environment: SW4RM_REGISTRY_ADDR, SW4RM_ROUTER_ADDR, SW4RM_SCHEDULER_ADDR and SW4RM_TOKEN (from "SW4RM: Copy Agent
 * Environment" or the output of `npm start`; the submitter needs the operator token to submit for another agent).
 * Optional: SW4RM_AGENT_ID (default task-agent-<pid>), SW4RM_AGENT_NAME, SW4RM_STEP_MS (default 1000),
 * SW4RM_HEARTBEAT_MS (default 5000), SW4RM_PROTOS_DIR.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';

const env = process.env;
const agentId = env.SW4RM_AGENT_ID || `task-agent-${process.pid}`;
const agentType = env.SW4RM_AGENT_NAME || 'example-tasks';
const stepMs = Number(env.SW4RM_STEP_MS || 1000);
const heartbeatMs = Number(env.SW4RM_HEARTBEAT_MS || 5000);
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

/** The CONTROL commands of the scheduler (README, "Tasks, priorities and preemption"). */
type Command =
  | { command: 'run'; task_id: string; params: TaskParams; content_type: string; priority: number; scope: unknown }
  | { command: 'preempt_request'; task_id: string; reason: string; by_task_id: string; by_priority: number }
  | { command: 'terminate'; task_id: string; grace_ms: number; reason: string }
  | { command: 'shutdown'; reason: string; drain_timeout_seconds: number };

/** What this example understands in a task's params (any JSON is accepted; these fields are optional). */
interface TaskParams {
  title?: string;
  steps?: number;
  /** The first N steps are one non-preemptible section (an atomic rewrite, say). */
  non_preemptible_steps?: number;
  fail?: boolean;
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

function loadClients(): { registry: ServiceClient; router: ServiceClient; scheduler: ServiceClient } {
  const protosDir = env.SW4RM_PROTOS_DIR || path.join(__dirname, '..', 'protos');
  const definition = protoLoader.loadSync(['registry.proto', 'router.proto', 'scheduler.proto'], {
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
    scheduler: new sw4rm.scheduler.SchedulerService(env.SW4RM_SCHEDULER_ADDR || registryAddress, credentials),
  };
}

const { registry, router, scheduler } = loadClients();

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

function errorText(err: unknown): string {
  const status = err as grpc.ServiceError;
  return status.code !== undefined ? `${grpc.status[status.code]}: ${status.details}` : String(err);
}

// ---------------------------------------------------------------------------------------------------------------
// The submitter (--submit)

async function submitDemo(target: string): Promise<void> {
  const tasks: { name: string; priority: number; params: TaskParams; pauseMs: number }[] = [
    {
      name: 'A',
      priority: 5,
      params: { title: 'A: rewrite notes/a.md (steps 1-2 non-preemptible)', steps: 4, non_preemptible_steps: 2 },
      pauseMs: 300,
    },
    { name: 'B', priority: 10, params: { title: 'B: tidy notes/b.md', steps: 2 }, pauseMs: 0 },
    { name: 'C', priority: 10, params: { title: 'C: tidy notes/c.md', steps: 2 }, pauseMs: 0 },
    { name: 'D', priority: 5, params: { title: 'D: same priority as A, so it waits', steps: 2 }, pauseMs: 500 },
    { name: 'URGENT', priority: -10, params: { title: 'URGENT: fix the build', steps: 2 }, pauseMs: 0 },
  ];
  const run = randomUUID().slice(0, 8);
  for (const task of tasks) {
    if (task.pauseMs === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    const taskId = `demo-${run}-${task.name}`;
    try {
      const answer = await call<{ accepted: boolean; reason: string }>(scheduler, 'SubmitTask', {
        agent_id: target,
        task_id: taskId,
        priority: task.priority,
        content_type: 'application/json',
        params: Buffer.from(JSON.stringify(task.params)),
        scope: `repo:demo/notes/${task.name.toLowerCase()}.md`,
      });
      console.log(
        `${taskId} priority ${task.priority}: ${answer.accepted ? 'accepted' : 'refused'}${answer.reason ? ` (${answer.reason})` : ''}`,
      );
    } catch (err) {
      console.error(`${taskId}: ${errorText(err)}`);
      process.exitCode = 1;
    }
    if (task.pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, task.pauseMs));
  }
  console.log('Submitted. The agent prints the order it runs them in: A, URGENT (A yields), A again, D, B, C.');
}

// ---------------------------------------------------------------------------------------------------------------
// The agent: registration and heartbeats

let leaving = false;
/** Reported once after (re-)registration; afterwards the coordinator drives the state and heartbeats only say "alive". */
let reportRunnable = true;

async function register(): Promise<void> {
  const response = await call<{ accepted: boolean; reason: string }>(registry, 'RegisterAgent', {
    agent: {
      agent_id: agentId,
      name: agentType,
      description: 'Takes scheduler tasks (CONTROL run), works them in steps with safe points, yields when asked.',
      capabilities: ['example', 'tasks'],
      communication_class: 'STANDARD',
      modalities_supported: ['application/json'],
      reasoning_connectors: ['sw4rm://reasoning/none'],
    },
  });
  if (!response.accepted) {
    console.error(`registration refused: ${response.reason}`);
    process.exit(1);
  }
  reportRunnable = true;
  say(`registered as ${agentId} (type ${agentType})`);
}

async function heartbeat(): Promise<void> {
  try {
    // RUNNABLE once (INITIALIZING → RUNNABLE); then AGENT_STATE_UNSPECIFIED: presence only, the scheduler moves the state.
    // Never RUNNABLE while a task is current (after a re-registration mid-task): that would offer the agent a second task.
    const state = reportRunnable && !current ? 'RUNNABLE' : 'AGENT_STATE_UNSPECIFIED';
    const { ok } = await call<{ ok: boolean }>(registry, 'Heartbeat', {
      agent_id: agentId,
      state,
      health: { pid: String(process.pid) },
    });
    if (ok) {
      if (state === 'RUNNABLE') reportRunnable = false;
    } else if (!leaving) {
      say('heartbeat refused: the coordinator does not know this agent; registering again');
      await register();
    }
  } catch (err) {
    say(`heartbeat failed: ${errorText(err)}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Sending ACKs

let sequence = Date.now() * 1000;

/** A protocol ACK of a coordinator envelope: an ACKNOWLEDGEMENT, routed back to `coordinator` (the envelope's producer). */
async function ack(
  msg: Envelope,
  stage: 'RECEIVED' | 'READ' | 'FULFILLED' | 'REJECTED' | 'FAILED',
  note = '',
  errorCode = '',
): Promise<void> {
  const bytes = Buffer.from(
    JSON.stringify({
      ack_for_message_id: msg.message_id,
      ack_stage: stage,
      ...(errorCode ? { error_code: errorCode } : {}),
      ...(note ? { note } : {}),
    }),
  );
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

// ---------------------------------------------------------------------------------------------------------------
// The work: one task at a time, in steps; a safe point after each step

interface Current {
  readonly taskId: string;
  readonly run: Envelope;
  readonly title: string;
  readonly steps: number;
  /** params.fail: the task ends with ACK FAILED (to see a failed task). */
  readonly fail: boolean;
  step: number;
  /** The section covers steps 1..nonPreemptibleSteps; its end is a safe point. */
  readonly nonPreemptibleSteps: number;
  /** When the section will end (an estimate: the steps' duration), for the declared maximum. */
  readonly nonPreemptibleUntil: number;
  preempt?: Envelope;
  terminate?: Envelope;
  wake?: () => void;
}

let current: Current | undefined;
/** Steps done of tasks that yielded (RFC §8.1 SUSPENDED: the agent keeps its execution state and resumes from it). */
const resumeAt = new Map<string, number>();
let shutdown: { msg: Envelope; drainUntil: number } | undefined;

/** Waits one step, or less when `terminate` interrupts it. */
function stepWait(task: Current): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, stepMs);
    task.wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });
}

async function work(task: Current): Promise<void> {
  while (task.step < task.steps) {
    await stepWait(task);
    if (task.terminate) {
      say(`task ${task.taskId}: terminated at step ${task.step}/${task.steps}`);
      // Free before answering: the next `run` may arrive as soon as the scheduler has the ACK.
      current = undefined;
      await ack(task.terminate, 'FULFILLED', 'terminated');
      // The run envelope is done too: this ACK only closes it (the scheduler ended the task on the terminate ACK, FAILED
      // forced_preemption, or CANCELLED when the operator cancelled it).
      await ack(task.run, 'FULFILLED', 'terminated');
      await closePreempt(task, 'terminated');
      return;
    }
    task.step++;
    say(
      `task ${task.taskId}: step ${task.step}/${task.steps} done${task.step <= task.nonPreemptibleSteps ? ' (non-preemptible)' : ''}`,
    );
    // A safe point: the state is consistent here, so this is where the agent may yield.
    if (task.step === task.steps) break;
    if (task.preempt && task.step >= task.nonPreemptibleSteps) {
      say(`task ${task.taskId}: yielding at step ${task.step}/${task.steps}`);
      resumeAt.set(task.taskId, task.step);
      if (resumeAt.size > 1000) resumeAt.delete(resumeAt.keys().next().value!);
      // Free before answering: the more urgent task's `run` follows the yield at once.
      current = undefined;
      await ack(task.preempt, 'FULFILLED', 'yielded');
      // The run envelope is done as well: the task comes back in a new `run` (this ACK only closes the old envelope).
      await ack(task.run, 'FULFILLED', 'yielded');
      return;
    }
    if (shutdown && Date.now() + (task.steps - task.step) * stepMs > shutdown.drainUntil) {
      say(`task ${task.taskId}: stopped for shutdown at step ${task.step}/${task.steps}`);
      current = undefined;
      await ack(task.run, 'FAILED', `incomplete: shut down at step ${task.step}/${task.steps}`, 'AGENT_SHUTDOWN');
      await closePreempt(task, 'stopped');
      return leave('shutdown');
    }
  }
  current = undefined;
  const note = `done: ${task.title} (${task.steps} steps)`;
  if (task.fail) {
    say(`task ${task.taskId}: failed on purpose`);
    await ack(task.run, 'FAILED', 'params.fail was set', 'INTERNAL_ERROR');
  } else {
    say(`task ${task.taskId}: ${note}`);
    await ack(task.run, 'FULFILLED', note);
  }
  await closePreempt(task, 'completed');
  if (shutdown) await leave('shutdown');
}

/**
 * A preempt_request the task never yielded for (it ended first: the request came during its last step, or no safe
 * point came in time): closed after the run's ACK, FULFILLED `completed` (or `terminated` / `stopped`).
 */
async function closePreempt(task: Current, note: 'completed' | 'terminated' | 'stopped'): Promise<void> {
  if (!task.preempt) return;
  say(`task ${task.taskId}: ended before yielding; preempt_request closed (${note})`);
  await ack(task.preempt, 'FULFILLED', note);
}

async function onCommand(msg: Envelope, command: Command): Promise<void> {
  switch (command.command) {
    case 'run': {
      if (shutdown) return ack(msg, 'FAILED', 'shutting down', 'AGENT_SHUTDOWN');
      // REJECTED (not FAILED, which would end the task): the task goes back to the queue for later.
      if (current) return ack(msg, 'REJECTED', `busy with ${current.taskId}`, 'ALREADY_IN_PROGRESS');
      const params: TaskParams = command.params && typeof command.params === 'object' ? command.params : {};
      const steps = Math.max(1, Math.min(100, Math.floor(Number(params.steps) || 3)));
      const title = typeof params.title === 'string' ? params.title : command.task_id;
      const nonPreemptibleSteps = Math.max(0, Math.min(steps, Math.floor(Number(params.non_preemptible_steps) || 0)));
      const step = Math.min(resumeAt.get(command.task_id) ?? 0, steps - 1);
      resumeAt.delete(command.task_id);
      const task: Current = {
        taskId: command.task_id,
        run: msg,
        title,
        steps,
        fail: params.fail === true,
        step,
        nonPreemptibleSteps,
        nonPreemptibleUntil: Date.now() + Math.max(0, nonPreemptibleSteps - step) * stepMs,
      };
      current = task;
      say(
        `run ${command.task_id} (priority ${command.priority}): ${title}${step > 0 ? ` (resuming after step ${step})` : ''}`,
      );
      await ack(msg, 'RECEIVED');
      // Worked in the background: the inbox must stay free for preempt_request and terminate.
      void work(task);
      return;
    }
    case 'preempt_request': {
      const task = current;
      if (!task || task.taskId !== command.task_id)
        return ack(msg, 'FAILED', `not_running: ${command.task_id}`, 'VALIDATION_ERROR');
      task.preempt = msg;
      say(
        `preempt_request for ${command.task_id} by ${command.by_task_id || 'the operator'} (priority ${command.by_priority}): ${command.reason}`,
      );
      if (task.step < task.nonPreemptibleSteps) {
        // RFC §7.2: a non-preemptible section with its maximum duration defers the preemption. Past that maximum the
        // scheduler may terminate the task, so declare a little more than the section needs: half a step of margin.
        const maximum = Math.max(0, task.nonPreemptibleUntil - Date.now()) + Math.ceil(stepMs / 2);
        say(`task ${task.taskId}: non-preemptible until step ${task.nonPreemptibleSteps} ends (at most ${maximum} ms)`);
        await ack(msg, 'RECEIVED', `non_preemptible:${maximum}`);
      } else {
        await ack(msg, 'RECEIVED');
      }
      return;
    }
    case 'terminate': {
      const task = current;
      if (!task || task.taskId !== command.task_id) return ack(msg, 'FULFILLED', 'terminated');
      say(`terminate ${command.task_id} (grace ${command.grace_ms} ms): ${command.reason}`);
      task.terminate = msg;
      task.wake?.();
      return;
    }
    case 'shutdown': {
      say(`shutdown: ${command.reason} (drain ${command.drain_timeout_seconds} s)`);
      shutdown = { msg, drainUntil: Date.now() + Math.max(0, command.drain_timeout_seconds * 1000 - 500) };
      if (!current) await leave('shutdown');
      return;
    }
    default:
      say(`unknown command ${JSON.stringify((command as { command: unknown }).command)}`);
      await ack(msg, 'FAILED', 'unknown command', 'VALIDATION_ERROR');
  }
}

async function react(msg: Envelope): Promise<void> {
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(Buffer.from(msg.payload).toString('utf8')) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  if (msg.producer_id === 'coordinator' && msg.message_type === 'CONTROL' && typeof json?.command === 'string') {
    await onCommand(msg, json as unknown as Command);
  } else if (msg.message_type === 'HEARTBEAT' && msg.producer_id === 'coordinator') {
    // The coordinator's stream heartbeats need no answer here (the registry heartbeat says we are alive).
  } else if (
    msg.message_type !== 'ACKNOWLEDGEMENT' &&
    !(msg.producer_id === 'coordinator' && msg.message_type === 'NOTIFICATION')
  ) {
    // Anything else: acknowledged, not acted on (this example only takes tasks).
    say(`${msg.message_type} from ${msg.producer_id}: not a task; acknowledged`);
    await ack(msg, 'RECEIVED');
    await ack(msg, 'FULFILLED', 'the task example only takes CONTROL commands of the scheduler');
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The inbox

let inbox: grpc.ClientReadableStream<{ msg: Envelope; seq: string }> | undefined;
let lastSeq = 0;
let queue: Promise<void> = Promise.resolve();

function openInbox(): void {
  if (leaving) return;
  const stream: grpc.ClientReadableStream<{ msg: Envelope; seq: string }> = router.StreamIncoming(
    { agent_id: agentId },
    metadata(lastSeq > 0 ? { 'sw4rm-resume-after': String(lastSeq) } : {}),
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
      lastSeq = Math.max(lastSeq, Number(item.seq));
    });
  });
  stream.on('error', () => undefined);
  stream.on('status', (status: grpc.StatusObject) => {
    if (inbox !== stream || leaving) return;
    say(`inbox stream ended (${grpc.status[status.code]}: ${status.details}); reopening in 1 s`);
    setTimeout(() => {
      void (/not registered/.test(status.details) ? register() : Promise.resolve()).then(openInbox, openInbox);
    }, 1_000);
  });
}

let heartbeatTimer: NodeJS.Timeout | undefined;

async function leave(why: string): Promise<void> {
  if (leaving) return;
  leaving = true;
  clearInterval(heartbeatTimer);
  if (why === 'shutdown' && shutdown) {
    // The ACK FULFILLED of `shutdown` ends it: the coordinator deregisters the agent.
    await ack(shutdown.msg, 'FULFILLED', 'stopped');
    say('shutdown acknowledged; exiting');
  } else {
    try {
      await call(registry, 'DeregisterAgent', { agent_id: agentId, reason: `${why} received` });
      say('deregistered');
    } catch (err) {
      say(`deregister failed: ${errorText(err)}`);
    }
  }
  inbox?.cancel();
  registry.close();
  router.close();
  scheduler.close();
  process.exit(0);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--submit') {
    await submitDemo(args[1] || `type:${agentType}`);
    scheduler.close();
    return;
  }
  if (args.length > 0) {
    console.error('usage: npm run example:tasks [-- --submit [agent-id | type:<agent type>]]');
    process.exit(2);
  }
  await register();
  await heartbeat();
  heartbeatTimer = setInterval(() => void heartbeat(), heartbeatMs);
  openInbox();
  process.on('SIGINT', () => void leave('SIGINT'));
  process.on('SIGTERM', () => void leave('SIGTERM'));
}

main().catch((err) => {
  console.error(errorText(err));
  process.exit(1);
});
