import { strict as assert } from 'node:assert';
import { v4 as uuidv4 } from 'uuid';
import type { CoordinatorOptions } from '../../src/core/coordinator';
import type { Disposable } from '../../src/core/events';
import type { HitlPolicy } from '../../src/core/hitl/policy';
import type { StoredEvent } from '../../src/core/log/model';
import type { DescriptorInput } from '../../src/core/registry/descriptor';
import type { RegistryOptions } from '../../src/core/registry/registry';
import type { Envelope } from '../../src/core/router/envelope';
import type { MessageRecord } from '../../src/core/router/model';
import type { InboxSink, RouterOptions, SendResult } from '../../src/core/router/router';
import { validDescriptor } from './fixtures';
import { CoordinatorFixture } from './coordinatorFixture';

/**
 * Unit-test harness for the router: a CoordinatorFixture (a real CoordinatorStore in a temp folder, a ManualClock, a
 * Coordinator) and inbox sinks that collect what the router writes to an agent's stream.
 */

/** An InboxSink that records every delivery (seq, envelope) and every close. */
export class CollectingSink implements InboxSink {
  readonly items: Array<{ seq: number; envelope: Envelope }> = [];
  readonly closes: Array<{ reason: string; detail: string }> = [];

  deliver(seq: number, envelope: Envelope): void {
    this.items.push({ seq, envelope });
  }

  close(reason: 'superseded' | 'deregistered' | 'shutdown', detail: string): void {
    this.closes.push({ reason, detail });
  }

  get seqs(): number[] {
    return this.items.map((i) => i.seq);
  }

  /** Message ids of the envelopes of `type` (all when omitted), in delivery order. */
  ids(type?: string): string[] {
    return this.items
      .filter((i) => type === undefined || i.envelope.messageType === type)
      .map((i) => i.envelope.messageId);
  }

  ofType(type: string): Array<{ seq: number; envelope: Envelope }> {
    return this.items.filter((i) => i.envelope.messageType === type);
  }

  /** ACKNOWLEDGEMENT payloads (parsed JSON), with the envelope they came in. */
  acks(): Array<{ seq: number; envelope: Envelope; payload: Record<string, unknown> }> {
    return this.ofType('ACKNOWLEDGEMENT').map((i) => ({ ...i, payload: json(i.envelope) }));
  }

  /** ACK payloads about `messageId`. */
  acksFor(messageId: string): Array<Record<string, unknown>> {
    return this.acks()
      .filter((a) => a.payload.ack_for_message_id === messageId)
      .map((a) => a.payload);
  }

  clear(): void {
    this.items.length = 0;
  }
}

export function json(envelope: Envelope): Record<string, unknown> {
  return JSON.parse(Buffer.from(envelope.payload).toString('utf8')) as Record<string, unknown>;
}

export interface EnvelopeInput {
  readonly messageId?: string;
  readonly idempotencyToken?: string;
  readonly correlationId?: string;
  readonly sequenceNumber?: string | number;
  readonly retryCount?: number;
  readonly messageType?: string;
  readonly contentType?: string;
  /** Bytes as given, a string as UTF-8, anything else as JSON. Default `{}`. */
  readonly payload?: Uint8Array | string | Record<string, unknown> | unknown[];
  /** Defaults to the payload's byte length. */
  readonly contentLength?: string;
  readonly ttlMs?: number;
  /** Default: the clock's now. */
  readonly timestampMs?: number | null;
}

export function payloadOf(payload: EnvelopeInput['payload']): Uint8Array {
  if (payload === undefined) return Buffer.from('{}');
  if (payload instanceof Uint8Array) return payload;
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  return Buffer.from(JSON.stringify(payload), 'utf8');
}

export const ctx = (correlationId = 'corr-test') => ({ correlationId });

export class RouterHarness extends CoordinatorFixture {
  private readonly sequences = new Map<string, number>();

  constructor(
    readonly routerOptions: Partial<RouterOptions> = {},
    readonly registryOptions: Partial<RegistryOptions> = {},
    /** The HITL policy each (re)started coordinator gets; tests may replace it (`hitlPolicy`) before `restart`. */
    hitlPolicy?: HitlPolicy,
    /** Further options each (re)started coordinator gets (an area's options). */
    coordinatorOptions: Partial<CoordinatorOptions> = {},
  ) {
    super({
      prefix: 'sw4rm-router-',
      coordinator: {
        ...coordinatorOptions,
        registry: registryOptions,
        router: { heartbeatIntervalMs: 0, ...routerOptions },
        hitl: hitlPolicy,
      },
    });
  }

  get hitlPolicy(): HitlPolicy | undefined {
    return this.coordinatorOptions.hitl;
  }

  set hitlPolicy(policy: HitlPolicy | undefined) {
    this.coordinatorOptions = { ...this.coordinatorOptions, hitl: policy };
  }

  get router() {
    return this.coordinator.router;
  }

  get registry() {
    return this.coordinator.registry;
  }

  register(agentId: string, overrides: Partial<DescriptorInput> = {}): void {
    const result = this.registry.register(validDescriptor(agentId, overrides), ctx(`register-${agentId}`));
    assert.equal(result.accepted, true, result.reason);
  }

