import type { RequestPermissionRequest } from '@agentclientprotocol/sdk' with { 'resolution-mode': 'import' };
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';
import { Emitter, type Disposable, type Event } from '../events';
import type { IdSource } from '../ids';
import { Guard } from '../kernel/guard';
import { KeyedTimers } from '../kernel/timers';
import type {
  BridgeEndpoints,
  LaunchPlan,
  LaunchProfile,
  LaunchRecord,
  LaunchRequest,
  ProfileIssue,
} from '../launch/model';
import type { EventRecorder } from '../log/model';
import type { TaskChange, TaskRecord } from '../scheduler/model';
import type { PermissionAnswer } from '../toolApproval/model';
import { AcpSession, AcpStartError } from './acpSession';
import { agentSide, type SessionRouter } from './agentSide';
import { SessionDriver } from './driver';
import { confinedFiles, type ConfinedFiles } from './files';
import {
  TRANSCRIPT_MAX_ENTRIES,
  type SessionRecord,
  type SessionStorage,
  type StoredEntry,
  type TranscriptEntry,
} from './model';
import { Transcript } from './transcript';

const ACTOR = 'sessions';
/** Transcript entries are written at most this often while a turn streams (and at every turn's end). */
const FLUSH_MS = 250;
/** A person's prompt is at most this long. */
export const PERSON_PROMPT_MAX_CHARS = 64 * 1024;

/** A session control refused: `kind` is the editor's error code (as LaunchError's), the message is for the person. */
export class SessionError extends SwarmError {
  constructor(
    readonly kind: 'not_found' | 'invalid' | 'refused',
    message: string,
  ) {
    super(message);
    this.name = 'SessionError';
  }

  override get errorKind(): ErrorKind {
    return this.kind === 'refused' ? 'precondition' : this.kind;
  }

  override get errorCode(): Sw4rmCode {
    return this.kind === 'not_found'
      ? 'NOT_FOUND'
      : this.kind === 'invalid'
        ? 'VALIDATION_ERROR'
        : 'FAILED_PRECONDITION';
  }
}

export type SessionsChange =
  | { readonly kind: 'session'; readonly record: SessionRecord }
  | { readonly kind: 'entry'; readonly agentId: string; readonly seq: number; readonly entry: TranscriptEntry };

/** What sessions use of the launch area (Launches implements it; the composition root hands in the instance). */
export interface SessionLaunches {
  launch(request: LaunchRequest, by: string, ctx: CallContext): Promise<LaunchPlan>;
  relaunch(agentId: string, by: string, ctx: CallContext): Promise<LaunchPlan>;
  started(agentId: string, ctx: CallContext): LaunchRecord;
  exited(agentId: string, exitCode: number | null, by: string, ctx: CallContext): LaunchRecord;
  get(agentId: string): LaunchRecord | undefined;
  profiles(): { profiles: LaunchProfile[]; issues: ProfileIssue[] };
  bridgeEndpoints(): BridgeEndpoints | undefined;
}

export interface SessionsDeps {
  readonly store: SessionStorage & { whenDurable(): Promise<void> };
  readonly log: EventRecorder;
  readonly clock: Clock;
  readonly ids: IdSource;
  readonly router: SessionRouter;
  readonly scheduler: {
    task(taskId: string): TaskRecord | undefined;
    tasks(query: { agentId?: string; includeFinished?: boolean }): TaskRecord[];
    preempt(agentId: string, taskId: string, reason: string, ctx: CallContext): { enqueued: boolean; reason: string };
    readonly onDidChange: Event<TaskChange>;
  };
  readonly launches: SessionLaunches;
  /** The tool-approval rules (ToolApprovals.decidePermission): an ACP permission request decided, perhaps by a person. */
  readonly approvals: {
    decidePermission(
      request: RequestPermissionRequest,
      agentId: string,
      ctx: CallContext,
      signal?: AbortSignal,
    ): Promise<PermissionAnswer>;
  };
  /** The worktree's Confinement (worktree/confinement.ts `Confinement.forWorktree`): the session's file capability. */
  readonly confine: (root: string) => Promise<ConfinedFiles>;
}

