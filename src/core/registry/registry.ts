import { isoUtc, type Clock } from '../clock';
import { Emitter, type Disposable, type Event } from '../events';
import { Guard } from '../kernel/guard';
import type { EventLog } from '../log/eventLog';
import type { StoredEvent } from '../log/model';
import type { CallContext } from '../context';
import type {
  AgentLifecycle,
  AgentRecord,
  RegistryChange,
  RegistryStorage,
  TransitionCause,
  TransitionResult,
} from './model';
import { validateDescriptor, type AgentDescriptor, type AgentPresence, type DescriptorInput } from './descriptor';
import {
  allows,
  canonicalState,
  DEFAULT_STATE_TIMEOUTS,
  isAgentState,
  refusalReason,
  stateTimeout,
  UNSPECIFIED_STATES,
  type StateTimeouts,
} from './lifecycle';

export { AGENT_STATES, type AgentState } from './lifecycle';

export interface RegistryOptions extends StateTimeouts {
  /** How long without a heartbeat before an agent is shown unavailable. It is never deregistered for it. */
  readonly heartbeatDebounceMs: number;
}

export const DEFAULT_REGISTRY_OPTIONS: RegistryOptions = { heartbeatDebounceMs: 30_000, ...DEFAULT_STATE_TIMEOUTS };

export type { CallContext, RegistryChange };

export interface RegisterResult {
  readonly accepted: boolean;
  readonly reason: string;
}

/**
 * The registry (RFC §14): who is registered, with what descriptor, in which lifecycle state, and whether
 * they are heard from. Deregistration is explicit and the only way out; missed heartbeats only change
 * presence, after a debounce.
 */
export class Registry implements AgentLifecycle, Disposable {
  private readonly agents = new Map<string, AgentRecord>();
  private readonly presenceTimers = new Map<string, Disposable>();
  /** The §8.3 timeout of each agent's current state, when it has one. */
  private readonly stateTimers = new Map<string, Disposable>();
  private readonly changed = new Emitter<RegistryChange>();
  /** A timer's work must not throw into the event loop (it would end the CLI): a failure is logged instead. */
  private readonly guard = new Guard((agentId, err) =>
    this.log.internalError('registry', `timer:${agentId}`, err, { agent_id: agentId }),
  );
  private readonly options: RegistryOptions;
  /** Join, leave, and every change an agent view needs to show. */
  readonly onDidChange: Event<RegistryChange> = this.changed.event;

  constructor(
    private readonly store: RegistryStorage,
    private readonly log: EventLog,
    private readonly clock: Clock,
    options: Partial<RegistryOptions> = DEFAULT_REGISTRY_OPTIONS,
  ) {
    this.options = { ...DEFAULT_REGISTRY_OPTIONS, ...options };
    this.restore();
  }

  /** Agents from an earlier run come back registered but disconnected until they are heard from again. */
  private restore(): void {
    const now = this.clock.now();
    const rearm: Array<[string, string, number, number]> = [];
    this.store.transaction(() => {
      for (const stored of this.store.agents.list()) {
        const record: AgentRecord = { ...stored, presence: 'disconnected', updatedAt: now };
        this.agents.set(record.descriptor.agentId, record);
        // A state's timeout counts from when the agent entered it, across restarts.
        if (stateTimeout(stored.state, this.options).errorCode) {
          const entered = this.enteredState(stored);
          const { ms } = stateTimeout(stored.state, this.options, entered.timeoutMs);
          if (ms > 0) rearm.push([record.descriptor.agentId, stored.state, ms, Math.max(0, entered.at + ms - now)]);
        }
        if (stored.presence !== 'disconnected') {
          this.store.agents.upsert(record);
          this.log.record({
            correlationId: `restore:${record.descriptor.agentId}`,
            actor: 'registry',
            eventType: 'agent.presence_changed',
            details: {
              agent_id: record.descriptor.agentId,
              from: stored.presence,
              to: 'disconnected',
              cause: 'coordinator restarted',
            },
          });
        }
      }
    });
    for (const [agentId, state, ms, remainingMs] of rearm) this.armStateTimer(agentId, state, ms, remainingMs);
  }

  /**
   * When the stored agent entered its state, and with which timeout: the newest event that moved it there (its
   * `state_timeout_ms` carries a ShutdownAgent's grace); without one (the log pruned), the record's updatedAt.
   */
  private enteredState(stored: AgentRecord): { at: number; timeoutMs?: number } {
    const agentId = stored.descriptor.agentId;
    let newest: StoredEvent | undefined;
    for (const eventType of ['agent.state_changed', 'agent.registered', 'agent.reregistered']) {
      const [event] = this.log.query({ eventType, agentId, limit: 1 });
      if (event && event.details.agent_id === agentId && (!newest || event.id > newest.id)) newest = event;
    }
    const at = newest ? Date.parse(newest.ts) : NaN;
    const to = newest?.details.to ?? newest?.details.to_state;
    const stateMs = newest?.details.state_timeout_ms;
    const best =
      to === stored.state && Number.isFinite(at)
        ? { at, timeoutMs: typeof stateMs === 'number' ? stateMs : undefined }
        : undefined;
    return best ? { at: best.at, timeoutMs: best.timeoutMs } : { at: stored.updatedAt };
  }

