import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { v4 as uuidv4 } from 'uuid';
import { loadProtos } from '../../src/server/protos';
import { disposeAfter, ROOT, poll, startWithCoordinator, type CodeServerHarness } from './harness';

const PRODUCER = 'e2e-dlq-producer';
const CONSUMER = 'e2e-dlq-consumer';
/** Not the default (10), to show that sw4rm.inboxCapacity reaches the router. */
const CAPACITY = 7;

interface StreamedEnvelope {
  message_id: string;
  producer_id: string;
  correlation_id: string;
  message_type: string;
  retry_count: number;
  payload: Buffer;
}

/** A wire-level agent: the canonical protos through grpc-js, the bearer token and `sw4rm-to` in metadata. */
class WireAgents {
  private readonly registry: grpc.Client;
  private readonly router: grpc.Client;

  constructor(
    address: string,
    private readonly token: string,
  ) {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const sw4rm = (loadProtos(path.join(ROOT, 'protos')) as any).sw4rm;
    const credentials = grpc.credentials.createInsecure();
    this.registry = new sw4rm.registry.RegistryService(address, credentials);
    this.router = new sw4rm.router.RouterService(address, credentials);
  }

  metadata(to?: string): grpc.Metadata {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${this.token}`);
    if (to) md.set('sw4rm-to', to);
    return md;
  }

  async register(agentId: string): Promise<void> {
    const result = await this.unary<{ accepted: boolean; reason: string }>(this.registry, 'RegisterAgent', {
      agent: {
        agent_id: agentId,
        name: agentId,
        description: 'Dead letter e2e agent.',
        capabilities: ['e2e'],
        communication_class: 'STANDARD',
        modalities_supported: ['application/json'],
        reasoning_connectors: ['sw4rm://reasoning/none'],
      },
    });
    assert.ok(result.accepted, `RegisterAgent ${agentId}: ${result.reason}`);
  }

  async deregister(agentId: string): Promise<void> {
    const result = await this.unary<{ ok: boolean }>(this.registry, 'DeregisterAgent', {
      agent_id: agentId,
      reason: 'e2e',
    });
    assert.ok(result.ok, `DeregisterAgent ${agentId}`);
  }

  async sendData(
    producerId: string,
    to: string,
    body: Record<string, unknown>,
  ): Promise<{ accepted: boolean; reason: string; messageId: string; correlationId: string }> {
    const payload = Buffer.from(JSON.stringify(body), 'utf8');
    const messageId = uuidv4();
    const correlationId = uuidv4();
    const now = Date.now();
    const result = await this.unary<{ accepted: boolean; reason: string }>(
      this.router,
      'SendMessage',
      {
        msg: {
          message_id: messageId,
          producer_id: producerId,
          correlation_id: correlationId,
          sequence_number: '1',
          message_type: 'DATA',
          content_type: 'application/json',
          content_length: String(payload.length),
          payload,
          timestamp: { seconds: String(Math.floor(now / 1000)), nanos: (now % 1000) * 1_000_000 },
        },
      },
      to,
    );
    return { ...result, messageId, correlationId };
  }

  /** Opens the agent's inbox stream and collects what arrives. */
  stream(agentId: string): { items: Array<{ seq: string; msg: StreamedEnvelope }>; errors: Error[]; cancel(): void } {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const call = (this.router as any).StreamIncoming(
      { agent_id: agentId },
      this.metadata(),
    ) as grpc.ClientReadableStream<{ seq: string; msg: StreamedEnvelope }>;
    const items: Array<{ seq: string; msg: StreamedEnvelope }> = [];
    const errors: Error[] = [];
    call.on('data', (item) => items.push(item));
    call.on('error', (err: grpc.ServiceError) => {
      if (err.code !== grpc.status.CANCELLED) errors.push(err);
    });
    return { items, errors, cancel: () => call.cancel() };
  }

  async ackDelivery(agentId: string, seq: string, messageId: string): Promise<void> {
    await this.unary(this.router, 'AckDelivery', { agent_id: agentId, seq, message_id: messageId });
  }

  close(): void {
    this.registry.close();
    this.router.close();
  }

  private unary<T>(client: grpc.Client, method: string, request: unknown, to?: string): Promise<T> {
    return new Promise((resolve, reject) => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      (client as any)[method](
        request,
        this.metadata(to),
        { deadline: Date.now() + 10_000 },
        (err: grpc.ServiceError | null, response: T) => (err ? reject(err) : resolve(response)),
      );
    });
  }
}

describe('dead letters in a real editor (code-server + Chromium, real gRPC agents)', function () {
  let harness: CodeServerHarness | undefined;
  let agents: WireAgents | undefined;
  let inbox: ReturnType<WireAgents['stream']> | undefined;
  let port: number;
  let sent: Awaited<ReturnType<WireAgents['sendData']>>;

  before(async function () {
    ({ harness, port } = await startWithCoordinator({
      userSettings: { 'sw4rm.inboxCapacity': CAPACITY },
      name: 'sw4rm-dlq-e2e',
    }));
    // The terminals' enrolment credential: one credential for the producer and the consumer it registers.
    const env = await harness.terminalEnvironment();
    agents = new WireAgents(env.SW4RM_ROUTER_ADDR, env.SW4RM_TOKEN);
    await harness.openViewContainer('SW4RM');
  });

  after(async function () {
    inbox?.cancel();
    agents?.close();
    await disposeAfter(harness, this.currentTest, 'dead-letters');
  });

  it('shows an empty Dead Letters view with its welcome text', async function () {
    await harness!.waitForText(
      (t) => t.includes('No dead letters'),
      15_000,
      () => harness!.viewText('Dead Letters'),
    );
  });

  it("shows the queued message in the recipient's inbox counts in the Agents view", async function () {
    await agents!.register(PRODUCER);
    await agents!.register(CONSUMER);
    sent = await agents!.sendData(PRODUCER, CONSUMER, {
      task: 'e2e',
      note: '<b>not html</b> [not a link](command:sw4rm.stop)',
    });
    assert.ok(sent.accepted, sent.reason);
    const text = await harness!.waitForText(
      (t) => new RegExp(`${CONSUMER}[^\\n]*\\n?[^\\n]*1/${CAPACITY} queued · 0 in flight`).test(t),
      15_000,
      () => harness!.viewText('Agents'),
    );
    assert.match(text, new RegExp(`${PRODUCER} · [A-Z_]+\\s*connected · 0/${CAPACITY} queued · 0 in flight`));
    assert.match(text, new RegExp(`${CONSUMER} · [A-Z_]+\\s*connected · 1/${CAPACITY} queued · 0 in flight`));
    await harness!.viewRow('Agents', CONSUMER).click();
    await harness!.page.keyboard.press('ArrowRight');
    const details = await harness!.waitForText(
      (t) => t.includes('Inbox'),
      10_000,
      () => harness!.viewText('Agents'),
    );
    assert.match(
      details,
      new RegExp(`Inbox\\s*1/${CAPACITY} queued · 0 in flight · streaming: no · last delivery: never`),
    );
    await harness!.page.keyboard.press('ArrowLeft');
  });

  it('dead-letters the message when its recipient deregisters, and shows it in the view and the status bar', async function () {
    await agents!.deregister(CONSUMER);
    const view = await harness!.waitForText(
      (t) => t.includes('AGENT_UNAVAILABLE'),
      15_000,
      () => harness!.viewText('Dead Letters'),
    );
    assert.match(view, /AGENT_UNAVAILABLE · DATA/);
    assert.ok(view.includes(`${PRODUCER} → ${CONSUMER}`), view);
    const status = await harness!.waitForText(
      (t) => /· 1 dead letter\b/.test(t),
      10_000,
      () => harness!.statusBarText(),
    );
    assert.match(status, new RegExp(`SW4RM :${port} · 1 agent · 1 dead letter`));

    // The tooltip has the reason, the attempt history and the payload excerpt, as plain text.
    await harness!.viewRow('Dead Letters', 'AGENT_UNAVAILABLE').hover();
    const hover = harness!.page.locator('.workbench-hover, .monaco-hover').filter({ hasText: 'reason:' }).first();
    await hover.waitFor({ state: 'visible', timeout: 10_000 });
    const tooltip = await hover.innerText();
    assert.match(tooltip, new RegExp(`reason: ${CONSUMER} deregistered`));
    assert.match(tooltip, /attempts:[\s\S]*accepted/);
    assert.ok(tooltip.includes('<b>not html</b> [not a link](command:sw4rm.stop)'), tooltip);
    assert.equal(await hover.locator('a, b').count(), 0, 'agent-supplied text is never rendered as markup');
    await harness!.screenshot('dead-letters');
    await harness!.page.mouse.move(700, 300);
    await harness!.page.keyboard.press('Escape');
    await hover.waitFor({ state: 'hidden', timeout: 10_000 });
  });

  it('filters by error code, shows the filter, and exports the matching entries as a diagnostic bundle', async function () {
    const step = (n: number, text?: string) => harness!.answerQuickInput(`Filter Dead Letters (${n}/5)`, text, 10_000);
    await harness!.runCommand('SW4RM: Filter Dead Letters');
    await step(1, 'AGENT_UNAVAILABLE');
    for (const n of [2, 3, 4, 5]) await step(n);
    const header = harness!.page.locator('.pane-header', { hasText: 'Dead Letters' });
    await harness!.waitForText(
      (t) => t.includes('AGENT_UNAVAILABLE'),
      10_000,
      () => header.innerText(),
    );
    assert.ok((await harness!.viewText('Dead Letters')).includes(`${PRODUCER} → ${CONSUMER}`));
    await harness!.screenshot('dead-letters-filtered');

    await harness!.runCommand('SW4RM: Export Dead Letter Diagnostic Bundle');
    await harness!.acceptSaveDialog(/sw4rm-dead-letters-[\dT-]+Z\.json$/);
    await harness!.waitForText((t) => t.includes('Exported 1 dead letter to'), 15_000);
    const file = fs.readdirSync(harness!.workspaceDir).find((name) => name.startsWith('sw4rm-dead-letters-'));
    assert.ok(file, 'the bundle was written to the workspace folder');
    const bundle = JSON.parse(fs.readFileSync(path.join(harness!.workspaceDir, file), 'utf8'));
    assert.equal(bundle.filter.errorCode, 'AGENT_UNAVAILABLE');
    assert.equal(bundle.entries.length, 1);
    assert.equal(bundle.entries[0].messageId, sent.messageId);
    assert.equal(bundle.entries[0].errorCode, 'AGENT_UNAVAILABLE');
    assert.ok(Array.isArray(bundle.entries[0].attempts) && bundle.entries[0].attempts.length >= 2);

    await harness!.runCommand('SW4RM: Clear Dead Letter Filter');
    await harness!.waitForText(
      (t) => !t.includes('AGENT_UNAVAILABLE'),
      10_000,
      () => header.innerText(),
    );
  });

  it("requeues the dead letter from the row's context menu to the re-registered, streaming recipient", async function () {
    await agents!.register(CONSUMER);
    inbox = agents!.stream(CONSUMER);

    await harness!.contextMenu('Dead Letters', 'AGENT_UNAVAILABLE', 'Requeue Dead Letter');

    const delivered = await poll(
      () => inbox!.items.find((item) => item.msg.message_type === 'DATA' && item.msg.producer_id === PRODUCER),
      {
        timeoutMs: 15_000,
        description: `the requeued message on ${CONSUMER}'s stream (errors: ${inbox!.errors.map((e) => e.message).join('; ')})`,
      },
    );
    assert.notEqual(delivered.msg.message_id, sent.messageId, 'a requeue is a new attempt with a new message_id');
    assert.equal(delivered.msg.correlation_id, sent.correlationId);
    assert.equal(delivered.msg.retry_count, 1);
    assert.equal(JSON.parse(Buffer.from(delivered.msg.payload).toString('utf8')).task, 'e2e');
    await agents!.ackDelivery(CONSUMER, delivered.seq, delivered.msg.message_id);

    await harness!.waitForText((t) => t.includes(`Requeued dead letter`) && t.includes(`to ${CONSUMER}`), 10_000);
    const view = await harness!.waitForText(
      (t) => !t.includes('AGENT_UNAVAILABLE'),
      10_000,
      () => harness!.viewText('Dead Letters'),
    );
    assert.match(view, /No dead letters/);
    await harness!.waitForText(
      (t) => t.includes(`SW4RM :${port} · 2 agents`) && !t.includes('dead letter'),
      10_000,
      () => harness!.statusBarText(),
    );
  });

  it('opens the router metrics in an editor', async function () {
    await harness!.runCommand('SW4RM: Show Router Metrics');
    const text = await harness!.waitForText(
      (t) => t.includes('router_inbound_queue_depth'),
      15_000,
      () => harness!.editorText(),
    );
    assert.ok(text.includes(`agent_id="${CONSUMER}"`), text.slice(0, 2000));
  });
});
