// A stand-in for the Anthropic Messages API, for tests that run a real CLI coding agent (Claude Code, through
// @zed-industries/claude-agent-acp) without the network: the test scripts what the model answers, and every request
// the agent made is recorded for its assertions.
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One tool_use block the model emits. `id` defaults to a fresh `toolu_…`. */
export interface ScriptedToolUse {
  readonly name: string;
  readonly input: Record<string, unknown>;
  readonly id?: string;
}

/**
 * The model's next turn. Blocks are emitted in this order: thinking, text, tool uses. `stopReason` defaults to
 * tool_use when there are tool uses, else end_turn. `hold`: the stream starts (message_start and the text, if any)
 * and then stays open, without a stop, until the agent goes away (a test of cancellation).
 */
export interface ScriptedTurn {
  readonly thinking?: string;
  readonly text?: string;
  readonly toolUses?: readonly ScriptedToolUse[];
  readonly stopReason?: 'end_turn' | 'tool_use' | 'max_tokens';
  readonly hold?: boolean;
}

/** A tool_result block of the request's last user message. */
export interface ToolResultSeen {
  readonly toolUseId: string;
  /** The result's text (text blocks joined by a newline). */
  readonly text: string;
  readonly isError: boolean;
}

/** A request of the Messages API, as the fixture read it. */
export interface MessagesRequest {
  readonly model: string;
  readonly stream: boolean;
  readonly messages: readonly { role: string; content: unknown }[];
  readonly system?: unknown;
  readonly tools?: readonly { name: string; [key: string]: unknown }[];
  readonly metadata?: { user_id?: string };
  readonly [key: string]: unknown;
}

/** What the script gets to decide a main turn from. */
export interface TurnRequest {
  /** 0 for the first main request the script answers, then 1, 2… (reset by `setScript`). */
  readonly turn: number;
  readonly body: MessagesRequest;
  /** The last text block of the last user message that is not a `<system-reminder>`; '' if none. */
  readonly lastUserText: string;
  /** The tool_result blocks of the last user message. */
  readonly toolResults: readonly ToolResultSeen[];
  /** The names of the tools the request offers. */
  readonly toolNames: readonly string[];
  /** The agent's session id, read from metadata.user_id (Claude Code puts its session id there), if any. */
  readonly sessionId: string | undefined;
}

export type Script = readonly ScriptedTurn[] | ((request: TurnRequest) => ScriptedTurn | Promise<ScriptedTurn>);

/**
 * How the fixture classified a request:
 * - main: POST /v1/messages offering tools on a model that is not a haiku one: the agent's own loop, answered by
 *   the script;
 * - side: any other POST /v1/messages (Claude Code's small tasks: titles, quota checks, Bash prefix checks, all on
 *   its small-fast "haiku" model and without tools), answered `sideText` so they never consume the script;
 * - count_tokens: POST /v1/messages/count_tokens, answered with a rough count;
 * - other: anything else (logged; HEAD answers 200 empty, anything else a 404 in the API's error shape).
 */
export type RequestKind = 'main' | 'side' | 'count_tokens' | 'other';

export interface RecordedRequest {
  readonly seq: number;
  readonly kind: RequestKind;
  readonly method: string;
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  /** The parsed JSON body, or the raw text when it is not JSON ('' for none). */
  readonly body: unknown;
  /** For main requests: what the script was given, and what it answered (after the response ended). */
  readonly turn?: TurnRequest;
  readonly answer?: ScriptedTurn;
  /** When the request arrived and when its response ended (Date.now()); `endedAt` is undefined while open. */
  readonly receivedAt: number;
  endedAt?: number;
}

export interface ScriptedModelOptions {
  /** What side requests are answered (default 'OK'). */
  readonly sideText?: string;
}

/** Whether a Messages request is the agent's main loop (see RequestKind). */
export function isMainRequest(body: MessagesRequest): boolean {
  return Array.isArray(body.tools) && body.tools.length > 0 && !/haiku/i.test(String(body.model));
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((b): b is { type: 'text'; text: string } => b?.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text)
    .join('\n');
}

/** The script's view of a main request. */
export function turnRequest(turn: number, body: MessagesRequest): TurnRequest {
  const lastUser = [...body.messages].reverse().find((m) => m.role === 'user');
  const blocks: { type?: string; text?: string; tool_use_id?: string; content?: unknown; is_error?: boolean }[] =
    lastUser === undefined
      ? []
      : typeof lastUser.content === 'string'
        ? [{ type: 'text', text: lastUser.content }]
        : Array.isArray(lastUser.content)
          ? lastUser.content
          : [];
  const texts = blocks
    .filter(
      (b) => b.type === 'text' && typeof b.text === 'string' && !b.text.trimStart().startsWith('<system-reminder>'),
    )
    .map((b) => b.text as string);
  const toolResults = blocks
    .filter((b) => b.type === 'tool_result')
    .map((b) => ({ toolUseId: String(b.tool_use_id), text: textOf(b.content), isError: b.is_error === true }));
  let sessionId: string | undefined;
  try {
    const meta = JSON.parse(body.metadata?.user_id ?? '{}') as { session_id?: unknown };
    if (typeof meta.session_id === 'string') sessionId = meta.session_id;
  } catch {
    // an older Claude Code put a plain string there
  }
  return {
    turn,
    body,
    lastUserText: texts.at(-1) ?? '',
    toolResults,
    toolNames: (body.tools ?? []).map((t) => t.name),
    sessionId,
  };
}

