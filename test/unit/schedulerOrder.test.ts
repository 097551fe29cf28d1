import { strict as assert } from 'node:assert';
import type { TaskRecord } from '../../src/core/scheduler/model';
import { SchedulerHarness } from '../support/schedulerHarness';
import { settle } from '../support/routerHarness';

/** mulberry32: a small seeded PRNG, so that a failing seed can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface SimAgent {
  readonly id: string;
  readonly type: string;
  run?: { messageId: string; taskId: string; received: boolean };
  preempt?: string;
}

describe('Scheduler ordering property (random submissions, seeded)', () => {
  for (const seed of [1, 7, 42, 2026, 90210]) {
    it(`seed ${seed}: every dispatch takes the first eligible task by priority then FIFO; no task lost or completed twice`, async function () {
      this.timeout(60_000);
      const random = prng(seed);
      const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)];
      const h = new SchedulerHarness();
      try {
        const agents: SimAgent[] = [
          { id: 'c1', type: 'coder' }, { id: 'c2', type: 'coder' }, { id: 'r1', type: 'reviewer' },
        ];
        for (const a of agents) h.agent(a.id, a.type);
        const typeOf = new Map(agents.map((a) => [a.id, a.type]));
        const violations: string[] = [];
        const runningOn = new Map<string, string>();
        h.scheduler.onDidChange(({ task }) => {
          if (task.state !== 'DISPATCHED' || runningOn.get(task.taskId) === task.runMessageId) return;
          runningOn.set(task.taskId, task.runMessageId);
          const agent = task.assignedAgentId;
          const eligible = (t: TaskRecord) => t.state === 'QUEUED' && (t.target === agent || t.target === `type:${typeOf.get(agent)}`);
          const earlier = h.scheduler.tasks({ includeFinished: false }).filter(eligible)
            .filter((t) => t.priority < task.priority || (t.priority === task.priority && t.seq < task.seq));
          if (earlier.length) violations.push(`${task.taskId} (p${task.priority} #${task.seq}) went to ${agent} before ${earlier.map((t) => `${t.taskId} (p${t.priority} #${t.seq})`).join(', ')}`);
        });
        const submitted: string[] = [];
        const completed = new Map<string, number>();
        const targets = [...agents.map((a) => a.id), 'type:coder', 'type:reviewer'];

        const collect = () => {
          for (const a of agents) {
            for (const c of h.commands(a.id)) {
              if (c.command.command === 'run') {
                assert.equal(a.run, undefined, `${a.id} got a second run while running ${a.run?.taskId}`);
                a.run = { messageId: c.messageId, taskId: String(c.command.task_id), received: false };
              } else if (c.command.command === 'preempt_request') {
                a.preempt = c.messageId;
              } else {
                assert.fail(`unexpected ${String(c.command.command)} to ${a.id}`);
              }
            }
          }
        };
        const act = async (a: SimAgent) => {
          if (!a.run) return;
          if (a.preempt && random() < 0.7) {
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

        for (let step = 0; step < 240; step++) {
          collect();
          if (random() < 0.45) {
            const taskId = `t${submitted.length + 1}`;
            h.submitted(pick(targets), Math.floor(random() * 7) - 3, { taskId, scope: `repo:repo-${taskId}` });
            submitted.push(taskId);
            await settle();
          } else {
            await act(pick(agents));
          }
        }
        for (let guard = 0; guard < 5_000 && h.scheduler.tasks({ includeFinished: false }).length > 0; guard++) {
          collect();
          const busy = agents.filter((a) => a.run);
          assert.ok(busy.length > 0, `tasks left but no agent runs one: ${h.scheduler.tasks({ includeFinished: false }).map((t) => `${t.taskId}:${t.state}:${JSON.stringify(t.waiting)}`).join(' ')}`);
          await act(pick(busy));
        }
        assert.deepEqual(violations, []);
        assert.ok(submitted.length > 60, `enough submissions (${submitted.length})`);
        for (const id of submitted) {
          assert.equal(h.task(id).state, 'COMPLETED', `${id} completed`);
          assert.equal(completed.get(id), 1, `${id} completed exactly once`);
        }
        assert.ok(h.events('task.yielded').length > 0, 'the run exercised preemption');
      } finally {
        h.dispose();
      }
    });
  }
});
