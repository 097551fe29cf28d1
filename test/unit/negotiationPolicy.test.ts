import { strict as assert } from 'node:assert';
import { Ajv } from 'ajv';
import type { ManualClock } from '../../src/core/clock';
import type { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { EventLog } from '../../src/core/log/eventLog';
import { DEFAULT_GUARDRAILS, DEFAULT_PROFILES, MAX_DEBATE_TIMEOUT_MS } from '../../src/core/policy/defaults';
import type { NegotiationPolicy, PolicySet } from '../../src/core/policy/model';
import { NegotiationPolicies, type EffectiveInput, type PolicySettings } from '../../src/core/policy/policies';
import { parseAgentPreferences } from '../../src/core/policy/preferences';
import { parsePolicySettings } from '../../src/core/policy/settings';
import { NegotiationError } from '../../src/core/policy/speaker';
import { StoreFixture } from '../support/coordinatorFixture';

const ctx = { correlationId: 'corr-policy', principal: 'operator' };

function input(over: Partial<EffectiveInput> = {}): EffectiveInput {
  return { intensity: '', profileHint: '', preferences: {}, debateTimeoutMs: 0, topic: 'api/design', ...over };
}

function refusal(fn: () => unknown): NegotiationError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof NegotiationError, `a NegotiationError, not ${String(err)}`);
    assert.equal(err.kind, 'invalid');
    assert.equal(err.code, 'VALIDATION_ERROR');
    return err;
  }
  assert.fail('refused');
}

