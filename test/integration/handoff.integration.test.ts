import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { CoordinatorHost } from '../../src/server/host';
import { expectStatus, WorktreeClient, type CoordinatorClients } from '../support/clients';
import { makeRepo } from '../support/gitRepo';
import { HandoffClient } from '../support/handoffClient';
import { clientsFor, startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { jsonPayload, registerRouterAgent, RouterClient, type Inbox, type StreamItem } from '../support/routerClient';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const CONTEXT_TYPE = 'application/vnd.sw4rm.handoff-context+json';
const CONTEXT = {
  conversation_history: [
    { role: 'user', content: 'Analyze the sales data for Q3', timestamp: '2025-01-15T10:30:00Z' },
    { role: 'tool', name: 'query_database', tool_call_id: 'call_abc123', content: '{"total_sales": 1500000}' },
  ],
  tool_state: { cached_results: { call_abc123: { total_sales: 1500000 } } },
  metadata: { agent_id: 'origin' },
};

const notice = (type: string, requestId: string, event?: string) => (item: StreamItem) => {
  if (item.msg.message_type !== 'NOTIFICATION') return false;
  const body = jsonPayload<Record<string, unknown>>(item.msg);
  return body?.type === type && body.request_id === requestId && (event === undefined || body.event === event);
};

describe('HandoffService over gRPC (RFC §17.6)', function () {
  this.timeout(60_000);
  let dir: string;
  let host: CoordinatorHost;
  let clients: CoordinatorClients;
  let handoff: HandoffClient;
  const routers = new Map<string, RouterClient>();
  const inboxes = new Map<string, Inbox>();
  const closers: Array<{ close(): void }> = [];

  async function start(options: Parameters<typeof startHost>[1] = {}): Promise<void> {
    host = await startHost(path.join(dir, 'data'), { handoffs: { defaultTimeoutMs: 60_000 }, ...options });
    clients = clientsFor(host);
    handoff = new HandoffClient(`127.0.0.1:${host.port}`, host.token);
    closers.push(clients, handoff);
  }

  /** Registers through RegistryService with capabilities, heartbeats RUNNABLE, opens the inbox stream. */
  async function agent(id: string, capabilities: string[]): Promise<Inbox> {
    await registerRouterAgent(clients, id, { capabilities });
    assert.equal((await clients.heartbeat(id, 'RUNNABLE')).ok, true);
    const router = new RouterClient(`127.0.0.1:${host.port}`, host.token, id);
    routers.set(id, router);
    closers.push(router);
    const inbox = router.openInbox(id);
    inboxes.set(id, inbox);
    await pollUntil(`${id}'s inbox stream is open`, async () => inbox.live || undefined, 5_000);
    return inbox;
  }

  const request = (extra: Record<string, unknown> = {}) => ({
    request_id: 'h1',
    from_agent: 'origin',
    to_agent: '',
    reason: 'needs a reviewer',
    context_snapshot: Buffer.from(JSON.stringify(CONTEXT)),
    capabilities_required: ['review'],
    priority: 0,
    timeout: { seconds: 60, nanos: 0 },
    ...extra,
  });

  beforeEach(() => {
    dir = makeTempDir('sw4rm-int-handoff-');
  });

  afterEach(async () => {
    for (const inbox of inboxes.values()) inbox.close();
    inboxes.clear();
    routers.clear();
    for (const c of closers.splice(0)) c.close();
    await stopHost(host);
    removeTempDir(dir);
  });

  it("capability routing, the NOTIFICATION, GetPendingHandoffs, accept, complete; afterwards the origin's SendMessage about the work is refused", async () => {
    await start();
    const origin = await agent('origin', ['code']);
    const reviewer = await agent('reviewer', ['review', 'code']);
    await agent('writer', ['docs']);
    await handoff.request(request(), { 'sw4rm-context-content-type': CONTEXT_TYPE, 'sw4rm-correlation-id': 'work-1' });

    const offer = await reviewer.waitFor(notice('handoff_request', 'h1'), 10_000, 'the handoff request');
    assert.equal(offer.msg.producer_id, 'coordinator');
    assert.equal(offer.msg.correlation_id, 'work-1');
    const body = jsonPayload<Record<string, unknown>>(offer.msg)!;
    assert.equal(body.from_agent, 'origin');
    assert.equal(body.context_encoding, 'utf8');
    assert.deepEqual(JSON.parse(String(body.context)), CONTEXT, 'the context arrives intact');

    const { pending_requests: pending } = await handoff.pending('reviewer');
    assert.equal(pending.length, 1);
    assert.equal(pending[0].request_id, 'h1');
    assert.equal(pending[0].to_agent, 'reviewer');
    assert.deepEqual(JSON.parse(pending[0].context_snapshot.toString()), CONTEXT);
    assert.deepEqual(pending[0].capabilities_required, ['review']);
    assert.ok(
      Number(pending[0].timeout!.seconds) > 50 && Number(pending[0].timeout!.seconds) <= 60,
      'the time that remains',
    );
    assert.deepEqual((await handoff.pending('writer')).pending_requests, []);

    await handoff.accept('h1', 'reviewer');
    const accepted = await origin.waitFor(notice('handoff_status', 'h1', 'accepted'), 10_000, 'the accepted status');
    assert.equal(jsonPayload<Record<string, unknown>>(accepted.msg)!.status, 'ACCEPTED');
    assert.deepEqual((await handoff.pending('reviewer')).pending_requests, []);

    const done = await handoff.complete('h1');
    assert.equal(done.success, true);
    await origin.waitFor(notice('handoff_status', 'h1', 'completed'), 10_000, 'the completed status');

    const originRouter = routers.get('origin')!;
    const refused = await originRouter.send(
      originRouter.envelope({ correlation_id: 'work-1', payload: { more: 'work' } }),
      { to: 'writer' },
    );
    assert.equal(refused.accepted, false);
    assert.match(refused.reason, /^PERMISSION_DENIED: handoff h1 completed: reviewer owns this work/);
    const other = await originRouter.send(originRouter.envelope({ correlation_id: 'work-2', payload: {} }), {
      to: 'writer',
    });
    assert.equal(other.accepted, true, other.reason);
    const reviewerRouter = routers.get('reviewer')!;
    const owner = await reviewerRouter.send(reviewerRouter.envelope({ correlation_id: 'work-1', payload: {} }), {
      to: 'writer',
    });
    assert.equal(owner.accepted, true, owner.reason);
    // The origin still acknowledges what reaches it about the work.
    const ack = await originRouter.ack(accepted.msg.message_id, 'READ', { correlation_id: 'work-1' });
    assert.equal(ack.accepted, true, ack.reason);
  });

  it('refusals carry the gRPC status and the SW4RM code first: schema path, no route, duplicates, bad metadata', async () => {
    await start();
    await agent('origin', ['code']);
    await agent('reviewer', ['review']);
    const bad = { ...CONTEXT, conversation_history: [{ content: 'no role' }] };
    let err = await expectStatus(
      handoff.request(request({ context_snapshot: Buffer.from(JSON.stringify(bad)) }), {
        'sw4rm-context-content-type': CONTEXT_TYPE,
      }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.equal(
      err.details,
      "VALIDATION_ERROR: context_snapshot/conversation_history/0: must have required property 'role'",
    );
    err = await expectStatus(
      handoff.request(request({ capabilities_required: ['flying'] })),
      grpc.status.FAILED_PRECONDITION,
    );
    assert.match(err.details, /^NO_ROUTE: no registered agent other than 'origin' holds the capabilities flying/);
    err = await expectStatus(handoff.request(request({ to_agent: 'ghost' })), grpc.status.NOT_FOUND);
    assert.match(err.details, /^NO_ROUTE: to_agent 'ghost'/);
    err = await expectStatus(
      handoff.request(request(), { 'sw4rm-handoff-worktree': 'move' }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(err.details, /sw4rm-handoff-worktree may only be 'carry'/);
    err = await expectStatus(
      handoff.request(request({ timeout: { seconds: -1, nanos: 0 } })),
      grpc.status.INVALID_ARGUMENT,
    );
    await handoff.request(request());
    await handoff.request(request()); // an identical retry
    err = await expectStatus(handoff.request(request({ reason: 'something else' })), grpc.status.ALREADY_EXISTS);
    assert.match(err.details, /^DUPLICATE_DETECTED: request_id 'h1' was already used/);
    err = await expectStatus(handoff.complete('h1'), grpc.status.FAILED_PRECONDITION);
    assert.match(err.details, /^FAILED_PRECONDITION: handoff 'h1' is PENDING/);
    err = await expectStatus(handoff.complete('h1', 'EXPIRED'), grpc.status.INVALID_ARGUMENT);
    assert.match(err.details, /status must be COMPLETED/);
    err = await expectStatus(handoff.pending(''), grpc.status.INVALID_ARGUMENT);
    assert.equal((await handoff.cancel('nothing-like-this', 'x')).acknowledged, false);
  });

  it('GetPendingHandoffs: the trailer sw4rm-pending-handoffs carries what HandoffRequest has no field for, keyed by request_id; sw4rm-pending-more', async () => {
    await start();
    await agent('origin', ['code']);
    await agent('reviewer', ['review']);
    await handoff.request(request({ to_agent: 'reviewer' }), {
      'sw4rm-context-content-type': CONTEXT_TYPE,
      'sw4rm-correlation-id': 'work-1',
    });
    await handoff.request(
      request({ request_id: 'h-ü', to_agent: 'reviewer', priority: 3, context_snapshot: Buffer.from([1, 2]) }),
    );
    const { response, trailer } = await handoff.pendingWithTrailer('reviewer');
    assert.deepEqual(
      response.pending_requests.map((p) => p.request_id),
      ['h1', 'h-ü'],
    );
    assert.deepEqual(trailer.get('sw4rm-pending-more'), ['0']);
    const [raw] = trailer.get('sw4rm-pending-handoffs');
    assert.match(String(raw), /^[\x20-\x7e]+$/, 'printable ASCII (non-ASCII escaped in the JSON)');
    const extra = JSON.parse(String(raw)) as { more: number; handoffs: Record<string, Record<string, unknown>> };
    assert.equal(extra.more, 0);
    assert.deepEqual(Object.keys(extra.handoffs), ['h1', 'h-ü']);
    const h1 = extra.handoffs.h1;
    assert.deepEqual(
      [h1.context_content_type, h1.correlation_id, h1.task_id, h1.parent_request_id, h1.carry_worktree, h1.attempt],
      [CONTEXT_TYPE, 'work-1', '', '', null, 1],
    );
    assert.match(String(h1.answer_by), /^\d{4}-\d\d-\d\dT/);
    assert.match(String(h1.expires_at), /^\d{4}-\d\d-\d\dT/);
    assert.equal(extra.handoffs['h-ü'].correlation_id, 'h-ü');
  });

  it('AcceptHandoff says accept: accepted false or rejection fields are refused; RejectHandoff with accepted true too', async () => {
    await start();
    await agent('origin', ['code']);
    await agent('reviewer', ['review']);
    await handoff.request(request({ to_agent: 'reviewer' }));
    const accept = (extra: Record<string, unknown>) =>
      handoff.call('AcceptHandoff', { request_id: 'h1', accepting_agent: 'reviewer', accepted: true, ...extra });
    let err = await expectStatus(accept({ accepted: false }), grpc.status.INVALID_ARGUMENT);
    assert.match(err.details, /^VALIDATION_ERROR: AcceptHandoff with accepted false/);
    for (const extra of [
      { rejection_reason: 'but no' },
      { rejection_code: 'OVERLOADED' },
      { retry_after_ms: 5 },
      { redirect_to_agent_id: 'someone' },
    ]) {
      err = await expectStatus(accept(extra), grpc.status.INVALID_ARGUMENT);
      assert.match(
        err.details,
        /^VALIDATION_ERROR: AcceptHandoff carries (rejection_reason|rejection_code|retry_after_ms|redirect_to_agent_id)/,
        JSON.stringify(extra),
      );
    }
    err = await expectStatus(
      handoff.call('RejectHandoff', {
        request_id: 'h1',
        accepting_agent: 'reviewer',
        accepted: true,
        rejection_reason: 'no',
      }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(err.details, /^VALIDATION_ERROR: RejectHandoff with accepted true/);
    assert.equal(host.coordinator.handoffs.get('h1')!.state, 'PENDING', 'nothing was decided');
    await handoff.accept('h1', 'reviewer');
    assert.equal(host.coordinator.handoffs.get('h1')!.state, 'ACCEPTED');
  });

  it("an impostor cannot accept, reject or complete someone else's handoff; the credential's own agent is not the target either", async () => {
    await start();
    await agent('origin', ['code']);
    await agent('reviewer', ['review']);
    await agent('mallory', ['review']);
    await handoff.request(request({ to_agent: 'reviewer' }));
    const mallory = host.coordinator.credentials.mintAgent('mallory', 'test', 'mallory', {
      correlationId: 'test',
    }).token;
    let err = await expectStatus(handoff.accept('h1', 'reviewer', mallory), grpc.status.PERMISSION_DENIED);
    assert.match(err.details, /acts as agent 'mallory'; the call acts as 'reviewer'/);
    err = await expectStatus(handoff.accept('h1', 'mallory', mallory), grpc.status.PERMISSION_DENIED);
    assert.match(err.details, /^PERMISSION_DENIED: handoff 'h1' is not offered to 'mallory'/);
    err = await expectStatus(
      handoff.reject('h1', 'mallory', { rejection_reason: 'mine now' }, mallory),
      grpc.status.PERMISSION_DENIED,
    );
    err = await expectStatus(handoff.pending('reviewer', mallory), grpc.status.PERMISSION_DENIED);
    const reviewer = host.coordinator.credentials.mintAgent('reviewer', 'test', 'reviewer', {
      correlationId: 'test',
    }).token;
    await handoff.accept('h1', 'reviewer', reviewer);
    err = await expectStatus(handoff.complete('h1', 'COMPLETED', mallory), grpc.status.PERMISSION_DENIED);
    assert.match(err.details, /only the parties of handoff 'h1'/);
    err = await expectStatus(handoff.cancel('h1', 'stop', 0, mallory), grpc.status.PERMISSION_DENIED);
    assert.equal((await handoff.complete('h1', 'COMPLETED', reviewer)).success, true);
  });

  it('reject with a reason → the next candidate is offered it; CancelDelegation ends it and tells both parties', async () => {
    await start();
    const origin = await agent('origin', ['code']);
    const first = await agent('a-reviewer', ['review']);
    const second = await agent('b-reviewer', ['review']);
    await handoff.request(request(), { 'sw4rm-correlation-id': 'job-9' });
    await first.waitFor(notice('handoff_request', 'h1'), 10_000, 'the first offer');
    await handoff.reject('h1', 'a-reviewer', {
      rejection_reason: 'on holiday',
      rejection_code: 'OVERLOADED',
      retry_after_ms: 3_600_000,
    });
    const rerouted = await origin.waitFor(notice('handoff_status', 'h1', 'rerouted'), 10_000, 'the rerouted status');
    assert.equal(jsonPayload<Record<string, unknown>>(rerouted.msg)!.to_agent, 'b-reviewer');
    await second.waitFor(notice('handoff_request', 'h1'), 10_000, 'the second offer');
    const record = host.coordinator.handoffs.get('h1')!;
    assert.deepEqual(
      record.attempts.map((a) => [a.agentId, a.outcome, a.code, a.retryAfterMs]),
      [
        ['a-reviewer', 'rejected', 'OVERLOADED', 3_600_000],
        ['b-reviewer', '', '', undefined],
      ],
    );
    const cancelled = await handoff.cancel('job-9', 'plans changed', 1_000);
    assert.deepEqual(cancelled, { acknowledged: true, message: 'cancelled 1 handoff: h1' });
    for (const inbox of [origin, second]) {
      const item = await inbox.waitFor(notice('handoff_status', 'h1', 'cancelled'), 10_000, 'the cancellation');
      assert.equal(jsonPayload<Record<string, unknown>>(item.msg)!.grace_period_ms, 1_000);
    }
    assert.deepEqual((await handoff.pending('b-reviewer')).pending_requests, []);
  });

  describe('carrying the worktree (real git)', () => {
    let repo: string;
    let worktrees: WorktreeClient;

    beforeEach(async () => {
      repo = makeRepo(dir, 'app', { 'README.md': 'hello\n' });
      await start({ workspaceFolders: [repo] });
      host.coordinator.hitl.attachOperator('editor:test');
      worktrees = new WorktreeClient(`127.0.0.1:${host.port}`, host.token, 20_000);
      closers.push(worktrees);
      await agent('origin', ['code']);
      await agent('reviewer', ['review']);
      assert.equal(
        (
          await worktrees.call<{ ok: boolean; reason: string }>('Bind', {
            agent_id: 'origin',
            repo_id: 'app',
            worktree_id: '',
          })
        ).ok,
        true,
      );
    });

    const status = (agentId: string) =>
      worktrees.call<{ repo_id: string; worktree_id: string; state: string }>('Status', { agent_id: agentId });

    it("a receiver bound at its own home switches into the sender's worktree (SWITCH_REQUEST, decided through HITL)", async () => {
      assert.equal(
        (await worktrees.call<{ ok: boolean }>('Bind', { agent_id: 'reviewer', repo_id: 'app', worktree_id: '' })).ok,
        true,
      );
      await handoff.request(request({ to_agent: 'reviewer' }), { 'sw4rm-handoff-worktree': 'carry' });
      await Promise.all([handoff.accept('h1', 'reviewer'), handoff.accept('h1', 'reviewer')]);
      const record = host.coordinator.handoffs.get('h1')!;
      assert.equal(record.state, 'ACCEPTED');
      assert.deepEqual(
        [record.worktree?.repoId, record.worktree?.worktreeId, record.worktree?.outcome],
        ['app', 'origin', 'switch_pending'],
      );
      assert.equal((await status('reviewer')).state, 'SWITCH_PENDING');
      host.coordinator.hitl.decide(
        record.worktree!.invocationId,
        { action: 'approve', rationale: 'the reviewer takes over the work' },
        'editor:test',
        { correlationId: 'test' },
      );
      await pollUntil(
        'the switch is granted',
        async () => ((await status('reviewer')).state === 'BOUND_NON_HOME' ? true : undefined),
        10_000,
      );
      const followed = host.coordinator.handoffs.get('h1')!;
      assert.equal(followed.worktree?.outcome, 'switched', 'the handoff follows the decision');
      assert.equal(followed.state, 'ACCEPTED');
      const told = await inboxes
        .get('origin')!
        .waitFor(notice('handoff_status', 'h1', 'worktree'), 10_000, 'the worktree status');
      assert.equal(
        (jsonPayload<Record<string, unknown>>(told.msg)!.worktree as Record<string, unknown>).outcome,
        'switched',
      );
      assert.equal(host.coordinator.log.query({ eventType: 'handoff.worktree_switched', limit: 10 }).length, 1);
      const reviewerStatus = await status('reviewer');
      assert.equal(reviewerStatus.worktree_id, 'origin', "the reviewer works in the sender's worktree");
      assert.equal(
        host.coordinator.worktrees.worktreePathOf('reviewer'),
        host.coordinator.worktrees.worktreePathOf('origin'),
      );
      assert.ok(fs.existsSync(path.join(host.coordinator.worktrees.worktreePathOf('reviewer')!, 'README.md')));
    });

    it('a switch denied: the handoff follows (switch_refused, the receiver stays in its home) and the origin is told', async () => {
      assert.equal(
        (await worktrees.call<{ ok: boolean }>('Bind', { agent_id: 'reviewer', repo_id: 'app', worktree_id: '' })).ok,
        true,
      );
      await handoff.request(request({ to_agent: 'reviewer' }), { 'sw4rm-handoff-worktree': 'carry' });
      await handoff.accept('h1', 'reviewer');
      const invocationId = host.coordinator.handoffs.get('h1')!.worktree!.invocationId;
      assert.equal(
        host.coordinator.hitl.get(invocationId)!.context.facts.handoff_request_id,
        'h1',
        'the approval names the handoff',
      );
      host.coordinator.hitl.decide(invocationId, { action: 'deny', rationale: 'not in my worktree' }, 'editor:test', {
        correlationId: 'test',
      });
      await pollUntil(
        'the handoff follows',
        async () => (host.coordinator.handoffs.get('h1')!.worktree?.outcome === 'switch_refused' ? true : undefined),
        10_000,
      );
      assert.equal((await status('reviewer')).state, 'BOUND_HOME');
      const told = await inboxes
        .get('origin')!
        .waitFor(notice('handoff_status', 'h1', 'worktree'), 10_000, 'the worktree status');
      assert.match(
        String((jsonPayload<Record<string, unknown>>(told.msg)!.worktree as Record<string, unknown>).detail),
        /not granted/,
      );
    });

    it('CancelDelegation after the accept withdraws the pending switch; one a crash left behind is withdrawn at the next start', async () => {
      assert.equal(
        (await worktrees.call<{ ok: boolean }>('Bind', { agent_id: 'reviewer', repo_id: 'app', worktree_id: '' })).ok,
        true,
      );
      await handoff.request(request({ to_agent: 'reviewer' }), { 'sw4rm-handoff-worktree': 'carry' });
      await handoff.accept('h1', 'reviewer');
      const first = host.coordinator.handoffs.get('h1')!.worktree!.invocationId;
      assert.equal((await handoff.cancel('h1', 'plans changed')).acknowledged, true);
      assert.equal(host.coordinator.hitl.get(first)!.state, 'cancelled');
      assert.equal(host.coordinator.handoffs.get('h1')!.worktree?.outcome, 'withdrawn');
      await pollUntil(
        'the reviewer is home again',
        async () => ((await status('reviewer')).state === 'BOUND_HOME' ? true : undefined),
        10_000,
      );

      // The same, but the withdrawal does not happen (as if the process died right after the cancel's commit).
      await handoff.request(request({ request_id: 'h2', to_agent: 'reviewer' }), { 'sw4rm-handoff-worktree': 'carry' });
      await handoff.accept('h2', 'reviewer');
      const second = host.coordinator.handoffs.get('h2')!.worktree!.invocationId;
      const hitl = host.coordinator.hitl;
      const cancel = hitl.cancel.bind(hitl);
      hitl.cancel = () => {
        throw new Error('the process died here');
      };
      assert.equal((await handoff.cancel('h2', 'plans changed')).acknowledged, true);
      hitl.cancel = cancel;
      assert.equal(host.coordinator.hitl.get(second)!.state, 'pending', 'orphaned');
      for (const c of closers.splice(0)) c.close();
      for (const inbox of inboxes.values()) inbox.close();
      inboxes.clear();
      await stopHost(host);
      await start({ workspaceFolders: [repo] });
      assert.equal(host.coordinator.hitl.get(second)!.state, 'cancelled', 'withdrawn at start');
      assert.equal(host.coordinator.worktrees.status('reviewer').state, 'BOUND_HOME');
    });

    it("an UNBOUND receiver: refused while the worktree is the sender's home; bound to it (BIND) once the sender let go", async () => {
      await handoff.request(request({ to_agent: 'reviewer' }), { 'sw4rm-handoff-worktree': 'carry' });
      const err = await expectStatus(handoff.accept('h1', 'reviewer'), grpc.status.FAILED_PRECONDITION);
      assert.match(
        err.details,
        /^FAILED_PRECONDITION: handoff 'h1' carries worktree 'origin' of 'app', but the worktree state machine refused to bind 'reviewer' to it: worktree 'origin' of 'app' is the home worktree of agent 'origin'/,
      );
      assert.equal(host.coordinator.handoffs.get('h1')!.state, 'PENDING', 'not accepted');
      assert.equal((await status('reviewer')).state, 'UNBOUND');
      assert.equal((await worktrees.call<{ ok: boolean }>('Unbind', { agent_id: 'origin' })).ok, true);
      // An accept and its retry at once (the answer of the first was slow): both answered OK, one acceptance.
      await Promise.all([handoff.accept('h1', 'reviewer'), handoff.accept('h1', 'reviewer')]);
      assert.equal(host.coordinator.log.query({ eventType: 'handoff.accepted', limit: 10 }).length, 1);
      const record = host.coordinator.handoffs.get('h1')!;
      assert.equal(record.state, 'ACCEPTED');
      assert.equal(record.worktree?.outcome, 'bound');
      const reviewerStatus = await status('reviewer');
      assert.deepEqual(
        [reviewerStatus.state, reviewerStatus.repo_id, reviewerStatus.worktree_id],
        ['BOUND_HOME', 'app', 'origin'],
      );
    });

    it("a receiver in another binding state is refused with the state machine's reason", async () => {
      await handoff.request(request({ to_agent: 'reviewer' }), { 'sw4rm-handoff-worktree': 'carry' });
      assert.equal(
        (await worktrees.call<{ ok: boolean }>('Bind', { agent_id: 'reviewer', repo_id: 'app', worktree_id: '' })).ok,
        true,
      );
      assert.equal(
        (
          await worktrees.call<{ state: string }>('RequestSwitch', {
            agent_id: 'reviewer',
            target_worktree_id: 'origin',
            requires_hitl: true,
          })
        ).state,
        'SWITCH_PENDING',
      );
      const err = await expectStatus(handoff.accept('h1', 'reviewer'), grpc.status.FAILED_PRECONDITION);
      assert.match(
        err.details,
        /'reviewer' is SWITCH_PENDING in repository 'app': the worktree state machine \(RFC §16.2\) carries a worktree only into an UNBOUND agent \(BIND\) or one BOUND_HOME/,
      );
    });
  });
});
