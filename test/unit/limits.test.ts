import { strict as assert } from 'node:assert';
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import { v4 as uuidv4 } from 'uuid';
import { FIELD_LIMITS, identifierRefusal } from '../../src/core/fieldLimits';
import { HitlRequestError, parseBody, parseInvocationRequest } from '../../src/core/hitl/request';
import { jsonBoundsRefusal, jsonDepth, parseBoundedJson } from '../../src/core/json';
import { MAX_JSON_DEPTH, MAX_LOG_DETAILS_BYTES, MIB, ROUTING_JSON_MAX_BYTES } from '../../src/core/limits';
import { validateDescriptor } from '../../src/core/registry/descriptor';
import { checkEnvelope, jsonObject, type Envelope } from '../../src/core/router/envelope';
import { LoggingServiceAdapter } from '../../src/server/services/loggingService';
import { RegistryServiceAdapter } from '../../src/server/services/registryService';
import { validDescriptor } from '../support/fixtures';
import { RouterHarness, assertRefused } from '../support/routerHarness';

const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);

/** A valid DATA envelope with a JSON payload; `body` replaces the payload (content_length follows it). */
const BASE: Omit<Envelope, 'messageId' | 'correlationId' | 'payload' | 'contentLength'> = {
  idempotencyToken: '',
  producerId: 'alpha',
  sequenceNumber: '1',
  retryCount: 0,
  messageType: 'DATA',
  contentType: 'application/json',
  repoId: '',
  worktreeId: '',
  hlcTimestamp: '',
  ttlMs: 0,
  timestampMs: null,
  parentCorrelationId: '',
};
function envelope({
  body = '{"task":"x"}',
  ...rest
}: Partial<Envelope> & { body?: string | Uint8Array } = {}): Envelope {
  const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return {
    ...BASE,
    messageId: uuidv4(),
    correlationId: uuidv4(),
    payload,
    contentLength: String(payload.byteLength),
    ...rest,
  };
}

function invalid(e: Envelope, detail: RegExp): void {
  const refusal = checkEnvelope(e);
  assert.ok(refusal, 'expected VALIDATION_ERROR, the envelope passed');
  assert.equal(refusal.code, 'VALIDATION_ERROR', refusal.detail);
  assert.match(refusal.detail, detail);
}

describe('limits: JSON depth and size (src/core/json.ts)', () => {
  it('measures depth in a linear scan that skips strings and escapes, on bytes and on text alike', () => {
    const cases: Array<[string, number]> = [
      ['1', 0],
      ['"[[[["', 0],
      ['{}', 1],
      ['[[1],[2,[3]]]', 3],
      ['{"a":"\\"[[[","b":[{}]}', 3],
      ['["\\\\",[[]]]', 3],
      ['"é[ü"', 0],
    ];
    for (const [text, depth] of cases) {
      assert.equal(jsonDepth(text), depth, text);
      assert.equal(jsonDepth(Buffer.from(text)), depth, `${text} as bytes`);
    }
  });

  it(`accepts ${MAX_JSON_DEPTH} levels and refuses ${MAX_JSON_DEPTH + 1}, stopping at the limit`, () => {
    assert.equal(jsonBoundsRefusal(nested(MAX_JSON_DEPTH), { what: 'x' }), undefined);
    assert.match(jsonBoundsRefusal(nested(MAX_JSON_DEPTH + 1), { what: 'x' }) ?? '', /x nests deeper than 64 levels/);
    const huge = Buffer.alloc(16 * MIB, '[');
    const started = performance.now();
    assert.equal(jsonDepth(huge), MAX_JSON_DEPTH + 1);
    assert.ok(performance.now() - started < 20, 'the scan stops at the first level too deep');
  });

  it('parseBoundedJson refuses size, then depth, then syntax, and never throws', () => {
    assert.deepEqual(parseBoundedJson('{"a":[1]}', { what: 't', maxBytes: 20 }), { ok: true, value: { a: [1] } });
    const size = parseBoundedJson('"' + 'x'.repeat(30) + '"', { what: 't', maxBytes: 20 });
    assert.ok(!size.ok && size.limit === 'size' && /t is larger than 20 bytes/.test(size.reason));
    const depth = parseBoundedJson(nested(5000), { what: 't' });
    assert.ok(!depth.ok && depth.limit === 'depth' && /deeper than 64/.test(depth.reason));
    const syntax = parseBoundedJson('{', { what: 't' });
    assert.ok(!syntax.ok && syntax.limit === 'syntax' && /t is not valid JSON/.test(syntax.reason));
  });

  it('parseBoundedJson with maxValues: 1 + each {, [ and , outside strings, counted before parsing; depth still first', () => {
    assert.deepEqual(parseBoundedJson('[1,2,3]', { what: 't', maxValues: 4 }), { ok: true, value: [1, 2, 3] });
    const over = parseBoundedJson('[1,2,3,4]', { what: 't', maxValues: 4 });
    assert.ok(
      !over.ok && over.limit === 'values' && over.reason === 't holds more than 4 JSON values (JSON values limit)',
      JSON.stringify(over),
    );
    assert.ok(
      parseBoundedJson('{"a,b":"[{,,,"}', { what: 't', maxValues: 2 }).ok,
      'commas and brackets in strings do not count',
    );
    const deep = parseBoundedJson(nested(5000), { what: 't', maxValues: 100_000 });
    assert.ok(!deep.ok && deep.limit === 'depth', JSON.stringify(deep));
  });
});

