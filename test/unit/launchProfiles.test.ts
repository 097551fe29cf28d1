import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { profileAvailability, resolveProgram, type ProgramLookup } from '../../src/core/launch/availability';
import { BUILTIN_PROFILES } from '../../src/core/launch/builtinProfiles';
import type { LaunchProfile } from '../../src/core/launch/model';
import {
  mergeProfiles,
  parseProfilesFile,
  parseSettingsProfiles,
  readRepositoryProfiles,
  relativePathRefusal,
} from '../../src/core/launch/profiles';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const builtin = (id: string): LaunchProfile => BUILTIN_PROFILES.find((p) => p.id === id)!;

describe('launch profiles (settings and .sw4rm/agents.json)', () => {
  it('ships documented built-in profiles for Claude Code, Codex, Gemini, Aider, Copilot and a custom template, each valid', () => {
    assert.deepEqual(
      BUILTIN_PROFILES.map((p) => p.id),
      [
        'claude-code',
        'codex',
        'gemini',
        'aider',
        'copilot',
        'claude-session',
        'codex-session',
        'gemini-session',
        'copilot-session',
        'custom',
      ],
    );
    for (const p of BUILTIN_PROFILES) {
      assert.ok(p.description.length > 20, `${p.id} is described`);
      assert.equal(p.source, 'builtin');
      assert.equal(p.needsWorktree, true);
      // Each built-in profile passes the checks a person's profile gets (the custom template aside: it has no command).
      if (p.id === 'custom') continue;
      const { source: _s, ...written } = p;
      const parsed = parseSettingsProfiles([written]);
      assert.deepEqual(parsed.issues, [], p.id);
      assert.deepEqual(parsed.profiles[0], { ...p, source: 'settings' });
    }
    assert.deepEqual(builtin('claude-code').bridge, {
      kind: 'mcp-config-file',
      path: '.mcp.json',
      format: 'claude-mcp-json',
      transport: 'http',
    });
    assert.deepEqual(builtin('codex').bridge, {
      kind: 'args',
      args: ['-c', 'mcp_servers.sw4rm.url="{mcpUrl}"', '-c', 'mcp_servers.sw4rm.bearer_token_env_var="SW4RM_TOKEN"'],
    });
    assert.equal(builtin('codex').approvals.kind, 'none');
    assert.equal(builtin('aider').bridge.kind, 'none');
    assert.deepEqual(builtin('aider').instructions.firstPromptArgs, ['--read', '{instructionsPath}']);
  });

  it("completes a profile naming a known CLI with that CLI's wiring, and a bare command as a custom one", () => {
    const { profiles, issues } = parseSettingsProfiles([
      { id: 'claude-opus', cli: 'claude-code', command: ['claude', '--model', 'opus'] },
      { id: 'script', command: ['/usr/local/bin/my-agent'] },
    ]);
    assert.deepEqual(issues, []);
    const [opus, script] = profiles;
    assert.equal(opus.name, 'claude-opus');
    assert.deepEqual(opus.bridge, builtin('claude-code').bridge);
    assert.deepEqual(opus.approvals, builtin('claude-code').approvals);
    assert.deepEqual(opus.instructions, builtin('claude-code').instructions);
    assert.deepEqual(opus.capabilities, ['code']);
    assert.equal(opus.source, 'settings');
    assert.deepEqual(script, {
      id: 'script',
      name: 'script',
      cli: 'custom',
      mode: 'terminal',
      command: ['/usr/local/bin/my-agent'],
      env: {},
      bridge: { kind: 'none' },
      approvals: { kind: 'none' },
      needsWorktree: true,
      instructions: { file: '.sw4rm/AGENT.md' },
      capabilities: [],
      source: 'settings',
      description: 'script: `/usr/local/bin/my-agent` (from the settings)',
    });
  });

  it("session profiles: built in for the CLIs that speak ACP; a person's session profile takes no bridge, approvals or first prompt", () => {
    for (const id of ['claude-session', 'codex-session', 'gemini-session', 'copilot-session']) {
      const p = builtin(id);
      assert.equal(p.mode, 'session', id);
      assert.equal(p.bridge.kind, 'none', id);
      assert.equal(p.approvals.kind, 'none', id);
      assert.equal(p.instructions.firstPromptArgs, undefined, id);
    }
    assert.deepEqual(builtin('claude-session').command, ['claude-agent-acp']);
    assert.deepEqual(builtin('gemini-session').command, ['gemini', '--experimental-acp']);
    assert.deepEqual(builtin('copilot-session').command, ['copilot', '--acp']);
    const { profiles, issues } = parseSettingsProfiles([
      { id: 'my-claude', cli: 'claude-code', mode: 'session', command: ['claude-agent-acp'] },
      { id: 'my-acp', mode: 'session', command: ['/opt/acp-agent'] },
      {
        id: 'wired',
        cli: 'claude-code',
        mode: 'session',
        command: ['claude-agent-acp'],
        bridge: { kind: 'mcp-config-file', path: '.mcp.json', format: 'claude-mcp-json', transport: 'http' },
        approvals: { kind: 'claude-code-hooks' },
        instructions: { file: '.sw4rm/AGENT.md', firstPromptArgs: ['hello'] },
      },
      { id: 'bad-mode', mode: 'daemon', command: ['x'] },
    ]);
    assert.deepEqual(
      profiles.map((p) => [p.id, p.mode, p.bridge.kind, p.approvals.kind, p.instructions.file]),
      [
        ['my-claude', 'session', 'none', 'none', '.sw4rm/AGENT.md'],
        ['my-acp', 'session', 'none', 'none', '.sw4rm/AGENT.md'],
      ],
    );
    assert.deepEqual(
      issues.map((i) => i.path),
      ['/2/bridge', '/2/approvals', '/2/instructions/firstPromptArgs', '/3/mode'],
    );
    assert.match(issues[0].message, /ACP session's MCP server/);
  });

  it('refuses each bad profile with the JSON pointer of the offending value and keeps the good ones', () => {
    const { profiles, issues } = parseSettingsProfiles([
      { id: 'Bad Id', command: ['x'] },
      { id: 'ok', command: ['x'] },
      { id: 'no-command' },
      { id: 'extra', command: ['x'], shell: true },
      { id: 'env', command: ['x'], env: { SW4RM_TOKEN: 'mine', 'not a name': 'v', GOOD: 'v' } },
      {
        id: 'bridge',
        command: ['x'],
        bridge: { kind: 'mcp-config-file', path: '../outside.json', format: 'claude-mcp-json', transport: 'http' },
      },
      { id: 'bridge2', command: ['x'], bridge: { kind: 'mcp-config-file', path: '.mcp.json' } },
      { id: 'cli', cli: 'cursor', command: ['x'] },
      { id: 'empty', command: [' '] },
      { id: 'ok', command: ['y'] },
      'not an object',
    ]);
    assert.deepEqual(
      profiles.map((p) => p.id),
      ['ok'],
    );
    const at = (pointer: string) => issues.filter((i) => i.path === pointer).map((i) => i.message);
    assert.deepEqual(at('/0/id'), ['must match ^[a-z0-9][a-z0-9-]{0,62}$']);
    assert.deepEqual(at('/2/command'), ["'command' is required"]);
    assert.deepEqual(at('/3/shell'), ["'shell' is not a profile field here"]);
    assert.ok(
      issues.some((i) => i.path === '/4/env/not a name'),
      JSON.stringify(issues),
    );
    assert.deepEqual(at('/5/bridge/path'), ['must not contain empty, . or .. segments']);
    assert.deepEqual(at('/6/bridge/format'), ["'format' is required"]);
    assert.deepEqual(at('/6/bridge/transport'), ["'transport' is required"]);
    assert.match(at('/7/cli')[0], /must be one of "claude-code"/);
    assert.deepEqual(at('/8/command/0'), ['the program must not be empty']);
    assert.deepEqual(at('/9/id'), ["profile 'ok' is listed twice in this source; the first one is used"]);
    assert.deepEqual(at('/10'), ['must be object']);
    assert.ok(issues.every((i) => i.source === 'settings'));
    // A profile setting only SW4RM_* is refused even when the rest is fine.
    const env = parseSettingsProfiles([
      { id: 'env', command: ['x'], env: { SW4RM_TOKEN: 'mine', ELECTRON_RUN_AS_NODE: '0', GOOD: 'v' } },
    ]);
    assert.deepEqual(env.profiles, []);
    assert.deepEqual(
      env.issues.map((i) => i.path),
      ['/0/env/SW4RM_TOKEN', '/0/env/ELECTRON_RUN_AS_NODE'],
    );
    assert.deepEqual(parseSettingsProfiles({ id: 'x' }).issues, [
      { source: 'settings', path: '', message: 'sw4rm.agents.profiles must be an array of profile objects' },
    ]);
    assert.deepEqual(parseSettingsProfiles(undefined), { profiles: [], issues: [] });
  });

  it('needsWorktree false: nothing is written into the main checkout, so file wiring is refused and omitted wiring is none', () => {
    const { profiles, issues } = parseSettingsProfiles([
      { id: 'in-place', cli: 'claude-code', command: ['claude'], needsWorktree: false },
      {
        id: 'in-place-file',
        cli: 'claude-code',
        command: ['claude'],
        needsWorktree: false,
        bridge: builtin('claude-code').bridge,
        approvals: { kind: 'claude-code-hooks' },
      },
      {
        id: 'in-place-prompt',
        command: ['x'],
        needsWorktree: false,
        instructions: { firstPromptArgs: ['read {instructionsPath}'] },
      },
    ]);
    assert.deepEqual(
      profiles.map((p) => [p.id, p.bridge.kind, p.approvals.kind, p.instructions]),
      [['in-place', 'none', 'none', {}]],
    );
    assert.deepEqual(
      issues.map((i) => i.path),
      ['/1/bridge', '/1/approvals', '/2/instructions/firstPromptArgs/0'],
    );
    assert.match(issues[0].message, /writes nothing into the main checkout/);
  });

  it('refuses Claude Code approvals through an HTTP hook (Claude Code runs the tool when one fails)', () => {
    const { profiles, issues } = parseSettingsProfiles([
      { id: 'c', cli: 'claude-code', command: ['claude'], approvals: { kind: 'claude-code-hooks', via: 'http' } },
    ]);
    assert.deepEqual(profiles, []);
    assert.deepEqual(
      issues.map((i) => i.path),
      ['/0/approvals/via'],
    );
    assert.match(issues[0].message, /runs the tool when an HTTP hook fails/);
    assert.deepEqual(
      parseSettingsProfiles([
        { id: 'c', cli: 'claude-code', command: ['claude'], approvals: { kind: 'claude-code-hooks', via: 'command' } },
      ]).issues,
      [],
    );
  });

  it('reads .sw4rm/agents.json ({"profiles": [...]}) with issues placed under /profiles, and a missing file as none', () => {
    const file = '/repo/.sw4rm/agents.json';
    const parsed = parseProfilesFile(
      JSON.stringify({
        profiles: [{ id: 'reviewer', cli: 'gemini', command: ['gemini'], capabilities: ['review'] }, { id: 'x' }],
        other: 1,
      }),
      file,
    );
    assert.deepEqual(
      parsed.profiles.map((p) => [p.id, p.source, p.capabilities]),
      [['reviewer', { file }, ['review']]],
    );
    assert.deepEqual(parsed.issues, [
      { source: file, path: '/other', message: '\'other\' is not a field of agents.json (only "profiles")' },
      { source: file, path: '/profiles/1/command', message: "'command' is required" },
    ]);
    assert.match(parseProfilesFile('{"profiles": [', file).issues[0].message, /^not valid JSON/);
    assert.deepEqual(parseProfilesFile('[]', file).issues[0].message, 'must be a JSON object {"profiles": [...]}');

    const dir = makeTempDir('sw4rm-profiles-');
    try {
      assert.deepEqual(readRepositoryProfiles(dir), { profiles: [], issues: [] });
      fs.mkdirSync(path.join(dir, '.sw4rm'));
      fs.writeFileSync(
        path.join(dir, '.sw4rm', 'agents.json'),
        JSON.stringify({ profiles: [{ id: 'claude-code', command: ['claude', '--verbose'], cli: 'claude-code' }] }),
      );
      const read = readRepositoryProfiles(dir);
      assert.deepEqual(read.issues, []);
      assert.deepEqual(read.profiles[0].source, { file: path.join(dir, '.sw4rm', 'agents.json') });
      // Later sources replace earlier ones by id, in the earlier one's place.
      const merged = mergeProfiles(BUILTIN_PROFILES, read.profiles);
      assert.deepEqual(
        merged.map((p) => p.id),
        BUILTIN_PROFILES.map((p) => p.id),
      );
      assert.deepEqual(merged[0].command, ['claude', '--verbose']);
    } finally {
      removeTempDir(dir);
    }
  });

  it('accepts only relative paths inside the worktree for the files a launch writes', () => {
    assert.equal(relativePathRefusal('.mcp.json'), undefined);
    assert.equal(relativePathRefusal('.sw4rm/mcp.json'), undefined);
    for (const bad of ['/etc/x', 'C:/x', 'a/../b', './x', 'a//b', '.git/config', 'a\\b', 'sub/.GIT/x'])
      assert.ok(relativePathRefusal(bad), bad);
  });
});

describe('profile availability (PATH lookup)', () => {
  function fakeLookup(platform: NodeJS.Platform, env: Record<string, string>, files: string[]): ProgramLookup {
    return { env, platform, isExecutable: (file) => files.includes(file) };
  }

  it('finds a program on PATH in order, or names it and where to install it', () => {
    const lookup = fakeLookup('linux', { PATH: '/usr/bin:/home/u/.local/bin' }, [
      '/home/u/.local/bin/claude',
      '/opt/agent',
    ]);
    assert.deepEqual(profileAvailability(builtin('claude-code'), lookup), {
      profileId: 'claude-code',
      resolved: '/home/u/.local/bin/claude',
      problem: null,
    });
    const codex = profileAvailability(builtin('codex'), lookup);
    assert.equal(codex.resolved, null);
    assert.equal(
      codex.problem,
      '`codex` is not installed (not found on PATH). Install Codex CLI: npm install -g @openai/codex (https://github.com/openai/codex).',
    );
    const absolute = { ...builtin('custom'), id: 'abs', command: ['/opt/agent'] };
    assert.equal(profileAvailability(absolute, lookup).resolved, '/opt/agent');
    assert.match(
      profileAvailability({ ...absolute, command: ['/opt/missing'] }, lookup).problem!,
      /not found or not executable/,
    );
    assert.match(profileAvailability({ ...absolute, command: ['./agent'] }, lookup).problem!, /is a relative path/);
    assert.match(profileAvailability(builtin('custom'), lookup).problem!, /has no command: add a profile/);
  });

  it('on Windows tries each PATHEXT extension and reads Path case-insensitively', () => {
    const lookup = fakeLookup(
      'win32',
      { Path: 'C:\\Windows;C:\\Users\\u\\AppData\\Roaming\\npm', PATHEXT: '.COM;.EXE;.CMD' },
      ['C:\\Users\\u\\AppData\\Roaming\\npm\\gemini.cmd'],
    );
    assert.equal(resolveProgram('gemini', lookup), 'C:\\Users\\u\\AppData\\Roaming\\npm\\gemini.cmd');
    assert.equal(resolveProgram('gemini.cmd', lookup), 'C:\\Users\\u\\AppData\\Roaming\\npm\\gemini.cmd');
    assert.equal(resolveProgram('claude', lookup), null);
  });
});
