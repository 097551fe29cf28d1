import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import { ManualClock } from '../../src/core/clock';
import type { Disposable } from '../../src/core/events';
import type { CoordinatorHost } from '../../src/server/host';
import { bearer, CoordinatorClients, expectStatus, serviceClient, unary, type ServiceClient } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { prng } from '../support/prng';
import { jsonPayload, RouterClient, type Envelope, type Inbox, type StreamItem } from '../support/routerClient';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface ToolFrame {
  call_id: string;
  frame_no: string;
  final: boolean;
  content_type: string;
  data: Buffer;
  summary: Buffer;
}
interface ToolErrorMessage {
  call_id: string;
  error_code: string;
  message: string;
}
type Client = ServiceClient;

const PROVIDER = 'provider-1';
const CALLER = 'caller-1';

/** The TOOL_CALL payload a provider receives (README, "Write a tool provider"). */
interface ToolCallPayload {
  call_id: string;
  provider_id: string;
  tool_name: string;
  args: Record<string, unknown>;
  stream: boolean;
  caller_agent_id: string;
  attempt: number;
  execution_policy: Record<string, unknown>;
}

const TOOLS = [
  {
    tool_name: 'echo',
    idempotent: true,
    needs_worktree: false,
    default_timeout_s: 0,
    max_concurrency: 4,
    side_effects: 'none',
    input_schema: JSON.stringify({
      type: 'object',
      properties: { text: { type: 'string' } },
      required: ['text'],
      additionalProperties: false,
    }),
    output_schema: JSON.stringify({ type: 'object', properties: { echo: { type: 'string' } }, required: ['echo'] }),
  },
  {
    // Answers a result that breaks its own output schema.
    tool_name: 'bad_output',
    idempotent: true,
    needs_worktree: false,
    default_timeout_s: 0,
    max_concurrency: 4,
    side_effects: 'none',
    input_schema: JSON.stringify({ type: 'object' }),
    output_schema: JSON.stringify({ type: 'object', properties: { echo: { type: 'string' } }, required: ['echo'] }),
  },
  {
    // Streams n frames {i}, then the final {counted: n}.
    tool_name: 'count',
    idempotent: false,
    needs_worktree: false,
    default_timeout_s: 0,
    max_concurrency: 4,
    side_effects: 'none',
    input_schema: JSON.stringify({
      type: 'object',
      properties: { n: { type: 'integer', minimum: 0, maximum: 50 } },
      required: ['n'],
    }),
    output_schema: '',
  },
  {
    // Sends `frames` frames, then never finishes (until cancelled).
    tool_name: 'hold',
    idempotent: false,
    needs_worktree: false,
    default_timeout_s: 0,
    max_concurrency: 4,
    side_effects: 'none',
    input_schema: JSON.stringify({ type: 'object', properties: { frames: { type: 'integer', minimum: 0 } } }),
    output_schema: '',
  },
];

/**
 * A provider agent written as README "Write a tool provider" says: registered, streaming its inbox, registered as a
 * provider; it ACKs what it receives and answers TOOL_CALLs by TOOL_RESULT / TOOL_ERROR envelopes to `coordinator`.
 */
class TestProvider {
  readonly calls: ToolCallPayload[] = [];
  readonly cancels: Array<Record<string, unknown>> = [];
  readonly refusals: string[] = [];
  readonly inbox: Inbox;

  constructor(readonly router: RouterClient) {
    this.inbox = router.openInbox();
    this.inbox.onItem((item) => void this.handle(item));
  }

