import { strict as assert } from 'node:assert';
import { ManualClock } from '../../src/core/clock';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PAYLOAD_LIMITS } from '../../src/core/limits';
import {
  ContextKeys,
  Commands,
  METRICS_SCHEME,
  SETTINGS_SECTION,
  Settings,
  Views,
} from '../../src/extension/contributions';
import { metricsDocumentText, metricsExportFileName } from '../../src/extension/metricsModel';
import {
  NO_FILTER,
  coreFilter,
  describeFilter,
  exportFileName,
  valueCounts,
} from '../../src/extension/deadLetterFilter';
import { routerSettings } from '../../src/extension/routerSettings';
import { DEFAULT_ROUTER_OPTIONS } from '../../src/core/router/router';
import { KeyedThrottle } from '../../src/extension/throttle';

const root = path.resolve(__dirname, '../../..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const extensionSource = fs
  .readdirSync(path.join(root, 'src/extension'), { recursive: true })
  .filter((file) => String(file).endsWith('.ts'))
  .map((file) => fs.readFileSync(path.join(root, 'src/extension', String(file)), 'utf8'))
  .join('\n');

describe('contributions (package.json ⇄ src/extension/contributions.ts)', () => {
  it('declares exactly the commands of the ids module', () => {
    const declared = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
    assert.deepEqual(declared, Object.values(Commands).sort());
  });

  it('registers every declared command in the extension', () => {
    for (const [key, id] of Object.entries(Commands)) {
      assert.match(
        extensionSource,
        new RegExp(`registerCommand\\(\\s*Commands\\.${key}\\b`),
        `command ${id} is declared but never registered`,
      );
    }
  });

  it('declares the view container and the Agents view with the ids the code uses', () => {
    assert.ok(manifest.contributes.viewsContainers.activitybar.some((c: { id: string }) => c.id === Views.container));
    assert.ok(manifest.contributes.views[Views.container].some((v: { id: string }) => v.id === Views.agents));
  });

  it('declares the Dead Letters view in the SW4RM container, with a welcome text for every state', () => {
    assert.ok(
      manifest.contributes.views[Views.container].some(
        (v: { id: string; name: string }) => v.id === Views.deadLetters && v.name === 'Dead Letters',
      ),
    );
    const welcome = manifest.contributes.viewsWelcome.filter((w: { view: string }) => w.view === Views.deadLetters);
    assert.equal(welcome.length, 3);
  });

  it('says in every view of the SW4RM container that the coordinator is not running, and offers Start, while it is stopped', () => {
    for (const view of manifest.contributes.views[Views.container] as Array<{ id: string }>) {
      const stopped = manifest.contributes.viewsWelcome.filter(
        (w: { view: string; when?: string }) => w.view === view.id && w.when === `!${ContextKeys.running}`,
      );
      assert.deepEqual(
        stopped.map((w: { contents: string }) => w.contents),
        [`The coordinator is not running.\n[Start Coordinator](command:${Commands.start})`],
        view.id,
      );
      const others = manifest.contributes.viewsWelcome.filter(
        (w: { view: string; when?: string }) => w.view === view.id && w.when !== `!${ContextKeys.running}`,
      );
      for (const welcome of others)
        assert.match(
          welcome.when ?? '',
          new RegExp(`^${ContextKeys.running.replace('.', '\\.')}\\b`),
          `${view.id}: shown only while running`,
        );
    }
  });

  it('speaks to the user in view texts, without citing RFC sections; the Agents welcome says what terminals already carry', () => {
    for (const welcome of manifest.contributes.viewsWelcome as Array<{ view: string; contents: string }>) {
      assert.doesNotMatch(welcome.contents, /RFC|§/, welcome.view);
    }
    const agents = manifest.contributes.viewsWelcome.find(
      (w: { view: string; when?: string }) => w.view === Views.agents && w.when === ContextKeys.running,
    );
    for (const expected of [
      'Terminals opened in this window since the coordinator started already carry the agent environment',
      'SW4RM_*_ADDR',
      'SW4RM_TOKEN',
      'enrolment credential',
      '[Open a Terminal](command:workbench.action.terminal.new)',
      `[Copy Agent Environment](command:${Commands.copyAgentEnvironment})`,
    ]) {
      assert.ok(agents.contents.includes(expected), expected);
    }
  });

  it('shows the router metrics as a read-only document with Copy and Export on its title bar', () => {
    const titleBar = manifest.contributes.menus['editor/title'].filter(
      (e: { when: string }) => e.when === `resourceScheme == ${METRICS_SCHEME}`,
    );
    assert.deepEqual(
      titleBar.map((e: { command: string }) => e.command),
      [Commands.copyMetrics, Commands.exportMetrics],
    );
    assert.match(extensionSource, /registerTextDocumentContentProvider\(METRICS_SCHEME, this\)/);
    assert.doesNotMatch(extensionSource, /openTextDocument\(\{\s*content/, 'no untitled documents');
  });

  it('writes the metrics as Prometheus text under a comment saying what and when, or that the coordinator is not running', () => {
    const at = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
    const metrics = '# HELP router_in_flight x\n# TYPE router_in_flight gauge\nrouter_in_flight{agent_id="a"} 1\n';
    const document = metricsDocumentText(metrics, at);
    assert.ok(
      document.startsWith('# SW4RM router metrics per agent, read 2026-01-02T03:04:05.678Z.\n# Refreshes while open'),
    );
    assert.ok(document.endsWith(metrics));
    assert.ok(
      document
        .split('\n')
        .filter(Boolean)
        .every((line) => line.startsWith('#') || /^[a-z_]+\{.*\} \d/.test(line)),
      'every line is a comment or a sample',
    );
    assert.equal(
      metricsDocumentText(metrics, at, 'export'),
      `# SW4RM router metrics per agent, read 2026-01-02T03:04:05.678Z.\n${metrics}`,
    );
    assert.match(metricsDocumentText(undefined, at), /^# SW4RM router metrics: the coordinator is not running/);
    assert.equal(metricsExportFileName(at), 'sw4rm-router-metrics-2026-01-02T03-04-05Z.prom');
  });

  it('menus name only declared commands, views and context keys', () => {
    const declared = new Set(Object.values(Commands));
    const knownKeys = [...Object.values(ContextKeys), 'view', 'viewItem', 'resourceScheme'];
    for (const [menu, entries] of Object.entries(
      manifest.contributes.menus as Record<string, Array<{ command: string; when?: string }>>,
    )) {
      for (const entry of entries) {
        assert.ok(declared.has(entry.command as never), `${menu}: ${entry.command} is not declared`);
        const when = entry.when ?? '';
        for (const [, scheme] of when.matchAll(/resourceScheme == ([\w.-]+)/g))
          assert.equal(scheme, METRICS_SCHEME, `${menu}: ${entry.command} names an unknown scheme`);
        const keys =
          when
            .replace(/\/[^/]*\//g, '')
            .replace(/resourceScheme == [\w.-]+/g, 'resourceScheme')
            .match(/[A-Za-z][\w.]*/g) ?? [];
        for (const key of keys) {
          if (Object.values(Views).includes(key as never)) continue;
          assert.ok(knownKeys.includes(key), `${menu}: ${entry.command} uses an unknown context key '${key}'`);
        }
      }
    }
    const viewTitle = manifest.contributes.menus['view/title']
      .filter((e: { when: string }) => e.when.includes(Views.deadLetters))
      .map((e: { command: string }) => e.command);
    assert.deepEqual(
      viewTitle.sort(),
      [
        Commands.clearDeadLetterFilter,
        Commands.exportDeadLetters,
        Commands.filterDeadLetters,
        Commands.refreshDeadLetters,
      ].sort(),
    );
  });

  it('offers Requeue on dead letters that were not requeued yet, inline and in the context menu', () => {
    const entries = manifest.contributes.menus['view/item/context'].filter(
      (e: { command: string }) => e.command === Commands.requeueDeadLetter,
    );
    assert.deepEqual(entries.map((e: { group: string }) => e.group.split('@')[0]).sort(), ['1_requeue', 'inline']);
    const regex = /viewItem =~ \/(.*)\//.exec(entries[0].when)![1];
    assert.ok(new RegExp(regex).test('deadLetter'));
    assert.ok(!new RegExp(regex).test('deadLetter+requeued'));
  });

  it('declares exactly the settings the code reads', () => {
    const declared = Object.keys(manifest.contributes.configuration.properties).sort();
    assert.deepEqual(
      declared,
      Object.values(Settings)
        .map((key) => `${SETTINGS_SECTION}.${key}`)
        .sort(),
    );
  });

  it('runs only in trusted workspaces and ships an allow-list .vscodeignore', () => {
    assert.equal(manifest.capabilities.untrustedWorkspaces.supported, false);
    const ignore = fs
      .readFileSync(path.join(root, '.vscodeignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim());
    assert.equal(
      ignore.find((l) => l && !l.startsWith('#')),
      '**',
      'the first rule must exclude everything',
    );
    // BridgeEndpoints.stdioCommand runs it from the installed extension's dist/ (README, "The MCP bridge").
    assert.ok(ignore.includes('!dist/sw4rm-mcp.js'), "the MCP bridge's stdio entry point is packaged");
    // BridgeEndpoints.hookCommand (the approval hooks) and the launched terminals' starter run from there too.
    assert.ok(ignore.includes('!dist/sw4rm-hook.js'), 'the approval hook command is packaged');
    assert.ok(ignore.includes('!dist/sw4rm-launch.js'), "the launched agents' starter is packaged");
    // Every worker thread esbuild bundles (schema compiles, definition files, the debate scorer…) is found beside the
    // bundle: left out, the work would run on the extension host's event loop again.
    const workers = [
      ...fs.readFileSync(path.join(root, 'esbuild.mjs'), 'utf8').matchAll(/outfile: '(dist\/\w+Worker\.js)'/g),
    ].map((m) => m[1]);
    assert.ok(workers.length >= 4, workers.join(', '));
    assert.deepEqual(
      workers.filter((w) => !ignore.includes(`!${w}`)),
      [],
      'every worker bundle is packaged',
    );
  });
});

describe('router settings (sw4rm.inboxCapacity, deduplicationWindowSeconds, messageRetentionHours, privilegedRatePerSecond, payloadLimits)', () => {
  const defaults = {
    inboxCapacity: undefined,
    deduplicationWindowSeconds: undefined,
    messageRetentionHours: undefined,
    privilegedRatePerSecond: undefined,
    payloadLimits: undefined,
  };

  it('declares the defaults the router uses', () => {
    const props = manifest.contributes.configuration.properties;
    assert.equal(props['sw4rm.inboxCapacity'].default, 10);
    assert.equal(props['sw4rm.deduplicationWindowSeconds'].default, 3600);
    assert.equal(props['sw4rm.messageRetentionHours'].default, 24);
    assert.equal(props['sw4rm.privilegedRatePerSecond'].default, 50);
    assert.deepEqual(props['sw4rm.payloadLimits'].default, {});
    const { options, warnings } = routerSettings({
      inboxCapacity: 10,
      deduplicationWindowSeconds: 3600,
      messageRetentionHours: 24,
      privilegedRatePerSecond: 50,
      payloadLimits: {},
    });
    assert.deepEqual(warnings, []);
    assert.equal(options.capacity, 10);
    assert.equal(options.dedupWindowMs, 3_600_000);
    assert.equal(options.messageRetentionMs, DEFAULT_ROUTER_OPTIONS.messageRetentionMs);
    assert.equal(options.lanes?.privilegedRatePerSecond, 50);
    assert.deepEqual(options.payloadLimits, PAYLOAD_LIMITS);
  });

  it('passes the settings on, keeping the other lane options', () => {
    const { options } = routerSettings({
      inboxCapacity: 3,
      deduplicationWindowSeconds: 60,
      messageRetentionHours: 2,
      privilegedRatePerSecond: 5,
      payloadLimits: { DATA: 1024, TOOL_RESULT: 2048 },
    });
    assert.equal(options.capacity, 3);
    assert.equal(options.dedupWindowMs, 60_000);
    assert.equal(options.messageRetentionMs, 2 * 3_600_000);
    assert.equal(options.lanes?.privilegedRatePerSecond, 5);
    assert.ok(options.lanes?.privilegedBurst && options.lanes.weights.PRIVILEGED);
    assert.deepEqual(options.payloadLimits, { ...PAYLOAD_LIMITS, DATA: 1024, TOOL_RESULT: 2048 });
  });

  it('caps payload limits at 16 MiB, ignores unknown types and bad values, and says so', () => {
    const { options, warnings } = routerSettings({
      ...defaults,
      payloadLimits: { DATA: 1e12, data: 5, CONTROL: -1, NOTIFICATION: 'big' },
    });
    assert.equal(options.payloadLimits?.DATA, 16 * 1024 * 1024);
    assert.equal(options.payloadLimits?.CONTROL, PAYLOAD_LIMITS.CONTROL);
    assert.equal(options.payloadLimits?.NOTIFICATION, PAYLOAD_LIMITS.NOTIFICATION);
    assert.ok(!('data' in (options.payloadLimits ?? {})));
    assert.equal(warnings.length, 4);
  });

  it('clamps numbers out of range to their bounds', () => {
    const { options, warnings } = routerSettings({
      inboxCapacity: 0,
      deduplicationWindowSeconds: 1e12,
      messageRetentionHours: 1e6,
      privilegedRatePerSecond: -3,
      payloadLimits: [],
    });
    assert.equal(options.capacity, 1);
    assert.equal(options.dedupWindowMs, 30 * 86_400 * 1000);
    assert.equal(options.messageRetentionMs, 365 * 24 * 3_600_000);
    assert.equal(options.lanes?.privilegedRatePerSecond, 50);
    assert.deepEqual(options.payloadLimits, PAYLOAD_LIMITS);
    assert.equal(warnings.length, 5);
  });
});

describe('dead letter filter', () => {
  const now = Date.UTC(2025, 0, 2, 3, 4, 5, 678);

  it('describes the active filter and nothing without one', () => {
    assert.equal(describeFilter(NO_FILTER), undefined);
    assert.equal(
      describeFilter({
        errorCode: 'AGENT_UNAVAILABLE',
        producerId: 'p',
        recipientId: 'c',
        timeRange: 'hour',
        includeRequeued: true,
      }),
      'AGENT_UNAVAILABLE · from p · to c · last hour · with requeued',
    );
  });

  it('resolves the time range against the clock', () => {
    assert.deepEqual(coreFilter({ ...NO_FILTER, timeRange: 'day', producerId: 'p' }, now, 5), {
      producerId: 'p',
      since: now - 86_400_000,
      includeRequeued: false,
      limit: 5,
    });
    assert.deepEqual(coreFilter(NO_FILTER, now), { includeRequeued: false });
  });

  it('counts the values present, most frequent first', () => {
    const letters = ['B', 'A', 'B'].map((errorCode) => ({ errorCode }) as never);
    assert.deepEqual(
      valueCounts(letters, (l: { errorCode: string }) => l.errorCode),
      [
        { value: 'B', count: 2 },
        { value: 'A', count: 1 },
      ],
    );
  });

  it('names export files by time, without characters file systems refuse', () => {
    assert.equal(exportFileName(now), 'sw4rm-dead-letters-2025-01-02T03-04-05Z.json');
  });
});

describe('KeyedThrottle', () => {
  it('runs once per key per interval however many times it is asked, and nothing after dispose', () => {
    const clock = new ManualClock();
    const runs: string[] = [];
    const throttle = new KeyedThrottle<string>(20, (key) => runs.push(key), clock);
    for (let i = 0; i < 50; i++) throttle.schedule('a');
    throttle.schedule('b');
    clock.advance(19);
    assert.deepEqual(runs, [], 'nothing runs before the interval');
    clock.advance(1);
    assert.deepEqual(runs.sort(), ['a', 'b']);
    throttle.schedule('a');
    throttle.dispose();
    clock.advance(100);
    assert.deepEqual(runs.sort(), ['a', 'b']);
  });
});
