import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { FIELD_LIMITS } from '../../src/core/fieldLimits';
import { MAX_JSON_DEPTH, PAYLOAD_LIMITS } from '../../src/core/limits';
import { serviceDefinition } from '../../src/server/protos';
import { canonicalDefinition } from './clients';
import {
  ROUTER_PATHS,
  decodeSendRequest,
  encodeSendRequest,
  envelope,
  payloadBytes,
  routerMethods,
  seededUuid,
  type Envelope,
  type UuidSource,
} from './routerClient';

/**
 * Deterministic request generation for the router fuzz test: a seeded PRNG, a minimal protobuf wire writer
 * (for what the proto encoder refuses to produce: invalid UTF-8, wrong wire types, overlong varints), and the
 * generator of the cases. The same seed gives the same requests.
 */

// ---------------------------------------------------------------------------------------------------------------
// PRNG

/** mulberry32: small, fast, good enough for fuzzing, and reproducible from one 32-bit seed. */
export class Prng {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  uint32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** [0, 1) */
  next(): number {
    return this.uint32() / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  weighted<T>(entries: ReadonlyArray<readonly [T, number]>): T {
    const total = entries.reduce((sum, [, w]) => sum + w, 0);
    let r = this.next() * total;
    for (const [value, weight] of entries) {
      r -= weight;
      if (r < 0) return value;
    }
    return entries[entries.length - 1][0];
  }

  bytes(n: number): Buffer {
    const out = Buffer.alloc(n);
    for (let i = 0; i < n; i += 4) {
      const v = this.uint32();
      for (let j = 0; j < 4 && i + j < n; j++) out[i + j] = (v >>> (8 * j)) & 0xff;
    }
    return out;
  }
}

/** The seed from FUZZ_SEED (decimal or 0x-hex), else a fresh random one. */
export function fuzzSeed(env: string | undefined = process.env.FUZZ_SEED): number {
  if (env !== undefined && env.trim() !== '') {
    const seed = Number(env.trim());
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
      throw new Error(`FUZZ_SEED must be an integer from 0 to 4294967295, not '${env}'`);
    return seed;
  }
  return randomBytes(4).readUInt32LE(0);
}

// ---------------------------------------------------------------------------------------------------------------
// Strings

const CONTROL_CHARS = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).concat('\u007f');
const ODD_CHARS = [
  '\u202e',
  '\u200b',
  '\ufeff',
  '\u2028',
  '\u2029',
  '\ufffd',
  '\u0301',
  '\ud800',
  '\udfff',
  '\ud83d\ude00',
  '𝔘',
  'ß',
  'Ω',
  '中',
  '\\',
  '"',
  "'",
  '/',
  '%',
  '{',
  '}',
  '../',
  '%00',
  '${x}',
  '\r\n',
  '<script>',
  'DROP TABLE',
];

export function asciiString(rng: Prng, length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) s += String.fromCharCode(rng.int(0x20, 0x7e));
  return s;
}

/** Random unicode with control characters, lone surrogates (invalid UTF-8 once encoded), astral and RTL characters. */
export function wildString(rng: Prng, length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) {
    const r = rng.next();
    if (r < 0.4) s += String.fromCharCode(rng.int(0x20, 0x7e));
    else if (r < 0.55) s += rng.pick(CONTROL_CHARS);
    else if (r < 0.8) s += rng.pick(ODD_CHARS);
    else s += String.fromCodePoint(rng.int(0xa0, 0x10ffff));
  }
  return s;
}

/** Byte sequences that are not valid UTF-8. */
export const INVALID_UTF8: readonly Buffer[] = [
  Buffer.from([0xff]),
  Buffer.from([0xfe, 0xff]),
  Buffer.from([0xc3]),
  Buffer.from([0xc0, 0xaf]),
  Buffer.from([0xed, 0xa0, 0x80]),
  Buffer.from([0xf4, 0x90, 0x80, 0x80]),
  Buffer.from([0xe2, 0x82]),
  Buffer.from([0x80, 0x80, 0x80]),
];

export function invalidUtf8(rng: Prng, around = 'x'): Buffer {
  return Buffer.concat([Buffer.from(around), rng.pick(INVALID_UTF8), Buffer.from(around), rng.pick(INVALID_UTF8)]);
}

// ---------------------------------------------------------------------------------------------------------------
// Protobuf wire writer

/** A varint; negative values as 64-bit two's complement (10 bytes), as protobuf encodes int64 -1. */
export function varint(value: bigint | number): Buffer {
  let v = BigInt(value);
  if (v < 0n) v = (1n << 64n) + v;
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return Buffer.from(out);
}

export function wireTag(field: number, wireType: number): Buffer {
  return varint((BigInt(field) << 3n) | BigInt(wireType));
}

export function varintField(field: number, value: bigint | number): Buffer {
  return Buffer.concat([wireTag(field, 0), varint(value)]);
}

export function bytesField(field: number, value: Buffer | string): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  return Buffer.concat([wireTag(field, 2), varint(bytes.length), bytes]);
}

/** An Envelope on the wire as (field number, encoded field) pairs, so single fields can be replaced. */
export type WireFields = Array<[number, Buffer]>;

