import { strict as assert } from 'node:assert';
import type { CallContext } from '../../src/core/context';
import { MAX_STRUCTURAL_LEAVES, scoreDebate } from '../../src/core/reasoning/debateScorer';
import {
  BUILT_IN_NOTE,
  EXCERPT_BYTES,
  INFERENCE_ENGINE_CONNECTOR,
  InferenceEngine,
  REASONING_LIMITS,
  ReasoningProvider,
  excerpt,
} from '../../src/core/reasoning/inferenceEngine';
import type { AgentToolTransport } from '../../src/core/tools/externalProvider';
import { ToolCallError, type CallInput, type ToolRequest, type ToolResult } from '../../src/core/tools/model';
import type { TaskScope } from '../../src/core/scheduler/model';
import { prng } from '../support/prng';
import { RouterHarness, ctx } from '../support/routerHarness';

const round3 = (n: number) => Math.round(n * 1000) / 1000;
const scope = (fields: Partial<TaskScope>): TaskScope => ({
  repoId: '',
  worktreeId: '',
  paths: [],
  resources: [],
  ...fields,
});

describe('the built-in debate scorer (EvaluateDebate without an inference engine)', () => {
  it("compares JSON proposals structurally: the share of equal leaves over both proposals' paths", () => {
    assert.deepEqual(
      scoreDebate('{"plan":"a","steps":[1,2]}', '{"steps":[1,2],"plan":"a"}').confidence,
      1,
      'key order does not matter',
    );
    const half = scoreDebate('{"plan":"a","owner":"x"}', '{"plan":"a","owner":"y"}');
    assert.equal(half.confidence, 0.5);
    assert.match(half.notes, /^structural JSON comparison: 1 of 2 paths equal; differing: \.owner$/);
    assert.equal(scoreDebate('{"a":1}', '{"b":1}').confidence, 0, 'nothing in common');
    assert.equal(scoreDebate('{"a.b":1}', '{"a":{"b":1}}').confidence, 0, 'a dotted key is not a nested one');
    assert.equal(scoreDebate('[1,2,3]', '[1,2,4]').confidence, 0.667);
    assert.equal(scoreDebate('{}', '{}').confidence, 1);
    assert.equal(scoreDebate('1', '"1"').confidence, 0, 'a number is not a string');
  });

  it('compares anything else as text: shared words (lower-cased) over all words', () => {
    const text = scoreDebate('Refactor the parser first', 'refactor the lexer first');
    assert.equal(text.confidence, 0.6);
    assert.match(text.notes, /^text comparison \(not both JSON\): 3 of 5 words in common$/);
    assert.equal(scoreDebate('', '').confidence, 1);
    assert.equal(scoreDebate('{"a":1}', 'a 1').confidence, 1, 'one side not JSON: both as text');
    assert.match(scoreDebate('x', 'y', 'high').notes, /intensity 'high' not used by the built-in scorer/);
  });

  it('compares structurally up to 20,000 leaves per proposal; beyond, as text (the notes say so), so two 1 MiB arrays do not hold the event loop', () => {
    assert.equal(MAX_STRUCTURAL_LEAVES, 20_000);
    const at = JSON.stringify(Array(MAX_STRUCTURAL_LEAVES).fill(1));
    assert.match(scoreDebate(at, at).notes, /^structural JSON comparison: 20000 of 20000 paths equal$/);
    const over = JSON.stringify(Array(MAX_STRUCTURAL_LEAVES + 1).fill(1));
    const beyond = scoreDebate(at, over);
    assert.equal(beyond.confidence, round3(MAX_STRUCTURAL_LEAVES / (MAX_STRUCTURAL_LEAVES + 1)));
    assert.match(beyond.notes, /^text comparison \(JSON of more than 20000 leaves\): 20000 of 20001 words in common$/);
    assert.match(scoreDebate(over, at).notes, /^text comparison \(JSON of more than 20000 leaves\)/, 'symmetric');
    const nested = JSON.stringify({ a: Array(MAX_STRUCTURAL_LEAVES / 2 + 1).fill({ b: [1], c: {} }) });
    assert.match(
      scoreDebate(nested, nested).notes,
      /^text comparison \(JSON of more than 20000 leaves\)/,
      'nested leaves count too',
    );
    const big = JSON.stringify(Array(524_287).fill(0)); // just under 1 MiB: 524k leaves
    assert.ok(Buffer.byteLength(big) <= REASONING_LIMITS.maxProposalBytes);
    const started = process.hrtime.bigint();
    assert.equal(scoreDebate(big, big).confidence, 1);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    assert.ok(ms < 1_000, `two 1 MiB arrays took ${ms} ms`);
  });

  it('is deterministic, symmetric and within [0, 1] for random proposals; a proposal agrees fully with itself', () => {
    const random = prng(17);
    const words = ['plan', 'a', 'b', 'parser', '1', '2', 'true', 'null'];
    const value = (depth: number): unknown => {
      const r = random();
      if (depth > 2 || r < 0.3) return words[Math.floor(random() * words.length)];
      if (r < 0.6) return Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1));
      return Object.fromEntries(
        Array.from({ length: Math.floor(random() * 3) }, () => [
          words[Math.floor(random() * words.length)],
          value(depth + 1),
        ]),
      );
    };
    for (let i = 0; i < 300; i++) {
      const a = random() < 0.7 ? JSON.stringify(value(0)) : `${words[i % words.length]} ${String(value(0))}`;
      const b = random() < 0.7 ? JSON.stringify(value(0)) : `${words[(i + 3) % words.length]} plan`;
      const ab = scoreDebate(a, b);
      assert.ok(ab.confidence >= 0 && ab.confidence <= 1, `${a} / ${b}: ${ab.confidence}`);
      assert.equal(scoreDebate(b, a).confidence, ab.confidence, `symmetric: ${a} / ${b}`);
      assert.deepEqual(scoreDebate(a, b), ab, 'deterministic');
      assert.equal(scoreDebate(a, a).confidence, 1);
    }
  });
});

