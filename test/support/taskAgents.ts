import { randomUUID } from 'node:crypto';
import { CoordinatorClients, ServiceCaller } from './clients';
import { pollUntil } from './poll';
import { WireAgent, wireJson, type WireInbox, type WireItem } from './routerWire';

/**
 * The scheduler's wire as the README "Tasks, priorities and preemption" tells agent authors: SchedulerService calls
 * (with the trailer that says why a preemption or shutdown was refused) and a test agent that receives CONTROL
 * commands from `coordinator` and answers them with protocol ACKs.
 */

type SchedulerMethod = 'SubmitTask' | 'RequestPreemption' | 'ShutdownAgent' | 'PollActivityBuffer' | 'PurgeActivity';

/** SchedulerService over a real grpc-js channel, with one bearer token. */
export class SchedulerClient extends ServiceCaller<SchedulerMethod> {
  constructor(address: string, token: string | undefined) {
    super(address, token, 'sw4rm.scheduler.SchedulerService');
  }

  async submit(request: {
    agent_id: string;
    task_id?: string;
    priority?: number;
    params?: unknown;
    content_type?: string;
    scope?: string;
  }): Promise<{ accepted: boolean; reason: string }> {
    const params = request.params === undefined ? Buffer.from('{}') : Buffer.from(JSON.stringify(request.params));
    return (
      await this.call<{ accepted: boolean; reason: string }>('SubmitTask', {
        content_type: 'application/json',
        ...request,
        params,
      })
    ).response;
  }
}

/** One CONTROL command the agent received: the stream item and its parsed payload. */
export interface ReceivedCommand {
  readonly item: WireItem;
  readonly command: Record<string, unknown> & { command: string };
}

/**
 * A test agent over the wire: registers with `name` as its type, reports RUNNABLE once, streams its inbox, confirms
 * every delivery, and lets the test answer each CONTROL command with ACKs.
 */
export class TaskTestAgent {
  readonly wire: WireAgent;
  inbox!: WireInbox;
  private readonly clients: CoordinatorClients;

  constructor(
    readonly address: string,
    readonly token: string | undefined,
    readonly agentId: string,
    readonly type = 'worker',
  ) {
    this.wire = new WireAgent(address, token, agentId);
    this.clients = new CoordinatorClients(address, token);
  }

  async start(): Promise<this> {
    const registered = await this.clients.registerAgent({
      agent_id: this.agentId,
      name: this.type,
      communication_class: 'STANDARD',
      modalities_supported: ['application/json'],
    });
    if (!registered.accepted) throw new Error(`registration of ${this.agentId} refused: ${registered.reason}`);
    this.inbox = this.wire.openInbox();
    await this.heartbeat('RUNNABLE');
    return this;
  }

  heartbeat(state: string): Promise<{ ok: boolean }> {
    return this.clients.heartbeat(this.agentId, state);
  }

  /** The next CONTROL command `name` (for `taskId` when given) that has not been taken yet; its delivery is confirmed. */
  async command(name: string, taskId?: string, timeoutMs = 5_000): Promise<ReceivedCommand> {
    const item = await this.inbox.waitFor(
      `CONTROL ${name}${taskId ? ` for ${taskId}` : ''}`,
      (i) => {
        if (this.taken.has(i.msg.message_id) || i.msg.message_type !== 'CONTROL' || i.msg.producer_id !== 'coordinator')
          return false;
        const c = wireJson<{ command?: string; task_id?: string }>(i.msg);
        return c.command === name && (taskId === undefined || c.task_id === taskId);
      },
      timeoutMs,
    );
    this.taken.add(item.msg.message_id);
    await this.wire.ackDelivery(item.seq, item.msg.message_id);
    return { item, command: wireJson(item.msg) };
  }

  /** Whether a CONTROL command `name` (for `taskId` when given) arrived and was not taken yet (nothing is taken here). */
  has(name: string, taskId?: string): boolean {
    return this.inbox.items.some((i) => {
      if (this.taken.has(i.msg.message_id) || i.msg.message_type !== 'CONTROL' || i.msg.producer_id !== 'coordinator')
        return false;
      const c = wireJson<{ command?: string; task_id?: string }>(i.msg);
      return c.command === name && (taskId === undefined || c.task_id === taskId);
    });
  }

  /** The CONTROL commands received so far, in order (names and task ids). */
  commands(): string[] {
    return this.inbox.items
      .filter((i) => i.msg.message_type === 'CONTROL' && i.msg.producer_id === 'coordinator')
      .map((i) => {
        const c = wireJson<{ command?: string; task_id?: string }>(i.msg);
        return `${c.command}${c.task_id ? ` ${c.task_id}` : ''}`;
      });
  }

  /** `result`: a FULFILLED run's output (a workflow node's; README, "Workflows"). */
  async ack(
    received: ReceivedCommand,
    stage: string,
    extra: { error_code?: string; note?: string; result?: unknown } = {},
  ): Promise<void> {
    return this.ackMessage(received.item.msg.message_id, stage, extra);
  }

  /**
   * An ACK of `messageId`, with an idempotency token of its own: a test agent restarted with the same id numbers its
   * envelopes from 1 again, which the router would take for retries of the old ones.
   */
  async ackMessage(
    messageId: string,
    stage: string,
    extra: { error_code?: string; note?: string; result?: unknown } = {},
  ): Promise<void> {
    const envelope = this.wire.envelope({
      message_type: 'ACKNOWLEDGEMENT',
      idempotency_token: `${this.agentId}:ack:${randomUUID()}`,
      payload: { ack_for_message_id: messageId, ack_stage: stage, ...extra },
    });
    const result = await this.wire.send(envelope);
    if (!result.accepted) throw new Error(`${this.agentId}'s ACK ${stage} refused: ${result.reason}`);
  }

  private readonly taken = new Set<string>();

  close(): void {
    this.inbox?.close();
    this.wire.close();
    this.clients.close();
  }
}

/** The first of `agents` that received a CONTROL `name` (for `taskId`) not taken yet, and that command (taken now). */
export async function firstCommand(
  agents: readonly TaskTestAgent[],
  name: string,
  taskId?: string,
  timeoutMs = 5_000,
): Promise<{ agent: TaskTestAgent; received: ReceivedCommand }> {
  const agent = await pollUntil(
    `CONTROL ${name}${taskId ? ` for ${taskId}` : ''} on one of ${agents.map((a) => a.agentId).join(', ')}`,
    () => agents.find((a) => a.has(name, taskId)),
    timeoutMs,
  );
  return { agent, received: await agent.command(name, taskId) };
}
