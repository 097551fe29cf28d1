import type { CallContext } from '../../context';
import type { ProviderInfo, ToolCallRecord, ToolsChange } from '../../tools/model';
import type { ToolCallDetails, ToolCancelResult, ToolsApi } from '../sections/tools';
import type { InProcessHost } from './host';

/** The calls Recent calls asks for when no limit is given, and the most it may ask for. */
const DEFAULT_TOOL_CALLS = 100;
const MAX_TOOL_CALLS = 1_000;

/** CoordinatorApi's tools section over a coordinator in this thread. */
export function toolsSection(host: InProcessHost): ToolsApi {
  const toolsChanged = host.emitter<ToolsChange>();
  host.subscribe(
    host.coordinator.tools.onDidChange((change) => toolsChanged.fire({ kind: change.kind, id: change.id })),
  );
  return {
    onDidChangeTools: toolsChanged.event,

    toolProviders(): Promise<ProviderInfo[]> {
      return host.run((c) => c.tools.providers());
    },

    toolCalls(limit = DEFAULT_TOOL_CALLS): Promise<ToolCallRecord[]> {
      return host.run((c) =>
        c.tools.recentCalls(Math.max(1, Math.min(Math.floor(limit) || DEFAULT_TOOL_CALLS, MAX_TOOL_CALLS))),
      );
    },

    toolCallDetails(callId: string): Promise<ToolCallDetails | undefined> {
      return host.run((c) => {
        const record = c.tools.callRecord(callId);
        return record && { record, frames: [...c.tools.callFrames(callId)] };
      });
    },

    cancelToolCall(callId: string, by: string): Promise<ToolCancelResult> {
      return host.run((c) => {
        const record = c.tools.callRecord(callId);
        const ctx: CallContext = { correlationId: callId, principal: 'operator' };
        // The operator cancels as the caller would: the engine's own rules (CANCELLED / ALREADY_COMPLETED / NOT_FOUND).
        const result: ToolCancelResult = record
          ? c.tools.cancel(record.callerAgentId, record.providerId, callId, ctx)
          : { errorCode: 'NOT_FOUND', message: `no call '${callId.slice(0, 256)}' is kept` };
        c.log.record({
          correlationId: callId,
          actor: by,
          eventType: 'operator.tool_call_cancel',
          level: 'INFO',
          details: {
            call_id: callId.slice(0, 256),
            error_code: result.errorCode,
            ...(record
              ? { caller_agent_id: record.callerAgentId, provider_id: record.providerId, tool_name: record.toolName }
              : {}),
          },
        });
        return result;
      });
    },
  };
}
