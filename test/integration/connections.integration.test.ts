import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { ManualClock } from '../../src/core/clock';
import { Coordinator } from '../../src/core/coordinator';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { describeOpenFilesLimit, readOpenFilesLimit, type ConnectionLimits } from '../../src/server/connections';
import { CoordinatorServer } from '../../src/server/server';
import { CoordinatorClients } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { CLI_BUNDLE, PROTOS_DIR, REPO_ROOT } from '../support/paths';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const TOKEN = 'connections-test-operator-token-0123456789abcdef';
const REGISTER = '/sw4rm.registry.RegistryService/RegisterAgent';

/** Resolves with how long (ms) the socket or session stayed open, once the server closes it; rejects after `withinMs`. */
function closedWithin(socket: net.Socket | http2.ClientHttp2Session, withinMs: number): Promise<number> {
  const opened = Date.now();
  return new Promise((resolve, reject) => {
    if (socket.destroyed) return resolve(0);
    const timer = setTimeout(() => reject(new Error(`still open after ${withinMs} ms`)), withinMs);
    socket.on('error', () => undefined);
    // Read (and drop) what the server sends, so that its FIN is seen.
    if (socket instanceof net.Socket) socket.resume();
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - opened);
    });
  });
}

function connectRaw(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.once('error', reject);
    socket.on('error', () => undefined);
    // Read (and drop) what the server sends, so that its FIN is seen.
    socket.resume();
  });
}

interface Answer {
  status: string;
  message: string;
  ms: number;
}

/** Opens one stream on `session` with `headers` and sends `body`, ending the stream if told; answers once it closes. */
function send(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body: Buffer,
  end: boolean,
): Promise<Answer> {
  const started = Date.now();
  const stream = session.request({ ':method': 'POST', 'content-type': 'application/grpc', te: 'trailers', ...headers });
  const answer: Answer = { status: '', message: '', ms: 0 };
  for (const event of ['response', 'trailers'] as const) {
    stream.on(event, (h: http2.IncomingHttpHeaders) => {
      answer.status = String(h['grpc-status'] ?? answer.status);
      if (h['grpc-message'] !== undefined) answer.message = decodeURIComponent(String(h['grpc-message']));
    });
  }
  stream.on('error', () => undefined);
  stream.resume();
  if (end) stream.end(body);
  else stream.write(body);
  return new Promise((resolve) => stream.once('close', () => resolve({ ...answer, ms: Date.now() - started })));
}

async function connectSession(port: number): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => undefined);
  await new Promise<void>((resolve) => session.once('connect', () => resolve()));
  return session;
}

/** One raw HTTP/2 RegisterAgent request on its own session: `body` (a gRPC frame, possibly truncated), ended if told. */
async function rawRequest(port: number, body: Buffer, end: boolean, token: string | null = TOKEN): Promise<Answer> {
  const session = await connectSession(port);
  try {
    return await send(
      session,
      { ':path': REGISTER, ...(token === null ? {} : { authorization: `Bearer ${token}` }) },
      body,
      end,
    );
  } finally {
    session.close();
  }
}

/** A gRPC frame header declaring `declared` bytes, followed by only `sent` of them. */
function truncatedFrame(declared: number, sent: number): Buffer {
  const frame = Buffer.alloc(5 + sent, 0x20);
  frame.writeUInt8(0, 0);
  frame.writeUInt32BE(declared, 1);
  return frame;
}