describe('NegotiationPolicies (RFC §17.2): the versioned policy set, profiles and effective policies', () => {
  let fixture: StoreFixture;
  let store: CoordinatorStore;
  let log: EventLog;
  let clock: ManualClock;
  const opened: NegotiationPolicies[] = [];

  const open = (settings?: PolicySettings): NegotiationPolicies => {
    const p = new NegotiationPolicies({ store, log, clock }, settings);
    opened.push(p);
    return p;
  };
  const reopen = (settings?: PolicySettings): NegotiationPolicies => {
    fixture.reopen();
    ({ store, log } = fixture);
    return open(settings);
  };
  const policySets = () => log.query({ eventType: 'negotiation.policy_set' });

  beforeEach(() => {
    fixture = new StoreFixture({ prefix: 'sw4rm-negotiation-policy-' });
    ({ store, log, clock } = fixture);
  });

  afterEach(() => {
    for (const p of opened.splice(0)) p.dispose();
    fixture.dispose();
  });

  describe('defaults', () => {
    it('a fresh store gets version 1 from the defaults: base, five profiles, guardrails, room thresholds, tie-break', () => {
      const p = open();
      const set = p.current();
      assert.equal(set.version, 1);
      assert.equal(set.setBy, 'default');
      assert.deepEqual(
        set.profiles.map((x) => x.name),
        ['LOWEST', 'LOW', 'MEDIUM', 'HIGH', 'HIGHEST'],
      );
      assert.deepEqual(set.base, DEFAULT_PROFILES[2].policy, "the base policy is MEDIUM's");
      assert.deepEqual(set.room, {
        minScoreThreshold: 7.0,
        minConfidenceThreshold: 0.7,
        minPassRatio: 0.8,
        maxStdDev: 2.0,
        escalateBelowConfidence: 0.3,
        escalateAboveStdDev: 3.0,
        voteTimeoutMs: 15 * 60_000,
        autoApprove: true,
      });
      assert.equal(set.tieBreak, 'hitl');
      assert.deepEqual(set.proposalSchemas, []);
      assert.deepEqual(set.guardrails, DEFAULT_GUARDRAILS);
      const events = policySets();
      assert.equal(events.length, 1, 'one negotiation.policy_set');
      assert.deepEqual(
        [events[0].details.version, events[0].details.set_by, events[0].details.policy_version],
        [1, 'default', 'v1'],
      );
    });

    it('intensity raises rounds, time and the score bar, and tightens drift, monotonically from LOWEST to HIGHEST', () => {
      const set = open().current();
      const byName = (n: string) => set.profiles.find((x) => x.name === n)!.policy;
      const order = ['LOWEST', 'LOW', 'MEDIUM', 'HIGH', 'HIGHEST'].map(byName);
      for (let i = 1; i < order.length; i++) {
        assert.ok(order[i].maxRounds > order[i - 1].maxRounds, 'max_rounds rises');
        assert.ok(order[i].roundTimeoutMs > order[i - 1].roundTimeoutMs, 'round_timeout_ms rises');
        assert.ok(order[i].scoreThreshold > order[i - 1].scoreThreshold, 'score_threshold rises');
        assert.ok(order[i].diffTolerance < order[i - 1].diffTolerance, 'diff_tolerance falls');
        assert.ok(order[i].tokenBudgetPerRound > order[i - 1].tokenBudgetPerRound, 'token_budget_per_round rises');
      }
      const timeouts = ['LOWEST', 'LOW', 'MEDIUM', 'HIGH', 'HIGHEST'].map((n) => set.debateTimeoutMs[n]);
      assert.deepEqual(timeouts, [120_000, 300_000, 900_000, 1_800_000, 3_600_000]);
    });
  });

  describe('effectiveFor', () => {
    it("takes the intensity's profile, its debate time limit and the version", () => {
      const p = open();
      for (const intensity of ['LOWEST', 'LOW', 'MEDIUM', 'HIGH', 'HIGHEST'] as const) {
        const { effective } = p.effectiveFor(input({ intensity }));
        assert.deepEqual(effective.policy, p.current().profiles.find((x) => x.name === intensity)!.policy, intensity);
        assert.equal(effective.profile, intensity);
        assert.equal(effective.debateTimeoutMs, p.current().debateTimeoutMs[intensity]);
        assert.equal(effective.policyVersion, 'v1');
        assert.deepEqual(effective.applied, {});
      }
      const none = p.effectiveFor(input()).effective;
      assert.deepEqual(none.policy, p.current().base, 'no intensity, no hint: the base policy');
      assert.equal(none.profile, '');
      assert.equal(none.debateTimeoutMs, p.current().baseDebateTimeoutMs);
    });

    it('a profile hint beats the intensity; an unknown hint falls back to the intensity', () => {
      const p = open();
      const ctxRpc = { correlationId: 'c' };
      p.setProfiles(
        [{ name: 'security-review', policy: { ...p.current().base, maxRounds: 9, scoreThreshold: 0.95 } }],
        'rpc:operator',
        ctxRpc,
      );
      const hinted = p.effectiveFor(input({ intensity: 'LOW', profileHint: 'security-review' })).effective;
      assert.equal(hinted.profile, 'security-review');
      assert.equal(hinted.policy.maxRounds, 9);
      assert.equal(
        hinted.debateTimeoutMs,
        p.current().baseDebateTimeoutMs,
        'a profile without its own time limit: the base one',
      );
      assert.equal(
        p.effectiveFor(input({ intensity: 'LOW', profileHint: 'highest' })).effective.profile,
        'HIGHEST',
        'case-insensitive',
      );
      assert.equal(p.effectiveFor(input({ intensity: 'LOW', profileHint: 'nope' })).effective.profile, 'LOW');
    });

    it("clamps each agent's preferences into the guardrails; per field the most restrictive stated value wins", () => {
      const p = open();
      const { effective } = p.effectiveFor(
        input({
          intensity: 'MEDIUM',
          preferences: {
            alice: {
              maxRounds: 50,
              scoreThreshold: 0.1,
              diffTolerance: 0.9,
              roundTimeoutMs: 10,
              tokenBudgetPerRound: 100_000,
              totalTokenBudget: 10,
              oscillationLimit: 4,
            },
            bob: {
              maxRounds: 4,
              scoreThreshold: 0.85,
              diffTolerance: 0.3,
              roundTimeoutMs: 99_999_999,
              tokenBudgetPerRound: 1_000_000,
              oscillationLimit: 0,
            },
            carol: {},
          },
        }),
      );
      assert.deepEqual(effective.applied.alice, {
        maxRounds: 20,
        scoreThreshold: 0.3,
        diffTolerance: 0.5,
        roundTimeoutMs: 5_000,
        tokenBudgetPerRound: 100_000,
        totalTokenBudget: 1_024,
        oscillationLimit: 4,
      });
      assert.deepEqual(effective.applied.bob, {
        maxRounds: 4,
        scoreThreshold: 0.85,
        diffTolerance: 0.3,
        roundTimeoutMs: 3_600_000,
        tokenBudgetPerRound: 131_072,
        totalTokenBudget: 0,
        oscillationLimit: 0,
      });
      assert.equal(effective.applied.carol, undefined, 'an agent with no preference is not listed');
      const medium = p.current().profiles.find((x) => x.name === 'MEDIUM')!.policy;
      assert.deepEqual(effective.policy, {
        ...medium,
        maxRounds: 4, // min(20, 4)
        scoreThreshold: 0.85, // max(0.3, 0.85)
        diffTolerance: 0.3, // min(0.5, 0.3)
        roundTimeoutMs: 5_000, // min(5000, 3600000)
        tokenBudgetPerRound: 100_000, // min(100000, 131072)
        totalTokenBudget: 1_024, // alice only
        oscillationLimit: 4, // alice only (bob's 0 = no preference)
      });
    });

    it('refuses a preference that is not a non-negative number, naming the agent and field', () => {
      const p = open();
      const err = refusal(() => p.effectiveFor(input({ preferences: { alice: { maxRounds: -1 } } })));
      assert.match(err.message, /^preferences\.alice\.max_rounds: /);
      assert.match(
        refusal(() => p.effectiveFor(input({ preferences: { bob: { scoreThreshold: Number.NaN } } }))).message,
        /^preferences\.bob\.score_threshold: /,
      );
    });

    it("Open's debate_timeout wins, clamped to the maximum", () => {
      const p = open();
      assert.equal(
        p.effectiveFor(input({ intensity: 'LOW', debateTimeoutMs: 42_000 })).effective.debateTimeoutMs,
        42_000,
      );
      assert.equal(
        p.effectiveFor(input({ intensity: 'LOW', debateTimeoutMs: MAX_DEBATE_TIMEOUT_MS * 3 })).effective
          .debateTimeoutMs,
        MAX_DEBATE_TIMEOUT_MS,
      );
    });

    it('finds the proposal schema by topic glob (the first match), none when nothing matches', () => {
      const p = open({
        proposalSchemas: [
          {
            topic: 'api/**',
            schema: '{"type":"object","properties":{"endpoint":{"type":"string"}},"required":["endpoint"]}',
          },
          { topic: '**', schema: '{"type":"object"}' },
        ],
      });
      assert.equal(p.settingsRefusal, undefined);
      assert.equal(
        p.effectiveFor(input({ topic: 'api/v1/users' })).schema,
        '{"type":"object","properties":{"endpoint":{"type":"string"}},"required":["endpoint"]}',
      );
      assert.equal(p.effectiveFor(input({ topic: 'plan' })).schema, '{"type":"object"}');
      const q = reopen({ proposalSchemas: [{ topic: 'api/*', schema: '{"type":"object"}' }] });
      assert.equal(q.effectiveFor(input({ topic: 'ui/button' })).schema, '');
    });
  });

  describe("parseAgentPreferences (Open's sw4rm-negotiation-preferences metadata)", () => {
    it('reads agent id → AgentPreferences with proto names (0 = none, unknown fields ignored, uint64 as text)', () => {
      assert.deepEqual(parseAgentPreferences(''), {});
      const prefs = parseAgentPreferences(
        '{"a":{"max_rounds":4,"score_threshold":0.85,"round_timeout_ms":"60000","oscillation_limit":0,"colour":"red"},"b":{}}',
      );
      assert.deepEqual(prefs, { a: { maxRounds: 4, scoreThreshold: 0.85, roundTimeoutMs: 60_000 }, b: {} });
      const { effective } = open().effectiveFor(input({ intensity: 'HIGH', preferences: prefs }));
      assert.deepEqual(effective.applied, {
        a: {
          maxRounds: 4,
          scoreThreshold: 0.85,
          diffTolerance: 0,
          roundTimeoutMs: 60_000,
          tokenBudgetPerRound: 0,
          totalTokenBudget: 0,
          oscillationLimit: 0,
        },
      });
      assert.deepEqual(
        [effective.policy.maxRounds, effective.policy.scoreThreshold, effective.policy.roundTimeoutMs],
        [4, 0.85, 60_000],
      );
    });

    it('refuses what is not such an object, naming where', () => {
      assert.match(refusal(() => parseAgentPreferences('[1]')).message, /^preferences: must be a JSON object/);
      assert.match(
        refusal(() => parseAgentPreferences('{"a":')).message,
        /^preferences: sw4rm-negotiation-preferences is not valid JSON/,
      );
      assert.match(
        refusal(() => parseAgentPreferences('{"a":{"max_rounds":-2}}')).message,
        /^preferences\.a\.max_rounds: must be a non-negative number/,
      );
      assert.match(
        refusal(() => parseAgentPreferences('{"a":{"score_threshold":"high"}}')).message,
        /^preferences\.a\.score_threshold: /,
      );
      assert.match(
        refusal(() => parseAgentPreferences('{"a":5}')).message,
        /^preferences\.a: must be an AgentPreferences object/,
      );
      const many = JSON.stringify(Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`agent-${i}`, {}])));
      assert.match(refusal(() => parseAgentPreferences(many)).message, /^preferences: names more than 64 agents/);
      assert.match(
        refusal(() => parseAgentPreferences('{"a":{"b":{"c":{"d":{"e":1}}}}}')).message,
        /^preferences: .*nests deeper than 4 levels/,
      );
    });
  });

  describe('versions', () => {
    it('each change writes version N+1 with one event and fires onDidChange after commit; old versions stay readable', async () => {
      const p = open();
      const fired: PolicySet[] = [];
      p.onDidChange((s) => fired.push(s));
      clock.advance(1_000);
      const v2 = p.setBase({ ...p.current().base, maxRounds: 7 }, 'rpc:operator', ctx);
      assert.equal(v2.version, 2);
      assert.equal(v2.setBy, 'rpc:operator');
      assert.equal(v2.setAt, clock.now());
      await store.whenDurable();
      assert.deepEqual(
        fired.map((s) => s.version),
        [2],
      );
      const events = policySets();
      assert.equal(events.length, 2);
      assert.deepEqual(events[1].details.changed, ['policy.max_rounds']);
      assert.equal(events[1].correlationId, 'corr-policy');
      assert.equal(p.version(1)!.base.maxRounds, 3, 'v1 kept');
      assert.equal(p.version(2)!.base.maxRounds, 7);
      assert.equal(p.version(3), undefined);
      assert.equal(p.effectiveFor(input()).effective.policyVersion, 'v2');

      const same = p.setBase({ ...p.current().base }, 'rpc:operator', ctx);
      assert.equal(same.version, 2, 'an unchanged policy writes nothing');
      assert.equal(policySets().length, 2);

      const high = p.current().profiles.find((x) => x.name === 'HIGH')!.policy;
      const v3 = p.setProfiles(
        [
          { name: 'HIGH', policy: { ...high, maxRounds: 6 } },
          { name: 'custom', policy: p.current().base },
        ],
        'rpc:operator',
        ctx,
      );
      assert.equal(v3.version, 3);
      assert.deepEqual(
        v3.profiles.map((x) => x.name),
        ['LOWEST', 'LOW', 'MEDIUM', 'HIGH', 'HIGHEST', 'custom'],
        'replaced in place, new appended, none removed',
      );
      assert.equal(v3.profiles.find((x) => x.name === 'HIGH')!.policy.maxRounds, 6);
      assert.deepEqual(policySets()[2].details.changed, ['profiles.HIGH.max_rounds', 'profiles.custom']);
    });

    it('settings at construction: a fresh store starts from them (set_by settings); equal settings write nothing; changed ones win', () => {
      const settings: PolicySettings = {
        base: { maxRounds: 4, scoring: { llmWeight: 0 } },
        room: { minScoreThreshold: 8 },
        tieBreak: 'abort',
      };
      const first = open(settings).current();
      assert.equal(first.version, 1);
      assert.equal(first.setBy, 'settings');
      assert.equal(first.base.maxRounds, 4);
      assert.equal(first.base.scoring.llmWeight, 0);
      assert.equal(first.base.scoring.requireSchemaValid, true, 'scoring fields not named keep theirs');
      assert.equal(first.room.minScoreThreshold, 8);
      assert.equal(first.tieBreak, 'abort');

      const again = reopen(settings).current();
      assert.equal(again.version, 1, 'equal settings: nothing written');
      assert.equal(policySets().length, 1);

      const p = reopen({ ...settings, base: { maxRounds: 6 } });
      assert.equal(p.current().version, 2);
      assert.equal(p.current().setBy, 'settings');
      assert.equal(p.current().base.maxRounds, 6);
      assert.equal(p.current().room.minScoreThreshold, 8);
    });

    it('an RPC change survives reopening the store, and stays while no setting names the field', () => {
      const p = open({ tieBreak: 'abort' });
      p.setBase({ ...p.current().base, scoreThreshold: 0.75 }, 'rpc:operator', ctx);
      const q = reopen({ tieBreak: 'abort' });
      assert.equal(q.current().version, 2);
      assert.equal(q.current().base.scoreThreshold, 0.75);
      assert.equal(q.version(1)!.base.scoreThreshold, 0.7);
      const r = reopen({ tieBreak: 'abort', base: { scoreThreshold: 0.8 } });
      assert.equal(r.current().version, 3, 'a setting naming the field wins');
      assert.equal(r.current().base.scoreThreshold, 0.8);
    });

    it('applySettings writes a version only when something differs', () => {
      const p = open();
      assert.equal(p.applySettings({}, ctx).version, 1);
      assert.equal(p.applySettings({ room: { minScoreThreshold: 7.0 } }, ctx).version, 1, 'the same value');
      const v2 = p.applySettings(
        { room: { autoApprove: false }, debateTimeoutMs: { HIGH: 120_000 }, guardrails: { maxRounds: { max: 30 } } },
        ctx,
      );
      assert.equal(v2.version, 2);
      assert.equal(v2.room.autoApprove, false);
      assert.equal(v2.debateTimeoutMs.HIGH, 120_000);
      assert.deepEqual(v2.guardrails.maxRounds, { min: 1, max: 30 });
      assert.deepEqual(policySets()[1].details.changed, [
        'debate_timeout_ms.HIGH',
        'guardrails.max_rounds',
        'room.auto_approve',
      ]);
      assert.equal(policySets()[1].details.set_by, 'settings');
    });

    it('bad settings at construction are refused as a whole, logged, and the stored version stays', () => {
      open();
      const p = reopen({ base: { maxRounds: 500 }, tieBreak: 'abort' });
      assert.equal(p.current().version, 1);
      assert.equal(p.current().tieBreak, 'hitl');
      assert.match(p.settingsRefusal ?? '', /^policy\.max_rounds: must be within 1\.\.20/);
      assert.equal(log.query({ eventType: 'negotiation.policy_settings_refused' }).length, 1);
      const q = reopen({ proposalSchemas: [{ topic: '**', schema: '{"type":"object","required":["endpoint"]}' }] });
      assert.match(q.settingsRefusal ?? '', /^proposal_schemas\[0\]\.schema: does not compile: strict mode/);
      assert.deepEqual(q.current().proposalSchemas, []);
    });

    it('the RFC §17.5 escalation thresholds (MUST) may only be made stricter: confidence ≥ 0.3, std dev ≤ 3.0', () => {
      open();
      const low = reopen({ room: { escalateBelowConfidence: 0.1 } });
      assert.equal(low.current().version, 1);
      assert.match(
        low.settingsRefusal ?? '',
        /^room\.escalate_below_confidence: must be within 0\.3\.\.1 \(RFC §17\.5 MUST: .*stricter.*\), not 0\.1/,
      );
      const wide = reopen({ room: { escalateAboveStdDev: 5 } });
      assert.equal(wide.current().version, 1);
      assert.match(
        wide.settingsRefusal ?? '',
        /^room\.escalate_above_std_dev: must be within 0\.\.3 \(RFC §17\.5 MUST: .*stricter.*\), not 5/,
      );
      const strict = reopen({ room: { escalateBelowConfidence: 0.5, escalateAboveStdDev: 2 } });
      assert.equal(strict.settingsRefusal, undefined);
      assert.deepEqual(
        [strict.current().room.escalateBelowConfidence, strict.current().room.escalateAboveStdDev],
        [0.5, 2],
      );
    });
  });

  describe('refusals name the proto field', () => {
    const policy = (over: Partial<NegotiationPolicy>): NegotiationPolicy => ({
      ...DEFAULT_PROFILES[2].policy,
      ...over,
    });

    it('setBase', () => {
      const p = open();
      const cases: Array<[Partial<NegotiationPolicy>, RegExp]> = [
        [{ scoreThreshold: 1.5 }, /^policy\.score_threshold: must be within 0\.3\.\.1 \(the guardrails\), not 1\.5$/],
        [{ maxRounds: 2.5 }, /^policy\.max_rounds: must be a whole number/],
        [{ maxRounds: 0 }, /^policy\.max_rounds: must be within 1\.\.20/],
        [{ diffTolerance: 0.9 }, /^policy\.diff_tolerance: /],
        [{ roundTimeoutMs: 100 }, /^policy\.round_timeout_ms: /],
        [{ tokenBudgetPerRound: 0 }, /^policy\.token_budget_per_round: /],
        [{ totalTokenBudget: 10 }, /^policy\.total_token_budget: /],
        [{ oscillationLimit: 11 }, /^policy\.oscillation_limit: /],
        [
          { hitl: 'Always' as never },
          /^policy\.hitl\.mode: must be one of None, PauseBetweenRounds, PauseOnFinalAccept/,
        ],
        [
          { scoring: { requireSchemaValid: true, requireExamplesPass: false, llmWeight: 2 } },
          /^policy\.scoring\.llm_weight: must be within 0\.\.1/,
        ],
      ];
      for (const [over, pattern] of cases)
        assert.match(refusal(() => p.setBase(policy(over), 'rpc:operator', ctx)).message, pattern);
      assert.equal(
        p.setBase(policy({ totalTokenBudget: 0 }), 'rpc:operator', ctx).base.totalTokenBudget,
        0,
        'total_token_budget 0 = unset',
      );
      assert.equal(p.current().version, 2, 'nothing written for a refusal');
    });

    it('setProfiles: names bounded, no duplicates, each policy checked', () => {
      const p = open();
      assert.match(
        refusal(() => p.setProfiles([{ name: '', policy: policy({}) }], 'x', ctx)).message,
        /^profiles\[0\]\.name: must be 1\.\.64 characters/,
      );
      assert.match(
        refusal(() => p.setProfiles([{ name: 'x'.repeat(65), policy: policy({}) }], 'x', ctx)).message,
        /^profiles\[0\]\.name: /,
      );
      assert.match(
        refusal(() =>
          p.setProfiles(
            [
              { name: 'a', policy: policy({}) },
              { name: 'a', policy: policy({}) },
            ],
            'x',
            ctx,
          ),
        ).message,
        /^profiles\[1\]\.name: 'a' is named twice/,
      );
      assert.match(
        refusal(() =>
          p.setProfiles(
            [
              { name: 'ok', policy: policy({}) },
              { name: 'HIGH', policy: policy({ scoreThreshold: -1 }) },
            ],
            'x',
            ctx,
          ),
        ).message,
        /^profiles\[1\]\.policy\.score_threshold: /,
      );
      assert.equal(p.current().version, 1);
    });

    it('settings: room thresholds, guardrails, tie-break, schemas that do not compile', () => {
      const p = open();
      assert.match(
        refusal(() => p.applySettings({ room: { minScoreThreshold: 11 } }, ctx)).message,
        /^room\.min_score_threshold: must be within 0\.\.10/,
      );
      assert.match(
        refusal(() => p.applySettings({ room: { minPassRatio: 1.2 } }, ctx)).message,
        /^room\.min_pass_ratio: /,
      );
      assert.match(
        refusal(() => p.applySettings({ room: { voteTimeoutMs: 0 } }, ctx)).message,
        /^room\.vote_timeout_ms: /,
      );
      assert.match(
        refusal(() => p.applySettings({ guardrails: { maxRounds: { min: 5, max: 2 } } }, ctx)).message,
        /^guardrails\.max_rounds: min 5 is above max 2/,
      );
      assert.match(
        refusal(() => p.applySettings({ guardrails: { maxRounds: { max: 2 } } }, ctx)).message,
        /^policy\.max_rounds: must be within 1\.\.2 \(the guardrails\), not 3/,
        'the base must fit new guardrails',
      );
      assert.match(refusal(() => p.applySettings({ tieBreak: 'coin' as never }, ctx)).message, /^tie_break: /);
      assert.match(
        refusal(() => p.applySettings({ debateTimeoutMs: { NOPE: 60_000 } }, ctx)).message,
        /^debate_timeout_ms\.NOPE: names no profile/,
      );
      assert.match(
        refusal(() => p.applySettings({ proposalSchemas: [{ topic: 'x', schema: '{"type":"objekt"}' }] }, ctx)).message,
        /^proposal_schemas\[0\]\.schema: does not compile: /,
      );
      assert.match(
        refusal(() => p.applySettings({ proposalSchemas: [{ topic: 'x', schema: 'not json' }] }, ctx)).message,
        /^proposal_schemas\[0\]\.schema: does not compile: /,
      );
      assert.match(
        refusal(() => p.applySettings({ proposalSchemas: [{ topic: '', schema: '{}' }] }, ctx)).message,
        /^proposal_schemas\[0\]\.topic: /,
      );
      assert.equal(p.current().version, 1, 'nothing written');
    });
  });

  describe('review fixes', () => {
    it('a settings change lays only the fields that changed: an RPC change to a field no changed setting names stays', () => {
      const start: PolicySettings = { base: { scoreThreshold: 0.8 } };
      const p = open(start);
      assert.equal(p.current().base.scoreThreshold, 0.8);
      const rpc = p.setBase({ ...p.current().base, scoreThreshold: 0.9 }, 'rpc:operator', ctx);
      const edited = p.applySettings({ ...start, room: { minPassRatio: 0.9 } }, ctx);
      assert.equal(edited.version, rpc.version + 1);
      assert.equal(
        edited.base.scoreThreshold,
        0.9,
        'the gRPC change stays: the score_threshold setting did not change',
      );
      assert.equal(edited.room.minPassRatio, 0.9);
      assert.deepEqual(policySets().at(-1)!.details.changed, ['room.min_pass_ratio']);
      const again = p.applySettings({ base: { scoreThreshold: 0.85 }, room: { minPassRatio: 0.9 } }, ctx);
      assert.equal(again.base.scoreThreshold, 0.85, 'the setting naming the field changed: it wins');
      // A refused change leaves the settings last applied as they were: the next one still compares with them.
      refusal(() =>
        p.applySettings({ base: { scoreThreshold: 0.85, maxRounds: 500 }, room: { minPassRatio: 0.9 } }, ctx),
      );
      p.setBase({ ...p.current().base, scoreThreshold: 0.95 }, 'rpc:operator', ctx);
      assert.equal(
        p.applySettings({ base: { scoreThreshold: 0.85, maxRounds: 4 }, room: { minPassRatio: 0.9 } }, ctx).base
          .scoreThreshold,
        0.95,
      );
    });

    it('refuses topic globs that are slow to match, naming the field; a safe glob still matches; long topics match none', () => {
      const p = open();
      const hostile: Array<[string, RegExp]> = [
        ['*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b', /wildcards \(\* or \?\) in one path segment; at most 3/],
        ['*-*-*-*.json', /in one path segment; at most 3/],
        ['*?*?*?*b', /in one path segment; at most 3/],
        ['*a*/**/*a*b', /holds 5 wildcards \(\* or \?\); at most 4/],
        ['+(a|b)/x', /extglobs/],
        ['api/@(x|y)', /extglobs/],
        ['{a,{b,c}}', /nest braces/],
        ['{a,b}/{c,d}/{e,f}', /more than 2 brace groups/],
        ['{a,b,c,d,e,f,g,h,i}', /more than 8 alternatives/],
        ['v{1..2000}', /brace ranges/],
      ];
      for (const [glob, why] of hostile) {
        const err = refusal(() =>
          p.applySettings(
            {
              proposalSchemas: [
                { topic: 'ok/*', schema: '{}' },
                { topic: glob, schema: '{}' },
              ],
            },
            ctx,
          ),
        );
        assert.match(err.message, /^proposal_schemas\[1\]\.topic: /, glob);
        assert.match(err.message, why, glob);
      }
      assert.equal(p.current().version, 1);
      const warned = parsePolicySettings({ proposalSchemas: [{ topic: '*-*-*-*.json', schema: {} }] });
      assert.deepEqual(warned.settings.proposalSchemas, []);
      assert.match(warned.warnings[0], /^sw4rm\.negotiation\.proposalSchemas\[0\]\.topic: holds 4 wildcards/);

      p.applySettings(
        {
          proposalSchemas: [
            { topic: 'api/**', schema: '{"type":"object"}' },
            { topic: '{docs,plan}/*.md', schema: '{"type":"array"}' },
          ],
        },
        ctx,
      );
      assert.equal(p.schemaFor('api/design/v2'), '{"type":"object"}');
      assert.equal(p.schemaFor('plan/x.md'), '{"type":"array"}');
      assert.equal(p.schemaFor('other'), '');
      assert.equal(p.schemaFor(`api/${'x'.repeat(252)}`), '{"type":"object"}', '256 characters: matched');
      assert.equal(p.schemaFor(`api/${'x'.repeat(253)}`), '', 'longer than 256 characters: no glob is matched');
      assert.equal(p.effectiveFor(input({ topic: 'api/design' })).schema, '{"type":"object"}');
      assert.equal(
        p.effectiveFor(input({ topic: undefined })).schema,
        '',
        'no topic (Open brought its own schema): no lookup',
      );
    });

    it('compiles each proposal schema text once: a change of another field does not compile them again', () => {
      const p = open();
      const unique = `${Date.now()}-${Math.random()}`;
      const schemas = [0, 1, 2].map((i) => ({
        topic: `t${i}/**`,
        schema: JSON.stringify({ type: 'object', description: `${unique}-${i}` }),
      }));
      const original = Ajv.prototype.compile;
      let compiles = 0;
      Ajv.prototype.compile = function (this: Ajv, ...args: Parameters<Ajv['compile']>) {
        compiles++;
        return original.apply(this, args);
      } as Ajv['compile'];
      try {
        const parsed = parsePolicySettings({
          proposalSchemas: schemas.map((s) => ({ topic: s.topic, schema: JSON.parse(s.schema) as object })),
        });
        assert.equal(parsed.warnings.length, 0);
        p.applySettings(parsed.settings, ctx);
        assert.ok(compiles <= 3, `each text compiled at most once (${compiles})`);
        const before = compiles;
        p.setBase({ ...p.current().base, maxRounds: 4 }, 'rpc:operator', ctx);
        p.applySettings(
          {
            ...parsePolicySettings({ proposalSchemas: schemas.map((s) => ({ topic: s.topic, schema: s.schema })) })
              .settings,
            room: { minPassRatio: 0.5 },
          },
          ctx,
        );
        p.setProfiles([{ name: 'custom', policy: p.current().base }], 'rpc:operator', ctx);
        assert.equal(p.current().version, 5);
        assert.equal(compiles, before, 'no schema compiled again');
        p.applySettings(
          {
            proposalSchemas: [
              ...schemas,
              { topic: 'new/**', schema: JSON.stringify({ type: 'object', description: `${unique}-new` }) },
            ],
          },
          ctx,
        );
        assert.equal(compiles, before + 1, 'only the new text is compiled');
      } finally {
        Ajv.prototype.compile = original;
      }
      const big = (i: number) => ({
        topic: `big${i}`,
        schema: JSON.stringify({ type: 'object', description: 'x'.repeat(60_000) }),
      });
      assert.match(
        refusal(() => p.applySettings({ proposalSchemas: [0, 1, 2, 3, 4].map(big) }, ctx)).message,
        /^proposal_schemas: holds more than 256 KiB of schemas in all$/,
      );
    });

    it('profile names that are Object.prototype keys: constructor and toString work, __proto__ is refused', () => {
      const p = open();
      const base = p.current().base;
      const set = p.setProfiles(
        [
          { name: 'constructor', policy: { ...base, maxRounds: 6 } },
          { name: 'toString', policy: base },
        ],
        'rpc:operator',
        ctx,
      );
      assert.deepEqual(Object.keys(set.debateTimeoutMs).sort(), ['HIGH', 'HIGHEST', 'LOW', 'LOWEST', 'MEDIUM']);
      for (const name of ['constructor', 'toString']) {
        const { effective } = p.effectiveFor(input({ profileHint: name }));
        assert.equal(effective.profile, name);
        assert.equal(effective.debateTimeoutMs, set.baseDebateTimeoutMs, `${name}: the base debate time limit`);
      }
      const timed = p.applySettings({ debateTimeoutMs: { constructor: 120_000 } }, ctx);
      assert.equal(timed.debateTimeoutMs.constructor, 120_000);
      assert.equal(p.effectiveFor(input({ profileHint: 'constructor' })).effective.debateTimeoutMs, 120_000);
      assert.match(
        refusal(() => p.setProfiles([{ name: '__proto__', policy: base }], 'rpc:operator', ctx)).message,
        /^profiles\[0\]\.name: must be 1\.\.64 characters/,
      );
      const parsed = parsePolicySettings(
        JSON.parse(
          '{"profiles": {"__proto__": {"max_rounds": 2}, "constructor": {"max_rounds": 2, "debate_timeout_ms": 60000}}}',
        ) as object,
      );
      assert.deepEqual(parsed.settings.profiles, [{ name: 'constructor', policy: { maxRounds: 2 } }]);
      assert.equal(parsed.settings.debateTimeoutMs?.constructor, 60_000);
      assert.match(parsed.warnings[0], /profiles\["__proto__"\] is not a profile name/);
      const reopened = reopen();
      assert.equal(
        reopened.effectiveFor(input({ profileHint: 'constructor' })).effective.debateTimeoutMs,
        120_000,
        'read back from the store',
      );
    });
  });
});
