import { WORKFLOW_LIMITS } from '../../src/core/workflow/validate';
import { strict as assert } from 'node:assert';
import { WorkflowError } from '../../src/core/workflow/workflows';
import { ctx } from '../support/routerHarness';
import { WorkflowHarness, definition } from '../support/workflowHarness';

describe('Workflows: the engine (RFC §17.7) over a real store, scheduler and router', () => {
  let h: WorkflowHarness;

  beforeEach(() => {
    h = new WorkflowHarness();
  });

  afterEach(() => h.dispose());

  describe('CreateWorkflow', () => {
    it('validates before persisting: a dependency cycle is refused with workflow_cycle_detected naming a real cycle, nothing stored', () => {
      const result = h.workflows.create(
        definition('cyclic', [
          { nodeId: 'root', agentId: 'x' },
          { nodeId: 'a', agentId: 'x', dependencies: ['root', 'c'] },
          { nodeId: 'b', agentId: 'x', dependencies: ['a'] },
          { nodeId: 'c', agentId: 'x', dependencies: ['b'] },
        ]),
        'operator',
        ctx(),
      );
      assert.equal(result.ok, false);
      const cycle = !result.ok ? result.issues.find((i) => i.code === 'workflow_cycle_detected') : undefined;
      assert.ok(cycle?.cycle, 'the cycle is named');
      assert.deepEqual([...cycle.cycle].sort(), ['a', 'b', 'c']);
      assert.equal(h.workflows.detail('cyclic'), undefined, 'nothing was persisted');
      assert.equal(h.events('workflow.create_refused').length, 1);
    });

    it('gives an empty workflow_id a uuid; the same definition again is answered as it was (idempotent), another one is ALREADY_EXISTS', () => {
      const created = h.workflows.create(definition('', [{ nodeId: 'a', agentId: 'x' }]), 'operator', ctx());
      assert.ok(created.ok && created.created);
      assert.match(created.ok ? created.workflowId : '', /^[0-9a-f-]{36}$/);
      const def = definition('same', [
        { nodeId: 'a', agentId: 'x', metadata: { k: '1', j: '2' } },
        { nodeId: 'b', agentId: 'y', dependencies: ['a'] },
      ]);
      assert.ok(h.workflows.create(def, 'operator', ctx()).ok);
      // The same workflow with its nodes and map keys in another order (proto maps have no order).
      const reordered = definition('same', [
        { nodeId: 'b', agentId: 'y', dependencies: ['a'] },
        { nodeId: 'a', agentId: 'x', metadata: { j: '2', k: '1' } },
      ]);
      const again = h.workflows.create(reordered, 'operator', ctx());
      assert.deepEqual(again.ok && [again.workflowId, again.created], ['same', false]);
      assert.throws(
        () => h.workflows.create(definition('same', [{ nodeId: 'a', agentId: 'z' }]), 'operator', ctx()),
        (err: unknown) => err instanceof WorkflowError && err.kind === 'exists' && err.code === 'ALREADY_EXISTS',
      );
      assert.deepEqual(h.stateMoves('same'), ['→DEFINED'], 'one workflow.state event: created once');
    });
  });

  describe('StartWorkflow and the DAG', () => {
    it('runs a diamond in dependency order: d only once b and c are COMPLETED; one event per node transition; COMPLETED', async () => {
      for (const agent of ['x', 'y', 'z']) h.agent(agent);
      const id = h.create(
        definition('diamond', [
          { nodeId: 'a', agentId: 'x' },
          { nodeId: 'b', agentId: 'y', dependencies: ['a'] },
          { nodeId: 'c', agentId: 'z', dependencies: ['a'] },
          { nodeId: 'd', agentId: 'x', dependencies: ['b', 'c'] },
        ]),
      );
      assert.deepEqual(h.statuses(id), { a: 'PENDING', b: 'PENDING', c: 'PENDING', d: 'PENDING' });
      assert.equal(h.nodeOf(id, 'b').state.waiting, 'the workflow has not started');
      const started = h.start(id, { topic: 'parsers' });
      assert.equal(started.summary.state, 'RUNNING');
      assert.deepEqual(h.statuses(id), { a: 'RUNNING', b: 'PENDING', c: 'PENDING', d: 'PENDING' });
      const a = h.run('x');
      assert.equal(a.correlationId, `wf:${id}:a:1`, 'task id wf:<workflow>:<node>:<run>, the CONTROL correlation id');
      assert.deepEqual(a.params, { workflow_id: id, node_id: 'a', run: 1, inputs: { topic: 'parsers' } });
      assert.deepEqual(h.commands('y'), [], 'b waits for a');
      await h.answer('x', a.messageId, 'FULFILLED', { result: { ok: true } });
      assert.deepEqual(h.statuses(id), { a: 'COMPLETED', b: 'RUNNING', c: 'RUNNING', d: 'PENDING' });
      await h.finish('y');
      assert.deepEqual(h.statuses(id), { a: 'COMPLETED', b: 'COMPLETED', c: 'RUNNING', d: 'PENDING' });
      assert.equal(h.nodeOf(id, 'd').state.waiting, 'dependencies: c');
      assert.deepEqual(
        h.commands('x'),
        [],
        'd does not run while c runs (RFC: MUST NOT execute before every dependency COMPLETED)',
      );
      await h.finish('z');
      assert.equal(h.statuses(id).d, 'RUNNING');
      await h.finish('x', { summary: 'all done' });
      const done = h.detail(id);
      assert.equal(done.summary.state, 'COMPLETED');
      assert.deepEqual(done.summary.counts, { PENDING: 0, READY: 0, RUNNING: 0, COMPLETED: 4, FAILED: 0, SKIPPED: 0 });
      assert.deepEqual(JSON.parse(h.nodeOf(id, 'd').state.output), { summary: 'all done' });
      assert.deepEqual(JSON.parse(h.nodeOf(id, 'b').state.output), { note: 'done' }, 'no result: {"note": note}');
      assert.deepEqual(h.nodeMoves(id, 'd'), ['PENDING→READY', 'READY→RUNNING', 'RUNNING→COMPLETED']);
      assert.equal(h.nodeMoves(id).length, 12, 'three transitions per node, one event each');
      assert.deepEqual(h.stateMoves(id), ['→DEFINED', 'DEFINED→RUNNING', 'RUNNING→COMPLETED']);
      for (const e of h.events('workflow.node')) assert.equal(e.correlationId, id);
      assert.ok(done.summary.completedAt !== null && done.summary.startedAt !== null);
    });

    it('maps inputs from workflow_data by input_mapping (dotted paths; none: the whole data) and writes outputs back by output_mapping', async () => {
      h.agent('x');
      h.agent('y');
      const id = h.create(
        definition('mapping', [
          {
            nodeId: 'summarise',
            agentId: 'x',
            inputMapping: { 'doc.title': 'title', 'doc.tags.1': 'second_tag', missing: 'absent' },
            outputMapping: { summary: 'result.summary', 'meta.words': 'stats.words' },
          },
          { nodeId: 'publish', agentId: 'y', dependencies: ['summarise'] },
        ]),
      );
      h.start(id, { doc: { title: 'Parsers', tags: ['a', 'b'] }, keep: 1 });
      const first = await h.finish('x', { summary: 'Short.', meta: { words: 1 }, extra: 'ignored' });
      assert.deepEqual(
        first.inputs,
        { title: 'Parsers', second_tag: 'b' },
        'a mapped path that is missing is left out',
      );
      const second = await h.finish('y');
      assert.deepEqual(second.inputs, {
        doc: { title: 'Parsers', tags: ['a', 'b'] },
        keep: 1,
        result: { summary: 'Short.' },
        stats: { words: 1 },
      });
      assert.deepEqual(h.data(id), {
        doc: { title: 'Parsers', tags: ['a', 'b'] },
        keep: 1,
        result: { summary: 'Short.' },
        stats: { words: 1 },
      });
      assert.equal(h.detail(id).summary.state, 'COMPLETED');
    });

    it('an output without a mapped key, or a mapping through a non-object, FAILS the node with the reason (nothing half-written)', async () => {
      h.agent('x');
      const id = h.create(
        definition('badmap', [
          { nodeId: 'a', agentId: 'x', outputMapping: { score: 'review.score', verdict: 'keep.deeper' } },
        ]),
      );
      h.start(id, { keep: 'a string' });
      await h.finish('x', { score: 1, verdict: 'ok' });
      const a = h.nodeOf(id, 'a').state;
      assert.equal(a.status, 'FAILED');
      assert.match(a.error, /output_mapping: .*'keep' holds a string, not an object/);
      assert.deepEqual(
        JSON.parse(a.output),
        { score: 1, verdict: 'ok' },
        'what the agent answered is kept for the person looking',
      );
      assert.deepEqual(h.data(id), { keep: 'a string' }, 'no part of the mapping was written');
      const d = h.detail(id).summary;
      assert.equal(d.state, 'FAILED');
      assert.match(d.reason, /^node a FAILED: output_mapping/);

      const id2 = h.create(
        definition('nokey', [{ nodeId: 'a', agentId: 'x', outputMapping: { score: 'review.score' } }]),
      );
      h.start(id2);
      await h.finish('x', { points: 3 });
      assert.match(h.nodeOf(id2, 'a').state.error, /output_mapping: the output has no 'score' \(it has points\)/);
    });

    it('refuses data that is not a JSON object, and a second start (naming ResumeWorkflow); an unknown workflow is not_found', () => {
      const id = h.create(definition('once', [{ nodeId: 'a', agentId: 'x' }]));
      for (const bad of ['[1]', '"text"', '{"a":', '{"a": 1}'.repeat(2)]) {
        assert.throws(
          () => h.workflows.start(id, bad, 'operator', ctx()),
          (err: unknown) => err instanceof WorkflowError && err.kind === 'invalid',
          bad,
        );
      }
      assert.equal(h.detail(id).summary.state, 'DEFINED', 'a refused start changes nothing');
      h.agent('x');
      h.start(id);
      assert.throws(
        () => h.start(id),
        (err: unknown) => err instanceof WorkflowError && err.kind === 'refused' && /ResumeWorkflow/.test(err.message),
      );
      assert.throws(
        () => h.start('nope'),
        (err: unknown) => err instanceof WorkflowError && err.kind === 'not_found',
      );
    });
  });

  describe('conditional edges (route, CEL)', () => {
    const branching = () =>
      definition('branch', [
        {
          nodeId: 'judge',
          agentId: 'x',
          outputMapping: { score: 'score' },
          metadata: { route: "score > 0.5 ? 'good' : 'bad'" },
        },
        { nodeId: 'good', agentId: 'y', dependencies: ['judge'] },
        { nodeId: 'bad', agentId: 'z', dependencies: ['judge'] },
        { nodeId: 'after_bad', agentId: 'z', dependencies: ['bad'] },
        { nodeId: 'join', agentId: 'y', dependencies: ['good', 'bad'] },
      ]);

    it('runs the branch chosen; the other is SKIPPED and so is everything after it (the reason names the node)', async () => {
      for (const a of ['x', 'y', 'z']) h.agent(a);
      const id = h.create(branching());
      h.start(id);
      await h.finish('x', { score: 0.9 });
      assert.deepEqual(h.statuses(id), {
        judge: 'COMPLETED',
        good: 'RUNNING',
        bad: 'SKIPPED',
        after_bad: 'SKIPPED',
        join: 'SKIPPED',
      });
      assert.equal(h.nodeOf(id, 'bad').state.error, "not chosen by the route of 'judge'");
      assert.equal(h.nodeOf(id, 'after_bad').state.error, "dependency 'bad' SKIPPED");
      assert.equal(h.nodeOf(id, 'join').state.error, "dependency 'bad' SKIPPED");
      assert.deepEqual(
        h.events('workflow.node').find((e) => e.details.node_id === 'judge' && e.details.to === 'COMPLETED')?.details
          .chosen,
        ['good'],
      );
      await h.finish('y');
      assert.equal(h.detail(id).summary.state, 'COMPLETED', 'COMPLETED: every node COMPLETED or SKIPPED');
      assert.deepEqual(h.commands('z'), [], 'nothing ran on the branch not taken');
    });

    it('takes the other branch for another score; a route that cannot decide FAILS its node', async () => {
      for (const a of ['x', 'y', 'z']) h.agent(a);
      const id = h.create(branching());
      h.start(id);
      await h.finish('x', { score: 0.2 });
      assert.deepEqual(h.statuses(id), {
        judge: 'COMPLETED',
        good: 'SKIPPED',
        bad: 'RUNNING',
        after_bad: 'PENDING',
        join: 'SKIPPED',
      });
      await h.finish('z');
      await h.finish('z');
      assert.equal(h.detail(id).summary.state, 'COMPLETED');

      const id2 = h.create({ ...branching(), workflowId: 'branch-2' });
      h.start(id2);
      await h.finish('x', { score: 'high' });
      assert.equal(h.statuses(id2).judge, 'FAILED');
      assert.match(h.nodeOf(id2, 'judge').state.error, /^route: /);
      assert.deepEqual(h.statuses(id2), {
        judge: 'FAILED',
        good: 'SKIPPED',
        bad: 'SKIPPED',
        after_bad: 'SKIPPED',
        join: 'SKIPPED',
      });
      assert.equal(h.detail(id2).summary.state, 'FAILED');
    });

    it('loops back to an earlier node (a conditional edge in a cycle), counting runs, until max_iterations: then the node FAILS', async () => {
      h.agent('writer');
      h.agent('reviewer');
      h.agent('pub');
      const loop = (workflowId: string) =>
        definition(workflowId, [
          { nodeId: 'write', agentId: 'writer', metadata: { max_iterations: '2' } },
          {
            nodeId: 'review',
            agentId: 'reviewer',
            dependencies: ['write'],
            metadata: { route: "output.approved ? 'publish' : 'write'" },
          },
          { nodeId: 'publish', agentId: 'pub', dependencies: ['review'] },
        ]);
      const id = h.create(loop('loop'));
      h.start(id, { draft: 0 });
      for (let i = 1; i <= 2; i++) {
        assert.equal((await h.finish('writer', { text: `v${i}` })).run, i);
        await h.finish('reviewer', { approved: false });
        assert.equal(h.statuses(id).write, 'RUNNING', `loop ${i}: write runs again`);
        assert.equal(h.nodeOf(id, 'write').state.loops, i);
      }
      await h.finish('writer', { text: 'v3' });
      await h.finish('reviewer', { approved: false });
      const review = h.nodeOf(id, 'review').state;
      assert.equal(review.status, 'FAILED');
      assert.match(review.error, /loop back to 'write' refused: it has looped 2 time\(s\), its max_iterations is 2/);
      assert.deepEqual(h.statuses(id), { write: 'COMPLETED', review: 'FAILED', publish: 'SKIPPED' });
      assert.equal(h.detail(id).summary.state, 'FAILED');
      assert.deepEqual(
        h.tasksOf(id, 'write'),
        [`wf:${id}:write:1`, `wf:${id}:write:2`, `wf:${id}:write:3`],
        'one task per run',
      );

      const id2 = h.create(loop('loop-ok'));
      h.start(id2);
      await h.finish('writer', { text: 'v1' });
      await h.finish('reviewer', { approved: false });
      await h.finish('writer', { text: 'v2' });
      await h.finish('reviewer', { approved: true });
      await h.finish('pub');
      assert.equal(h.detail(id2).summary.state, 'COMPLETED');
      assert.equal(h.nodeOf(id2, 'write').state.runs, 2);
      assert.deepEqual(
        h.nodeMoves(id2, 'review').filter((m) => m === 'COMPLETED→PENDING'),
        ['COMPLETED→PENDING'],
        'the loop reset review once',
      );
    });
  });

  describe('triggers', () => {
    it('MANUAL: READY waits for Run Node (the workflow WAITING, the reason says so); Run Node refuses what it may not run', async () => {
      h.agent('x');
      const id = h.create(
        definition('manual', [
          { nodeId: 'prep', agentId: 'x' },
          { nodeId: 'deploy', agentId: 'x', dependencies: ['prep'], trigger: 'MANUAL' },
        ]),
      );
      h.start(id);
      assert.throws(
        () => h.workflows.runNode(id, 'deploy', 'editor:me', ctx()),
        (err: unknown) => err instanceof WorkflowError && /PENDING, not READY/.test(err.message),
      );
      assert.throws(
        () => h.workflows.runNode(id, 'prep', 'editor:me', ctx()),
        (err: unknown) => err instanceof WorkflowError && /DEPENDENCY node: it runs by itself/.test(err.message),
      );
      await h.finish('x');
      assert.equal(h.statuses(id).deploy, 'READY');
      assert.deepEqual(h.commands('x'), [], 'a MANUAL node does not run by itself');
      const waiting = h.detail(id).summary;
      assert.equal(waiting.state, 'WAITING');
      assert.match(waiting.reason, /waiting for a person: Run Node deploy/);
      const after = h.workflows.runNode(id, 'deploy', 'editor:me', ctx());
      assert.equal(after.nodes.find((n) => n.state.nodeId === 'deploy')?.state.status, 'RUNNING');
      assert.equal(after.summary.state, 'RUNNING');
      assert.match(
        String(
          h.events('workflow.node').find((e) => e.details.node_id === 'deploy' && e.details.to === 'RUNNING')?.details
            .reason,
        ),
        /Run Node by editor:me/,
      );
      await h.finish('x');
      assert.equal(h.detail(id).summary.state, 'COMPLETED');
    });

    it('SCHEDULE: READY, it runs at the next cron time after it became READY (ManualClock), not before', async () => {
      h.agent('x');
      // The clock starts at 2026-01-01T00:00:00Z: the next `0 * * * *` after it is 01:00.
      const id = h.create(
        definition('scheduled', [
          { nodeId: 'nightly', agentId: 'x', trigger: 'SCHEDULE', metadata: { schedule: '0 * * * *' } },
        ]),
      );
      h.start(id);
      const node = h.nodeOf(id, 'nightly').state;
      assert.equal(node.status, 'READY');
      assert.equal(node.fireAt, Date.UTC(2026, 0, 1, 1));
      assert.match(node.waiting, /schedule '0 \* \* \* \*': next 2026-01-01T01:00:00/);
      assert.match(h.detail(id).summary.reason, /waiting for nightly: schedule/);
      await h.advance(59 * 60_000);
      assert.deepEqual(h.commands('x'), []);
      await h.advance(60_000);
      assert.equal(h.run('x').params.node_id, 'nightly');
      assert.equal(h.statuses(id).nightly, 'RUNNING');
    });

    it('EVENT: a NOTIFICATION to coordinator {"workflow_event"} with correlation_id = workflow_id starts the READY node; its data lands in events.<name>; others are refused', async () => {
      h.agent('x');
      const id = h.create(
        definition('evented', [
          { nodeId: 'build', agentId: 'x' },
          {
            nodeId: 'ship',
            agentId: 'x',
            dependencies: ['build'],
            trigger: 'EVENT',
            metadata: { event: 'approved' },
            inputMapping: { 'events.approved.by': 'approver' },
          },
        ]),
      );
      h.start(id);
      // Sent by x, an agent a node names (workflowAccess.test.ts: who else may).
      const event = (payload: unknown, correlationId = id) =>
        h.send(
          h.envelope('x', { messageType: 'NOTIFICATION', correlationId, payload: payload as Record<string, unknown> }),
          'coordinator',
        );
      const early = event({ workflow_event: 'approved', data: { by: 'bob' } });
      assert.equal(!early.accepted && early.code, 'NO_ROUTE', 'not READY yet: refused, not kept');
      assert.match(!early.accepted ? early.reason : '', /no EVENT node .* waits for 'approved' now: ship \(PENDING\)/);
      await h.finish('x');
      assert.equal(h.statuses(id).ship, 'READY');
      assert.match(h.detail(id).summary.reason, /event 'approved' for ship/);
      assert.equal(
        (() => {
          const r = event({ something: 1 });
          return !r.accepted && r.code;
        })(),
        'VALIDATION_ERROR',
      );
      assert.equal(
        (() => {
          const r = event({ workflow_event: 'approved' }, 'no-such-workflow');
          return !r.accepted && r.code;
        })(),
        'NO_ROUTE',
      );
      assert.equal(
        (() => {
          const r = event({ workflow_event: 'rejected' });
          return !r.accepted && r.code;
        })(),
        'NO_ROUTE',
      );
      assert.deepEqual(h.commands('x'), []);
      const taken = event({ workflow_event: 'approved', data: { by: 'bob' } });
      assert.ok(taken.accepted, taken.accepted ? '' : taken.reason);
      await h.settled();
      assert.equal(h.state(taken.messageId), 'FULFILLED', 'the event message is settled');
      const run = h.run('x');
      assert.deepEqual(run.params.inputs, { approver: 'bob' });
      assert.deepEqual(h.data(id).events, { approved: { by: 'bob' } });
      assert.equal(h.events('workflow.event').length, 1);
    });
  });

  describe('failures never hang the graph', () => {
    it('a FAILED task FAILS its node, SKIPS its dependents, starts nothing new, and ends the workflow FAILED once nothing runs', async () => {
      for (const a of ['x', 'y', 'z']) h.agent(a);
      const id = h.create(
        definition('failing', [
          { nodeId: 'a', agentId: 'x' },
          { nodeId: 'b', agentId: 'y', dependencies: ['a'] },
          { nodeId: 'c', agentId: 'z', dependencies: ['a'] },
          { nodeId: 'after_c', agentId: 'z', dependencies: ['c'] },
          { nodeId: 'd', agentId: 'x', dependencies: ['b', 'c'] },
        ]),
      );
      h.start(id);
      await h.finish('x');
      await h.failRun('y', 'VALIDATION_ERROR', 'cannot parse the input');
      assert.deepEqual(h.statuses(id), { a: 'COMPLETED', b: 'FAILED', c: 'RUNNING', after_c: 'PENDING', d: 'SKIPPED' });
      assert.match(
        h.nodeOf(id, 'b').state.error,
        /^task wf:failing:b:1 FAILED: VALIDATION_ERROR: cannot parse the input$/,
      );
      assert.equal(h.nodeOf(id, 'd').state.error, "dependency 'b' FAILED");
      const failing = h.detail(id).summary;
      assert.equal(failing.state, 'RUNNING');
      assert.match(failing.reason, /node b FAILED: .*1 running node\(s\) finish first/);
      await h.finish('z');
      assert.equal(h.statuses(id).after_c, 'READY', 'ready, but nothing new starts once a node failed');
      assert.deepEqual(h.commands('z'), []);
      const ended = h.detail(id).summary;
      assert.equal(ended.state, 'FAILED');
      assert.match(ended.reason, /^node b FAILED: task wf:failing:b:1 FAILED: VALIDATION_ERROR/);
      assert.deepEqual(h.stateMoves(id).slice(-1), ['RUNNING→FAILED']);
    });

    it('a node whose agent is not registered waits READY with the reason and runs when the agent registers', async () => {
      const id = h.create(definition('later', [{ nodeId: 'a', agentId: 'late' }]));
      h.start(id);
      const node = h.nodeOf(id, 'a').state;
      assert.equal(node.status, 'READY');
      assert.match(node.waiting, /^agent late to register \(NO_ROUTE: .*\): submitted again when it does$/);
      assert.match(h.detail(id).summary.reason, /waiting for agent late for a/);
      h.agent('late');
      await h.settled();
      assert.equal(h.run('late').params.node_id, 'a');
      assert.equal(h.statuses(id).a, 'RUNNING');
    });

    it('a task cancelled by the operator FAILS its node with the reason', async () => {
      h.agent('x');
      const id = h.create(
        definition('cancelled-task', [
          { nodeId: 'a', agentId: 'x' },
          { nodeId: 'b', agentId: 'x', dependencies: ['a'] },
        ]),
      );
      h.start(id);
      h.scheduler.cancel(`wf:${id}:a:1`, 'wrong repository', ctx());
      await h.settled();
      assert.match(h.nodeOf(id, 'a').state.error, /CANCELLED: cancelled: wrong repository/);
      assert.deepEqual(h.statuses(id), { a: 'FAILED', b: 'SKIPPED' });
      assert.equal(h.detail(id).summary.state, 'FAILED');
    });
  });

  describe('on_failure: hitl (a person decides: approve = retry, modify = skip with an output, deny = fail)', () => {
    const asking = (workflowId: string) =>
      definition(workflowId, [
        { nodeId: 'flaky', agentId: 'x', metadata: { on_failure: 'hitl' }, outputMapping: { value: 'value' } },
        { nodeId: 'next', agentId: 'y', dependencies: ['flaky'] },
      ]);

    function pendingInvocation(workflowId: string): string {
      const node = h.nodeOf(workflowId, 'flaky').state;
      assert.equal(node.status, 'FAILED');
      assert.notEqual(node.invocationId, '');
      return node.invocationId;
    }

    it('WAITING with the question in the reason; approve runs the node again (a new run, a new task)', async () => {
      h.agent('x');
      h.agent('y');
      h.coordinator.hitl.attachOperator('tester');
      const id = h.create(asking('retry'));
      h.start(id);
      await h.failRun('x', 'AGENT_UNAVAILABLE', 'the model timed out');
      const invocationId = pendingInvocation(id);
      const invocation = h.coordinator.hitl.get(invocationId)!;
      assert.equal(invocation.reasonType, 'TASK_ESCALATION');
      assert.equal(invocation.correlationId, id);
      assert.deepEqual(invocation.proposedActions, ['approve', 'modify', 'deny']);
      assert.equal(h.statuses(id).next, 'PENDING', 'dependents wait while a person decides');
      const waiting = h.detail(id).summary;
      assert.equal(waiting.state, 'WAITING');
      assert.match(waiting.reason, /decide on FAILED node flaky/);
      h.coordinator.hitl.decide(invocationId, { action: 'approve', rationale: 'transient' }, 'tester', ctx());
      await h.settled();
      assert.equal(h.statuses(id).flaky, 'RUNNING');
      const again = await h.finish('x', { value: 42 });
      assert.equal(again.run, 2);
      await h.finish('y');
      assert.equal(h.detail(id).summary.state, 'COMPLETED');
      assert.deepEqual(h.tasksOf(id, 'flaky'), [`wf:${id}:flaky:1`, `wf:${id}:flaky:2`]);
    });

    it('modify: the node is not run again and counts as COMPLETED with the edited output (mapped); deny: the workflow FAILS', async () => {
      h.agent('x');
      h.agent('y');
      h.coordinator.hitl.attachOperator('tester');
      const id = h.create(asking('modify'));
      h.start(id);
      await h.failRun('x');
      h.coordinator.hitl.decide(
        pendingInvocation(id),
        { action: 'modify', rationale: 'use the known value', payload: { value: 7 } },
        'tester',
        ctx(),
      );
      await h.settled();
      assert.equal(h.statuses(id).flaky, 'COMPLETED');
      assert.deepEqual(JSON.parse(h.nodeOf(id, 'flaky').state.output), { value: 7 });
      assert.deepEqual(h.data(id), { value: 7 });
      assert.equal(h.statuses(id).next, 'RUNNING');
      assert.deepEqual(h.commands('x'), [], 'flaky was not run again');

      const id2 = h.create(asking('deny'));
      h.start(id2);
      await h.failRun('x');
      h.coordinator.hitl.decide(pendingInvocation(id2), { action: 'deny', rationale: 'give up' }, 'tester', ctx());
      await h.settled();
      assert.deepEqual(h.statuses(id2), { flaky: 'FAILED', next: 'SKIPPED' });
      const ended = h.detail(id2).summary;
      assert.equal(ended.state, 'FAILED');
      assert.match(ended.reason, /denied by tester \(a person\): give up/);
    });

    it('nobody answers: the HITL fallback (no operator: deny by default) fails it — the workflow does not wait forever', async () => {
      h.agent('x');
      const id = h.create(asking('unanswered'));
      h.start(id);
      await h.failRun('x');
      assert.equal(h.detail(id).summary.state, 'WAITING');
      await h.advance(h.coordinator.hitl.policy.unavailableAfterMs + 1);
      assert.equal(h.detail(id).summary.state, 'FAILED');
      assert.match(h.nodeOf(id, 'flaky').state.error, /HITL fallback DENY_BY_DEFAULT/);
    });
  });

  describe('ResumeWorkflow', () => {
    it('runs again from a node with updated data: it and what follows it back to PENDING, earlier outputs kept, upstream not re-run', async () => {
      for (const a of ['x', 'y']) h.agent(a);
      const id = h.create(
        definition('resumable', [
          { nodeId: 'fetch', agentId: 'x', outputMapping: { rows: 'rows' } },
          { nodeId: 'transform', agentId: 'y', dependencies: ['fetch'], outputMapping: { out: 'transformed' } },
          { nodeId: 'load', agentId: 'x', dependencies: ['transform'] },
        ]),
      );
      h.start(id, { source: 'db' });
      await h.finish('x', { rows: 3 });
      await h.failRun('y', 'VALIDATION_ERROR', 'column missing');
      assert.equal(h.detail(id).summary.state, 'FAILED');
      assert.deepEqual(h.statuses(id), { fetch: 'COMPLETED', transform: 'FAILED', load: 'SKIPPED' });
      assert.throws(
        () => h.workflows.resume(id, 'load', '', 'operator', ctx()),
        (err: unknown) =>
          err instanceof WorkflowError &&
          /depends on 'transform', which is FAILED: resume from 'transform'/.test(err.message),
      );
      const resumed = h.workflows.resume(id, 'transform', JSON.stringify({ column: 'id' }), 'operator', ctx());
      assert.equal(resumed.summary.state, 'RUNNING');
      assert.deepEqual(h.statuses(id), { fetch: 'COMPLETED', transform: 'RUNNING', load: 'PENDING' });
      assert.throws(
        () => h.workflows.resume(id, 'transform', '', 'operator', ctx()),
        (err: unknown) => err instanceof WorkflowError && /RUNNING/.test(err.message),
      );
      assert.throws(
        () => h.workflows.resume(id, 'fetch', '', 'operator', ctx()),
        (err: unknown) =>
          err instanceof WorkflowError && /'transform', downstream of 'fetch', is RUNNING/.test(err.message),
      );
      const second = await h.finish('y', { out: 'ok' });
      assert.equal(second.run, 2);
      assert.deepEqual(
        second.inputs,
        { source: 'db', rows: 3, column: 'id' },
        'earlier outputs kept, the new data merged over them',
      );
      await h.finish('x');
      assert.equal(h.detail(id).summary.state, 'COMPLETED');
      assert.equal(h.nodeOf(id, 'fetch').state.runs, 1, 'upstream never ran again');
      assert.deepEqual(h.stateMoves(id), [
        '→DEFINED',
        'DEFINED→RUNNING',
        'RUNNING→FAILED',
        'FAILED→RUNNING',
        'RUNNING→COMPLETED',
      ]);
      // Iteration: a COMPLETED workflow runs again from a step, its earlier output in the data until overwritten.
      h.workflows.resume(id, 'load', JSON.stringify({ again: true }), 'operator', ctx());
      assert.deepEqual((await h.finish('x')).inputs, {
        source: 'db',
        rows: 3,
        column: 'id',
        transformed: 'ok',
        again: true,
      });
      assert.equal(h.detail(id).summary.state, 'COMPLETED');
    });

    it('refuses a workflow not started and an unknown node', () => {
      const id = h.create(definition('fresh', [{ nodeId: 'a', agentId: 'x' }]));
      assert.throws(
        () => h.workflows.resume(id, 'a', '', 'operator', ctx()),
        (err: unknown) => err instanceof WorkflowError && /StartWorkflow/.test(err.message),
      );
      h.agent('x');
      h.start(id);
      assert.throws(
        () => h.workflows.resume(id, 'zzz', '', 'operator', ctx()),
        (err: unknown) => err instanceof WorkflowError && err.kind === 'not_found',
      );
    });
  });

  describe('Cancel', () => {
    it('cancels running tasks, SKIPS what did not finish, withdraws nothing finished, ends CANCELLED', async () => {
      h.agent('x');
      h.agent('y');
      const id = h.create(
        definition('to-cancel', [
          { nodeId: 'a', agentId: 'x' },
          { nodeId: 'b', agentId: 'y', dependencies: ['a'] },
          { nodeId: 'c', agentId: 'x', dependencies: ['b'] },
        ]),
      );
      h.start(id);
      await h.finish('x');
      const detail = h.workflows.cancel(id, 'not needed', 'editor:me', ctx());
      assert.equal(detail.summary.state, 'CANCELLED');
      assert.deepEqual(h.statuses(id), { a: 'COMPLETED', b: 'SKIPPED', c: 'SKIPPED' });
      assert.equal(h.task(`wf:${id}:b:1`).state, 'CANCELLED');
      assert.match(h.detail(id).summary.reason, /workflow cancelled by editor:me: not needed/);
      assert.throws(
        () => h.workflows.cancel(id, '', 'editor:me', ctx()),
        (err: unknown) => err instanceof WorkflowError && /already ended CANCELLED/.test(err.message),
      );
    });
  });

  describe('size', () => {
    it('a workflow at the node limit (WORKFLOW_LIMITS.maxNodes): a node transition writes its node row and the small workflow row (never the definition or data); create and start stay usable', async function () {
      this.timeout(120_000);
      h.agent('x');
      const n = WORKFLOW_LIMITS.maxNodes;
      const nodes = Array.from({ length: n }, (_, i) => ({
        nodeId: `n${i}`,
        agentId: 'x',
        dependencies: i === 0 ? [] : [`n${i - 1}`],
      }));
      const began = Date.now();
      const id = h.create(definition('big', nodes));
      h.start(id);
      const setup = Date.now() - began;
      const repo = h.store.workflows;
      const writes = { node: 0, workflow: 0 };
      const putNode = repo.putNode.bind(repo);
      const putWorkflow = repo.putWorkflow.bind(repo);
      repo.putNode = (w, node) => {
        writes.node++;
        putNode(w, node);
      };
      repo.putWorkflow = (r, c) => {
        writes.workflow++;
        putWorkflow(r, c);
      };
      await h.finish('x');
      // n0 RUNNING → COMPLETED and n1 PENDING → READY (one transaction), n1 READY → RUNNING (another): three node rows and,
      // once per transaction, the workflow's small row (its counts and updated_at, what the list reads).
      assert.deepEqual(writes, { node: 3, workflow: 2 });
      assert.equal(h.workflows.list(10)[0].counts.COMPLETED, 1);
      assert.ok(setup < 60_000, `create + start of ${n} nodes took ${setup} ms`);
    });
  });
});
