/* eslint-disable @typescript-eslint/no-explicit-any -- the bridge answers untyped JSON the tests read field by field */
import { strict as assert } from 'node:assert';
import * as net from 'node:net';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ManualClock } from '../../src/core/clock';
import type { Disposable } from '../../src/core/events';
import type { StoredEvent } from '../../src/core/log/model';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { REPO_ROOT } from '../support/paths';
import { READ_SETTLE_WAIT_MS } from '../../src/server/bridge/tools/messaging';
import { hookPost } from '../support/bridgeHttp';
import { pollUntil, settles } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ctx = { correlationId: 'bridge-revoke-test' };
const DIST = path.join(REPO_ROOT, 'dist');

/** A tool call's outcome: `ok` with its output, or the tool error's code and message. */
async function outcome(
  call: Promise<unknown>,
): Promise<{ ok: true; output: Record<string, any> } | { ok: false; code: string; message: string }> {
  const result = (await call) as CallToolResult;
  if (result.isError) {
    const { code, message } = (result.structuredContent as { error: { code: string; message: string } }).error;
    return { ok: false, code, message };
  }
  return { ok: true, output: result.structuredContent as Record<string, any> };
}

/**
 * Issue 30, item 4, the MCP bridge's half: revoking a credential ends at once, UNAUTHENTICATED, every bridge request
 * waiting under it — a read_inbox (which then takes nothing sent after the revocation: the agent's new credential
 * reads it), a request_decision (the question stays pending for the new credential) and a hook waiting for an approval
 * (the question is withdrawn). Real coordinator, real bridge socket, the official SDK client; ManualClock, so no wait
 * ends on its own: only the revocation can end it.
 */
