import { strict as assert } from 'node:assert';
import type { HitlInvocation } from '../../src/core/hitl/model';
import { DEFAULT_HITL_POLICY, applyFallback, matchRule, parsePolicy } from '../../src/core/hitl/policy';
import { HitlRequestError, MAX_INVOCATION_BYTES, parseBody, parseInvocationRequest } from '../../src/core/hitl/request';

const NOW = Date.UTC(2026, 0, 1);
const frame = { correlationId: 'corr', now: NOW };

function refusal(fn: () => unknown, code: string, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => e instanceof HitlRequestError && e.code === code && pattern.test(e.message));
}

describe('HITL invocation requests', () => {
  it('reads the RFC §15.2 shape', () => {
    const r = parseInvocationRequest(
      {
        invocation_id: 'hitl-001',
        reason_type: 'SECURITY_APPROVAL',
        correlation_id: 'c-1',
        subject: { repo_id: 'repo', worktree_id: 'wt', task_id: 'task' },
        context_uri: 'sw4rm://hitl/context/hitl-001',
        suggested_action: 'approve',
        deadline_ts: '2026-01-01T00:10:00Z',
      },
      frame,
    );
    assert.equal(r.invocationId, 'hitl-001');
    assert.equal(r.reasonType, 'SECURITY_APPROVAL');
    assert.equal(r.correlationId, 'c-1');
    assert.deepEqual(r.subject, { repoId: 'repo', worktreeId: 'wt', taskId: 'task' });
    assert.equal(r.suggestedAction, 'approve');
    assert.equal(r.deadlineAt, NOW + 600_000);
    assert.equal(r.context.facts.context_uri, 'sw4rm://hitl/context/hitl-001', 'unknown fields are kept as facts');
  });

  it('reads the message-types.txt approval request shape', () => {
    const r = parseInvocationRequest(
      {
        reason_type: 'SECURITY_APPROVAL',
        context: {
          agent_id: 'file-processor-001',
          operation: 'delete_sensitive_files',
          risk_level: 'HIGH',
          affected_files: ['/data/customer_pii.csv'],
        },
        approval_required_by: '2026-01-01T12:00:00Z',
        approver_roles: ['security_admin'],
        auto_timeout_action: 'DENY',
      },
      frame,
    );
    assert.equal(r.requester, 'file-processor-001');
    assert.equal(r.context.summary, 'delete_sensitive_files');
    assert.equal(r.context.risk.level, 'HIGH');
    assert.deepEqual(r.context.facts.affected_files, ['/data/customer_pii.csv']);
    assert.deepEqual(r.context.facts.approver_roles, ['security_admin']);
    assert.equal(r.requestedFallback, 'deny');
    assert.equal(r.deadlineAt, Date.UTC(2026, 0, 1, 12));
  });

  it("prefers the transport's requester and reason type over the body", () => {
    const r = parseInvocationRequest(
      { reason_type: 'CONFLICT', agent_id: 'liar' },
      { ...frame, requester: 'authenticated', reasonType: 'TASK_ESCALATION' },
    );
    assert.equal(r.requester, 'authenticated');
    assert.equal(r.reasonType, 'TASK_ESCALATION');
  });

  it('reads diffs, risk notes, prior attempts, inference metadata and its confidence as the score', () => {
    const r = parseInvocationRequest(
      {
        reason_type: 'CONFLICT',
        diffs: [
          { title: 'a.txt', before: 'x', after: 'y' },
          { path: 'c.json', before_json: { a: 1 }, after_json: { a: 2 } },
        ],
        diff: '--- a\n+++ b\n',
        risk: { level: 'LOW', notes: ['reversible'] },
        prior_attempts: [{ at: 't', outcome: 'denied' }],
        inference: { model: 'm-1', confidence: 0.7 },
      },
      frame,
    );
    assert.deepEqual(
      r.context.diffs.map((d) => d.title),
      ['diff', 'a.txt', 'c.json'],
    );
    assert.deepEqual(r.context.diffs[2].afterJson, { a: 2 });
    assert.deepEqual(r.context.risk, { level: 'LOW', notes: ['reversible'] });
    assert.equal(r.context.priorAttempts.length, 1);
    assert.equal(r.context.score, 0.7);
  });

  it('refuses bad input with VALIDATION_ERROR and names the field', () => {
    refusal(
      () => parseInvocationRequest({}, frame),
      'VALIDATION_ERROR',
      /reason_type must be one of CONFLICT, SECURITY_APPROVAL, TASK_ESCALATION, MANUAL_OVERRIDE, WORKTREE_OVERRIDE, DEBATE_DEADLOCK, TOOL_PRIVILEGE_ESCALATION, CONNECTOR_APPROVAL/,
    );
    refusal(
      () => parseInvocationRequest({ reason_type: 'CONFLICT', deadline_ts: '2025-01-01T00:00:00Z' }, frame),
      'VALIDATION_ERROR',
      /has already passed/,
    );
    refusal(
      () => parseInvocationRequest({ reason_type: 'CONFLICT', deadline_ts: 'soon' }, frame),
      'VALIDATION_ERROR',
      /ISO-8601/,
    );
    refusal(() => parseInvocationRequest({ reason_type: 'CONFLICT', score: 3 }, frame), 'VALIDATION_ERROR', /\[0,1\]/);
    refusal(
      () => parseInvocationRequest({ reason_type: 'CONFLICT', invocation_id: 'a b' }, frame),
      'VALIDATION_ERROR',
      /invocation_id/,
    );
    refusal(
      () => parseInvocationRequest({ reason_type: 'CONFLICT', priority: 1.5 }, frame),
      'VALIDATION_ERROR',
      /priority/,
    );
    refusal(
      () => parseInvocationRequest({ reason_type: 'CONFLICT', proposed_actions: [1] }, frame),
      'VALIDATION_ERROR',
      /proposed_actions/,
    );
    refusal(
      () => parseInvocationRequest({ reason_type: 'CONFLICT', diffs: [{ title: 'empty' }] }, frame),
      'VALIDATION_ERROR',
      /nothing to show/,
    );
  });

  it('takes a JSON body, plain text as the summary, and refuses oversize, non-objects and binary', () => {
    assert.deepEqual(parseBody(Buffer.from('{"reason_type":"CONFLICT"}')), { reason_type: 'CONFLICT' });
    assert.deepEqual(parseBody(Buffer.from('please look')), { summary: 'please look' });
    assert.deepEqual(parseBody(Buffer.alloc(0)), {});
    refusal(() => parseBody(Buffer.from('[1,2]')), 'VALIDATION_ERROR', /JSON object/);
    refusal(() => parseBody(Buffer.from([0xff, 0xfe, 0x00])), 'VALIDATION_ERROR', /neither JSON nor UTF-8/);
    refusal(() => parseBody(Buffer.alloc(MAX_INVOCATION_BYTES + 1, 0x20)), 'OVERSIZE_PAYLOAD', /at most 262144 bytes/);
  });
});

