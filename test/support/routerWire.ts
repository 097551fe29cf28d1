import * as grpc from '@grpc/grpc-js';
import { v4 as uuidv4 } from 'uuid';
import { serviceDefinition } from '../../src/server/protos';
import { canonicalDefinition } from './clients';
import type { Envelope, SendResult } from './routerClient';

/**
 * A small RouterService client for flow tests, as an agent uses the wire contract of README "Routing messages
 * (for agent authors)": envelopes with proto-loader field names, the recipient in metadata `sw4rm-to`, the
 * bearer token on every call, one StreamIncoming per agent.
 */

/** The envelope fields the flow tests set: the canonical shape of routerClient.ts, not a copy of it. */
export type WireEnvelope = Pick<
  Envelope,
  | 'message_id'
  | 'idempotency_token'
  | 'producer_id'
  | 'correlation_id'
  | 'sequence_number'
  | 'retry_count'
  | 'message_type'
  | 'content_type'
  | 'content_length'
  | 'ttl_ms'
  | 'timestamp'
  | 'payload'
>;

export interface WireItem {
  seq: string;
  msg: WireEnvelope;
}
export type WireSendResult = SendResult;

type Methods = Record<'SendMessage' | 'StreamIncoming' | 'AckDelivery', grpc.MethodDefinition<unknown, unknown>>;
let methods: Methods | undefined;

function routerMethods(): Methods {
  methods ??= serviceDefinition(canonicalDefinition(), 'sw4rm.router.RouterService') as unknown as Methods;
  return methods;
}

export function wireJson<T = Record<string, unknown>>(msg: Pick<WireEnvelope, 'payload'>): T {
  return JSON.parse(Buffer.from(msg.payload).toString('utf8')) as T;
}

/** The ACK payload of an ACKNOWLEDGEMENT item, undefined for anything else. */
export function wireAck(item: WireItem): Record<string, unknown> | undefined {
  return item.msg.message_type === 'ACKNOWLEDGEMENT' ? wireJson(item.msg) : undefined;
}

/** One agent on the wire: numbers its envelopes, sends, acknowledges, and reads its inbox stream. */
export class WireAgent {
  private readonly client: grpc.Client;
  private sequence = 0;

  constructor(
    address: string,
    private readonly token: string | undefined,
    readonly agentId: string,
  ) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
  }

  metadata(extra: Record<string, string> = {}): grpc.Metadata {
    const metadata = new grpc.Metadata();
    if (this.token) metadata.set('authorization', `Bearer ${this.token}`);
    for (const [key, value] of Object.entries(extra)) metadata.set(key, value);
    return metadata;
  }

  envelope(
    fields: {
      payload?: unknown;
      message_type?: string;
      idempotency_token?: string;
      retry_count?: number;
      correlation_id?: string;
    } = {},
  ): WireEnvelope {
    const payload = Buffer.from(JSON.stringify(fields.payload ?? {}), 'utf8');
    const now = Date.now();
    return {
      message_id: uuidv4(),
      idempotency_token: fields.idempotency_token ?? '',
      producer_id: this.agentId,
      correlation_id: fields.correlation_id ?? uuidv4(),
      sequence_number: String(++this.sequence),
      retry_count: fields.retry_count ?? 0,
      message_type: fields.message_type ?? 'DATA',
      content_type: 'application/json',
      content_length: String(payload.byteLength),
      ttl_ms: '0',
      timestamp: { seconds: String(Math.floor(now / 1000)), nanos: (now % 1000) * 1e6 },
      payload,
    };
  }

  send(msg: WireEnvelope, to?: string): Promise<WireSendResult> {
    const method = routerMethods().SendMessage;
    return new Promise((resolve, reject) => {
      this.client.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        { msg },
        this.metadata(to === undefined ? {} : { 'sw4rm-to': to }),
        { deadline: Date.now() + 10_000 },
        (err, response) => (err ? reject(err) : resolve(response as WireSendResult)),
      );
    });
  }

  /** Sends an ACKNOWLEDGEMENT {ack_for_message_id, ack_stage, error_code?, note?}. */
  ack(ackFor: string, stage: string, extra: { error_code?: string; note?: string } = {}): Promise<WireSendResult> {
    return this.send(
      this.envelope({
        message_type: 'ACKNOWLEDGEMENT',
        payload: { ack_for_message_id: ackFor, ack_stage: stage, ...extra },
      }),
    );
  }

  ackDelivery(
    seq: string,
    messageId: string,
    outcome = 'DELIVERY_ACK_OUTCOME_DELIVERED',
  ): Promise<{ recorded: boolean }> {
    const method = routerMethods().AckDelivery;
    return new Promise((resolve, reject) => {
      this.client.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        { agent_id: this.agentId, seq, message_id: messageId, outcome },
        this.metadata(),
        { deadline: Date.now() + 10_000 },
        (err, response) => (err ? reject(err) : resolve(response as { recorded: boolean })),
      );
    });
  }

  /** Opens this agent's StreamIncoming, optionally with `sw4rm-resume-after`. */
  openInbox(resumeAfter?: string): WireInbox {
    const method = routerMethods().StreamIncoming;
    const call = this.client.makeServerStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      { agent_id: this.agentId },
      this.metadata(resumeAfter === undefined ? {} : { 'sw4rm-resume-after': resumeAfter }),
    ) as grpc.ClientReadableStream<WireItem>;
    return new WireInbox(this.agentId, call);
  }

  close(): void {
    this.client.close();
  }
}

