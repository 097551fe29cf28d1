import { strict as assert } from 'node:assert';
import {
  type AgentsChange,
  type ApprovalPolicyChange,
  type ApprovalsChange,
  type DeadLettersChange,
  type HitlInvocation,
  type InboxChange,
} from '../../src/core/api';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import type { Disposable } from '../../src/core/events';
import { parsePolicy } from '../../src/core/hitl/policy';
import { parseInvocationRequest } from '../../src/core/hitl/request';
import { COORDINATOR_ID } from '../../src/core/router/router';
import { CollectingSink, RouterHarness, ctx, settle } from '../support/routerHarness';
import { rejection } from '../support/apiErrors';
import { DEFAULT_EXECUTION_POLICY, type ToolCallError, type ToolFrame } from '../../src/core/tools/model';
import type { ToolsChange } from '../../src/core/api';
import { MAX_NEGOTIATION_PAYLOAD_SHOWN, type NegotiationsChange } from '../../src/core/api';
import type { Speaker } from '../../src/core/policy/speaker';
import { payloadText } from '../../src/core/api/inProcessApi';

/** Collects what an API event fires. */
function collect<T>(event: (listener: (value: T) => void) => Disposable): { seen: T[]; subscription: Disposable } {
  const seen: T[] = [];
  return { seen, subscription: event((value) => seen.push(value)) };
}

/** What crosses the API is plain data: a structured clone (what a worker or another process gets) is equal to it. */
function assertPlain(value: unknown): void {
  assert.deepEqual(structuredClone(value), value);
}