  private async handle(item: StreamItem): Promise<void> {
    const msg = item.msg;
    await this.router.ackDelivery(this.router.agentId, item.seq, msg.message_id).catch(() => undefined);
    if (msg.producer_id !== 'coordinator') return;
    const json = jsonPayload<Record<string, unknown>>(msg);
    if (msg.message_type === 'CONTROL' && json?.command === 'cancel_tool_call') {
      this.cancels.push(json);
      await this.router.ack(msg.message_id, 'FULFILLED').catch(() => undefined);
      return;
    }
    if (msg.message_type !== 'TOOL_CALL' || !json) return;
    await this.router.ack(msg.message_id, 'RECEIVED').catch(() => undefined);
    const call = json as unknown as ToolCallPayload;
    this.calls.push(call);
    switch (call.tool_name) {
      case 'echo':
        await this.result(call.call_id, 0, true, { echo: call.args.text });
        break;
      case 'bad_output':
        await this.result(call.call_id, 0, true, { echo: 42 });
        break;
      case 'count': {
        const n = Number(call.args.n);
        for (let i = 0; i < n; i++) await this.result(call.call_id, i, false, { i });
        await this.result(call.call_id, n, true, { counted: n });
        break;
      }
      case 'hold': {
        const frames = Number(call.args.frames ?? 0);
        for (let i = 0; i < frames; i++) await this.result(call.call_id, i, false, { i });
        return;
      }
      default:
        await this.send('TOOL_ERROR', call.call_id, {
          call_id: call.call_id,
          error_code: 'unknown_tool',
          message: call.tool_name,
        });
    }
    await this.router.ack(msg.message_id, 'FULFILLED').catch(() => undefined);
  }

  result(callId: string, frameNo: number, final: boolean, result: unknown): Promise<void> {
    return this.send('TOOL_RESULT', callId, {
      call_id: callId,
      frame_no: frameNo,
      final,
      content_type: 'application/json',
      result,
    });
  }

  async send(messageType: string, callId: string, payload: Record<string, unknown>): Promise<void> {
    const answer = await this.router.send(
      this.router.envelope({ message_type: messageType, correlation_id: callId, payload }),
      { to: 'coordinator' },
    );
    if (!answer.accepted) this.refusals.push(answer.reason);
  }

  /** The TOOL_CALL of `callId` (or the n-th call), once it arrived. */
  callArrived(index: number): Promise<ToolCallPayload> {
    return pollUntil(`TOOL_CALL #${index} at the provider`, () => this.calls[index]);
  }

  close(): void {
    this.inbox.close();
  }
}

/**
 * External tool providers over real gRPC (issue 17): a provider agent in the test registered through ConnectorService,
 * callers through ToolService (Call, CallStream, Cancel) and by TOOL_CALL envelope; the coordinator's clock is a ManualClock
 * (budgets expire by advancing it), approvals decided through the coordinator's HitlService.
 */
