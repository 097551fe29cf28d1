import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { canonicalDefinition, CoordinatorClients } from '../support/clients';
import { ToolProviderAgent, type ReceivedToolCall } from '../support/toolProviderAgent';
import { disposeAfter, poll, startWithCoordinator, type CodeServerHarness } from './harness';

/** The provider agent (its tools registered with RegisterProvider) and the agent that calls them through ToolService. */
const PROVIDER = 'e2e-search';
const CALLER = 'e2e-coder';

interface WireFrame {
  call_id: string;
  frame_no: string;
  final: boolean;
  content_type: string;
  data: Buffer;
  summary: Buffer;
}

describe('the Tools view in a real editor (code-server + Chromium, a provider agent and a caller over gRPC)', function () {
  let harness: CodeServerHarness | undefined;
  let provider: ToolProviderAgent | undefined;
  let tools: grpc.Client & Record<string, unknown>;
  let registry: CoordinatorClients | undefined;
  let token: string;

  /** ToolService.Call as CALLER: answers the final frame (a cancelled call's terminal frame too), or rejects with the status. */
  function call(toolName: string, callId: string, args: unknown): Promise<WireFrame> {
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    metadata.set('sw4rm-agent-id', CALLER);
    const fn = tools.Call as (
      request: unknown,
      metadata: grpc.Metadata,
      options: grpc.CallOptions,
      callback: (err: grpc.ServiceError | null, frame: WireFrame) => void,
    ) => void;
    return new Promise((resolve, reject) => {
      fn.call(
        tools,
        {
          call_id: callId,
          provider_id: PROVIDER,
          tool_name: toolName,
          content_type: 'application/json',
          args: Buffer.from(JSON.stringify(args)),
          stream: true,
        },
        metadata,
        { deadline: Date.now() + 120_000 },
        (err, frame) => (err ? reject(err) : resolve(frame)),
      );
    });
  }

  before(async function () {
    ({ harness } = await startWithCoordinator({
      name: 'sw4rm-tools-e2e',
      // The test agents report RUNNABLE once; they stay online for the whole test. The secondary side bar would only
      // take room from the view in the screenshot.
      viewport: { width: 1280, height: 720 },
      userSettings: {
        'sw4rm.heartbeatDebounceSeconds': 3600,
        'workbench.secondarySideBar.defaultVisibility': 'hidden',
      },
    }));
    const env = await harness.terminalEnvironment();
    token = env.SW4RM_TOKEN;
    const address = env.SW4RM_REGISTRY_ADDR;
    registry = new CoordinatorClients(address, token);
    const registered = await registry.registerAgent({
      agent_id: CALLER,
      name: 'Coder',
      communication_class: 'STANDARD',
      modalities_supported: ['application/json'],
    });
    assert.equal(registered.accepted, true, registered.reason);
    provider = await new ToolProviderAgent(address, token, PROVIDER).start([
      {
        tool_name: 'grep',
        idempotent: true,
        default_timeout_s: 30,
        max_concurrency: 4,
        side_effects: 'none',
        input_schema: JSON.stringify({
          type: 'object',
          properties: { pattern: { type: 'string' } },
          required: ['pattern'],
          additionalProperties: false,
        }),
      },
      {
        tool_name: 'index',
        idempotent: false,
        default_timeout_s: 0,
        max_concurrency: 1,
        side_effects: 'filesystem',
        input_schema: JSON.stringify({ type: 'object', properties: { root: { type: 'string' } } }),
      },
    ]);
    const root = grpc.loadPackageDefinition(canonicalDefinition()) as unknown as {
      sw4rm: { tool: { ToolService: grpc.ServiceClientConstructor } };
    };
    tools = new root.sw4rm.tool.ToolService(address, grpc.credentials.createInsecure()) as grpc.Client &
      Record<string, unknown>;
    await harness.openViewContainer('SW4RM');
    await harness.showOnly('Tools');
  });

  after(async function () {
    provider?.close();
    registry?.close();
    tools?.close();
    await disposeAfter(harness, this.currentTest, 'tools');
  });

  it('lists the providers: the built-in ones and the agent with its tools (side effects, idempotent, concurrency, timeout)', async function () {
    const text = await harness!.waitForText(
      (t) => t.includes(PROVIDER),
      20_000,
      () => harness!.viewText('Tools'),
    );
    assert.match(text, /Providers/);
    assert.match(text, /workspace\s*built in · available · \d+ tools/, text);
    assert.match(text, new RegExp(`${PROVIDER}\\s*agent · available · 2 tools`), text);
    await harness!.viewRow('Tools', PROVIDER).click();
    const expanded = await harness!.waitForText(
      (t) => t.includes('grep'),
      10_000,
      () => harness!.viewText('Tools'),
    );
    assert.match(expanded, /grep\s*side effects: none · idempotent · max 4 at once · timeout 30 s/, expanded);
    assert.match(expanded, /index\s*side effects: filesystem · not idempotent · max 1 at once · no timeout/, expanded);
  });

  it('shows a streamed call in Recent calls with its outcome, frames and bytes, and opens its details', async function () {
    const answer = call('grep', 'e2e-call-grep-1', { pattern: 'TODO' });
    const received: ReceivedToolCall = await provider!.nextCall('grep');
    assert.equal(received.call.caller_agent_id, CALLER);
    assert.deepEqual(received.call.args, { pattern: 'TODO' });
    await provider!.frame(received, 0, false, { match: 'src/a.ts:3: // TODO tidy' });
    await provider!.frame(received, 1, true, { matches: 1 });
    const final = await answer;
    assert.deepEqual(JSON.parse(final.data.toString('utf8')), { matches: 1 });

    const text = await harness!.waitForText(
      (t) => /Recent calls\s*1/.test(t) && t.includes(`${PROVIDER}/grep`),
      15_000,
      () => harness!.viewText('Tools'),
    );
    assert.match(text, new RegExp(`${PROVIDER}/grep\\s*${CALLER} · ok · [\\d.]+ m?s · 2 frames / \\d+ B`), text);

    await harness!.viewRow('Tools', `${PROVIDER}/grep`).click();
    const details = await harness!.waitForText(
      (t) => t.includes('Tool call e2e-call-grep-1') && t.includes('Frames kept'),
      15_000,
      () => harness!.editorText(),
    );
    assert.match(details, new RegExp(`tool +${PROVIDER}/grep`));
    assert.match(details, new RegExp(`caller +${CALLER}`));
    assert.match(details, /outcome +ok/);
    assert.match(details, /network_policy +DENY_ALL/);
    assert.match(details, /"pattern": "TODO"/);
    assert.match(details, /#0 application\/json/);
    assert.match(details, /#1 final application\/json/);
  });

  it('marks a running call, takes the screenshot, and cancels it from the context menu: the caller gets the terminal frame', async function () {
    const answer = call('index', 'e2e-call-index-1', { root: 'src' });
    const received = await provider!.nextCall('index');
    await provider!.frame(received, 0, false, { indexed: 12 });
    const running = await harness!.waitForText(
      (t) => /Recent calls\s*2 · 1 running/.test(t),
      15_000,
      () => harness!.viewText('Tools'),
    );
    assert.match(running, new RegExp(`${PROVIDER}/index\\s*${CALLER} · running · since \\d\\d:\\d\\d:\\d\\d`), running);

    await harness!.runCommand('Notifications: Clear All Notifications');
    await harness!.runCommand('View: Close All Editors');
    await harness!.sideBarWidth(900);
    await harness!.screenshotForDocs('tools-view');

    await harness!.contextMenu('Tools', `${PROVIDER}/index`, 'Cancel Tool Call');
    assert.match(
      await harness!.answerDialog('Cancel Tool Call'),
      new RegExp(`Cancel tool call ${PROVIDER}/index of ${CALLER}\\?`),
    );
    await harness!.waitForText((t) => t.includes('Tool call e2e-call-index-1 was cancelled'), 15_000);

    const terminal = await answer;
    assert.equal(terminal.final, true);
    assert.deepEqual(JSON.parse(terminal.summary.toString('utf8')), {
      cancelled: true,
      partial_result: true,
      frames: 1,
    });
    await poll(() => provider!.cancelRequest('e2e-call-index-1') !== undefined, {
      timeoutMs: 10_000,
      description: 'the provider to be told to cancel',
    });
    await harness!.waitForText(
      (t) => new RegExp(`${PROVIDER}/index\\s*${CALLER} · cancelled`).test(t) && !/running/.test(t),
      15_000,
      () => harness!.viewText('Tools'),
    );
  });
});
