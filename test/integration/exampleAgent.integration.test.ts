import { strict as assert } from 'node:assert';
import { findFreePort } from '../../src/server/server';
import { useCliProcesses } from '../support/cli';
import { CoordinatorClients } from '../support/clients';
import { EXAMPLE_AGENT_BUNDLE, ExampleAgentProcess } from '../support/exampleAgentProcess';
import { requireBundles } from '../support/paths';
import {
  ackPayload,
  jsonPayload,
  registerRouterAgent,
  retryTransport,
  RouterClient,
  type Inbox,
  type StreamItem,
} from '../support/routerClient';

const AGENT = 'echo-agent';
const SENDER = 'test-sender';

describe('the example agent (dist/example-agent.js) against the headless coordinator', () => {
  const coordinators = useCliProcesses('sw4rm-int-example-agent-');
  let agent: ExampleAgentProcess | undefined;
  let sender: RouterClient | undefined;
  let senderInbox: Inbox | undefined;
  let registry: CoordinatorClients | undefined;

  requireBundles(EXAMPLE_AGENT_BUNDLE);

  afterEach(async () => {
    senderInbox?.close();
    sender?.close();
    registry?.close();
    await agent?.kill();
  });

  /** Starts dist/cli.js on `port` and the test's data folder, again while the killed one's port is not free yet. */
  const startCoordinator = async (port: number): Promise<Record<string, string>> =>
    (await coordinators.serve(port, [], 15_000)).env;

  /**
   * Sends DATA {"text": text} to the agent, and answers its reply and the stages it acknowledged, in order.
   * The sender acknowledges the reply, as any tracked message must be.
   */
  async function exchange(text: string): Promise<{ reply: unknown; stages: string[] }> {
    const msg = sender!.envelope({ payload: { text } });
    const result = await retryTransport(
      `sending "${text}"`,
      () => sender!.send(msg, { to: AGENT }),
      Date.now() + 15_000,
    );
    assert.deepEqual(result, { accepted: true, reason: '' });

    const replyItem = await senderInbox!.waitFor(
      (item) => item.msg.message_type === 'DATA' && item.msg.correlation_id === msg.correlation_id,
      15_000,
      `the agent's reply to "${text}"`,
    );
    assert.equal(replyItem.msg.producer_id, AGENT);
    for (const stage of ['RECEIVED', 'FULFILLED'])
      assert.equal((await sender!.ack(replyItem.msg.message_id, stage)).accepted, true);

    const isAckOfMsg =
      (stage?: string) =>
      (item: StreamItem): boolean => {
        const ack = ackPayload(item.msg);
        return (
          ack !== undefined && ack.ack_for_message_id === msg.message_id && (stage === undefined || ack.stage === stage)
        );
      };
    await senderInbox!.waitFor(isAckOfMsg('FULFILLED'), 15_000, `the agent's FULFILLED ACK of "${text}"`);
    const stages = senderInbox!.items.filter(isAckOfMsg()).map((item) => {
      assert.equal(item.msg.producer_id, AGENT);
      return ackPayload(item.msg)!.stage;
    });
    return { reply: jsonPayload(replyItem.msg), stages };
  }

  it('answers and acknowledges a message, and after a SIGKILL and restart of the coordinator reconnects by itself', async function () {
    this.timeout(90_000);
    const port = await findFreePort('127.0.0.1');
    const env = await startCoordinator(port);

    agent = new ExampleAgentProcess({
      ...env,
      SW4RM_AGENT_ID: AGENT,
      // Shortened reconnect backoff (documented in examples/agent.ts), so the test does not wait on the defaults.
      SW4RM_RECONNECT_MIN_MS: '50',
      SW4RM_RECONNECT_MAX_MS: '500',
    });
    await agent.waitForLine(/registered as echo-agent/);
    await agent.waitForLine(/opening inbox stream/);

    registry = new CoordinatorClients(env.SW4RM_REGISTRY_ADDR, env.SW4RM_TOKEN);
    await registerRouterAgent(registry, SENDER);
    sender = new RouterClient(env.SW4RM_ROUTER_ADDR, env.SW4RM_TOKEN, SENDER);
    senderInbox = sender.openInbox(SENDER, { reconnect: true });

    const first = await exchange('hello');
    assert.deepEqual(first.reply, { text: 'echo: hello' });
    assert.deepEqual(first.stages, ['RECEIVED', 'READ', 'FULFILLED']);
    await agent.waitForLine(/message from test-sender: hello\n/);
    await agent.waitForLine(/replied to test-sender: echo: hello\n/);

    const killed = coordinators.last();
    killed.signal('SIGKILL');
    await killed.exit();
    await agent.waitForLine(/inbox stream ended \(UNAVAILABLE/);
    await agent.waitForLine(/reconnecting in \d+ ms/);

    const env2 = await startCoordinator(port);
    assert.equal(env2.SW4RM_TOKEN, env.SW4RM_TOKEN, 'the token survives the crash');
    const second = await exchange('still there?');
    assert.deepEqual(second.reply, { text: 'echo: still there?' });
    assert.deepEqual(second.stages, ['RECEIVED', 'READ', 'FULFILLED']);

    assert.ok(agent.running, 'the agent was never restarted');
    assert.match(
      agent.output,
      /opening inbox stream \(resuming after seq \d+\)/,
      'the agent resumes after the last seq it processed',
    );
    assert.equal(agent.count(/message from test-sender: hello$/), 1, `"hello" was handled once:\n${agent.output}`);
    assert.equal(
      agent.count(/message from test-sender: still there\?$/),
      1,
      `"still there?" was handled once:\n${agent.output}`,
    );

    agent.signal('SIGINT');
    assert.equal(await agent.exited, 0, agent.output);
    assert.match(agent.output, /deregistered\n/);
    const heartbeat = await retryTransport(
      'a heartbeat for the agent',
      () => registry!.heartbeat(AGENT),
      Date.now() + 10_000,
    );
    assert.deepEqual(heartbeat, { ok: false }, 'Ctrl+C deregistered the agent');
  });
});
