import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import type { HitlInvocation } from '../../src/core/hitl/model';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { REPO_ROOT } from '../support/paths';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ctx = { correlationId: 'hook-test' };
const DIST = path.join(REPO_ROOT, 'dist');
const HOOK_BUNDLE = path.join(DIST, 'sw4rm-hook.js');
const AGENT = 'claude-1';

/** A POST to the hook endpoint as a hook program would send it. */
function post(
  port: number,
  query: string,
  body: unknown,
  token: string | undefined,
  signal?: AbortSignal,
): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: `/hooks/pre-tool-use${query}`,
        signal,
        headers: {
          'Content-Type': 'application/json',
          ...(token !== undefined ? { Authorization: `Bearer ${token}` } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

/** dist/sw4rm-hook.js run as a CLI runs a command hook: the hook input on stdin, the answer on stdout. */
function runHook(
  cli: string,
  input: unknown,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [HOOK_BUNDLE, '--cli', cli], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString('utf8');
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(JSON.stringify(input));
  });
}

const decisionOf = (json: Record<string, unknown>) =>
  (json.hookSpecificOutput as Record<string, unknown>).permissionDecision;

describe('approvals for CLI agents: the hook endpoint and sw4rm-hook (README, "Approvals for CLI agents")', function () {
  this.timeout(60_000);
  let dir: string;
  let repo: string;
  let host: CoordinatorHost;
  let api: InProcessCoordinatorApi;
  let token: string;
  let port: number;
  let worktree: string;

  before(function () {
    if (!fs.existsSync(HOOK_BUNDLE)) throw new Error(`${HOOK_BUNDLE} is missing: run npm run build first`);
  });

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-int-hooks-');
    repo = makeRepo(dir, 'app', { 'README.md': 'hello\n', 'src/app.ts': 'export const answer = 1;\n' });
    host = await startHost(path.join(dir, 'data'), { distDir: DIST, workspaceFolders: [repo] });
    port = host.bridge!.port;
    assert.equal(host.coordinator.registry.register(validDescriptor(AGENT), ctx).accepted, true);
    token = host.coordinator.credentials.mintAgent(AGENT, 'test', 'launched claude', ctx).token;
    await host.coordinator.worktrees.bind(AGENT, 'app', '', ctx);
    worktree = host.coordinator.worktrees.worktreePathOf(AGENT)!;
    assert.ok(worktree && fs.existsSync(path.join(worktree, 'README.md')));
    api = new InProcessCoordinatorApi(host.coordinator);
    await api.attachOperator('editor:test');
  });

  afterEach(async () => {
    api?.dispose();
    await stopHost(host);
    removeTempDir(dir);
  });

  /** The next approval the editor is asked for. */
  function nextApproval(): Promise<HitlInvocation> {
    return new Promise((resolve) => {
      const subscription = api.onDidChangeApprovals((change) => {
        if (change.kind === 'opened') {
          subscription.dispose();
          resolve(change.invocation);
        }
      });
    });
  }

  const claude = (tool_name: string, tool_input: Record<string, unknown>) => ({
    session_id: 's1',
    transcript_path: '/tmp/t.jsonl',
    cwd: worktree,
    permission_mode: 'default',
    hook_event_name: 'PreToolUse',
    tool_name,
    tool_input,
    tool_use_id: 'toolu_1',
  });

  it("allows a read inside the agent's worktree and denies one of the main checkout (outside it), at once", async () => {
    const inside = await post(
      port,
      '?cli=claude-code',
      claude('Read', { file_path: path.join(worktree, 'README.md') }),
      token,
    );
    assert.equal(inside.status, 200);
    assert.equal(decisionOf(inside.json), 'allow');
    const outside = await post(
      port,
      '?cli=claude-code',
      claude('Read', { file_path: path.join(repo, 'README.md') }),
      token,
    );
    assert.equal(outside.status, 200);
    assert.equal(decisionOf(outside.json), 'deny');
    assert.match(
      String((outside.json.hookSpecificOutput as Record<string, unknown>).permissionDecisionReason),
      /outside the agent's worktree/,
    );
    const events = host.coordinator.log.query({ eventType: 'tool_approval.decided' });
    assert.deepEqual(
      events.map((e) => [e.details.agent_id, e.details.decision]),
      [
        [AGENT, 'allow'],
        [AGENT, 'deny'],
      ],
    );
    assert.equal((await api.approvals()).length, 0);
  });

  it('asks the editor for an edit: the diff in the invocation, decided through the core API, the answer reaching the HTTP client', async () => {
    const opened = nextApproval();
    // The body may claim anything: who asks is the credential's agent.
    const answer = post(
      port,
      '?cli=claude-code',
      {
        ...claude('Edit', { file_path: 'src/app.ts', old_string: 'answer = 1', new_string: 'answer = 2' }),
        agent_id: 'someone-else',
      },
      token,
    );
    const invocation = await opened;
    assert.equal(invocation.requester, AGENT);
    assert.equal(invocation.reasonType, 'SECURITY_APPROVAL');
    assert.deepEqual([invocation.subject.repoId, invocation.subject.worktreeId], ['app', AGENT]);
    assert.match(invocation.context.diffs[0].unified!, /^-export const answer = 1;\n\+export const answer = 2;$/m);
    await api.decideApproval(invocation.id, { action: 'approve', rationale: 'a better answer' }, 'editor:test');
    const { status, json } = await answer;
    assert.equal(status, 200);
    assert.deepEqual(json, {
      hookSpecificOutput: {
        hookEventName: 'PreToolUse',
        permissionDecision: 'allow',
        permissionDecisionReason: 'Approved by editor:test: a better answer',
      },
    });

    const openedShell = nextApproval();
    const shell = post(
      port,
      '?cli=copilot',
      { timestamp: 1, cwd: worktree, toolName: 'bash', toolArgs: JSON.stringify({ command: 'git push origin main' }) },
      token,
    );
    const question = await openedShell;
    assert.equal(question.reasonType, 'TOOL_PRIVILEGE_ESCALATION');
    host.coordinator.hitl.decide(question.id, { action: 'deny', rationale: 'not yet' }, 'editor:test', ctx);
    assert.deepEqual((await shell).json, {
      permissionDecision: 'deny',
      permissionDecisionReason: 'Denied by editor:test: not yet',
    });
  });

  it('a hook request that goes away withdraws its question from the editor', async () => {
    const controller = new AbortController();
    const opened = nextApproval();
    const answer = post(port, '?cli=claude-code', claude('Bash', { command: 'make' }), token, controller.signal).catch(
      (err: unknown) => err,
    );
    const invocation = await opened;
    controller.abort();
    await answer;
    await pollUntil('the question is withdrawn', () =>
      host.coordinator.hitl.get(invocation.id)?.state === 'cancelled' ? true : undefined,
    );
  });

  it('refuses without an agent credential (none, the operator token, a revoked one) with 401, and a bad cli or input with 400', async () => {
    const body = claude('Read', { file_path: 'README.md' });
    const revoked = host.coordinator.credentials.mintAgent(AGENT, 'test', 'old', ctx);
    host.coordinator.credentials.revoke(revoked.credential.id, 'test', ctx);
    for (const [name, credential] of [
      ['none', undefined],
      ['operator', host.token!],
      ['revoked', revoked.token],
    ] as const) {
      const answer = await post(port, '?cli=claude-code', body, credential);
      assert.equal(answer.status, 401, name);
      assert.equal((answer.json.error as Record<string, unknown>).code, 'UNAUTHENTICATED', name);
    }
    const unknownCli = await post(port, '?cli=cursor', body, token);
    assert.equal(unknownCli.status, 400);
    assert.equal((unknownCli.json.error as Record<string, unknown>).code, 'VALIDATION_ERROR');
    assert.match(
      String((unknownCli.json.error as Record<string, unknown>).message),
      /cli must be one of claude-code, gemini, copilot, codex, custom/,
    );
    assert.equal((await post(port, '', body, token)).status, 400);
    const noTool = await post(port, '?cli=gemini', { tool_input: {} }, token);
    assert.equal(noTool.status, 400);
    assert.match(String((noTool.json.error as Record<string, unknown>).message), /no tool_name/);
    assert.equal(host.coordinator.log.query({ eventType: 'tool_approval.decided' }).length, 0, 'nothing was decided');
  });

  describe('dist/sw4rm-hook.js as a command hook', () => {
    const env = () => ({ SW4RM_HOOK_URL: host.bridgeEndpoints!.hookUrl, SW4RM_TOKEN: token });

    it("prints the coordinator's answer on stdout and exits 0 (Claude Code, Gemini CLI)", async () => {
      const read = await runHook('claude-code', claude('Read', { file_path: 'README.md' }), env());
      assert.equal(read.code, 0, read.stderr);
      assert.equal(decisionOf(JSON.parse(read.stdout) as Record<string, unknown>), 'allow');
      const gemini = await runHook(
        'gemini',
        {
          hook_event_name: 'BeforeTool',
          tool_name: 'write_file',
          tool_input: { file_path: '/etc/passwd', content: 'x' },
        },
        env(),
      );
      assert.equal(gemini.code, 0);
      assert.equal((JSON.parse(gemini.stdout) as Record<string, unknown>).decision, 'deny');
    });

    it('waits while the editor decides', async () => {
      const opened = nextApproval();
      const running = runHook('claude-code', claude('Write', { file_path: 'notes.md', content: 'hi\n' }), env());
      const invocation = await opened;
      await api.decideApproval(invocation.id, { action: 'approve', rationale: 'notes are fine' }, 'editor:test');
      const result = await running;
      assert.equal(result.code, 0);
      assert.deepEqual(JSON.parse(result.stdout), {
        hookSpecificOutput: {
          hookEventName: 'PreToolUse',
          permissionDecision: 'allow',
          permissionDecisionReason: 'Approved by editor:test: notes are fine',
        },
      });
    });

    it("answers the CLI's ask, exit 0, the reason on stderr, when the coordinator refuses or cannot be reached; never an allow", async () => {
      const refused = await runHook('claude-code', claude('Read', { file_path: 'README.md' }), {
        ...env(),
        SW4RM_TOKEN: host.token!,
      });
      assert.equal(refused.code, 0);
      assert.equal(decisionOf(JSON.parse(refused.stdout) as Record<string, unknown>), 'ask');
      assert.match(refused.stderr, /HTTP 401, UNAUTHENTICATED/);
      const closed = http.createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const deadPort = (closed.address() as { port: number }).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      const unreachable = await runHook(
        'copilot',
        { toolName: 'view', toolArgs: '{"path":"README.md"}' },
        { ...env(), SW4RM_HOOK_URL: `http://127.0.0.1:${deadPort}/hooks/pre-tool-use` },
      );
      assert.equal(unreachable.code, 0);
      assert.equal((JSON.parse(unreachable.stdout) as Record<string, unknown>).permissionDecision, 'ask');
      assert.match(unreachable.stderr, /could not be reached/);
      const gemini = await runHook(
        'gemini',
        { tool_name: 'read_file', tool_input: { file_path: 'README.md' } },
        { SW4RM_HOOK_URL: host.bridgeEndpoints!.hookUrl },
      );
      assert.equal(gemini.code, 0);
      assert.equal(
        (JSON.parse(gemini.stdout) as Record<string, unknown>).decision,
        'deny',
        'Gemini has no ask: a deny saying nobody decided',
      );
      assert.match(gemini.stderr, /SW4RM_TOKEN is not set/);
      const usage = await runHook('nope', {}, env());
      assert.equal(usage.code, 2, 'no CLI named: exit 2, which blocks the tool where the CLI knows it');
      assert.equal(usage.stdout, '');
    });
  });
});
