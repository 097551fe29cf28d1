import { ServiceCaller } from './clients';

type WorkflowMethod = 'CreateWorkflow' | 'StartWorkflow' | 'GetWorkflowState' | 'ResumeWorkflow';

/** workflow.proto NodeState / WorkflowState as proto-loader gives them (keepCase, enums as names). */
export interface NodeStateMessage {
  node_id: string;
  status: string;
  started_at: unknown;
  completed_at: unknown;
  output: string;
  error: string;
}
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
export class WorkflowClient extends ServiceCaller<WorkflowMethod> {
  constructor(address: string, token: string | undefined) {
    super(address, token, 'sw4rm.workflow.WorkflowService');
  }

  async create(
    workflowId: string,
    nodes: Record<string, NodeMessage>,
    metadata: Record<string, string> = {},
  ): Promise<{ workflow_id: string; success: boolean; error: string }> {
    const withIds = Object.fromEntries(Object.entries(nodes).map(([id, n]) => [id, { node_id: id, ...n }]));
    return (
      await this.call<{ workflow_id: string; success: boolean; error: string }>('CreateWorkflow', {
        definition: { workflow_id: workflowId, nodes: withIds, metadata },
      })
    ).response;
  }

  async start(
    workflowId: string,
    data: unknown = {},
  ): Promise<{ workflow_id: string; state: WorkflowStateMessage | null; success: boolean; error: string }> {
    return (
      await this.call<{ workflow_id: string; state: WorkflowStateMessage | null; success: boolean; error: string }>(
        'StartWorkflow',
        { workflow_id: workflowId, workflow_data: typeof data === 'string' ? data : JSON.stringify(data) },
      )
    ).response;
  }

  async state(workflowId: string): Promise<{ state: WorkflowStateMessage | null; success: boolean; error: string }> {
    return (
      await this.call<{ state: WorkflowStateMessage | null; success: boolean; error: string }>('GetWorkflowState', {
        workflow_id: workflowId,
      })
    ).response;
  }

  async resume(
    workflowId: string,
    nodeId: string,
    data: unknown = '',
  ): Promise<{ workflow_id: string; state: WorkflowStateMessage | null; success: boolean; error: string }> {
    return (
      await this.call<{ workflow_id: string; state: WorkflowStateMessage | null; success: boolean; error: string }>(
        'ResumeWorkflow',
        {
          workflow_id: workflowId,
          node_id: nodeId,
          workflow_data: typeof data === 'string' ? data : JSON.stringify(data),
        },
      )
    ).response;
  }
}
