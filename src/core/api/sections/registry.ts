import type { Event } from '../../events';
import type { StoredEvent } from '../../log/model';
import type { AgentRecord } from '../../registry/model';

/**
 * The registered agents (RFC §6–§8): who is there, who was heard from, their log, deregistration. Part of
 * CoordinatorApi (coordinatorApi.ts).
 */
export interface RegistryApi {
  /** Every registered agent, ordered by agent id. */
  agents(): Promise<AgentRecord[]>;
  agent(agentId: string): Promise<AgentRecord | undefined>;
  /** How many agents are registered, and how many of them were heard from within the debounce window. */
  agentCounts(): Promise<AgentCounts>;
  /** The newest `limit` (200) log events about an agent (its own, and those naming it), oldest first. */
  agentEvents(agentId: string, limit?: number): Promise<StoredEvent[]>;
  /** Deregisters an agent through the registry (its inbox's messages end as when it leaves); false if it was not registered. */
  deregisterAgent(agentId: string, by: string): Promise<boolean>;
  readonly onDidChangeAgents: Event<AgentsChange>;
}

export interface AgentCounts {
  readonly registered: number;
  readonly online: number;
}

/** An agent joined, changed (descriptor, presence, state, heartbeat) or left. */
export type AgentsChange =
  | {
      readonly kind: 'joined' | 'updated' | 'presence' | 'state' | 'heartbeat';
      readonly agentId: string;
      readonly agent: AgentRecord;
    }
  | { readonly kind: 'left'; readonly agentId: string; readonly reason: string };
