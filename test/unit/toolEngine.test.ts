import { strict as assert } from 'node:assert';
import { Ajv } from 'ajv';
import type { ManualClock } from '../../src/core/clock';
import type { CallContext } from '../../src/core/context';
import type { CoordinatorStore } from '../../src/core/coordinatorStore';
import { Emitter } from '../../src/core/events';
import { HitlService } from '../../src/core/hitl/hitlService';
import { DEFAULT_HITL_POLICY } from '../../src/core/hitl/policy';
import { SequentialIds } from '../../src/core/ids';
import type { EventLog } from '../../src/core/log/eventLog';
import {
  DEFAULT_EXECUTION_POLICY,
  RawToolResult,
  ToolCallError,
  type CallInput,
  type ExecutionPolicy,
  type ProviderInfo,
  type ToolCallRecord,
  type ToolDescriptor,
  type ToolFrame,
  type ToolProvider,
  type ToolRequest,
  type ToolsChange,
  type ToolsStorage,
} from '../../src/core/tools/model';
import { escalationReason, parseExecutionPolicy, parsePolicyJson } from '../../src/core/tools/policy';
import { backoffMs, DEFAULT_TOOLS_OPTIONS, Tools, type ToolCatalogView } from '../../src/core/tools/tools';
import type { WorktreeLocator } from '../../src/core/worktree/model';
import { StoreFixture } from '../support/coordinatorFixture';

const ctx: CallContext = { correlationId: 'test' };
const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);

function tool(name: string, overrides: Partial<ToolDescriptor> = {}): ToolDescriptor {
  return {
    name,
    description: name,
    inputSchema: { type: 'object' },
    outputSchema: {},
    idempotent: true,
    needsWorktree: false,
    defaultTimeoutS: 0,
    maxConcurrency: 4,
    sideEffects: 'none',
    ...overrides,
  };
}

/** A provider whose calls wait on promises the test settles, and that may emit frames first. */
class ControlledProvider implements ToolProvider {
  readonly requests: ToolRequest[] = [];
  readonly pending: Array<{ request: ToolRequest; resolve: (v: unknown) => void; reject: (e: unknown) => void }> = [];
  constructor(
    readonly id: string,
    private readonly tools: ToolDescriptor[],
  ) {}
  describe() {
    return this.tools;
  }
  call(request: ToolRequest): Promise<unknown> {
    this.requests.push(request);
    return new Promise((resolve, reject) => this.pending.push({ request, resolve, reject }));
  }
  /** The oldest call still waiting. */
  take() {
    const next = this.pending.shift();
    assert.ok(next, 'a call reached the provider');
    return next;
  }
}

/** A small catalog of the same shape as the providers part's ProviderCatalog. */
function catalogOf(providers: ToolProvider[]): ToolCatalogView {
  const ajv = new Ajv({ strict: false });
  const changed = new Emitter<ToolsChange>();
  return {
    get: (id: string) => providers.find((p) => p.id === id),
    validators: (id: string, name: string) => {
      const descriptor = providers
        .find((p) => p.id === id)
        ?.describe()
        .find((t) => t.name === name);
      if (!descriptor) return undefined;
      return {
        input: ajv.compile(descriptor.inputSchema),
        output: Object.keys(descriptor.outputSchema).length > 0 ? ajv.compile(descriptor.outputSchema) : undefined,
      };
    },
    infos: (): ProviderInfo[] =>
      providers.map((p) => ({
        providerId: p.id,
        kind: 'builtin',
        available: true,
        unavailableReason: '',
        tools: p.describe(),
        registeredAt: 0,
      })),
    onDidChange: changed.event,
  } as unknown as ToolCatalogView;
}

interface Sunk {
  frames: ToolFrame[];
  ends: ToolFrame[];
  fails: ToolCallError[];
}

function sinkOf(): Sunk & {
  sink: { frame(f: ToolFrame): void; end(f: ToolFrame): void; fail(e: ToolCallError): void };
} {
  const s: Sunk = { frames: [], ends: [], fails: [] };
  return {
    ...s,
    sink: { frame: (f) => s.frames.push(f), end: (f) => s.ends.push(f), fail: (e) => s.fails.push(e) },
    get frames() {
      return s.frames;
    },
    get ends() {
      return s.ends;
    },
    get fails() {
      return s.fails;
    },
  };
}