const STRING_FIELDS: Readonly<Record<string, number>> = {
  message_id: 1,
  idempotency_token: 2,
  producer_id: 3,
  correlation_id: 4,
  content_type: 8,
  repo_id: 10,
  worktree_id: 11,
  hlc_timestamp: 12,
  parent_correlation_id: 100,
};

const MESSAGE_TYPE_NUMBERS: Readonly<Record<string, number>> = {
  MESSAGE_TYPE_UNSPECIFIED: 0,
  CONTROL: 1,
  DATA: 2,
  HEARTBEAT: 3,
  NOTIFICATION: 4,
  ACKNOWLEDGEMENT: 5,
  HITL_INVOCATION: 6,
  WORKTREE_CONTROL: 7,
  NEGOTIATION: 8,
  TOOL_CALL: 9,
  TOOL_RESULT: 10,
  TOOL_ERROR: 11,
};

export function envelopeWireFields(e: Envelope): WireFields {
  const fields: WireFields = [];
  for (const [name, no] of Object.entries(STRING_FIELDS)) {
    const value = (e as unknown as Record<string, string>)[name];
    if (value) fields.push([no, bytesField(no, value)]);
  }
  fields.push([5, varintField(5, BigInt(e.sequence_number))]);
  if (e.retry_count) fields.push([6, varintField(6, e.retry_count)]);
  fields.push([7, varintField(7, MESSAGE_TYPE_NUMBERS[e.message_type] ?? Number(e.message_type))]);
  fields.push([9, varintField(9, BigInt(e.content_length))]);
  if (e.ttl_ms !== '0') fields.push([13, varintField(13, BigInt(e.ttl_ms))]);
  if (e.timestamp)
    fields.push([
      14,
      bytesField(14, Buffer.concat([varintField(1, BigInt(e.timestamp.seconds)), varintField(2, e.timestamp.nanos)])),
    ]);
  if (e.payload.length) fields.push([15, bytesField(15, e.payload)]);
  return fields;
}

export function sendRequestFromWire(fields: WireFields): Buffer {
  return bytesField(1, Buffer.concat(fields.map(([, bytes]) => bytes)));
}

// ---------------------------------------------------------------------------------------------------------------
// Cases

export type FuzzTarget = 'SendMessage' | 'AckDelivery' | 'StreamIncoming' | 'RegisterAgent' | 'Heartbeat';
/**
 * How a case authenticates. Two `authorization` headers cannot be sent with grpc-js: Node's http2 refuses a
 * repeated single-value header in session.request(), and grpc-js then discards the whole connection, failing
 * every call in flight with UNAVAILABLE "Connection dropped". 'doubled' puts two credentials in one value instead.
 */
export type AuthVariant = 'valid' | 'lowercase' | 'none' | 'wrong' | 'doubled' | 'malformed';

export const TARGET_PATHS: Readonly<Record<FuzzTarget, string>> = {
  SendMessage: ROUTER_PATHS.SendMessage,
  AckDelivery: ROUTER_PATHS.AckDelivery,
  StreamIncoming: ROUTER_PATHS.StreamIncoming,
  RegisterAgent: '/sw4rm.registry.RegistryService/RegisterAgent',
  Heartbeat: '/sw4rm.registry.RegistryService/Heartbeat',
};

export interface FuzzCase {
  readonly index: number;
  /** valid | mutated | ack | wire | raw | stream */
  readonly kind: string;
  readonly target: FuzzTarget;
  readonly body: Buffer;
  readonly auth: AuthVariant;
  /** Values of metadata `sw4rm-to` (none, one, or two). */
  readonly to: readonly string[];
  /** What was done to the request, for the failure message. */
  readonly description: string;
  /** Set when the README's rules leave no doubt that the router must not accept this envelope. */
  readonly mustRefuse?: string;
}

export interface FuzzContext {
  readonly producer: string;
  readonly consumer: string;
  /** Base types the consumer declared in modalities_supported. */
  readonly consumerTypes: readonly string[];
}

/** Where a `to`, producer or token points that no one registered. */
export const GHOST_PREFIX = 'ghost-';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

const NUMBER_STRINGS = [
  '0',
  '1',
  '-1',
  '-9223372036854775808',
  '9223372036854775807',
  '18446744073709551615',
  '18446744073709551616',
  '99999999999999999999999999',
  'NaN',
  'Infinity',
  '-Infinity',
  '1e30',
  '1.5',
  'abc',
  '',
  ' 7 ',
  '0x10',
  '007',
];

const STAGES: ReadonlyArray<string | number | null | boolean> = [
  'RECEIVED',
  'READ',
  'FULFILLED',
  'REJECTED',
  'FAILED',
  'TIMED_OUT',
  'ACK_STAGE_UNSPECIFIED',
  'received',
  'Fulfilled',
  'BOGUS',
  '',
  0,
  1,
  2,
  3,
  4,
  5,
  6,
  7,
  99,
  -1,
  3.5,
  null,
  true,
];

/**
 * error_code values for fuzzed ACKs. Never INTERNAL_ERROR (name or 99): the consumer may legitimately report its
 * own failure with it, the router records that in the log, and the test reads any INTERNAL_ERROR in the log as
 * a fault of the coordinator.
 */
