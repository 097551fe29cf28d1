import { strict as assert } from 'node:assert';
import type { CallContext } from '../../src/core/context';
import { Emitter, type Disposable } from '../../src/core/events';
import { COORDINATOR_ID } from '../../src/core/router/router';
import {
  bindToolCallsToRouter,
  parseToolCallPayload,
  type EnvelopeToolEngine,
} from '../../src/core/tools/envelopeBridge';
import {
  DEFAULT_EXECUTION_POLICY,
  ToolCallError,
  type CallInput,
  type FrameSink,
  type ToolCallRecord,
  type ToolFrame,
} from '../../src/core/tools/model';
import { CollectingSink, RouterHarness, assertRefused, json, settle } from '../support/routerHarness';

const A = 'caller';

/** An engine that records what it is asked and lets the test drive each call's sink. */
class FakeEngine implements EnvelopeToolEngine {
  readonly started: Array<{ caller: string; input: CallInput; ctx: CallContext; sink: FrameSink; callId: string }> = [];
  readonly abandoned: string[] = [];
  readonly interrupted = new Emitter<ToolCallRecord>();
  readonly onDidInterrupt = this.interrupted.event;
  /** Thrown by the next start, once. */
  failNext: ToolCallError | undefined;
  private next = 0;

  start(caller: string, input: CallInput, ctx: CallContext, sink: FrameSink): { readonly callId: string } {
    if (this.failNext) {
      const error = this.failNext;
      this.failNext = undefined;
      throw error;
    }
    const callId = input.callId || `assigned-${++this.next}`;
    this.started.push({ caller, input, ctx, sink, callId });
    return { callId };
  }

  abandon(callId: string): void {
    this.abandoned.push(callId);
  }
}

function frame(
  callId: string,
  frameNo: number,
  final: boolean,
  data: unknown,
  extra: Partial<ToolFrame> = {},
): ToolFrame {
  return {
    callId,
    frameNo,
    final,
    contentType: 'application/json',
    data: Buffer.from(JSON.stringify(data)),
    summary: Buffer.alloc(0),
    ...extra,
  };
}

