import { strict as assert } from 'node:assert';
import * as http from 'node:http';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ManualClock } from '../../src/core/clock';
import type { Disposable } from '../../src/core/events';
import type { StoredEvent } from '../../src/core/log/model';
import { BridgeServer } from '../../src/server/bridge/bridgeServer';
import type { BridgeTool } from '../../src/server/bridge/model';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { REPO_ROOT } from '../support/paths';
import { settles } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ctx = { correlationId: 'bridge-cancel-test' };
const DIST = path.join(REPO_ROOT, 'dist');

/** settles (support/poll.ts) with this file's longer wait: a failing test says what it waited for, instead of mocha's timeout. */
const within = <T>(promise: Promise<T>, what: string, ms = 10_000): Promise<T> => settles(promise, what, ms);

/** A raw MCP POST whose response is read as it streams: its status and headers first, then its whole body when it ends. */
interface OpenPost {
  readonly head: Promise<{ status: number; contentType: string }>;
  readonly ended: Promise<string>;
  /** Whether the response has ended yet. */
  hasEnded(): boolean;
  destroy(): void;
}

function post(port: number, token: string, message: unknown): OpenPost {
  let ended = false;
  let req: http.ClientRequest | undefined;
  let resolveHead: (head: { status: number; contentType: string }) => void = () => undefined;
  const head = new Promise<{ status: number; contentType: string }>((resolve) => {
    resolveHead = resolve;
  });
  const body = new Promise<string>((resolve, reject) => {
    req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/mcp',
        headers: {
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          Authorization: `Bearer ${token}`,
        },
      },
      (res) => {
        resolveHead({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? '') });
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          ended = true;
          resolve(Buffer.concat(chunks).toString('utf8'));
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(message));
  });
  body.catch(() => undefined);
  return { head, ended: body, hasEnded: () => ended, destroy: () => req?.destroy() };
}

/** A JSON-RPC tools/call with our own id. */
function toolsCall(id: string | number, name: string, args: Record<string, unknown>): unknown {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } };
}

function cancelled(requestId: string | number, reason?: string): unknown {
  return {
    jsonrpc: '2.0',
    method: 'notifications/cancelled',
    params: { requestId, ...(reason !== undefined ? { reason } : {}) },
  };
}

/** The JSON-RPC messages of an SSE response body. */
function sseMessages(body: string): Array<Record<string, unknown>> {
  return body
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>);
}

/**
 * Cancellation over the MCP bridge (README, "The MCP bridge"): the bridge is stateless (one SDK Server per POST), so a
 * client's `notifications/cancelled` arrives in a POST of its own; it must reach the running tool call it names, made
 * with the same credential, and nothing else. Real coordinator (CoordinatorHost, real store files, ManualClock so no
 * deadline or wait ends on its own), the official SDK Client over Streamable HTTP, and raw HTTP where the test must
 * choose the JSON-RPC ids.
 */
