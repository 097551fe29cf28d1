import type { ValidateFunction } from 'ajv';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { Event } from '../events';
import type { EventLog } from '../log/eventLog';
import type { AgentDirectory } from '../registry/model';
import type { ProviderInfo, ToolDescriptor, ToolProvider, ToolsChange, ToolsStorage } from './model';

/** A tool descriptor as connector.proto carries it (schemas as JSON text). */
export interface WireToolDescriptor {
  readonly tool_name?: string;
  readonly input_schema?: string;
  readonly output_schema?: string;
  readonly idempotent?: boolean;
  readonly needs_worktree?: boolean;
  readonly default_timeout_s?: number;
  readonly max_concurrency?: number;
  readonly side_effects?: string;
}

export type RegisterResult =
  | { readonly ok: true; readonly providerId: string; readonly tools: readonly ToolDescriptor[]; readonly warnings: readonly string[] }
  | { readonly ok: false; readonly code: string; readonly reason: string };

export interface ProviderCatalogDeps {
  readonly store: ToolsStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly agents: AgentDirectory;
  /** workspace, process, reasoning: never registrable by an agent. */
  readonly builtins: readonly ToolProvider[];
  /** The ToolProvider that reaches a registered agent provider (externalProvider.ts). */
  readonly external: (providerId: string, tools: readonly ToolDescriptor[]) => ToolProvider;
}

/**
 * The providers (RFC §18.1): the built-ins and the agents that registered as providers (ConnectorService.
 * RegisterProvider: provider_id = the agent's id; descriptors checked, schemas compiled by ajv — an invalid schema
 * refused with the path of the problem; persisted in tool_providers; replaced by a new registration; available while
 * the agent is online). Owner: the providers part.
 */
export class ProviderCatalog {
  readonly onDidChange: Event<ToolsChange>;

  constructor(readonly deps: ProviderCatalogDeps) {
    throw new Error('not built yet');
  }

  register(_agentId: string, _providerId: string, _tools: readonly WireToolDescriptor[], _ctx: CallContext): RegisterResult {
    throw new Error('not built yet');
  }

  /** A built-in or registered provider, or undefined. */
  get(_providerId: string): ToolProvider | undefined {
    throw new Error('not built yet');
  }

  /** The compiled input and output schema of a tool (output undefined when none was declared). */
  validators(_providerId: string, _toolName: string): { readonly input: ValidateFunction; readonly output: ValidateFunction | undefined } | undefined {
    throw new Error('not built yet');
  }

  infos(): ProviderInfo[] {
    throw new Error('not built yet');
  }

  dispose(): void {
    throw new Error('not built yet');
  }
}
