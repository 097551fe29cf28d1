/* eslint-disable @typescript-eslint/no-explicit-any -- the bridge answers untyped JSON the tests read field by field */
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import type { CoordinatorHost } from '../../src/server/host';
import { useCliProcesses } from '../support/cli';
import { EXAMPLE_AGENT_BUNDLE, ExampleAgentProcess, runExample, type ExampleRun } from '../support/exampleAgentProcess';
import { validDescriptor } from '../support/fixtures';
import { makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { CLI_BUNDLE, exampleBundle, REPO_ROOT, requireBundles } from '../support/paths';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** The example bundle built by `npm run build` from examples/mcpAgent.ts. */
const EXAMPLE_MCP_BUNDLE = exampleBundle('mcp');
const ctx = { correlationId: 'example-mcp-test' };

async function httpClient(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'example-mcp-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  return client;
}

/** Calls a tool as the test's peer; answers its structured output (a tool error fails the test). */
async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  assert.notEqual(result.isError, true, `${name}: ${JSON.stringify(result.content)}`);
  return result.structuredContent as Record<string, any>;
}

/** Runs a launch plan's command in its directory with its environment only (as dist/sw4rm-launch.js does) until it exits. */
function runPlan(
  plan: { command: readonly string[]; cwd: string; env: Readonly<Record<string, string>> },
  onOutput?: (output: string) => void,
): Promise<ExampleRun> {
  return runExample(plan.command, plan.env, {
    cwd: plan.cwd,
    inheritEnv: false,
    onOutput,
    deadlineMs: 90_000,
    name: 'the MCP example',
  });
}

/**
 * README "The MCP bridge (for agent authors)", "Run the example": the example launched as a custom launch profile by the
 * launch area (its identity, credential, worktree and environment from the launch plan) against a real coordinator
 * (CoordinatorHost: store files, gRPC and the bridge on port 0, a real git repository). Its peer `echo` is a second
 * bridged agent driven here through the official SDK's Client: it reads the example's message, replies and fulfils it.
 * A task submitted to the example through the scheduler is completed with complete_task.
 */
