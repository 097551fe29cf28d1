import { strict as assert } from 'node:assert';
import { DEFAULT_HITL_POLICY, DEFAULT_FALLBACK, type HitlPolicy } from '../../src/core/hitl/policy';
import { REASON_TYPES } from '../../src/core/hitl/model';
import { MIN_DEBATE_TIMEOUT_MS } from '../../src/core/policy/defaults';
import { hitlActionFor } from '../../src/server/services/schedulerPolicyService';
import {
  HITL_DIFF_MAX_BYTES,
  MAX_OPEN_PER_OPENER,
  Negotiations,
  VALIDATOR_CACHE_SIZE,
} from '../../src/core/negotiation/negotiations';
import {
  NegotiationHarness,
  OPERATOR,
  agentSpeaker,
  ctx,
  refused,
  settle,
  testPolicy,
} from '../support/negotiationHarness';

const A = 'agent-a';
const B = 'agent-b';
const C = 'agent-c';

function withDeadlockFallback(policy: 'DENY_BY_DEFAULT' | 'AUTO_DECIDE_THRESHOLD', threshold = 0.5): HitlPolicy {
  const fallbacks = Object.fromEntries(REASON_TYPES.map((r) => [r, DEFAULT_FALLBACK])) as HitlPolicy['fallbacks'];
  return {
    ...DEFAULT_HITL_POLICY,
    fallbacks: { ...fallbacks, DEBATE_DEADLOCK: { ...DEFAULT_FALLBACK, policy, threshold } },
  };
}

