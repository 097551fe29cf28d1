import { strict as assert } from 'node:assert';
import type { Speaker } from '../../src/core/policy/speaker';
import { WorkflowError } from '../../src/core/workflow/workflows';
import { ctx } from '../support/routerHarness';
import { WorkflowHarness, definition } from '../support/workflowHarness';

/** An agent credential that may act as `ids` only (Credentials.refusal), as the server's speakerOf builds it. */
function agent(...ids: string[]): Speaker {
  return { kind: 'agent', label: `agent:${ids[0]}`, mayActAs: (id) => ids.includes(id) };
}
const OPERATOR: Speaker = { kind: 'operator', label: 'operator' };

const denied = (err: unknown) =>
  err instanceof WorkflowError && err.kind === 'permission' && err.code === 'PERMISSION_DENIED';

describe('Workflows: who may create, start, resume and read a workflow, and send its events', () => {
  let h: WorkflowHarness;

  beforeEach(() => {
    h = new WorkflowHarness();
  });

  afterEach(() => h.dispose());

  describe('CreateWorkflow', () => {
    it("an agent may create a workflow only when it may act as every node's agent (as SubmitTask); type: targets are the operator's", () => {
      const two = definition('two', [
        { nodeId: 'a', agentId: 'self' },
        { nodeId: 'b', agentId: 'victim', dependencies: ['a'] },
      ]);
      assert.throws(
        () => h.workflows.create(two, 'agent:self', ctx(), agent('self')),
        (err: unknown) => denied(err) && /may not act as agent 'victim' \(node b\)/.test((err as Error).message),
      );
      assert.equal(h.workflows.detail('two'), undefined, 'nothing stored');
      const typed = definition('typed', [{ nodeId: 'a', agentId: 'type:coder' }]);
      assert.throws(
        () => h.workflows.create(typed, 'agent:self', ctx(), agent('self')),
        (err: unknown) =>
          denied(err) &&
          /node a goes to type:coder \(any agent of a type\): only the operator/.test((err as Error).message),
      );
      assert.equal(h.events('workflow.permission_denied').length, 2, 'each refusal is logged');
      const mine = h.workflows.create(
        definition('mine', [{ nodeId: 'a', agentId: 'self' }]),
        'agent:self',
        ctx(),
        agent('self'),
      );
      assert.ok(mine.ok);
      const enrolled = h.workflows.create(two, 'enrolment:e1', ctx(), agent('self', 'victim'));
      assert.ok(enrolled.ok, 'a credential that may act as both (an enrolment credential that enrolled them)');
      assert.ok(h.workflows.create(typed, 'operator', ctx(), OPERATOR).ok, 'the operator may do everything');
    });
  });

  describe('StartWorkflow, ResumeWorkflow, GetWorkflowState', () => {
    function created(): string {
      h.agent('self');
      h.agent('other');
      const result = h.workflows.create(
        definition('owned', [
          { nodeId: 'a', agentId: 'self' },
          { nodeId: 'b', agentId: 'other', dependencies: ['a'] },
        ]),
        'agent:self',
        ctx(),
        agent('self', 'other'),
      );
      assert.ok(result.ok);
      return result.workflowId;
    }

    it('only the creator (or a credential that may act as it) and the operator may start and resume', async () => {
      const id = created();
      assert.throws(
        () => h.workflows.start(id, '', 'agent:other', ctx(), agent('other')),
        (err: unknown) =>
          denied(err) && /only its creator \(agent:self\) or the operator may start/.test((err as Error).message),
      );
      assert.equal(h.detail(id).summary.state, 'DEFINED');
      assert.equal(h.workflows.start(id, '', 'agent:self', ctx(), agent('self')).summary.state, 'RUNNING');
      await h.failRun('self');
      assert.throws(() => h.workflows.resume(id, 'a', '', 'agent:other', ctx(), agent('other')), denied);
      assert.equal(
        h.workflows.resume(id, 'a', '', 'enrolment:e1', ctx(), agent('self')).summary.state,
        'RUNNING',
        'one that may act as the creator',
      );
      await h.failRun('self');
      assert.equal(h.workflows.resume(id, 'a', '', 'operator', ctx(), OPERATOR).summary.state, 'RUNNING');
    });

    it('GetWorkflowState: the creator, an agent a node names, or the operator', () => {
      const id = created();
      assert.equal(h.workflows.state(id, agent('self'), 'agent:self')?.summary.workflowId, id);
      assert.equal(h.workflows.state(id, agent('other'), 'agent:other')?.summary.workflowId, id, 'node b names it');
      assert.equal(h.workflows.state(id, OPERATOR, 'operator')?.summary.workflowId, id);
      assert.throws(
        () => h.workflows.state(id, agent('outsider'), 'agent:outsider'),
        (err: unknown) =>
          denied(err) &&
          /only its creator, an agent one of its nodes names, or the operator may read it/.test((err as Error).message),
      );
      assert.equal(
        h.workflows.state('nope', agent('outsider'), 'agent:outsider'),
        undefined,
        'an unknown id is not found, for anyone',
      );
    });
  });

  describe('EVENT envelopes', () => {
    const evented = (metadata: Record<string, string> = {}) =>
      definition('evented', [
        { nodeId: 'build', agentId: 'x' },
        {
          nodeId: 'ship',
          agentId: 'x',
          dependencies: ['build'],
          trigger: 'EVENT',
          metadata: { event: 'approved', ...metadata },
        },
        { nodeId: 'review', agentId: 'reviewer', dependencies: ['build'] },
      ]);
    const send = (from: string, principal?: string) =>
      h.router.send(
        h.envelope(from, {
          messageType: 'NOTIFICATION',
          correlationId: 'evented',
          payload: { workflow_event: 'approved' },
        }),
        { correlationId: 'event', ...(principal ? { principal } : {}) },
        { to: 'coordinator' },
      );

    async function ready(metadata: Record<string, string> = {}, creator = 'operator'): Promise<void> {
      for (const a of ['x', 'reviewer', 'outsider', 'owner']) h.agent(a);
      h.workflows.create(evented(metadata), creator, ctx(), OPERATOR);
      h.start('evented');
      await h.finish('x');
      assert.equal(h.statuses('evented').ship, 'READY');
    }

    it('are refused PERMISSION_DENIED from an agent that neither created the workflow nor is named by a node', async () => {
      await ready();
      const refused = send('outsider', 'agent:outsider');
      assert.equal(!refused.accepted && refused.code, 'PERMISSION_DENIED');
      assert.match(
        !refused.accepted ? refused.reason : '',
        /outsider neither created workflow 'evented' nor is named by one of its nodes/,
      );
      assert.equal(h.statuses('evented').ship, 'READY', 'nothing started');
      assert.ok(send('reviewer', 'agent:reviewer').accepted, 'named by node review');
      await h.settled();
      assert.equal(h.statuses('evented').ship, 'RUNNING');
    });

    it('are taken from the creator', async () => {
      await ready({}, 'agent:owner');
      assert.ok(send('owner', 'agent:owner').accepted);
    });

    it('are taken from the operator (its token acts for any agent)', async () => {
      await ready({ event_from: 'reviewer' });
      assert.ok(send('outsider', 'operator').accepted, 'event_from does not bind the operator either');
    });

    it("event_from narrows who may send a node's event to the agents it lists", async () => {
      await ready({ event_from: ' reviewer , someone-else' });
      const fromX = send('x', 'agent:x');
      assert.equal(!fromX.accepted && fromX.code, 'PERMISSION_DENIED', 'x is named by a node, but not listed');
      assert.match(!fromX.accepted ? fromX.reason : '', /event_from of node ship lists reviewer, someone-else/);
      assert.ok(send('reviewer', 'agent:reviewer').accepted);
    });
  });
});