describe('MCP bridge: revocation ends every request waiting under the credential', function () {
  this.timeout(60_000);
  let dir: string;
  let clock: ManualClock;
  let host: CoordinatorHost;
  let operator: Disposable;
  const clients: Client[] = [];
  const listeners: Disposable[] = [];

  async function connect(token: string): Promise<Client> {
    const client = new Client({ name: 'revoke-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(host.bridgeEndpoints!.mcpUrl), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    clients.push(client);
    return client;
  }

  /** A fresh credential of `agent`. */
  function mint(agent: string): { id: string; token: string } {
    const minted = host.coordinator.credentials.mintAgent(agent, 'test', 'bridge revocation tests', ctx);
    return { id: minted.credential.id, token: minted.token };
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

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-int-bridge-revoke-');
    const repo = makeRepo(dir, 'app', { 'README.md': 'hello\n' });
    clock = new ManualClock(Date.now());
    host = await startHost(path.join(dir, 'data'), { clock, distDir: DIST, workspaceFolders: [repo] });
    operator = host.coordinator.hitl.attachOperator('editor:test');
    for (const agent of ['reader', 'sender', 'asker']) {
      assert.equal(host.coordinator.registry.register(validDescriptor(agent), ctx).accepted, true);
      assert.ok(host.coordinator.registry.heartbeat(agent, 'RUNNABLE', {}, ctx));
    }
  });

  afterEach(async () => {
    for (const listener of listeners.splice(0)) listener.dispose();
    for (const client of clients.splice(0)) await client.close();
    operator?.dispose();
    await stopHost(host);
    removeTempDir(dir);
  });

  it('a waiting read_inbox ends UNAUTHENTICATED at once and takes nothing sent after the revocation: the new credential reads it', async () => {
    const old = mint('reader');
    const reader = await connect(old.token);
    const sender = await connect(mint('sender').token);
    const attached = logged('stream.opened', (e) => e.details.agent_id === 'reader');
    const waiting = outcome(reader.callTool({ name: 'read_inbox', arguments: { wait_ms: 30_000 } }));
    await settles(attached, 'read_inbox to attach its sink');

    const started = Date.now();
    host.coordinator.credentials.revoke(old.id, 'test', ctx);
    // Sent right after the revocation, while the revoked read is (on the old code) still waiting for it.
    const sent = outcome(
      sender.callTool({
        name: 'send_message',
        arguments: { to: 'reader', payload: 'after the revocation', idempotency_key: 'after' },
      }),
    );
    const ended = await settles(waiting, 'the revoked read_inbox to end');
    const elapsed = Date.now() - started;
    assert.deepEqual(ended.ok ? ended.output : { code: ended.code }, { code: 'UNAUTHENTICATED' });
    assert.match((ended as { message: string }).message, /revoked/);
    const message = await sent;
    assert.ok(message.ok, JSON.stringify(message));
    console.log(`      read_inbox answered UNAUTHENTICATED ${elapsed} ms after revocation`);

    // Nothing was consumed: the message is still queued for the agent, unconfirmed, and its new credential reads it.
    const record = host.coordinator.router.message(message.output.message_id as string)!;
    assert.notEqual(record.state, 'READ');
    const renewed = await connect(mint('reader').token);
    const read = await outcome(renewed.callTool({ name: 'read_inbox', arguments: {} }));
    assert.ok(read.ok, JSON.stringify(read));
    assert.deepEqual(
      read.output.messages.map((m: { payload: unknown }) => m.payload),
      ['after the revocation'],
    );
  });

  /** The message ids of a read_inbox outcome (none when it was refused). */
  const idsOf = (read: Awaited<ReturnType<typeof outcome>>): string[] =>
    read.ok ? read.output.messages.map((m: { message_id: string }) => m.message_id) : [];

  /**
   * What the agent's NEW credential reads, all of it: read_inbox until an empty answer. Each message it reads once,
   * and none it read already comes again.
   */
  async function readAll(token: string): Promise<string[]> {
    const client = await connect(token);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const read = await outcome(client.callTool({ name: 'read_inbox', arguments: { max: 50 } }));
      assert.ok(read.ok, JSON.stringify(read));
      if (read.output.messages.length === 0) return ids;
      ids.push(...idsOf(read));
    }
    assert.fail(`read_inbox still answered messages after 5 reads: ${ids.join(', ')}`);
  }

  async function send(client: Client, payload: string, key: string): Promise<string> {
    const sent = await outcome(
      client.callTool({ name: 'send_message', arguments: { to: 'reader', payload, idempotency_key: key } }),
    );
    assert.ok(sent.ok, JSON.stringify(sent));
    return sent.output.message_id as string;
  }

  /**
   * A read_inbox POST on a raw connection that is never read: an answer larger than the socket buffers cannot be
   * written to its end, so the HTTP response stays unfinished until the test revokes or drops the connection.
   */
  function stalledRead(token: string): net.Socket {
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'read_inbox', arguments: { max: 10 } },
    });
    const port = host.bridge!.port;
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.pause();
    socket.write(
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
        `Authorization: Bearer ${token}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    return socket;
  }

  it('revoked as the read acknowledges what it took: each message reaches the agent exactly once (its answer or the new credential), and one sent after the revocation reaches the new credential', async () => {
    const old = mint('reader');
    const reader = await connect(old.token);
    const sender = await connect(mint('sender').token);
    const taken = await send(sender, 'before the revocation', 'before');
    // The old code acknowledged READ before its answer was written, and answered UNAUTHENTICATED: the message was lost.
    const revoked = new Promise<void>((resolve) => {
      const listener = host.coordinator.log.onDidRecord((e) => {
        if (e.eventType === 'message.state_changed' && e.details.message_id === taken && e.details.to === 'READ') {
          listener.dispose();
          host.coordinator.credentials.revoke(old.id, 'test', ctx);
          resolve();
        }
      });
      listeners.push(listener);
    });
    const first = await settles(outcome(reader.callTool({ name: 'read_inbox', arguments: {} })), 'the read');
    await settles(revoked, 'the revocation at READ');
    const after = await send(sender, 'after the revocation', 'after');
    const renewed = await readAll(mint('reader').token);
    const seen = [...idsOf(first), ...renewed];
    console.log(
      `      old credential's read: ${first.ok ? `${idsOf(first).length} message(s)` : first.code}; new credential: ${renewed.length}`,
    );
    assert.deepEqual(
      seen.filter((id) => id === taken).length,
      1,
      `the message taken at the revocation, seen ${JSON.stringify(seen)}`,
    );
    assert.deepEqual(
      renewed.filter((id) => id === after).length,
      1,
      'the message sent after the revocation, read by the new credential',
    );
  });

  for (const how of ['revoked', 'dropped'] as const) {
    it(`${how === 'revoked' ? 'revoked' : 'the connection dropped'} while the read's answer is still being written: nothing it took is confirmed; the new credential reads each message exactly once`, async () => {
      const old = mint('reader');
      const sender = await connect(mint('sender').token);
      // A payload of 3.8 MiB (the payload file is read first; the small message behind it comes in the same delivery):
      // an answer of some 7.6 MiB (the payload twice: text and structured), more than a connection that is not read takes.
      const big = [await send(sender, 'a'.repeat(3.8 * 1024 * 1024), 'big'), await send(sender, 'small', 'small')];
      const returned = logged('bridge.read_returned', (e) => e.details.agent_id === 'reader');
      const socket = stalledRead(old.token);
      try {
        // The read took both (delivered, its sink detached) and is answering: nothing is confirmed while the answer is written.
        await pollUntil(
          'the read to take the two messages',
          () => {
            const records = big.map((id) => host.coordinator.router.message(id)!);
            return records.every((r) => r.delivery !== 'queued') &&
              !host.coordinator.router.inboxStats('reader').streaming
              ? true
              : undefined;
          },
          10_000,
        );
        assert.deepEqual(
          big.map((id) => {
            const r = host.coordinator.router.message(id)!;
            return [r.delivery, r.state];
          }),
          [
            ['inflight', 'SENT'],
            ['inflight', 'SENT'],
          ],
          'neither confirmed nor READ while the answer is being written',
        );
        const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
        if (how === 'revoked') host.coordinator.credentials.revoke(old.id, 'test', ctx);
        else socket.destroy();
        const event = await settles(returned, 'the read to give back what it took', 10_000);
        assert.deepEqual(event.details.message_ids, big);
        // Revoked: the coordinator ends the unfinished answer's connection itself (read now, it ends short of the answer).
        let received = 0;
        socket.on('data', (chunk: Buffer) => {
          received += chunk.length;
        });
        socket.resume();
        await settles(closed, 'the connection of the unfinished answer to end');
        if (how === 'revoked') {
          console.log(
            `      revoked: the server ended the connection after ${(received / 1024 / 1024).toFixed(1)} MiB of an answer of more than 7 MiB`,
          );
          assert.ok(received < 7 * 1024 * 1024);
        }
      } finally {
        socket.destroy();
      }
      if (how === 'dropped') host.coordinator.credentials.revoke(old.id, 'test', ctx);
      const after = await send(sender, 'after', 'after');
      const renewed = await readAll(mint('reader').token);
      assert.deepEqual(renewed, [...big, after], 'each once, in order');
      assert.deepEqual(
        [...big, after].map((id) => host.coordinator.router.message(id)!.state),
        ['READ', 'READ', 'READ'],
      );
    });
  }

  /** Counts the timers of READ_SETTLE_WAIT_MS set on the Clock from now (a read waiting for the previous read's confirmation). */
  function settleWaits(): () => number {
    let count = 0;
    const setTimer = clock.setTimer.bind(clock);
    clock.setTimer = (ms, fn) => {
      if (ms === READ_SETTLE_WAIT_MS) count++;
      return setTimer(ms, fn);
    };
    return () => count;
  }

  it("a read while the agent's previous answer is still being written waits for it (on the Clock, 3 s at most) instead of taking the same messages again", async () => {
    const first = mint('reader');
    const sender = await connect(mint('sender').token);
    const big = [await send(sender, 'c'.repeat(3.8 * 1024 * 1024), 'big'), await send(sender, 'small', 'small')];
    const socket = stalledRead(first.token);
    try {
      await pollUntil(
        'the first read to take the two messages',
        () =>
          big.every((id) => host.coordinator.router.message(id)!.delivery !== 'queued') &&
          !host.coordinator.router.inboxStats('reader').streaming
            ? true
            : undefined,
        10_000,
      );
      const second = await connect(mint('reader').token);
      let answered = false;
      const waits = settleWaits();
      const reading = outcome(second.callTool({ name: 'read_inbox', arguments: {} })).finally(() => {
        answered = true;
      });
      await pollUntil('the second read to be waiting', () => (waits() > 0 ? true : undefined));
      for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
      assert.equal(answered, false, 'the second read waits while the first answer is being written');
      assert.equal(host.coordinator.router.inboxStats('reader').streaming, false, 'and has not attached');
      socket.destroy();
      const read = await settles(reading, 'the second read, once the first gave back what it took');
      assert.deepEqual(idsOf(read), big, 'each once');
    } finally {
      socket.destroy();
    }
    // With no confirmation in sight, the wait is bounded on the Clock.
    const third = mint('reader');
    const another = await send(sender, 'd'.repeat(3.8 * 1024 * 1024), 'big-2');
    const stalled = stalledRead(third.token);
    try {
      await pollUntil(
        'the stalled read to take it',
        () =>
          host.coordinator.router.message(another)!.delivery !== 'queued' &&
          !host.coordinator.router.inboxStats('reader').streaming
            ? true
            : undefined,
        10_000,
      );
      const client = await connect(third.token);
      const waits = settleWaits();
      const waiting = outcome(client.callTool({ name: 'read_inbox', arguments: {} }));
      await pollUntil('the read to be waiting', () => (waits() > 0 ? true : undefined));
      clock.advance(READ_SETTLE_WAIT_MS);
      const read = await settles(waiting, 'the read after 3 s on the Clock');
      assert.deepEqual(
        idsOf(read),
        [another],
        'taken again: the stalled answer may reach the agent too (at least once)',
      );
    } finally {
      stalled.destroy();
    }
  });

  it("a waiting request_decision ends UNAUTHENTICATED at once; another credential's wait goes on; the new credential re-attaches", async () => {
    const old = mint('asker');
    const other = mint('asker');
    const revokedClient = await connect(old.token);
    const otherClient = await connect(other.token);
    const opened = logged('hitl.opened', (e) => e.details.invocation_id === 'ask-revoked');
    const openedOther = logged('hitl.opened', (e) => e.details.invocation_id === 'ask-other');
    const waiting = outcome(
      revokedClient.callTool({
        name: 'request_decision',
        arguments: { reason_type: 'MANUAL_OVERRIDE', summary: 'Deploy?', request_id: 'ask-revoked' },
      }),
    );
    let otherEnded = false;
    const waitingOther = outcome(
      otherClient.callTool({
        name: 'request_decision',
        arguments: { reason_type: 'MANUAL_OVERRIDE', summary: 'Other?', request_id: 'ask-other' },
      }),
    ).finally(() => {
      otherEnded = true;
    });
    await settles(Promise.all([opened, openedOther]), 'both questions to open');

    const detached = logged('hitl.requester_detached', (e) => e.details.invocation_id === 'ask-revoked');
    host.coordinator.credentials.revoke(old.id, 'test', ctx);
    const ended = await settles(waiting, 'the revoked request_decision to end');
    assert.deepEqual(ended.ok ? ended.output : { code: ended.code }, { code: 'UNAUTHENTICATED' });
    await settles(detached, 'the requester detached');
    assert.equal(host.coordinator.hitl.get('ask-revoked')?.state, 'pending', 'the question stays for the agent');
    assert.equal(otherEnded, false, "the other credential's wait is not ended");

    const renewed = await connect(mint('asker').token);
    const reattached = logged('hitl.reattached', (e) => e.details.invocation_id === 'ask-revoked');
    const again = outcome(
      renewed.callTool({
        name: 'request_decision',
        arguments: { reason_type: 'MANUAL_OVERRIDE', summary: 'Deploy?', request_id: 'ask-revoked' },
      }),
    );
    await settles(reattached, 'the new credential re-attached');
    host.coordinator.hitl.decide('ask-revoked', { action: 'approve', rationale: 'fine' }, 'editor:alice', ctx);
    host.coordinator.hitl.decide('ask-other', { action: 'deny', rationale: 'no' }, 'editor:alice', ctx);
    const answer = await settles(again, 'the decision');
    assert.deepEqual(answer.ok && [answer.output.action, answer.output.reattached], ['approve', true]);
    const otherAnswer = await settles(waitingOther, 'the other decision');
    assert.deepEqual(otherAnswer.ok && otherAnswer.output.action, 'deny');
  });

  it('a hook waiting for an approval ends 401 UNAUTHENTICATED at once and its question is withdrawn', async () => {
    const old = mint('asker');
    await host.coordinator.worktrees.bind('asker', 'app', '', ctx);
    const worktree = host.coordinator.worktrees.worktreePathOf('asker')!;
    const opened = new Promise<string>((resolve) => {
      const listener = host.coordinator.log.onDidRecord((e) => {
        if (e.eventType === 'hitl.opened') {
          listener.dispose();
          resolve(String(e.details.invocation_id));
        }
      });
      listeners.push(listener);
    });
    const answer = hookPost(host.bridge!.port, old.token, {
      session_id: 's1',
      transcript_path: '/tmp/t.jsonl',
      cwd: worktree,
      permission_mode: 'default',
      hook_event_name: 'PreToolUse',
      tool_name: 'Bash',
      tool_input: { command: 'make' },
      tool_use_id: 'toolu_1',
    });
    const invocationId = await settles(opened, 'the approval question');
    host.coordinator.credentials.revoke(old.id, 'test', ctx);
    const { status, json } = await settles(answer, 'the revoked hook request to end');
    assert.equal(status, 401);
    assert.equal(json.error.code, 'UNAUTHENTICATED');
    assert.match(json.error.message, /revoked/);
    await pollUntil(
      'the question withdrawn',
      () => (host.coordinator.hitl.get(invocationId)?.state === 'cancelled' ? true : undefined),
      5_000,
    );
  });
});
