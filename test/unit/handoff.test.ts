import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { delegationTree, type HandoffRequestInput } from '../../src/core/handoff/handoffs';
import { HANDOFF_CONTEXT_CONTENT_TYPE, type HandoffRecord } from '../../src/core/handoff/model';
import { NegotiationError, type Speaker } from '../../src/core/policy/speaker';
import { STORE_FILE_NAME } from '../../src/core/store/sqliteStore';
import { COORDINATOR_SCHEMA } from '../../src/core/coordinatorStore';
import { HANDOFF_SQL } from '../../src/core/handoff/sqliteHandoffRepository';
import type { CollectingSink } from '../support/routerHarness';
import { assertRefused, ctx, json, settle } from '../support/routerHarness';
import { SchedulerHarness } from '../support/schedulerHarness';

const OPERATOR: Speaker = { kind: 'operator', label: 'operator' };
const as = (agentId: string): Speaker => ({
  kind: 'agent',
  label: `agent:${agentId}`,
  mayActAs: (id) => id === agentId,
});
const CONTEXT = {
  conversation_history: [
    { role: 'user', content: 'Review this code for security issues', timestamp: '2025-01-15T10:30:00Z' },
    { role: 'assistant', content: 'I will hand this off to a specialist.' },
  ],
  tool_state: { active_calls: [] },
  metadata: { original_request_id: 'req-123' },
};
const TIMEOUT = 10_000;

function refusal(fn: () => unknown, kind: NegotiationError['kind'], code: string, message?: RegExp): NegotiationError {
  let caught: NegotiationError | undefined;
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof NegotiationError, `a NegotiationError, not ${String(err)}`);
    assert.equal(err.kind, kind, err.message);
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    caught = err;
    return true;
  });
  return caught!;
}

async function rejected(
  promise: Promise<unknown>,
  kind: NegotiationError['kind'],
  code: string,
  message?: RegExp,
): Promise<NegotiationError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof NegotiationError, `a NegotiationError, not ${String(err)}`);
    assert.equal(err.kind, kind, err.message);
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    return err;
  }
  assert.fail('expected a refusal');
}

