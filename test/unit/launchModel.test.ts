// SW4RM: Launch Agent…, the launched terminals and the launched agents' rows, as plain data (src/extension/launchModel.ts,
// src/extension/launchSettings.ts).
import { strict as assert } from 'node:assert';
import type {
  AgentRecord,
  InboxStats,
  LaunchProfile,
  LaunchRecord,
  ProfileIssue,
  WorktreeInfo,
} from '../../src/core/api';
import { agentRow } from '../../src/extension/agentsModel';
import {
  NEW_WORKTREE_LABEL,
  inboxHowText,
  isTerminalOf,
  launchStateText,
  launchedRowParts,
  notInstalledText,
  notInstalledWarning,
  profileIssuesWarning,
  profilePick,
  reconcileLaunches,
  terminalTitleOf,
  worktreePicks,
} from '../../src/extension/launchModel';
import { LaunchProfileSettingsFollower } from '../../src/extension/launchSettings';
import { PROFILE_JSON_SCHEMA } from '../../src/core/launch/profiles';
import * as fs from 'node:fs';
import * as path from 'node:path';

const T0 = Date.UTC(2026, 10, 27, 21, 0, 0);
const time = (ms: number | null) => (ms === null ? 'never' : new Date(ms).toISOString().slice(11, 19));

function profile(overrides: Partial<LaunchProfile> = {}): LaunchProfile {
  return {
    id: 'claude-code',
    name: 'Claude Code',
    cli: 'claude-code',
    mode: 'terminal',
    command: ['claude'],
    env: {},
    bridge: { kind: 'mcp-config-file', path: '.mcp.json', format: 'claude-mcp-json', transport: 'http' },
    approvals: { kind: 'claude-code-hooks', via: 'command' },
    needsWorktree: true,
    instructions: { file: '.sw4rm/AGENT.md' },
    capabilities: ['code'],
    source: 'builtin',
    description: "Anthropic's coding agent",
    ...overrides,
  };
}

function record(overrides: Partial<LaunchRecord> = {}): LaunchRecord {
  return {
    agentId: 'claude-code-1',
    profileId: 'claude-code',
    profileName: 'Claude Code',
    cli: 'claude-code',
    repoId: 'app',
    worktreeId: 'claude-code-1',
    cwd: '/work/app.sw4rm-worktrees/claude-code-1',
    credentialId: 'cred-1',
    state: 'RUNNING',
    launchedAt: T0,
    updatedAt: T0,
    launches: 1,
    exitCode: null,
    error: null,
    wroteFiles: ['.mcp.json'],
    bridged: true,
    ...overrides,
  };
}

function worktree(id: string, bound: string[] = [], overrides: Partial<WorktreeInfo> = {}): WorktreeInfo {
  return {
    repoId: 'app',
    worktreeId: id,
    path: `/work/app.sw4rm-worktrees/${id}`,
    branch: `sw4rm/${id}`,
    prunable: false,
    boundAgents: bound.map((agentId) => ({ agentId, state: 'BOUND_HOME', home: true })),
    lastSnapshot: undefined,
    ...overrides,
  } as WorktreeInfo;
}

