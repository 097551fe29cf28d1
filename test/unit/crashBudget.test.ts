import { strict as assert } from 'node:assert';
import { CRASH_WINDOW_MS, CrashBudget, MAX_RESTARTS } from '../../src/extension/crashBudget';

describe("restarts of the coordinator's worker after a crash (extension/crashBudget.ts)", () => {
  it(`restarts ${MAX_RESTARTS} times within ${CRASH_WINDOW_MS / 60_000} minutes, then gives up and starts over`, () => {
    const budget = new CrashBudget();
    const t0 = 1_000_000;
    assert.deepEqual(budget.crashed(t0), { restart: true, attempt: 1 });
    assert.deepEqual(budget.crashed(t0 + 1_000), { restart: true, attempt: 2 });
    assert.deepEqual(budget.crashed(t0 + 2_000), { restart: true, attempt: 3 });
    assert.deepEqual(budget.crashed(t0 + 3_000), { restart: false, crashes: 4 });
    // After giving up, a restart the user asks for has a budget of its own.
    assert.deepEqual(budget.crashed(t0 + 4_000), { restart: true, attempt: 1 });
  });

  it('forgets crashes older than the window', () => {
    const budget = new CrashBudget(2, 60_000);
    assert.deepEqual(budget.crashed(0), { restart: true, attempt: 1 });
    assert.deepEqual(budget.crashed(30_000), { restart: true, attempt: 2 });
    assert.deepEqual(budget.crashed(61_000), { restart: true, attempt: 2 }, 'the first crash left the window');
    assert.deepEqual(budget.crashed(62_000), { restart: false, crashes: 3 });
    assert.equal(budget.describe(), 'at most 2 in 1 minute');
  });
});
