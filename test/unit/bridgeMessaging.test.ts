/* eslint-disable @typescript-eslint/no-explicit-any -- the bridge answers untyped JSON the tests read field by field */
import { strict as assert } from 'node:assert';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ManualClock } from '../../src/core/clock';
import type { Coordinator } from '../../src/core/coordinator';
import { createBridgeMcpServer } from '../../src/server/bridge/mcpServer';
import { CoordinatorFixture } from '../support/coordinatorFixture';
import { validDescriptor } from '../support/fixtures';
import { failedRequests, negotiatedVersion, PROXY_ERROR_CODE, proxyConfig } from '../../src/cli/mcpStdio';
import { BridgeToolError } from '../../src/server/bridge/model';
import { derivedToken } from '../../src/core/router/agentEnvelope';
import { MESSAGING_TOOLS, payloadOf, renderPayload } from '../../src/server/bridge/tools/messaging';

describe('the MCP bridge, pure parts', () => {
  describe('send_message payloads (payloadOf)', () => {
    it('sends a string as UTF-8 text/plain and JSON as application/json unless a type is named', () => {
      assert.deepEqual(payloadOf('héllo', undefined), {
        bytes: Buffer.from('héllo', 'utf8'),
        contentType: 'text/plain; charset=utf-8',
      });
      assert.deepEqual(payloadOf({ a: [1] }, undefined), {
        bytes: Buffer.from('{"a":[1]}'),
        contentType: 'application/json',
      });
      assert.deepEqual(payloadOf([1, 2], 'application/vnd.x+json'), {
        bytes: Buffer.from('[1,2]'),
        contentType: 'application/vnd.x+json',
      });
      assert.equal(
        payloadOf('{"raw":true}', 'application/json').contentType,
        'application/json',
        'a string is sent as given',
      );
    });

    it('refuses a JSON value with a non-JSON content type', () => {
      assert.throws(
        () => payloadOf({ a: 1 }, 'text/plain'),
        (err: unknown) => err instanceof BridgeToolError && err.code === 'VALIDATION_ERROR',
      );
    });
  });

  describe('read_inbox payloads (renderPayload)', () => {
    it('parses JSON, keeps UTF-8 text, and gives anything else as base64', () => {
      assert.deepEqual(renderPayload(Buffer.from('{"x":1}'), 'application/json'), {
        payload: { x: 1 },
        payload_encoding: 'json',
      });
      assert.deepEqual(renderPayload(Buffer.from('[true]'), 'application/ld+json'), {
        payload: [true],
        payload_encoding: 'json',
      });
      assert.deepEqual(renderPayload(Buffer.from('hi'), 'text/markdown; charset=utf-8'), {
        payload: 'hi',
        payload_encoding: 'text',
      });
      const bytes = Buffer.from([0xff, 0x00, 0x10]);
      assert.deepEqual(renderPayload(bytes, 'application/octet-stream'), {
        payload: bytes.toString('base64'),
        payload_encoding: 'base64',
      });
      assert.deepEqual(
        renderPayload(bytes, 'text/plain'),
        { payload: bytes.toString('base64'), payload_encoding: 'base64' },
        'not UTF-8',
      );
      assert.deepEqual(renderPayload(Buffer.from('text'), 'application/octet-stream'), {
        payload: 'dGV4dA==',
        payload_encoding: 'base64',
      });
    });
  });

  describe('idempotency tokens (derivedToken)', () => {
    it('is the same for the same caller and key, different for another caller or key, and bounded', () => {
      assert.equal(derivedToken('send', 'a', 'k'), derivedToken('send', 'a', 'k'));
      assert.notEqual(derivedToken('send', 'a', 'k'), derivedToken('send', 'b', 'k'));
      assert.notEqual(derivedToken('send', 'a', 'k'), derivedToken('send', 'a', 'k2'));
      assert.notEqual(derivedToken('send', 'a', 'bc'), derivedToken('send', 'ab', 'c'), 'parts are separated');
      assert.notEqual(derivedToken('send', 'a', 'k'), derivedToken('ack', 'a', 'k'));
      assert.match(derivedToken('send', 'a', 'x'.repeat(10_000)), /^mcp-send:[0-9a-f]{40}$/);
    });
  });

  describe('the stdio proxy (mcpStdio.ts)', () => {
    it('needs SW4RM_MCP_URL and SW4RM_TOKEN, naming what is missing', () => {
      assert.match(proxyConfig({}) as string, /SW4RM_MCP_URL and SW4RM_TOKEN are not set/);
      assert.match(
        proxyConfig({ SW4RM_MCP_URL: 'http://127.0.0.1:1/mcp', SW4RM_TOKEN: '  ' }) as string,
        /SW4RM_TOKEN is not set/,
      );
      assert.match(proxyConfig({ SW4RM_MCP_URL: 'not a url', SW4RM_TOKEN: 't' }) as string, /not a URL/);
      assert.match(
        proxyConfig({ SW4RM_MCP_URL: 'file:///etc/passwd', SW4RM_TOKEN: 't' }) as string,
        /must be an http\(s\) URL/,
      );
      const config = proxyConfig({ SW4RM_MCP_URL: ' http://127.0.0.1:50052/mcp ', SW4RM_TOKEN: 'sw4rm.x.y\n' });
      assert.ok(typeof config !== 'string');
      assert.equal(config.url.href, 'http://127.0.0.1:50052/mcp');
      assert.equal(config.token, 'sw4rm.x.y');
    });

    it('answers every request of a message it could not relay, and no notification or response', () => {
      const answers = failedRequests(
        [
          { jsonrpc: '2.0', id: 1, method: 'tools/list' },
          { jsonrpc: '2.0', method: 'notifications/initialized' },
          { jsonrpc: '2.0', id: 'x', result: {} },
          { jsonrpc: '2.0', id: 'y', method: 'tools/call', params: { name: 'read_inbox' } },
        ],
        'Error POSTing to endpoint (HTTP 401)',
      );
      assert.deepEqual(
        answers.map((a) => (a as { id: unknown }).id),
        [1, 'y'],
      );
      const error = (answers[0] as { error: { code: number; message: string } }).error;
      assert.equal(error.code, PROXY_ERROR_CODE);
      assert.match(error.message, /HTTP 401/);
      assert.deepEqual(failedRequests({ jsonrpc: '2.0', method: 'notifications/cancelled' }, 'x'), []);
    });

    it('learns the protocol version from the initialize result only', () => {
      assert.equal(
        negotiatedVersion({
          jsonrpc: '2.0',
          id: 1,
          result: { protocolVersion: '2025-06-18', serverInfo: { name: 's', version: '1' }, capabilities: {} },
        }),
        '2025-06-18',
      );
      assert.equal(negotiatedVersion({ jsonrpc: '2.0', id: 2, result: { protocolVersion: 'nope' } }), undefined);
      assert.equal(negotiatedVersion({ jsonrpc: '2.0', id: 3, result: { tools: [] } }), undefined);
    });
  });
});

