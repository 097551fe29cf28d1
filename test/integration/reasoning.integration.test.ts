import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import type { CoordinatorHost } from '../../src/server/host';
import { BUILT_IN_NOTE, INFERENCE_ENGINE_CONNECTOR } from '../../src/core/reasoning/inferenceEngine';
import { bearer, CoordinatorClients, expectStatus, serviceClient, unary, type ServiceClient } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { RouterClient, type Inbox } from '../support/routerClient';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface Verdict {
  confidence_score: number;
  notes: string;
}
interface Summary {
  summary: string;
  tokens: number;
  cost_cents: number;
  model: string;
}
type Client = ServiceClient;

/**
 * ReasoningProxy over real gRPC (RFC §9.3): without an inference engine agent, the built-in deterministic scorers (the
 * scheduler's gate uses the same) and Summarize FAILED_PRECONDITION; with one (an agent declaring the connector
 * sw4rm://reasoning/tools, answering TOOL_CALL envelopes with TOOL_RESULT), its answers, checked.
 */
describe('ReasoningProxy over real gRPC', function () {
  this.timeout(60_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let client: Client;
  let agentToken: string;

  const check = (scopeA: string, scopeB: string, token = host.token!) =>
    unary<Verdict>(client, 'CheckParallelism', { scope_a: scopeA, scope_b: scopeB }, bearer(token));

  before(async () => {
    dataDir = makeTempDir('sw4rm-int-reasoning-');
    host = await startHost(dataDir);
    client = serviceClient(`127.0.0.1:${host.port}`, 'sw4rm.reasoning.ReasoningProxy');
    const operator = new CoordinatorClients(`127.0.0.1:${host.port}`, host.token);
    assert.equal((await operator.registerAgent(descriptorMessage('planner'))).accepted, true);
    operator.close();
    agentToken = host.coordinator.credentials.mintAgent('planner', 'test', 'reasoning tests', {
      correlationId: 'test',
    }).token;
  });

  after(async () => {
    client?.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  it("answers the scorer's table: no overlap 1.0, the same files 0.2, a shared resource 0.1, the same worktree 0.3, overlapping globs 0.4–0.6", async () => {
    assert.deepEqual(await check('repo:myrepo/src/**', 'repo:myrepo/docs/**'), {
      confidence_score: 1,
      notes: `${BUILT_IN_NOTE}no overlap: different repositories, worktrees, paths and resources`,
    });
    assert.equal(
      (await check('repo:myrepo/path', 'repo:myrepo/path')).confidence_score,
      0.2,
      'the reference SDK example, twice',
    );
    assert.equal((await check('repo:a resource:db', 'repo:b, resource:db')).confidence_score, 0.1);
    assert.equal((await check('repo:r worktree:w', '{"repo_id":"r","worktree_id":"w"}')).confidence_score, 0.3);
    const globs = await check('repo:r/src/**', '{"repo_id":"r","paths":["src/lib/**"]}');
    assert.equal(globs.confidence_score, 0.45);
    assert.match(globs.notes, /'src\/\*\*' and 'src\/lib\/\*\*' may share paths/);
  });

  it('is deterministic, and an agent credential may ask too', async () => {
    const first = await check('repo:r/src/*.ts', 'repo:r/src/a.ts');
    assert.deepEqual(await check('repo:r/src/*.ts', 'repo:r/src/a.ts', agentToken), first);
    assert.equal(first.confidence_score, 0.4);
  });

  it('refuses a missing or unreadable scope as INVALID_ARGUMENT naming which one', async () => {
    const missing = await expectStatus(check('', 'repo:r'), grpc.status.INVALID_ARGUMENT);
    assert.match(missing.details, /^VALIDATION_ERROR: scope_a: scope is required/);
    const bad = await expectStatus(check('repo:r', 'folder:x'), grpc.status.INVALID_ARGUMENT);
    assert.match(bad.details, /^VALIDATION_ERROR: scope_b: scope token "folder:x"/);
  });

  it('refuses a call without a credential', async () => {
    await expectStatus(
      unary(client, 'CheckParallelism', { scope_a: 'repo:r', scope_b: 'repo:r' }, new grpc.Metadata()),
      grpc.status.UNAUTHENTICATED,
    );
    await expectStatus(
      unary(client, 'Summarize', { session_id: 's' }, new grpc.Metadata()),
      grpc.status.UNAUTHENTICATED,
    );
  });

  it('without an inference engine: EvaluateDebate answers the built-in debate scorer, marked in notes', async () => {
    const debate = await unary<Verdict>(
      client,
      'EvaluateDebate',
      {
        negotiation_id: 'n1',
        proposal_a: '{"plan":"a","owner":"x"}',
        proposal_b: '{"owner":"y","plan":"a"}',
        intensity: 'high',
      },
      bearer(agentToken),
    );
    assert.equal(debate.confidence_score, 0.5);
    assert.ok(debate.notes.startsWith(`${BUILT_IN_NOTE}structural JSON comparison: 1 of 2 paths equal`), debate.notes);
    assert.equal(
      (
        await unary<Verdict>(
          client,
          'EvaluateDebate',
          { negotiation_id: 'n1', proposal_a: 'ship it', proposal_b: 'ship it' },
          bearer(host.token!),
        )
      ).confidence_score,
      1,
    );
  });

  it('without an inference engine: Summarize is FAILED_PRECONDITION, never a made-up summary; bad input INVALID_ARGUMENT', async () => {
    const refused = await expectStatus(
      unary(
        client,
        'Summarize',
        { session_id: 's', segments: [{ kind: 'message', content: 'hi', seq: 1 }] },
        bearer(host.token!),
      ),
      grpc.status.FAILED_PRECONDITION,
    );
    assert.equal(refused.details, 'FAILED_PRECONDITION: no inference engine registered');
    const many = Array.from({ length: 1001 }, (_, i) => ({ kind: 'message', content: 'x', seq: i }));
    const tooMany = await expectStatus(
      unary(client, 'Summarize', { session_id: 's', segments: many }, bearer(host.token!)),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(tooMany.details, /^VALIDATION_ERROR: more than 1000 segments/);
    const big = await expectStatus(
      unary(
        client,
        'EvaluateDebate',
        { negotiation_id: 'n', proposal_a: 'x'.repeat(1024 * 1024 + 1) },
        bearer(host.token!),
      ),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(big.details, /^VALIDATION_ERROR: proposal_a is larger than 1048576 bytes/);
  });

  describe('with an inference engine agent (TOOL_CALL envelopes of provider reasoning)', () => {
    let engine: RouterClient;
    let inbox: Inbox;
    let calls: Array<Record<string, unknown>>;
    /** What the engine answers per tool: a JSON result, or undefined to stay silent. */
    let answers: Record<string, unknown>;

    before(async () => {
      const operator = new CoordinatorClients(`127.0.0.1:${host.port}`, host.token);
      assert.equal(
        (
          await operator.registerAgent(
            descriptorMessage('inference-engine', { reasoning_connectors: [INFERENCE_ENGINE_CONNECTOR] }),
          )
        ).accepted,
        true,
      );
      operator.close();
      engine = new RouterClient(`127.0.0.1:${host.port}`, host.token, 'inference-engine');
      inbox = engine.openInbox();
      calls = [];
      inbox.onItem((item) => {
        if (item.msg.message_type !== 'TOOL_CALL') return;
        const call = JSON.parse(item.msg.payload.toString('utf8')) as Record<string, unknown>;
        calls.push(call);
        void engine.ack(item.msg.message_id, 'RECEIVED');
        const result = answers[call.tool_name as string];
        if (result === undefined) return;
        void engine.send(
          engine.envelope({
            message_type: 'TOOL_RESULT',
            content_type: 'application/json',
            correlation_id: call.call_id as string,
            payload: { call_id: call.call_id, frame_no: 0, final: true, content_type: 'application/json', result },
          }),
          { to: 'coordinator' },
        );
      });
    });

    after(() => {
      inbox?.close();
      engine?.close();
    });

    it('CheckParallelism, EvaluateDebate and Summarize are answered by the engine', async () => {
      answers = {
        check_parallelism: { confidence_score: 0.9, notes: 'engine: disjoint modules' },
        evaluate_debate: { confidence_score: 0.3, notes: 'engine: far apart' },
        summarize: { summary: 'two agents agreed on a plan', tokens: 6, cost_cents: 0.02, model: 'test-model' },
      };
      assert.deepEqual(await check('repo:r/src/**', 'repo:r/src/**'), {
        confidence_score: 0.9,
        notes: 'engine: disjoint modules',
      });
      const call = calls.find((c) => c.tool_name === 'check_parallelism')!;
      assert.equal(call.provider_id, 'reasoning');
      assert.equal(call.caller_agent_id, 'coordinator');
      assert.deepEqual(JSON.parse((call.args as { scope_a: string }).scope_a), {
        repo_id: 'r',
        worktree_id: '',
        paths: ['src/**'],
        resources: [],
      });
      assert.deepEqual(
        await unary<Verdict>(
          client,
          'EvaluateDebate',
          { negotiation_id: 'n', proposal_a: 'a', proposal_b: 'b' },
          bearer(host.token!),
        ),
        { confidence_score: 0.3, notes: 'engine: far apart' },
      );
      assert.deepEqual(
        await unary<Summary>(
          client,
          'Summarize',
          { session_id: 's', segments: [{ kind: 'message', content: 'hello', seq: 1 }], max_tokens: 0 },
          bearer(host.token!),
        ),
        { summary: 'two agents agreed on a plan', tokens: 6, cost_cents: 0.02, model: 'test-model' },
      );
      assert.ok(
        host.coordinator.log
          .query({ eventType: 'reasoning.response', limit: 10 })
          .some((e) => e.details.engine_id === 'inference-engine' && e.details.outcome === 'ok'),
      );
    });

    it('an agent may call the reasoning tools itself through ToolService.Call; the engine sees it as the caller', async () => {
      answers = { summarize: { summary: 'asked by an agent', tokens: 3, cost_cents: 0, model: 'test-model' } };
      const tools = serviceClient(`127.0.0.1:${host.port}`, 'sw4rm.tool.ToolService');
      try {
        const frame = await unary<{ final: boolean; data: Buffer }>(
          tools,
          'Call',
          {
            provider_id: 'reasoning',
            tool_name: 'summarize',
            content_type: 'application/json',
            args: Buffer.from(JSON.stringify({ session_id: 's', segments: [] })),
          },
          bearer(agentToken),
        );
        assert.equal(frame.final, true);
        assert.deepEqual(JSON.parse(frame.data.toString('utf8')), {
          summary: 'asked by an agent',
          tokens: 3,
          cost_cents: 0,
          model: 'test-model',
        });
        assert.equal(calls.at(-1)!.caller_agent_id, 'planner');
      } finally {
        tools.close();
      }
    });

    it('an engine answering a confidence of 7 is treated as failed: UNAVAILABLE', async () => {
      answers = {
        check_parallelism: { confidence_score: 7, notes: '' },
        evaluate_debate: { confidence_score: 7, notes: '' },
      };
      const refused = await expectStatus(check('repo:r', 'repo:r'), grpc.status.UNAVAILABLE);
      assert.match(refused.details, /^UNAVAILABLE: the inference engine failed: /);
      await expectStatus(
        unary(client, 'EvaluateDebate', { negotiation_id: 'n', proposal_a: 'a', proposal_b: 'b' }, bearer(host.token!)),
        grpc.status.UNAVAILABLE,
      );
    });
  });
});
