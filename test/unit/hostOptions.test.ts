import { strict as assert } from 'node:assert';
import { connectionSettings } from '../../src/extension/connectionSettings';
import { hostOptionsOf } from '../../src/extension/hostOptions';
import { routerSettings } from '../../src/extension/routerSettings';
import type { CoordinatorSettings } from '../../src/extension/settings';
import { worktreeSettings } from '../../src/extension/worktreeSettings';
import { schedulerSettings } from '../../src/extension/schedulerSettings';
import { toolSettings } from '../../src/extension/toolSettings';
import { negotiationSettings } from '../../src/extension/negotiationSettings';
import { handoffSettings } from '../../src/extension/handoffSettings';
import { agentInboxSettings } from '../../src/extension/agentInboxSettings';

/** Settings with a value other than the default in every group, as readSettings would produce them. */
function settings(): CoordinatorSettings {
  return {
    port: 50099,
    bridgePort: 50098,
    host: '0.0.0.0',
    auth: 'none',
    dataDir: '/data/store',
    legacyDataDir: undefined,
    heartbeatDebounceMs: 7_000,
    autoStart: true,
    router: routerSettings({
      inboxCapacity: 17,
      deduplicationWindowSeconds: 60,
      messageRetentionHours: 5,
      storeBudgetMiB: 300,
      privilegedRatePerSecond: 4,
      payloadLimits: {},
    }),
    connections: connectionSettings({
      maxConnections: 33,
      unauthenticatedIdleSeconds: 11,
      requestBodyTimeoutSeconds: 13,
    }),
    worktrees: worktreeSettings({ folder: '/elsewhere/worktrees', setupCopy: ['.env*'], snapshotRetentionDays: 9 }),
    scheduler: schedulerSettings({
      maxParallelInstances: { Echo: 2 },
      defaultMaxParallelInstances: 5,
      conflictThreshold: 0.4,
      onUnavailableEngine: 'escalate',
    }),
    tools: toolSettings({ processEnabled: true, processAcceptUnenforcedNetworkPolicy: true }),
    negotiation: negotiationSettings({ basePolicy: { max_rounds: 4 }, tieBreak: 'abort' }),
    handoffs: handoffSettings({ defaultTimeoutSeconds: 42, reroute: false, routeToOperator: true, retentionDays: 7 }),
    agentInbox: agentInboxSettings({ inboxAckTimeoutMinutes: 90 }),
  };
}

const context = {
  dataDir: '/data/moved',
  protosDir: '/ext/protos',
  port: 50100,
  hitl: undefined,
  onEvent: undefined,
  workspaceFolders: ['/ws/app'],
  trusted: false,
};

describe("the editor's host options (every host setting reaches CoordinatorHost.start)", () => {
  it('passes the server, router, connection and worktree settings, and the start context', () => {
    const s = settings();
    const options = hostOptionsOf(s, context);
    assert.equal(options.host, '0.0.0.0');
    assert.equal(options.auth, 'none');
    assert.equal(options.heartbeatDebounceMs, 7_000);
    assert.equal(options.port, 50100, 'the port of the start (after a conflict), not the setting');
    assert.equal(options.bridgePort, 50098, 'sw4rm.bridge.port reaches the host');
    assert.equal(options.dataDir, '/data/moved', 'the folder the store was moved to');
    assert.equal(options.protosDir, '/ext/protos');
    assert.deepEqual(options.workspaceFolders, ['/ws/app']);
    assert.deepEqual(options.router, s.router.options);
    assert.deepEqual(
      options.connections,
      s.connections.limits,
      'sw4rm.maxConnections and the idle/body timeouts reach the server',
    );
    assert.equal(options.connections?.maxConnections, 33);
    assert.equal(options.worktreesFolder, '/elsewhere/worktrees');
    assert.deepEqual(options.worktreeOperations, {
      setup: s.worktrees.setup,
      snapshotRetentionDays: 9,
      trustRepositoryCommand: false,
    });
    assert.deepEqual(options.scheduler, {
      maxParallelInstances: { Echo: 2 },
      defaultMaxParallelInstances: 5,
      conflictThreshold: 0.4,
      unavailableEngine: 'escalate',
    });
    assert.deepEqual(
      options.tools,
      { process: { enabled: true, acceptUnenforcedNetworkPolicy: true } },
      'sw4rm.tools.process.* reach the host',
    );
    assert.deepEqual(
      options.negotiation,
      { base: { maxRounds: 4 }, tieBreak: 'abort' },
      'sw4rm.negotiation.* reach the host',
    );
    assert.deepEqual(
      options.handoffs,
      { defaultTimeoutMs: 42_000, reroute: false, routeToOperator: true, retentionDays: 7 },
      'sw4rm.handoffs.* reach the host',
    );
    assert.deepEqual(
      options.launches,
      { bridgedAckTimeoutMs: 90 * 60_000 },
      'sw4rm.agents.inboxAckTimeoutMinutes reaches the host',
    );
  });

  it('uses every field of the settings that configures the host', () => {
    // A new settings group must be passed on (or listed here as read elsewhere): the connection limits were once read
    // and never handed to the host.
    const readElsewhere = new Set(['port', 'dataDir', 'legacyDataDir', 'autoStart']);
    const passed = JSON.stringify(hostOptionsOf(settings(), context));
    for (const [key, value] of Object.entries(settings())) {
      if (readElsewhere.has(key)) continue;
      const group = value as {
        options?: unknown;
        limits?: unknown;
        folder?: unknown;
        maxParallelInstances?: unknown;
        process?: unknown;
        settings?: unknown;
      };
      const part =
        group && typeof group === 'object'
          ? (group.options ??
            group.limits ??
            group.folder ??
            group.maxParallelInstances ??
            group.process ??
            group.settings)
          : value;
      assert.ok(passed.includes(JSON.stringify(part).slice(1, -1)), `settings.${key} reaches the host options`);
    }
  });
});