describe('tool calls to a provider agent over real gRPC (ToolService, TOOL_CALL envelopes)', function () {
  this.timeout(60_000);
  let dataDir: string;
  let clock: ManualClock;
  let host: CoordinatorHost;
  let registry: CoordinatorClients;
  let tools: Client;
  let connector: Client;
  let provider: TestProvider;
  let callerRouter: RouterClient;
  let operator: Disposable | undefined;
  const tokens: Record<string, string> = {};

  const metadata = (agent: string): grpc.Metadata => bearer(tokens[agent]);

  function toolCall(tool: string, args: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      call_id: `c-${tool}-${Math.random().toString(36).slice(2)}`,
      provider_id: PROVIDER,
      tool_name: tool,
      content_type: 'application/json',
      args: Buffer.from(JSON.stringify(args)),
      ...extra,
    };
  }

  function call(request: Record<string, unknown>, agent = CALLER): Promise<ToolFrame> {
    return unary<ToolFrame>(tools, 'Call', request, metadata(agent));
  }

  /** CallStream: every frame until the stream ends, and how it ended. */
  function callStream(
    request: Record<string, unknown>,
    onFrame: (frame: ToolFrame, frames: ToolFrame[]) => void = () => undefined,
  ): Promise<{ frames: ToolFrame[]; status: grpc.StatusObject }> {
    return new Promise((resolve) => {
      const stream = (tools.CallStream as (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<ToolFrame>).call(
        tools,
        request,
        metadata(CALLER),
      );
      const frames: ToolFrame[] = [];
      stream.on('data', (frame: ToolFrame) => {
        frames.push(frame);
        onFrame(frame, frames);
      });
      stream.on('error', () => undefined);
      stream.on('status', (status: grpc.StatusObject) => resolve({ frames, status }));
    });
  }

  const json = (bytes: Buffer): unknown => JSON.parse(bytes.toString('utf8'));

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-int-providers-');
    clock = new ManualClock(Date.now());
    host = await startHost(dataDir, { clock });
    operator = host.coordinator.hitl.attachOperator('editor:test');
    const address = `127.0.0.1:${host.port}`;
    tools = serviceClient(address, 'sw4rm.tool.ToolService');
    connector = serviceClient(address, 'sw4rm.connector.ConnectorService');
    registry = new CoordinatorClients(address, host.token);
    for (const agent of [PROVIDER, CALLER]) {
      assert.equal(
        (
          await registry.registerAgent(
            descriptorMessage(agent, { modalities_supported: ['application/json'], reasoning_connectors: [] }),
          )
        ).accepted,
        true,
      );
      tokens[agent] = host.coordinator.credentials.mintAgent(agent, 'test', 'tool provider tests', {
        correlationId: 'test',
      }).token;
    }
    provider = new TestProvider(new RouterClient(address, tokens[PROVIDER], PROVIDER));
    callerRouter = new RouterClient(address, tokens[CALLER], CALLER);
    await pollUntil("the provider's inbox stream", () => (provider.inbox.live ? true : undefined));
    const registered = await unary<{ ok: boolean; reason: string }>(
      connector,
      'RegisterProvider',
      { provider_id: PROVIDER, tools: TOOLS },
      metadata(PROVIDER),
    );
    assert.deepEqual(registered, { ok: true, reason: '' });
  });

  afterEach(async () => {
    operator?.dispose();
    provider.close();
    callerRouter.close();
    for (const client of [tools, connector]) client.close();
    registry.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  it("DescribeTools lists the provider's tools; a unary Call is routed to it and answers its final frame", async () => {
    const { tools: described } = await unary<{ tools: Array<{ tool_name: string; idempotent: boolean }> }>(
      connector,
      'DescribeTools',
      { provider_id: PROVIDER },
      metadata(CALLER),
    );
    assert.deepEqual(
      described.map((t) => t.tool_name),
      ['echo', 'bad_output', 'count', 'hold'],
    );
    const request = toolCall('echo', { text: 'hello' });
    const frame = await call(request);
    assert.equal(frame.call_id, request.call_id);
    assert.equal(frame.final, true);
    assert.deepEqual(json(frame.data), { echo: 'hello' });
    const [received] = provider.calls;
    assert.equal(received.call_id, request.call_id);
    assert.equal(received.caller_agent_id, CALLER, 'the provider learns who calls');
    assert.deepEqual(received.args, { text: 'hello' });
    assert.equal(received.attempt, 1);
    assert.equal(received.execution_policy.network_policy, 'DENY_ALL');
    assert.equal(received.execution_policy.privilege_level, 'MINIMAL');
  });

  it('CallStream relays every frame in order, numbered from 0, then the final one', async () => {
    const { frames, status } = await callStream(toolCall('count', { n: 3 }, { stream: true }));
    assert.equal(status.code, grpc.status.OK, status.details);
    assert.deepEqual(
      frames.map((f) => [Number(f.frame_no), f.final]),
      [
        [0, false],
        [1, false],
        [2, false],
        [3, true],
      ],
    );
    assert.deepEqual(
      frames.map((f) => json(f.data)),
      [{ i: 0 }, { i: 1 }, { i: 2 }, { counted: 3 }],
    );
  });

  it('refuses args against the input schema with the failing path before routing, and a result against the output schema', async () => {
    const refused = await expectStatus(call(toolCall('echo', { text: 7 })), grpc.status.INVALID_ARGUMENT);
    assert.match(refused.details, /^VALIDATION_ERROR: .*\/text.*string/);
    assert.equal(provider.calls.length, 0, 'the provider never saw the call');
    const wrong = await expectStatus(call(toolCall('bad_output', {})), grpc.status.INVALID_ARGUMENT);
    assert.match(wrong.details, /^VALIDATION_ERROR: result does not match the output schema: \/echo .*string/);
  });

  it("Cancel mid-stream: CANCELLED, the provider told, the caller's terminal frame says partial_result", async () => {
    const request = toolCall('hold', { frames: 2 }, { stream: true });
    let cancelled: Promise<ToolErrorMessage> | undefined;
    const { frames, status } = await callStream(request, (_frame, all) => {
      if (all.length === 2)
        cancelled = unary<ToolErrorMessage>(
          tools,
          'Cancel',
          { call_id: request.call_id, provider_id: PROVIDER },
          metadata(CALLER),
        );
    });
    assert.equal(status.code, grpc.status.OK, status.details);
    assert.ok(cancelled);
    assert.equal((await cancelled).error_code, 'CANCELLED');
    assert.deepEqual(
      frames.map((f) => [Number(f.frame_no), f.final]),
      [
        [0, false],
        [1, false],
        [2, true],
      ],
    );
    assert.deepEqual(json(frames[2].summary), { cancelled: true, partial_result: true, frames: 2 });
    const cancel = await pollUntil('cancel_tool_call at the provider', () => provider.cancels[0]);
    assert.equal(cancel.call_id, request.call_id);
    const again = await unary<ToolErrorMessage>(
      tools,
      'Cancel',
      { call_id: request.call_id, provider_id: PROVIDER },
      metadata(CALLER),
    );
    assert.equal(again.error_code, 'ALREADY_COMPLETED');
    const unknown = await unary<ToolErrorMessage>(
      tools,
      'Cancel',
      { call_id: 'never-made', provider_id: PROVIDER },
      metadata(CALLER),
    );
    assert.equal(unknown.error_code, 'NOT_FOUND');
  });

  it("budget_wall_ms expires on the coordinator's clock: WALL_TIMEOUT, and the provider is told to cancel", async () => {
    const request = toolCall('hold', {}, { policy: { budget_wall_ms: 300 } });
    // The status is watched from the start: the call fails while the test still advances the clock.
    const answer = expectStatus(call(request), grpc.status.DEADLINE_EXCEEDED);
    await provider.callArrived(0);
    clock.advance(299);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(provider.cancels.length, 0, 'not before the budget');
    clock.advance(1);
    const error = await answer;
    assert.match(error.details, /^WALL_TIMEOUT: /);
    const cancel = await pollUntil('cancel_tool_call at the provider', () => provider.cancels[0]);
    assert.equal(cancel.call_id, request.call_id);
  });

  it('privilege_level ELEVATED asks a human: approved runs the call, denied answers PERMISSION_DENIED', async () => {
    const approved = call(toolCall('echo', { text: 'up' }, { policy: { privilege_level: 'ELEVATED' } }));
    const first = await pollUntil('the escalation', () => host.coordinator.hitl.list({ pendingOnly: true })[0]);
    assert.equal(first.reasonType, 'TOOL_PRIVILEGE_ESCALATION');
    assert.equal(first.requester, CALLER);
    assert.equal(provider.calls.length, 0, 'nothing runs before the decision');
    host.coordinator.hitl.decide(first.id, { action: 'approve', rationale: 'needed for the release' }, 'editor:alice', {
      correlationId: 't',
    });
    assert.deepEqual(json((await approved).data), { echo: 'up' });

    const denied = call(toolCall('echo', { text: 'no' }, { policy: { network_policy: 'FULL_ACCESS' } }));
    const second = await pollUntil('the second escalation', () => host.coordinator.hitl.list({ pendingOnly: true })[0]);
    host.coordinator.hitl.decide(second.id, { action: 'deny', rationale: 'no network for this' }, 'editor:alice', {
      correlationId: 't',
    });
    const error = await expectStatus(denied, grpc.status.PERMISSION_DENIED);
    assert.match(error.details, /^PERMISSION_DENIED: /);
    assert.equal(provider.calls.length, 1, 'the denied call never reached the provider');
  });

  it('a provider that goes offline mid-call: the caller gets AGENT_UNAVAILABLE at once, and new calls too', async () => {
    const pending = expectStatus(call(toolCall('hold', {})), grpc.status.UNAVAILABLE);
    await provider.callArrived(0);
    provider.close();
    await registry.deregisterAgent(PROVIDER, 'crashed', { token: tokens[PROVIDER] });
    const error = await pending;
    assert.match(error.details, /^AGENT_UNAVAILABLE: /);
    const next = await expectStatus(call(toolCall('echo', { text: 'x' })), grpc.status.UNAVAILABLE);
    assert.match(next.details, /^AGENT_UNAVAILABLE: /);
  });

  it('a unary Call whose client deadline passes is abandoned: the provider told to cancel, the call ends CANCELLED', async () => {
    const request = toolCall('hold', { frames: 0 });
    const fn = tools.Call as unknown as (
      r: unknown,
      m: grpc.Metadata,
      o: grpc.CallOptions,
      cb: (err: grpc.ServiceError | null) => void,
    ) => void;
    const err = await new Promise<grpc.ServiceError | null>((resolve) => {
      fn.call(tools, request, metadata(CALLER), { deadline: Date.now() + 400 }, resolve);
    });
    assert.equal(err?.code, grpc.status.DEADLINE_EXCEEDED);
    const cancel = await pollUntil('cancel_tool_call at the provider', () =>
      provider.cancels.find((c) => c.call_id === request.call_id),
    );
    assert.equal(cancel.call_id, request.call_id);
    const record = await pollUntil('the call ended', () => {
      const r = host.coordinator.store.tools.call(String(request.call_id));
      return r && r.outcome !== 'running' && r.outcome !== 'queued' ? r : undefined;
    });
    assert.equal(record.outcome, 'cancelled');
  });

  it('the envelope path: a TOOL_CALL to coordinator gets TOOL_RESULT frames, the final one as the reply', async () => {
    const inbox = callerRouter.openInbox();
    try {
      const envelope = callerRouter.envelope({
        message_type: 'TOOL_CALL',
        payload: { call_id: 'by-envelope', provider_id: PROVIDER, tool_name: 'count', args: { n: 2 }, stream: true },
      });
      const sent = await callerRouter.send(envelope, { to: 'coordinator' });
      assert.ok(sent.accepted, sent.reason);
      const isResult = (item: StreamItem): boolean =>
        item.msg.message_type === 'TOOL_RESULT' && item.msg.producer_id === 'coordinator';
      await inbox.waitFor(
        (item) => isResult(item) && jsonPayload<{ final: boolean }>(item.msg)?.final === true,
        10_000,
        'the final TOOL_RESULT',
      );
      const results = inbox.items.filter(isResult).map((item) => item.msg);
      assert.ok(results.every((msg: Envelope) => msg.correlation_id === envelope.correlation_id));
      // In order as delivered: the final frame travels like the others, after them.
      const payloads = results.map((msg) => jsonPayload<Record<string, unknown>>(msg)!);
      assert.deepEqual(
        payloads.map((p) => [p.call_id, p.frame_no, p.final, p.result, p.status]),
        [
          ['by-envelope', 0, false, { i: 0 }, 'OK'],
          ['by-envelope', 1, false, { i: 1 }, 'OK'],
          ['by-envelope', 2, true, { counted: 2 }, 'OK'],
        ],
      );
      assert.equal(host.coordinator.router.message(envelope.message_id)?.state, 'FULFILLED');
      // An agent may not send tool envelopes to another agent.
      const direct = await callerRouter.send(
        callerRouter.envelope({ message_type: 'TOOL_CALL', payload: { provider_id: PROVIDER, tool_name: 'echo' } }),
        { to: PROVIDER },
      );
      assert.equal(direct.accepted, false);
      assert.match(direct.reason, /^VALIDATION_ERROR: tool envelopes go to coordinator/);
    } finally {
      inbox.close();
    }
  });

  it('fuzzed TOOL_CALL / TOOL_RESULT payloads and ToolService calls never crash the server', async () => {
    const random = prng(17);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
    const randomString = (max: number): string =>
      Array.from({ length: Math.floor(random() * max) }, () => String.fromCharCode(Math.floor(random() * 0x3000))).join(
        '',
      );
    const randomJson = (depth: number): unknown => {
      switch (Math.floor(random() * (depth > 3 ? 5 : 7))) {
        case 0:
          return null;
        case 1:
          return random() < 0.5;
        case 2:
          return Math.floor(random() * 2e9) - 1e9;
        case 3:
          return random() * 1e6;
        case 4:
          return randomString(20);
        case 5:
          return Array.from({ length: Math.floor(random() * 4) }, () => randomJson(depth + 1));
        default: {
          const o: Record<string, unknown> = {};
          for (let i = Math.floor(random() * 5); i > 0; i--)
            o[
              pick([
                'provider_id',
                'tool_name',
                'call_id',
                'args',
                'args_b64',
                'stream',
                'policy',
                'execution_policy',
                'frame_no',
                'final',
                'result',
                'result_b64',
                'summary',
                'error_code',
                randomString(6),
              ])
            ] = randomJson(depth + 1);
          return o;
        }
      }
    };
    const toolCallShape = (): unknown => ({
      provider_id: pick([PROVIDER, 'workspace', '', randomString(8)]),
      tool_name: pick(['echo', 'count', 'hold', '', randomString(8)]),
      call_id: pick([undefined, '', randomString(12)]),
      args: randomJson(0),
      ...(random() < 0.3
        ? {
            policy: {
              budget_wall_ms: pick([-1, 0, 1e12, 'x', 5]),
              privilege_level: pick(['MINIMAL', 'root', 3]),
              backoff: pick(['fixed', 'weird', 0]),
            },
          }
        : {}),
      ...(random() < 0.2 ? { stream: randomJson(1) } : {}),
    });
    const payload = (): Buffer | unknown => {
      const r = random();
      if (r < 0.15)
        return Buffer.from(Array.from({ length: Math.floor(random() * 64) }, () => Math.floor(random() * 256)));
      if (r < 0.5) return randomJson(0);
      return toolCallShape();
    };
    let answered = 0;
    for (let i = 0; i < 300; i++) {
      const body = payload();
      const bytes = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body) ?? 'null');
      const type = pick(['TOOL_CALL', 'TOOL_CALL', 'TOOL_RESULT', 'TOOL_ERROR']);
      const client = type === 'TOOL_CALL' ? callerRouter : provider.router;
      const outcome = await client
        .send(
          client.envelope({
            message_type: type,
            content_type: pick(['application/json', 'application/octet-stream']),
            payload: bytes,
          }),
          { to: 'coordinator' },
        )
        .then(
          (r) => r,
          (err: grpc.ServiceError) => ({ accepted: false, reason: `status ${grpc.status[err.code]}: ${err.details}` }),
        );
      assert.ok(
        !/^status (INTERNAL|UNKNOWN)/.test(outcome.reason),
        `SendMessage #${i} failed inside the server: ${outcome.reason}`,
      );
      const rpc = await call({
        call_id: pick(['', randomString(10)]),
        provider_id: pick([PROVIDER, 'workspace', '', randomString(8)]),
        tool_name: pick(['echo', 'count', '', randomString(6)]),
        content_type: pick(['', 'application/json', 'text/plain', randomString(10)]),
        args: bytes,
        ...(random() < 0.3
          ? {
              policy: {
                max_retries: Math.floor(random() * 20),
                backoff: pick(['', 'linear', 'zzz']),
                network_policy: pick(['', 'deny_all', 'FULL', 'EGRESS_RESTRICTED']),
                budget_wall_ms: String(Math.floor(random() * 1000)),
              },
            }
          : {}),
      }).then(
        () => grpc.status.OK,
        (err: grpc.ServiceError) => err.code,
      );
      assert.notEqual(rpc, grpc.status.INTERNAL, `ToolService.Call #${i} failed inside the server`);
      assert.notEqual(rpc, grpc.status.UNKNOWN, `ToolService.Call #${i} failed inside the server`);
      answered++;
      // Escalations opened by fuzzed policies are denied, so that no call waits on a human.
      for (const pending of host.coordinator.hitl.list({ pendingOnly: true })) {
        host.coordinator.hitl.decide(pending.id, { action: 'deny', rationale: 'fuzz' }, 'editor:test', {
          correlationId: 'fuzz',
        });
      }
    }
    assert.equal(answered, 300);
    assert.equal((await registry.healthCheck('')).status, 'SERVING');
    assert.deepEqual(json((await call(toolCall('echo', { text: 'still here' }))).data), { echo: 'still here' });
  });
});
