import type { Event } from '../events';
import type { CallContext } from '../context';
import type { Transactions } from '../store/store';
import type { AgentDescriptor, AgentPresence } from './descriptor';

/** What other areas use of lifecycle.ts (it imports nothing of this area). */
export { isAgentState, pathTo, refusalReason, STATE_TIMEOUT_CODES } from './lifecycle';

/** One registered agent as persisted. */
export interface AgentRecord {
  readonly descriptor: AgentDescriptor;
  /** The agent's lifecycle state (RFC §8) as last reported, e.g. 'INITIALIZING' or 'RUNNABLE'. */
  readonly state: string;
  readonly registeredAt: number;
  readonly updatedAt: number;
  readonly lastHeartbeatAt: number | null;
  readonly health: Readonly<Record<string, string>>;
  /** Presence as last persisted; a fresh coordinator process reads every agent as 'disconnected'. */
  readonly presence: AgentPresence;
}

/** The registry's durable state. Implemented by SqliteAgentRepository. */
export interface AgentRepository {
  upsert(record: AgentRecord): void;
  get(agentId: string): AgentRecord | undefined;
  list(): AgentRecord[];
  delete(agentId: string): boolean;
}

/** What the registry is handed of the store: its own repository and transactions. */
export interface RegistryStorage extends Transactions {
  readonly agents: AgentRepository;
}

export type RegistryChange =
  | { readonly kind: 'joined' | 'updated' | 'presence' | 'state' | 'heartbeat'; readonly agent: AgentRecord }
  | { readonly kind: 'left'; readonly agentId: string; readonly reason: string };

/**
 * What other areas may know of the registry: who is registered, and that an agent was heard from. The router
 * takes this, not the Registry, so that no area reaches into another's state.
 */
export interface AgentDirectory {
  get(agentId: string): AgentRecord | undefined;
  /** Every registered agent, ordered by id (the router fans unaddressed messages out to them when so configured). */
  list(): readonly AgentRecord[];
  /** Any call from the agent shows it is alive (RFC §14): presence back to online, debounce restarted. */
  recordLiveness(agentId: string, ctx: CallContext): boolean;
  readonly onDidChange: Event<RegistryChange>;
}

/**
 * Why an agent's lifecycle state moves (RFC §8): the log event's `cause`, and for FAILED the RFC's error code
 * (init_timeout, resource_timeout, suspend_timeout, recovery_timeout, agent_shutdown_timeout, forced_preemption…).
 */
export interface TransitionCause {
  /** registration, heartbeat, task (the scheduler), operator, timeout, shutdown. */
  readonly by: 'registration' | 'heartbeat' | 'task' | 'operator' | 'timeout' | 'shutdown';
  readonly reason: string;
  readonly errorCode?: string;
  readonly taskId?: string;
  /**
   * The state's timeout for this entry only (ms), instead of the §8.3 default: the grace period of a ShutdownAgent
   * (SHUTTING_DOWN), a declared wait. 0 = none.
   */
  readonly timeoutMs?: number;
}

export type TransitionResult =
  { readonly ok: true; readonly agent: AgentRecord } | { readonly ok: false; readonly reason: string };

/**
 * The agent lifecycle (RFC §8.1–§8.4, Appendix C) as other areas drive it: only the transitions of `AGENT_TRANSITIONS`
 * (registry/lifecycle.ts), each one logged as one `agent.state_changed` event in the transaction that stores it; the
 * §8.3 state timeouts armed on the Clock. The scheduler moves agents RUNNABLE → SCHEDULED → RUNNING → COMPLETED →
 * RUNNABLE, RUNNING → SUSPENDED → RESUMED → RUNNING on preemption, and to SHUTTING_DOWN on ShutdownAgent.
 * Call inside the caller's transaction when the move belongs with its own writes.
 */
export interface AgentLifecycle extends AgentDirectory {
  /** Moves the agent to `to` if the table allows it from its current state; answers why not otherwise (nothing changes). */
  transition(agentId: string, to: string, cause: TransitionCause, ctx: CallContext): TransitionResult;
  /** Whether the table allows `from` → `to`. */
  allows(from: string, to: string): boolean;
  /** Takes the agent out of the registry (a shutdown ended); the router ends its deliveries as for any agent leaving. */
  deregister(agentId: string, reason: string, ctx: CallContext): boolean;
}