describe('Launch Agent… picker texts', () => {
  it('shows an installed profile with its description and the program found', () => {
    const pick = profilePick(profile(), { profileId: 'claude-code', resolved: '/usr/local/bin/claude', problem: null });
    assert.equal(pick.label, 'Claude Code');
    assert.equal(pick.description, 'claude-code · built in');
    assert.equal(pick.detail, "Anthropic's coding agent — runs /usr/local/bin/claude");
    assert.equal(pick.problem, null);
  });

  it("marks a profile whose program is missing, with the coordinator's words, before anything is launched", () => {
    const problem =
      '`claude` is not installed (not found on PATH). Install Claude Code: npm install -g @anthropic-ai/claude-code';
    const pick = profilePick(profile({ source: { file: '/work/app/.sw4rm/agents.json' } }), {
      profileId: 'claude-code',
      resolved: null,
      problem,
    });
    assert.equal(pick.label, '$(warning) Claude Code');
    assert.equal(pick.description, 'claude-code · /work/app/.sw4rm/agents.json');
    assert.equal(pick.problem, problem);
    assert.match(pick.detail, /not installed: `claude` is not installed/);
    assert.equal(
      notInstalledWarning(profile(), problem),
      `Claude Code cannot be launched: ${problem}. Install it, or change the profile's command in the sw4rm.agents.profiles setting or .sw4rm/agents.json.`,
    );
  });

  it('names the program when the problem does not, and says nothing is wrong when it was found', () => {
    const custom = profile({ command: ['my-agent', '--yes'] });
    assert.equal(notInstalledText(custom, { resolved: null, problem: 'not executable' }), '`my-agent`: not executable');
    assert.equal(
      notInstalledText(custom, { resolved: null, problem: null }),
      '`my-agent` is not installed (not found on PATH).',
    );
    assert.equal(notInstalledText(custom, { resolved: '/opt/my-agent', problem: null }), null);
    assert.match(
      notInstalledWarning(custom, 'not executable'),
      /^Claude Code cannot be launched: not executable\. Install it/,
    );
  });

  it("offers a new worktree first, then only the repository's worktrees no agent is bound to and whose folder exists", () => {
    const picks = worktreePicks(
      [
        worktree('free'),
        worktree('taken', ['coder-1']),
        worktree('gone', [], { prunable: true }),
        worktree('elsewhere', [], { repoId: 'lib' }),
      ],
      'app',
      '/work/app.sw4rm-worktrees',
    );
    assert.deepEqual(
      picks.map((p) => [p.label, p.description, p.worktree?.worktreeId]),
      [
        [NEW_WORKTREE_LABEL, 'in /work/app.sw4rm-worktrees', undefined],
        ['free', 'sw4rm/free · not bound', 'free'],
      ],
    );
  });

  it('warns of refused profile entries naming where and why', () => {
    const issues: ProfileIssue[] = [
      { source: 'sw4rm.agents.profiles', path: '/0/command', message: 'must be a non-empty array of strings' },
      { source: '/work/app/.sw4rm/agents.json', path: '/profiles/1/id', message: 'duplicate id "x"' },
    ];
    assert.equal(
      profileIssuesWarning(issues.slice(0, 1)),
      'SW4RM: a launch profile was refused: sw4rm.agents.profiles /0/command: must be a non-empty array of strings',
    );
    assert.equal(
      profileIssuesWarning(issues),
      'SW4RM: 2 launch profile entries were refused; the first: sw4rm.agents.profiles /0/command: must be a non-empty array of strings (all of them in the SW4RM Output channel).',
    );
  });
});

describe('launched terminals after a reload or a coordinator restart', () => {
  it("finds an agent's terminal by the plan's title, and only its own", () => {
    assert.equal(terminalTitleOf(record()), 'SW4RM: claude-code-1 (Claude Code)');
    assert.equal(isTerminalOf('SW4RM: claude-code-1 (Claude Code, renamed)', 'claude-code-1'), true);
    assert.equal(isTerminalOf('SW4RM: claude-code-10 (Claude Code)', 'claude-code-1'), false);
    assert.equal(isTerminalOf('bash', 'claude-code-1'), false);
  });

  it('adopts the terminals that survived, marks the running agents without one as exited, leaves the others alone', () => {
    const records = [
      record({ agentId: 'a-1', profileName: 'A' }),
      record({ agentId: 'a-2', profileName: 'A', state: 'STARTING' }),
      record({ agentId: 'a-3', profileName: 'A' }),
      record({ agentId: 'a-4', profileName: 'A', state: 'EXITED' }),
      record({ agentId: 'a-5', profileName: 'A', state: 'FAILED' }),
      record({ agentId: 'known', profileName: 'A' }),
    ];
    const { adopt, exited } = reconcileLaunches(
      records,
      ['bash', 'SW4RM: a-1 (A)', 'SW4RM: a-2 (B)', 'SW4RM: a-4 (A)'],
      new Set(['known']),
    );
    assert.deepEqual(
      [...adopt],
      [
        ['a-1', 'SW4RM: a-1 (A)'],
        ['a-2', 'SW4RM: a-2 (B)'],
      ],
    );
    assert.deepEqual(exited, ['a-3']);
  });

  it('gives one terminal to one agent only', () => {
    const { adopt, exited } = reconcileLaunches(
      [record({ agentId: 'x', profileName: 'P' }), record({ agentId: 'x', profileName: 'P' })],
      ['SW4RM: x (P)'],
      new Set(),
    );
    assert.equal(adopt.size, 1);
    assert.deepEqual(exited, ['x']);
  });
});

