import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { loadProtos } from '../../../src/server/protos';

const root = path.resolve(__dirname, '../../../..');

async function copiedEnvironment(): Promise<Record<string, string>> {
  for (let attempt = 0; attempt < 100; attempt++) {
    await vscode.env.clipboard.writeText('');
    await vscode.commands.executeCommand('sw4rm.copyAgentEnvironment');
    const text = await vscode.env.clipboard.readText();
    if (text.includes('SW4RM_REGISTRY_ADDR')) {
      return Object.fromEntries(
        text
          .trim()
          .split('\n')
          .map(
            (line) =>
              line
                .replace(/^export /, '')
                .split(/=(.*)/s)
                .slice(0, 2) as [string, string],
          ),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the coordinator did not start');
}

describe('the extension in desktop VS Code', () => {
  it('serves the registry on the port it hands out in the agent environment', async () => {
    await vscode.extensions.getExtension('sw4rm.sw4rm-coordinator')!.activate();
    const env = await copiedEnvironment();
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const sw4rm = (loadProtos(path.join(root, 'protos')) as any).sw4rm;
    const client = new sw4rm.registry.RegistryService(env.SW4RM_REGISTRY_ADDR, grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${env.SW4RM_TOKEN}`);
    const response = await new Promise<{ accepted: boolean }>((resolve, reject) =>
      client.RegisterAgent(
        { agent: { agent_id: 'desktop-agent', name: 'Desktop' } },
        metadata,
        (err: Error | null, res: { accepted: boolean }) => (err ? reject(err) : resolve(res)),
      ),
    );
    assert.equal(response.accepted, true);
    client.close();
  });
});