  /** Opens `agentId`'s inbox stream with a fresh collecting sink. */
  stream(agentId: string, resumeAfter?: number): { sink: CollectingSink; handle: Disposable } {
    const sink = new CollectingSink();
    const handle = this.own(this.router.attach(agentId, sink, ctx(`stream-${agentId}`), resumeAfter));
    return { sink, handle };
  }

  nextSequence(producerId: string): number {
    const next = (this.sequences.get(producerId) ?? 0) + 1;
    this.sequences.set(producerId, next);
    return next;
  }

  envelope(producerId: string, input: EnvelopeInput = {}): Envelope {
    const payload = payloadOf(input.payload);
    return {
      messageId: input.messageId ?? uuidv4(),
      idempotencyToken: input.idempotencyToken ?? '',
      producerId,
      correlationId: input.correlationId ?? uuidv4(),
      sequenceNumber: String(input.sequenceNumber ?? this.nextSequence(producerId)),
      retryCount: input.retryCount ?? 0,
      messageType: input.messageType ?? 'DATA',
      contentType: input.contentType ?? 'application/json',
      contentLength: input.contentLength ?? String(payload.byteLength),
      repoId: '',
      worktreeId: '',
      hlcTimestamp: '',
      ttlMs: input.ttlMs ?? 0,
      timestampMs: input.timestampMs === undefined ? this.clock.now() : input.timestampMs,
      payload,
      parentCorrelationId: '',
    };
  }

  send(envelope: Envelope, to?: string): SendResult {
    return this.router.send(envelope, ctx(`send-${envelope.messageId}`), to === undefined ? {} : { to });
  }

  /** Sends a DATA message from `from` to `to` that must be accepted; answers the envelope. */
  sendData(from: string, to: string, input: EnvelopeInput = {}): Envelope {
    const envelope = this.envelope(from, input);
    const result = this.send(envelope, to);
    assert.ok(
      result.accepted,
      `sending ${envelope.messageId} from ${from} to ${to}: ${result.accepted ? '' : result.reason}`,
    );
    return envelope;
  }

  ackEnvelope(from: string, ackFor: string, stage: string | number, extra: Record<string, unknown> = {}): Envelope {
    return this.envelope(from, {
      messageType: 'ACKNOWLEDGEMENT',
      payload: { ack_for_message_id: ackFor, ack_stage: stage, ...extra },
    });
  }

  /** A protocol ACK from `from` (the recipient of `ackFor`). */
  ack(from: string, ackFor: string, stage: string | number, extra: Record<string, unknown> = {}): SendResult {
    return this.send(this.ackEnvelope(from, ackFor, stage, extra));
  }

  /** An ACK that must be accepted. */
  acked(from: string, ackFor: string, stage: string | number, extra: Record<string, unknown> = {}): void {
    const result = this.ack(from, ackFor, stage, extra);
    assert.ok(result.accepted, `ACK ${stage} from ${from} for ${ackFor}: ${result.accepted ? '' : result.reason}`);
  }

  /** AckDelivery (DELIVERED) for the latest delivery of `messageId` on `sink`. */
  ackDelivery(agentId: string, sink: CollectingSink, messageId: string): boolean {
    const item = [...sink.items].reverse().find((i) => i.envelope.messageId === messageId);
    assert.ok(item, `${messageId} was not delivered on this stream`);
    return this.router.ackDelivery(agentId, item.seq, messageId, 'DELIVERED', ctx(`ack-delivery-${agentId}`));
  }

  state(messageId: string): string | undefined {
    return this.router.message(messageId)?.state;
  }

  events(eventType: string): StoredEvent[] {
    return this.coordinator.log.query({ eventType, limit: 100_000 });
  }

  /** Events of `eventType` whose details.message_id is `messageId`. */
  eventsFor(eventType: string, messageId: string): StoredEvent[] {
    return this.events(eventType).filter((e) => e.details.message_id === messageId);
  }

  /**
   * Advances the clock to `ms` after now: `messageId` is still SENT 1 ms before, then TIMED_OUT with ACK_TIMEOUT
   * (once queued work settled); answers its record.
   */
  async timesOutAfter(messageId: string, ms: number): Promise<MessageRecord> {
    this.clock.advance(ms - 1);
    assert.equal(this.state(messageId), 'SENT');
    this.clock.advance(1);
    await settle();
    const record = this.router.message(messageId)!;
    assert.equal(record.state, 'TIMED_OUT');
    assert.equal(record.errorCode, 'ACK_TIMEOUT');
    return record;
  }
}

/** Lets queued microtasks and immediates run (the router dispatches persisted NACKs in a microtask). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export function reasonCode(result: SendResult): string | undefined {
  return result.accepted ? undefined : /^([A-Z_]+):/.exec(result.reason)?.[1];
}

/** Asserts a refusal with `code`, and that the reason starts with the code name. */
export function assertRefused(result: SendResult, code: string, detail?: RegExp): string {
  assert.equal(result.accepted, false, `expected a refusal ${code}, the message was accepted`);
  if (result.accepted) return '';
  assert.equal(result.code, code, result.reason);
  assert.ok(result.reason.startsWith(`${code}: `), `the reason starts with the code name: ${result.reason}`);
  if (detail) assert.match(result.reason, detail);
  return result.reason;
}
