import { strict as assert } from 'node:assert';
import type { Disposable } from '../../src/core/events';
import { ConcurrencyControl, RunningIndex, jobKeyOf } from '../../src/core/scheduler/concurrency';
import { scopesOverlap } from '../../src/core/scheduler/overlap';
import {
  DEFAULT_SCHEDULER_OPTIONS,
  type GateVerdict,
  type ParallelismScorer,
  type SchedulerOptions,
  type TaskRecord,
  type TaskScope,
  type TaskState,
} from '../../src/core/scheduler/model';
import { describeWaiting } from '../../src/core/scheduler/scheduler';
import { BuiltInScopeScorer } from '../../src/core/scheduler/scorer';
import { RouterHarness, ctx } from '../support/routerHarness';
import { prng } from '../support/prng';

/** A TaskRecord as the scheduler would hold it (the gate reads only these fields). */
function task(
  taskId: string,
  fields: { target?: string; agent?: string; scope?: Partial<TaskScope>; params?: string; state?: TaskState } = {},
): TaskRecord {
  const target = fields.target ?? 'type:coder';
  const params = Buffer.from(fields.params ?? `{"job":"${taskId}"}`);
  return {
    taskId,
    target,
    assignedAgentId: fields.agent ?? '',
    priority: 0,
    seq: 1,
    params,
    contentType: 'application/json',
    scopeText: '',
    scope: { repoId: '', worktreeId: '', paths: [], resources: [], ...fields.scope },
    jobKey: jobKeyOf(target, 'application/json', params),
    submittedBy: 'operator',
    submittedAt: 0,
    state: fields.state ?? 'QUEUED',
    waiting: null,
    runMessageId: '',
    preemptMessageId: '',
    preemptedBy: '',
    nonPreemptibleUntil: null,
    dispatches: 0,
    errorCode: '',
    note: '',
    startedAt: null,
    endedAt: null,
    updatedAt: 0,
    agentType: '',
    terminateMessageId: '',
    deadline: null,
    withdrawals: 0,
    result: '',
  };
}

const running = (t: TaskRecord, agent = 'agent-1'): TaskRecord => ({ ...t, state: 'RUNNING', assignedAgentId: agent });

