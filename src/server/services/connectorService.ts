import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import type { ToolDescriptor } from '../../core/tools/model';
import type { WireToolDescriptor } from '../../core/tools/providers';
import { principalOf } from '../auth';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';
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
export function descriptorMessage(tool: ToolDescriptor, name: string = tool.name): ToolDescriptorMessage {
  return {
    tool_name: name,
    input_schema: JSON.stringify({ description: tool.description, ...tool.inputSchema }),
    output_schema: JSON.stringify(tool.outputSchema),
    idempotent: tool.idempotent,
    needs_worktree: tool.needsWorktree,
    default_timeout_s: tool.defaultTimeoutS,
    max_concurrency: tool.maxConcurrency,
    side_effects: (tool.sideEffectClasses ?? [tool.sideEffects]).join(','),
  };
}

interface RegisterRequest {
  provider_id?: string;
  tools?: WireToolDescriptor[];
}

/**
 * sw4rm.connector.ConnectorService (RFC §18.1) over the core's ProviderCatalog. RegisterProvider: an agent registers
 * itself (provider_id = its agent id) with its tools; a refusal answers ok=false with reason `<CODE>: <why>`
 * (VALIDATION_ERROR with the field path, ALREADY_EXISTS for a built-in id, PERMISSION_DENIED for another agent's id,
 * FAILED_PRECONDITION for an agent not registered); a call naming no agent at all is INVALID_ARGUMENT. DescribeTools:
 * one provider's tools (NOT_FOUND for an unknown id), or every provider's for an empty provider_id, each tool named
 * `<provider_id>/<tool_name>` then.
 */
export class ConnectorServiceAdapter {
  static readonly serviceName = 'sw4rm.connector.ConnectorService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { toolCatalog, store, ids } = this.coordinator;
    return {
      RegisterProvider: (
        call: grpc.ServerUnaryCall<RegisterRequest, unknown>,
        callback: grpc.sendUnaryData<{ ok: boolean; reason: string }>,
      ) => {
        try {
          const providerId = (call.request.provider_id ?? '').trim();
          // An agent credential acts as its agent; the operator credential or auth `none` act as the agent provider_id
          // names (the identity guard has checked the credential may).
          const principal = principalOf(call);
          const agentId = principal?.kind === 'agent' ? principal.agentId : providerId;
          if (agentId === '') {
            return callback({
              code: grpc.status.INVALID_ARGUMENT,
              details: 'VALIDATION_ERROR: provider_id must name the registering agent (its agent id)',
            });
          }
          toolCatalog.registerInTurns(agentId, providerId, call.request.tools ?? [], callContext(call, ids)).then(
            (result) => {
              if (!result.ok) return callback(null, { ok: false, reason: `${result.code}: ${result.reason}` });
              answerWhenDurable(store, callback, { ok: true, reason: result.warnings.join('; ') });
            },
            (err: unknown) =>
              callback({ code: grpc.status.INTERNAL, details: `INTERNAL_ERROR: ${(err as Error).message}` }),
          );
        } catch (err) {
          callback({ code: grpc.status.INTERNAL, details: `INTERNAL_ERROR: ${(err as Error).message}` });
        }
      },
      DescribeTools: (
        call: grpc.ServerUnaryCall<{ provider_id?: string }, { tools: ToolDescriptorMessage[] }>,
        callback: grpc.sendUnaryData<{ tools: ToolDescriptorMessage[] }>,
      ) => {
        try {
          callback(null, {
            tools: toolCatalog.describe(call.request.provider_id ?? '').map((t) => descriptorMessage(t)),
          });
        } catch (err) {
          callback(toolErrorStatus(err));
        }
      },
    };
  }
}
