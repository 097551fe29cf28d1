import type { Clock } from '../clock';
import type { ToolDescriptor, ToolProvider, ToolRequest } from './model';

/**
 * The built-in provider `process` (README, "The process provider"): `run_command` (argv, never a shell) in the caller's
 * bound worktree; budget_cpu_ms and budget_wall_ms enforced on the child's process tree (CPU_BUDGET_EXCEEDED /
 * WALL_TIMEOUT), stdout/stderr streamed as frames, the tree killed on cancel; network_policy DENY_ALL in a new network
 * namespace where the platform allows it, else refused unless acceptUnenforcedNetworkPolicy. Off unless enabled.
 * Owner: the process part.
 */
export interface ProcessProviderOptions {
  readonly enabled: boolean;
  readonly acceptUnenforcedNetworkPolicy: boolean;
}

export const DEFAULT_PROCESS_PROVIDER_OPTIONS: ProcessProviderOptions = { enabled: false, acceptUnenforcedNetworkPolicy: false };

export class ProcessProvider implements ToolProvider {
  readonly id = 'process';

  constructor(readonly options: ProcessProviderOptions, readonly clock: Clock) {}

  describe(): readonly ToolDescriptor[] {
    throw new Error('not built yet');
  }

  available(): boolean {
    return this.options.enabled;
  }

  call(_request: ToolRequest): Promise<unknown> {
    throw new Error('not built yet');
  }
}