describe('read_inbox on the Clock (ManualClock, in-memory MCP)', () => {
  let fixture: CoordinatorFixture;
  let clock: ManualClock;
  let coordinator: Coordinator;
  const clients: Client[] = [];

  const connect = async (agentId: string): Promise<Client> => {
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const server = createBridgeMcpServer(coordinator, MESSAGING_TOOLS, { agentId, credentialId: `cred-${agentId}` });
    await server.connect(serverSide);
    const client = new Client({ name: 'unit', version: '1' });
    await client.connect(clientSide);
    clients.push(client);
    return client;
  };
  const call = async (
    client: Client,
    name: string,
    args: Record<string, unknown> = {},
  ): Promise<Record<string, any>> => {
    const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
    assert.ok(!result.isError, JSON.stringify(result.structuredContent));
    return result.structuredContent as Record<string, any>;
  };
  /** Lets the event loop run until `check` holds (commits, MCP messages), without moving the Clock. */
  const turnsUntil = async (check: () => boolean): Promise<void> => {
    for (let i = 0; i < 1000 && !check(); i++) await new Promise((resolve) => setImmediate(resolve));
    assert.ok(check());
  };

  beforeEach(() => {
    fixture = new CoordinatorFixture({
      prefix: 'sw4rm-bridge-unit-',
      store: { groupCommit: true },
      coordinator: { router: { heartbeatIntervalMs: 0 } },
    });
    ({ clock, coordinator } = fixture);
    for (const id of ['a', 'b'])
      assert.equal(coordinator.registry.register(validDescriptor(id), { correlationId: 'unit' }).accepted, true);
  });

  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close();
    fixture.dispose();
  });

  it('waits on the Clock: an empty inbox answers when wait_ms has passed on the clock, not before', async () => {
    const b = await connect('b');
    let answered: Record<string, any> | undefined;
    const timersBefore = clock.pendingTimers;
    const reading = call(b, 'read_inbox', { wait_ms: 5000 }).then((r) => {
      answered = r;
    });
    await turnsUntil(() => coordinator.router.inboxStats('b').streaming);
    clock.advance(4999);
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(answered, undefined, 'still waiting 1 ms before wait_ms');
    clock.advance(1);
    await reading;
    assert.deepEqual(answered!.messages, []);
    assert.equal(coordinator.router.inboxStats('b').streaming, false);
    assert.equal(clock.pendingTimers, timersBefore, 'the wait left no timer behind');
  });

  it('a message sent while the read waits ends the wait at once, with the clock unmoved', async () => {
    const a = await connect('a');
    const b = await connect('b');
    const reading = call(b, 'read_inbox', { wait_ms: 30_000 });
    await turnsUntil(() => coordinator.router.inboxStats('b').streaming);
    const sent = await call(a, 'send_message', { to: 'b', payload: 'now' });
    const read = await reading;
    assert.deepEqual(
      read.messages.map((m: { message_id: string; payload: unknown }) => [m.message_id, m.payload]),
      [[sent.message_id, 'now']],
    );
    assert.equal(coordinator.router.message(sent.message_id)!.state, 'READ');
  });
  it('an acknowledgement of a message the reader sent ends its wait too, with the clock unmoved (waiting for an answer)', async () => {
    const a = await connect('a');
    const b = await connect('b');
    const sent = await call(a, 'send_message', { to: 'b', payload: 'question' });
    const readByB = await call(b, 'read_inbox', {});
    assert.equal(readByB.messages[0].message_id, sent.message_id);
    // a's own read: b's READ (sent for it by read_inbox) reaches a's inbox; a waits for what comes next.
    assert.ok((await call(a, 'read_inbox', {})).acknowledgements.some((k: { stage: string }) => k.stage === 'READ'));
    const waiting = call(a, 'read_inbox', { wait_ms: 30_000 });
    await turnsUntil(() => coordinator.router.inboxStats('a').streaming);
    await call(b, 'ack_message', { message_id: sent.message_id, outcome: 'fulfilled', result: { answer: 42 } });
    const answered = await waiting;
    assert.deepEqual(answered.messages, []);
    assert.deepEqual(
      answered.acknowledgements.map((k: { for_message_id: string; stage: string }) => [k.for_message_id, k.stage]),
      [[sent.message_id, 'FULFILLED']],
    );
  });

  it('one read per agent at a time: a second read while one waits is refused FAILED_PRECONDITION (retryable); another agent reads meanwhile', async () => {
    const a = await connect('a');
    const b = await connect('b');
    const waiting = call(b, 'read_inbox', { wait_ms: 1000 });
    await turnsUntil(() => coordinator.router.inboxStats('b').streaming);
    const second = (await b.callTool({ name: 'read_inbox', arguments: {} })) as CallToolResult;
    assert.equal(second.isError, true);
    assert.deepEqual(
      (second.structuredContent as { error: { code: string; retryable: boolean } }).error.code,
      'FAILED_PRECONDITION',
    );
    assert.equal((second.structuredContent as { error: { retryable: boolean } }).error.retryable, true);
    assert.deepEqual((await call(a, 'read_inbox', {})).messages, []);
    clock.advance(1000);
    assert.deepEqual((await waiting).messages, []);
    assert.deepEqual((await call(b, 'read_inbox', {})).messages, [], 'free again');
  });

  it('a cancelled read stops waiting, detaches and confirms nothing', async () => {
    const b = await connect('b');
    const controller = new AbortController();
    const reading = b.callTool({ name: 'read_inbox', arguments: { wait_ms: 30_000 } }, undefined, {
      signal: controller.signal,
    });
    await turnsUntil(() => coordinator.router.inboxStats('b').streaming);
    controller.abort('test');
    await assert.rejects(reading);
    await turnsUntil(() => !coordinator.router.inboxStats('b').streaming);
  });
  it("max is the read's delivery window: messages beyond it stay queued without spending delivery attempts", async () => {
    const a = await connect('a');
    const b = await connect('b');
    const ids: string[] = [];
    for (let i = 0; i < 7; i++)
      ids.push((await call(a, 'send_message', { to: 'b', payload: { i } })).message_id as string);
    const got: string[] = [];
    for (let i = 0; i < 7; i++) {
      const read = await call(b, 'read_inbox', { max: 1 });
      assert.equal(read.messages.length, 1);
      assert.equal(read.remaining, 6 - i);
      got.push(read.messages[0].message_id as string);
    }
    assert.deepEqual(got, ids, 'each once, in order');
    for (const id of ids) {
      const record = coordinator.router.message(id)!;
      assert.deepEqual([record.state, record.deliveryAttempts], ['READ', 1], id);
    }
  });
  it('a message not read within the ACK timeout is TIMED_OUT: the sender reads ACK_TIMEOUT and a retry with the same key sends it again', async () => {
    const a = await connect('a');
    const b = await connect('b');
    const first = await call(a, 'send_message', { to: 'b', payload: { job: 7 }, idempotency_key: 'job-7' });
    clock.advance(10_000);
    await turnsUntil(() => coordinator.router.message(first.message_id)!.state === 'TIMED_OUT');
    assert.deepEqual((await call(b, 'read_inbox', {})).messages, [], 'gone from the inbox (RFC §11: 10 s to RECEIVED)');
    const told = await call(a, 'read_inbox', {});
    const nack = told.acknowledgements.find((x: { for_message_id: string }) => x.for_message_id === first.message_id);
    assert.deepEqual([nack.stage, nack.error_code], ['TIMED_OUT', 'ACK_TIMEOUT']);
    const retry = await call(a, 'send_message', { to: 'b', payload: { job: 7 }, idempotency_key: 'job-7' });
    assert.notEqual(retry.message_id, first.message_id, 'a retryable outcome: a new attempt of the same operation');
    assert.equal(retry.duplicate, undefined);
    assert.deepEqual(
      (await call(b, 'read_inbox', {})).messages.map((m: { message_id: string }) => m.message_id),
      [retry.message_id],
    );
  });
});
