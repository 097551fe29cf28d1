import { strict as assert } from 'node:assert';
import { ManualClock } from '../../src/core/clock';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { EventLog } from '../../src/core/log/eventLog';
import { DEFAULT_GUARDRAILS, DEFAULT_PROFILES, MAX_DEBATE_TIMEOUT_MS } from '../../src/core/policy/defaults';
import type { NegotiationPolicy, PolicySet } from '../../src/core/policy/model';
import { NegotiationPolicies, type EffectiveInput, type PolicySettings } from '../../src/core/policy/policies';
import { NegotiationError } from '../../src/core/policy/speaker';
import { makeTempDir, removeTempDir } from '../support/tempDir';

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
  let dataDir: string;
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
    store.close();
    store = CoordinatorStore.open(dataDir);
    log = new EventLog(store, clock);
    return open(settings);
  };
  const policySets = () => log.query({ eventType: 'negotiation.policy_set' });

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-negotiation-policy-');
    store = CoordinatorStore.open(dataDir);
    clock = new ManualClock();
    log = new EventLog(store, clock);
  });

  afterEach(() => {
    for (const p of opened.splice(0)) p.dispose();
    store.close();
    removeTempDir(dataDir);
  });

  describe('defaults', () => {
    it('a fresh store gets version 1 from the defaults: base, five profiles, guardrails, room thresholds, tie-break', () => {
      const p = open();
      const set = p.current();
      assert.equal(set.version, 1);
      assert.equal(set.setBy, 'default');
      assert.deepEqual(set.profiles.map((x) => x.name), ['LOWEST', 'LOW', 'MEDIUM', 'HIGH', 'HIGHEST']);
      assert.deepEqual(set.base, DEFAULT_PROFILES[2].policy, 'the base policy is MEDIUM\'s');
      assert.deepEqual(set.room, {
        minScoreThreshold: 7.0, minConfidenceThreshold: 0.7, minPassRatio: 0.8, maxStdDev: 2.0,
        escalateBelowConfidence: 0.3, escalateAboveStdDev: 3.0, voteTimeoutMs: 15 * 60_000, autoApprove: true,
      });
      assert.equal(set.tieBreak, 'hitl');
      assert.deepEqual(set.proposalSchemas, []);
      assert.deepEqual(set.guardrails, DEFAULT_GUARDRAILS);
      const events = policySets();
      assert.equal(events.length, 1, 'one negotiation.policy_set');
      assert.deepEqual([events[0].details.version, events[0].details.set_by, events[0].details.policy_version], [1, 'default', 'v1']);
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
    it('takes the intensity\'s profile, its debate time limit and the version', () => {
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
      p.setProfiles([{ name: 'security-review', policy: { ...p.current().base, maxRounds: 9, scoreThreshold: 0.95 } }], 'rpc:operator', ctxRpc);
      const hinted = p.effectiveFor(input({ intensity: 'LOW', profileHint: 'security-review' })).effective;
      assert.equal(hinted.profile, 'security-review');
      assert.equal(hinted.policy.maxRounds, 9);
      assert.equal(hinted.debateTimeoutMs, p.current().baseDebateTimeoutMs, 'a profile without its own time limit: the base one');
      assert.equal(p.effectiveFor(input({ intensity: 'LOW', profileHint: 'highest' })).effective.profile, 'HIGHEST', 'case-insensitive');
      assert.equal(p.effectiveFor(input({ intensity: 'LOW', profileHint: 'nope' })).effective.profile, 'LOW');
    });

    it('clamps each agent\'s preferences into the guardrails; per field the most restrictive stated value wins', () => {
      const p = open();
      const { effective } = p.effectiveFor(input({
        intensity: 'MEDIUM',
        preferences: {
          alice: { maxRounds: 50, scoreThreshold: 0.1, diffTolerance: 0.9, roundTimeoutMs: 10, tokenBudgetPerRound: 100_000, totalTokenBudget: 10, oscillationLimit: 4 },
          bob: { maxRounds: 4, scoreThreshold: 0.85, diffTolerance: 0.3, roundTimeoutMs: 99_999_999, tokenBudgetPerRound: 1_000_000, oscillationLimit: 0 },
          carol: {},
        },
      }));
      assert.deepEqual(effective.applied.alice, {
        maxRounds: 20, scoreThreshold: 0.3, diffTolerance: 0.5, roundTimeoutMs: 5_000, tokenBudgetPerRound: 100_000, totalTokenBudget: 1_024, oscillationLimit: 4,
      });
      assert.deepEqual(effective.applied.bob, {
        maxRounds: 4, scoreThreshold: 0.85, diffTolerance: 0.3, roundTimeoutMs: 3_600_000, tokenBudgetPerRound: 131_072, totalTokenBudget: 0, oscillationLimit: 0,
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
      assert.match(refusal(() => p.effectiveFor(input({ preferences: { bob: { scoreThreshold: Number.NaN } } }))).message, /^preferences\.bob\.score_threshold: /);
    });

    it('Open\'s debate_timeout wins, clamped to the maximum', () => {
      const p = open();
      assert.equal(p.effectiveFor(input({ intensity: 'LOW', debateTimeoutMs: 42_000 })).effective.debateTimeoutMs, 42_000);
      assert.equal(p.effectiveFor(input({ intensity: 'LOW', debateTimeoutMs: MAX_DEBATE_TIMEOUT_MS * 3 })).effective.debateTimeoutMs, MAX_DEBATE_TIMEOUT_MS);
    });

    it('finds the proposal schema by topic glob (the first match), none when nothing matches', () => {
      const p = open({
        proposalSchemas: [
          { topic: 'api/**', schema: '{"type":"object","properties":{"endpoint":{"type":"string"}},"required":["endpoint"]}' },
          { topic: '**', schema: '{"type":"object"}' },
        ],
      });
      assert.equal(p.settingsRefusal, undefined);
      assert.equal(p.effectiveFor(input({ topic: 'api/v1/users' })).schema, '{"type":"object","properties":{"endpoint":{"type":"string"}},"required":["endpoint"]}');
      assert.equal(p.effectiveFor(input({ topic: 'plan' })).schema, '{"type":"object"}');
      const q = reopen({ proposalSchemas: [{ topic: 'api/*', schema: '{"type":"object"}' }] });
      assert.equal(q.effectiveFor(input({ topic: 'ui/button' })).schema, '');
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
      assert.deepEqual(fired.map((s) => s.version), [2]);
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
      const v3 = p.setProfiles([{ name: 'HIGH', policy: { ...high, maxRounds: 6 } }, { name: 'custom', policy: p.current().base }], 'rpc:operator', ctx);
      assert.equal(v3.version, 3);
      assert.deepEqual(v3.profiles.map((x) => x.name), ['LOWEST', 'LOW', 'MEDIUM', 'HIGH', 'HIGHEST', 'custom'], 'replaced in place, new appended, none removed');
      assert.equal(v3.profiles.find((x) => x.name === 'HIGH')!.policy.maxRounds, 6);
      assert.deepEqual(policySets()[2].details.changed, ['profiles.HIGH.max_rounds', 'profiles.custom']);
    });

    it('settings at construction: a fresh store starts from them (set_by settings); equal settings write nothing; changed ones win', () => {
      const settings: PolicySettings = { base: { maxRounds: 4, scoring: { llmWeight: 0 } }, room: { minScoreThreshold: 8 }, tieBreak: 'abort' };
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
      const v2 = p.applySettings({ room: { autoApprove: false }, debateTimeoutMs: { HIGH: 120_000 }, guardrails: { maxRounds: { max: 30 } } }, ctx);
      assert.equal(v2.version, 2);
      assert.equal(v2.room.autoApprove, false);
      assert.equal(v2.debateTimeoutMs.HIGH, 120_000);
      assert.deepEqual(v2.guardrails.maxRounds, { min: 1, max: 30 });
      assert.deepEqual(policySets()[1].details.changed, ['debate_timeout_ms.HIGH', 'guardrails.max_rounds', 'room.auto_approve']);
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
  });

  describe('refusals name the proto field', () => {
    const policy = (over: Partial<NegotiationPolicy>): NegotiationPolicy => ({ ...DEFAULT_PROFILES[2].policy, ...over });

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
        [{ hitl: 'Always' as never }, /^policy\.hitl\.mode: must be one of None, PauseBetweenRounds, PauseOnFinalAccept/],
        [{ scoring: { requireSchemaValid: true, requireExamplesPass: false, llmWeight: 2 } }, /^policy\.scoring\.llm_weight: must be within 0\.\.1/],
      ];
      for (const [over, pattern] of cases) assert.match(refusal(() => p.setBase(policy(over), 'rpc:operator', ctx)).message, pattern);
      assert.equal(p.setBase(policy({ totalTokenBudget: 0 }), 'rpc:operator', ctx).base.totalTokenBudget, 0, 'total_token_budget 0 = unset');
      assert.equal(p.current().version, 2, 'nothing written for a refusal');
    });

    it('setProfiles: names bounded, no duplicates, each policy checked', () => {
      const p = open();
      assert.match(refusal(() => p.setProfiles([{ name: '', policy: policy({}) }], 'x', ctx)).message, /^profiles\[0\]\.name: must be 1\.\.64 characters/);
      assert.match(refusal(() => p.setProfiles([{ name: 'x'.repeat(65), policy: policy({}) }], 'x', ctx)).message, /^profiles\[0\]\.name: /);
      assert.match(refusal(() => p.setProfiles([{ name: 'a', policy: policy({}) }, { name: 'a', policy: policy({}) }], 'x', ctx)).message, /^profiles\[1\]\.name: 'a' is named twice/);
      assert.match(refusal(() => p.setProfiles([{ name: 'ok', policy: policy({}) }, { name: 'HIGH', policy: policy({ scoreThreshold: -1 }) }], 'x', ctx)).message, /^profiles\[1\]\.policy\.score_threshold: /);
      assert.equal(p.current().version, 1);
    });

    it('settings: room thresholds, guardrails, tie-break, schemas that do not compile', () => {
      const p = open();
      assert.match(refusal(() => p.applySettings({ room: { minScoreThreshold: 11 } }, ctx)).message, /^room\.min_score_threshold: must be within 0\.\.10/);
      assert.match(refusal(() => p.applySettings({ room: { minPassRatio: 1.2 } }, ctx)).message, /^room\.min_pass_ratio: /);
      assert.match(refusal(() => p.applySettings({ room: { voteTimeoutMs: 0 } }, ctx)).message, /^room\.vote_timeout_ms: /);
      assert.match(refusal(() => p.applySettings({ guardrails: { maxRounds: { min: 5, max: 2 } } }, ctx)).message, /^guardrails\.max_rounds: min 5 is above max 2/);
      assert.match(refusal(() => p.applySettings({ guardrails: { maxRounds: { max: 2 } } }, ctx)).message, /^policy\.max_rounds: must be within 1\.\.2 \(the guardrails\), not 3/, 'the base must fit new guardrails');
      assert.match(refusal(() => p.applySettings({ tieBreak: 'coin' as never }, ctx)).message, /^tie_break: /);
      assert.match(refusal(() => p.applySettings({ debateTimeoutMs: { NOPE: 60_000 } }, ctx)).message, /^debate_timeout_ms\.NOPE: names no profile/);
      assert.match(refusal(() => p.applySettings({ proposalSchemas: [{ topic: 'x', schema: '{"type":"objekt"}' }] }, ctx)).message, /^proposal_schemas\[0\]\.schema: does not compile: /);
      assert.match(refusal(() => p.applySettings({ proposalSchemas: [{ topic: 'x', schema: 'not json' }] }, ctx)).message, /^proposal_schemas\[0\]\.schema: does not compile: /);
      assert.match(refusal(() => p.applySettings({ proposalSchemas: [{ topic: '', schema: '{}' }] }, ctx)).message, /^proposal_schemas\[0\]\.topic: /);
      assert.equal(p.current().version, 1, 'nothing written');
    });
  });
});