describe('launched agents in the Agents view', () => {
  const agent = {
    descriptor: {
      agentId: 'claude-code-1',
      name: 'claude-code-1',
      description: '',
      capabilities: ['code'],
      communicationClass: 'STANDARD',
      modalitiesSupported: [],
      reasoningConnectors: [],
      publicKey: '',
      registrationType: 'STANDARD_AGENT',
      maxConcurrentDelegations: 0,
    },
    state: 'RUNNING',
    registeredAt: T0,
    updatedAt: T0,
    lastHeartbeatAt: T0,
    health: {},
    presence: 'online',
  } as unknown as AgentRecord;
  const inbox: InboxStats = {
    agentId: 'claude-code-1',
    queueDepth: 3,
    capacity: 100,
    inFlight: 0,
    queued: 3,
    streaming: false,
    lastDeliveryAt: null,
  };

  it('shows the profile, the launch state and the unread messages; the tooltip says where it works and how it reads its inbox', () => {
    const parts = launchedRowParts(record({ launches: 2 }), profile(), true, time);
    const row = agentRow(agent, inbox, time, parts);
    assert.equal(row.label, 'claude-code-1 · RUNNING');
    assert.equal(row.description, 'Claude Code · terminal running · 3 unread · connected');
    const tooltip = row.tooltip.split('\n');
    for (const line of [
      'unread messages: 3',
      'launched from profile: Claude Code (claude-code)',
      'launch: terminal running · launched 2 times · since 21:00:00',
      'worktree: app/claude-code-1 (/work/app.sw4rm-worktrees/claude-code-1)',
      'terminal: open in this window',
      'reads its inbox: with the read_inbox tool of the SW4RM MCP server, when it calls it (told so in .sw4rm/AGENT.md); messages wait until then',
    ])
      assert.ok(tooltip.includes(line), `${line}\n${row.tooltip}`);
    assert.equal(parts.contextSuffix, '+launched+RUNNING');
    const named = { ...agent, descriptor: { ...agent.descriptor, name: 'Claude Code' } } as AgentRecord;
    assert.equal(agentRow(named, inbox, time, parts).label, 'Claude Code · RUNNING');
    assert.equal(
      agentRow(named, inbox, time, parts).description,
      'claude-code-1 · terminal running · 3 unread · connected',
      "the profile's name once",
    );
  });

  it('shows an exited agent with its exit code, and a failed one with its error', () => {
    assert.equal(launchStateText(record({ state: 'EXITED', exitCode: 2 })), 'exited (code 2)');
    assert.equal(launchStateText(record({ state: 'EXITED', exitCode: null })), 'exited');
    assert.equal(launchStateText(record({ state: 'STARTING' })), 'starting');
    assert.equal(launchStateText(record({ state: 'FAILED' })), 'launch failed');
    const failed = launchedRowParts(
      record({ state: 'FAILED', error: 'worktree setup failed' }),
      undefined,
      false,
      time,
    );
    assert.ok(failed.tooltip.includes('error: worktree setup failed'));
    assert.ok(failed.tooltip.includes('terminal: none in this window'));
    assert.equal(failed.contextSuffix, '+launched+FAILED');
  });

  it('says when an agent cannot read its inbox (a profile without the bridge)', () => {
    assert.equal(
      inboxHowText(profile({ bridge: { kind: 'none' } })),
      'it cannot: its profile has no MCP bridge (messages to it wait unread)',
    );
    assert.match(
      inboxHowText(profile({ instructions: { firstPromptArgs: ['{instructionsPath}'] } })),
      /told so in its first prompt/,
    );
  });

  it("keeps the menus' regexes in step with the row's context value", () => {
    // package.json: Relaunch on EXITED or FAILED launched agents, Show Terminal where this window has the terminal.
    const relaunch = /^agent\+[a-z]+\+launched\+(EXITED|FAILED)/;
    const terminal = /^agent\+.*\+terminal$/;
    assert.ok(relaunch.test('agent+disconnected+launched+EXITED'));
    assert.ok(relaunch.test('agent+online+launched+FAILED'));
    assert.ok(!relaunch.test('agent+online+launched+RUNNING+terminal'));
    assert.ok(!relaunch.test('agent+online'));
    assert.ok(terminal.test('agent+online+launched+RUNNING+terminal'));
    assert.ok(!terminal.test('agent+online+launched+RUNNING'));
  });
});