describe('ConcurrencyControl (RFC §9: limits, job uniqueness, scope conflicts)', () => {
  let h: RouterHarness;
  let operator: Disposable | undefined;
  const gates: ConcurrencyControl[] = [];

  beforeEach(() => {
    h = new RouterHarness();
    operator = h.coordinator.hitl.attachOperator('editor:test');
  });

  afterEach(() => {
    for (const g of gates.splice(0)) g.dispose();
    operator?.dispose();
    h.dispose();
  });

  function gate(
    options: Partial<SchedulerOptions> = {},
    scorer: ParallelismScorer = new BuiltInScopeScorer(),
    agentTypes: Record<string, string> = {},
  ): ConcurrencyControl {
    const g = new ConcurrencyControl(
      {
        log: h.coordinator.log,
        clock: h.clock,
        hitl: h.coordinator.hitl,
        scorer,
        agentTypeOf: (id) => agentTypes[id],
      },
      { ...DEFAULT_SCHEDULER_OPTIONS, ...options },
    );
    gates.push(g);
    return g;
  }

  function changes(g: ConcurrencyControl): { count: number } {
    const counter = { count: 0 };
    const sub = g.onDidChange(() => counter.count++);
    gates.push({ dispose: () => sub.dispose() } as ConcurrencyControl);
    return counter;
  }

  const decide = (id: string, action: string, payload?: unknown) =>
    h.coordinator.hitl.decide(id, { action, rationale: 'test decision', payload }, 'editor:alice', ctx());

  function waitingOf(v: GateVerdict) {
    assert.equal(v.go, false, `expected to wait, got ${JSON.stringify(v)}`);
    assert.ok('waiting' in v, `expected a waiting reason, got ${JSON.stringify(v)}`);
    return v.waiting;
  }

  describe('job identity', () => {
    it('is a sha256 of target, content type and params; an empty content type is application/json', () => {
      const key = jobKeyOf('type:coder', 'application/json', Buffer.from('{"a":1}'));
      assert.match(key, /^[0-9a-f]{64}$/);
      assert.equal(jobKeyOf('type:coder', '', Buffer.from('{"a":1}')), key);
      assert.notEqual(jobKeyOf('type:coder', 'text/plain', Buffer.from('{"a":1}')), key);
      assert.notEqual(jobKeyOf('agent-1', 'application/json', Buffer.from('{"a":1}')), key);
      assert.notEqual(jobKeyOf('type:coder', 'application/json', Buffer.from('{"a":2}')), key);
      // Length prefixes: moving bytes between the parts changes the key.
      assert.notEqual(jobKeyOf('ab', 'c', Buffer.from('d')), jobKeyOf('a', 'bc', Buffer.from('d')));
      assert.equal(gate().jobKey('type:coder', 'application/json', Buffer.from('{"a":1}')), key);
    });
  });

  describe('max_parallel_instances (RFC §9.1)', () => {
    it('queues a task of a type at its limit, with the feedback; other types and unlimited types go', () => {
      const g = gate({ maxParallelInstances: { coder: 1, tester: 0 }, defaultMaxParallelInstances: 2 });
      const busy = [running(task('t1')), running(task('t2', { target: 'type:tester' }), 'agent-2')];
      assert.deepEqual(waitingOf(g.mayStart(task('t3'), 'coder', g.runningOf(busy), ctx())), {
        kind: 'max_parallel_instances',
        agentType: 'coder',
        limit: 1,
        running: 1,
      });
      assert.deepEqual(
        g.mayStart(task('t4', { target: 'type:tester' }), 'tester', g.runningOf(busy), ctx()),
        { go: true },
        '0 = unlimited',
      );
      const reviewers = [
        running(task('r1', { target: 'type:reviewer' })),
        running(task('r2', { target: 'type:reviewer' })),
      ];
      assert.deepEqual(
        waitingOf(g.mayStart(task('r3', { target: 'type:reviewer' }), 'reviewer', g.runningOf(reviewers), ctx())),
        { kind: 'max_parallel_instances', agentType: 'reviewer', limit: 2, running: 2 },
        'the default applies to types not listed',
      );
      assert.deepEqual(
        g.mayStart(task('t3'), 'coder', g.runningOf([]), ctx()),
        { go: true },
        'once the running one ended',
      );
    });

    it("counts running tasks sent to an agent id by that agent's registered type", () => {
      const g = gate({ maxParallelInstances: { coder: 1 } }, undefined, { 'agent-7': 'coder', 'agent-8': 'writer' });
      assert.equal(
        g.mayStart(task('a'), 'coder', g.runningOf([running(task('x', { target: 'agent-7' }), 'agent-7')]), ctx()).go,
        false,
      );
      assert.equal(
        g.mayStart(task('a'), 'coder', g.runningOf([running(task('x', { target: 'agent-8' }), 'agent-8')]), ctx()).go,
        true,
      );
    });

    it('logs reaching the limit once per task, not on every dispatch attempt', () => {
      const g = gate({ maxParallelInstances: { coder: 1 } });
      for (let i = 0; i < 3; i++) g.mayStart(task('t2'), 'coder', g.runningOf([running(task('t1'))]), ctx());
      const events = h.events('scheduler.limit_reached');
      assert.equal(events.length, 1);
      assert.deepEqual(events[0].details, {
        task_id: 't2',
        waiting: 'max_parallel_instances',
        agent_type: 'coder',
        limit: 1,
        running: 1,
      });
      assert.equal(events[0].correlationId, 't2', 'correlation id = task id');
    });

    it('setMaxParallelInstances applies at once, announces it, and refuses nonsense', () => {
      const g = gate({ maxParallelInstances: { coder: 1 } });
      const changed = changes(g);
      const busy = [running(task('t1'))];
      assert.equal(g.mayStart(task('t2'), 'coder', g.runningOf(busy), ctx()).go, false);
      g.setMaxParallelInstances({ coder: 2 }, 0);
      assert.equal(changed.count, 1);
      assert.deepEqual(g.mayStart(task('t2'), 'coder', g.runningOf(busy), ctx()), { go: true });
      assert.deepEqual(g.limits, { maxParallelInstances: { coder: 2 }, defaultMaxParallelInstances: 0 });
      assert.throws(
        () => g.setMaxParallelInstances({ coder: -1 }, 0),
        (err: Error) => err.name === 'SchedulerError' && /whole number ≥ 0/.test(err.message),
      );
      assert.throws(() => g.setMaxParallelInstances({}, 1.5), /default must be a whole number/);
      assert.deepEqual(g.limits.maxParallelInstances, { coder: 2 }, 'a refused change changes nothing');
    });

    it("the coordinator's own gate takes agent types from the registry", () => {
      h.register('coder-1');
      const name = h.registry.get('coder-1')!.descriptor.name;
      h.coordinator.concurrency.setMaxParallelInstances({ [name]: 1 }, 0);
      assert.equal(
        h.coordinator.concurrency.mayStart(
          task('b', { target: `type:${name}` }),
          name,
          h.coordinator.concurrency.runningOf([running(task('a', { target: 'coder-1' }), 'coder-1')]),
          ctx(),
        ).go,
        false,
      );
    });
  });

  describe('job uniqueness (RFC §9.2)', () => {
    it('a job unlike every open one is admitted at once', () => {
      assert.equal(
        gate().admit(task('t2', { params: '{"b":1}' }), [task('t1', { params: '{"a":1}' })], ctx()),
        undefined,
      );
      assert.equal(
        gate().admit(task('t2', { params: '{"a":1}' }), [task('t1', { params: '{"a":1}', state: 'COMPLETED' })], ctx()),
        undefined,
        'ended tasks do not count',
      );
    });

    it('a duplicate waits for a TASK_ESCALATION; approved, it goes', () => {
      const g = gate();
      const changed = changes(g);
      const first = running(task('t1', { params: '{"same":true}', scope: { repoId: 'r' } }));
      const dup = task('t2', { params: '{"same":true}', scope: { repoId: 'r' } });
      const admission = g.admit(dup, [first], ctx());
      assert.ok(admission && 'pending' in admission, JSON.stringify(admission));
      const invocation = h.coordinator.hitl.get(admission.pending)!;
      assert.equal(invocation.reasonType, 'TASK_ESCALATION');
      assert.equal(invocation.correlationId, 't2');
      assert.deepEqual(invocation.origin, { kind: 'internal', component: 'scheduler' });
      assert.equal(invocation.context.facts.duplicate_of, 't1');
      assert.equal(invocation.context.facts.job_key, dup.jobKey);
      assert.match(invocation.context.summary, /t1/);
      assert.deepEqual(waitingOf(g.mayStart(dup, 'coder', g.runningOf([]), ctx())), {
        kind: 'conflict_decision',
        invocationId: invocation.id,
        withTaskId: 't1',
      });
      decide(invocation.id, 'approve');
      assert.equal(changed.count, 1, 'the decision is announced so that the scheduler tries again');
      assert.deepEqual(g.mayStart(dup, 'coder', g.runningOf([]), ctx()), { go: true });
      assert.equal(h.events('scheduler.duplicate_decided')[0].details.decision, 'allowed');
    });

    it('denied, or not answered before the deadline, the duplicate is refused DUPLICATE_DETECTED', () => {
      const g = gate();
      const first = running(task('t1', { params: '{"same":true}' }));
      const denied = task('t2', { params: '{"same":true}' });
      const timedOut = task('t3', { params: '{"same":true}' });
      const a = g.admit(denied, [first], ctx()) as { pending: string };
      g.admit(timedOut, [first, denied], ctx());
      decide(a.pending, 'deny');
      const refusal = g.mayStart(denied, 'coder', g.runningOf([]), ctx());
      assert.ok('refuse' in refusal, JSON.stringify(refusal));
      assert.equal(refusal.refuse.code, 'DUPLICATE_DETECTED');
      assert.match(refusal.refuse.reason, /duplicate of task 't1'.*deny by editor:alice.*test decision/);
      assert.equal(
        g.mayStart(timedOut, 'coder', g.runningOf([]), ctx()).go,
        false,
        'still waiting before the deadline',
      );
      h.clock.advance(h.coordinator.hitl.policy.defaultDeadlineMs + 1);
      const late = g.mayStart(timedOut, 'coder', g.runningOf([]), ctx());
      assert.ok('refuse' in late, JSON.stringify(late));
      assert.match(late.refuse.reason, /no approval before the deadline/);
    });

    it('a duplicate whose originals all end first is released: its question withdrawn, admitted, announced', async () => {
      operator?.dispose();
      operator = undefined;
      const g = gate();
      const changed = changes(g);
      const t1 = running(task('t1', { params: '{"same":true}' }));
      const t3 = task('t3', { params: '{"same":true}' });
      const dup = task('t2', { params: '{"same":true}' });
      const admission = g.admit(dup, [t1, t3], ctx()) as { pending: string };
      g.forget('t1', ctx());
      await Promise.resolve();
      assert.deepEqual(
        waitingOf(g.mayStart(dup, 'coder', g.runningOf([]), ctx())),
        { kind: 'conflict_decision', invocationId: admission.pending, withTaskId: 't3' },
        'still a duplicate of t3',
      );
      assert.equal(h.coordinator.hitl.get(admission.pending)!.state, 'pending');
      assert.equal(changed.count, 0);
      g.forget('t3', ctx());
      await Promise.resolve();
      assert.equal(changed.count, 1, 'announced so that the scheduler tries the duplicate again');
      assert.equal(h.coordinator.hitl.get(admission.pending)!.state, 'cancelled');
      assert.deepEqual(g.mayStart(dup, 'coder', g.runningOf([]), ctx()), { go: true });
      h.clock.advance(h.coordinator.hitl.policy.defaultDeadlineMs + h.coordinator.hitl.policy.unavailableAfterMs + 1);
      assert.deepEqual(
        g.mayStart(dup, 'coder', g.runningOf([]), ctx()),
        { go: true },
        'not refused later at the deadline',
      );
      const [decided] = h.events('scheduler.duplicate_decided');
      assert.equal(decided.details.decision, 'allowed');
      assert.equal(decided.details.by, 'original_ended');
    });

    it('an approved duplicate runs alongside the task it repeats without a CONFLICT question about their shared scope', () => {
      const g = gate();
      const scope = { repoId: 'r', paths: ['src/**'] };
      const t1 = running(task('t1', { params: '{"same":true}', scope }));
      const dup = task('t2', { params: '{"same":true}', scope });
      const admission = g.admit(dup, [t1], ctx()) as { pending: string };
      decide(admission.pending, 'approve');
      assert.deepEqual(g.mayStart(dup, 'coder', g.runningOf([t1]), ctx()), { go: true });
      assert.equal(h.coordinator.hitl.pendingCount(), 0, 'the human is not asked a second time');
      assert.equal(h.events('scheduler.conflict_checked').length, 0);
    });

    it('an operator cancelling the question refuses the duplicate', () => {
      const g = gate();
      const dup = task('t2', { params: '{"same":true}' });
      const admission = g.admit(dup, [running(task('t1', { params: '{"same":true}' }))], ctx()) as { pending: string };
      h.coordinator.hitl.cancel(admission.pending, 'editor:alice', 'not now', ctx());
      const refusal = g.mayStart(dup, 'coder', g.runningOf([]), ctx());
      assert.ok('refuse' in refusal, JSON.stringify(refusal));
      assert.equal(refusal.refuse.code, 'DUPLICATE_DETECTED');
      assert.match(refusal.refuse.reason, /its approval was cancelled/);
    });
  });

  describe('scope conflicts (RFC §9.2, §9.3, Appendix D C.6)', () => {
    const shared = { repoId: 'r', paths: ['src/**'] };
    const deeper = { repoId: 'r', paths: ['src/lib/**'] };

    it('no overlap: go without asking the scorer', () => {
      let calls = 0;
      const g = gate(
        {},
        {
          check: () => {
            calls++;
            return { confidence: 0, notes: '' };
          },
        },
      );
      assert.deepEqual(
        g.mayStart(
          task('b', { scope: { repoId: 'r', paths: ['docs/**'] } }),
          'coder',
          g.runningOf([running(task('a', { scope: shared }))]),
          ctx(),
        ),
        { go: true },
      );
      assert.equal(calls, 0);
    });

    it('a confidence at or above the threshold runs in parallel, logged with the score', () => {
      const g = gate({ conflictThreshold: 0.45 });
      assert.deepEqual(
        g.mayStart(task('b', { scope: deeper }), 'coder', g.runningOf([running(task('a', { scope: shared }))]), ctx()),
        { go: true },
      );
      const [checked] = h.events('scheduler.conflict_checked');
      assert.equal(checked.details.confidence, 0.45);
      assert.equal(checked.details.threshold, 0.45);
      assert.equal(checked.details.outcome, 'run_in_parallel');
      assert.equal(h.coordinator.hitl.pendingCount(), 0);
    });

    it('below the threshold: one HITL CONFLICT invocation per pair; approve runs in parallel', () => {
      const g = gate({ conflictThreshold: 0.7 });
      const changed = changes(g);
      const a = running(task('a', { scope: shared }));
      const b = task('b', { scope: deeper });
      const waiting = waitingOf(g.mayStart(b, 'coder', g.runningOf([a]), ctx()));
      assert.equal(waiting.kind, 'conflict_decision');
      const invocationId = (waiting as { invocationId: string }).invocationId;
      const invocation = h.coordinator.hitl.get(invocationId)!;
      assert.equal(invocation.reasonType, 'CONFLICT');
      assert.equal(invocation.correlationId, 'b');
      assert.equal(invocation.context.score, 0.45);
      assert.equal(invocation.context.facts.other_task_id, 'a');
      assert.deepEqual(invocation.context.facts.task_scope, {
        repo_id: 'r',
        worktree_id: '',
        paths: ['src/lib/**'],
        resources: [],
      });
      assert.ok(
        (invocation.context.facts.overlap as string[]).some((r) => r.includes("'src/lib/**' and 'src/**'")),
        JSON.stringify(invocation.context.facts.overlap),
      );
      assert.deepEqual(invocation.proposedActions, [
        'approve: run_in_parallel',
        'deny: serialise (run one after the other)',
      ]);
      g.mayStart(b, 'coder', g.runningOf([a]), ctx());
      assert.equal(h.coordinator.hitl.pendingCount(), 1, 'asked once per pair');
      decide(invocationId, 'approve');
      assert.equal(changed.count, 1);
      assert.deepEqual(g.mayStart(b, 'coder', g.runningOf([a]), ctx()), { go: true });
      const [decided] = h.events('scheduler.conflict_decided');
      assert.equal(decided.details.decision, 'run_in_parallel');
      assert.equal(decided.details.confidence, 0.45);
      assert.equal(decided.details.by, 'human');
    });

    it('deny serialises: the task waits until the other ends, then goes; the reverse pair is serialised too', () => {
      const g = gate();
      const a = running(task('a', { scope: shared }));
      const b = task('b', { scope: shared });
      const waiting = waitingOf(g.mayStart(b, 'coder', g.runningOf([a]), ctx())) as { invocationId: string };
      decide(waiting.invocationId, 'deny');
      assert.deepEqual(waitingOf(g.mayStart(b, 'coder', g.runningOf([a]), ctx())), {
        kind: 'serialised_after',
        taskId: 'a',
      });
      assert.deepEqual(waitingOf(g.mayStart({ ...a, state: 'QUEUED' }, 'coder', g.runningOf([running(b)]), ctx())), {
        kind: 'serialised_after',
        taskId: 'b',
      });
      g.forget('a', ctx());
      assert.deepEqual(g.mayStart(b, 'coder', g.runningOf([]), ctx()), { go: true });
    });

    it('modify with {"decision": "run_in_parallel"} runs in parallel; defer serialises', () => {
      const g = gate();
      const a = running(task('a', { scope: shared }));
      const w1 = waitingOf(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx())) as {
        invocationId: string;
      };
      decide(w1.invocationId, 'modify', { decision: 'run_in_parallel' });
      assert.deepEqual(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx()), { go: true });
      const w2 = waitingOf(g.mayStart(task('c', { scope: shared }), 'coder', g.runningOf([a]), ctx())) as {
        invocationId: string;
      };
      decide(w2.invocationId, 'defer');
      assert.deepEqual(waitingOf(g.mayStart(task('c', { scope: shared }), 'coder', g.runningOf([a]), ctx())), {
        kind: 'serialised_after',
        taskId: 'a',
      });
    });

    it('no operator: the HITL fallback (deny by default) serialises', () => {
      operator?.dispose();
      operator = undefined;
      const g = gate();
      const a = running(task('a', { scope: shared }));
      g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx());
      h.clock.advance(h.coordinator.hitl.policy.unavailableAfterMs + 1);
      assert.deepEqual(waitingOf(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx())), {
        kind: 'serialised_after',
        taskId: 'a',
      });
      assert.equal(h.events('scheduler.conflict_decided')[0].details.by, 'fallback');
    });

    it('an unavailable engine serialises (the default), logged WARN', () => {
      const g = gate(
        {},
        {
          check: () => {
            throw new Error('engine down');
          },
        },
      );
      const a = running(task('a', { scope: shared }));
      assert.deepEqual(waitingOf(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx())), {
        kind: 'serialised_after',
        taskId: 'a',
      });
      const [warn] = h.events('scheduler.engine_unavailable');
      assert.equal(warn.level, 'WARN');
      assert.equal(warn.details.error, 'engine down');
      assert.equal(warn.details.policy, 'serialise');
      assert.equal(h.coordinator.hitl.pendingCount(), 0);
      assert.equal(h.events('scheduler.conflict_decided')[0].details.policy, 'unavailableEngine=serialise');
    });

    it('an unavailable engine escalates to a human when the policy says so', () => {
      const g = gate(
        { unavailableEngine: 'escalate' },
        {
          check: () => {
            throw new Error('engine down');
          },
        },
      );
      const a = running(task('a', { scope: shared }));
      const w = waitingOf(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx())) as {
        kind: string;
        invocationId: string;
      };
      assert.equal(w.kind, 'conflict_decision');
      const invocation = h.coordinator.hitl.get(w.invocationId)!;
      assert.equal(invocation.reasonType, 'CONFLICT');
      assert.equal(invocation.context.score, null);
      assert.match(invocation.context.summary, /unavailable/);
    });

    it('a scorer answering outside [0, 1] counts as unavailable', () => {
      const g = gate({}, { check: () => ({ confidence: Number.NaN, notes: '' }) });
      assert.equal(
        waitingOf(
          g.mayStart(
            task('b', { scope: shared }),
            'coder',
            g.runningOf([running(task('a', { scope: shared }))]),
            ctx(),
          ),
        ).kind,
        'serialised_after',
      );
    });

    describe('an asynchronous scorer (an inference engine agent answering later)', () => {
      interface Pending {
        readonly a: TaskScope;
        readonly b: TaskScope;
        resolve(v: { confidence: number; notes: string }): void;
        reject(err: Error): void;
      }
      function later(): { calls: Pending[]; scorer: ParallelismScorer } {
        const calls: Pending[] = [];
        return {
          calls,
          scorer: { check: (a, b) => new Promise((resolve, reject) => calls.push({ a, b, resolve, reject })) },
        };
      }
      /** Lets the verdict's promise callbacks run. */
      const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

      it('the task waits (conflict_check) while the check runs, asked once; a verdict at the threshold then runs it, announced', async () => {
        const { calls, scorer } = later();
        const g = gate({ conflictThreshold: 0.7 }, scorer);
        const changed = changes(g);
        const a = running(task('a', { scope: shared }));
        const b = task('b', { scope: deeper });
        assert.deepEqual(waitingOf(g.mayStart(b, 'coder', g.runningOf([a]), ctx())), {
          kind: 'conflict_check',
          withTaskId: 'a',
        });
        assert.deepEqual(waitingOf(g.mayStart(b, 'coder', g.runningOf([a]), ctx())), {
          kind: 'conflict_check',
          withTaskId: 'a',
        });
        assert.equal(calls.length, 1, 'one check per pair');
        assert.deepEqual(calls[0].a, { repoId: 'r', worktreeId: '', paths: ['src/lib/**'], resources: [] });
        assert.equal(changed.count, 0);
        calls[0].resolve({ confidence: 0.7, notes: 'engine: fine' });
        await settle();
        assert.equal(changed.count, 1, 'the decision is announced so that the scheduler dispatches again');
        assert.deepEqual(g.mayStart(b, 'coder', g.runningOf([a]), ctx()), { go: true });
        assert.equal(h.events('scheduler.conflict_check_started').length, 1);
        const [checked] = h.events('scheduler.conflict_checked');
        assert.equal(checked.details.outcome, 'run_in_parallel');
        assert.equal(checked.details.notes, 'engine: fine');
        assert.equal(h.events('scheduler.conflict_checking').length, 1, 'the wait is logged once, not per attempt');
      });

      it("a verdict below the threshold opens the HITL CONFLICT question with the engine's score", async () => {
        const { calls, scorer } = later();
        const g = gate({ conflictThreshold: 0.7 }, scorer);
        const a = running(task('a', { scope: shared }));
        const b = task('b', { scope: shared });
        g.mayStart(b, 'coder', g.runningOf([a]), ctx());
        calls[0].resolve({ confidence: 0.25, notes: 'engine: same files' });
        await settle();
        const w = waitingOf(g.mayStart(b, 'coder', g.runningOf([a]), ctx())) as { kind: string; invocationId: string };
        assert.equal(w.kind, 'conflict_decision');
        const invocation = h.coordinator.hitl.get(w.invocationId)!;
        assert.equal(invocation.context.score, 0.25);
        assert.equal(invocation.context.facts.notes, 'engine: same files');
        decide(w.invocationId, 'approve');
        assert.deepEqual(g.mayStart(b, 'coder', g.runningOf([a]), ctx()), { go: true });
      });

      it('a failed check (rejected, or a confidence of 7) serialises by default, or escalates when the policy says so', async () => {
        const serialising = later();
        const g = gate({}, serialising.scorer);
        const a = running(task('a', { scope: shared }));
        g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx());
        g.mayStart(task('c', { scope: shared }), 'coder', g.runningOf([a]), ctx());
        serialising.calls[0].reject(new Error('engine timed out'));
        serialising.calls[1].resolve({ confidence: 7, notes: '' });
        await settle();
        assert.deepEqual(waitingOf(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx())), {
          kind: 'serialised_after',
          taskId: 'a',
        });
        assert.deepEqual(waitingOf(g.mayStart(task('c', { scope: shared }), 'coder', g.runningOf([a]), ctx())), {
          kind: 'serialised_after',
          taskId: 'a',
        });
        const warnings = h.events('scheduler.engine_unavailable').map((e) => e.details.error);
        assert.deepEqual(warnings, ['engine timed out', 'the scorer answered a confidence outside [0, 1]: 7']);
        assert.equal(h.coordinator.hitl.pendingCount(), 0);

        const escalating = later();
        const e = gate({ unavailableEngine: 'escalate' }, escalating.scorer);
        e.mayStart(task('d', { scope: shared }), 'coder', e.runningOf([a]), ctx());
        escalating.calls[0].reject(new Error('engine down'));
        await settle();
        const w = waitingOf(e.mayStart(task('d', { scope: shared }), 'coder', e.runningOf([a]), ctx())) as {
          kind: string;
          invocationId: string;
        };
        assert.equal(w.kind, 'conflict_decision');
        assert.equal(h.coordinator.hitl.get(w.invocationId)!.context.score, null);
      });

      it('a task that ends while its check runs: the late verdict is dropped, nothing announced, nothing asked', async () => {
        const { calls, scorer } = later();
        const g = gate({}, scorer);
        const changed = changes(g);
        const a = running(task('a', { scope: shared }));
        g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx());
        g.forget('b', ctx());
        calls[0].resolve({ confidence: 0.1, notes: '' });
        await settle();
        assert.equal(changed.count, 0);
        assert.equal(h.coordinator.hitl.pendingCount(), 0);
        assert.equal(h.events('scheduler.conflict_checked').length, 0);
        assert.equal(h.events('scheduler.conflict_check_dropped').length, 1);
        assert.deepEqual(waitingOf(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx())), {
          kind: 'conflict_check',
          withTaskId: 'a',
        });
        assert.equal(calls.length, 2, 'asked again for a task with the same id');
      });

      it('a synchronous scorer still decides within the same mayStart', () => {
        const g = gate({ conflictThreshold: 0.45 }, { check: () => ({ confidence: 0.5, notes: 'sync' }) });
        assert.deepEqual(
          g.mayStart(
            task('b', { scope: shared }),
            'coder',
            g.runningOf([running(task('a', { scope: shared }))]),
            ctx(),
          ),
          { go: true },
        );
        assert.equal(h.events('scheduler.conflict_check_started').length, 0);
      });

      it('the Tasks view says what the task waits for', () => {
        assert.equal(
          describeWaiting({ kind: 'conflict_check', withTaskId: 'a' }),
          "waiting for the inference engine's parallelism check (its scope overlaps task a)",
        );
      });
    });

    it("forget cancels the task's open invocations", () => {
      const g = gate();
      const a = running(task('a', { scope: shared }));
      const w = waitingOf(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx())) as {
        invocationId: string;
      };
      const dup = g.admit(task('d', { params: '{"job":"a"}' }), [a], ctx()) as { pending: string };
      g.forget('b', ctx());
      g.forget('d', ctx());
      assert.equal(h.coordinator.hitl.get(w.invocationId)!.state, 'cancelled');
      assert.equal(h.coordinator.hitl.get(dup.pending)!.state, 'cancelled');
      assert.equal(h.events('scheduler.conflict_decided').length, 0, 'a cancelled question decides nothing');
    });

    it('an operator cancelling a CONFLICT question serialises the pair', () => {
      const g = gate();
      const a = running(task('a', { scope: shared }));
      const w = waitingOf(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx())) as {
        invocationId: string;
      };
      h.coordinator.hitl.cancel(w.invocationId, 'editor:alice', 'not now', ctx());
      assert.deepEqual(waitingOf(g.mayStart(task('b', { scope: shared }), 'coder', g.runningOf([a]), ctx())), {
        kind: 'serialised_after',
        taskId: 'a',
      });
      assert.equal(h.events('scheduler.conflict_decided')[0].details.by, 'cancel');
    });

    it('a decision taken long ago (behind more than 10,000 newer settled invocations) still holds after a restart', () => {
      const g = h.coordinator.concurrency;
      const a = running(task('a', { scope: shared }));
      const b = task('b', { scope: shared });
      const w = waitingOf(g.mayStart(b, 'coder', g.runningOf([a]), ctx())) as { invocationId: string };
      decide(w.invocationId, 'approve');
      const decided = h.coordinator.hitl.get(w.invocationId)!;
      h.store.transaction(() => {
        for (let i = 0; i < 10_001; i++) {
          h.store.hitl.put({
            ...decided,
            id: `other-${i}`,
            origin: { kind: 'internal', component: 'elsewhere' },
            updatedAt: decided.updatedAt + 1 + i,
          });
        }
      });
      operator?.dispose();
      h.restart();
      operator = h.coordinator.hitl.attachOperator('editor:test');
      assert.deepEqual(
        h.coordinator.concurrency.mayStart(b, 'coder', h.coordinator.concurrency.runningOf([a]), ctx()),
        { go: true },
      );
      assert.equal(h.coordinator.hitl.pendingCount(), 0, 'not asked again');
    });

    it('a decision asked before a restart is still waited for, and followed, after it', () => {
      const g = h.coordinator.concurrency;
      const a = running(task('a', { scope: shared }));
      const b = task('b', { scope: shared });
      const w = waitingOf(g.mayStart(b, 'coder', g.runningOf([a]), ctx())) as { invocationId: string };
      const dup = g.admit(task('d', { params: '{"job":"a"}' }), [a], ctx()) as { pending: string };
      const decidedBefore = task('e', { scope: shared });
      const w2 = waitingOf(g.mayStart(decidedBefore, 'coder', g.runningOf([a]), ctx())) as { invocationId: string };
      decide(w2.invocationId, 'approve');
      operator?.dispose();
      h.restart();
      operator = h.coordinator.hitl.attachOperator('editor:test');
      const after = h.coordinator.concurrency;
      assert.notEqual(after, g);
      assert.deepEqual(waitingOf(after.mayStart(b, 'coder', after.runningOf([a]), ctx())), {
        kind: 'conflict_decision',
        invocationId: w.invocationId,
        withTaskId: 'a',
      });
      assert.deepEqual(
        waitingOf(after.mayStart(task('d', { params: '{"job":"a"}' }), 'coder', after.runningOf([]), ctx())),
        { kind: 'conflict_decision', invocationId: dup.pending, withTaskId: 'a' },
      );
      assert.deepEqual(
        after.mayStart(decidedBefore, 'coder', after.runningOf([a]), ctx()),
        { go: true },
        'a decision taken before the restart holds',
      );
      assert.equal(h.coordinator.hitl.pendingCount(), 2, 'nothing asked twice');
      decide(w.invocationId, 'deny');
      assert.deepEqual(waitingOf(after.mayStart(b, 'coder', after.runningOf([a]), ctx())), {
        kind: 'serialised_after',
        taskId: 'a',
      });
    });
  });

  describe('the running-task index (RunningIndex: what mayStart is given)', () => {
    it('mayOverlap lists every running task whose scope overlaps (overlap.ts judging), in start order, and only same-repository or shared-resource ones', () => {
      const random = prng(7);
      const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)];
      const scope = (): TaskScope => ({
        repoId: pick(['', 'r1', 'r2', 'r3']),
        worktreeId: pick(['', '', 'w1', 'w2']),
        paths: pick([[], ['src/**'], ['docs/a.md'], ['**/*.ts', 'lib']]),
        resources: pick([[], [], ['db'], ['db', 'port:80'], ['cache']]),
      });
      const index = new RunningIndex(() => 'coder');
      const live = new Map<string, TaskRecord>();
      for (let step = 0; step < 600; step++) {
        const key = `agent-${Math.floor(random() * 60)}`;
        if (random() < 0.3) {
          index.set(key, undefined);
          live.delete(key);
        } else {
          const t = running(task(`t${step}`, { scope: scope() }), key);
          index.set(key, t);
          live.set(key, t);
        }
        const query = scope();
        const candidates = index.mayOverlap(query);
        const all = index.tasks();
        assert.equal(all.length, live.size);
        const overlapping = all.filter((t) => scopesOverlap(query, t.scope).overlap).map((t) => t.taskId);
        const listed = candidates.map((t) => t.taskId);
        assert.deepEqual(
          listed.filter((id) => overlapping.includes(id)),
          overlapping,
          `step ${step}: every overlap listed, in start order`,
        );
        for (const t of candidates) {
          const sharesResource = t.scope.resources.some((r) => query.resources.includes(r));
          const sameRepo = query.repoId === '' || t.scope.repoId === '' || t.scope.repoId === query.repoId;
          assert.ok(
            sharesResource || sameRepo,
            `step ${step}: ${t.taskId} is in another repository and shares no resource`,
          );
        }
        // The order of the scheduler's slots (a Map: a key set again keeps its place, a key deleted and set again goes last).
        assert.deepEqual(
          all.map((t) => t.taskId),
          [...live.values()].map((t) => t.taskId),
          `step ${step}: start order`,
        );
      }
    });

    it("counts by the gate's type (not the task itself) and ranks preemption candidates by priority, then the latest arrival", () => {
      const g = gate({}, new BuiltInScopeScorer(), { 'agent-7': 'reviewer' });
      const index = new RunningIndex((t) => g.typeOf(t));
      const at = (id: string, priority: number, seq: number, agent: string): TaskRecord => ({
        ...running(task(id), agent),
        priority,
        seq,
        agentType: agent === 'agent-7' ? 'reviewer' : 'coder',
      });
      index.set('agent-1', at('a', 3, 1, 'agent-1'));
      index.set('agent-2', at('b', 5, 2, 'agent-2'));
      index.set('agent-3', at('c', 5, 3, 'agent-3'));
      index.set('agent-7', at('d', 9, 4, 'agent-7'));
      assert.equal(index.countOfType('coder'), 3);
      assert.equal(index.countOfType('coder', 'b'), 2);
      assert.equal(index.countOfType('reviewer'), 1);
      assert.deepEqual(
        [...index.byPreemptionRank('coder', 0)].map((t) => t.taskId),
        ['c', 'b', 'a'],
      );
      assert.deepEqual(
        [...index.byPreemptionRank('coder', 4)].map((t) => t.taskId),
        ['c', 'b'],
      );
      index.deleteTask('c');
      index.set('agent-2', undefined);
      assert.equal(index.countOfType('coder'), 1);
      assert.deepEqual(
        [...index.byPreemptionRank('coder', 0)].map((t) => t.taskId),
        ['a'],
      );
      assert.equal(index.size, 2);
    });
  });
});
