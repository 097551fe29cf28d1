import { strict as assert } from 'node:assert';
import { OperatorConsole } from '../../src/cli/operatorConsole';
import { parseInvocationRequest } from '../../src/core/hitl/request';
import { RouterHarness, ctx } from '../support/routerHarness';

describe('operator console (sw4rm-coordinator --operator)', () => {
  let h: RouterHarness;
  let printed: string;
  let console: OperatorConsole;

  beforeEach(() => {
    h = new RouterHarness();
    printed = '';
    console = new OperatorConsole(h.coordinator.hitl, 'cli:test', (text) => {
      printed += text;
    });
  });

  afterEach(() => {
    console.dispose();
    h.dispose();
  });

  function open(summary = 'Delete fixtures'): string {
    const request = parseInvocationRequest(
      { reason_type: 'CONFLICT', summary },
      { requester: 'agent', correlationId: 'c', now: h.clock.now() },
    );
    return h.coordinator.hitl.open(request, { kind: 'rpc' }, ctx()).invocation.id;
  }

  it('is an attached operator while it runs: no fallback after 5 s', () => {
    const id = open();
    h.clock.advance(60_000);
    assert.equal(h.coordinator.hitl.get(id)?.state, 'pending');
    console.dispose();
    h.clock.advance(5_000);
    assert.equal(h.coordinator.hitl.get(id)?.state, 'timed_out', 'the operator left');
  });

  it('modifies with a JSON payload and a rationale after --', () => {
    const id = open();
    assert.equal(console.run(`modify ${id} {"paths": ["tmp/"]} -- only tmp`), `${id}: modify\n`);
    const decision = h.coordinator.hitl.get(id)?.decision;
    assert.deepEqual(
      [decision?.payload, decision?.rationale, decision?.origin.by],
      [{ paths: ['tmp/'] }, 'only tmp', 'cli:test'],
    );
    assert.match(console.run(`deny ${id} too late`), /^error: HITL invocation '.*' is already decided/);
  });

  it('refuses every decision without a rationale, and logs no decision', () => {
    const id = open();
    for (const line of [
      `approve ${id}`,
      `deny ${id}   `,
      `defer ${id}`,
      `modify ${id} {"a": 1}`,
      `modify ${id} {"a": 1} -- `,
    ]) {
      assert.match(console.run(line), /^error: a rationale is required: (approve|deny|defer|modify) .* <why>\n$/, line);
    }
    assert.equal(h.coordinator.hitl.get(id)?.state, 'pending');
    assert.deepEqual(h.coordinator.log.query({ eventType: 'hitl.decided' }), []);
    assert.match(console.run('help'), /approve <id> <rationale>\s+decide, saying why \(required\)/);
    assert.equal(console.run(`approve ${id} reviewed the diff`), `${id}: approve\n`);
    assert.equal(h.coordinator.hitl.get(id)?.decision?.rationale, 'reviewed the diff');
  });

  it('refuses bad commands with an error line and keeps going', () => {
    const id = open();
    assert.match(console.run(`modify ${id} {not json} -- x`), /^error: modify takes <id> <json>/);
    assert.match(console.run('approve'), /^error: give an invocation id/);
    assert.match(console.run('launch'), /^error: unknown command 'launch'/);
    assert.equal(h.coordinator.hitl.get(id)?.state, 'pending');
  });

  it('cancels, lists all, and pauses and resumes approvals', () => {
    const id = open();
    assert.equal(console.run(`cancel ${id} not needed`), `${id}: cancelled\n`);
    assert.equal(console.run('list'), 'no invocations\n');
    assert.match(
      console.run('list all'),
      new RegExp(`^${id}  CONFLICT  from agent  "Delete fixtures"  cancelled: deny by cli:test`),
    );
    console.run('pause');
    assert.equal(h.coordinator.hitl.policy.paused, true);
    console.run('resume');
    assert.equal(h.coordinator.hitl.policy.paused, false);
    assert.match(printed, new RegExp(`HITL pending: ${id}`));
  });
});
