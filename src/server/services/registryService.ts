import type * as grpc from '@grpc/grpc-js';
import type { Coordinator } from '../../core/coordinator';
import type { DescriptorInput } from '../../core/registry/descriptor';
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
      RegisterAgent: (call: grpc.ServerUnaryCall<{ agent?: AgentDescriptorMessage | null }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const agent = call.request.agent;
        if (!agent) {
          callback(null, { accepted: false, reason: 'VALIDATION_ERROR: the request carries no agent descriptor' });
          return;
        }
        answerWhenDurable(this.coordinator.store, callback, registry.register(toDescriptorInput(agent), callContext(call, ids)));
      },
      Heartbeat: (call: grpc.ServerUnaryCall<{ agent_id?: string; state?: string | number; health?: Record<string, string> }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const { agent_id = '', state = '', health = {} } = call.request;
        answerWhenDurable(this.coordinator.store, callback, { ok: registry.heartbeat(agent_id, String(state), health, callContext(call, ids)) });
      },
      DeregisterAgent: (call: grpc.ServerUnaryCall<{ agent_id?: string; reason?: string }, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const { agent_id = '', reason = '' } = call.request;
        answerWhenDurable(this.coordinator.store, callback, { ok: registry.deregister(agent_id, reason, callContext(call, ids)) });
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
