import { strict as assert } from 'node:assert';
import { ManualClock, isoUtc } from '../../src/core/clock';
import { SequentialIds } from '../../src/core/ids';

describe('ManualClock', () => {
  it('starts at 2026-01-01 UTC by default and moves only when advanced', () => {
    const clock = new ManualClock();
    assert.equal(isoUtc(clock.now()), '2026-01-01T00:00:00.000Z');
    clock.advance(1_500);
    assert.equal(isoUtc(clock.now()), '2026-01-01T00:00:01.500Z');
  });

  it('fires timers in due order, each at its own time, including timers set by timers', () => {
    const clock = new ManualClock(0);
    const fired: Array<[string, number]> = [];
    clock.setTimer(300, () => fired.push(['c', clock.now()]));
    clock.setTimer(100, () => {
      fired.push(['a', clock.now()]);
      clock.setTimer(50, () => fired.push(['a+50', clock.now()]));
    });
    clock.setTimer(100, () => fired.push(['b', clock.now()]));
    clock.advance(299);
    assert.deepEqual(fired, [
      ['a', 100],
      ['b', 100],
      ['a+50', 150],
    ]);
    assert.equal(clock.pendingTimers, 1);
    clock.advance(1);
    assert.deepEqual(fired.at(-1), ['c', 300]);
    assert.equal(clock.pendingTimers, 0);
  });

  it('never fires a disposed timer', () => {
    const clock = new ManualClock(0);
    let fired = false;
    const timer = clock.setTimer(10, () => {
      fired = true;
    });
    timer.dispose();
    clock.advance(1_000);
    assert.equal(fired, false);
    assert.equal(clock.pendingTimers, 0);
  });
});

describe('SequentialIds', () => {
  it('answers predictable UUID-shaped ids', () => {
    const ids = new SequentialIds();
    assert.equal(ids.uuid(), '00000000-0000-4000-8000-000000000001');
    assert.equal(ids.uuid(), '00000000-0000-4000-8000-000000000002');
  });
});
