import { strict as assert } from 'node:assert';
import { countsOf, type NodeRecord, type NodeStatus, type WorkflowDetail } from '../../src/core/workflow/model';
import { serviceDefinition } from '../../src/server/protos';
import { STATE_ANSWER_BUDGET, stateMessage } from '../../src/server/services/workflowService';
import { canonicalDefinition } from '../support/clients';

/** A detail of `n` nodes, node `i` in `status(i)` with an output of `outputBytes` characters. */
function detailOf(n: number, status: (i: number) => NodeStatus, outputBytes = 0, data = '{}'): WorkflowDetail {
  const states: NodeRecord[] = Array.from({ length: n }, (_, i) => ({
    nodeId: `node-${String(i).padStart(6, '0')}`,
    status: status(i),
    startedAt: null,
    completedAt: null,
    output: status(i) === 'COMPLETED' ? 'o'.repeat(outputBytes) : '',
    error: '',
    waiting: status(i) === 'PENDING' ? `dependencies: node-${String(i - 1).padStart(6, '0')}` : '',
    taskId: '',
    runs: 0,
    readyAt: null,
    fireAt: null,
    loops: 0,
    invocationId: '',
    retries: 0,
    inputs: '',
  }));
  return {
    summary: {
      workflowId: 'big',
      state: 'RUNNING',
      reason: '',
      nodeCount: n,
      counts: countsOf(states),
      createdAt: 0,
      startedAt: 0,
      completedAt: null,
      updatedAt: 0,
    },
    definition: { workflowId: 'big', nodes: [], metadata: {} },
    warnings: [],
    data,
    nodes: states.map((state) => ({
      definition: {
        nodeId: state.nodeId,
        agentId: 'w',
        dependencies: [],
        trigger: 'DEPENDENCY',
        inputMapping: {},
        outputMapping: {},
        metadata: {},
      },
      state,
      inputs: '',
    })),
  };
}

/** The GetWorkflowState answer as grpc-js serialises it. */
function wireBytes(state: Record<string, unknown>): number {
  const method = serviceDefinition(canonicalDefinition(), 'sw4rm.workflow.WorkflowService').GetWorkflowState;
  return method.responseSerialize({ state, success: true, error: '' }).length;
}

describe('WorkflowState answers stay within what a gRPC client receives by default (4 MiB)', () => {
  it('a small workflow: every node, no node_states_omitted', () => {
    const message = stateMessage(detailOf(3, (i) => (i === 0 ? 'RUNNING' : 'PENDING')));
    assert.deepEqual(Object.keys(message.node_states as object), ['node-000000', 'node-000001', 'node-000002']);
    const metadata = message.metadata as Record<string, string>;
    assert.equal(metadata.node_states_omitted, undefined);
    assert.deepEqual(JSON.parse(metadata.counts), {
      PENDING: 2,
      READY: 0,
      RUNNING: 1,
      COMPLETED: 0,
      FAILED: 0,
      SKIPPED: 0,
    });
  });

  it('100,000 nodes, mostly PENDING: the PENDING ones are left out first and counted', () => {
    const detail = detailOf(100_000, (i) => (i < 10 ? 'COMPLETED' : i < 20 ? 'RUNNING' : 'PENDING'), 100);
    const message = stateMessage(detail);
    assert.equal(Object.keys(message.node_states as object).length, 20);
    assert.equal((message.metadata as Record<string, string>).node_states_omitted, '99980');
    assert.ok(wireBytes(message) < 4 * 1024 * 1024);
    assert.ok(wireBytes(stateMessage(detail, Infinity)) > 4 * 1024 * 1024, 'all of them would not fit');
  });

  it('100,000 nodes that all ran, with outputs and 1 MiB of workflow_data: the first ones that fit, the rest counted', () => {
    const detail = detailOf(100_000, () => 'COMPLETED', 200, JSON.stringify({ blob: 'd'.repeat(1024 * 1024 - 20) }));
    const message = stateMessage(detail);
    const kept = Object.keys(message.node_states as object);
    assert.ok(kept.length > 1_000 && kept.length < 100_000, `${kept.length} kept`);
    assert.equal(kept[0], 'node-000000', "in the definition's order");
    assert.equal((message.metadata as Record<string, string>).node_states_omitted, String(100_000 - kept.length));
    const bytes = wireBytes(message);
    assert.ok(bytes <= STATE_ANSWER_BUDGET + 64 * 1024 && bytes < 4 * 1024 * 1024, `${bytes} bytes`);
  });
});
