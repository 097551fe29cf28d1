import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { useCliProcesses } from '../support/cli';
import { ExampleProcess } from '../support/exampleAgentProcess';
import { exampleBundle, requireBundles } from '../support/paths';
import { SchedulerClient } from '../support/taskAgents';

/** The example bundle built by `npm run build` from examples/workflowAgent.ts. */
const EXAMPLE_WORKFLOW_BUNDLE = exampleBundle('workflow');

/**
 * README "Workflows", "Run the example": the node-executing agent and the runner against the headless coordinator, as
 * a newcomer runs them (`npm start`, the printed environment, `npm run example:workflow` and `-- --run <file>`).
 */
describe('the workflow example (dist/example-workflow.js) against the headless coordinator', function () {
  this.timeout(60_000);
  const cli = useCliProcesses('sw4rm-int-example-workflow-');
  const children: ExampleProcess[] = [];

  requireBundles(EXAMPLE_WORKFLOW_BUNDLE);
  afterEach(async () => {
    for (const c of children.splice(0)) await c.kill();
  });

  /** Starts `node dist/example-workflow.js args…` with `env`, killed after the test if it is still running. */
  function start(env: Record<string, string>, args: string[]): ExampleProcess {
    const child = new ExampleProcess(EXAMPLE_WORKFLOW_BUNDLE, env, { args });
    children.push(child);
    return child;
  }

  it('runs examples/workflows/demo.yaml to COMPLETED: the review loops back to the draft once, then publish and report run', async () => {
    const env = { ...(await cli.serve(0)).env, SW4RM_AGENT_ID: 'wf-example-agent', SW4RM_WORK_MS: '20' };
    const agent = start(env, []);
    await agent.waitForLine(/registered as wf-example-agent/, 20_000);
    const runner = start(env, ['--run', 'examples/workflows/demo.yaml', '--data', '{"topic": "parsers"}']);
    const code = await runner.exited;
    assert.equal(code, 0, `${runner.output}\n--- agent:\n${agent.output}`);
    const out = runner.output;
    const expected = [
      /created workflow demo-[0-9a-f]{8} \(4 nodes\)$/m,
      /started demo-[0-9a-f]{8} with \{"topic": "parsers"\}$/m,
      /node draft: COMPLETED output \{"text":"draft v2"/m,
      /node review: COMPLETED output \{"text":"review v2","score":0\.8/m,
      /node report: COMPLETED output .*"inputs_seen":\["published","score"\]/m,
      /workflow demo-[0-9a-f]{8} COMPLETED$/m,
      /workflow_data \{"topic":"parsers","draft":\{"text":"draft v2"\},"review":\{"score":0\.8\},"published":"publish v1"\}$/m,
    ];
    for (const pattern of expected) assert.match(out, pattern);
    // The agent's side, in order: the first review scores 0.4 and loops back to the draft, which sees that score.
    const story = [
      /run wf:demo-[0-9a-f]{8}:draft:1: node draft .*inputs \{"topic":"parsers"\}/,
      /run wf:demo-[0-9a-f]{8}:review:1: node review .*inputs \{"text":"draft v1"\}/,
      /node review: done, result \{"text":"review v1","score":0\.4/,
      /run wf:demo-[0-9a-f]{8}:draft:2: node draft .*inputs \{"topic":"parsers","last_score":0\.4\}/,
      /run wf:demo-[0-9a-f]{8}:review:2: node review .*inputs \{"text":"draft v2"\}/,
      /run wf:demo-[0-9a-f]{8}:publish:1: /,
      /run wf:demo-[0-9a-f]{8}:report:1: node report .*inputs \{"published":"publish v1","score":0\.8\}/,
    ];
    let at = 0;
    for (const pattern of story) {
      const match = pattern.exec(agent.output.slice(at));
      assert.ok(match, `${pattern} after position ${at} of:\n${agent.output}`);
      at += match.index + match[0].length;
    }
    assert.doesNotMatch(`${out}\n${agent.output}`, /refused|failed/i);
    agent.signal('SIGTERM');
    assert.equal(await agent.exited, 0);
    assert.match(agent.output, /deregistered/);
  });

  it('closes a preempt_request for a node it finishes first (FULFILLED "completed", as the README\'s Tasks table asks)', async () => {
    const { cli: coordinator, env: printed } = await cli.serve(0);
    const env: Record<string, string> = { ...printed, SW4RM_AGENT_ID: 'wf-preempted-agent', SW4RM_WORK_MS: '1500' };
    const agent = start(env, []);
    await agent.waitForLine(/registered as wf-preempted-agent/, 20_000);
    const file = path.join(cli.dataDir(), 'one-node.yaml');
    fs.writeFileSync(file, 'workflow_id: preempt\nnodes:\n  only:\n    agent_id: type:example-workflow\n');
    const runner = start(env, ['--run', file]);
    const taskId = (await agent.waitForLine(/run (wf:preempt-[0-9a-f]{8}:only:1):/, 20_000))[1];
    const scheduler = new SchedulerClient(env.SW4RM_SCHEDULER_ADDR, env.SW4RM_TOKEN);
    try {
      const preempted = await scheduler.call<{ enqueued: boolean }>('RequestPreemption', {
        agent_id: 'wf-preempted-agent',
        task_id: taskId,
        reason: 'the test asks',
      });
      assert.equal(preempted.response.enqueued, true);
    } finally {
      scheduler.close();
    }
    assert.equal(await runner.exited, 0, `${runner.output}\n--- agent:\n${agent.output}`);
    agent.signal('SIGTERM');
    assert.equal(await agent.exited, 0);
    coordinator.signal('SIGTERM');
    await coordinator.exit();
    const store = CoordinatorStore.open(cli.dataDir());
    try {
      const requested = store.events
        .query({ eventType: 'task.preempt_requested' })
        .find((e) => e.correlationId === taskId);
      assert.ok(requested, 'the scheduler sent the preempt_request');
      const message = store.router.getMessage(String(requested.details.preempt_message_id));
      assert.equal(message?.state, 'FULFILLED', JSON.stringify(message?.history));
      assert.equal(store.scheduler.get(taskId)?.state, 'COMPLETED', 'the node finished, it was not requeued');
    } finally {
      store.close();
    }
    assert.match(agent.output, new RegExp(`preempt_request for ${taskId}: the run finished first`));
  });
});
