import { strict as assert } from 'node:assert';
import { findFreePort } from '../../src/server/server';
import { useCliProcesses, type CliProcess } from '../support/cli';
import { CoordinatorClients } from '../support/clients';
import { HandoffClient } from '../support/handoffClient';
import { pollUntil } from '../support/poll';
import {
  jsonPayload,
  registerRouterAgent,
  retryAfterRestart,
  RouterClient,
  type StreamItem,
} from '../support/routerClient';

const CONTEXT = {
  conversation_history: [{ role: 'user', content: 'carry on with the parser' }],
  tool_state: {},
  metadata: { step: 3 },
};
const NO_SPILLOVER = {
  max_retries_on_overloaded: 0,
  initial_backoff_ms: 0,
  backoff_multiplier: 0,
  max_backoff_ms: 0,
  allow_spillover_routing: false,
  max_redirects: 0,
};

/**
 * Pending handoffs survive a crash (kill -9) of the headless coordinator: after the restart the target finds the handoff
 * (context intact) with GetPendingHandoffs, a rejection moves it to the next candidate, and a handoff whose timeout
 * passed while the process was dead is decided at start from the store (handoff.restored expired_while_stopped).
 */
describe('handoffs across a coordinator crash and restart (dist/cli.js)', function () {
  this.timeout(90_000);
  const coordinators = useCliProcesses('sw4rm-int-handoff-crash-');

  async function start(
    port: number,
  ): Promise<{ cli: CliProcess; handoff: HandoffClient; clients: CoordinatorClients; address: string; token: string }> {
    const { cli, env } = await coordinators.serve(port, ['--handoff-timeout', '60']);
    const handoff = new HandoffClient(env.SW4RM_HANDOFF_ADDR, env.SW4RM_TOKEN);
    const clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    coordinators.closeAfter(handoff, clients);
    return { cli, handoff, clients, address: env.SW4RM_ROUTER_ADDR, token: env.SW4RM_TOKEN };
  }

  /** The agents say they are alive (after a restart every agent is `disconnected` until it is heard from). */
  async function alive(clients: CoordinatorClients, ids: readonly string[]): Promise<void> {
    for (const id of ids)
      assert.equal((await retryAfterRestart(`Heartbeat ${id}`, () => clients.heartbeat(id, 'RUNNABLE'))).ok, true);
  }

  it('kill -9 with a handoff pending: after the restart the target finds it, rejects it, and the next candidate is offered it', async () => {
    const port = await findFreePort('127.0.0.1');
    const first = await start(port);
    for (const [id, caps] of [
      ['origin', ['code']],
      ['a-reviewer', ['review']],
      ['b-reviewer', ['review']],
    ] as const) {
      await registerRouterAgent(first.clients, id, { capabilities: [...caps] });
    }
    await alive(first.clients, ['origin', 'a-reviewer', 'b-reviewer']);
    await first.handoff.request(
      {
        request_id: 'h1',
        from_agent: 'origin',
        to_agent: '',
        reason: 'take over the parser',
        context_snapshot: Buffer.from(JSON.stringify(CONTEXT)),
        capabilities_required: ['review'],
        priority: -5,
      },
      {
        'sw4rm-context-content-type': 'application/vnd.sw4rm.handoff-context+json',
        'sw4rm-correlation-id': 'parser-work',
      },
    );
    first.cli.signal('SIGKILL');
    await first.cli.exit();
    assert.equal(first.cli.exitSignal, 'SIGKILL');

    const second = await start(port);
    await alive(second.clients, ['origin', 'a-reviewer', 'b-reviewer']);
    const { pending_requests: pending } = await retryAfterRestart('GetPendingHandoffs', () =>
      second.handoff.pending('a-reviewer'),
    );
    assert.deepEqual(
      pending.map((p) => [p.request_id, p.from_agent, p.priority]),
      [['h1', 'origin', -5]],
      'the handoff answered before the crash survived',
    );
    assert.deepEqual(JSON.parse(pending[0].context_snapshot.toString()), CONTEXT, 'its context intact');
    await second.handoff.reject('h1', 'a-reviewer', { rejection_reason: 'not mine' });
    const { pending_requests: next } = await second.handoff.pending('b-reviewer');
    assert.deepEqual(
      next.map((p) => p.request_id),
      ['h1'],
    );
    // The offer to b-reviewer is a stored NOTIFICATION: its inbox receives it when it connects.
    const router = new RouterClient(second.address, second.token, 'b-reviewer');
    coordinators.closeAfter(router);
    const inbox = router.openInbox('b-reviewer');
    coordinators.closeAfter(inbox);
    const offer = await inbox.waitFor(
      (i: StreamItem) =>
        i.msg.message_type === 'NOTIFICATION' &&
        jsonPayload<Record<string, unknown>>(i.msg)?.type === 'handoff_request',
      10_000,
      'the offer',
    );
    assert.equal(offer.msg.correlation_id, 'parser-work');
    await second.handoff.accept('h1', 'b-reviewer');
    assert.equal((await second.handoff.complete('h1')).success, true);

    // The transfer survives a second kill -9: the origin's sends about the work are still refused.
    second.cli.signal('SIGKILL');
    await second.cli.exit();
    const third = await start(port);
    const origin = new RouterClient(third.address, third.token, 'origin');
    coordinators.closeAfter(origin);
    const refused = await retryAfterRestart('SendMessage', () =>
      origin.send(origin.envelope({ correlation_id: 'parser-work', payload: {} }), { to: 'b-reviewer' }),
    );
    assert.equal(refused.accepted, false);
    assert.match(refused.reason, /^PERMISSION_DENIED: handoff h1 completed: b-reviewer owns this work/);
  });

  it("kill -9 while a handoff's timer runs: restarted after its timeout passed, it is decided at start from the store and the requester is told", async () => {
    const port = await findFreePort('127.0.0.1');
    const first = await start(port);
    for (const id of ['origin', 'reviewer']) await registerRouterAgent(first.clients, id, { capabilities: ['review'] });
    await alive(first.clients, ['origin', 'reviewer']);
    // Taken before the request: the handoff's expiry is at most this plus its timeout.
    const requestedBefore = Date.now();
    await first.handoff.request({
      request_id: 'h2',
      from_agent: 'origin',
      to_agent: 'reviewer',
      reason: 'quick one',
      context_snapshot: Buffer.alloc(0),
      capabilities_required: [],
      priority: 0,
      timeout: { seconds: 1, nanos: 0 },
      delegation_policy: NO_SPILLOVER,
    });
    first.cli.signal('SIGKILL');
    await first.cli.exit();
    // The coordinator is dead while the timeout passes (no timer of it can run): restarted only after that, the
    // expiry can only be decided by the restore, from the store.
    const late = requestedBefore + 1_000 + 50 - Date.now();
    if (late > 0) await new Promise((resolve) => setTimeout(resolve, late));

    const second = await start(port);
    // The restore's event (echoed to stderr): the handoff's time ran out while the process was dead.
    const restored = await pollUntil(
      'handoff.restored on stderr',
      async () => /handoff\.restored \[[^\]]*\] (\{.*\})$/m.exec(second.cli.stderr) ?? undefined,
      10_000,
    );
    assert.equal((JSON.parse(restored[1]) as { expired_while_stopped: number }).expired_while_stopped, 1);
    const origin = new RouterClient(second.address, second.token, 'origin');
    coordinators.closeAfter(origin);
    const inbox = origin.openInbox('origin', { reconnect: true });
    coordinators.closeAfter(inbox);
    const expired = await inbox.waitFor(
      (i: StreamItem) => {
        const body = i.msg.message_type === 'NOTIFICATION' ? jsonPayload<Record<string, unknown>>(i.msg) : undefined;
        return body?.type === 'handoff_status' && body.request_id === 'h2' && body.event === 'expired';
      },
      20_000,
      'the expired status',
    );
    assert.equal(jsonPayload<Record<string, unknown>>(expired.msg)!.status, 'EXPIRED');
    assert.deepEqual(
      (await retryAfterRestart('GetPendingHandoffs', () => second.handoff.pending('reviewer'))).pending_requests,
      [],
    );
  });
});