describe('limits: envelope fields and payload JSON (checkEnvelope)', () => {
  it('refuses a JSON payload nested deeper than the limit with VALIDATION_ERROR naming it', () => {
    invalid(envelope({ body: nested(5000) }), /the payload nests deeper than 64 levels/);
    invalid(
      envelope({ body: `{"to":"b","x":${nested(65)}}`, contentType: 'application/problem+json' }),
      /deeper than 64/,
    );
    assert.equal(checkEnvelope(envelope({ body: `{"x":${nested(63)}}` })), undefined, '64 levels pass');
    assert.equal(
      checkEnvelope(envelope({ body: nested(5000), contentType: 'application/octet-stream' })),
      undefined,
      'only JSON is scanned',
    );
  });

  const fields: Array<[keyof Envelope, string, number]> = [
    ['repoId', 'repo_id', FIELD_LIMITS.envelope.repo_id],
    ['worktreeId', 'worktree_id', FIELD_LIMITS.envelope.worktree_id],
    ['hlcTimestamp', 'hlc_timestamp', FIELD_LIMITS.envelope.hlc_timestamp],
    ['parentCorrelationId', 'parent_correlation_id', FIELD_LIMITS.envelope.parent_correlation_id],
  ];
  for (const [key, name, max] of fields) {
    it(`bounds ${name} to ${max} characters and refuses NUL and invalid UTF-8 in it`, () => {
      assert.equal(checkEnvelope(envelope({ [key]: 'r'.repeat(max) })), undefined);
      invalid(envelope({ [key]: 'r'.repeat(max + 1) }), new RegExp(`${name} is longer than ${max} characters`));
      invalid(envelope({ [key]: 'r'.repeat(10 * MIB) }), new RegExp(`${name} is longer than ${max}`));
      invalid(envelope({ [key]: 'a\u0000b' }), new RegExp(`${name} contains control characters`));
      invalid(envelope({ [key]: 'a\uFFFDb' }), new RegExp(`${name} is not valid UTF-8`));
    });
  }

  it('refuses invalid UTF-8 in producer_id, correlation_id and idempotency_token, and bounds content_type', () => {
    invalid(envelope({ correlationId: 'c\uFFFD' }), /correlation_id is not valid UTF-8/);
    invalid(envelope({ producerId: 'p\uFFFD' }), /producer_id is not valid UTF-8/);
    invalid(envelope({ idempotencyToken: 't\uFFFD' }), /idempotency_token is not valid UTF-8/);
    invalid(envelope({ idempotencyToken: 't\u0000' }), /idempotency_token contains control characters/);
    invalid(
      envelope({ contentType: `application/json; x=${'y'.repeat(300)}` }),
      /content_type is longer than 256 characters/,
    );
  });

  it(`reads routing JSON only from payloads of at most ${ROUTING_JSON_MAX_BYTES} bytes`, () => {
    const small = envelope({ body: JSON.stringify({ to: 'b' }) });
    assert.deepEqual(jsonObject(small), { to: 'b' });
    const large = envelope({ body: JSON.stringify({ to: 'b', blob: 'x'.repeat(ROUTING_JSON_MAX_BYTES) }) });
    assert.equal(checkEnvelope(large), undefined, 'still valid JSON');
    assert.equal(jsonObject(large), undefined, 'but not read for routing');
    assert.equal(jsonObject(envelope({ body: nested(100) })), undefined);
  });

  it('identifierRefusal names the field and the limit', () => {
    assert.equal(identifierRefusal('f', 'ok', 2), undefined);
    assert.match(identifierRefusal('f', 'abc', 2) ?? '', /^f is longer than 2 characters/);
  });
});

