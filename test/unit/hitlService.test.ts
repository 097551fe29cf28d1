import { strict as assert } from 'node:assert';
import { HitlStateError } from '../../src/core/hitl/hitlService';
import type { HitlInvocation, InvocationRequest, ReasonType } from '../../src/core/hitl/model';
import { DEFAULT_HITL_POLICY, parsePolicy, type HitlPolicy } from '../../src/core/hitl/policy';
import { HitlRequestError, parseInvocationRequest } from '../../src/core/hitl/request';
import type { Disposable } from '../../src/core/events';
import { RouterHarness, ctx } from '../support/routerHarness';

const DEADLINE_MS = 60_000;

function policy(input: Parameters<typeof parsePolicy>[0]): HitlPolicy {
  const parsed = parsePolicy({ defaultDeadlineSeconds: DEADLINE_MS / 1000, ...input });
  assert.deepEqual(parsed.problems, []);
  return parsed.policy;
}

describe('HITL service (RFC §15, §15.1, §15.3, §15.4)', () => {
  let h: RouterHarness;
  let operator: Disposable | undefined;

  beforeEach(() => {
    h = new RouterHarness({}, {}, policy({}));
    operator = h.coordinator.hitl.attachOperator('editor:test');
  });

  afterEach(() => {
    operator?.dispose();
    h.dispose();
  });

  const hitl = () => h.coordinator.hitl;

  function request(
    overrides: Record<string, unknown> = {},
    reasonType: ReasonType = 'SECURITY_APPROVAL',
    requester = 'agent-a',
  ): InvocationRequest {
    return parseInvocationRequest(
      {
        reason_type: reasonType,
        subject: { repo_id: 'repo', worktree_id: 'wt-1', task_id: 'task-7' },
        summary: 'Delete generated fixtures',
        facts: { files: 3 },
        ...overrides,
      },
      { requester, correlationId: 'corr-hitl', now: h.clock.now() },
    );
  }

  function open(
    overrides: Record<string, unknown> = {},
    reasonType: ReasonType = 'SECURITY_APPROVAL',
    requester = 'agent-a',
  ): HitlInvocation {
    return hitl().open(request(overrides, reasonType, requester), { kind: 'rpc' }, ctx()).invocation;
  }

  function auditKinds(id: string): string[] {
    return hitl()
      .auditTrail({ invocationId: id })
      .map((e) => e.kind);
  }

  describe('retention of settled invocations (policy.settledRetentionMs)', () => {
    it('deletes settled invocations and their audit after the retention, hourly and logged; pending ones stay', () => {
      hitl().setPolicy(
        { ...policy({ retentionDays: 1 }), defaultDeadlineMs: 3 * 86_400_000, maxDeadlineMs: 3 * 86_400_000 },
        'test',
      );
      const decided = open();
      hitl().decide(decided.id, { action: 'approve', rationale: 'ok' }, 'editor:alice', ctx());
      const cancelled = open();
      hitl().cancel(cancelled.id, 'editor:alice', 'not needed', ctx());
      const waiting = open();
      h.clock.advance(23 * 3_600_000);
      assert.ok(h.store.hitl.get(decided.id), 'settled 23 h ago: kept');
      h.clock.advance(2 * 3_600_000);
      assert.equal(h.store.hitl.get(decided.id), undefined, 'settled over a day ago: deleted');
      assert.equal(h.store.hitl.get(cancelled.id), undefined);
      assert.deepEqual(hitl().auditTrail({ invocationId: decided.id }), [], 'with its audit trail');
      assert.equal(
        h.store.hitl.get(waiting.id)?.state,
        'pending',
        'a pending invocation is never deleted, however old',
      );
      assert.ok(hitl().auditTrail({ invocationId: waiting.id }).length > 0);
      const [event] = h.events('hitl.settled_pruned');
      assert.equal(event.details.invocations, 2);
      assert.equal(event.details.audit_entries, 4, 'opened + decided, opened + cancelled');
      assert.equal(event.details.retention_days, 1);
    });

    it('prunes in bounded batches, the longest settled first', () => {
      const ids = [0, 1, 2].map(() => {
        const inv = open();
        hitl().cancel(inv.id, 'editor:alice', 'not needed', ctx());
        h.clock.advance(1_000);
        return inv.id;
      });
      const later = h.clock.now();
      assert.deepEqual(h.store.hitl.pruneSettled(later, 2), { deleted: 2, more: true, auditEntries: 4 });
      assert.deepEqual(
        ids.map((id) => h.store.hitl.get(id) !== undefined),
        [false, false, true],
      );
      assert.deepEqual(h.store.hitl.pruneSettled(later, 2), { deleted: 1, more: false, auditEntries: 2 });
      assert.deepEqual(h.store.hitl.pruneSettled(later, 2), { deleted: 0, more: false, auditEntries: 0 });
    });
  });

  describe('state machine', () => {
    it('opens a pending invocation, persisted with an audit record and a log event', () => {
      const inv = open();
      assert.equal(inv.state, 'pending');
      assert.equal(inv.deadlineAt, h.clock.now() + DEADLINE_MS);
      assert.equal(h.store.hitl.get(inv.id)?.state, 'pending');
      assert.deepEqual(auditKinds(inv.id), ['opened']);
      const [event] = h.events('hitl.opened');
      assert.equal(event.details.invocation_id, inv.id);
      assert.equal(event.correlationId, 'corr-hitl');
      assert.equal(hitl().pendingCount(), 1);
    });

    it('applies a human decision at once: the waiting requester gets it, the audit says who, when and why', async () => {
      const inv = open();
      const settled = hitl().whenSettled(inv.id);
      hitl().decide(
        inv.id,
        { action: 'approve', rationale: 'Fixtures are regenerated by the build.' },
        'editor:alice',
        ctx(),
      );
      const result = await settled;
      assert.equal(result.state, 'decided');
      assert.equal(result.decision?.action, 'approve');
      assert.equal(result.decision?.rationale, 'Fixtures are regenerated by the build.');
      assert.deepEqual(result.decision?.origin, { kind: 'human', by: 'editor:alice', automatic: false });
      const decided = hitl()
        .auditTrail({ invocationId: inv.id })
        .find((e) => e.kind === 'decided');
      assert.equal(decided?.actor, 'editor:alice');
      assert.equal(decided?.automatic, false);
      assert.equal(decided?.at, h.clock.now());
      assert.deepEqual(
        [decided?.details.from, decided?.details.to, decided?.details.rationale],
        ['pending', 'decided', 'Fixtures are regenerated by the build.'],
      );
      assert.equal(hitl().pendingCount(), 0);
    });

    it('refuses a second decision, an unknown id, an unknown action and modify without a payload', () => {
      const inv = open();
      assert.throws(
        () => hitl().decide(inv.id, { action: 'maybe' }, 'op', ctx()),
        (e: unknown) => e instanceof HitlRequestError && e.code === 'VALIDATION_ERROR',
      );
      assert.throws(
        () => hitl().decide(inv.id, { action: 'modify', rationale: 'narrower' }, 'op', ctx()),
        /modify needs the edited payload/,
      );
      hitl().decide(inv.id, { action: 'deny', rationale: 'no' }, 'op', ctx());
      assert.throws(
        () => hitl().decide(inv.id, { action: 'approve', rationale: 'yes' }, 'op', ctx()),
        (e: unknown) => e instanceof HitlStateError && e.reason === 'settled',
      );
      assert.throws(
        () => hitl().decide('nope', { action: 'approve', rationale: 'yes' }, 'op', ctx()),
        (e: unknown) => e instanceof HitlStateError && e.reason === 'not_found',
      );
      assert.equal(hitl().get(inv.id)?.decision?.action, 'deny');
    });

    it('refuses every action without a rationale (missing, empty or blank), leaving the invocation pending and unlogged', () => {
      const inv = open();
      for (const action of ['approve', 'deny', 'defer', 'modify']) {
        for (const rationale of [undefined, '', '  \n\t ']) {
          assert.throws(
            () => hitl().decide(inv.id, { action, rationale, payload: {} }, 'op', ctx()),
            (e: unknown) =>
              e instanceof HitlRequestError &&
              e.code === 'VALIDATION_ERROR' &&
              /^A rationale is required/.test(e.message),
            `${action} with ${JSON.stringify(rationale)}`,
          );
        }
      }
      assert.equal(hitl().get(inv.id)?.state, 'pending');
      assert.deepEqual(
        hitl()
          .auditTrail({ invocationId: inv.id })
          .map((e) => e.kind),
        ['opened'],
      );
      assert.deepEqual(
        h.coordinator.log.query({ eventType: 'hitl.decided' }),
        [],
        'a refused decision logs no decision',
      );
      assert.equal(
        hitl().decide(inv.id, { action: 'approve', rationale: '  reviewed  ' }, 'op', ctx()).decision?.rationale,
        'reviewed',
      );
    });

    it('refuses a modify payload larger than an invocation may be (OVERSIZE_PAYLOAD), leaving the invocation pending', () => {
      const inv = open();
      assert.throws(
        () =>
          hitl().decide(
            inv.id,
            { action: 'modify', rationale: 'smaller', payload: { blob: 'x'.repeat(300 * 1024) } },
            'op',
            ctx(),
          ),
        (e: unknown) => e instanceof HitlRequestError && e.code === 'OVERSIZE_PAYLOAD',
      );
      assert.equal(hitl().get(inv.id)?.state, 'pending');
    });

    it('records modify with the edited payload, and defer as a decision', () => {
      const a = open();
      hitl().decide(
        a.id,
        { action: 'MODIFY', rationale: 'only the tmp folder', payload: { paths: ['tmp/'] } },
        'op',
        ctx(),
      );
      assert.deepEqual(hitl().get(a.id)?.decision?.payload, { paths: ['tmp/'] });
      assert.equal(hitl().get(a.id)?.decision?.action, 'modify');
      const b = open();
      hitl().decide(b.id, { action: 'defer', rationale: 'after the release' }, 'op', ctx());
      assert.equal(hitl().get(b.id)?.state, 'decided');
      assert.equal(hitl().get(b.id)?.decision?.action, 'defer');
    });

    it('cancels a pending invocation: state cancelled, the requester is answered deny', async () => {
      const inv = open();
      const settled = hitl().whenSettled(inv.id);
      hitl().cancel(inv.id, 'editor:alice', 'the task was dropped', ctx());
      const result = await settled;
      assert.equal(result.state, 'cancelled');
      assert.equal(result.decision?.action, 'deny');
      assert.match(result.decision?.rationale ?? '', /^Cancelled by editor:alice: the task was dropped/);
      assert.deepEqual(auditKinds(inv.id), ['opened', 'cancelled']);
    });

    it('re-attaches a retry with the same invocation_id from the same requester, refuses another requester', () => {
      const first = hitl().open(request({ invocation_id: 'hitl-001' }), { kind: 'rpc' }, ctx());
      const again = hitl().open(request({ invocation_id: 'hitl-001' }), { kind: 'rpc' }, ctx());
      assert.equal(again.reattached, true);
      assert.equal(again.invocation.id, first.invocation.id);
      assert.equal(hitl().list().length, 1);
      assert.throws(
        () =>
          hitl().open(request({ invocation_id: 'hitl-001' }, 'SECURITY_APPROVAL', 'agent-b'), { kind: 'rpc' }, ctx()),
        (e: unknown) => e instanceof HitlRequestError && e.code === 'PERMISSION_DENIED',
      );
    });

    it('refuses BUFFER_FULL once a requester holds the most pending invocations allowed; others may still ask', () => {
      hitl().setPolicy({ ...policy({}), maxPendingPerRequester: 2 });
      open();
      const second = open();
      assert.throws(
        () => open(),
        (e: unknown) =>
          e instanceof HitlRequestError && e.code === 'BUFFER_FULL' && /agent-a already has 2 pending/.test(e.message),
      );
      assert.equal(open({}, 'CONFLICT', 'agent-b').state, 'pending');
      hitl().decide(second.id, { action: 'deny', rationale: 'no' }, 'op', ctx());
      assert.equal(open().state, 'pending', 'room again once one is decided');
    });

    it('lists pending first (highest priority, then nearest deadline), then settled ones newest first', () => {
      const low = open({ priority: 1 });
      const high = open({ priority: 5 });
      const soon = open({ priority: 1, deadline_ms: 1_000 });
      const done = open();
      hitl().decide(done.id, { action: 'approve', rationale: 'ok' }, 'op', ctx());
      assert.deepEqual(
        hitl()
          .list()
          .map((i) => i.id),
        [high.id, soon.id, low.id, done.id],
      );
    });
  });

  describe('deadlines and fallbacks (injected clock)', () => {
    it('DENY_BY_DEFAULT: at the deadline the invocation is timed out with deny, marked as a fallback', async () => {
      const inv = open();
      const settled = hitl().whenSettled(inv.id);
      h.clock.advance(DEADLINE_MS - 1);
      assert.equal(hitl().get(inv.id)?.state, 'pending');
      h.clock.advance(1);
      const result = await settled;
      assert.equal(result.state, 'timed_out');
      assert.equal(result.decision?.action, 'deny');
      assert.match(result.decision?.rationale ?? '', /^Fallback DENY_BY_DEFAULT: the decision deadline passed/);
      assert.deepEqual(result.decision?.origin, {
        kind: 'fallback',
        by: 'policy',
        automatic: true,
        policy: 'DENY_BY_DEFAULT',
        trigger: 'deadline',
      });
      const [event] = h.events('hitl.timed_out');
      assert.equal(event.level, 'WARN');
      assert.equal(event.details.automatic, true);
    });

    it('AUTO_DECIDE_THRESHOLD approves a score at or above the threshold and denies below it or without a score', () => {
      hitl().setPolicy(
        policy({ fallbacks: { SECURITY_APPROVAL: { policy: 'AUTO_DECIDE_THRESHOLD', threshold: 0.8 } } }),
      );
      const high = open({ score: 0.8 });
      const low = open({ inference: { model: 'm', confidence: 0.79 } });
      const none = open();
      h.clock.advance(DEADLINE_MS);
      assert.equal(hitl().get(high.id)?.decision?.action, 'approve');
      assert.match(hitl().get(high.id)?.decision?.rationale ?? '', /score 0.8 ≥ threshold 0.8, approved automatically/);
      assert.equal(hitl().get(low.id)?.decision?.action, 'deny');
      assert.match(hitl().get(low.id)?.decision?.rationale ?? '', /score 0.79 < threshold 0.8/);
      assert.equal(hitl().get(none.id)?.decision?.action, 'deny');
      assert.match(hitl().get(none.id)?.decision?.rationale ?? '', /no score was given/);
      for (const inv of [high, low, none])
        assert.equal(hitl().get(inv.id)?.decision?.origin.policy, 'AUTO_DECIDE_THRESHOLD');
    });

    it('EXTEND_TIMEOUT extends by the original timeout up to the cap, then denies; a human may still decide meanwhile', () => {
      hitl().setPolicy(policy({ fallbacks: { CONFLICT: { policy: 'EXTEND_TIMEOUT', maxExtensions: 2 } } }));
      const capped = open({}, 'CONFLICT');
      const rescued = open({}, 'CONFLICT');
      const start = h.clock.now();
      h.clock.advance(DEADLINE_MS);
      assert.equal(hitl().get(capped.id)?.state, 'pending');
      assert.equal(hitl().get(capped.id)?.deadlineAt, start + 2 * DEADLINE_MS);
      hitl().decide(rescued.id, { action: 'approve', rationale: 'seen in time' }, 'op', ctx());
      h.clock.advance(DEADLINE_MS);
      assert.equal(hitl().get(capped.id)?.extensions, 2);
      assert.equal(hitl().get(capped.id)?.state, 'pending');
      h.clock.advance(DEADLINE_MS);
      const result = hitl().get(capped.id);
      assert.equal(result?.state, 'timed_out');
      assert.equal(result?.decision?.action, 'deny');
      assert.match(result?.decision?.rationale ?? '', /after 2 extensions \(the cap\); denied/);
      assert.deepEqual(auditKinds(capped.id), ['opened', 'extended', 'extended', 'timed_out']);
      assert.equal(hitl().get(rescued.id)?.decision?.action, 'approve');
    });

    it('honours a requester that asked for deny on timeout, whatever the policy', () => {
      hitl().setPolicy(policy({ fallbacks: { '*': { policy: 'AUTO_DECIDE_THRESHOLD', threshold: 0.1 } } }));
      const inv = open({ auto_timeout_action: 'DENY', score: 0.99 });
      h.clock.advance(DEADLINE_MS);
      assert.equal(hitl().get(inv.id)?.decision?.action, 'deny');
      assert.equal(hitl().get(inv.id)?.decision?.origin.trigger, 'requested_fallback');
    });
  });

  describe('no human available (RFC §15.3, §15.4)', () => {
    beforeEach(() => {
      operator?.dispose();
      operator = undefined;
    });

    it('applies the fallback within 5 s when no operator is attached, and logs which one', () => {
      const inv = open();
      h.clock.advance(4_999);
      assert.equal(hitl().get(inv.id)?.state, 'pending');
      h.clock.advance(1);
      const result = hitl().get(inv.id);
      assert.equal(result?.state, 'timed_out');
      assert.equal(result?.decision?.origin.trigger, 'hitl_unavailable');
      assert.match(result?.decision?.rationale ?? '', /no human operator is available; denied/);
      const [event] = h.events('hitl.unavailable');
      assert.equal(event.level, 'WARN');
      assert.deepEqual([event.details.policy, event.details.fallback], ['DENY_BY_DEFAULT', 'deny']);
      assert.deepEqual(auditKinds(inv.id), ['opened', 'hitl_unavailable', 'timed_out']);
    });

    it('waits for a human once an operator attaches, and starts the 5 s again when the last one leaves', () => {
      const inv = open();
      h.clock.advance(3_000);
      const console = hitl().attachOperator('cli:bob');
      h.clock.advance(10_000);
      assert.equal(hitl().get(inv.id)?.state, 'pending', 'an operator is there');
      console.dispose();
      h.clock.advance(4_999);
      assert.equal(hitl().get(inv.id)?.state, 'pending');
      h.clock.advance(1);
      assert.equal(hitl().get(inv.id)?.state, 'timed_out');
    });

    it('EXTEND_TIMEOUT without a human extends, waits for an operator until the new deadline, then denies at the cap', () => {
      hitl().setPolicy(policy({ fallbacks: { DEBATE_DEADLOCK: { policy: 'EXTEND_TIMEOUT', maxExtensions: 1 } } }));
      const inv = open({}, 'DEBATE_DEADLOCK');
      h.clock.advance(5_000);
      assert.equal(hitl().get(inv.id)?.extensions, 1);
      assert.equal(hitl().get(inv.id)?.deadlineAt, inv.createdAt + 2 * DEADLINE_MS);
      h.clock.advance(2 * DEADLINE_MS - 5_000);
      const result = hitl().get(inv.id);
      assert.equal(result?.state, 'timed_out');
      assert.equal(result?.decision?.origin.trigger, 'hitl_unavailable');
    });
  });

  describe('rules and pause (central approvals)', () => {
    it('decides at once by the first matching rule, recorded as automatic with the rule name', async () => {
      hitl().setPolicy(
        policy({
          rules: [
            {
              name: 'docs are fine',
              reasonType: 'SECURITY_APPROVAL',
              agent: 'docs-*',
              subject: 'repo/*/docs-*',
              action: 'approve',
            },
            { name: 'never for prod', reasonType: '*', agent: '*', subject: 'prod/**', action: 'deny' },
          ],
        }),
      );
      const docs = open(
        { subject: { repo_id: 'repo', worktree_id: 'w', task_id: 'docs-12' } },
        'SECURITY_APPROVAL',
        'docs-writer',
      );
      assert.equal(docs.state, 'decided');
      assert.equal(docs.decision?.action, 'approve');
      assert.deepEqual(docs.decision?.origin, { kind: 'rule', by: 'policy', automatic: true, rule: 'docs are fine' });
      assert.equal((await hitl().whenSettled(docs.id)).decision?.action, 'approve');
      const prod = open({ subject: { repo_id: 'prod', worktree_id: 'w', task_id: 't' } }, 'CONFLICT', 'docs-writer');
      assert.equal(prod.decision?.origin.rule, 'never for prod');
      assert.equal(prod.decision?.action, 'deny');
      const otherAgent = open(
        { subject: { repo_id: 'repo', worktree_id: 'w', task_id: 'docs-12' } },
        'SECURITY_APPROVAL',
        'coder',
      );
      const otherReason = open(
        { subject: { repo_id: 'repo', worktree_id: 'w', task_id: 'docs-12' } },
        'CONFLICT',
        'docs-writer',
      );
      assert.equal(otherAgent.state, 'pending');
      assert.equal(otherReason.state, 'pending');
      const decided = hitl()
        .auditTrail({ invocationId: docs.id })
        .find((e) => e.kind === 'decided');
      assert.equal(decided?.automatic, true);
      assert.equal(decided?.actor, 'policy');
    });

    it('"Pause all approvals" makes every new invocation wait for a human', () => {
      const rules = [{ name: 'all', reasonType: '*', agent: '*', subject: '**', action: 'approve' }];
      hitl().setPolicy(policy({ rules, paused: true }));
      const inv = open();
      assert.equal(inv.state, 'pending');
      assert.equal(h.events('hitl.paused').length, 1);
      hitl().setPolicy(policy({ rules }));
      assert.equal(open().state, 'decided');
      assert.equal(h.events('hitl.resumed').length, 1);
    });
  });

  describe('persistence and audit', () => {
    it('keeps a pending invocation pending across a restart, with its deadline', () => {
      const inv = open();
      const decided = open();
      hitl().decide(decided.id, { action: 'approve', rationale: 'ok' }, 'op', ctx());
      operator?.dispose();
      h.hitlPolicy = policy({});
      h.restart();
      operator = hitl().attachOperator('editor:test');
      assert.equal(hitl().get(inv.id)?.state, 'pending');
      assert.equal(hitl().get(decided.id)?.decision?.rationale, 'ok');
      assert.ok(auditKinds(inv.id).includes('restored'));
      h.clock.advance(DEADLINE_MS - 1);
      assert.equal(hitl().get(inv.id)?.state, 'pending');
      h.clock.advance(1);
      assert.equal(hitl().get(inv.id)?.state, 'timed_out');
    });

    it('exports every invocation and audit record as JSON', () => {
      const inv = open();
      hitl().decide(inv.id, { action: 'deny', rationale: 'too risky' }, 'editor:alice', ctx());
      const exported = JSON.parse(JSON.stringify(hitl().exportAudit())) as {
        invocations: Array<Record<string, unknown>>;
        audit: Array<Record<string, unknown>>;
      };
      assert.equal(exported.invocations.length, 1);
      assert.equal(exported.invocations[0].invocation_id, inv.id);
      assert.equal((exported.invocations[0].decision as Record<string, unknown>).decided_by, 'editor:alice');
      assert.deepEqual(
        exported.audit.map((e) => e.kind),
        ['opened', 'decided'],
      );
      assert.equal(exported.audit[1].actor, 'editor:alice');
    });
  });

  it('uses the default policy when none is given', () => {
    const plain = new RouterHarness();
    try {
      assert.deepEqual(plain.coordinator.hitl.policy, DEFAULT_HITL_POLICY);
    } finally {
      plain.dispose();
    }
  });
});
