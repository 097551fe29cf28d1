import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CoordinatorApiError } from '../../src/core/api';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { ManualClock } from '../../src/core/clock';
import type { Coordinator } from '../../src/core/coordinator';
import type { ProgramLookup } from '../../src/core/launch/availability';
import { DEFAULT_LAUNCHES_OPTIONS, Launches, type LaunchesDeps } from '../../src/core/launch/launches';
import type { BridgeEndpoints } from '../../src/core/launch/model';
import { createGit } from '../../src/core/worktree/git';
import { discoverRepositories } from '../../src/core/worktree/repositories';
import { CoordinatorFixture } from '../support/coordinatorFixture';
import { commitAll, git, makeRepo, writeFile } from '../support/gitRepo';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** Programs "installed" for these tests: claude, gemini, aider and my-agent in /fake/bin. */
const lookup: ProgramLookup = {
  env: { PATH: '/fake/bin' },
  platform: 'linux',
  isExecutable: (f) => /^\/fake\/bin\/(claude|gemini|aider|my-agent)$/.test(f),
};
const endpoints: BridgeEndpoints = {
  mcpUrl: 'http://127.0.0.1:50052/mcp',
  hookUrl: 'http://127.0.0.1:50052/hooks/pre-tool-use',
  stdioCommand: ['/usr/bin/node', '/ext/dist/sw4rm-mcp.js'],
  hookCommand: ['/usr/bin/node', '/ext/dist/sw4rm-hook.js'],
  grpcAddress: '127.0.0.1:50051',
  commandEnv: {},
};

