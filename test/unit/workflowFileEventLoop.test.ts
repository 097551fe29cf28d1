import { strict as assert } from 'node:assert';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { DEFINITION_FILE_LIMITS } from '../../src/core/workflow/definitionFile';
import { describeHold, heldMs, measureHold } from '../support/loopHold';
import { WorkflowHarness } from '../support/workflowHarness';

/** A YAML definition of `nodes` nodes in a chain, each with `entries` metadata values, as large as `chars` allows. */
function yamlDefinition(id: string, nodes: number, entries: number, chars: number): string {
  const valueChars = Math.floor((chars / nodes - 80) / entries) - 12;
  const lines = [`workflow_id: ${id}`, 'nodes:'];
  for (let i = 0; i < nodes; i++) {
    lines.push(`  n${i}:`, '    agent_id: writer');
    if (i > 0) lines.push(`    dependencies: [n${i - 1}]`);
    lines.push('    metadata:');
    for (let k = 0; k < entries; k++) lines.push(`      k${k}: "${`${i}-${k}-`.padEnd(valueChars, 'x')}"`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Create Workflow from File with a YAML file at the 1 MiB limit (issue 30, item 1): `yaml` takes about 0.9 s per MiB,
 * and the file is the workspace's (agents write it). It is parsed on the definition worker: the coordinator's event loop
 * (this process's) is held at most 50 ms, at the limit, while the workflow is created. Before, ≈ 0.9 s.
 */
describe('Create Workflow from File holds the event loop at most 50 ms at the file limit (issue 30, item 1)', function () {
  this.timeout(60_000);
  let h: WorkflowHarness;
  let api: InProcessCoordinatorApi;

  beforeEach(() => {
    h = new WorkflowHarness();
    api = new InProcessCoordinatorApi(h.coordinator);
    h.agent('writer');
  });

  afterEach(() => {
    api.dispose();
    h.dispose();
  });

  it('creates a 500-node workflow from a 1 MiB YAML file, the parse off the event loop', async () => {
    // The worker is started (and `yaml` loaded there) first, as in an editor that has read a file before.
    assert.ok((await api.createWorkflowFromText(yamlDefinition('warm', 20, 4, 40_000), 'warm.yaml', 'editor:me')).ok);
    const holds: number[] = [];
    for (let k = 0; k < 3; k++) {
      const text = yamlDefinition(`big-${k}`, 500, 16, DEFINITION_FILE_LIMITS.maxChars - 1024);
      assert.ok(
        text.length <= DEFINITION_FILE_LIMITS.maxChars && text.length > DEFINITION_FILE_LIMITS.maxChars - 64 * 1024,
        `${text.length} characters`,
      );
      const { value: result, hold } = await measureHold(() =>
        api.createWorkflowFromText(text, `big-${k}.yaml`, 'editor:me'),
      );
      const holdMs = heldMs(hold);
      console.log(
        `      ${text.length} characters of YAML, 500 nodes #${k + 1}: ${result.ok ? 'created' : JSON.stringify(result.issues.slice(0, 1))} in ${hold.ms.toFixed(0)} ms, ${describeHold(hold)}`,
      );
      assert.ok(result.ok, JSON.stringify(!result.ok && result.issues.slice(0, 2)));
      holds.push(holdMs);
    }
    // The median of three: one run in about ten held 89 ms here on a quiet machine (a GC pause or the worker's
    // reply landing with the 500-node create), which no fix on the parse path removes; the parse itself was 0.36 s.
    const median = [...holds].sort((a, b) => a - b)[1];
    assert.ok(median <= 50, `held ${holds.map((h) => h.toFixed(1)).join(', ')} ms (median ${median.toFixed(1)})`);
  });
});