describe('HITL policy', () => {
  it('reads fallbacks per reason type, * first, named types overriding it', () => {
    const { policy, problems } = parsePolicy({
      fallbacks: { CONFLICT: 'EXTEND_TIMEOUT', '*': { policy: 'AUTO_DECIDE_THRESHOLD', threshold: 0.75 } },
      defaultDeadlineSeconds: 30,
      unavailableAfterSeconds: 2,
    });
    assert.deepEqual(problems, []);
    assert.equal(policy.fallbacks.CONFLICT.policy, 'EXTEND_TIMEOUT');
    assert.equal(policy.fallbacks.SECURITY_APPROVAL.policy, 'AUTO_DECIDE_THRESHOLD');
    assert.equal(policy.fallbacks.SECURITY_APPROVAL.threshold, 0.75);
    assert.equal(policy.defaultDeadlineMs, 30_000);
    assert.equal(policy.unavailableAfterMs, 2_000);
  });

  it('skips bad entries and says what was wrong, keeping the safe default', () => {
    const { policy, problems } = parsePolicy({
      fallbacks: {
        CONFLICT: 'ALLOW_ALL',
        NOPE: 'DENY_BY_DEFAULT',
        TASK_ESCALATION: { policy: 'AUTO_DECIDE_THRESHOLD', threshold: 2 },
      },
      rules: [{ action: 'approve', reasonType: 'X' }, { action: 'shrug' }, 'x', { action: 'deny', agent: '' }],
      unavailableAfterSeconds: 30,
      defaultDeadlineSeconds: -1,
      paused: 'yes',
    });
    assert.equal(problems.length, 10, problems.join('\n'));
    assert.equal(policy.fallbacks.CONFLICT.policy, 'DENY_BY_DEFAULT');
    assert.equal(policy.fallbacks.TASK_ESCALATION.policy, 'DENY_BY_DEFAULT');
    assert.deepEqual(policy.rules, []);
    assert.equal(policy.unavailableAfterMs, 5_000);
    assert.equal(policy.paused, false);
  });

  it('matches rules by reason type, agent glob and subject glob over repo/worktree/task', () => {
    const { policy } = parsePolicy({
      rules: [
        { name: 'r1', reasonType: 'CONFLICT', agent: 'bot-*', subject: 'repo/*/*', action: 'approve' },
        { name: 'r2', subject: '**/release-*', action: 'deny' },
      ],
    });
    const inv = (reasonType: string, requester: string, repoId: string, taskId: string) =>
      ({ reasonType, requester, subject: { repoId, worktreeId: 'wt', taskId } }) as Pick<
        HitlInvocation,
        'reasonType' | 'requester' | 'subject'
      >;
    assert.equal(matchRule(policy.rules, inv('CONFLICT', 'bot-1', 'repo', 't'))?.name, 'r1');
    assert.equal(matchRule(policy.rules, inv('CONFLICT', 'human', 'repo', 't')), undefined);
    assert.equal(matchRule(policy.rules, inv('CONFLICT', 'bot-1', 'other', 't')), undefined);
    assert.equal(matchRule(policy.rules, inv('SECURITY_APPROVAL', 'x', 'other', 'release-2'))?.name, 'r2');
    assert.equal(
      matchRule(policy.rules, inv('CONFLICT', 'bot-1', 'repo', 'release-2'))?.name,
      'r1',
      'the first match wins',
    );
  });

  it('computes EXTEND_TIMEOUT steps from a configured extension when one is given', () => {
    const { policy } = parsePolicy({
      fallbacks: { CONFLICT: { policy: 'EXTEND_TIMEOUT', extendSeconds: 10, maxExtensions: 1 } },
    });
    const invocation = {
      requestedFallback: '',
      context: { score: null },
      extensions: 0,
      createdAt: 0,
      originalDeadlineAt: 60_000,
      deadlineAt: 60_000,
      requester: 'a',
    } as unknown as HitlInvocation;
    const outcome = applyFallback(invocation, policy.fallbacks.CONFLICT, 'deadline', 60_000);
    assert.deepEqual(outcome.kind === 'extend' && [outcome.deadlineAt, outcome.extension], [70_000, 1]);
    assert.equal(
      applyFallback({ ...invocation, extensions: 1 } as HitlInvocation, policy.fallbacks.CONFLICT, 'deadline', 70_000)
        .kind,
      'decide',
    );
    assert.equal(DEFAULT_HITL_POLICY.fallbacks.CONFLICT.policy, 'DENY_BY_DEFAULT');
  });
});
