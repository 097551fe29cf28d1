/* eslint-disable @typescript-eslint/no-explicit-any -- the bridge answers untyped JSON the tests read field by field */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ManualClock } from '../../src/core/clock';
import type { StoredEvent } from '../../src/core/log/model';
import { DEFAULT_BRIDGE_CONNECTION_LIMITS } from '../../src/server/bridge/connectionBounds';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { REPO_ROOT } from '../support/paths';
import { hookPost } from '../support/bridgeHttp';
import { pollUntil, settles } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ctx = { correlationId: 'bridge-flood-test' };
const DIST = path.join(REPO_ROOT, 'dist');
/** More than the 1,100 of the issue, and more than the bridge's 1,024 connections at most. */
const FLOOD = 1_200;
/** Every 4th flood connection sends part of a request's headers (a valid credential among them) and never finishes them. */
const SLOW_EVERY = 4;
const LIMITS = DEFAULT_BRIDGE_CONNECTION_LIMITS;

/** The soft limit on open files this process's children inherit (Node raises its own soft limit to the hard one). */
function openFileLimit(): number {
  try {
    const text = execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim();
    return text === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(text);
  } catch {
    return Number.MAX_SAFE_INTEGER;
  }
}

/** A tool call's structured output; a tool error throws `<CODE>: message`. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (result.isError) throw new Error(JSON.stringify(result.structuredContent));
  return result.structuredContent as Record<string, any>;
}

/**
 * Issue 30, item 5: the MCP bridge under a connection flood. 1,200 TCP connections without a credential (idle ones,
 * and slow-header ones that send part of a request, a valid credential included, and never finish it) must not keep
 * legitimate agents out: at most 128 unauthenticated connections per address are kept (the oldest evicted), an
 * authenticated connection in use is never evicted, the drops are logged at most once per 10 s with counts, and the
 * unauthenticated and header timeouts (on the coordinator's Clock: a ManualClock here, no sleeps) close what is left.
 * Real coordinator, real bridge socket, the official SDK client.
 */
