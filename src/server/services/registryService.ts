import * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import { FIELD_LIMITS, identifierRefusal } from '../../core/fieldLimits';
import type { DescriptorInput } from '../../core/registry/descriptor';
import { principalOf } from '../auth';
import { callContext } from '../callContext';
import { answerWhenDurable } from '../durable';

/** Wire shapes of registry.proto as proto-loader hands them over (keepCase, enums as strings). */
interface AgentDescriptorMessage {
  agent_id?: string;
  name?: string;
  description?: string;
  capabilities?: string[];
  communication_class?: string | number;
  modalities_supported?: string[];
  reasoning_connectors?: string[];
  public_key?: Buffer;
  registration_type?: string | number;
  max_concurrent_delegations?: number;
}

/** sw4rm.registry.RegistryService: RegisterAgent, Heartbeat, DeregisterAgent over the core registry. */
export class RegistryServiceAdapter {
  static readonly serviceName = 'sw4rm.registry.RegistryService';

  constructor(private readonly coordinator: Coordinator) {}

  handlers(): grpc.UntypedServiceImplementation {
    const { registry, ids } = this.coordinator;
    return {
      RegisterAgent: (
        call: grpc.ServerUnaryCall<{ agent?: AgentDescriptorMessage | null }, unknown>,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        const agent = call.request.agent;
        if (!agent) {
          callback(null, { accepted: false, reason: 'VALIDATION_ERROR: the request carries no agent descriptor' });
          return;
        }
        const ctx = callContext(call, ids);
        const { store, credentials } = this.coordinator;
        // The registration and who owns the agent id from now on are one transaction. An enrolment credential that
        // enrols an agent gets it a credential of its own, once, in initial metadata `sw4rm-agent-credential`.
        const { result, minted } = store.transaction(() => {
          const result = registry.register(toDescriptorInput(agent), ctx);
          return {
            result,
            minted: result.accepted ? credentials.registered(principalOf(call), agent.agent_id ?? '', ctx) : undefined,
          };
        });
        if (minted === undefined) {
          answerWhenDurable(store, callback, result);
          return;
        }
        const metadata = new grpc.Metadata();
        metadata.set('sw4rm-agent-credential', minted.token);
        answerWhenDurable(store, callback, result, { call, metadata });
      },
      Heartbeat: (
        call: grpc.ServerUnaryCall<
          { agent_id?: string; state?: string | number; health?: Record<string, string> },
          unknown
        >,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        const { agent_id = '', state = '', health = {} } = call.request;
        const refusal = heartbeatRefusal(agent_id, String(state), health);
        if (refusal !== undefined)
          return callback({ code: grpc.status.INVALID_ARGUMENT, details: `VALIDATION_ERROR: ${refusal}` });
        answerWhenDurable(this.coordinator.store, callback, {
          ok: registry.heartbeat(agent_id, String(state), health, callContext(call, ids)),
        });
      },
      DeregisterAgent: (
        call: grpc.ServerUnaryCall<{ agent_id?: string; reason?: string }, unknown>,
        callback: grpc.sendUnaryData<unknown>,
      ) => {
        const { agent_id = '', reason = '' } = call.request;
        const refusal =
          identifierRefusal('agent_id', agent_id, FIELD_LIMITS.registry.agent_id) ??
          (reason.length > FIELD_LIMITS.registry.deregister_reason
            ? `reason is longer than ${FIELD_LIMITS.registry.deregister_reason} characters`
            : undefined);
        if (refusal !== undefined)
          return callback({ code: grpc.status.INVALID_ARGUMENT, details: `VALIDATION_ERROR: ${refusal}` });
        answerWhenDurable(this.coordinator.store, callback, {
          ok: registry.deregister(agent_id, reason, callContext(call, ids)),
        });
      },
    };
  }
}

function toDescriptorInput(message: AgentDescriptorMessage): DescriptorInput {
  return {
    agentId: message.agent_id,
    name: message.name,
    description: message.description,
    capabilities: message.capabilities,
    communicationClass: message.communication_class === undefined ? undefined : String(message.communication_class),
    modalitiesSupported: message.modalities_supported,
    reasoningConnectors: message.reasoning_connectors,
    publicKey: message.public_key,
    registrationType: message.registration_type === undefined ? undefined : String(message.registration_type),
    maxConcurrentDelegations: message.max_concurrent_delegations,
  };
}

/** Why a Heartbeat cannot be accepted (README "Limits"): it has no refusal field, so this is INVALID_ARGUMENT. */
function heartbeatRefusal(agentId: string, state: string, health: Record<string, string>): string | undefined {
  const limits = FIELD_LIMITS.registry;
  const idRefusal =
    identifierRefusal('agent_id', agentId, limits.agent_id) ??
    identifierRefusal('state', state, limits.heartbeat_state);
  if (idRefusal !== undefined) return idRefusal;
  const entries = Object.entries(health);
  if (entries.length > limits.health_entries)
    return `health has ${entries.length} entries; at most ${limits.health_entries} are allowed`;
  for (const [key, value] of entries) {
    if (key.length > limits.health_key) return `a health key is longer than ${limits.health_key} characters`;
    if (String(value).length > limits.health_value)
      return `health '${key.slice(0, 40)}' is longer than ${limits.health_value} characters`;
  }
  return undefined;
}
