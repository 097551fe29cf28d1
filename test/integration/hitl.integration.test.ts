import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { ManualClock } from '../../src/core/clock';
import type { Disposable } from '../../src/core/events';
import { parsePolicy } from '../../src/core/hitl/policy';
import type { CoordinatorHost } from '../../src/server/host';
import { expectStatus } from '../support/clients';
import { HitlClient } from '../support/hitlClient';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const AGENT = 'hitl-agent';

describe('HitlService.Decide over real gRPC (RFC §15)', () => {
  let dataDir: string;
  let clock: ManualClock;
  let host: CoordinatorHost;
  let client: HitlClient;
  let operator: Disposable | undefined;

  async function start(): Promise<void> {
    host = await startHost(dataDir, { clock });
    client = new HitlClient(`127.0.0.1:${host.port}`, host.token);
  }

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-hitl-');
    clock = new ManualClock(Date.now());
    await start();
    operator = host.coordinator.hitl.attachOperator('editor:test');
  });

  afterEach(async () => {
    operator?.dispose();
    client.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  /** The pending invocation the agent's call opened, once the server has it. */
  function pendingInvocation() {
    return pollUntil('a pending HITL invocation', () => host.coordinator.hitl.list({ pendingOnly: true })[0]);
  }

  const securityApproval = {
    reason_type: 'SECURITY_APPROVAL',
    context: {
      summary: 'Delete generated fixtures',
      subject: { repo_id: 'repo', worktree_id: 'wt', task_id: 't-1' },
      risk: { level: 'HIGH' },
    },
    proposed_actions: ['approve', 'deny'],
    priority: 3,
  };

  it('an agent calls Decide and receives the decision made through the core API', async () => {
    const call = client.decide(securityApproval, { agentId: AGENT });
    const invocation = await pendingInvocation();
    assert.equal(invocation.requester, AGENT);
    assert.equal(invocation.reasonType, 'SECURITY_APPROVAL');
    assert.deepEqual(invocation.proposedActions, ['approve', 'deny']);
    assert.equal(invocation.priority, 3);
    host.coordinator.hitl.decide(
      invocation.id,
      { action: 'modify', rationale: 'only tmp/', payload: { paths: ['tmp/'] } },
      'editor:alice',
      { correlationId: 'c' },
    );
    const outcome = await call;
    assert.equal(outcome.action, 'modify');
    assert.equal(outcome.rationale, 'only tmp/');
    assert.deepEqual(outcome.payload, { paths: ['tmp/'] });
    assert.equal(outcome.invocationId, invocation.id);
    assert.equal(outcome.trailers['sw4rm-hitl-decided-by'], 'editor:alice');
    assert.equal(outcome.trailers['sw4rm-hitl-automatic'], 'false');
  });

  it('returns the fallback, marked as such, when the deadline passes', async () => {
    const call = client.decide(
      { ...securityApproval, context: { ...securityApproval.context, deadline_ms: 120_000 } },
      { agentId: AGENT, deadlineMs: 600_000 },
    );
    const invocation = await pendingInvocation();
    assert.equal(invocation.deadlineAt, clock.now() + 120_000);
    clock.advance(120_000);
    const outcome = await call;
    assert.equal(outcome.action, 'deny');
    assert.match(outcome.rationale, /^Fallback DENY_BY_DEFAULT: the decision deadline passed; denied\./);
    assert.equal(outcome.trailers['sw4rm-hitl-state'], 'timed_out');
    assert.equal(outcome.trailers['sw4rm-hitl-automatic'], 'true');
  });

  it('answers within 5 s of no operator being attached, with the configured fallback', async () => {
    operator?.dispose();
    operator = undefined;
    host.coordinator.hitl.setPolicy(
      parsePolicy({ fallbacks: { SECURITY_APPROVAL: { policy: 'AUTO_DECIDE_THRESHOLD', threshold: 0.8 } } }).policy,
    );
    const call = client.decide(
      { ...securityApproval, context: { ...securityApproval.context, score: 0.93 } },
      { agentId: AGENT },
    );
    await pendingInvocation();
    clock.advance(5_000);
    const outcome = await call;
    assert.equal(outcome.action, 'approve');
    assert.match(
      outcome.rationale,
      /^Fallback AUTO_DECIDE_THRESHOLD: no human operator is available; score 0.93 ≥ threshold 0.8/,
    );
  });

  it('keeps a pending invocation across a restart; the agent re-attaches by invocation_id and gets the decision', async () => {
    const first = client.decide(
      { ...securityApproval, context: { ...securityApproval.context, invocation_id: 'keep-me' } },
      { agentId: AGENT },
    );
    await pendingInvocation();
    operator?.dispose();
    client.close();
    await stopHost(host);
    const broken = await first.then(
      () => undefined,
      (err: grpc.ServiceError) => err,
    );
    assert.ok(broken, 'the call broke with the coordinator');

    await start();
    operator = host.coordinator.hitl.attachOperator('editor:test');
    assert.equal(host.coordinator.hitl.get('keep-me')?.state, 'pending');
    const again = client.decide(
      { ...securityApproval, context: { ...securityApproval.context, invocation_id: 'keep-me' } },
      { agentId: AGENT },
    );
    await pollUntil('the re-attach', () =>
      host.coordinator.hitl.auditTrail({ invocationId: 'keep-me' }).find((e) => e.kind === 'reattached'),
    );
    host.coordinator.hitl.decide('keep-me', { action: 'approve', rationale: 'after the restart' }, 'editor:alice', {
      correlationId: 'c',
    });
    const outcome = await again;
    assert.deepEqual(
      [outcome.action, outcome.rationale, outcome.invocationId],
      ['approve', 'after the restart', 'keep-me'],
    );
    assert.equal(host.coordinator.hitl.list().length, 1);
  });

  it("returns a rule's decision at once", async () => {
    host.coordinator.hitl.setPolicy(
      parsePolicy({ rules: [{ name: 'low risk', agent: AGENT, subject: 'repo/**', action: 'approve' }] }).policy,
    );
    const outcome = await client.decide(securityApproval, { agentId: AGENT });
    assert.equal(outcome.action, 'approve');
    assert.equal(outcome.rationale, "Automatic approve by rule 'low risk'.");
    assert.equal(outcome.trailers['sw4rm-hitl-decided-by'], 'policy');
  });

  it('answers before its own gRPC deadline with the fallback when that deadline is the nearest', async () => {
    const started = Date.now();
    const call = client.decide(securityApproval, { agentId: AGENT, deadlineMs: 60_000 });
    const invocation = await pendingInvocation();
    assert.ok(
      invocation.deadlineAt <= clock.now() + 60_000 - 200,
      'the invocation deadline is inside the call deadline',
    );
    clock.advance(invocation.deadlineAt - clock.now());
    const outcome = await call;
    assert.match(outcome.rationale, /^Fallback DENY_BY_DEFAULT/);
    assert.ok(Date.now() - started < 30_000);
  });

  it("refuses bad invocations with the spec's error codes", async () => {
    const noReason = await expectStatus(
      client.decide({ context: {} }, { agentId: AGENT }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(noReason.details, /^VALIDATION_ERROR: reason_type must be one of/);
    const binary = await expectStatus(
      client.decide({ reason_type: 'CONFLICT', context: Buffer.from([0xff, 0xfe, 0x00]) }, { agentId: AGENT }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(binary.details, /^VALIDATION_ERROR: the context is neither JSON nor UTF-8 text/);
    const big = Buffer.from(JSON.stringify({ summary: 'x'.repeat(300 * 1024) }));
    const oversize = await expectStatus(
      client.decide({ reason_type: 'CONFLICT', context: big }, { agentId: AGENT }),
      grpc.status.RESOURCE_EXHAUSTED,
    );
    assert.match(oversize.details, /^OVERSIZE_PAYLOAD: /);
    const mine = client.decide({ reason_type: 'CONFLICT', context: { invocation_id: 'taken' } }, { agentId: AGENT });
    await pendingInvocation();
    const stolen = await expectStatus(
      client.decide({ reason_type: 'CONFLICT', context: { invocation_id: 'taken' } }, { agentId: 'intruder' }),
      grpc.status.PERMISSION_DENIED,
    );
    assert.match(stolen.details, /^PERMISSION_DENIED: invocation_id 'taken' belongs to another requester/);
    host.coordinator.hitl.cancel('taken', 'test', 'done', { correlationId: 'c' });
    const cancelled = await mine;
    assert.equal(cancelled.action, 'deny');
    assert.match(cancelled.rationale, /^Cancelled by test: done/);
    assert.equal(cancelled.trailers['sw4rm-hitl-state'], 'cancelled');
  });
});