/** The items of one StreamIncoming call, collected in order, and how it ended. */
export class WireInbox {
  readonly items: WireItem[] = [];
  status: grpc.StatusObject | undefined;
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly agentId: string,
    private readonly call: grpc.ClientReadableStream<WireItem>,
  ) {
    call.on('data', (item: WireItem) => {
      this.items.push(item);
      this.wake();
    });
    call.on('error', () => undefined);
    call.on('status', (status: grpc.StatusObject) => {
      this.status = status;
      this.wake();
    });
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  /** The first item (collected or still to come) matching `predicate`; rejects at the deadline or when the stream ends. */
  waitFor(what: string, predicate: (item: WireItem) => boolean, timeoutMs = 5_000): Promise<WireItem> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.items.find(predicate);
        if (found) return done(() => resolve(found));
        if (this.status)
          return done(() =>
            reject(
              new Error(
                `${this.agentId}'s stream ended (${grpc.status[this.status!.code]}: ${this.status!.details}) without ${what}`,
              ),
            ),
          );
      };
      const timer = setTimeout(
        () =>
          done(() =>
            reject(
              new Error(
                `${this.agentId}'s stream did not deliver ${what} within ${timeoutMs} ms; ` +
                  `it has ${JSON.stringify(this.items.map((i) => [i.seq, i.msg.message_type, i.msg.message_id]))}`,
              ),
            ),
          ),
        timeoutMs,
      );
      const done = (settle: () => void) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        settle();
      };
      this.waiters.add(check);
      check();
    });
  }

  /** The first item carrying message `messageId`. */
  message(messageId: string, timeoutMs?: number): Promise<WireItem> {
    return this.waitFor(`message ${messageId}`, (item) => item.msg.message_id === messageId, timeoutMs);
  }

  /** The first ACK about `messageId` matching `predicate`. */
  ackFor(
    messageId: string,
    predicate: (ack: Record<string, unknown>) => boolean = () => true,
    what = 'an ACK',
    timeoutMs?: number,
  ): Promise<Record<string, unknown>> {
    return this.waitFor(
      `${what} for ${messageId}`,
      (item) => {
        const ack = wireAck(item);
        return ack !== undefined && ack.ack_for_message_id === messageId && predicate(ack);
      },
      timeoutMs,
    ).then((item) => wireAck(item)!);
  }

  /** Resolves once the stream has ended, with its status. */
  ended(timeoutMs = 5_000): Promise<grpc.StatusObject> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!this.status) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(this.status);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`${this.agentId}'s stream did not end within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }

  close(): void {
    this.call.cancel();
  }
}
