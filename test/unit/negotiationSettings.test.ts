import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { ManualClock } from '../../src/core/clock';
import { Coordinator } from '../../src/core/coordinator';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { PolicySet } from '../../src/core/policy/model';
import type { PolicySettings } from '../../src/core/policy/policies';
import { SETTINGS_SECTION, Settings } from '../../src/extension/contributions';
import {
  negotiationOptionsOf,
  negotiationSettings,
  NegotiationSettingsFollower,
  type NegotiationSettingValues,
} from '../../src/extension/negotiationSettings';
import { REPO_ROOT } from '../support/paths';
import { makeTempDir, removeTempDir } from '../support/tempDir';

describe('sw4rm.negotiation.* settings', () => {
  it('reads every group with proto field names into PolicySettings', () => {
    const read = negotiationSettings({
      basePolicy: {
        max_rounds: 4,
        score_threshold: 0.8,
        diff_tolerance: 0.05,
        round_timeout_ms: 60_000,
        token_budget_per_round: 1000,
        total_token_budget: 0,
        oscillation_limit: 2,
        hitl: 'pausebetweenrounds',
        scoring: { require_schema_valid: false, llm_weight: 0.5 },
        debate_timeout_ms: 600_000,
      },
      profiles: {
        HIGH: { max_rounds: 6, debate_timeout_ms: 120_000 },
        'security-review': { score_threshold: 0.95, hitl: { mode: 'PauseOnFinalAccept' } },
      },
      guardrails: { max_rounds: { max: 12 }, score_threshold: { min: 0.5, max: 1 } },
      room: { min_score_threshold: 8, min_pass_ratio: 1, vote_timeout_ms: 60_000, auto_approve: false },
      tieBreak: 'highest_score',
      proposalSchemas: [
        { topic: 'api/**', schema: { type: 'object', properties: { endpoint: { type: 'string' } } } },
        { topic: 'plan', schema: '{"type":"object"}' },
      ],
    });
    assert.deepEqual(read.warnings, []);
    assert.deepEqual(read.settings, {
      base: {
        maxRounds: 4,
        scoreThreshold: 0.8,
        diffTolerance: 0.05,
        roundTimeoutMs: 60_000,
        tokenBudgetPerRound: 1000,
        totalTokenBudget: 0,
        oscillationLimit: 2,
        hitl: 'PauseBetweenRounds',
        scoring: { requireSchemaValid: false, llmWeight: 0.5 },
      },
      baseDebateTimeoutMs: 600_000,
      profiles: [
        { name: 'HIGH', policy: { maxRounds: 6 } },
        { name: 'security-review', policy: { scoreThreshold: 0.95, hitl: 'PauseOnFinalAccept' } },
      ],
      debateTimeoutMs: { HIGH: 120_000 },
      guardrails: { maxRounds: { max: 12 }, scoreThreshold: { min: 0.5, max: 1 } },
      room: { minScoreThreshold: 8, minPassRatio: 1, voteTimeoutMs: 60_000, autoApprove: false },
      tieBreak: 'highest_score',
      proposalSchemas: [
        { topic: 'api/**', schema: '{"type":"object","properties":{"endpoint":{"type":"string"}}}' },
        { topic: 'plan', schema: '{"type":"object"}' },
      ],
    });
    assert.deepEqual(negotiationOptionsOf(read), read.settings);
  });

  it('the defaults as the editor reads them (empty objects, tieBreak hitl, no schemas) name nothing but those two', () => {
    const read = negotiationSettings({
      basePolicy: {},
      profiles: {},
      guardrails: {},
      room: {},
      tieBreak: 'hitl',
      proposalSchemas: [],
    });
    assert.deepEqual(read, { settings: { tieBreak: 'hitl', proposalSchemas: [] }, warnings: [] });
    assert.deepEqual(negotiationSettings({}), { settings: {}, warnings: [] });
  });

  it('leaves out each bad value, naming it; the rest applies', () => {
    const read = negotiationSettings({
      basePolicy: {
        max_rounds: 2.5,
        score_threshold: 3,
        hitl: 'Sometimes',
        scoring: { llm_weight: 'x', require_examples_pass: 1, bogus: true },
        color: 'red',
        oscillation_limit: 2,
      },
      profiles: {
        'bad name!': { max_rounds: 2 },
        LOW: 'fast',
        HIGHEST: { round_timeout_ms: -5, debate_timeout_ms: 10 },
      },
      guardrails: { max_rounds: { min: 0 }, speed: { min: 1 }, oscillation_limit: 3 },
      room: { min_score_threshold: 11, auto_approve: 'yes', quorum: 3, max_std_dev: 1.5 },
      tieBreak: 'coin',
      proposalSchemas: [
        { topic: 'x', schema: { type: 'objekt' } },
        { topic: 'y', schema: 5 },
        'z',
        { topic: '', schema: {} },
        { topic: 'ok/*', schema: {} },
      ],
    });
    assert.deepEqual(read.settings, {
      base: { oscillationLimit: 2 },
      profiles: [{ name: 'HIGHEST', policy: {} }],
      room: { maxStdDev: 1.5 },
      proposalSchemas: [{ topic: 'ok/*', schema: '{}' }],
    });
    const expected = [
      /^sw4rm\.negotiation\.basePolicy\.max_rounds is not a whole number \(2\.5\); ignored\.$/,
      /^sw4rm\.negotiation\.basePolicy\.score_threshold is outside 0\.\.1 \(3\); ignored\.$/,
      /^sw4rm\.negotiation\.basePolicy\.hitl is not one of None, PauseBetweenRounds, PauseOnFinalAccept/,
      /^sw4rm\.negotiation\.basePolicy\.scoring\.llm_weight is not a number/,
      /^sw4rm\.negotiation\.basePolicy\.scoring\.require_examples_pass is not true or false/,
      /^sw4rm\.negotiation\.basePolicy\.scoring\.bogus is not a scoring field/,
      /^sw4rm\.negotiation\.basePolicy\.color is not a policy field/,
      /^sw4rm\.negotiation\.profiles\["bad name!"\] is not a profile name/,
      /^sw4rm\.negotiation\.profiles\["LOW"\] is not an object of policy fields/,
      /^sw4rm\.negotiation\.profiles\["HIGHEST"\]\.round_timeout_ms is outside 1000\.\./,
      /^sw4rm\.negotiation\.profiles\["HIGHEST"\]\.debate_timeout_ms is outside 1000\.\./,
      /^sw4rm\.negotiation\.guardrails\.max_rounds\.min is outside 1\.\.1000 \(0\)/,
      /^sw4rm\.negotiation\.guardrails\.speed is not a policy field with guardrails/,
      /^sw4rm\.negotiation\.guardrails\.oscillation_limit is not \{min, max\}/,
      /^sw4rm\.negotiation\.room\.min_score_threshold is outside 0\.\.10 \(11\)/,
      /^sw4rm\.negotiation\.room\.auto_approve is not true or false/,
      /^sw4rm\.negotiation\.room\.quorum is not a room threshold/,
      /^sw4rm\.negotiation\.tieBreak is not one of hitl, highest_score, abort \('coin'\)/,
      /^sw4rm\.negotiation\.proposalSchemas\[0\]\.schema: does not compile: .*; ignored\.$/,
      /^sw4rm\.negotiation\.proposalSchemas\[1\]\.schema is not a JSON Schema/,
      /^sw4rm\.negotiation\.proposalSchemas\[2\] is not \{topic, schema\}/,
      /^sw4rm\.negotiation\.proposalSchemas\[3\]\.topic: must be a non-empty topic glob; ignored\.$/,
    ];
    assert.equal(read.warnings.length, expected.length, read.warnings.join('\n'));
    expected.forEach((pattern, i) => assert.match(read.warnings[i], pattern));
    for (const [name, value] of [
      ['basePolicy', 5],
      ['profiles', []],
      ['guardrails', 'x'],
      ['room', null],
      ['proposalSchemas', {}],
    ] as const) {
      const one = negotiationSettings({ [name]: value } as NegotiationSettingValues);
      assert.deepEqual(one.settings, {});
      assert.match(one.warnings[0], new RegExp(`^sw4rm\\.negotiation\\.${name} is not `));
    }
  });

  it('declares each setting in package.json with the keys the code reads', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      contributes: { configuration: { properties: Record<string, { default?: unknown; enum?: string[] }> } };
    };
    const props = manifest.contributes.configuration.properties;
    const keys = [
      Settings.negotiationBasePolicy,
      Settings.negotiationProfiles,
      Settings.negotiationGuardrails,
      Settings.negotiationRoom,
      Settings.negotiationTieBreak,
      Settings.negotiationProposalSchemas,
    ];
    for (const key of keys) assert.ok(props[`${SETTINGS_SECTION}.${key}`], key);
    assert.deepEqual(props['sw4rm.negotiation.tieBreak'].enum, ['hitl', 'highest_score', 'abort']);
    // The declared defaults read as "nothing set" (no field laid over the stored policy).
    const defaults = negotiationSettings({
      basePolicy: props['sw4rm.negotiation.basePolicy'].default,
      profiles: props['sw4rm.negotiation.profiles'].default,
      guardrails: props['sw4rm.negotiation.guardrails'].default,
      room: props['sw4rm.negotiation.room'].default,
      tieBreak: props['sw4rm.negotiation.tieBreak'].default,
      proposalSchemas: props['sw4rm.negotiation.proposalSchemas'].default,
    });
    assert.deepEqual(defaults, { settings: { tieBreak: 'hitl', proposalSchemas: [] }, warnings: [] });
  });
});