describe('InferenceEngine (RFC §9.3: the inference engine agent, else the built-in scorers)', () => {
  let h: RouterHarness;
  let engine: InferenceEngine;
  let calls: Array<{
    input: CallInput;
    args: Record<string, unknown>;
    ctx: CallContext;
    resolve(r: ToolResult): void;
    reject(e: Error): void;
  }>;
  let abandoned: string[];
  const c = ctx('reasoning-test');

  beforeEach(() => {
    h = new RouterHarness();
    calls = [];
    abandoned = [];
    engine = new InferenceEngine(
      {
        agents: h.registry,
        clock: h.clock,
        log: h.coordinator.log,
        abandon: (callId) => abandoned.push(callId),
        call: (input, callCtx) =>
          new Promise<ToolResult>((resolve, reject) =>
            calls.push({
              input,
              args: JSON.parse(Buffer.from(input.args).toString('utf8')) as Record<string, unknown>,
              ctx: callCtx,
              resolve,
              reject,
            }),
          ),
      },
      { timeoutMs: 5_000 },
    );
  });

  afterEach(() => {
    engine.dispose();
    h.dispose();
  });

  const answer = (i: number, value: unknown) =>
    calls[i].resolve({
      callId: `call-${i}`,
      contentType: 'application/json',
      data: Buffer.from(JSON.stringify(value)),
    });
  const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
  const rejectsWith = async (work: Promise<unknown>, kind: string, pattern: RegExp) => {
    await assert.rejects(work, (err: unknown) => {
      assert.ok(err instanceof ToolCallError, String(err));
      assert.equal(err.kind, kind);
      assert.match(err.details, pattern);
      return true;
    });
  };

  it('logs the first 4 KiB (UTF-8 bytes, as README says) of arguments and answers, cut between characters', () => {
    assert.equal(EXCERPT_BYTES, 4096);
    assert.equal(excerpt('x'.repeat(4096)), 'x'.repeat(4096));
    assert.equal(excerpt('x'.repeat(4097)), `${'x'.repeat(4096)}…`);
    assert.equal(excerpt('é'.repeat(3000)), `${'é'.repeat(2048)}…`, '2-byte characters: 4 KiB, not 4,096 characters');
    const odd = excerpt(`x${'€'.repeat(2000)}`); // 1 + 3 × 1365 = 4096 bytes
    assert.equal(odd, `x${'€'.repeat(1365)}…`);
    assert.ok(Buffer.byteLength(excerpt(`xx${'😀'.repeat(2000)}`).slice(0, -1)) <= 4096);
    assert.ok(!excerpt(`xx${'😀'.repeat(2000)}`).includes('\uFFFD'), 'no character cut in two');
  });

  describe('without an inference engine agent', () => {
    it('checkParallelism answers the built-in scorer at once (a synchronous verdict for the gate), marked in notes', async () => {
      h.register('ordinary', { reasoningConnectors: ['sw4rm://reasoning/none'] });
      const verdict = engine.check(
        scope({ repoId: 'r', paths: ['src/**'] }),
        scope({ repoId: 'r', paths: ['src/**'] }),
      );
      assert.ok(!(verdict instanceof Promise), 'decided within the same mayStart');
      assert.equal((verdict as { confidence: number }).confidence, 0.2);
      assert.ok((verdict as { notes: string }).notes.startsWith(BUILT_IN_NOTE), (verdict as { notes: string }).notes);
      assert.equal((await engine.checkParallelism(scope({ repoId: 'a' }), scope({ repoId: 'b' }), c)).confidence, 1);
      assert.equal(calls.length, 0, 'an agent declaring another reasoning connector is not asked');
      assert.equal(engine.engineAgent(), undefined);
    });

    it('evaluateDebate answers the built-in debate scorer; summarize refuses FAILED_PRECONDITION, never a made-up summary', async () => {
      const verdict = await engine.evaluateDebate(
        { negotiationId: 'n1', proposalA: '{"x":1}', proposalB: '{"x":1}', intensity: '' },
        c,
      );
      assert.deepEqual(verdict, {
        confidence: 1,
        notes: `${BUILT_IN_NOTE}structural JSON comparison: 1 of 1 paths equal`,
      });
      await rejectsWith(
        engine.summarize(
          { sessionId: 's', segments: [{ kind: 'message', content: 'hello', seq: 1, at: '' }], maxTokens: 0, mode: '' },
          c,
        ),
        'failed_precondition',
        /^FAILED_PRECONDITION: no inference engine registered$/,
      );
      assert.equal(h.events('reasoning.request').length, 0);
    });

    it('refuses input beyond its bounds as VALIDATION_ERROR', async () => {
      const segment = { kind: 'm', content: 'x', seq: 0, at: '' };
      await rejectsWith(
        engine.summarize(
          { sessionId: 's', segments: Array(REASONING_LIMITS.maxSegments + 1).fill(segment), maxTokens: 0, mode: '' },
          c,
        ),
        'invalid_argument',
        /more than 1000 segments/,
      );
      await rejectsWith(
        engine.summarize(
          {
            sessionId: 's',
            segments: [{ ...segment, content: 'x'.repeat(REASONING_LIMITS.maxSegmentBytes) }],
            maxTokens: 0,
            mode: '',
          },
          c,
        ),
        'invalid_argument',
        /larger than 1048576 bytes together/,
      );
      await rejectsWith(
        engine.evaluateDebate({ negotiationId: 'n'.repeat(300), proposalA: '', proposalB: '', intensity: '' }, c),
        'invalid_argument',
        /negotiation_id is longer than 256/,
      );
      await rejectsWith(
        engine.evaluateDebate(
          {
            negotiationId: 'n',
            proposalA: 'x'.repeat(REASONING_LIMITS.maxProposalBytes + 1),
            proposalB: '',
            intensity: '',
          },
          c,
        ),
        'invalid_argument',
        /proposal_a is larger/,
      );
    });
  });

  describe('with an inference engine agent online', () => {
    beforeEach(() => {
      h.register('engine-b', { reasoningConnectors: [INFERENCE_ENGINE_CONNECTOR] });
      h.register('engine-a', { reasoningConnectors: ['https://example.test/llm', INFERENCE_ENGINE_CONNECTOR] });
      h.register('aaa-ordinary', { reasoningConnectors: ['sw4rm://reasoning/none'] });
    });

    it('asks the lowest-id engine as a `reasoning` tool call by `coordinator`, with a bounded timeout, and logs request and response', async () => {
      assert.equal(engine.engineAgent(), 'engine-a');
      const pending = engine.check(
        scope({ repoId: 'r', paths: ['src/**'] }),
        scope({ repoId: 'r', resources: ['db'] }),
        c,
      );
      assert.ok(pending instanceof Promise, 'an engine answers later');
      await flush();
      assert.equal(calls.length, 1);
      assert.equal(calls[0].input.providerId, 'reasoning');
      assert.equal(calls[0].input.toolName, 'check_parallelism');
      assert.equal(calls[0].input.via, 'internal');
      assert.equal(calls[0].input.stream, false);
      assert.equal(calls[0].input.policy.timeoutMs, 5_000);
      assert.deepEqual(JSON.parse(calls[0].args.scope_a as string), {
        repo_id: 'r',
        worktree_id: '',
        paths: ['src/**'],
        resources: [],
      });
      answer(0, { confidence_score: 0.8, notes: 'different files' });
      assert.deepEqual(await pending, { confidence: 0.8, notes: 'different files' });
      const [request] = h.events('reasoning.request');
      assert.equal(request.details.engine_id, 'engine-a');
      assert.equal(request.details.tool_name, 'check_parallelism');
      assert.equal(request.details.version, 1);
      assert.equal(request.correlationId, 'reasoning-test');
      const [response] = h.events('reasoning.response');
      assert.equal(response.details.outcome, 'ok');
      assert.match(response.details.answer as string, /"confidence_score":0.8/);
    });

    it('an answer out of bounds (a confidence of 7) is a failure: checkParallelism and evaluateDebate reject UNAVAILABLE, logged', async () => {
      const check = engine.checkParallelism(scope({ repoId: 'r' }), scope({ repoId: 'r' }), c);
      const debate = engine.evaluateDebate(
        { negotiationId: 'n', proposalA: 'a', proposalB: 'b', intensity: 'high' },
        c,
      );
      await flush();
      assert.deepEqual(calls[1].args, { negotiation_id: 'n', proposal_a: 'a', proposal_b: 'b', intensity: 'high' });
      answer(0, { confidence_score: 7, notes: '' });
      answer(1, { notes: 'no score' });
      await rejectsWith(
        check,
        'unavailable',
        /^UNAVAILABLE: the inference engine failed: the scorer answered a confidence outside \[0, 1\]: 7$/,
      );
      await rejectsWith(debate, 'unavailable', /the scorer answered a confidence outside \[0, 1\]: undefined/);
      assert.deepEqual(
        h.events('reasoning.response').map((e) => [e.details.outcome, e.level]),
        [
          ['error', 'WARN'],
          ['error', 'WARN'],
        ],
      );
    });

    it('an engine error or no answer within the timeout (Clock) rejects UNAVAILABLE', async () => {
      const failing = engine.checkParallelism(scope({ repoId: 'r' }), scope({ repoId: 'r' }), c);
      const silent = engine.summarize({ sessionId: 's', segments: [], maxTokens: 0, mode: '' }, c);
      await flush();
      calls[0].reject(new ToolCallError('unavailable', 'AGENT_UNAVAILABLE', 'the engine left'));
      await rejectsWith(failing, 'unavailable', /AGENT_UNAVAILABLE: the engine left/);
      h.clock.advance(4_999);
      await flush();
      h.clock.advance(1);
      await rejectsWith(silent, 'unavailable', /no answer within 5000 ms/);
      assert.ok(calls[1].input.callId, 'each engine request has its own call id');
      assert.notEqual(calls[1].input.callId, calls[0].input.callId);
      assert.deepEqual(
        abandoned,
        [calls[1].input.callId],
        'the timed-out call is abandoned; the one that failed is not',
      );
    });

    it('a request that times out while its call is still queued (behind max_concurrency) is abandoned: it frees its place, the engine is not asked later', async () => {
      const inference = h.coordinator.inference;
      const tools = h.coordinator.tools;
      const checks = Array.from({ length: 9 }, () =>
        inference.checkParallelism(scope({ repoId: 'r' }), scope({ repoId: 'r' }), c),
      );
      checks.forEach((check) => check.catch(() => undefined));
      await flush();
      const started = h.events('tool.call.started').map((e) => String(e.details.call_id));
      assert.equal(started.length, 9);
      const outcomes = () => started.map((id) => tools.callRecord(id)?.outcome);
      assert.deepEqual(
        outcomes(),
        [...Array(8).fill('running'), 'queued'],
        'check_parallelism runs 8 at once (its max_concurrency)',
      );
      h.clock.advance(10_000);
      for (const check of checks) await rejectsWith(check, 'unavailable', /no answer within 10000 ms|TIMEOUT/);
      await flush();
      assert.equal(outcomes()[8], 'cancelled', 'the queued call is abandoned, not started once the slots free up');
      assert.ok(
        outcomes().every((o) => o !== 'running' && o !== 'queued'),
        String(outcomes()),
      );
    });

    it('dispose answers the requests under way UNAVAILABLE (the coordinator is stopping), so an RPC waiting on one gets its answer', async () => {
      const summary = engine.summarize({ sessionId: 's', segments: [], maxTokens: 0, mode: '' }, c);
      const check = engine.checkParallelism(scope({ repoId: 'r' }), scope({ repoId: 'r' }), c);
      await flush();
      assert.equal(calls.length, 2);
      engine.dispose();
      await rejectsWith(summary, 'unavailable', /^UNAVAILABLE: the coordinator is stopping$/);
      await rejectsWith(check, 'unavailable', /^UNAVAILABLE: the coordinator is stopping$/);
      await rejectsWith(
        engine.evaluateDebate({ negotiationId: 'n', proposalA: 'a', proposalB: 'b', intensity: '' }, c),
        'unavailable',
        /^UNAVAILABLE: the coordinator is stopping$/,
      );
      assert.equal(calls.length, 2, 'nothing is asked after dispose');
      h.clock.advance(10_000);
      assert.deepEqual(abandoned, [], 'their timers are gone');
    });

    it("summarize forwards the segments and answers the engine's summary, checked", async () => {
      const summary = engine.summarize(
        {
          sessionId: 's1',
          segments: [{ kind: 'message', content: 'hello', seq: 3, at: '2026-01-01T00:00:00Z' }],
          maxTokens: 0,
          mode: 'brief',
        },
        c,
      );
      const bad = engine.summarize({ sessionId: 's2', segments: [], maxTokens: 10, mode: '' }, c);
      await flush();
      assert.deepEqual(calls[0].args, {
        session_id: 's1',
        segments: [{ kind: 'message', content: 'hello', seq: 3, at: '2026-01-01T00:00:00Z' }],
        max_tokens: 0,
        mode: 'brief',
      });
      answer(0, { summary: 'they said hello', tokens: 4, cost_cents: 0.01, model: 'tiny' });
      answer(1, { summary: 42 });
      assert.deepEqual(await summary, { summary: 'they said hello', tokens: 4, costCents: 0.01, model: 'tiny' });
      await rejectsWith(bad, 'unavailable', /its summary is not text/);
    });

    it('an engine that is no longer online is not asked: the next one, then the built-in scorer', async () => {
      h.registry.deregister('engine-a', 'test', c);
      assert.equal(engine.engineAgent(), 'engine-b');
      h.registry.deregister('engine-b', 'test', c);
      assert.equal(engine.engineAgent(), undefined);
      const verdict = engine.check(scope({ repoId: 'r' }), scope({ repoId: 'r' }), c) as { notes: string };
      assert.ok(verdict.notes.startsWith(BUILT_IN_NOTE));
    });

    it('ReasoningProvider: the three tools with their schemas, available while an engine is online, calls forwarded to it', async () => {
      const forwarded: Array<[string, string, string]> = [];
      const transport: AgentToolTransport = {
        callAgent: async (agentId, providerId, request) => {
          forwarded.push([agentId, providerId, request.toolName]);
          return { confidence_score: 1 };
        },
        agentAvailable: () => true,
      };
      const provider = new ReasoningProvider(h.registry, () => transport);
      assert.equal(provider.id, 'reasoning');
      assert.deepEqual(
        provider.describe().map((t) => t.name),
        ['check_parallelism', 'evaluate_debate', 'summarize'],
      );
      for (const tool of provider.describe()) {
        assert.equal(tool.inputSchema.type, 'object');
        assert.ok(Array.isArray(tool.outputSchema.required), tool.name);
      }
      assert.equal(provider.available(), true);
      const request = { toolName: 'check_parallelism' } as ToolRequest;
      assert.deepEqual(await provider.call(request), { confidence_score: 1 });
      assert.deepEqual(forwarded, [['engine-a', 'reasoning', 'check_parallelism']]);
      h.registry.deregister('engine-a', 'test', c);
      h.registry.deregister('engine-b', 'test', c);
      assert.equal(provider.available(), false);
      await assert.rejects(provider.call(request), /AGENT_UNAVAILABLE|no inference engine registered/);
    });
  });
});
