import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CoordinatorHost } from '../../src/server/host';
import { bearer, CoordinatorClients, expectStatus, serviceClient, unary, type ServiceClient } from '../support/clients';
import { useCliProcesses } from '../support/cli';
import { descriptorMessage } from '../support/fixtures';
import { clientsFor, startHost, stopHost } from '../support/host';
import { RoomClient } from '../support/roomClient';
import { jsonPayload, registerRouterAgent, RouterClient, type Inbox } from '../support/routerClient';
import { makeTempDir, removeTempDir } from '../support/tempDir';

type Client = ServiceClient;

interface PolicyMessage {
  max_rounds: number;
  score_threshold: number;
  diff_tolerance: number;
  round_timeout_ms: string;
  token_budget_per_round: string;
  total_token_budget: string;
  oscillation_limit: number;
  hitl: { mode: string } | null;
  scoring: { require_schema_valid: boolean; require_examples_pass: boolean; llm_weight: number } | null;
}
interface Answer {
  ok: boolean;
  reason: string;
}

/** A policy with every field away from its default (and within the default guardrails). */
const POLICY = {
  max_rounds: 6,
  score_threshold: 0.75,
  diff_tolerance: 0.05,
  round_timeout_ms: '45000',
  token_budget_per_round: '5000',
  total_token_budget: '20000',
  oscillation_limit: 3,
  hitl: { mode: 'PauseBetweenRounds' },
  scoring: { require_schema_valid: false, require_examples_pass: true, llm_weight: 0.35 },
};

/** proto `float` carries 0.75 exactly but 0.35 only to float32's precision. */
function assertPolicy(actual: PolicyMessage, expected: typeof POLICY): void {
  const close = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) < 1e-6, `${what}: ${a} ≠ ${b}`);
  assert.equal(actual.max_rounds, expected.max_rounds);
  close(actual.score_threshold, expected.score_threshold, 'score_threshold');
  close(actual.diff_tolerance, expected.diff_tolerance, 'diff_tolerance');
  assert.deepEqual(
    [actual.round_timeout_ms, actual.token_budget_per_round, actual.total_token_budget],
    [expected.round_timeout_ms, expected.token_budget_per_round, expected.total_token_budget],
  );
  assert.equal(actual.oscillation_limit, expected.oscillation_limit);
  assert.deepEqual(actual.hitl, expected.hitl);
  assert.equal(actual.scoring?.require_schema_valid, expected.scoring.require_schema_valid);
  assert.equal(actual.scoring?.require_examples_pass, expected.scoring.require_examples_pass);
  close(actual.scoring?.llm_weight ?? NaN, expected.scoring.llm_weight, 'llm_weight');
}

/**
 * SchedulerPolicyService over real gRPC (issue 18, part 1): the operator sets and reads the base policy and the
 * profiles, refusals name the proto field, an agent credential cannot change the policy, every change is a new
 * version, and a policy set over gRPC survives a restart of the coordinator on the same store.
 */
