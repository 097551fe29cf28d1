import { strict as assert } from 'node:assert';
import { type CoordinatorApi } from '../../src/core/api';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { parseInvocationRequest } from '../../src/core/hitl/request';
import {
  NO_FACTS,
  NO_STEPS,
  WalkthroughProgress,
  walkthroughSteps,
  type WalkthroughSteps,
} from '../../src/extension/walkthroughModel';
import { RouterHarness, ctx, settle } from '../support/routerHarness';

describe("the walkthrough's steps, derived from the coordinator's state", () => {
  describe('walkthroughSteps', () => {
    it('nothing is done on a coordinator that has seen nothing; "start" is done while it runs', () => {
      assert.deepEqual(walkthroughSteps(NO_FACTS), NO_STEPS);
      assert.deepEqual(walkthroughSteps({ ...NO_FACTS, running: true }), { ...NO_STEPS, coordinatorRunning: true });
    });

    it('the environment is ready once an agent credential was minted or an agent registered', () => {
      assert.equal(walkthroughSteps({ ...NO_FACTS, agentCredentials: 1 }).environmentReady, true);
      assert.equal(walkthroughSteps({ ...NO_FACTS, agentsRegistered: 1 }).environmentReady, true);
      assert.deepEqual(walkthroughSteps({ ...NO_FACTS, agentCredentials: 1 }), { ...NO_STEPS, environmentReady: true });
    });

    it('each later step follows its own fact only', () => {
      assert.deepEqual(walkthroughSteps({ ...NO_FACTS, agentsRegistered: 2 }), {
        ...NO_STEPS,
        environmentReady: true,
        agentRegistered: true,
      });
      assert.deepEqual(walkthroughSteps({ ...NO_FACTS, messagesDelivered: 1 }), {
        ...NO_STEPS,
        messageDelivered: true,
      });
      assert.deepEqual(walkthroughSteps({ ...NO_FACTS, approvalsDecided: true }), {
        ...NO_STEPS,
        approvalDecided: true,
      });
    });
  });

  describe('WalkthroughProgress over a real coordinator (CoordinatorApi in process)', () => {
    let h: RouterHarness;
    let api: InProcessCoordinatorApi;
    let progress: WalkthroughProgress;
    let published: WalkthroughSteps[];
    /** How often each API query was made. */
    let calls: Record<string, number>;

    /** The API, counting the queries the progress makes. */
    function counting(target: CoordinatorApi): CoordinatorApi {
      return new Proxy(target, {
        get(object, property, receiver) {
          const value = Reflect.get(object, property, receiver);
          if (typeof value !== 'function' || String(property).startsWith('on')) return value;
          return (...args: unknown[]) => {
            calls[String(property)] = (calls[String(property)] ?? 0) + 1;
            return (value as (...a: unknown[]) => unknown).apply(object, args);
          };
        },
      });
    }

    function openInvocation(summary: string): string {
      const request = parseInvocationRequest(
        { reason_type: 'SECURITY_APPROVAL', summary },
        { requester: 'agent-a', correlationId: 'corr-walk', now: h.clock.now() },
      );
      return h.coordinator.hitl.open(request, { kind: 'rpc' }, ctx('corr-walk')).invocation.id;
    }

    beforeEach(() => {
      h = new RouterHarness({ ackTimeoutMs: 60_000 });
      api = new InProcessCoordinatorApi(h.coordinator);
      published = [];
      calls = {};
      progress = new WalkthroughProgress((steps) => published.push(steps));
    });

    afterEach(() => {
      progress.dispose();
      api.dispose();
      h.dispose();
    });

    it('checks each step when the coordinator reaches it: credential, agent, delivered message, decided approval', async () => {
      await progress.bind(counting(api));
      assert.deepEqual(progress.steps, { ...NO_STEPS, coordinatorRunning: true });

      await api.mintAgentCredential('agent-a', 'editor:test');
      await settle();
      assert.deepEqual(progress.steps, { ...NO_STEPS, coordinatorRunning: true, environmentReady: true });

      h.register('agent-a');
      h.register('agent-b');
      await settle();
      assert.deepEqual(progress.steps, {
        ...NO_STEPS,
        coordinatorRunning: true,
        environmentReady: true,
        agentRegistered: true,
      });

      // Admitted but not delivered while agent-a has no inbox stream.
      h.sendData('agent-b', 'agent-a');
      await settle();
      assert.equal(progress.steps.messageDelivered, false);
      h.stream('agent-a');
      await settle();
      assert.equal(progress.steps.messageDelivered, true);

      // A cancelled request is not a decision; a decided one is.
      await api.cancelApproval(openInvocation('withdrawn'), 'editor:test', 'not needed');
      await settle();
      assert.equal(progress.steps.approvalDecided, false);
      await api.decideApproval(
        openInvocation('Delete generated fixtures'),
        { action: 'approve', rationale: 'reviewed' },
        'editor:test',
      );
      await settle();
      assert.deepEqual(progress.steps, {
        coordinatorRunning: true,
        environmentReady: true,
        agentRegistered: true,
        messageDelivered: true,
        approvalDecided: true,
      });

      // Published once per change, never the same steps twice in a row.
      for (let i = 1; i < published.length; i++) assert.notDeepEqual(published[i], published[i - 1]);
      assert.deepEqual(published.at(-1), progress.steps);
    });

    it('stops reading the delivered count once a message was delivered (inbox events are the busiest)', async () => {
      h.register('agent-a');
      h.register('agent-b');
      h.stream('agent-a');
      await progress.bind(counting(api));
      h.sendData('agent-b', 'agent-a');
      await settle();
      assert.equal(progress.steps.messageDelivered, true);
      const reads = calls.deliveredMessageCount;
      for (let i = 0; i < 5; i++) h.sendData('agent-b', 'agent-a');
      await settle();
      assert.equal(calls.deliveredMessageCount, reads);
    });

    it('reads what a restarted coordinator already holds, and reports nothing done while it is stopped', async () => {
      h.register('agent-a');
      await api.decideApproval(
        openInvocation('before the restart'),
        { action: 'deny', rationale: 'no' },
        'editor:test',
      );
      await progress.bind(api);
      assert.deepEqual(progress.steps, {
        coordinatorRunning: true,
        environmentReady: true,
        agentRegistered: true,
        messageDelivered: false,
        approvalDecided: true,
      });

      await progress.bind(undefined);
      assert.deepEqual(progress.steps, NO_STEPS);
      assert.deepEqual(published.at(-1), NO_STEPS);

      api.dispose();
      h.restart();
      api = new InProcessCoordinatorApi(h.coordinator);
      await progress.bind(api);
      assert.deepEqual(progress.steps, {
        coordinatorRunning: true,
        environmentReady: true,
        agentRegistered: true,
        messageDelivered: false,
        approvalDecided: true,
      });
    });

    it('follows only the API it is bound to: events of a stopped coordinator change nothing', async () => {
      await progress.bind(api);
      await progress.bind(undefined);
      h.register('agent-a');
      await api.mintAgentCredential('agent-b', 'editor:test');
      await settle();
      assert.deepEqual(progress.steps, NO_STEPS);
      assert.deepEqual(published, [{ ...NO_STEPS, coordinatorRunning: true }, NO_STEPS]);
    });
  });
});
