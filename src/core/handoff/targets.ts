import type { AgentDirectory, AgentRecord } from '../registry/model';
import type { HandoffTasks } from './deps';
import type { HandoffRecord } from './model';
import { missingCapabilities, rankCandidates, unavailability } from './routing';
import type { HandoffMemory } from './state';

export interface TargetDeps {
  readonly agents: AgentDirectory;
  readonly tasks: Pick<HandoffTasks, 'loadOf'>;
  readonly memory: HandoffMemory;
  /** HandoffOptions.maxPendingPerTarget. */
  readonly maxPendingPerTarget: number;
}

/** Who may be offered a handoff now: the candidates by capability and load (routing.ts ranks them), and why not. */
export class Targets {
  constructor(private readonly deps: TargetDeps) {}

  /** The capable agents not excluded, best first; agents with maxPendingPerTarget handoffs waiting are left out. */
  candidates(capabilities: readonly string[], exclude: ReadonlySet<string>) {
    const { carried, waiting } = this.deps.memory.loads();
    const full = [...waiting].filter(([, n]) => n >= this.deps.maxPendingPerTarget).map(([id]) => id);
    return rankCandidates({
      agents: this.deps.agents.list(),
      required: capabilities,
      exclude: full.length === 0 ? exclude : new Set([...exclude, ...full]),
      tasks: (id) => this.deps.tasks.loadOf(id),
      handoffs: (id) => carried.get(id) ?? 0,
    });
  }

  /** Why `agentId` may not be offered another handoff now (maxPendingPerTarget), or undefined. */
  fullUp(agentId: string, waiting = this.deps.memory.waitingFor(agentId)): string | undefined {
    return waiting >= this.deps.maxPendingPerTarget
      ? `${waiting} handoffs waiting for its answer (at most ${this.deps.maxPendingPerTarget})`
      : undefined;
  }

  /** Why no agent could be chosen, for the NO_ROUTE refusal: the registered agents that hold the capabilities and why each is out. */
  noRoute(capabilities: readonly string[], fromAgent: string, tried: ReadonlySet<string> = new Set()): string {
    const capable = this.deps.agents
      .list()
      .filter((a) => a.descriptor.agentId !== fromAgent && missingCapabilities(a, capabilities).length === 0);
    const wanted = capabilities.length > 0 ? `holding ${capabilities.join(', ')}` : '(no capability required)';
    if (capable.length === 0)
      return `no registered agent other than '${fromAgent}' ${capabilities.length > 0 ? `holds the capabilities ${capabilities.join(', ')}` : 'is registered'}`;
    const why = capable.slice(0, 5).map((a) => {
      const id = a.descriptor.agentId;
      if (tried.has(id)) return `${id}: tried already`;
      const cap = a.descriptor.maxConcurrentDelegations;
      return `${id}: ${unavailability(a) ?? (cap > 0 && this.deps.memory.loadOf(id) >= cap ? `at its max_concurrent_delegations (${cap})` : (this.fullUp(id) ?? 'available'))}`;
    });
    return `no agent ${wanted} can take the handoff now (${why.join('; ')}${capable.length > 5 ? `; and ${capable.length - 5} more` : ''})`;
  }

  /** Why a redirect target cannot take the handoff, or undefined when it can. */
  redirectRefusal(record: HandoffRecord, agentId: string, tried: ReadonlySet<string>): string | undefined {
    if (tried.has(agentId)) return agentId === record.fromAgent ? 'it is the requester' : 'it was tried already';
    const agent: AgentRecord | undefined = this.deps.agents.get(agentId);
    if (!agent) return 'not a registered agent';
    const missing = missingCapabilities(agent, record.capabilitiesRequired);
    if (missing.length > 0) return `it lacks ${missing.join(', ')}`;
    const down = unavailability(agent);
    if (down) return down;
    const cap = agent.descriptor.maxConcurrentDelegations;
    if (cap > 0 && this.deps.memory.loadOf(agentId) >= cap) return `it is at its max_concurrent_delegations (${cap})`;
    const full = this.fullUp(agentId);
    return full === undefined ? undefined : `it has ${full}`;
  }
}
