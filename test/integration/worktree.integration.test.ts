import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { cleanEnvironment } from '../../src/core/worktree/git';
import type { CoordinatorHost } from '../../src/server/host';
import { CoordinatorClients, expectStatus, WorktreeClient } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';
import { WireAgent, wireJson } from '../support/routerWire';

function git(cwd: string, ...args: string[]): string {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8', env: cleanEnvironment() });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

interface StatusResponse {
  repo_id: string;
  worktree_id: string;
  state: string;
}

describe('WorktreeService and WORKTREE_CONTROL over real gRPC (RFC §16)', function () {
  this.timeout(30_000);
  let dir: string;
  let repoPath: string;
  let host: CoordinatorHost;
  let operator: WorktreeClient;
  const clients: Array<{ close(): void }> = [];

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-int-worktree-');
    repoPath = path.join(dir, 'app');
    fs.mkdirSync(repoPath);
    git(repoPath, 'init', '-q', '-b', 'main');
    fs.writeFileSync(path.join(repoPath, 'README.md'), 'hello\n');
    git(repoPath, 'add', '-A');
    git(repoPath, '-c', 'user.name=Test', '-c', 'user.email=test@example.invalid', 'commit', '-q', '-m', 'initial');
    // The host discovers the repositories of its workspace folders, as the editor starts it.
    host = await startHost(path.join(dir, 'data'), { workspaceFolders: [repoPath] });
    host.coordinator.hitl.attachOperator('editor:test');
    operator = new WorktreeClient(`127.0.0.1:${host.port}`, host.token);
    clients.push(operator);
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await stopHost(host);
    removeTempDir(dir);
  });

  async function registered(agentId: string): Promise<string> {
    const registry = new CoordinatorClients(`127.0.0.1:${host.port}`, host.token);
    assert.equal((await registry.registerAgent(descriptorMessage(agentId))).accepted, true);
    registry.close();
    return host.coordinator.credentials.mintAgent(agentId, 'test', 'worktree tests', { correlationId: 'test' }).token;
  }

  it('Bind creates the home worktree; Status, RequestSwitch and ApproveSwitch (operator) move the binding; Unbind keeps the folder', async () => {
    assert.deepEqual(await operator.call('Bind', { agent_id: 'coder', repo_id: 'app' }), { ok: true, reason: '' });
    const home = path.join(dir, 'app.sw4rm-worktrees', 'coder');
    assert.ok(fs.existsSync(path.join(home, 'README.md')));
    assert.deepEqual(await operator.call('Status', { agent_id: 'coder' }), {
      repo_id: 'app',
      worktree_id: 'coder',
      state: 'BOUND_HOME',
    });
    assert.deepEqual(await operator.call('Bind', { agent_id: 'peer', repo_id: 'app' }), { ok: true, reason: '' });
    assert.deepEqual(await operator.call('Unbind', { agent_id: 'peer' }), { ok: true });
    assert.ok(fs.existsSync(path.join(dir, 'app.sw4rm-worktrees', 'peer')), 'Unbind never removes a worktree');

    const pending = await operator.call<StatusResponse>('RequestSwitch', {
      agent_id: 'coder',
      target_worktree_id: 'peer',
      requires_hitl: true,
    });
    assert.deepEqual(pending, { repo_id: 'app', worktree_id: 'coder', state: 'SWITCH_PENDING' });
    const invocation = host.coordinator.hitl.list({ pendingOnly: true })[0];
    assert.equal(invocation.reasonType, 'WORKTREE_OVERRIDE');
    const granted = await operator.call<StatusResponse>('ApproveSwitch', {
      agent_id: 'coder',
      target_worktree_id: 'peer',
      ttl_ms: 60_000,
    });
    assert.deepEqual(granted, { repo_id: 'app', worktree_id: 'peer', state: 'BOUND_NON_HOME' });
    assert.equal(host.coordinator.hitl.get(invocation.id)?.decision?.origin.by, 'operator');

    assert.deepEqual(await operator.call('Unbind', { agent_id: 'coder' }), { ok: true });
    assert.deepEqual(await operator.call('Status', { agent_id: 'coder' }), {
      repo_id: '',
      worktree_id: '',
      state: 'UNBOUND',
    });
    assert.ok(fs.existsSync(home));
  });

  it('answers a failed bind with ok false and its reason, and refuses bad requests with the RFC code first', async () => {
    const failed = await operator.call<{ ok: boolean; reason: string }>('Bind', {
      agent_id: 'coder',
      repo_id: 'elsewhere',
    });
    assert.equal(failed.ok, false);
    assert.match(failed.reason, /^worktree_not_found: no repository 'elsewhere' in the workspace \(known: app\)/);
    assert.equal((await operator.call<StatusResponse>('Status', { agent_id: 'coder' })).state, 'BIND_FAILED');

    const bad = await expectStatus(
      operator.call('Bind', { agent_id: 'other', repo_id: 'app', worktree_id: '../escape' }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(bad.details, /^VALIDATION_ERROR: /);
    const illegal = await expectStatus(
      operator.call('RequestSwitch', { agent_id: 'coder', target_worktree_id: 'x' }),
      grpc.status.FAILED_PRECONDITION,
    );
    assert.match(illegal.details, /^VALIDATION_ERROR: SWITCH_REQUEST is not allowed in state BIND_FAILED/);
    await operator.call('Bind', { agent_id: 'fine', repo_id: 'app' });
    const missing = await expectStatus(
      operator.call('RequestSwitch', { agent_id: 'fine', target_worktree_id: 'ghost' }),
      grpc.status.NOT_FOUND,
    );
    assert.match(missing.details, /^worktree_not_found: /);
  });

  it('ApproveSwitch and RejectSwitch with an agent credential are PERMISSION_DENIED, also for its own switch', async () => {
    const token = await registered('coder');
    const agent = new WorktreeClient(`127.0.0.1:${host.port}`, token);
    clients.push(agent);
    assert.deepEqual(await agent.call('Bind', { agent_id: 'coder', repo_id: 'app' }), { ok: true, reason: '' });
    await operator.call('Bind', { agent_id: 'peer', repo_id: 'app' });
    assert.equal(
      (await agent.call<StatusResponse>('RequestSwitch', { agent_id: 'coder', target_worktree_id: 'peer' })).state,
      'SWITCH_PENDING',
    );
    for (const method of ['ApproveSwitch', 'RejectSwitch']) {
      const denied = await expectStatus(
        agent.call(method, { agent_id: 'coder', target_worktree_id: 'peer', ttl_ms: 1 }),
        grpc.status.PERMISSION_DENIED,
      );
      assert.match(
        denied.details,
        /^PERMISSION_DENIED: approving or rejecting a worktree switch is an operator action/,
      );
    }
    assert.equal((await agent.call<StatusResponse>('Status', { agent_id: 'coder' })).state, 'SWITCH_PENDING');
    assert.equal(
      (await operator.call<StatusResponse>('RejectSwitch', { agent_id: 'coder', reason: 'not now' })).state,
      'BOUND_HOME',
    );
  });

  it('a WORKTREE_CONTROL envelope to coordinator binds, reports status and unbinds; the reply comes back correlated', async () => {
    const token = await registered('env-agent');
    const agent = new WireAgent(`127.0.0.1:${host.port}`, token, 'env-agent');
    clients.push(agent);
    const inbox = agent.openInbox();
    clients.push(inbox);
    const roundTrip = async (payload: Record<string, unknown>) => {
      const msg = agent.envelope({ message_type: 'WORKTREE_CONTROL', payload });
      const sent = await agent.send(msg, 'coordinator');
      assert.deepEqual(sent, { accepted: true, reason: '' }, JSON.stringify(payload));
      const reply = await inbox.waitFor(
        `the reply to ${String(payload.action)}`,
        (item) => item.msg.message_type === 'WORKTREE_CONTROL' && item.msg.correlation_id === msg.correlation_id,
      );
      return wireJson(reply.msg);
    };
    const bound = await roundTrip({ action: 'BIND', repo_id: 'app' });
    assert.equal(bound.type, 'WORKTREE_STATUS');
    assert.equal(bound.ok, true);
    assert.equal(bound.state, 'BOUND_HOME');
    assert.equal(bound.worktree_id, 'env-agent');
    assert.equal(
      fs.realpathSync(String(bound.worktree_path)),
      fs.realpathSync(path.join(dir, 'app.sw4rm-worktrees', 'env-agent')),
    );
    const status = await roundTrip({ action: 'status' });
    assert.deepEqual([status.state, status.repo_id, status.worktree_id], ['BOUND_HOME', 'app', 'env-agent']);
    const revoke = await roundTrip({ action: 'switch_revoke' });
    assert.equal(revoke.ok, false);
    assert.match(String(revoke.error), /SWITCH_REVOKE is not allowed in state BOUND_HOME/);

    const approve = await agent.send(
      agent.envelope({
        message_type: 'WORKTREE_CONTROL',
        payload: { action: 'switch_approve', target_worktree_id: 'x' },
      }),
      'coordinator',
    );
    assert.equal(approve.accepted, false);
    assert.match(approve.reason, /^PERMISSION_DENIED: SWITCH_APPROVE is an operator action/);
    const other = await agent.send(
      agent.envelope({ message_type: 'WORKTREE_CONTROL', payload: { action: 'unbind', agent_id: 'someone-else' } }),
      'coordinator',
    );
    assert.match(other.reason, /^PERMISSION_DENIED: /);

    const unbound = await roundTrip({ action: 'unbind' });
    assert.equal(unbound.state, 'UNBOUND');
    assert.equal(host.coordinator.worktrees.status('env-agent').state, 'UNBOUND');
  });
});