interface Open {
  readonly session: AcpSession;
  readonly driver: SessionDriver;
  /** Entries made or changed since the last flush, by seq. */
  readonly dirty: Map<number, TranscriptEntry>;
  flushedDropped: number;
}

/**
 * Agents in session mode (README, "Run a workflow of coding agents"): a launch of a `session` profile starts the agent's
 * ACP process in its worktree (acpSession.ts), with the swarm's MCP bridge as the session's MCP server (Streamable HTTP
 * with the agent's own credential as a bearer header, or the bridge's stdio relay when the agent has no HTTP MCP), and
 * a SessionDriver (driver.ts) feeds it the agent's work. Each session's record and bounded transcript are stored
 * (SessionStorage) and survive a reload. After a restart a session that was open is marked exited (Relaunch starts a
 * new one) and the task it held goes back to the queue.
 */
export class Sessions implements Disposable {
  private readonly changed = new Emitter<SessionsChange>();
  readonly onDidChange: Event<SessionsChange> = this.changed.event;
  private readonly open = new Map<string, Open>();
  private readonly guard: Guard;
  private readonly timers: KeyedTimers<string>;
  private disposed = false;

  constructor(private readonly deps: SessionsDeps) {
    this.guard = new Guard((context, err) => deps.log.internalError(ACTOR, deps.ids.uuid(), err, { during: context }));
    this.timers = new KeyedTimers<string>(deps.clock, this.guard);
  }

  // ---------------------------------------------------------------- queries

  list(): SessionRecord[] {
    return this.deps.store.sessions.list();
  }

  get(agentId: string): SessionRecord | undefined {
    return this.deps.store.sessions.get(agentId);
  }

  /** The agent's transcript as stored, with what is not flushed yet: at most the last `limit` entries. */
  transcript(agentId: string, limit = TRANSCRIPT_MAX_ENTRIES): { entries: StoredEntry[]; dropped: number } {
    const record = this.get(agentId);
    if (!record) throw new SessionError('not_found', `Agent '${String(agentId).slice(0, 100)}' has no session.`);
    const open = this.open.get(agentId);
    if (open) this.flush(agentId, open);
    const entries = this.deps.store.sessions.entries(agentId, Math.max(1, Math.min(limit, TRANSCRIPT_MAX_ENTRIES)));
    return { entries, dropped: entries.length > 0 ? entries[0].seq : record.dropped };
  }

  // ---------------------------------------------------------------- launch

  /** Launch Agent…: for a session profile, the agent's session is started before this answers. */
  async launch(request: LaunchRequest, by: string, ctx: CallContext): Promise<LaunchPlan> {
    const plan = await this.deps.launches.launch(request, by, ctx);
    if (plan.mode === 'session') await this.start(plan, by, ctx);
    return plan;
  }

  async relaunch(agentId: string, by: string, ctx: CallContext): Promise<LaunchPlan> {
    if (this.open.has(agentId))
      throw new SessionError('refused', `Agent '${agentId}' has an open session; end it first.`);
    const plan = await this.deps.launches.relaunch(agentId, by, ctx);
    if (plan.mode === 'session') await this.start(plan, by, ctx);
    return plan;
  }

  // ---------------------------------------------------------------- a person's controls

  /** A person's prompt in the agent's session; refused while a turn runs or when the session is not open. */
  prompt(agentId: string, text: string, by: string): void {
    const open = this.mustOpen(agentId);
    if (typeof text !== 'string' || text.trim() === '') throw new SessionError('invalid', 'The prompt is empty.');
    if (text.length > PERSON_PROMPT_MAX_CHARS)
      throw new SessionError('invalid', `The prompt is longer than ${PERSON_PROMPT_MAX_CHARS} characters.`);
    if (!open.driver.prompt(text, by))
      throw new SessionError('refused', `Agent '${agentId}' is working on a turn; Stop it or wait for it to end.`);
  }

  /** Stop: cancels the running turn (a task it ran fails `TURN_CANCELLED`, unless it was being preempted). */
  async stop(agentId: string): Promise<void> {
    await this.mustOpen(agentId).driver.cancel();
  }

  /** Ends the agent's process (its running turn ends with it). */
  async end(agentId: string): Promise<void> {
    await this.mustOpen(agentId).session.close();
  }

  // ---------------------------------------------------------------- restart

