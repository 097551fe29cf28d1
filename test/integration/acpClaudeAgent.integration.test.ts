// The real ACP agent @zed-industries/claude-agent-acp (Claude Code inside the Claude Agent SDK), driven over its stdio
// by the official ACP client library, its model being test/support/scriptedModel.ts: what the coordinator's ACP
// sessions will meet (issue 33).
import type {
  ClientConnection,
  InitializeResponse,
  PromptResponse,
  RequestPermissionRequest,
  RequestPermissionResponse,
  SessionNotification,
  SessionUpdate,
  McpServer,
} from '@agentclientprotocol/sdk' with { 'resolution-mode': 'import' };
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { PassThrough, Readable, Writable } from 'node:stream';
import { makeRepo } from '../support/gitRepo';
import { settles } from '../support/poll';
import { ScriptedModel, type RecordedRequest } from '../support/scriptedModel';
import { makeTempDir, removeTempDir } from '../support/tempDir';

// The ACP library is an ES module; the tests compile to CommonJS, and Node 24 loads it by require.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const acp = require('@agentclientprotocol/sdk') as typeof import('@agentclientprotocol/sdk', {
  with: { 'resolution-mode': 'import' },
});

/** The agent's program (its package's bin), run by this Node. */
const AGENT_BIN = require.resolve('@zed-industries/claude-agent-acp/dist/index.js');

/** How long one wait on the agent may take: a loaded 2-core machine starts Claude Code in a few seconds. */
const WAIT_MS = 20_000;

/**
 * The agent's whole environment, nothing inherited from this machine:
 * - HOME and CLAUDE_CONFIG_DIR: empty folders of the test's own (Claude Code's ~/.claude.json, settings, session
 *   transcripts; the adapter also refuses session/new when ~/.claude.json.backup exists without ~/.claude.json);
 * - ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY: the fixture and a dummy key (no ANTHROPIC_AUTH_TOKEN, no login);
 * - CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC (without it Claude Code calls api.anthropic.com itself, not the base
 *   URL, at session start), DISABLE_AUTOUPDATER, DISABLE_TELEMETRY, DISABLE_ERROR_REPORTING;
 * - HTTPS_PROXY / HTTP_PROXY: the fixture, which refuses every CONNECT and lists it (Claude Code still fetches the
 *   plugin blocklist from raw.githubusercontent.com at every start), NO_PROXY for the fixture itself;
 * - TMPDIR: a folder of the test's own (Claude Code keeps per-session files there); PATH for git.
 */
function agentEnvironment(model: ScriptedModel, home: string, tmp: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    CLAUDE_CONFIG_DIR: path.join(home, '.claude'),
    TMPDIR: tmp,
    ANTHROPIC_BASE_URL: model.url,
    ANTHROPIC_API_KEY: 'sk-ant-test-dummy',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    HTTPS_PROXY: model.url,
    HTTP_PROXY: model.url,
    NO_PROXY: '127.0.0.1,localhost',
  };
}

/** Something the client saw, in order: updates, permission requests, fs calls. */
type Seen =
  | { readonly kind: 'update'; readonly notification: SessionNotification }
  | { readonly kind: 'permission'; readonly request: RequestPermissionRequest }
  | { readonly kind: 'fs'; readonly method: string; readonly params: unknown };

/** The ACP client side of the test: what arrived, a way to wait for it, and how permission requests are answered. */
class ClientRecord {
  readonly seen: Seen[] = [];
  answerPermission: (request: RequestPermissionRequest) => RequestPermissionResponse = () => ({
    outcome: { outcome: 'cancelled' },
  });
  private readonly waiters = new Set<() => void>();

  push(item: Seen): void {
    this.seen.push(item);
    for (const waiter of [...this.waiters]) waiter();
  }

  updates(sessionId: string): SessionUpdate[] {
    return this.seen.flatMap((s) =>
      s.kind === 'update' && s.notification.sessionId === sessionId ? [s.notification.update] : [],
    );
  }

  permissions(sessionId: string): RequestPermissionRequest[] {
    return this.seen.flatMap((s) => (s.kind === 'permission' && s.request.sessionId === sessionId ? [s.request] : []));
  }

  fsCalls(): { method: string; params: unknown }[] {
    return this.seen.flatMap((s) => (s.kind === 'fs' ? [{ method: s.method, params: s.params }] : []));
  }