describe('Tool calls over the messaging plane (TOOL_CALL to coordinator)', () => {
  let h: RouterHarness;
  let engine: FakeEngine;
  let binding: Disposable;
  let caller: CollectingSink;

  beforeEach(() => {
    h = new RouterHarness();
    h.register(A);
    caller = h.stream(A).sink;
    engine = new FakeEngine();
    binding = bindToolCallsToRouter(engine, h.router, h.coordinator.log);
  });

  afterEach(() => {
    binding.dispose();
    h.dispose();
  });

  function toolCall(payload: unknown, extra: { idempotencyToken?: string; correlationId?: string } = {}) {
    return h.envelope(A, { messageType: 'TOOL_CALL', payload: payload as Record<string, unknown>, ...extra });
  }

  function fromCoordinator(type: string): Array<{ correlationId: string; payload: Record<string, unknown> }> {
    return caller.items
      .filter((i) => i.envelope.producerId === COORDINATOR_ID && i.envelope.messageType === type)
      .map((i) => ({ correlationId: i.envelope.correlationId, payload: json(i.envelope) }));
  }

  it('starts the call for the producer through the engine (via envelope), with its args, content type, stream flag and message id', () => {
    const envelope = toolCall({
      call_id: 'c-1',
      provider_id: 'wc',
      tool_name: 'word_count',
      args: { text: 'a b' },
      stream: true,
    });
    const result = h.send(envelope, COORDINATOR_ID);
    assert.ok(result.accepted, result.accepted ? '' : result.reason);
    const [started] = engine.started;
    assert.equal(started.caller, A, 'the caller is the authenticated producer, never a field of the payload');
    assert.deepEqual(
      { ...started.input, args: Buffer.from(started.input.args).toString() },
      {
        callId: 'c-1',
        providerId: 'wc',
        toolName: 'word_count',
        contentType: 'application/json',
        args: '{"text":"a b"}',
        policy: DEFAULT_EXECUTION_POLICY,
        stream: true,
        via: 'envelope',
        messageId: envelope.messageId,
      },
    );
    assert.equal(h.state(envelope.messageId), 'READ', 'taken by the coordinator, not yet answered');
  });

  it('sends frames as TOOL_RESULT envelopes and the final frame as the reply that FULFILLS the TOOL_CALL', async () => {
    const envelope = toolCall({ provider_id: 'p', tool_name: 'count_slowly', args: { n: 2 }, stream: true });
    assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
    const { sink, callId } = engine.started[0];
    assert.equal(callId, 'assigned-1');
    sink.frame(frame(callId, 0, false, { i: 1 }));
    sink.frame({
      ...frame(callId, 1, false, null),
      contentType: 'application/octet-stream',
      data: Buffer.from([0xff, 0x00]),
    });
    sink.end(frame(callId, 2, true, { done: true }, { summary: Buffer.from('{"frames":3}') }));
    await settle();
    const frames = fromCoordinator('TOOL_RESULT');
    assert.deepEqual(
      frames.map((f) => f.correlationId),
      [envelope.correlationId, envelope.correlationId, envelope.correlationId],
    );
    assert.deepEqual(
      frames.map((f) => f.payload),
      [
        {
          call_id: callId,
          frame_no: 0,
          final: false,
          content_type: 'application/json',
          status: 'OK',
          result: { i: 1 },
        },
        {
          call_id: callId,
          frame_no: 1,
          final: false,
          content_type: 'application/octet-stream',
          status: 'OK',
          result_b64: '/wA=',
        },
        {
          call_id: callId,
          frame_no: 2,
          final: true,
          content_type: 'application/json',
          status: 'OK',
          result: { done: true },
          summary: { frames: 3 },
        },
      ],
    );
    assert.equal(h.state(envelope.messageId), 'FULFILLED');
    // Anything the engine sends after the end is dropped: exactly one answer.
    sink.fail(new ToolCallError('internal', 'INTERNAL_ERROR', 'late'));
    await settle();
    assert.equal(fromCoordinator('TOOL_ERROR').length, 0);
  });

  it('delivers the final frame in order after the others when the caller was offline and reconnects (not 2,0,1)', async () => {
    const envelope = toolCall({ provider_id: 'p', tool_name: 'count_slowly', args: { n: 2 }, stream: true });
    assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
    const { sink, callId } = engine.started[0];
    h.register('offline-caller');
    const offline = h.envelope('offline-caller', {
      messageType: 'TOOL_CALL',
      payload: { provider_id: 'p', tool_name: 't', stream: true },
    });
    assert.ok(h.send(offline, COORDINATOR_ID).accepted);
    const call = engine.started[1];
    call.sink.frame(frame(call.callId, 0, false, { i: 0 }));
    call.sink.frame(frame(call.callId, 1, false, { i: 1 }));
    call.sink.end(frame(call.callId, 2, true, { done: true }));
    await settle();
    const reconnected = h.stream('offline-caller').sink;
    await settle();
    assert.deepEqual(
      reconnected.ofType('TOOL_RESULT').map((i) => json(i.envelope).frame_no),
      [0, 1, 2],
    );
    assert.equal(h.state(offline.messageId), 'FULFILLED');
    sink.end(frame(callId, 0, true, {}));
  });

  it('delivers every frame in order, the final one last, through a narrow delivery window (not 0,1,4)', async () => {
    const narrow = new RouterHarness({ deliveryWindow: 2 });
    const bound = bindToolCallsToRouter(engine, narrow.router, narrow.coordinator.log);
    try {
      narrow.register(A);
      const stream = narrow.stream(A).sink;
      const envelope = narrow.envelope(A, {
        messageType: 'TOOL_CALL',
        payload: { provider_id: 'p', tool_name: 't', stream: true },
      });
      assert.ok(narrow.send(envelope, COORDINATOR_ID).accepted);
      const call = engine.started[engine.started.length - 1];
      for (let n = 0; n < 4; n++) call.sink.frame(frame(call.callId, n, false, { n }));
      call.sink.end(frame(call.callId, 4, true, { done: true }));
      await settle();
      // The caller confirms each delivery as it comes; the window lets the next ones through.
      for (let round = 0; round < 10; round++) {
        for (const item of stream.items)
          narrow.router.ackDelivery(A, item.seq, item.envelope.messageId, 'DELIVERED', { correlationId: 'ack' });
        await settle();
      }
      assert.deepEqual(
        stream.ofType('TOOL_RESULT').map((i) => json(i.envelope).frame_no),
        [0, 1, 2, 3, 4],
      );
      assert.equal(narrow.state(envelope.messageId), 'FULFILLED');
    } finally {
      bound.dispose();
      narrow.dispose();
    }
  });

  it('answers a retry with the same idempotency token with the cached final frame, without a second call', async () => {
    const first = toolCall({ provider_id: 'p', tool_name: 't' }, { idempotencyToken: 'once' });
    assert.ok(h.send(first, COORDINATOR_ID).accepted);
    assertRefused(
      h.send(toolCall({ provider_id: 'p', tool_name: 't' }, { idempotencyToken: 'once' }), COORDINATOR_ID),
      'ALREADY_IN_PROGRESS',
    );
    const { sink, callId } = engine.started[0];
    sink.end(frame(callId, 0, true, { words: 2 }));
    const reason = assertRefused(
      h.send(toolCall({ provider_id: 'p', tool_name: 't' }, { idempotencyToken: 'once' }), COORDINATOR_ID),
      'DUPLICATE_DETECTED',
    );
    assert.match(reason, /"words":2/);
    assert.equal(engine.started.length, 1, 'the engine ran the call once');
  });

  it('answers a failed call with a TOOL_ERROR reply {call_id, error_code, note}', async () => {
    const envelope = toolCall({ call_id: 'c-9', provider_id: 'p', tool_name: 't' });
    assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
    engine.started[0].sink.fail(new ToolCallError('deadline_exceeded', 'WALL_TIMEOUT', 'budget_wall_ms 300 passed'));
    await settle();
    assert.deepEqual(fromCoordinator('TOOL_ERROR'), [
      {
        correlationId: envelope.correlationId,
        payload: { call_id: 'c-9', error_code: 'WALL_TIMEOUT', note: 'budget_wall_ms 300 passed' },
      },
    ]);
    assert.equal(h.state(envelope.messageId), 'FULFILLED', 'the TOOL_CALL is answered (its answer is the error)');
  });

  it('answers a check the engine refuses at once (unknown tool, args against the schema) with a TOOL_ERROR reply', async () => {
    engine.failNext = new ToolCallError(
      'invalid_argument',
      'VALIDATION_ERROR',
      'args do not match the input schema of word_count: /text must be string',
    );
    const envelope = toolCall({ call_id: 'c-2', provider_id: 'p', tool_name: 'word_count', args: { text: 1 } });
    assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
    await settle();
    assert.deepEqual(
      fromCoordinator('TOOL_ERROR').map((e) => e.payload),
      [
        {
          call_id: 'c-2',
          error_code: 'VALIDATION_ERROR',
          note: 'args do not match the input schema of word_count: /text must be string',
        },
      ],
    );
    assert.equal(h.state(envelope.messageId), 'FULFILLED');
  });

  it('refuses malformed payloads at admission with VALIDATION_ERROR naming the field', () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ tool_name: 't' }, /provider_id is required/],
      [{ provider_id: 'p', tool_name: '  ' }, /tool_name is required/],
      [{ provider_id: 7, tool_name: 't' }, /provider_id must be a string/],
      [{ provider_id: 'p', tool_name: 't', call_id: 5 }, /call_id must be a string/],
      [{ provider_id: 'p', tool_name: 't', args: {}, args_b64: 'e30=' }, /give args or args_b64, not both/],
      [{ provider_id: 'p', tool_name: 't', args_b64: 'not base64!' }, /args_b64 must be a base64 string/],
      [{ provider_id: 'p', tool_name: 't', stream: 'yes' }, /stream must be true or false/],
      [{ provider_id: 'p', tool_name: 't', policy: [1] }, /policy must be a JSON object/],
      [
        { provider_id: 'p', tool_name: 't', policy: {}, execution_policy: {} },
        /give execution_policy or policy, not both/,
      ],
      [{ provider_id: 'p', tool_name: 't', content_type: 3 }, /content_type must be a string/],
      [[1, 2], /carries a JSON object payload/],
    ];
    for (const [payload, detail] of cases)
      assertRefused(h.send(toolCall(payload), COORDINATOR_ID), 'VALIDATION_ERROR', detail);
    assert.equal(engine.started.length, 0);
  });

  it("reads args_b64 as the args' bytes, for a content type other than JSON", () => {
    assert.ok(
      h.send(
        toolCall({
          provider_id: 'p',
          tool_name: 't',
          args_b64: Buffer.from('raw bytes').toString('base64'),
          content_type: 'text/plain',
        }),
        COORDINATOR_ID,
      ).accepted,
    );
    assert.equal(Buffer.from(engine.started[0].input.args).toString(), 'raw bytes');
    assert.equal(engine.started[0].input.contentType, 'text/plain');
  });

  it('abandons the call and answers TOOL_ERROR when a frame cannot reach the caller', async () => {
    const envelope = toolCall({ call_id: 'c-3', provider_id: 'p', tool_name: 't', stream: true });
    assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
    // A frame larger than a TOOL_RESULT payload may be (1 MiB): admission refuses it with OVERSIZE_PAYLOAD.
    engine.started[0].sink.frame(frame('c-3', 0, false, 'x'.repeat(1024 * 1024 + 10)));
    await settle();
    assert.deepEqual(engine.abandoned, ['c-3']);
    const [error] = fromCoordinator('TOOL_ERROR');
    assert.equal(error.payload.error_code, 'OVERSIZE_PAYLOAD');
    assert.match(String(error.payload.note), /^frame 0 could not be sent to caller: /);
    assert.equal(h.events('tool.envelope.frame_refused').length, 1);
  });

  it('answers a TOOL_CALL interrupted by a restart with TOOL_ERROR INTERRUPTED when the engine restores', async () => {
    const envelope = toolCall({ call_id: 'c-4', provider_id: 'p', tool_name: 't' });
    assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
    const record = {
      callId: 'c-4',
      via: 'envelope',
      messageId: envelope.messageId,
      errorMessage: '',
    } as ToolCallRecord;
    engine.interrupted.fire({ ...record, via: 'grpc' });
    await settle();
    assert.equal(fromCoordinator('TOOL_ERROR').length, 0, 'a gRPC call is answered on its own stream, not here');
    engine.interrupted.fire(record);
    await settle();
    const [error] = fromCoordinator('TOOL_ERROR');
    assert.equal(error.correlationId, envelope.correlationId);
    assert.equal(error.payload.error_code, 'INTERRUPTED');
    assert.equal(h.state(envelope.messageId), 'FULFILLED');
  });

  it('reads execution_policy (or policy) through parsePolicyJson; a bad value is refused at admission naming the field', () => {
    assert.ok(
      h.send(
        toolCall({
          provider_id: 'p',
          tool_name: 't',
          execution_policy: { timeout_seconds: 2, retry_attempts: 3, privilege_level: 'elevated', budget_wall_ms: 300 },
        }),
        COORDINATOR_ID,
      ).accepted,
    );
    assert.deepEqual(engine.started[0].input.policy, {
      ...DEFAULT_EXECUTION_POLICY,
      timeoutMs: 2000,
      maxRetries: 3,
      privilegeLevel: 'ELEVATED',
      budgetWallMs: 300,
    });
    assert.ok(
      h.send(toolCall({ provider_id: 'p', tool_name: 't', policy: { backoff: 'linear' } }), COORDINATOR_ID).accepted,
    );
    assert.equal(engine.started[1].input.policy.backoff, 'linear');
    assertRefused(
      h.send(toolCall({ provider_id: 'p', tool_name: 't', policy: { backoff: 'sometimes' } }), COORDINATOR_ID),
      'VALIDATION_ERROR',
      /execution_policy\.backoff: /,
    );
    assertRefused(
      h.send(
        toolCall({ provider_id: 'p', tool_name: 't', execution_policy: { network_policy: 'everything' } }),
        COORDINATOR_ID,
      ),
      'VALIDATION_ERROR',
      /execution_policy\.network_policy: /,
    );
    assert.equal(engine.started.length, 2);
  });

  it('parses a payload without policy to the defaults (DENY_ALL, MINIMAL)', () => {
    const parsed = parseToolCallPayload({ provider_id: 'p', tool_name: 't' });
    assert.ok(!('code' in parsed));
    assert.deepEqual(parsed.policy, DEFAULT_EXECUTION_POLICY);
    assert.equal(Buffer.from(parsed.args).toString(), '{}');
    assert.equal(parsed.stream, false);
  });
});
