import type { Clock } from '../clock';
import type { Disposable } from '../events';
import type { EventLog } from '../log/eventLog';
import type { AgentDirectory } from '../registry/model';
import type { CoordinatorMailbox, CoordinatorOutbox } from '../router/model';
import type { ToolDescriptor, ToolProvider, ToolRequest } from './model';

/**
 * Calls to agents over the messaging plane (README, "Write a tool provider"): a TOOL_CALL envelope from `coordinator`
 * to the agent (correlation_id = call_id), TOOL_RESULT frames / a TOOL_ERROR back to `coordinator`, a CONTROL
 * `cancel_tool_call` on abort; the agent leaving or going unavailable fails its calls AGENT_UNAVAILABLE.
 * Owner: the engine part.
 */
export interface AgentToolTransport {
  /** Runs one call on `agentId` as `providerId`; frames through request.emit; answers the final result (JSON or Buffer). */
  callAgent(agentId: string, providerId: string, request: ToolRequest): Promise<unknown>;
  /** Whether the agent can take calls (registered, online, not shutting down). */
  agentAvailable(agentId: string): boolean;
}

export interface ToolTransportDeps {
  readonly outbox: CoordinatorOutbox;
  readonly mailbox: CoordinatorMailbox;
  readonly agents: AgentDirectory;
  readonly log: EventLog;
  readonly clock: Clock;
}

export class ToolTransport implements AgentToolTransport, Disposable {
  constructor(readonly deps: ToolTransportDeps) {
    throw new Error('not built yet');
  }

  callAgent(_agentId: string, _providerId: string, _request: ToolRequest): Promise<unknown> {
    throw new Error('not built yet');
  }

  agentAvailable(_agentId: string): boolean {
    throw new Error('not built yet');
  }

  /** The ToolProvider of a registered agent provider (provider_id = agent id). */
  providerFor(_providerId: string, _tools: readonly ToolDescriptor[]): ToolProvider {
    throw new Error('not built yet');
  }

  dispose(): void {
    throw new Error('not built yet');
  }
}
