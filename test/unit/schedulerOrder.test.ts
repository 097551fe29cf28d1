import { strict as assert } from 'node:assert';
import type { TaskRecord } from '../../src/core/scheduler/model';
import { SchedulerHarness } from '../support/schedulerHarness';
import { ctx, settle } from '../support/routerHarness';
import { prng } from '../support/prng';

interface SimAgent {
  readonly id: string;
  readonly type: string;
  run?: { messageId: string; taskId: string; received: boolean };
  preempt?: string;
  terminate?: string;
}

/** Waiting reasons the gate gives: such a task is not eligible until the gate lets it go. */
const GATE_WAITING = new Set(['conflict_decision', 'serialised_after', 'max_parallel_instances']);

describe('Scheduler ordering property (random submissions, clock advances, shared scopes and a restart; seeded)', () => {
  for (const seed of [1, 7, 42, 2026, 90210]) {
    it(`seed ${seed}: every dispatch takes the first eligible task by priority then FIFO; no task lost or run twice`, async function () {
      this.timeout(120_000);
      const random = prng(seed);
      const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)];
      const h = new SchedulerHarness();
      try {
        const agents: SimAgent[] = [
          { id: 'c1', type: 'coder' },
          { id: 'c2', type: 'coder' },
          { id: 'r1', type: 'reviewer' },
        ];
        for (const a of agents) h.agent(a.id, a.type);
        const typeOf = new Map(agents.map((a) => [a.id, a.type]));
        const violations: string[] = [];
        const dispatched = new Set<string>();
        const watch = () =>
          h.scheduler.onDidChange(({ task }) => {
            if (task.state !== 'DISPATCHED' || dispatched.has(task.runMessageId)) return;
            dispatched.add(task.runMessageId);
            const agent = task.assignedAgentId;
            const eligible = (t: TaskRecord) =>
              t.state === 'QUEUED' &&
              !(t.waiting && GATE_WAITING.has(t.waiting.kind)) &&
              (t.target === agent || t.target === `type:${typeOf.get(agent)}`);
            const earlier = h.scheduler
              .tasks({ includeFinished: false })
              .filter(eligible)
              .filter((t) => t.priority < task.priority || (t.priority === task.priority && t.seq < task.seq));
            if (earlier.length)
              violations.push(
                `${task.taskId} (p${task.priority} #${task.seq}) went to ${agent} before ${earlier.map((t) => `${t.taskId} (p${t.priority} #${t.seq})`).join(', ')}`,
              );
          });
        watch();
        const submitted: string[] = [];
        const completed = new Map<string, number>();
        const terminated = new Set<string>();
        const targets = [...agents.map((a) => a.id), 'type:coder', 'type:reviewer'];
        const sharedScopes = ['repo:shared/src/**', 'repo:shared/src/core/**', 'resource:db'];

        const collect = () => {
          for (const a of agents) {
            if (!h.registry.get(a.id)) continue;
            h.confirmDeliveries(a.id);
            for (const c of h.commands(a.id)) {
              if (c.command.command === 'run') {
                if (a.run?.messageId === c.messageId) continue;
                assert.equal(a.run, undefined, `${a.id} got a second run while running ${a.run?.taskId}`);
                a.run = { messageId: c.messageId, taskId: String(c.command.task_id), received: false };
              } else if (c.command.command === 'preempt_request') {
                a.preempt = c.messageId;
              } else if (c.command.command === 'terminate') {
                a.terminate = c.messageId;
              } else {
                assert.fail(`unexpected ${String(c.command.command)} to ${a.id}`);
              }
            }
          }
        };
        const act = async (a: SimAgent) => {
          if (!a.run) return;
          if (a.terminate) {
            const { taskId } = a.run;
            const terminate = a.terminate;
            a.run = undefined;
            a.preempt = undefined;
            a.terminate = undefined;
            terminated.add(taskId);
            await h.answer(a.id, terminate, 'FULFILLED', { note: 'terminated' });
          } else if (a.preempt && random() < 0.7) {
            const preempt = a.preempt;
            a.preempt = undefined;
            a.run = undefined;
            await h.answer(a.id, preempt, 'FULFILLED', { note: 'yielded' });
          } else if (!a.run.received) {
            a.run.received = true;
            await h.answer(a.id, a.run.messageId, 'RECEIVED');
          } else {
            const { messageId, taskId } = a.run;
            a.run = undefined;
            a.preempt = undefined;
            completed.set(taskId, (completed.get(taskId) ?? 0) + 1);
            await h.answer(a.id, messageId, 'FULFILLED', { note: 'done' });
          }
        };
        /** A human answers the CONFLICT approvals shared scopes raise: run in parallel or one after the other. */
        const decide = async () => {
          for (const invocation of h.coordinator.hitl.list({ pendingOnly: true })) {
            h.coordinator.hitl.decide(
              invocation.id,
              random() < 0.5
                ? { action: 'approve', rationale: 'parallel' }
                : { action: 'deny', rationale: 'serialise' },
              'editor:sim',
              ctx(),
            );
          }
          await settle();
        };

        for (let step = 0; step < 240; step++) {
          collect();
          if (step === 120) {
            // A restart in the middle: the same store, every agent's stream opened again.
            h.restart();
            dispatched.clear();
            for (const t of h.scheduler.tasks({ includeFinished: false }))
              if (t.runMessageId) dispatched.add(t.runMessageId);
            watch();
            for (const a of agents) h.reconnect(a.id);
            await settle();
            continue;
          }
          const roll = random();
          if (roll < 0.4) {
            const taskId = `t${submitted.length + 1}`;
            const scope = random() < 0.25 ? pick(sharedScopes) : `repo:repo-${taskId}`;
            h.submitted(pick(targets), Math.floor(random() * 7) - 3, { taskId, scope });
            submitted.push(taskId);
            await settle();
          } else if (roll < 0.5) {
            // Past the router's ACK timeout (10 s) and, now and then, a delivery lease (30 s).
            await h.advance(random() < 0.8 ? 11_000 : 31_000);
          } else if (roll < 0.55) {
            await decide();
          } else {
            await act(pick(agents));
          }
        }
        for (let guard = 0; guard < 5_000 && h.scheduler.tasks({ includeFinished: false }).length > 0; guard++) {
          collect();
          await decide();
          const busy = agents.filter((a) => a.run);
          if (busy.length === 0) {
            // Nothing to answer: time passes (a yield deadline, a terminate grace).
            await h.advance(60_000);
            continue;
          }
          await act(pick(busy));
        }
        assert.deepEqual(
          h.scheduler
            .tasks({ includeFinished: false })
            .map((t) => `${t.taskId}:${t.state}:${JSON.stringify(t.waiting)}`),
          [],
          'nothing left open',
        );
        assert.deepEqual(violations, []);
        assert.ok(submitted.length > 50, `enough submissions (${submitted.length})`);
        for (const id of submitted) {
          const task = h.task(id);
          if (terminated.has(id)) {
            assert.equal(task.state, 'FAILED', `${id} terminated`);
            assert.equal(task.errorCode, 'forced_preemption');
            assert.equal(completed.get(id), undefined, `${id} terminated and never completed`);
          } else if (task.state === 'FAILED') {
            assert.equal(task.errorCode, 'DUPLICATE_DETECTED', `${id} FAILED ${task.errorCode}: ${task.note}`);
          } else {
            assert.equal(task.state, 'COMPLETED', `${id} completed`);
            assert.equal(completed.get(id), 1, `${id} completed exactly once`);
          }
        }
        assert.ok(h.events('task.yielded').length > 0, 'the run exercised preemption');
        assert.ok(h.events('scheduler.conflict_checked').length > 0, 'the run exercised shared scopes');
      } finally {
        h.dispose();
      }
    });
  }
});
