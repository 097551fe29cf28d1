import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { useCliProcesses, type CliProcess } from '../support/cli';
import { HitlClient } from '../support/hitlClient';

describe('headless HITL operator (sw4rm-coordinator --operator)', () => {
  const processes = useCliProcesses('sw4rm-int-operator-');
  let cli: CliProcess | undefined;

  async function start(args: string[], stdin = true): Promise<HitlClient> {
    const coordinatorArgs = ['--port', '0', '--data-dir', processes.dataDir(), ...args];
    cli = stdin ? processes.runWithInput(...coordinatorArgs) : processes.run(...coordinatorArgs);
    const env = await cli.environment();
    const client = new HitlClient(env.SW4RM_HITL_ADDR, env.SW4RM_TOKEN);
    processes.closeAfter(client);
    return client;
  }

  it('announces a pending invocation, lists it, and the typed decision reaches the agent', async () => {
    const hitl = await start(['--operator']);
    await cli!.waitForOutput(/# HITL operator cli:\S+ attached; 0 pending/);
    const call = hitl.decide(
      {
        reason_type: 'TOOL_PRIVILEGE_ESCALATION',
        context: {
          summary: 'run \u001b[31mdocker\u001b[0m as root',
          subject: { repo_id: 'repo', worktree_id: 'wt', task_id: 'build' },
        },
      },
      { agentId: 'builder' },
    );
    const [, id] = await cli!.waitForOutput(
      /HITL pending: (\S+)  TOOL_PRIVILEGE_ESCALATION  from builder  on repo\/wt\/build/,
    );
    assert.ok(!cli!.stdout.includes('\u001b['), 'terminal escapes from the agent are shown escaped');
    cli!.type('list');
    await cli!.waitForOutput(new RegExp(`\\n${id}  TOOL_PRIVILEGE_ESCALATION .*deadline `));
    cli!.type('approve nope fine');
    await cli!.waitForOutput(/error: no HITL invocation 'nope'/);
    cli!.type(`approve ${id} reviewed the Dockerfile`);
    const outcome = await call;
    assert.equal(outcome.action, 'approve');
    assert.equal(outcome.rationale, 'reviewed the Dockerfile');
    assert.match(outcome.trailers['sw4rm-hitl-decided-by'], /^cli:/);
    const auditFile = path.join(processes.dataDir(), 'audit.json');
    cli!.type(`audit ${auditFile}`);
    await cli!.waitForOutput(/audit written to /);
    const audit = JSON.parse(fs.readFileSync(auditFile, 'utf8')) as { audit: Array<{ kind: string; actor: string }> };
    assert.deepEqual(
      audit.audit.filter((e) => e.kind === 'decided').map((e) => e.actor.startsWith('cli:')),
      [true],
    );
  });

  it('takes a policy file; without an operator the fallback answers at once (unavailableAfterSeconds 0)', async () => {
    const policyFile = path.join(processes.dataDir(), 'policy.json');
    fs.writeFileSync(
      policyFile,
      JSON.stringify({
        unavailableAfterSeconds: 0,
        fallbacks: { CONNECTOR_APPROVAL: { policy: 'AUTO_DECIDE_THRESHOLD', threshold: 0.5 } },
      }),
    );
    const hitl = await start(['--hitl-policy', policyFile], false);
    const outcome = await hitl.decide(
      { reason_type: 'CONNECTOR_APPROVAL', context: { confidence: 0.6 } },
      { agentId: 'a' },
    );
    assert.equal(outcome.action, 'approve');
    assert.match(outcome.rationale, /^Fallback AUTO_DECIDE_THRESHOLD: no human operator is available/);
    assert.match(cli!.stderr, /WARN {2}coordinator hitl\.unavailable/);
  });

  it('exits 2 naming what is wrong in a bad policy file', async () => {
    const policyFile = path.join(processes.dataDir(), 'policy.json');
    fs.writeFileSync(policyFile, JSON.stringify({ fallbacks: { CONFLICT: 'YOLO' } }));
    cli = processes.run('--port', '0', '--data-dir', processes.dataDir(), '--hitl-policy', policyFile);
    assert.equal(await cli.exit(), 2);
    assert.match(
      cli.stderr,
      /--hitl-policy .*policy\.json: fallbacks\.CONFLICT\.policy must be one of DENY_BY_DEFAULT, AUTO_DECIDE_THRESHOLD, EXTEND_TIMEOUT/,
    );
  });
});
