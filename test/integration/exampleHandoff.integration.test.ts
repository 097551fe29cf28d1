import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { useCliProcesses } from '../support/cli';
import { REPO_ROOT } from '../support/paths';

/** The example bundle built by `npm run build` from examples/handoff.ts. */
const EXAMPLE_HANDOFF_BUNDLE = path.join(REPO_ROOT, 'dist', 'example-handoff.js');

/** Runs `node dist/example-handoff.js` with `env` until it exits; answers its output (stdout and stderr) and code. */
function runExample(env: Record<string, string>, deadlineMs = 30_000): Promise<{ output: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [EXAMPLE_HANDOFF_BUNDLE], { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    for (const stream of [child.stdout, child.stderr]) stream.setEncoding('utf8').on('data', (chunk: string) => { output += chunk; });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the handoff example did not exit within ${deadlineMs} ms:\n${output}`));
    }, deadlineMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ output, code });
    });
  });
}

/**
 * README "Handoffs (for agent authors)", "Run the example": a planner hands a security review to a reviewer chosen by
 * capability, against the headless coordinator, as a newcomer runs it (`npm start`, the printed environment,
 * `npm run example:handoff`).
 */
describe('the handoff example (dist/example-handoff.js) against the headless coordinator', function () {
  this.timeout(60_000);
  const cli = useCliProcesses('sw4rm-int-example-handoff-');

  before(() => assert.ok(fs.existsSync(EXAMPLE_HANDOFF_BUNDLE), `${EXAMPLE_HANDOFF_BUNDLE} is missing: run \`npm run build\` first`));

  it('requests by capability, the reviewer is notified, reads it pending, accepts; COMPLETED; the planner is refused afterwards', async () => {
    const coordinator = cli.run('--port', '0', '--data-dir', cli.dataDir());
    const env = await coordinator.environment();
    const { output, code } = await runExample(env);
    assert.equal(code, 0, output);
    const expected = [
      /^handoff-planner {2}registered handoff-planner-\w+, handoff-reviewer-\w+$/m,
      /^handoff-planner {2}RequestHandoff review \(capabilities security_review\): PENDING$/m,
      /^handoff-reviewer handoff_request review from handoff-planner: "needs a security review" \(\d+ bytes of application\/vnd\.sw4rm\.handoff-context\+json\)$/m,
      /^handoff-reviewer GetPendingHandoffs: 1 pending, (59|60) s left to answer; the context has 3 messages$/m,
      /^handoff-reviewer AcceptHandoff$/m,
      /^handoff-planner {2}handoff_status accepted: ACCEPTED by handoff-reviewer$/m,
      /^handoff-planner {2}CompleteHandoff: success true$/m,
      /^handoff-planner {2}handoff_status completed: COMPLETED by handoff-reviewer$/m,
      /^handoff-reviewer handoff_status completed: the work is mine; resuming after "\+ if \(token == expected\) \{ … \}"$/m,
      /^handoff-planner {2}SendMessage about the work: PERMISSION_DENIED: handoff review completed: handoff-reviewer owns this work$/m,
      /^handoff-planner {2}deregistered the two agents$/m,
    ];
    for (const pattern of expected) assert.match(output, pattern);
    assert.doesNotMatch(output, /refused:|failed:/i, 'nothing the example sent was refused');
  });
});
