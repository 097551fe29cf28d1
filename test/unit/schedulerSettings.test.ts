import { strict as assert } from 'node:assert';
import { DEFAULT_SCHEDULER_OPTIONS } from '../../src/core/api';
import {
  SchedulerLimits,
  limitsChanged,
  schedulerOptionsOf,
  schedulerSettings,
} from '../../src/extension/schedulerSettings';
import { SchedulerHarness } from '../support/schedulerHarness';

describe('sw4rm.scheduler.* settings (no vscode)', () => {
  it("defaults to the scheduler's defaults", () => {
    const s = schedulerSettings({});
    assert.deepEqual(schedulerOptionsOf(s), {
      maxParallelInstances: {},
      defaultMaxParallelInstances: DEFAULT_SCHEDULER_OPTIONS.defaultMaxParallelInstances,
      conflictThreshold: DEFAULT_SCHEDULER_OPTIONS.conflictThreshold,
      unavailableEngine: 'serialise',
    });
    assert.deepEqual(s.warnings, []);
  });

  it('takes limits per agent type, a default, a threshold and the unavailable-engine policy', () => {
    const s = schedulerSettings({
      maxParallelInstances: { Echo: 2, Writer: 0 },
      defaultMaxParallelInstances: 4,
      conflictThreshold: 0.5,
      onUnavailableEngine: 'escalate',
    });
    assert.deepEqual(
      s.maxParallelInstances,
      { Echo: 2, Writer: 0 },
      'Writer: 0 is no limit for Writer, kept (not the default 4)',
    );
    assert.equal(s.defaultMaxParallelInstances, 4);
    assert.equal(s.conflictThreshold, 0.5);
    assert.equal(s.unavailableEngine, 'escalate');
    assert.deepEqual(s.warnings, []);
  });

  it('ignores or clamps wrong values and names each', () => {
    const s = schedulerSettings({
      maxParallelInstances: { Echo: -1, Big: 1e9, '': 3, Half: 1.5 },
      defaultMaxParallelInstances: 'x',
      conflictThreshold: 2,
      onUnavailableEngine: 'panic',
    });
    assert.deepEqual(s.maxParallelInstances, { Big: 10_000 });
    assert.equal(s.defaultMaxParallelInstances, 0);
    assert.equal(s.conflictThreshold, 1);
    assert.equal(s.unavailableEngine, 'serialise');
    assert.equal(s.warnings.length, 7);
    assert.match(schedulerSettings({ maxParallelInstances: [1] }).warnings[0], /not an object/);
  });

  it('tells when the limits changed (a live change for setMaxParallelInstances)', () => {
    const a = schedulerSettings({ maxParallelInstances: { Echo: 2 } });
    assert.equal(
      limitsChanged(a, schedulerSettings({ maxParallelInstances: { Echo: 2 }, conflictThreshold: 0.1 })),
      false,
    );
    assert.equal(limitsChanged(a, schedulerSettings({ maxParallelInstances: { Echo: 3 } })), true);
    assert.equal(limitsChanged(a, schedulerSettings({ maxParallelInstances: { Other: 2 } })), true);
    assert.equal(
      limitsChanged(a, schedulerSettings({ maxParallelInstances: { Echo: 2 }, defaultMaxParallelInstances: 1 })),
      true,
    );
  });
});

describe('SchedulerLimits (live max_parallel_instances)', () => {
  it('gives the running coordinator the limits when they change, and only then', async () => {
    const calls: Array<[Record<string, number>, number, string]> = [];
    let values: Record<string, unknown> = { maxParallelInstances: { Echo: 2 } };
    const problems: string[] = [];
    const limits = new SchedulerLimits(
      () => schedulerSettings(values),
      'editor:me',
      (p) => problems.push(p),
    );
    const api = {
      setMaxParallelInstances: async (l: Readonly<Record<string, number>>, d: number, by: string) => {
        calls.push([{ ...l }, d, by]);
      },
    };
    values = { maxParallelInstances: { Echo: 3 } };
    await limits.settingsChanged();
    assert.equal(calls.length, 0, 'nothing to give while stopped');
    await limits.bind(api);
    assert.deepEqual(
      calls,
      [[{ Echo: 3 }, 0, 'editor:me']],
      'given once on bind: a change while the host started had no API',
    );
    await limits.settingsChanged();
    assert.equal(calls.length, 1, 'then only when the limits change');
    calls.length = 0;
    values = { maxParallelInstances: { Echo: 3 }, conflictThreshold: 0.2 };
    await limits.settingsChanged();
    assert.equal(calls.length, 0, 'the threshold is not a limit');
    values = { maxParallelInstances: { Echo: 1 }, defaultMaxParallelInstances: 3 };
    await limits.settingsChanged();
    assert.deepEqual(calls, [[{ Echo: 1 }, 3, 'editor:me']]);
    await limits.bind(undefined);
    values = { maxParallelInstances: { Echo: 5 } };
    await limits.settingsChanged();
    assert.equal(calls.length, 1);
    await limits.bind({
      setMaxParallelInstances: async () => {
        throw new Error('stopped');
      },
    });
    assert.deepEqual(problems, ['the max_parallel_instances limits were not applied: stopped']);
    values = { maxParallelInstances: { Echo: 6 } };
    await limits.settingsChanged();
    assert.equal(problems.length, 2);
  });

  it('gives a limit changed while the host started (its options were read before) when the API is bound', async () => {
    let values: Record<string, unknown> = { maxParallelInstances: { Echo: 2 } };
    const limits = new SchedulerLimits(
      () => schedulerSettings(values),
      'editor:me',
      () => undefined,
    );
    const startedWith = schedulerSettings(values); // hostOptionsOf read the settings here
    values = { maxParallelInstances: { Echo: 1 } }; // changed while the host starts: no API yet
    await limits.settingsChanged();
    const calls: Array<Record<string, number>> = [];
    await limits.bind({
      setMaxParallelInstances: async (l) => {
        calls.push({ ...l });
      },
    });
    assert.deepEqual(startedWith.maxParallelInstances, { Echo: 2 });
    assert.deepEqual(calls, [{ Echo: 1 }]);
  });
});

describe('a per-type limit of 0 with the scheduler (real store, ManualClock)', () => {
  it('{"Echo": 0} with default 3 runs every Echo task at once: 0 is no limit, not the default', () => {
    const h = new SchedulerHarness();
    try {
      const s = schedulerSettings({ maxParallelInstances: { Echo: 0 }, defaultMaxParallelInstances: 3 });
      h.coordinator.concurrency.setMaxParallelInstances(s.maxParallelInstances, s.defaultMaxParallelInstances);
      for (let i = 1; i <= 5; i++) h.agent(`echo-${i}`, 'Echo');
      const tasks = [1, 2, 3, 4, 5].map((i) =>
        h.submitted('type:Echo', 0, { taskId: `t${i}`, scope: `resource:r${i}` }),
      );
      assert.deepEqual(
        tasks.map((t) => h.task(t.taskId).state),
        ['DISPATCHED', 'DISPATCHED', 'DISPATCHED', 'DISPATCHED', 'DISPATCHED'],
      );
    } finally {
      h.dispose();
    }
  });
});