describe('negotiation: debates (RFC §17–§17.4)', function () {
  this.timeout(20_000);
  let h: NegotiationHarness;

  const setup = (hitl?: HitlPolicy) => {
    h = new NegotiationHarness(hitl);
    h.agent(A);
    h.agent(B);
    h.agent(C);
  };

  afterEach(() => h?.dispose());

  describe('Open', () => {
    beforeEach(() => {
      setup();
      h.usePolicy(testPolicy());
    });

    it('persists the effective policy and fans out open then policy to every participant, correlation_id = negotiation_id', () => {
      const rec = h.openN('n1', [A, B]);
      assert.equal(rec.state, 'open');
      assert.equal(rec.effective.profile, 'TEST');
      assert.equal(h.negotiations.effectivePolicy('n1')?.policy.maxRounds, 3);
      for (const agent of [A, B]) {
        const events = h.received(agent);
        assert.deepEqual(
          events.map((e) => e.json.kind),
          ['open', 'policy'],
        );
        for (const e of events) {
          assert.equal(e.correlationId, 'n1');
          assert.equal(e.producerId, 'coordinator');
          assert.match(String(e.json.ts), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
        }
        assert.deepEqual(
          { topic: events[0].json.topic, corr: events[0].json.corr },
          { topic: 'topic of n1', corr: 'n1' },
        );
        assert.equal(events[1].json.negotiation_id, 'n1');
        assert.equal(events[1].json.profile, 'TEST');
        assert.deepEqual(events[1].json.policy, {
          max_rounds: 3,
          score_threshold: 0.7,
          diff_tolerance: 0.1,
          round_timeout_ms: 60_000,
          token_budget_per_round: 8_000,
          total_token_budget: 48_000,
          oscillation_limit: 2,
          hitl: { mode: 'None' },
          scoring: { require_schema_valid: true, require_examples_pass: false, llm_weight: 0 },
        });
      }
      assert.deepEqual(h.received(C), [], 'a non-participant hears nothing');
      assert.equal(h.events('negotiation.opened').length, 1);
      assert.equal(h.events('negotiation.opened')[0].correlationId, 'n1');
    });

    it('refuses bad opens with their codes; the same Open again is idempotent, another one ALREADY_EXISTS', () => {
      refused(() => h.openN('x', [A]), 'invalid', 'VALIDATION_ERROR', /two distinct/);
      refused(() => h.openN('x', [A, A]), 'invalid', 'VALIDATION_ERROR', /twice/);
      refused(() => h.openN('x', [A, 'ghost']), 'not_found', 'NO_ROUTE', /ghost/);
      refused(() => h.openN('x', [A, B], { correlationId: 'other' }), 'invalid', 'VALIDATION_ERROR', /correlation_id/);
      refused(() => h.openN('x', [A, B], { topic: '' }), 'invalid', 'VALIDATION_ERROR', /topic/);
      refused(() => h.openN('x', [A, B], {}, agentSpeaker(C)), 'permission', 'PERMISSION_DENIED', /takes no part/);
      refused(() => h.openN('x', [A, B], { schema: '{"type": 12}' }), 'invalid', 'VALIDATION_ERROR', /JSON Schema/);
      assert.equal(h.negotiations.get('x'), undefined, 'nothing of a refused Open is kept');
      h.openN('n2', [A, B], {}, agentSpeaker(A));
      h.openN('n2', [A, B], {}, agentSpeaker(A));
      assert.deepEqual(h.kinds(B), ['open', 'policy'], 'a repeated Open sends nothing again');
      refused(() => h.openN('n2', [A, C]), 'exists', 'ALREADY_EXISTS');
      refused(() => h.openN('n2', [A, B], { debateTimeoutMs: 60_000 }), 'exists', 'ALREADY_EXISTS');
    });

    it("preferences: an agent states only its own, nobody a non-participant's; the operator any participant's", () => {
      refused(
        () => h.openN('x', [A, B], { preferences: { [C]: { maxRounds: 2 } } }),
        'invalid',
        'VALIDATION_ERROR',
        /^preferences\.agent-c: 'agent-c' is not a participant/,
      );
      refused(
        () => h.openN('x', [A, B], { preferences: { [A]: { maxRounds: 2 }, [B]: { maxRounds: 1 } } }, agentSpeaker(A)),
        'permission',
        'PERMISSION_DENIED',
        /^preferences\.agent-b: agent:agent-a may not state preferences for agent-b$/,
      );
      assert.equal(h.negotiations.get('x'), undefined);
      assert.deepEqual(
        Object.keys(
          h.openN('own', [A, B], { preferences: { [A]: { maxRounds: 2 } } }, agentSpeaker(A)).effective.applied,
        ),
        [A],
      );
      assert.deepEqual(
        Object.keys(
          h.openN('both', [A, B], { preferences: { [A]: { maxRounds: 2 }, [B]: { maxRounds: 1 } } }).effective.applied,
        ),
        [A, B],
      );
    });

    it('records the profile that applied ("" for the base policy), and looks up the topic\'s policy schema on every Open', () => {
      const policies = h.coordinator.policies;
      const original = policies.schemaFor.bind(policies);
      let lookups = 0;
      policies.schemaFor = (topic: string) => {
        lookups++;
        return original(topic);
      };
      assert.equal(
        h.openN('base', [A, B], { intensity: '', profileHint: '' }).intensity,
        '',
        'no intensity, no hint: the base policy',
      );
      assert.equal(h.openN('high', [A, B], { intensity: 'HIGH', profileHint: '' }).intensity, 'HIGH');
      assert.equal(h.openN('hinted', [A, B], { intensity: 'LOW' }).intensity, 'TEST', "the hint's profile");
      const rows = new Map(h.negotiations.list().map((r) => [r.id, r.intensity]));
      assert.deepEqual([rows.get('base'), rows.get('high'), rows.get('hinted')], ['', 'HIGH', 'TEST']);
      assert.equal(lookups, 3);
      h.openN('own-schema', [A, B], { schema: '{"type":"object"}' });
      assert.equal(lookups, 4, "Open's own schema does not replace the policy's: the topic is looked up too");
    });
  });

  describe('rounds, evaluations, acceptance', () => {
    beforeEach(() => {
      setup();
      h.usePolicy(testPolicy());
    });

    it('Propose → Counter → Evaluate → consensus: every event to every participant in order, bytes exact, artifacts and reports', () => {
      h.openN('n', [A, B, C]);
      const v1 = Buffer.from('{"price": 10, "days": 30}');
      const v2 = Buffer.from('{"price": 12,\n "days": 30}');
      const r1 = h.propose('n', A, v1);
      assert.equal(r1.n, 1);
      assert.equal(r1.delta.method, 'none');
      const r2 = h.counter('n', B, v2);
      assert.equal(r2.n, 2);
      assert.deepEqual(r2.delta.changedPaths, ['/price']);
      assert.equal(r2.delta.magnitude, 0.5);
      h.evaluate('n', A, 0.9, 'fine');
      assert.equal(h.stateOf('n'), 'open', 'one of two evaluators is not unanimity');
      h.evaluate('n', C, 0.7, 'ok');
      const rec = h.negotiations.get('n');
      assert.equal(rec?.state, 'decided');
      assert.equal(rec?.decision?.decidedBy, 'consensus');
      assert.equal(rec?.decision?.round, 2);
      assert.equal(rec?.decision?.stopReason, 'threshold_met');
      assert.ok(Math.abs((rec?.decision?.finalScore ?? 0) - 0.8) < 1e-9);
      assert.equal(rec?.decision?.policyVersion, rec?.effective.policyVersion);
      assert.ok(rec?.decision?.result.equals(v2));
      for (const agent of [A, B, C]) {
        const events = h.received(agent);
        assert.deepEqual(
          events.map((e) => e.json.kind),
          ['open', 'policy', 'propose', 'counter', 'evaluate', 'evaluate', 'decide'],
        );
        assert.deepEqual(
          events.map((e) => e.json.seq),
          [1, 2, 3, 4, 5, 6, 7],
        );
        assert.ok(Buffer.from(String(events[2].json.payload_b64), 'base64').equals(v1));
        assert.ok(Buffer.from(String(events[3].json.payload_b64), 'base64').equals(v2));
        assert.deepEqual([events[3].json.from, events[3].json.ct], [B, 'application/json']);
        assert.deepEqual([events[4].json.from, events[4].json.score, events[4].json.notes], [A, 0.9, 'fine']);
        assert.equal(events[6].json.by, 'consensus');
        assert.ok(Buffer.from(String(events[6].json.result_b64), 'base64').equals(v2));
        assert.ok(events.every((e) => e.correlationId === 'n'));
      }
      const artifacts = h.coordinator.activity.listArtifacts('n', '');
      assert.deepEqual(
        artifacts.map((a) => `${a.kind}:${a.version}`),
        ['contract:v1', 'contract:v2', 'diff:v1_to_v2', 'score:v2:agent-a', 'score:v2:agent-c', 'decision:final'],
      );
      assert.ok(artifacts[1].content.equals(v2));
      const diff = JSON.parse(artifacts[2].content.toString()) as Record<string, unknown>;
      assert.deepEqual(diff.changed_paths, ['/price']);
      const report = JSON.parse(artifacts[5].content.toString()) as Record<string, unknown>;
      assert.deepEqual(
        [report.decided_by, report.stop_reason, report.policy_version],
        ['consensus', 'threshold_met', rec?.effective.policyVersion],
      );
      assert.deepEqual(
        ['negotiation.opened', 'negotiation.round', 'negotiation.evaluated', 'negotiation.decided'].map(
          (t) => h.events(t).length,
        ),
        [1, 2, 2, 1],
      );
      refused(() => h.counter('n', A, { price: 1 }), 'precondition', 'NEGOTIATION_CLOSED');
      assert.equal(h.negotiations.list()[0].id, 'n');
      assert.equal(h.negotiations.detail('n')?.rounds.length, 2);
    });

    it('only participants speak, only as themselves; round 1 is the Propose, later rounds Counter; a retried Propose is the same round', () => {
      h.openN('n', [A, B]);
      refused(() => h.propose('n', C, { x: 1 }), 'permission', 'PERMISSION_DENIED', /not a participant/);
      refused(
        () => h.negotiations.propose(h.proposal('n', A, { x: 1 }), agentSpeaker(B), ctx()),
        'permission',
        'PERMISSION_DENIED',
        /may not act as agent-a/,
      );
      refused(() => h.counter('n', A, { x: 1 }), 'precondition', 'OUT_OF_ORDER', /Propose/);
      refused(() => h.evaluate('n', B, 0.5), 'precondition', 'OUT_OF_ORDER');
      h.propose('n', A, { x: 1 });
      h.propose('n', A, { x: 1 });
      assert.equal(h.negotiations.get('n')?.rounds, 1);
      refused(() => h.propose('n', B, { x: 2 }), 'precondition', 'OUT_OF_ORDER', /Counter/);
      refused(() => h.evaluate('n', A, 0.5), 'precondition', 'OUT_OF_ORDER', /wrote round 1/);
      refused(() => h.evaluate('n', B, 1.5), 'invalid', 'VALIDATION_ERROR');
      h.evaluate('n', B, 0.2);
      refused(() => h.evaluate('n', B, 0.3), 'exists', 'ALREADY_EXISTS');
      refused(() => h.negotiations.abort('n', 'no', agentSpeaker(C), ctx()), 'permission', 'PERMISSION_DENIED');
      assert.deepEqual(h.kinds(A), ['open', 'policy', 'propose', 'evaluate']);
    });

    it('an invalid draft is refused VALIDATION_ERROR with its path and consumes no round; the next valid one is round 1', () => {
      const schema = JSON.stringify({ type: 'object', properties: { price: { type: 'number' } }, required: ['price'] });
      h.openN('n', [A, B], { schema });
      const message = refused(() => h.propose('n', A, { price: 'ten' }), 'invalid', 'VALIDATION_ERROR', /\/price/);
      assert.match(message, /no round was used/);
      refused(
        () => h.propose('n', A, '{"price": ', 'application/json'),
        'invalid',
        'VALIDATION_ERROR',
        /not valid JSON/,
      );
      refused(() => h.propose('n', A, 'price: 10', 'text/plain'), 'invalid', 'VALIDATION_ERROR', /application\/json/);
      assert.equal(h.negotiations.get('n')?.rounds, 0);
      assert.equal(h.negotiations.get('n')?.tokensUsed, 0);
      assert.deepEqual(h.kinds(B), ['open', 'policy']);
      assert.equal(h.coordinator.activity.listArtifacts('n', '').length, 0);
      assert.equal(h.propose('n', A, { price: 10 }).n, 1);
    });

    it("the policy's proposal schema for the topic applies when Open gives none", () => {
      h.usePolicy(testPolicy(), {
        proposalSchemas: [
          {
            topic: 'contract-*',
            schema: JSON.stringify({ type: 'object', properties: { sla: { type: 'string' } }, required: ['sla'] }),
          },
        ],
      });
      h.openN('c', [A, B], { topic: 'contract-hosting' });
      assert.notEqual(h.negotiations.get('c')?.schema, '');
      refused(() => h.propose('c', A, { price: 1 }), 'invalid', 'VALIDATION_ERROR', /sla/);
      assert.equal(h.propose('c', A, { sla: '99.9' }).n, 1);
      h.openN('o', [A, B], { topic: 'other' });
      assert.equal(h.propose('o', A, { price: 1 }).n, 1, 'no schema for this topic');
    });

    it('a payload over token_budget_per_round is refused without using a round', () => {
      h.usePolicy(testPolicy({ tokenBudgetPerRound: 256 }));
      h.openN('n', [A, B]);
      refused(
        () => h.propose('n', A, { text: 'x'.repeat(2000) }),
        'exhausted',
        'TOKEN_BUDGET_EXCEEDED',
        /no round was used/,
      );
      assert.equal(h.negotiations.get('n')?.rounds, 0);
      assert.equal(h.propose('n', A, { text: 'short' }).n, 1);
    });

    it("submitEvaluation (SchedulerPolicyService): a report counts as the evaluation; its llm_confidence is the blend's inference part without an engine", () => {
      h.usePolicy(testPolicy({ scoring: { requireSchemaValid: true, requireExamplesPass: false, llmWeight: 0.5 } }));
      h.openN('n', [A, B]);
      assert.deepEqual(
        h.negotiations.submitEvaluation(
          'n',
          { fromAgent: B, deterministicScore: 0.5, llmConfidence: 0, notes: '' },
          agentSpeaker(B),
          ctx(),
        ).accepted,
        false,
        'nothing to evaluate yet',
      );
      h.propose('n', A, { v: 1 });
      const lying = h.negotiations.submitEvaluation(
        'n',
        { fromAgent: B, deterministicScore: 0.5, llmConfidence: 1, notes: '' },
        agentSpeaker(A),
        ctx(),
      );
      assert.equal(lying.accepted, false);
      assert.match(lying.reason, /^PERMISSION_DENIED: /);
      assert.equal(
        h.negotiations
          .submitEvaluation(
            'n',
            { fromAgent: B, deterministicScore: 1.5, llmConfidence: 0, notes: '' },
            agentSpeaker(B),
            ctx(),
          )
          .reason.split(':')[0],
        'VALIDATION_ERROR',
      );
      assert.deepEqual(
        h.negotiations.submitEvaluation(
          'n',
          { fromAgent: B, deterministicScore: 0.8, llmConfidence: 0.4, notes: 'report' },
          agentSpeaker(B),
          ctx(),
        ),
        { accepted: true, reason: '' },
      );
      const round = h.negotiations.detail('n')?.rounds[0];
      assert.deepEqual(
        [round?.deterministicScore, round?.llmConfidence, round?.score, round?.evaluations[0].source],
        [0.8, 0.4, 0.6000000000000001, 'report'],
      );
      assert.equal(h.stateOf('n'), 'open', 'B is at 0.8, but the blend 0.6 is below 0.7');
      h.counter('n', B, { v: 2 });
      h.negotiations.submitEvaluation(
        'n',
        { fromAgent: A, deterministicScore: 0.7, llmConfidence: 1, notes: '' },
        agentSpeaker(A),
        ctx(),
      );
      assert.equal(h.negotiations.detail('n')?.rounds[1].score, 0.85);
      assert.equal(h.stateOf('n'), 'decided', 'A at 0.7 and the blend 0.85: both ≥ 0.7');
      assert.equal(h.received(A).at(-2)?.json.kind, 'evaluate');
      assert.deepEqual(h.negotiations.hitlAction('n', 'approve', 'x', OPERATOR, ctx()).ok, false);
      assert.deepEqual(
        h.negotiations.hitlAction('nope', 'approve', 'x', OPERATOR, ctx()).reason.split(':')[0],
        'NOT_FOUND',
      );
    });

    it('a retried call that itself ended or paused the debate is answered OK: the accepting Evaluate, the Counter that tripped the budget', () => {
      h.openN('n', [A, B]);
      h.propose('n', A, { v: 1 });
      h.evaluate('n', B, 0.9, 'yes');
      assert.equal(h.stateOf('n'), 'decided');
      const events = h.received(A).length;
      h.evaluate('n', B, 0.9, 'yes');
      assert.equal(h.received(A).length, events, 'the retry sends nothing');
      refused(() => h.evaluate('n', B, 0.8, 'yes'), 'precondition', 'NEGOTIATION_CLOSED');
      refused(() => h.evaluate('n', A, 0.9, 'yes'), 'precondition', 'NEGOTIATION_CLOSED');

      h.usePolicy(testPolicy({ totalTokenBudget: 1_024, tokenBudgetPerRound: 1_000 }), { tieBreak: 'abort' });
      h.openN('b', [A, B]);
      const big = { text: 'x'.repeat(3_000) };
      h.propose('b', A, { text: 'y'.repeat(3_000) });
      const r2 = h.counter('b', B, big);
      assert.equal(h.stateOf('b'), 'aborted', 'the Counter crossed total_token_budget');
      assert.equal(h.negotiations.get('b')?.stopReason, 'budget');
      assert.deepEqual(h.counter('b', B, big), r2, 'the retried Counter gets its round');
      assert.equal(h.negotiations.get('b')?.rounds, 2);
      refused(() => h.counter('b', A, big), 'precondition', 'NEGOTIATION_CLOSED');
      refused(() => h.counter('b', B, { text: 'other' }), 'precondition', 'NEGOTIATION_CLOSED');
    });

    it("the opener's sw4rm-proposal-schema does not replace the policy's schema for the topic: a draft must satisfy both", () => {
      h.usePolicy(testPolicy(), {
        proposalSchemas: [
          {
            topic: 'api/**',
            schema: '{"type":"object","properties":{"endpoint":{"type":"string"}},"required":["endpoint"]}',
          },
        ],
      });
      h.openN(
        'n',
        [A, B],
        {
          topic: 'api/users',
          schema: '{"type":"object","properties":{"price":{"type":"number"}},"required":["price"]}',
        },
        agentSpeaker(A),
      );
      refused(
        () => h.propose('n', A, { price: 1 }),
        'invalid',
        'VALIDATION_ERROR',
        /policy's proposal schema for the topic/,
      );
      refused(
        () => h.propose('n', A, { endpoint: '/x', price: 'high' }),
        'invalid',
        'VALIDATION_ERROR',
        /the proposal schema at \/price/,
      );
      assert.equal(h.propose('n', A, { endpoint: '/x', price: 1 }).n, 1);
    });

    it('acceptance is unanimous: a dissenter below the threshold is not outvoted by the mean', () => {
      h.usePolicy(testPolicy({ scoreThreshold: 0.5 }));
      h.openN('n', [A, B, C]);
      h.propose('n', A, { v: 1 });
      h.evaluate('n', B, 1);
      h.evaluate('n', C, 0.2);
      const round = h.negotiations.detail('n')?.rounds[0];
      assert.ok(Math.abs((round?.score ?? 0) - 0.6) < 1e-9, 'the mean 0.6 is above 0.5');
      assert.equal(h.stateOf('n'), 'open', 'but agent-c is below it: no consensus');
      h.counter('n', C, { v: 2 });
      h.evaluate('n', A, 0.5);
      h.evaluate('n', B, 0.9);
      assert.equal(h.negotiations.get('n')?.decision?.round, 2, 'everyone at or above the threshold: accepted');
    });

    it('text proposals get a line DeltaSummary', () => {
      h.openN('n', [A, B]);
      h.propose('n', A, 'alpha\nbeta\n', 'text/plain');
      const r2 = h.counter('n', B, 'alpha\nBETA\n', 'text/plain');
      assert.equal(r2.delta.method, 'text');
      assert.deepEqual(r2.delta.changedPaths, ['/lines/2']);
      assert.equal(r2.delta.magnitude, 0.5, 'one modified line of two');
    });
  });

  describe('stops and the tie-break', () => {
    it('max_rounds without acceptance → a DEBATE_DEADLOCK invocation; approve accepts the best-scored round (decided_by hitl)', async () => {
      setup();
      h.usePolicy(testPolicy({ maxRounds: 2 }));
      h.coordinator.hitl.attachOperator('tester');
      h.openN('n', [A, B]);
      h.propose('n', A, { v: 1 });
      h.evaluate('n', B, 0.6);
      h.counter('n', B, { v: 2 });
      h.evaluate('n', A, 0.4);
      const rec = h.negotiations.get('n');
      assert.equal(rec?.state, 'paused');
      assert.equal(rec?.pending?.why, 'deadlock');
      assert.equal(rec?.stopReason, 'max_rounds');
      const invocation = h.coordinator.hitl.get(rec?.pending?.invocationId ?? '');
      assert.equal(invocation?.reasonType, 'DEBATE_DEADLOCK');
      assert.deepEqual(invocation?.proposedActions, ['approve', 'modify', 'deny']);
      assert.equal(invocation?.correlationId, 'n');
      assert.equal(invocation?.context.score, 0.6);
      assert.equal((invocation?.context.facts as Record<string, unknown>).best_round, 1);
      assert.deepEqual(invocation?.origin, { kind: 'internal', component: 'negotiation' });
      refused(() => h.counter('n', A, { v: 3 }), 'precondition', 'NEGOTIATION_PAUSED');
      assert.equal(h.negotiations.list()[0].pendingInvocationId, invocation?.id);
      const answer = h.negotiations.hitlAction('n', 'approve', 'round 1 is good enough', OPERATOR, ctx());
      assert.deepEqual(answer, { ok: true, reason: '' });
      await settle();
      const done = h.negotiations.get('n');
      assert.equal(done?.state, 'decided');
      assert.deepEqual(
        [done?.decision?.decidedBy, done?.decision?.round, done?.decision?.stopReason, done?.decision?.fallback],
        ['hitl', 1, 'max_rounds', null],
      );
      assert.deepEqual(h.kinds(A).slice(-1), ['decide']);
      assert.deepEqual(h.negotiations.hitlAction('n', 'approve', 'again', OPERATOR, ctx()).ok, false);
    });

    it('a large counter-proposal is diffed coarsely, and the HITL diff carries no large JSON (the webview diffs it)', () => {
      setup();
      h.usePolicy(testPolicy({ maxRounds: 2 }));
      h.coordinator.hitl.attachOperator('tester');
      h.openN('big', [A, B]);
      h.propose('big', A, { items: Array.from({ length: 3_000 }, (_, i) => i) });
      h.evaluate('big', B, 0.2);
      const r2 = h.counter('big', B, { items: Array.from({ length: 3_000 }, (_, i) => -i) });
      assert.equal(r2.delta.method, 'json-coarse');
      assert.deepEqual(r2.delta.changedPaths, ['/']);
      h.evaluate('big', A, 0.1);
      const invocation = h.coordinator.hitl.get(h.negotiations.get('big')?.pending?.invocationId ?? '');
      const diffs = invocation?.context.diffs ?? [];
      assert.equal(diffs.length, 1);
      assert.equal(diffs[0].beforeJson, undefined);
      assert.equal(diffs[0].afterJson, undefined);
      assert.match(diffs[0].title, /too large to show here/);
      assert.ok(Buffer.byteLength(JSON.stringify(diffs)) < HITL_DIFF_MAX_BYTES);
      const artifact = h.coordinator.activity.listArtifacts('big', '').find((a) => a.kind === 'diff');
      assert.equal(JSON.parse(artifact?.content.toString() ?? '{}').method, 'json-coarse');
    });

    it("HITL modify decides with the person's payload; deny aborts", async () => {
      setup();
      h.usePolicy(testPolicy({ maxRounds: 1 }));
      h.coordinator.hitl.attachOperator('tester');
      h.openN('m', [A, B]);
      h.propose('m', A, { v: 1 });
      h.evaluate('m', B, 0.1);
      const id = h.negotiations.get('m')?.pending?.invocationId ?? '';
      h.coordinator.hitl.decide(
        id,
        { action: 'modify', rationale: 'split the difference', payload: { v: 1.5 } },
        'tester',
        ctx(),
      );
      await settle();
      const m = h.negotiations.get('m');
      assert.deepEqual(
        [m?.state, m?.decision?.decidedBy, m?.decision?.round, m?.decision?.result.toString()],
        ['decided', 'hitl', 0, '{"v":1.5}'],
      );
      const decide = h.received(B).at(-1)?.json;
      assert.equal(Buffer.from(String(decide?.result_b64), 'base64').toString(), '{"v":1.5}');

      h.openN('d', [A, B]);
      h.propose('d', A, { v: 1 });
      h.evaluate('d', B, 0.1);
      assert.equal(
        h.negotiations.hitlAction('d', 'deny', 'no', agentSpeaker(A), ctx()).ok,
        false,
        'an agent is not the person',
      );
      assert.deepEqual(h.negotiations.hitlAction('d', 'deny', 'not acceptable', OPERATOR, ctx()), {
        ok: true,
        reason: '',
      });
      await settle();
      const d = h.negotiations.get('d');
      assert.deepEqual([d?.state, d?.abort?.errorCode, d?.abort?.fallback], ['aborted', 'hitl_denied', null]);
      assert.equal(h.received(A).at(-1)?.json.kind, 'abort');
    });

    it('no human available: DENY_BY_DEFAULT aborts with error_code hitl_unavailable, recorded as a fallback', async () => {
      setup(withDeadlockFallback('DENY_BY_DEFAULT'));
      h.usePolicy(testPolicy({ maxRounds: 1 }));
      h.openN('n', [A, B]);
      h.propose('n', A, { v: 1 });
      h.evaluate('n', B, 0.2);
      assert.equal(h.stateOf('n'), 'paused');
      await h.advance(5_000);
      const rec = h.negotiations.get('n');
      assert.equal(rec?.state, 'aborted');
      assert.equal(rec?.abort?.errorCode, 'hitl_unavailable');
      assert.deepEqual(rec?.abort?.fallback, { policy: 'DENY_BY_DEFAULT', trigger: 'hitl_unavailable' });
      const abort = h.received(A).at(-1)?.json;
      assert.deepEqual([abort?.kind, abort?.error_code], ['abort', 'hitl_unavailable']);
    });

    it('no human available: AUTO_DECIDE_THRESHOLD accepts the best round when its score clears the threshold, decided_by policy with the fallback recorded', async () => {
      setup(withDeadlockFallback('AUTO_DECIDE_THRESHOLD', 0.5));
      h.usePolicy(testPolicy({ maxRounds: 1 }));
      h.openN('n', [A, B]);
      h.propose('n', A, { v: 1 });
      h.evaluate('n', B, 0.6);
      await h.advance(5_000);
      const rec = h.negotiations.get('n');
      assert.equal(rec?.state, 'decided');
      assert.deepEqual([rec?.decision?.decidedBy, rec?.decision?.round], ['policy', 1]);
      assert.deepEqual(rec?.decision?.fallback, { policy: 'AUTO_DECIDE_THRESHOLD', trigger: 'hitl_unavailable' });
    });

    it('oscillation A→B→A beyond oscillation_limit stops; tie-break highest_score decides the best round by policy', () => {
      setup();
      h.usePolicy(testPolicy({ maxRounds: 8, oscillationLimit: 1 }), { tieBreak: 'highest_score' });
      h.openN('n', [A, B]);
      h.propose('n', A, { offer: 'A' });
      h.evaluate('n', B, 0.5);
      h.counter('n', B, { offer: 'B' });
      h.evaluate('n', A, 0.3);
      const r3 = h.counter('n', A, { offer: 'A' });
      assert.equal(r3.oscillation, true);
      assert.equal(h.stateOf('n'), 'open', 'one oscillation is within the limit of 1');
      h.counter('n', B, { offer: 'B' });
      const rec = h.negotiations.get('n');
      assert.equal(rec?.oscillations, 2);
      assert.deepEqual(
        [rec?.state, rec?.decision?.decidedBy, rec?.decision?.round, rec?.decision?.stopReason],
        ['decided', 'policy', 1, 'oscillation'],
      );
      assert.deepEqual(h.kinds(A).slice(-2), ['counter', 'decide']);
    });

    it('a JSON round of more than 5,000 values is refused before it is parsed; an earlier one beyond it (stored before the limit) is compared as text', () => {
      setup();
      h.usePolicy(testPolicy({ maxRounds: 8, tokenBudgetPerRound: 131_072, totalTokenBudget: 2_097_152 }));
      h.openN('n', [A, B]);
      // jsonShape's count: 1 + '[' + 4,999 commas = 5,001 values (the array and its 5,000 items).
      refused(
        () => h.propose('n', A, JSON.stringify(Array(5_000).fill(0))),
        'invalid',
        'VALIDATION_ERROR',
        /^the payload holds more than 5000 JSON values \(JSON values limit\); no round was used$/,
      );
      assert.equal(h.negotiations.get('n')?.rounds, 0, 'no round was used');
      const r1 = h.propose('n', A, JSON.stringify(Array(4_999).fill(0)));
      assert.equal(r1.n, 1, '5,000 values are accepted');
      h.coordinator.store.negotiation.putRound({ ...r1, payload: Buffer.from(JSON.stringify(Array(6_000).fill(1))) });
      const r2 = h.counter('n', B, { offer: 'B' });
      assert.match(r2.delta.method, /^text/, 'the earlier round is not parsed: a line diff of the texts');
      assert.equal(r2.delta.magnitude, 1);
    });

    it('total_token_budget exceeded stops; tie-break abort aborts', () => {
      setup();
      h.usePolicy(testPolicy({ maxRounds: 8, tokenBudgetPerRound: 1_000, totalTokenBudget: 1_024 }), {
        tieBreak: 'abort',
      });
      h.openN('n', [A, B]);
      h.propose('n', A, { text: 'a'.repeat(2_900) });
      assert.equal(h.stateOf('n'), 'open');
      h.counter('n', B, { text: 'b'.repeat(2_900) });
      const rec = h.negotiations.get('n');
      assert.deepEqual([rec?.state, rec?.stopReason, rec?.abort?.errorCode], ['aborted', 'budget', 'budget']);
      assert.ok((rec?.tokensUsed ?? 0) > 1_024);
      assert.equal(h.received(B).at(-1)?.json.kind, 'abort');
    });

    it('the round timeout and the debate timeout stop on the injected clock', async () => {
      setup();
      h.usePolicy(testPolicy({ roundTimeoutMs: 10_000 }), { tieBreak: 'abort' });
      h.openN('r', [A, B], { debateTimeoutMs: 3_600_000 });
      h.propose('r', A, { v: 1 });
      await h.advance(9_000);
      h.counter('r', B, { v: 2 });
      await h.advance(9_000);
      assert.equal(h.stateOf('r'), 'open', 'the round timeout runs from the latest round');
      await h.advance(1_000);
      assert.deepEqual([h.stateOf('r'), h.negotiations.get('r')?.stopReason], ['aborted', 'timeout']);
      assert.equal(h.events('negotiation.timeout')[0].details.which, 'round');

      h.usePolicy(testPolicy({ roundTimeoutMs: 600_000 }), { tieBreak: 'abort' });
      h.openN('d', [A, B], { debateTimeoutMs: 30_000 });
      h.propose('d', A, { v: 1 });
      await h.advance(29_000);
      assert.equal(h.stateOf('d'), 'open');
      await h.advance(1_000);
      assert.deepEqual([h.stateOf('d'), h.negotiations.get('d')?.stopReason], ['aborted', 'timeout']);
      assert.equal(h.events('negotiation.timeout').at(-1)?.details.which, 'debate');
    });

    it('PauseBetweenRounds: HITL after each evaluated round; approve lets the next round start', async () => {
      setup();
      h.usePolicy(testPolicy({ hitl: 'PauseBetweenRounds' }));
      h.coordinator.hitl.attachOperator('tester');
      h.openN('n', [A, B]);
      h.propose('n', A, { v: 1 });
      h.evaluate('n', B, 0.2);
      const rec = h.negotiations.get('n');
      assert.deepEqual([rec?.state, rec?.pending?.why], ['paused', 'pause_between_rounds']);
      assert.equal(h.coordinator.hitl.get(rec?.pending?.invocationId ?? '')?.reasonType, 'MANUAL_OVERRIDE');
      h.negotiations.hitlAction('n', 'approve', 'go on', OPERATOR, ctx());
      await settle();
      assert.equal(h.stateOf('n'), 'open');
      assert.equal(h.counter('n', B, { v: 2 }).n, 2);
    });

    it('PauseOnFinalAccept: an accepted round waits for a person; approve decides it (decided_by hitl, threshold_met)', async () => {
      setup();
      h.usePolicy(testPolicy({ hitl: 'PauseOnFinalAccept' }));
      h.coordinator.hitl.attachOperator('tester');
      h.openN('n', [A, B]);
      h.propose('n', A, { v: 1 });
      h.evaluate('n', B, 0.95);
      const rec = h.negotiations.get('n');
      assert.deepEqual([rec?.state, rec?.pending?.why, rec?.stopReason], ['paused', 'final_accept', 'threshold_met']);
      assert.equal(h.coordinator.hitl.get(rec?.pending?.invocationId ?? '')?.context.score, 0.95);
      assert.deepEqual(h.negotiations.hitlAction('n', 'approve', 'ship it', OPERATOR, ctx()), { ok: true, reason: '' });
      await settle();
      const done = h.negotiations.get('n');
      assert.deepEqual(
        [done?.state, done?.decision?.decidedBy, done?.decision?.round, done?.decision?.stopReason],
        ['decided', 'hitl', 1, 'threshold_met'],
      );
    });
  });

  describe('Decide and Abort', () => {
    beforeEach(() => {
      setup();
      h.usePolicy(testPolicy());
    });

    it('a participant decides only by consensus on a round every other participant accepted; the operator decides anything; the end is final', () => {
      h.openN('n', [A, B, C]);
      const v1 = Buffer.from('{"v": 1}');
      h.propose('n', A, v1);
      const decide = (by: string, contentType: string, result: Buffer, speaker = agentSpeaker(B)) =>
        h.negotiations.decide({ negotiationId: 'n', decidedBy: by, contentType, result }, speaker, ctx());
      refused(() => decide('hitl', 'application/json', v1), 'permission', 'PERMISSION_DENIED', /consensus only/);
      refused(() => decide('policy', 'application/json', v1), 'permission', 'PERMISSION_DENIED', /consensus only/);
      refused(() => decide('vote', 'application/json', v1), 'invalid', 'VALIDATION_ERROR');
      refused(
        () => decide('consensus', 'application/json', Buffer.from('{"v": 95}')),
        'precondition',
        'FAILED_PRECONDITION',
        /equals no round/,
      );
      refused(() => decide('', 'application/json', v1), 'precondition', 'FAILED_PRECONDITION', /agent-c/);
      h.evaluate('n', C, 0.5);
      refused(() => decide('', 'application/json', v1), 'precondition', 'FAILED_PRECONDITION', /agent-c/);
      assert.equal(h.stateOf('n'), 'open');
      h.negotiations.abort('n', 'start again', OPERATOR, ctx());
      const c2 = Buffer.from('{"v": 2}');
      // Inboxes hold 10 messages not READ: read what came so far.
      const read = new Set<string>();
      const drain = () => {
        for (const agent of [A, B, C]) {
          for (const e of h.received(agent)) {
            if (read.has(e.messageId)) continue;
            read.add(e.messageId);
            h.acked(agent, e.messageId, 'READ');
          }
        }
      };
      drain();

      h.openN('m', [A, B, C]);
      h.propose('m', A, c2);
      h.evaluate('m', C, 0.9, 'fine by me');
      const rec = h.negotiations.decide(
        { negotiationId: 'm', decidedBy: '', contentType: 'application/json', result: c2 },
        agentSpeaker(B),
        ctx(),
      );
      assert.deepEqual(
        [rec.state, rec.decision?.decidedBy, rec.decision?.stopReason, rec.decision?.round],
        ['decided', 'consensus', 'decided', 1],
      );
      const event = h.received(A).at(-1)?.json;
      assert.deepEqual(
        [event?.kind, event?.by, event?.ct, event?.round],
        ['decide', 'consensus', 'application/json', 1],
      );
      assert.ok(Buffer.from(String(event?.result_b64), 'base64').equals(c2));
      const events = h.received(A).length;
      h.negotiations.decide(
        { negotiationId: 'm', decidedBy: '', contentType: 'application/json', result: c2 },
        agentSpeaker(B),
        ctx(),
      );
      assert.equal(h.received(A).length, events, 'a retried Decide is answered OK and sends nothing');
      refused(
        () =>
          h.negotiations.decide(
            {
              negotiationId: 'm',
              decidedBy: '',
              contentType: 'application/octet-stream',
              result: Buffer.from('other'),
            },
            agentSpeaker(B),
            ctx(),
          ),
        'precondition',
        'NEGOTIATION_CLOSED',
      );
      refused(() => h.negotiations.abort('m', 'late', OPERATOR, ctx()), 'precondition', 'NEGOTIATION_CLOSED');

      drain();
      // The operator decides anything: bytes nobody proposed, '' = hitl, or policy.
      h.openN('o', [A, B]);
      const result = Buffer.from([0, 1, 2, 250, 255]);
      const o = h.negotiations.decide(
        { negotiationId: 'o', decidedBy: '', contentType: 'application/octet-stream', result },
        OPERATOR,
        ctx(),
      );
      assert.deepEqual([o.state, o.decision?.decidedBy, o.decision?.round], ['decided', 'hitl', 0]);
      h.openN('p', [A, B]);
      assert.equal(
        h.negotiations.decide(
          { negotiationId: 'p', decidedBy: 'policy', contentType: 'application/json', result: Buffer.from('{}') },
          OPERATOR,
          ctx(),
        ).decision?.decidedBy,
        'policy',
      );
    });

    it('a participant cannot Decide while a person is asked (NEGOTIATION_PAUSED); the operator can', () => {
      h.usePolicy(testPolicy({ maxRounds: 1 }));
      h.coordinator.hitl.attachOperator('tester');
      h.openN('n', [A, B]);
      const v1 = Buffer.from('{"v":1}');
      h.propose('n', A, v1);
      h.evaluate('n', B, 0.1);
      assert.equal(h.stateOf('n'), 'paused');
      refused(
        () =>
          h.negotiations.decide(
            { negotiationId: 'n', decidedBy: 'consensus', contentType: 'application/json', result: v1 },
            agentSpeaker(A),
            ctx(),
          ),
        'precondition',
        'NEGOTIATION_PAUSED',
      );
      const id = h.negotiations.get('n')?.pending?.invocationId ?? '';
      assert.equal(h.coordinator.hitl.get(id)?.state, 'pending', 'the gate still waits');
      h.negotiations.decide(
        { negotiationId: 'n', decidedBy: '', contentType: 'application/json', result: v1 },
        OPERATOR,
        ctx(),
      );
      assert.equal(h.stateOf('n'), 'decided');
      assert.equal(h.coordinator.hitl.get(id)?.state, 'cancelled');
    });

    it('the operator aborts a paused debate: the pending invocation is withdrawn', async () => {
      h.usePolicy(testPolicy({ maxRounds: 1 }));
      h.coordinator.hitl.attachOperator('tester');
      h.openN('n', [A, B]);
      h.propose('n', A, { v: 1 });
      h.evaluate('n', B, 0.1);
      const id = h.negotiations.get('n')?.pending?.invocationId ?? '';
      h.negotiations.abort('n', 'changed my mind', OPERATOR, ctx());
      await settle();
      assert.equal(h.coordinator.hitl.get(id)?.state, 'cancelled');
      assert.deepEqual([h.stateOf('n'), h.negotiations.get('n')?.abort?.reason], ['aborted', 'changed my mind']);
      assert.deepEqual(h.received(B).at(-1)?.json.reason, 'changed my mind');
      h.negotiations.abort('n', 'changed my mind', OPERATOR, ctx());
      assert.equal(h.events('negotiation.aborted').length, 1, 'a retried Abort changes nothing');
      refused(() => h.negotiations.abort('n', 'another reason', OPERATOR, ctx()), 'precondition', 'NEGOTIATION_CLOSED');
    });
  });

  describe('a coordinator restart', () => {
    it('restore re-arms the round timer from the store', async () => {
      setup();
      h.usePolicy(testPolicy({ roundTimeoutMs: 10_000 }), { tieBreak: 'abort' });
      h.openN('n', [A, B]);
      h.propose('n', A, { v: 1 });
      await h.advance(4_000);
      h.restart();
      assert.equal(h.stateOf('n'), 'open');
      await h.advance(5_000);
      assert.equal(h.stateOf('n'), 'open');
      await h.advance(1_000);
      assert.deepEqual([h.stateOf('n'), h.negotiations.get('n')?.stopReason], ['aborted', 'timeout']);
      h.reconnect(A);
      assert.equal(h.received(A).at(-1)?.json.kind, 'abort', 'the event waited in the store for the participant');
    });

    it('a HITL decision made while the coordinator was stopping is applied by restore()', async () => {
      setup();
      h.usePolicy(testPolicy({ maxRounds: 1 }));
      h.coordinator.hitl.attachOperator('tester');
      h.openN('n', [A, B]);
      h.propose('n', A, { v: 1 });
      h.evaluate('n', B, 0.4);
      const id = h.negotiations.get('n')?.pending?.invocationId ?? '';
      // The decision commits; the coordinator stops before the negotiation hears of it.
      h.coordinator.hitl.decide(id, { action: 'approve', rationale: 'take it' }, 'tester', ctx());
      h.restart();
      await settle();
      const rec = h.negotiations.get('n');
      assert.deepEqual([rec?.state, rec?.decision?.decidedBy, rec?.decision?.round], ['decided', 'hitl', 1]);
      assert.equal(h.events('negotiation.decided').length, 1);
    });
  });
});

describe('negotiation: fan-out refusals and the inference engine', function () {
  this.timeout(20_000);
  let h: NegotiationHarness;
  afterEach(() => h?.dispose());

  it('a full inbox: refused before any copy went out → the call is refused BUFFER_FULL and nothing is kept; after → deferred and redelivered in order', async () => {
    h = new NegotiationHarness(undefined, { capacity: 4 });
    for (const id of [A, B, C]) h.agent(id);
    h.usePolicy(testPolicy());
    h.openN('n', [B, A]);
    const fillers = [h.sendData(C, A), h.sendData(C, A)];
    // A holds 4 messages not READ (open, policy, two DATA): full. B is first: its copy goes out, A's waits.
    h.propose('n', B, { v: 1 });
    h.counter('n', A, { v: 2 });
    const rec = h.negotiations.get('n');
    assert.equal(rec?.rounds, 2, 'the rounds happened: B heard of them');
    assert.deepEqual(
      rec?.undelivered.map((u) => [u.to, u.kind, u.code]),
      [
        [A, 'propose', 'BUFFER_FULL'],
        [A, 'counter', 'ORDER'],
      ],
    );
    assert.deepEqual(h.kinds(A), ['open', 'policy']);
    assert.equal(h.events('negotiation.event_deferred').length, 2);
    // The record keeps references (kind, seq, round), not the bytes; and is not rewritten while nothing changes.
    assert.ok(rec?.undelivered.every((u) => !('payload' in u)));
    assert.deepEqual(
      rec?.undelivered.map((u) => [u.seq, u.round]),
      [
        [3, 1],
        [4, 2],
      ],
    );
    const repo = h.coordinator.store.negotiation;
    const put = repo.put.bind(repo);
    let writes = 0;
    repo.put = (r) => {
      writes++;
      put(r);
    };
    await h.advance(1_000);
    await h.advance(1_000);
    await h.advance(1_000);
    assert.equal(writes, 0, 'three refused retries, no write');
    repo.put = put;
    assert.equal(h.negotiations.get('n')?.undelivered.length, 2, 'still full: still waiting');
    for (const m of fillers) h.acked(A, m.messageId, 'READ');
    await h.advance(1_000);
    assert.deepEqual(h.kinds(A), ['open', 'policy', 'propose', 'counter'], 'redelivered in order');
    assert.deepEqual(
      h
        .received(A)
        .slice(2)
        .map((e) => e.raw.toString()),
      h
        .received(B)
        .slice(2, 4)
        .map((e) => e.raw.toString()),
      'rebuilt byte for byte',
    );
    assert.deepEqual(h.negotiations.get('n')?.undelivered, []);
    assert.equal(h.events('negotiation.event_redelivered').length, 2);

    // A and B both hold four events not READ (full): every copy is refused, so the Open is refused as a whole.
    refused(() => h.openN('m', [A, B]), 'exhausted', 'BUFFER_FULL', /agent-a/);
    assert.equal(h.negotiations.get('m'), undefined);
  });

  it('one participant cannot block the debate: a call is refused only when every copy is refused; Decide and Abort never', () => {
    h = new NegotiationHarness(undefined, { capacity: 5 });
    for (const id of [A, B, C]) h.agent(id);
    h.usePolicy(testPolicy());
    h.openN('n', [A, B]);
    h.openN('d', [A, B]);
    h.sendData(C, A);
    // A holds open, policy (twice) and a DATA message: full.
    h.propose('n', B, { v: 1 });
    assert.equal(h.negotiations.get('n')?.rounds, 1, 'A full, B not: the Propose is accepted');
    assert.deepEqual(
      h.negotiations.get('n')?.undelivered.map((u) => [u.to, u.kind, u.code]),
      [[A, 'propose', 'BUFFER_FULL']],
    );
    // B now holds open, policy, open, policy, propose: full too. Every copy of a Counter would be refused.
    refused(() => h.counter('n', A, { v: 2 }), 'exhausted', 'BUFFER_FULL', /any participant/);
    assert.equal(h.negotiations.get('n')?.rounds, 1, 'nothing of the refused Counter is kept');
    refused(() => h.evaluate('n', A, 0.5), 'exhausted', 'BUFFER_FULL');
    // The operator's Abort and Decide go through; the copies wait.
    const aborted = h.negotiations.abort('n', 'enough', OPERATOR, ctx());
    assert.equal(aborted.state, 'aborted');
    assert.deepEqual(
      aborted.undelivered.filter((u) => u.kind === 'abort').map((u) => u.to),
      [A, B],
    );
    const decided = h.negotiations.decide(
      { negotiationId: 'd', decidedBy: '', contentType: 'application/json', result: Buffer.from('{"v":9}') },
      OPERATOR,
      ctx(),
    );
    assert.equal(decided.state, 'decided');
    assert.deepEqual(
      decided.undelivered.map((u) => [u.to, u.kind]),
      [
        [A, 'decide'],
        [B, 'decide'],
      ],
    );
  });

  it('a deregistered participant: its copies are kept as undeliverable (NO_ROUTE, logged), the call is not refused', () => {
    h = new NegotiationHarness();
    for (const id of [A, B, C]) h.agent(id);
    h.usePolicy(testPolicy());
    h.openN('n', [A, B, C]);
    assert.ok(h.coordinator.registry.deregister(A, 'gone', ctx()));
    h.propose('n', B, { v: 1 });
    h.evaluate('n', C, 0.2);
    const rec = h.negotiations.get('n');
    assert.equal(rec?.rounds, 1);
    assert.deepEqual(
      rec?.undelivered.map((u) => [u.to, u.kind, u.code]),
      [
        [A, 'propose', 'NO_ROUTE'],
        [A, 'evaluate', 'ORDER'],
      ],
    );
    assert.ok(h.events('negotiation.event_deferred').some((e) => e.details.code === 'NO_ROUTE'));
    assert.deepEqual(h.kinds(B).slice(-2), ['propose', 'evaluate']);
    // Only deregistered participants left: nothing is refused for delivery either.
    assert.ok(h.coordinator.registry.deregister(B, 'gone', ctx()));
    assert.ok(h.coordinator.registry.deregister(C, 'gone', ctx()));
    h.negotiations.abort('n', 'nobody left', OPERATOR, ctx());
    assert.equal(h.stateOf('n'), 'aborted');
  });

  it('a refused Open keeps no compiled schema; compiled schemas are cached by content in a bounded LRU', () => {
    h = new NegotiationHarness(undefined, { capacity: 2 });
    for (const id of [A, B]) h.agent(id);
    h.usePolicy(testPolicy());
    const cache = () => (h.negotiations as unknown as { validators: Map<string, unknown> }).validators;
    const schema = (i: number) => JSON.stringify({ type: 'object', properties: { [`p${i}`]: { type: 'number' } } });
    h.openN('full', [A, B]);
    assert.equal(cache().size, 0, 'no schema, nothing compiled');
    for (let i = 0; i < 200; i++)
      refused(() => h.openN(`r${i}`, [A, B], { schema: schema(i) }), 'exhausted', 'BUFFER_FULL');
    assert.equal(cache().size, 0, '200 refused Opens leave no validator');
    h.dispose();
    h = new NegotiationHarness(undefined, { capacity: 1_000 });
    for (const id of [A, B]) h.agent(id);
    h.usePolicy(testPolicy());
    for (let i = 0; i < VALIDATOR_CACHE_SIZE + 8; i++)
      h.openN(`o${i}`, [A, B], { schema: schema(i % (VALIDATOR_CACHE_SIZE + 4)) });
    assert.equal(cache().size, VALIDATOR_CACHE_SIZE, 'bounded');
    refused(() => h.propose('o0', A, { p0: 'x' }), 'invalid', 'VALIDATION_ERROR', /\/p0/);
    h.propose('o0', A, { p0: 1 });
  });

  it('no agent uses up the HITL quota: debate_timeout at least the minimum, the opener is the HITL requester, open debates capped per opener', () => {
    h = new NegotiationHarness(undefined, { capacity: 1_000 });
    for (const id of [A, B, C]) h.agent(id);
    h.usePolicy(testPolicy({ maxRounds: 1 }));
    h.coordinator.hitl.attachOperator('tester');
    const t = h.openN('t', [A, B], { debateTimeoutMs: 1 }, agentSpeaker(A));
    assert.equal(t.deadlineAt - t.openedAt, MIN_DEBATE_TIMEOUT_MS, 'a 1 ms debate_timeout is raised to the minimum');
    assert.equal(t.effective.debateTimeoutMs, MIN_DEBATE_TIMEOUT_MS);
    h.propose('t', A, { v: 1 });
    h.evaluate('t', B, 0.1);
    assert.equal(
      h.coordinator.hitl.get(h.negotiations.get('t')?.pending?.invocationId ?? '')?.requester,
      A,
      'the opener asks',
    );
    h.openN('o', [A, B]);
    h.propose('o', A, { v: 1 });
    h.evaluate('o', B, 0.1);
    assert.equal(h.coordinator.hitl.get(h.negotiations.get('o')?.pending?.invocationId ?? '')?.requester, 'operator');
    for (let i = 1; i < MAX_OPEN_PER_OPENER; i++) h.openN(`c${i}`, [A, B], {}, agentSpeaker(A));
    refused(() => h.openN('one-more', [A, B], {}, agentSpeaker(A)), 'exhausted', 'BUFFER_FULL', /32 debates open/);
    h.openN('c1', [A, B], {}, agentSpeaker(A));
    h.openN('by-b', [A, B], {}, agentSpeaker(B));
    h.openN('by-operator', [A, B]);
    h.negotiations.abort('c1', 'done', agentSpeaker(A), ctx());
    h.openN('one-more', [A, B], {}, agentSpeaker(A));
  });

  it('HitlAction: a debate with nothing pending does not shadow a room with the same id', () => {
    h = new NegotiationHarness();
    for (const id of [A, B, 'prod', 'c1', 'c2']) h.agent(id);
    h.usePolicy(testPolicy());
    const operator = h.coordinator.hitl.attachOperator('tester');
    try {
      const critic = (id: string, score: number) =>
        h.coordinator.room.submitVote(
          {
            artifactId: 'plan-1',
            criticId: id,
            score,
            confidence: 0.9,
            passed: true,
            strengths: [],
            weaknesses: [],
            recommendations: [],
            roomId: '',
            votedAt: null,
          },
          agentSpeaker(id),
          ctx(),
        );
      h.coordinator.room.submitProposal(
        {
          artifactType: 'PLAN',
          artifactId: 'plan-1',
          producerId: 'prod',
          artifact: Buffer.from('{"steps":["a"]}'),
          contentType: 'application/json',
          requestedCritics: ['c1', 'c2'],
          roomId: 'shared',
          createdAt: null,
        },
        agentSpeaker('prod'),
        ctx(),
      );
      critic('c1', 10);
      critic('c2', 1);
      assert.ok(h.coordinator.room.getDecision('plan-1', '')?.hitl, 'the room escalated to a person');
      h.openN('shared', [A, B]);
      assert.match(
        h.negotiations.hitlAction('shared', 'approve', 'x', OPERATOR, ctx()).reason,
        /^FAILED_PRECONDITION: /,
        'the debate waits on nothing',
      );
      const answer = hitlActionFor(h.coordinator, 'shared', 'approve', 'the spread is fine', OPERATOR, ctx());
      assert.equal(answer.ok, true, answer.reason);
      assert.equal(h.coordinator.room.getDecision('plan-1', '')?.outcome, 'APPROVED');
      const none = hitlActionFor(h.coordinator, 'shared', 'approve', 'again', OPERATOR, ctx());
      assert.match(
        none.reason,
        /negotiation 'shared' waits on no HITL invocation/,
        "nothing anywhere: the debate's answer",
      );
    } finally {
      operator.dispose();
    }
  });

  it('retention: finished negotiations and their rounds are pruned beyond the newest N and after the age, in bounded runs; open ones stay', async () => {
    h = new NegotiationHarness(undefined, { capacity: 1_000 });
    for (const id of [A, B]) h.agent(id);
    h.usePolicy(testPolicy());
    const c = h.coordinator;
    const negotiations = new Negotiations({
      store: c.store,
      log: c.log,
      clock: c.clock,
      ids: c.ids,
      agents: c.registry,
      outbox: c.router,
      hitl: c.hitl,
      artifacts: c.activity,
      policies: c.policies,
      inference: { engineAgent: () => undefined, evaluateDebate: async () => ({ confidence: 0, notes: '' }) },
      retention: { maxAgeMs: 86_400_000, maxFinished: 2, intervalMs: 60_000, batch: 2 },
    });
    try {
      negotiations.open(h.openInput('live', [A, B]), OPERATOR, ctx());
      for (let i = 0; i < 5; i++) {
        negotiations.open(h.openInput(`f${i}`, [A, B]), OPERATOR, ctx());
        negotiations.propose(h.proposal(`f${i}`, A, { v: i }), agentSpeaker(A), ctx());
        negotiations.abort(`f${i}`, 'done', OPERATOR, ctx());
        h.clock.advance(1);
      }
      await h.advance(60_000);
      assert.deepEqual(
        h.events('negotiation.pruned').map((e) => e.details.negotiations),
        [2],
        'one run: one batch',
      );
      await h.advance(100);
      assert.deepEqual(
        ['live', 'f0', 'f1', 'f2', 'f3', 'f4'].filter((id) => negotiations.get(id) !== undefined),
        ['live', 'f3', 'f4'],
        'the newest 2 finished kept',
      );
      assert.deepEqual(c.store.negotiation.rounds('f0'), [], 'rounds go with them');
      assert.equal(c.store.negotiation.rounds('f4').length, 1);
      await h.advance(86_400_000);
      assert.deepEqual(
        ['live', 'f3', 'f4'].filter((id) => negotiations.get(id) !== undefined),
        ['live'],
        'older than a day: gone; the open one stays',
      );
      assert.equal(
        h.events('negotiation.pruned').reduce((n, e) => n + Number(e.details.negotiations), 0),
        5,
      );
    } finally {
      negotiations.dispose();
    }
  });

  it('deferred event copies survive a restart and are redelivered in order after it', async () => {
    h = new NegotiationHarness(undefined, { capacity: 3 });
    for (const id of [A, B, C]) h.agent(id);
    h.usePolicy(testPolicy());
    h.openN('n', [B, A]);
    const filler = h.sendData(C, A);
    h.propose('n', B, { v: 1 });
    assert.deepEqual(
      h.negotiations.get('n')?.undelivered.map((u) => u.kind),
      ['propose'],
    );
    h.restart();
    h.reconnect(A);
    h.reconnect(B);
    assert.deepEqual(
      h.negotiations.get('n')?.undelivered.map((u) => u.kind),
      ['propose'],
      'kept in the store',
    );
    h.acked(A, filler.messageId, 'READ');
    await h.advance(1_000);
    assert.deepEqual(h.kinds(A), ['open', 'policy', 'propose']);
    assert.deepEqual(h.negotiations.get('n')?.undelivered, []);
  });

  it("a pending engine score at a restart with no engine registered: llm failed, judged on the deterministic score, never a built-in score as the engine's", async () => {
    h = new NegotiationHarness();
    for (const id of [A, B]) h.agent(id);
    h.usePolicy(testPolicy({ scoring: { requireSchemaValid: true, requireExamplesPass: false, llmWeight: 0.5 } }));
    const c = h.coordinator;
    const deps = {
      store: c.store,
      log: c.log,
      clock: c.clock,
      ids: c.ids,
      agents: c.registry,
      outbox: c.router,
      hitl: c.hitl,
      artifacts: c.activity,
      policies: c.policies,
    };
    const before = new Negotiations({
      ...deps,
      inference: { engineAgent: () => 'engine', evaluateDebate: () => new Promise(() => undefined) },
    });
    before.open(h.openInput('n', [A, B]), OPERATOR, ctx());
    before.propose(h.proposal('n', A, { v: 1 }), agentSpeaker(A), ctx());
    before.evaluate({ negotiationId: 'n', fromAgent: B, confidenceScore: 0.8, notes: '' }, agentSpeaker(B), ctx());
    assert.equal(before.detail('n')?.rounds[0].llm, 'pending');
    before.dispose();
    let asked = 0;
    const after = new Negotiations({
      ...deps,
      inference: {
        engineAgent: () => undefined,
        evaluateDebate: async () => {
          asked++;
          return { confidence: 1, notes: 'built-in' };
        },
      },
    });
    try {
      after.restore(ctx());
      await settle();
      const round = after.detail('n')?.rounds[0];
      assert.equal(asked, 0, "no built-in heuristic is asked in the engine's place");
      assert.deepEqual([round?.llm, round?.llmConfidence, round?.score], ['failed', null, 0.8]);
      assert.match(round?.llmNotes ?? '', /no inference engine is registered/);
      assert.deepEqual([after.get('n')?.state, after.get('n')?.decision?.round], ['decided', 1]);
    } finally {
      after.dispose();
    }
  });

  it('a Counter while the engine is asked about the previous round marks that round superseded (not pending forever)', async () => {
    h = new NegotiationHarness();
    for (const id of [A, B]) h.agent(id);
    h.usePolicy(testPolicy({ scoring: { requireSchemaValid: true, requireExamplesPass: false, llmWeight: 0.5 } }));
    const c = h.coordinator;
    const resolvers: Array<(v: { confidence: number; notes: string }) => void> = [];
    const negotiations = new Negotiations({
      store: c.store,
      log: c.log,
      clock: c.clock,
      ids: c.ids,
      agents: c.registry,
      outbox: c.router,
      hitl: c.hitl,
      artifacts: c.activity,
      policies: c.policies,
      inference: {
        engineAgent: () => 'engine',
        evaluateDebate: () => new Promise((resolve) => resolvers.push(resolve)),
      },
    });
    try {
      negotiations.open(h.openInput('n', [A, B]), OPERATOR, ctx());
      negotiations.propose(h.proposal('n', A, { v: 1 }), agentSpeaker(A), ctx());
      negotiations.evaluate(
        { negotiationId: 'n', fromAgent: B, confidenceScore: 0.9, notes: '' },
        agentSpeaker(B),
        ctx(),
      );
      assert.equal(negotiations.detail('n')?.rounds[0].llm, 'pending');
      negotiations.counter(h.proposal('n', B, { v: 2 }), agentSpeaker(B), ctx());
      const first = negotiations.detail('n')?.rounds[0];
      assert.equal(first?.llm, 'failed');
      assert.match(first?.llmNotes ?? '', /superseded by round 2/);
      resolvers[0]({ confidence: 1, notes: 'late' });
      await settle();
      assert.equal(negotiations.detail('n')?.rounds[0].llm, 'failed', 'the late answer changes nothing');
      assert.equal(negotiations.get('n')?.state, 'open');
    } finally {
      negotiations.dispose();
    }
  });

  it('llm_weight > 0 with an engine: the deterministic score first, the blend when the engine answers; a failure leaves the deterministic score', async () => {
    h = new NegotiationHarness();
    for (const id of [A, B]) h.agent(id);
    h.usePolicy(testPolicy({ scoring: { requireSchemaValid: true, requireExamplesPass: false, llmWeight: 0.5 } }));
    const asked: Array<{
      proposalA: string;
      proposalB: string;
      resolve: (v: { confidence: number; notes: string }) => void;
      reject: (e: Error) => void;
    }> = [];
    const c = h.coordinator;
    const negotiations = new Negotiations({
      store: c.store,
      log: c.log,
      clock: c.clock,
      ids: c.ids,
      agents: c.registry,
      outbox: c.router,
      hitl: c.hitl,
      artifacts: c.activity,
      policies: c.policies,
      inference: {
        engineAgent: () => 'engine',
        evaluateDebate: (request) => new Promise((resolve, reject) => asked.push({ ...request, resolve, reject })),
      },
    });
    try {
      negotiations.open(h.openInput('n', [A, B]), OPERATOR, ctx());
      negotiations.propose(h.proposal('n', A, { v: 1 }), agentSpeaker(A), ctx());
      negotiations.evaluate(
        { negotiationId: 'n', fromAgent: B, confidenceScore: 0.7, notes: '' },
        agentSpeaker(B),
        ctx(),
      );
      let round = negotiations.detail('n')?.rounds[0];
      assert.deepEqual([round?.llm, round?.deterministicScore, round?.score], ['pending', 0.7, 0.7]);
      assert.equal(negotiations.get('n')?.state, 'open', 'no verdict before the engine answered');
      assert.equal(asked.length, 1);
      assert.deepEqual([asked[0].proposalA, asked[0].proposalB], ['', '{"v":1}']);
      asked[0].resolve({ confidence: 1, notes: 'converged' });
      await settle();
      round = negotiations.detail('n')?.rounds[0];
      assert.deepEqual([round?.llm, round?.llmConfidence], ['answered', 1]);
      assert.ok(Math.abs((round?.score ?? 0) - 0.85) < 1e-9, '(1 - 0.5)·0.7 + 0.5·1');
      assert.deepEqual(
        [negotiations.get('n')?.state, negotiations.get('n')?.decision?.decidedBy],
        ['decided', 'consensus'],
      );

      negotiations.open(h.openInput('f', [A, B]), OPERATOR, ctx());
      negotiations.propose(h.proposal('f', A, { v: 1 }), agentSpeaker(A), ctx());
      negotiations.evaluate(
        { negotiationId: 'f', fromAgent: B, confidenceScore: 0.9, notes: '' },
        agentSpeaker(B),
        ctx(),
      );
      asked[1].reject(new Error('engine offline'));
      await settle();
      const failed = negotiations.detail('f')?.rounds[0];
      assert.deepEqual([failed?.llm, failed?.score], ['failed', 0.9]);
      assert.match(failed?.llmNotes ?? '', /engine offline/);
      assert.equal(negotiations.get('f')?.state, 'decided', 'the deterministic score decides');
      assert.equal(h.events('negotiation.scored').filter((e) => e.level === 'WARN').length, 1);
    } finally {
      negotiations.dispose();
    }
  });
});