  /**
   * After a restart: every session that was open ended with the previous process. Its record is marked exited, its
   * launch EXITED (Relaunch), and the task it held yields back to the queue (a preemption answered `yielded` for it:
   * nothing it was given is lost). Run once the scheduler and the launches restored.
   */
  async restore(ctx: CallContext): Promise<void> {
    for (const record of this.list()) {
      if (record.state === 'exited' || this.open.has(record.agentId)) continue;
      await this.requeueHeld(record.agentId, 'the coordinator restarted during its session', ctx);
      this.write({
        ...record,
        state: 'exited',
        turn: null,
        error: 'the coordinator restarted: Relaunch starts a new session',
        updatedAt: this.deps.clock.now(),
      });
      const launch = this.deps.launches.get(record.agentId);
      if (launch && (launch.state === 'RUNNING' || launch.state === 'STARTING'))
        this.deps.launches.exited(record.agentId, null, 'coordinator', ctx);
    }
  }

  dispose(): void {
    for (const [agentId, open] of this.open) this.flush(agentId, open);
    this.disposed = true;
    for (const open of this.open.values()) {
      open.driver.dispose();
      void open.session.close().catch(() => undefined);
    }
    this.open.clear();
    this.timers.dispose();
    this.changed.dispose();
  }

  // ---------------------------------------------------------------- inside

  private mustOpen(agentId: string): Open {
    const open = this.open.get(agentId);
    if (!open) {
      const known = this.get(agentId);
      throw new SessionError(
        known ? 'refused' : 'not_found',
        known
          ? `Agent '${agentId}' has no open session (${known.state}); Relaunch it.`
          : `Agent '${String(agentId).slice(0, 100)}' has no session.`,
      );
    }
    return open;
  }

