import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { v4 as uuidv4 } from 'uuid';
import { TRANSPORT_MAX_MESSAGE_BYTES } from '../../src/core/limits';
import { serviceDefinition } from '../../src/server/protos';
import { canonicalDefinition, type CoordinatorClients } from './clients';
import { descriptorMessage } from './fixtures';

/**
 * A wire-level client for RouterService as README "Routing messages (for agent authors)" describes it: the
 * canonical protos through proto-loader (keepCase, longs as String, enums as String, defaults, oneofs), the
 * recipient in metadata `sw4rm-to`, the bearer token on every call.
 */

export const ROUTER_SERVICE = 'sw4rm.router.RouterService';
export const ROUTER_PATHS = Object.freeze({
  SendMessage: `/${ROUTER_SERVICE}/SendMessage`,
  StreamIncoming: `/${ROUTER_SERVICE}/StreamIncoming`,
  AckDelivery: `/${ROUTER_SERVICE}/AckDelivery`,
});

export interface Timestamp {
  seconds: string;
  nanos: number;
}

/** common.proto Envelope as proto-loader hands it over with the canonical options (every field present). */
export interface Envelope {
  message_id: string;
  idempotency_token: string;
  producer_id: string;
  correlation_id: string;
  sequence_number: string;
  retry_count: number;
  message_type: string;
  content_type: string;
  content_length: string;
  repo_id: string;
  worktree_id: string;
  hlc_timestamp: string;
  ttl_ms: string;
  timestamp: Timestamp | null;
  payload: Buffer;
  state: string;
  parent_correlation_id: string;
}

export interface StreamItem {
  seq: string;
  msg: Envelope;
}
export interface SendResult {
  accepted: boolean;
  reason: string;
}
export interface DeliveryAckResult {
  recorded: boolean;
}

/** What a JSON ACKNOWLEDGEMENT payload carries (README "Acknowledgements"); stage and code by name or number. */
export interface AckPayload {
  ack_for_message_id?: string;
  ack_stage?: string | number;
  error_code?: string | number;
  note?: string;
}

export type AckStageName = 'RECEIVED' | 'READ' | 'FULFILLED' | 'REJECTED' | 'FAILED' | 'TIMED_OUT';

/** Payload given as bytes (sent as is), a string (UTF-8) or any other value (JSON-encoded). */
export type PayloadInput = Buffer | Uint8Array | string | Record<string, unknown> | unknown[];

export interface EnvelopeFields {
  producer_id: string;
  sequence_number: number | bigint | string;
  message_type?: string | number;
  payload?: PayloadInput;
  content_type?: string;
  message_id?: string;
  correlation_id?: string;
  idempotency_token?: string;
  retry_count?: number;
  ttl_ms?: number | string;
  /** Defaults to now; null sends none. */
  timestamp?: Timestamp | null;
  repo_id?: string;
  worktree_id?: string;
  hlc_timestamp?: string;
  parent_correlation_id?: string;
}

/** Where fresh UUIDv4s come from: the `uuid` package, or `seededUuid` for a deterministic run. */
export type UuidSource = () => string;

/** UUIDv4s from the `uuid` package, with its random bytes taken from `randomBytes16` (a seeded PRNG). */
export function seededUuid(randomBytes16: () => Uint8Array): UuidSource {
  return () => uuidv4({ random: randomBytes16() });
}

export function payloadBytes(payload: PayloadInput | undefined): Buffer {
  if (payload === undefined) return Buffer.alloc(0);
  if (Buffer.isBuffer(payload)) return payload;
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  return Buffer.from(JSON.stringify(payload), 'utf8');
}

export function nowTimestamp(): Timestamp {
  const ms = Date.now();
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
}

/**
 * A valid envelope (message-types.txt rules 1–8): a fresh UUIDv4 message_id, a UUIDv4 correlation_id unless
 * given, DATA with `application/json` unless told otherwise, content_length = the payload's byte length.
 */
