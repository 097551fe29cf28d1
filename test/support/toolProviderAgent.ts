import * as grpc from '@grpc/grpc-js';
import { CoordinatorClients, serviceClient, unary } from './clients';
import { WireAgent, wireJson, type WireInbox, type WireItem } from './routerWire';

/**
 * A tool provider agent over the wire, as README "Write a tool provider" tells agent authors: RegisterAgent, its inbox
 * stream (StreamIncoming), ConnectorService.RegisterProvider with its tools; TOOL_CALL envelopes from `coordinator`
 * arrive in the inbox (ACKed RECEIVED like any message) and are answered by TOOL_RESULT frames or a TOOL_ERROR sent to
 * `coordinator` with correlation_id = call_id. The test decides when and what each call answers.
 */

/** A tool as RegisterProvider takes it (connector.proto ToolDescriptor: schemas as JSON text). */
export interface WireToolDescriptor {
  readonly tool_name: string;
  readonly input_schema: string;
  readonly output_schema?: string;
  readonly idempotent?: boolean;
  readonly needs_worktree?: boolean;
  readonly default_timeout_s?: number;
  readonly max_concurrency?: number;
  readonly side_effects?: string;
}

/** A TOOL_CALL the provider received (its delivery confirmed, ACKed RECEIVED). */
export interface ReceivedToolCall {
  readonly item: WireItem;
  readonly call: {
    readonly call_id: string;
    readonly provider_id: string;
    readonly tool_name: string;
    readonly args: unknown;
    readonly stream: boolean;
    readonly caller_agent_id: string;
    readonly attempt: number;
    readonly execution_policy: Record<string, unknown>;
  };
}

type Client = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

export class ToolProviderAgent {
  readonly wire: WireAgent;
  inbox!: WireInbox;
  private readonly clients: CoordinatorClients;
  private readonly connector: Client;
  private readonly taken = new Set<string>();

  constructor(
    readonly address: string,
    private readonly token: string | undefined,
    readonly agentId: string,
  ) {
    this.wire = new WireAgent(address, token, agentId);
    this.clients = new CoordinatorClients(address, token);
    this.connector = serviceClient(address, 'sw4rm.connector.ConnectorService');
  }

  /** Registers the agent, opens its inbox stream, reports RUNNABLE and registers its tools as a provider. */
  async start(tools: readonly WireToolDescriptor[]): Promise<this> {
    const registered = await this.clients.registerAgent({
      agent_id: this.agentId,
      name: 'ToolProvider',
      communication_class: 'STANDARD',
      modalities_supported: ['application/json'],
    });
    if (!registered.accepted) throw new Error(`registration of ${this.agentId} refused: ${registered.reason}`);
    this.inbox = this.wire.openInbox();
    await this.clients.heartbeat(this.agentId, 'RUNNABLE');
    const answer = await unary<{ ok: boolean; reason: string }>(
      this.connector,
      'RegisterProvider',
      { provider_id: this.agentId, tools },
      this.wire.metadata(),
    );
    if (!answer.ok) throw new Error(`RegisterProvider of ${this.agentId} refused: ${answer.reason}`);
    return this;
  }

  /** The next TOOL_CALL not taken yet (of `toolName` when given): its delivery confirmed and ACKed RECEIVED. */
  async nextCall(toolName?: string, timeoutMs = 15_000): Promise<ReceivedToolCall> {
    const item = await this.inbox.waitFor(
      `TOOL_CALL${toolName ? ` of ${toolName}` : ''}`,
      (i) => {
        if (
          this.taken.has(i.msg.message_id) ||
          i.msg.message_type !== 'TOOL_CALL' ||
          i.msg.producer_id !== 'coordinator'
        )
          return false;
        return toolName === undefined || wireJson<{ tool_name?: string }>(i.msg).tool_name === toolName;
      },
      timeoutMs,
    );
    this.taken.add(item.msg.message_id);
    await this.wire.ackDelivery(item.seq, item.msg.message_id);
    await this.wire.ack(item.msg.message_id, 'RECEIVED');
    return { item, call: wireJson(item.msg) };
  }

  /** One TOOL_RESULT frame of `call` to `coordinator`. */
  async frame(
    call: ReceivedToolCall,
    frameNo: number,
    final: boolean,
    result: unknown,
    summary?: unknown,
  ): Promise<void> {
    const callId = call.call.call_id;
    const payload = {
      call_id: callId,
      frame_no: frameNo,
      final,
      content_type: 'application/json',
      result,
      ...(summary === undefined ? {} : { summary }),
    };
    const sent = await this.wire.send(
      this.wire.envelope({ message_type: 'TOOL_RESULT', correlation_id: callId, payload }),
      'coordinator',
    );
    if (!sent.accepted) throw new Error(`TOOL_RESULT frame ${frameNo} of ${callId} refused: ${sent.reason}`);
  }

  /** The CONTROL cancel_tool_call the coordinator sends for `callId`, if one arrived. */
  cancelRequest(callId: string): Record<string, unknown> | undefined {
    const item = this.inbox.items.find(
      (i) =>
        i.msg.message_type === 'CONTROL' &&
        i.msg.producer_id === 'coordinator' &&
        wireJson<{ command?: string; call_id?: string }>(i.msg).command === 'cancel_tool_call' &&
        wireJson<{ call_id?: string }>(i.msg).call_id === callId,
    );
    return item && wireJson(item.msg);
  }

  close(): void {
    this.inbox?.close();
    this.wire.close();
    this.clients.close();
    this.connector.close();
  }
}
