import type {
  ClientConnection,
  InitializeResponse,
  McpServer,
  RequestPermissionOutcome,
  RequestPermissionRequest,
  SessionNotification,
  StopReason,
} from '@agentclientprotocol/sdk' with { 'resolution-mode': 'import' };
import { spawn, type ChildProcess } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import type { Clock } from '../clock';
import { SwarmError } from '../kernel/errors';
import type { KeyedTimers } from '../kernel/timers';
import type { PermissionAnswer } from '../toolApproval/model';
import type { TranscriptEntry, TurnEnd, TurnOrigin } from './model';
import { Transcript } from './transcript';

/**
 * The official ACP library is an ES module; the core compiles to CommonJS (tests) and is bundled by esbuild, so it is
 * loaded by `require` (as workflow/cel.ts loads cel-js).
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const acp = require('@agentclientprotocol/sdk') as typeof import('@agentclientprotocol/sdk', {
  with: { 'resolution-mode': 'import' },
});

/** The agent's program: argv (never through a shell), its folder (the bound worktree) and what to add to its environment. */
export interface AcpAgentSpec {
  readonly command: readonly string[];
  readonly cwd: string;
  /** Added to the coordinator's environment, from which every SW4RM_* variable is removed first. */
  readonly env: Readonly<Record<string, string>>;
}

export interface AcpSessionHooks {
  /** Time of the transcript's entries. */
  readonly clock: Clock;
  /** The owner's timers (the start deadline, the stop grace), under `key:`-prefixed keys. */
  readonly timers: KeyedTimers<string>;
  /** This session's key among the owner's timers (the agent id). */
  readonly key: string;
  /** Decides a permission request (sessions/permissions.ts + the tool-approval rules). Must never answer allow on a timeout. */
  permission(request: RequestPermissionRequest, signal: AbortSignal): Promise<PermissionAnswer>;
  /** The worktree's files through its Confinement; without it the fs capability is not advertised. */
  readonly files?: {
    read(path: string, line?: number | null, limit?: number | null): Promise<string>;
    write(path: string, content: string): Promise<void>;
  };
  /** Every transcript entry made or changed, as it happens. */
  onEntry?(entry: TranscriptEntry): void;
  /** The agent's process ended (after any turn it was in has ended with `error`). */
  onExit?(code: number | null, signal: NodeJS.Signals | null): void;
}

export interface TurnResult {
  readonly end: TurnEnd;
  /** The agent's last message of the turn (what a task without complete_task completes with). */
  readonly text: string;
  readonly error?: string;
}

/** What the agent said of itself at `initialize`. */
export interface AgentSide {
  readonly initialize: InitializeResponse;
  readonly sessionId: string;
}

/** Raised when the agent cannot be started or does not open a session. */
export class AcpStartError extends SwarmError {
  readonly errorKind = 'unavailable' as const;
  readonly errorCode = 'AGENT_UNAVAILABLE' as const;

  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = 'AcpStartError';
  }
}

const STDERR_KEEP_CHARS = 8 * 1024;
const STOP_GRACE_MS = 3000;
const START_TIMEOUT_MS = 60_000;
/** How long a failed turn waits for the process's exit, if it is ending (its stdout closed before its exit was seen). */
const EXIT_WAIT_MS = 2000;

/** The coordinator's own variables never reach an agent except as given (its credential, never the operator's). */
function agentEnvironment(add: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith('SW4RM_')) env[name] = value;
  return { ...env, ...add };
}

/**
 * One ACP agent process and its one session, the coordinator as the client (the official library,
 * `@agentclientprotocol/sdk`): started in its folder, `initialize` with the capabilities it really serves (files
 * through `hooks.files`, no terminal), `session/new` with the swarm's MCP servers. One prompt turn at a time;
 * `cancel` sends `session/cancel`; the transcript is kept bounded as updates stream.
 */
