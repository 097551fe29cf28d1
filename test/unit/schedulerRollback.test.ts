import { strict as assert } from 'node:assert';
import type { TaskRecord } from '../../src/core/scheduler/model';
import { SchedulerHarness } from '../support/schedulerHarness';

describe('Scheduler: a transaction that rolls back leaves memory as the store is (the kernel installs memory after commit)', () => {
  let h: SchedulerHarness;

  beforeEach(() => {
    h = new SchedulerHarness();
  });

  afterEach(() => h.dispose());

  it('a completion whose write fails leaves the task RUNNING on its agent, in memory as in the store', async () => {
    h.agent('a1');
    h.submitted('a1', 0, { taskId: 't1' });
    const run = h.command('a1', 'run');
    await h.answer('a1', run.messageId, 'READ');
    assert.equal(h.task('t1').state, 'RUNNING');
    const repository = h.store.scheduler;
    const put = repository.put.bind(repository);
    repository.put = (task: TaskRecord) => {
      if (task.state === 'COMPLETED') throw new Error('disk says no');
      put(task);
    };
    try {
      await h.answer('a1', run.messageId, 'FULFILLED', { result: 1 });
    } finally {
      repository.put = put;
    }
    assert.equal(h.store.scheduler.get('t1')?.state, 'RUNNING', 'the store rolled back');
    const task = h.task('t1');
    assert.deepEqual([task.state, task.endedAt, task.result], ['RUNNING', null, ''], 'memory is as the store is');
    assert.deepEqual(h.scheduler.counts(), { queued: 0, running: 1 });
    assert.equal(h.scheduler.loadOf('a1'), 1, 'the agent still holds its task');
    assert.equal(h.scheduler.isActive('a1', 't1'), true);
  });
});