describe("CoordinatorApi in process (the editor's one way into the coordinator)", () => {
  let h: RouterHarness;
  let api: InProcessCoordinatorApi;

  beforeEach(() => {
    h = new RouterHarness({ leaseMs: 1_000, ackTimeoutMs: 60_000 });
    api = new InProcessCoordinatorApi(h.coordinator);
  });

  afterEach(() => {
    api.dispose();
    h.dispose();
  });

  function openInvocation(requester = 'agent-a'): HitlInvocation {
    const request = parseInvocationRequest(
      {
        reason_type: 'SECURITY_APPROVAL',
        subject: { repo_id: 'repo', worktree_id: 'wt', task_id: 't1' },
        summary: 'Delete generated fixtures',
      },
      { requester, correlationId: 'corr-api', now: h.clock.now() },
    );
    return h.coordinator.hitl.open(request, { kind: 'rpc' }, ctx('corr-api')).invocation;
  }

  /** A DATA message from `producer` to `consumer` that the consumer rejects: one dead letter. */
  function deadLetter(producer: string, consumer: string): void {
    h.stream(consumer);
    const m = h.sendData(producer, consumer, { idempotencyToken: `T-${producer}`, payload: { n: 1 } });
    h.acked(consumer, m.messageId, 'REJECTED', { error_code: 'VALIDATION_ERROR', note: 'bad' });
  }

  describe('agents and inboxes', () => {
    it('answers the registry and the router: agents, one agent, counts, inbox stats, metrics, store location', async () => {
      assert.deepEqual(await api.agents(), []);
      h.register('agent-b');
      h.register('agent-a');
      h.stream('agent-a');
      h.sendData('agent-b', 'agent-a');
      const agents = await api.agents();
      assert.deepEqual(agents, h.registry.list());
      assert.deepEqual(
        agents.map((a) => a.descriptor.agentId),
        ['agent-a', 'agent-b'],
      );
      assert.deepEqual(await api.agent('agent-a'), h.registry.get('agent-a'));
      assert.equal(await api.agent('nobody'), undefined);
      assert.deepEqual(await api.agentCounts(), { registered: 2, online: h.registry.onlineCount() });
      const inbox = await api.inboxStats('agent-a');
      assert.deepEqual(inbox, h.router.inboxStats('agent-a'));
      assert.equal(inbox.streaming, true);
      assert.equal(await api.metricsText(), h.router.metricsText());
      assert.equal(await api.storeLocation(), h.coordinator.store.location);
      for (const value of [agents, inbox, await api.agentCounts()]) assertPlain(value);
    });

    it('fires the agents event when an agent registers and leaves, and the inbox event when its inbox changes', async () => {
      const agents = collect<AgentsChange>(api.onDidChangeAgents);
      const inboxes = collect<InboxChange>(api.onDidChangeInbox);
      h.register('agent-a');
      assert.equal(agents.seen[0]?.kind, 'joined');
      assert.equal(agents.seen[0]?.agentId, 'agent-a');
      assert.deepEqual(agents.seen[0]?.kind === 'joined' && agents.seen[0].agent, h.registry.get('agent-a'));
      h.register('agent-b');
      h.stream('agent-a');
      h.sendData('agent-b', 'agent-a');
      await settle();
      assert.ok(
        inboxes.seen.some((change) => change.agentId === 'agent-a'),
        JSON.stringify(inboxes.seen),
      );
      assert.ok(h.registry.deregister('agent-b', 'done', ctx()));
      assert.deepEqual(agents.seen.at(-1), { kind: 'left', agentId: 'agent-b', reason: 'done' });
      for (const change of [...agents.seen, ...inboxes.seen]) assertPlain(change);
    });

    it('counts deliveries of agent messages to an inbox stream, not of ACKs, notices or decision replies', async () => {
      h.register('agent-a');
      h.register('agent-b');
      assert.equal(await api.deliveredMessageCount(), 0);
      // A message waits while its recipient has no stream: admitted, not delivered.
      const first = h.sendData('agent-b', 'agent-a');
      assert.equal(await api.deliveredMessageCount(), 0);
      const { sink: streamA } = h.stream('agent-a');
      h.stream('agent-b');
      await settle();
      assert.equal(await api.deliveredMessageCount(), 1);
      // agent-a's ACK reaches agent-b's stream, a join notice reaches both: neither is a message delivered.
      h.acked('agent-a', first.messageId, 'RECEIVED');
      h.register('agent-c');
      await settle();
      assert.equal(await api.deliveredMessageCount(), 1);
      // The decision answering a HITL_INVOCATION envelope comes from the coordinator as a reply: not counted either.
      assert.ok(
        h.send(
          h.envelope('agent-a', {
            messageType: 'HITL_INVOCATION',
            payload: { invocation_id: 'hitl-count', reason_type: 'CONFLICT' },
          }),
          COORDINATOR_ID,
        ).accepted,
      );
      await api.decideApproval('hitl-count', { action: 'approve', rationale: 'fine' }, 'editor:alice');
      await settle();
      assert.ok(
        streamA.items.some((i) => i.envelope.messageType === 'CONTROL'),
        'the decision reached agent-a',
      );
      assert.equal(await api.deliveredMessageCount(), 1);
      h.sendData('agent-a', 'agent-b');
      await settle();
      assert.equal(await api.deliveredMessageCount(), 2);
    });
  });

  describe('dead letters', () => {
    beforeEach(() => {
      for (const id of ['producer', 'consumer']) h.register(id);
    });

    it('answers the dead letters, one of them, their count and the diagnostic bundle', async () => {
      deadLetter('producer', 'consumer');
      const letters = await api.deadLetters();
      assert.deepEqual(letters, h.router.deadLetters());
      assert.equal(letters.length, 1);
      assert.deepEqual(await api.deadLetter(letters[0].id), letters[0]);
      assert.equal(await api.deadLetter(letters[0].id + 1000), undefined);
      assert.equal(await api.deadLetterCount(), 1);
      assert.deepEqual(await api.deadLetters({ producerId: 'someone else' }), []);
      const bundle = await api.exportDeadLetters({ includeRequeued: true });
      assert.equal(bundle.total, 1);
      assertPlain(letters);
      assertPlain(bundle);
    });

    it('requeues a dead letter, which fires the dead letters event; a second requeue is refused, not thrown', async () => {
      const changes = collect<DeadLettersChange>(api.onDidChangeDeadLetters);
      deadLetter('producer', 'consumer');
      await settle();
      const [letter] = await api.deadLetters();
      assert.deepEqual(changes.seen, [{ kind: 'added', id: letter.id }]);

      const result = await api.requeueDeadLetter(letter.id, { correlationId: letter.correlationId });
      assert.ok(result.accepted, result.accepted ? '' : result.reason);
      assert.deepEqual(changes.seen.at(-1), { kind: 'requeued', id: letter.id });
      assert.equal(h.router.message(result.messageId)?.envelope.correlationId, letter.correlationId);
      assert.equal(await api.deadLetterCount(), 0);
      assert.deepEqual(await api.deadLetters(), [], 'requeued entries are hidden unless asked for');
      assert.equal((await api.deadLetter(letter.id))?.requeuedAs, result.messageId);

      const again = await api.requeueDeadLetter(letter.id);
      assert.equal(again.accepted, false);
      assert.equal(!again.accepted && again.code, 'DUPLICATE_DETECTED');
    });
  });

  describe('activity', () => {
    it('answers the activity buffer: active entries, history, usage (filtered), and fires each change; plain data', async () => {
      const changes = collect<import('../../src/core/api').ActivityChange>(api.onDidChangeActivity);
      const at = h.clock.now();
      h.coordinator.activity.begin(
        {
          agentId: 'agent-a',
          taskId: 't1',
          repoId: 'app',
          worktreeId: 'agent-a',
          branch: 'sw4rm/agent-a',
          timestamp: at,
          description: 'edit',
        },
        ctx('c'),
      );
      h.coordinator.activity.begin(
        {
          agentId: 'agent-b',
          taskId: 't2',
          repoId: 'lib',
          worktreeId: 'agent-b',
          branch: 'sw4rm/agent-b',
          timestamp: at,
          description: 'fix',
        },
        ctx('c'),
      );
      h.coordinator.activity.end('agent-b', 't2', 'COMPLETED', ctx('c'));
      const active = await api.activity();
      assert.deepEqual(
        active.map((e) => e.taskId),
        ['t1'],
      );
      assert.deepEqual(await api.activity({ repoId: 'lib' }), []);
      const history = await api.activityHistory({ agentId: 'agent-b' }, 10);
      assert.deepEqual(
        history.map((e) => [e.taskId, e.outcome]),
        [['t2', 'COMPLETED']],
      );
      const usage = await api.activityUsage();
      assert.deepEqual([usage.active, usage.maxEntries, usage.maxPerAgent, usage.warning], [1, 10_000, 100, false]);
      assert.deepEqual(
        changes.seen.map((c) => c.kind),
        ['added', 'added', 'ended'],
      );
      for (const value of [active, history, usage, changes.seen]) assertPlain(value);
      changes.subscription.dispose();
    });
  });

  describe('concurrency limits (RFC §9.1)', () => {
    it('setMaxParallelInstances applies the limits at once, logs who changed them, and refuses nonsense as invalid', async () => {
      let changes = 0;
      const sub = h.coordinator.concurrency.onDidChange(() => changes++);
      await api.setMaxParallelInstances({ coder: 2 }, 1, 'editor:alice');
      assert.deepEqual(h.coordinator.concurrency.limits, {
        maxParallelInstances: { coder: 2 },
        defaultMaxParallelInstances: 1,
      });
      assert.equal(changes, 1, 'waiting tasks are tried again');
      const [event] = h.events('scheduler.limits_changed');
      assert.equal(event.actor, 'editor:alice');
      assert.deepEqual(event.details, { max_parallel_instances: { coder: 2 }, default: 1 });
      const refused = await rejection(api.setMaxParallelInstances({ coder: -1 }, 0, 'editor:alice'));
      assert.equal(refused.code, 'invalid');
      assert.match(refused.message, /max_parallel_instances for 'coder' must be a whole number ≥ 0/);
      assert.equal(h.events('scheduler.limits_changed').length, 1, 'a refused change is not logged');
      sub.dispose();
    });
  });

  describe('approvals', () => {
    let operator: Disposable;

    beforeEach(() => {
      operator = h.coordinator.hitl.attachOperator('editor:test');
    });

    afterEach(() => operator.dispose());

    it('lists, gets, counts and audits invocations as the HITL service does', async () => {
      const first = openInvocation('agent-a');
      const second = openInvocation('agent-b');
      assert.deepEqual(await api.approvals(), h.coordinator.hitl.list());
      assert.deepEqual(
        (await api.approvals({ pendingOnly: true })).map((i) => i.id).sort(),
        [first.id, second.id].sort(),
      );
      assert.deepEqual(await api.approval(first.id), h.coordinator.hitl.get(first.id));
      assert.equal(await api.approval('nope'), undefined);
      assert.equal(await api.pendingApprovalCount(), 2);
      assert.deepEqual(
        (await api.approvalAudit({ invocationId: first.id })).map((e) => e.kind),
        ['opened'],
      );
      const audit = await api.exportApprovalAudit();
      assert.equal((audit.invocations as unknown[]).length, 2);
      assertPlain(await api.approvals());
      assertPlain(audit);
    });

    it('decides an invocation: it settles, the requester gets the decision, and the approvals event fires', async () => {
      const changes = collect<ApprovalsChange>(api.onDidChangeApprovals);
      const invocation = openInvocation();
      assert.deepEqual(
        changes.seen.map((c) => [c.kind, c.invocation.id, c.invocation.state]),
        [['opened', invocation.id, 'pending']],
      );
      const answered = h.coordinator.hitl.whenSettled(invocation.id);

      const decided = await api.decideApproval(invocation.id, { action: 'approve', rationale: 'fine' }, 'editor:alice');
      assert.equal(decided.state, 'decided');
      assert.equal(decided.decision?.action, 'approve');
      assert.equal(decided.decision?.origin.by, 'editor:alice');
      assert.equal((await answered).decision?.rationale, 'fine', 'the blocked requester is answered');
      assert.deepEqual(changes.seen.at(-1) && [changes.seen.at(-1)!.kind, changes.seen.at(-1)!.invocation.state], [
        'settled',
        'decided',
      ]);
      assert.equal(await api.pendingApprovalCount(), 0);
      assert.deepEqual(
        (await api.approvalAudit({ invocationId: invocation.id })).map((e) => e.kind),
        ['opened', 'decided'],
      );
      assert.equal(
        h.events('hitl.decided').at(-1)?.correlationId,
        'corr-api',
        "logged under the invocation's correlation id",
      );
      assertPlain(decided);
      assertPlain(changes.seen);
    });

    it('sends the decision of an invocation that came as an envelope back to the agent', async () => {
      h.register('requester');
      const { sink } = h.stream('requester');
      const envelope = h.envelope('requester', {
        messageType: 'HITL_INVOCATION',
        payload: {
          invocation_id: 'hitl-api',
          reason_type: 'SECURITY_APPROVAL',
          subject: { repo_id: 'r', worktree_id: 'w', task_id: 't' },
        },
      });
      assert.ok(h.send(envelope, COORDINATOR_ID).accepted);
      await api.decideApproval('hitl-api', { action: 'deny', rationale: 'not now' }, 'editor:alice');
      await settle();
      const replies = sink.items
        .filter((i) => i.envelope.producerId === COORDINATOR_ID && i.envelope.messageType === 'CONTROL')
        .map((i) => JSON.parse(Buffer.from(i.envelope.payload).toString()) as Record<string, unknown>);
      assert.equal(replies.length, 1);
      assert.equal(replies[0].type, 'HITL_DECISION');
      assert.equal(replies[0].decision, 'deny');
      assert.equal(replies[0].decided_by, 'editor:alice');
    });

    it('cancels an invocation: the requester is answered deny', async () => {
      const invocation = openInvocation();
      const cancelled = await api.cancelApproval(invocation.id, 'editor:alice', 'not needed');
      assert.equal(cancelled.state, 'cancelled');
      assert.equal(cancelled.decision?.action, 'deny');
      assert.equal(h.coordinator.hitl.get(invocation.id)?.state, 'cancelled');
    });

    it('refuses with a typed error the user can read: already settled, unknown, invalid', async () => {
      const invocation = openInvocation();
      await api.decideApproval(invocation.id, { action: 'approve', rationale: 'fine' }, 'editor:alice');
      const settled = await rejection(
        api.decideApproval(invocation.id, { action: 'deny', rationale: 'no' }, 'editor:bob'),
      );
      assert.equal(settled.code, 'settled');
      assert.match(settled.message, /already/);
      assert.equal((await rejection(api.cancelApproval(invocation.id, 'editor:bob', ''))).code, 'settled');
      assert.equal(
        (await rejection(api.decideApproval('nope', { action: 'approve', rationale: 'fine' }, 'editor:bob'))).code,
        'not_found',
      );
      const other = openInvocation();
      const invalid = await rejection(
        api.decideApproval(other.id, { action: 'allow', rationale: 'fine' }, 'editor:bob'),
      );
      assert.equal(invalid.code, 'invalid');
      assert.equal(invalid.sw4rmCode, 'VALIDATION_ERROR');
      assert.match(invalid.message, /action must be one of approve, deny, modify, defer/);
      assert.equal(
        (await rejection(api.decideApproval(other.id, { action: 'modify', rationale: 'narrower' }, 'editor:bob')))
          .sw4rmCode,
        'VALIDATION_ERROR',
      );
      for (const rationale of [undefined, '', ' \n ']) {
        const blank = await rejection(
          api.decideApproval(
            other.id,
            { action: 'approve', ...(rationale === undefined ? {} : { rationale }) },
            'editor:bob',
          ),
        );
        assert.deepEqual(
          [blank.code, blank.sw4rmCode],
          ['invalid', 'VALIDATION_ERROR'],
          `rationale ${JSON.stringify(rationale)}`,
        );
        assert.match(blank.message, /^A rationale is required/);
      }
      assert.equal(h.coordinator.hitl.get(other.id)?.state, 'pending', 'a refused decision changes nothing');
    });

    it('answers and replaces the policy, pauses and resumes, and fires the policy event', async () => {
      const changes = collect<ApprovalPolicyChange>(api.onDidChangeApprovalPolicy);
      const { policy, problems } = parsePolicy({
        defaultDeadlineSeconds: 42,
        rules: [{ name: 'docs', action: 'approve', agent: 'doc-*' }],
      });
      assert.deepEqual(problems, []);
      await api.setApprovalPolicy(policy, 'settings');
      assert.deepEqual(h.coordinator.hitl.policy, policy);
      assert.deepEqual(await api.approvalPolicy(), policy);
      assertPlain(await api.approvalPolicy());
      assert.equal(await api.approvalsPaused(), false);
      assert.equal(openInvocation('doc-writer').state, 'decided', 'the rule applies');

      await api.setApprovalsPaused(true, 'editor:alice');
      assert.equal(await api.approvalsPaused(), true);
      assert.equal(h.coordinator.hitl.policy.defaultDeadlineMs, 42_000, 'pausing keeps the rest of the policy');
      assert.equal(openInvocation('doc-writer').state, 'pending', 'paused: no rule decides');
      assert.equal(h.events('hitl.paused').at(-1)?.actor, 'editor:alice');
      await api.setApprovalsPaused(false, 'editor:alice');
      assert.equal(h.coordinator.hitl.policy.paused, false);
      assert.deepEqual(
        changes.seen.map((c) => [c.by, c.policy.paused]),
        [
          ['settings', false],
          ['editor:alice', true],
          ['editor:alice', false],
        ],
      );
    });

    it('attaches and detaches the window as an operator', async () => {
      operator.dispose();
      assert.deepEqual(h.coordinator.hitl.operatorNames, []);
      const attachment = await api.attachOperator('editor:alice');
      assert.deepEqual(attachment, { id: attachment.id, name: 'editor:alice' });
      assert.deepEqual(h.coordinator.hitl.operatorNames, ['editor:alice']);
      const invocation = openInvocation();
      h.clock.advance(h.coordinator.hitl.policy.unavailableAfterMs + 1);
      assert.equal(h.coordinator.hitl.get(invocation.id)?.state, 'pending', 'an operator is attached: no fallback');
      await api.detachOperator(attachment.id);
      await api.detachOperator(attachment.id);
      assert.deepEqual(h.coordinator.hitl.operatorNames, []);
      h.clock.advance(h.coordinator.hitl.policy.unavailableAfterMs + 1);
      assert.equal(h.coordinator.hitl.get(invocation.id)?.state, 'timed_out', 'no operator: the fallback applies');
    });
  });

  describe('tasks', () => {
    it('submits, lists, details (events and CONTROL messages by correlation id), preempts, cancels and shuts down through the scheduler', async () => {
      h.register('agent-a', { name: 'coder' });
      h.stream('agent-a');
      h.registry.heartbeat('agent-a', 'RUNNABLE', {}, ctx('hb'));
      const changes = collect<import('../../src/core/api').TaskChange>(api.onDidChangeTasks);
      const refused = await api.submitTask(
        { target: 'agent-a', priority: 25, params: '{}', scope: 'repo:app' },
        'editor:alice',
      );
      assert.equal(!refused.accepted && refused.code, 'VALIDATION_ERROR');
      const first = await api.submitTask(
        { taskId: 'api-1', target: 'agent-a', priority: 0, params: '{"title":"one"}', scope: 'repo:app/src/**' },
        'editor:alice',
      );
      assert.ok(first.accepted, first.accepted ? '' : first.reason);
      assert.equal(first.task.state, 'DISPATCHED');
      assert.equal(first.task.submittedBy, 'editor:alice');
      const second = await api.submitTask(
        { taskId: 'api-2', target: 'agent-a', priority: 5, params: '{"title":"two"}', scope: 'repo:lib' },
        'editor:alice',
      );
      assert.ok(second.accepted);
      assert.match(second.reason, /waiting for agent agent-a to finish its current task/);
      assert.deepEqual(
        (await api.tasks({ includeFinished: false })).map((t) => [t.taskId, t.state]),
        [
          ['api-1', 'DISPATCHED'],
          ['api-2', 'QUEUED'],
        ],
      );
      assert.equal((await api.task('api-1'))?.assignedAgentId, 'agent-a');
      assert.deepEqual(
        (await api.taskEvents('api-1'))
          .map((e) => e.eventType)
          .filter((t) => t.startsWith('task.'))
          .sort(),
        ['task.dispatched', 'task.state_changed', 'task.submitted'],
      );
      assert.equal((await api.taskMessages('api-1')).filter((m) => m.messageType === 'CONTROL').length, 1);

      const preempted = await api.preemptTask('api-1', '', 'editor:alice');
      assert.equal(preempted.state, 'PREEMPTING');
      assert.equal(
        (await rejection(api.preemptTask('api-2', '', 'editor:alice'))).code,
        'refused',
        'a queued task runs nowhere',
      );
      assert.equal((await api.cancelTask('api-2', '', 'editor:alice')).state, 'CANCELLED');
      assert.equal((await rejection(api.cancelTask('nope', '', 'editor:alice'))).code, 'not_found');

      await api.shutdownAgent('agent-a', 1_000, 'editor:alice');
      assert.equal(h.registry.get('agent-a')?.state, 'SHUTTING_DOWN');
      assert.equal((await rejection(api.shutdownAgent('ghost', undefined, 'editor:alice'))).code, 'not_found');
      assert.ok(changes.seen.some((c) => c.kind === 'submitted' && c.task.taskId === 'api-1'));
      assert.ok(
        changes.seen.some((c) => c.kind === 'changed' && c.task.taskId === 'api-2' && c.task.state === 'CANCELLED'),
      );
      changes.subscription.dispose();
    });
  });

  describe('tools', () => {
    /** An agent provider `provider-a` (online, streaming its inbox) with one tool that runs until it is answered or cancelled. */
    function registerProvider(): CollectingSink {
      h.register('provider-a');
      const { sink } = h.stream('provider-a');
      h.registry.heartbeat('provider-a', 'RUNNABLE', {}, ctx('hb'));
      const registered = h.coordinator.toolCatalog.register(
        'provider-a',
        'provider-a',
        [
          {
            tool_name: 'slow',
            input_schema: JSON.stringify({ type: 'object', properties: { n: { type: 'number' } } }),
            idempotent: false,
            default_timeout_s: 0,
            max_concurrency: 2,
            side_effects: 'none',
          },
        ],
        ctx('register'),
      );
      assert.ok(registered.ok, registered.ok ? '' : registered.reason);
      return sink;
    }

    /** Starts a call of provider-a's `slow` as agent-b; answers its id and what its sink received. */
    function startCall(callId: string): { callId: string; ended: ToolFrame[]; failed: ToolCallError[] } {
      const ended: ToolFrame[] = [];
      const failed: ToolCallError[] = [];
      h.coordinator.tools.start(
        'agent-b',
        {
          callId,
          providerId: 'provider-a',
          toolName: 'slow',
          contentType: 'application/json',
          args: Buffer.from('{"n":1}'),
          policy: DEFAULT_EXECUTION_POLICY,
          stream: true,
          via: 'internal',
        },
        ctx(callId),
        { frame: () => undefined, end: (frame) => ended.push(frame), fail: (error) => failed.push(error) },
      );
      return { callId, ended, failed };
    }

    it("answers the providers, the recent calls and a call's details as the engine has them, as plain data, and fires changes", async () => {
      const changes = collect<ToolsChange>(api.onDidChangeTools);
      const providerInbox = registerProvider();
      const providers = await api.toolProviders();
      assert.deepEqual(providers, h.coordinator.tools.providers());
      const agent = providers.find((p) => p.providerId === 'provider-a');
      assert.equal(agent?.kind, 'agent');
      assert.equal(agent?.available, true);
      assert.deepEqual(
        agent?.tools.map((t) => t.name),
        ['slow'],
      );
      assert.ok(providers.some((p) => p.providerId === 'workspace' && p.kind === 'builtin'));
      assert.ok(changes.seen.some((c) => c.kind === 'provider' && c.id === 'provider-a'));

      h.register('agent-b');
      startCall('call-1');
      await settle();
      assert.ok(changes.seen.some((c) => c.kind === 'call' && c.id === 'call-1'));
      // The provider answers one frame of the call (a TOOL_RESULT to `coordinator`): the details keep it.
      assert.equal(providerInbox.ofType('TOOL_CALL').length, 1);
      const frame = h.send(
        h.envelope('provider-a', {
          messageType: 'TOOL_RESULT',
          correlationId: 'call-1',
          payload: {
            call_id: 'call-1',
            frame_no: 0,
            final: false,
            content_type: 'application/json',
            result: { line: 'first' },
          },
        }),
        'coordinator',
      );
      assert.ok(frame.accepted, frame.accepted ? '' : frame.reason);
      await settle();
      const calls = await api.toolCalls();
      assert.deepEqual(calls, h.coordinator.tools.recentCalls(100));
      assert.equal(calls[0]?.callId, 'call-1');
      assert.equal(calls[0]?.callerAgentId, 'agent-b');
      assert.equal(calls[0]?.outcome, 'running');
      assert.equal((await api.toolCalls(0)).length, 1, 'a limit below 1 still lists the newest call');
      const details = await api.toolCallDetails('call-1');
      assert.deepEqual(details?.record, h.coordinator.tools.callRecord('call-1'));
      assert.deepEqual(details?.frames, [...h.coordinator.tools.callFrames('call-1')]);
      assert.deepEqual(
        details?.frames.map((f) => [f.frameNo, f.final, JSON.parse(f.text)]),
        [[0, false, { line: 'first' }]],
      );
      assert.equal(await api.toolCallDetails('no-such-call'), undefined);
      for (const value of [providers, calls, details]) assertPlain(value);
      changes.subscription.dispose();
    });

    it('cancels a call as its caller would: CANCELLED (the caller gets the terminal frame), then ALREADY_COMPLETED; unknown NOT_FOUND; logged as the operator', async () => {
      registerProvider();
      h.register('agent-b');
      const call = startCall('call-2');
      await settle();
      const cancelled = await api.cancelToolCall('call-2', 'editor:alice');
      assert.equal(cancelled.errorCode, 'CANCELLED', cancelled.message);
      await settle();
      assert.equal(call.ended.length, 1, 'the caller got its terminal frame');
      assert.equal(call.ended[0].final, true);
      assert.equal(JSON.parse(call.ended[0].summary.toString('utf8')).cancelled, true);
      assert.deepEqual(call.failed, []);
      assert.equal((await api.toolCallDetails('call-2'))?.record.outcome, 'cancelled');
      assert.equal((await api.cancelToolCall('call-2', 'editor:alice')).errorCode, 'ALREADY_COMPLETED');
      assert.equal((await api.cancelToolCall('ghost-call', 'editor:alice')).errorCode, 'NOT_FOUND');
      const logged = h.events('operator.tool_call_cancel');
      assert.deepEqual(
        logged.map((e) => [e.actor, e.correlationId, e.details.error_code]),
        [
          ['editor:alice', 'call-2', 'CANCELLED'],
          ['editor:alice', 'call-2', 'ALREADY_COMPLETED'],
          ['editor:alice', 'ghost-call', 'NOT_FOUND'],
        ],
      );
      assert.equal(logged[0].details.caller_agent_id, 'agent-b');
    });
  });

  describe('negotiations (debates and rooms)', () => {
    const as = (agentId: string): Speaker => ({
      kind: 'agent',
      label: `agent:${agentId}`,
      mayActAs: (id) => id === agentId,
    });
    const MARKUP = '<img src=x onerror="window.__pwned=1">';

    it("answers room artifacts and an artifact's detail as plain data (payload as text), fires changes, and an operator decides the escalation", async () => {
      for (const id of ['prod', 'c1', 'c2']) h.register(id);
      const operator = h.coordinator.hitl.attachOperator('tester');
      const changes = collect<NegotiationsChange>(api.onDidChangeNegotiations);
      const artifact = JSON.stringify({ steps: ['design', 'build'] });
      h.coordinator.room.submitProposal(
        {
          artifactType: 'PLAN',
          artifactId: 'plan-1',
          producerId: 'prod',
          artifact: Buffer.from(artifact),
          contentType: 'application/json',
          requestedCritics: ['c1', 'c2'],
          roomId: 'room-1',
          createdAt: null,
        },
        as('prod'),
        ctx('submit'),
      );
      const vote = (criticId: string, confidence: number, strengths: string[]) =>
        h.coordinator.room.submitVote(
          {
            artifactId: 'plan-1',
            criticId,
            score: 8,
            confidence,
            passed: true,
            strengths,
            weaknesses: [],
            recommendations: [],
            roomId: '',
            votedAt: null,
          },
          as(criticId),
          ctx(`vote-${criticId}`),
        );
      vote('c1', 0.9, [MARKUP]);
      vote('c2', 0.2, []);

      const rows = await api.roomArtifacts();
      assertPlain(rows);
      assert.deepEqual(
        rows.map((r) => [r.artifactId, r.roomId, r.state, r.votes, r.requested, r.outcome]),
        [['plan-1', 'room-1', 'escalated', 2, 2, 'ESCALATED_TO_HITL']],
      );
      const invocationId = rows[0]!.invocationId;
      assert.ok(invocationId, "the escalation's HITL invocation");
      const detail = await api.roomArtifactDetail('plan-1');
      assert.ok(detail);
      assertPlain(detail);
      assert.deepEqual(detail.proposal.artifact, {
        contentType: 'application/json',
        bytes: Buffer.byteLength(artifact),
        text: artifact,
        binary: false,
        truncated: false,
      });
      assert.equal(detail.previous, undefined);
      assert.deepEqual(
        detail.votes.map((v) => [v.criticId, v.strengths]),
        [
          ['c1', [MARKUP]],
          ['c2', []],
        ],
      );
      assert.equal(detail.aggregate?.voteCount, 2);
      assert.equal(detail.decision?.outcome, 'ESCALATED_TO_HITL');
      assert.ok(detail.decision?.checks.some((c) => c.name === 'min_confidence_threshold' && !c.pass));
      assert.equal(await api.roomArtifactDetail('no-such-artifact'), undefined);
      assert.ok(
        changes.seen.some((c) => c.kind === 'room' && c.id === 'plan-1' && c.state === 'escalated'),
        JSON.stringify(changes.seen),
      );

      await api.decideApproval(
        invocationId,
        { action: 'approve', rationale: 'Checked the unsure vote myself.' },
        'editor:alice',
      );
      await settle();
      const decided = await api.roomArtifactDetail('plan-1');
      assert.equal(decided?.decision?.outcome, 'APPROVED');
      assert.ok(decided?.decision?.reason.includes('Checked the unsure vote myself.'), decided?.decision?.reason);
      assert.equal((await api.roomArtifacts())[0]!.state, 'decided');
      changes.subscription.dispose();
      operator.dispose();
    });

    it("answers debates and a debate's detail as plain data (rounds' payloads as text), and fires changes", async () => {
      for (const id of ['deb-a', 'deb-b']) h.register(id);
      const changes = collect<NegotiationsChange>(api.onDidChangeNegotiations);
      h.coordinator.negotiations.open(
        {
          negotiationId: 'neg-1',
          correlationId: '',
          topic: `orders ${MARKUP}`,
          participants: ['deb-a', 'deb-b'],
          intensity: 'MEDIUM',
          debateTimeoutMs: 0,
          profileHint: '',
          preferences: {},
          schema: '',
        },
        as('deb-a'),
        ctx('neg-1'),
      );
      h.coordinator.negotiations.propose(
        {
          negotiationId: 'neg-1',
          fromAgent: 'deb-a',
          contentType: 'application/json',
          payload: Buffer.from('{"a":1}'),
        },
        as('deb-a'),
        ctx('neg-1'),
      );
      const rows = await api.negotiations();
      assertPlain(rows);
      assert.deepEqual(
        rows.map((r) => [r.id, r.topic, r.state, r.rounds]),
        [['neg-1', `orders ${MARKUP}`, 'open', 1]],
      );
      const detail = await api.negotiationDetail('neg-1');
      assert.ok(detail);
      assertPlain(detail);
      assert.equal(detail.negotiation.topic, `orders ${MARKUP}`);
      assert.equal(detail.negotiation.effective.profile.length > 0, true);
      assert.deepEqual(
        detail.rounds.map((r) => [r.n, r.from, r.payload.text]),
        [[1, 'deb-a', '{"a":1}']],
      );
      assert.ok(!('undelivered' in detail.negotiation), 'the router retry queue stays inside the core');
      assert.equal(await api.negotiationDetail('no-such-negotiation'), undefined);
      assert.ok(
        changes.seen.some((c) => c.kind === 'debate' && c.id === 'neg-1'),
        JSON.stringify(changes.seen),
      );
      changes.subscription.dispose();
    });
  });

  it('once disposed, refuses every call as stopped, fires no more events and detaches its operators', async () => {
    const agents = collect<AgentsChange>(api.onDidChangeAgents);
    await api.attachOperator('editor:alice');
    api.dispose();
    assert.deepEqual(h.coordinator.hitl.operatorNames, []);
    const stopped = await rejection(api.agents());
    assert.equal(stopped.code, 'stopped');
    assert.equal((await rejection(api.requeueDeadLetter(1))).code, 'stopped');
    h.register('agent-a');
    assert.deepEqual(agents.seen, []);
  });
});

