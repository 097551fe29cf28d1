import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { ToolCallError, type ToolErrorKind, type ToolResult } from '../../core/tools/model';
import { principalOf } from '../auth';
import { callContext } from '../callContext';

interface ToolCallMessage {
  call_id?: string;
  tool_name?: string;
  provider_id?: string;
  content_type?: string;
  args?: Buffer;
  stream?: boolean;
}

interface ToolFrameMessage {
  call_id: string;
  frame_no: number;
  final: boolean;
  content_type: string;
  data: Buffer;
  summary: Buffer;
}

const STATUS_OF: Record<ToolErrorKind, grpc.status> = {
  invalid_argument: grpc.status.INVALID_ARGUMENT,
  not_found: grpc.status.NOT_FOUND,
  permission_denied: grpc.status.PERMISSION_DENIED,
  failed_precondition: grpc.status.FAILED_PRECONDITION,
  resource_exhausted: grpc.status.RESOURCE_EXHAUSTED,
  unimplemented: grpc.status.UNIMPLEMENTED,
  internal: grpc.status.INTERNAL,
  deadline_exceeded: grpc.status.DEADLINE_EXCEEDED,
  unavailable: grpc.status.UNAVAILABLE,
  cancelled: grpc.status.CANCELLED,
  already_exists: grpc.status.ALREADY_EXISTS,
};

/** A refused or failed call as a gRPC status whose details start with the error code (`permission_denied: …`). */
export function toolErrorStatus(err: unknown): Partial<grpc.StatusObject> {
  if (err instanceof ToolCallError) {
    // UNIMPLEMENTED keeps the words every UNIMPLEMENTED answer of this coordinator has ("not implemented yet").
    return { code: STATUS_OF[err.kind], details: err.kind === 'unimplemented' ? err.message : err.details, metadata: new grpc.Metadata() };
  }
  return { code: grpc.status.INTERNAL, details: `INTERNAL_ERROR: ${err instanceof Error ? err.message : String(err)}`, metadata: new grpc.Metadata() };
}

/**
 * The agent a tool call acts as (README, "Workspace tools"): an agent credential's own agent; otherwise (the operator
 * credential, an enrolment credential, auth `none`) the agent named by metadata `sw4rm-agent-id`. The identity
 * check (identity.ts) has already refused a `sw4rm-agent-id` the credential may not act as.
 */
export function callerAgentOf(call: { readonly metadata: grpc.Metadata }): string {
  const principal = principalOf(call);
  if (principal?.kind === 'agent') return principal.agentId;
  const named = call.metadata.get('sw4rm-agent-id')[0];
  return typeof named === 'string' ? named.trim() : '';
}

function frameOf(result: ToolResult): ToolFrameMessage {
  return { call_id: result.callId, frame_no: 0, final: true, content_type: result.contentType, data: result.data, summary: Buffer.alloc(0) };
}

/**
 * sw4rm.tool.ToolService over the core's Tools (RFC §18): Call answers one final frame with the JSON result;
 * CallStream answers the same single final frame (the built-in tools do not stream); Cancel is best effort and
 * answers a ToolError saying what happened (built-in calls are never cancelled). Other providers: UNIMPLEMENTED.
 */
export class ToolServiceAdapter {
  static readonly serviceName = 'sw4rm.tool.ToolService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { tools, ids } = this.coordinator;
    const run = (call: grpc.ServerUnaryCall<ToolCallMessage, unknown> | grpc.ServerWritableStream<ToolCallMessage, unknown>): Promise<ToolResult> => {
      const r = call.request;
      return tools.call(callerAgentOf(call), {
        callId: r.call_id ?? '', providerId: r.provider_id ?? '', toolName: r.tool_name ?? '',
        contentType: r.content_type ?? '', args: r.args ?? Buffer.alloc(0),
      }, callContext(call, ids));
    };
    return {
      Call: (call: grpc.ServerUnaryCall<ToolCallMessage, ToolFrameMessage>, callback: grpc.sendUnaryData<ToolFrameMessage>) => {
        run(call).then((result) => callback(null, frameOf(result)), (err: unknown) => callback(toolErrorStatus(err)));
      },
      CallStream: (call: grpc.ServerWritableStream<ToolCallMessage, ToolFrameMessage>) => {
        run(call).then((result) => {
          call.write(frameOf(result));
          call.end();
        }, (err: unknown) => call.emit('error', toolErrorStatus(err)));
      },
      Cancel: (call: grpc.ServerUnaryCall<ToolCallMessage, { call_id: string; error_code: string; message: string }>, callback: grpc.sendUnaryData<{ call_id: string; error_code: string; message: string }>) => {
        const callId = call.request.call_id ?? '';
        try {
          const answer = tools.cancel(callerAgentOf(call), call.request.provider_id ?? '', callId);
          callback(null, { call_id: callId, error_code: answer.errorCode, message: answer.message });
        } catch (err) {
          callback(toolErrorStatus(err));
        }
      },
    };
  }
}