  register(input: DescriptorInput, ctx: CallContext): RegisterResult {
    const verdict = validateDescriptor(input);
    if (!verdict.ok) {
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'registry',
        eventType: 'agent.registration_rejected',
        level: 'WARN',
        details: { agent_id: input.agentId ?? '', reason: verdict.reason },
      });
      return { accepted: false, reason: verdict.reason };
    }
    const descriptor = verdict.descriptor;
    const id = descriptor.agentId;
    const now = this.clock.now();
    const previous = this.agents.get(id);
    const record: AgentRecord = {
      descriptor,
      state: 'INITIALIZING',
      registeredAt: previous?.registeredAt ?? now,
      updatedAt: now,
      lastHeartbeatAt: previous?.lastHeartbeatAt ?? null,
      health: previous?.health ?? {},
      presence: 'online',
    };
    this.store.transaction(() => {
      this.store.agents.upsert(record);
      this.log.record({
        correlationId: ctx.correlationId,
        actor: id,
        eventType: previous ? 'agent.reregistered' : 'agent.registered',
        details: {
          agent_id: id,
          from_state: previous?.state ?? null,
          to_state: 'INITIALIZING',
          changed_fields: previous ? changedFields(previous.descriptor, descriptor) : undefined,
          warnings: verdict.warnings.length ? verdict.warnings : undefined,
        },
      });
    });
    this.agents.set(id, record);
    this.armPresenceTimer(id);
    this.armTimeoutOf(id, 'INITIALIZING');
    this.changed.fire({ kind: previous ? 'updated' : 'joined', agent: record });
    return {
      accepted: true,
      reason: verdict.warnings.length ? `accepted with warnings: ${verdict.warnings.join('; ')}` : '',
    };
  }

  /**
   * Records a heartbeat. Answers false for an agent that is not registered. The reported state goes through the
   * lifecycle table: FAILED → RUNNABLE is FAILED → RECOVERING → RUNNABLE; a state the table does not allow is not
   * applied (WARN agent.transition_refused) but the heartbeat still counts for presence.
   */
  heartbeat(agentId: string, reportedState: string, health: Record<string, string>, ctx: CallContext): boolean {
    const previous = this.agents.get(agentId);
    if (!previous) {
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'registry',
        eventType: 'agent.heartbeat_unknown',
        level: 'WARN',
        details: { agent_id: agentId },
      });
      return false;
    }
    const now = this.clock.now();
    const reported = canonicalState(reportedState);
    const known = isAgentState(reported);
    const { health: boundedHealth, truncated } = boundHealth(health);
    // The path the reported state takes through the table: [] keeps the state.
    let path: string[] = [];
    let refused = '';
    if (known && reported !== previous.state) {
      if (allows(previous.state, reported)) path = [reported];
      else if (previous.state === 'FAILED_STATE' && reported === 'RUNNABLE') path = ['RECOVERING', 'RUNNABLE'];
      else refused = refusalReason(previous.state, reported);
    }
    let record: AgentRecord = {
      ...previous,
      health: boundedHealth,
      lastHeartbeatAt: now,
      updatedAt: now,
      presence: 'online',
    };
    this.store.transaction(() => {
      this.store.agents.upsert(record);
      if (truncated) {
        this.log.record({
          correlationId: ctx.correlationId,
          actor: agentId,
          eventType: 'agent.heartbeat_health_truncated',
          level: 'WARN',
          details: {
            agent_id: agentId,
            limits: { entries: MAX_HEALTH_ENTRIES, key_chars: MAX_HEALTH_KEY, value_chars: MAX_HEALTH_VALUE },
          },
        });
      }
      if (!known && !UNSPECIFIED_STATES.has(reportedState)) {
        this.log.record({
          correlationId: ctx.correlationId,
          actor: agentId,
          eventType: 'agent.heartbeat_state_unknown',
          level: 'WARN',
          details: { agent_id: agentId, reported_state: reportedState, kept_state: previous.state },
        });
      }
      if (refused) {
        this.log.record({
          correlationId: ctx.correlationId,
          actor: agentId,
          eventType: 'agent.transition_refused',
          level: 'WARN',
          details: { agent_id: agentId, from: previous.state, to: reported, cause: 'heartbeat', reason: refused },
        });
      }
      if (previous.presence !== 'online') {
        this.log.record({
          correlationId: ctx.correlationId,
          actor: agentId,
          eventType: 'agent.presence_changed',
          details: { agent_id: agentId, from: previous.presence, to: 'online', cause: 'heartbeat' },
        });
      }
      for (const to of path) {
        record = this.recordState(record, to, { by: 'heartbeat', reason: `reported ${reported} in a heartbeat` }, ctx);
      }
    });
    this.agents.set(agentId, record);
    this.armPresenceTimer(agentId);
    if (path.length) this.armTimeoutOf(agentId, record.state);
    const kind = path.length ? 'state' : previous.presence !== 'online' ? 'presence' : 'heartbeat';
    this.changed.fire({ kind, agent: record });
    return true;
  }

  /**
   * Moves the agent to `to` if the table allows it from its current state: one `agent.state_changed` event in the
   * same transaction as the stored state (the caller's, when it is in one), the new state's §8.3 timeout armed
   * (`cause.timeoutMs` overrides it), onDidChange {kind: 'state'}. Refused: `{ok: false, reason}` and nothing changes.
   */
  transition(agentId: string, to: string, cause: TransitionCause, ctx: CallContext): TransitionResult {
    const previous = this.agents.get(agentId);
    if (!previous) return { ok: false, reason: `${agentId} is not registered` };
    const target = canonicalState(to);
    if (!allows(previous.state, target)) return { ok: false, reason: refusalReason(previous.state, target) };
    const record = this.store.transaction(() => this.recordState(previous, target, cause, ctx));
    this.agents.set(agentId, record);
    this.armTimeoutOf(agentId, target, cause.timeoutMs);
    this.changed.fire({ kind: 'state', agent: record });
    return { ok: true, agent: record };
  }

  /** Whether the lifecycle table allows `from` → `to`. */
  allows(from: string, to: string): boolean {
    return allows(from, to);
  }

  /**
   * A sign of life other than a Heartbeat call (a stream opened, a HEARTBEAT envelope answered): refreshes
   * presence and the debounce, keeping the reported state and health.
   */
  recordLiveness(agentId: string, ctx: CallContext): boolean {
    const agent = this.agents.get(agentId);
    return agent ? this.heartbeat(agentId, '', { ...agent.health }, ctx) : false;
  }

  /** The only way an agent leaves the registry. Answers false for an agent that is not registered. */
  deregister(agentId: string, givenReason: string, ctx: CallContext): boolean {
    const reason = givenReason.length > MAX_REASON ? `${givenReason.slice(0, MAX_REASON)}… (truncated)` : givenReason;
    const previous = this.agents.get(agentId);
    if (!previous) {
      this.log.record({
        correlationId: ctx.correlationId,
        actor: 'registry',
        eventType: 'agent.deregister_unknown',
        level: 'WARN',
        details: { agent_id: agentId, reason },
      });
      return false;
    }
    this.store.transaction(() => {
      this.store.agents.delete(agentId);
      this.log.record({
        correlationId: ctx.correlationId,
        actor: agentId,
        eventType: 'agent.deregistered',
        details: { agent_id: agentId, from_state: previous.state, reason },
      });
    });
    this.agents.delete(agentId);
    this.disarm(this.presenceTimers, agentId);
    this.disarm(this.stateTimers, agentId);
    this.changed.fire({ kind: 'left', agentId, reason });
    return true;
  }

  get(agentId: string): AgentRecord | undefined {
    return this.agents.get(agentId);
  }

  list(): AgentRecord[] {
    return [...this.agents.values()].sort((a, b) => a.descriptor.agentId.localeCompare(b.descriptor.agentId));
  }

  /** Agents heard from within the debounce window. */
  onlineCount(): number {
    let n = 0;
    for (const agent of this.agents.values()) if (agent.presence === 'online') n++;
    return n;
  }

  dispose(): void {
    for (const timer of [...this.presenceTimers.values(), ...this.stateTimers.values()]) timer.dispose();
    this.presenceTimers.clear();
    this.stateTimers.clear();
    this.changed.dispose();
  }

  /** Stores `previous` in state `to` with its `agent.state_changed` event; call inside a transaction. */
  private recordState(
    previous: AgentRecord,
    to: string,
    cause: TransitionCause,
    ctx: CallContext,
    timedOutMs?: number,
  ): AgentRecord {
    const agentId = previous.descriptor.agentId;
    const record: AgentRecord = { ...previous, state: to, updatedAt: this.clock.now() };
    const { ms, errorCode } = stateTimeout(to, this.options, cause.timeoutMs);
    this.store.agents.upsert(record);
    this.log.record({
      correlationId: ctx.correlationId,
      actor:
        cause.by === 'heartbeat' || cause.by === 'registration'
          ? agentId
          : cause.by === 'timeout'
            ? 'registry'
            : 'scheduler',
      eventType: 'agent.state_changed',
      level: cause.by === 'timeout' || to === 'FAILED_STATE' ? 'WARN' : 'INFO',
      details: {
        agent_id: agentId,
        from: previous.state,
        to,
        cause: cause.by,
        reason: cause.reason,
        error_code: cause.errorCode,
        task_id: cause.taskId,
        timeout_ms: timedOutMs,
        state_timeout_ms: errorCode ? ms : undefined,
      },
    });
    return record;
  }

  /** Arms the §8.3 timeout of the state the agent just entered (or disarms it: a state without one). */
  private armTimeoutOf(agentId: string, state: string, overrideMs?: number): void {
    this.disarm(this.stateTimers, agentId);
    const { ms } = stateTimeout(state, this.options, overrideMs);
    if (ms > 0) this.armStateTimer(agentId, state, ms, ms);
  }

  private armStateTimer(agentId: string, state: string, timeoutMs: number, delayMs: number): void {
    this.disarm(this.stateTimers, agentId);
    const { errorCode } = stateTimeout(state, this.options, timeoutMs);
    this.stateTimers.set(
      agentId,
      this.clock.setTimer(delayMs, () =>
        this.guard.run(agentId, () => {
          this.stateTimers.delete(agentId);
          const agent = this.agents.get(agentId);
          if (!agent || agent.state !== state) return;
          const ctx: CallContext = { correlationId: `timeout:${agentId}` };
          const cause: TransitionCause = {
            by: 'timeout',
            reason: `${state} for longer than ${timeoutMs} ms`,
            errorCode,
          };
          const record = this.store.transaction(() => this.recordState(agent, 'FAILED_STATE', cause, ctx, timeoutMs));
          this.agents.set(agentId, record);
          this.changed.fire({ kind: 'state', agent: record });
          // §8.4: past the grace the agent is FAILED agent_shutdown_timeout, and its shutdown ends: it leaves the registry.
          if (state === 'SHUTTING_DOWN') this.deregister(agentId, errorCode, ctx);
        }),
      ),
    );
  }

  private armPresenceTimer(agentId: string): void {
    this.disarm(this.presenceTimers, agentId);
    this.presenceTimers.set(
      agentId,
      this.clock.setTimer(this.options.heartbeatDebounceMs, () =>
        this.guard.run(agentId, () => {
          this.presenceTimers.delete(agentId);
          this.setPresence(agentId, 'unavailable', `no heartbeat for ${this.options.heartbeatDebounceMs} ms`);
        }),
      ),
    );
  }

  private setPresence(agentId: string, presence: AgentPresence, cause: string): void {
    const agent = this.agents.get(agentId);
    if (!agent || agent.presence === presence) return;
    const record: AgentRecord = { ...agent, presence, updatedAt: this.clock.now() };
    this.store.transaction(() => {
      this.store.agents.upsert(record);
      this.log.record({
        correlationId: `presence:${agentId}`,
        actor: 'registry',
        eventType: 'agent.presence_changed',
        level: 'WARN',
        details: {
          agent_id: agentId,
          from: agent.presence,
          to: presence,
          cause,
          last_heartbeat_at: agent.lastHeartbeatAt === null ? null : isoUtc(agent.lastHeartbeatAt),
        },
      });
    });
    this.agents.set(agentId, record);
    this.changed.fire({ kind: 'presence', agent: record });
  }

  private disarm(timers: Map<string, Disposable>, agentId: string): void {
    timers.get(agentId)?.dispose();
    timers.delete(agentId);
  }
}

/** What a heartbeat's health map may hold; the rest is cut, and the cut is logged. */
export const MAX_HEALTH_ENTRIES = 32;
export const MAX_HEALTH_KEY = 128;
export const MAX_HEALTH_VALUE = 1024;
export const MAX_REASON = 1024;

function boundHealth(health: Record<string, string>): { health: Record<string, string>; truncated: boolean } {
  const entries = Object.entries(health);
  let truncated = entries.length > MAX_HEALTH_ENTRIES;
  const bounded: Record<string, string> = {};
  for (const [key, value] of entries.slice(0, MAX_HEALTH_ENTRIES)) {
    const text = String(value);
    if (key.length > MAX_HEALTH_KEY || text.length > MAX_HEALTH_VALUE) truncated = true;
    bounded[key.slice(0, MAX_HEALTH_KEY)] = text.slice(0, MAX_HEALTH_VALUE);
  }
  return { health: bounded, truncated };
}

function changedFields(before: AgentDescriptor, after: AgentDescriptor): string[] {
  return (Object.keys(after) as Array<keyof AgentDescriptor>).filter(
    (key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]),
  );
}