describe('limits: admission time of the worst cases (16 MB DATA payloads)', function () {
  this.timeout(60_000);
  let h: RouterHarness;
  beforeEach(() => {
    h = new RouterHarness();
    for (const id of ['p', 'c']) h.register(id);
  });
  afterEach(() => h.dispose());

  const timed = (payload: Buffer, to?: string) => {
    const e = h.envelope('p', { payload, contentType: 'application/json' });
    const started = performance.now();
    const result = h.send(e, to);
    return { result, ms: performance.now() - started };
  };

  it('refuses 16 MB nested 8 million levels deep in milliseconds, not seconds', () => {
    const deep = Buffer.alloc(16 * MIB);
    deep.fill('[', 0, 8 * MIB);
    deep.fill(']', 8 * MIB);
    timed(Buffer.from('[[]]'), 'c'); // warm up
    const { result, ms } = timed(deep, 'c');
    assertRefused(result, 'VALIDATION_ERROR', /nests deeper than 64 levels/);
    console.log(`      admission of a 16 MB payload 8M levels deep: ${ms.toFixed(1)} ms`);
    assert.ok(ms < 250, `took ${ms.toFixed(1)} ms`);
  });

  it('parses a 16 MB JSON DATA payload once, not for routing (address it with sw4rm-to)', () => {
    let body = '{"items":[';
    const item = '{"a":1,"b":"hello"},';
    body += item.repeat(Math.floor((16 * MIB - 100) / item.length)) + '{}]}';
    const { result, ms } = timed(Buffer.from(body), 'c');
    assert.equal(result.accepted, true, result.accepted ? '' : result.reason);
    console.log(`      admission of a 16 MB JSON DATA payload of small objects: ${ms.toFixed(1)} ms`);
    assert.ok(ms < 5_000, `took ${ms.toFixed(1)} ms`);
    const unaddressed = timed(Buffer.from(JSON.stringify({ to: 'c', blob: 'x'.repeat(2 * MIB) })));
    assertRefused(unaddressed.result, 'NO_ROUTE', /no recipient/);
  });
});

describe('limits: registry descriptor and heartbeat', () => {
  const refused = (input: Parameters<typeof validateDescriptor>[0], pattern: RegExp): void => {
    const verdict = validateDescriptor(input);
    assert.equal(verdict.ok, false);
    if (!verdict.ok) assert.match(verdict.reason, pattern);
  };

  it('bounds the description in bytes as well as words, and refuses NUL in it', () => {
    refused(
      validDescriptor('a', { description: 'x'.repeat(10 * MIB) }),
      /^VALIDATION_ERROR: description is larger than 8192 bytes/,
    );
    refused(validDescriptor('a', { description: 'a\u0000b' }), /description contains NUL/);
    assert.equal(validateDescriptor(validDescriptor('a', { description: 'word '.repeat(200) })).ok, true);
  });

  it('refuses NUL and invalid UTF-8 in the name and in list entries', () => {
    refused(validDescriptor('a', { name: 'n\uFFFD' }), /name is not valid UTF-8/);
    refused(
      validDescriptor('a', { capabilities: ['ok', 'c\uFFFD'] }),
      /capabilities has an entry with NUL or invalid UTF-8/,
    );
    refused(
      validDescriptor('a', { modalitiesSupported: Array.from({ length: 257 }, (_, i) => `text/x${i}`) }),
      /modalities_supported has 257 entries; at most 256/,
    );
  });

  describe('over gRPC (INVALID_ARGUMENT: Heartbeat and DeregisterAgent have no refusal field)', () => {
    let h: RouterHarness;
    beforeEach(() => {
      h = new RouterHarness();
      h.register('a');
    });
    afterEach(() => h.dispose());

    const call = (
      method: 'Heartbeat' | 'DeregisterAgent',
      request: Record<string, unknown>,
    ): Promise<{ err: Partial<grpc.StatusObject> | null; value: unknown }> =>
      new Promise((resolve) => {
        const handler = new RegistryServiceAdapter(h.coordinator).handlers()[method] as grpc.handleUnaryCall<
          unknown,
          unknown
        >;
        handler(
          { request, metadata: new grpc.Metadata() } as unknown as grpc.ServerUnaryCall<unknown, unknown>,
          (err, value) => resolve({ err: err as Partial<grpc.StatusObject> | null, value }),
        );
      });

    it('refuses a heartbeat whose state or health is beyond its limits, and stores nothing of it', async () => {
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{ agent_id: 'a', health: { k: 'v'.repeat(10 * MIB) } }, /health 'k' is longer than 1024 characters/],
        [
          { agent_id: 'a', health: Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, 'v'])) },
          /health has 100000 entries; at most 32/,
        ],
        [{ agent_id: 'a', health: { ['k'.repeat(129)]: 'v' } }, /a health key is longer than 128 characters/],
        [{ agent_id: 'a', state: 'S'.repeat(65) }, /state is longer than 64 characters/],
        [{ agent_id: 'a\u0000' }, /agent_id contains control characters/],
      ];
      for (const [request, pattern] of cases) {
        const { err } = await call('Heartbeat', request);
        assert.equal(err?.code, grpc.status.INVALID_ARGUMENT);
        assert.match(err?.details ?? '', /^VALIDATION_ERROR: /);
        assert.match(err?.details ?? '', pattern);
      }
      assert.deepEqual(h.registry.get('a')?.health, {});
      const ok = await call('Heartbeat', { agent_id: 'a', health: { queue: '0' } });
      assert.equal(ok.err, null);
      assert.deepEqual(h.registry.get('a')?.health, { queue: '0' });
    });

    it('refuses a deregistration reason beyond its limit', async () => {
      const { err } = await call('DeregisterAgent', {
        agent_id: 'a',
        reason: 'r'.repeat(FIELD_LIMITS.registry.deregister_reason + 1),
      });
      assert.equal(err?.code, grpc.status.INVALID_ARGUMENT);
      assert.match(err?.details ?? '', /reason is longer than 4096 characters/);
      assert.ok(h.registry.get('a'), 'still registered');
    });
  });
});

