// Issue 14, defects 1–5 and 9, as a new user meets them in a real editor: the packaged .vsix in code-server,
// driven by Playwright in Debian Chromium, with the example agent and a real HitlService.Decide call.
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Frame, Locator } from 'playwright-core';
import { EXAMPLE_AGENT_BUNDLE as EXAMPLE_AGENT, ExampleAgentProcess } from '../support/exampleAgentProcess';
import { HitlClient, type DecideOutcome } from '../support/hitlClient';
import { disposeAfter, ROOT, poll, startWithCoordinator, type CodeServerHarness } from './harness';

const EXAMPLE_SEND = path.join(ROOT, 'dist', 'example-send.js');
const AGENT = 'e2e-defects-agent';
const AGENT_NAME = 'Defects Agent';
const SUMMARY = 'Rotate the deploy key';
const RATIONALE = 'The old key leaked in a log; rotation reviewed.';

describe('issue 14 defects in a real editor (code-server + Chromium)', function () {
  let harness: CodeServerHarness;
  let port: number;
  let env: Record<string, string>;
  let agent: ExampleAgentProcess | undefined;
  let hitl: HitlClient | undefined;

  const toasts = (text: string): Locator =>
    harness.page.locator('.notifications-toasts .notification-toast', { hasText: text });
  const centreItems = (text: string): Locator =>
    harness.page.locator('.notifications-center .notification-list-item', { hasText: text });
  const announcement = (reason: string) => `SW4RM approval needed: ${reason} from ${AGENT}`;

  const panelFrame = (text: string): Promise<Frame> => harness.webviewFrameShowing(text);

  /** The notification is in neither the toasts nor the notification centre. */
  async function notificationGone(text: string): Promise<void> {
    await poll(async () => (await toasts(text).count()) === 0, {
      timeoutMs: 10_000,
      description: `the toast "${text}" to go`,
    });
    await harness.runCommand('Notifications: Show Notifications');
    await harness.page.locator('.notifications-center').first().waitFor({ state: 'visible', timeout: 10_000 });
    assert.equal(await centreItems(text).count(), 0, `"${text}" is not in the notification centre`);
    await harness.runCommand('Notifications: Hide Notifications');
  }

  /** The text of the active editor's visible lines (Monaco writes spaces as no-break spaces). */
  async function editorText(): Promise<string> {
    const lines = harness.page.locator('.editor-group-container.active .monaco-editor .view-lines').first();
    return (await lines.innerText()).replace(/\u00a0/g, ' ');
  }

  before(async function () {
    for (const file of [EXAMPLE_AGENT, EXAMPLE_SEND])
      assert.ok(fs.existsSync(file), `${file} is missing: npm run build makes it`);
    ({ harness, port } = await startWithCoordinator({
      name: 'sw4rm-defects-e2e',
      viewport: { width: 1280, height: 1000 },
    }));
    env = await harness.copyAgentEnvironment(AGENT);
    hitl = new HitlClient(env.SW4RM_HITL_ADDR, env.SW4RM_TOKEN);
    await harness.openViewContainer('SW4RM');
  });

  after(async function () {
    hitl?.close();
    await agent?.kill();
    await disposeAfter(harness, this.currentTest, 'defects');
  });

  it('9: the empty Agents view says that terminals already carry the agent environment; no view cites RFC sections', async function () {
    const agents = await harness.waitForText(
      (t) => t.includes('No agent has registered yet'),
      15_000,
      () => harness.viewText('Agents'),
    );
    assert.match(
      agents.replace(/\s+/g, ' '),
      /Terminals opened in this window since the coordinator started already carry the agent environment \(SW4RM_\*_ADDR, and an enrolment credential in SW4RM_TOKEN\)/,
    );
    assert.equal(await harness.pane('Agents').locator('.monaco-button', { hasText: 'Open a Terminal' }).count(), 1);
    assert.equal(
      await harness.pane('Agents').locator('.monaco-button', { hasText: 'Copy Agent Environment' }).count(),
      1,
    );
    const approvals = await harness.waitForText(
      (t) => t.includes('No approval requests'),
      15_000,
      () => harness.viewText('Approvals'),
    );
    assert.match(approvals, /When an agent asks you to decide something/);
    const sideBar = await harness.page.locator('.part.sidebar').innerText();
    assert.doesNotMatch(sideBar, /RFC|§/, 'no view text cites the RFC');
    await harness.screenshot('defects-agents-welcome');
  });

  it('4: an agent row leads with name and state, shown whole at the default side-bar width; the rest is in the description', async function () {
    agent = new ExampleAgentProcess({
      ...env,
      SW4RM_AGENT_ID: AGENT,
      SW4RM_AGENT_NAME: AGENT_NAME,
      SW4RM_HEARTBEAT_MS: '1000',
    });
    await agent.waitForLine(new RegExp(`registered as ${AGENT}`));
    const row = harness.viewRow('Agents', AGENT_NAME);
    // The example agent reports RUNNABLE with its first heartbeat after registering.
    await poll(
      async () =>
        (
          await row
            .locator('.label-name')
            .innerText()
            .catch(() => '')
        ).includes('RUNNABLE') &&
        (
          await row
            .locator('.label-description')
            .innerText()
            .catch(() => '')
        ).includes('connected'),
      { timeoutMs: 15_000, description: 'the agent row to say RUNNABLE and connected' },
    );
    assert.equal((await row.locator('.label-name').innerText()).trim(), `${AGENT_NAME} · RUNNABLE`);
    assert.match(
      await row.locator('.label-description').innerText(),
      new RegExp(`^${AGENT} · connected · \\d+/10 queued · \\d+ in flight$`),
    );
    // The label ends inside the side bar, which has the width the workbench gives it by default.
    const sideBar = await harness.page.locator('.part.sidebar').boundingBox();
    const label = await row.locator('.label-name').boundingBox();
    assert.ok(sideBar && label, 'the side bar and the label are laid out');
    assert.ok(sideBar.width <= 320, `the side bar has its default width (${sideBar.width} px)`);
    assert.ok(
      label.x + label.width <= sideBar.x + sideBar.width - 8,
      `the label (right edge ${label.x + label.width}) fits in the side bar (${sideBar.x + sideBar.width})`,
    );
    await harness.page.mouse.move(1, 1);
    await harness.screenshot('defects-agents-rows');
  });

  it('1 and 2: the panel refuses a decision without a rationale (nothing logged); once decided, the notification is gone', async function () {
    const decision: Promise<DecideOutcome> = hitl!.decide(
      {
        reason_type: 'SECURITY_APPROVAL',
        context: {
          summary: SUMMARY,
          facts: { key: 'deploy-2026' },
          risk: { level: 'HIGH', notes: ['Deploys fail until the new key is installed.'] },
        },
      },
      { agentId: AGENT, deadlineMs: 170_000 },
    );
    decision.catch(() => undefined);

    // The notification links to the panel.
    const toast = toasts(announcement('SECURITY_APPROVAL')).first();
    await toast.waitFor({ state: 'visible', timeout: 15_000 });
    await toast.locator('a', { hasText: 'Review' }).click();
    const frame = await panelFrame(SUMMARY);

    const rationale = frame.locator('#rationale');
    const hint = frame.locator('#rationale-required');
    const decisionButtons = ['#approve', '#deny', '#defer'];
    await poll(async () => (await rationale.isEnabled()) && (await hint.isVisible()), {
      timeoutMs: 10_000,
      description: 'the rationale field and its hint',
    });
    assert.equal(
      (await hint.innerText()).trim(),
      'A rationale is required: say why before you approve, deny, modify or defer.',
    );
    for (const typed of ['', '   \n  ']) {
      await rationale.fill(typed);
      for (const button of decisionButtons)
        assert.equal(
          await frame.locator(button).isDisabled(),
          true,
          `${button} with rationale ${JSON.stringify(typed)}`,
        );
      assert.equal(await hint.isVisible(), true);
      assert.equal(await rationale.getAttribute('aria-invalid'), 'true');
    }
    await frame.locator('#modify').click();
    await frame.locator('#payload').waitFor({ state: 'visible', timeout: 5_000 });
    assert.equal(await frame.locator('#send-modify').isDisabled(), true, 'Send Modification needs a rationale too');
    await frame.locator('#approve').click({ force: true });
    await frame.locator('#modify').click();
    await harness.page.mouse.move(1, 1);
    await harness.screenshot('defects-rationale-required');

    // Nothing was decided: the agent still waits, the notification stays, and the log has no decision.
    assert.equal(
      await Promise.race([
        decision.then(() => 'decided'),
        new Promise((resolve) => setTimeout(() => resolve('waiting'), 1000)),
      ]),
      'waiting',
    );
    assert.equal(
      await toasts(announcement('SECURITY_APPROVAL')).count(),
      1,
      'the notification stays while the request waits',
    );
    await harness.runCommand('SW4RM: Show Log');
    const log = await harness.waitForText(
      (t) => t.includes('hitl.opened'),
      15_000,
      async () =>
        (
          await harness.page
            .locator('.part.panel .monaco-editor .view-lines')
            .first()
            .innerText()
            .catch(() => '')
        ).replace(/\u00a0/g, ' '),
    );
    assert.doesNotMatch(log, /hitl\.decided/);
    await harness.runCommand('View: Hide Panel');

    await rationale.fill(RATIONALE);
    assert.equal(await hint.isVisible(), false, 'the hint goes once a rationale is typed');
    for (const button of decisionButtons) assert.equal(await frame.locator(button).isEnabled(), true, button);
    await frame.locator('#approve').click();
    const outcome = await decision;
    assert.deepEqual([outcome.action, outcome.rationale], ['approve', RATIONALE]);
    await notificationGone(announcement('SECURITY_APPROVAL'));
    await harness.runCommand('View: Close All Editors');
  });

  it('2: the notification also goes when the invocation is settled elsewhere (its deadline passed)', async function () {
    const decision = hitl!.decide(
      { reason_type: 'CONNECTOR_APPROVAL', context: { summary: 'Connect to the tracker', deadline_ms: 5_000 } },
      { agentId: AGENT, deadlineMs: 60_000 },
    );
    decision.catch(() => undefined);
    await toasts(announcement('CONNECTOR_APPROVAL')).first().waitFor({ state: 'visible', timeout: 15_000 });
    const outcome = await decision;
    assert.equal(outcome.action, 'deny');
    assert.match(outcome.rationale, /^Fallback DENY_BY_DEFAULT/);
    await notificationGone(announcement('CONNECTOR_APPROVAL'));
  });

  it('5: Show Router Metrics opens a read-only document that refreshes while open, with Copy and Export', async function () {
    await harness.runCommand('SW4RM: Show Router Metrics');
    const tab = harness.page.locator('.tabs-container .tab.active');
    await harness.waitForText(
      (t) => t.includes('SW4RM Router Metrics'),
      15_000,
      () => tab.innerText(),
    );
    const dequeued = new RegExp(`agent_dequeue_latency_seconds_count\\{agent_id="${AGENT}"\\} (\\d+)`);
    const first = await harness.waitForText(
      (t) => dequeued.test(t) && t.includes('# SW4RM router metrics per agent'),
      15_000,
      editorText,
    );
    assert.match(first, new RegExp(`router_inbound_queue_capacity\\{agent_id="${AGENT}"\\} 10`));
    const before = Number(dequeued.exec(first)![1]);

    // Read-only: typing changes nothing, and the editor says why.
    await harness.page.locator('.editor-group-container.active .monaco-editor .view-lines').first().click();
    await harness.page.keyboard.type('x');
    await harness.waitForText(
      (t) => /read-only/i.test(t),
      5_000,
      async () => (await harness.page.locator('.monaco-editor-overlaymessage').allInnerTexts()).join('\n'),
    );
    assert.ok((await editorText()).startsWith('# SW4RM router metrics per agent'), 'the document is as it was');

    // A message to the agent moves its counters, and the open document follows by itself.
    const senderEnv = await harness.copyAgentEnvironment('e2e-defects-sender');
    const sent = spawnSync(process.execPath, [EXAMPLE_SEND, AGENT, 'hello metrics'], {
      env: { ...process.env, ...senderEnv, SW4RM_SENDER_ID: 'e2e-defects-sender' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(sent.status, 0, `${sent.stdout}${sent.stderr}`);
    await harness.runCommand('View: Focus Active Editor Group');
    const after = await harness.waitForText((t) => Number(dequeued.exec(t)?.[1] ?? -1) > before, 15_000, editorText);
    assert.ok(Number(dequeued.exec(after)![1]) > before);
    assert.equal(
      await harness.page.locator('.tabs-container .tab', { hasText: 'Untitled' }).count(),
      0,
      'no untitled document',
    );
    await harness.page.mouse.move(1, 1);
    await harness.screenshot('defects-metrics');

    await harness.writeClipboard('');
    await harness.page
      .locator('.editor-group-container.active .editor-actions a[aria-label="Copy Router Metrics"]')
      .click();
    const copied = await harness.waitForText(
      (t) => t.includes('router_inbound_queue_depth'),
      10_000,
      () => harness.readClipboard(),
    );
    assert.ok(copied.startsWith('# SW4RM router metrics per agent'), copied.slice(0, 200));
    assert.match(copied, dequeued);

    await harness.page
      .locator('.editor-group-container.active .editor-actions a[aria-label="Export Router Metrics…"]')
      .click();
    await harness.acceptSaveDialog(/sw4rm-router-metrics-[\dT-]+Z\.prom$/);
    await harness.waitForText((t) => t.includes('Exported the SW4RM router metrics to'), 15_000);
    const file = fs.readdirSync(harness.workspaceDir).find((name) => /^sw4rm-router-metrics-.*\.prom$/.test(name));
    assert.ok(file, 'the metrics were written to the workspace folder');
    const exported = fs.readFileSync(path.join(harness.workspaceDir, file), 'utf8');
    assert.match(exported, /^# SW4RM router metrics per agent/);
    assert.match(exported, dequeued);
  });

  it('3: with the coordinator stopped, the Agents view says so and offers Start, like every other view', async function () {
    await harness.runCommand('SW4RM: Stop Coordinator');
    await harness.waitForText(
      (t) => !t.includes(`SW4RM :${port}`),
      30_000,
      () => harness.statusBarText(),
    );
    for (const view of ['Agents', 'Approvals', 'Dead Letters', 'Credentials']) {
      await harness.waitForText(
        (t) => t.includes('The coordinator is not running.'),
        15_000,
        () => harness.viewText(view),
      );
      assert.equal(
        await harness.pane(view).locator('.monaco-button', { hasText: 'Start Coordinator' }).count(),
        1,
        `${view} offers Start`,
      );
    }
    assert.doesNotMatch(await harness.viewText('Agents'), /No agent has registered yet/);
    // The metrics document (still open) says so too.
    await harness.waitForText((t) => t.includes('the coordinator is not running'), 15_000, editorText);
    await harness.page.mouse.move(1, 1);
    await harness.screenshot('defects-agents-not-running');

    await harness.pane('Agents').locator('.monaco-button', { hasText: 'Start Coordinator' }).click();
    await harness.waitForText(
      (t) => t.includes(`SW4RM :${port}`),
      30_000,
      () => harness.statusBarText(),
    );
    await harness.waitForText(
      (t) => t.includes(AGENT_NAME) || t.includes(AGENT),
      30_000,
      () => harness.viewText('Agents'),
    );
  });
});
