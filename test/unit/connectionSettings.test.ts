import { strict as assert } from 'node:assert';
import { connectionSettings } from '../../src/extension/connectionSettings';
import { routerSettings } from '../../src/extension/routerSettings';
import { DEFAULT_CONNECTION_LIMITS } from '../../src/server/connections';

describe('connection and memory settings', () => {
  it("defaults to the server's connection limits", () => {
    assert.deepEqual(connectionSettings({}), { limits: DEFAULT_CONNECTION_LIMITS, warnings: [] });
  });

  it('reads sw4rm.maxConnections, unauthenticatedIdleSeconds and requestBodyTimeoutSeconds', () => {
    assert.deepEqual(
      connectionSettings({ maxConnections: 200, unauthenticatedIdleSeconds: 3, requestBodyTimeoutSeconds: 120 }).limits,
      { maxConnections: 200, unauthenticatedIdleMs: 3000, requestBodyMs: 120_000 },
    );
  });

  it('clamps out-of-range values and falls back on non-numbers, naming each setting', () => {
    const { limits, warnings } = connectionSettings({
      maxConnections: 1,
      unauthenticatedIdleSeconds: 'soon',
      requestBodyTimeoutSeconds: 10_000,
    });
    assert.deepEqual(limits, { maxConnections: 10, unauthenticatedIdleMs: 10_000, requestBodyMs: 3_600_000 });
    assert.deepEqual(warnings, [
      'sw4rm.maxConnections 1 is outside 10–100000; using 10.',
      'sw4rm.unauthenticatedIdleSeconds is not a number; using 10.',
      'sw4rm.requestBodyTimeoutSeconds 10000 is outside 1–3600; using 3600.',
    ]);
  });

  it("reads sw4rm.memoryBudgetMiB into the router's memory budget, clamped to 32–4096", () => {
    const base = {
      inboxCapacity: undefined,
      deduplicationWindowSeconds: undefined,
      messageRetentionHours: undefined,
      privilegedRatePerSecond: undefined,
      payloadLimits: undefined,
    };
    assert.equal(routerSettings(base).options.memoryBudgetBytes, 128 * 1024 * 1024);
    assert.equal(routerSettings({ ...base, memoryBudgetMiB: 512 }).options.memoryBudgetBytes, 512 * 1024 * 1024);
    const low = routerSettings({ ...base, memoryBudgetMiB: 8 });
    assert.equal(low.options.memoryBudgetBytes, 32 * 1024 * 1024);
    assert.deepEqual(low.warnings, ['sw4rm.memoryBudgetMiB 8 is outside 32–4096; using 32.']);
  });
});
