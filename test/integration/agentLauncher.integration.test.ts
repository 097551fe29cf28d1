import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { EXIT_CANNOT_START, PLAN_VARIABLE, planFrom, programEnvironment } from '../../src/cli/agentLauncher';
import { LAUNCH_PLAN_VARIABLE } from '../../src/extension/launchModel';

/** The compiled starter, run as the editor's terminal runs dist/sw4rm-launch.js (a real process). */
const STARTER = path.resolve(__dirname, '../../src/cli/agentLauncher.js');

/** A program that prints what it got and exits with code 3. */
const PRINT =
  'process.stdout.write(JSON.stringify({ token: process.env.SW4RM_TOKEN, addr: process.env.SW4RM_REGISTRY_ADDR, plan: process.env.SW4RM_LAUNCH_PLAN ?? null, cwd: process.cwd(), args: process.argv.slice(1) })); process.exit(3)';

function run(env: NodeJS.ProcessEnv, cwd = process.cwd()) {
  return spawnSync(process.execPath, [STARTER], { env, cwd, encoding: 'utf8', timeout: 30_000 });
}

describe("the launched agents' starter (src/cli/agentLauncher.ts, dist/sw4rm-launch.js)", () => {
  it('is given its plan in the variable the editor sets', () => {
    assert.equal(LAUNCH_PLAN_VARIABLE, PLAN_VARIABLE);
  });

  it("runs the plan's argv with the plan's variables over the terminal's (the agent's own token, never the window's enrolment credential), and exits with its code", () => {
    const plan = {
      command: [process.execPath, '-e', PRINT, '--', 'a b', '$HOME'],
      env: { SW4RM_TOKEN: 'sw4rm_agent_own', SW4RM_AGENT_ID: 'coder-1' },
    };
    const result = run(
      {
        PATH: process.env.PATH,
        SW4RM_TOKEN: 'sw4rm_enrolment_of_the_window',
        SW4RM_REGISTRY_ADDR: '127.0.0.1:50051',
        [PLAN_VARIABLE]: JSON.stringify(plan),
      },
      path.dirname(STARTER),
    );
    assert.equal(result.status, 3, result.stderr);
    const seen = JSON.parse(result.stdout);
    assert.equal(seen.token, 'sw4rm_agent_own');
    assert.equal(seen.addr, '127.0.0.1:50051', "the terminal's other variables stay");
    assert.equal(seen.plan, null, 'the plan (with the token) is not passed on');
    assert.deepEqual(seen.args, ['a b', '$HOME'], 'arguments reach it as given: no shell');
    assert.equal(seen.cwd, path.dirname(STARTER));
  });

  it('says why it cannot start: no plan, a bad plan, a missing program', () => {
    const none = run({ PATH: process.env.PATH });
    assert.equal(none.status, EXIT_CANNOT_START);
    assert.match(none.stderr, /SW4RM_LAUNCH_PLAN is not set/);
    const bad = run({ PATH: process.env.PATH, [PLAN_VARIABLE]: JSON.stringify({ command: [], env: {} }) });
    assert.equal(bad.status, EXIT_CANNOT_START);
    assert.match(bad.stderr, /command must be a non-empty list of strings/);
    const missing = run({
      PATH: process.env.PATH,
      [PLAN_VARIABLE]: JSON.stringify({ command: ['sw4rm-no-such-program-xyz'], env: {} }),
    });
    assert.equal(missing.status, EXIT_CANNOT_START);
    assert.match(missing.stderr, /cannot start sw4rm-no-such-program-xyz: not found/);
  });

  it('reads plans and environments as pure functions', () => {
    assert.deepEqual(planFrom({ [PLAN_VARIABLE]: '{"command":["x"],"env":{"A":"1"}}' }), {
      command: ['x'],
      env: { A: '1' },
    });
    assert.deepEqual(planFrom({ [PLAN_VARIABLE]: 'not json' }), { problem: 'SW4RM_LAUNCH_PLAN is not JSON' });
    assert.deepEqual(planFrom({ [PLAN_VARIABLE]: '{"command":["x"],"env":{"A":1}}' }), {
      problem: 'SW4RM_LAUNCH_PLAN.env must map names to strings',
    });
    assert.deepEqual(
      programEnvironment(
        { A: 'terminal', B: 'kept', [PLAN_VARIABLE]: '{}', ELECTRON_RUN_AS_NODE: '1' },
        { command: ['x'], env: { A: 'plan' } },
      ),
      { A: 'plan', B: 'kept' },
      "the starter's ELECTRON_RUN_AS_NODE never reaches the agent",
    );
  });
});
