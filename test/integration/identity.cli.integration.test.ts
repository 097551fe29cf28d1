import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { useCliProcesses } from '../support/cli';
import { CoordinatorClients, expectStatus } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';

/** `sw4rm-coordinator credentials`: headless minting, listing and revoking, with or without a running coordinator. */
describe('sw4rm-coordinator credentials', () => {
  const { run, dataDir } = useCliProcesses('sw4rm-int-cli-credentials-');
  const command = async (...args: string[]) => {
    const cli = run('credentials', '--data-dir', dataDir(), ...args);
    const code = await cli.exit();
    return { code, stdout: cli.stdout, stderr: cli.stderr };
  };
  const exported = (stdout: string) =>
    Object.fromEntries([...stdout.matchAll(/^export (\w+)=(\S+)$/gm)].map((m) => [m[1], m[2]]));

  it('mints, lists and revokes through the running coordinator; the credential acts only as its agent', async () => {
    const coordinator = run('--port', '0', '--data-dir', dataDir());
    const env = await coordinator.environment();
    const minted = await command('--agent', 'alpha');
    assert.equal(minted.code, 0, minted.stderr);
    const agent = exported(minted.stdout);
    assert.equal(agent.SW4RM_AGENT_ID, 'alpha');
    assert.match(agent.SW4RM_TOKEN, /^sw4rm\./);
    const clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, agent.SW4RM_TOKEN);
    try {
      assert.equal((await clients.registerAgent(descriptorMessage('alpha'))).accepted, true);
      await expectStatus(clients.heartbeat('beta'), grpc.status.PERMISSION_DENIED);
      const listed = await command('--list');
      assert.equal(listed.code, 0, listed.stderr);
      const id = agent.SW4RM_TOKEN.split('.')[1];
      assert.match(listed.stdout, new RegExp(`^${id}\\tagent\\talpha\\tactive`, 'm'));
      assert.ok(!listed.stdout.includes(agent.SW4RM_TOKEN.split('.')[2]), 'no secret is listed');
      const revoked = await command('--revoke', id);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.match(revoked.stdout, /\trevoked /);
      await expectStatus(clients.heartbeat('alpha'), grpc.status.UNAUTHENTICATED);
    } finally {
      clients.close();
    }
  });

  it('works on the store when no coordinator runs, and the next coordinator honours it', async () => {
    const minted = await command('--agent', 'alpha', '--label', 'for the build bot');
    assert.equal(minted.code, 0, minted.stderr);
    const agent = exported(minted.stdout);
    const coordinator = run('--port', '0', '--data-dir', dataDir());
    const env = await coordinator.environment();
    const clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, agent.SW4RM_TOKEN);
    try {
      assert.equal((await clients.registerAgent(descriptorMessage('alpha'))).accepted, true);
      await expectStatus(clients.registerAgent(descriptorMessage('beta')), grpc.status.PERMISSION_DENIED);
    } finally {
      clients.close();
    }
  });

  it('refuses bad usage and an invalid agent id', async () => {
    assert.equal((await command()).code, 2);
    const bad = await command('--agent', 'no spaces');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /agent_id/);
    for (const args of [
      ['--list', '--register'],
      ['--agent', 'a', '--name', 'A'],
      ['--agent', 'a', '--register', '--capability'],
    ]) {
      const usage = await command(...args);
      assert.equal(usage.code, 2, args.join(' '));
      assert.match(usage.stderr, /--register|--capability needs a value/);
    }
  });

  describe('--agent <id> --register: a bridge-only agent, minted and registered in one command', () => {
    /** The agents list_agents answers the agent of `token` through the coordinator's MCP bridge at `mcpUrl`. */
    async function listAgents(mcpUrl: string, token: string): Promise<Array<Record<string, unknown>>> {
      const client = new Client({ name: 'credentials-register-test', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(mcpUrl), {
          requestInit: { headers: { Authorization: `Bearer ${token}` } },
        }),
      );
      try {
        const result = (await client.callTool({ name: 'list_agents', arguments: {} })) as CallToolResult;
        assert.notEqual(result.isError, true, JSON.stringify(result.content));
        return (result.structuredContent as { agents: Array<Record<string, unknown>> }).agents;
      } finally {
        await client.close();
      }
    }
    const startCoordinator = async () => {
      const coordinator = run('--port', '0', '--bridge-port', '0', '--data-dir', dataDir());
      await coordinator.environment();
      return (await coordinator.waitForOutput(/^# MCP bridge for agents: (http:\/\/127\.0\.0\.1:\d+\/mcp) /m))[1];
    };
    const register = (id: string, ...args: string[]) => command('--agent', id, '--register', ...args);
    /** The credentials of `agentId` as `--list` shows them: [credential id, active | revoked …]. */
    const credentialsOf = async (agentId: string) => {
      const listed = await command('--list');
      assert.equal(listed.code, 0, listed.stderr);
      return [...listed.stdout.matchAll(/^(\S+)\tagent\t(\S+)\t(active|revoked [^\t]+)\t/gm)]
        .filter((m) => m[2] === agentId)
        .map((m) => [m[1], m[3]]);
    };

    it('while the coordinator runs: RegisterAgent with the new credential; the bridge serves it; again updates it; a refusal revokes the credential', async () => {
      const mcpUrl = await startCoordinator();
      const first = await register(
        'bridged',
        '--name',
        'Bridged agent',
        '--capability',
        'mcp-example',
        '--capability',
        'review',
        '--description',
        'talks through MCP',
      );
      assert.equal(first.code, 0, first.stderr);
      assert.match(
        first.stdout,
        /^# agent bridged registered \(accepted with warnings: .*no reasoning_connectors declared/m,
      );
      const agent = exported(first.stdout);
      assert.equal(agent.SW4RM_AGENT_ID, 'bridged');
      const [self] = (await listAgents(mcpUrl, agent.SW4RM_TOKEN)).filter((a) => a.agent_id === 'bridged');
      assert.deepEqual(self, {
        agent_id: 'bridged',
        name: 'Bridged agent',
        description: 'talks through MCP',
        capabilities: ['mcp-example', 'review'],
        state: 'RUNNABLE',
        presence: 'online',
        you: true,
      });

      // Registering the id again updates it (and mints it another credential; the first stays active).
      const again = await register('bridged', '--name', 'Renamed');
      assert.equal(again.code, 0, again.stderr);
      const renamed = (await listAgents(mcpUrl, exported(again.stdout).SW4RM_TOKEN)).find(
        (a) => a.agent_id === 'bridged',
      )!;
      assert.deepEqual([renamed.name, renamed.capabilities], ['Renamed', []]);
      assert.equal(
        (await listAgents(mcpUrl, agent.SW4RM_TOKEN)).length,
        1,
        'the first credential still acts as bridged',
      );

      // The registry refuses: its reason, exit 1, the agent not registered, the credential minted for it revoked.
      const refused = await register('rejected', '--capability', 'two words');
      assert.equal(refused.code, 1);
      assert.equal(refused.stdout, '');
      assert.match(
        refused.stderr,
        /^sw4rm-coordinator credentials: VALIDATION_ERROR: capabilities entry 'two words' is not a capability name .*\(nothing registered; the credential (\S+) minted for it is revoked\)$/m,
      );
      const [[id, state]] = await credentialsOf('rejected');
      assert.match(refused.stderr, new RegExp(`the credential ${id} minted`));
      assert.match(state, /^revoked /);
      assert.deepEqual(
        (await listAgents(mcpUrl, agent.SW4RM_TOKEN)).map((a) => a.agent_id),
        ['bridged'],
      );

      // A refused id: nothing minted at all.
      const badId = await register('coordinator');
      assert.equal(badId.code, 1);
      assert.match(
        badId.stderr,
        /^sw4rm-coordinator credentials: VALIDATION_ERROR: agent_id 'coordinator' is reserved/m,
      );
      assert.deepEqual(await credentialsOf('coordinator'), []);
    });

    it("when no coordinator runs: through the store in one transaction (refused: nothing minted); the next coordinator's bridge serves it", async () => {
      const refused = await register('bad..id');
      assert.equal(refused.code, 1);
      assert.match(
        refused.stderr,
        /^sw4rm-coordinator credentials: VALIDATION_ERROR: agent_id 'bad\.\.id' may contain only .*\(nothing registered, no credential minted\)$/m,
      );
      const refusedName = await register('quiet', '--name', 'bell\u0007');
      assert.equal(refusedName.code, 1);
      assert.match(
        refusedName.stderr,
        /VALIDATION_ERROR: name contains control characters \(nothing registered, no credential minted\)/,
      );
      assert.deepEqual(await credentialsOf('quiet'), [], 'the refused registration minted nothing');

      const done = await register('offline', '--name', 'Offline agent', '--capability', 'mcp-example');
      assert.equal(done.code, 0, done.stderr);
      assert.match(done.stdout, /^# agent offline registered \(accepted with warnings: /m);
      const agent = exported(done.stdout);
      assert.deepEqual(
        (await credentialsOf('offline')).map(([, state]) => state),
        ['active'],
      );

      const mcpUrl = await startCoordinator();
      const agents = await listAgents(mcpUrl, agent.SW4RM_TOKEN);
      assert.deepEqual(
        agents.map((a) => [a.agent_id, a.name, a.capabilities, a.state, a.presence, a.you]),
        [['offline', 'Offline agent', ['mcp-example'], 'RUNNABLE', 'online', true]],
        'disconnected after the restart, online at its first request',
      );
    });
  });
});