describe('negotiation policy over real gRPC (SchedulerPolicyService)', function () {
  this.timeout(120_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let service: Client;
  let agentToken: string;

  const metadata = (token: string | undefined, correlationId?: string): grpc.Metadata =>
    bearer(token, correlationId === undefined ? {} : { 'x-correlation-id': correlationId });

  async function start(auth: 'token' | 'none' = 'token'): Promise<void> {
    host = await startHost(dataDir, { auth });
    service = serviceClient(`127.0.0.1:${host.port}`, 'sw4rm.scheduler.SchedulerPolicyService');
  }

  async function stop(): Promise<void> {
    service?.close();
    await stopHost(host);
  }

  /** `token` undefined: the operator's; null: none at all. */
  const call = <T>(method: string, request: unknown, token?: string | null, correlationId?: string) =>
    unary<T>(
      service,
      method,
      request,
      metadata(token === undefined ? host.token : (token ?? undefined), correlationId),
    );
  const getPolicy = (token?: string | null) =>
    call<{ policy: PolicyMessage }>('GetNegotiationPolicy', {}, token).then((r) => r.policy);
  const listProfiles = () =>
    call<{ profiles: Array<{ name: string; policy: PolicyMessage }> }>('ListPolicyProfiles', {}).then(
      (r) => r.profiles,
    );

  before(async () => {
    dataDir = makeTempDir('sw4rm-int-policy-');
    await start();
    const registry = new CoordinatorClients(`127.0.0.1:${host.port}`, host.token);
    assert.equal((await registry.registerAgent(descriptorMessage('critic'))).accepted, true);
    registry.close();
    agentToken = host.coordinator.credentials.mintAgent('critic', 'test', 'policy tests', {
      correlationId: 'test',
    }).token;
  });

  after(async () => {
    await stop();
    removeTempDir(dataDir);
  });

  it("answers the default base policy (MEDIUM's limits) to any caller", async () => {
    const policy = await getPolicy(agentToken);
    assert.equal(policy.max_rounds, 3);
    assert.ok(Math.abs(policy.score_threshold - 0.7) < 1e-6);
    assert.equal(policy.round_timeout_ms, '300000');
    assert.deepEqual(policy.hitl, { mode: 'None' });
  });

  it('SetNegotiationPolicy then GetNegotiationPolicy round-trips every field; the version advances and is logged', async () => {
    const before = host.coordinator.policies.current().version;
    const answer = await call<Answer>('SetNegotiationPolicy', { policy: POLICY }, host.token, 'corr-set-policy');
    assert.deepEqual(answer, { ok: true, reason: `v${before + 1}` });
    assertPolicy(await getPolicy(), POLICY);
    const current = host.coordinator.policies.current();
    assert.equal(current.version, before + 1);
    assert.equal(current.base.scoreThreshold, 0.75);
    assert.equal(current.base.scoring.llmWeight, 0.35, 'the float is stored as the operator wrote it');
    assert.equal(current.setBy, 'rpc:operator');
    const [event] = host.coordinator.log.query({
      eventType: 'negotiation.policy_set',
      correlationId: 'corr-set-policy',
    });
    assert.equal(event.details.version, before + 1);
    assert.equal(event.details.set_by, 'rpc:operator');
    assert.ok((event.details.changed as string[]).includes('policy.hitl.mode'));
    assert.equal(host.coordinator.policies.version(before)!.base.maxRounds, 3, 'the older version stays readable');
  });

  it('refuses a bad value with ok=false naming the proto field, and writes nothing', async () => {
    const before = host.coordinator.policies.current().version;
    const high = await call<Answer>('SetNegotiationPolicy', { policy: { ...POLICY, score_threshold: 1.5 } });
    assert.equal(high.ok, false);
    assert.match(
      high.reason,
      /^VALIDATION_ERROR: policy\.score_threshold: must be within 0\.3\.\.1 \(the guardrails\), not 1\.5$/,
    );
    const gate = await call<Answer>('SetNegotiationPolicy', { policy: { ...POLICY, hitl: { mode: 'Always' } } });
    assert.match(
      gate.reason,
      /^VALIDATION_ERROR: policy\.hitl\.mode: must be one of None, PauseBetweenRounds, PauseOnFinalAccept/,
    );
    const rounds = await call<Answer>('SetNegotiationPolicy', { policy: { ...POLICY, max_rounds: 0 } });
    assert.match(rounds.reason, /^VALIDATION_ERROR: policy\.max_rounds: /);
    assert.deepEqual(await call<Answer>('SetNegotiationPolicy', {}), {
      ok: false,
      reason: 'VALIDATION_ERROR: policy: is required',
    });
    assert.equal(host.coordinator.policies.current().version, before);
  });

  it('an agent credential cannot change the policy or the profiles (PERMISSION_DENIED, logged), and may read them', async () => {
    const before = host.coordinator.policies.current().version;
    const set = await call<Answer>('SetNegotiationPolicy', { policy: { ...POLICY, max_rounds: 9 } }, agentToken);
    assert.equal(set.ok, false);
    assert.match(
      set.reason,
      /^PERMISSION_DENIED: SetNegotiationPolicy changes the coordinator-wide negotiation policy: an operator action/,
    );
    const profiles = await call<Answer>(
      'SetPolicyProfiles',
      { profiles: [{ name: 'HIGH', policy: POLICY }] },
      agentToken,
    );
    assert.match(profiles.reason, /^PERMISSION_DENIED: SetPolicyProfiles /);
    assert.equal(host.coordinator.policies.current().version, before);
    const refused = host.coordinator.log.query({ eventType: 'negotiation.policy_set_refused' });
    assert.equal(refused.length, 2);
    assert.match(String(refused[0].details.principal), /^agent:/);
    assert.notEqual((await getPolicy(agentToken)).max_rounds, 9);
  });

  it('SetPolicyProfiles replaces the named profiles and adds new ones; ListPolicyProfiles keeps the five intensities', async () => {
    const before = host.coordinator.policies.current().version;
    const answer = await call<Answer>('SetPolicyProfiles', {
      profiles: [
        { name: 'HIGH', policy: POLICY },
        { name: 'security-review', policy: { ...POLICY, max_rounds: 10 } },
      ],
    });
    assert.deepEqual(answer, { ok: true, reason: `v${before + 1}` });
    const profiles = await listProfiles();
    assert.deepEqual(
      profiles.map((p) => p.name),
      ['LOWEST', 'LOW', 'MEDIUM', 'HIGH', 'HIGHEST', 'security-review'],
    );
    assertPolicy(profiles[3].policy, POLICY);
    assert.equal(profiles[5].policy.max_rounds, 10);
    assert.equal(profiles[0].policy.max_rounds, 1, 'LOWEST untouched');
    const dup = await call<Answer>('SetPolicyProfiles', {
      profiles: [
        { name: 'x', policy: POLICY },
        { name: 'x', policy: POLICY },
      ],
    });
    assert.match(dup.reason, /^VALIDATION_ERROR: profiles\[1\]\.name: 'x' is named twice/);
    const bad = await call<Answer>('SetPolicyProfiles', {
      profiles: [
        { name: 'ok', policy: POLICY },
        { name: 'HIGH', policy: { ...POLICY, diff_tolerance: 0.9 } },
      ],
    });
    assert.match(bad.reason, /^VALIDATION_ERROR: profiles\[1\]\.policy\.diff_tolerance: /);
    const unnamed = await call<Answer>('SetPolicyProfiles', { profiles: [{ name: 'bad name!', policy: POLICY }] });
    assert.match(unnamed.reason, /^VALIDATION_ERROR: profiles\[0\]\.name: /);
    assert.match(
      (await call<Answer>('SetPolicyProfiles', { profiles: [] })).reason,
      /^VALIDATION_ERROR: profiles: name at least one profile/,
    );
    assert.equal(host.coordinator.policies.current().version, before + 1);
  });

  it('GetEffectivePolicy, SubmitEvaluation and HitlAction refuse a request without an id (INVALID_ARGUMENT) and never crash the server', async () => {
    const effective = await expectStatus(
      call('GetEffectivePolicy', { negotiation_id: '' }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(effective.details, /^VALIDATION_ERROR: negotiation_id is required/);
    await expectStatus(call('SubmitEvaluation', { negotiation_id: 'n1' }), grpc.status.INVALID_ARGUMENT);
    const long = await expectStatus(
      call('HitlAction', { negotiation_id: 'n'.repeat(257), action: 'approve' }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(long.details, /negotiation_id is longer than 256 characters/);
    // An unknown negotiation: NOT_FOUND (GetEffectivePolicy as a status; the two others answer ok/accepted false).
    const unknown = await expectStatus(
      call('GetEffectivePolicy', { negotiation_id: 'no-such-negotiation' }),
      grpc.status.NOT_FOUND,
    );
    assert.equal(unknown.details, "NOT_FOUND: no negotiation 'no-such-negotiation'");
    const evaluation = await call<{ accepted: boolean; reason: string }>(
      'SubmitEvaluation',
      {
        negotiation_id: 'no-such-negotiation',
        report: { from_agent: 'critic', deterministic_score: 0.5, llm_confidence: 0, notes: '' },
      },
      agentToken,
    );
    assert.equal(evaluation.accepted, false);
    assert.match(evaluation.reason, /^NOT_FOUND: no negotiation 'no-such-negotiation'/);
    const hitl = await call<Answer>('HitlAction', {
      negotiation_id: 'no-such-negotiation',
      action: 'approve',
      rationale: 'ok',
    });
    assert.deepEqual(hitl, { ok: false, reason: "NOT_FOUND: no negotiation room or artifact 'no-such-negotiation'" });
    assert.equal((await getPolicy()).max_rounds, POLICY.max_rounds);
  });

  it('a policy set over gRPC survives a restart of the coordinator on the same store', async () => {
    await call<Answer>('SetNegotiationPolicy', { policy: { ...POLICY, max_rounds: 7 } });
    const version = host.coordinator.policies.current().version;
    await stop();
    await start();
    assert.equal(host.coordinator.policies.current().version, version, 'nothing rewritten on start');
    assertPolicy(await getPolicy(), { ...POLICY, max_rounds: 7 });
    const profiles = await listProfiles();
    assert.ok(profiles.some((p) => p.name === 'security-review'));
  });

  it("the host's negotiation settings (the editor's sw4rm.negotiation.*, the CLI's file) reach the coordinator at start", async () => {
    await stop();
    const fresh = makeTempDir('sw4rm-int-policy-settings-');
    try {
      host = await startHost(fresh, {
        negotiation: {
          base: { maxRounds: 5 },
          profiles: [{ name: 'security-review', policy: { scoreThreshold: 0.95 } }],
          tieBreak: 'abort',
        },
      });
      service = serviceClient(`127.0.0.1:${host.port}`, 'sw4rm.scheduler.SchedulerPolicyService');
      assert.deepEqual(
        [host.coordinator.policies.current().version, host.coordinator.policies.current().setBy],
        [1, 'settings'],
      );
      assert.equal((await getPolicy()).max_rounds, 5);
      const custom = (await listProfiles()).find((p) => p.name === 'security-review');
      assert.ok(
        custom && Math.abs(custom.policy.score_threshold - 0.95) < 1e-6 && custom.policy.max_rounds === 5,
        'a new profile starts from the base',
      );
      assert.equal(host.coordinator.policies.current().tieBreak, 'abort');
    } finally {
      await stop();
      removeTempDir(fresh);
    }
    await start();
  });

  it('with auth none any caller may set the policy (set_by rpc:unauthenticated)', async () => {
    await stop();
    await start('none');
    const answer = await call<Answer>('SetNegotiationPolicy', { policy: { ...POLICY, max_rounds: 8 } }, null);
    assert.equal(answer.ok, true, answer.reason);
    assert.equal(host.coordinator.policies.current().setBy, 'rpc:unauthenticated');
    assert.equal((await getPolicy(null)).max_rounds, 8);
  });
});

/** The three per-debate RPCs on a debate and a room built for real (README "Negotiation policy", "Debates", "Rooms"). */
describe('SchedulerPolicyService on opened debates and rooms', function () {
  this.timeout(60_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let service: Client;
  let negotiation: Client;
  let room: RoomClient;
  const routers: RouterClient[] = [];
  const inboxes = new Map<string, Inbox>();
  const tokens = new Map<string, string>();
  let seat: { dispose(): void } | undefined;

  const md = (token: string) => bearer(token);

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-int-policy-debates-');
    host = await startHost(dataDir);
    seat = host.coordinator.hitl.attachOperator('editor:test');
    const address = `127.0.0.1:${host.port}`;
    service = serviceClient(address, 'sw4rm.scheduler.SchedulerPolicyService');
    negotiation = serviceClient(address, 'sw4rm.negotiation.NegotiationService');
    room = new RoomClient(address, host.token);
    const clients = clientsFor(host);
    try {
      for (const id of ['alice', 'bob', 'critic-1', 'critic-2']) {
        await registerRouterAgent(clients, id);
        const router = new RouterClient(address, host.token, id);
        routers.push(router);
        inboxes.set(id, router.openInbox(id));
        tokens.set(
          id,
          host.coordinator.credentials.mintAgent(id, 'test', `agent ${id}`, { correlationId: 'test' }).token,
        );
      }
    } finally {
      clients.close();
    }
  });

  afterEach(async () => {
    for (const inbox of inboxes.values()) inbox.close();
    inboxes.clear();
    for (const router of routers.splice(0)) router.close();
    room?.close();
    service?.close();
    negotiation?.close();
    seat?.dispose();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  it('GetEffectivePolicy of an opened debate equals what Open broadcast; SubmitEvaluation is accepted for a participant', async () => {
    const open = md(host.token!);
    open.set(
      'sw4rm-negotiation-preferences',
      JSON.stringify({ alice: { max_rounds: 2 }, bob: { score_threshold: 0.85 } }),
    );
    await unary(
      negotiation,
      'Open',
      { negotiation_id: 'deal', topic: 'price', participants: ['alice', 'bob'], intensity: 'HIGH' },
      open,
    );
    const item = await inboxes
      .get('bob')!
      .waitFor(
        (i) => i.msg.message_type === 'NEGOTIATION' && jsonPayload<{ kind: string }>(i.msg)?.kind === 'policy',
        10_000,
        'the policy event',
      );
    const event = jsonPayload<{
      profile: string;
      policy: Record<string, unknown> & { hitl: { mode: string }; scoring: Record<string, unknown> };
    }>(item.msg)!;
    assert.equal(event.profile, 'HIGH');
    const { effective } = await unary<{
      effective: { policy: PolicyMessage; applied: Record<string, Record<string, unknown>> };
    }>(service, 'GetEffectivePolicy', { negotiation_id: 'deal' }, md(tokens.get('alice')!));
    const close = (a: unknown, b: unknown, what: string) =>
      assert.ok(Math.abs(Number(a) - Number(b)) < 1e-6, `${what}: ${String(a)} ≠ ${String(b)}`);
    const { hitl, scoring, ...numbers } = event.policy;
    for (const [key, value] of Object.entries(numbers))
      close((effective.policy as unknown as Record<string, unknown>)[key], value, key);
    assert.deepEqual(effective.policy.hitl, hitl);
    assert.equal(effective.policy.scoring?.require_schema_valid, scoring.require_schema_valid);
    assert.equal(effective.policy.scoring?.require_examples_pass, scoring.require_examples_pass);
    close(effective.policy.scoring?.llm_weight, scoring.llm_weight, 'llm_weight');
    assert.equal(effective.policy.max_rounds, 2, 'the most restrictive stated max_rounds');
    close(effective.policy.score_threshold, 0.85, 'the highest stated score_threshold');
    assert.deepEqual(Object.keys(effective.applied).sort(), ['alice', 'bob']);
    assert.equal(Number(effective.applied.alice.max_rounds), 2);

    await unary(
      negotiation,
      'Propose',
      {
        negotiation_id: 'deal',
        from_agent: 'alice',
        content_type: 'application/json',
        payload: Buffer.from('{"price": 10}'),
      },
      md(tokens.get('alice')!),
    );
    const answer = await unary<{ accepted: boolean; reason: string }>(
      service,
      'SubmitEvaluation',
      {
        negotiation_id: 'deal',
        report: { from_agent: 'bob', deterministic_score: 0.9, llm_confidence: 0.8, notes: 'fair' },
      },
      md(tokens.get('bob')!),
    );
    assert.deepEqual(answer, { accepted: true, reason: '' });
    const round = host.coordinator.negotiations.detail('deal')!.rounds[0];
    assert.deepEqual(
      round.evaluations.map((e) => [e.from, e.score]),
      [['bob', 0.9]],
    );
  });

  it('HitlAction with the operator token decides a room escalation: ok, and the decision is APPROVED', async () => {
    await room.submitProposal({
      artifact_type: 'PLAN',
      artifact_id: 'plan-1',
      producer_id: 'alice',
      artifact: Buffer.from('{"steps": ["a"]}'),
      artifact_content_type: 'application/json',
      requested_critics: ['critic-1', 'critic-2'],
      negotiation_room_id: 'room-1',
    });
    const vote = (critic: string, confidence: number) => ({
      artifact_id: 'plan-1',
      critic_id: critic,
      score: 8,
      confidence,
      passed: true,
      strengths: [],
      weaknesses: [],
      recommendations: [],
    });
    await room.submitVote(vote('critic-1', 0.9));
    await room.submitVote(vote('critic-2', 0.1)); // below escalate_below_confidence (0.3): a person decides
    assert.equal((await room.getDecision('plan-1')).decision?.outcome, 'ESCALATED_TO_HITL', 'a person decides');
    const denied = await unary<Answer>(
      service,
      'HitlAction',
      { negotiation_id: 'room-1', action: 'approve', rationale: 'mine' },
      md(tokens.get('critic-1')!),
    ).then(
      (a) => a,
      (err: grpc.ServiceError) => ({ ok: false, reason: err.details }),
    );
    assert.match(denied.reason, /^PERMISSION_DENIED: /);
    const answer = await unary<Answer>(
      service,
      'HitlAction',
      { negotiation_id: 'room-1', action: 'approve', rationale: 'reviewed by hand' },
      md(host.token!),
    );
    assert.equal(answer.ok, true, answer.reason);
    assert.match(answer.reason, /^artifact 'plan-1' revision \d+: APPROVED$/);
    assert.equal((await room.getDecision('plan-1')).decision?.outcome, 'APPROVED');
  });
});

describe("the headless CLI's --negotiation-policy <file>", function () {
  this.timeout(60_000);
  const cli = useCliProcesses('sw4rm-int-policy-cli-');
  const file = (content: unknown): string => {
    const f = path.join(cli.dataDir(), 'negotiation.json');
    fs.writeFileSync(f, JSON.stringify(content));
    return f;
  };

  it("starts with the file's policy (version 1 by settings), served over gRPC", async () => {
    const policyFile = file({
      basePolicy: { max_rounds: 6, hitl: 'PauseOnFinalAccept' },
      room: { min_score_threshold: 8 },
    });
    const run = cli.run(
      '--port',
      '0',
      '--data-dir',
      path.join(cli.dataDir(), 'store'),
      '--negotiation-policy',
      policyFile,
    );
    const env = await run.environment();
    const service = serviceClient(env.SW4RM_SCHEDULER_POLICY_ADDR, 'sw4rm.scheduler.SchedulerPolicyService');
    try {
      const { policy } = await unary<{ policy: PolicyMessage }>(
        service,
        'GetNegotiationPolicy',
        {},
        bearer(env.SW4RM_TOKEN),
      );
      assert.equal(policy.max_rounds, 6);
      assert.deepEqual(policy.hitl, { mode: 'PauseOnFinalAccept' });
      assert.match(run.stderr, /negotiation\.policy_set .*"version":1,"policy_version":"v1","set_by":"settings"/);
    } finally {
      service.close();
    }
  });

  it('exits 2 naming each unusable value or key of the file', async () => {
    const run = cli.run(
      '--port',
      '0',
      '--data-dir',
      cli.dataDir(),
      '--negotiation-policy',
      file({ basePolicy: { max_rounds: 0 }, colour: 1 }),
    );
    assert.equal(await run.exit(), 2);
    assert.match(
      run.stderr,
      /--negotiation-policy .*negotiation\.json: colour is not a key \(basePolicy, profiles, guardrails, room, tieBreak, proposalSchemas\); basePolicy\.max_rounds is outside 1\.\.1000 \(0\)\n/,
    );
  });

  it('exits 2 when the coordinator refuses the policy as a whole (a value outside the guardrails)', async () => {
    const run = cli.run(
      '--port',
      '0',
      '--data-dir',
      cli.dataDir(),
      '--negotiation-policy',
      file({ basePolicy: { max_rounds: 50 } }),
    );
    assert.equal(await run.exit(), 2);
    assert.match(
      run.stderr,
      /--negotiation-policy .*: policy\.max_rounds: must be within 1\.\.20 \(the guardrails\), not 50\n/,
    );
  });
});
