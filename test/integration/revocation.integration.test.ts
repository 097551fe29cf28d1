import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import type { CoordinatorHost } from '../../src/server/host';
import { bearer, CoordinatorClients, expectStatus, serviceClient, unary, type ServiceClient } from '../support/clients';
import { descriptorMessage, validDescriptor } from '../support/fixtures';
import { makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { RoomClient } from '../support/roomClient';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface ToolFrame {
  call_id: string;
  frame_no: string;
  final: boolean;
  content_type: string;
  data: Buffer;
  summary: Buffer;
}

/**
 * Issue 30, item 4: revoking a credential ends every call in flight under it at once, UNAUTHENTICATED — a streamed
 * run_command (its process group killed, not left to run to its end) and a unary one (answered UNAUTHENTICATED, not
 * with the command's result) — and a WaitForDecision waiting for a room's decision.
 */
describe('revocation ends the calls in flight under the credential (real gRPC, real processes)', function () {
  this.timeout(120_000);
  let base: string;
  let dataDir: string;
  let host: CoordinatorHost;
  let tools: ServiceClient;
  let worktrees: ServiceClient;
  const policy = { privilege_level: 'DEFAULT', network_policy: 'DENY_ALL' };
  const ctx = { correlationId: 'test' };

  before(async () => {
    base = fs.realpathSync(makeTempDir('sw4rm-int-revoke-'));
    dataDir = makeTempDir('sw4rm-int-revoke-data-');
    const repo = makeRepo(base, 'app', { 'README.md': 'hello\n' });
    host = await startHost(dataDir, {
      workspaceFolders: [repo],
      tools: { process: { enabled: true, acceptUnenforcedNetworkPolicy: false } },
    });
    const address = `127.0.0.1:${host.port}`;
    tools = serviceClient(address, 'sw4rm.tool.ToolService');
    worktrees = serviceClient(address, 'sw4rm.worktree.WorktreeService');
    const registry = new CoordinatorClients(address, host.token);
    assert.equal((await registry.registerAgent(descriptorMessage('coder'))).accepted, true);
    registry.close();
  });

  after(async () => {
    tools.close();
    worktrees.close();
    await stopHost(host);
    removeTempDir(dataDir);
    removeTempDir(base);
  });

  /** A fresh credential of `coder`, bound to its worktree; its id and token. */
  async function credential(): Promise<{ id: string; token: string }> {
    const minted = host.coordinator.credentials.mintAgent('coder', 'test', 'revocation tests', ctx);
    await unary(worktrees, 'Bind', { agent_id: 'coder', repo_id: 'app' }, bearer(minted.token));
    return { id: minted.credential.id, token: minted.token };
  }

  it('a streamed run_command ends UNAUTHENTICATED and its process group is killed', async () => {
    const { id, token } = await credential();
    // Found by their arguments in the host's /proc: under bubblewrap the command has its own PID namespace and session.
    const seconds = String(600 + Math.floor(Math.random() * 100_000) / 1000);
    const sleeps = (): number[] =>
      fs
        .readdirSync('/proc')
        .filter((p) => /^\d+$/.test(p))
        .filter((p) => {
          try {
            return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8') === `sleep\0${seconds}\0`;
          } catch {
            return false;
          }
        })
        .map(Number);
    const frames: ToolFrame[] = [];
    const stream = (tools.CallStream as (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<ToolFrame>).call(
      tools,
      {
        call_id: 'revoked-stream',
        provider_id: 'process',
        tool_name: 'run_command',
        stream: true,
        policy,
        args: Buffer.from(JSON.stringify({ argv: ['sh', '-c', `echo up; sleep ${seconds} & sleep ${seconds}`] })),
      },
      bearer(token),
    );
    const ended = new Promise<grpc.ServiceError>((resolve) => {
      stream.on('error', resolve);
      stream.on('end', () => resolve(undefined as unknown as grpc.ServiceError));
    });
    stream.on('data', (f: ToolFrame) => frames.push(f));
    await pollUntil('the first output frame', () => frames.length > 0 || undefined);
    await pollUntil('the sleeps', () => sleeps().length >= 2 || undefined);
    const pids = sleeps();
    host.coordinator.credentials.revoke(id, 'test', ctx);
    const error = await ended;
    assert.equal(error?.code, grpc.status.UNAUTHENTICATED);
    assert.match(error.details, /revoked/);
    await pollUntil('the sleeps to be gone', () => sleeps().length === 0 || undefined, 10_000);
    console.log(`      sleeps ${pids.join(', ')}: gone after revocation`);
  });

  it("a unary run_command ends UNAUTHENTICATED at once, not with the command's result", async () => {
    const { id, token } = await credential();
    const answer = unary<ToolFrame>(
      tools,
      'Call',
      {
        call_id: 'revoked-unary',
        provider_id: 'process',
        tool_name: 'run_command',
        policy,
        args: Buffer.from(JSON.stringify({ argv: ['sh', '-c', 'echo started; sleep 3; echo finished'] })),
      },
      bearer(token),
    );
    await pollUntil(
      'the command running',
      () =>
        (host.coordinator.log.query({ eventType: 'tool.call' }).length >= 0 &&
          [
            ...(
              host.coordinator.tools as unknown as { active: Map<unknown, { record: { callId: string } }> }
            ).active.values(),
          ].some((c) => c.record.callId === 'revoked-unary')) ||
        undefined,
    );
    const started = Date.now();
    host.coordinator.credentials.revoke(id, 'test', ctx);
    const error = await expectStatus(answer, grpc.status.UNAUTHENTICATED);
    assert.match(error.details, /revoked/);
    const elapsed = Date.now() - started;
    console.log(`      unary run_command answered UNAUTHENTICATED ${elapsed} ms after revocation`);
    assert.ok(elapsed < 2_000, `answered ${elapsed} ms after revocation, before the 3 s command could finish`);
  });

  it('a WaitForDecision waiting for the critics ends UNAUTHENTICATED at once; the room still decides for the new credential', async () => {
    for (const id of ['producer', 'critic-1', 'critic-2'])
      assert.equal(host.coordinator.registry.register(validDescriptor(id), ctx).accepted, true);
    const room = new RoomClient(`127.0.0.1:${host.port}`, host.token);
    try {
      const old = host.coordinator.credentials.mintAgent('producer', 'test', 'revocation tests', ctx);
      await room.submitProposal(
        {
          artifact_type: 'PLAN',
          artifact_id: 'plan-r',
          producer_id: 'producer',
          artifact: Buffer.from('{"steps":[]}'),
          artifact_content_type: 'application/json',
          requested_critics: ['critic-1', 'critic-2'],
          negotiation_room_id: 'room-r',
        },
        old.token,
      );
      const waiting = room.call<{ decision: unknown }>(
        'WaitForDecision',
        { artifact_id: 'plan-r', negotiation_room_id: 'room-r', timeout_seconds: 60 },
        { agentId: 'producer', token: old.token, deadlineMs: 70_000 },
      );
      await pollUntil('the producer waiting', () => host.coordinator.room.waiterCount('plan-r') === 1 || undefined);
      const started = Date.now();
      host.coordinator.credentials.revoke(old.credential.id, 'test', ctx);
      const error = await expectStatus(waiting, grpc.status.UNAUTHENTICATED);
      assert.match(error.details, /revoked/);
      const elapsed = Date.now() - started;
      console.log(`      WaitForDecision answered UNAUTHENTICATED ${elapsed} ms after revocation`);
      assert.ok(elapsed < 2_000, `answered ${elapsed} ms after revocation`);
      await pollUntil(
        'the server to drop the waiter',
        () => host.coordinator.room.waiterCount('plan-r') === 0 || undefined,
      );
      // The room is untouched: the critics vote and the producer's new credential gets the decision.
      for (const critic of ['critic-1', 'critic-2']) {
        await room.submitVote({
          artifact_id: 'plan-r',
          critic_id: critic,
          score: 8,
          confidence: 0.9,
          passed: true,
          strengths: [],
          weaknesses: [],
          recommendations: [],
          negotiation_room_id: 'room-r',
        });
      }
      const renewed = host.coordinator.credentials.mintAgent('producer', 'test', 'revocation tests', ctx).token;
      const answer = await room.call<{ decision: { outcome: string } }>(
        'WaitForDecision',
        { artifact_id: 'plan-r', negotiation_room_id: 'room-r', timeout_seconds: 5 },
        { agentId: 'producer', token: renewed },
      );
      assert.equal(answer.decision.outcome, 'APPROVED');
    } finally {
      room.close();
    }
  });
});