export function envelope(fields: EnvelopeFields, uuid: UuidSource = () => uuidv4()): Envelope {
  const payload = payloadBytes(fields.payload ?? {});
  return {
    message_id: fields.message_id ?? uuid(),
    idempotency_token: fields.idempotency_token ?? '',
    producer_id: fields.producer_id,
    correlation_id: fields.correlation_id ?? uuid(),
    sequence_number: String(fields.sequence_number),
    retry_count: fields.retry_count ?? 0,
    message_type: String(fields.message_type ?? 'DATA'),
    content_type: fields.content_type ?? 'application/json',
    content_length: String(payload.length),
    repo_id: fields.repo_id ?? '',
    worktree_id: fields.worktree_id ?? '',
    hlc_timestamp: fields.hlc_timestamp ?? '',
    ttl_ms: String(fields.ttl_ms ?? 0),
    timestamp: fields.timestamp === undefined ? nowTimestamp() : fields.timestamp,
    payload,
    state: 'ENVELOPE_STATE_UNSPECIFIED',
    parent_correlation_id: fields.parent_correlation_id ?? '',
  };
}

/** The JSON payload of an envelope, or undefined when it is not JSON. */
export function jsonPayload<T = unknown>(msg: Pick<Envelope, 'payload'>): T | undefined {
  try {
    return JSON.parse(Buffer.from(msg.payload).toString('utf8')) as T;
  } catch {
    return undefined;
  }
}

const ACK_STAGE_NUMBERS: Readonly<Record<number, string>> = {
  0: 'ACK_STAGE_UNSPECIFIED',
  1: 'RECEIVED',
  2: 'READ',
  3: 'FULFILLED',
  4: 'REJECTED',
  5: 'FAILED',
  6: 'TIMED_OUT',
};

/** The payload of an ACKNOWLEDGEMENT envelope with ack_stage normalised to its name; undefined if it is none. */
export function ackPayload(msg: Envelope): (AckPayload & { stage: string }) | undefined {
  if (msg.message_type !== 'ACKNOWLEDGEMENT') return undefined;
  const payload = jsonPayload<AckPayload>(msg);
  if (!payload || typeof payload !== 'object') return undefined;
  const stage =
    typeof payload.ack_stage === 'number'
      ? (ACK_STAGE_NUMBERS[payload.ack_stage] ?? String(payload.ack_stage))
      : String(payload.ack_stage ?? '');
  return { ...payload, stage: stage.toUpperCase() };
}

/** The error code name a refusal's reason starts with (`BUFFER_FULL: …` → `BUFFER_FULL`), if it has one. */
export function reasonCode(reason: string): string | undefined {
  return /^([A-Z][A-Z0-9_]*):/.exec(reason)?.[1];
}

/** README "Retries and exactly-once": the JSON a DUPLICATE_DETECTED reason carries after the code. */
export interface DuplicateDetail {
  original_message_id?: string;
  original_status?: string;
  cached_at?: string;
  cached_result?: unknown;
  cached_error?: unknown;
}

export function duplicateDetail(reason: string): DuplicateDetail | undefined {
  if (reasonCode(reason) !== 'DUPLICATE_DETECTED') return undefined;
  const start = reason.indexOf('{');
  if (start < 0) return undefined;
  try {
    return JSON.parse(reason.slice(start)) as DuplicateDetail;
  } catch {
    return undefined;
  }
}

/** The outcome of any call made without a typed client: a response, or the status it ended with. */
export type CallOutcome<T = unknown> =
  | { readonly kind: 'response'; readonly response: T }
  | { readonly kind: 'status'; readonly code: grpc.status; readonly details: string };

export function describeOutcome(outcome: CallOutcome): string {
  return outcome.kind === 'response'
    ? `response ${JSON.stringify(outcome.response)}`
    : `status ${grpc.status[outcome.code]}: ${outcome.details}`;
}

/** Channel options for agent clients: room for the largest envelope, and a quick reconnect after a restart. */
export const ROUTER_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': TRANSPORT_MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': TRANSPORT_MAX_MESSAGE_BYTES,
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 500,
};

export interface RouterCallOptions {
  /** The recipient, sent as metadata `sw4rm-to`. */
  readonly to?: string;
  /** Bearer token; null sends no authorization header. Defaults to the client's token. */
  readonly token?: string | null;
  readonly deadlineMs?: number;
}

export interface InboxOptions {
  /** Sent as metadata `sw4rm-resume-after` on the first open. */
  readonly resumeAfter?: string;
  /** Reopen the stream with backoff when it ends with a transport failure (a restart of the coordinator). */
  readonly reconnect?: boolean;
}

type MethodDefinitions = Record<
  'SendMessage' | 'StreamIncoming' | 'AckDelivery',
  grpc.MethodDefinition<unknown, unknown>
>;

let cachedMethods: MethodDefinitions | undefined;

