import { strict as assert } from 'node:assert';
import type { Disposable } from '../../src/core/events';
import { bindHitlToRouter } from '../../src/core/hitl/envelopeBridge';
import { parsePolicy } from '../../src/core/hitl/policy';
import { COORDINATOR_ID } from '../../src/core/router/router';
import { CollectingSink, RouterHarness, assertRefused, ctx, payloadOf, settle } from '../support/routerHarness';

const P = 'requester';

describe('HITL over the messaging plane (HITL_INVOCATION to the coordinator)', () => {
  let h: RouterHarness;
  let sink: CollectingSink;
  let operator: Disposable;

  beforeEach(() => {
    h = new RouterHarness();
    h.register(P);
    sink = h.stream(P).sink;
    operator = h.coordinator.hitl.attachOperator('editor:test');
  });

  afterEach(() => {
    operator.dispose();
    h.dispose();
  });

  function invocationEnvelope(payload: Record<string, unknown>, extra: { idempotencyToken?: string } = {}) {
    return h.envelope(P, {
      messageType: 'HITL_INVOCATION',
      idempotencyToken: extra.idempotencyToken,
      payload: {
        reason_type: 'SECURITY_APPROVAL',
        subject: { repo_id: 'r', worktree_id: 'w', task_id: 't' },
        ...payload,
      },
    });
  }

  function decisions(): Array<{ correlationId: string; type: string; payload: Record<string, unknown> }> {
    return sink.items
      .filter((i) => i.envelope.producerId === COORDINATOR_ID && i.envelope.messageType === 'CONTROL')
      .map((i) => ({
        correlationId: i.envelope.correlationId,
        type: i.envelope.messageType,
        payload: JSON.parse(Buffer.from(i.envelope.payload).toString()),
      }));
  }

  it('opens an invocation for the producer; the decision comes back as an envelope correlated to the invocation', async () => {
    const envelope = invocationEnvelope({
      invocation_id: 'hitl-001',
      context: { operation: 'delete_sensitive_files', risk_level: 'HIGH' },
    });
    const result = h.send(envelope, COORDINATOR_ID);
    assert.ok(result.accepted, result.accepted ? '' : result.reason);
    const invocation = h.coordinator.hitl.get('hitl-001');
    assert.equal(invocation?.requester, P, 'the requester is the authenticated producer');
    assert.deepEqual(invocation?.origin, { kind: 'envelope', messageId: envelope.messageId });
    assert.equal(invocation?.context.risk.level, 'HIGH');
    assert.equal(h.state(envelope.messageId), 'READ');

    h.coordinator.hitl.decide(
      'hitl-001',
      { action: 'approve', rationale: 'Policy thresholds met; low risk' },
      'editor:alice',
      ctx(),
    );
    await settle();
    const [decision] = decisions();
    assert.equal(decision.correlationId, envelope.correlationId);
    assert.equal(decision.payload.type, 'HITL_DECISION');
    assert.equal(decision.payload.invocation_id, 'hitl-001');
    assert.equal(decision.payload.decision, 'approve');
    assert.equal(decision.payload.rationale, 'Policy thresholds met; low risk');
    assert.equal(decision.payload.decided_by, 'editor:alice');
    assert.equal(decision.payload.patch_b64, null);
    assert.equal(h.state(envelope.messageId), 'FULFILLED');
  });

  it('answers a retry with the same idempotency token with the cached decision (DUPLICATE_DETECTED)', async () => {
    const first = invocationEnvelope({}, { idempotencyToken: 'ask-once' });
    assert.ok(h.send(first, COORDINATOR_ID).accepted);
    const retryWhilePending = invocationEnvelope({}, { idempotencyToken: 'ask-once' });
    assertRefused(h.send(retryWhilePending, COORDINATOR_ID), 'ALREADY_IN_PROGRESS');
    const [pending] = h.coordinator.hitl.list({ pendingOnly: true });
    h.coordinator.hitl.decide(
      pending.id,
      { action: 'modify', rationale: 'narrower', payload: { paths: ['tmp/'] } },
      'op',
      ctx(),
    );
    const retry = invocationEnvelope({}, { idempotencyToken: 'ask-once' });
    const reason = assertRefused(h.send(retry, COORDINATOR_ID), 'DUPLICATE_DETECTED');
    const cached = JSON.parse(reason.slice('DUPLICATE_DETECTED: '.length)) as {
      cached_result: Record<string, unknown>;
    };
    assert.equal(cached.cached_result.decision, 'modify');
    assert.deepEqual(cached.cached_result.decision_payload, { paths: ['tmp/'] });
    assert.equal(h.coordinator.hitl.list().length, 1, 'no second invocation was opened');
    await settle();
    assert.equal(decisions().length, 1);
    assert.equal(Buffer.from(String(decisions()[0].payload.patch_b64), 'base64').toString(), '{"paths":["tmp/"]}');
  });

  it('answers a resend of a known invocation_id without a token like a duplicate', () => {
    assert.ok(h.send(invocationEnvelope({ invocation_id: 'hitl-9' }), COORDINATOR_ID).accepted);
    assertRefused(h.send(invocationEnvelope({ invocation_id: 'hitl-9' }), COORDINATOR_ID), 'ALREADY_IN_PROGRESS');
    h.coordinator.hitl.decide('hitl-9', { action: 'deny', rationale: 'no' }, 'op', ctx());
    assertRefused(
      h.send(invocationEnvelope({ invocation_id: 'hitl-9' }), COORDINATOR_ID),
      'DUPLICATE_DETECTED',
      /"decision":"deny"/,
    );
  });

  it('refuses an invalid invocation with VALIDATION_ERROR and leaves nothing behind', () => {
    const bad = invocationEnvelope({ reason_type: 'COFFEE_BREAK' });
    assertRefused(h.send(bad, COORDINATOR_ID), 'VALIDATION_ERROR', /reason_type must be one of/);
    assert.equal(h.coordinator.hitl.list().length, 0);
    assert.equal(h.store.router.getMessage(bad.messageId), undefined);
    const text = h.envelope(P, { messageType: 'HITL_INVOCATION', contentType: 'text/plain', payload: 'approve me' });
    assertRefused(h.send(text, COORDINATOR_ID), 'VALIDATION_ERROR', /JSON object payload/);
  });

  it('leaves nothing behind in memory when a coordinator handler fails, so a retry of the same token is taken', () => {
    const handler = h.router.handleAtCoordinator('HITL_INVOCATION', () => {
      throw new Error('handler fault');
    });
    const first = invocationEnvelope({}, { idempotencyToken: 'after-fault' });
    assert.throws(() => h.send(first, COORDINATOR_ID), /handler fault/);
    assert.equal(h.router.message(first.messageId), undefined);
    handler.dispose();
    const binding = bindHitlToRouter(h.coordinator.hitl, h.router, h.clock);
    try {
      const retry = invocationEnvelope({}, { idempotencyToken: 'after-fault' });
      const result = h.send(retry, COORDINATOR_ID);
      assert.ok(result.accepted, result.accepted ? '' : result.reason);
      assert.equal(h.coordinator.hitl.list().length, 1);
    } finally {
      binding.dispose();
    }
  });

  it('sends the decision of an auto rule at once', async () => {
    h.coordinator.hitl.setPolicy(parsePolicy({ rules: [{ name: 'tests ok', agent: P, action: 'approve' }] }).policy);
    const envelope = invocationEnvelope({});
    assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
    await settle();
    assert.equal(decisions()[0]?.payload.decision, 'approve');
    assert.equal(decisions()[0]?.payload.rule, 'tests ok');
    assert.equal(h.state(envelope.messageId), 'FULFILLED');
  });

  it('delivers a decision made after a restart to the requester', async () => {
    const envelope = invocationEnvelope({ invocation_id: 'survives' });
    assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
    operator.dispose();
    h.restart();
    operator = h.coordinator.hitl.attachOperator('editor:test');
    sink = h.stream(P).sink;
    assert.equal(h.coordinator.hitl.get('survives')?.state, 'pending');
    h.coordinator.hitl.decide('survives', { action: 'approve', rationale: 'after restart' }, 'op', ctx());
    await settle();
    assert.equal(decisions()[0]?.payload.rationale, 'after restart');
    assert.equal(decisions()[0]?.correlationId, envelope.correlationId);
  });

  it('uses the envelope TTL as the deadline when the payload gives none', () => {
    const envelope = h.envelope(P, {
      messageType: 'HITL_INVOCATION',
      ttlMs: 30_000,
      payload: payloadOf({ reason_type: 'CONFLICT' }),
    });
    assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
    const [invocation] = h.coordinator.hitl.list();
    assert.equal(invocation.deadlineAt, h.clock.now() + 30_000);
  });
});
