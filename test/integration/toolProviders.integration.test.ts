import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import type { CoordinatorHost } from '../../src/server/host';
import { bearer, CoordinatorClients, expectStatus, serviceClient, unary, type ServiceClient } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface ToolDescriptorMessage {
  tool_name: string;
  input_schema: string;
  output_schema: string;
  idempotent: boolean;
  needs_worktree: boolean;
  default_timeout_s: number;
  max_concurrency: number;
  side_effects: string;
}
type Client = ServiceClient;

const grep = {
  tool_name: 'grep',
  input_schema: JSON.stringify({
    description: 'Searches files.',
    type: 'object',
    required: ['pattern'],
    properties: { pattern: { type: 'string' } },
  }),
  output_schema: JSON.stringify({ type: 'object', properties: { matches: { type: 'array' } } }),
  idempotent: true,
  needs_worktree: false,
  default_timeout_s: 30,
  max_concurrency: 2,
  side_effects: 'filesystem,process',
};

/**
 * ConnectorService.RegisterProvider and DescribeTools over real gRPC with agent credentials (issue 17, part 1): an agent
 * registers itself as a tool provider, invalid schemas are refused with their path, built-in ids and other agents' ids
 * are refused, and the registration survives a restart of the coordinator.
 */
describe('tool providers over real gRPC (ConnectorService)', function () {
  this.timeout(120_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let connector: Client;
  const tokens: Record<string, string> = {};

  const metadata = (token: string | undefined): grpc.Metadata => bearer(token);

  async function start(): Promise<void> {
    host = await startHost(dataDir);
    connector = serviceClient(`127.0.0.1:${host.port}`, 'sw4rm.connector.ConnectorService');
  }

  async function stop(): Promise<void> {
    connector?.close();
    await stopHost(host);
  }

  const register = (token: string | undefined, request: unknown) =>
    unary<{ ok: boolean; reason: string }>(connector, 'RegisterProvider', request, metadata(token));
  const describeTools = (token: string | undefined, providerId: string) =>
    unary<{ tools: ToolDescriptorMessage[] }>(
      connector,
      'DescribeTools',
      { provider_id: providerId },
      metadata(token),
    ).then((r) => r.tools);

  before(async () => {
    dataDir = makeTempDir('sw4rm-int-providers-');
    await start();
    const registry = new CoordinatorClients(`127.0.0.1:${host.port}`, host.token);
    for (const agent of ['indexer', 'other']) {
      assert.equal((await registry.registerAgent(descriptorMessage(agent))).accepted, true);
      tokens[agent] = host.coordinator.credentials.mintAgent(agent, 'test', 'tool provider tests', {
        correlationId: 'test',
      }).token;
    }
    registry.close();
  });

  after(async () => {
    await stop();
    removeTempDir(dataDir);
  });

  it("registers an agent as provider with its credential; DescribeTools lists its tools, and every provider's as <provider>/<tool>", async () => {
    assert.deepEqual(await register(tokens.indexer, { provider_id: 'indexer', tools: [grep] }), {
      ok: true,
      reason: '',
    });
    const [tool] = await describeTools(tokens.other, 'indexer');
    assert.deepEqual(
      [tool.tool_name, tool.idempotent, tool.default_timeout_s, tool.max_concurrency, tool.side_effects],
      ['grep', true, 30, 2, 'filesystem,process'],
    );
    assert.deepEqual(JSON.parse(tool.input_schema), {
      description: 'Searches files.',
      type: 'object',
      required: ['pattern'],
      properties: { pattern: { type: 'string' } },
    });
    assert.deepEqual(JSON.parse(tool.output_schema), JSON.parse(grep.output_schema));
    const all = (await describeTools(tokens.other, '')).map((t) => t.tool_name);
    assert.ok(all.includes('workspace/read_file'), all.join(' '));
    assert.deepEqual(
      all.filter((n) => n.startsWith('indexer/')),
      ['indexer/grep'],
    );
    const [event] = host.coordinator.log.query({ eventType: 'tool.provider_registered' });
    assert.deepEqual([event.actor, event.details.provider_id, event.details.tools], ['indexer', 'indexer', ['grep']]);
  });

  it('refuses an invalid schema with ok=false and the path of the problem, and keeps the previous registration', async () => {
    const bad = {
      ...grep,
      tool_name: 'lint',
      input_schema: JSON.stringify({ type: 'object', properties: { path: { type: 'strin' } } }),
    };
    const answer = await register(tokens.indexer, { provider_id: 'indexer', tools: [grep, bad] });
    assert.equal(answer.ok, false);
    assert.match(
      answer.reason,
      /^VALIDATION_ERROR: tools\[1\]\.input_schema: \/properties\/path\/type must be equal to one of the allowed values/,
    );
    const url = await register(tokens.indexer, {
      provider_id: 'indexer',
      tools: [{ tool_name: 'x', output_schema: 'https://example.com/s.json' }],
    });
    assert.deepEqual(url, {
      ok: false,
      reason: 'VALIDATION_ERROR: tools[0].output_schema: schema URLs are not fetched: inline the schema',
    });
    assert.deepEqual(
      (await describeTools(tokens.indexer, 'indexer')).map((t) => t.tool_name),
      ['grep'],
    );
  });

  it('refuses a provider registering as another agent (PERMISSION_DENIED), built-in ids, unregistered agents and a call naming no agent', async () => {
    const denied = await expectStatus(
      register(tokens.other, { provider_id: 'indexer', tools: [grep] }),
      grpc.status.PERMISSION_DENIED,
    );
    assert.match(denied.details, /this credential acts as agent 'other'; the call acts as 'indexer'/);
    assert.deepEqual(
      (await describeTools(tokens.indexer, 'indexer')).map((t) => t.tool_name),
      ['grep'],
      'unchanged',
    );
    const builtin = await register(host.token, { provider_id: 'workspace', tools: [grep] });
    assert.equal(builtin.ok, false);
    assert.match(builtin.reason, /^ALREADY_EXISTS: provider_id 'workspace' is a built-in provider/);
    const ghost = await register(host.token, { provider_id: 'ghost', tools: [grep] });
    assert.equal(ghost.ok, false);
    assert.match(ghost.reason, /^FAILED_PRECONDITION: register the agent first/);
    const nobody = await expectStatus(
      register(host.token, { provider_id: '', tools: [grep] }),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(nobody.details, /^VALIDATION_ERROR: provider_id must name the registering agent/);
    const unknown = await expectStatus(describeTools(tokens.indexer, 'nobody'), grpc.status.NOT_FOUND);
    assert.match(unknown.details, /^NOT_FOUND: no provider 'nobody' \(known: workspace, process, reasoning, indexer\)/);
  });

  it('replaces the tools on a repeat, and keeps the registration across a restart (unavailable until the agent is back)', async () => {
    assert.deepEqual(
      await register(tokens.indexer, { provider_id: 'indexer', tools: [grep, { tool_name: 'count' }] }),
      { ok: true, reason: '' },
    );
    assert.deepEqual(
      (await describeTools(tokens.indexer, 'indexer')).map((t) => t.tool_name),
      ['grep', 'count'],
    );
    await stop();
    await start();
    assert.deepEqual(
      (await describeTools(tokens.other, 'indexer')).map((t) => [t.tool_name, t.side_effects]),
      [
        ['grep', 'filesystem,process'],
        ['count', 'none'],
      ],
    );
    const info = () => host.coordinator.toolCatalog.infos().find((p) => p.providerId === 'indexer');
    assert.equal(info()?.available, false);
    const registry = new CoordinatorClients(`127.0.0.1:${host.port}`, tokens.indexer);
    assert.deepEqual(await registry.heartbeat('indexer'), { ok: true });
    registry.close();
    assert.equal(info()?.available, true);
  });
});