/** Lets queued microtasks and promise callbacks run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((r) => setImmediate(r));
}

describe('tool call engine (RFC §18.2, §18.5, §18.6)', () => {
  let fixture: StoreFixture;
  let store: CoordinatorStore;
  let clock: ManualClock;
  let log: EventLog;
  let hitl: HitlService;
  let storage: ToolsStorage;
  let provider: ControlledProvider;
  let tools: Tools;
  const bound = new Map<string, string>();
  const locator: WorktreeLocator = {
    worktreePathOf: (agent) => bound.get(agent),
    placeOf: (agent) =>
      bound.has(agent) ? { repoId: 'app', worktreeId: `wt-${agent}`, branch: `sw4rm/wt-${agent}` } : undefined,
  };

  function build(policyRules = DEFAULT_HITL_POLICY): void {
    hitl = new HitlService(store, log, clock, new SequentialIds(), policyRules);
    tools = new Tools(
      { store: storage, log, clock, ids: new SequentialIds(), locator, hitl, catalog: catalogOf([provider]) },
      DEFAULT_TOOLS_OPTIONS,
    );
  }

  beforeEach(() => {
    fixture = new StoreFixture({ prefix: 'sw4rm-tool-engine-', now: T0 });
    ({ store, clock, log } = fixture);
    storage = store;
    provider = new ControlledProvider('acme', [
      tool('echo', {
        outputSchema: { type: 'object', required: ['ok'], properties: { ok: { type: 'boolean' } } },
        inputSchema: { type: 'object', properties: { n: { type: 'integer' } }, additionalProperties: false },
      }),
      tool('once', { idempotent: false, maxConcurrency: 1 }),
      tool('slow', { defaultTimeoutS: 5, maxConcurrency: 1 }),
      tool('here', { needsWorktree: true }),
    ]);
    bound.clear();
    build();
  });

  afterEach(() => {
    tools.dispose();
    hitl.dispose();
    fixture.dispose();
  });

  const input = (toolName: string, over: Partial<CallInput> = {}): CallInput => ({
    providerId: 'acme',
    toolName,
    contentType: 'application/json',
    args: Buffer.from('{}'),
    policy: DEFAULT_EXECUTION_POLICY,
    stream: true,
    via: 'grpc',
    ...over,
  });
  const policy = (over: Partial<ExecutionPolicy>): ExecutionPolicy => ({ ...DEFAULT_EXECUTION_POLICY, ...over });
  const events = (type: string) => log.query({ eventType: type });

  it('relays frames in order numbered from 0, then exactly one terminal; the unary call answers only the final frame', async () => {
    const s = sinkOf();
    const { callId } = tools.start('coder', input('echo'), ctx, s.sink);
    assert.equal(s.frames.length + s.ends.length + s.fails.length, 0, 'nothing reaches the sink before start returns');
    await settle();
    const call = provider.take();
    call.request.emit(Buffer.from('"a"'));
    call.request.emit(Buffer.from('"bb"'), 'text/plain');
    call.resolve({ ok: true });
    await settle();
    // After the end nothing more reaches the sink: a late frame, a Cancel (already completed), the caller going away.
    call.request.emit(Buffer.from('late'));
    assert.equal(tools.cancel('coder', 'acme', callId).errorCode, 'ALREADY_COMPLETED');
    tools.abandon(callId);
    await settle();
    assert.deepEqual(
      s.frames.map((f) => [f.frameNo, f.final, f.contentType, f.data.toString()]),
      [
        [0, false, 'application/json', '"a"'],
        [1, false, 'text/plain', '"bb"'],
      ],
    );
    assert.equal(s.ends.length, 1);
    assert.equal(s.fails.length, 0);
    assert.deepEqual([s.ends[0].frameNo, s.ends[0].final, s.ends[0].data.toString()], [2, true, '{"ok":true}']);
    const record = tools.callRecord(callId)!;
    assert.deepEqual([record.outcome, record.frames, record.bytes, record.attempts], ['ok', 3, 3 + 4 + 11, 1]);
    assert.deepEqual(
      tools.callFrames(callId).map((f) => f.frameNo),
      [0, 1, 2],
    );
    const ended = events('tool.call');
    assert.equal(ended.length, 1);
    assert.equal(ended[0].correlationId, callId);
    assert.deepEqual([ended[0].details.outcome, ended[0].details.frames, ended[0].details.via], ['ok', 3, 'grpc']);
    assert.equal(events('tool.call.started').length, 1);

    const unary = tools.call('coder', input('echo', { stream: false }), ctx);
    await settle();
    const second = provider.take();
    second.request.emit(Buffer.from('"x"'));
    second.resolve({ ok: true });
    const result = await unary;
    assert.equal(result.data.toString(), '{"ok":true}');
  });

  it('refuses at once what it can check: unknown provider or tool, bad args (with the failing path), no worktree, a taken call_id', async () => {
    const refused = (fn: () => unknown, code: string, pattern?: RegExp) =>
      assert.throws(fn, (err: unknown) => {
        assert.ok(err instanceof ToolCallError, String(err));
        assert.equal(err.code, code);
        if (pattern) assert.match(err.message, pattern);
        return true;
      });
    const s = sinkOf();
    refused(() => tools.start('coder', input('echo', { providerId: 'nope' }), ctx, s.sink), 'NOT_FOUND');
    refused(() => tools.start('coder', input('nope'), ctx, s.sink), 'unknown_tool');
    refused(
      () => tools.start('coder', input('echo', { args: Buffer.from('{"n":"x"}') }), ctx, s.sink),
      'VALIDATION_ERROR',
      /\/n must be integer/,
    );
    refused(
      () => tools.start('coder', input('echo', { args: Buffer.from([0xff]) }), ctx, s.sink),
      'VALIDATION_ERROR',
      /UTF-8/,
    );
    refused(() => tools.start('coder', input('here'), ctx, s.sink), 'worktree_not_bound');
    refused(
      () => tools.start('coder', input('echo', { policy: policy({ worktreeRequired: true }) }), ctx, s.sink),
      'worktree_not_bound',
    );
    refused(() => tools.start('', input('echo'), ctx, s.sink), 'VALIDATION_ERROR');
    bound.set('coder', '/w/coder');
    tools.start('coder', input('here', { callId: 'c1' }), ctx, s.sink);
    await settle();
    assert.equal(provider.take().request.worktreePath, '/w/coder');
    refused(() => tools.start('coder', input('echo', { callId: 'c1' }), ctx, s.sink), 'ALREADY_EXISTS');
    assert.equal(store.tools.recentCalls(100).length, 1, 'a refused call is not kept');
    assert.deepEqual(
      events('tool.call').map((e) => e.details.error_code),
      [
        'NOT_FOUND',
        'unknown_tool',
        'VALIDATION_ERROR',
        'VALIDATION_ERROR',
        'worktree_not_bound',
        'worktree_not_bound',
        'VALIDATION_ERROR',
        'ALREADY_EXISTS',
      ],
      'but logged, one tool.call event each',
    );
  });

  it('checks the final JSON result against the output schema (VALIDATION_ERROR naming the path)', async () => {
    const s = sinkOf();
    tools.start('coder', input('echo'), ctx, s.sink);
    await settle();
    provider.take().resolve({ ok: 'yes' });
    await settle();
    assert.equal(s.ends.length, 0);
    assert.equal(s.fails.length, 1);
    assert.equal(s.fails[0].code, 'VALIDATION_ERROR');
    assert.match(s.fails[0].message, /^result does not match the output schema: \/ok must be boolean/);
  });

  it('checks a final JSON result that carries a summary (a RawToolResult) against the output schema too', async () => {
    const s = sinkOf();
    tools.start('coder', input('echo'), ctx, s.sink);
    await settle();
    provider
      .take()
      .resolve(new RawToolResult(Buffer.from('{"ok":"yes"}'), 'application/json', Buffer.from('{"frames":1}')));
    await settle();
    assert.equal(s.ends.length, 0);
    assert.deepEqual(
      s.fails.map((e) => e.code),
      ['VALIDATION_ERROR'],
    );
    assert.match(s.fails[0].message, /^result does not match the output schema: \/ok must be boolean/);
    const good = sinkOf();
    tools.start('coder', input('echo'), ctx, good.sink);
    await settle();
    provider
      .take()
      .resolve(new RawToolResult(Buffer.from('{"ok":true}'), 'application/json', Buffer.from('{"frames":1}')));
    await settle();
    assert.deepEqual(
      good.ends.map((f) => [f.data.toString(), f.summary.toString()]),
      [['{"ok":true}', '{"frames":1}']],
    );
  });

  it('retries a provider error marked retryable (TOOL_ERROR "retryable": true) like a transient code', async () => {
    const s = sinkOf();
    tools.start('coder', input('echo', { policy: policy({ maxRetries: 1 }) }), ctx, s.sink);
    await settle();
    provider.take().reject(Object.assign(new ToolCallError('internal', 'RATE_LIMITED', 'later'), { retryable: true }));
    await settle();
    clock.advance(60_000);
    await settle();
    const second = provider.take();
    assert.equal(second.request.attempt, 2);
    second.reject(new ToolCallError('internal', 'RATE_LIMITED', 'still later'));
    await settle();
    clock.advance(60_000);
    await settle();
    assert.equal(provider.pending.length, 0, 'without retryable, RATE_LIMITED is not retried');
    assert.deepEqual(
      s.fails.map((e) => e.code),
      ['RATE_LIMITED'],
    );
  });

  it('queues calls beyond max_concurrency FIFO (not refused), and starts their timers only when they run', async () => {
    const a = sinkOf();
    const b = sinkOf();
    const c = sinkOf();
    const first = tools.start('coder', input('slow'), ctx, a.sink).callId;
    const second = tools.start('coder', input('slow'), ctx, b.sink).callId;
    const third = tools.start('coder', input('slow'), ctx, c.sink).callId;
    await settle();
    assert.equal(provider.pending.length, 1, 'one runs (max_concurrency 1)');
    assert.deepEqual([tools.callRecord(second)!.outcome, tools.callRecord(third)!.outcome], ['queued', 'queued']);
    clock.advance(4_000);
    provider.take().resolve({});
    await settle();
    assert.equal(a.ends.length, 1);
    assert.equal(provider.pending.length, 1);
    assert.equal(provider.pending[0].request.callId, second, 'FIFO');
    clock.advance(4_000); // the second has run 4 s of its 5 s timeout, not 8 s
    assert.equal(b.fails.length, 0);
    clock.advance(1_000);
    await settle();
    assert.equal(b.fails[0]?.code, 'TOOL_TIMEOUT');
    assert.equal(tools.callRecord(first)!.outcome, 'ok');
    assert.equal(provider.take().request.signal.aborted, true, 'the timed-out second was told to stop');
    assert.equal(provider.take().request.callId, third, 'its slot went to the third');
  });

  it("ends a call TOOL_TIMEOUT (policy timeout) or WALL_TIMEOUT (budget_wall_ms) on the clock, aborting the provider's signal", async () => {
    const t = sinkOf();
    tools.start('coder', input('once', { policy: policy({ timeoutMs: 1_000 }) }), ctx, t.sink);
    await settle();
    const timed = provider.take();
    clock.advance(999);
    assert.equal(timed.request.signal.aborted, false);
    clock.advance(1);
    await settle();
    assert.equal(timed.request.signal.aborted, true);
    assert.equal(t.fails[0].code, 'TOOL_TIMEOUT');
    assert.equal(t.fails[0].kind, 'deadline_exceeded');
    timed.resolve({});
    await settle();
    assert.equal(t.ends.length, 0, 'a late answer is dropped');

    const w = sinkOf();
    tools.start('coder', input('echo', { policy: policy({ budgetWallMs: 2_000, maxRetries: 3 }) }), ctx, w.sink);
    await settle();
    const walled = provider.take();
    walled.request.emit(Buffer.from('1'));
    clock.advance(2_000);
    await settle();
    assert.equal(walled.request.signal.aborted, true);
    assert.deepEqual([w.frames.length, w.fails.length, w.fails[0].code], [1, 1, 'WALL_TIMEOUT']);
    assert.equal(provider.pending.length, 0, 'a wall timeout is not retried');
  });

  it('retries an idempotent tool on a retryable code with backoff on the clock; never a non-idempotent one', async () => {
    const s = sinkOf();
    const { callId } = tools.start(
      'coder',
      input('echo', { policy: policy({ maxRetries: 2, timeoutMs: 100 }) }),
      ctx,
      s.sink,
    );
    await settle();
    provider.take().reject(new ToolCallError('unavailable', 'AGENT_UNAVAILABLE', 'gone'));
    await settle();
    assert.equal(provider.pending.length, 0, 'waits its backoff');
    clock.advance(199);
    await settle();
    assert.equal(provider.pending.length, 0);
    clock.advance(1);
    await settle();
    const second = provider.take();
    assert.equal(second.request.attempt, 2);
    clock.advance(100); // TOOL_TIMEOUT: retryable too
    await settle();
    clock.advance(399);
    await settle();
    assert.equal(provider.pending.length, 0, 'exponential: 400 ms before the third attempt');
    clock.advance(1);
    await settle();
    const third = provider.take();
    assert.equal(third.request.attempt, 3);
    third.resolve({ ok: true });
    await settle();
    assert.equal(s.ends.length, 1);
    assert.equal(tools.callRecord(callId)!.attempts, 3);
    assert.equal(events('tool.call.retry').length, 2);

    const once = sinkOf();
    tools.start('coder', input('once', { policy: policy({ maxRetries: 5 }) }), ctx, once.sink);
    await settle();
    provider.take().reject(new ToolCallError('unavailable', 'AGENT_UNAVAILABLE', 'gone'));
    await settle();
    clock.advance(60_000);
    await settle();
    assert.equal(provider.pending.length, 0, 'not retried');
    assert.equal(once.fails[0].code, 'AGENT_UNAVAILABLE');

    const bad = sinkOf();
    tools.start('coder', input('echo', { policy: policy({ maxRetries: 5 }) }), ctx, bad.sink);
    await settle();
    provider.take().reject(new ToolCallError('invalid_argument', 'VALIDATION_ERROR', 'no'));
    await settle();
    assert.equal(bad.fails[0].code, 'VALIDATION_ERROR', 'a code a retry cannot cure is not retried');
    assert.deepEqual(
      [0, 1, 2, 10, 40].map((n) => backoffMs('exponential', n, 200, 10_000)),
      [200, 400, 800, 10_000, 10_000],
    );
    assert.deepEqual(
      [0, 1, 2].map((n) => backoffMs('linear', n, 200, 10_000)),
      [200, 400, 600],
    );
    assert.deepEqual(
      [0, 5].map((n) => backoffMs('fixed', n, 200, 10_000)),
      [200, 200],
    );
  });

  it('asks a human for ELEVATED / PRIVILEGED / FULL_ACCESS (HITL TOOL_PRIVILEGE_ESCALATION): approved runs, denied is PERMISSION_DENIED; PRIVILEGED logged WARN', async () => {
    bound.set('coder', '/w/coder');
    const approved = sinkOf();
    const { callId } = tools.start(
      'coder',
      input('echo', { policy: policy({ privilegeLevel: 'PRIVILEGED' }) }),
      ctx,
      approved.sink,
    );
    const record = tools.callRecord(callId)!;
    assert.equal(record.outcome, 'awaiting_approval');
    const invocation = hitl.get(record.invocationId)!;
    assert.equal(invocation.reasonType, 'TOOL_PRIVILEGE_ESCALATION');
    assert.equal(invocation.requester, 'coder');
    assert.deepEqual(invocation.subject, { repoId: 'app', worktreeId: 'wt-coder', taskId: 'tool:acme:echo' });
    await settle();
    assert.equal(provider.pending.length, 0, 'nothing runs before the decision');
    hitl.decide(invocation.id, { action: 'approve', rationale: 'fine' }, 'editor:alice', ctx);
    await settle();
    provider.take().resolve({ ok: true });
    await settle();
    assert.equal(approved.ends.length, 1);
    const privilege = events('tool.privilege');
    assert.deepEqual(
      privilege.map((e) => e.level),
      ['WARN'],
    );

    const denied = sinkOf();
    const second = tools.start(
      'coder',
      input('echo', { policy: policy({ networkPolicy: 'FULL_ACCESS' }) }),
      ctx,
      denied.sink,
    ).callId;
    hitl.decide(
      tools.callRecord(second)!.invocationId,
      { action: 'deny', rationale: 'no network' },
      'editor:alice',
      ctx,
    );
    await settle();
    assert.equal(provider.pending.length, 0);
    assert.equal(denied.fails[0].code, 'PERMISSION_DENIED');
    assert.equal(denied.fails[0].kind, 'permission_denied');
    assert.match(denied.fails[0].message, /no network/);

    const elevated = sinkOf();
    const third = tools.start(
      'coder',
      input('echo', { policy: policy({ privilegeLevel: 'ELEVATED' }) }),
      ctx,
      elevated.sink,
    ).callId;
    assert.deepEqual(
      events('tool.privilege').map((e) => e.level),
      ['WARN', 'INFO', 'INFO'],
    );
    assert.equal(
      hitl.get(tools.callRecord(third)!.invocationId)!.deadlineAt,
      T0 + DEFAULT_HITL_POLICY.defaultDeadlineMs,
      "the approvals' default deadline",
    );
    clock.advance(DEFAULT_HITL_POLICY.defaultDeadlineMs);
    await settle();
    assert.equal(provider.pending.length, 0);
    assert.equal(elevated.fails[0]?.code, 'PERMISSION_DENIED', 'nobody decided: the fallback denies');
  });

  it('runs an escalation a HITL auto rule pre-approves without waiting for a human', async () => {
    tools.dispose();
    hitl.dispose();
    build({
      ...DEFAULT_HITL_POLICY,
      rules: [
        {
          name: 'acme-ok',
          reasonType: 'TOOL_PRIVILEGE_ESCALATION',
          agent: 'coder',
          subject: '*/*/tool:acme:*',
          action: 'approve',
        },
      ],
    });
    const s = sinkOf();
    tools.start('coder', input('echo', { policy: policy({ privilegeLevel: 'ELEVATED' }) }), ctx, s.sink);
    await settle();
    provider.take().resolve({ ok: true });
    await settle();
    assert.equal(s.ends.length, 1);
  });

  it("Cancel: a running call ends CANCELLED with a terminal frame (partial_result), then ALREADY_COMPLETED; unknown or another agent's NOT_FOUND", async () => {
    const s = sinkOf();
    const { callId } = tools.start('coder', input('echo'), ctx, s.sink);
    await settle();
    const running = provider.take();
    running.request.emit(Buffer.from('"part"'));
    assert.equal(tools.cancel('other', 'acme', callId).errorCode, 'NOT_FOUND', "another agent's call");
    assert.equal(tools.cancel('coder', 'elsewhere', callId).errorCode, 'NOT_FOUND', 'another provider');
    assert.equal(tools.cancel('coder', 'acme', 'nope').errorCode, 'NOT_FOUND');
    assert.equal(tools.cancel('coder', 'acme', callId).errorCode, 'CANCELLED');
    assert.equal(running.request.signal.aborted, true, 'the provider is told to stop');
    assert.equal(s.ends.length, 1);
    assert.deepEqual([s.ends[0].frameNo, s.ends[0].final], [1, true]);
    assert.deepEqual(JSON.parse(s.ends[0].summary.toString()), { cancelled: true, partial_result: true, frames: 1 });
    running.resolve({ ok: true });
    await settle();
    assert.equal(s.ends.length, 1, 'exactly one terminal');
    assert.equal(tools.cancel('coder', '', callId).errorCode, 'ALREADY_COMPLETED');
    assert.equal(tools.callRecord(callId)!.outcome, 'cancelled');

    const q = sinkOf();
    tools.start('coder', input('once'), ctx, sinkOf().sink);
    const queued = tools.start('coder', input('once'), ctx, q.sink).callId;
    await settle();
    assert.equal(tools.cancel('coder', 'acme', queued).errorCode, 'CANCELLED');
    assert.deepEqual(JSON.parse(q.ends[0].summary.toString()), { cancelled: true, partial_result: false, frames: 0 });
  });

  it('restore(): calls a crash left unfinished end INTERRUPTED, with a tool.call event each and an onDidInterrupt', async () => {
    const { callId } = tools.start('coder', input('echo', { via: 'envelope', messageId: 'm-1' }), ctx, sinkOf().sink);
    await settle();
    assert.equal(store.tools.unfinishedCalls().length, 1);
    // A crash: the process is gone without dispose(); a new engine over the same store restores.
    const again = new Tools(
      { store: storage, log, clock, ids: new SequentialIds(), locator, hitl, catalog: catalogOf([provider]) },
      DEFAULT_TOOLS_OPTIONS,
    );
    const seen: ToolCallRecord[] = [];
    again.onDidInterrupt((r) => seen.push(r));
    again.restore(ctx);
    assert.deepEqual(
      seen.map((r) => [r.callId, r.errorCode, r.messageId]),
      [[callId, 'INTERRUPTED', 'm-1']],
    );
    assert.deepEqual(
      [again.callRecord(callId)!.outcome, again.callRecord(callId)!.errorCode],
      ['error', 'INTERRUPTED'],
    );
    assert.equal(store.tools.unfinishedCalls().length, 0);
    assert.equal(events('tool.call').filter((e) => e.details.error_code === 'INTERRUPTED').length, 1);
    assert.equal(again.cancel('coder', 'acme', callId).errorCode, 'ALREADY_COMPLETED');
    again.dispose();
  });
});