let idCounter = 0;
const freshId = (prefix: string) => `${prefix}_fixture${String(++idCounter).padStart(6, '0')}`;

const usage = (input: number, output: number) => ({
  input_tokens: input,
  output_tokens: output,
  // Claude Code adds all four; a missing one makes its context figure NaN (ACP usage_update `used: null`)
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0,
});

type Block =
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

function blocksOf(turn: ScriptedTurn): Block[] {
  const blocks: Block[] = [];
  if (turn.thinking !== undefined)
    blocks.push({ type: 'thinking', thinking: turn.thinking, signature: `sig-${freshId('th')}` });
  if (turn.text !== undefined) blocks.push({ type: 'text', text: turn.text });
  for (const use of turn.toolUses ?? [])
    blocks.push({ type: 'tool_use', id: use.id ?? freshId('toolu'), name: use.name, input: use.input });
  return blocks;
}

function stopReasonOf(turn: ScriptedTurn): string {
  return turn.stopReason ?? ((turn.toolUses?.length ?? 0) > 0 ? 'tool_use' : 'end_turn');
}

/** Splits `s` in about `parts` pieces (the deltas of a streamed block). */
function pieces(s: string, parts: number): string[] {
  if (s.length === 0) return [];
  const size = Math.max(1, Math.ceil(s.length / parts));
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

/**
 * The fixture: an HTTP server on 127.0.0.1 (a port of its own) serving the Messages API from a script. Also an
 * HTTP proxy that refuses every CONNECT: point HTTPS_PROXY at `url` and anything the agent tries to reach outside
 * the fixture is refused and listed in `refusedConnects` instead of leaving the machine.
 */
export class ScriptedModel {
  readonly requests: RecordedRequest[] = [];
  /** Hosts the agent tried to reach through the proxy (`host:port`), in order. */
  readonly refusedConnects: string[] = [];
  /** Paths the fixture does not serve (method and path), in order. */
  readonly unknownPaths: string[] = [];
  private script: Script = [];
  private turn = 0;
  private seq = 0;
  private readonly sockets = new Set<Socket>();
  private readonly waiters = new Set<{ check: () => boolean; resolve: () => void }>();
  private scriptError: Error | undefined;

  private constructor(
    private readonly server: http.Server,
    private readonly options: ScriptedModelOptions,
  ) {}

  static async start(options: ScriptedModelOptions = {}): Promise<ScriptedModel> {
    const server = http.createServer();
    const model = new ScriptedModel(server, options);
    server.on('request', (req, res) => model.handle(req, res));
    server.on('connect', (req: http.IncomingMessage, socket: Socket) => {
      model.refusedConnects.push(req.url ?? '');
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
      model.notify();
    });
    server.on('connection', (socket: Socket) => {
      model.sockets.add(socket);
      socket.on('close', () => model.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return model;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Replaces the script; the next main request is its turn 0. */
  setScript(script: Script): void {
    this.script = script;
    this.turn = 0;
    this.scriptError = undefined;
  }

  /** The main requests, in arrival order; of one agent session only when `sessionId` is given. */
  mainRequests(sessionId?: string): RecordedRequest[] {
    return this.requests.filter(
      (r) => r.kind === 'main' && (sessionId === undefined || r.turn?.sessionId === sessionId),
    );
  }

  /** An error the script threw or a turn it did not have (answered as a 400 API error), cleared by setScript. */
  get failure(): Error | undefined {
    return this.scriptError;
  }

  /** Resolves once `check` holds (checked after each request and response end), or fails after `ms`. */
  waitFor(what: string, check: () => boolean, ms = 20_000): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        check,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`timed out after ${ms} ms waiting for ${what}; requests: ${this.describe()}`));
      }, ms);
      this.waiters.add(waiter);
    });
  }

  /** One line per request (kind, path, model, when it ended), for failure messages. */
  describe(): string {
    return this.requests
      .map((r) => {
        const model = (r.body as { model?: unknown } | undefined)?.model;
        return `#${r.seq} ${r.kind} ${r.method} ${r.path}${model ? ` ${String(model)}` : ''}${r.endedAt ? '' : ' (open)'}`;
      })
      .join('; ');
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private notify(): void {
    for (const waiter of [...this.waiters])
      if (waiter.check()) {
        this.waiters.delete(waiter);
        waiter.resolve();
      }
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown = raw;
      try {
        if (raw !== '') body = JSON.parse(raw);
      } catch {
        // kept as text
      }
      const path = (req.url ?? '/').split('?')[0];
      const method = req.method ?? 'GET';
      let kind: RequestKind = 'other';
      if (method === 'POST' && path === '/v1/messages/count_tokens') kind = 'count_tokens';
      else if (method === 'POST' && path === '/v1/messages' && typeof body === 'object' && body !== null)
        kind = isMainRequest(body as MessagesRequest) ? 'main' : 'side';
      const record: RecordedRequest = {
        seq: this.seq++,
        kind,
        method,
        path: req.url ?? '/',
        headers: req.headers,
        body,
        receivedAt: Date.now(),
      };
      this.requests.push(record);
      res.on('close', () => {
        record.endedAt = Date.now();
        this.notify();
      });
      this.notify();
      void this.answer(record, res).catch((err: unknown) => {
        this.scriptError ??= err instanceof Error ? err : new Error(String(err));
        // 400, not 500: Claude Code retries a 5xx with backoff, and a script's mistake should end the turn at once
        if (!res.headersSent) apiError(res, 400, 'invalid_request_error', this.scriptError.message);
        else res.destroy();
      });
    });
  }

  private async answer(record: RecordedRequest, res: http.ServerResponse): Promise<void> {
    switch (record.kind) {
      case 'count_tokens': {
        const size = JSON.stringify(record.body).length;
        json(res, 200, { input_tokens: Math.max(1, Math.round(size / 4)) });
        return;
      }
      case 'side': {
        const body = record.body as MessagesRequest;
        this.respond(res, body, { text: this.options.sideText ?? 'OK' });
        return;
      }
      case 'main': {
        const body = record.body as MessagesRequest;
        const request = turnRequest(this.turn++, body);
        (record as { turn?: TurnRequest }).turn = request;
        const turn = await this.next(request);
        (record as { answer?: ScriptedTurn }).answer = turn;
        this.respond(res, body, turn);
        return;
      }
      case 'other':
        this.unknownPaths.push(`${record.method} ${record.path}`);
        if (record.method === 'HEAD') {
          res.writeHead(200).end();
          return;
        }
        apiError(res, 404, 'not_found_error', `the scripted model does not serve ${record.method} ${record.path}`);
        return;
    }
  }

  private async next(request: TurnRequest): Promise<ScriptedTurn> {
    if (typeof this.script === 'function') return await this.script(request);
    const turn = this.script[request.turn];
    if (turn === undefined) throw new Error(`the script has no turn ${request.turn} (it has ${this.script.length})`);
    return turn;
  }

  private respond(res: http.ServerResponse, body: MessagesRequest, turn: ScriptedTurn): void {
    const id = freshId('msg');
    const blocks = blocksOf(turn);
    const inputTokens = Math.max(1, Math.round(JSON.stringify(body.messages).length / 4));
    if (!body.stream) {
      json(res, 200, {
        id,
        type: 'message',
        role: 'assistant',
        model: body.model,
        content: blocks,
        stop_reason: stopReasonOf(turn),
        stop_sequence: null,
        usage: usage(inputTokens, 10),
      });
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const event = (type: string, data: Record<string, unknown>) =>
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    event('message_start', {
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model: body.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: usage(inputTokens, 1),
      },
    });
    event('ping', {});
    blocks.forEach((block, index) => {
      if (block.type === 'thinking') {
        event('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
        for (const piece of pieces(block.thinking, 2))
          event('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: piece } });
        event('content_block_delta', { index, delta: { type: 'signature_delta', signature: block.signature } });
      } else if (block.type === 'text') {
        event('content_block_start', { index, content_block: { type: 'text', text: '' } });
        for (const piece of pieces(block.text, 2))
          event('content_block_delta', { index, delta: { type: 'text_delta', text: piece } });
      } else {
        event('content_block_start', {
          index,
          content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
        });
        for (const piece of pieces(JSON.stringify(block.input), 3))
          event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
      }
      if (!turn.hold) event('content_block_stop', { index });
    });
    if (turn.hold) return; // open until the agent goes away (res 'close')
    event('message_delta', {
      delta: { stop_reason: stopReasonOf(turn), stop_sequence: null },
      usage: { output_tokens: 10 },
    });
    event('message_stop', {});
    res.end();
  }
}

function json(res: http.ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
}

function apiError(res: http.ServerResponse, status: number, type: string, message: string): void {
  json(res, status, { type: 'error', error: { type, message } });
}
