import * as grpc from '@grpc/grpc-js';
import { performance } from 'node:perf_hooks';
import {
  ackEnvelope,
  dataEnvelope,
  dataPayload,
  Envelope,
  isServiceError,
  isStage,
  parseAck,
  RoleClients,
  StreamItem,
  unary,
} from './protocol';
import { ServerHandle } from './servers';

/** The server answered UNIMPLEMENTED for a RouterService method: the router is not in this build. */
export class RouterUnimplementedError extends Error {
  constructor(detail: string) {
    super(`RouterService not implemented in this build (${detail})`);
    this.name = 'RouterUnimplementedError';
  }
}

/** A failure that makes the figures meaningless: a refused or failed send, a NACK, a broken stream, a lost message. */
export class BenchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BenchError';
  }
}

export interface PairOptions {
  readonly server: ServerHandle;
  readonly producer: RoleClients;
  readonly consumer: RoleClients;
  /** Makes the agent ids unique per pair, e.g. `tput2`. */
  readonly label: string;
  readonly payloadBytes: number;
  /** The consumer also calls AckDelivery for every item it receives. */
  readonly ackDelivery: boolean;
}

export interface PairCounters {
  sent: number;
  completed: number;
  /** FULFILLED ACKs for messages already completed (redelivered ACK envelopes). */
  duplicateAcks: number;
  /** DATA envelopes the consumer had already acknowledged (redeliveries). */
  redeliveredData: number;
  /** Coordinator HEARTBEAT envelopes answered with RegistryService.Heartbeat. */
  heartbeats: number;
  /** Other items on either stream (notifications and the like), ignored. */
  otherItems: number;
  ackDeliveries: number;
}

export function emptyCounters(): PairCounters {
  return {
    sent: 0,
    completed: 0,
    duplicateAcks: 0,
    redeliveredData: 0,
    heartbeats: 0,
    otherItems: 0,
    ackDeliveries: 0,
  };
}

interface Pending {
  readonly start: number;
  accepted: boolean;
  ackedAt: number;
  readonly resolve: (latencyMs: number) => void;
  readonly reject: (err: Error) => void;
}

type Role = 'producer' | 'consumer';

const READY_TIMEOUT_MS = 5_000;
const COORDINATOR_ID = 'coordinator';

/**
 * One producer agent and one consumer agent on one server. The producer sends DATA envelopes to the consumer;
 * the consumer answers each with a FULFILLED ACKNOWLEDGEMENT, which the server forwards to the producer.
 * A message is complete when its SendMessage was accepted and the producer has seen its FULFILLED ACK.
 */
export class AgentPair {
  readonly producerId: string;
  readonly consumerId: string;
  readonly counters: PairCounters = emptyCounters();
  /** Set when AckDelivery answered UNIMPLEMENTED and was switched off. */
  ackDeliveryUnimplemented = false;

  private readonly pending = new Map<string, Pending>();
  private readonly acknowledged = new Set<string>();
  private readonly streams: grpc.ClientReadableStream<StreamItem>[] = [];
  private readonly producerSendMetadata: grpc.Metadata;
  private readonly authMetadata: grpc.Metadata;
  private producerSeq = 0;
  private consumerSeq = 0;
  private ackDelivery: boolean;
  private failure: Error | undefined;
  private closing = false;
  private deliveryAcksInFlight = 0;
  private deliveryAcksSettled: (() => void) | undefined;

  private constructor(private readonly options: PairOptions) {
    const suffix = `${options.server.name}-${options.label}-${process.pid}`;
    this.producerId = `bench-producer-${suffix}`;
    this.consumerId = `bench-consumer-${suffix}`;
    this.ackDelivery = options.ackDelivery;
    this.authMetadata = new grpc.Metadata();
    if (options.server.token !== undefined) this.authMetadata.set('authorization', `Bearer ${options.server.token}`);
    this.producerSendMetadata = this.authMetadata.clone();
    this.producerSendMetadata.set('sw4rm-to', this.consumerId);
  }

  /** Registers both agents (when the server has a registry) and opens both inbox streams. */
  static async open(options: PairOptions): Promise<AgentPair> {
    const pair = new AgentPair(options);
    try {
      if (options.server.registers) {
        await pair.register(options.producer, pair.producerId);
        await pair.register(options.consumer, pair.consumerId);
      }
      await pair.openStreams();
    } catch (err) {
      await pair.close();
      throw err;
    }
    return pair;
  }

  get outstanding(): number {
    return this.pending.size;
  }

  get failed(): Error | undefined {
    return this.failure;
  }