/** RouterService's method definitions (path, serializers) from the canonical protos. */
export function routerMethods(): MethodDefinitions {
  cachedMethods ??= serviceDefinition(canonicalDefinition(), ROUTER_SERVICE) as unknown as MethodDefinitions;
  return cachedMethods;
}

/** Serialises a SendMessageRequest exactly as a proto-loader client does (throws when the encoder refuses). */
export function encodeSendRequest(msg: Envelope | Record<string, unknown> | undefined): Buffer {
  return routerMethods().SendMessage.requestSerialize(msg === undefined ? {} : { msg });
}

/** Decodes a SendMessageRequest as the server sees it (throws when it does not parse). */
export function decodeSendRequest(bytes: Buffer): { msg: Envelope | null } {
  return routerMethods().SendMessage.requestDeserialize(bytes) as { msg: Envelope | null };
}

const identity = (bytes: Buffer): Buffer => bytes;

/**
 * A client for one agent: it knows its agent_id and numbers its envelopes (sequence_number increases per
 * producer). One grpc channel per client; it survives a restart of the coordinator on the same port.
 */
export class RouterClient {
  readonly grpcClient: grpc.Client;
  private sequence = 0n;

  constructor(
    readonly address: string,
    readonly token: string | undefined,
    readonly agentId: string,
    readonly uuid: UuidSource = () => uuidv4(),
  ) {
    this.grpcClient = new grpc.Client(address, grpc.credentials.createInsecure(), ROUTER_CHANNEL_OPTIONS);
  }

  nextSequence(): string {
    this.sequence += 1n;
    return this.sequence.toString();
  }

  /** A valid envelope from this agent with the next sequence number. */
  envelope(fields: Partial<EnvelopeFields> = {}): Envelope {
    return envelope(
      {
        ...fields,
        producer_id: fields.producer_id ?? this.agentId,
        sequence_number: fields.sequence_number ?? this.nextSequence(),
      },
      this.uuid,
    );
  }

  /** An ACKNOWLEDGEMENT envelope from this agent with payload {ack_for_message_id, ack_stage, error_code?, note?}. */
  ackEnvelope(
    ackForMessageId: string,
    stage: AckStageName | string | number,
    extra: { error_code?: string; note?: string; correlation_id?: string } = {},
  ): Envelope {
    const payload: AckPayload = { ack_for_message_id: ackForMessageId, ack_stage: stage };
    if (extra.error_code !== undefined) payload.error_code = extra.error_code;
    if (extra.note !== undefined) payload.note = extra.note;
    return this.envelope({
      message_type: 'ACKNOWLEDGEMENT',
      payload: payload as Record<string, unknown>,
      correlation_id: extra.correlation_id,
    });
  }

  metadata(options: RouterCallOptions & { resumeAfter?: string } = {}): grpc.Metadata {
    const metadata = new grpc.Metadata();
    const token = options.token === undefined ? this.token : options.token;
    if (token !== null && token !== undefined) metadata.set('authorization', `Bearer ${token}`);
    if (options.to !== undefined) metadata.set('sw4rm-to', options.to);
    if (options.resumeAfter !== undefined) metadata.set('sw4rm-resume-after', options.resumeAfter);
    return metadata;
  }