describe('MCP bridge: a cancelled tool call reaches the running tool (stateless Streamable HTTP)', function () {
  this.timeout(60_000);
  let dataDir: string;
  let clock: ManualClock;
  let host: CoordinatorHost;
  let port: number;
  let operator: Disposable;
  const tokens = new Map<string, string>();
  const clients: Client[] = [];
  const listeners: Disposable[] = [];

  async function connect(agent: string): Promise<Client> {
    const client = new Client({ name: `cancel-${agent}`, version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(host.bridgeEndpoints!.mcpUrl), {
        requestInit: { headers: { Authorization: `Bearer ${tokens.get(agent)}` } },
      }),
    );
    clients.push(client);
    return client;
  }

  /** The next log event of `eventType` matching `match`; listen BEFORE acting. */
  function logged(eventType: string, match: (event: StoredEvent) => boolean = () => true): Promise<StoredEvent> {
    return new Promise((resolve) => {
      const listener = host.coordinator.log.onDidRecord((event) => {
        if (event.eventType === eventType && match(event)) {
          listener.dispose();
          resolve(event);
        }
      });
      listeners.push(listener);
    });
  }

  const audit = (invocationId: string) => host.coordinator.hitl.auditTrail({ invocationId }).map((e) => e.kind);

  before(async () => {
    dataDir = makeTempDir('sw4rm-bridge-cancel-');
    clock = new ManualClock(Date.now());
    host = await startHost(dataDir, { clock, distDir: DIST });
    port = host.bridge!.port;
    operator = host.coordinator.hitl.attachOperator('editor:test');
    const { registry, credentials } = host.coordinator;
    for (const agent of ['asker', 'reader', 'other']) {
      assert.equal(registry.register(validDescriptor(agent), ctx).accepted, true);
      assert.ok(registry.heartbeat(agent, 'RUNNABLE', {}, ctx));
      tokens.set(agent, credentials.mintAgent(agent, 'test', 'bridge cancel tests', ctx).token);
    }
  });

  after(async () => {
    for (const listener of listeners) listener.dispose();
    for (const client of clients) await client.close();
    operator?.dispose();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  it('request_decision: the client aborts its call → requester_detached at once, the invocation stays pending and is re-attached by request_id', async () => {
    const client = await connect('asker');
    const controller = new AbortController();
    const opened = logged('hitl.opened', (e) => e.details.invocation_id === 'ask-1');
    const call = client.callTool(
      {
        name: 'request_decision',
        arguments: { reason_type: 'MANUAL_OVERRIDE', summary: 'Deploy on Friday?', request_id: 'ask-1' },
      },
      undefined,
      { signal: controller.signal },
    );
    await within(opened, 'hitl.opened');

    const detached = logged('hitl.requester_detached', (e) => e.details.invocation_id === 'ask-1');
    const bridgeLogged = logged('bridge.call_cancelled', (e) => e.actor === 'asker');
    controller.abort('the user pressed Esc');
    await assert.rejects(call, /Esc/);
    // The client is still connected (its transport open): only the cancellation can have detached the requester.
    await within(detached, "requester_detached after the client's cancellation");
    const event = await within(bridgeLogged, 'bridge.call_cancelled');
    assert.equal(event.details.tool, 'request_decision');
    assert.match(String(event.details.reason), /Esc/);
    assert.equal(host.coordinator.hitl.get('ask-1')?.state, 'pending', 'the person can still answer');
    assert.deepEqual(audit('ask-1'), ['opened', 'requester_detached']);

    // The same client keeps working; the same request_id waits for the same question.
    const reattached = logged('hitl.reattached', (e) => e.details.invocation_id === 'ask-1');
    const again = client.callTool({
      name: 'request_decision',
      arguments: { reason_type: 'MANUAL_OVERRIDE', summary: 'Deploy on Friday?', request_id: 'ask-1' },
    });
    await within(reattached, 'hitl.reattached');
    host.coordinator.hitl.decide('ask-1', { action: 'approve', rationale: 'fine' }, 'editor:alice', ctx);
    const answer = (await again) as CallToolResult;
    assert.equal(answer.isError, undefined, JSON.stringify(answer.content));
    assert.deepEqual(
      [answer.structuredContent?.action, answer.structuredContent?.decided_by, answer.structuredContent?.reattached],
      ['approve', 'person', true],
    );
  });

  it("through the stdio entry point (dist/sw4rm-mcp.js): the client's cancellation reaches request_decision too", async () => {
    const [command, ...args] = host.bridgeEndpoints!.stdioCommand;
    const client = new Client({ name: 'cancel-stdio', version: '1.0.0' });
    clients.push(client);
    await client.connect(
      new StdioClientTransport({
        command,
        args,
        stderr: 'ignore',
        env: {
          PATH: process.env.PATH ?? '',
          SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl,
          SW4RM_TOKEN: tokens.get('asker')!,
        },
      }),
    );
    const controller = new AbortController();
    const opened = logged('hitl.opened', (e) => e.details.invocation_id === 'ask-stdio');
    const call = client.callTool(
      {
        name: 'request_decision',
        arguments: { reason_type: 'MANUAL_OVERRIDE', summary: 'Via stdio?', request_id: 'ask-stdio' },
      },
      undefined,
      { signal: controller.signal },
    );
    await within(opened, 'hitl.opened');
    const detached = logged('hitl.requester_detached', (e) => e.details.invocation_id === 'ask-stdio');
    controller.abort('stop');
    await assert.rejects(call);
    await within(detached, 'requester_detached through the stdio relay');
    assert.equal(host.coordinator.hitl.get('ask-stdio')?.state, 'pending');
    host.coordinator.hitl.cancel('ask-stdio', 'editor:test', 'test over', ctx);
  });

  it('read_inbox waiting 30 s: the client aborts → the read ends at once (the inbox detached), and a message sent afterwards waits for the next read', async () => {
    const reader = await connect('reader');
    const sender = await connect('asker');
    const controller = new AbortController();
    const attached = logged('stream.opened', (e) => e.actor === 'reader');
    const call = reader.callTool({ name: 'read_inbox', arguments: { wait_ms: 30_000 } }, undefined, {
      signal: controller.signal,
    });
    await within(attached, "the read's inbox attached");
    assert.equal(host.coordinator.router.inboxStats('reader').streaming, true);

    const detached = logged('stream.closed', (e) => e.actor === 'reader');
    controller.abort('no longer needed');
    await assert.rejects(call);
    // The wait is on the ManualClock, never advanced: only the cancellation ends it.
    await within(detached, "the read's inbox detached after the cancellation");
    assert.equal(host.coordinator.router.inboxStats('reader').streaming, false);

    const sent = (await sender.callTool({
      name: 'send_message',
      arguments: { to: 'reader', payload: 'after the cancel' },
    })) as CallToolResult;
    assert.equal(sent.isError, undefined, JSON.stringify(sent.content));
    const messageId = sent.structuredContent?.message_id as string;
    assert.equal(
      host.coordinator.router.inboxStats('reader').queued,
      1,
      'pending, not swallowed by the cancelled read',
    );
    const read = (await reader.callTool({ name: 'read_inbox', arguments: {} })) as CallToolResult;
    const messages = read.structuredContent?.messages as Array<{ message_id: string; payload: unknown }>;
    assert.deepEqual(
      messages.map((m) => [m.message_id, m.payload]),
      [[messageId, 'after the cancel']],
    );
  });

  it("a cancellation with another agent's credential for the same request id changes nothing; an unknown id neither; the caller's own does", async () => {
    const opened = logged('hitl.opened', (e) => e.details.invocation_id === 'ask-2');
    const running = post(
      port,
      tokens.get('asker')!,
      toolsCall('call-7', 'request_decision', {
        reason_type: 'SECURITY_APPROVAL',
        summary: 'Read ~/.ssh?',
        request_id: 'ask-2',
      }),
    );
    assert.deepEqual(await running.head, { status: 200, contentType: 'text/event-stream' });
    await within(opened, 'hitl.opened');
    const cancelsBefore = host.coordinator.log.query({ eventType: 'bridge.call_cancelled' }).length;

    // Another agent names the same JSON-RPC id: accepted (a notification), and nothing happens.
    const foreign = post(port, tokens.get('other')!, cancelled('call-7', 'not yours'));
    assert.equal((await foreign.head).status, 202);
    await foreign.ended;
    // The same id as a number is another request; an id nobody uses is nothing.
    for (const requestId of ['nope', 7]) {
      const unknown = post(port, tokens.get('asker')!, cancelled(requestId));
      assert.equal((await unknown.head).status, 202);
      await unknown.ended;
    }
    // Each cancellation was handled before its 202 was written: an abort it caused would be in the audit by now.
    assert.deepEqual(audit('ask-2'), ['opened']);
    assert.equal(host.coordinator.log.query({ eventType: 'bridge.call_cancelled' }).length, cancelsBefore);
    assert.equal(running.hasEnded(), false, 'the call is still running');

    const detached = logged('hitl.requester_detached', (e) => e.details.invocation_id === 'ask-2');
    const own = post(port, tokens.get('asker')!, cancelled('call-7', 'changed my mind'));
    assert.equal((await own.head).status, 202);
    await within(detached, 'requester_detached');
    // The cancelled request is not answered (MCP: the receiver SHOULD NOT respond); its response ends.
    const body = await within(running.ended, 'the end of the cancelled POST');
    assert.deepEqual(
      sseMessages(body).filter((m) => m.id === 'call-7'),
      [],
    );
    assert.equal(host.coordinator.hitl.get('ask-2')?.state, 'pending');
    host.coordinator.hitl.cancel('ask-2', 'editor:test', 'test over', ctx);
  });

  it('two running calls of one credential with the same id (two clients sharing it): a cancellation of that id cancels neither, logged WARN', async () => {
    const openedA = logged('hitl.opened', (e) => e.details.invocation_id === 'dup-a');
    const openedB = logged('hitl.opened', (e) => e.details.invocation_id === 'dup-b');
    const a = post(
      port,
      tokens.get('asker')!,
      toolsCall(1, 'request_decision', { reason_type: 'CONFLICT', summary: 'A?', request_id: 'dup-a' }),
    );
    const b = post(
      port,
      tokens.get('asker')!,
      toolsCall(1, 'request_decision', { reason_type: 'CONFLICT', summary: 'B?', request_id: 'dup-b' }),
    );
    await within(Promise.all([openedA, openedB]), 'both invocations');
    const ambiguous = post(port, tokens.get('asker')!, cancelled(1));
    assert.equal((await ambiguous.head).status, 202);
    const warned = host.coordinator.log.query({ eventType: 'bridge.cancel_ambiguous' });
    assert.equal(warned.length, 1);
    assert.deepEqual([warned[0].level, warned[0].details.request_id, warned[0].details.calls], ['WARN', 1, 2]);
    assert.deepEqual([audit('dup-a'), audit('dup-b')], [['opened'], ['opened']]);
    // Both still answer.
    host.coordinator.hitl.decide('dup-a', { action: 'approve', rationale: 'a' }, 'editor:alice', ctx);
    host.coordinator.hitl.decide('dup-b', { action: 'deny', rationale: 'b' }, 'editor:alice', ctx);
    const answers = (await Promise.all([a.ended, b.ended])).map(
      (body) => sseMessages(body).find((m) => m.id === 1)?.result as CallToolResult,
    );
    assert.deepEqual(
      answers.map((r) => r.structuredContent?.action),
      ['approve', 'deny'],
    );
  });

  describe('with tools of the test (a bridge of its own on the same coordinator)', () => {
    let bridge: BridgeServer;
    let bridgePort: number;
    let release: () => void = () => undefined;
    const aborted: string[] = [];
    const abortWaiters = new Map<string, () => void>();
    let enteredBlock: () => void = () => undefined;

    /** Resolves when the block call tagged `tag` sees its signal abort; call BEFORE acting. */
    function abortOf(tag: string): Promise<void> {
      return new Promise((resolve) => abortWaiters.set(tag, resolve));
    }

    /** `block` runs until its signal aborts; `gate` until the test releases it. */
    const TOOLS: BridgeTool[] = [
      {
        name: 'block',
        description: 'Blocks until cancelled (a test tool).',
        inputSchema: { type: 'object', properties: { tag: { type: 'string' } }, additionalProperties: false },
        run: (args, tool) =>
          new Promise((resolve) => {
            enteredBlock();
            tool.signal.addEventListener(
              'abort',
              () => {
                aborted.push(String(args.tag));
                abortWaiters.get(String(args.tag))?.();
                resolve({ aborted: true });
              },
              { once: true },
            );
          }),
      },
      {
        name: 'gate',
        description: 'Waits until the test releases it (a test tool).',
        inputSchema: { type: 'object', additionalProperties: false },
        run: (_args, tool) =>
          new Promise((resolve) => {
            release = () => resolve({ released: true, aborted: tool.signal.aborted });
          }),
      },
    ];

    before(async () => {
      bridge = new BridgeServer({
        coordinator: host.coordinator,
        tools: TOOLS,
        routes: [],
        port: 0,
        grpcAddress: 'x',
        distDir: DIST,
        maxInflightCallsPerCredential: 2,
      });
      bridgePort = await bridge.start();
    });

    after(async () => {
      await bridge.close();
    });

    function entered(): Promise<void> {
      return new Promise((resolve) => {
        enteredBlock = resolve;
      });
    }

    it('a batch: the cancelled call is aborted and never answered, its sibling runs on and answers, then the POST ends', async () => {
      aborted.length = 0;
      const started = entered();
      const batch = post(bridgePort, tokens.get('asker')!, [
        toolsCall('b1', 'block', { tag: 'b1' }),
        toolsCall('g1', 'gate', {}),
      ]);
      assert.equal((await batch.head).status, 200);
      await within(started, 'the block tool running');
      const b1Aborted = abortOf('b1');
      const cancel = post(bridgePort, tokens.get('asker')!, cancelled('b1', 'stop'));
      assert.equal((await cancel.head).status, 202);
      await cancel.ended;
      await within(b1Aborted, 'b1 aborted');
      assert.equal(batch.hasEnded(), false, 'the sibling still runs');
      release();
      const messages = sseMessages(await within(batch.ended, 'the end of the batch POST'));
      assert.deepEqual(
        messages.map((m) => m.id),
        ['g1'],
        'the sibling answered, the cancelled call not',
      );
      assert.deepEqual((messages[0].result as CallToolResult).structuredContent, { released: true, aborted: false });
      assert.deepEqual(aborted, ['b1']);
    });

    it('at most N calls in progress per credential (429 OVERLOADED beyond, all or none of a POST), another credential unaffected; a cancelled call frees its slot', async () => {
      aborted.length = 0;
      const asker = new Client({ name: 'bound', version: '1' });
      await asker.connect(
        new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${bridgePort}/mcp`), {
          requestInit: { headers: { Authorization: `Bearer ${tokens.get('asker')}` } },
        }),
      );
      clients.push(asker);
      const controllers = [new AbortController(), new AbortController(), new AbortController()];
      const calls: Array<Promise<unknown>> = [];
      for (const [i, controller] of controllers.slice(0, 2).entries()) {
        const started = entered();
        calls.push(
          asker.callTool({ name: 'block', arguments: { tag: `c${i}` } }, undefined, { signal: controller.signal }),
        );
        await within(started, `call ${i} running`);
      }
      await assert.rejects(
        asker.callTool({ name: 'block', arguments: { tag: 'over' } }),
        (err: Error & { code?: number }) => {
          assert.equal(err.code, 429, err.message);
          assert.match(err.message, /OVERLOADED: agent 'asker' has 2 tool calls in progress/);
          return true;
        },
      );
      const batchOfThree = post(bridgePort, tokens.get('other')!, [
        toolsCall(1, 'gate', {}),
        toolsCall(2, 'gate', {}),
        toolsCall(3, 'gate', {}),
      ]);
      assert.equal((await batchOfThree.head).status, 429, 'all or none of a POST');
      await batchOfThree.ended;
      // Another agent's credential has its own count.
      const gate = post(bridgePort, tokens.get('other')!, toolsCall('g', 'gate', {}));
      assert.equal((await gate.head).status, 200);

      const cancelLogged = logged(
        'bridge.call_cancelled',
        (e) => e.actor === 'asker' && e.details.reason === 'c0 done',
      );
      controllers[0].abort('c0 done');
      await assert.rejects(calls[0]);
      await within(cancelLogged, 'the cancellation of c0');
      const started = entered();
      calls.push(
        asker.callTool({ name: 'block', arguments: { tag: 'c2' } }, undefined, { signal: controllers[2].signal }),
      );
      await within(started, 'a call admitted in the freed slot');
      for (const i of [1, 2]) {
        controllers[i].abort('test over');
        await assert.rejects(calls[i]);
      }
      release();
      const released = sseMessages(await within(gate.ended, 'the gate answered')).find((m) => m.id === 'g')
        ?.result as CallToolResult;
      assert.deepEqual(released.structuredContent, { released: true, aborted: false });
      assert.equal(aborted.includes('over'), false, 'the refused call never ran');
    });
  });
});
