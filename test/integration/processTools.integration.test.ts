import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import type { CoordinatorHost } from '../../src/server/host';
import { processGroupMembers } from '../../src/core/tools/processTree';
import { bearer, CoordinatorClients, expectStatus, serviceClient, unary, type ServiceClient } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface ToolFrame {
  call_id: string;
  frame_no: string;
  final: boolean;
  content_type: string;
  data: Buffer;
  summary: Buffer;
}
type Client = ServiceClient;

/**
 * The `process` provider through the whole coordinator (issue 17, part 5): the setting reaches the composition
 * (HostOptions.tools.process), and ToolService runs run_command through the one engine: streamed output frames, the
 * policy's privilege level refused, Cancel killing the process group. Off by default: the provider takes no call.
 */
describe('the process provider through ToolService (real gRPC, the engine, real processes)', function () {
  this.timeout(120_000);
  let base: string;
  const hosts: CoordinatorHost[] = [];
  const dataDirs: string[] = [];
  const clients: Client[] = [];

  const metadata = (token: string): grpc.Metadata => bearer(token);

  /** A coordinator with the repository `app`, agent `coder` registered and bound; its ToolService client and coder's token. */
  async function start(processEnabled: boolean): Promise<{ tools: Client; connector: Client; token: string }> {
    const dataDir = makeTempDir('sw4rm-int-process-data-');
    dataDirs.push(dataDir);
    const repo = fs.existsSync(`${base}/app`) ? `${base}/app` : makeRepo(base, 'app', { 'README.md': 'hello\n' });
    const host = await startHost(dataDir, {
      workspaceFolders: [repo],
      tools: { process: { enabled: processEnabled, acceptUnenforcedNetworkPolicy: false } },
    });
    hosts.push(host);
    const address = `127.0.0.1:${host.port}`;
    const tools = serviceClient(address, 'sw4rm.tool.ToolService');
    const connector = serviceClient(address, 'sw4rm.connector.ConnectorService');
    const worktrees = serviceClient(address, 'sw4rm.worktree.WorktreeService');
    clients.push(tools, connector, worktrees);
    const registry = new CoordinatorClients(address, host.token);
    assert.equal((await registry.registerAgent(descriptorMessage('coder'))).accepted, true);
    registry.close();
    const token = host.coordinator.credentials.mintAgent('coder', 'test', 'process tool tests', {
      correlationId: 'test',
    }).token;
    assert.deepEqual(await unary(worktrees, 'Bind', { agent_id: 'coder', repo_id: 'app' }, metadata(token)), {
      ok: true,
      reason: '',
    });
    return { tools, connector, token };
  }

  before(() => {
    base = fs.realpathSync(makeTempDir('sw4rm-int-process-'));
  });

  after(async () => {
    for (const client of clients) client.close();
    for (const host of hosts) await stopHost(host);
    for (const dir of dataDirs) removeTempDir(dir);
    removeTempDir(base);
  });

  it('streams run_command output as frames, refuses MINIMAL, and Cancel kills the process group', async () => {
    const { tools, token } = await start(true);
    const policy = { privilege_level: 'DEFAULT', network_policy: 'DENY_ALL' };

    // Unary: the final frame is the result; the command ran in the agent's worktree.
    const frame = await unary<ToolFrame>(
      tools,
      'Call',
      {
        call_id: 'pwd',
        provider_id: 'process',
        tool_name: 'run_command',
        content_type: 'application/json',
        args: Buffer.from(JSON.stringify({ argv: ['sh', '-c', 'basename "$PWD"'] })),
        policy,
      },
      metadata(token),
    );
    const result = JSON.parse(frame.data.toString('utf8')) as {
      exit_code: number;
      stdout: string;
      network_enforced: boolean;
    };
    assert.equal(frame.final, true);
    assert.deepEqual([result.exit_code, result.stdout], [0, 'coder\n'], "run in the agent's home worktree");

    // privilege_level MINIMAL (the default policy): no process spawning.
    const minimal = await expectStatus(
      unary(
        tools,
        'Call',
        {
          call_id: 'minimal',
          provider_id: 'process',
          tool_name: 'run_command',
          args: Buffer.from('{"argv":["true"]}'),
        },
        metadata(token),
      ),
      grpc.status.PERMISSION_DENIED,
    );
    assert.equal(minimal.details, 'PERMISSION_DENIED: run_command spawns processes: ask for privilege_level DEFAULT');

    // CallStream: frames while it runs; Cancel ends the stream with a terminal frame and the group goes.
    const frames: ToolFrame[] = [];
    const stream = (tools.CallStream as (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<ToolFrame>).call(
      tools,
      {
        // EGRESS_UNRESTRICTED: under DENY_ALL's bubblewrap the shell is in a new session and PID namespace, so the host
        // pgid this test reads is not visible inside (the sandbox's own kill is tested in processProvider's tests).
        call_id: 'long',
        provider_id: 'process',
        tool_name: 'run_command',
        stream: true,
        policy: { ...policy, network_policy: 'EGRESS_UNRESTRICTED' },
        // The shell's process group as the host sees it ($$ is 1 in DENY_ALL's PID namespace; /proc is the host's).
        args: Buffer.from(
          JSON.stringify({
            argv: ['sh', '-c', 'read -r _ _ _ _ pg _ < /proc/self/stat; echo $pg; sleep 60 & sleep 60'],
          }),
        ),
      },
      metadata(token),
    );
    const ended = new Promise<void>((resolve, reject) => {
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    stream.on('data', (f: ToolFrame) => frames.push(f));
    await pollUntil('the first output frame', () => frames.length > 0 || undefined);
    const first = JSON.parse(frames[0].data.toString('utf8')) as { stream: string; text: string };
    assert.equal(first.stream, 'stdout');
    const pgid = Number(first.text.trim());
    // sh and both sleeps, and unshare (the group's leader) where DENY_ALL runs in namespaces.
    const members = 3;
    await pollUntil('both sleeps', async () => (await processGroupMembers(pgid)).length === members || undefined);
    const cancelled = await unary<{ error_code: string }>(
      tools,
      'Cancel',
      { call_id: 'long', provider_id: 'process' },
      metadata(token),
    );
    assert.equal(cancelled.error_code, 'CANCELLED');
    await ended;
    const last = frames[frames.length - 1];
    assert.equal(last.final, true);
    assert.equal((JSON.parse(last.summary.toString('utf8')) as { cancelled: boolean }).cancelled, true);
    await pollUntil(
      'the process group to be gone',
      async () => (await processGroupMembers(pgid)).length === 0 || undefined,
    );
  });

  it('off by default: a call is refused AGENT_UNAVAILABLE and runs nothing (DescribeTools still describes run_command)', async () => {
    const { tools, connector, token } = await start(false);
    const marker = `${base}/ran-while-off`;
    const refused = await expectStatus(
      unary(
        tools,
        'Call',
        {
          call_id: 'off',
          provider_id: 'process',
          tool_name: 'run_command',
          args: Buffer.from(JSON.stringify({ argv: ['touch', marker] })),
          policy: { privilege_level: 'DEFAULT', network_policy: 'EGRESS_UNRESTRICTED' },
        },
        metadata(token),
      ),
      grpc.status.UNAVAILABLE,
    );
    assert.match(refused.details, /^AGENT_UNAVAILABLE: /);
    assert.equal(fs.existsSync(marker), false);
    const described = await unary<{ tools: Array<{ tool_name: string }> }>(
      connector,
      'DescribeTools',
      { provider_id: 'process' },
      metadata(token),
    );
    assert.deepEqual(
      described.tools.map((t) => t.tool_name),
      ['run_command'],
    );
  });
});