describe('CoordinatorApi: negotiation payloads as text for the editor', () => {
  it('decodes UTF-8 as it is, markup included (the views insert it as text)', () => {
    const text = '{"strength":"<img src=x onerror=\\"x\\">","é":"ü"}';
    assert.deepEqual(payloadText(Buffer.from(text), 'application/json'), {
      contentType: 'application/json',
      bytes: Buffer.byteLength(text),
      text,
      binary: false,
      truncated: false,
    });
  });

  it('says binary content is binary, with its size, and gives no text', () => {
    assert.deepEqual(payloadText(Buffer.from([0xff, 0xfe, 0x00, 0x80]), 'application/octet-stream'), {
      contentType: 'application/octet-stream',
      bytes: 4,
      text: '',
      binary: true,
      truncated: false,
    });
  });

  it('bounds the excerpt, without splitting a character at the cut', () => {
    const big = Buffer.from('a'.repeat(MAX_NEGOTIATION_PAYLOAD_SHOWN - 1) + 'é' + 'b'.repeat(10));
    const shown = payloadText(big, 'text/plain');
    assert.equal(shown.truncated, true);
    assert.equal(shown.binary, false);
    assert.equal(shown.bytes, big.byteLength);
    assert.equal(shown.text, 'a'.repeat(MAX_NEGOTIATION_PAYLOAD_SHOWN - 1), 'the é cut in half is left out');
    const exact = payloadText(Buffer.from('x'.repeat(MAX_NEGOTIATION_PAYLOAD_SHOWN + 5)), 'text/plain');
    assert.equal(exact.text.length, MAX_NEGOTIATION_PAYLOAD_SHOWN);
  });
});
