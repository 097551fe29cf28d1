import { isoUtc, type Clock } from '../clock';
import { Emitter, type Disposable, type Event } from '../events';
import type { EventLog } from '../log/eventLog';
import type { CallContext } from '../context';
import type { AgentLifecycle, AgentRecord, RegistryChange, RegistryStorage, TransitionCause, TransitionResult } from './model';
import { validateDescriptor, type AgentDescriptor, type AgentPresence, type DescriptorInput } from './descriptor';

/** Agent lifecycle states of RFC §8, by their canonical enum names. */
export const AGENT_STATES = [
  'INITIALIZING', 'RUNNABLE', 'SCHEDULED', 'RUNNING', 'WAITING', 'WAITING_RESOURCES', 'SUSPENDED',
  'RESUMED', 'COMPLETED', 'FAILED_STATE', 'SHUTTING_DOWN', 'RECOVERING',
] as const;
export type AgentState = (typeof AGENT_STATES)[number];

export interface RegistryOptions {
  /** How long without a heartbeat before an agent is shown unavailable. It is never deregistered for it. */
  readonly heartbeatDebounceMs: number;
  /** RFC §8.3: an agent still INITIALIZING after this long is FAILED with error_code=init_timeout. */
  readonly initTimeoutMs: number;
}

export const DEFAULT_REGISTRY_OPTIONS: RegistryOptions = { heartbeatDebounceMs: 30_000, initTimeoutMs: 60_000 };

export type { CallContext, RegistryChange };

export interface RegisterResult { readonly accepted: boolean; readonly reason: string }

/**
 * The registry (RFC §14): who is registered, with what descriptor, in which lifecycle state, and whether
 * they are heard from. Deregistration is explicit and the only way out; missed heartbeats only change
 * presence, after a debounce.
 */
export class Registry implements AgentLifecycle, Disposable {
  private readonly agents = new Map<string, AgentRecord>();
  private readonly presenceTimers = new Map<string, Disposable>();
  private readonly initTimers = new Map<string, Disposable>();
  private readonly changed = new Emitter<RegistryChange>();
  /** Join, leave, and every change an agent view needs to show. */
  readonly onDidChange: Event<RegistryChange> = this.changed.event;

  constructor(
    private readonly store: RegistryStorage,
    private readonly log: EventLog,
    private readonly clock: Clock,
    private readonly options: RegistryOptions = DEFAULT_REGISTRY_OPTIONS,
  ) {
    this.restore();
  }

  /** Agents from an earlier run come back registered but disconnected until they are heard from again. */
  private restore(): void {
    const now = this.clock.now();
    const restoredInitializing: Array<[string, number]> = [];
    this.store.transaction(() => {
      for (const stored of this.store.agents.list()) {
        const record: AgentRecord = { ...stored, presence: 'disconnected', updatedAt: now };
        this.agents.set(record.descriptor.agentId, record);
        if (record.state === 'INITIALIZING') {
          // The init timeout counts from when the agent entered INITIALIZING, across restarts.
          restoredInitializing.push([record.descriptor.agentId, Math.max(0, stored.updatedAt + this.options.initTimeoutMs - now)]);
        }
        if (stored.presence !== 'disconnected') {
          this.store.agents.upsert(record);
          this.log.record({
            correlationId: `restore:${record.descriptor.agentId}`,
            actor: 'registry',
            eventType: 'agent.presence_changed',
            details: { agent_id: record.descriptor.agentId, from: stored.presence, to: 'disconnected', cause: 'coordinator restarted' },
          });
        }
      }
    });
    for (const [agentId, remainingMs] of restoredInitializing) this.armInitTimer(agentId, remainingMs);
  }

