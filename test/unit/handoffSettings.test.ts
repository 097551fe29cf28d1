import { strict as assert } from 'node:assert';
import { DEFAULT_HANDOFF_OPTIONS } from '../../src/core/api';
import { handoffOptionsOf, handoffSettings } from '../../src/extension/handoffSettings';

describe('sw4rm.handoffs.* settings', () => {
  it('none given: the defaults (300 s, rerouting on, no operator routing, 30 days)', () => {
    const s = handoffSettings({});
    assert.deepEqual(s.warnings, []);
    assert.deepEqual(handoffOptionsOf(s), {
      defaultTimeoutMs: DEFAULT_HANDOFF_OPTIONS.defaultTimeoutMs,
      reroute: true,
      routeToOperator: false,
      retentionDays: 30,
    });
    assert.equal(DEFAULT_HANDOFF_OPTIONS.defaultTimeoutMs, 300_000);
  });

  it('takes valid values; clamps numbers out of range and ignores wrong types, naming each', () => {
    assert.deepEqual(
      handoffSettings({ defaultTimeoutSeconds: 90, reroute: false, routeToOperator: true, retentionDays: 2 }).options,
      { defaultTimeoutMs: 90_000, reroute: false, routeToOperator: true, retentionDays: 2 },
    );
    const s = handoffSettings({ defaultTimeoutSeconds: 0, reroute: 'yes', routeToOperator: 1, retentionDays: 99_999 });
    assert.deepEqual(s.options, {
      defaultTimeoutMs: 1_000,
      reroute: true,
      routeToOperator: false,
      retentionDays: 3650,
    });
    assert.deepEqual(s.warnings, [
      'sw4rm.handoffs.defaultTimeoutSeconds 0 is outside 1–86400; using 1.',
      'sw4rm.handoffs.reroute is not true or false; using true.',
      'sw4rm.handoffs.routeToOperator is not true or false; using false.',
      'sw4rm.handoffs.retentionDays 99999 is outside 1–3650; using 3650.',
    ]);
    assert.deepEqual(handoffSettings({ defaultTimeoutSeconds: 1.5 }).warnings, [
      'sw4rm.handoffs.defaultTimeoutSeconds must be a whole number; using 300.',
    ]);
  });
});
