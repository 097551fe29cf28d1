import { strict as assert } from 'node:assert';
import { ExampleAgentProcess } from '../support/exampleAgentProcess';
import { CoordinatorClients } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { disposeAfter, startWithCoordinator, type CodeServerHarness } from './harness';

const ECHO = 'e2e-echo';
/** A passive agent (registered over gRPC, no stream) that accepts JSON only. */
const JSON_ONLY = 'e2e-json-only';
const TEXT = 'hello from the editor <b>not html</b>';

describe('the Messages view and Send Message… in a real editor (code-server + Chromium, the example agent)', function () {
  let harness: CodeServerHarness | undefined;
  let agent: ExampleAgentProcess | undefined;
  let clients: CoordinatorClients | undefined;
  let sentId: string;

  const page = () => harness!.page;

  before(async function () {
    ({ harness } = await startWithCoordinator({ name: 'sw4rm-messages-e2e' }));
    const env = await harness.terminalEnvironment();
    clients = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    await harness.openViewContainer('SW4RM');
    await harness.collapseViews('Approvals', 'Dead Letters', 'Credentials');
    agent = new ExampleAgentProcess({
      ...env,
      SW4RM_AGENT_ID: ECHO,
      SW4RM_AGENT_NAME: 'Echo',
      SW4RM_HEARTBEAT_MS: '1000',
    });
    await agent.waitForLine(new RegExp(`registered as ${ECHO}`));
  });

  after(async function () {
    await agent?.kill();
    clients?.close();
    await disposeAfter(harness, this.currentTest, 'messages');
  });

  it('shows an empty Messages view that offers Send Message…', async function () {
    await harness!.waitForText(
      (t) => t.includes('No messages yet'),
      15_000,
      () => harness!.viewText('Messages'),
    );
  });

  it("sends a message from the agent's context menu; the agent receives it from coordinator and acknowledges it", async function () {
    await harness!.waitForText(
      (t) => t.includes(ECHO),
      15_000,
      () => harness!.viewText('Agents'),
    );
    await harness!.contextMenu('Agents', ECHO, 'Send Message…');
    await harness!.answerQuickInput(`Send Message to ${ECHO}: Payload Source`);
    await harness!.answerQuickInput(`Send Message to ${ECHO}: Type the Payload`, JSON.stringify({ text: TEXT }));
    await harness!.answerQuickInput('Send Message: Content Type');
    const notice = await harness!.waitForText((t) => t.includes(`to ${ECHO} (application/json)`), 15_000);
    sentId = /Sent message ([0-9a-f-]{36}) to/.exec(notice)![1];
    await agent!.waitForLine(new RegExp(`message from coordinator: ${TEXT.replace(/[<>/]/g, '.')}`));
    assert.equal(agent!.count(/replied to coordinator/), 0, 'no reply goes to the coordinator');
  });

  it('lists the message with its type, state, producer → recipient and correlation, live, up to FULFILLED', async function () {
    const text = await harness!.waitForText(
      (t) => t.includes('DATA · FULFILLED'),
      15_000,
      () => harness!.viewText('Messages'),
    );
    assert.match(text, new RegExp(`DATA · FULFILLED\\s*coordinator → ${ECHO} · \\d+ s · [0-9a-f]{8}`));
  });

  it('opens the message: envelope, payload as text, and every state with its time and the ACK that caused it', async function () {
    await harness!.viewRow('Messages', 'DATA · FULFILLED').click();
    const text = await harness!.waitForText(
      (t) => t.includes(`DATA message ${sentId}`) && t.includes('Payload ('),
      15_000,
      () => harness!.editorText(),
    );
    const ts = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z';
    assert.match(text, new RegExp(`${ts} +SENT +accepted`));
    for (const [state, event] of [
      ['RECEIVED', 'ack_received'],
      ['READ', 'ack_read'],
      ['FULFILLED', 'ack_fulfilled'],
    ]) {
      assert.match(text, new RegExp(`${ts} +${state} +${event} — caused by ACK [0-9a-f-]{36}`), text);
    }
    assert.match(text, /from +coordinator/);
    assert.ok(text.includes(`"text": "${TEXT}"`), 'the payload as sent, as text');
  });

  it('says which error code a refused message got and what it means', async function () {
    const registered = await clients!.registerAgent(
      descriptorMessage(JSON_ONLY, { modalities_supported: ['application/json'] }),
    );
    assert.ok(registered.accepted, registered.reason);
    await harness!.runCommand('SW4RM: Send Message…');
    await harness!.answerQuickInput('Send Message: Recipient', JSON_ONLY);
    await harness!.answerQuickInput(`Send Message to ${JSON_ONLY}: Payload Source`);
    await harness!.answerQuickInput(`Send Message to ${JSON_ONLY}: Type the Payload`, 'plain words');
    await harness!.answerQuickInput('Send Message: Content Type');
    await harness!.waitForText(
      (t) =>
        t.includes(
          `The message to ${JSON_ONLY} was not accepted: UNSUPPORTED_MESSAGE_TYPE — the agent does not accept this content type`,
        ),
      15_000,
    );
  });

  it('filters by agent from the context menu, by state through Filter Messages, and clears the filter', async function () {
    await harness!.contextMenu('Agents', ECHO, "Show Agent's Messages");
    const header = page().locator('.pane-header', { hasText: 'Messages' });
    await harness!.waitForText(
      (t) => t.includes(`agent ${ECHO}`),
      10_000,
      () => header.innerText(),
    );
    assert.match(await harness!.viewText('Messages'), /DATA · FULFILLED/);

    await harness!.runCommand('SW4RM: Filter Messages');
    await harness!.answerQuickInput('Filter Messages (1/4)');
    await harness!.answerQuickInput('Filter Messages (2/4)', 'TIMED_OUT');
    await harness!.answerQuickInput('Filter Messages (3/4)');
    await harness!.answerQuickInput('Filter Messages (4/4)');
    await harness!.waitForText(
      (t) => t.includes('TIMED_OUT'),
      10_000,
      () => header.innerText(),
    );
    await harness!.waitForText(
      (t) => t.includes('No message matches the filter'),
      10_000,
      () => harness!.viewText('Messages'),
    );
    await harness!.runCommand('SW4RM: Clear Message Filter');
    await harness!.waitForText(
      (t) => t.includes('DATA · FULFILLED'),
      10_000,
      () => harness!.viewText('Messages'),
    );
  });

  it("copies an agent's id and shows its log events from the context menu", async function () {
    await harness!.writeClipboard('');
    await harness!.contextMenu('Agents', ECHO, 'Copy Agent Id');
    await harness!.waitForText(
      (t) => t === ECHO,
      10_000,
      () => harness!.readClipboard(),
    );
    await harness!.contextMenu('Agents', ECHO, "Show Agent's Log Events");
    const text = await harness!.waitForText(
      (t) => t.includes(`Log events about agent ${ECHO}`),
      15_000,
      () => harness!.editorText(),
    );
    assert.match(text, new RegExp(`agent\\.registered`));
  });

  it('deregisters an agent after a modal confirmation naming it', async function () {
    await harness!.contextMenu('Agents', JSON_ONLY, 'Deregister Agent');
    assert.match(await harness!.answerDialog('Deregister'), new RegExp(`Deregister agent ${JSON_ONLY}\\?`));
    await harness!.waitForText((t) => t.includes(`Deregistered agent ${JSON_ONLY}.`), 10_000);
    await harness!.waitForText(
      (t) => !t.includes(JSON_ONLY),
      10_000,
      () => harness!.viewText('Agents'),
    );
  });

  it("shows a text message beside the JSON one, for the README's screenshot of the view and a message", async function () {
    await harness!.runCommand('SW4RM: Send Message…');
    await harness!.answerQuickInput('Send Message: Recipient', ECHO);
    await harness!.answerQuickInput(`Send Message to ${ECHO}: Payload Source`);
    await harness!.answerQuickInput(`Send Message to ${ECHO}: Type the Payload`, 'a plain text message');
    await harness!.answerQuickInput('Send Message: Content Type');
    await harness!.waitForText((t) => t.includes(`to ${ECHO} (text/plain)`), 15_000);
    await harness!.waitForText(
      (t) => (t.match(/DATA · FULFILLED/g) ?? []).length === 2,
      15_000,
      () => harness!.viewText('Messages'),
    );
    await harness!
      .runCommand('Notifications: Clear All Notifications', 5_000)
      .catch(() => page().keyboard.press('Escape'));
    // Room for the rows and the detail: no secondary side bar, a wider primary one (the sash at its right edge).
    const auxiliary = page().locator('.part.auxiliarybar');
    if (await auxiliary.isVisible()) {
      await page().locator('.editor-instance').first().click();
      await page().keyboard.press('Control+Alt+KeyB');
      await auxiliary.waitFor({ state: 'hidden', timeout: 5_000 }).catch(() => undefined);
    }
    await harness!.sideBarWidth((width) => width + 160);
    await harness!.pane('Messages').locator('.monaco-list-row', { hasText: 'DATA · FULFILLED' }).last().click();
    await harness!.waitForText(
      (t) => t.includes(`DATA message ${sentId}`),
      15_000,
      () => harness!.editorText(),
    );
    await harness!.screenshot('messages');
  });
});