describe('the MCP example (dist/example-mcp.js) launched as a custom profile', function () {
  this.timeout(120_000);
  let dir: string;
  let host: CoordinatorHost;
  let api: InProcessCoordinatorApi;
  let echo: Client | undefined;

  requireBundles(EXAMPLE_MCP_BUNDLE);

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-int-example-mcp-');
    const repo = makeRepo(dir, 'app', { 'README.md': 'hello\n' });
    host = await startHost(path.join(dir, 'data'), { workspaceFolders: [repo], distDir: path.join(REPO_ROOT, 'dist') });
    api = new InProcessCoordinatorApi(host.coordinator);
  });

  afterEach(async () => {
    await echo?.close();
    echo = undefined;
    api.dispose();
    await stopHost(host);
    removeTempDir(dir);
  });

  /** The peer answers the next message from `from`: a reply in the same conversation, then its final answer FULFILLED. */
  async function echoAnswers(from: string): Promise<{ sentId: string; replyId: string }> {
    for (;;) {
      const read = await call(echo!, 'read_inbox', { wait_ms: 5_000 });
      const message = (
        read.messages as Array<{ message_id: string; from: string; correlation_id: string; payload: { text: string } }>
      ).find((m) => m.from === from);
      if (!message) continue;
      const reply = await call(echo!, 'send_message', {
        to: from,
        payload: { text: `echo: ${message.payload.text}` },
        correlation_id: message.correlation_id,
      });
      await call(echo!, 'ack_message', { message_id: message.message_id, outcome: 'fulfilled', reason: 'echoed' });
      return { sentId: message.message_id, replyId: reply.message_id as string };
    }
  }

  /** The lines every run prints, for the message `sentId` and the reply `replyId`. */
  function assertConversation(output: string, sentId: string, replyId: string): void {
    const expected = [
      new RegExp(
        `^connected to ${host.bridgeEndpoints!.mcpUrl.replace(/[.]/g, '\\.')} \\(sw4rm-coordinator [^)]*\\)$`,
        'm',
      ),
      /^tools\/list: \d+ tools \(list_agents, send_message, read_inbox, ack_message, .*complete_task.*\)$/m,
      /^list_agents: 2 agents: echo \(online\), mcp-example-1 \(you\)$/m,
      new RegExp(`^send_message to echo: accepted ${sentId}$`, 'm'),
      new RegExp(`^send_message again with the same idempotency_key: duplicate of ${sentId}$`, 'm'),
      /^read_inbox: DATA from echo: \{"text":"echo: hello from mcp-example-1"\}$/m,
      new RegExp(`^ack_message ${replyId}: fulfilled \\(FULFILLED\\)$`, 'm'),
      /^read_inbox: echo acknowledged our message: FULFILLED \(echoed\)$/m,
      /^done$/m,
    ];
    for (const pattern of expected) assert.match(output, pattern);
    assert.doesNotMatch(output, /refused:|failed:/i, 'no call was refused');
    // The effects in the coordinator: both messages answered FULFILLED by their recipients.
    assert.equal(host.coordinator.router.message(sentId)!.state, 'FULFILLED');
    assert.equal(host.coordinator.router.message(sentId)!.envelope.producerId, 'mcp-example-1');
    assert.equal(host.coordinator.router.message(replyId)!.state, 'FULFILLED');
  }

  function submit(taskId: string, target: string): void {
    const submitted = host.coordinator.scheduler.submit(
      {
        taskId,
        target,
        priority: 0,
        params: Buffer.from(JSON.stringify({ title: `say hello to echo (${taskId})` })),
        contentType: 'application/json',
        scope: `resource:${taskId}`,
        submittedBy: 'operator',
      },
      ctx,
    );
    assert.ok(submitted.accepted, submitted.accepted ? '' : submitted.reason);
  }

  function assertCompleted(output: string, taskId: string, agentId: string): void {
    const params = `{"title":"say hello to echo (${taskId})"}`.replace(/[()]/g, '\\$&');
    assert.match(
      output,
      new RegExp(`^read_inbox: task ${taskId} \\(a run from coordinator\\): current_task answers it$`, 'm'),
    );
    assert.match(output, new RegExp(`^current_task: ${taskId} RUNNING, params ${params}$`, 'm'));
    assert.match(
      output,
      new RegExp(
        `^complete_task ${taskId}: COMPLETED, result \\{"done_by":"mcp-example-1","params":${params},"peer_answer":"FULFILLED"\\}$`,
        'm',
      ),
    );
    const task = host.coordinator.scheduler.task(taskId)!;
    assert.deepEqual(
      [task.state, task.assignedAgentId, task.note],
      ['COMPLETED', agentId, 'done by the MCP example agent'],
    );
    assert.deepEqual(JSON.parse(task.result), {
      done_by: agentId,
      params: { title: `say hello to echo (${taskId})` },
      peer_answer: 'FULFILLED',
    });
  }

  it('launched, it lists, sends (a retry is a duplicate), reads and acknowledges the reply, waits for a task and completes it; relaunched, finds its task in the inbox', async () => {
    // The peer: a registered agent with its own credential, talking through the bridge.
    assert.equal(host.coordinator.registry.register(validDescriptor('echo'), ctx).accepted, true);
    echo = await httpClient(
      host.bridgeEndpoints!.mcpUrl,
      host.coordinator.credentials.mintAgent('echo', 'test', 'the echo peer', ctx).token,
    );

    // The profile of README "Run the example" (node is this test's Node), launched as the editor launches it.
    const profile = {
      id: 'mcp-example',
      name: 'MCP example agent',
      command: [process.execPath, EXAMPLE_MCP_BUNDLE, 'echo', '--wait-for-task', '60'],
    };
    assert.deepEqual(await api.setLaunchProfileSettings([profile]), []);
    const plan = await api.launchAgent(
      { profileId: 'mcp-example', repoId: 'app', worktree: { kind: 'new' } },
      'editor:test',
    );
    const agentId = plan.record.agentId;
    assert.equal(agentId, 'mcp-example-1');
    assert.deepEqual([plan.env.SW4RM_MCP_URL, plan.env.SW4RM_AGENT_ID], [host.bridgeEndpoints!.mcpUrl, agentId]);
    assert.match(plan.env.SW4RM_TOKEN, /^sw4rm\./, 'its own agent credential');
    await api.launchStarted(agentId);

    // First run: it talks with echo, then waits for a task; Submit Task… (the scheduler) gives it one.
    const first = echoAnswers(agentId);
    let submitted = false;
    const run1 = await runPlan(plan, (output) => {
      if (
        !submitted &&
        /^current_task: none yet; waiting up to 60 s for one \(Submit Task… for mcp-example-1\)$/m.test(output)
      ) {
        submitted = true;
        submit('greet-1', agentId);
      }
    });
    await api.launchExited(agentId, run1.code, 'editor:test');
    assert.equal(run1.code, 0, run1.output);
    assert.ok(submitted, run1.output);
    const one = await first;
    assertConversation(run1.output, one.sentId, one.replyId);
    assertCompleted(run1.output, 'greet-1', agentId);

    // Relaunch, and a task submitted before its process asks: the `run` is in the inbox at its first read.
    const again = await api.relaunchAgent(agentId, 'editor:test');
    await api.launchStarted(agentId);
    submit('greet-2', agentId);
    await pollUntil(
      'the task dispatched',
      () => host.coordinator.scheduler.task('greet-2')?.state === 'DISPATCHED' || undefined,
    );
    const second = echoAnswers(agentId);
    const run2 = await runPlan(again);
    await api.launchExited(agentId, run2.code, 'editor:test');
    assert.equal(run2.code, 0, run2.output);
    const two = await second;
    assert.notEqual(two.sentId, one.sentId, 'a new run is a new message (a new idempotency_key)');
    assertConversation(run2.output, two.sentId, two.replyId);
    assert.doesNotMatch(run2.output, /waiting up to/);
    assertCompleted(run2.output, 'greet-2', agentId);

    // The retried sends were not delivered twice: echo has nothing more from the example.
    const rest = await call(echo, 'read_inbox', { wait_ms: 0 });
    assert.deepEqual(
      (rest.messages as Array<{ from: string }>).filter((m) => m.from === agentId),
      [],
    );
  });

  it('exits 2 with a clear message when SW4RM_TOKEN is missing; exits 1 naming the refusal for a peer nobody registered and for the operator token', async () => {
    const missing = await runPlan({
      command: [process.execPath, EXAMPLE_MCP_BUNDLE, 'echo'],
      cwd: REPO_ROOT,
      env: { SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl },
    });
    assert.equal(missing.code, 2, missing.output);
    assert.match(missing.output, /^SW4RM_TOKEN is not set\. Launch this example with SW4RM: Launch Agent…/m);

    assert.equal(host.coordinator.registry.register(validDescriptor('lonely'), ctx).accepted, true);
    const token = host.coordinator.credentials.mintAgent('lonely', 'test', 'no peer', ctx).token;
    const noRoute = await runPlan({
      command: [process.execPath, EXAMPLE_MCP_BUNDLE, 'nobody'],
      cwd: REPO_ROOT,
      env: { SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl, SW4RM_TOKEN: token },
    });
    assert.equal(noRoute.code, 1, noRoute.output);
    assert.match(noRoute.output, /^send_message refused: NO_ROUTE: /m);

    // A peer that never reads would end the message ACK_TIMEOUT after the real 10 s: not waited for here (the router's
    // timeouts are tested on a ManualClock in test/unit/router*.test.ts; the example prints `ended without an answer`).

    const operator = await runPlan({
      command: [process.execPath, EXAMPLE_MCP_BUNDLE, 'lonely'],
      cwd: REPO_ROOT,
      env: { SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl, SW4RM_TOKEN: host.token! },
    });
    assert.equal(operator.code, 1, operator.output);
    assert.match(operator.output, /^connect to .* failed: .*agent credentials only/m);
  });
});

