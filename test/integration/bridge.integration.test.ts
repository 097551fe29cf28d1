import { strict as assert } from 'node:assert';
import * as http from 'node:http';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { CoordinatorHost } from '../../src/server/host';
import { startHost, stopHost } from '../support/host';
import { REPO_ROOT } from '../support/paths';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ctx = { correlationId: 'bridge-test' };
const DIST = path.join(REPO_ROOT, 'dist');

/** A raw HTTP request to the bridge (what an MCP client would not send: wrong Host, no credential…). */
function raw(port: number, options: { method?: string; path?: string; headers?: Record<string, string | string[]>; body?: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: options.method ?? 'POST', path: options.path ?? '/mcp', headers: options.headers, setHost: options.headers?.Host === undefined }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
const MCP_HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

export async function httpClient(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'bridge-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

export function structured(result: unknown): Record<string, unknown> {
  return (result as CallToolResult).structuredContent as Record<string, unknown>;
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
        ['enrolment', { Authorization: `Bearer ${enrolment}` }, /agent credentials only \(this is an enrolment credential\)/],
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
      assert.equal(events.some((e) => JSON.stringify(e).includes(tokenA)), false, 'no token is logged');
      assert.equal(((await raw(port, { headers: { ...MCP_HEADERS, Authorization: `Bearer ${tokenA}` }, body: INITIALIZE })).status), 200, 'the agent credential passes');
    });

    it('refuses a Host that is not loopback on its port (DNS rebinding) and a web page Origin with 403', async () => {
      const auth = { ...MCP_HEADERS, Authorization: `Bearer ${tokenA}` };
      for (const hostHeader of ['evil.example:' + port, `127.0.0.1:${port + 1}`, 'localhost']) {
        const answer = await raw(port, { headers: { ...auth, Host: hostHeader }, body: INITIALIZE });
        assert.equal(answer.status, 403, hostHeader);
        assert.match(answer.body, /Host header must be/);
      }
      assert.equal((await raw(port, { headers: { ...auth, Host: `localhost:${port}` }, body: INITIALIZE })).status, 200);
      assert.equal((await raw(port, { headers: { ...auth, Origin: 'https://evil.example' }, body: INITIALIZE })).status, 403);
      assert.equal((await raw(port, { headers: { ...auth, Origin: 'null' }, body: INITIALIZE })).status, 403);
      assert.equal((await raw(port, { headers: { ...auth, Origin: `http://localhost:3000` }, body: INITIALIZE })).status, 200);
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
      const before = host.coordinator.log.query({}).length;
      await raw(port, { headers: { ...MCP_HEADERS, Authorization: `Bearer ${tokenA}` }, body: INITIALIZE });
      assert.ok(host.coordinator.log.query({}).length >= before);
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

  describe('the stdio entry point (dist/sw4rm-mcp.js)', () => {
    it('proxies tools/list to the HTTP door with the agent credential from its environment', async () => {
      const [command, ...args] = host.bridgeEndpoints!.stdioCommand;
      const client = new Client({ name: 'bridge-stdio-test', version: '1.0.0' });
      await client.connect(new StdioClientTransport({
        command, args, stderr: 'pipe',
        env: { PATH: process.env.PATH ?? '', SW4RM_MCP_URL: host.bridgeEndpoints!.mcpUrl, SW4RM_TOKEN: tokenB },
      }));
      clients.push(client);
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name), (await (await connect(tokenA)).listTools()).tools.map((t) => t.name));
    });
  });
});
