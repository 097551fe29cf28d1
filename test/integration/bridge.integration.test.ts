/* eslint-disable @typescript-eslint/no-explicit-any -- the bridge answers untyped JSON the tests read field by field */
import { strict as assert } from 'node:assert';
import * as http from 'node:http';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ManualClock } from '../../src/core/clock';
import { BRIDGE_LIVENESS_INTERVAL_MS, BridgeServer } from '../../src/server/bridge/bridgeServer';
import { BridgeToolError, type BridgeHttpRoute } from '../../src/server/bridge/model';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { RouterClient } from '../support/routerClient';
import { REPO_ROOT } from '../support/paths';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ctx = { correlationId: 'bridge-test' };
const DIST = path.join(REPO_ROOT, 'dist');

/** A raw HTTP request to the bridge (what an MCP client would not send: wrong Host, no credential…). */
function raw(
  port: number,
  options: { method?: string; path?: string; headers?: Record<string, string | string[]>; body?: string },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'POST',
        path: options.path ?? '/mcp',
        headers: options.headers,
        setHost: options.headers?.Host === undefined,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
const MCP_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

export async function httpClient(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'bridge-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  return client;
}

export function structured(result: unknown): Record<string, unknown> {
  return (result as CallToolResult).structuredContent as Record<string, unknown>;
}

/** Calls a tool; answers its structured output, or throws `<CODE>: message` for a tool error. */
export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<Record<string, any>> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (result.isError) {
    const error = (result.structuredContent as { error: { code: string; message: string; retryable: boolean } }).error;
    throw Object.assign(new Error(`${error.code}: ${error.message}`), error);
  }
  return result.structuredContent as Record<string, any>;
}

