import type { Event } from '../../events';
import type {
  ValidationIssue,
  WorkflowCreateResult,
  WorkflowDetail,
  WorkflowFileIssue,
  WorkflowNodeDetail,
  WorkflowsChange,
  WorkflowSummary,
} from '../../workflow/model';

export type {
  ValidationIssue,
  WorkflowCreateResult,
  WorkflowDetail,
  WorkflowFileIssue,
  WorkflowNodeDetail,
  WorkflowsChange,
  WorkflowSummary,
};

/** Workflows (RFC §17.7; README, "Workflows"). Part of CoordinatorApi (coordinatorApi.ts). */
export interface WorkflowsApi {
  /** Workflows: running and waiting first, then the most recently updated; at most `limit` (100; 1,000 at most). */
  workflows(limit?: number): Promise<WorkflowSummary[]>;
  /**
   * A workflow's definition, data and its nodes' states — the first `maxNodes` in the definition's order (every node
   * when omitted; summary.nodeCount and summary.counts cover all of them) — without any node's inputs; undefined for an
   * unknown id. The Workflows view asks for the nodes it shows: the answer costs that many nodes, not the workflow's size.
   */
  workflow(workflowId: string, maxNodes?: number): Promise<WorkflowDetail | undefined>;
  /**
   * Show Node Inputs and Outputs: one node with its inputs (as given to its last run, or, PENDING or READY, as it would be
   * given them now; none when SKIPPED), its workflow's summary and data; undefined for an unknown workflow or node.
   */
  workflowNode(workflowId: string, nodeId: string): Promise<WorkflowNodeDetail | undefined>;
  /**
   * Create Workflow from File: `text` is the file's JSON or YAML (workflow.proto's WorkflowDefinition in proto field
   * names), validated as CreateWorkflow validates; refusals come back with their place in the file, never thrown.
   */
  createWorkflowFromText(text: string, fileName: string, by: string): Promise<WorkflowCreateResult>;
  /**
   * StartWorkflow with initial data (JSON object text; '' = {}). Rejects `not_found` / `invalid` / `refused` (already started).
   * This and the three below answer the workflow with only its nodes that are not PENDING (at most 1,000).
   */
  startWorkflow(workflowId: string, data: string, by: string): Promise<WorkflowDetail>;
  /** Runs a MANUAL node that is READY (its dependencies COMPLETED). Rejects `not_found`, `refused` (not a MANUAL node or not ready). */
  runWorkflowNode(workflowId: string, nodeId: string, by: string): Promise<WorkflowDetail>;
  /** ResumeWorkflow: from `nodeId` again (it and what depends on it), with `data` (JSON object text) merged over workflow_data when given. */
  resumeWorkflow(workflowId: string, nodeId: string, data: string, by: string): Promise<WorkflowDetail>;
  /** Cancels a workflow: running tasks cancelled, nodes not finished SKIPPED, the workflow CANCELLED with `reason`. */
  cancelWorkflow(workflowId: string, reason: string, by: string): Promise<WorkflowDetail>;
  readonly onDidChangeWorkflows: Event<WorkflowsChange>;
}
