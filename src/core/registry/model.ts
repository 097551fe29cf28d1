import type { Event } from '../events';
import type { CallContext } from '../context';
import type { Transactions } from '../store/store';
import type { AgentDescriptor, AgentPresence } from './descriptor';

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