/** The tool error a call ended with (fails when it succeeded). */
export async function refusal(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<{ code: string; message: string; retryable: boolean }> {
  try {
    const answer = await call(client, name, args);
    assert.fail(`${name} succeeded: ${JSON.stringify(answer)}`);
  } catch (err) {
    if (err instanceof assert.AssertionError) throw err;
    return err as { code: string; message: string; retryable: boolean };
  }
}

describe('the MCP bridge (README, "The MCP bridge")', function () {
  this.timeout(30_000);
  let dataDir: string;
  let host: CoordinatorHost;
  let tokenA: string;
  let tokenB: string;
  let port: number;
  const clients: Client[] = [];
  const connect = async (token: string) => {
    const client = await httpClient(host.bridgeEndpoints!.mcpUrl, token);
    clients.push(client);
    return client;
  };

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-int-bridge-');
    host = await startHost(dataDir, { distDir: DIST });
    port = host.bridge!.port;
    tokenA = host.coordinator.credentials.mintAgent('a', 'test', 'agent a', ctx).token;
    tokenB = host.coordinator.credentials.mintAgent('b', 'test', 'agent b', ctx).token;
    for (const id of ['a', 'b'])
      assert.equal(host.coordinator.registry.register(validDescriptor(id), ctx).accepted, true);
  });

  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  describe('the HTTP door', () => {
    it('answers its endpoints: loopback URLs on the bound port, the bundled entry points, the gRPC address', () => {
      const endpoints = host.bridgeEndpoints!;
      assert.equal(endpoints.mcpUrl, `http://127.0.0.1:${port}/mcp`);
      assert.equal(endpoints.hookUrl, `http://127.0.0.1:${port}/hooks/pre-tool-use`);
      assert.deepEqual(endpoints.stdioCommand, [process.execPath, path.join(DIST, 'sw4rm-mcp.js')]);
      assert.deepEqual(endpoints.hookCommand, [process.execPath, path.join(DIST, 'sw4rm-hook.js')]);
      assert.equal(endpoints.grpcAddress, `127.0.0.1:${host.port}`);
      assert.notEqual(port, host.port);
    });

    it('serves tools/list to an agent credential over Streamable HTTP, each tool with a JSON Schema', async () => {
      const client = await connect(tokenA);
      const { tools } = await client.listTools();
      for (const tool of tools) assert.equal(tool.inputSchema.type, 'object', tool.name);
      assert.equal(client.getServerVersion()?.name, 'sw4rm-coordinator');
    });

    it('refuses missing, malformed, operator, enrolment, revoked and unknown credentials with 401 JSON, each logged', async () => {
      const enrolment = host.coordinator.credentials.mintEnrolment('test', 'enrolment', ctx).token;
      const revoked = host.coordinator.credentials.mintAgent('c', 'test', 'agent c', ctx);
      host.coordinator.credentials.revoke(revoked.credential.id, 'test', ctx);
      const cases: Array<[string, Record<string, string | string[]>, RegExp]> = [
        ['missing', {}, /missing credentials/],
        ['malformed', { Authorization: `Basic ${tokenA}` }, /malformed/],
        ['two headers', { Authorization: [`Bearer ${tokenA}`, `Bearer ${tokenA}`] }, /more than one/],
        ['operator', { Authorization: `Bearer ${host.token!}` }, /agent credentials only/],
        [
          'enrolment',
          { Authorization: `Bearer ${enrolment}` },
          /agent credentials only \(this is an enrolment credential\)/,
        ],
        ['revoked', { Authorization: `Bearer ${revoked.token}` }, /was revoked/],
        ['unknown', { Authorization: `Bearer ${tokenA.slice(0, -4)}AAAA` }, /unknown credential/],
      ];
      const before = host.coordinator.log.query({ eventType: 'auth.unauthenticated' }).length;
      for (const [name, headers, reason] of cases) {
        const answer = await raw(port, { headers: { ...MCP_HEADERS, ...headers }, body: INITIALIZE });
        assert.equal(answer.status, 401, name);
        const body = JSON.parse(answer.body) as { error: { code: string; message: string } };
        assert.equal(body.error.code, 'UNAUTHENTICATED', name);
        assert.match(body.error.message, reason, name);
      }
      const events = host.coordinator.log.query({ eventType: 'auth.unauthenticated' });
      assert.equal(events.length - before, cases.length);
      assert.equal(
        events.some((e) => JSON.stringify(e).includes(tokenA)),
        false,
        'no token is logged',
      );
      assert.equal(
        (await raw(port, { headers: { ...MCP_HEADERS, Authorization: `Bearer ${tokenA}` }, body: INITIALIZE })).status,
        200,
        'the agent credential passes',
      );
    });

    it('refuses a Host that is not loopback on its port (DNS rebinding) and a web page Origin with 403', async () => {
      const auth = { ...MCP_HEADERS, Authorization: `Bearer ${tokenA}` };
      for (const hostHeader of ['evil.example:' + port, `127.0.0.1:${port + 1}`, 'localhost']) {
        const answer = await raw(port, { headers: { ...auth, Host: hostHeader }, body: INITIALIZE });
        assert.equal(answer.status, 403, hostHeader);
        assert.match(answer.body, /Host header must be/);
      }
      assert.equal(
        (await raw(port, { headers: { ...auth, Host: `localhost:${port}` }, body: INITIALIZE })).status,
        200,
      );
      assert.equal(
        (await raw(port, { headers: { ...auth, Origin: 'https://evil.example' }, body: INITIALIZE })).status,
        403,
      );
      assert.equal((await raw(port, { headers: { ...auth, Origin: 'null' }, body: INITIALIZE })).status, 403);
      assert.equal(
        (await raw(port, { headers: { ...auth, Origin: `http://localhost:3000` }, body: INITIALIZE })).status,
        200,
      );
    });

    it('answers 405 to GET and DELETE on /mcp, 404 JSON for unknown paths, 400 for a body that is not JSON, 413 over 4 MiB', async () => {
      const auth = { ...MCP_HEADERS, Authorization: `Bearer ${tokenA}` };
      assert.equal((await raw(port, { method: 'GET', headers: auth })).status, 405);
      assert.equal((await raw(port, { method: 'DELETE', headers: auth })).status, 405);
      const missing = await raw(port, { path: '/nothing', headers: auth, body: '{}' });
      assert.equal(missing.status, 404);
      assert.equal((JSON.parse(missing.body) as { error: { code: string } }).error.code, 'NOT_FOUND');
      const bad = await raw(port, { headers: auth, body: '{not json' });
      assert.equal(bad.status, 400);
      assert.equal((JSON.parse(bad.body) as { error: { code: number } }).error.code, -32700);
      const big = await raw(port, { headers: auth, body: 'x'.repeat(4 * 1024 * 1024 + 1) });
      assert.equal(big.status, 413);
    });

    it('counts a bridged agent as present: each authenticated request records its liveness', async () => {
      assert.equal(host.coordinator.registry.get('a')!.lastHeartbeatAt, null);
      await raw(port, { headers: { ...MCP_HEADERS, Authorization: `Bearer ${tokenA}` }, body: INITIALIZE });
      assert.notEqual(host.coordinator.registry.get('a')!.lastHeartbeatAt, null);
      assert.equal(host.coordinator.registry.get('a')!.presence, 'online');
      assert.equal(host.coordinator.registry.get('b')!.lastHeartbeatAt, null, 'only the caller');
    });

    it('dispatches other routes by method and path: JSON in, JSON out, as the authenticated agent; bad JSON 400; a wrong method 405', async () => {
      const seen: Array<{ body: unknown; cli: string | null; agent: string; principal?: string }> = [];
      const echo: BridgeHttpRoute = {
        method: 'POST',
        path: '/hooks/echo',
        async handle(request, tool) {
          seen.push({
            body: request.body,
            cli: request.query.get('cli'),
            agent: tool.caller.agentId,
            principal: tool.ctx.principal,
          });
          if ((request.body as { refuse?: boolean } | undefined)?.refuse)
            throw new BridgeToolError('PERMISSION_DENIED', 'refused by the route');
          return { status: 200, body: { echoed: request.body } };
        },
      };
      const bridge = new BridgeServer({
        coordinator: host.coordinator,
        tools: [],
        routes: [echo],
        port: 0,
        grpcAddress: 'x',
        distDir: DIST,
      });
      const routePort = await bridge.start();
      try {
        const auth = { 'Content-Type': 'application/json', Authorization: `Bearer ${tokenA}` };
        const ok = await raw(routePort, { path: '/hooks/echo?cli=claude', headers: auth, body: '{"tool":"Bash"}' });
        assert.deepEqual([ok.status, JSON.parse(ok.body)], [200, { echoed: { tool: 'Bash' } }]);
        assert.equal(seen[0].agent, 'a');
        assert.equal(seen[0].cli, 'claude');
        assert.match(seen[0].principal ?? '', /^agent:/);
        const bad = await raw(routePort, { path: '/hooks/echo', headers: auth, body: '{"tool":' });
        assert.equal(bad.status, 400);
        assert.equal((JSON.parse(bad.body) as { error: { code: string } }).error.code, 'VALIDATION_ERROR');
        const refused = await raw(routePort, { path: '/hooks/echo', headers: auth, body: '{"refuse":true}' });
        assert.deepEqual(
          [refused.status, (JSON.parse(refused.body) as { error: { code: string } }).error.code],
          [403, 'PERMISSION_DENIED'],
        );
        assert.equal((await raw(routePort, { method: 'GET', path: '/hooks/echo', headers: auth })).status, 405);
        const unauthenticated = await raw(routePort, {
          path: '/hooks/echo',
          headers: { 'Content-Type': 'application/json' },
          body: '{}',
        });
        assert.equal(unauthenticated.status, 401);
        assert.equal(seen.length, 2, 'the route ran for the two readable requests only');
      } finally {
        await bridge.close();
      }
    });

    it("aborts a route's signal when its request closes before the answer", async () => {
      let aborted: (() => void) | undefined;
      let entered: (() => void) | undefined;
      const abortSeen = new Promise<void>((resolve) => {
        aborted = resolve;
      });
      const enteredSeen = new Promise<void>((resolve) => {
        entered = resolve;
      });
      const waiting: BridgeHttpRoute = {
        method: 'POST',
        path: '/hooks/wait',
        handle: (_request, tool) =>
          new Promise((resolve) => {
            entered!();
            tool.signal.addEventListener('abort', () => {
              aborted!();
              resolve({ status: 200, body: {} });
            });
          }),
      };
      const bridge = new BridgeServer({
        coordinator: host.coordinator,
        tools: [],
        routes: [waiting],
        port: 0,
        grpcAddress: 'x',
        distDir: DIST,
      });
      const routePort = await bridge.start();
      try {
        const req = http.request({
          host: '127.0.0.1',
          port: routePort,
          method: 'POST',
          path: '/hooks/wait',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokenA}` },
        });
        req.on('error', () => undefined);
        req.end('{}');
        await enteredSeen;
        req.destroy();
        await abortSeen;
      } finally {
        await bridge.close();
      }
    });

    it('falls back to a free port when the requested one is busy, and logs it', async () => {
      const other = makeTempDir('sw4rm-int-bridge-busy-');
      const second = await startHost(other, { bridgePort: port, distDir: DIST });
      try {
        assert.notEqual(second.bridge!.port, port);
        assert.equal(second.coordinator.log.query({ eventType: 'bridge.port_fallback' }).length, 1);
      } finally {
        await stopHost(second);
        removeTempDir(other);
      }
    });
  });

  describe('messaging tools', () => {
    it('lists the four messaging tools with closed JSON Schemas', async () => {
      const { tools } = await (await connect(tokenA)).listTools();
      const byName = new Map(tools.map((t) => [t.name, t]));
      for (const name of ['list_agents', 'send_message', 'read_inbox', 'ack_message']) {
        const tool = byName.get(name);
        assert.ok(tool, name);
        assert.equal(tool.inputSchema.type, 'object');
        assert.equal((tool.inputSchema as { additionalProperties?: unknown }).additionalProperties, false, name);
        assert.ok(tool.description && tool.description.length > 20, name);
      }
      assert.deepEqual(byName.get('send_message')!.inputSchema.required, ['to', 'payload']);
    });

    it('list_agents names the registered agents with state and presence, the caller marked', async () => {
      const answer = await call(await connect(tokenA), 'list_agents');
      assert.equal(answer.total, 2);
      assert.deepEqual(
        answer.agents.map((a: { agent_id: string }) => a.agent_id),
        ['a', 'b'],
      );
      const a = answer.agents[0];
      assert.deepEqual(
        [a.name, a.state, a.presence, a.you, a.capabilities],
        ['Agent a', 'RUNNABLE', 'online', true, ['code.write', 'code.review']],
      );
      assert.equal(answer.agents[1].you, undefined);
    });

    it('send_message A→B, read_inbox as B: the DATA envelope from A, confirmed and READ in the router, A told', async () => {
      const a = await connect(tokenA);
      const b = await connect(tokenB);
      const sent = await call(a, 'send_message', { to: 'b', payload: { text: 'hello b' }, correlation_id: 'conv-1' });
      assert.equal(sent.accepted, true);
      const text = await call(a, 'send_message', { to: 'b', payload: 'plain words' });
      const record = host.coordinator.router.message(sent.message_id)!;
      assert.deepEqual(
        [
          record.envelope.producerId,
          record.recipientId,
          record.envelope.messageType,
          record.envelope.contentType,
          record.state,
        ],
        ['a', 'b', 'DATA', 'application/json', 'SENT'],
      );

      const read = await call(b, 'read_inbox', {});
      assert.deepEqual(
        read.messages.map((m: { message_id: string }) => m.message_id),
        [sent.message_id, text.message_id],
      );
      const [first, second] = read.messages;
      assert.deepEqual(
        [first.from, first.message_type, first.correlation_id, first.payload_encoding, first.payload],
        ['a', 'DATA', 'conv-1', 'json', { text: 'hello b' }],
      );
      assert.deepEqual(
        [second.payload_encoding, second.payload, second.content_type],
        ['text', 'plain words', 'text/plain; charset=utf-8'],
      );
      assert.equal(read.remaining, 0);
      assert.equal(host.coordinator.router.message(sent.message_id)!.state, 'READ');
      assert.equal(host.coordinator.router.message(sent.message_id)!.delivery, 'done');
      assert.equal(host.coordinator.router.inboxStats('b').streaming, false, 'the temporary sink is gone');

      assert.deepEqual((await call(b, 'read_inbox', {})).messages, [], 'nothing twice');
      const told = await call(a, 'read_inbox', {});
      assert.deepEqual(told.messages, []);
      assert.deepEqual(
        told.acknowledgements.map((x: { for_message_id: string; stage: string; from: string }) => [
          x.for_message_id,
          x.stage,
          x.from,
        ]),
        [
          [sent.message_id, 'READ', 'b'],
          [text.message_id, 'READ', 'b'],
        ],
      );
    });

    it('read_inbox with wait_ms answers as soon as a message arrives; with wait_ms 0 at once', async () => {
      const a = await connect(tokenA);
      const b = await connect(tokenB);
      const started = Date.now();
      assert.deepEqual((await call(b, 'read_inbox', { wait_ms: 0 })).messages, []);
      assert.ok(Date.now() - started < 2000);
      const waiting = call(b, 'read_inbox', { wait_ms: 20_000 });
      await pollUntil('b reading', () => (host.coordinator.router.inboxStats('b').streaming ? true : undefined));
      const sent = await call(a, 'send_message', { to: 'b', payload: { n: 1 } });
      const read = await waiting;
      assert.equal(read.messages[0].message_id, sent.message_id);
      assert.ok(Date.now() - started < 10_000, 'did not wait for the whole wait_ms');
    });

    it('max bounds the messages returned; the rest stay pending and come next', async () => {
      const a = await connect(tokenA);
      const b = await connect(tokenB);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++)
        ids.push((await call(a, 'send_message', { to: 'b', payload: { i } })).message_id as string);
      const first = await call(b, 'read_inbox', { max: 2 });
      assert.deepEqual(
        first.messages.map((m: { message_id: string }) => m.message_id),
        ids.slice(0, 2),
      );
      assert.equal(first.remaining, 1);
      assert.equal(host.coordinator.router.message(ids[2])!.state, 'SENT');
      const second = await call(b, 'read_inbox', { max: 2 });
      assert.deepEqual(
        second.messages.map((m: { message_id: string }) => m.message_id),
        [ids[2]],
      );
      assert.equal(second.remaining, 0);
    });

    it('a payload of more than 1 MiB (a payload file) reaches read_inbox with wait_ms 0', async () => {
      const a = await connect(tokenA);
      const b = await connect(tokenB);
      const text = 'x'.repeat(1536 * 1024);
      const sent = await call(a, 'send_message', { to: 'b', payload: text });
      assert.ok(host.coordinator.router.message(sent.message_id)!.payloadFile, 'stored as a payload file');
      const read = await call(b, 'read_inbox', { wait_ms: 0 });
      assert.equal(read.messages.length, 1);
      assert.equal(read.messages[0].message_id, sent.message_id);
      assert.equal(read.messages[0].payload, text);
    });

    it('send_message with an idempotency_key: a retry answers the first outcome, one message is delivered; without a key each call is new', async () => {
      const a = await connect(tokenA);
      const b = await connect(tokenB);
      const first = await call(a, 'send_message', { to: 'b', payload: { job: 1 }, idempotency_key: 'job-1' });
      const retry = await call(a, 'send_message', { to: 'b', payload: { job: 1 }, idempotency_key: 'job-1' });
      assert.equal(retry.accepted, true);
      assert.equal(retry.message_id, first.message_id);
      assert.equal(retry.duplicate, true);
      const other = await call(a, 'send_message', { to: 'b', payload: { job: 1 } });
      const again = await call(a, 'send_message', { to: 'b', payload: { job: 1 } });
      assert.notEqual(other.message_id, again.message_id);
      const read = await call(b, 'read_inbox', {});
      assert.equal(read.messages.length, 3);
      // After B read it, the keyed send still answers the same message, as it stands now.
      const late = await call(a, 'send_message', { to: 'b', payload: { job: 1 }, idempotency_key: 'job-1' });
      assert.deepEqual([late.message_id, late.duplicate, late.state], [first.message_id, true, 'READ']);
      // B's key of the same name is B's own operation.
      const fromB = await call(b, 'send_message', { to: 'a', payload: { job: 1 }, idempotency_key: 'job-1' });
      assert.equal(fromB.duplicate, undefined);
    });

    it('ack_message: the recipient fulfils with a result, the sender reads the acknowledgement; a retry is answered as done', async () => {
      const a = await connect(tokenA);
      const b = await connect(tokenB);
      const sent = await call(a, 'send_message', { to: 'b', payload: { task: 'sum', of: [1, 2] } });
      await call(b, 'read_inbox', {});
      const acked = await call(b, 'ack_message', {
        message_id: sent.message_id,
        outcome: 'fulfilled',
        result: { sum: 3 },
        reason: 'added',
      });
      assert.deepEqual([acked.acknowledged, acked.state], [true, 'FULFILLED']);
      assert.equal(host.coordinator.router.message(sent.message_id)!.state, 'FULFILLED');
      const again = await call(b, 'ack_message', {
        message_id: sent.message_id,
        outcome: 'fulfilled',
        result: { sum: 3 },
      });
      assert.equal(again.duplicate, true);
      const told = await call(a, 'read_inbox', {});
      const fulfilled = told.acknowledgements.find((x: { stage: string }) => x.stage === 'FULFILLED');
      assert.deepEqual([fulfilled.for_message_id, fulfilled.from, fulfilled.note], [sent.message_id, 'b', 'added']);

      const rejected = await call(a, 'send_message', { to: 'b', payload: 'do something impossible' });
      await call(b, 'ack_message', { message_id: rejected.message_id, outcome: 'rejected', reason: 'cannot' });
      assert.equal(host.coordinator.router.message(rejected.message_id)!.state, 'REJECTED');
    });

    it('identity: no tool takes an agent id; the sender cannot acknowledge for the recipient; a third agent neither', async () => {
      const a = await connect(tokenA);
      const b = await connect(tokenB);
      const extra = await refusal(b, 'read_inbox', { agent_id: 'a' });
      assert.equal(extra.code, 'VALIDATION_ERROR');
      assert.match(extra.message, /must NOT have additional properties 'agent_id'/);
      assert.equal(
        (await refusal(a, 'send_message', { to: 'b', payload: 'x', producer_id: 'b' })).code,
        'VALIDATION_ERROR',
      );

      const sent = await call(a, 'send_message', { to: 'b', payload: 'for b only' });
      // A reads its own inbox: B's message is not in it.
      assert.deepEqual((await call(a, 'read_inbox', {})).messages, []);
      const byA = await refusal(a, 'ack_message', { message_id: sent.message_id, outcome: 'fulfilled' });
      assert.equal(byA.code, 'PERMISSION_DENIED');
      assert.match(byA.message, /only the recipient/);
      const tokenC = host.coordinator.credentials.mintAgent('c', 'test', 'agent c', ctx).token;
      host.coordinator.registry.register(validDescriptor('c'), ctx);
      assert.equal(
        (await refusal(await connect(tokenC), 'ack_message', { message_id: sent.message_id, outcome: 'rejected' }))
          .code,
        'PERMISSION_DENIED',
      );
      assert.equal(host.coordinator.router.message(sent.message_id)!.state, 'SENT');
      assert.equal((await call(b, 'read_inbox', {})).messages[0].message_id, sent.message_id, 'B still gets it');
    });

    it('refusals carry the router code: unknown recipient NO_ROUTE, a full inbox BUFFER_FULL (retryable), a JSON payload with a text type', async () => {
      const a = await connect(tokenA);
      const noRoute = await refusal(a, 'send_message', { to: 'nobody', payload: 'x' });
      assert.deepEqual([noRoute.code, noRoute.retryable], ['NO_ROUTE', false]);
      assert.equal(
        (await refusal(a, 'send_message', { to: 'b', payload: { x: 1 }, content_type: 'text/plain' })).code,
        'VALIDATION_ERROR',
      );
      const capacity = 10;
      for (let i = 0; i < capacity; i++) await call(a, 'send_message', { to: 'b', payload: { i } });
      const full = await refusal(a, 'send_message', { to: 'b', payload: { i: capacity } });
      assert.deepEqual([full.code, full.retryable], ['BUFFER_FULL', true]);
      assert.match(full.message, /capacity 10/);
    });

    it('read_inbox refuses FAILED_PRECONDITION while the agent has a gRPC inbox stream open, and leaves the stream alone', async () => {
      const grpcB = new RouterClient(`127.0.0.1:${host.port}`, tokenB, 'b');
      const inbox = grpcB.openInbox('b');
      try {
        await pollUntil('b streaming', () => (host.coordinator.router.inboxStats('b').streaming ? true : undefined));
        const b = await connect(tokenB);
        const refused = await refusal(b, 'read_inbox', {});
        assert.equal(refused.code, 'FAILED_PRECONDITION');
        assert.match(refused.message, /inbox stream open/);
        const sent = await call(await connect(tokenA), 'send_message', { to: 'b', payload: { via: 'grpc' } });
        const item = await inbox.waitFor(
          (i) => i.msg.message_id === sent.message_id,
          5000,
          'the message on the gRPC stream',
        );
        assert.equal(item.msg.producer_id, 'a');
      } finally {
        inbox.close();
        grpcB.close();
      }
    });

    it('a read whose HTTP request closes early stops waiting and detaches (the inbox free again for the next read)', async () => {
      await connect(tokenB);
      const req = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/mcp',
        headers: { ...MCP_HEADERS, Authorization: `Bearer ${tokenB}` },
      });
      req.on('error', () => undefined);
      req.end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: { name: 'read_inbox', arguments: { wait_ms: 30_000 } },
        }),
      );
      await pollUntil('b reading', () => (host.coordinator.router.inboxStats('b').streaming ? true : undefined));
      req.destroy();
      await pollUntil(
        'the read detached',
        () => (host.coordinator.router.inboxStats('b').streaming ? undefined : true),
        5000,
      );
      const sent = await call(await connect(tokenA), 'send_message', { to: 'b', payload: 'after' });
      assert.equal((await call(await connect(tokenB), 'read_inbox', {})).messages[0].message_id, sent.message_id);
    });

    it('a message to a bridged agent waits durably across a coordinator restart', async () => {
      const sent = await call(await connect(tokenA), 'send_message', { to: 'b', payload: { survive: true } });
      for (const client of clients.splice(0)) await client.close();
      await stopHost(host);
      host = await startHost(dataDir, { distDir: DIST });
      const read = await call(await connect(tokenB), 'read_inbox', {});
      assert.deepEqual(
        read.messages.map((m: { message_id: string; payload: unknown }) => [m.message_id, m.payload]),
        [[sent.message_id, { survive: true }]],
      );
      assert.equal(host.coordinator.router.message(sent.message_id)!.state, 'READ');
    });
  });

  describe('the stdio entry point (dist/sw4rm-mcp.js)', () => {
    const stdioClient = async (env: Record<string, string>): Promise<{ client: Client; stderr: () => string }> => {
      const [command, ...args] = host.bridgeEndpoints!.stdioCommand;
      const transport = new StdioClientTransport({
        command,
        args,
        stderr: 'pipe',
        env: { PATH: process.env.PATH ?? '', ...env },
      });
      let errors = '';
      transport.stderr?.on('data', (chunk: Buffer) => {
        errors += chunk.toString('utf8');
      });
      const client = new Client({ name: 'bridge-stdio-test', version: '1.0.0' });
      clients.push(client);
      await client.connect(transport);
      return { client, stderr: () => errors };
    };

    it('relays tools to the HTTP door as the agent of SW4RM_TOKEN: send over stdio, read over stdio', async () => {
      const { client: a } = await stdioClient({ SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl, SW4RM_TOKEN: tokenA });
      const { client: b } = await stdioClient({ SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl, SW4RM_TOKEN: tokenB });
      const { tools } = await a.listTools();
      assert.deepEqual(
        tools.map((t) => t.name),
        (await (await connect(tokenA)).listTools()).tools.map((t) => t.name),
      );
      const sent = await call(a, 'send_message', { to: 'b', payload: { over: 'stdio' } });
      const read = await call(b, 'read_inbox', {});
      assert.deepEqual(
        [read.messages[0].message_id, read.messages[0].from, read.messages[0].payload],
        [sent.message_id, 'a', { over: 'stdio' }],
      );
      assert.equal((await refusal(b, 'read_inbox', { agent_id: 'a' })).code, 'VALIDATION_ERROR');
    });

    it('calls every tool of tools/list over stdio: each one runs (an answer, or a refusal from the core, never a schema error)', async () => {
      const { client: a } = await stdioClient({ SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl, SW4RM_TOKEN: tokenA });
      // Arguments each tool's schema accepts; the core then answers or refuses (a has no task, no worktree, no artifact).
      const argsOf: Record<string, Record<string, unknown>> = {
        list_agents: {},
        send_message: { to: 'b', payload: 'over stdio', idempotency_key: 'stdio-1' },
        read_inbox: {},
        ack_message: { message_id: '00000000-0000-4000-8000-000000000000', outcome: 'fulfilled' },
        request_decision: { reason_type: 'TASK_ESCALATION', summary: 'over stdio', request_id: 'stdio-decision' },
        current_task: {},
        complete_task: {},
        fail_task: { error: 'over stdio' },
        report_activity: { description: 'over stdio' },
        append_artifact: { negotiation_id: 'stdio-negotiation', kind: 'note', content: 'over stdio' },
        request_handoff: { reason: 'over stdio', to_agent: 'b' },
        submit_proposal: { artifact_type: 'PLAN', artifact: 'over stdio', requested_critics: ['b'] },
        submit_vote: { artifact_id: 'no-such-artifact', score: 5, confidence: 0.5, passed: true },
      };
      const { tools } = await a.listTools();
      // request_decision blocks until it is decided: the operator decides it as soon as it opens.
      const decided = new Promise<void>((resolve) => {
        const subscription = host.coordinator.hitl.onDidChange((change) => {
          if (change.kind !== 'opened') return;
          subscription.dispose();
          host.coordinator.hitl.decide(
            change.invocation.id,
            { action: 'approve', rationale: 'over stdio' },
            'operator',
            ctx,
          );
          resolve();
        });
      });
      const seen: string[] = [];
      for (const tool of tools) {
        const args =
          argsOf[tool.name] ?? (tool.name.startsWith('workspace_') ? workspaceArgs(tool.inputSchema) : undefined);
        assert.ok(
          args !== undefined,
          `${tool.name} has no arguments in this test: add them, so that every tool is called over stdio`,
        );
        const result = (await a.callTool({ name: tool.name, arguments: args })) as CallToolResult;
        const text = result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
        if (result.isError) {
          assert.match(text, /^[A-Z_]+: /, `${tool.name}: a SW4RM code`);
          assert.doesNotMatch(
            text,
            new RegExp(`^VALIDATION_ERROR: ${tool.name}: `),
            `${tool.name}: its arguments passed the schema`,
          );
        }
        seen.push(`${tool.name}:${result.isError ? text.split(':')[0] : 'ok'}`);
      }
      await decided;
      assert.ok(
        seen.includes('list_agents:ok') && seen.includes('send_message:ok') && seen.includes('request_decision:ok'),
        seen.join(' '),
      );
      assert.ok(
        seen.some((s) => /^workspace_read_file:FAILED_PRECONDITION$/.test(s)),
        `a is bound to no worktree: ${seen.join(' ')}`,
      );
    });

    it('answers a refused credential (401) with a JSON-RPC error, not a hang, and says so on stderr', async () => {
      const [command, ...args] = host.bridgeEndpoints!.stdioCommand;
      const transport = new StdioClientTransport({
        command,
        args,
        stderr: 'pipe',
        env: { PATH: process.env.PATH ?? '', SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl, SW4RM_TOKEN: host.token! },
      });
      let errors = '';
      transport.stderr?.on('data', (chunk: Buffer) => {
        errors += chunk.toString('utf8');
      });
      const client = new Client({ name: 'bridge-stdio-test', version: '1.0.0' });
      clients.push(client);
      await assert.rejects(client.connect(transport), /401|agent credentials only/);
      await pollUntil('stderr', () => (/agent credentials only/.test(errors) ? true : undefined), 5000);
    });

    it('exits 2 with a clear message when SW4RM_MCP_URL or SW4RM_TOKEN is missing, writing nothing to stdout', async () => {
      const { spawnSync } = await import('node:child_process');
      const [command, ...args] = host.bridgeEndpoints!.stdioCommand;
      const run = spawnSync(command, args, {
        env: { PATH: process.env.PATH ?? '', SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl },
        input: '',
        encoding: 'utf8',
      });
      assert.equal(run.status, 2);
      assert.equal(run.stdout, '');
      assert.match(run.stderr, /SW4RM_TOKEN is not set/);
    });
  });
});

/**
 * A bridged agent's presence without a store write per request (bridgeServer.ts, BRIDGE_LIVENESS_INTERVAL_MS): on a
 * ManualClock, an online agent's requests record its liveness at most once per interval; an agent not shown online is
 * recorded at its next request, whenever that is.
 */
describe("the MCP bridge records a bridged agent's liveness at most once per interval (ManualClock)", function () {
  this.timeout(30_000);
  let dataDir: string;
  let host: CoordinatorHost | undefined;
  let clock: ManualClock;

  async function start(heartbeatDebounceMs?: number): Promise<(agentId: string) => Promise<void>> {
    clock = new ManualClock(Date.now());
    host = await startHost(dataDir, {
      clock,
      distDir: DIST,
      ...(heartbeatDebounceMs === undefined ? {} : { heartbeatDebounceMs }),
    });
    const { registry, credentials } = host.coordinator;
    const tokens = new Map<string, string>();
    for (const id of ['a', 'b']) {
      assert.equal(registry.register(validDescriptor(id), ctx).accepted, true);
      tokens.set(id, credentials.mintAgent(id, 'test', `agent ${id}`, ctx).token);
    }
    const port = host.bridge!.port;
    return async (agentId) => {
      const answer = await raw(port, {
        headers: { ...MCP_HEADERS, Authorization: `Bearer ${tokens.get(agentId)}` },
        body: INITIALIZE,
      });
      assert.equal(answer.status, 200, answer.body);
    };
  }
  const agent = (id: string) => host!.coordinator.registry.get(id)!;

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-int-bridge-liveness-');
  });

  afterEach(async () => {
    await stopHost(host);
    host = undefined;
    removeTempDir(dataDir);
  });

  it('an online agent: the first request records it, another within the interval does not, the next one after it does', async () => {
    const request = await start();
    const t0 = clock.now();
    await request('a');
    assert.equal(agent('a').lastHeartbeatAt, t0);
    clock.advance(BRIDGE_LIVENESS_INTERVAL_MS - 1);
    await request('a');
    assert.equal(agent('a').lastHeartbeatAt, t0, 'within the interval: not recorded');
    await request('b');
    assert.equal(agent('b').lastHeartbeatAt, t0 + BRIDGE_LIVENESS_INTERVAL_MS - 1, 'each agent has its own interval');
    clock.advance(1);
    await request('a');
    assert.equal(agent('a').lastHeartbeatAt, t0 + BRIDGE_LIVENESS_INTERVAL_MS, 'the interval has passed: recorded');
    assert.equal(agent('a').presence, 'online');
  });

  it('an agent shown unavailable is online again at its next request, within the interval too', async () => {
    const debounce = Math.floor(BRIDGE_LIVENESS_INTERVAL_MS / 2);
    const request = await start(debounce);
    const t0 = clock.now();
    await request('a');
    clock.advance(debounce);
    assert.equal(agent('a').presence, 'unavailable', 'not heard from for longer than the debounce');
    await request('a');
    assert.equal(agent('a').presence, 'online');
    assert.equal(agent('a').lastHeartbeatAt, t0 + debounce);
    const changes = host!.coordinator.log
      .query({ eventType: 'agent.presence_changed', agentId: 'a' })
      .map((e) => [e.details.from, e.details.to]);
    assert.deepEqual(
      changes.slice(0, 2).sort(),
      [
        ['online', 'unavailable'],
        ['unavailable', 'online'],
      ].sort(),
    );
  });

  it('an agent that calls is ready: INITIALIZING becomes RUNNABLE at its first request, as a heartbeat reporting RUNNABLE', async () => {
    const request = await start();
    assert.equal(agent('a').state, 'INITIALIZING');
    await request('a');
    assert.equal(agent('a').state, 'RUNNABLE');
    assert.equal(agent('b').state, 'INITIALIZING', 'only the caller');
    const changes = host!.coordinator.log
      .query({ eventType: 'agent.state_changed', agentId: 'a' })
      .map((e) => [e.details.from, e.details.to, e.details.cause]);
    assert.deepEqual(changes, [['INITIALIZING', 'RUNNABLE', 'heartbeat']], 'one event for the one transition');
  });

  it('an agent FAILED init_timeout before its first request (registered headless, started later) recovers at its first request', async () => {
    const request = await start();
    clock.advance(60_000);
    assert.equal(agent('a').state, 'FAILED_STATE', 'the RFC §8.3 init timeout: nothing reported it RUNNABLE');
    await request('a');
    assert.equal(agent('a').state, 'RUNNABLE');
    const changes = host!.coordinator.log
      .query({ eventType: 'agent.state_changed', agentId: 'a' })
      .map((e) => [e.details.from, e.details.to]);
    assert.deepEqual(changes.slice(-2), [
      ['FAILED_STATE', 'RECOVERING'],
      ['RECOVERING', 'RUNNABLE'],
    ]);
    await request('a');
    assert.equal(
      host!.coordinator.log.query({ eventType: 'agent.state_changed', agentId: 'a' }).length,
      changes.length,
      "a RUNNABLE agent's next request changes no state",
    );
  });
});

/** Arguments a workspace tool's own schema accepts: its required string properties as `README.md`, numbers 1. */
function workspaceArgs(schema: {
  properties?: Record<string, { type?: string | string[] }>;
  required?: string[];
}): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const name of schema.required ?? []) {
    const type = schema.properties?.[name]?.type;
    args[name] =
      type === 'number' || type === 'integer' ? 1 : type === 'boolean' ? false : type === 'array' ? [] : 'README.md';
  }
  return args;
}
