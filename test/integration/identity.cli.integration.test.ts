import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
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
  const exported = (stdout: string) => Object.fromEntries([...stdout.matchAll(/^export (\w+)=(\S+)$/gm)].map((m) => [m[1], m[2]]));

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
  });
});
