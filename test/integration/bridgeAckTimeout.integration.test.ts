/* eslint-disable @typescript-eslint/no-explicit-any -- the bridge answers untyped JSON the tests read field by field */
import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { REPO_ROOT } from '../support/paths';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ctx = { correlationId: 'bridge-ack-timeout-test' };
const DIST = path.join(REPO_ROOT, 'dist');
const MINUTE = 60_000;
/** The host's launches option (sw4rm.agents.inboxAckTimeoutMinutes 45). */
const BRIDGED_MS = 45 * MINUTE;
const RFC_DEFAULT_MS = 10_000;

/** Calls a tool over the SDK's client; answers its structured output, or throws `<CODE>: message` for a tool error. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (result.isError) throw new Error(JSON.stringify(result.structuredContent));
  return result.structuredContent as Record<string, any>;
}

/**
 * A message to an agent launched from the editor with the MCP bridge waits the launch area's ACK timeout, not the RFC's
 * 10 s: a real coordinator (store file, gRPC and the bridge on port 0), a real git repository, the official MCP SDK's
 * client over Streamable HTTP with the launched agent's own credential. Real time: the stored deadline is asserted.
 */
describe('the ACK timeout of a launched bridged agent (README, "The MCP bridge")', function () {
  this.timeout(60_000);
  let dir: string;
  let dataDir: string;
  let repoPath: string;
  let host: CoordinatorHost;
  let api: InProcessCoordinatorApi;
  const clients: Client[] = [];

  /** A stand-in CLI (custom profile, `node`), wired to the bridge by an MCP config file like Claude Code. */
  const profile = {
    id: 'stand-in',
    name: 'Stand-in CLI',
    cli: 'custom',
    command: [process.execPath, '-e', 'process.exit(0)', '--'],
    bridge: { kind: 'mcp-config-file', path: '.mcp.json', format: 'claude-mcp-json', transport: 'http' },
  };

  async function start(): Promise<void> {
    host = await startHost(dataDir, {
      distDir: DIST,
      workspaceFolders: [repoPath],
      launches: { bridgedAckTimeoutMs: BRIDGED_MS },
    });
    host.coordinator.launches.setEndpoints(host.bridgeEndpoints);
    api = new InProcessCoordinatorApi(host.coordinator);
    assert.deepEqual(await api.setLaunchProfileSettings([profile]), []);
  }
  async function stop(): Promise<void> {
    for (const client of clients.splice(0)) await client.close();
    api.dispose();
    await stopHost(host);
  }
  async function connect(token: string): Promise<Client> {
    const client = new Client({ name: 'ack-timeout-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(host.bridgeEndpoints!.mcpUrl), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    clients.push(client);
    return client;
  }
  /** How long the router gives this message to be RECEIVED, as stored with it. */
  const ackTimeoutOf = (messageId: string) => {
    const record = host.coordinator.router.message(messageId)!;
    return record.ackDeadline! - record.acceptedAt;
  };

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-int-acktimeout-');
    repoPath = makeRepo(dir, 'app', { 'README.md': 'hello\n' });
    dataDir = path.join(dir, 'data');
    await start();
  });

  afterEach(async () => {
    await stop();
    removeTempDir(dir);
  });

  it('a message to it waits the launches option (45 min), read with read_inbox; an agent using the bridge unlaunched keeps 10 s; again after a restart', async () => {
    const plan = await api.launchAgent(
      { profileId: 'stand-in', repoId: 'app', worktree: { kind: 'new' } },
      'editor:test',
    );
    const launched = plan.record.agentId;
    assert.equal(plan.record.bridged, true);
    await api.launchStarted(launched);
    // Another agent, also on the bridge but registered by itself (not launched): the sender, and a recipient with 10 s.
    const senderToken = host.coordinator.credentials.mintAgent('sender', 'test', 'sender', ctx).token;
    assert.equal(host.coordinator.registry.register(validDescriptor('sender'), ctx).accepted, true);
    host.coordinator.credentials.mintAgent('unlaunched', 'test', 'unlaunched', ctx);
    assert.equal(host.coordinator.registry.register(validDescriptor('unlaunched'), ctx).accepted, true);

    const sender = await connect(senderToken);
    const before = Date.now();
    const toLaunched = await call(sender, 'send_message', { to: launched, payload: { task: 'review' } });
    const toUnlaunched = await call(sender, 'send_message', { to: 'unlaunched', payload: { task: 'review' } });
    assert.equal(ackTimeoutOf(toLaunched.message_id), BRIDGED_MS);
    const record = host.coordinator.router.message(toLaunched.message_id)!;
    assert.ok(
      record.ackDeadline! >= before + BRIDGED_MS && record.ackDeadline! <= Date.now() + BRIDGED_MS,
      'now + the bridged timeout',
    );
    assert.equal(
      ackTimeoutOf(toUnlaunched.message_id),
      RFC_DEFAULT_MS,
      'the RFC default for an agent the coordinator did not launch',
    );

    // The launched agent pulls its inbox with its own credential: the message is there, and READ.
    const agent = await connect(plan.env.SW4RM_TOKEN);
    const read = await call(agent, 'read_inbox', {});
    assert.deepEqual(
      read.messages.map((m: { message_id: string }) => m.message_id),
      [toLaunched.message_id],
    );
    assert.equal(host.coordinator.router.message(toLaunched.message_id)!.state, 'READ');

    // Its process exits, and the coordinator restarts: messages to it still wait 45 min (for its relaunch).
    await api.launchExited(launched, 0, 'editor:test');
    await stop();
    await start();
    const sender2 = await connect(senderToken);
    const afterRestart = await call(sender2, 'send_message', { to: launched, payload: { task: 'again' } });
    assert.equal(ackTimeoutOf(afterRestart.message_id), BRIDGED_MS);
    const unlaunchedAgain = await call(sender2, 'send_message', { to: 'unlaunched', payload: { task: 'again' } });
    assert.equal(ackTimeoutOf(unlaunchedAgain.message_id), RFC_DEFAULT_MS);
  });
});