  private async start(plan: LaunchPlan, by: string, ctx: CallContext): Promise<void> {
    const agentId = plan.record.agentId;
    const now = this.deps.clock.now();
    const previous = this.get(agentId);
    const base: SessionRecord = {
      agentId,
      profileId: plan.record.profileId,
      state: 'starting',
      sessionId: '',
      agentName: '',
      agentVersion: '',
      loadSession: false,
      turn: null,
      exitCode: null,
      error: null,
      startedAt: now,
      updatedAt: now,
      dropped: previous?.dropped ?? 0,
    };
    this.write(base);
    const stored = this.deps.store.sessions.entries(agentId, TRANSCRIPT_MAX_ENTRIES);
    const transcript = new Transcript(
      stored.map((s) => s.entry),
      stored.length > 0 ? stored[0].seq : (previous?.dropped ?? 0),
    );
    const token = plan.env.SW4RM_TOKEN ?? '';
    const mcpUrl = plan.env.SW4RM_MCP_URL ?? '';
    let files;
    try {
      files = confinedFiles(plan.cwd, await this.deps.confine(plan.cwd));
    } catch {
      files = undefined;
    }
    let driver: SessionDriver | undefined;
    let entryOpen: Open | undefined;
    let session: AcpSession;
    try {
      session = await AcpSession.start(
        { command: plan.command, cwd: plan.cwd, env: plan.env },
        {
          clock: this.deps.clock,
          timers: this.timers,
          key: agentId,
          permission: async (request, signal) => {
            this.patch(agentId, { state: 'waiting_for_approval' });
            try {
              return await this.deps.approvals.decidePermission(
                request,
                agentId,
                { correlationId: this.deps.ids.uuid() },
                signal,
              );
            } finally {
              if (this.get(agentId)?.state === 'waiting_for_approval') this.patch(agentId, { state: 'working' });
            }
          },
          ...(files === undefined ? {} : { files }),
          onEntry: (entry) => {
            if (entryOpen) this.onEntry(agentId, entryOpen, entry);
          },
          onExit: (code, signal) => this.onExit(agentId, code, signal, driver),
        },
        (initialize) => {
          const http = initialize.agentCapabilities?.mcpCapabilities?.http === true;
          if (http || !token)
            return [
              {
                type: 'http' as const,
                name: 'sw4rm',
                url: mcpUrl,
                headers: [{ name: 'Authorization', value: `Bearer ${token}` }],
              },
            ];
          // No HTTP MCP: the bridge's stdio relay (sw4rm-mcp.js), with the agent's credential in its own environment.
          const endpoints = this.deps.launches.bridgeEndpoints();
          const relay = endpoints?.stdioCommand ?? [];
          if (relay.length === 0) return [];
          return [
            {
              name: 'sw4rm',
              command: relay[0],
              args: relay.slice(1),
              env: [
                ...Object.entries(endpoints?.commandEnv ?? {}).map(([name, value]) => ({ name, value })),
                { name: 'SW4RM_MCP_URL', value: mcpUrl },
                { name: 'SW4RM_TOKEN', value: token },
              ],
            },
          ];
        },
        transcript,
      );
    } catch (err) {
      const reason =
        err instanceof AcpStartError
          ? `${err.message}${err.stderr ? `\n${err.stderr.trim().split('\n').slice(-10).join('\n')}` : ''}`
          : String(err);
      this.patch(agentId, { state: 'exited', error: reason.slice(0, 4000) });
      this.deps.launches.exited(agentId, null, by, ctx);
      this.deps.log.record({
        correlationId: ctx.correlationId,
        actor: ACTOR,
        eventType: 'session.start_failed',
        level: 'WARN',
        details: { agent_id: agentId, reason: reason.slice(0, 1000) },
      });
      throw new SessionError('refused', `The session of '${agentId}' did not start: ${reason.slice(0, 1000)}`);
    }
    if (this.disposed) {
      await session.close();
      return;
    }
    const init = session.agent.initialize;
    const side = agentSide(agentId, {
      clock: this.deps.clock,
      ids: this.deps.ids,
      log: this.deps.log,
      router: this.deps.router,
      scheduler: this.deps.scheduler,
      whenDurable: () => this.deps.store.whenDurable(),
    });
    const profile = this.deps.launches.profiles().profiles.find((p) => p.id === plan.record.profileId);
    driver = new SessionDriver(agentId, session, {
      side,
      instructionsPath: profile?.instructions.file,
      changed: (patch) => this.patch(agentId, patch),
      fault: (during, err) =>
        this.deps.log.internalError(ACTOR, this.deps.ids.uuid(), err, { agent_id: agentId, during }),
    });
    entryOpen = { session, driver, dirty: new Map(), flushedDropped: transcript.dropped };
    this.open.set(agentId, entryOpen);
    this.patch(agentId, {
      state: 'idle',
      sessionId: session.agent.sessionId,
      agentName: init.agentInfo?.name ?? '',
      agentVersion: init.agentInfo?.version ?? '',
      loadSession: init.agentCapabilities?.loadSession === true,
    });
    this.deps.log.record({
      correlationId: ctx.correlationId,
      actor: ACTOR,
      eventType: 'session.opened',
      details: {
        agent_id: agentId,
        session_id: session.agent.sessionId,
        agent: init.agentInfo?.name ?? '',
        version: init.agentInfo?.version ?? '',
        pid: session.pid,
      },
    });
    this.deps.launches.started(agentId, ctx);
    if (session.hasExited) {
      this.onExit(agentId, null, null, driver);
      return;
    }
    driver.open();
  }

  private onEntry(agentId: string, open: Open, entry: TranscriptEntry): void {
    const items = open.session.transcript.entries;
    const index = items.lastIndexOf(entry);
    if (index < 0) return;
    const seq = open.session.transcript.dropped + index;
    open.dirty.set(seq, entry);
    this.changed.fire({ kind: 'entry', agentId, seq, entry });
    if (entry.kind === 'end') this.flush(agentId, open);
    else if (!this.timers.has(`${agentId}:flush`))
      this.timers.arm(`${agentId}:flush`, FLUSH_MS, () => this.flush(agentId, open));
  }

  /** Writes the entries made or changed since the last flush, and drops the stored ones that left the transcript. */
  private flush(agentId: string, open: Open): void {
    this.timers.disarm(`${agentId}:flush`);
    if (this.disposed) return;
    const dropped = open.session.transcript.dropped;
    if (open.dirty.size === 0 && dropped === open.flushedDropped) return;
    const entries = [...open.dirty].filter(([seq]) => seq >= dropped).map(([seq, entry]) => ({ seq, entry }));
    open.dirty.clear();
    try {
      this.deps.store.transaction(() => {
        this.deps.store.sessions.putEntries(agentId, entries);
        if (dropped > open.flushedDropped) this.deps.store.sessions.dropEntriesBefore(agentId, dropped);
        const record = this.get(agentId);
        if (record && record.dropped !== dropped) this.deps.store.sessions.put({ ...record, dropped });
      });
      open.flushedDropped = dropped;
    } catch (err) {
      this.deps.log.internalError(ACTOR, this.deps.ids.uuid(), err, {
        agent_id: agentId,
        during: 'storing the transcript',
      });
    }
  }

