import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { Locator } from 'playwright-core';
import { canonicalDefinition, CoordinatorClients } from '../support/clients';
import { TaskTestAgent, type ReceivedCommand } from '../support/taskAgents';
import { disposeAfter, poll, startWithCoordinator, type CodeServerHarness } from './harness';

/** The agent that runs every node: registered over gRPC, taking the nodes' scheduler tasks (CONTROL `run`) from its inbox. */
const AGENT = 'e2e-wf-agent';
/** The agent that hands work over to AGENT (HandoffService over gRPC). */
const PLANNER = 'e2e-planner';
const WORKFLOW = 'e2e-release';
const HANDOFF = 'e2e-handoff-parser';
/** Handoffs asking for a capability no agent has: routed to the operator (sw4rm.handoffs.routeToOperator). */
const HANDOFF_TO_YOU = 'e2e-handoff-cobol-a';
const HANDOFF_REJECTED = 'e2e-handoff-cobol-b';

/**
 * build → review → (route: score > 0.5 ? ship : fix) → ship → approve (MANUAL). `fix` is the branch not taken: SKIPPED.
 * Node ids are spelled so that none is part of another (rows are found by their text).
 */
const RELEASE_YAML = `# The release workflow of the e2e test.
workflow_id: ${WORKFLOW}
metadata:
  owner: e2e
nodes:
  build:
    node_id: build
    agent_id: ${AGENT}
    input_mapping:
      branch: branch
    output_mapping:
      artifact: build.artifact
  review:
    node_id: review
    agent_id: ${AGENT}
    dependencies: [build]
    input_mapping:
      build.artifact: artifact
    output_mapping:
      score: review.score
    metadata:
      route: "score > 0.5 ? 'ship' : 'fix'"
  ship:
    node_id: ship
    agent_id: ${AGENT}
    dependencies: [review]
  fix:
    node_id: fix
    agent_id: ${AGENT}
    dependencies: [review]
  approve:
    node_id: approve
    agent_id: ${AGENT}
    dependencies: [ship]
    trigger_type: MANUAL
`;

/** A root, then start → alpha → beta → gamma → alpha: a cycle of dependency edges only, refused. */
const BROKEN_YAML = `workflow_id: e2e-broken
nodes:
  start:
    node_id: start
    agent_id: ${AGENT}
  alpha:
    node_id: alpha
    agent_id: ${AGENT}
    dependencies: [start, gamma]
  beta:
    node_id: beta
    agent_id: ${AGENT}
    dependencies: [alpha]
  gamma:
    node_id: gamma
    agent_id: ${AGENT}
    dependencies: [beta]
`;

type Client = grpc.Client & Record<string, unknown>;

