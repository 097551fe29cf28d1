import type { AgentRecord } from '../registry/model';

/**
 * Capability routing (README, "Handoffs", "Routing"): which registered agents may be a handoff's next target, in
 * which order. Pure: the caller gives the agents, what they already carry, and who may not be chosen.
 */

/**
 * Lifecycle states (RFC §8) in which an agent cannot take on work: it has not finished starting, has failed, is
 * recovering, or is shutting down. Every other state can (an agent that is RUNNING a task may still accept a handoff:
 * whether it takes it is its own decision).
 */
export const UNAVAILABLE_STATES: ReadonlySet<string> = new Set([
  'INITIALIZING',
  'FAILED_STATE',
  'RECOVERING',
  'SHUTTING_DOWN',
]);

/** The required capabilities the agent does not hold (exact names, in the order asked). */
export function missingCapabilities(agent: AgentRecord, required: readonly string[]): string[] {
  const held = new Set(agent.descriptor.capabilities);
  return required.filter((c) => !held.has(c));
}

/** Why the agent is not available to take a handoff now (presence and lifecycle), or undefined when it is. */
export function unavailability(agent: AgentRecord): string | undefined {
  if (agent.presence !== 'online') return `${agent.presence} (no heartbeat within the debounce window)`;
  if (UNAVAILABLE_STATES.has(agent.state)) return `in lifecycle state ${agent.state}`;
  return undefined;
}

export interface Candidate {
  readonly agentId: string;
  /** Open scheduler tasks for it plus handoffs it is the target of (PENDING) or has accepted. */
  readonly load: number;
}

export interface RoutingInput {
  readonly agents: readonly AgentRecord[];
  readonly required: readonly string[];
  /** The requester and every agent tried already. */
  readonly exclude: ReadonlySet<string>;
  /** Open scheduler tasks for the agent (Scheduler.loadOf). */
  readonly tasks: (agentId: string) => number;
  /** Handoffs the agent is the PENDING target of, or has ACCEPTED. */
  readonly handoffs: (agentId: string) => number;
}

/**
 * The agents that could take the handoff, best first: registered, holding every required capability, online and in a
 * state that can take work, not excluded, below their descriptor's max_concurrent_delegations (when > 0, counted in
 * handoffs); ordered by load (fewest first), then by agent id.
 */
export function rankCandidates(input: RoutingInput): Candidate[] {
  const ranked: Candidate[] = [];
  for (const agent of input.agents) {
    const id = agent.descriptor.agentId;
    if (
      input.exclude.has(id) ||
      missingCapabilities(agent, input.required).length > 0 ||
      unavailability(agent) !== undefined
    )
      continue;
    const handoffs = input.handoffs(id);
    const cap = agent.descriptor.maxConcurrentDelegations;
    if (cap > 0 && handoffs >= cap) continue;
    ranked.push({ agentId: id, load: input.tasks(id) + handoffs });
  }
  return ranked.sort((a, b) => a.load - b.load || (a.agentId < b.agentId ? -1 : a.agentId > b.agentId ? 1 : 0));
}
