import type { CallContext } from '../context';
import type { AgentDirectory } from '../registry/model';
import type { CallInput, ToolDescriptor, ToolProvider, ToolRequest, ToolResult } from '../tools/model';
import type { AgentToolTransport } from '../tools/externalProvider';

/**
 * The inference engine (RFC §9.3): an agent whose descriptor declares reasoning_connectors and that takes TOOL_CALL
 * envelopes of provider `reasoning` (tools check_parallelism, evaluate_debate, summarize; README, "Connect an
 * inference engine"). ReasoningProvider is the built-in provider `reasoning` that forwards to it; InferenceEngine is
 * what the ReasoningProxy service and the scheduler's scorer ask — the engine when one is online, else the
 * deterministic built-in scorers (marked in notes), and Summarize FAILED_PRECONDITION. Owner: the reasoning part.
 */
export class ReasoningProvider implements ToolProvider {
  readonly id = 'reasoning';

  constructor(readonly agents: AgentDirectory, readonly transport: () => AgentToolTransport) {}

  describe(): readonly ToolDescriptor[] {
    throw new Error('not built yet');
  }

  available(): boolean {
    throw new Error('not built yet');
  }

  call(_request: ToolRequest): Promise<unknown> {
    throw new Error('not built yet');
  }
}

/** How the coordinator calls a tool as itself (Tools.call with caller `coordinator`). */
export type CoordinatorToolCall = (input: CallInput, ctx: CallContext) => Promise<ToolResult>;