describe('Launches (real store, real git, ManualClock)', function () {
  this.timeout(30_000);
  let dir: string;
  let repoPath: string;
  let fixture: CoordinatorFixture;
  let clock: ManualClock;
  let coordinator: Coordinator;
  let api: InProcessCoordinatorApi;

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-launches-');
    repoPath = makeRepo(dir, 'app', { 'README.md': 'hello\n' });
    const repositories = await discoverRepositories(createGit(), [repoPath]);
    fixture = new CoordinatorFixture({
      dataDir: path.join(dir, 'data'),
      now: Date.UTC(2026, 0, 1),
      coordinator: { repositories, launches: { lookup, env: {} } },
      started: (f) => {
        coordinator = f.coordinator;
        coordinator.launches.setEndpoints(endpoints);
        api = f.own(new InProcessCoordinatorApi(coordinator));
      },
    });
    clock = fixture.clock;
  });
  afterEach(() => {
    fixture.dispose();
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
  const launchEvents = (agentId: string) =>
    coordinator.log.query({ agentId, limit: 1000 }).filter((e) => e.eventType.startsWith('launch.'));

  it('names agents <profile>-<n>, skipping ids registered or launched; the descriptor comes from the profile', async () => {
    coordinator.registry.register({ agentId: 'claude-code-2', name: 'sdk agent' }, { correlationId: 't' });
    const a = await api.launchAgent(
      { profileId: 'claude-code', repoId: 'app', worktree: { kind: 'new' } },
      'editor:test',
    );
    const b = await api.launchAgent(
      { profileId: 'claude-code', repoId: 'app', worktree: { kind: 'new' } },
      'editor:test',
    );
    assert.deepEqual([a.record.agentId, b.record.agentId], ['claude-code-1', 'claude-code-3']);
    const agent = coordinator.registry.get('claude-code-1')!;
    assert.equal(
      agent.descriptor.name,
      agent.descriptor.agentId,
      'named by its id: two agents of one profile are told apart',
    );
    assert.deepEqual(agent.descriptor.capabilities, ['code']);
    assert.match(agent.descriptor.description, /profile claude-code/);
    assert.equal(a.record.cli, 'claude-code');
    assert.equal(a.command[0], 'claude');
    assert.deepEqual((await api.launches()).map((r) => r.agentId).sort(), ['claude-code-1', 'claude-code-3']);
    // Two launches of one id at once (a double click): one goes ahead, the other is refused.
    const both = await Promise.allSettled(
      [1, 2].map(() =>
        api.launchAgent(
          { profileId: 'aider', repoId: 'app', worktree: { kind: 'new' }, agentId: 'twice' },
          'editor:test',
        ),
      ),
    );
    assert.deepEqual(both.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
    assert.match(
      ((both.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason as Error).message,
      /launched here already \(STARTING\)/,
    );
    assert.equal(
      coordinator.credentials.list().filter((cr) => cr.agentId === 'twice' && cr.revokedAt === null).length,
      1,
    );
  });

  it('counts a RUNNING agent as present on the Clock; EXITED moves it to SHUTTING_DOWN, never deregistered, also after a restart', async () => {
    await api.launchAgent(
      { profileId: 'gemini', repoId: 'app', worktree: { kind: 'new' }, agentId: 'g' },
      'editor:test',
    );
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
    fixture.restart();
    clock.advance(60 * 60_000);
    assert.equal(coordinator.registry.get('g')?.state, 'SHUTTING_DOWN', 'no grace timer re-armed: still registered');
    assert.deepEqual(
      launchEvents('g').map((e) => [e.eventType, e.details.state]),
      [
        ['launch.starting', 'STARTING'],
        ['launch.prepared', 'STARTING'],
        ['launch.running', 'RUNNING'],
        ['launch.exited', 'EXITED'],
      ],
    );
  });

  it('a terminal closed before it started: STARTING → EXITED; Relaunch is refused while RUNNING and works after', async () => {
    await api.launchAgent(
      { profileId: 'aider', repoId: 'app', worktree: { kind: 'new' }, agentId: 'ai' },
      'editor:test',
    );
    assert.equal((await api.launchExited('ai', null, 'editor:test')).exitCode, null);
    assert.equal(coordinator.registry.get('ai')!.state, 'SHUTTING_DOWN');
    const again = await api.relaunchAgent('ai', 'editor:test');
    await api.launchStarted('ai');
    assert.equal((await refusal(api.relaunchAgent('ai', 'editor:test'))).code, 'refused');
    assert.equal(again.record.launches, 2);
    assert.equal((await refusal(api.relaunchAgent('nobody', 'editor:test'))).code, 'not_found');
    const taken = await refusal(
      api.launchAgent({ profileId: 'aider', repoId: 'app', worktree: { kind: 'new' }, agentId: 'ai' }, 'editor:test'),
    );
    assert.match(taken.message, /launched here already \(RUNNING\): use Relaunch/);
  });

  it('a failure part-way leaves a FAILED record with the reason, the binding released, nothing registered or minted; the id can be launched again', async () => {
    writeFile(repoPath, '.mcp.json', '{"mcpServers": {}}\n');
    commitAll(repoPath, 'team MCP servers');
    const failed = await refusal(
      api.launchAgent(
        { profileId: 'claude-code', repoId: 'app', worktree: { kind: 'new' }, agentId: 'c' },
        'editor:test',
      ),
    );
    assert.equal(failed.code, 'refused');
    assert.match(failed.message, /\.mcp\.json is tracked by git/);
    const record = (await api.launch('c'))!;
    assert.equal(record.state, 'FAILED');
    assert.match(record.error!, /\.mcp\.json is tracked by git/);
    assert.equal(coordinator.worktrees.status('c').state, 'UNBOUND', 'the binding is released (the worktree is kept)');
    assert.equal(coordinator.registry.get('c'), undefined);
    assert.deepEqual(
      coordinator.credentials.list().filter((cr) => cr.agentId === 'c'),
      [],
    );
    assert.deepEqual(
      launchEvents('c').map((e) => e.eventType),
      ['launch.starting', 'launch.failed'],
    );

    // A branch that does not exist: the bind fails for good; FAILED again, and the binding released.
    const badBase = await refusal(
      api.launchAgent(
        { profileId: 'gemini', repoId: 'app', worktree: { kind: 'new', fromBranch: 'no-such-branch' }, agentId: 'd' },
        'editor:test',
      ),
    );
    assert.match(badBase.message, /could not be bound: 'no-such-branch' is not a commit/);
    assert.equal(coordinator.worktrees.status('d').state, 'UNBOUND');
    assert.equal((await api.launch('d'))!.state, 'FAILED');
    // An SDK agent registers 'd' after its launch failed: the id is its own now, a launch of 'd' is refused.
    coordinator.registry.register({ agentId: 'd', name: 'sdk' }, { correlationId: 't' });
    assert.match(
      (
        await refusal(
          api.launchAgent(
            { profileId: 'gemini', repoId: 'app', worktree: { kind: 'new' }, agentId: 'd' },
            'editor:test',
          ),
        )
      ).message,
      /taken by a registered agent that was not launched from the editor/,
    );

    // A FAILED id launches again (its worktree, kept, is reused; Gemini CLI's wiring does not touch the tracked .mcp.json).
    const plan = await api.launchAgent(
      { profileId: 'gemini', repoId: 'app', worktree: { kind: 'new' }, agentId: 'c' },
      'editor:test',
    );
    assert.equal(plan.record.state, 'STARTING');
    assert.equal(plan.record.error, null);
    assert.equal(plan.record.launches, 2);
    assert.equal(git(plan.cwd, 'status', '--porcelain', '--untracked-files=all'), '');
  });

  it('needsWorktree false: runs in the main checkout, writes nothing there (files, git config), wires by environment and arguments only', async () => {
    await api.setLaunchProfileSettings([
      {
        id: 'here',
        command: ['my-agent', '--mcp', '{mcpUrl}'],
        needsWorktree: false,
        instructions: { firstPromptArgs: ['you are {agentId}'] },
      },
    ]);
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

  describe("the ACK timeout of agents that pull their inbox (the bridge's read_inbox)", () => {
    const MINUTE = 60_000;
    const ctx = { correlationId: 'ack-timeout-test' };
    /** A message from the editor (Send Message…) to `to`, admitted now: its stored ACK deadline. */
    let sent = 0;
    function send(to: string): string {
      const result = coordinator.router.sendFromCoordinator(
        { to, contentType: 'application/json', payload: JSON.stringify({ hello: ++sent }) },
        ctx,
      );
      assert.ok(result.accepted, result.accepted ? '' : result.reason);
      return result.messageId;
    }
    const deadlineOf = (messageId: string) =>
      coordinator.router.message(messageId)!.ackDeadline! - coordinator.router.message(messageId)!.acceptedAt;

    it('gives a bridged agent 30 min from its launch, EXITED too, and again after a restart; Aider (no MCP) and SDK agents keep 10 s', async () => {
      coordinator.registry.register({ agentId: 'sdk', name: 'sdk agent' }, ctx);
      await api.setLaunchProfileSettings([{ id: 'mine', command: ['my-agent'] }]);
      const claude = await api.launchAgent(
        { profileId: 'claude-code', repoId: 'app', worktree: { kind: 'new' }, agentId: 'cc' },
        'editor:test',
      );
      await api.launchAgent(
        { profileId: 'aider', repoId: 'app', worktree: { kind: 'new' }, agentId: 'ai' },
        'editor:test',
      );
      const custom = await api.launchAgent(
        { profileId: 'mine', repoId: 'app', worktree: { kind: 'new' }, agentId: 'own' },
        'editor:test',
      );
      assert.equal(claude.record.bridged, true);
      assert.equal(custom.record.bridged, true, 'a custom command gets SW4RM_MCP_URL and may pull its inbox');
      assert.equal((await api.launch('ai'))!.bridged, false);
      await api.launchStarted('cc');
      assert.deepEqual(
        ['cc', 'own', 'ai', 'sdk'].map((id) => deadlineOf(send(id))),
        [30 * MINUTE, 30 * MINUTE, 10_000, 10_000],
      );

      // A message to it waits while it works between two read_inbox calls, and is RECEIVED when it pulls.
      const pending = send('cc');
      clock.advance(10_000);
      assert.equal(coordinator.router.message(pending)!.state, 'SENT', 'not timed out at the RFC default');
      clock.advance(29 * MINUTE);
      assert.equal(coordinator.router.message(pending)!.state, 'SENT');

      // EXITED: its messages wait for its relaunch, and still time out.
      await api.launchExited('cc', 0, 'editor:test');
      const whileGone = send('cc');
      assert.equal(deadlineOf(whileGone), 30 * MINUTE);
      clock.advance(MINUTE);
      assert.equal(coordinator.router.message(pending)!.state, 'TIMED_OUT', 'at 30 min');
      clock.advance(29 * MINUTE - 1);
      assert.equal(coordinator.router.message(whileGone)!.state, 'SENT');
      clock.advance(1);
      assert.equal(
        coordinator.router.message(whileGone)!.state,
        'TIMED_OUT',
        "an EXITED agent's message does not wait forever",
      );

      // A restart: restored from the launch records before anything else runs.
      const stored = send('cc');
      fixture.restart();
      assert.equal(coordinator.router.ackTimeoutOf('cc'), 30 * MINUTE);
      assert.equal(coordinator.router.ackTimeoutOf('own'), 30 * MINUTE);
      assert.equal(coordinator.router.ackTimeoutOf('ai'), 10_000);
      assert.equal(coordinator.router.ackTimeoutOf('sdk'), 10_000);
      assert.equal(deadlineOf(send('cc')), 30 * MINUTE);
      assert.equal(deadlineOf(stored), 30 * MINUTE, 'a message admitted before the restart keeps its deadline');
      const set = coordinator.log
        .query({ limit: 1000 })
        .filter((e) => e.eventType === 'router.recipient_ack_timeout' && e.details.agent_id === 'cc');
      assert.deepEqual(
        set.map((e) => e.details.ack_timeout_ms),
        [30 * MINUTE, 30 * MINUTE],
        'logged once at the launch, once at the restart: not per message',
      );
    });

    it('takes bridgedAckTimeoutMs from the options, within 10 s … 24 h', async () => {
      fixture.coordinatorOptions = {
        ...fixture.coordinatorOptions,
        launches: { lookup, env: {}, bridgedAckTimeoutMs: 5 * MINUTE },
      };
      fixture.restart();
      await api.launchAgent(
        { profileId: 'gemini', repoId: 'app', worktree: { kind: 'new' }, agentId: 'gm' },
        'editor:test',
      );
      assert.equal(deadlineOf(send('gm')), 5 * MINUTE);
      for (const bad of [9_999, 24 * 60 * MINUTE + 1, 1.5 * MINUTE + 0.5]) {
        assert.throws(
          () =>
            new Launches(
              { ...launchDeps(), ackTimeouts: coordinator.router },
              { ...DEFAULT_LAUNCHES_OPTIONS, bridgedAckTimeoutMs: bad },
            ),
          RangeError,
          String(bad),
        );
      }
    });

    function launchDeps(): LaunchesDeps {
      return {
        store: coordinator.store,
        log: coordinator.log,
        clock,
        ids: coordinator.ids,
        git: createGit(),
        registry: coordinator.registry,
        credentials: coordinator.credentials,
        ackTimeouts: coordinator.router,
        bindings: coordinator.worktrees,
        workspace: coordinator.workspace,
        setupOf: () => undefined,
        lookup,
        env: {},
      };
    }
  });

  it("reads profiles from the setting and each repository's .sw4rm/agents.json, with their issues; refuses what needs a bridge that is not listening", async () => {
    writeFile(
      repoPath,
      '.sw4rm/agents.json',
      JSON.stringify({
        profiles: [{ id: 'reviewer', cli: 'gemini', command: ['gemini'], capabilities: ['review'] }, { id: 'Bad' }],
      }),
    );
    const issues = await api.setLaunchProfileSettings([{ id: 'mine', command: ['my-agent'] }, 42]);
    assert.deepEqual(issues, [{ source: 'settings', path: '/1', message: 'must be object' }]);
    const { profiles, issues: all } = await api.launchProfiles();
    assert.deepEqual(
      profiles.map((p) => p.id),
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
        'mine',
        'reviewer',
      ],
    );
    assert.deepEqual(
      all.map((i) => [i.source.endsWith('agents.json') ? 'file' : i.source, i.path]),
      [
        ['settings', '/1'],
        ['file', '/profiles/1/command'],
        ['file', '/profiles/1/id'],
      ],
    );
    assert.deepEqual(await api.profileAvailability('mine'), {
      profileId: 'mine',
      resolved: '/fake/bin/my-agent',
      problem: null,
    });
    assert.equal((await refusal(api.profileAvailability('nope'))).code, 'not_found');

    coordinator.launches.setEndpoints(undefined);
    assert.equal(await api.bridgeEndpoints(), undefined);
    const noBridge = await refusal(
      api.launchAgent({ profileId: 'reviewer', repoId: 'app', worktree: { kind: 'new' } }, 'editor:test'),
    );
    assert.match(noBridge.message, /MCP bridge is not listening/);
    const plan = await api.launchAgent({ profileId: 'mine', repoId: 'app', worktree: { kind: 'new' } }, 'editor:test');
    assert.equal(plan.env.SW4RM_MCP_URL, undefined, 'a profile that needs no bridge launches without it');
    assert.equal(
      plan.env.ELECTRON_RUN_AS_NODE,
      undefined,
      "ELECTRON_RUN_AS_NODE goes to the bridge's own commands only, never the agent",
    );
    // Its profile removed from the setting: a relaunch says so.
    await api.launchExited(plan.record.agentId, 0, 'editor:test');
    await api.setLaunchProfileSettings([]);
    const gone = await refusal(api.relaunchAgent(plan.record.agentId, 'editor:test'));
    assert.equal(gone.code, 'not_found');
    assert.match(gone.message, /The launch profile 'mine' of agent 'mine-1' is gone/);
  });
});
