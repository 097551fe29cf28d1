import * as grpc from '@grpc/grpc-js';
import { serviceDefinition } from '../../src/server/protos';
import { canonicalDefinition } from './clients';

type WorkflowMethod = 'CreateWorkflow' | 'StartWorkflow' | 'GetWorkflowState' | 'ResumeWorkflow';
let methods: Record<WorkflowMethod, grpc.MethodDefinition<unknown, unknown>> | undefined;

/** workflow.proto NodeState / WorkflowState as proto-loader gives them (keepCase, enums as names). */
export interface NodeStateMessage { node_id: string; status: string; started_at: unknown; completed_at: unknown; output: string; error: string }
export interface WorkflowStateMessage {
  workflow_id: string;
  node_states: Record<string, NodeStateMessage>;
  workflow_data: string;
  started_at: unknown;
  completed_at: unknown;
  metadata: Record<string, string>;
}

/** A workflow node in proto field names (WorkflowNode). */
export interface NodeMessage {
  node_id?: string;
  agent_id: string;
  dependencies?: string[];
  trigger_type?: string;
  input_mapping?: Record<string, string>;
  output_mapping?: Record<string, string>;
  metadata?: Record<string, string>;
}

/** WorkflowService over a real grpc-js channel with one bearer token; answers with the trailer too. */
export class WorkflowClient {
  private readonly client: grpc.Client;

  constructor(address: string, private readonly token: string | undefined) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure());
    methods ??= serviceDefinition(canonicalDefinition(), 'sw4rm.workflow.WorkflowService') as unknown as Record<WorkflowMethod, grpc.MethodDefinition<unknown, unknown>>;
  }

  call<T>(method: WorkflowMethod, request: unknown): Promise<{ response: T; trailer: grpc.Metadata }> {
    const definition = methods![method];
    const metadata = new grpc.Metadata();
    if (this.token) metadata.set('authorization', `Bearer ${this.token}`);
    return new Promise((resolve, reject) => {
      let answered: { response: T } | undefined;
      let trailer: grpc.Metadata | undefined;
      const settle = () => {
        if (answered && trailer) resolve({ response: answered.response, trailer });
      };
      const call = this.client.makeUnaryRequest(definition.path, definition.requestSerialize, definition.responseDeserialize, request, metadata,
        { deadline: Date.now() + 10_000 }, (err, response) => {
          if (err) return reject(err);
          answered = { response: response as T };
          settle();
        });
      call.on('status', (status: grpc.StatusObject) => {
        trailer = status.metadata;
        settle();
      });
    });
  }

  async create(workflowId: string, nodes: Record<string, NodeMessage>, metadata: Record<string, string> = {}): Promise<{ workflow_id: string; success: boolean; error: string }> {
    const withIds = Object.fromEntries(Object.entries(nodes).map(([id, n]) => [id, { node_id: id, ...n }]));
    return (await this.call<{ workflow_id: string; success: boolean; error: string }>('CreateWorkflow', { definition: { workflow_id: workflowId, nodes: withIds, metadata } })).response;
  }

  async start(workflowId: string, data: unknown = {}): Promise<{ workflow_id: string; state: WorkflowStateMessage | null; success: boolean; error: string }> {
    return (await this.call<{ workflow_id: string; state: WorkflowStateMessage | null; success: boolean; error: string }>('StartWorkflow',
      { workflow_id: workflowId, workflow_data: typeof data === 'string' ? data : JSON.stringify(data) })).response;
  }

  async state(workflowId: string): Promise<{ state: WorkflowStateMessage | null; success: boolean; error: string }> {
    return (await this.call<{ state: WorkflowStateMessage | null; success: boolean; error: string }>('GetWorkflowState', { workflow_id: workflowId })).response;
  }

  async resume(workflowId: string, nodeId: string, data: unknown = ''): Promise<{ workflow_id: string; state: WorkflowStateMessage | null; success: boolean; error: string }> {
    return (await this.call<{ workflow_id: string; state: WorkflowStateMessage | null; success: boolean; error: string }>('ResumeWorkflow',
      { workflow_id: workflowId, node_id: nodeId, workflow_data: typeof data === 'string' ? data : JSON.stringify(data) })).response;
  }

  close(): void {
    this.client.close();
  }
}