describe('execution policy parsing (RFC §18.5)', () => {
  it('reads the proto message and the envelope JSON, with defaults and refusals that name the field', () => {
    assert.deepEqual(parseExecutionPolicy(undefined), DEFAULT_EXECUTION_POLICY);
    assert.deepEqual(
      parseExecutionPolicy({
        timeout: { seconds: '2', nanos: 500_000_000 },
        max_retries: 2,
        backoff: 'LINEAR',
        network_policy: 'egress_restricted',
        privilege_level: '',
        budget_wall_ms: '1500',
      }),
      {
        ...DEFAULT_EXECUTION_POLICY,
        timeoutMs: 2_500,
        maxRetries: 2,
        backoff: 'linear',
        networkPolicy: 'EGRESS_RESTRICTED',
        budgetWallMs: 1_500,
      },
    );
    assert.deepEqual(parseExecutionPolicy({ network_policy: 'open' }), {
      refused:
        "execution_policy.network_policy: must be one of DENY_ALL, EGRESS_RESTRICTED, EGRESS_UNRESTRICTED, FULL_ACCESS (any case), not 'open'",
    });
    assert.match(
      (parseExecutionPolicy({ backoff: 'random' }) as { refused: string }).refused,
      /^execution_policy\.backoff: must be one of exponential, linear, fixed/,
    );
    assert.deepEqual(parsePolicyJson({ timeout_ms: 5000, retries: 1, isolation: 'worktree' }), {
      ...DEFAULT_EXECUTION_POLICY,
      timeoutMs: 5_000,
      maxRetries: 1,
    });
    assert.deepEqual(parsePolicyJson({ timeout_seconds: 120, retry_attempts: 3, isolation_level: 'SANDBOX' }), {
      ...DEFAULT_EXECUTION_POLICY,
      timeoutMs: 120_000,
      maxRetries: 3,
    });
    assert.deepEqual(parsePolicyJson({ privilege_level: 'privileged', worktree_required: true }), {
      ...DEFAULT_EXECUTION_POLICY,
      privilegeLevel: 'PRIVILEGED',
      worktreeRequired: true,
    });
    assert.match(
      (parsePolicyJson({ budget_wall_ms: -1 }) as { refused: string }).refused,
      /^execution_policy\.budget_wall_ms: must be a non-negative/,
    );
    assert.match(
      (parsePolicyJson({ max_retries: 1.5 }) as { refused: string }).refused,
      /^execution_policy\.max_retries: /,
    );
    assert.match((parsePolicyJson('fast') as { refused: string }).refused, /^execution_policy: must be a JSON object/);
    assert.equal(escalationReason(DEFAULT_EXECUTION_POLICY), undefined);
    assert.equal(
      escalationReason({
        ...DEFAULT_EXECUTION_POLICY,
        privilegeLevel: 'DEFAULT',
        networkPolicy: 'EGRESS_UNRESTRICTED',
      }),
      undefined,
    );
    assert.match(
      escalationReason({ ...DEFAULT_EXECUTION_POLICY, privilegeLevel: 'ELEVATED', networkPolicy: 'FULL_ACCESS' })!,
      /ELEVATED and network_policy FULL_ACCESS/,
    );
  });
});