describe('limits: HITL invocations', () => {
  const frame = { correlationId: 'corr', now: Date.UTC(2026, 0, 1) };
  const refusal = (fn: () => unknown, pattern: RegExp): void => {
    assert.throws(
      fn,
      (e: unknown) => e instanceof HitlRequestError && e.code === 'VALIDATION_ERROR' && pattern.test(e.message),
    );
  };

  it('refuses a context nested deeper than the JSON limit before parsing it', () => {
    refusal(
      () => parseBody(Buffer.from(`{"reason_type":"CONFLICT","facts":${nested(5000)}}`)),
      /the context nests deeper than 64 levels/,
    );
    assert.ok(parseBody(`{"a":${nested(63)}}`));
  });

  it('refuses NUL and invalid UTF-8 in identifiers', () => {
    refusal(
      () => parseInvocationRequest({ reason_type: 'CONFLICT', correlation_id: 'c\uFFFD' }, frame),
      /correlation_id is not valid UTF-8/,
    );
    refusal(
      () => parseInvocationRequest({ reason_type: 'CONFLICT', requester: 'r\u0000' }, frame),
      /requester contains control characters/,
    );
    refusal(
      () => parseInvocationRequest({ reason_type: 'CONFLICT', subject: { repo_id: 'r'.repeat(257) } }, frame),
      /subject.repo_id is longer than 256/,
    );
  });

  it('refuses a HITL_INVOCATION envelope nested deeper than the limit with VALIDATION_ERROR', () => {
    const h = new RouterHarness();
    try {
      h.register('p');
      const e = h.envelope('p', {
        messageType: 'HITL_INVOCATION',
        payload: `{"reason_type":"CONFLICT","x":${nested(5000)}}`,
      });
      assertRefused(h.send(e, 'coordinator'), 'VALIDATION_ERROR', /nests deeper than 64 levels/);
    } finally {
      h.dispose();
    }
  });
});

describe('limits: LoggingService.Ingest', () => {
  let h: RouterHarness;
  beforeEach(() => {
    h = new RouterHarness();
  });
  afterEach(() => h.dispose());

  const ingest = (request: Record<string, unknown>): Promise<Partial<grpc.StatusObject> | null> =>
    new Promise((resolve) => {
      const handler = new LoggingServiceAdapter(h.coordinator).handlers().Ingest as grpc.handleUnaryCall<
        unknown,
        unknown
      >;
      handler({ request, metadata: new grpc.Metadata() } as unknown as grpc.ServerUnaryCall<unknown, unknown>, (err) =>
        resolve(err as Partial<grpc.StatusObject> | null),
      );
    });

  it('refuses details_json nested 5,000 deep with INVALID_ARGUMENT naming the limit', async () => {
    const err = await ingest({ event_type: 'deep', details_json: `{"a":${nested(5000)}}` });
    assert.equal(err?.code, grpc.status.INVALID_ARGUMENT);
    assert.match(err?.details ?? '', /^VALIDATION_ERROR: details_json nests deeper than 64 levels/);
    assert.equal(await ingest({ event_type: 'ok', details_json: `{"a":${nested(63)}}` }), null);
    assert.ok(MAX_LOG_DETAILS_BYTES > 0);
  });

  it('refuses invalid UTF-8 in its identifiers', async () => {
    const err = await ingest({ event_type: 'e', agent_id: 'a\uFFFD' });
    assert.equal(err?.code, grpc.status.INVALID_ARGUMENT);
    assert.match(err?.details ?? '', /agent_id is not valid UTF-8/);
  });
});