describe('MCP bridge under a connection flood (README, "Limits")', function () {
  this.timeout(120_000);
  let dir: string;
  let clock: ManualClock;
  let host: CoordinatorHost;
  let port: number;
  let worktree: string;
  const tokens = new Map<string, string>();
  const clients: Client[] = [];
  const flood: net.Socket[] = [];

  async function connect(agent: string): Promise<Client> {
    const client = new Client({ name: `flood-${agent}`, version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(host.bridgeEndpoints!.mcpUrl), {
        requestInit: { headers: { Authorization: `Bearer ${tokens.get(agent)}` } },
      }),
    );
    clients.push(client);
    return client;
  }

  /** A hook POST on a connection of its own, as sw4rm-hook.js sends it. */
  const hook = (token: string, body: unknown) => hookPost(port, token, body, true);

  /** Opens `count` connections that never authenticate, 100 at a time (the n-th from `from(n)`); answers when all are connected. */
  async function openFlood(count: number, from: (n: number) => string = () => '127.0.0.1'): Promise<void> {
    for (let start = 0; start < count; start += 100) {
      await Promise.all(
        Array.from(
          { length: Math.min(100, count - start) },
          (_, i) =>
            new Promise<void>((resolve, reject) => {
              const n = start + i;
              const socket = net.connect({ host: '127.0.0.1', port, localAddress: from(n) });
              flood.push(socket);
              socket.on('error', () => undefined); // an evicted socket may see ECONNRESET
              socket.once('connect', () => {
                if (n % SLOW_EVERY === 0)
                  socket.write(
                    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${tokens.get('reader')}\r\nContent-Type: appl`,
                  );
                resolve();
              });
              socket.once('error', reject);
            }),
        ),
      );
    }
  }

  const closedFlood = () => flood.filter((s) => s.destroyed || s.readyState === 'closed').length;
  const drops = (): StoredEvent[] => host.coordinator.log.query({ eventType: 'bridge.connections_dropped' });
  const sum = (events: StoredEvent[], key: string) => events.reduce((n, e) => n + Number(e.details[key] ?? 0), 0);

  before(async function () {
    const limit = openFileLimit();
    // Client and server ends of every flood connection in this one process, at worst, plus the host's own files.
    const needed = 2 * FLOOD + 512;
    if (limit < needed)
      throw new Error(
        `this test needs ${needed} open files (ulimit -n is ${limit}): raise the limit (ulimit -n ${needed}) to run it`,
      );
    dir = makeTempDir('sw4rm-int-bridge-flood-');
    const repo = makeRepo(dir, 'app', { 'README.md': 'hello\n' });
    clock = new ManualClock(Date.now());
    host = await startHost(path.join(dir, 'data'), { clock, distDir: DIST, workspaceFolders: [repo] });
    port = host.bridge!.port;
    for (const agent of ['reader', 'sender', 'hooked']) {
      assert.equal(host.coordinator.registry.register(validDescriptor(agent), ctx).accepted, true);
      assert.ok(host.coordinator.registry.heartbeat(agent, 'RUNNABLE', {}, ctx));
      tokens.set(agent, host.coordinator.credentials.mintAgent(agent, 'test', 'flood tests', ctx).token);
    }
    await host.coordinator.worktrees.bind('hooked', 'app', '', ctx);
    worktree = host.coordinator.worktrees.worktreePathOf('hooked')!;
  });

  after(async () => {
    for (const socket of flood) socket.destroy();
    for (const client of clients) await client.close().catch(() => undefined);
    await stopHost(host);
    if (dir) removeTempDir(dir);
  });

  it('keeps legitimate calls going, never evicts an authenticated connection, logs drops rate-limited, and times out the rest', async () => {
    // An authenticated connection held open by a waiting read_inbox (wait_ms on the ManualClock: only a message ends it).
    const reader = await connect('reader');
    const attached = new Promise<void>((resolve) => {
      const listener = host.coordinator.log.onDidRecord((e) => {
        if (e.eventType === 'stream.opened' && e.details.agent_id === 'reader') {
          listener.dispose();
          resolve();
        }
      });
    });
    let held: Record<string, any> | Error | undefined;
    const heldNow = () => held;
    const holding = call(reader, 'read_inbox', { wait_ms: 30_000 }).then(
      (r) => {
        held = r;
      },
      (err: Error) => {
        held = err;
      },
    );
    await settles(attached, 'the held read_inbox to wait');

    const started = Date.now();
    await openFlood(FLOOD);
    // Legitimate calls on fresh connections while the flood's are open (the bridge takes 1,024 connections at most):
    // an MCP agent's and a hook's, promptly.
    let t = Date.now();
    const sender = await connect('sender');
    const agents = await settles(call(sender, 'list_agents'), 'list_agents during the flood');
    assert.ok((agents.agents as Array<{ agent_id: string }>).some((a) => a.agent_id === 'reader'));
    const mcpMs = Date.now() - t;
    t = Date.now();
    const answer = await settles(
      hook(tokens.get('hooked')!, {
        session_id: 's1',
        transcript_path: '/tmp/t.jsonl',
        cwd: worktree,
        permission_mode: 'default',
        hook_event_name: 'PreToolUse',
        tool_name: 'Read',
        tool_input: { file_path: path.join(worktree, 'README.md') },
        tool_use_id: 'toolu_1',
      }),
      'the hook during the flood',
    );
    const hookMs = Date.now() - t;
    assert.equal(answer.status, 200, JSON.stringify(answer.json));
    assert.equal(answer.json.hookSpecificOutput.permissionDecision, 'allow');
    console.log(`      during the flood: MCP connect + list_agents ${mcpMs} ms, hook ${hookMs} ms`);
    assert.ok(mcpMs < 3_000 && hookMs < 3_000, `legitimate calls took ${mcpMs} / ${hookMs} ms`);

    const kept = LIMITS.maxUnauthenticatedPerAddress;
    // Each connection past the bound evicts the oldest unauthenticated one of the address at once.
    await pollUntil(
      `${FLOOD - kept} flood connections evicted`,
      () => closedFlood() >= FLOOD - kept || undefined,
      30_000,
    );
    console.log(
      `      ${FLOOD} connections opened in ${Date.now() - started} ms; ${closedFlood()} evicted, ${FLOOD - closedFlood()} kept`,
    );
    // The bound is kept: 128 (less the few the legitimate connections above evicted while they were not yet authenticated).
    const open = FLOOD - closedFlood();
    assert.ok(open <= kept && open >= kept - 4, `${open} flood connections open`);

    // Rate-limited: the first drop of the quiet period is logged at once, the others wait for the interval.
    let events = drops();
    assert.equal(events.length, 1, JSON.stringify(events.map((e) => e.details)));
    assert.deepEqual(events[0].details, { unauthenticated_timeout: 0, headers_timeout: 0, evicted_for_bound: 1 });
    assert.equal(events[0].level, 'WARN');

    // A second wave: the bound holds (the authenticated connections above are not counted, nor evicted).
    await openFlood(kept);
    await pollUntil('the second wave evicting the first', () => closedFlood() >= FLOOD || undefined, 10_000);
    assert.equal(closedFlood(), FLOOD, 'each new unauthenticated connection evicted an old one');
    assert.equal(drops().length, 1, 'still one log line within the interval');
    assert.equal(heldNow(), undefined, 'the held read_inbox is still waiting');

    // The interval passes: one line with the sum; the unauthenticated timeout closes the connections that are left.
    clock.advance(Math.max(LIMITS.unauthenticatedMs, LIMITS.headersMs, LIMITS.dropLogIntervalMs) + 1);
    await pollUntil(
      'the unauthenticated connections timed out',
      () => closedFlood() === FLOOD + kept || undefined,
      10_000,
    );
    clock.advance(LIMITS.dropLogIntervalMs + 1);
    events = drops();
    console.log(`      drops logged: ${events.map((e) => JSON.stringify(e.details)).join(' ')}`);
    // One line at the start and at most one per interval after it (a drop right after a flush waits for the next).
    assert.ok(events.length <= 3, `${events.length} log lines for ${FLOOD + kept} drops over two intervals`);
    assert.equal(sum(events, 'evicted_for_bound'), FLOOD, 'every eviction counted');
    // The flood's connections end on the unauthenticated timeout (armed first); headers_timeout counts the SDK
    // clients' idle keep-alive connections (authenticated, closed when no next request comes within headersMs).
    assert.equal(sum(events, 'unauthenticated_timeout'), kept, 'every unauthenticated timeout counted');

    // The held connection was never evicted: its read_inbox still answers, with a message sent now.
    assert.equal(heldNow(), undefined, 'the held read_inbox is still waiting after the timeouts');
    const late = await connect('sender');
    await call(late, 'send_message', { to: 'reader', payload: 'still there?' });
    await settles(holding, 'the held read_inbox to answer');
    const result = heldNow();
    assert.ok(result !== undefined && !(result instanceof Error), String(result));
    assert.deepEqual(
      (result as { messages: Array<{ payload: unknown }> }).messages.map((m) => m.payload),
      ['still there?'],
    );
  });

  it('bounds them in all too: a flood from ten loopback addresses (any of 127.0.0.0/8), under the per-address bound each, leaves agents room', async () => {
    for (const socket of flood.splice(0)) socket.destroy();
    const perAddress = Math.floor(FLOOD / 10);
    assert.ok(perAddress < LIMITS.maxUnauthenticatedPerAddress && FLOOD > 1_024);
    await openFlood(FLOOD, (n) => `127.0.0.${2 + (n % 10)}`);
    const t = Date.now();
    const agent = await connect('sender');
    await settles(call(agent, 'list_agents'), 'list_agents during the flood');
    const answer = await settles(
      hook(tokens.get('hooked')!, {
        session_id: 's1',
        transcript_path: '/tmp/t.jsonl',
        cwd: worktree,
        permission_mode: 'default',
        hook_event_name: 'PreToolUse',
        tool_name: 'Read',
        tool_input: { file_path: path.join(worktree, 'README.md') },
        tool_use_id: 'toolu_2',
      }),
      'the hook during the flood',
    );
    assert.equal(answer.status, 200, JSON.stringify(answer.json));
    const elapsed = Date.now() - t;
    await pollUntil(
      'the oldest evicted past the bound in all',
      () => FLOOD - closedFlood() <= LIMITS.maxUnauthenticated || undefined,
      30_000,
    );
    const open = FLOOD - closedFlood();
    console.log(
      `      ${FLOOD} connections from 10 addresses: ${open} kept; MCP connect + list_agents and a hook in ${elapsed} ms`,
    );
    assert.ok(open >= LIMITS.maxUnauthenticated - 4, `${open} kept`);
    clock.advance(LIMITS.unauthenticatedMs + 1);
    await pollUntil('the rest timed out', () => closedFlood() === FLOOD || undefined, 10_000);
  });

  it('answers `Expect: 100-continue` only after authentication: without a credential 401 at once, never 100 Continue', async () => {
    /** The first status line the bridge writes for headers that announce a body and wait for 100 Continue. */
    const firstStatus = (authorization: string | undefined) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect({ host: '127.0.0.1', port });
        let text = '';
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString('latin1');
          const end = text.indexOf('\r\n');
          if (end >= 0) {
            socket.destroy();
            resolve(text.slice(0, end));
          }
        });
        socket.on('error', reject);
        socket.on('connect', () =>
          socket.write(
            `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
              `Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n` +
              `${authorization !== undefined ? `Authorization: ${authorization}\r\n` : ''}\r\n`,
          ),
        );
      });
    assert.equal(await settles(firstStatus(undefined), 'the answer without a credential'), 'HTTP/1.1 401 Unauthorized');
    assert.equal(
      await settles(firstStatus('Bearer sw4rm.nobody.secret'), 'the answer with an unknown credential'),
      'HTTP/1.1 401 Unauthorized',
    );
    assert.equal(
      await settles(firstStatus(`Bearer ${tokens.get('sender')}`), 'the answer with a credential'),
      'HTTP/1.1 100 Continue',
    );
  });
});