const ERROR_CODE_VALUES: ReadonlyArray<string | number> = [
  'BUFFER_FULL',
  'NO_ROUTE',
  'VALIDATION_ERROR',
  'ACK_TIMEOUT',
  'DUPLICATE_DETECTED',
  'TOOL_TIMEOUT',
  'NOPE',
  '',
  0,
  1,
  14,
  98,
  1000,
  -3,
];

const CONTENT_TYPES = [
  '',
  'json',
  'application/json',
  'APPLICATION/JSON',
  'application/json; charset=utf-8',
  'text/plain',
  'text/plain; charset=utf-8',
  'application/xml',
  'application/octet-stream',
  'image/png',
  'application/protobuf',
  '*/*',
  'text/',
  '/json',
  'application/json\u0000',
];

/** Generates the deterministic request list: `count` requests from one seed. */
export class FuzzGenerator {
  readonly uuid: UuidSource;
  private sequence = 0n;
  /** message_ids of the valid envelopes generated so far (to duplicate and to acknowledge). */
  private readonly sentIds: string[] = [];
  private readonly tokens: string[] = [];
  private index = 0;
  /** Cases the proto encoder refused to serialise (counted, not sent). */
  readonly unencodable: string[] = [];

  constructor(
    readonly rng: Prng,
    readonly ctx: FuzzContext,
  ) {
    this.uuid = seededUuid(() => rng.bytes(16));
  }

  /** The producer's next sequence number (the final end-to-end message continues from here). */
  nextSequence(): string {
    this.sequence += 1n;
    return this.sequence.toString();
  }

  generate(count: number): FuzzCase[] {
    const cases: FuzzCase[] = [];
    while (cases.length < count) {
      const kind = this.rng.weighted([
        ['valid', 8],
        ['mutated', 42],
        ['ack', 15],
        ['wire', 12],
        ['raw', 21],
        ['stream', 2],
      ] as const);
      const made = this.make(kind);
      if (made) cases.push(made);
    }
    return cases;
  }

  private make(kind: 'valid' | 'mutated' | 'ack' | 'wire' | 'raw' | 'stream'): FuzzCase | undefined {
    switch (kind) {
      case 'valid':
        return this.valid();
      case 'mutated':
        return this.mutated();
      case 'ack':
        return this.ack();
      case 'wire':
        return this.wire();
      case 'raw':
        return this.raw();
      case 'stream':
        return this.stream();
    }
  }

  private baseEnvelope(): Envelope {
    const rng = this.rng;
    const payload = rng.weighted<Record<string, unknown> | string>([
      [{ task: 'fuzz', n: rng.int(0, 1e6) }, 6],
      [{ text: wildString(rng, rng.int(0, 40)) }, 2],
      [{ blob: 'x'.repeat(rng.int(0, 3000)) }, 1],
    ]);
    const token = rng.chance(0.5) ? `${this.ctx.producer}:fuzz:${rng.uint32().toString(16)}` : '';
    if (token) this.tokens.push(token);
    return envelope(
      {
        producer_id: this.ctx.producer,
        sequence_number: this.nextSequence(),
        message_type: rng.weighted([
          ['DATA', 6],
          ['CONTROL', 1],
          ['NOTIFICATION', 1],
          ['TOOL_CALL', 1],
        ]),
        payload,
        idempotency_token: token,
        ttl_ms: rng.chance(0.1) ? rng.int(1000, 60_000) : 0,
      },
      this.uuid,
    );
  }

  private pickTo(): string[] {
    const rng = this.rng;
    const { producer, consumer } = this.ctx;
    return rng.weighted<string[]>([
      [[consumer], 60],
      [[], 8],
      [[''], 3],
      [['coordinator'], 4],
      [[producer], 4],
      [[`${GHOST_PREFIX}${rng.int(0, 99)}`], 5],
      [[asciiString(rng, rng.int(200, 6000))], 3],
      [[consumer, producer], 2],
      [[consumer, consumer], 1],
      [[` ${consumer} `], 1],
      [[consumer.toUpperCase()], 1],
      [[asciiString(rng, rng.int(1, 30))], 3],
    ]);
  }

  private pickAuth(): AuthVariant {
    return this.rng.weighted<AuthVariant>([
      ['valid', 92],
      ['lowercase', 2],
      ['none', 2],
      ['wrong', 2],
      ['doubled', 1],
      ['malformed', 1],
    ]);
  }

  private sendCase(
    kind: string,
    msg: Envelope | Record<string, unknown> | undefined,
    to: string[],
    description: string,
    refusal?: string,
  ): FuzzCase | undefined {
    let body: Buffer;
    try {
      body = encodeSendRequest(msg);
    } catch (err) {
      this.unencodable.push(`${description}: ${(err as Error).message}`);
      return undefined;
    }
    const auth = kind === 'valid' ? 'valid' : this.pickAuth();
    const decoded = decodeSendRequest(body).msg;
    return {
      index: this.index++,
      kind,
      target: 'SendMessage',
      body,
      auth,
      to,
      description,
      mustRefuse: mustRefuse(decoded, to, this.ctx, this.sentIds) ?? refusal,
    };
  }

  private valid(): FuzzCase | undefined {
    const e = this.baseEnvelope();
    if (e.message_type === 'DATA') this.sentIds.push(e.message_id);
    return this.sendCase('valid', e, [this.ctx.consumer], `valid ${e.message_type} to ${this.ctx.consumer}`);
  }