  /** Resolves with what `find` answers once it answers something, checked after each arrival. */
  until<T>(what: string, find: () => T | undefined, ms = WAIT_MS): Promise<T> {
    return settles(
      new Promise<T>((resolve) => {
        const check = () => {
          const value = find();
          if (value === undefined) return;
          this.waiters.delete(check);
          resolve(value);
        };
        this.waiters.add(check);
        check();
      }),
      what,
      ms,
    );
  }
}

/** The text of a session's agent_message_chunk updates, joined. */
function messageText(updates: readonly SessionUpdate[]): string {
  return updates
    .flatMap((u) => (u.sessionUpdate === 'agent_message_chunk' && u.content.type === 'text' ? [u.content.text] : []))
    .join('');
}

/** A prompt response's token total: `usage` is an unstable ACP field, which the stable types leave out. */
function totalTokens(response: PromptResponse): number | undefined {
  return (response as { usage?: { totalTokens?: number } | null }).usage?.totalTokens;
}

/** The tool_result blocks the model got, over every main request (from the last user message of each). */
function toolResultsSeen(requests: readonly RecordedRequest[]) {
  return requests.flatMap((r) => r.turn?.toolResults ?? []);
}

/** A Streamable HTTP MCP server (stateless, one Server per request) with one tool `echo`; records what reached it. */
async function startEchoMcpServer() {
  const calls: { authorization: string | undefined; args: unknown }[] = [];
  const requests: { method: string; rpc: string | undefined; authorization: string | undefined }[] = [];
  const httpServer = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body: unknown = raw === '' ? undefined : JSON.parse(raw);
      const authorization = req.headers.authorization;
      requests.push({
        method: req.method ?? '',
        rpc: (body as { method?: string } | undefined)?.method,
        authorization,
      });
      if (req.method !== 'POST') {
        res.writeHead(405, { allow: 'POST' }).end();
        return;
      }
      const server = new Server({ name: 'echo-probe', version: '1.0.0' }, { capabilities: { tools: {} } });
      server.setRequestHandler(ListToolsRequestSchema, () => ({
        tools: [
          {
            name: 'echo',
            description: 'Answers its text back.',
            inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
          },
        ],
      }));
      server.setRequestHandler(CallToolRequestSchema, (request) => {
        calls.push({ authorization, args: request.params.arguments });
        return { content: [{ type: 'text', text: `echo: ${String(request.params.arguments?.text)}` }] };
      });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      void server.connect(transport).then(() => transport.handleRequest(req, res, body));
    });
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}/mcp`,
    calls,
    requests,
    close: () => {
      httpServer.closeAllConnections();
      return new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
}

describe('ACP: the real claude-agent-acp driven by the ACP client library, against the scripted model', function () {
  this.timeout(60_000);
  let dir: string;
  let repo: string;
  let model: ScriptedModel;
  let child: ChildProcess;
  let stderr = '';
  let connection: ClientConnection;
  let initialized: InitializeResponse;
  const record = new ClientRecord();

  before(async () => {
    dir = makeTempDir('sw4rm-acp-');
    const home = path.join(dir, 'home');
    const tmp = path.join(dir, 'tmp');
    fs.mkdirSync(home);
    fs.mkdirSync(tmp);
    repo = makeRepo(dir, 'repo', { 'README.md': 'hello\n', 'src/app.txt': 'one\ntwo\n' });
    model = await ScriptedModel.start();
    child = spawn(process.execPath, [AGENT_BIN], {
      cwd: repo,
      env: agentEnvironment(model, home, tmp),
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true, // its own process group: Claude Code's processes end with it (after)
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-20_000)));
    // ACP_TRACE=<file>: every line the agent wrote on stdout, to read its messages whole
    const trace = process.env.ACP_TRACE ? fs.createWriteStream(process.env.ACP_TRACE) : undefined;
    const stdout = new PassThrough();
    child.stdout!.on('data', (d: Buffer) => {
      trace?.write(d);
      stdout.write(d);
    });
    child.stdout!.on('end', () => {
      trace?.end();
      stdout.end();
    });
    const app = acp
      .client({ name: 'sw4rm-acp-test' })
      .onRequest('session/request_permission', ({ params }) => {
        record.push({ kind: 'permission', request: params });
        return record.answerPermission(params);
      })
      .onNotification('session/update', ({ params }) => record.push({ kind: 'update', notification: params }))
      .onRequest('fs/read_text_file', ({ params }) => {
        record.push({ kind: 'fs', method: 'fs/read_text_file', params });
        return { content: fs.readFileSync(params.path, 'utf8') };
      })
      .onRequest('fs/write_text_file', ({ params }) => {
        record.push({ kind: 'fs', method: 'fs/write_text_file', params });
        fs.writeFileSync(params.path, params.content);
        return {};
      });
    connection = app.connect(acp.ndJsonStream(Writable.toWeb(child.stdin!), Readable.toWeb(stdout)));
    initialized = await settles(
      connection.agent.request('initialize', {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
        clientInfo: { name: 'sw4rm-acp-test', version: '0.0.0' },
      }),
      'initialize',
      WAIT_MS,
    );
  });

  after(async () => {
    connection?.close();
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      process.kill(-child.pid, 'SIGTERM');
      await settles(exited, 'the agent to exit', 10_000).catch(() => process.kill(-child.pid!, 'SIGKILL'));
    }
    await model?.close();
    removeTempDir(dir);
  });

  /** The sessions a test opened: closed after it, so that only one Claude Code runs at a time. */
  const opened: string[] = [];

  afterEach(async function () {
    if (this.currentTest?.state === 'failed') {
      console.error(`model requests: ${model.describe()}`);
      if (model.failure) console.error(`script failure: ${model.failure.message}`);
      console.error(`agent stderr (tail):\n${stderr.slice(-4000)}`);
    }
    for (const sessionId of opened.splice(0))
      await settles(connection.agent.request('session/close', { sessionId }), 'session/close', WAIT_MS);
  });

  async function newSession(mcpServers: McpServer[] = []): Promise<string> {
    const session = await settles(
      connection.agent.request('session/new', { cwd: repo, mcpServers }),
      'session/new',
      WAIT_MS,
    );
    opened.push(session.sessionId);
    return session.sessionId;
  }

  function prompt(sessionId: string, text: string): Promise<PromptResponse> {
    return connection.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] });
  }

  it('answers initialize: protocol 1, loadSession, MCP over HTTP and SSE, no auth method for an API key', () => {
    assert.equal(initialized.protocolVersion, 1);
    assert.equal(initialized.agentInfo?.name, '@zed-industries/claude-agent-acp');
    assert.equal(initialized.agentCapabilities?.loadSession, true);
    assert.deepEqual(initialized.agentCapabilities?.mcpCapabilities, { http: true, sse: true });
    assert.deepEqual(initialized.agentCapabilities?.promptCapabilities, { image: true, embeddedContext: true });
    assert.deepEqual(initialized.authMethods, []);
  });

  it('a text answer arrives as agent_message_chunk and the turn ends end_turn; nothing left the machine', async () => {
    const sessionId = await newSession();
    model.setScript([{ text: 'Hello from the scripted model.' }]);
    const response = await settles(prompt(sessionId, 'Say hello.'), 'the prompt turn', WAIT_MS);
    assert.equal(response.stopReason, 'end_turn');
    assert.equal(messageText(record.updates(sessionId)), 'Hello from the scripted model.');
    const [main] = model.mainRequests(sessionId);
    assert.equal(main.turn!.lastUserText, 'Say hello.');
    assert.equal(main.turn!.sessionId, sessionId, 'Claude Code names the ACP session id in metadata.user_id');
    for (const tool of ['Read', 'Write', 'Edit', 'Bash', 'Glob', 'Grep', 'TodoWrite'])
      assert.ok(main.turn!.toolNames.includes(tool), `${tool} is offered: ${main.turn!.toolNames.join(', ')}`);
    assert.equal(model.mainRequests(sessionId).length, 1);
    assert.equal(main.headers['x-api-key'], 'sk-ant-test-dummy');
    assert.deepEqual(model.unknownPaths, []);
    for (const host of model.refusedConnects) assert.match(host, /^raw\.githubusercontent\.com:443$/);
  });

  it('thinking arrives as agent_thought_chunk, TodoWrite as a plan, without a permission request', async () => {
    const sessionId = await newSession();
    const todos = [
      { content: 'Read the code', status: 'completed', activeForm: 'Reading the code' },
      { content: 'Write the notes', status: 'in_progress', activeForm: 'Writing the notes' },
    ];
    model.setScript([
      { thinking: 'The user wants a plan.', toolUses: [{ name: 'TodoWrite', input: { todos } }] },
      { text: 'Planned.' },
    ]);
    const response = await settles(prompt(sessionId, 'Plan the work.'), 'the prompt turn', WAIT_MS);
    assert.equal(response.stopReason, 'end_turn');
    const updates = record.updates(sessionId);
    const thought = updates.flatMap((u) =>
      u.sessionUpdate === 'agent_thought_chunk' && u.content.type === 'text' ? [u.content.text] : [],
    );
    assert.equal(thought.join(''), 'The user wants a plan.');
    const plan = updates.find((u) => u.sessionUpdate === 'plan');
    assert.ok(plan && plan.sessionUpdate === 'plan', 'a plan update');
    assert.deepEqual(
      plan.entries.map((e) => [e.content, e.status]),
      [
        ['Read the code', 'completed'],
        ['Write the notes', 'in_progress'],
      ],
    );
    assert.deepEqual(record.permissions(sessionId), []);
    const results = toolResultsSeen(model.mainRequests(sessionId));
    assert.equal(results.length, 1);
    assert.equal(results[0].isError, false, results[0].text);
  });

  it('Write asks session/request_permission: rejected, the file stays unwritten and the model is told so', async () => {
    const sessionId = await newSession();
    const file = path.join(repo, 'notes', 'rejected.txt');
    model.setScript([
      { text: 'Writing the file.', toolUses: [{ name: 'Write', input: { file_path: file, content: 'no\n' } }] },
      { text: 'Understood.' },
    ]);
    record.answerPermission = () => ({ outcome: { outcome: 'selected', optionId: 'reject' } });
    const response = await settles(prompt(sessionId, 'Write notes/rejected.txt.'), 'the prompt turn', WAIT_MS);
    assert.equal(response.stopReason, 'end_turn');

    const [asked] = record.permissions(sessionId);
    assert.ok(asked, 'a permission request');
    assert.deepEqual(
      asked.options.map((o) => [o.optionId, o.kind, o.name]),
      [
        ['allow_always', 'allow_always', 'Always Allow'],
        ['allow', 'allow_once', 'Allow'],
        ['reject', 'reject_once', 'Reject'],
      ],
    );
    assert.equal(asked.toolCall.kind, 'edit');
    assert.equal(asked.toolCall.title, 'Write notes/rejected.txt');
    assert.deepEqual(asked.toolCall.rawInput, { file_path: file, content: 'no\n' });
    assert.deepEqual(asked.toolCall.locations, [{ path: file }]);
    assert.deepEqual(asked.toolCall.content, [{ type: 'diff', path: file, oldText: null, newText: 'no\n' }]);

    assert.equal(fs.existsSync(file), false, 'the rejected Write wrote nothing');
    const results = toolResultsSeen(model.mainRequests(sessionId));
    assert.equal(results.length, 1);
    assert.equal(results[0].isError, true);
    assert.match(results[0].text, /User refused permission to run tool/);
    const updates = record.updates(sessionId);
    const toolCall = updates.find((u) => u.sessionUpdate === 'tool_call');
    assert.ok(toolCall && toolCall.sessionUpdate === 'tool_call');
    assert.equal(toolCall.toolCallId, asked.toolCall.toolCallId);
    const failed = updates.find((u) => u.sessionUpdate === 'tool_call_update' && u.status === 'failed');
    assert.ok(failed, `a failed tool_call_update: ${JSON.stringify(updates.map((u) => u.sessionUpdate))}`);
  });

  it('Write allowed: the file is written by Claude Code itself (no fs/write_text_file), the model gets its result', async () => {
    const sessionId = await newSession();
    const file = path.join(repo, 'notes', 'allowed.txt');
    model.setScript([
      { toolUses: [{ name: 'Write', input: { file_path: file, content: 'yes\n' } }] },
      { text: 'Written.' },
    ]);
    record.answerPermission = () => ({ outcome: { outcome: 'selected', optionId: 'allow' } });
    const response = await settles(prompt(sessionId, 'Write notes/allowed.txt.'), 'the prompt turn', WAIT_MS);
    assert.equal(response.stopReason, 'end_turn');
    assert.equal(record.permissions(sessionId).length, 1);
    assert.equal(fs.readFileSync(file, 'utf8'), 'yes\n');
    assert.deepEqual(record.fsCalls(), [], 'claude-agent-acp 0.23.1 never calls the client for its own file tools');
    const results = toolResultsSeen(model.mainRequests(sessionId));
    assert.equal(results.length, 1);
    assert.equal(results[0].isError, false, results[0].text);
    assert.match(results[0].text, /created successfully/);
    const completed = record
      .updates(sessionId)
      .find((u) => u.sessionUpdate === 'tool_call_update' && u.status === 'completed');
    assert.ok(completed, 'a completed tool_call_update');
  });

  it('an HTTP MCP server with an Authorization header: its tool mcp__probe__echo reaches it with the header', async () => {
    const mcp = await startEchoMcpServer();
    try {
      const sessionId = await newSession([
        {
          type: 'http',
          name: 'probe',
          url: mcp.url,
          headers: [{ name: 'Authorization', value: 'Bearer probe-token-1' }],
        },
      ]);
      model.setScript((request) => {
        if (request.turn === 0) {
          assert.ok(request.toolNames.includes('mcp__probe__echo'), `offered: ${request.toolNames.join(', ')}`);
          return { toolUses: [{ name: 'mcp__probe__echo', input: { text: 'ping' } }] };
        }
        return { text: `The server said: ${request.toolResults.map((r) => r.text).join(' ')}` };
      });
      record.answerPermission = () => ({ outcome: { outcome: 'selected', optionId: 'allow' } });
      const response = await settles(prompt(sessionId, 'Call the echo tool.'), 'the prompt turn', WAIT_MS);
      assert.equal(model.failure, undefined);
      assert.equal(response.stopReason, 'end_turn');
      assert.deepEqual(mcp.calls, [{ authorization: 'Bearer probe-token-1', args: { text: 'ping' } }]);
      for (const r of mcp.requests) assert.equal(r.authorization, 'Bearer probe-token-1', JSON.stringify(r));
      assert.equal(messageText(record.updates(sessionId)), 'The server said: echo: ping');
      const [asked] = record.permissions(sessionId);
      assert.ok(asked, 'the MCP tool asks permission as any other');
      assert.equal(asked.toolCall.title, 'mcp__probe__echo');
    } finally {
      await mcp.close();
    }
  });

  it('Read and Edit of a file in the repository: Read is not asked, Edit asks with its diff; no fs/* call either way', async () => {
    const sessionId = await newSession();
    const file = path.join(repo, 'src', 'app.txt');
    model.setScript([
      { toolUses: [{ name: 'Read', input: { file_path: file } }] },
      { toolUses: [{ name: 'Edit', input: { file_path: file, old_string: 'two', new_string: 'TWO' } }] },
      { text: 'Edited.' },
    ]);
    record.answerPermission = () => ({ outcome: { outcome: 'selected', optionId: 'allow' } });
    const response = await settles(prompt(sessionId, 'Capitalise two in src/app.txt.'), 'the prompt turn', WAIT_MS);
    assert.equal(response.stopReason, 'end_turn');
    const asked = record.permissions(sessionId);
    assert.deepEqual(
      asked.map((p) => p.toolCall.title),
      ['Edit src/app.txt'],
    );
    assert.deepEqual(asked[0].toolCall.content, [{ type: 'diff', path: file, oldText: 'two', newText: 'TWO' }]);
    assert.deepEqual(asked[0].toolCall.locations, [{ path: file }]);
    assert.equal(fs.readFileSync(file, 'utf8'), 'one\nTWO\n');
    assert.deepEqual(record.fsCalls(), [], 'Read and Edit go to the disk from Claude Code, not through the client');
    const [read, edit] = toolResultsSeen(model.mainRequests(sessionId));
    assert.match(read.text, /1→one\n\s+2→two/);
    assert.match(edit.text, /has been updated successfully/);
  });

  it('Bash runs inside Claude Code (terminal: false): a read-only git command is not asked, a writing one is', async () => {
    const sessionId = await newSession();
    model.setScript([
      { toolUses: [{ name: 'Bash', input: { command: 'git status --short', description: 'Show the status' } }] },
      { toolUses: [{ name: 'Bash', input: { command: 'touch made-by-bash.txt', description: 'Make a file' } }] },
      { text: 'Done.' },
    ]);
    record.answerPermission = () => ({ outcome: { outcome: 'selected', optionId: 'reject' } });
    const response = await settles(prompt(sessionId, 'Show the status, then make a file.'), 'the prompt turn', WAIT_MS);
    assert.equal(response.stopReason, 'end_turn');
    const asked = record.permissions(sessionId);
    assert.deepEqual(
      asked.map((p) => [p.toolCall.kind, p.toolCall.title]),
      [['execute', 'touch made-by-bash.txt']],
    );
    assert.equal(fs.existsSync(path.join(repo, 'made-by-bash.txt')), false);
    const [status, touch] = toolResultsSeen(model.mainRequests(sessionId));
    assert.equal(status.isError, false, status.text);
    assert.equal(touch.isError, true);
    assert.match(touch.text, /User refused permission to run tool/);
  });

  it('session/cancel mid-turn ends the prompt cancelled; the next prompt ends at once (stale), session/load sets it right', async () => {
    const sessionId = await newSession();
    model.setScript([{ text: 'Working on it', hold: true }, { text: 'Back again.' }, { text: 'After the reload.' }]);
    const turn = prompt(sessionId, 'Take your time.');
    await record.until('the held turn to stream its text', () =>
      messageText(record.updates(sessionId)).includes('Working on it') ? true : undefined,
    );
    const [held] = model.mainRequests(sessionId);
    await connection.agent.notify('session/cancel', { sessionId });
    const response = await settles(turn, 'the cancelled prompt', WAIT_MS);
    assert.equal(response.stopReason, 'cancelled');
    await model.waitFor('the held request to be dropped', () => held.endedAt !== undefined, WAIT_MS);

    // claude-agent-acp 0.23.1 (its issue #551): the interrupted turn's leftover end is read by the next prompt, which
    // then ends at once, end_turn with no usage, before its own model request; that turn runs on unseen, its updates
    // held until a later prompt reads them (one prompt behind from then on).
    const stale = await settles(prompt(sessionId, 'Are you there?'), 'the next prompt', WAIT_MS);
    assert.equal(stale.stopReason, 'end_turn');
    assert.equal(totalTokens(stale), 0);
    await model.waitFor('the stale prompt to reach the model anyway', () =>
      model.mainRequests(sessionId).some((r) => r.turn?.lastUserText === 'Are you there?' && r.endedAt !== undefined),
    );
    assert.doesNotMatch(messageText(record.updates(sessionId)), /Back again/);

    // Closing the session and loading it again (a fresh Claude Code on the same transcript) puts it right.
    await settles(connection.agent.request('session/close', { sessionId }), 'session/close', WAIT_MS);
    const beforeLoad = record.updates(sessionId).length;
    await settles(
      connection.agent.request('session/load', { sessionId, cwd: repo, mcpServers: [] }),
      'session/load',
      WAIT_MS,
    );
    const replay = record.updates(sessionId).slice(beforeLoad);
    const userTexts = replay.flatMap((u) =>
      u.sessionUpdate === 'user_message_chunk' && u.content.type === 'text' ? [u.content.text] : [],
    );
    for (const text of ['Take your time.', '[Request interrupted by user]', 'Are you there?'])
      assert.ok(userTexts.includes(text), `the replay has ${text}: ${JSON.stringify(userTexts)}`);
    assert.match(messageText(replay), /Back again\./);
    const afterLoad = record.updates(sessionId).length;
    const next = await settles(prompt(sessionId, 'And now?'), 'the prompt after the load', WAIT_MS);
    assert.equal(next.stopReason, 'end_turn');
    assert.ok((totalTokens(next) ?? 0) > 0);
    assert.equal(messageText(record.updates(sessionId).slice(afterLoad)), 'After the reload.');
    assert.equal(model.mainRequests(sessionId).at(-1)!.turn!.lastUserText, 'And now?');
  });
});

/* eslint-disable @typescript-eslint/no-explicit-any -- the fixture answers untyped JSON the tests read field by field */
describe('the scripted model (test/support/scriptedModel.ts) on its own', function () {
  let model: ScriptedModel;
  beforeEach(async () => (model = await ScriptedModel.start({ sideText: 'side answer' })));
  afterEach(() => model.close());

  const post = (path: string, body: unknown) =>
    fetch(`${model.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const tools = [{ name: 'Write', input_schema: { type: 'object' } }];

  /** The server-sent events of a streamed answer, as [event name, data]. */
  async function events(response: Response): Promise<[string, Record<string, any>][]> {
    const text = await response.text();
    return text
      .split('\n\n')
      .filter((chunk) => chunk.trim() !== '')
      .map((chunk) => {
        const [eventLine, dataLine] = chunk.split('\n');
        return [eventLine.replace(/^event: /, ''), JSON.parse(dataLine.replace(/^data: /, '')) as Record<string, any>];
      });
  }

  it('streams a turn as the Messages API does; side requests and count_tokens never consume the script', async () => {
    model.setScript((request) => ({
      text: `turn ${request.turn}: ${request.lastUserText}`,
      toolUses: [{ name: 'Write', input: { file_path: '/x', content: 'a "quoted" text' }, id: 'toolu_1' }],
    }));
    const side = await post('/v1/messages', {
      model: 'claude-haiku-4-5',
      max_tokens: 1,
      messages: [{ role: 'user', content: 'quota' }],
    });
    assert.equal(((await side.json()) as any).content[0].text, 'side answer');
    const counted = await post('/v1/messages/count_tokens', { model: 'claude-sonnet-4-6', messages: [] });
    assert.ok(((await counted.json()) as any).input_tokens > 0);

    const streamed = await post('/v1/messages', {
      model: 'claude-sonnet-4-6',
      stream: true,
      tools,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: '<system-reminder>\nignored\n</system-reminder>' },
            { type: 'text', text: 'go' },
          ],
        },
      ],
    });
    assert.equal(streamed.headers.get('content-type'), 'text/event-stream');
    const seen = await events(streamed);
    assert.deepEqual(
      seen.map(([name]) => name),
      [
        'message_start',
        'ping',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'content_block_start',
        'content_block_delta',
        'content_block_delta',
        'content_block_delta',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ],
    );
    for (const [name, data] of seen) assert.equal(data.type, name);
    const text = seen.filter(([, d]) => d.delta?.type === 'text_delta').map(([, d]) => d.delta.text as string);
    assert.equal(text.join(''), 'turn 0: go');
    const json = seen.filter(([, d]) => d.delta?.type === 'input_json_delta').map(([, d]) => d.delta.partial_json);
    assert.deepEqual(JSON.parse(json.join('')), { file_path: '/x', content: 'a "quoted" text' });
    assert.deepEqual(seen[6][1].content_block, { type: 'tool_use', id: 'toolu_1', name: 'Write', input: {} });
    assert.equal(seen.at(-2)![1].delta.stop_reason, 'tool_use');
    assert.deepEqual(
      model.requests.map((r) => r.kind),
      ['side', 'count_tokens', 'main'],
    );
  });

  it('answers a main request without stream as one message; a missing turn is a 400; unknown paths are listed', async () => {
    model.setScript([{ text: 'only turn' }]);
    const body = { model: 'claude-sonnet-4-6', tools, messages: [{ role: 'user', content: 'hi' }] };
    const first = (await (await post('/v1/messages', body)).json()) as any;
    assert.deepEqual(first.content, [{ type: 'text', text: 'only turn' }]);
    assert.equal(first.stop_reason, 'end_turn');
    assert.deepEqual(Object.keys(first.usage).sort(), [
      'cache_creation_input_tokens',
      'cache_read_input_tokens',
      'input_tokens',
      'output_tokens',
    ]);
    const second = await post('/v1/messages', body);
    assert.equal(second.status, 400);
    assert.match(model.failure!.message, /no turn 1/);
    assert.equal((await fetch(`${model.url}/`, { method: 'HEAD' })).status, 200);
    assert.equal((await fetch(`${model.url}/v1/models`)).status, 404);
    assert.deepEqual(model.unknownPaths, ['HEAD /', 'GET /v1/models']);
  });

  it('refuses a CONNECT (the proxy it also is) and lists its host', async () => {
    const { port } = new URL(model.url);
    const answer = await new Promise<number | undefined>((resolve, reject) =>
      http
        .request({ host: '127.0.0.1', port, method: 'CONNECT', path: 'example.invalid:443' })
        .on('connect', (res, socket) => {
          socket.destroy();
          resolve(res.statusCode);
        })
        .on('error', reject)
        .end(),
    );
    assert.equal(answer, 403);
    assert.deepEqual(model.refusedConnects, ['example.invalid:443']);
  });
});
