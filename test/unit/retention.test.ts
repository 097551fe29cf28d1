import { strict as assert } from 'node:assert';
import { ManualClock } from '../../src/core/clock';
import { CATCH_UP_MS, schedulePruning } from '../../src/core/retention';

describe('schedulePruning (bounded pruning runs)', () => {
  it('runs every interval, comes back after CATCH_UP_MS while a run leaves more, then returns to the interval', () => {
    const clock = new ManualClock(0);
    let backlog = 0;
    const runs: number[] = [];
    const timer = schedulePruning(clock, 60_000, () => {
      runs.push(clock.now());
      backlog = Math.max(0, backlog - 10);
      return backlog > 0;
    });
    try {
      clock.advance(59_999);
      assert.deepEqual(runs, [], 'nothing before the first interval');
      backlog = 25;
      clock.advance(1);
      assert.deepEqual(runs, [60_000]);
      clock.advance(2 * CATCH_UP_MS);
      assert.deepEqual(
        runs,
        [60_000, 60_000 + CATCH_UP_MS, 60_000 + 2 * CATCH_UP_MS],
        'the backlog is worked off every CATCH_UP_MS',
      );
      clock.advance(60_000 - 1);
      assert.equal(runs.length, 3, 'caught up: back to the full interval');
      clock.advance(1);
      assert.deepEqual(runs.slice(3), [120_000 + 2 * CATCH_UP_MS]);
    } finally {
      timer.dispose();
    }
  });

  it('stops when disposed, also from inside a run', () => {
    const clock = new ManualClock(0);
    let runs = 0;
    const timer = schedulePruning(clock, 1_000, () => {
      runs++;
      timer.dispose();
      return true;
    });
    clock.advance(10_000);
    assert.equal(runs, 1);
  });

  it('keeps its schedule when a run throws, and lets the error through', () => {
    const clock = new ManualClock(0);
    let runs = 0;
    const timer = schedulePruning(clock, 1_000, () => {
      runs++;
      if (runs === 1) throw new Error('disk full');
      return false;
    });
    try {
      assert.throws(() => clock.advance(1_000), /disk full/);
      clock.advance(1_000);
      assert.equal(runs, 2, 'the next run comes after the interval');
    } finally {
      timer.dispose();
    }
  });
});
