import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_HITL_POLICY, type HitlPolicy } from '../../src/core/hitl/policy';
import { MAX_AUTOMATIC_RETRIES, WorkflowError, automaticRetryDelay } from '../../src/core/workflow/workflows';
import { ctx } from '../support/routerHarness';
import { REPO_ROOT } from '../support/paths';
import { WorkflowHarness, definition } from '../support/workflowHarness';

/** A HITL policy whose one rule approves every invocation at once (an automatic `approve`). */
const APPROVE_ALL: HitlPolicy = {
  ...DEFAULT_HITL_POLICY,
  rules: [{ name: 'all', reasonType: '*', agent: '**', subject: '**', action: 'approve' }],
};

/** Counts hitl.open calls and throws after `max`: a loop that would never end fails the test instead of hanging it. */
function countQuestions(h: WorkflowHarness, max = 50): { readonly count: number } {
  const hitl = h.coordinator.hitl;
  const open = hitl.open.bind(hitl);
  const counter = { count: 0 };
  (hitl as unknown as { open: typeof open }).open = (...args: Parameters<typeof open>) => {
    if (++counter.count > max) throw new Error(`LOOP: ${counter.count} questions opened`);
    return open(...args);
  };
  return counter;
}

describe('Workflows: failures, automatic retries, blocked and held nodes', () => {
  let h: WorkflowHarness;

  afterEach(() => h.dispose());

  describe('automatic retries are bounded and never synchronous', () => {
    it('a submit refusal that is not temporary (OVERSIZE_PAYLOAD) FAILS the node for good without asking, even with on_failure: hitl and an approve rule', () => {
      h = new WorkflowHarness({}, {}, APPROVE_ALL);
      h.agent('x');
      const questions = countQuestions(h);
      const id = h.create(
        definition('oversize', [
          { nodeId: 'a', agentId: 'x', metadata: { on_failure: 'hitl' } },
          { nodeId: 'b', agentId: 'x', dependencies: ['a'] },
        ]),
      );
      h.start(id, { big: 'x'.repeat(70_000) });
      assert.equal(questions.count, 0, 'nobody is asked: a retry would be refused the same way');
      const a = h.nodeOf(id, 'a').state;
      assert.equal(a.status, 'FAILED');
      assert.equal(a.invocationId, '');
      assert.equal(a.runs, 1);
      assert.match(a.error, /^its task could not be submitted: OVERSIZE_PAYLOAD: /);
      assert.deepEqual(h.statuses(id), { a: 'FAILED', b: 'SKIPPED' });
      assert.equal(h.detail(id).summary.state, 'FAILED');
    });

    it('an approve rule retries a failing node later (the Clock, doubling backoff), at most MAX_AUTOMATIC_RETRIES times; then it FAILS for good', async () => {
      h = new WorkflowHarness({}, {}, APPROVE_ALL);
      h.agent('x');
      const questions = countQuestions(h);
      const id = h.create(definition('flaky', [{ nodeId: 'a', agentId: 'x', metadata: { on_failure: 'hitl' } }]));
      h.start(id);
      for (let retry = 1; retry <= MAX_AUTOMATIC_RETRIES; retry++) {
        assert.equal((await h.failRun('x')).run, retry);
        const node = h.nodeOf(id, 'a').state;
        assert.equal(node.status, 'READY', `retry ${retry} is not at once`);
        assert.equal(node.retries, retry);
        assert.equal(node.fireAt, h.clock.now() + automaticRetryDelay(retry));
        assert.match(node.waiting, new RegExp(`^its automatic retry ${retry} of ${MAX_AUTOMATIC_RETRIES} at `));
        assert.deepEqual(h.commands('x'), []);
        assert.equal(h.detail(id).summary.state, 'RUNNING');
        await h.advance(automaticRetryDelay(retry) - 1);
        assert.deepEqual(h.commands('x'), [], 'not before its time');
        await h.advance(1);
      }
      await h.failRun('x');
      const node = h.nodeOf(id, 'a').state;
      assert.equal(node.status, 'FAILED');
      assert.equal(node.invocationId, '');
      assert.match(
        node.error,
        new RegExp(`retried automatically ${MAX_AUTOMATIC_RETRIES} times \\(at most ${MAX_AUTOMATIC_RETRIES}\\)`),
      );
      assert.equal(h.detail(id).summary.state, 'FAILED');
      assert.equal(questions.count, MAX_AUTOMATIC_RETRIES + 1);
      assert.deepEqual(
        h.tasksOf(id, 'a'),
        Array.from({ length: MAX_AUTOMATIC_RETRIES + 1 }, (_, i) => `wf:${id}:a:${i + 1}`),
      );
      // A resume starts the count again.
      h.workflows.resume(id, 'a', '', 'operator', ctx());
      assert.equal(h.nodeOf(id, 'a').state.retries, 0);
    });

    it('a scheduled automatic retry survives a restart (its time is stored)', async () => {
      h = new WorkflowHarness({}, {}, APPROVE_ALL);
      h.agent('x');
      const id = h.create(
        definition('retry-restart', [{ nodeId: 'a', agentId: 'x', metadata: { on_failure: 'hitl' } }]),
      );
      h.start(id);
      await h.failRun('x');
      const due = h.nodeOf(id, 'a').state.fireAt!;
      h.restart();
      h.reconnect('x');
      await h.advance(due - h.clock.now());
      assert.equal(h.run('x').params.run, 2);
    });
  });

  describe('nodes held back by the scheduler', () => {
    it("a node refused BUFFER_FULL runs when any task ends, a task that is not a workflow's too", async () => {
      h = new WorkflowHarness({}, {}, undefined, { scheduler: { maxQueuedTasks: 1 } });
      h.agent('x');
      const plain = h.submitted('x', 0, { taskId: 'plain' });
      const id = h.create(definition('full', [{ nodeId: 'a', agentId: 'x' }]));
      h.start(id);
      assert.match(h.nodeOf(id, 'a').state.waiting, /^room in the scheduler's queue \(BUFFER_FULL: /);
      const run = h.command('x', 'run');
      assert.equal(run.correlationId, plain.taskId);
      await h.answer('x', run.messageId, 'RECEIVED');
      await h.answer('x', run.messageId, 'FULFILLED', { note: 'done' });
      assert.equal(h.task('plain').state, 'COMPLETED');
      assert.equal(h.statuses(id).a, 'RUNNING');
      assert.equal(h.run('x').params.node_id, 'a');
    });

    it('when a slot frees, only as many blocked nodes are tried as slots freed, first blocked first (no flood of task.refused)', async () => {
      h = new WorkflowHarness({}, {}, undefined, { scheduler: { maxQueuedTasks: 3 } });
      h.agent('x');
      const roots = Array.from({ length: 10 }, (_, i) => ({ nodeId: `r${i}`, agentId: 'x' }));
      const id = h.create(definition('fifo', roots));
      h.start(id);
      const refused = () => h.events('task.refused').length;
      assert.equal(refused(), 7, 'r3…r9 refused once each');
      assert.deepEqual(Object.values(h.statuses(id)), ['RUNNING', 'RUNNING', 'RUNNING', ...Array(7).fill('READY')]);
      for (let i = 0; i < 7; i++) {
        await h.finish('x');
        await h.settled();
        assert.equal(refused(), 7, `after ${i + 1} task(s) ended: no new refusal`);
        assert.equal(h.statuses(id)[`r${i + 3}`], 'RUNNING', `r${i + 3} took the slot r${i} freed`);
      }
      for (let i = 0; i < 3; i++) await h.finish('x');
      assert.equal(h.detail(id).summary.state, 'COMPLETED');
    });

    it('a node waiting for its agent to register is tried again only when that agent registers', async () => {
      h = new WorkflowHarness();
      const id = h.create(
        definition('late', [
          { nodeId: 'a', agentId: 'late' },
          { nodeId: 'b', agentId: 'later' },
        ]),
      );
      h.start(id);
      assert.equal(h.events('task.refused').length, 2);
      h.agent('other');
      await h.settled();
      assert.equal(h.events('task.refused').length, 2, 'another agent registering tries nothing');
      h.agent('late');
      await h.settled();
      assert.equal(h.events('task.refused').length, 2);
      assert.deepEqual(h.statuses(id), { a: 'RUNNING', b: 'READY' });
    });
  });

  it('README says the waiting texts the engine writes for a node its agent or the full queue holds back', () => {
    h = new WorkflowHarness({}, {}, undefined, { scheduler: { maxQueuedTasks: 1 } });
    h.agent('x');
    h.submitted('x', 0, { taskId: 'plain' });
    const id = h.create(
      definition('texts', [
        { nodeId: 'a', agentId: 'late' },
        { nodeId: 'b', agentId: 'x' },
      ]),
    );
    h.start(id);
    const readme = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ');
    // As README writes them: the agent id as <id>, the scheduler's reason as …
    const noRoute = h
      .nodeOf(id, 'a')
      .state.waiting.replace(/^agent late /, 'agent <id> ')
      .replace(/\(NO_ROUTE: [^)]*\)/, '(NO_ROUTE: …)');
    const full = h.nodeOf(id, 'b').state.waiting.replace(/\(BUFFER_FULL: .*\)(?=: submitted)/, '(…)');
    assert.equal(noRoute, 'agent <id> to register (NO_ROUTE: …): submitted again when it does');
    assert.ok(readme.includes(`\`${noRoute}\``), `README quotes \`${noRoute}\``);
    assert.ok(readme.includes(`\`${full}\``), `README quotes \`${full}\``);
  });

  describe('a final failure is never undone by a loop back', () => {
    const graph = () =>
      definition('undo', [
        { nodeId: 'r', agentId: 'x' },
        { nodeId: 'f', agentId: 'y', dependencies: ['r'] },
        { nodeId: 'q', agentId: 'z', dependencies: ['r'] },
        { nodeId: 'p', agentId: 'w', dependencies: ['r'], metadata: { route: "['f']" } },
        { nodeId: 's', agentId: 'x', dependencies: ['q'] },
      ]);

    it('a route looping back into a node that FAILED for good FAILS the routing node; the workflow ends FAILED; a READY node held meanwhile says why', async () => {
      h = new WorkflowHarness();
      for (const a of ['x', 'y', 'z', 'w']) h.agent(a);
      const id = h.create(graph());
      h.start(id);
      await h.finish('x');
      await h.failRun('y');
      await h.finish('z');
      const s = h.nodeOf(id, 's').state;
      assert.equal(s.status, 'READY');
      assert.match(s.waiting, /node f FAILED.*resume the workflow/, 'held, not silently dropped');
      await h.finish('w');
      assert.equal(h.statuses(id).f, 'FAILED', 'the failure stands');
      const p = h.nodeOf(id, 'p').state;
      assert.equal(p.status, 'FAILED');
      assert.match(p.error, /^route: loop back to 'f' refused: 'f' FAILED for good/);
      const summary = h.detail(id).summary;
      assert.equal(summary.state, 'FAILED', 'not RUNNING forever');
      assert.deepEqual(h.commands('x'), [], 's never started');
      assert.deepEqual(h.commands('y'), [], 'f was not run again');
    });

    it('a held READY node runs once a resume clears the failure', async () => {
      h = new WorkflowHarness();
      for (const a of ['x', 'y', 'z', 'w']) h.agent(a);
      const id = h.create(graph());
      h.start(id);
      await h.finish('x');
      await h.failRun('y');
      await h.finish('z');
      assert.equal(h.statuses(id).s, 'READY');
      h.workflows.resume(id, 'f', '', 'operator', ctx());
      await h.settled();
      assert.deepEqual(h.statuses(id), { r: 'COMPLETED', f: 'RUNNING', q: 'COMPLETED', p: 'RUNNING', s: 'RUNNING' });
      assert.equal(h.run('x').params.node_id, 's');
    });
  });

  describe('ResumeWorkflow and failed nodes it would not clear', () => {
    it('refuses FAILED_PRECONDITION naming the FAILED nodes the resume would leave failed ("resume from …")', async () => {
      h = new WorkflowHarness();
      for (const a of ['x', 'y', 'z']) h.agent(a);
      const id = h.create(
        definition('unrelated', [
          { nodeId: 'a', agentId: 'x' },
          { nodeId: 'b', agentId: 'y', dependencies: ['a'] },
          { nodeId: 'c', agentId: 'z', dependencies: ['a'] },
        ]),
      );
      h.start(id);
      await h.finish('x');
      await h.failRun('y');
      await h.finish('z');
      assert.equal(h.detail(id).summary.state, 'FAILED');
      assert.throws(
        () => h.workflows.resume(id, 'c', '', 'operator', ctx()),
        (err: unknown) =>
          err instanceof WorkflowError &&
          err.code === 'FAILED_PRECONDITION' &&
          /FAILED node\(s\) b .*resume from b/.test(err.message),
      );
      assert.equal(h.detail(id).summary.state, 'FAILED', 'nothing changed');
      assert.equal(
        h.workflows.resume(id, 'a', '', 'operator', ctx()).summary.state,
        'RUNNING',
        'a node upstream of every failed node',
      );
    });
  });
});