  private mutated(): FuzzCase | undefined {
    const rng = this.rng;
    const e: Record<string, unknown> = { ...this.baseEnvelope() };
    const applied: string[] = [];
    const mutations = rng.int(1, 4);
    for (let i = 0; i < mutations; i++) applied.push(this.mutate(e));
    const to = this.pickTo();
    if (rng.chance(0.03)) return this.sendCase('mutated', undefined, to, 'SendMessageRequest without msg');
    return this.sendCase('mutated', e, to, `${applied.join('; ')} → to ${JSON.stringify(to).slice(0, 80)}`);
  }

  /** One mutation of an envelope given as a plain object; answers what it did. */
  private mutate(e: Record<string, unknown>): string {
    const rng = this.rng;
    const { producer, consumer } = this.ctx;
    const setPayload = (payload: Buffer, keepLength = false): void => {
      e.payload = payload;
      if (!keepLength) e.content_length = String(payload.length);
    };
    const which = rng.int(0, 19);
    switch (which) {
      case 0: {
        const field = rng.pick([
          'message_id',
          'producer_id',
          'correlation_id',
          'sequence_number',
          'message_type',
          'content_type',
          'content_length',
          'payload',
          'timestamp',
          'retry_count',
        ]);
        delete e[field];
        return `dropped ${field}`;
      }
      case 1: {
        const value = rng.pick([
          'abc',
          '',
          '00000000-0000-0000-0000-000000000000',
          '6ba7b810-9dad-11d1-80b4-00c04fd430c8',
          this.uuid().toUpperCase(),
          ` ${this.uuid()}`,
          this.uuid().replace(/-/g, ''),
          'x'.repeat(rng.int(100, 5000)),
          wildString(rng, 36),
        ]);
        e.message_id = value;
        return `message_id ${JSON.stringify(value).slice(0, 60)}`;
      }
      case 2: {
        const value = rng.pick([
          consumer,
          'coordinator',
          '',
          '   ',
          `${GHOST_PREFIX}${rng.int(0, 99)}`,
          wildString(rng, rng.int(1, 30)),
          'p'.repeat(rng.int(200, 3000)),
          producer.toUpperCase(),
        ]);
        e.producer_id = value;
        return `producer_id ${JSON.stringify(value).slice(0, 60)}`;
      }
      case 3: {
        const value = rng.pick([
          '',
          ' ',
          '\t\n',
          wildString(rng, rng.int(1, 50)),
          'c'.repeat(rng.int(300, 10_000)),
          'not-a-uuid',
        ]);
        e.correlation_id = value;
        return `correlation_id ${JSON.stringify(value).slice(0, 60)}`;
      }
      case 4: {
        const value = rng.chance(0.8)
          ? rng.pick(NUMBER_STRINGS)
          : rng.pick<unknown>([1.5, -5, 2 ** 53 + 1, true, { low: -1, high: -1, unsigned: true }]);
        e.sequence_number = value;
        return `sequence_number ${JSON.stringify(value)}`;
      }
      case 5: {
        const value = rng.pick<unknown>([-1, 2 ** 32, 2 ** 31, NaN, 1.5, '7', 'x', 1_000_000]);
        e.retry_count = value;
        return `retry_count ${String(value)}`;
      }
      case 6: {
        const value = rng.chance(0.6)
          ? rng.pick<unknown>([0, 12, 13, 42, 99, 255, 2 ** 31 - 1, -1, 5, 3, 1, 7])
          : rng.pick<unknown>([
              'MESSAGE_TYPE_UNSPECIFIED',
              'NOT_A_TYPE',
              'data',
              'HEARTBEAT',
              'ACKNOWLEDGEMENT',
              'TOOL_ERROR',
              'HITL_INVOCATION',
              'NEGOTIATION',
            ]);
        e.message_type = value;
        return `message_type ${JSON.stringify(value)}`;
      }
      case 7: {
        const value = rng.chance(0.8) ? rng.pick(CONTENT_TYPES) : wildString(rng, rng.int(1, 300));
        e.content_type = value;
        return `content_type ${JSON.stringify(value).slice(0, 60)}`;
      }
      case 8: {
        const length = payloadBytes(e.payload as Buffer | undefined).length;
        const value = rng.pick([
          String(length + 1),
          String(Math.max(0, length - 1)),
          '0',
          '18446744073709551615',
          'NaN',
          '-1',
          String(length * 2),
        ]);
        e.content_length = value;
        return `content_length ${value} (payload ${length} bytes)`;
      }
      case 9: {
        const value = rng.pick([
          '{',
          '{"a":',
          'nul',
          "{'a':1}",
          '{"a":1}{"b":2}',
          '\u0000',
          '[1,]',
          'NaN',
          '{"a":1e999999}',
          '',
        ]);
        setPayload(Buffer.from(value));
        return `payload invalid JSON ${JSON.stringify(value)}`;
      }
      case 10: {
        const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);
        const value = rng.pick([
          '[]',
          '"s"',
          '42',
          'null',
          'true',
          '{}',
          '{"__proto__":{"to":"x"}}',
          '{"constructor":{"prototype":{}}}',
          // README "Limits": JSON nests at most MAX_JSON_DEPTH levels; around the limit and far beyond it.
          `{"a":${deep(MAX_JSON_DEPTH - 1)}}`,
          `{"a":${deep(MAX_JSON_DEPTH)}}`,
          `{"to":"${consumer}","a":${deep(5000)}}`,
          deep(100_000),
          `{"s":"${'['.repeat(200)}"}`,
        ]);
        setPayload(Buffer.from(value));
        return `payload JSON ${value.slice(0, 80)}`;
      }
      case 11: {
        const to = rng.pick([
          consumer,
          producer,
          'coordinator',
          `${GHOST_PREFIX}1`,
          '',
          42,
          null,
          [consumer],
          { id: consumer },
        ]);
        setPayload(Buffer.from(JSON.stringify({ to, task: 'payload-routed' })));
        return `payload "to": ${JSON.stringify(to)}`;
      }
      case 12: {
        const payload = rng.chance(0.5)
          ? invalidUtf8(rng)
          : Buffer.concat([Buffer.from('{"s":"'), invalidUtf8(rng), Buffer.from('"}')]);
        setPayload(payload);
        if (rng.chance(0.5)) e.content_type = 'text/plain; charset=utf-8';
        return `payload with invalid UTF-8 as ${String(e.content_type)}`;
      }
      case 13: {
        const [type, size] = rng.pick<[string, number]>([
          ['CONTROL', 70 * 1024],
          ['CONTROL', PAYLOAD_LIMITS.CONTROL],
          ['CONTROL', PAYLOAD_LIMITS.CONTROL + 1],
          ['NOTIFICATION', 33 * 1024],
          ['ACKNOWLEDGEMENT', 5 * 1024],
          ['HITL_INVOCATION', 257 * 1024],
          ['DATA', 200 * 1024],
        ]);
        e.message_type = type;
        const body = JSON.stringify({ blob: 'y'.repeat(Math.max(0, size - 12)) });
        setPayload(Buffer.from(body.length > size ? body.slice(0, size - 2) + '"}' : body));
        return `${type} payload of ${(e.payload as Buffer).length} bytes`;
      }
      case 14: {
        const value = rng.pick<unknown>(['1', '0', '18446744073709551615', '-1', 'NaN', 1]);
        e.ttl_ms = value;
        return `ttl_ms ${JSON.stringify(value)}`;
      }
      case 15: {
        const value = rng.pick<unknown>([
          { seconds: '-62135596801', nanos: 0 },
          { seconds: '253402300800', nanos: 0 },
          { seconds: '0', nanos: 2_000_000_000 },
          { seconds: '1', nanos: -1 },
          null,
          { seconds: 'NaN' },
          { seconds: '9223372036854775807', nanos: 999_999_999 },
          { seconds: String(Math.floor(Date.now() / 1000) - 3600), nanos: 0 },
        ]);
        e.timestamp = value;
        return `timestamp ${JSON.stringify(value)}`;
      }
      case 16: {
        const value =
          this.tokens.length && rng.chance(0.7)
            ? rng.pick(this.tokens)
            : rng.pick(['', wildString(rng, 20), 't'.repeat(rng.int(300, 4000)), `${consumer}:other:1`]);
        e.idempotency_token = value;
        return `idempotency_token ${JSON.stringify(value).slice(0, 60)}`;
      }
      case 17: {
        if (this.sentIds.length === 0) return 'no message_id to duplicate yet';
        e.message_id = rng.pick(this.sentIds);
        return `duplicated message_id ${String(e.message_id)}`;
      }
      case 18: {
        const field = rng.pick(['state', 'repo_id', 'worktree_id', 'hlc_timestamp', 'parent_correlation_id']);
        // README "Limits": oversize values as well as odd characters.
        const long = rng.chance(0.2)
          ? rng.pick(['r'.repeat(rng.int(100, 400)), 'r'.repeat(rng.int(1000, 100_000))])
          : undefined;
        e[field] =
          field === 'state'
            ? rng.pick<unknown>(['ENVELOPE_STATE_FULFILLED', 'ENVELOPE_STATE_SENT', 4, 99])
            : (long ?? wildString(rng, rng.int(0, 200)));
        return `${field} set${long ? ` to ${long.length} characters` : ''}`;
      }
      default: {
        // Wrong types the encoder may accept (strings for bytes are base64-decoded) or refuse.
        const [field, value] = rng.pick<[string, unknown]>([
          ['payload', 'not base64!'],
          ['payload', 'eyJhIjoxfQ=='],
          ['payload', 42],
          ['payload', [1, 2, 3]],
          ['message_id', 12345],
          ['producer_id', { id: producer }],
          ['content_length', { low: 5, high: 0 }],
          ['sequence_number', []],
          ['correlation_id', true],
        ]);
        e[field] = value;
        return `${field} of type ${Array.isArray(value) ? 'array' : typeof value}`;
      }
    }
  }

  private ack(): FuzzCase | undefined {
    const rng = this.rng;
    const { producer, consumer } = this.ctx;
    const from = rng.weighted([
      [consumer, 70],
      [producer, 15],
      ['coordinator', 5],
      [`${GHOST_PREFIX}${rng.int(0, 9)}`, 5],
      ['', 5],
    ]);
    const target = rng.weighted<'real' | 'random' | 'empty' | 'garbage' | 'missing'>([
      ['real', 50],
      ['random', 20],
      ['empty', 10],
      ['garbage', 10],
      ['missing', 10],
    ]);
    const payload: Record<string, unknown> = {};
    if (target === 'real' && this.sentIds.length) payload.ack_for_message_id = rng.pick(this.sentIds);
    else if (target === 'random' || target === 'real') payload.ack_for_message_id = this.uuid();
    else if (target === 'empty') payload.ack_for_message_id = '';
    else if (target === 'garbage')
      payload.ack_for_message_id = rng.pick<unknown>([wildString(rng, 40), 42, null, { id: 1 }, ['a']]);
    if (rng.chance(0.95)) payload.ack_stage = rng.pick(STAGES);
    if (rng.chance(0.3)) payload.error_code = rng.pick(ERROR_CODE_VALUES);
    if (rng.chance(0.4))
      payload.note = rng.chance(0.1) ? 'n'.repeat(rng.int(4000, 6000)) : wildString(rng, rng.int(0, 80));
    let body = Buffer.from(JSON.stringify(payload));
    if (rng.chance(0.05)) body = Buffer.from(rng.pick(['{', 'ack', '[]', '"RECEIVED"']));
    const msg = envelope(
      {
        producer_id: from,
        sequence_number: from === producer ? this.nextSequence() : String(rng.int(1, 100_000)),
        message_type: 'ACKNOWLEDGEMENT',
        payload: body,
        content_type: rng.chance(0.9) ? 'application/json' : rng.pick(CONTENT_TYPES),
      },
      this.uuid,
    );
    const to = rng.weighted<string[]>([
      [[], 60],
      [[producer], 15],
      [[consumer], 10],
      [['coordinator'], 5],
      [[`${GHOST_PREFIX}2`], 5],
      [[''], 5],
    ]);
    const ackFor =
      typeof payload.ack_for_message_id === 'string'
        ? payload.ack_for_message_id
        : JSON.stringify(payload.ack_for_message_id);
    // README "Acknowledgements": ack_for_message_id is required; without a recipient in metadata, an ACK for a
    // message no one sent has no route (rule 3 finds no producer).
    const refusal =
      typeof payload.ack_for_message_id !== 'string' || payload.ack_for_message_id === ''
        ? 'an ACKNOWLEDGEMENT without ack_for_message_id'
        : target === 'random' && to.length === 0
          ? 'an ACK for a message no one sent, with no recipient'
          : undefined;
    return this.sendCase(
      'ack',
      msg,
      to,
      `ACK from ${JSON.stringify(from)} for ${target} id ${ackFor} stage ${JSON.stringify(payload.ack_stage)} → to ${JSON.stringify(to)}`,
      body.toString() === JSON.stringify(payload) ? refusal : undefined,
    );
  }

  private wire(): FuzzCase {
    const rng = this.rng;
    const fields = envelopeWireFields(this.baseEnvelope());
    const applied: string[] = [];
    for (let i = rng.int(1, 3); i > 0; i--) {
      const which = rng.int(0, 8);
      const replace = (no: number, bytes: Buffer): void => {
        const at = fields.findIndex(([n]) => n === no);
        if (at >= 0) fields[at] = [no, bytes];
        else fields.push([no, bytes]);
      };
      if (which === 0) {
        const [name, no] = rng.pick(Object.entries(STRING_FIELDS));
        replace(no, bytesField(no, invalidUtf8(rng)));
        applied.push(`invalid UTF-8 in ${name}`);
      } else if (which === 1) {
        const type = rng.pick([0n, 12n, 99n, 2n ** 31n - 1n, 2n ** 32n, -1n, -2147483648n]);
        replace(7, varintField(7, type));
        applied.push(`message_type ${type} on the wire`);
      } else if (which === 2) {
        const no = rng.pick([5, 6, 9, 13]);
        const value = rng.pick([0n, 2n ** 64n - 1n, -1n, 2n ** 63n]);
        replace(no, varintField(no, value));
        applied.push(`field ${no} = ${value}`);
      } else if (which === 3) {
        // An 11-byte varint: more than 64 bits.
        const no = rng.pick([5, 9]);
        replace(
          no,
          Buffer.concat([
            wireTag(no, 0),
            Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
          ]),
        );
        applied.push(`overlong varint in field ${no}`);
      } else if (which === 4) {
        const no = rng.pick([1, 3, 5, 7, 14, 15]);
        const wt = rng.pick([0, 1, 2, 5]);
        const value =
          wt === 0
            ? varint(rng.int(0, 1000))
            : wt === 1
              ? rng.bytes(8)
              : wt === 5
                ? rng.bytes(4)
                : Buffer.concat([varint(3), rng.bytes(3)]);
        replace(no, Buffer.concat([wireTag(no, wt), value]));
        applied.push(`field ${no} with wire type ${wt}`);
      } else if (which === 5) {
        const no = rng.pick([50, 99, 536870911, 16, 17]);
        fields.push([no, bytesField(no, rng.bytes(rng.int(0, 20)))]);
        applied.push(`unknown field ${no}`);
      } else if (which === 6) {
        fields.push([1, bytesField(1, this.uuid())]);
        applied.push('message_id twice');
      } else if (which === 7) {
        replace(14, bytesField(14, rng.bytes(rng.int(1, 12))));
        applied.push('garbage timestamp');
      } else {
        const payload = rng.bytes(rng.int(0, 300));
        replace(15, bytesField(15, payload));
        applied.push(`random ${payload.length}-byte payload`);
      }
    }
    let body = sendRequestFromWire(fields);
    if (rng.chance(0.1)) {
      body = Buffer.concat([body, bytesField(2, rng.bytes(5))]);
      applied.push('unknown field 2 in SendMessageRequest');
    }
    return {
      index: this.index++,
      kind: 'wire',
      target: 'SendMessage',
      body,
      auth: 'valid',
      to: [this.ctx.consumer],
      description: applied.join('; '),
    };
  }

  private raw(): FuzzCase {
    const rng = this.rng;
    const target = rng.weighted<FuzzTarget>([
      ['SendMessage', 55],
      ['RegisterAgent', 15],
      ['AckDelivery', 20],
      ['Heartbeat', 10],
    ]);
    const valid = this.validBody(target);
    const how = rng.weighted([
      ['random', 4],
      ['truncated', 3],
      ['appended', 3],
      ['flipped', 3],
      ['valid', 1],
    ] as const);
    let body: Buffer;
    if (how === 'random')
      body = rng.bytes(
        rng.weighted([
          [rng.int(0, 16), 3],
          [rng.int(16, 512), 3],
          [rng.int(512, 20_000), 1],
        ]),
      );
    else if (how === 'truncated') body = valid.subarray(0, rng.int(0, Math.max(0, valid.length - 1)));
    else if (how === 'appended') body = Buffer.concat([valid, rng.bytes(rng.int(1, 64))]);
    else if (how === 'flipped') {
      body = Buffer.from(valid);
      for (let i = rng.int(1, 4); i > 0 && body.length; i--) body[rng.int(0, body.length - 1)] ^= 1 << rng.int(0, 7);
    } else body = valid;
    return {
      index: this.index++,
      kind: 'raw',
      target,
      body,
      auth: rng.chance(0.95) ? 'valid' : 'none',
      to: target === 'SendMessage' ? [this.ctx.consumer] : [],
      description: `${how} ${body.length} bytes to ${target}`,
    };
  }

  private stream(): FuzzCase {
    const rng = this.rng;
    const id = rng.pick([`${GHOST_PREFIX}${rng.int(0, 999)}`, '', wildString(rng, 10), 'coordinator']);
    const valid = routerMethods().StreamIncoming.requestSerialize({ agent_id: id });
    const body = rng.chance(0.5) ? valid : rng.bytes(rng.int(0, 64));
    return {
      index: this.index++,
      kind: 'stream',
      target: 'StreamIncoming',
      body,
      auth: 'valid',
      to: [],
      description:
        body === valid ? `StreamIncoming for ${JSON.stringify(id)}` : `StreamIncoming with ${body.length} random bytes`,
    };
  }

  /** A valid request body for `target` to truncate, extend or flip. Raw cases never name the real agents. */
  private validBody(target: FuzzTarget): Buffer {
    const rng = this.rng;
    const raw = `fuzz-raw-${rng.int(0, 49)}`;
    switch (target) {
      case 'SendMessage':
        return encodeSendRequest(this.baseEnvelope());
      case 'AckDelivery':
        return routerMethods().AckDelivery.requestSerialize({
          agent_id: rng.pick([this.ctx.consumer, raw, '']),
          seq: String(rng.int(0, 300)),
          message_id: this.sentIds.length && rng.chance(0.5) ? rng.pick(this.sentIds) : this.uuid(),
          outcome: rng.int(0, 1),
        });
      case 'RegisterAgent':
        return registryMethod('RegisterAgent').requestSerialize({
          agent: {
            agent_id: raw,
            name: raw,
            description: 'fuzz',
            capabilities: ['x'],
            communication_class: rng.int(0, 3),
            modalities_supported: ['application/json'],
          },
        });
      case 'Heartbeat':
        return registryMethod('Heartbeat').requestSerialize({
          agent_id: raw,
          state: rng.int(0, 12),
          health: { k: 'v' },
        });
      case 'StreamIncoming':
        return routerMethods().StreamIncoming.requestSerialize({ agent_id: raw });
    }
  }
}

