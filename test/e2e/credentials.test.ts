import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Locator } from 'playwright-core';
import { CoordinatorClients, expectStatus } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { disposeAfter, parseEnvironment, poll, startWithCoordinator, type CodeServerHarness } from './harness';

const AGENT = 'e2e-cred-agent';

/** The operator token the coordinator keeps in its data folder (the window's workspace storage). */
function operatorToken(userDataDir: string): string | undefined {
  const files = fs
    .readdirSync(userDataDir, { recursive: true })
    .map(String)
    .filter((file) => path.basename(file) === 'token');
  return files.length === 1 ? fs.readFileSync(path.join(userDataDir, files[0]), 'utf8').trim() : undefined;
}

describe('credentials in a real editor (code-server + Chromium, a real gRPC agent)', function () {
  let harness: CodeServerHarness | undefined;
  let clients: CoordinatorClients | undefined;
  let port: number;
  let env: Record<string, string>;

  const row = (): Locator => harness!.viewRow('Credentials', AGENT);

  before(async function () {
    ({ harness, port } = await startWithCoordinator({
      name: 'sw4rm-credentials-e2e',
      viewport: { width: 1400, height: 800 },
    }));
  });

  after(async function () {
    clients?.close();
    await disposeAfter(harness, this.currentTest, 'credentials');
  });

  it("copies the environment of the agent typed in the input box, with that agent's own credential", async function () {
    await harness!.writeClipboard('');
    await harness!.runCommand('SW4RM: Copy Agent Environment');
    const proposed = await harness!.answerInputBox(AGENT);
    assert.equal(proposed, 'agent-1', 'it proposes the next free agent-N');
    env = parseEnvironment(
      await harness!.waitForText(
        (t) => t.includes('SW4RM_AGENT_ID'),
        15_000,
        () => harness!.readClipboard(),
      ),
    );
    assert.equal(env.SW4RM_AGENT_ID, AGENT);
    assert.equal(env.SW4RM_REGISTRY_ADDR, `127.0.0.1:${port}`);
    assert.equal(Object.keys(env).filter((name) => name.endsWith('_ADDR')).length, 15);
    assert.match(env.SW4RM_TOKEN, /^\S{32,}$/);
    const operator = operatorToken(harness!.userDataDir);
    assert.ok(operator, 'the operator token file of the data folder');
    assert.notEqual(env.SW4RM_TOKEN, operator, 'never the operator token');
    await harness!.waitForText((t) => t.includes(`environment for agent ${AGENT}`), 15_000);
  });

  it('registers the agent over gRPC with that credential, which acts only as that agent', async function () {
    clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    const registered = await clients.registerAgent(descriptorMessage(AGENT));
    assert.ok(registered.accepted, registered.reason);
    const other = await clients.registerAgent(descriptorMessage('e2e-someone-else')).then(
      (response) => `answered accepted=${response.accepted}`,
      (err: grpc.ServiceError) => grpc.status[err.code],
    );
    assert.notEqual(other, 'answered accepted=true', 'an agent credential cannot register another agent');
    await harness!.waitForText(
      (t) => t.includes(`SW4RM :${port} · 1 agent`),
      15_000,
      () => harness!.statusBarText(),
    );
  });

  it('lists the credential in the Credentials view, and revoking it there refuses its calls UNAUTHENTICATED', async function () {
    await harness!.openViewContainer('SW4RM');
    // Room for the Credentials view: the empty Approvals and Dead Letters views are collapsed.
    await harness!.collapseViews('Approvals', 'Dead Letters');
    const shown = await harness!.waitForText(
      (t) => t.includes(AGENT),
      15_000,
      () => harness!.viewText('Credentials'),
    );
    assert.match(shown, /enrolment/, "the terminals' enrolment credential is listed too");
    await harness!.waitForText(
      (t) => /agent · used \d/.test(t),
      15_000,
      () => row().innerText(),
    );
    assert.equal(
      await row()
        .getAttribute('aria-label')
        .then((label) => label?.includes(`copied for agent ${AGENT}`)),
      true,
    );

    // A wider side bar, so that the screenshot shows the rows whole.
    await harness!.sideBarWidth(640);
    await row().hover();
    await harness!.screenshot('credentials-view');

    await row().locator('.action-label[aria-label="Revoke Credential"]').click();
    assert.match(await harness!.answerDialog('Revoke'), new RegExp(`Revoke the agent credential of ${AGENT}\\?`));

    await harness!.waitForText(
      (t) => /revoked \d/.test(t),
      15_000,
      () => row().innerText(),
    );
    await poll(async () => !(await row().locator('.action-label[aria-label="Revoke Credential"]').isVisible()), {
      timeoutMs: 5_000,
      description: 'Revoke to be gone from the revoked row',
    });
    await expectStatus(clients!.heartbeat(AGENT), grpc.status.UNAUTHENTICATED);
  });

  it('mints a credential and shows its token once, in a dialog with Copy', async function () {
    await harness!.writeClipboard('');
    await harness!.runCommand('SW4RM: Mint Agent Credential…');
    assert.equal(await harness!.answerInputBox('e2e-minted'), 'agent-1');
    const dialog = harness!.page.locator('.monaco-dialog-box');
    await dialog.waitFor({ state: 'visible', timeout: 15_000 });
    const text = await dialog.innerText();
    assert.match(text, /Credential for agent e2e-minted/);
    const token = /SW4RM_TOKEN=(\S+)/.exec(text)?.[1];
    assert.ok(token, text);
    await dialog.locator('.monaco-button', { hasText: /^Copy$/ }).click();
    assert.equal(
      await harness!.waitForText(
        (t) => t.length > 0,
        15_000,
        () => harness!.readClipboard(),
      ),
      token,
    );
    await harness!.waitForText(
      (t) => t.includes('e2e-minted'),
      15_000,
      () => harness!.viewText('Credentials'),
    );
  });
});

describe('auth none in a real editor (code-server + Chromium)', function () {
  let harness: CodeServerHarness | undefined;
  let port: number;

  before(async function () {
    ({ harness, port } = await startWithCoordinator({
      name: 'sw4rm-auth-none-e2e',
      userSettings: { 'sw4rm.auth': 'none' },
      waitForCoordinator: false,
    }));
  });

  after(async function () {
    await disposeAfter(harness, this.currentTest, 'auth-none');
  });

  it('says so in the status bar, and copies an agent id without a token', async function () {
    await harness!.waitForText(
      (t) => t.includes(`SW4RM :${port} · auth none · 0 agents`),
      60_000,
      () => harness!.statusBarText(),
    );
    const env = await harness!.copyAgentEnvironment();
    assert.equal(env.SW4RM_AGENT_ID, 'agent-1');
    assert.equal(env.SW4RM_REGISTRY_ADDR, `127.0.0.1:${port}`);
    assert.ok(!('SW4RM_TOKEN' in env), 'no token with auth none');
  });
});
