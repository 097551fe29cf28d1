import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CoordinatorApiError, type LaunchesChange } from '../../src/core/api';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import type { BridgeEndpoints } from '../../src/core/launch/model';
import type { CoordinatorHost } from '../../src/server/host';
import { git, makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/**
 * Launching a managed agent against a real coordinator (store file, gRPC server on port 0) and a real git repository:
 * the agent registered, its credential active, its worktree bound, the wiring written and ignored in the worktree
 * only, the plan's command run as the editor's terminal would, its exit, a relaunch, a restart, the refusals.
 */
describe('Launching agents (real coordinator, real git)', function () {
  this.timeout(60_000);
  let dir: string;
  let repoPath: string;
  let dataDir: string;
  let host: CoordinatorHost;
  let api: InProcessCoordinatorApi;
  let endpoints: BridgeEndpoints;
  let changes: LaunchesChange[];

  /** A stand-in CLI: node running a script that prints what it was given and exits with code 3. */
  const script =
    'process.stdout.write(JSON.stringify({ id: process.env.SW4RM_AGENT_ID, cwd: process.cwd(), args: process.argv.slice(1), electron: process.env.ELECTRON_RUN_AS_NODE, extra: process.env.EXTRA })); process.exit(3)';
  const profile = {
    id: 'stand-in',
    name: 'Stand-in CLI',
    cli: 'custom',
    command: [process.execPath, '-e', script, '--'],
    env: { EXTRA: 'home=${env:SW4RM_TEST_HOME}' },
    bridge: { kind: 'mcp-config-file', path: '.mcp.json', format: 'claude-mcp-json', transport: 'http' },
    approvals: { kind: 'claude-code-hooks', via: 'command' },
    instructions: { file: '.sw4rm/AGENT.md', firstPromptArgs: ['read {instructionsPath} as {agentId}'] },
    capabilities: ['code', 'test'],
  };

  async function start(): Promise<void> {
    host = await startHost(dataDir, { workspaceFolders: [repoPath] });
    endpoints = {
      mcpUrl: 'http://127.0.0.1:50999/mcp',
      hookUrl: 'http://127.0.0.1:50999/hooks/pre-tool-use',
      stdioCommand: [process.execPath, '/opt/sw4rm/dist/sw4rm-mcp.js'],
      hookCommand: [process.execPath, '/opt/sw4rm ext/dist/sw4rm-hook.js'],
      commandEnv: {},
      grpcAddress: `127.0.0.1:${host.port}`,
    };
    host.coordinator.launches.setEndpoints(endpoints);
    api = new InProcessCoordinatorApi(host.coordinator);
    changes = [];
    api.onDidChangeLaunches((c) => changes.push(c));
    assert.deepEqual(await api.setLaunchProfileSettings([profile]), []);
  }

  async function stop(): Promise<void> {
    api.dispose();
    await stopHost(host);
  }

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-int-launch-');
    repoPath = makeRepo(dir, 'app', { 'README.md': 'hello\n', 'src/a.txt': 'a\n' });
    dataDir = path.join(dir, 'data');
    process.env.SW4RM_TEST_HOME = '/home/test';
    await start();
  });

  afterEach(async () => {
    await stop();
    delete process.env.SW4RM_TEST_HOME;
    removeTempDir(dir);
  });

  async function rejected(promise: Promise<unknown>): Promise<CoordinatorApiError> {
    try {
      await promise;
    } catch (err) {
      assert.ok(err instanceof CoordinatorApiError, `expected a CoordinatorApiError, got ${String(err)}`);
      return err;
    }
    assert.fail('expected a refusal');
  }

  it('launches a custom profile: registered, credential active, worktree bound, wiring written and ignored in the worktree only; exit and relaunch', async () => {
    const plan = await api.launchAgent(
      { profileId: 'stand-in', repoId: 'app', worktree: { kind: 'new' } },
      'editor:test',
    );
    const agentId = 'stand-in-1';
    assert.equal(plan.record.agentId, agentId);
    assert.equal(plan.record.state, 'STARTING');
    assert.equal(plan.title, `SW4RM: ${agentId} (Stand-in CLI)`);
    assert.deepEqual(plan.command, [process.execPath, '-e', script, '--', `read .sw4rm/AGENT.md as ${agentId}`]);

    // Registered as RegisterAgent would, with its own agent credential.
    const agent = host.coordinator.registry.get(agentId)!;
    assert.equal(agent.state, 'INITIALIZING');
    assert.equal(agent.descriptor.name, agentId);
    assert.deepEqual(agent.descriptor.capabilities, ['code', 'test']);
    assert.deepEqual(host.coordinator.credentials.verify(plan.env.SW4RM_TOKEN), {
      kind: 'agent',
      credentialId: plan.record.credentialId,
      agentId,
    });
    assert.deepEqual(Object.fromEntries(Object.entries(plan.env).filter(([k]) => k !== 'SW4RM_TOKEN')), {
      EXTRA: 'home=/home/test',
      SW4RM_AGENT_ID: agentId,
      SW4RM_MCP_URL: endpoints.mcpUrl,
      SW4RM_HOOK_URL: endpoints.hookUrl,
      SW4RM_ADDRESS: endpoints.grpcAddress,
    });

    // Its worktree is bound, outside the main checkout, with the wiring in it.
    const binding = host.coordinator.worktrees.status(agentId);
    assert.equal(binding.state, 'BOUND_HOME');
    assert.equal(plan.cwd, binding.homePath);
    assert.equal(plan.record.worktreeId, binding.homeWorktreeId);
    assert.ok(!plan.cwd.startsWith(repoPath + path.sep));
    assert.deepEqual(plan.record.wroteFiles, ['.sw4rm/AGENT.md', '.mcp.json', '.claude/settings.local.json']);
    const mcp = JSON.parse(fs.readFileSync(path.join(plan.cwd, '.mcp.json'), 'utf8'));
    assert.deepEqual(mcp, {
      mcpServers: {
        sw4rm: { type: 'http', url: endpoints.mcpUrl, headers: { Authorization: 'Bearer ${SW4RM_TOKEN}' } },
      },
    });
    const settings = JSON.parse(fs.readFileSync(path.join(plan.cwd, '.claude', 'settings.local.json'), 'utf8'));
    assert.deepEqual(settings.hooks.PreToolUse, [
      {
        matcher: '*',
        hooks: [
          {
            type: 'command',
            command: `${process.execPath} '/opt/sw4rm ext/dist/sw4rm-hook.js' --cli claude-code`,
            timeout: 660,
          },
        ],
      },
    ]);
    const instructions = fs.readFileSync(path.join(plan.cwd, '.sw4rm', 'AGENT.md'), 'utf8');
    assert.match(instructions, new RegExp(`You are \`${agentId}\``));
    assert.match(instructions, /read_inbox/);
    assert.ok(instructions.includes(plan.cwd));
    for (const file of plan.record.wroteFiles) {
      assert.ok(
        !fs.readFileSync(path.join(plan.cwd, file), 'utf8').includes(plan.env.SW4RM_TOKEN),
        `${file} holds no token`,
      );
    }
    // Ignored in the worktree by its own exclude file; the main checkout untouched and clean.
    assert.equal(git(plan.cwd, 'status', '--porcelain', '--untracked-files=all'), '');
    assert.equal(git(repoPath, 'status', '--porcelain', '--untracked-files=all'), '');
    assert.ok(!fs.existsSync(path.join(repoPath, '.mcp.json')));
    assert.ok(!fs.existsSync(path.join(repoPath, '.sw4rm')));
    fs.writeFileSync(path.join(repoPath, '.mcp.json'), '{}');
    assert.equal(git(repoPath, 'status', '--porcelain'), '?? .mcp.json\n', 'the exclude applies to the worktree only');
    fs.rmSync(path.join(repoPath, '.mcp.json'));

    // The editor starts the command as its terminal would: in the plan's folder with the plan's environment.
    const run = spawnSync(plan.command[0], plan.command.slice(1), {
      cwd: plan.cwd,
      env: { ...process.env, ...plan.env },
      encoding: 'utf8',
    });
    assert.equal(run.status, 3);
    const seen = JSON.parse(run.stdout);
    assert.deepEqual(
      seen,
      { id: agentId, cwd: plan.cwd, args: [`read .sw4rm/AGENT.md as ${agentId}`], extra: 'home=/home/test' },
      "no ELECTRON_RUN_AS_NODE in the agent's environment",
    );
    assert.equal((await api.launchStarted(agentId)).state, 'RUNNING');
    assert.equal(host.coordinator.registry.get(agentId)!.state, 'RUNNABLE');
    const exited = await api.launchExited(agentId, run.status, 'editor:test');
    assert.equal(exited.state, 'EXITED');
    assert.equal(exited.exitCode, 3);
    assert.equal(host.coordinator.registry.get(agentId)!.state, 'SHUTTING_DOWN', 'gone, not deregistered');
    assert.deepEqual(await api.launchExited(agentId, 0, 'editor:test'), exited, 'idempotent');

    // Relaunch: the same worktree and credential (this process holds its token), the wiring rewritten.
    fs.rmSync(path.join(plan.cwd, '.mcp.json'));
    const again = await api.relaunchAgent(agentId, 'editor:test');
    assert.equal(again.cwd, plan.cwd);
    assert.equal(again.record.launches, 2);
    assert.equal(again.record.credentialId, plan.record.credentialId);
    assert.equal(again.env.SW4RM_TOKEN, plan.env.SW4RM_TOKEN);
    assert.ok(fs.existsSync(path.join(plan.cwd, '.mcp.json')));
    assert.equal(host.coordinator.registry.get(agentId)!.state, 'INITIALIZING', 're-registered');
    assert.equal(git(plan.cwd, 'status', '--porcelain', '--untracked-files=all'), '');
    assert.deepEqual(
      changes.map((c) => (c.kind === 'forgotten' ? c.kind : `${c.kind}:${c.record.state}`)),
      ['launched:STARTING', 'state:STARTING', 'state:RUNNING', 'state:EXITED', 'state:STARTING', 'state:STARTING'],
    );
    const events = host.coordinator.log
      .query({ agentId, limit: 1000 })
      .filter((e) => e.eventType.startsWith('launch.'))
      .map((e) => e.eventType);
    assert.deepEqual(events, [
      'launch.starting',
      'launch.prepared',
      'launch.running',
      'launch.exited',
      'launch.starting',
      'launch.prepared',
    ]);
  });

  it('keeps launches across a restart: the record is read back, and a relaunch mints a new credential and revokes the old one', async () => {
    const plan = await api.launchAgent(
      { profileId: 'stand-in', repoId: 'app', worktree: { kind: 'new' }, agentId: 'keeper' },
      'editor:test',
    );
    await api.launchStarted('keeper');
    await stop();
    await start();
    const record = await api.launch('keeper');
    assert.equal(record?.state, 'RUNNING', 'RUNNING until the editor reconciles');
    assert.deepEqual(await api.launches(), [record]);
    await api.launchExited('keeper', null, 'editor:test');
    const again = await api.relaunchAgent('keeper', 'editor:test');
    assert.notEqual(again.record.credentialId, plan.record.credentialId);
    assert.equal(
      host.coordinator.credentials.get(plan.record.credentialId)?.revokedAt !== null,
      true,
      'the old credential is revoked',
    );
    assert.equal(
      typeof host.coordinator.credentials.verify(plan.env.SW4RM_TOKEN),
      'string',
      'the old token is refused',
    );
    assert.equal(again.cwd, plan.cwd);
  });

  it('refuses: an unknown profile, a command not installed, a worktree bound to another agent, an id taken by an agent not launched here', async () => {
    assert.equal(
      (await rejected(api.launchAgent({ profileId: 'nope', repoId: 'app', worktree: { kind: 'new' } }, 'editor:test')))
        .code,
      'not_found',
    );
    assert.equal(
      (
        await rejected(
          api.launchAgent({ profileId: 'stand-in', repoId: 'nope', worktree: { kind: 'new' } }, 'editor:test'),
        )
      ).code,
      'not_found',
    );
    await api.setLaunchProfileSettings([profile, { id: 'missing', command: ['sw4rm-no-such-program-here'] }]);
    const missing = await rejected(
      api.launchAgent({ profileId: 'missing', repoId: 'app', worktree: { kind: 'new' } }, 'editor:test'),
    );
    assert.equal(missing.code, 'refused');
    assert.match(missing.message, /`sw4rm-no-such-program-here` is not installed \(not found on PATH\)/);
    assert.equal((await api.profileAvailability('missing')).resolved, null);

    const first = await api.launchAgent(
      { profileId: 'stand-in', repoId: 'app', worktree: { kind: 'new' }, agentId: 'owner' },
      'editor:test',
    );
    const bound = await rejected(
      api.launchAgent(
        {
          profileId: 'stand-in',
          repoId: 'app',
          worktree: { kind: 'existing', worktreeId: first.record.worktreeId! },
          agentId: 'intruder',
        },
        'editor:test',
      ),
    );
    assert.equal(bound.code, 'refused');
    assert.match(bound.message, /is the worktree of agent 'owner'/);
    assert.equal(
      (
        await rejected(
          api.launchAgent(
            { profileId: 'stand-in', repoId: 'app', worktree: { kind: 'existing', worktreeId: 'no-such' } },
            'editor:test',
          ),
        )
      ).code,
      'not_found',
    );

    host.coordinator.registry.register({ agentId: 'sdk-agent', name: 'sdk' }, { correlationId: 't' });
    const taken = await rejected(
      api.launchAgent(
        { profileId: 'stand-in', repoId: 'app', worktree: { kind: 'new' }, agentId: 'sdk-agent' },
        'editor:test',
      ),
    );
    assert.equal(taken.code, 'refused');
    assert.match(taken.message, /not launched from the editor/);
    assert.equal(
      (
        await rejected(
          api.launchAgent(
            { profileId: 'stand-in', repoId: 'app', worktree: { kind: 'new' }, agentId: '../bad' },
            'editor:test',
          ),
        )
      ).code,
      'invalid',
    );
    // Nothing was left behind by the refusals: only `owner` was launched.
    assert.deepEqual(
      (await api.launches()).map((r) => r.agentId),
      ['owner'],
    );
    assert.equal(host.coordinator.registry.get('intruder'), undefined);
  });
});