  /** Sends one message; resolves with its latency in ms once it is complete. */
  send(): Promise<number> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    const sequence = ++this.producerSeq;
    const envelope = dataEnvelope(
      this.producerId,
      sequence,
      dataPayload(this.consumerId, sequence, this.options.payloadBytes),
    );
    this.counters.sent += 1;
    return new Promise<number>((resolve, reject) => {
      const entry: Pending = { start: performance.now(), accepted: false, ackedAt: NaN, resolve, reject };
      this.pending.set(envelope.message_id, entry);
      this.options.producer.router.SendMessage(
        { msg: envelope },
        this.producerSendMetadata.clone(),
        (err, response) => {
          if (err) {
            this.fail(classify(err, `producer SendMessage #${sequence}`));
          } else if (!response?.accepted) {
            this.fail(
              new BenchError(`producer SendMessage #${sequence} refused: ${response?.reason ?? 'no response'}`),
            );
          } else {
            entry.accepted = true;
            this.maybeComplete(envelope.message_id, entry);
          }
        },
      );
    });
  }

  /** Marks the pair failed: every outstanding and later send rejects with err. */
  fail(err: Error): void {
    if (this.failure !== undefined) return;
    this.failure = err;
    for (const entry of this.pending.values()) entry.reject(err);
    this.pending.clear();
  }

  /** Cancels both streams and deregisters both agents. */
  async close(): Promise<void> {
    this.closing = true;
    for (const stream of this.streams) stream.cancel();
    if (this.deliveryAcksInFlight > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, READY_TIMEOUT_MS);
        this.deliveryAcksSettled = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    if (!this.options.server.registers) return;
    await Promise.allSettled([
      this.deregister(this.options.producer, this.producerId),
      this.deregister(this.options.consumer, this.consumerId),
    ]);
  }

  private async register(clients: RoleClients, agentId: string): Promise<void> {
    const response = await unary<{ accepted: boolean; reason: string }>((callback) =>
      clients.registry.RegisterAgent(
        {
          agent: {
            agent_id: agentId,
            name: agentId,
            communication_class: 'STANDARD',
            modalities_supported: ['application/json'],
          },
        },
        this.authMetadata.clone(),
        callback,
      ),
    );
    if (!response.accepted) throw new BenchError(`RegisterAgent ${agentId} refused: ${response.reason}`);
    // Leaves INITIALIZING at once, as a real agent does after start-up.
    await this.heartbeat(clients, agentId);
  }

  private async heartbeat(clients: RoleClients, agentId: string): Promise<void> {
    const { ok } = await unary<{ ok: boolean }>((callback) =>
      clients.registry.Heartbeat(
        { agent_id: agentId, state: 'RUNNABLE', health: {} },
        this.authMetadata.clone(),
        callback,
      ),
    );
    if (!ok) throw new BenchError(`Heartbeat ${agentId} refused`);
  }

  private async deregister(clients: RoleClients, agentId: string): Promise<void> {
    await unary<{ ok: boolean }>((callback) =>
      clients.registry.DeregisterAgent(
        { agent_id: agentId, reason: 'benchmark phase over' },
        this.authMetadata.clone(),
        callback,
      ),
    );
  }

  private async openStreams(): Promise<void> {
    const streams = [
      this.openStream('producer', this.options.producer, this.producerId),
      this.openStream('consumer', this.options.consumer, this.consumerId),
    ];
    // The bare server routes only to connected streams and announces each with response headers; the
    // coordinator keeps messages for registered agents durably, so it needs no such wait.
    if (!this.options.server.registers) await Promise.all(streams.map(waitForHeaders));
    if (this.failure !== undefined) throw this.failure;
  }

  private openStream(role: Role, clients: RoleClients, agentId: string): grpc.ClientReadableStream<StreamItem> {
    const stream = clients.router.StreamIncoming({ agent_id: agentId }, this.authMetadata.clone());
    this.streams.push(stream);
    stream.on('data', (item: StreamItem) => {
      if (role === 'producer') this.onProducerItem(item);
      else this.onConsumerItem(item);
    });
    stream.on('error', (err: grpc.ServiceError) => {
      if (this.closing && err.code === grpc.status.CANCELLED) return;
      this.fail(classify(err, `${role} StreamIncoming`));
    });
    stream.on('end', () => {
      if (!this.closing) this.fail(new BenchError(`${role} inbox stream ended by the server`));
    });
    return stream;
  }

  private onConsumerItem(item: StreamItem): void {
    const msg = item.msg;
    if (msg === null) return;
    if (this.ackDelivery) this.confirmDelivery(item, msg);
    if (msg.message_type === 'DATA' && msg.producer_id === this.producerId) {
      if (this.acknowledged.has(msg.message_id)) {
        this.counters.redeliveredData += 1;
        return;
      }
      this.acknowledged.add(msg.message_id);
      const sequence = ++this.consumerSeq;
      const ack = ackEnvelope(this.consumerId, sequence, msg, 'FULFILLED');
      this.options.consumer.router.SendMessage({ msg: ack }, this.authMetadata.clone(), (err, response) => {
        if (err) this.fail(classify(err, `consumer ACK SendMessage #${sequence}`));
        else if (!response?.accepted)
          this.fail(new BenchError(`consumer ACK #${sequence} refused: ${response?.reason ?? 'no response'}`));
      });
      return;
    }
    this.onOtherItem('consumer', msg);
  }

  private onProducerItem(item: StreamItem): void {
    const msg = item.msg;
    if (msg === null) return;
    if (msg.message_type === 'ACKNOWLEDGEMENT' && msg.producer_id === this.consumerId) {
      const ack = parseAck(msg.payload);
      if (ack?.ack_for_message_id !== undefined && isStage(ack.ack_stage, 'FULFILLED', 3)) {
        const entry = this.pending.get(ack.ack_for_message_id);
        if (entry === undefined) {
          this.counters.duplicateAcks += 1;
        } else if (Number.isNaN(entry.ackedAt)) {
          entry.ackedAt = performance.now();
          this.maybeComplete(ack.ack_for_message_id, entry);
        }
        return;
      }
    }
    this.onOtherItem('producer', msg);
  }

  private onOtherItem(role: Role, msg: Envelope): void {
    if (msg.producer_id === COORDINATOR_ID && msg.message_type === 'ACKNOWLEDGEMENT') {
      const ack = parseAck(msg.payload);
      const positive =
        isStage(ack?.ack_stage, 'RECEIVED', 1) ||
        isStage(ack?.ack_stage, 'READ', 2) ||
        isStage(ack?.ack_stage, 'FULFILLED', 3);
      if (!positive) {
        this.fail(
          new BenchError(
            `${role} got a NACK for ${ack?.ack_for_message_id ?? '?'}: ${String(ack?.ack_stage)} ${String(ack?.error_code ?? '')} ${ack?.note ?? ''}`.trim(),
          ),
        );
        return;
      }
    }
    if (msg.producer_id === COORDINATOR_ID && msg.message_type === 'HEARTBEAT' && this.options.server.registers) {
      this.counters.heartbeats += 1;
      const clients = role === 'producer' ? this.options.producer : this.options.consumer;
      const agentId = role === 'producer' ? this.producerId : this.consumerId;
      this.heartbeat(clients, agentId).catch((err: unknown) => {
        if (!this.closing) this.fail(classify(err, `${role} Heartbeat`));
      });
      return;
    }
    this.counters.otherItems += 1;
  }

  private confirmDelivery(item: StreamItem, msg: Envelope): void {
    this.deliveryAcksInFlight += 1;
    this.options.consumer.router.AckDelivery(
      {
        agent_id: this.consumerId,
        seq: item.seq,
        message_id: msg.message_id,
        outcome: 'DELIVERY_ACK_OUTCOME_DELIVERED',
      },
      this.authMetadata.clone(),
      (err) => {
        this.deliveryAcksInFlight -= 1;
        if (this.deliveryAcksInFlight === 0) this.deliveryAcksSettled?.();
        if (err?.code === grpc.status.UNIMPLEMENTED) {
          this.ackDelivery = false;
          this.ackDeliveryUnimplemented = true;
        } else if (err) {
          this.fail(classify(err, 'consumer AckDelivery'));
        } else {
          this.counters.ackDeliveries += 1;
        }
      },
    );
  }

  private maybeComplete(messageId: string, entry: Pending): void {
    if (!entry.accepted || Number.isNaN(entry.ackedAt)) return;
    this.pending.delete(messageId);
    this.counters.completed += 1;
    entry.resolve(entry.ackedAt - entry.start);
  }
}

/** Resolves when the stream has its response headers or has failed (the failure is handled by its error listener). */
function waitForHeaders(stream: grpc.ClientReadableStream<StreamItem>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new BenchError(`inbox stream not open after ${READY_TIMEOUT_MS} ms`)),
      READY_TIMEOUT_MS,
    );
    const settle = (): void => {
      clearTimeout(timer);
      resolve();
    };
    stream.once('metadata', settle);
    stream.once('error', settle);
  });
}

function classify(err: unknown, what: string): Error {
  if (isServiceError(err)) {
    if (err.code === grpc.status.UNIMPLEMENTED) return new RouterUnimplementedError(`${what}: ${err.details}`);
    return new BenchError(`${what} failed: ${grpc.status[err.code] ?? err.code} ${err.details}`);
  }
  return new BenchError(`${what} failed: ${(err as Error).message ?? String(err)}`);
}
