import { strict as assert } from 'node:assert';
import {
  DEFAULT_SHUTDOWN_GRACE_MS,
  graceMsOf,
  MAX_SHUTDOWN_GRACE_MS,
} from '../../src/server/services/schedulerService';

describe('ShutdownAgent grace_period (SchedulerService adapter)', () => {
  it('absent or zero is the 30 s default (RFC §8.3 SHUTTING_DOWN)', () => {
    assert.equal(DEFAULT_SHUTDOWN_GRACE_MS, 30_000);
    assert.equal(graceMsOf(undefined), 30_000);
    assert.equal(graceMsOf(null), 30_000);
    assert.equal(graceMsOf({ seconds: '0', nanos: 0 }), 30_000);
  });

  it('converts seconds (a string from proto-loader, or a number) and nanos to ms', () => {
    assert.equal(graceMsOf({ seconds: '5', nanos: 0 }), 5_000);
    assert.equal(graceMsOf({ seconds: 1, nanos: 250_000_000 }), 1_250);
    assert.equal(graceMsOf({ nanos: 2_000_000 }), 2);
    assert.equal(graceMsOf({ seconds: String(MAX_SHUTDOWN_GRACE_MS / 1000) }), MAX_SHUTDOWN_GRACE_MS);
  });

  it('refuses a negative grace and one longer than a day', () => {
    assert.throws(() => graceMsOf({ seconds: '-1' }), /grace_period may not be negative/);
    assert.throws(() => graceMsOf({ seconds: 0, nanos: -5 }), /grace_period may not be negative/);
    assert.throws(
      () => graceMsOf({ seconds: String(MAX_SHUTDOWN_GRACE_MS / 1000 + 1) }),
      /grace_period may be at most 86400 s/,
    );
  });
});