  /** SendMessage; resolves with {accepted, reason}, rejects with the grpc ServiceError of a failed call. */
  send(msg: Envelope | Record<string, unknown>, options: RouterCallOptions = {}): Promise<SendResult> {
    const method = routerMethods().SendMessage;
    return new Promise((resolve, reject) => {
      this.grpcClient.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        { msg },
        this.metadata(options),
        { deadline: Date.now() + (options.deadlineMs ?? 10_000) },
        (err, response) => (err ? reject(err) : resolve(response as SendResult)),
      );
    });
  }

  /** Sends an ACKNOWLEDGEMENT for `ackForMessageId` at `stage` (README "Acknowledgements"). */
  ack(
    ackForMessageId: string,
    stage: AckStageName | string | number,
    extra: { error_code?: string; note?: string; correlation_id?: string; to?: string } = {},
  ): Promise<SendResult> {
    return this.send(this.ackEnvelope(ackForMessageId, stage, extra), { to: extra.to });
  }

  ackDelivery(
    agentId: string,
    seq: string,
    messageId: string,
    outcome = 'DELIVERY_ACK_OUTCOME_DELIVERED',
    options: RouterCallOptions = {},
  ): Promise<DeliveryAckResult> {
    const method = routerMethods().AckDelivery;
    return new Promise((resolve, reject) => {
      this.grpcClient.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        { agent_id: agentId, seq, message_id: messageId, outcome },
        this.metadata(options),
        { deadline: Date.now() + (options.deadlineMs ?? 10_000) },
        (err, response) => (err ? reject(err) : resolve(response as DeliveryAckResult)),
      );
    });
  }

  /** Any unary RPC with a request given as raw bytes; never rejects: answers the response or the status. */
  rawUnary<T = unknown>(
    path: string,
    body: Buffer,
    metadata: grpc.Metadata,
    deserialize: (bytes: Buffer) => T,
    deadlineMs = 10_000,
  ): Promise<CallOutcome<T>> {
    return new Promise((resolve) => {
      this.grpcClient.makeUnaryRequest(
        path,
        identity,
        deserialize,
        body,
        metadata,
        { deadline: Date.now() + deadlineMs },
        (err, response) =>
          resolve(
            err
              ? { kind: 'status', code: err.code, details: err.details }
              : { kind: 'response', response: response as T },
          ),
      );
    });
  }

  /**
   * A server-streaming call with raw request bytes, watched for `deadlineMs`; answers the status it ended
   * with (DEADLINE_EXCEEDED when it was still open) and how many items arrived.
   */
  rawServerStream(
    path: string,
    body: Buffer,
    metadata: grpc.Metadata,
    deadlineMs: number,
  ): Promise<{ code: grpc.status; details: string; items: number }> {
    return new Promise((resolve) => {
      const call = this.grpcClient.makeServerStreamRequest(path, identity, identity, body, metadata, {
        deadline: Date.now() + deadlineMs,
      });
      let items = 0;
      call.on('data', () => {
        items++;
      });
      call.on('error', () => undefined);
      call.on('status', (status: grpc.StatusObject) => resolve({ code: status.code, details: status.details, items }));
    });
  }

  /** Opens this or another agent's inbox stream (StreamIncoming) and collects what arrives. */
  openInbox(agentId: string = this.agentId, options: InboxOptions = {}): Inbox {
    const method = routerMethods().StreamIncoming;
    return new Inbox(
      agentId,
      options,
      (resumeAfter) =>
        this.grpcClient.makeServerStreamRequest(
          method.path,
          method.requestSerialize,
          method.responseDeserialize,
          { agent_id: agentId },
          this.metadata({ resumeAfter }),
        ) as grpc.ClientReadableStream<StreamItem>,
    );
  }

  close(): void {
    this.grpcClient.close();
  }
}

/** How an inbox stream ended. */
export interface StreamEnd {
  readonly code: grpc.status;
  readonly details: string;
  readonly at: number;
}

/** Status codes after which reopening the stream cannot help: the coordinator answered, and said no. */
const FINAL_STREAM_CODES = new Set<grpc.status>([
  grpc.status.UNIMPLEMENTED,
  grpc.status.UNAUTHENTICATED,
  grpc.status.PERMISSION_DENIED,
  grpc.status.NOT_FOUND,
  grpc.status.INVALID_ARGUMENT,
  grpc.status.FAILED_PRECONDITION,
  // A newer stream for the same agent replaced this one (README "The inbox stream").
  grpc.status.ABORTED,
]);

/**
 * One agent's inbox: a StreamIncoming call whose items are collected in order. With `reconnect`, the stream is
 * reopened with backoff (100 ms doubling to 1 s) when it ends with anything but a final answer, so an agent
 * rides out a coordinator restart the way a reference SDK does.
 */
export class Inbox {
  readonly items: StreamItem[] = [];
  readonly ends: StreamEnd[] = [];
  /** How many times the stream was opened. */
  opens = 0;
  /** Set when the stream ended with a code that reopening cannot fix. */
  final: StreamEnd | undefined;
  /** When the stream call that is open now was opened (undefined while none is open). */
  openedAt: number | undefined;
  private call: grpc.ClientReadableStream<StreamItem> | undefined;
  private closed = false;
  private reconnecting: boolean;
  private backoffMs = 100;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners = new Set<(item: StreamItem) => void>();

  constructor(
    readonly agentId: string,
    options: InboxOptions,
    private readonly open: (resumeAfter?: string) => grpc.ClientReadableStream<StreamItem>,
  ) {
    this.reconnecting = options.reconnect ?? false;
    this.start(options.resumeAfter);
  }

  /** True while a stream call is open (opened and not ended). */
  get live(): boolean {
    return this.call !== undefined;
  }

  get lastSeq(): string | undefined {
    return this.items.at(-1)?.seq;
  }

