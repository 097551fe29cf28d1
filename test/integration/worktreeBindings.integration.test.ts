import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ManualClock } from '../../src/core/clock';
import type { Coordinator } from '../../src/core/coordinator';
import type { Disposable } from '../../src/core/events';
import { BindingRequestError, BindingStateError, type BindingStatus } from '../../src/core/worktree/bindings';
import { createGit } from '../../src/core/worktree/git';
import type { BindingOperation, BindingState } from '../../src/core/worktree/model';
import { discoverRepositories, type Repository } from '../../src/core/worktree/repositories';
import { CoordinatorFixture } from '../support/coordinatorFixture';
import { git, makeRepo } from '../support/gitRepo';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ctx = { correlationId: 'corr-bind' };
const RETRY_MS = 1_000;

describe('worktree bindings (RFC §16, §16.1–§16.3)', function () {
  this.timeout(30_000);
  let dir: string;
  let repoPath: string;
  let repositories: Repository[];
  let fixture: CoordinatorFixture;
  let clock: ManualClock;
  let coordinator: Coordinator;
  let operator: Disposable;

  before(() => {
    dir = makeTempDir('sw4rm-bindings-');
  });

  after(() => removeTempDir(dir));

  beforeEach(async () => {
    // A repository of its own for every test (its worktrees are siblings of it).
    repoPath = makeRepo(fs.mkdtempSync(path.join(dir, 'ws-')), 'app');
    repositories = await discoverRepositories(createGit(), [repoPath]);
    assert.deepEqual(
      repositories.map((r) => r.id),
      ['app'],
    );
    fixture = new CoordinatorFixture({
      dataDir: fs.mkdtempSync(path.join(dir, 'data-')),
      coordinator: { repositories, bindings: { retryBaseMs: RETRY_MS } },
      started: (f) => {
        coordinator = f.coordinator;
        operator = coordinator.hitl.attachOperator('editor:test');
        f.own({ dispose: () => operator.dispose() });
      },
    });
    clock = fixture.clock;
  });

  afterEach(() => fixture.dispose());

  const bindings = () => coordinator.worktrees;
  const transitions = () =>
    coordinator.log
      .query({ eventType: 'worktree.binding_transition' })
      .map((e) => [e.details.agent_id, e.details.operation, e.details.from, e.details.to]);
  const worktrees = () => coordinator.workspace.worktrees('app')!;

  /** Binds `agent` to its home in `app` and returns the binding. */
  async function bound(agent: string): Promise<BindingStatus> {
    const b = await bindings().bind(agent, 'app', '', ctx);
    assert.equal(b.state, 'BOUND_HOME', JSON.stringify(b.failure));
    return b;
  }

  /** `agent` bound at home and a second worktree `shared` to switch into (another agent's home, unbound again). */
  async function withTarget(agent: string, target = 'shared'): Promise<void> {
    await bound(agent);
    if (!(await worktrees().get(target))) await worktrees().create(target);
  }

  async function pending(agent: string, target = 'shared'): Promise<BindingStatus> {
    await withTarget(agent, target);
    const b = await bindings().requestSwitch(agent, target, ctx, { requiresHitl: true });
    assert.equal(b.state, 'SWITCH_PENDING');
    return b;
  }

  it("BIND creates the agent's home worktree on its own branch, logs UNBOUND → BOUND_HOME, and STATUS names the state", async () => {
    assert.equal(bindings().status('coder').state, 'UNBOUND');
    const b = await bound('coder');
    assert.equal(b.repoId, 'app');
    assert.equal(b.worktreeId, 'coder');
    assert.equal(b.worktreePath, path.join(path.dirname(repoPath), 'app.sw4rm-worktrees', 'coder'));
    assert.ok(fs.existsSync(path.join(b.worktreePath, 'README.md')));
    assert.equal(git(b.worktreePath, 'rev-parse', '--abbrev-ref', 'HEAD').trim(), 'sw4rm/coder');
    assert.deepEqual(transitions(), [['coder', 'BIND', 'UNBOUND', 'BOUND_HOME']]);
    // Binding again to the same home is an answer, not a transition.
    assert.equal((await bindings().bind('coder', 'app', 'coder', ctx)).state, 'BOUND_HOME');
    assert.equal(transitions().length, 1);
  });

  it('UNBIND never removes the worktree, and a later BIND reuses it', async () => {
    const b = await bound('coder');
    fs.writeFileSync(path.join(b.worktreePath, 'work.txt'), 'unsaved work\n');
    const u = await bindings().unbind('coder', ctx);
    assert.equal(u.state, 'UNBOUND');
    assert.equal(u.worktreePath, '');
    assert.equal(fs.readFileSync(path.join(b.worktreePath, 'work.txt'), 'utf8'), 'unsaved work\n');
    const again = await bound('coder');
    assert.equal(again.worktreePath, b.worktreePath);
    assert.deepEqual(
      transitions().map((t) => t.slice(2)),
      [
        ['UNBOUND', 'BOUND_HOME'],
        ['BOUND_HOME', 'UNBOUND'],
        ['UNBOUND', 'BOUND_HOME'],
      ],
    );
  });

  it('a bound worktree is refused by remove; unbound, it is removed through git', async () => {
    await bound('coder');
    const isBound = (id: string) => bindings().isBound('app', id);
    await assert.rejects(worktrees().remove('coder', { isBound }), /bound to an agent/);
    await bindings().unbind('coder', ctx);
    const removed = await worktrees().remove('coder', { isBound });
    assert.equal(removed.branchKept, false);
    assert.equal(await worktrees().get('coder'), undefined);
  });

  it('refuses a bad agent id, repo id or worktree id before any transition', async () => {
    assert.throws(() => bindings().bind('', 'app', '', ctx), BindingRequestError);
    assert.throws(() => bindings().bind('a\u0000b', 'app', '', ctx), /agent_id contains control characters/);
    assert.throws(() => bindings().bind('a'.repeat(257), 'app', '', ctx), /agent_id is longer than 256 characters/);
    assert.throws(() => bindings().bind('coder', '', '', ctx), /repo_id is required/);
    assert.throws(() => bindings().bind('coder', 'app\u0007', '', ctx), /repo_id contains control characters/);
    assert.throws(() => bindings().bind('coder', 'r'.repeat(257), '', ctx), /repo_id is longer than 256 characters/);
    assert.throws(
      () => bindings().bind('coder', 'app', '../escape', ctx),
      (err: unknown) => err instanceof BindingRequestError && err.kind === 'invalid_argument',
    );
    assert.deepEqual(transitions(), []);
  });

  it('BIND of an unknown repository: BIND_FAILED worktree_not_found, retried after 1, 2 and 4 s (max 3), the operator notified at 60 s', async () => {
    const notices: BindingStatus[] = [];
    coordinator.worktrees.onDidNeedOperator((b) => notices.push(b));
    const b = await bindings().bind('coder', 'nope', '', ctx);
    assert.equal(b.state, 'BIND_FAILED');
    assert.equal(b.failure?.reason, 'worktree_not_found');
    assert.match(b.failure!.detail, /no repository 'nope'.*known: app/);
    assert.equal(b.failure?.nextRetryAt, clock.now() + 1_000);
    const retries = () => coordinator.log.query({ eventType: 'worktree.bind_failed_again' }).length;
    clock.advance(999);
    await new Promise((r) => setImmediate(r));
    assert.equal(retries(), 0);
    for (const [step, count] of [
      [1, 1],
      [2_000, 2],
      [4_000, 3],
    ] as const) {
      clock.advance(step);
      await pollUntil(`retry ${count}`, () => (retries() === count ? true : undefined));
    }
    assert.equal(bindings().status('coder').failure?.retries, 3);
    assert.equal(bindings().status('coder').failure?.nextRetryAt, null);
    clock.advance(60_000 - 7_000 - 1);
    assert.equal(notices.length, 0);
    clock.advance(1);
    assert.equal(notices.length, 1);
    const notice = coordinator.log.query({ eventType: 'worktree.bind_failed_operator_notice' });
    assert.equal(notice.length, 1);
    assert.equal(notice[0].level, 'WARN');
    assert.equal(notice[0].details.reason, 'worktree_not_found');
    clock.advance(600_000);
    assert.equal(retries(), 3);
    assert.equal(notices.length, 1);
    assert.deepEqual(transitions(), [['coder', 'BIND', 'UNBOUND', 'BIND_FAILED']]);
  });

  it('a locked home worktree: BIND_FAILED worktree_locked; the retry after unlocking binds (BIND_FAILED → BOUND_HOME)', async () => {
    const made = await worktrees().create('coder');
    git(repoPath, 'worktree', 'lock', made.path);
    const b = await bindings().bind('coder', 'app', '', ctx);
    assert.equal(b.state, 'BIND_FAILED');
    assert.equal(b.failure?.reason, 'worktree_locked');
    git(repoPath, 'worktree', 'unlock', made.path);
    clock.advance(RETRY_MS);
    await pollUntil('the retry binds', () => (bindings().status('coder').state === 'BOUND_HOME' ? true : undefined));
    assert.deepEqual(
      transitions().map((t) => t.slice(1)),
      [
        ['BIND', 'UNBOUND', 'BIND_FAILED'],
        ['BIND_RETRY', 'BIND_FAILED', 'BOUND_HOME'],
      ],
    );
    assert.equal(bindings().status('coder').failure, null);
  });

  it("a home is one bound agent's: a BIND_FAILED agent whose home another agent bound meanwhile fails its retry, never sharing it", async () => {
    const made = await worktrees().create('shared');
    git(repoPath, 'worktree', 'lock', made.path);
    assert.equal((await bindings().bind('late', 'app', 'shared', ctx)).failure?.reason, 'worktree_locked');
    git(repoPath, 'worktree', 'unlock', made.path);
    assert.equal(
      (await bindings().bind('first', 'app', 'shared', ctx)).state,
      'BOUND_HOME',
      'a BIND_FAILED agent does not hold the home',
    );
    clock.advance(RETRY_MS);
    await pollUntil('the retry of late', () => (bindings().status('late').failure?.retries === 1 ? true : undefined));
    const late = bindings().status('late');
    assert.equal(late.state, 'BIND_FAILED');
    assert.equal(late.failure?.reason, 'permission_denied');
    assert.match(late.failure!.detail, /home worktree of agent 'first'/);
    assert.equal(bindings().status('first').state, 'BOUND_HOME');
  });

  it('two BINDs of one new home at once: one agent binds it, the other never does (also not by its retries)', async () => {
    const results = await Promise.allSettled([
      bindings().bind('one', 'app', 'same', ctx),
      bindings().bind('two', 'app', 'same', ctx),
    ]);
    for (let retry = 0; retry < 3; retry++) {
      clock.advance(RETRY_MS * 2 ** retry);
      for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
      await pollUntil('no git operation of a binding under way', () =>
        coordinator.worktrees
          .list()
          .every(
            (b) => b.state !== 'BIND_FAILED' || b.failure?.retries === retry + 1 || b.failure?.nextRetryAt === null,
          )
          ? true
          : undefined,
      );
    }
    const homes = ['one', 'two'].map((agent) => bindings().status(agent)).filter((b) => b.state === 'BOUND_HOME');
    assert.equal(
      homes.length,
      1,
      `exactly one agent has the home: ${JSON.stringify(results.map((r) => r.status))}, ${JSON.stringify(['one', 'two'].map((a) => bindings().status(a).state))}`,
    );
  });

  it('a retry asks for the base the BIND asked for; a base that does not exist is not retried', async () => {
    git(repoPath, 'checkout', '-q', '-b', 'feature');
    fs.writeFileSync(path.join(repoPath, 'feature.txt'), 'feature\n');
    git(repoPath, 'add', 'feature.txt');
    git(repoPath, 'commit', '-q', '-m', 'feature');
    const feature = git(repoPath, 'rev-parse', 'HEAD').trim();
    git(repoPath, 'checkout', '-q', 'main');

    const typo = await bindings().bind('typo', 'app', 'typo', ctx, undefined, { base: 'no-such-branch' });
    assert.equal(typo.state, 'BIND_FAILED');
    assert.equal(typo.failure?.reason, 'worktree_not_found');
    assert.equal(typo.failure?.nextRetryAt, null, 'a missing base is not retried (it would not appear)');

    const blocker = path.join(path.dirname(repoPath), 'app.sw4rm-worktrees', 'based');
    fs.mkdirSync(blocker, { recursive: true });
    fs.writeFileSync(path.join(blocker, 'in-the-way'), 'x');
    const based = await bindings().bind('based', 'app', 'based', ctx, undefined, { base: 'feature' });
    assert.equal(based.failure?.reason, 'filesystem_error');
    assert.equal(based.failure?.base, 'feature');
    fs.rmSync(blocker, { recursive: true });
    clock.advance(RETRY_MS);
    await pollUntil('the retry binds', () => (bindings().status('based').state === 'BOUND_HOME' ? true : undefined));
    assert.equal(
      git(bindings().status('based').worktreePath, 'rev-parse', 'HEAD').trim(),
      feature,
      'created from the base asked for, not HEAD',
    );
    assert.equal(bindings().status('typo').state, 'BIND_FAILED', 'still failed: never created from HEAD instead');
  });

  it('a folder in the way of the home worktree: BIND_FAILED filesystem_error; an explicit BIND after fixing it binds', async () => {
    const blocker = path.join(path.dirname(repoPath), 'app.sw4rm-worktrees', 'blocked');
    fs.mkdirSync(blocker, { recursive: true });
    const b = await bindings().bind('blocked', 'app', '', ctx);
    assert.equal(b.failure?.reason, 'filesystem_error');
    fs.rmdirSync(blocker);
    assert.equal((await bindings().bind('blocked', 'app', '', ctx)).state, 'BOUND_HOME');
    assert.deepEqual(
      transitions().map((t) => t.slice(1)),
      [
        ['BIND', 'UNBOUND', 'BIND_FAILED'],
        ['BIND', 'BIND_FAILED', 'BOUND_HOME'],
      ],
    );
  });

  it('UNBIND clears BIND_FAILED (→ UNBOUND) and stops its retries', async () => {
    await bindings().bind('coder', 'nope', '', ctx);
    assert.equal((await bindings().unbind('coder', ctx)).state, 'UNBOUND');
    clock.advance(120_000);
    await new Promise((r) => setImmediate(r));
    assert.equal(coordinator.log.query({ eventType: 'worktree.bind_failed_again' }).length, 0);
    assert.equal(coordinator.log.query({ eventType: 'worktree.bind_failed_operator_notice' }).length, 0);
  });

  it('SWITCH_REQUEST opens a HITL WORKTREE_OVERRIDE invocation; SWITCH_APPROVE binds to the target for the TTL, then home', async () => {
    const b = await pending('coder');
    const invocation = coordinator.hitl.get(b.switch!.invocationId)!;
    assert.equal(invocation.reasonType, 'WORKTREE_OVERRIDE');
    assert.deepEqual(invocation.origin, { kind: 'internal', component: 'worktree' });
    assert.equal(invocation.subject.worktreeId, 'shared');
    assert.equal(invocation.context.facts.home_worktree_id, 'coder');
    assert.ok(bindings().isBound('app', 'shared'), 'the target of a pending switch is not removable');
    const approved = await bindings().approveSwitch('coder', 'shared', 60_000, 'operator', ctx);
    assert.equal(approved.state, 'BOUND_NON_HOME');
    assert.equal(approved.worktreeId, 'shared');
    assert.equal(approved.worktreePath, (await worktrees().get('shared'))!.path);
    assert.equal(approved.homeWorktreeId, 'coder');
    assert.equal(coordinator.hitl.get(invocation.id)!.decision?.action, 'approve');
    clock.advance(59_999);
    assert.equal(bindings().status('coder').state, 'BOUND_NON_HOME');
    clock.advance(1);
    const home = bindings().status('coder');
    assert.equal(home.state, 'BOUND_HOME');
    assert.equal(home.worktreeId, 'coder');
    assert.deepEqual(
      transitions().map((t) => t.slice(1)),
      [
        ['BIND', 'UNBOUND', 'BOUND_HOME'],
        ['SWITCH_REQUEST', 'BOUND_HOME', 'SWITCH_PENDING'],
        ['SWITCH_APPROVE', 'SWITCH_PENDING', 'BOUND_NON_HOME'],
        ['TTL_EXPIRED', 'BOUND_NON_HOME', 'BOUND_HOME'],
      ],
    );
  });

  it('an operator approving the invocation in the Approvals view grants the default TTL (15 min)', async () => {
    const b = await pending('coder');
    coordinator.hitl.decide(
      b.switch!.invocationId,
      { action: 'approve', rationale: 'needs the shared protos' },
      'editor:alice',
      ctx,
    );
    const s = bindings().status('coder');
    assert.equal(s.state, 'BOUND_NON_HOME');
    assert.equal(s.nonHomeUntil, clock.now() + 900_000);
  });

  it('SWITCH_REJECT, a denial and a HITL fallback all return home', async () => {
    const b = await pending('coder');
    const rejected = await bindings().rejectSwitch('coder', 'not now', 'operator', ctx);
    assert.equal(rejected.state, 'BOUND_HOME');
    assert.equal(rejected.worktreeId, 'coder');
    assert.match(coordinator.hitl.get(b.switch!.invocationId)!.decision!.rationale, /not now/);
    const again = await bindings().requestSwitch('coder', 'shared', ctx);
    operator.dispose(); // no operator: the DENY_BY_DEFAULT fallback after 5 s
    clock.advance(5_000);
    assert.equal(coordinator.hitl.get(again.switch!.invocationId)!.state, 'timed_out');
    assert.equal(bindings().status('coder').state, 'BOUND_HOME');
    operator = coordinator.hitl.attachOperator('editor:test');
    const ops = transitions().map((t) => t[1]);
    assert.deepEqual(ops, ['BIND', 'SWITCH_REQUEST', 'SWITCH_REJECT', 'SWITCH_REQUEST', 'SWITCH_REJECT']);
  });

  it('SWITCH_REVOKE returns home at once; UNBIND from BOUND_NON_HOME unbinds', async () => {
    const b = await pending('coder');
    coordinator.hitl.decide(b.switch!.invocationId, { action: 'approve', rationale: 'ok' }, 'editor:alice', ctx);
    const revoked = await bindings().revokeSwitch('coder', 'operator', ctx);
    assert.equal(revoked.state, 'BOUND_HOME');
    assert.equal(revoked.worktreeId, 'coder');
    clock.advance(900_000);
    assert.equal(transitions().filter((t) => t[1] === 'TTL_EXPIRED').length, 0, 'the TTL timer went with the revoke');
    const again = await bindings().requestSwitch('coder', 'shared', ctx);
    coordinator.hitl.decide(again.switch!.invocationId, { action: 'approve', rationale: 'ok' }, 'editor:alice', ctx);
    assert.equal((await bindings().unbind('coder', ctx)).state, 'UNBOUND');
    assert.deepEqual(
      transitions()
        .slice(-2)
        .map((t) => t.slice(1)),
      [
        ['SWITCH_APPROVE', 'SWITCH_PENDING', 'BOUND_NON_HOME'],
        ['UNBIND', 'BOUND_NON_HOME', 'UNBOUND'],
      ],
    );
  });

  it('refuses every operation the table does not allow, naming the state and the operation', async () => {
    const refused = async (state: BindingState, op: BindingOperation, run: () => Promise<unknown>) => {
      await assert.rejects(run(), (err: unknown) => {
        assert.ok(err instanceof BindingStateError, `${op} in ${state}: ${String(err)}`);
        assert.equal(err.state, state);
        assert.equal(err.operation, op);
        assert.match(err.message, new RegExp(`^${op} is not allowed in state ${state} `));
        return true;
      });
    };
    const all = (agent: string) => ({
      UNBIND: () => bindings().unbind(agent, ctx),
      SWITCH_REQUEST: () => bindings().requestSwitch(agent, 'shared', ctx),
      SWITCH_APPROVE: () => bindings().approveSwitch(agent, '', 0, 'operator', ctx),
      SWITCH_REJECT: () => bindings().rejectSwitch(agent, '', 'operator', ctx),
      SWITCH_REVOKE: () => bindings().revokeSwitch(agent, 'operator', ctx),
      BIND_OTHER: () => bindings().bind(agent, 'app', 'elsewhere', ctx),
    });
    const expectRefused = async (agent: string, state: BindingState, names: Array<keyof ReturnType<typeof all>>) => {
      assert.equal(bindings().status(agent).state, state);
      for (const name of names) await refused(state, name === 'BIND_OTHER' ? 'BIND' : name, all(agent)[name]);
      assert.equal(bindings().status(agent).state, state, `still ${state}`);
    };
    await expectRefused('u', 'UNBOUND', [
      'UNBIND',
      'SWITCH_REQUEST',
      'SWITCH_APPROVE',
      'SWITCH_REJECT',
      'SWITCH_REVOKE',
    ]);
    await withTarget('h');
    await expectRefused('h', 'BOUND_HOME', ['SWITCH_APPROVE', 'SWITCH_REJECT', 'SWITCH_REVOKE', 'BIND_OTHER']);
    await bindings().requestSwitch('h', 'shared', ctx);
    await expectRefused('h', 'SWITCH_PENDING', ['UNBIND', 'SWITCH_REQUEST', 'SWITCH_REVOKE', 'BIND_OTHER']);
    await bindings().approveSwitch('h', 'shared', 0, 'operator', ctx);
    await expectRefused('h', 'BOUND_NON_HOME', ['SWITCH_REQUEST', 'SWITCH_APPROVE', 'SWITCH_REJECT', 'BIND_OTHER']);
    await bindings().bind('f', 'nope', '', ctx);
    await expectRefused('f', 'BIND_FAILED', ['SWITCH_REQUEST', 'SWITCH_APPROVE', 'SWITCH_REJECT', 'SWITCH_REVOKE']);
  });

  it("refuses a switch to an unknown worktree or to the home itself, and a home that is another agent's", async () => {
    await bound('coder');
    await assert.rejects(
      bindings().requestSwitch('coder', 'ghost', ctx),
      (err: unknown) =>
        err instanceof BindingRequestError && err.kind === 'not_found' && err.code === 'worktree_not_found',
    );
    await assert.rejects(bindings().requestSwitch('coder', 'coder', ctx), /home worktree/);
    await assert.rejects(bindings().bind('other', 'app', 'coder', ctx), /home worktree of agent 'coder'/);
    assert.equal(bindings().status('coder').state, 'BOUND_HOME');
  });

  it('bindings persist across a restart: states, a pending switch and a running TTL come back; a TTL that passed returns home at start', async () => {
    await pending('a');
    await withTarget('b');
    const sb = await bindings().requestSwitch('b', 'shared', ctx);
    await bindings().approveSwitch('b', 'shared', 60_000, 'operator', ctx);
    await withTarget('c');
    await bindings().requestSwitch('c', 'shared', ctx);
    await bindings().approveSwitch('c', 'shared', 10_000, 'operator', ctx);
    await bindings().bind('f', 'nope', '', ctx);
    assert.ok(sb.switch);
    fixture.restart(() => clock.advance(30_000)); // stopped for 30 s: c's TTL ran out meanwhile, b's has 30 s left
    assert.equal(bindings().status('a').state, 'SWITCH_PENDING');
    assert.equal(bindings().status('b').state, 'BOUND_NON_HOME');
    assert.equal(bindings().status('c').state, 'BOUND_HOME');
    assert.equal(bindings().status('f').state, 'BIND_FAILED');
    const a = bindings().status('a');
    coordinator.hitl.decide(
      a.switch!.invocationId,
      { action: 'approve', rationale: 'after the restart' },
      'editor:alice',
      ctx,
    );
    assert.equal(bindings().status('a').state, 'BOUND_NON_HOME');
    clock.advance(30_000);
    assert.equal(bindings().status('b').state, 'BOUND_HOME');
    // The BIND_FAILED's notice was re-armed too (60 s after it failed, 30 s of them while stopped).
    assert.equal(coordinator.log.query({ eventType: 'worktree.bind_failed_operator_notice' }).length, 1);
  });
});
