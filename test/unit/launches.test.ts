import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CoordinatorApiError, InProcessCoordinatorApi } from '../../src/core/api';
import { ManualClock } from '../../src/core/clock';
import { Coordinator } from '../../src/core/coordinator';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { ProgramLookup } from '../../src/core/launch/availability';
import type { BridgeEndpoints } from '../../src/core/launch/model';
import { createGit } from '../../src/core/worktree/git';
import { discoverRepositories, type Repository } from '../../src/core/worktree/repositories';
import { commitAll, git, makeRepo, writeFile } from '../support/gitRepo';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** Programs "installed" for these tests: claude, gemini, aider and my-agent in /fake/bin. */
const lookup: ProgramLookup = { env: { PATH: '/fake/bin' }, platform: 'linux', isExecutable: (f) => /^\/fake\/bin\/(claude|gemini|aider|my-agent)$/.test(f) };
const endpoints: BridgeEndpoints = {
  mcpUrl: 'http://127.0.0.1:50052/mcp', hookUrl: 'http://127.0.0.1:50052/hooks/pre-tool-use',
  stdioCommand: ['/usr/bin/node', '/ext/dist/sw4rm-mcp.js'], hookCommand: ['/usr/bin/node', '/ext/dist/sw4rm-hook.js'], grpcAddress: '127.0.0.1:50051',
};

