import { strict as assert } from 'node:assert';
import { DEFAULT_EXECUTION_POLICY, RawToolResult, ToolCallError, type ToolRequest } from '../../src/core/tools/model';
import { ToolTransport } from '../../src/core/tools/externalProvider';
import { COORDINATOR_ID } from '../../src/core/router/router';
import { CollectingSink, RouterHarness, ctx, json } from '../support/routerHarness';

const PROVIDER = 'provider-a';
const CALLER = 'caller-b';

/**
 * The transport to provider agents over the real router (RouterHarness: a Coordinator's Router and Registry on a real
 * store): TOOL_CALL out, TOOL_RESULT frames / TOOL_ERROR back to `coordinator`, cancel, the agent leaving.
 */
describe('tool transport to provider agents (TOOL_CALL / TOOL_RESULT / TOOL_ERROR)', () => {
  let h: RouterHarness;
  let sink: CollectingSink;
  let transport: ToolTransport;

  beforeEach(() => {
    h = new RouterHarness();
    h.register(PROVIDER);
    h.register(CALLER);
    sink = h.stream(PROVIDER).sink;
    h.stream(CALLER);
    transport = new ToolTransport({
      outbox: h.router,
      mailbox: h.router,
      agents: h.registry,
      log: h.coordinator.log,
      clock: h.clock,
    });
  });

  afterEach(() => {
    transport.dispose();
    h.dispose();
  });

  function request(callId: string, emitted: Array<[string, string]>, controller = new AbortController()): ToolRequest {
    return {
      callId,
      toolName: 'count',
      args: { n: 3 },
      callerAgentId: CALLER,
      worktreePath: undefined,
      policy: { ...DEFAULT_EXECUTION_POLICY, budgetCpuMs: 50 },
      stream: true,
      attempt: 1,
      signal: controller.signal,
      ctx: ctx(callId),
      emit: (data, contentType) => emitted.push([data.toString('utf8'), contentType ?? '']),
    };
  }

  /** A TOOL_RESULT / TOOL_ERROR from `from` to coordinator; answers the router's SendResult. */
  function answer(type: 'TOOL_RESULT' | 'TOOL_ERROR', payload: Record<string, unknown>, from = PROVIDER) {
    return h.send(
      h.envelope(from, { messageType: type, payload, correlationId: String(payload.call_id) }),
      COORDINATOR_ID,
    );
  }

  it('sends a TOOL_CALL from coordinator (correlation_id = call_id) and relays frames in frame_no order, duplicates ignored', async () => {
    const frames: Array<[string, string]> = [];
    const result = transport.callAgent(PROVIDER, PROVIDER, request('c-1', frames));
    const call = sink.ofType('TOOL_CALL');
    assert.equal(call.length, 1);
    assert.equal(call[0].envelope.producerId, COORDINATOR_ID);
    assert.equal(call[0].envelope.correlationId, 'c-1');
    const payload = json(call[0].envelope);
    assert.deepEqual(
      [
        payload.call_id,
        payload.provider_id,
        payload.tool_name,
        payload.args,
        payload.stream,
        payload.caller_agent_id,
        payload.worktree_path,
        payload.attempt,
      ],
      ['c-1', PROVIDER, 'count', { n: 3 }, true, CALLER, null, 1],
    );
    assert.equal((payload.execution_policy as Record<string, unknown>).budget_cpu_ms, 50);

    const f2 = answer('TOOL_RESULT', { call_id: 'c-1', frame_no: 2, final: true, result: { total: 3 } });
    assert.ok(f2.accepted);
    assert.equal(h.state(f2.messageId), 'FULFILLED', 'taken and settled, without an answer envelope');
    assert.ok(answer('TOOL_RESULT', { call_id: 'c-1', frame_no: 1, final: false, result: 'b' }).accepted);
    assert.ok(
      answer('TOOL_RESULT', { call_id: 'c-1', frame_no: 1, final: false, result: 'b again' }).accepted,
      'a repeated frame (a retry) is taken and ignored',
    );
    assert.deepEqual(frames, [], 'a gap waits');
    assert.ok(
      answer('TOOL_RESULT', {
        call_id: 'c-1',
        frame_no: 0,
        final: false,
        result_b64: Buffer.from('raw').toString('base64'),
        content_type: 'text/plain',
      }).accepted,
    );
    assert.deepEqual(frames, [
      ['raw', 'text/plain'],
      ['"b"', 'application/json'],
    ]);
    assert.deepEqual(await result, { total: 3 });
    assert.equal(
      sink.ofType('TOOL_RESULT').length + h.stream(CALLER).sink.items.length,
      0,
      'no reply envelope went to the provider',
    );
  });

  it('refuses at admission a TOOL_RESULT for an unknown call or from another agent; a TOOL_ERROR fails the call with its code', async () => {
    const unknown = answer('TOOL_RESULT', { call_id: 'nope', result: 1 });
    assert.equal(unknown.accepted, false);
    assert.match(unknown.accepted ? '' : unknown.reason, /NOT_FOUND: no running tool call 'nope'/);
    const result = transport.callAgent(PROVIDER, PROVIDER, request('c-2', []));
    const foreign = answer('TOOL_RESULT', { call_id: 'c-2', result: 1 }, CALLER);
    assert.equal(foreign.accepted, false);
    assert.equal(foreign.accepted ? '' : foreign.code, 'PERMISSION_DENIED');
    assert.ok(answer('TOOL_ERROR', { call_id: 'c-2', error_code: 'TOOL_TIMEOUT', note: 'too slow' }).accepted);
    await assert.rejects(
      result,
      (err: unknown) =>
        err instanceof ToolCallError &&
        err.code === 'TOOL_TIMEOUT' &&
        err.kind === 'deadline_exceeded' &&
        err.message === 'too slow',
    );
    const late = answer('TOOL_RESULT', { call_id: 'c-2', result: 1 });
    assert.equal(late.accepted, false, 'a result for an ended call is refused');

    const custom = transport.callAgent(PROVIDER, PROVIDER, request('c-3', []));
    answer('TOOL_ERROR', { call_id: 'c-3', error_code: 'RATE_LIMITED', message: 'later' });
    await assert.rejects(
      custom,
      (err: unknown) => err instanceof ToolCallError && err.code === 'RATE_LIMITED' && err.kind === 'internal',
    );

    const raw = transport.callAgent(PROVIDER, PROVIDER, request('c-4', []));
    answer('TOOL_RESULT', {
      call_id: 'c-4',
      result_b64: Buffer.from('PNG').toString('base64'),
      content_type: 'image/png',
    });
    const value = await raw;
    assert.ok(value instanceof RawToolResult);
    assert.deepEqual([value.contentType, value.data.toString()], ['image/png', 'PNG']);
  });

  it('on abort sends CONTROL cancel_tool_call to the provider; the agent leaving mid-call fails it AGENT_UNAVAILABLE at once', async () => {
    const controller = new AbortController();
    const cancelled = transport.callAgent(PROVIDER, PROVIDER, request('c-5', [], controller));
    controller.abort(new ToolCallError('cancelled', 'CANCELLED', 'by the caller'));
    await assert.rejects(cancelled, (err: unknown) => err instanceof ToolCallError && err.code === 'CANCELLED');
    const control = sink.ofType('CONTROL').map((i) => json(i.envelope));
    assert.deepEqual(
      control.map((c) => [c.command, c.call_id]),
      [['cancel_tool_call', 'c-5']],
    );
    assert.equal(sink.ofType('CONTROL')[0].envelope.correlationId, 'c-5');

    const leaving = transport.callAgent(PROVIDER, PROVIDER, request('c-6', []));
    h.registry.deregister(PROVIDER, 'going home', ctx('leave'));
    await assert.rejects(
      leaving,
      (err: unknown) => err instanceof ToolCallError && err.code === 'AGENT_UNAVAILABLE' && err.kind === 'unavailable',
    );
    await assert.rejects(
      transport.callAgent(PROVIDER, PROVIDER, request('c-7', [])),
      (err: unknown) => err instanceof ToolCallError && err.code === 'AGENT_UNAVAILABLE',
    );
    assert.equal(transport.agentAvailable(PROVIDER), false);
  });

  it("gives the TOOL_CALL a TTL: the call's timeout or wall budget, else one hour", () => {
    void transport.callAgent(PROVIDER, PROVIDER, request('c-ttl-1', [])).catch(() => undefined);
    const timed = request('c-ttl-2', []);
    void transport
      .callAgent(PROVIDER, PROVIDER, { ...timed, policy: { ...timed.policy, timeoutMs: 5_000, budgetWallMs: 9_000 } })
      .catch(() => undefined);
    assert.deepEqual(
      sink.ofType('TOOL_CALL').map((i) => [i.envelope.correlationId, i.envelope.ttlMs]),
      [
        ['c-ttl-1', 3_600_000],
        ['c-ttl-2', 5_000],
      ],
    );
  });

  it('a provider going unavailable mid-call: AGENT_UNAVAILABLE, and cancel_tool_call queued behind the TOOL_CALL', async () => {
    const result = transport.callAgent(PROVIDER, PROVIDER, request('c-off', []));
    h.clock.advance(30_001); // no heartbeat for the debounce: presence unavailable
    await assert.rejects(result, (err: unknown) => err instanceof ToolCallError && err.code === 'AGENT_UNAVAILABLE');
    // Each envelope once, in the order first delivered (the unconfirmed TOOL_CALL is delivered again after its lease).
    const seen = new Set<string>();
    const order = sink.items
      .filter(
        (i) =>
          i.envelope.correlationId === 'c-off' && !seen.has(i.envelope.messageId) && seen.add(i.envelope.messageId),
      )
      .map((i) => (i.envelope.messageType === 'CONTROL' ? json(i.envelope).command : i.envelope.messageType));
    assert.deepEqual(order, ['TOOL_CALL', 'cancel_tool_call']);
  });

  it('the router ending the TOOL_CALL (its TTL passed before the provider took it): AGENT_UNAVAILABLE and cancel_tool_call', async () => {
    const timed = request('c-exp', []);
    const result = transport.callAgent(PROVIDER, PROVIDER, { ...timed, policy: { ...timed.policy, timeoutMs: 2_000 } });
    h.clock.advance(2_001);
    await assert.rejects(result, (err: unknown) => err instanceof ToolCallError && err.code === 'AGENT_UNAVAILABLE');
    const control = sink.ofType('CONTROL').map((i) => json(i.envelope));
    assert.deepEqual(
      control.map((c) => [c.command, c.call_id]),
      [['cancel_tool_call', 'c-exp']],
    );
  });

  it('refuses an answer echoing another attempt (a late frame of attempt 1 is not attempt 2\'s); reads "retryable": true', async () => {
    const frames: Array<[string, string]> = [];
    const second = request('c-att', frames);
    const result = transport.callAgent(PROVIDER, PROVIDER, { ...second, attempt: 2 });
    const late = answer('TOOL_RESULT', { call_id: 'c-att', attempt: 1, frame_no: 0, final: true, result: 'stale' });
    assert.equal(late.accepted, false);
    assert.match(late.accepted ? '' : late.reason, /attempt 1 of call 'c-att' has ended/);
    assert.ok(
      answer('TOOL_RESULT', { call_id: 'c-att', attempt: 2, frame_no: 0, final: true, result: 'fresh' }).accepted,
    );
    assert.equal(await result, 'fresh');
    assert.deepEqual(frames, []);

    const flaky = transport.callAgent(PROVIDER, PROVIDER, request('c-retry', []));
    assert.ok(
      answer('TOOL_ERROR', { call_id: 'c-retry', error_code: 'RATE_LIMITED', note: 'later', retryable: true }).accepted,
    );
    await assert.rejects(
      flaky,
      (err: unknown) =>
        err instanceof ToolCallError &&
        err.code === 'RATE_LIMITED' &&
        (err as ToolCallError & { retryable?: boolean }).retryable === true,
    );
  });

  it('fails a call when the provider NACKs its TOOL_CALL (the router ends it FAILED)', async () => {
    const nacked = transport.callAgent(PROVIDER, PROVIDER, request('c-8', []));
    const id = sink.ofType('TOOL_CALL')[0].envelope.messageId;
    h.acked(PROVIDER, id, 'FAILED', { error_code: 'AGENT_UNAVAILABLE', note: 'busy elsewhere' });
    await assert.rejects(
      nacked,
      (err: unknown) =>
        err instanceof ToolCallError && err.code === 'AGENT_UNAVAILABLE' && /busy elsewhere/.test(err.message),
    );
  });
});