/**
 * The arguments of the `npx sw4rm-coordinator credentials …` command of README "The MCP bridge (for agent authors)",
 * "Run the example", headless (double-quoted words kept together, as the shell does).
 */
function readmeCredentialsCommand(): string[] {
  const readme = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## The MCP bridge (for agent authors)'));
  const run = section.slice(section.indexOf('### Run the example'));
  const match = /^npx sw4rm-coordinator (credentials .*)$/m.exec(run);
  assert.ok(match, 'the README shows the credentials command');
  return [...match[1].matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]);
}

/** Runs the bundle `bundle` (this test's Node) with `args` from the clone's folder, with `env` only, until it exits. */
function runNode(bundle: string, args: readonly string[], env: Record<string, string>): Promise<ExampleRun> {
  return runExample(bundle, env, { args, inheritEnv: false, deadlineMs: 90_000 });
}

/**
 * README "Run the example", headless: `npm start` (dist/cli.js), the README's `sw4rm-coordinator credentials --agent
 * mcp-example --register …` (mints the credential and registers the agent with it), the SDK example agent as the peer
 * `echo`, then the example with SW4RM_MCP_URL (the printed bridge address) and the agent credential.
 */
describe('the MCP example (dist/example-mcp.js) against the headless coordinator', function () {
  this.timeout(120_000);
  const cli = useCliProcesses('sw4rm-int-example-mcp-cli-');
  let peer: ExampleAgentProcess | undefined;

  requireBundles(CLI_BUNDLE, EXAMPLE_AGENT_BUNDLE, EXAMPLE_MCP_BUNDLE);

  afterEach(async () => {
    await peer?.kill();
    peer = undefined;
  });

  it("an agent credential minted and registered by the README's credentials command: talks with the SDK echo agent; the operator token is refused", async () => {
    const coordinator = cli.run('--port', '0', '--bridge-port', '0', '--data-dir', cli.dataDir());
    const env = await coordinator.environment();
    const mcpUrl = (await coordinator.waitForOutput(/^# MCP bridge for agents: (http:\/\/127\.0\.0\.1:\d+\/mcp) /m))[1];

    // A credential of an agent nobody registered: the example says so.
    const bare = await runNode(
      CLI_BUNDLE,
      ['credentials', '--agent', 'mcp-unregistered', '--data-dir', cli.dataDir()],
      {},
    );
    assert.equal(bare.code, 0, bare.output);
    const bareToken = /^export SW4RM_TOKEN=(\S+)$/m.exec(bare.output)![1];
    const unregistered = await runNode(EXAMPLE_MCP_BUNDLE, ['echo'], {
      ...env,
      SW4RM_AGENT_ID: 'mcp-unregistered',
      SW4RM_TOKEN: bareToken,
      SW4RM_MCP_URL: mcpUrl,
    });
    assert.equal(unregistered.code, 1, unregistered.output);
    assert.match(unregistered.output, /^this credential's agent is not registered/m);

    const args = readmeCredentialsCommand();
    assert.deepEqual(args.slice(0, 4), ['credentials', '--agent', 'mcp-example', '--register']);
    const minted = await runNode(CLI_BUNDLE, [...args, '--data-dir', cli.dataDir()], {});
    assert.equal(minted.code, 0, minted.output);
    assert.match(minted.output, /^# agent mcp-example registered \(accepted with warnings: /m);
    const agentEnv: Record<string, string> = {};
    for (const m of minted.output.matchAll(/^export (SW4RM_\w+)=(\S+)$/gm)) agentEnv[m[1]] = m[2];
    assert.deepEqual(Object.keys(agentEnv), ['SW4RM_AGENT_ID', 'SW4RM_TOKEN']);
    assert.equal(agentEnv.SW4RM_AGENT_ID, 'mcp-example');
    assert.notEqual(agentEnv.SW4RM_TOKEN, env.SW4RM_TOKEN);

    peer = new ExampleAgentProcess({ ...env, SW4RM_AGENT_ID: 'echo' });
    await peer.waitForLine(/inbox stream open/);

    const { output, code } = await runNode(EXAMPLE_MCP_BUNDLE, ['echo'], {
      ...env,
      ...agentEnv,
      SW4RM_MCP_URL: mcpUrl,
    });
    assert.equal(code, 0, output);
    for (const pattern of [
      /^list_agents: 2 agents: echo \(online\), mcp-example \(you\)$/m,
      /^send_message to echo: accepted [\w-]+$/m,
      /^send_message again with the same idempotency_key: duplicate of [\w-]+$/m,
      /^read_inbox: DATA from echo: \{"text":"echo: hello from mcp-example"\}$/m,
      /^ack_message [\w-]+: fulfilled \(FULFILLED\)$/m,
      /^read_inbox: echo acknowledged our message: RECEIVED$/m,
      /^read_inbox: echo acknowledged our message: FULFILLED$/m,
      /^current_task: none$/m,
      /^done$/m,
    ])
      assert.match(output, pattern);
    await peer.waitForLine(
      /mcp-example acknowledged the reply "echo: hello from mcp-example": FULFILLED \(read by the MCP example agent\)/,
    );
    assert.equal(
      peer.output.match(/message from mcp-example: hello from mcp-example/g)?.length,
      1,
      'the retried send was delivered once',
    );

    // The operator token that npm start prints is not an agent's: the bridge refuses it.
    const operator = await runNode(EXAMPLE_MCP_BUNDLE, ['echo'], { ...env, SW4RM_MCP_URL: mcpUrl });
    assert.equal(operator.code, 1, operator.output);
    assert.match(operator.output, /agent credentials only/);
  });
});