describe('Launches (real store, real git, ManualClock)', function () {
  this.timeout(30_000);
  let dir: string;
  let dataDir: string;
  let repoPath: string;
  let repositories: Repository[];
  let clock: ManualClock;
  let coordinator: Coordinator;
  let api: InProcessCoordinatorApi;

  function start(): void {
    coordinator = new Coordinator({ store: CoordinatorStore.open(dataDir), clock, repositories, launches: { lookup, env: {} } });
    coordinator.launches.setEndpoints(endpoints);
    api = new InProcessCoordinatorApi(coordinator);
  }
  function stop(): void {
    api.dispose();
    coordinator.dispose();
  }

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-launches-');
    repoPath = makeRepo(dir, 'app', { 'README.md': 'hello\n' });
    repositories = await discoverRepositories(createGit(), [repoPath]);
    dataDir = path.join(dir, 'data');
    clock = new ManualClock(Date.UTC(2026, 0, 1));
    start();
  });
  afterEach(() => {
    stop();
    removeTempDir(dir);
  });

  async function refusal(promise: Promise<unknown>): Promise<CoordinatorApiError> {
    try {
      await promise;
    } catch (err) {
      assert.ok(err instanceof CoordinatorApiError, String(err));
      return err;
    }
    assert.fail('expected a refusal');
  }
  const launchEvents = (agentId: string) => coordinator.log.query({ agentId, limit: 1000 }).filter((e) => e.eventType.startsWith('launch.'));

  it('names agents <profile>-<n>, skipping ids registered or launched; the descriptor comes from the profile', async () => {
    coordinator.registry.register({ agentId: 'claude-code-2', name: 'sdk agent' }, { correlationId: 't' });
    const a = await api.launchAgent({ profileId: 'claude-code', repoId: 'app', worktree: { kind: 'new' } }, 'editor:test');
    const b = await api.launchAgent({ profileId: 'claude-code', repoId: 'app', worktree: { kind: 'new' } }, 'editor:test');
    assert.deepEqual([a.record.agentId, b.record.agentId], ['claude-code-1', 'claude-code-3']);
    const agent = coordinator.registry.get('claude-code-1')!;
    assert.equal(agent.descriptor.name, 'Claude Code');
    assert.deepEqual(agent.descriptor.capabilities, ['code']);
    assert.match(agent.descriptor.description, /profile claude-code/);
    assert.equal(a.record.cli, 'claude-code');
    assert.equal(a.command[0], 'claude');
    assert.deepEqual((await api.launches()).map((r) => r.agentId).sort(), ['claude-code-1', 'claude-code-3']);
    // Two launches of one id at once (a double click): one goes ahead, the other is refused.
    const both = await Promise.allSettled([1, 2].map(() => api.launchAgent({ profileId: 'aider', repoId: 'app', worktree: { kind: 'new' }, agentId: 'twice' }, 'editor:test')));
    assert.deepEqual(both.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
    assert.match(((both.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason as Error).message, /launched here already \(STARTING\)/);
    assert.equal(coordinator.credentials.list().filter((cr) => cr.agentId === 'twice' && cr.revokedAt === null).length, 1);
  });

  it('counts a RUNNING agent as present on the Clock; EXITED moves it to SHUTTING_DOWN, never deregistered, also after a restart', async () => {
    await api.launchAgent({ profileId: 'gemini', repoId: 'app', worktree: { kind: 'new' }, agentId: 'g' }, 'editor:test');
    await api.launchStarted('g');
    assert.deepEqual(await api.launchStarted('g'), await api.launch('g'), 'started is idempotent');
    clock.advance(5 * 60_000);
    assert.equal(coordinator.registry.get('g')!.presence, 'online', 'its liveness is recorded while its process runs');
    assert.equal(coordinator.registry.get('g')!.state, 'RUNNABLE');
    const exited = await api.launchExited('g', 0, 'editor:test');
    assert.equal(exited.state, 'EXITED');
    clock.advance(5 * 60_000);
    const gone = coordinator.registry.get('g')!;
    assert.equal(gone.state, 'SHUTTING_DOWN');
    assert.equal(gone.presence, 'unavailable', 'no liveness once exited');
    assert.equal((await refusal(api.launchStarted('g'))).code, 'refused');
    stop();
    start();
    clock.advance(60 * 60_000);
    assert.equal(coordinator.registry.get('g')?.state, 'SHUTTING_DOWN', 'no grace timer re-armed: still registered');
    assert.deepEqual(launchEvents('g').map((e) => [e.eventType, e.details.state]),
      [['launch.starting', 'STARTING'], ['launch.prepared', 'STARTING'], ['launch.running', 'RUNNING'], ['launch.exited', 'EXITED']]);
  });

  it('a terminal closed before it started: STARTING → EXITED; Relaunch is refused while RUNNING and works after', async () => {
    await api.launchAgent({ profileId: 'aider', repoId: 'app', worktree: { kind: 'new' }, agentId: 'ai' }, 'editor:test');
    assert.equal((await api.launchExited('ai', null, 'editor:test')).exitCode, null);
    assert.equal(coordinator.registry.get('ai')!.state, 'SHUTTING_DOWN');
    const again = await api.relaunchAgent('ai', 'editor:test');
    await api.launchStarted('ai');
    assert.equal((await refusal(api.relaunchAgent('ai', 'editor:test'))).code, 'refused');
    assert.equal(again.record.launches, 2);
    assert.equal((await refusal(api.relaunchAgent('nobody', 'editor:test'))).code, 'not_found');
    const taken = await refusal(api.launchAgent({ profileId: 'aider', repoId: 'app', worktree: { kind: 'new' }, agentId: 'ai' }, 'editor:test'));
    assert.match(taken.message, /launched here already \(RUNNING\): use Relaunch/);
  });

  it('a failure part-way leaves a FAILED record with the reason, the binding released, nothing registered or minted; the id can be launched again', async () => {
    writeFile(repoPath, '.mcp.json', '{"mcpServers": {}}\n');
    commitAll(repoPath, 'team MCP servers');
    const failed = await refusal(api.launchAgent({ profileId: 'claude-code', repoId: 'app', worktree: { kind: 'new' }, agentId: 'c' }, 'editor:test'));
    assert.equal(failed.code, 'refused');
    assert.match(failed.message, /\.mcp\.json is tracked by git/);
    const record = (await api.launch('c'))!;
    assert.equal(record.state, 'FAILED');
    assert.match(record.error!, /\.mcp\.json is tracked by git/);
    assert.equal(coordinator.worktrees.status('c').state, 'UNBOUND', 'the binding is released (the worktree is kept)');
    assert.equal(coordinator.registry.get('c'), undefined);
    assert.deepEqual(coordinator.credentials.list().filter((cr) => cr.agentId === 'c'), []);
    assert.deepEqual(launchEvents('c').map((e) => e.eventType), ['launch.starting', 'launch.failed']);

    // A branch that does not exist: the bind fails for good; FAILED again, and the binding released.
    const badBase = await refusal(api.launchAgent({ profileId: 'gemini', repoId: 'app', worktree: { kind: 'new', fromBranch: 'no-such-branch' }, agentId: 'd' }, 'editor:test'));
    assert.match(badBase.message, /could not be bound: 'no-such-branch' is not a commit/);
    assert.equal(coordinator.worktrees.status('d').state, 'UNBOUND');
    assert.equal((await api.launch('d'))!.state, 'FAILED');
    // An SDK agent registers 'd' after its launch failed: the id is its own now, a launch of 'd' is refused.
    coordinator.registry.register({ agentId: 'd', name: 'sdk' }, { correlationId: 't' });
    assert.match((await refusal(api.launchAgent({ profileId: 'gemini', repoId: 'app', worktree: { kind: 'new' }, agentId: 'd' }, 'editor:test'))).message,
      /taken by a registered agent that was not launched from the editor/);

    // A FAILED id launches again (its worktree, kept, is reused; Gemini CLI's wiring does not touch the tracked .mcp.json).
    const plan = await api.launchAgent({ profileId: 'gemini', repoId: 'app', worktree: { kind: 'new' }, agentId: 'c' }, 'editor:test');
    assert.equal(plan.record.state, 'STARTING');
    assert.equal(plan.record.error, null);
    assert.equal(plan.record.launches, 2);
    assert.equal(git(plan.cwd, 'status', '--porcelain', '--untracked-files=all'), '');
  });

  it('needsWorktree false: runs in the main checkout, writes nothing there (files, git config), wires by environment and arguments only', async () => {
    await api.setLaunchProfileSettings([{ id: 'here', command: ['my-agent', '--mcp', '{mcpUrl}'], needsWorktree: false, instructions: { firstPromptArgs: ['you are {agentId}'] } }]);
    const configBefore = fs.readFileSync(path.join(repoPath, '.git', 'config'), 'utf8');
    const plan = await api.launchAgent({ profileId: 'here', repoId: 'app', worktree: { kind: 'new' } }, 'editor:test');
    assert.equal(plan.record.agentId, 'here-1');
    assert.equal(plan.cwd, repoPath);
    assert.equal(plan.record.worktreeId, null);
    assert.deepEqual(plan.record.wroteFiles, []);
    assert.deepEqual(plan.command, ['my-agent', '--mcp', endpoints.mcpUrl, 'you are here-1']);
    assert.equal(plan.env.SW4RM_MCP_URL, endpoints.mcpUrl);
    assert.equal(git(repoPath, 'status', '--porcelain', '--untracked-files=all'), '');
    assert.equal(fs.readFileSync(path.join(repoPath, '.git', 'config'), 'utf8'), configBefore);
    assert.equal(coordinator.worktrees.status('here-1').state, 'UNBOUND');
  });

  it('reads profiles from the setting and each repository\'s .sw4rm/agents.json, with their issues; refuses what needs a bridge that is not listening', async () => {
    writeFile(repoPath, '.sw4rm/agents.json', JSON.stringify({ profiles: [{ id: 'reviewer', cli: 'gemini', command: ['gemini'], capabilities: ['review'] }, { id: 'Bad' }] }));
    const issues = await api.setLaunchProfileSettings([{ id: 'mine', command: ['my-agent'] }, 42]);
    assert.deepEqual(issues, [{ source: 'settings', path: '/1', message: 'must be object' }]);
    const { profiles, issues: all } = await api.launchProfiles();
    assert.deepEqual(profiles.map((p) => p.id), ['claude-code', 'codex', 'gemini', 'aider', 'copilot', 'custom', 'mine', 'reviewer']);
    assert.deepEqual(all.map((i) => [i.source.endsWith('agents.json') ? 'file' : i.source, i.path]), [['settings', '/1'], ['file', '/profiles/1/command'], ['file', '/profiles/1/id']]);
    assert.deepEqual(await api.profileAvailability('mine'), { profileId: 'mine', resolved: '/fake/bin/my-agent', problem: null });
    assert.equal((await refusal(api.profileAvailability('nope'))).code, 'not_found');

    coordinator.launches.setEndpoints(undefined);
    assert.equal(await api.bridgeEndpoints(), undefined);
    const noBridge = await refusal(api.launchAgent({ profileId: 'reviewer', repoId: 'app', worktree: { kind: 'new' } }, 'editor:test'));
    assert.match(noBridge.message, /MCP bridge is not listening/);
    const plan = await api.launchAgent({ profileId: 'mine', repoId: 'app', worktree: { kind: 'new' } }, 'editor:test');
    assert.equal(plan.env.SW4RM_MCP_URL, undefined, 'a profile that needs no bridge launches without it');
    assert.equal(plan.env.ELECTRON_RUN_AS_NODE, '1');
    // Its profile removed from the setting: a relaunch says so.
    await api.launchExited(plan.record.agentId, 0, 'editor:test');
    await api.setLaunchProfileSettings([]);
    const gone = await refusal(api.relaunchAgent(plan.record.agentId, 'editor:test'));
    assert.equal(gone.code, 'not_found');
    assert.match(gone.message, /The launch profile 'mine' of agent 'mine-1' is gone/);
  });
});
