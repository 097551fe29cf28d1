import { strict as assert } from 'node:assert';
import { InProcessCoordinatorApi, type WorkflowsChange } from '../../src/core/api';
import { rejection } from '../support/apiErrors';
import { WorkflowHarness } from '../support/workflowHarness';

const YAML = `workflow_id: review-flow
nodes:
  draft:
    agent_id: writer
    output_mapping:
      text: draft.text
  review:
    agent_id: reviewer
    dependencies: [draft]
    input_mapping:
      draft.text: text
    output_mapping:
      score: review.score
    metadata:
      route: "score > 0.5 ? 'publish' : 'rework'"
  publish:
    agent_id: writer
    dependencies: [review]
    trigger_type: MANUAL
  rework:
    agent_id: writer
    dependencies: [review]
`;

const CYCLIC = `{
  "workflow_id": "cyclic",
  "nodes": {
    "start": { "agent_id": "w" },
    "a": { "agent_id": "w", "dependencies": ["start", "b"] },
    "b": { "agent_id": "w", "dependencies": ["a"] }
  }
}
`;

describe('CoordinatorApi: the workflow section (what the Workflows view uses)', () => {
  let h: WorkflowHarness;
  let api: InProcessCoordinatorApi;

  beforeEach(() => {
    h = new WorkflowHarness();
    api = new InProcessCoordinatorApi(h.coordinator);
  });

  afterEach(() => {
    api.dispose();
    h.dispose();
  });

  it('creates from a YAML file, starts, shows nodes with inputs and outputs, runs a MANUAL node, with live changes', async () => {
    h.agent('writer');
    h.agent('reviewer');
    const changes: WorkflowsChange[] = [];
    api.onDidChangeWorkflows((c) => changes.push(c));
    const created = await api.createWorkflowFromText(YAML, 'review.yaml', 'editor:me');
    assert.deepEqual(created, { ok: true, workflowId: 'review-flow', warnings: [] });
    assert.deepEqual((await api.workflows()).map((w) => [w.workflowId, w.state, w.nodeCount]), [['review-flow', 'DEFINED', 4]]);
    const started = await api.startWorkflow('review-flow', '{"topic": "parsers"}', 'editor:me');
    assert.equal(started.summary.state, 'RUNNING');
    await h.finish('writer', { text: 'a draft' });
    const detail = await api.workflow('review-flow');
    const review = detail?.nodes.find((n) => n.definition.nodeId === 'review');
    assert.equal(review?.state.status, 'RUNNING');
    assert.deepEqual(JSON.parse(review?.inputs ?? ''), { text: 'a draft' }, 'the inputs it was given');
    assert.deepEqual(JSON.parse(detail?.nodes.find((n) => n.definition.nodeId === 'publish')?.inputs ?? ''), { topic: 'parsers', draft: { text: 'a draft' } },
      'the inputs it would be given now');
    await h.finish('reviewer', { score: 0.8 });
    const waiting = await api.workflow('review-flow');
    assert.equal(waiting?.summary.state, 'WAITING');
    assert.deepEqual(waiting?.nodes.map((n) => [n.definition.nodeId, n.state.status]), [['draft', 'COMPLETED'], ['review', 'COMPLETED'], ['publish', 'READY'], ['rework', 'SKIPPED']]);
    const ran = await api.runWorkflowNode('review-flow', 'publish', 'editor:me');
    assert.equal(ran.summary.state, 'RUNNING');
    await h.finish('writer');
    assert.equal((await api.workflow('review-flow'))?.summary.state, 'COMPLETED');
    assert.ok(changes.some((c) => c.workflowId === 'review-flow' && c.nodeId === 'publish'), 'node changes are announced');
    assert.ok(changes.some((c) => c.workflowId === 'review-flow' && c.nodeId === undefined && c.state === 'COMPLETED'), 'workflow changes are announced');
    assert.deepEqual(structuredClone(await api.workflow('review-flow')), await api.workflow('review-flow'), 'plain data');
  });

  it('answers a refused file with every issue placed in it, never throws; the same id with another definition is refused in place', async () => {
    const refused = await api.createWorkflowFromText(CYCLIC, 'cyclic.json', 'editor:me');
    assert.equal(refused.ok, false);
    const cycle = !refused.ok ? refused.issues.find((i) => i.code === 'workflow_cycle_detected') : undefined;
    assert.ok(cycle, JSON.stringify(refused));
    assert.ok(cycle.line > 0, 'placed in the file');
    assert.equal(await api.workflow('cyclic'), undefined);
    assert.ok((await api.createWorkflowFromText(YAML, 'review.yaml', 'editor:me')).ok);
    const again = await api.createWorkflowFromText(YAML, 'review.yaml', 'editor:me');
    assert.ok(again.ok, 'the same definition again: created (idempotent)');
    const other = await api.createWorkflowFromText(YAML.replace('agent_id: reviewer', 'agent_id: someone'), 'review.yaml', 'editor:me');
    assert.equal(other.ok, false);
    assert.equal(!other.ok && other.issues[0].code, 'ALREADY_EXISTS');
    const broken = await api.createWorkflowFromText('nodes: [unclosed', 'broken.yaml', 'editor:me');
    assert.equal(broken.ok, false);
  });

  it('refuses with CoordinatorApiError: not_found, invalid data, refused states; resume and cancel', async () => {
    assert.equal((await rejection(api.startWorkflow('nope', '', 'editor:me'))).code, 'not_found');
    await api.createWorkflowFromText(YAML, 'review.yaml', 'editor:me');
    const invalid = await rejection(api.startWorkflow('review-flow', '[1, 2]', 'editor:me'));
    assert.equal(invalid.code, 'invalid');
    assert.equal(invalid.sw4rmCode, 'VALIDATION_ERROR');
    assert.equal((await rejection(api.runWorkflowNode('review-flow', 'publish', 'editor:me'))).code, 'refused');
    assert.equal((await rejection(api.resumeWorkflow('review-flow', 'draft', '', 'editor:me'))).code, 'refused');
    h.agent('writer');
    await api.startWorkflow('review-flow', '', 'editor:me');
    assert.equal((await rejection(api.startWorkflow('review-flow', '', 'editor:me'))).sw4rmCode, 'FAILED_PRECONDITION');
    await h.failRun('writer');
    assert.equal((await api.workflow('review-flow'))?.summary.state, 'FAILED');
    const resumed = await api.resumeWorkflow('review-flow', 'draft', '{"hint": "shorter"}', 'editor:me');
    assert.equal(resumed.summary.state, 'RUNNING');
    assert.deepEqual(JSON.parse(resumed.data), { hint: 'shorter' });
    const cancelled = await api.cancelWorkflow('review-flow', 'enough', 'editor:me');
    assert.equal(cancelled.summary.state, 'CANCELLED');
    assert.equal((await rejection(api.cancelWorkflow('review-flow', '', 'editor:me'))).code, 'refused');
  });

  it('stops announcing once disposed', async () => {
    const seen: WorkflowsChange[] = [];
    api.onDidChangeWorkflows((c) => seen.push(c));
    api.dispose();
    h.workflows.create({ workflowId: 'later', nodes: [{ nodeId: 'a', agentId: 'w', dependencies: [], trigger: 'DEPENDENCY', inputMapping: {}, outputMapping: {}, metadata: {} }], metadata: {} },
      'operator', { correlationId: 'c' });
    assert.deepEqual(seen, []);
    assert.equal((await rejection(api.workflows())).code, 'stopped');
  });
});
