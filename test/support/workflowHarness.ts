import { strict as assert } from 'node:assert';
import type {
  NodeStatus,
  WorkflowDefinition,
  WorkflowDetail,
  WorkflowNodeDefinition,
} from '../../src/core/workflow/model';
import type { Workflows } from '../../src/core/workflow/workflows';
import { ctx, settle } from './routerHarness';
import { SchedulerHarness, type ReceivedCommand } from './schedulerHarness';

/** A node for a test definition: what is not given is empty (DEPENDENCY trigger, no mappings, no metadata). */
export type NodeInput = Partial<WorkflowNodeDefinition> & { readonly nodeId: string; readonly agentId: string };

export function definition(
  workflowId: string,
  nodes: readonly NodeInput[],
  metadata: Record<string, string> = {},
): WorkflowDefinition {
  return {
    workflowId,
    metadata,
    nodes: nodes.map((n) => ({
      nodeId: n.nodeId,
      agentId: n.agentId,
      dependencies: n.dependencies ?? [],
      trigger: n.trigger ?? 'DEPENDENCY',
      inputMapping: n.inputMapping ?? {},
      outputMapping: n.outputMapping ?? {},
      metadata: n.metadata ?? {},
    })),
  };
}

/** What a node's agent receives in its CONTROL run's params. */
export interface NodeParams {
  readonly workflow_id: string;
  readonly node_id: string;
  readonly run: number;
  readonly inputs: Record<string, unknown>;
}

/**
 * The scheduler harness (real store file, ManualClock, real router and scheduler, agents streaming their inbox and ACKing
 * CONTROL envelopes over the router) with the workflow engine: agents run nodes by answering their CONTROL `run`.
 */
export class WorkflowHarness extends SchedulerHarness {
  get workflows(): Workflows {
    return this.coordinator.workflows;
  }

  create(def: WorkflowDefinition): string {
    const result = this.workflows.create(def, 'operator', ctx('create'));
    assert.ok(result.ok, result.ok ? '' : JSON.stringify(result.issues));
    return result.workflowId;
  }

  start(workflowId: string, data: unknown = {}): WorkflowDetail {
    return this.workflows.start(workflowId, data === '' ? '' : JSON.stringify(data), 'operator', ctx('start'));
  }

  /** The one `run` the agent received since the last look, with its params. */
  run(agentId: string): ReceivedCommand & { readonly params: NodeParams } {
    const command = this.command(agentId, 'run');
    return { ...command, params: command.command.params as NodeParams };
  }

  /** The agent takes its one new run and completes it with `result` (none: a plain note); answers the params it got. */
  async finish(agentId: string, result?: unknown, extra: Record<string, unknown> = {}): Promise<NodeParams> {
    const run = this.run(agentId);
    await this.answer(agentId, run.messageId, 'RECEIVED');
    await this.answer(
      agentId,
      run.messageId,
      'FULFILLED',
      result === undefined ? { note: 'done', ...extra } : { result, ...extra },
    );
    return run.params;
  }

  /** The agent takes its one new run and fails it. */
  async failRun(agentId: string, code = 'VALIDATION_ERROR', note = 'could not do it'): Promise<NodeParams> {
    const run = this.run(agentId);
    await this.answer(agentId, run.messageId, 'RECEIVED');
    await this.answer(agentId, run.messageId, 'FAILED', { error_code: code, note });
    return run.params;
  }

  detail(workflowId: string): WorkflowDetail {
    const d = this.workflows.detail(workflowId);
    assert.ok(d, `no workflow ${workflowId}`);
    return d;
  }

  /** Each node's status, by node id. */
  statuses(workflowId: string): Record<string, NodeStatus> {
    return Object.fromEntries(this.detail(workflowId).nodes.map((n) => [n.state.nodeId, n.state.status]));
  }

  nodeOf(workflowId: string, nodeId: string) {
    const node = this.detail(workflowId).nodes.find((n) => n.state.nodeId === nodeId);
    assert.ok(node, `no node ${nodeId}`);
    return node;
  }

  data(workflowId: string): Record<string, unknown> {
    return JSON.parse(this.detail(workflowId).data) as Record<string, unknown>;
  }

  /** `from→to` of each workflow.node event of `nodeId` (all nodes when omitted), in order. */
  nodeMoves(workflowId: string, nodeId?: string): string[] {
    return this.events('workflow.node')
      .filter((e) => e.correlationId === workflowId && (nodeId === undefined || e.details.node_id === nodeId))
      .map(
        (e) =>
          `${nodeId === undefined ? `${String(e.details.node_id)}:` : ''}${String(e.details.from)}→${String(e.details.to)}`,
      );
  }

  stateMoves(workflowId: string): string[] {
    return this.events('workflow.state')
      .filter((e) => e.correlationId === workflowId)
      .map((e) => `${String(e.details.from)}→${String(e.details.to)}`);
  }

  /** The scheduler tasks of a node (every run), by task id prefix. */
  tasksOf(workflowId: string, nodeId: string): string[] {
    return this.scheduler
      .tasks({ includeFinished: true, finishedLimit: 10_000 })
      .map((t) => t.taskId)
      .filter((id) => id.startsWith(`wf:${workflowId}:${nodeId}:`))
      .sort();
  }

  async settled(): Promise<void> {
    await settle();
  }
}
