import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { useCliProcesses } from '../support/cli';
import { REPO_ROOT } from '../support/paths';
import { pollUntil } from '../support/poll';
import { SchedulerClient } from '../support/taskAgents';

/** The example bundle built by `npm run build` from examples/workflowAgent.ts. */
const EXAMPLE_WORKFLOW_BUNDLE = path.join(REPO_ROOT, 'dist', 'example-workflow.js');

/** Starts `node dist/example-workflow.js args…` with `env`; its output (stdout and stderr) collects in `output.text`. */
function start(env: Record<string, string>, args: string[]): { child: ChildProcess; output: { text: string }; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [EXAMPLE_WORKFLOW_BUNDLE, ...args], { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const output = { text: '' };
  for (const stream of [child.stdout!, child.stderr!]) stream.setEncoding('utf8').on('data', (chunk: string) => { output.text += chunk; });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve(code));
  });
  return { child, output, exited };
}

/**
 * README "Workflows", "Run the example": the node-executing agent and the runner against the headless coordinator, as
 * a newcomer runs them (`npm start`, the printed environment, `npm run example:workflow` and `-- --run <file>`).
 */
describe('the workflow example (dist/example-workflow.js) against the headless coordinator', function () {
  this.timeout(60_000);
  const cli = useCliProcesses('sw4rm-int-example-workflow-');
  const children: ChildProcess[] = [];

  before(() => assert.ok(fs.existsSync(EXAMPLE_WORKFLOW_BUNDLE), `${EXAMPLE_WORKFLOW_BUNDLE} is missing: run \`npm run build\` first`));
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  });

  it('runs examples/workflows/demo.yaml to COMPLETED: the review loops back to the draft once, then publish and report run', async () => {
    const coordinator = cli.run('--port', '0', '--data-dir', cli.dataDir());
    const env = { ...(await coordinator.environment()), SW4RM_AGENT_ID: 'wf-example-agent', SW4RM_WORK_MS: '20' };
    const agent = start(env, []);
    children.push(agent.child);
    await pollUntil('the agent registered', () => (/registered as wf-example-agent/.test(agent.output.text) ? true : undefined), 20_000);
    const runner = start(env, ['--run', 'examples/workflows/demo.yaml', '--data', '{"topic": "parsers"}']);
    children.push(runner.child);
    const code = await runner.exited;
    assert.equal(code, 0, `${runner.output.text}\n--- agent:\n${agent.output.text}`);
    const out = runner.output.text;
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
      const match = pattern.exec(agent.output.text.slice(at));
      assert.ok(match, `${pattern} after position ${at} of:\n${agent.output.text}`);
      at += match.index + match[0].length;
    }
    assert.doesNotMatch(`${out}\n${agent.output.text}`, /refused|failed/i);
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0);
    assert.match(agent.output.text, /deregistered/);
  });

  it('closes a preempt_request for a node it finishes first (FULFILLED "completed", as the README\'s Tasks table asks)', async () => {
    const coordinator = cli.run('--port', '0', '--data-dir', cli.dataDir());
    const env: Record<string, string> = { ...(await coordinator.environment()), SW4RM_AGENT_ID: 'wf-preempted-agent', SW4RM_WORK_MS: '1500' };
    const agent = start(env, []);
    children.push(agent.child);
    await pollUntil('the agent registered', () => (/registered as wf-preempted-agent/.test(agent.output.text) ? true : undefined), 20_000);
    const file = path.join(cli.dataDir(), 'one-node.yaml');
    fs.writeFileSync(file, 'workflow_id: preempt\nnodes:\n  only:\n    agent_id: type:example-workflow\n');
    const runner = start(env, ['--run', file]);
    children.push(runner.child);
    const taskId = await pollUntil('the node runs on the agent', () => /run (wf:preempt-[0-9a-f]{8}:only:1):/.exec(agent.output.text)?.[1], 20_000);
    const scheduler = new SchedulerClient(env.SW4RM_SCHEDULER_ADDR, env.SW4RM_TOKEN);
    try {
      const preempted = await scheduler.call<{ enqueued: boolean }>('RequestPreemption', { agent_id: 'wf-preempted-agent', task_id: taskId, reason: 'the test asks' });
      assert.equal(preempted.response.enqueued, true);
    } finally {
      scheduler.close();
    }
    assert.equal(await runner.exited, 0, `${runner.output.text}\n--- agent:\n${agent.output.text}`);
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0);
    coordinator.signal('SIGTERM');
    await coordinator.exit();
    const store = CoordinatorStore.open(cli.dataDir());
    try {
      const requested = store.events.query({ eventType: 'task.preempt_requested' }).find((e) => e.correlationId === taskId);
      assert.ok(requested, 'the scheduler sent the preempt_request');
      const message = store.router.getMessage(String(requested.details.preempt_message_id));
      assert.equal(message?.state, 'FULFILLED', JSON.stringify(message?.history));
      assert.equal(store.scheduler.get(taskId)?.state, 'COMPLETED', 'the node finished, it was not requeued');
    } finally {
      store.close();
    }
    assert.match(agent.output.text, new RegExp(`preempt_request for ${taskId}: the run finished first`));
  });
});