  /** Calls `listener` for every item from now on; answers a function that unsubscribes. */
  onItem(listener: (item: StreamItem) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The first item (already collected or still to come) that satisfies `predicate`; rejects after the timeout. */
  waitFor(predicate: (item: StreamItem) => boolean, timeoutMs: number, what = 'a matching item'): Promise<StreamItem> {
    const found = this.items.find(predicate);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const unsubscribe = this.onItem((item) => {
        if (!predicate(item)) return;
        clearTimeout(timer);
        unsubscribe();
        resolve(item);
      });
      const timer = setTimeout(() => {
        unsubscribe();
        reject(new Error(`${this.agentId}'s inbox did not receive ${what} within ${timeoutMs} ms: ${this.describe()}`));
      }, timeoutMs);
    });
  }

  describe(): string {
    const ends = this.ends.map((e) => `${grpc.status[e.code]} (${e.details})`);
    return (
      `${this.items.length} items in ${this.opens} stream(s)${this.live ? ', stream open' : ''}; ` +
      `stream ends: ${ends.length ? [...new Set(ends)].join('; ') : 'none'}`
    );
  }

  /** Stops reopening the stream but leaves an open one open (to watch a server drain it). */
  stopReconnecting(): void {
    this.reconnecting = false;
    clearTimeout(this.timer);
  }

  close(): void {
    this.closed = true;
    this.stopReconnecting();
    this.call?.cancel();
    this.call = undefined;
    this.openedAt = undefined;
  }

  private start(resumeAfter?: string): void {
    if (this.closed) return;
    this.opens++;
    const call = this.open(resumeAfter);
    this.call = call;
    this.openedAt = Date.now();
    call.on('data', (item: StreamItem) => {
      this.backoffMs = 100;
      this.items.push(item);
      for (const listener of [...this.listeners]) listener(item);
    });
    // Every end arrives as 'status' (OK or not); 'error' only duplicates it for non-OK codes.
    call.on('error', () => undefined);
    call.on('status', (status: grpc.StatusObject) => {
      if (this.call === call) {
        this.call = undefined;
        this.openedAt = undefined;
      }
      if (this.closed) return;
      const end: StreamEnd = { code: status.code, details: status.details, at: Date.now() };
      this.ends.push(end);
      if (FINAL_STREAM_CODES.has(status.code)) {
        this.final = end;
        return;
      }
      if (!this.reconnecting) return;
      this.timer = setTimeout(() => this.start(), this.backoffMs);
      this.backoffMs = Math.min(this.backoffMs * 2, 1000);
    });
  }
}

/** Registers `agentId` through RegistryService with a valid descriptor and checks it was accepted. */
export async function registerRouterAgent(
  clients: CoordinatorClients,
  agentId: string,
  overrides: Record<string, unknown> = {},
): Promise<void> {
  const response = await clients.registerAgent(descriptorMessage(agentId, overrides));
  assert.equal(response.accepted, true, `registering ${agentId}: ${response.reason}`);
}

/** gRPC codes that mean "the coordinator could not be reached (yet)": retry after a backoff. */
export const TRANSPORT_FAILURE_CODES: ReadonlySet<grpc.status> = new Set([
  grpc.status.UNAVAILABLE,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.CANCELLED,
]);

export function isTransportFailure(err: unknown): boolean {
  const code = (err as Partial<grpc.ServiceError> | undefined)?.code;
  return code !== undefined && TRANSPORT_FAILURE_CODES.has(code);
}

/** Waits `ms` between attempts of a retry loop (backoff), never in place of waiting for a state. */
export function backoff(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Calls `fn` until it does not fail with a transport failure (the coordinator is down or restarting), with
 * backoff from 50 ms doubling to 1 s. Other errors are thrown at once; after `deadline` the last failure is.
 */
export async function retryTransport<T>(what: string, fn: () => Promise<T>, deadline: number): Promise<T> {
  let wait = 50;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (!isTransportFailure(err)) throw err;
      if (Date.now() + wait > deadline)
        throw new Error(`${what}: still failing at the deadline: ${(err as Error).message}`);
    }
    await backoff(wait);
    wait = Math.min(wait * 2, 1000);
  }
}

/** A call to a coordinator that just (re)started, retried for up to 20 s while its channel cannot connect yet (as an agent retries). */
export function retryAfterRestart<T>(what: string, fn: () => Promise<T>): Promise<T> {
  return retryTransport(what, fn, Date.now() + 20_000);
}
