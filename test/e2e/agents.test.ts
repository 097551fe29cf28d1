import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { ExampleAgentProcess } from '../support/exampleAgentProcess';
import { disposeAfter, poll, startWithCoordinator, type CodeServerHarness } from './harness';

describe('the packaged extension in a real editor (code-server + Chromium)', function () {
  let harness: CodeServerHarness | undefined;
  let agent: ExampleAgentProcess | undefined;
  let port: number;

  before(async function () {
    // The first test sees the coordinator start.
    ({ harness, port } = await startWithCoordinator({ name: 'sw4rm-agents-e2e', waitForCoordinator: false }));
  });

  after(async function () {
    await agent?.kill();
    await disposeAfter(harness, this.currentTest, 'agents');
  });

  it('starts the coordinator on the configured port and says so in the status bar', async function () {
    const status = await harness!.waitForText(
      (text) => text.includes(`SW4RM :${port}`),
      60_000,
      () => harness!.statusBarText(),
    );
    assert.match(status, new RegExp(`SW4RM :${port} · 0 agents`));
  });

  it('copies an agent environment that carries the bound port, the proposed agent id and a token', async function () {
    const env = await harness!.copyAgentEnvironment();
    assert.equal(env.SW4RM_AGENT_ID, 'agent-1');
    const addresses = Object.entries(env).filter(([name]) => name.endsWith('_ADDR'));
    assert.equal(addresses.length, 15);
    for (const [name, value] of addresses) assert.equal(value, `127.0.0.1:${port}`, name);
    assert.match(env.SW4RM_TOKEN, /^[A-Za-z0-9._-]{32,}$/);
  });

  it('shows a registering agent in the Agents view within seconds and removes it when it deregisters', async function () {
    const env = await harness!.copyAgentEnvironment('e2e-agent-1');
    await harness!.openViewContainer('SW4RM');

    agent = new ExampleAgentProcess({
      ...env,
      SW4RM_AGENT_ID: 'e2e-agent-1',
      SW4RM_AGENT_NAME: 'E2E Agent',
      SW4RM_HEARTBEAT_MS: '1000',
    });
    const registeredAt = Date.now();
    await agent.waitForLine(/registered as e2e-agent-1/);
    const shown = await harness!.waitForText(
      (t) => t.includes('e2e-agent-1') && t.includes('RUNNABLE'),
      10_000,
      () => harness!.viewText('Agents'),
    );
    console.log(`    agent visible ${Date.now() - registeredAt} ms after registering`);
    assert.match(shown, /E2E Agent · RUNNABLE\s*e2e-agent-1 · connected/);
    assert.match(shown, /connected/);
    await harness!.waitForText(
      (t) => t.includes(`SW4RM :${port} · 1 agent`),
      10_000,
      () => harness!.statusBarText(),
    );
    await harness!.screenshot('agents-view');

    agent.signal('SIGINT');
    assert.equal(await agent.exited, 0, agent.output);
    assert.match(agent.output, /deregistered/);
    await harness!.waitForText(
      (t) => !t.includes('e2e-agent-1'),
      10_000,
      () => harness!.viewText('Agents'),
    );
    await harness!.waitForText(
      (t) => t.includes(`SW4RM :${port} · 0 agents`),
      10_000,
      () => harness!.statusBarText(),
    );
  });

  it('gives integrated terminals the agent environment with the bound port', async function () {
    const out = path.join(harness!.workspaceDir, 'terminal-env.txt');
    await harness!.runInNewTerminal(`printf '%s %s\\n' "$SW4RM_REGISTRY_ADDR" "\${#SW4RM_TOKEN}" > '${out}'`);
    const written = await poll(
      async () =>
        fs.existsSync(out) && fs.readFileSync(out, 'utf8').includes('\n') ? fs.readFileSync(out, 'utf8') : false,
      { timeoutMs: 30_000, description: 'the terminal to write the environment' },
    );
    const [address, tokenLength] = written.trim().split(' ');
    assert.equal(address, `127.0.0.1:${port}`);
    assert.ok(Number(tokenLength) >= 32, `SW4RM_TOKEN has ${tokenLength} characters`);
  });
});

describe('a second window whose port is taken (code-server + Chromium)', function () {
  let harness: CodeServerHarness | undefined;
  let blocker: net.Server | undefined;
  let takenPort: number;

  before(async function () {
    blocker = net.createServer();
    await new Promise<void>((resolve) => blocker!.listen({ host: '127.0.0.1', port: 0 }, resolve));
    takenPort = (blocker.address() as net.AddressInfo).port;
    ({ harness } = await startWithCoordinator({ port: takenPort, name: 'sw4rm-port-e2e', waitForCoordinator: false }));
  });

  after(async function () {
    await disposeAfter(harness, this.currentTest, 'port-conflict');
    await new Promise((resolve) => blocker?.close(resolve));
  });

  it('says the port is in use, offers a free one, and hands out the port actually bound', async function () {
    await harness!.waitForText((t) => t.includes(`port ${takenPort} is already in use`), 60_000);
    await harness!.screenshot('port-conflict');
    const offer = harness!.page.locator('.notification-toast .monaco-button', { hasText: /^Use port \d+$/ }).first();
    const label = (await offer.innerText()).trim();
    const offered = Number(/\d+/.exec(label)![0]);
    assert.notEqual(offered, takenPort);
    await offer.click();
    await harness!.waitForText(
      (t) => t.includes(`SW4RM :${offered}`),
      30_000,
      () => harness!.statusBarText(),
    );

    const env = await harness!.copyAgentEnvironment();
    assert.equal(env.SW4RM_ROUTER_ADDR, `127.0.0.1:${offered}`);
  });
});
