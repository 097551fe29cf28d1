import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import type { ToolDescriptor } from '../../core/tools/model';
import { toolErrorStatus } from './toolService';

interface ToolDescriptorMessage {
  tool_name: string;
  input_schema: string;
  output_schema: string;
  idempotent: boolean;
  needs_worktree: boolean;
  default_timeout_s: number;
  max_concurrency: number;
  side_effects: string;
}

/** A core descriptor as connector.proto's ToolDescriptor: the schemas as JSON text. */
export function descriptorMessage(tool: ToolDescriptor): ToolDescriptorMessage {
  return {
    tool_name: tool.name,
    input_schema: JSON.stringify({ description: tool.description, ...tool.inputSchema }),
    output_schema: JSON.stringify(tool.outputSchema),
    idempotent: tool.idempotent,
    needs_worktree: tool.needsWorktree,
    default_timeout_s: tool.defaultTimeoutS,
    max_concurrency: tool.maxConcurrency,
    side_effects: tool.sideEffects,
  };
}

/**
 * sw4rm.connector.ConnectorService (RFC §18.1): DescribeTools lists the tools of a built-in provider (`workspace`);
 * RegisterProvider (external providers) comes with the tools issue and answers UNIMPLEMENTED until then.
 */
export class ConnectorServiceAdapter {
  static readonly serviceName = 'sw4rm.connector.ConnectorService';

  constructor(private readonly coordinator: Coordinator) {}

  /** The built handlers; RegisterProvider is left to the server's UNIMPLEMENTED handler. */
  handlers(): grpc.UntypedServiceImplementation {
    const { tools } = this.coordinator;
    return {
      DescribeTools: (call: grpc.ServerUnaryCall<{ provider_id?: string }, { tools: ToolDescriptorMessage[] }>, callback: grpc.sendUnaryData<{ tools: ToolDescriptorMessage[] }>) => {
        try {
          callback(null, { tools: tools.describe(call.request.provider_id ?? '').map(descriptorMessage) });
        } catch (err) {
          callback(toolErrorStatus(err));
        }
      },
    };
  }
}