  private onExit(
    agentId: string,
    code: number | null,
    signal: NodeJS.Signals | null,
    driver: SessionDriver | undefined,
  ): void {
    const reason = signal ?? (code === null ? 'ended' : `exit code ${code}`);
    driver?.exited(reason);
    const open = this.open.get(agentId);
    if (this.disposed) return;
    // The running turn's end (and its task's answer) comes from the prompt's rejection; the record after it.
    queueMicrotask(() =>
      this.guard.run('a session that exited', () => {
        if (open) {
          this.flush(agentId, open);
          this.open.delete(agentId);
        }
        const stderr = open?.session.stderr.trim().split('\n').slice(-5).join('\n') ?? '';
        this.patch(agentId, {
          state: 'exited',
          turn: null,
          exitCode: code,
          error: `the agent's process ended (${reason})${stderr ? `; its last words: ${stderr}` : ''}`.slice(0, 4000),
        });
        const ctx = { correlationId: this.deps.ids.uuid() };
        const launch: LaunchRecord | undefined = this.deps.launches.get(agentId);
        if (launch && (launch.state === 'RUNNING' || launch.state === 'STARTING'))
          this.deps.launches.exited(agentId, code, 'session', ctx);
        this.deps.log.record({
          correlationId: ctx.correlationId,
          actor: ACTOR,
          eventType: 'session.exited',
          level: code === 0 ? 'INFO' : 'WARN',
          details: { agent_id: agentId, exit_code: code, signal },
        });
      }),
    );
  }

  /** The task the agent held, back to the queue: a preemption, answered `yielded` on the agent's behalf. */
  private async requeueHeld(agentId: string, reason: string, ctx: CallContext): Promise<void> {
    const side = agentSide(agentId, {
      clock: this.deps.clock,
      ids: this.deps.ids,
      log: this.deps.log,
      router: this.deps.router,
      scheduler: this.deps.scheduler,
      whenDurable: () => this.deps.store.whenDurable(),
    });
    for (const task of this.deps.scheduler.tasks({ agentId, includeFinished: false })) {
      if (task.assignedAgentId !== agentId || task.runMessageId === '') continue;
      try {
        if (task.state === 'DISPATCHED') {
          await side.ackRun(task, 'REJECTED', { error_code: 'AGENT_UNAVAILABLE', note: reason });
          continue;
        }
        if (task.state === 'RUNNING') this.deps.scheduler.preempt(agentId, task.taskId, reason, ctx);
        const now = this.deps.scheduler.task(task.taskId);
        if (now?.state !== 'PREEMPTING') continue;
        if (now.preemptMessageId !== '')
          await side.ackById(now.preemptMessageId, now.taskId, 'FULFILLED', { note: 'yielded' });
        await side.ackById(now.runMessageId, now.taskId, 'FULFILLED', { note: 'yielded' });
      } catch (err) {
        this.deps.log.internalError(ACTOR, ctx.correlationId, err, {
          agent_id: agentId,
          during: 'requeueing its task',
        });
      }
    }
  }

  private patch(agentId: string, patch: Partial<SessionRecord>): void {
    if (this.disposed) return;
    const record = this.get(agentId);
    if (!record) return;
    this.write({ ...record, ...patch, updatedAt: this.deps.clock.now() });
  }

  private write(record: SessionRecord): void {
    if (this.disposed) return;
    this.deps.store.transaction(() => {
      this.deps.store.sessions.put(record);
      this.deps.log.record({
        correlationId: record.agentId,
        actor: ACTOR,
        eventType: 'session.state',
        details: { agent_id: record.agentId, state: record.state, turn: record.turn?.number ?? null },
      });
    });
    this.changed.fire({ kind: 'session', record });
  }
}