export class AcpSession {
  readonly transcript: Transcript;
  private turnText = '';
  private running: Promise<TurnResult> | undefined;
  private exited = false;
  private stderrTail = '';
  private readonly exitWaiters: Array<() => void> = [];
  private readonly firstUpdate = new Set<() => void>();
  private turnUpdated = false;
  /** The MCP servers the session was opened with (a reload opens it with the same). */
  private servers: McpServer[] = [];
  /** The session being closed and loaded again after a cancelled turn; the next prompt waits for it. */
  private reloading: Promise<void> | undefined;
  /** While `session/load` replays the history: its updates are not this session's new entries. */
  private replaying = false;

  private constructor(
    private readonly child: ChildProcess,
    private readonly connection: ClientConnection,
    private readonly hooks: AcpSessionHooks,
    transcript: Transcript,
  ) {
    this.transcript = transcript;
  }

  private side: AgentSide | undefined;
  private cwd = '';

  get agent(): AgentSide {
    if (this.side === undefined) throw new Error('the session has not started');
    return this.side;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** A turn is running. */
  get busy(): boolean {
    return this.running !== undefined;
  }

  get hasExited(): boolean {
    return this.exited;
  }

  /** The last lines the agent wrote to its standard error (bounded), for the reason of a failure. */
  get stderr(): string {
    return this.stderrTail;
  }

  /**
   * Starts the agent and opens its session. Fails with AcpStartError (the agent's last stderr lines in it) when the
   * program cannot start, exits, or does not answer `initialize` and `session/new` within a minute.
   */
  static async start(
    spec: AcpAgentSpec,
    hooks: AcpSessionHooks,
    mcpServers: (initialize: InitializeResponse) => McpServer[],
    transcript = new Transcript(),
  ): Promise<AcpSession> {
    if (spec.command.length === 0) throw new AcpStartError('the profile has no command', '');
    const child = spawn(spec.command[0], spec.command.slice(1), {
      cwd: spec.cwd,
      env: agentEnvironment(spec.env),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let session: AcpSession | undefined;
    const app = acp
      .client({ name: 'sw4rm-coordinator' })
      .onNotification('session/update', (ctx) => session?.onUpdate(ctx.params))
      .onRequest('session/request_permission', (ctx) => {
        if (session === undefined) return { outcome: { outcome: 'cancelled' } };
        return session.onPermission(ctx.params, ctx.signal);
      });
    if (hooks.files !== undefined) {
      const files = hooks.files;
      app
        .onRequest('fs/read_text_file', async (ctx) => {
          try {
            return { content: await files.read(ctx.params.path, ctx.params.line, ctx.params.limit) };
          } catch (err) {
            throw acp.RequestError.invalidParams(undefined, (err as Error).message);
          }
        })
        .onRequest('fs/write_text_file', async (ctx) => {
          try {
            await files.write(ctx.params.path, ctx.params.content);
            return {};
          } catch (err) {
            throw acp.RequestError.invalidParams(undefined, (err as Error).message);
          }
        });
    }
    const spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    try {
      await spawned;
    } catch (err) {
      throw new AcpStartError(`${spec.command[0]} did not start: ${(err as Error).message}`, '');
    }
    const stream = acp.ndJsonStream(
      Writable.toWeb(child.stdin as Writable) as WritableStream<Uint8Array>,
      Readable.toWeb(child.stdout as Readable) as unknown as ReadableStream<Uint8Array>,
    );
    const connection = app.connect(stream);
    session = new AcpSession(child, connection, hooks, transcript);
    const self = session;
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      self.stderrTail = (self.stderrTail + chunk).slice(-STDERR_KEEP_CHARS);
    });
    // A later fault of the process (a kill that fails) is told, never thrown: an unheard 'error' would end the coordinator.
    child.on('error', (err) => {
      self.stderrTail = `${self.stderrTail}\n[sw4rm] the agent's process: ${err.message}`.slice(-STDERR_KEEP_CHARS);
    });
    child.once('exit', (code, signal) => {
      self.exited = true;
      connection.close(new Error(`the agent's process ended (${signal ?? `exit code ${code}`})`));
      for (const waiter of self.exitWaiters.splice(0)) waiter();
      hooks.onExit?.(code, signal);
    });
    // An agent that never answers is ended: start is bounded on the Clock.
    const startKey = `${hooks.key}:start`;
    const deadline = new Promise<never>((_, reject) => {
      hooks.timers.arm(startKey, START_TIMEOUT_MS, () =>
        reject(new Error(`no answer within ${START_TIMEOUT_MS / 1000} s`)),
      );
    });
    try {
      const initialize = await Promise.race([
        connection.agent.request('initialize', {
          protocolVersion: acp.PROTOCOL_VERSION,
          clientCapabilities: {
            fs: { readTextFile: hooks.files !== undefined, writeTextFile: hooks.files !== undefined },
            terminal: false,
          },
          clientInfo: { name: 'sw4rm-coordinator', version: '1' },
        }),
        deadline,
      ]);
      self.servers = mcpServers(initialize);
      self.cwd = spec.cwd;
      const opened = await Promise.race([
        connection.agent.request('session/new', { cwd: spec.cwd, mcpServers: self.servers }),
        deadline,
      ]);
      self.side = { initialize, sessionId: opened.sessionId };
      return self;
    } catch (err) {
      await self.close();
      throw new AcpStartError(
        `${spec.command[0]} did not open an ACP session: ${(err as Error).message}`,
        self.stderrTail,
      );
    } finally {
      hooks.timers.disarm(startKey);
    }
  }

  /**
   * Runs one prompt turn. Refused while another runs (one turn at a time per session). Ends with the agent's stop
   * reason, or `error` when it answered an error or its process ended.
   */
  prompt(origin: TurnOrigin, text: string): Promise<TurnResult> {
    if (this.running !== undefined) return Promise.reject(new Error('a turn is already running in this session'));
    if (this.exited) return Promise.reject(new Error("the agent's process has ended"));
    this.turnText = '';
    this.turnUpdated = false;
    this.emit(this.transcript.startTurn(origin, text, this.hooks.clock.now()));
    const ready = this.reloading ?? Promise.resolve();
    const turn = ready
      .then(() =>
        this.connection.agent.request('session/prompt', {
          sessionId: this.agent.sessionId,
          prompt: [{ type: 'text', text }],
        }),
      )
      .then(
        (response): TurnResult => this.finish(response.stopReason),
        // A turn that failed because the process is ending ends once it has (so that `hasExited` tells why), at most 2 s on.
        async (err: unknown): Promise<TurnResult> => {
          await this.exitWithin(EXIT_WAIT_MS);
          return this.finish('error', this.reasonOf(err));
        },
      );
    this.running = turn;
    return turn;
  }

  /** `listener` runs at the first update (or permission request) of each turn from now on, until disposed. */
  onFirstUpdate(listener: () => void): { dispose(): void } {
    this.firstUpdate.add(listener);
    return { dispose: () => this.firstUpdate.delete(listener) };
  }

  /** Asks the agent to stop the running turn (`session/cancel`); the turn then ends `cancelled`. */
  async cancel(): Promise<void> {
    if (this.running === undefined || this.exited) return;
    await this.connection.agent.notify('session/cancel', { sessionId: this.agent.sessionId });
  }

  /** Ends the agent's process: SIGTERM, SIGKILL after a grace on the Clock. Resolves once it has exited. */
  async close(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise<void>((resolve) => this.exitWaiters.push(resolve));
    this.child.kill('SIGTERM');
    const graceKey = `${this.hooks.key}:stop`;
    this.hooks.timers.arm(graceKey, STOP_GRACE_MS, () => {
      if (!this.exited) this.child.kill('SIGKILL');
    });
    await gone;
    this.hooks.timers.disarm(graceKey);
  }

  /** Resolves when the process has exited, or after `ms` on the Clock. */
  private exitWithin(ms: number): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const key = `${this.hooks.key}:exit-wait`;
      const done = () => {
        this.hooks.timers.disarm(key);
        resolve();
      };
      this.exitWaiters.push(done);
      this.hooks.timers.arm(key, ms, done);
    });
  }

  private finish(end: StopReason | 'error', error?: string): TurnResult {
    this.running = undefined;
    this.emit(this.transcript.endTurn(end, this.hooks.clock.now(), error));
    if (end === 'cancelled' && this.canReload && !this.exited) this.reloading = this.reload();
    return { end, text: this.turnText, ...(error === undefined ? {} : { error }) };
  }

  /** The agent can close a session and load it again (`sessionCapabilities.close` and `loadSession`). */
  private get canReload(): boolean {
    const caps = this.side?.initialize.agentCapabilities;
    return caps?.loadSession === true && caps.sessionCapabilities?.close != null;
  }

  /**
   * After a cancelled turn, the session is closed and loaded again before the next prompt: an agent may keep the
   * cancelled turn's leftovers (claude-agent-acp 0.23.1 ends the next prompt at once with the old turn's end, and is
   * one prompt behind from then on: its issue #551); a loaded session starts from its stored history. The replay is
   * not added to the transcript (it holds those entries already). A reload that fails leaves the session as it was:
   * the next prompt is sent anyway.
   */
  private async reload(): Promise<void> {
    const sessionId = this.agent.sessionId;
    try {
      await this.connection.agent.request('session/close', { sessionId });
      this.replaying = true;
      await this.connection.agent.request('session/load', { sessionId, cwd: this.cwd, mcpServers: this.servers });
    } catch (err) {
      this.stderrTail =
        `${this.stderrTail}\n[sw4rm] reloading the session after a cancel: ${(err as Error).message}`.slice(
          -STDERR_KEEP_CHARS,
        );
    } finally {
      this.replaying = false;
      this.reloading = undefined;
    }
  }

  private reasonOf(err: unknown): string {
    const message = err instanceof Error ? err.message : String(err);
    const tail = this.stderrTail.trim().split('\n').slice(-5).join('\n');
    return this.exited && tail !== '' ? `${message}; the agent's last words: ${tail}` : message;
  }

  private onUpdate(notification: SessionNotification): void {
    if (this.side !== undefined && notification.sessionId !== this.side.sessionId) return;
    if (this.replaying) return;
    this.updated();
    const update = notification.update;
    if (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text') {
      // The turn's last message: a tool call in between starts a new one.
      this.turnText += update.content.text;
    } else if (update.sessionUpdate === 'tool_call') {
      this.turnText = '';
    }
    const entry = this.transcript.apply(update, this.hooks.clock.now());
    if (entry !== undefined) this.emit(entry);
  }

  private async onPermission(
    request: RequestPermissionRequest,
    signal: AbortSignal,
  ): Promise<{ outcome: RequestPermissionOutcome }> {
    this.updated();
    let answer: PermissionAnswer;
    try {
      answer = await this.hooks.permission(request, signal);
    } catch (err) {
      answer = { outcome: { outcome: 'cancelled' }, decidedBy: `error: ${(err as Error).message}` };
    }
    const chosen =
      answer.outcome.outcome === 'selected'
        ? (request.options.find((o) => o.optionId === (answer.outcome as { optionId: string }).optionId)?.kind ??
          answer.outcome.optionId)
        : 'cancelled';
    this.emit(
      this.transcript.permission({
        at: this.hooks.clock.now(),
        toolCallId: request.toolCall.toolCallId,
        title: request.toolCall.title ?? '',
        answer: chosen,
        decidedBy: answer.decidedBy,
        ...(answer.invocationId === undefined ? {} : { invocationId: answer.invocationId }),
      }),
    );
    return { outcome: answer.outcome };
  }

  /** The turn's first sign of work. */
  private updated(): void {
    if (this.running === undefined || this.turnUpdated) return;
    this.turnUpdated = true;
    for (const listener of [...this.firstUpdate]) listener();
  }

  private emit(entry: TranscriptEntry): void {
    this.hooks.onEntry?.(entry);
  }
}
