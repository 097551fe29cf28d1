import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Disposable } from '../../src/core/events';
import type { HitlInvocation } from '../../src/core/hitl/model';
import { DEFAULT_HITL_POLICY, parsePolicy, type HitlPolicy } from '../../src/core/hitl/policy';
import type { HookAnswer, HookCli } from '../../src/core/toolApproval/model';
import { TOOL_APPROVAL_COMPONENT, ToolApprovals } from '../../src/core/toolApproval/toolApprovals';
import type { WorktreeLocator } from '../../src/core/worktree/model';
import { RouterHarness, ctx } from '../support/routerHarness';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const AGENT = 'claude-1';

function policy(input: Parameters<typeof parsePolicy>[0]): HitlPolicy {
  const parsed = parsePolicy(input);
  assert.deepEqual(parsed.problems, []);
  return parsed.policy;
}

describe('tool approvals: ToolApprovals.decide (ManualClock, real HITL service and store)', () => {
  let h: RouterHarness;
  let dir: string;
  let root: string;
  let operator: Disposable | undefined;
  let approvals: ToolApprovals;
  const worktreeOf = new Map<string, string>();

  const locator: WorktreeLocator = {
    worktreePathOf: (agentId) => worktreeOf.get(agentId),
    placeOf: (agentId) =>
      worktreeOf.has(agentId) ? { repoId: 'repo', worktreeId: 'wt-1', branch: 'sw4rm/wt-1' } : undefined,
  };

  function start(hitlPolicy: HitlPolicy = policy({ defaultDeadlineSeconds: 3600 })): void {
    h = new RouterHarness({}, {}, hitlPolicy);
    operator = h.coordinator.hitl.attachOperator('editor:alice');
    approvals = new ToolApprovals({
      hitl: h.coordinator.hitl,
      log: h.coordinator.log,
      clock: h.clock,
      locator,
      ids: h.coordinator.ids,
    });
  }

  beforeEach(() => {
    dir = makeTempDir('sw4rm-toolapprovals-');
    root = path.join(dir, 'wt');
    fs.mkdirSync(path.join(root, 'src'), { recursive: true });
    fs.writeFileSync(path.join(root, 'src', 'app.ts'), 'export function f() {\n  return 1;\n}\n');
    worktreeOf.clear();
    worktreeOf.set(AGENT, root);
    start();
  });

  afterEach(() => {
    operator?.dispose();
    h.dispose();
    removeTempDir(dir);
  });

  /** The next invocation opened (decide() reads the file system before it opens one). */
  function nextOpened(): Promise<HitlInvocation> {
    return new Promise((resolve) => {
      const subscription = h.coordinator.hitl.onDidChange((change) => {
        if (change.kind === 'opened') {
          subscription.dispose();
          resolve(change.invocation);
        }
      });
    });
  }

  function decide(cli: HookCli, body: unknown, signal?: AbortSignal): Promise<HookAnswer> {
    return approvals.decide(cli, body, AGENT, ctx('corr-hook'), signal);
  }

  const claude = (tool_name: string, tool_input: Record<string, unknown>) => ({
    hook_event_name: 'PreToolUse',
    cwd: root,
    tool_name,
    tool_input,
    tool_use_id: 'toolu_1',
  });

  it('answers a read inside the worktree at once, logged as one event, no invocation', async () => {
    const answer = await decide('claude-code', claude('Read', { file_path: path.join(root, 'src', 'app.ts') }));
    assert.equal(answer.decision, 'allow');
    assert.equal(answer.decidedBy, 'rule:builtin:read-inside');
    assert.equal((answer.stdout.hookSpecificOutput as Record<string, unknown>).permissionDecision, 'allow');
    assert.equal(h.coordinator.hitl.list().length, 0);
    const [event, ...more] = h.events('tool_approval.decided');
    assert.equal(more.length, 0);
    assert.equal(event.details.agent_id, AGENT);
    assert.equal(event.details.decision, 'allow');
    assert.equal(event.correlationId, 'corr-hook');
  });

  it('denies a path outside the worktree at once (a "../" escape and a symbolic link)', async () => {
    fs.symlinkSync(dir, path.join(root, 'up'));
    for (const file of ['../outside.txt', 'up/outside.txt']) {
      const answer = await decide('gemini', {
        hook_event_name: 'BeforeTool',
        tool_name: 'write_file',
        tool_input: { file_path: file, content: 'x' },
      });
      assert.deepEqual(answer.stdout, { decision: 'deny', reason: answer.reason });
      assert.match(answer.reason, /outside the agent's worktree/);
    }
    assert.equal(h.coordinator.hitl.list().length, 0);
    assert.equal(h.events('tool_approval.decided').length, 2);
  });

  it("asks in the editor for a write: SECURITY_APPROVAL with the tool, its arguments and the diff; a person's approve allows", async () => {
    const opened = nextOpened();
    const pending = decide(
      'claude-code',
      claude('Write', { file_path: 'src/app.ts', content: 'export function f() {\n  return 2;\n}\n' }),
    );
    const invocation = await opened;
    assert.equal(invocation.reasonType, 'SECURITY_APPROVAL');
    assert.equal(invocation.requester, AGENT);
    assert.deepEqual(invocation.origin, { kind: 'internal', component: TOOL_APPROVAL_COMPONENT });
    assert.deepEqual(invocation.subject, { repoId: 'repo', worktreeId: 'wt-1', taskId: '' });
    assert.equal(invocation.context.facts.tool, 'Write');
    assert.deepEqual((invocation.context.facts.input as Record<string, unknown>).file_path, 'src/app.ts');
    const [diff] = invocation.context.diffs;
    assert.equal(diff.title, 'Write src/app.ts');
    assert.match(diff.unified!, /^--- a\/src\/app\.ts/m);
    assert.match(diff.unified!, /^-  return 1;$/m);
    assert.match(diff.unified!, /^\+  return 2;$/m);
    h.coordinator.hitl.decide(invocation.id, { action: 'approve', rationale: 'fine' }, 'editor:alice', ctx());
    const answer = await pending;
    assert.deepEqual(
      [answer.decision, answer.decidedBy, answer.invocationId],
      ['allow', 'person:editor:alice', invocation.id],
    );
    assert.equal(answer.reason, 'Approved by editor:alice: fine');
    const [event] = h.events('tool_approval.answered');
    assert.equal(event.details.invocation_id, invocation.id);
    assert.equal(event.details.decided_by, 'person:editor:alice');
  });

  it("an Edit shows the replacement in the current file; a new file is diffed against /dev/null; a person's deny carries the rationale", async () => {
    let opened = nextOpened();
    let pending = decide('copilot', {
      toolName: 'edit',
      toolArgs: JSON.stringify({ path: 'src/app.ts', old_str: 'return 1;', new_str: 'return 42;' }),
    });
    let invocation = await opened;
    assert.match(invocation.context.diffs[0].unified!, /^-  return 1;\n\+  return 42;$/m);
    h.coordinator.hitl.decide(invocation.id, { action: 'deny', rationale: 'keep it at 1' }, 'editor:alice', ctx());
    let answer = await pending;
    assert.deepEqual(answer.stdout, {
      permissionDecision: 'deny',
      permissionDecisionReason: 'Denied by editor:alice: keep it at 1',
    });

    opened = nextOpened();
    pending = decide('claude-code', claude('Write', { file_path: 'docs/new.md', content: 'hello\n' }));
    invocation = await opened;
    assert.equal(invocation.context.diffs[0].title, 'Write (new file) docs/new.md');
    assert.match(invocation.context.diffs[0].unified!, /^--- \/dev\/null/m);
    assert.match(invocation.context.diffs[0].unified!, /^\+hello$/m);
    h.coordinator.hitl.decide(invocation.id, { action: 'approve', rationale: 'ok' }, 'editor:alice', ctx());
    answer = await pending;
    assert.equal(answer.decision, 'allow');
  });

  it('a shell command is TOOL_PRIVILEGE_ESCALATION; modify answers a deny with the edited arguments, defer answers ask', async () => {
    let opened = nextOpened();
    let pending = decide('claude-code', claude('Bash', { command: 'git push --force origin main' }));
    let invocation = await opened;
    assert.equal(invocation.reasonType, 'TOOL_PRIVILEGE_ESCALATION');
    assert.equal(invocation.context.facts.command, 'git push --force origin main');
    assert.equal(invocation.context.facts.rule, 'builtin:ask-command git push*');
    h.coordinator.hitl.decide(
      invocation.id,
      { action: 'modify', rationale: 'no force', payload: { command: 'git push origin main' } },
      'editor:alice',
      ctx(),
    );
    let answer = await pending;
    assert.equal(answer.decision, 'deny');
    assert.match(answer.reason, /no force\. Retry with these arguments: \{"command":"git push origin main"\}/);

    opened = nextOpened();
    pending = decide('claude-code', claude('Bash', { command: 'ls' }));
    invocation = await opened;
    h.coordinator.hitl.decide(invocation.id, { action: 'defer', rationale: 'your call' }, 'editor:alice', ctx());
    answer = await pending;
    assert.equal(answer.decision, 'ask');
    assert.equal((answer.stdout.hookSpecificOutput as Record<string, unknown>).permissionDecision, 'ask');
  });

  it("a deadline fallback is not a person's denial: the answer is ask (Gemini: a deny saying nobody decided)", async () => {
    h.dispose();
    operator?.dispose();
    start(policy({ defaultDeadlineSeconds: 60 }));
    const opened = nextOpened();
    const pending = decide('claude-code', claude('Bash', { command: 'make' }));
    const invocation = await opened;
    h.clock.advance(60_000);
    const answer = await pending;
    assert.equal(h.coordinator.hitl.get(invocation.id)?.state, 'timed_out');
    assert.equal(h.coordinator.hitl.get(invocation.id)?.decision?.action, 'deny', 'DENY_BY_DEFAULT settled it…');
    assert.equal(answer.decision, 'ask', '…but the CLI is told to ask its user');
    assert.equal(answer.decidedBy, 'fallback');
    assert.match(answer.reason, /Nobody decided .*the deadline passed/);

    const openedGemini = nextOpened();
    const gemini = decide('gemini', { tool_name: 'run_shell_command', tool_input: { command: 'make' } });
    await openedGemini;
    h.clock.advance(60_000);
    const geminiAnswer = await gemini;
    assert.equal(geminiAnswer.stdout.decision, 'deny');
    assert.match(String(geminiAnswer.stdout.reason), /nobody approved .* not a person's denial/);
  });

  describe("an ACP agent's permission request (decidePermission)", () => {
    const options = [
      { optionId: 'always', name: 'Always allow', kind: 'allow_always' as const },
      { optionId: 'once', name: 'Allow', kind: 'allow_once' as const },
      { optionId: 'no', name: 'Reject', kind: 'reject_once' as const },
    ];
    const request = (toolName: string, rawInput: Record<string, unknown>, locations: string[] = []) => ({
      sessionId: 's1',
      toolCall: {
        toolCallId: 'toolu_1',
        title: toolName,
        kind: 'edit' as const,
        rawInput,
        locations: locations.map((p) => ({ path: p })),
        _meta: { claudeCode: { toolName } },
      },
      options,
    });

    it('a read inside is allowed at once (allow_once), a path outside denied at once (reject_once)', async () => {
      const read = await approvals.decidePermission(request('Read', { file_path: 'src/app.ts' }), AGENT, ctx('c'));
      assert.deepEqual(read.outcome, { outcome: 'selected', optionId: 'once' });
      assert.match(read.decidedBy, /^rule:/);
      const outside = await approvals.decidePermission(
        request('Write', { file_path: path.join(dir, 'elsewhere.txt'), content: 'x' }),
        AGENT,
        ctx('c'),
      );
      assert.deepEqual(outside.outcome, { outcome: 'selected', optionId: 'no' });
      assert.equal(h.coordinator.hitl.list().length, 0, 'nothing asked');
    });

    it("a write is asked in the editor with its diff; a person's approve selects allow_once, never allow_always", async () => {
      const opened = nextOpened();
      const pending = approvals.decidePermission(
        request('Write', { file_path: 'src/app.ts', content: 'export function f() {\n  return 3;\n}\n' }),
        AGENT,
        ctx('c'),
      );
      const invocation = await opened;
      assert.equal(invocation.reasonType, 'SECURITY_APPROVAL');
      assert.match(invocation.context.diffs[0].unified!, /^\+  return 3;$/m);
      h.coordinator.hitl.decide(invocation.id, { action: 'approve', rationale: 'ok' }, 'editor:alice', ctx());
      const answer = await pending;
      assert.deepEqual(answer.outcome, { outcome: 'selected', optionId: 'once' });
      assert.equal(answer.decidedBy, 'person:editor:alice');
      assert.equal(answer.invocationId, invocation.id);
    });

    it('a deadline never selects an allow: nobody deciding answers reject_once', async () => {
      h.dispose();
      operator?.dispose();
      start(policy({ defaultDeadlineSeconds: 60 }));
      const opened = nextOpened();
      const pending = approvals.decidePermission(request('Bash', { command: 'make' }), AGENT, ctx('c'));
      await opened;
      h.clock.advance(60_000);
      const answer = await pending;
      assert.deepEqual(answer.outcome, { outcome: 'selected', optionId: 'no' });
      assert.equal(answer.decidedBy, 'fallback');
    });
  });

  it('with no operator attached, the no-operator fallback (5 s) answers ask', async () => {
    operator?.dispose();
    operator = undefined;
    const opened = nextOpened();
    const pending = decide('copilot', { toolName: 'bash', toolArgs: { command: 'make' } });
    await opened;
    h.clock.advance(5_000);
    const answer = await pending;
    assert.deepEqual([answer.decision, answer.stdout.permissionDecision], ['ask', 'ask']);
    assert.match(answer.reason, /no operator is attached/);
  });

  it('waits at most 600 s, then answers ask and withdraws the question (a cancellation, not a denial)', async () => {
    const opened = nextOpened();
    const pending = decide('claude-code', claude('WebFetch', { url: 'https://example.com' }));
    const invocation = await opened;
    h.clock.advance(599_999);
    assert.equal(h.coordinator.hitl.get(invocation.id)?.state, 'pending');
    h.clock.advance(1);
    const answer = await pending;
    assert.deepEqual([answer.decision, answer.decidedBy], ['ask', 'timeout']);
    assert.match(answer.reason, /within 600 s/);
    const settled = h.coordinator.hitl.get(invocation.id)!;
    assert.equal(settled.state, 'cancelled');
    assert.deepEqual([settled.decision?.origin.kind, settled.decision?.origin.by], ['cancel', 'tool_approval']);
  });

  it("the hook's request closing withdraws the question", async () => {
    const controller = new AbortController();
    const opened = nextOpened();
    const pending = decide('claude-code', claude('Bash', { command: 'make' }), controller.signal);
    const invocation = await opened;
    controller.abort();
    const answer = await pending;
    assert.deepEqual([answer.decision, answer.decidedBy], ['ask', 'aborted']);
    assert.equal(h.coordinator.hitl.get(invocation.id)?.state, 'cancelled');
  });

  it('an agent without a worktree: even a read is asked, and says why', async () => {
    worktreeOf.delete(AGENT);
    const opened = nextOpened();
    const pending = decide('claude-code', claude('Read', { file_path: '/etc/hosts' }));
    const invocation = await opened;
    assert.deepEqual(invocation.context.facts.places, ['unknown']);
    assert.match(invocation.context.risk.notes.join(' '), /no worktree/);
    h.coordinator.hitl.decide(invocation.id, { action: 'approve', rationale: 'ok' }, 'editor:alice', ctx());
    assert.equal((await pending).decision, 'allow');
    const openedSearch = nextOpened();
    const search = decide('claude-code', claude('Grep', { pattern: 'TODO' }));
    const question = await openedSearch;
    assert.deepEqual(
      [question.context.facts.paths, question.context.facts.places],
      [[], ['unknown']],
      'a search naming no path…',
    );
    h.coordinator.hitl.decide(question.id, { action: 'deny', rationale: 'no' }, 'editor:alice', ctx());
    assert.equal((await search).decision, 'deny', '…is asked too: where it searches is unknown');
  });

  it("the user's rules apply first and are logged when they change; a HITL auto rule decides like a person and says so", async () => {
    approvals.setRules([{ kind: 'shell', command: 'npm test*', action: 'allow', name: 'tests' }], 'settings');
    approvals.setRules([{ kind: 'shell', command: 'npm test*', action: 'allow', name: 'tests' }], 'settings');
    assert.equal(h.events('tool_approval.rules_set').length, 1, 'the same rules again change nothing');
    assert.equal((await decide('claude-code', claude('Bash', { command: 'npm test' }))).decidedBy, 'rule:tests');

    h.coordinator.hitl.setPolicy(
      {
        ...h.coordinator.hitl.policy,
        rules: [
          {
            name: 'trust-claude',
            reasonType: 'TOOL_PRIVILEGE_ESCALATION',
            agent: 'claude-*',
            subject: '**',
            action: 'approve',
          },
        ],
      },
      'test',
    );
    const answer = await decide('claude-code', claude('Bash', { command: 'make' }));
    assert.deepEqual([answer.decision, answer.decidedBy], ['allow', 'hitl_rule:trust-claude']);
    assert.match(answer.reason, /HITL rule trust-claude/);
  });

  it("a write to the agent's own hook or bridge wiring is asked even when the user's rules allow writes inside", async () => {
    approvals.setRules(
      [
        { kind: 'write', path: 'inside', action: 'allow', name: 'writes' },
        { kind: 'edit', path: 'inside', action: 'allow', name: 'edits' },
      ],
      'settings',
    );
    assert.equal(
      (await decide('claude-code', claude('Write', { file_path: path.join(root, 'src', 'new.ts'), content: 'x' })))
        .decidedBy,
      'rule:writes',
    );
    for (const file of ['.claude/settings.local.json', '.mcp.json', '.sw4rm/AGENT.md', '.gemini/settings.json']) {
      const opened = nextOpened();
      const pending = decide('claude-code', claude('Write', { file_path: path.join(root, file), content: '{}' }));
      const invocation = await opened;
      assert.match(JSON.stringify(invocation), /builtin:guard-wiring/, `${file}: asked by builtin:guard-wiring`);
      h.coordinator.hitl.decide(
        invocation.id,
        { action: 'deny', rationale: 'keep your hooks' },
        'editor:alice',
        ctx('corr-deny'),
      );
      assert.equal((await pending).decision, 'deny');
    }
  });

  it('after a restart, a question nobody waits for any more is withdrawn (coordinator.toolApprovals)', async () => {
    const opened = nextOpened();
    // The coordinator's own instance: this agent is not bound, so the read is asked.
    h.coordinator.toolApprovals
      .decide('claude-code', claude('Read', { file_path: 'a' }), 'unbound-agent', ctx())
      .catch(() => undefined);
    const invocation = await opened;
    h.restart();
    const after = h.coordinator.hitl.get(invocation.id)!;
    assert.equal(after.state, 'cancelled');
    assert.match(after.decision!.rationale, /restarted/);
  });

  it('an agent asking more than the HITL policy lets one requester have pending: the CLI asks its own user', async () => {
    h.coordinator.hitl.setPolicy({ ...h.coordinator.hitl.policy, maxPendingPerRequester: 1 }, 'test');
    const opened = nextOpened();
    const first = decide('claude-code', claude('Bash', { command: 'make a' }));
    const invocation = await opened;
    const second = await decide('claude-code', claude('Bash', { command: 'make b' }));
    assert.deepEqual([second.decision, second.decidedBy], ['ask', 'hitl_refused']);
    assert.match(second.reason, /BUFFER_FULL/);
    assert.equal(h.events('tool_approval.answered').at(-1)?.level, 'WARN');
    h.coordinator.hitl.decide(invocation.id, { action: 'approve', rationale: 'ok' }, 'editor:alice', ctx());
    assert.equal((await first).decision, 'allow');
  });

  it('refuses an unreadable hook input before anything is asked', async () => {
    await assert.rejects(decide('claude-code', { tool_input: {} }), /no tool_name/);
    assert.equal(h.coordinator.hitl.list().length, 0);
    assert.equal(DEFAULT_HITL_POLICY.unavailableAfterMs, 5_000);
  });
});