export function registryMethod(name: 'RegisterAgent' | 'Heartbeat'): grpc.MethodDefinition<unknown, unknown> {
  return (
    serviceDefinition(canonicalDefinition(), 'sw4rm.registry.RegistryService') as unknown as Record<
      string,
      grpc.MethodDefinition<unknown, unknown>
    >
  )[name];
}

/** The response decoder of a fuzz target's method. */
export function responseDecoder(target: FuzzTarget): (bytes: Buffer) => unknown {
  if (target === 'RegisterAgent' || target === 'Heartbeat') return registryMethod(target).responseDeserialize;
  if (target === 'StreamIncoming') return (bytes) => bytes;
  return routerMethods()[target].responseDeserialize;
}

function baseType(contentType: string): string {
  return contentType.split(';')[0].trim().toLowerCase();
}

/**
 * Why the router must refuse this envelope, when README "What an envelope must carry" / "Addressing" leave no
 * doubt; checked on the envelope as the server decodes it. Undefined when acceptance would be legitimate.
 */
export function mustRefuse(
  msg: Envelope | null,
  sentTo: readonly string[],
  ctx: FuzzContext,
  sentIds: readonly string[],
): string | undefined {
  if (!msg) return 'the request carries no envelope';
  const to = transmittedMetadataValues(sentTo);
  if (!UUID_V4.test(msg.message_id)) return 'message_id is not a UUIDv4';
  if (msg.producer_id !== ctx.producer && msg.producer_id !== ctx.consumer)
    return `the producer ${JSON.stringify(msg.producer_id.slice(0, 40))} is not registered`;
  if (msg.correlation_id.trim() === '') return 'no correlation_id';
  if (msg.sequence_number === '0') return 'sequence_number 0 (must be ≥ 1)';
  if (msg.message_type === 'MESSAGE_TYPE_UNSPECIFIED') return 'message_type UNSPECIFIED';
  // README "Limits": bounded identifiers without control characters or invalid UTF-8 (U+FFFD once decoded).
  const fields = FIELD_LIMITS.envelope;
  for (const [field, max] of [
    ['repo_id', fields.repo_id],
    ['worktree_id', fields.worktree_id],
    ['hlc_timestamp', fields.hlc_timestamp],
    ['parent_correlation_id', fields.parent_correlation_id],
  ] as const) {
    const value = msg[field];
    if (value.length > max) return `${field} longer than ${max} characters`;
    if (/[\u0000-\u001f\u007f\uFFFD]/.test(value)) return `${field} with a control character or invalid UTF-8`;
  }
  const payload = Buffer.from(msg.payload);
  if (payload.length > 0) {
    if (msg.content_length !== String(payload.length))
      return `content_length ${msg.content_length} ≠ ${payload.length} payload bytes`;
    if (msg.content_type === '') return 'a payload without content_type';
    if (baseType(msg.content_type) === 'application/json') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(payload.toString('utf8'));
      } catch {
        return 'an application/json payload that does not parse';
      }
      if (depthOf(parsed) > MAX_JSON_DEPTH) return `JSON nested deeper than ${MAX_JSON_DEPTH} levels`;
    }
  }
  const limit = PAYLOAD_LIMITS[msg.message_type];
  if (limit !== undefined && payload.length > limit) return `a ${msg.message_type} payload over ${limit} bytes`;
  if (to.length === 1) {
    const known = [ctx.producer, ctx.consumer, 'coordinator'];
    if (to[0] !== '' && !known.includes(to[0].trim().toLowerCase()))
      return `the recipient ${JSON.stringify(to[0].slice(0, 40))} is not registered`;
    if (to[0] === msg.producer_id) return 'a producer never receives its own message';
    if (
      to[0] === ctx.consumer &&
      payload.length > 0 &&
      msg.message_type !== 'ACKNOWLEDGEMENT' &&
      !ctx.consumerTypes.includes(baseType(msg.content_type))
    ) {
      return `content type ${msg.content_type} not declared by the recipient`;
    }
  }
  if (msg.message_type === 'ACKNOWLEDGEMENT' && msg.producer_id === ctx.producer) {
    const ack = (() => {
      try {
        return JSON.parse(payload.toString('utf8')) as { ack_for_message_id?: unknown };
      } catch {
        return undefined;
      }
    })();
    if (ack && typeof ack.ack_for_message_id === 'string' && sentIds.includes(ack.ack_for_message_id)) {
      return 'only the recipient of a message may acknowledge it';
    }
  }
  return undefined;
}

