import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { ToolCallError, type CallInput, type ToolFrame } from '../../core/tools/model';
import { parseExecutionPolicy, type ExecutionPolicyMessage } from '../../core/tools/policy';
import { principalOf } from '../auth';
import { callContext } from '../callContext';
import { statusOf } from '../errorStatus';

interface ToolCallMessage {
  call_id?: string;
  tool_name?: string;
  provider_id?: string;
  content_type?: string;
  args?: Buffer;
  policy?: ExecutionPolicyMessage | null;
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

/** A refused or failed call as a gRPC status whose details start with the error code (`permission_denied: …`). */
export function toolErrorStatus(err: unknown): Partial<grpc.StatusObject> {
  // UNIMPLEMENTED keeps the words every UNIMPLEMENTED answer of this coordinator has ("not implemented yet"): no code first.
  if (err instanceof ToolCallError && err.kind === 'unimplemented') return { ...statusOf(err), details: err.message };
  return statusOf(err);
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

function frameMessage(frame: ToolFrame): ToolFrameMessage {
  return {
    call_id: frame.callId,
    frame_no: frame.frameNo,
    final: frame.final,
    content_type: frame.contentType,
    data: frame.data,
    summary: frame.summary,
  };
}

/** The request as the engine takes it; an invalid policy is refused INVALID_ARGUMENT `VALIDATION_ERROR: execution_policy.…`. */
function callInput(request: ToolCallMessage, stream: boolean): CallInput {
  const policy = parseExecutionPolicy(request.policy);
  if ('refused' in policy) throw new ToolCallError('invalid_argument', 'VALIDATION_ERROR', policy.refused);
  return {
    callId: request.call_id ?? '',
    providerId: request.provider_id ?? '',
    toolName: request.tool_name ?? '',
    contentType: request.content_type ?? '',
    args: request.args ?? Buffer.alloc(0),
    policy,
    stream,
    via: 'grpc',
  };
}

/**
 * sw4rm.tool.ToolService over the core's call engine (RFC §18): Call answers the final frame (earlier frames are
 * counted, not returned); CallStream writes every frame as it comes and the terminal one, or ends with the error's
 * status (frames already written stay); the client going away (cancelled, its deadline passed) abandons the call of either
 * (Tools.abandon), freeing its slot. Cancel is
 * best effort and answers a ToolError: CANCELLED, NOT_FOUND or ALREADY_COMPLETED.
 */
export class ToolServiceAdapter {
  static readonly serviceName = 'sw4rm.tool.ToolService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { tools, ids } = this.coordinator;
    return {
      Call: (
        call: grpc.ServerUnaryCall<ToolCallMessage, ToolFrameMessage>,
        callback: grpc.sendUnaryData<ToolFrameMessage>,
      ) => {
        let done = false;
        try {
          const { callId } = tools.start(callerAgentOf(call), callInput(call.request, false), callContext(call, ids), {
            frame: () => undefined,
            end: (frame) => {
              if (done) return;
              done = true;
              callback(null, frameMessage(frame));
            },
            fail: (err) => {
              if (done) return;
              done = true;
              callback(toolErrorStatus(err));
            },
          });
          // The client went away (its deadline passed, it cancelled): the call is abandoned, its slot freed.
          call.on('cancelled', () => {
            if (done) return;
            done = true;
            tools.abandon(callId);
          });
        } catch (err) {
          done = true;
          callback(toolErrorStatus(err));
        }
      },
      CallStream: (call: grpc.ServerWritableStream<ToolCallMessage, ToolFrameMessage>) => {
        let done = false;
        try {
          const { callId } = tools.start(callerAgentOf(call), callInput(call.request, true), callContext(call, ids), {
            frame: (frame) => {
              if (!done) call.write(frameMessage(frame));
            },
            end: (frame) => {
              if (done) return;
              done = true;
              call.write(frameMessage(frame));
              call.end();
            },
            fail: (err) => {
              if (done) return;
              done = true;
              call.emit('error', toolErrorStatus(err));
            },
          });
          call.on('cancelled', () => {
            if (done) return;
            done = true;
            tools.abandon(callId);
          });
        } catch (err) {
          done = true;
          call.emit('error', toolErrorStatus(err));
        }
      },
      Cancel: (
        call: grpc.ServerUnaryCall<ToolCallMessage, { call_id: string; error_code: string; message: string }>,
        callback: grpc.sendUnaryData<{ call_id: string; error_code: string; message: string }>,
      ) => {
        const callId = call.request.call_id ?? '';
        try {
          const answer = tools.cancel(
            callerAgentOf(call),
            call.request.provider_id ?? '',
            callId,
            callContext(call, ids),
          );
          callback(null, { call_id: callId, error_code: answer.errorCode, message: answer.message });
        } catch (err) {
          callback(toolErrorStatus(err));
        }
      },
    };
  }
}
