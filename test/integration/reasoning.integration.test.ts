import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import type { CoordinatorHost } from '../../src/server/host';
import { canonicalDefinition, CoordinatorClients, expectStatus, unary } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface Verdict { confidence_score: number; notes: string }
type Client = grpc.Client & Record<string, (...args: unknown[]) => unknown>;

/**
 * ReasoningProxy.CheckParallelism over real gRPC (RFC §9.3, issue 16 part 4): the built-in deterministic scorer the
 * scheduler's gate uses, for two scopes in SubmitTask's syntax; EvaluateDebate and Summarize are not implemented yet.
 */
describe('ReasoningProxy.CheckParallelism over real gRPC', function () {
  this.timeout(60_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let client: Client;
  let agentToken: string;

  const bearer = (token: string) => {
    const m = new grpc.Metadata();
    m.set('authorization', `Bearer ${token}`);
    return m;
  };
  const check = (scopeA: string, scopeB: string, token = host.token!) =>
    unary<Verdict>(client, 'CheckParallelism', { scope_a: scopeA, scope_b: scopeB }, bearer(token));

  before(async () => {
    dataDir = makeTempDir('sw4rm-int-reasoning-');
    host = await startHost(dataDir);
    const root = grpc.loadPackageDefinition(canonicalDefinition()) as unknown as { sw4rm: { reasoning: { ReasoningProxy: grpc.ServiceClientConstructor } } };
    client = new root.sw4rm.reasoning.ReasoningProxy(`127.0.0.1:${host.port}`, grpc.credentials.createInsecure()) as Client;
    const operator = new CoordinatorClients(`127.0.0.1:${host.port}`, host.token);
    assert.equal((await operator.registerAgent(descriptorMessage('planner'))).accepted, true);
    operator.close();
    agentToken = host.coordinator.credentials.mintAgent('planner', 'test', 'reasoning tests', { correlationId: 'test' }).token;
  });

  after(async () => {
    client?.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  it('answers the scorer\'s table: no overlap 1.0, the same files 0.2, a shared resource 0.1, the same worktree 0.3, overlapping globs 0.4–0.6', async () => {
    assert.deepEqual(await check('repo:myrepo/src/**', 'repo:myrepo/docs/**'), { confidence_score: 1, notes: 'no overlap: different repositories, worktrees, paths and resources' });
    assert.equal((await check('repo:myrepo/path', 'repo:myrepo/path')).confidence_score, 0.2, 'the reference SDK example, twice');
    assert.equal((await check('repo:a resource:db', 'repo:b, resource:db')).confidence_score, 0.1);
    assert.equal((await check('repo:r worktree:w', '{"repo_id":"r","worktree_id":"w"}')).confidence_score, 0.3);
    const globs = await check('repo:r/src/**', '{"repo_id":"r","paths":["src/lib/**"]}');
    assert.equal(globs.confidence_score, 0.45);
    assert.match(globs.notes, /'src\/\*\*' and 'src\/lib\/\*\*' may share paths/);
  });

  it('is deterministic, and an agent credential may ask too', async () => {
    const first = await check('repo:r/src/*.ts', 'repo:r/src/a.ts');
    assert.deepEqual(await check('repo:r/src/*.ts', 'repo:r/src/a.ts', agentToken), first);
    assert.equal(first.confidence_score, 0.4);
  });

  it('refuses a missing or unreadable scope as INVALID_ARGUMENT naming which one', async () => {
    const missing = await expectStatus(check('', 'repo:r'), grpc.status.INVALID_ARGUMENT);
    assert.match(missing.details, /^VALIDATION_ERROR: scope_a: scope is required/);
    const bad = await expectStatus(check('repo:r', 'folder:x'), grpc.status.INVALID_ARGUMENT);
    assert.match(bad.details, /^VALIDATION_ERROR: scope_b: scope token "folder:x"/);
  });

  it('refuses a call without a credential; EvaluateDebate is not implemented yet', async () => {
    await expectStatus(unary(client, 'CheckParallelism', { scope_a: 'repo:r', scope_b: 'repo:r' }, new grpc.Metadata()), grpc.status.UNAUTHENTICATED);
    const debate = await expectStatus(unary(client, 'EvaluateDebate', { negotiation_id: 'n' }, bearer(host.token!)), grpc.status.UNIMPLEMENTED);
    assert.match(debate.details, /not implemented yet/);
  });
});