describe('the Workflows view in a real editor (code-server + Chromium, an agent over gRPC running the nodes)', function () {
  let harness: CodeServerHarness | undefined;
  let agent: TaskTestAgent | undefined;
  let registry: CoordinatorClients | undefined;
  let handoffs: Client | undefined;
  let token: string;

  const page = () => harness!.page;
  const view = () => harness!.viewText('Workflows');

  function unary<T>(client: Client, method: string, request: unknown, agentId: string): Promise<T> {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    metadata.set('sw4rm-agent-id', agentId);
    const fn = client[method] as (
      request: unknown,
      metadata: grpc.Metadata,
      options: grpc.CallOptions,
      callback: (err: grpc.ServiceError | null, response: T) => void,
    ) => void;
    return new Promise((resolve, reject) => {
      fn.call(client, request, metadata, { deadline: Date.now() + 15_000 }, (err, response) =>
        err ? reject(err) : resolve(response),
      );
    });
  }

  /** The row of the Workflows view whose label is `label` (rows are found by their label, not their description). */
  function row(label: string): Locator {
    return harness!
      .pane('Workflows')
      .locator('.monaco-list-row')
      .filter({ has: page().locator('.label-name', { hasText: new RegExp(`^${label}$`) }) })
      .first();
  }

  /** Opens a file of the workspace in an editor through Go to File. */
  async function openFile(relative: string): Promise<void> {
    await harness!.runCommand('Go to File');
    await harness!.quickInputBox().fill(relative);
    await harness!.chooseQuickPick(path.basename(relative));
    // The tab shows the name and the extension in elements of their own.
    await harness!.waitForText(
      (t) => t.replace(/\s+/g, '').includes(path.basename(relative)),
      15_000,
      async () => (await page().locator('.tabs-container .tab.active').allInnerTexts()).join('\n'),
    );
  }

  /** The next CONTROL `run` for node `nodeId` of the workflow (its delivery confirmed). */
  async function nextRun(nodeId: string): Promise<ReceivedCommand> {
    const run = await agent!.command('run', undefined, 30_000);
    const params = run.command.params as { workflow_id?: string; node_id?: string };
    assert.equal(params.workflow_id, WORKFLOW, JSON.stringify(run.command));
    assert.equal(params.node_id, nodeId, JSON.stringify(run.command));
    return run;
  }

  /** Answers a node's run: RECEIVED (the node is RUNNING, seen in the view), then FULFILLED with `output` as its result. */
  async function work(nodeId: string, output: Record<string, unknown>): Promise<ReceivedCommand> {
    const run = await nextRun(nodeId);
    await agent!.ack(run, 'RECEIVED');
    await harness!.waitForText((t) => new RegExp(`${nodeId}\\s*RUNNING · ${AGENT}`).test(t), 20_000, view);
    await agent!.ack(run, 'FULFILLED', { note: JSON.stringify(output) });
    await harness!.waitForText((t) => new RegExp(`${nodeId}\\s*COMPLETED · ${AGENT}`).test(t), 20_000, view);
    return run;
  }

  /** A handoff asking for a capability no agent has: no agent can take it, so it waits for the operator. */
  async function requestCobolHandoff(requestId: string): Promise<void> {
    await unary(
      handoffs!,
      'RequestHandoff',
      {
        request_id: requestId,
        from_agent: PLANNER,
        to_agent: '',
        reason: 'nobody here writes this language',
        context_snapshot: Buffer.from(JSON.stringify({ file: 'legacy/payroll.cbl' })),
        capabilities_required: ['cobol'],
        timeout: { seconds: 900 },
      },
      PLANNER,
    );
  }

  /** Expands the row labelled `label` if it is collapsed. */
  async function expand(label: string): Promise<void> {
    await row(label).waitFor({ state: 'visible', timeout: 15_000 });
    if ((await row(label).getAttribute('aria-expanded')) === 'false')
      await row(label).locator('.monaco-tl-twistie').click();
    await poll(async () => (await row(label).getAttribute('aria-expanded')) === 'true', {
      timeoutMs: 5_000,
      description: `${label} to expand`,
    });
  }

  before(async function () {
    ({ harness } = await startWithCoordinator({
      name: 'sw4rm-workflows-e2e',
      viewport: { width: 1400, height: 900 },
      workspaceFiles: { 'workflows/release.yaml': RELEASE_YAML, 'workflows/broken.yaml': BROKEN_YAML },
      // The agents report once; they stay online for the whole test.
      userSettings: {
        'sw4rm.heartbeatDebounceSeconds': 3600,
        'sw4rm.handoffs.routeToOperator': true,
        'workbench.secondarySideBar.defaultVisibility': 'hidden',
      },
    }));
    const env = await harness.terminalEnvironment();
    token = env.SW4RM_TOKEN;
    agent = await new TaskTestAgent(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN, AGENT, 'Builder').start();
    registry = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, token);
    const planner = await registry.registerAgent({
      agent_id: PLANNER,
      name: 'Planner',
      communication_class: 'STANDARD',
      modalities_supported: ['application/json'],
    });
    assert.equal(planner.accepted, true, planner.reason);
    const root = grpc.loadPackageDefinition(canonicalDefinition()) as unknown as {
      sw4rm: { handoff: { HandoffService: grpc.ServiceClientConstructor } };
    };
    handoffs = new root.sw4rm.handoff.HandoffService(
      env.SW4RM_REGISTRY_ADDR,
      grpc.credentials.createInsecure(),
    ) as Client;
    await harness.openViewContainer('SW4RM');
    await harness.showOnly('Workflows');
  });

  after(async function () {
    agent?.close();
    registry?.close();
    handoffs?.close();
    await disposeAfter(harness, this.currentTest, 'workflows');
  });

  it('shows an empty Workflows view that offers Create Workflow from File…', async function () {
    const text = await harness!.waitForText((t) => t.includes('No workflow or handoff yet'), 15_000, view);
    assert.match(text, /Create Workflow from File…/);
  });

  it("refuses a definition with a cycle: the cycle's nodes as a problem on the file, and a message naming the first error", async function () {
    await openFile('workflows/broken.yaml');
    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('SW4RM: Create Workflow from File…');
    const notice = await harness!.waitForText((t) => t.includes('Workflow not created: broken.yaml'), 20_000);
    assert.match(notice, /Workflow not created: broken\.yaml:\d+(:\d+)?: workflow_cycle_detected: /);

    await harness!.runCommand('View: Focus Problems');
    const problems = await harness!.waitForText(
      (t) => t.includes('workflow_cycle_detected'),
      15_000,
      async () => (await page().locator('.markers-panel').allInnerTexts()).join('\n'),
    );
    for (const node of ['alpha', 'beta', 'gamma'])
      assert.ok(problems.includes(node), `the problem names ${node}:\n${problems}`);
    assert.ok(!/\bstart\b.*→/.test(problems), `the root is no part of the cycle:\n${problems}`);
    assert.match(problems, /sw4rm-workflows/);
    assert.ok(
      (await page().locator('.editor-instance .squiggly-error').count()) > 0,
      'the file shows the error where it is',
    );
    assert.match(await view(), /No workflow or handoff yet/, 'nothing was created');

    await harness!.runCommand('Notifications: Clear All Notifications');
    await page().mouse.move(1, 1);
    await harness!.screenshotForDocs('workflow-diagnostics');
    await harness!.runCommand('View: Hide Panel');
  });

  it("lists handoffs: who to whom, state and reason; the target's accept moves it to ACCEPTED", async function () {
    await unary(
      handoffs!,
      'RequestHandoff',
      {
        request_id: HANDOFF,
        from_agent: PLANNER,
        to_agent: AGENT,
        reason: 'the parser needs a TypeScript specialist',
        context_snapshot: Buffer.from(JSON.stringify({ file: 'src/parser.ts', step: 3 })),
        priority: 1,
        timeout: { seconds: 600 },
      },
      PLANNER,
    );
    const pending = await harness!.waitForText((t) => t.includes(HANDOFF), 20_000, view);
    assert.match(
      pending,
      new RegExp(
        `Handoffs\\s*1 \\(1 pending\\)[\\s\\S]*${HANDOFF}\\s*${PLANNER} → ${AGENT} · PENDING · expires in \\d+ min[^\\n]* · the parser needs a TypeScript specialist`,
      ),
      pending,
    );

    await unary(handoffs!, 'AcceptHandoff', { request_id: HANDOFF, accepted: true, accepting_agent: AGENT }, AGENT);
    const accepted = await harness!.waitForText(
      (t) => new RegExp(`${HANDOFF}\\s*${PLANNER} → ${AGENT} · ACCEPTED`).test(t),
      20_000,
      view,
    );
    assert.match(accepted, /Handoffs\s*1\b/);

    await requestCobolHandoff(HANDOFF_TO_YOU);
    const mine = await harness!.waitForText((t) => t.includes(HANDOFF_TO_YOU), 20_000, view);
    assert.match(mine, /Handoffs\s*2 \(1 pending, 1 needs you\)/, mine);
    assert.match(
      mine,
      new RegExp(
        `${HANDOFF_TO_YOU}\\s*${PLANNER} → you · PENDING · needs you · expires in \\d+ min[^·]* · nobody here writes this language`,
      ),
      mine,
    );
    assert.ok(mine.indexOf(HANDOFF_TO_YOU) < mine.indexOf(HANDOFF), 'the handoff waiting for you comes first');
  });

  it('creates a workflow from a YAML file, starts it with initial data; the nodes change state in the view as the agent works them', async function () {
    await openFile('workflows/release.yaml');
    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('SW4RM: Create Workflow from File…');
    await harness!.waitForText((t) => t.includes(`Workflow ${WORKFLOW} created. Start it now?`), 20_000);
    const defined = await harness!.waitForText((t) => t.includes(WORKFLOW), 15_000, view);
    assert.match(defined, new RegExp(`${WORKFLOW}\\s*DEFINED · 0/5 done · not started`), defined);

    await page()
      .locator('.notification-toast', { hasText: `Workflow ${WORKFLOW} created` })
      .locator('.monaco-button', { hasText: 'Start Workflow…' })
      .first()
      .click();
    await harness!.answerQuickInput(`Start Workflow ${WORKFLOW}`, '{"branch": "main"}');
    await harness!.waitForText((t) => new RegExp(`${WORKFLOW}\\s*RUNNING · 0/5 done`).test(t), 20_000, view);
    await expand(WORKFLOW);
    const started = await harness!.waitForText(
      (t) => /approve\s*PENDING/.test(t) && /build\s*(READY|RUNNING)/.test(t),
      20_000,
      view,
    );
    assert.match(started, new RegExp(`review\\s*PENDING · ${AGENT}`), started);
    assert.match(started, new RegExp(`approve\\s*PENDING · ${AGENT} · MANUAL`), started);

    const build = await work('build', { artifact: 'dist/app.tgz' });
    assert.deepEqual(
      (build.command.params as { inputs?: unknown }).inputs,
      { branch: 'main' },
      'input_mapping takes the initial data',
    );
    const review = await work('review', { score: 0.9 });
    assert.deepEqual(
      (review.command.params as { inputs?: unknown }).inputs,
      { artifact: 'dist/app.tgz' },
      "build's output reaches review",
    );
    const branches = await harness!.waitForText((t) => /fix\s*SKIPPED/.test(t), 20_000, view);
    assert.match(branches, new RegExp(`fix\\s*SKIPPED · ${AGENT}`), branches);
    await work('ship', { shipped: true });
    const manual = await harness!.waitForText((t) => /approve\s*READY/.test(t), 20_000, view);
    assert.match(manual, new RegExp(`approve\\s*READY · ${AGENT} · MANUAL · needs you: Run Node`), manual);
    assert.match(
      manual,
      new RegExp(
        `${WORKFLOW}\\s*WAITING · needs you · 4/5 done · 1 ready, 1 skipped · waiting for a person: Run Node approve`,
      ),
      manual,
    );
    assert.equal(agent!.has('run'), false, 'a MANUAL node waits for a person');

    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('View: Close All Editors');
    await page().keyboard.press('Escape');
    await harness!.sideBarWidth(760);
    await page().mouse.move(1200, 850);
    await harness!.screenshotForDocs('workflows-view');
  });

  it('runs the MANUAL node from its context menu; the workflow completes', async function () {
    await harness!.contextMenuOf(row('approve'), 'Run Node');
    const run = await nextRun('approve');
    await agent!.ack(run, 'RECEIVED');
    await harness!.waitForText((t) => new RegExp(`approve\\s*RUNNING · ${AGENT} · MANUAL`).test(t), 20_000, view);
    await agent!.ack(run, 'FULFILLED', { note: JSON.stringify({ approved_by: 'e2e' }) });
    const done = await harness!.waitForText(
      (t) => new RegExp(`${WORKFLOW}\\s*COMPLETED · 5/5 done`).test(t),
      20_000,
      view,
    );
    assert.match(done, new RegExp(`approve\\s*COMPLETED · ${AGENT} · MANUAL`), done);
  });

  it("shows a node's inputs and outputs as JSON in a read-only document", async function () {
    await row('review').click();
    const text = await harness!.waitForText(
      (t) => t.includes(`Workflow ${WORKFLOW} · node review`) && t.includes('"route"'),
      15_000,
      () => harness!.editorText(),
    );
    assert.match(text, /status +COMPLETED/);
    assert.match(text, /"route": "score > 0\.5 \? 'ship' : 'fix'"/);
    assert.match(text, /Inputs \(from workflow_data by input_mapping\):\s*\{\s*"artifact": "dist\/app\.tgz"\s*\}/);
    assert.match(text, /Output \(written to workflow_data by output_mapping\):\s*\{\s*"score": 0\.9\s*\}/);
  });

  it("accepts a handoff routed to you from its context menu, rejects another with a reason, and shows a handoff's context", async function () {
    await harness!.contextMenuOf(row(HANDOFF_TO_YOU), 'Accept Handoff');
    const accepted = await harness!.waitForText(
      (t) => new RegExp(`${HANDOFF_TO_YOU}\\s*${PLANNER} → operator:[^·]+ · ACCEPTED`).test(t),
      20_000,
      view,
    );
    assert.doesNotMatch(accepted, /needs you\)/);

    await requestCobolHandoff(HANDOFF_REJECTED);
    await harness!.waitForText(
      (t) => new RegExp(`${HANDOFF_REJECTED}\\s*${PLANNER} → you · PENDING · needs you`).test(t),
      20_000,
      view,
    );
    await harness!.contextMenuOf(row(HANDOFF_REJECTED), 'Reject Handoff…');
    await harness!.answerQuickInput(
      `Reject Handoff ${HANDOFF_REJECTED} from ${PLANNER}`,
      'no COBOL here: ask the mainframe team',
    );
    const rejected = await harness!.waitForText(
      (t) => new RegExp(`${HANDOFF_REJECTED}\\s*${PLANNER} → [^·]+ · REJECTED`).test(t),
      20_000,
      view,
    );
    assert.match(
      rejected,
      new RegExp(`${HANDOFF_REJECTED}\\s*[^\\n]*REJECTED[^\\n]* · no COBOL here: ask the mainframe team`),
      rejected,
    );

    await row(HANDOFF).click();
    const text = await harness!.waitForText(
      (t) => t.includes(`Handoff ${HANDOFF}`) && t.includes('Context ('),
      15_000,
      () => harness!.editorText(),
    );
    assert.match(text, /state +ACCEPTED/);
    assert.match(text, /"file": "src\/parser\.ts"/);
  });
});
