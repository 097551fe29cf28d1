import type { StoredEvent } from '../../log/model';
import type { AgentRecord } from '../../registry/model';
import type { AgentCounts, AgentsChange, RegistryApi } from '../sections/registry';
import type { InProcessHost } from './host';

/** CoordinatorApi's registry section over a coordinator in this thread. */
export function registrySection(host: InProcessHost): RegistryApi {
  const agentsChanged = host.emitter<AgentsChange>();
  host.subscribe(
    host.coordinator.registry.onDidChange((change) =>
      agentsChanged.fire(
        change.kind === 'left'
          ? { kind: 'left', agentId: change.agentId, reason: change.reason }
          : { kind: change.kind, agentId: change.agent.descriptor.agentId, agent: change.agent },
      ),
    ),
  );
  return {
    onDidChangeAgents: agentsChanged.event,

    agents(): Promise<AgentRecord[]> {
      return host.run((c) => c.registry.list());
    },

    agent(agentId: string): Promise<AgentRecord | undefined> {
      return host.run((c) => c.registry.get(agentId));
    },

    agentCounts(): Promise<AgentCounts> {
      return host.run((c) => ({ registered: c.registry.list().length, online: c.registry.onlineCount() }));
    },

    agentEvents(agentId: string, limit = 200): Promise<StoredEvent[]> {
      return host.run((c) => c.log.query({ agentId, limit: Math.max(1, Math.min(limit, 10_000)) }));
    },

    deregisterAgent(agentId: string, by: string): Promise<boolean> {
      return host.run((c) =>
        c.registry.deregister(agentId, `deregistered by ${by} from the editor`, { correlationId: c.ids.uuid() }),
      );
    },
  };
}