describe('connection bounds', () => {
  let dataDir: string;
  let coordinator: Coordinator | undefined;
  let server: CoordinatorServer | undefined;
  let port: number;
  const sockets: net.Socket[] = [];
  let clients: CoordinatorClients | undefined;
  /** The server's timers (idle connections, request bodies) run on this clock: tests advance it, never sleep. */
  let clock: ManualClock;
  const IDLE_MS = 300;

  async function start(limits: Partial<ConnectionLimits>, auth: 'token' | 'none' = 'token'): Promise<void> {
    clock = new ManualClock();
    coordinator = new Coordinator({ store: CoordinatorStore.open(dataDir), clock, router: { heartbeatIntervalMs: 0 } });
    server = new CoordinatorServer({
      coordinator,
      protosDir: PROTOS_DIR,
      host: '127.0.0.1',
      port: 0,
      auth,
      token: auth === 'token' ? TOKEN : undefined,
      connections: limits,
    });
    port = await server.start();
  }

  beforeEach(() => {
    dataDir = makeTempDir('sw4rm-int-connections-');
  });

  /** Lets the server see a connection that was just opened (its idle timer is then armed). */
  const seen = (count: number) =>
    pollUntil(
      `${count} unauthenticated connection(s) on the server`,
      () => server!.unauthenticatedConnections >= count || undefined,
    );
  /** Lets the event loop turn a few times, so that a close the server started would reach the client. */
  const turns = async () => {
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  /** Advances to just before the idle timeout (the connection stays), then past it; answers how long it took to close. */
  async function idleOut(socket: net.Socket | http2.ClientHttp2Session): Promise<number> {
    clock.advance(IDLE_MS - 1);
    await turns();
    assert.equal(socket.destroyed, false, 'open until the idle timeout');
    clock.advance(1);
    return closedWithin(socket, 3000);
  }

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    clients?.close();
    clients = undefined;
    await server?.drain(200);
    coordinator?.dispose();
    server = undefined;
    coordinator = undefined;
    removeTempDir(dataDir);
  });

  describe('unauthenticated idle timeout', () => {
    beforeEach(() => start({ unauthenticatedIdleMs: IDLE_MS }));

    it('closes a raw TCP connection that sends nothing', async () => {
      const socket = await connectRaw(port);
      sockets.push(socket);
      await seen(1);
      const ms = await idleOut(socket);
      assert.ok(ms < 3000, `closed ${ms} ms after the timeout`);
    });

    it('closes an HTTP/2 session that sends only the preface', async () => {
      const session = await connectSession(port);
      await seen(1);
      const ms = await idleOut(session);
      assert.ok(ms < 3000, `closed ${ms} ms after the timeout`);
      session.destroy();
    });

    it('closes a session whose only calls were refused UNAUTHENTICATED or were health probes', async () => {
      const session = await connectSession(port);
      const empty = Buffer.from([0, 0, 0, 0, 0]);
      assert.equal(
        (await send(session, { ':path': REGISTER, authorization: 'Bearer wrong' }, empty, true)).status,
        String(grpc.status.UNAUTHENTICATED),
      );
      assert.equal(
        (await send(session, { ':path': '/grpc.health.v1.Health/Check' }, empty, true)).status,
        String(grpc.status.OK),
      );
      assert.equal(server!.unauthenticatedConnections, 1, 'still counted as unauthenticated');
      await idleOut(session);
      session.destroy();
    });

    it('keeps a connection open once a call on it was authenticated', async () => {
      const session = await connectSession(port);
      await send(session, { ':path': REGISTER, authorization: `Bearer ${TOKEN}` }, Buffer.from([0, 0, 0, 0, 0]), true);
      assert.equal(server!.unauthenticatedConnections, 0, 'no idle timer is left for it');
      clock.advance(3 * IDLE_MS);
      await turns();
      assert.equal(
        session.closed || session.destroyed,
        false,
        'the authenticated session outlived three idle timeouts',
      );
      session.destroy();
    });

    it('also bounds connections with auth "none": any call but a health probe authenticates', async () => {
      await server!.drain(100);
      coordinator!.dispose();
      await start({ unauthenticatedIdleMs: IDLE_MS }, 'none');
      const session = await connectSession(port);
      await send(session, { ':path': REGISTER }, Buffer.from([0, 0, 0, 0, 0]), true);
      assert.equal(server!.unauthenticatedConnections, 0, 'no idle timer is left for it');
      clock.advance(3 * IDLE_MS);
      await turns();
      assert.equal(session.closed || session.destroyed, false, 'a call without a token authenticates with auth "none"');
      session.destroy();
      const socket = await connectRaw(port);
      sockets.push(socket);
      await seen(1);
      await idleOut(socket);
    });
  });

  describe('connection limit', () => {
    beforeEach(() => start({ maxConnections: 20, unauthenticatedIdleMs: 60_000 }));

    it('closes the connection beyond the limit at once, and an authenticated client keeps working', async () => {
      clients = new CoordinatorClients(`127.0.0.1:${port}`, TOKEN);
      assert.equal((await clients.registerAgent(descriptorMessage('alpha'))).accepted, true);
      for (let i = 0; i < 19; i++) sockets.push(await connectRaw(port));
      await seen(19);
      for (const socket of sockets) assert.equal(socket.destroyed, false);
      // Closed at once: either the connect itself is reset, or the socket closes right after it opened.
      const extra = await connectRaw(port).catch((err: NodeJS.ErrnoException) => {
        assert.ok(
          err.code === 'ECONNRESET' || err.code === 'ECONNREFUSED',
          `the 21st connection failed for another reason: ${err.message}`,
        );
        return undefined;
      });
      if (extra !== undefined) {
        sockets.push(extra);
        const ms = await closedWithin(extra, 2000);
        assert.ok(ms < 1000, `the 21st connection was closed at once (${ms} ms), not by the idle timeout`);
      }
      for (const socket of sockets.slice(0, 19))
        assert.equal(socket.destroyed, false, 'the 20 within the limit stay open');
      assert.deepEqual(
        await clients.heartbeat('alpha', 'RUNNABLE', {}),
        { ok: true },
        'the authenticated connection is untouched',
      );
      // A slot frees when a connection closes.
      sockets.shift()!.destroy();
      await pollUntil('the freed slot', () => server!.unauthenticatedConnections === 18 || undefined);
      const next = await connectRaw(port);
      sockets.push(next);
      await seen(19);
      await turns();
      assert.equal(next.destroyed, false);
    });
  });

  describe('request body', () => {
    beforeEach(() => start({ requestBodyMs: 300 }));

    /** Runs `request` while advancing the server's clock in 100 ms steps until it is answered. */
    async function withClock(request: Promise<Answer>): Promise<Answer> {
      let answer: Answer | undefined;
      void request.then((a) => {
        answer = a;
      });
      return pollUntil('the answer', () => {
        if (answer === undefined) clock.advance(100);
        return answer;
      });
    }

    it('ends a call whose frame declares more bytes than arrive within the deadline with DEADLINE_EXCEEDED', async () => {
      const answer = await withClock(rawRequest(port, truncatedFrame(100, 10), false));
      assert.equal(answer.status, String(grpc.status.DEADLINE_EXCEEDED));
      assert.match(answer.message, /did not arrive completely within 0.3 s/);
      assert.ok(answer.ms < 3000, `the stream closed after ${answer.ms} ms`);
    });

    it('closes the stream of a half-sent request refused UNAUTHENTICATED', async () => {
      const answer = await withClock(rawRequest(port, truncatedFrame(100, 10), false, null));
      assert.equal(answer.status, String(grpc.status.UNAUTHENTICATED));
      assert.ok(answer.ms < 3000, `the stream closed after ${answer.ms} ms`);
    });

    it('answers a stream that ends inside a request message with INVALID_ARGUMENT', async () => {
      const answer = await rawRequest(port, truncatedFrame(100, 10), true);
      assert.equal(answer.status, String(grpc.status.INVALID_ARGUMENT));
      assert.match(answer.message, /ended before a complete request message arrived/);
    });

    it('answers a stream that ends with no message at all with INVALID_ARGUMENT', async () => {
      const answer = await rawRequest(port, Buffer.alloc(0), true);
      assert.equal(answer.status, String(grpc.status.INVALID_ARGUMENT));
    });

    it('lets a complete request through', async () => {
      clients = new CoordinatorClients(`127.0.0.1:${port}`, TOKEN);
      assert.equal((await clients.registerAgent(descriptorMessage('alpha'))).accepted, true);
    });
  });

  describe('open files limit', () => {
    it('reads the soft and hard limits from /proc/self/limits text', () => {
      const text =
        'Limit                     Soft Limit           Hard Limit           Units\n' +
        'Max open files            1024                 1048576              files\n';
      assert.deepEqual(readOpenFilesLimit(text), { soft: 1024, hard: 1048576 });
      assert.deepEqual(readOpenFilesLimit('Max open files  unlimited unlimited files\n'), {
        soft: Infinity,
        hard: Infinity,
      });
      assert.equal(readOpenFilesLimit('nothing here'), undefined);
    });

    it('warns when the soft limit is below the connection limit plus headroom, naming how to raise it', () => {
      const low = describeOpenFilesLimit({ soft: 1024, hard: 1048576 }, 1000)!;
      assert.match(low.line, /soft 1024, hard 1048576/);
      assert.match(low.warning!, /ulimit -n 1256/);
      const hardLow = describeOpenFilesLimit({ soft: 256, hard: 512 }, 1000)!;
      assert.match(hardLow.warning!, /hard limit 512 is also low/);
      assert.doesNotMatch(low.warning!, /hard limit/);
      assert.equal(describeOpenFilesLimit({ soft: 65536, hard: 65536 }, 1000)!.warning, undefined);
      if (process.platform === 'linux') assert.ok(readOpenFilesLimit() !== undefined);
    });

    (process.platform === 'linux' ? it : it.skip)(
      'makes the CLI print its limit at start-up and warn when it is low',
      async () => {
        // A shell lowers the limit (Node raises its soft limit to the hard one at start, so both), then runs the CLI.
        const child = spawn(
          '/bin/sh',
          ['-c', 'ulimit -n 512 && exec "$0" "$@"', process.execPath, CLI_BUNDLE, '--port', '0', '--data-dir', dataDir],
          { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
        );
        let stdout = '';
        let stderr = '';
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
          stdout += chunk;
        });
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
          stderr += chunk;
        });
        const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
        try {
          const deadline = Date.now() + 20_000;
          while (
            !/warning: the open-files soft limit/.test(stderr) &&
            Date.now() < deadline &&
            child.exitCode === null
          ) {
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          assert.match(stdout, /^# Open files limit: soft 512, hard 512$/m, stderr);
          assert.match(
            stderr,
            /warning: the open-files soft limit 512 is below 1256 \(1000 connections \+ 256\).*hard limit 512 is also low.*LimitNOFILE=1256/,
          );
        } finally {
          child.kill('SIGTERM');
          await exited;
        }
      },
    );
  });
});