describe('sw4rm.agents.profiles follows the settings', () => {
  it("declares the setting's items with the schema the coordinator reads profiles with (descriptions aside)", () => {
    const manifest = JSON.parse(fs.readFileSync(path.resolve(__dirname, '../../../package.json'), 'utf8'));
    const setting = manifest.contributes.configuration.properties['sw4rm.agents.profiles'];
    const strip = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(strip)
        : typeof value === 'object' && value !== null
          ? Object.fromEntries(
              Object.entries(value)
                .filter(([key]) => key !== 'description')
                .map(([key, v]) => [key, strip(v)]),
            )
          : value;
    assert.equal(setting.type, 'array');
    assert.deepEqual(setting.default, []);
    assert.deepEqual(strip(setting.items), strip(JSON.parse(JSON.stringify(PROFILE_JSON_SCHEMA))));
  });

  it('gives the value at bind and at every change, and reports each distinct set of issues once', async () => {
    let value: unknown = [{ id: 'mine', command: ['x'] }];
    const given: unknown[] = [];
    const reported: ProfileIssue[][] = [];
    let answer: ProfileIssue[] = [];
    const api = {
      setLaunchProfileSettings: async (v: unknown) => {
        given.push(v);
        return answer;
      },
    };
    const follower = new LaunchProfileSettingsFollower(
      () => value,
      (issues) => reported.push([...issues]),
    );
    await follower.bind(api);
    assert.deepEqual(given, [[{ id: 'mine', command: ['x'] }]]);
    assert.equal(reported.length, 0);
    value = [{ id: 'Bad' }];
    answer = [{ source: 'sw4rm.agents.profiles', path: '/0/id', message: 'must match [a-z0-9][a-z0-9-]{0,62}' }];
    await follower.settingsChanged();
    assert.deepEqual(given.at(-1), [{ id: 'Bad' }]);
    assert.deepEqual(reported, [answer]);
    await follower.bind(api);
    assert.equal(reported.length, 1, 'the same issues are not reported again at a coordinator restart');
    value = undefined;
    answer = [];
    await follower.settingsChanged();
    assert.deepEqual(given.at(-1), [], 'an unset setting is an empty list');
    await follower.bind(undefined);
    await follower.settingsChanged();
    assert.equal(given.length, 4, 'nothing is given while no coordinator runs');
  });

  it('reports a refusal of the whole value as an issue', async () => {
    const reported: ProfileIssue[][] = [];
    const follower = new LaunchProfileSettingsFollower(
      () => 7,
      (issues) => reported.push([...issues]),
    );
    await follower.bind({
      setLaunchProfileSettings: async () => {
        throw new Error('the coordinator stopped');
      },
    });
    assert.deepEqual(reported, [
      [{ source: 'sw4rm.agents.profiles', path: '', message: 'not applied: the coordinator stopped' }],
    ]);
  });
});