  register(input: DescriptorInput, ctx: CallContext): RegisterResult {
    const verdict = validateDescriptor(input);
    if (!verdict.ok) {
      this.log.record({
        correlationId: ctx.correlationId, actor: 'registry', eventType: 'agent.registration_rejected', level: 'WARN',
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
        correlationId: ctx.correlationId, actor: id,
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
    this.armInitTimer(id);
    this.changed.fire({ kind: previous ? 'updated' : 'joined', agent: record });
    return { accepted: true, reason: verdict.warnings.length ? `accepted with warnings: ${verdict.warnings.join('; ')}` : '' };
  }

  /** Records a heartbeat. Answers false for an agent that is not registered. */
  heartbeat(agentId: string, reportedState: string, health: Record<string, string>, ctx: CallContext): boolean {
    const previous = this.agents.get(agentId);
    if (!previous) {
      this.log.record({
        correlationId: ctx.correlationId, actor: 'registry', eventType: 'agent.heartbeat_unknown', level: 'WARN',
        details: { agent_id: agentId },
      });
      return false;
    }
    const now = this.clock.now();
    const known = (AGENT_STATES as readonly string[]).includes(reportedState);
    const { health: boundedHealth, truncated } = boundHealth(health);
    const state = known ? reportedState : previous.state;
    const record: AgentRecord = { ...previous, state, health: boundedHealth, lastHeartbeatAt: now, updatedAt: now, presence: 'online' };
    this.store.transaction(() => {
      this.store.agents.upsert(record);
      if (truncated) {
        this.log.record({
          correlationId: ctx.correlationId, actor: agentId, eventType: 'agent.heartbeat_health_truncated', level: 'WARN',
          details: { agent_id: agentId, limits: { entries: MAX_HEALTH_ENTRIES, key_chars: MAX_HEALTH_KEY, value_chars: MAX_HEALTH_VALUE } },
        });
      }
      if (!known && reportedState !== '' && reportedState !== 'AGENT_STATE_UNSPECIFIED') {
        this.log.record({
          correlationId: ctx.correlationId, actor: agentId, eventType: 'agent.heartbeat_state_unknown', level: 'WARN',
          details: { agent_id: agentId, reported_state: reportedState, kept_state: previous.state },
        });
      }
      if (state !== previous.state) {
        this.log.record({
          correlationId: ctx.correlationId, actor: agentId, eventType: 'agent.state_changed',
          details: { agent_id: agentId, from: previous.state, to: state },
        });
      }
      if (previous.presence !== 'online') {
        this.log.record({
          correlationId: ctx.correlationId, actor: agentId, eventType: 'agent.presence_changed',
          details: { agent_id: agentId, from: previous.presence, to: 'online', cause: 'heartbeat' },
        });
      }
    });
    this.agents.set(agentId, record);
    this.armPresenceTimer(agentId);
    if (state !== 'INITIALIZING') this.disarm(this.initTimers, agentId);
    else if (previous.state !== 'INITIALIZING') this.armInitTimer(agentId);
    const kind = state !== previous.state ? 'state' : previous.presence !== 'online' ? 'presence' : 'heartbeat';
    this.changed.fire({ kind, agent: record });
    return true;
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
        correlationId: ctx.correlationId, actor: 'registry', eventType: 'agent.deregister_unknown', level: 'WARN',
        details: { agent_id: agentId, reason },
      });
      return false;
    }
    this.store.transaction(() => {
      this.store.agents.delete(agentId);
      this.log.record({
        correlationId: ctx.correlationId, actor: agentId, eventType: 'agent.deregistered',
        details: { agent_id: agentId, from_state: previous.state, reason },
      });
    });
    this.agents.delete(agentId);
    this.disarm(this.presenceTimers, agentId);
    this.disarm(this.initTimers, agentId);
    this.changed.fire({ kind: 'left', agentId, reason });
    return true;
  }

  get(agentId: string): AgentRecord | undefined {
    return this.agents.get(agentId);
  }

  // CONTRACT SKELETON (s6-api): helper C builds these in registry/lifecycle.ts.
  transition(_agentId: string, _to: string, _cause: TransitionCause, _ctx: CallContext): TransitionResult {
    throw new Error('Registry.transition: not built yet (s6 helper C)');
  }

  allows(_from: string, _to: string): boolean {
    throw new Error('Registry.allows: not built yet (s6 helper C)');
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
    for (const timer of [...this.presenceTimers.values(), ...this.initTimers.values()]) timer.dispose();
    this.presenceTimers.clear();
    this.initTimers.clear();
    this.changed.dispose();
  }

  private armPresenceTimer(agentId: string): void {
    this.disarm(this.presenceTimers, agentId);
    this.presenceTimers.set(agentId, this.clock.setTimer(this.options.heartbeatDebounceMs, () => this.safely(agentId, () => {
      this.presenceTimers.delete(agentId);
      this.setPresence(agentId, 'unavailable', `no heartbeat for ${this.options.heartbeatDebounceMs} ms`);
    })));
  }

  private armInitTimer(agentId: string, delayMs = this.options.initTimeoutMs): void {
    this.disarm(this.initTimers, agentId);
    this.initTimers.set(agentId, this.clock.setTimer(delayMs, () => this.safely(agentId, () => {
      this.initTimers.delete(agentId);
      const agent = this.agents.get(agentId);
      if (!agent || agent.state !== 'INITIALIZING') return;
      const record: AgentRecord = { ...agent, state: 'FAILED_STATE', updatedAt: this.clock.now() };
      this.store.transaction(() => {
        this.store.agents.upsert(record);
        this.log.record({
          correlationId: `timeout:${agentId}`, actor: 'registry', eventType: 'agent.state_changed', level: 'WARN',
          details: { agent_id: agentId, from: 'INITIALIZING', to: 'FAILED_STATE', error_code: 'init_timeout', timeout_ms: this.options.initTimeoutMs },
        });
      });
      this.agents.set(agentId, record);
      this.changed.fire({ kind: 'state', agent: record });
    })));
  }

  /** A timer's work must not throw into the event loop (it would end the CLI): a failure is logged instead. */
  private safely(agentId: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.internalError('registry', `timer:${agentId}`, err, { agent_id: agentId });
    }
  }

  private setPresence(agentId: string, presence: AgentPresence, cause: string): void {
    const agent = this.agents.get(agentId);
    if (!agent || agent.presence === presence) return;
    const record: AgentRecord = { ...agent, presence, updatedAt: this.clock.now() };
    this.store.transaction(() => {
      this.store.agents.upsert(record);
      this.log.record({
        correlationId: `presence:${agentId}`, actor: 'registry', eventType: 'agent.presence_changed', level: 'WARN',
        details: { agent_id: agentId, from: agent.presence, to: presence, cause, last_heartbeat_at: agent.lastHeartbeatAt === null ? null : isoUtc(agent.lastHeartbeatAt) },
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
  return (Object.keys(after) as Array<keyof AgentDescriptor>)
    .filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]));
}