describe('NegotiationSettingsFollower: a settings change reaches the running coordinator', () => {
  it('applies at bind and on each change that differs; reports warnings and refusals; a refused apply is retried', async () => {
    let values: NegotiationSettingValues = { basePolicy: { max_rounds: 4 } };
    const calls: PolicySettings[] = [];
    const problems: string[] = [];
    let refuse: string | undefined;
    const api = {
      applyNegotiationSettings: async (s: PolicySettings) => {
        calls.push(s);
        if (refuse) throw new Error(refuse);
        return {} as PolicySet;
      },
    };
    const follower = new NegotiationSettingsFollower(
      () => negotiationSettings(values),
      (p) => problems.push(p),
    );
    await follower.settingsChanged();
    assert.equal(calls.length, 0, 'no coordinator yet');
    await follower.bind(api);
    assert.deepEqual(calls, [{ base: { maxRounds: 4 } }]);
    await follower.settingsChanged();
    assert.equal(calls.length, 1, 'the same settings are not given twice');
    values = { basePolicy: { max_rounds: 5, color: 'red' } };
    await follower.settingsChanged();
    assert.deepEqual(calls[1], { base: { maxRounds: 5 } });
    assert.match(problems[problems.length - 1], /basePolicy\.color is not a policy field/);
    refuse = 'policy.max_rounds: must be within 1..2 (the guardrails), not 6';
    values = { basePolicy: { max_rounds: 6 } };
    await follower.settingsChanged();
    assert.match(
      problems[problems.length - 1],
      /^sw4rm\.negotiation\.\* was not applied \(the policy stays as it was\): policy\.max_rounds: must be within/,
    );
    refuse = undefined;
    await follower.settingsChanged();
    assert.equal(calls.length, 4, 'a refused apply is tried again at the next change');
    await follower.bind(undefined);
    values = { basePolicy: { max_rounds: 7 } };
    await follower.settingsChanged();
    assert.equal(calls.length, 4, 'unbound: nothing sent');
  });

  it('against a real coordinator: a change is a new policy version; a refusal keeps the version and names the field', async () => {
    const dataDir = makeTempDir('sw4rm-negotiation-settings-');
    const store = CoordinatorStore.open(dataDir);
    const coordinator = new Coordinator({
      store,
      clock: new ManualClock(),
      negotiation: negotiationSettings({ tieBreak: 'abort' }).settings,
    });
    const api = new InProcessCoordinatorApi(coordinator);
    try {
      assert.equal(coordinator.policies.current().version, 1);
      assert.equal(coordinator.policies.current().setBy, 'settings', 'the settings at start are version 1');
      let values: NegotiationSettingValues = { tieBreak: 'abort' };
      const problems: string[] = [];
      const follower = new NegotiationSettingsFollower(
        () => negotiationSettings(values),
        (p) => problems.push(p),
      );
      await follower.bind(api);
      assert.equal(coordinator.policies.current().version, 1, 'the same settings at bind write nothing');
      values = { tieBreak: 'abort', room: { min_score_threshold: 8.5 } };
      await follower.settingsChanged();
      assert.equal(coordinator.policies.current().version, 2);
      assert.equal((await api.negotiationPolicy()).room.minScoreThreshold, 8.5);
      values = { tieBreak: 'abort', guardrails: { max_rounds: { max: 2 } } };
      await follower.settingsChanged();
      assert.equal(coordinator.policies.current().version, 2);
      assert.match(problems.join('\n'), /policy\.max_rounds: must be within 1\.\.2 \(the guardrails\), not 3/);
    } finally {
      api.dispose();
      coordinator.dispose();
      store.close();
      removeTempDir(dataDir);
    }
  });

  it('editing one setting does not undo a gRPC change to a field another setting names (at bind nor on change)', async () => {
    const dataDir = makeTempDir('sw4rm-negotiation-settings-');
    const store = CoordinatorStore.open(dataDir);
    let values: NegotiationSettingValues = { basePolicy: { score_threshold: 0.8 } };
    const coordinator = new Coordinator({
      store,
      clock: new ManualClock(),
      negotiation: negotiationSettings(values).settings,
    });
    const api = new InProcessCoordinatorApi(coordinator);
    try {
      const policies = coordinator.policies;
      assert.equal(policies.current().base.scoreThreshold, 0.8);
      // SetNegotiationPolicy before the follower is bound, and again after.
      policies.setBase({ ...policies.current().base, scoreThreshold: 0.85 }, 'rpc:operator', { correlationId: 'c' });
      const problems: string[] = [];
      const follower = new NegotiationSettingsFollower(
        () => negotiationSettings(values),
        (p) => problems.push(p),
      );
      await follower.bind(api);
      assert.equal(
        policies.current().base.scoreThreshold,
        0.85,
        'bind: the settings the host started with are unchanged',
      );
      const v = policies.setBase({ ...policies.current().base, scoreThreshold: 0.9 }, 'rpc:operator', {
        correlationId: 'c',
      }).version;
      values = { basePolicy: { score_threshold: 0.8 }, room: { min_pass_ratio: 0.9 } };
      await follower.settingsChanged();
      assert.equal(policies.current().version, v + 1);
      assert.equal(policies.current().base.scoreThreshold, 0.9, 'the gRPC change stays');
      assert.equal(policies.current().room.minPassRatio, 0.9);
      values = { basePolicy: { score_threshold: 0.75 }, room: { min_pass_ratio: 0.9 } };
      await follower.settingsChanged();
      assert.equal(policies.current().base.scoreThreshold, 0.75, 'the setting naming it changed: it wins');
      assert.deepEqual(problems, []);
    } finally {
      api.dispose();
      coordinator.dispose();
      store.close();
      removeTempDir(dataDir);
    }
  });
});