describe('handoffs (RFC §17.6)', function () {
  this.timeout(20_000);
  let h: SchedulerHarness;
  const sinks = new Map<string, CollectingSink>();

  function start(options: Record<string, unknown> = {}): void {
    h = new SchedulerHarness({}, { heartbeatDebounceMs: 86_400_000 }, undefined, {
      handoffs: { defaultTimeoutMs: TIMEOUT, ...options },
    });
    sinks.clear();
  }

  /** Registers an agent with capabilities, opens its inbox and reports RUNNABLE (available for routing). */
  function agent(id: string, capabilities: string[] = ['review'], extra: Record<string, unknown> = {}): CollectingSink {
    h.register(id, { capabilities, ...extra });
    const sink = h.stream(id).sink;
    sinks.set(id, sink);
    assert.ok(h.registry.heartbeat(id, 'RUNNABLE', {}, ctx(`hb-${id}`)));
    return sink;
  }

  function input(extra: Partial<HandoffRequestInput> = {}): HandoffRequestInput {
    return {
      requestId: 'h1',
      fromAgent: 'a',
      toAgent: '',
      reason: 'needs a security review',
      context: Buffer.from(JSON.stringify(CONTEXT)),
      contextContentType: HANDOFF_CONTEXT_CONTENT_TYPE,
      capabilitiesRequired: ['review'],
      priority: 0,
      timeoutMs: null,
      budget: null,
      delegationPolicy: null,
      taskId: '',
      correlationId: '',
      parentRequestId: '',
      carryWorktree: false,
      ...extra,
    };
  }

  const handoffs = () => h.coordinator.handoffs;
  const request = (extra: Partial<HandoffRequestInput> = {}) =>
    handoffs().request(input(extra), as(extra.fromAgent ?? 'a'), ctx('request'));
  const reject = (
    requestId: string,
    agentId: string,
    extra: { reason?: string; code?: string; retryAfterMs?: number; redirectTo?: string } = {},
  ) =>
    handoffs().reject(
      {
        requestId,
        agentId,
        reason: extra.reason ?? 'busy',
        code: extra.code ?? '',
        retryAfterMs: extra.retryAfterMs ?? 0,
        redirectTo: extra.redirectTo ?? '',
      },
      as(agentId),
      ctx('reject'),
    );
  const stored = (requestId = 'h1'): HandoffRecord => {
    const r = handoffs().get(requestId);
    assert.ok(r, `handoff ${requestId} is stored`);
    return r;
  };
  /** The NOTIFICATION payloads `agentId` received of `type` (handoff_request / handoff_status). */
  const notices = (agentId: string, type: string) =>
    sinks
      .get(agentId)!
      .ofType('NOTIFICATION')
      .map((i) => ({ envelope: i.envelope, body: json(i.envelope) }))
      .filter((n) => n.body.type === type);
  const events = (type: string) => h.events(type);

  afterEach(() => h.dispose());

  describe('the lifecycle', () => {
    beforeEach(() => start());

    it('PENDING → ACCEPTED → COMPLETED: the target is notified in the transaction, finds it pending, accepts; the requester learns each outcome', async () => {
      agent('a');
      agent('b');
      const record = request({ toAgent: 'b' });
      assert.equal(record.state, 'PENDING');
      assert.equal(record.toAgent, 'b');
      assert.equal(record.correlationId, 'h1', 'the correlation id defaults to the request id');
      assert.equal(record.expiresAt, h.clock.now() + TIMEOUT);
      const [offer] = notices('b', 'handoff_request');
      assert.ok(offer, 'b received the request as a NOTIFICATION');
      assert.equal(offer.envelope.producerId, 'coordinator');
      assert.equal(offer.envelope.correlationId, 'h1');
      assert.equal(offer.body.request_id, 'h1');
      assert.equal(offer.body.from_agent, 'a');
      assert.equal(offer.body.reason, 'needs a security review');
      assert.deepEqual(offer.body.capabilities_required, ['review']);
      assert.equal(offer.body.context_content_type, HANDOFF_CONTEXT_CONTENT_TYPE);
      assert.equal(offer.body.context_encoding, 'utf8');
      assert.deepEqual(JSON.parse(String(offer.body.context)), CONTEXT, 'the context arrives intact');
      assert.equal(offer.body.context_omitted, false);
      const [requested] = events('handoff.requested');
      assert.equal(requested.correlationId, 'h1');
      assert.equal(requested.details.to_agent, 'b');
      assert.equal((requested.details.notification as { sent: boolean }).sent, true);

      const pending = handoffs().pending('b', as('b')).records;
      assert.deepEqual(
        pending.map((p) => p.requestId),
        ['h1'],
      );
      assert.deepEqual(JSON.parse(pending[0].context.toString()), CONTEXT);
      assert.deepEqual(handoffs().pending('a', as('a')), { records: [], more: 0 });
      refusal(() => handoffs().pending('b', as('a')), 'permission', 'PERMISSION_DENIED');

      const accepted = await handoffs().accept('h1', 'b', as('b'), ctx('accept'));
      assert.equal(accepted.state, 'ACCEPTED');
      assert.equal(accepted.acceptedBy, 'b');
      assert.equal(accepted.expiresAt, null);
      assert.deepEqual(
        accepted.attempts.map((a) => [a.agentId, a.outcome, a.via]),
        [['b', 'accepted', 'requested']],
      );
      assert.deepEqual(handoffs().pending('b', as('b')).records, [], 'no longer pending');
      assert.deepEqual(
        notices('a', 'handoff_status').map((n) => [n.body.event, n.body.status, n.envelope.correlationId]),
        [['accepted', 'ACCEPTED', 'h1']],
      );
      // Accepting again (a retry) is answered with the same record.
      assert.equal((await handoffs().accept('h1', 'b', as('b'), ctx())).state, 'ACCEPTED');

      const done = handoffs().complete('h1', 'COMPLETED', as('a'), ctx('complete'));
      assert.equal(done.success, true);
      assert.match(done.message, /'b' owns the work/);
      assert.equal(stored().state, 'COMPLETED');
      assert.equal(stored().completedBy, 'a');
      assert.deepEqual(
        notices('a', 'handoff_status').map((n) => n.body.event),
        ['accepted', 'completed'],
      );
      assert.deepEqual(
        notices('b', 'handoff_status').map((n) => n.body.event),
        ['completed'],
        'the receiver is told too',
      );
      assert.deepEqual(handoffs().complete('h1', 'COMPLETED', as('b'), ctx()), {
        success: true,
        message: "handoff 'h1' was already completed by a",
      });
      for (const type of ['handoff.requested', 'handoff.accepted', 'handoff.completed']) {
        assert.deepEqual(
          events(type).map((e) => e.correlationId),
          ['h1'],
          `one ${type} event, under the handoff's correlation id`,
        );
      }
      await settle();
    });

    it("after COMPLETED the router refuses the origin's sends about the work (PERMISSION_DENIED naming the handoff); ACKs, other work and the receiver pass", async () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b', correlationId: 'work-7' });
      // Before completion the origin may still send about it.
      h.sendData('a', 'c', { correlationId: 'work-7' });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      handoffs().complete('h1', 'COMPLETED', as('b'), ctx());
      const refused = h.send(h.envelope('a', { correlationId: 'work-7' }), 'c');
      assertRefused(refused, 'PERMISSION_DENIED', /handoff h1 completed: b owns this work/);
      assertRefused(
        h.send(h.envelope('a', { correlationId: 'work-7', messageType: 'NOTIFICATION' }), 'b'),
        'PERMISSION_DENIED',
      );
      h.sendData('a', 'c', { correlationId: 'other-work' });
      h.sendData('b', 'c', { correlationId: 'work-7' });
      // The origin still acknowledges what it receives about the work (the completion notice).
      const notice = notices('a', 'handoff_status').at(-1)!;
      assert.equal(notice.envelope.correlationId, 'work-7');
      h.acked('a', notice.envelope.messageId, 'READ');
      // And it may not start a new handoff about it either.
      refusal(
        () => request({ requestId: 'h2', toAgent: 'c', correlationId: 'work-7' }),
        'permission',
        'PERMISSION_DENIED',
        /handoff h1 completed/,
      );
    });

    it("refuses bad requests with the spec's codes and stores nothing", () => {
      agent('a');
      agent('b');
      agent('x', ['other']);
      refusal(() => request({ requestId: '' }), 'invalid', 'VALIDATION_ERROR', /request_id is required/);
      refusal(
        () => request({ requestId: 'r'.repeat(257) }),
        'invalid',
        'VALIDATION_ERROR',
        /request_id is longer than 256/,
      );
      refusal(() => request({ requestId: 'a\u0000b' }), 'invalid', 'VALIDATION_ERROR', /control characters/);
      refusal(
        () => handoffs().request(input({ fromAgent: 'ghost' }), OPERATOR, ctx()),
        'not_found',
        'NOT_FOUND',
        /from_agent 'ghost' is not a registered agent/,
      );
      refusal(() => handoffs().request(input(), as('b'), ctx()), 'permission', 'PERMISSION_DENIED', /as 'a'/);
      refusal(
        () => request({ toAgent: 'ghost' }),
        'not_found',
        'NO_ROUTE',
        /to_agent 'ghost' is not a registered agent/,
      );
      refusal(
        () => request({ toAgent: 'x' }),
        'precondition',
        'NO_ROUTE',
        /to_agent 'x' lacks the required capabilities review \(it registered: other\)/,
      );
      refusal(() => request({ toAgent: 'a' }), 'invalid', 'VALIDATION_ERROR', /cannot hand off to itself/);
      refusal(() => request({ reason: '  ' }), 'invalid', 'VALIDATION_ERROR', /reason is required/);
      for (const priority of [-20, 21, 0.5])
        refusal(() => request({ priority }), 'invalid', 'VALIDATION_ERROR', /-19 \(highest\) to 20 \(lowest\)/);
      refusal(() => request({ capabilitiesRequired: ['review', 'review'] }), 'invalid', 'VALIDATION_ERROR', /twice/);
      refusal(() => request({ capabilitiesRequired: ['has space'] }), 'invalid', 'VALIDATION_ERROR', /contains spaces/);
      refusal(
        () => request({ timeoutMs: 86_400_001 }),
        'invalid',
        'VALIDATION_ERROR',
        /timeout is 86400001 ms; at most 86400000/,
      );
      refusal(
        () => request({ capabilitiesRequired: ['nobody-has-this'] }),
        'precondition',
        'NO_ROUTE',
        /no registered agent other than 'a' holds the capabilities nobody-has-this/,
      );
      refusal(() => request({ taskId: 'no-task' }), 'not_found', 'NOT_FOUND', /sw4rm-task-id 'no-task'/);
      refusal(() => request({ carryWorktree: true }), 'precondition', 'FAILED_PRECONDITION', /not bound to one/);
      assert.deepEqual(handoffs().recent(10), []);
      assert.equal(events('handoff.requested').length, 0);
      assert.equal(notices('b', 'handoff_request').length, 0);
    });

    it('an identical retry is idempotent; the same request_id with other content is DUPLICATE_DETECTED (ALREADY_EXISTS)', () => {
      agent('a');
      agent('b');
      const first = request({ toAgent: 'b' });
      h.clock.advance(1_000);
      const again = request({ toAgent: 'b' });
      assert.equal(again.requestedAt, first.requestedAt);
      assert.equal(events('handoff.requested').length, 1);
      assert.equal(notices('b', 'handoff_request').length, 1, 'notified once');
      refusal(
        () => request({ toAgent: 'b', reason: 'another reason' }),
        'exists',
        'DUPLICATE_DETECTED',
        /request_id 'h1' was already used/,
      );
      refusal(() => request({ toAgent: 'b', context: Buffer.from('{}') }), 'exists', 'DUPLICATE_DETECTED');
    });

    it('only the current target accepts or rejects; only the parties (or the operator) complete, from ACCEPTED only, with status COMPLETED', async () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b' });
      await rejected(
        handoffs().accept('h1', 'c', as('c'), ctx()),
        'permission',
        'PERMISSION_DENIED',
        /handoff 'h1' is not offered to 'c'/,
      );
      // An impostor naming the target is refused by its credential (the identity guard, and again here).
      await rejected(
        handoffs().accept('h1', 'b', as('c'), ctx()),
        'permission',
        'PERMISSION_DENIED',
        /may not accept as 'b'/,
      );
      refusal(() => reject('h1', 'c'), 'permission', 'PERMISSION_DENIED', /handoff 'h1' is not offered to 'c'/);
      refusal(
        () => handoffs().complete('h1', 'COMPLETED', as('a'), ctx()),
        'precondition',
        'FAILED_PRECONDITION',
        /is PENDING: only an ACCEPTED handoff/,
      );
      await rejected(handoffs().accept('nope', 'b', as('b'), ctx()), 'not_found', 'NOT_FOUND');
      await handoffs().accept('h1', 'b', as('b'), ctx());
      refusal(
        () => handoffs().complete('h1', 'COMPLETED', as('c'), ctx()),
        'permission',
        'PERMISSION_DENIED',
        /only the parties/,
      );
      for (const status of ['REJECTED', 'EXPIRED', 'PENDING', ''])
        refusal(
          () => handoffs().complete('h1', status, as('a'), ctx()),
          'invalid',
          'VALIDATION_ERROR',
          /status must be COMPLETED/,
        );
      refusal(() => reject('h1', 'b'), 'precondition', 'FAILED_PRECONDITION', /is ACCEPTED/);
      assert.equal(handoffs().complete('h1', 'COMPLETED', OPERATOR, ctx()).success, true);
      assert.equal(stored().completedBy, 'operator:operator');
    });
  });

  describe('routing', () => {
    beforeEach(() => start());

    it('capability routing: agents holding every capability, online and able to take work, not the requester, least loaded first, ties by id', () => {
      agent('a', ['review']);
      agent('busy', ['review', 'security']);
      agent('d', ['review', 'security']);
      agent('c', ['review', 'security']);
      agent('lacks', ['review']);
      h.register('starting', { capabilities: ['review', 'security'] }); // INITIALIZING: cannot take work yet
      agent('leaving', ['review', 'security']);
      assert.ok(h.scheduler.shutdownAgent('leaving', 60_000, 'test', ctx()).ok);
      // `busy` runs one task and has another queued: load 2.
      h.submitted('busy');
      h.submitted('busy');
      assert.equal(h.scheduler.loadOf('busy'), 2);
      const first = request({ capabilitiesRequired: ['review', 'security'] });
      assert.equal(first.toAgent, 'c', 'c and d carry nothing: the lower id');
      assert.equal(first.attempts[0].via, 'capability');
      // c now carries one pending handoff: d is less loaded.
      assert.equal(request({ requestId: 'h2', capabilitiesRequired: ['review', 'security'] }).toAgent, 'd');
      assert.equal(request({ requestId: 'h3', capabilitiesRequired: ['review', 'security'] }).toAgent, 'c');
      assert.equal(request({ requestId: 'h4', capabilitiesRequired: ['review', 'security'] }).toAgent, 'd');
      // busy (2 tasks), c and d (2 handoffs each) tie: by id.
      assert.equal(request({ requestId: 'h5', capabilitiesRequired: ['review', 'security'] }).toAgent, 'busy');
      assert.equal(
        request({ requestId: 'h6', capabilitiesRequired: ['review'] }).toAgent,
        'lacks',
        'holding review is enough here',
      );
    });

    it("an agent's max_concurrent_delegations bounds what it is offered; the named target over it is refused OVERLOADED", () => {
      agent('a');
      agent('b', ['review'], { maxConcurrentDelegations: 1 });
      agent('c');
      assert.equal(request({ toAgent: 'b' }).toAgent, 'b');
      refusal(() => request({ requestId: 'h2', toAgent: 'b' }), 'exhausted', 'OVERLOADED', /at most 1 delegations/);
      assert.equal(request({ requestId: 'h3' }).toAgent, 'c');
    });

    it('reject → the next candidate (each attempt recorded, the requester told); the last rejection ends it REJECTED with reason and code', () => {
      agent('a');
      agent('b');
      agent('c');
      request();
      assert.equal(stored().toAgent, 'b');
      reject('h1', 'b', { reason: 'too busy', code: 'OVERLOADED', retryAfterMs: 5_000 });
      let r = stored();
      assert.equal(r.state, 'PENDING');
      assert.equal(r.toAgent, 'c');
      assert.deepEqual(
        r.attempts.map((a) => [a.agentId, a.outcome, a.reason, a.code, a.retryAfterMs]),
        [
          ['b', 'rejected', 'too busy', 'OVERLOADED', 5_000],
          ['c', '', '', '', undefined],
        ],
      );
      assert.equal(notices('c', 'handoff_request').length, 1);
      const [rerouted] = notices('a', 'handoff_status');
      assert.equal(rerouted.body.event, 'rerouted');
      assert.equal(rerouted.body.to_agent, 'c');
      assert.equal(rerouted.body.retry_after_ms, 0);
      assert.equal(events('handoff.rerouted')[0].details.rejection_code, 'OVERLOADED');
      // b's retry of its rejection (the answer was lost) changes nothing.
      assert.equal(reject('h1', 'b').toAgent, 'c');
      assert.equal(events('handoff.rerouted').length, 1);
      reject('h1', 'c', { reason: 'not my area', code: 'VALIDATION_ERROR' });
      r = stored();
      assert.equal(r.state, 'REJECTED');
      assert.equal(r.rejectionReason, 'not my area');
      assert.equal(r.rejectionCode, 'VALIDATION_ERROR');
      assert.ok(r.endedAt);
      assert.equal(events('handoff.rejected').length, 1);
      assert.match(
        String(events('handoff.rejected')[0].details.reason),
        /rejected by 'c'; not offered to anyone else: no agent holding review can take the handoff now \(b: tried already; c: tried already\)/,
      );
      assert.deepEqual(
        notices('a', 'handoff_status').map((n) => [n.body.event, n.body.status, n.body.rejection_reason]),
        [
          ['rerouted', 'PENDING', 'too busy'],
          ['rejected', 'REJECTED', 'not my area'],
        ],
      );
      assert.deepEqual(handoffs().pending('c', as('c')).records, []);
    });

    it('a redirect to a capable agent is the next target; an incapable one is noted and capability routing goes on', () => {
      agent('a');
      agent('b');
      agent('c');
      agent('z');
      agent('nocap', ['other']);
      request({ toAgent: 'b' });
      reject('h1', 'b', { redirectTo: 'z', code: 'REDIRECT' });
      let r = stored();
      assert.equal(r.toAgent, 'z');
      assert.deepEqual(
        r.attempts.map((a) => [a.agentId, a.outcome, a.via, a.redirectTo]),
        [
          ['b', 'redirected', 'requested', 'z'],
          ['z', '', 'redirect', undefined],
        ],
      );
      reject('h1', 'z', { redirectTo: 'nocap' });
      r = stored();
      assert.equal(r.toAgent, 'c');
      assert.equal(r.attempts[2].via, 'capability');
      assert.match(
        JSON.stringify(events('handoff.rerouted')[1].details.notes),
        /redirect to 'nocap' not followed: it lacks review/,
      );
    });

    it('delegation_policy: allow_spillover_routing false never reroutes; max_redirects bounds the redirects followed, not capability routing', () => {
      agent('a');
      agent('b');
      agent('c');
      agent('d');
      const policy = {
        maxRetriesOnOverloaded: 0,
        initialBackoffMs: 0,
        backoffMultiplier: 0,
        maxBackoffMs: 0,
        allowSpilloverRouting: false,
        maxRedirects: 0,
      };
      request({ delegationPolicy: policy });
      reject('h1', 'b');
      assert.equal(stored().state, 'REJECTED');
      assert.equal(stored().attempts.length, 1);
      assert.match(String(events('handoff.rejected')[0].details.reason), /allow_spillover_routing is false/);
      request({ requestId: 'h2', delegationPolicy: { ...policy, allowSpilloverRouting: true, maxRedirects: 1 } });
      for (const target of ['b', 'c', 'd']) {
        assert.equal(stored('h2').toAgent, target, 'capability routing is not a redirect');
        reject('h2', target);
      }
      assert.equal(stored('h2').state, 'REJECTED');
      assert.equal(stored('h2').attempts.length, 3);
    });

    it('max_redirects counts the redirects followed: beyond it a redirect is noted and capability routing goes on', () => {
      agent('a');
      agent('b');
      agent('c');
      agent('y');
      agent('z');
      request({
        toAgent: 'b',
        delegationPolicy: {
          maxRetriesOnOverloaded: 0,
          initialBackoffMs: 0,
          backoffMultiplier: 0,
          maxBackoffMs: 0,
          allowSpilloverRouting: true,
          maxRedirects: 1,
        },
      });
      reject('h1', 'b', { redirectTo: 'z', code: 'REDIRECT' });
      assert.equal(stored().toAgent, 'z');
      reject('h1', 'z', { redirectTo: 'y', code: 'REDIRECT' });
      assert.equal(stored().toAgent, 'c', 'the second redirect is not followed; the next capable agent is offered it');
      assert.deepEqual(
        stored().attempts.map((a) => [a.agentId, a.via]),
        [
          ['b', 'requested'],
          ['z', 'redirect'],
          ['c', 'capability'],
        ],
      );
      assert.match(
        JSON.stringify(events('handoff.rerouted')[1].details.notes),
        /redirect to 'y' not followed: delegation_policy.max_redirects 1 reached/,
      );
    });

    it('with rerouting off a rejection ends the handoff', () => {
      h.dispose();
      start({ reroute: false });
      agent('a');
      agent('b');
      agent('c');
      request();
      reject('h1', 'b');
      assert.equal(stored().state, 'REJECTED');
      assert.match(String(events('handoff.rejected')[0].details.reason), /rerouting is off/);
    });

    it('a target that deregisters: the handoff moves to the next candidate', () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b' });
      assert.ok(h.registry.deregister('b', 'going away', ctx()));
      const r = stored();
      assert.equal(r.toAgent, 'c');
      assert.deepEqual(
        r.attempts.map((a) => [a.agentId, a.outcome]),
        [
          ['b', 'left'],
          ['c', ''],
        ],
      );
      // Nobody left to take it: it stays offered to the agent that left.
      assert.ok(h.registry.deregister('c', 'going away', ctx()));
      assert.equal(stored().toAgent, 'c');
      assert.equal(stored().attempts[1].outcome, '');
    });

    it('a target that goes FAILED: the handoff moves to the next candidate too', () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b' });
      for (const to of ['SCHEDULED', 'RUNNING', 'FAILED_STATE'])
        assert.ok(h.registry.transition('b', to, { by: 'task', reason: 'crashed' }, ctx()).ok, to);
      assert.equal(stored().toAgent, 'c');
      assert.deepEqual(
        stored().attempts.map((a) => [a.agentId, a.outcome, a.reason]),
        [
          ['b', 'left', 'failed (lifecycle state FAILED)'],
          ['c', '', ''],
        ],
      );
    });
  });

  describe('the accepting agent leaves', () => {
    beforeEach(() => start());

    it('deregisters: the handoff goes back to PENDING and to the next candidate (attempt `left`), the origin is told; a new wait starts', async () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b' });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      h.clock.advance(TIMEOUT * 3);
      assert.ok(h.registry.deregister('b', 'going away', ctx()));
      const r = stored();
      assert.equal(r.state, 'PENDING');
      assert.equal(r.acceptedBy, '');
      assert.equal(r.toAgent, 'c');
      assert.deepEqual(
        r.attempts.map((a) => [a.agentId, a.outcome]),
        [
          ['b', 'left'],
          ['c', ''],
        ],
      );
      assert.match(r.attempts[0].reason, /going away/);
      assert.equal(r.expiresAt, h.clock.now() + TIMEOUT, 'a new wait from when it went back to PENDING');
      const told = notices('a', 'handoff_status').map((n) => [
        n.body.event,
        n.body.status,
        n.body.previous_agent,
        n.body.previous_outcome,
      ]);
      assert.deepEqual(told, [
        ['accepted', 'ACCEPTED', undefined, undefined],
        ['rerouted', 'PENDING', 'b', 'acceptor_left'],
      ]);
      assert.equal(notices('c', 'handoff_request').length, 1);
      assert.equal(events('handoff.rerouted')[0].details.trigger, 'acceptor_left');
      refusal(
        () => handoffs().complete('h1', 'COMPLETED', as('a'), ctx()),
        'precondition',
        'FAILED_PRECONDITION',
        /is PENDING/,
      );
      await handoffs().accept('h1', 'c', as('c'), ctx());
      assert.equal(handoffs().complete('h1', 'COMPLETED', as('a'), ctx()).success, true);
      assert.equal(stored().acceptedBy, 'c');
    });

    it('goes FAILED: the same; with nobody else to offer it to it ends REJECTED (AGENT_UNAVAILABLE) and the origin knows', async () => {
      agent('a');
      agent('b');
      request({ toAgent: 'b' });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      for (const to of ['SCHEDULED', 'RUNNING', 'FAILED_STATE']) {
        const moved = h.registry.transition('b', to, { by: 'task', reason: 'crashed' }, ctx());
        assert.ok(moved.ok, moved.ok ? '' : moved.reason);
      }
      const r = stored();
      assert.equal(r.state, 'REJECTED');
      assert.equal(r.rejectionCode, 'AGENT_UNAVAILABLE');
      assert.match(r.rejectionReason, /the accepting agent 'b' failed/);
      assert.deepEqual(
        r.attempts.map((a) => [a.agentId, a.outcome]),
        [['b', 'left']],
      );
      assert.deepEqual(
        notices('a', 'handoff_status').map((n) => n.body.event),
        ['accepted', 'rejected'],
      );
    });

    it('CompleteHandoff is refused while the accepting agent is not registered (its departure could not be recorded yet)', async () => {
      agent('a');
      agent('b');
      request({ toAgent: 'b' });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      const repo = h.store.handoffs;
      const put = repo.put.bind(repo);
      repo.put = () => {
        throw new Error('the disk says no');
      };
      assert.ok(h.registry.deregister('b', 'going away', ctx()));
      repo.put = put;
      assert.equal(stored().state, 'ACCEPTED', 'the departure was not recorded');
      refusal(
        () => handoffs().complete('h1', 'COMPLETED', as('a'), ctx()),
        'precondition',
        'FAILED_PRECONDITION',
        /the accepting agent 'b' is not registered/,
      );
      assert.equal(stored().state, 'REJECTED', 'the refusal recorded the departure it found');
    });

    it('found FAILED after a restart: handled at start', async () => {
      agent('a');
      agent('b');
      request({ toAgent: 'b' });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      h.restart(() => {
        const db = new DatabaseSync(path.join(h.dataDir, STORE_FILE_NAME));
        db.prepare("UPDATE agents SET state = 'FAILED_STATE' WHERE agent_id = 'b'").run();
        db.close();
      });
      assert.equal(stored().state, 'REJECTED');
      assert.deepEqual(
        stored().attempts.map((a) => [a.agentId, a.outcome]),
        [['b', 'left']],
      );
    });
  });

  describe('GetPendingHandoffs is bounded', () => {
    it('answers at most 3.5 MiB of handoffs, highest priority then oldest first, and says how many more remain', () => {
      start();
      agent('a');
      agent('b');
      const MiB = 1024 * 1024;
      for (const [requestId, priority] of [
        ['h1', 0],
        ['h2', -5],
        ['h3', 0],
        ['h4', 5],
        ['h5', -5],
      ] as const) {
        request({
          requestId,
          toAgent: 'b',
          priority,
          contextContentType: '',
          context: Buffer.alloc(MiB, requestId.charCodeAt(1)),
        });
        h.clock.advance(10);
      }
      const page = handoffs().pending('b', as('b'));
      assert.deepEqual(
        page.records.map((r) => r.requestId),
        ['h2', 'h5', 'h1'],
      );
      assert.equal(page.more, 2);
      assert.ok(page.records.reduce((n, r) => n + r.context.byteLength, 0) <= 3.5 * MiB);
      assert.equal(page.records[0].context.byteLength, MiB, 'contexts whole');
      reject('h2', 'b');
      reject('h5', 'b');
      assert.deepEqual(
        handoffs()
          .pending('b', as('b'))
          .records.map((r) => r.requestId),
        ['h1', 'h3', 'h4'],
      );
      assert.equal(handoffs().pending('b', as('b')).more, 0);
    });

    it('one handoff larger than the budget is still answered (alone)', () => {
      start();
      agent('a');
      agent('b');
      request({ toAgent: 'b', contextContentType: '', context: Buffer.alloc(1024 * 1024) });
      request({ requestId: 'h2', toAgent: 'b' });
      const page = handoffs().pending('b', as('b'), 1000);
      assert.deepEqual([page.records.map((r) => r.requestId), page.more], [['h1'], 1]);
    });

    it('an agent waits to answer at most maxPendingPerTarget handoffs: a named target beyond it is BUFFER_FULL; routing and redirects pass it by', () => {
      start({ maxPendingPerTarget: 2 });
      agent('a');
      agent('b');
      agent('c');
      request({ requestId: 'h1', toAgent: 'b' });
      request({ requestId: 'h2', toAgent: 'b' });
      refusal(
        () => request({ requestId: 'h3', toAgent: 'b' }),
        'exhausted',
        'BUFFER_FULL',
        /to_agent 'b' already has 2 handoffs waiting for its answer \(at most 2\)/,
      );
      assert.equal(request({ requestId: 'h4' }).toAgent, 'c', 'capability routing passes b by');
      request({ requestId: 'h5', toAgent: 'c' });
      refusal(() => request({ requestId: 'h6' }), 'precondition', 'NO_ROUTE', /b: 2 handoffs waiting for its answer/);
      reject('h4', 'c', { redirectTo: 'b' });
      assert.equal(stored('h4').state, 'REJECTED');
      assert.match(
        String(events('handoff.rejected')[0].details.reason),
        /redirect to 'b' not followed: it has 2 handoffs waiting for its answer/,
      );
    });
  });

  describe('timeouts', () => {
    beforeEach(() => start());

    it("a target's answer window passing → the next candidate; the timeout ends it EXPIRED (nothing waits forever)", async () => {
      h.dispose();
      start({ answerWindowMs: 6_000 });
      agent('a');
      agent('b');
      agent('c');
      const t0 = h.clock.now();
      request();
      h.clock.advance(6_000 - 1);
      assert.equal(stored().toAgent, 'b');
      h.clock.advance(1);
      let r = stored();
      assert.equal(r.toAgent, 'c');
      assert.deepEqual(
        r.attempts.map((a) => [a.agentId, a.outcome]),
        [
          ['b', 'expired'],
          ['c', ''],
        ],
      );
      assert.equal(r.expiresAt, t0 + TIMEOUT, "the requester's wait did not grow");
      h.clock.advance(TIMEOUT - 6_000);
      r = stored();
      assert.equal(r.state, 'EXPIRED');
      assert.match(r.endReason, /'c' did not answer in time/);
      assert.deepEqual(
        notices('a', 'handoff_status').map((n) => n.body.event),
        ['rerouted', 'expired'],
      );
      assert.equal(handoffs().openCount(), 0);
      await settle();
    });

    it("a request's own timeout is used; the budget's deadline cuts it, and ends it without rerouting", () => {
      agent('a');
      agent('b');
      agent('c');
      const now = h.clock.now();
      const budget = {
        tokenBudgetRemaining: 1000,
        wallTimeRemainingMs: 0,
        deadlineEpochMs: now + 3_000,
        currentDepth: 1,
        maxDelegationDepth: 3,
      };
      const r = request({ timeoutMs: 20_000, budget });
      assert.equal(r.timeoutMs, 3_000);
      assert.equal(r.expiresAt, now + 3_000);
      const [offer] = notices('b', 'handoff_request');
      assert.deepEqual(offer.body.budget, {
        token_budget_remaining: 1000,
        wall_time_remaining_ms: 0,
        deadline_epoch_ms: now + 3_000,
        current_depth: 1,
        max_delegation_depth: 3,
      });
      h.clock.advance(3_000);
      assert.equal(stored().state, 'EXPIRED');
      assert.match(stored().endReason, /the budget's deadline .* passed/);
      assert.equal(request({ requestId: 'h2', timeoutMs: 20_000 }).expiresAt, h.clock.now() + 20_000);
      assert.equal(
        request({ requestId: 'h3', budget: { ...budget, deadlineEpochMs: 0, wallTimeRemainingMs: 4_000 } }).timeoutMs,
        4_000,
      );
    });

    it("`timeout` bounds the requester's whole wait: each target has the answer window, and every window ends by requestedAt + timeout", () => {
      h.dispose();
      start({ answerWindowMs: 4_000 });
      agent('a');
      agent('b');
      agent('c');
      agent('d');
      const t0 = h.clock.now();
      assert.equal(request().expiresAt, t0 + TIMEOUT);
      assert.equal(notices('b', 'handoff_request')[0].body.answer_by, new Date(t0 + 4_000).toISOString());
      h.clock.advance(4_000);
      assert.equal(stored().toAgent, 'c', "b's window passed: the next candidate");
      h.clock.advance(4_000);
      assert.equal(stored().toAgent, 'd');
      assert.equal(stored().expiresAt, t0 + TIMEOUT, 'the wait still ends where it did');
      assert.equal(
        notices('d', 'handoff_request')[0].body.answer_by,
        new Date(t0 + TIMEOUT).toISOString(),
        'd has only what remains',
      );
      h.clock.advance(TIMEOUT - 8_000 - 1);
      assert.equal(stored().state, 'PENDING');
      h.clock.advance(1);
      assert.equal(stored().state, 'EXPIRED', 'the requester waited `timeout` in all');
      assert.deepEqual(
        stored().attempts.map((a) => [a.agentId, a.outcome]),
        [
          ['b', 'expired'],
          ['c', 'expired'],
          ['d', 'expired'],
        ],
      );
      assert.match(stored().endReason, /'d' did not answer in time/);
    });

    it('a target rerouted to after a rejection gets what remains of the wait, not a new timeout', () => {
      agent('a');
      agent('b');
      agent('c');
      const t0 = h.clock.now();
      request();
      h.clock.advance(9_000);
      reject('h1', 'b');
      assert.equal(stored().toAgent, 'c');
      assert.equal(stored().expiresAt, t0 + TIMEOUT);
      h.clock.advance(1_000);
      assert.equal(stored().state, 'EXPIRED');
    });

    it('a window that passes with nobody else to offer it to: the target keeps it until the timeout (one event), then it expires', () => {
      h.dispose();
      start({ answerWindowMs: 4_000 });
      agent('a');
      agent('b');
      const t0 = h.clock.now();
      request();
      h.clock.advance(4_000);
      assert.equal(stored().toAgent, 'b');
      assert.equal(stored().attempts[0].outcome, '');
      assert.equal(stored().attempts[0].windowEndedAt, t0 + 4_000);
      assert.equal(events('handoff.answer_window_ended').length, 1);
      h.clock.advance(TIMEOUT - 4_000);
      assert.equal(stored().state, 'EXPIRED');
    });

    it("an answer after the time ran out, while the timer's callback is still queued, is refused: the timeout is decided first", async () => {
      agent('a');
      agent('b');
      request({ toAgent: 'b' });
      const clock = h.clock;
      const now = clock.now.bind(clock);
      clock.now = () => now() + TIMEOUT; // the wall clock passed the expiry; the timer has not run yet
      await rejected(handoffs().accept('h1', 'b', as('b'), ctx()), 'precondition', 'FAILED_PRECONDITION', /is EXPIRED/);
      clock.now = now;
      assert.equal(stored().state, 'EXPIRED');
      h.clock.advance(TIMEOUT);
      assert.equal(events('handoff.expired').length, 1, 'the queued timer changes nothing');
      request({ requestId: 'h2', toAgent: 'b' });
      clock.now = () => now() + TIMEOUT;
      refusal(() => reject('h2', 'b'), 'precondition', 'FAILED_PRECONDITION', /is EXPIRED/);
      clock.now = now;
    });

    it('the budget envelope refuses a delegation too deep or past its deadline', () => {
      agent('a');
      agent('b');
      const budget = {
        tokenBudgetRemaining: 0,
        wallTimeRemainingMs: 0,
        deadlineEpochMs: 0,
        currentDepth: 3,
        maxDelegationDepth: 3,
      };
      refusal(
        () => request({ budget }),
        'precondition',
        'VALIDATION_ERROR',
        /current_depth 3 has reached max_delegation_depth 3/,
      );
      refusal(
        () => request({ budget: { ...budget, currentDepth: 0, deadlineEpochMs: h.clock.now() } }),
        'deadline',
        'TTL_EXPIRED',
        /deadline_epoch_ms .* has passed/,
      );
      assert.equal(
        request({ budget: { ...budget, maxDelegationDepth: 0 } }).state,
        'PENDING',
        'max_delegation_depth 0: no limit',
      );
    });
  });

  describe('the operator', () => {
    beforeEach(() => start({ routeToOperator: true }));

    it('no agent can take it → PENDING awaiting the operator; agents may not answer; the operator accepts', async () => {
      agent('a');
      agent('b', ['other']);
      const r = request();
      assert.equal(r.state, 'PENDING');
      assert.equal(r.awaitingOperator, true);
      assert.equal(r.toAgent, '');
      assert.deepEqual(r.attempts, []);
      assert.equal(events('handoff.requested')[0].details.via, 'operator');
      await rejected(
        handoffs().accept('h1', 'b', as('b'), ctx()),
        'permission',
        'PERMISSION_DENIED',
        /is not offered to 'b'/,
      );
      const accepted = handoffs().acceptAsOperator('h1', 'alice', ctx());
      assert.equal(accepted.state, 'ACCEPTED');
      assert.equal(accepted.acceptedBy, 'operator:alice');
      assert.deepEqual(
        notices('a', 'handoff_status').map((n) => [n.body.event, n.body.accepted_by]),
        [['accepted', 'operator:alice']],
      );
      refusal(
        () => handoffs().acceptAsOperator('h1', 'alice', ctx()),
        'precondition',
        'FAILED_PRECONDITION',
        /does not wait for a person/,
      );
      assert.equal(handoffs().complete('h1', 'COMPLETED', as('a'), ctx()).success, true);
    });

    it('after the last rejection the operator is asked once; the operator rejects with a reason, or the timeout ends it EXPIRED', () => {
      agent('a');
      agent('b');
      request();
      reject('h1', 'b', { reason: 'cannot' });
      const r = stored();
      assert.equal(r.awaitingOperator, true);
      assert.equal(events('handoff.awaiting_operator').length, 1);
      assert.equal(notices('a', 'handoff_status')[0].body.event, 'awaiting_operator');
      refusal(
        () => handoffs().rejectAsOperator('h1', ' ', 'alice', ctx()),
        'invalid',
        'VALIDATION_ERROR',
        /reason is required/,
      );
      handoffs().rejectAsOperator('h1', 'nobody has time', 'alice', ctx());
      assert.equal(stored().state, 'REJECTED');
      assert.equal(stored().rejectionReason, 'nobody has time');
      request({ requestId: 'h2', capabilitiesRequired: ['nobody-has-this'] });
      h.clock.advance(TIMEOUT);
      assert.equal(stored('h2').state, 'EXPIRED');
      assert.match(stored('h2').endReason, /the operator did not answer/);
    });
  });

  describe('the context snapshot', () => {
    beforeEach(() => {
      start();
      agent('a');
      agent('b');
    });

    const ctxOf = (value: unknown) => Buffer.from(JSON.stringify(value));

    it('is validated against the HandoffContext schema when its content type says so, the failing JSON path named', () => {
      refusal(
        () => request({ context: ctxOf({ ...CONTEXT, conversation_history: [{ content: 'no role' }] }) }),
        'invalid',
        'VALIDATION_ERROR',
        /^context_snapshot\/conversation_history\/0: must have required property 'role'$/,
      );
      refusal(
        () => request({ context: ctxOf({ conversation_history: [], tool_state: {} }) }),
        'invalid',
        'VALIDATION_ERROR',
        /^context_snapshot: must have required property 'metadata'$/,
      );
      refusal(
        () => request({ context: ctxOf({ ...CONTEXT, tool_state: [] }) }),
        'invalid',
        'VALIDATION_ERROR',
        /^context_snapshot\/tool_state: must be object$/,
      );
      refusal(
        () =>
          request({
            context: ctxOf({
              ...CONTEXT,
              conversation_history: [{ role: 'user', content: 'x', timestamp: 'yesterday' }],
            }),
          }),
        'invalid',
        'VALIDATION_ERROR',
        /^context_snapshot\/conversation_history\/0\/timestamp: must match format "date-time"$/,
      );
      refusal(
        () =>
          request({
            context: ctxOf({
              ...CONTEXT,
              conversation_history: [{ role: 'user', content: 'x', timestamp: '2025-02-30T10:00:00Z' }],
            }),
          }),
        'invalid',
        'VALIDATION_ERROR',
        /date-time/,
      );
      refusal(
        () => request({ context: Buffer.from('{"conversation_history": [') }),
        'invalid',
        'VALIDATION_ERROR',
        /context_snapshot is not valid JSON/,
      );
      refusal(
        () => request({ context: Buffer.from('['.repeat(100) + ']'.repeat(100)) }),
        'invalid',
        'VALIDATION_ERROR',
        /nests deeper than 64/,
      );
      refusal(() => request({ context: Buffer.from([0xff, 0xfe]) }), 'invalid', 'VALIDATION_ERROR', /not valid UTF-8/);
      assert.equal(request().state, 'PENDING', 'the valid context is taken');
    });

    it('application/json must be bounded valid JSON; no content type is opaque bytes; every context is at most 1 MiB', () => {
      refusal(
        () => request({ contextContentType: 'application/json', context: Buffer.from('not json') }),
        'invalid',
        'VALIDATION_ERROR',
        /not valid JSON/,
      );
      assert.equal(
        request({ contextContentType: 'application/json', context: ctxOf({ anything: true }) }).state,
        'PENDING',
      );
      const opaque = request({ requestId: 'h2', contextContentType: '', context: Buffer.from([0, 1, 2, 255]) });
      assert.equal(opaque.state, 'PENDING');
      const offer = notices('b', 'handoff_request').find((n) => n.body.request_id === 'h2')!;
      assert.equal(offer.body.context_encoding, 'base64');
      assert.deepEqual(Buffer.from(String(offer.body.context), 'base64'), Buffer.from([0, 1, 2, 255]));
      refusal(
        () => request({ requestId: 'h3', contextContentType: '', context: Buffer.alloc(1024 * 1024 + 1) }),
        'invalid',
        'VALIDATION_ERROR',
        /at most 1048576/,
      );
      refusal(
        () => request({ requestId: 'h3', contextContentType: 'not a type' }),
        'invalid',
        'VALIDATION_ERROR',
        /is not a MIME type/,
      );
    });

    it('a context too large for the 32 KiB NOTIFICATION is omitted there (context_omitted) and read whole by GetPendingHandoffs', () => {
      const big = { ...CONTEXT, metadata: { blob: 'x'.repeat(100_000) } };
      request({ context: ctxOf(big) });
      const [offer] = notices('b', 'handoff_request');
      assert.equal(offer.body.context_omitted, true);
      assert.equal(offer.body.context, null);
      assert.equal(offer.body.context_bytes, ctxOf(big).byteLength);
      assert.ok(offer.envelope.payload.byteLength <= 32 * 1024);
      assert.deepEqual(JSON.parse(handoffs().pending('b', as('b')).records[0].context.toString()), big);
    });
  });

  describe('tasks', () => {
    beforeEach(() => start());

    it("COMPLETED closes the origin's task (CANCELLED handed_off, terminate sent); its sends with the task's correlation are refused, its ACK of terminate is not", async () => {
      agent('a');
      agent('b');
      h.submitted('a', 0, { taskId: 't1' });
      const run = sinks
        .get('a')!
        .ofType('CONTROL')
        .map((i) => ({ id: i.envelope.messageId, body: json(i.envelope) }))
        .find((c) => c.body.command === 'run')!;
      await h.answer('a', run.id, 'RECEIVED');
      assert.equal(h.task('t1').state, 'RUNNING');
      refusal(
        () => request({ taskId: 't1', fromAgent: 'b', toAgent: 'a' }),
        'permission',
        'PERMISSION_DENIED',
        /task 't1' belongs to 'a', not 'b'/,
      );
      const r = request({ taskId: 't1', toAgent: 'b' });
      assert.equal(r.correlationId, 't1', 'the correlation id defaults to the task id');
      refusal(
        () => request({ requestId: 'h2', taskId: 't1', toAgent: 'b' }),
        'precondition',
        'FAILED_PRECONDITION',
        /already being handed off by handoff 'h1'/,
      );
      await handoffs().accept('h1', 'b', as('b'), ctx());
      assert.equal(h.task('t1').state, 'RUNNING', 'the task runs on until the handoff completes');
      handoffs().complete('h1', 'COMPLETED', as('b'), ctx());
      const task = h.task('t1');
      assert.equal(task.state, 'CANCELLED');
      assert.equal(task.errorCode, 'handed_off');
      assert.match(task.note, /handed off to b by handoff h1/);
      const changed = h
        .events('task.state_changed')
        .filter((e) => e.correlationId === 't1')
        .at(-1)!;
      assert.equal(changed.details.cause, 'handoff');
      const completed = events('handoff.completed')[0];
      assert.equal(completed.details.task_closed, true);
      assert.equal(completed.details.task_state, 'CANCELLED');
      const terminate = sinks
        .get('a')!
        .ofType('CONTROL')
        .map((i) => ({ id: i.envelope.messageId, body: json(i.envelope) }))
        .find((c) => c.body.command === 'terminate')!;
      assert.ok(terminate, 'the origin is told to stop');
      assertRefused(
        h.send(h.envelope('a', { correlationId: 't1' }), 'b'),
        'PERMISSION_DENIED',
        /handoff h1 completed: b owns this work/,
      );
      await h.answer('a', terminate.id, 'FULFILLED', { note: 'stopped' });
      assert.equal(h.agentState('a'), 'RUNNABLE', 'the origin is free again');
      assert.equal(h.scheduler.loadOf('a'), 0);
    });
    it("a task the workflow engine submitted cannot be handed off (its node's agent is fixed by the definition)", () => {
      agent('a');
      agent('b');
      const submitted = h.scheduler.submit(
        {
          taskId: 'wf:w1:review:1',
          target: 'a',
          priority: 0,
          params: Buffer.from('{"workflow_id":"w1"}'),
          contentType: 'application/json',
          scope: 'resource:workflow:w1/review',
          submittedBy: 'workflow:w1',
        },
        ctx(),
      );
      assert.ok(submitted.accepted);
      refusal(
        () => request({ taskId: 'wf:w1:review:1', toAgent: 'b' }),
        'precondition',
        'FAILED_PRECONDITION',
        /task 'wf:w1:review:1' was submitted by the workflow engine \(workflow:w1\).*resume the node instead/,
      );
    });
  });

  describe('CancelDelegation', () => {
    beforeEach(() => start());

    it('cancels the delegation by correlation id and, in cascade, the handoffs made under it; the parties are told', async () => {
      agent('a');
      agent('b');
      agent('c');
      agent('d');
      request({ toAgent: 'b', correlationId: 'job-1' });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      request({ requestId: 'h2', fromAgent: 'b', toAgent: 'c', parentRequestId: 'h1', correlationId: 'job-1/sub' });
      await handoffs().accept('h2', 'c', as('c'), ctx());
      request({ requestId: 'h3', fromAgent: 'c', toAgent: 'd', parentRequestId: 'h2' });
      request({ requestId: 'h4', toAgent: 'd' });
      const denial = refusal(
        () => handoffs().cancelDelegation('job-1', 'stop', 0, as('d'), ctx()),
        'permission',
        'PERMISSION_DENIED',
        /only the origin or the accepting agent of a delegation, or the operator, may cancel it/,
      );
      assert.doesNotMatch(denial.message, /h1|'a'|'b'/, 'an outsider learns no handoff id or party');
      const answer = handoffs().cancelDelegation('job-1', 'plans changed', 5_000, as('a'), ctx('cancel'));
      assert.deepEqual(answer, { acknowledged: true, message: 'cancelled 3 handoffs: h1, h2, h3' });
      for (const id of ['h1', 'h2', 'h3']) assert.equal(stored(id).state, 'CANCELLED', id);
      assert.equal(stored('h4').state, 'PENDING', 'another delegation is untouched');
      assert.match(stored('h2').endReason, /cascade: its parent 'h1' was cancelled/);
      const toB = notices('b', 'handoff_status').filter((n) => n.body.event === 'cancelled');
      assert.deepEqual(
        toB.map((n) => [n.body.request_id, n.body.grace_period_ms]),
        [
          ['h1', 5_000],
          ['h2', 5_000],
        ],
      );
      assert.equal(events('handoff.cancelled').length, 3);
      assert.deepEqual(handoffs().cancelDelegation('job-1', '', 0, as('a'), ctx()), {
        acknowledged: false,
        message: "no open handoff has correlation id or request id 'job-1'",
      });
      assert.equal(
        handoffs().cancelDelegation('h4', '', 0, OPERATOR, ctx()).acknowledged,
        true,
        'by request id, by the operator',
      );
      refusal(
        () => handoffs().cancelDelegation('x', '', 3_600_001, OPERATOR, ctx()),
        'invalid',
        'VALIDATION_ERROR',
        /grace_period_ms/,
      );
    });
  });

  describe('a failed transaction leaves memory as the store is', () => {
    beforeEach(() => start());

    /** The next `count` writes of a handoff record throw (a failing write inside the transaction: it is rolled back). */
    function failPuts(count = 1): void {
      const repo = h.store.handoffs;
      const put = repo.put.bind(repo);
      let left = count;
      repo.put = (record) => {
        if (left > 0) {
          left--;
          throw new Error('the disk says no');
        }
        put(record);
      };
    }

    /** The next event of `eventType` throws as it is recorded. */
    function failEvent(eventType: string): void {
      const log = h.coordinator.log;
      const record = log.record.bind(log);
      let armed = true;
      log.record = (input) => {
        if (armed && input.eventType === eventType) {
          armed = false;
          throw new Error(`no ${eventType} today`);
        }
        return record(input);
      };
    }

    it('accept: a failed write leaves it PENDING in memory too; the retry accepts it', async () => {
      agent('a');
      agent('b');
      request({ toAgent: 'b' });
      failPuts();
      await assert.rejects(handoffs().accept('h1', 'b', as('b'), ctx()), /the disk says no/);
      assert.equal(stored().state, 'PENDING');
      assert.deepEqual(
        handoffs()
          .pending('b', as('b'))
          .records.map((r) => r.requestId),
        ['h1'],
        'still pending in memory',
      );
      assert.equal((await handoffs().accept('h1', 'b', as('b'), ctx())).state, 'ACCEPTED');
      assert.equal(stored().state, 'ACCEPTED');
      assert.equal(events('handoff.accepted').length, 1);
    });

    it('complete: a failed write leaves it ACCEPTED; the retry completes it (the transfer refused), not "already completed"', async () => {
      agent('a');
      agent('b');
      request({ toAgent: 'b', correlationId: 'w' });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      failPuts();
      assert.throws(() => handoffs().complete('h1', 'COMPLETED', as('a'), ctx()), /the disk says no/);
      assert.equal(stored().state, 'ACCEPTED');
      assert.equal(handoffs().refusalFor('a', 'w'), undefined);
      const done = handoffs().complete('h1', 'COMPLETED', as('a'), ctx());
      assert.match(done.message, /^handoff 'h1' completed: 'b' owns the work/);
      assert.equal(stored().state, 'COMPLETED');
      assert.match(handoffs().refusalFor('a', 'w') ?? '', /handoff h1 completed/);
    });

    it('complete: the scheduler closes the task last, so a failure before it leaves the task open and the retry closes it', async () => {
      agent('a');
      agent('b');
      h.submitted('a', 0, { taskId: 't1' });
      request({ taskId: 't1', toAgent: 'b' });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      failEvent('handoff.completed');
      assert.throws(() => handoffs().complete('h1', 'COMPLETED', as('a'), ctx()), /no handoff.completed today/);
      assert.notEqual(h.task('t1').state, 'CANCELLED');
      assert.equal(handoffs().complete('h1', 'COMPLETED', as('a'), ctx()).success, true);
      assert.equal(h.task('t1').state, 'CANCELLED', 'the retry closed the task');
      assert.equal(events('handoff.completed')[0].details.task_closed, true);
    });

    it('reject: a failed write leaves the rejection unrecorded; the retry moves it on', () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b' });
      failPuts();
      assert.throws(() => reject('h1', 'b'), /the disk says no/);
      assert.equal(stored().toAgent, 'b');
      reject('h1', 'b');
      assert.equal(stored().toAgent, 'c');
      assert.deepEqual(
        stored().attempts.map((a) => [a.agentId, a.outcome]),
        [
          ['b', 'rejected'],
          ['c', ''],
        ],
      );
    });

    it('expiry: a failed write is tried again a moment later (the handoff does not stay with a target whose time ran out)', () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b' });
      failPuts();
      h.clock.advance(TIMEOUT);
      assert.equal(stored().toAgent, 'b');
      assert.equal(events('handoff.internal_error').length, 1);
      h.clock.advance(1_000);
      assert.equal(stored().attempts[0].outcome, 'expired', 'decided on the second try');
    });

    it('cancel: a failed write leaves it open (still pending for its target); the retry cancels it', () => {
      agent('a');
      agent('b');
      request({ toAgent: 'b' });
      failPuts();
      assert.throws(() => handoffs().cancelDelegation('h1', 'stop', 0, as('a'), ctx()), /the disk says no/);
      assert.equal(stored().state, 'PENDING');
      assert.deepEqual(
        handoffs()
          .pending('b', as('b'))
          .records.map((r) => r.requestId),
        ['h1'],
      );
      assert.equal(handoffs().cancelDelegation('h1', 'stop', 0, as('a'), ctx()).acknowledged, true);
      assert.equal(stored().state, 'CANCELLED');
    });
  });

  describe('delegation trees (sw4rm-parent-request-id)', () => {
    beforeEach(() => start());
    const budget = (currentDepth: number, maxDelegationDepth = 0) => ({
      tokenBudgetRemaining: 0,
      wallTimeRemainingMs: 0,
      deadlineEpochMs: 0,
      currentDepth,
      maxDelegationDepth,
    });

    it('the parent must be a handoff the requester accepted (ACCEPTED, or COMPLETED: the work is its own)', async () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b' });
      const refused = /sw4rm-parent-request-id '(nope|h1)' is not a handoff 'b' has accepted/;
      refusal(
        () => request({ requestId: 'h2', fromAgent: 'b', toAgent: 'c', parentRequestId: 'nope' }),
        'precondition',
        'FAILED_PRECONDITION',
        refused,
      );
      refusal(
        () => request({ requestId: 'h2', fromAgent: 'b', toAgent: 'c', parentRequestId: 'h1' }),
        'precondition',
        'FAILED_PRECONDITION',
        refused,
      );
      refusal(
        () => request({ requestId: 'h2', fromAgent: 'c', toAgent: 'b', parentRequestId: 'h1' }),
        'precondition',
        'FAILED_PRECONDITION',
        /not a handoff 'c' has accepted/,
      );
      await handoffs().accept('h1', 'b', as('b'), ctx());
      assert.equal(
        request({ requestId: 'h2', fromAgent: 'b', toAgent: 'c', parentRequestId: 'h1' }).parentRequestId,
        'h1',
      );
      handoffs().complete('h1', 'COMPLETED', as('a'), ctx());
      assert.equal(request({ requestId: 'h3', fromAgent: 'b', toAgent: 'c', parentRequestId: 'h1' }).state, 'PENDING');
    });

    it("a child's current_depth must exceed its parent's; the parent's max_delegation_depth bounds the child (its depth, or the parent's + 1)", async () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b', budget: budget(1, 2) });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      refusal(
        () => request({ requestId: 'h2', fromAgent: 'b', toAgent: 'c', parentRequestId: 'h1', budget: budget(1) }),
        'invalid',
        'VALIDATION_ERROR',
        /budget.current_depth 1 must exceed its parent's \(h1: 1\)/,
      );
      refusal(
        () => request({ requestId: 'h2', fromAgent: 'b', toAgent: 'c', parentRequestId: 'h1' }),
        'precondition',
        'VALIDATION_ERROR',
        /depth 2 has reached max_delegation_depth 2/,
      );
      refusal(
        () => request({ requestId: 'h2', fromAgent: 'b', toAgent: 'c', parentRequestId: 'h1', budget: budget(2, 5) }),
        'precondition',
        'VALIDATION_ERROR',
        /depth 2 has reached max_delegation_depth 2/,
      );
      request({ requestId: 'h3', fromAgent: 'a', toAgent: 'b', budget: budget(0, 0) });
      await handoffs().accept('h3', 'b', as('b'), ctx());
      assert.equal(
        request({ requestId: 'h4', fromAgent: 'b', toAgent: 'c', parentRequestId: 'h3' }).state,
        'PENDING',
        'no bound anywhere',
      );
    });
  });

  describe('CancelDelegation: who may', () => {
    beforeEach(() => start());

    it('an agent cancels only the handoffs it is a party of: another requester sharing the correlation id cannot block it, nor be cancelled by it', () => {
      agent('a');
      agent('b');
      agent('c');
      agent('d');
      request({ requestId: 'h1', fromAgent: 'a', toAgent: 'c', correlationId: 'shared' });
      request({ requestId: 'h2', fromAgent: 'b', toAgent: 'd', correlationId: 'shared' });
      assert.deepEqual(handoffs().cancelDelegation('shared', 'mine only', 0, as('a'), ctx()), {
        acknowledged: true,
        message: 'cancelled 1 handoff: h1',
      });
      assert.equal(stored('h1').state, 'CANCELLED');
      assert.equal(stored('h2').state, 'PENDING', "b's handoff is untouched");
      assert.deepEqual(handoffs().cancelDelegation('shared', '', 0, as('b'), ctx()), {
        acknowledged: true,
        message: 'cancelled 1 handoff: h2',
      });
    });

    it('an agent only offered the handoff (not accepting it yet) may not cancel it; its acceptor, origin and the operator may', async () => {
      agent('a');
      agent('b');
      request({ toAgent: 'b' });
      refusal(
        () => handoffs().cancelDelegation('h1', 'not mine', 0, as('b'), ctx()),
        'permission',
        'PERMISSION_DENIED',
      );
      await handoffs().accept('h1', 'b', as('b'), ctx());
      assert.equal(handoffs().cancelDelegation('h1', 'I cannot after all', 0, as('b'), ctx()).acknowledged, true);
      request({ requestId: 'h2', toAgent: 'b' });
      assert.equal(handoffs().cancelDelegation('h2', '', 0, OPERATOR, ctx()).acknowledged, true);
    });

    it('the cascade reads the open handoffs once (a parent → children map), however deep or wide the tree', () => {
      const records = new Map<string, HandoffRecord>();
      const make = (requestId: string, parentRequestId: string) =>
        records.set(requestId, { requestId, parentRequestId } as HandoffRecord);
      make('root', '');
      for (let i = 0; i < 200; i++) make(`wide-${i}`, 'root');
      for (let i = 0; i < 200; i++) make(`deep-${i}`, i === 0 ? 'root' : `deep-${i - 1}`);
      let read = 0;
      const counted: Iterable<HandoffRecord> = {
        *[Symbol.iterator]() {
          for (const r of records.values()) {
            read++;
            yield r;
          }
        },
      };
      const tree = delegationTree([records.get('root')!], counted);
      assert.equal(tree.length, 401);
      assert.deepEqual(
        tree.slice(0, 2).map((c) => [c.record.requestId, c.parent]),
        [
          ['root', ''],
          ['wide-0', 'root'],
        ],
      );
      assert.deepEqual(tree.at(-1)!.record.requestId, 'deep-199');
      assert.equal(tree.find((c) => c.record.requestId === 'deep-5')!.parent, 'deep-4');
      assert.ok(read <= records.size, `read ${read} records for ${records.size} open ones`);
    });
  });

  describe('what a refusal tells an outsider', () => {
    beforeEach(() => start());

    it("names no other agent's handoff, parties or state unless the caller is one of its parties (or the operator)", async () => {
      agent('a');
      agent('b');
      agent('m');
      request({ toAgent: 'b', correlationId: 'job' });
      // m never took part in h1.
      const dup = refusal(
        () => request({ fromAgent: 'm', toAgent: 'b', reason: 'other' }),
        'exists',
        'DUPLICATE_DETECTED',
        /request_id 'h1' was already used/,
      );
      assert.doesNotMatch(dup.message, /'a'|PENDING/);
      assert.match(
        refusal(() => request({ toAgent: 'b', reason: 'other' }), 'exists', 'DUPLICATE_DETECTED').message,
        /from 'a', now PENDING/,
        'its origin is told more',
      );
      const acc = await rejected(
        handoffs().accept('h1', 'm', as('m'), ctx()),
        'permission',
        'PERMISSION_DENIED',
        /handoff 'h1' is not offered to 'm'/,
      );
      assert.doesNotMatch(acc.message, /'b'/);
      assert.doesNotMatch(
        refusal(() => reject('h1', 'm'), 'permission', 'PERMISSION_DENIED', /is not offered to 'm'/).message,
        /'b'/,
      );
      await handoffs().accept('h1', 'b', as('b'), ctx());
      assert.doesNotMatch(
        (await rejected(handoffs().accept('h1', 'm', as('m'), ctx()), 'permission', 'PERMISSION_DENIED')).message,
        /'b'/,
      );
      assert.doesNotMatch(
        refusal(
          () => handoffs().complete('h1', 'COMPLETED', as('m'), ctx()),
          'permission',
          'PERMISSION_DENIED',
          /only the parties of handoff 'h1'/,
        ).message,
        /'a'|'b'/,
      );
      assert.doesNotMatch(
        refusal(() => handoffs().cancelDelegation('job', '', 0, as('m'), ctx()), 'permission', 'PERMISSION_DENIED')
          .message,
        /h1|'a'|'b'/,
      );
      handoffs().complete('h1', 'COMPLETED', as('a'), ctx());
      assert.deepEqual(handoffs().cancelDelegation('h1', '', 0, as('m'), ctx()), {
        acknowledged: false,
        message: "no open handoff has correlation id or request id 'h1'",
      });
      assert.deepEqual(handoffs().cancelDelegation('h1', '', 0, as('a'), ctx()), {
        acknowledged: false,
        message: "handoff 'h1' is COMPLETED: nothing to cancel",
      });
      assert.doesNotMatch(
        (await rejected(handoffs().accept('h1', 'm', as('m'), ctx()), 'permission', 'PERMISSION_DENIED')).message,
        /COMPLETED/,
      );
    });
  });

  describe('restart', () => {
    beforeEach(() => start());

    it('pending handoffs, their timers, accepted ones and transferred work survive a restart', async () => {
      agent('a');
      agent('b');
      agent('c');
      request({ toAgent: 'b' });
      request({ requestId: 'h2', toAgent: 'c', correlationId: 'w2' });
      await handoffs().accept('h2', 'c', as('c'), ctx());
      handoffs().complete('h2', 'COMPLETED', as('a'), ctx());
      request({ requestId: 'h3', toAgent: 'c' });
      await handoffs().accept('h3', 'c', as('c'), ctx());
      h.clock.advance(4_000);
      h.restart();
      for (const id of ['a', 'b', 'c']) {
        sinks.set(id, h.stream(id).sink);
        assert.ok(h.registry.heartbeat(id, 'RUNNABLE', {}, ctx()));
      }
      assert.equal(events('handoff.restored').at(-1)!.details.pending, 1);
      assert.deepEqual(
        handoffs()
          .pending('b', as('b'))
          .records.map((r) => r.requestId),
        ['h1'],
        'b finds it after the restart',
      );
      assert.equal(stored('h3').state, 'ACCEPTED');
      assertRefused(h.send(h.envelope('a', { correlationId: 'w2' }), 'b'), 'PERMISSION_DENIED', /handoff h2 completed/);
      h.clock.advance(TIMEOUT - 4_000 - 1);
      assert.equal(stored().state, 'PENDING');
      h.clock.advance(1);
      assert.equal(stored().state, 'EXPIRED', 'the re-armed timer fired at the original expiry');
      assert.equal(handoffs().complete('h3', 'COMPLETED', as('c'), ctx()).success, true);
    });

    it('a handoff whose time ran out while the coordinator was stopped is decided at start', () => {
      agent('a');
      agent('b');
      request({
        toAgent: 'b',
        delegationPolicy: {
          maxRetriesOnOverloaded: 0,
          initialBackoffMs: 0,
          backoffMultiplier: 0,
          maxBackoffMs: 0,
          allowSpilloverRouting: false,
          maxRedirects: 0,
        },
      });
      h.restart(() => h.clock.advance(TIMEOUT * 2));
      assert.equal(stored().state, 'EXPIRED');
      assert.equal(events('handoff.restored').at(-1)!.details.expired_while_stopped, 1);
    });
  });

  describe('the transferred work in memory is bounded', () => {
    async function transfer(requestId: string, correlationId: string): Promise<void> {
      request({ requestId, toAgent: 'b', correlationId });
      await handoffs().accept(requestId, 'b', as('b'), ctx());
      handoffs().complete(requestId, 'COMPLETED', as('a'), ctx());
      h.clock.advance(1);
    }

    it('keeps the newest maxTransfersInMemory; an older transfer is still refused through an indexed store lookup, also after a restart', async () => {
      start({ maxTransfersInMemory: 2 });
      agent('a');
      agent('b');
      agent('c');
      const repo = h.store.handoffs;
      const lookup = repo.transferred.bind(repo);
      let lookups = 0;
      repo.transferred = (from, correlationId) => {
        lookups++;
        return lookup(from, correlationId);
      };
      await transfer('h1', 'w1');
      await transfer('h2', 'w2');
      h.sendData('c', 'b', { correlationId: 'w1' });
      assertRefused(h.send(h.envelope('a', { correlationId: 'w1' }), 'c'), 'PERMISSION_DENIED', /handoff h1 completed/);
      assert.equal(lookups, 0, 'under the cap the store is never asked');
      await transfer('h3', 'w3');
      assert.equal(handoffs().transfersInMemory(), 2);
      for (const [w, id] of [
        ['w1', 'h1'],
        ['w2', 'h2'],
        ['w3', 'h3'],
      ]) {
        assertRefused(
          h.send(h.envelope('a', { correlationId: w }), 'c'),
          'PERMISSION_DENIED',
          new RegExp(`handoff ${id} completed: b owns this work`),
        );
      }
      assert.equal(lookups, 1, 'only the transfer beyond the cap was looked up');
      h.sendData('a', 'c', { correlationId: 'other' });
      h.restart();
      agent('a');
      agent('c');
      assert.equal(handoffs().transfersInMemory(), 2);
      assertRefused(h.send(h.envelope('a', { correlationId: 'w1' }), 'c'), 'PERMISSION_DENIED', /handoff h1 completed/);
      assert.equal(events('handoff.restored').at(-1)!.details.transfers_beyond_memory, true);
    });

    it('the store lookup of a transfer reads an index', () => {
      start();
      const db = new DatabaseSync(':memory:');
      for (const step of COORDINATOR_SCHEMA) for (const sql of step.statements) db.exec(sql);
      const lines = (
        db.prepare(`EXPLAIN QUERY PLAN ${HANDOFF_SQL.transferred}`).all('a', 'w') as Array<{ detail: string }>
      ).map((r) => r.detail);
      assert.ok(
        lines.some((l) => /USING (COVERING )?INDEX handoffs_transferred/.test(l)),
        lines.join(' | '),
      );
      assert.ok(
        lines.every((l) => !/^SCAN handoffs\b(?!.*INDEX)/.test(l)),
        lines.join(' | '),
      );
    });
  });

  describe('retention', () => {
    it('ended handoffs are deleted after the retention days, and their transferred-work refusals end with them', async () => {
      start({ retentionDays: 1 });
      agent('a');
      agent('b');
      request({ toAgent: 'b', correlationId: 'w' });
      await handoffs().accept('h1', 'b', as('b'), ctx());
      handoffs().complete('h1', 'COMPLETED', as('a'), ctx());
      assertRefused(h.send(h.envelope('a', { correlationId: 'w' }), 'b'), 'PERMISSION_DENIED');
      h.clock.advance(23 * 3_600_000);
      request({ requestId: 'h2', toAgent: 'b' });
      h.clock.advance(2 * 3_600_000);
      assert.equal(handoffs().get('h1'), undefined, 'ended more than a day before the run: deleted');
      assert.equal(stored('h2').state, 'EXPIRED', 'ended less than a day before the run: kept');
      assert.equal(events('handoff.pruned')[0].details.handoffs, 1);
      h.sendData('a', 'b', { correlationId: 'w' });
    });
  });
});