/** The nesting depth of a parsed JSON value, measured independently of the coordinator's scan (iteratively). */
function depthOf(value: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (typeof node !== 'object' || node === null) continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/**
 * The metadata values the server receives of those a client adds. HTTP/2 forbids a field value that starts or
 * ends with a space or tab (RFC 9113 §8.2.1); Node's HTTP/2 layer drops such a field before grpc-js sees it,
 * so for the coordinator that `sw4rm-to` was never sent.
 */
export function transmittedMetadataValues(values: readonly string[]): string[] {
  return values.filter((value) => !/^[ \t]|[ \t]$/.test(value));
}

/** Metadata for a case: the bearer token variant and the `sw4rm-to` values. */
export function caseMetadata(fuzzCase: FuzzCase, token: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  switch (fuzzCase.auth) {
    case 'valid':
      metadata.set('authorization', `Bearer ${token}`);
      break;
    case 'lowercase':
      metadata.set('authorization', `bearer ${token}`);
      break;
    case 'none':
      break;
    case 'wrong':
      metadata.set('authorization', `Bearer ${token.slice(1)}x`);
      break;
    case 'doubled':
      metadata.set('authorization', `Bearer ${token}, Bearer ${token}`);
      break;
    case 'malformed':
      metadata.set('authorization', `Token ${token}`);
      break;
  }
  for (const to of fuzzCase.to) metadata.add('sw4rm-to', to);
  return metadata;
}

/** Runs `work` over `items` with at most `concurrency` at once. */
export async function runPool<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++];
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}
