import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { ManualClock } from '../../src/core/clock';
import type { Disposable } from '../../src/core/events';
import { WORK_TOOLS } from '../../src/server/bridge/tools/work';
import { WORKSPACE_TOOLS } from '../../src/server/bridge/tools/workspace';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { git, makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface ToolAnswer {
  readonly isError: boolean;
  readonly text: string;
  readonly data: Record<string, unknown>;
}

const ctx = (correlationId = 'test') => ({ correlationId });

/**
 * The MCP bridge's work and workspace tools (issue 20, part 3) with the official SDK's Client over Streamable HTTP (the
 * host's bridge on 127.0.0.1, each agent's own credential) against a real coordinator (CoordinatorHost: real store files,
 * real git worktrees, ManualClock for the HITL deadline). Every tool is called with
 * a success and a refusal; a person's decision reaches a blocked request_decision; a deadline answers `fallback`;
 * the caller is always its credential's agent (no completing another agent's task, no voting as another critic) and the
 * workspace tools are confined to the caller's worktree.
 */
describe('MCP bridge: work and workspace tools (real coordinator, SDK Client over Streamable HTTP)', function () {
  this.timeout(120_000);
  let base: string;
  let dataDir: string;
  let repo: string;
  let clock: ManualClock;
  let host: CoordinatorHost;
  let operator: Disposable;
  const tokens = new Map<string, string>();
  const clients = new Map<string, Client>();

  /** A new SDK Client for `agent` over Streamable HTTP to the host's bridge, with the agent's own credential. */
  async function connect(agent: string): Promise<Client> {
    const c = new Client({ name: `test-${agent}`, version: '1.0.0' });
    await c.connect(
      new StreamableHTTPClientTransport(new URL(host.bridgeEndpoints!.mcpUrl), {
        requestInit: { headers: { Authorization: `Bearer ${tokens.get(agent)}` } },
      }),
    );
    return c;
  }

  async function client(agent: string): Promise<Client> {
    const existing = clients.get(agent);
    if (existing) return existing;
    const c = await connect(agent);
    clients.set(agent, c);
    return c;
  }

  async function call(
    agent: string,
    name: string,
    args: Record<string, unknown> = {},
    via?: Client,
  ): Promise<ToolAnswer> {
    const result = await (via ?? (await client(agent))).callTool({ name, arguments: args });
    const text = (result.content as Array<{ type: string; text: string }>)[0]?.text ?? '';
    return {
      isError: result.isError === true,
      text,
      data: (result.structuredContent ?? {}) as Record<string, unknown>,
    };
  }

  async function ok(agent: string, name: string, args: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const answer = await call(agent, name, args);
    assert.equal(answer.isError, false, `${name} as ${agent}: ${answer.text}`);
    return answer.data;
  }

  /** A refusal with `code`; answers its message. */
  async function refused(agent: string, name: string, args: Record<string, unknown>, code: string): Promise<string> {
    const answer = await call(agent, name, args);
    assert.equal(answer.isError, true, `${name} as ${agent} should be refused ${code}, answered ${answer.text}`);
    const error = answer.data.error as { code: string; message: string; retryable: boolean };
    assert.equal(error.code, code, answer.text);
    assert.ok(answer.text.startsWith(`${code}: `), answer.text);
    return error.message;
  }

  before(async () => {
    base = fs.realpathSync(makeTempDir('sw4rm-bridge-work-'));
    dataDir = makeTempDir('sw4rm-bridge-work-data-');
    repo = makeRepo(base, 'app', { 'README.md': 'hello\n', 'src/main.ts': 'export const answer = 42;\n' });
    clock = new ManualClock(Date.now());
    host = await startHost(dataDir, { clock, workspaceFolders: [repo] });
    operator = host.coordinator.hitl.attachOperator('editor:test');
    const { registry, credentials, worktrees } = host.coordinator;
    for (const agent of ['coder', 'peer', 'loner']) {
      assert.equal(registry.register(validDescriptor(agent), ctx()).accepted, true);
      assert.ok(registry.heartbeat(agent, 'RUNNABLE', {}, ctx()));
      tokens.set(agent, credentials.mintAgent(agent, 'test', 'bridge work tests', ctx()).token);
    }
    for (const agent of ['coder', 'peer'])
      assert.notEqual((await worktrees.bind(agent, 'app', '', ctx())).state, 'BIND_FAILED');
  });

  after(async () => {
    for (const c of clients.values()) await c.close();
    operator?.dispose();
    await stopHost(host);
    removeTempDir(dataDir);
    removeTempDir(base);
  });

  it('tools/list shows every work and workspace tool, each schema closed (additionalProperties: false)', async () => {
    const { tools } = await (await client('coder')).listTools();
    const names = tools.map((t) => t.name);
    for (const tool of [...WORK_TOOLS, ...WORKSPACE_TOOLS]) assert.ok(names.includes(tool.name), `${tool.name} listed`);
    assert.deepEqual(
      WORK_TOOLS.map((t) => t.name),
      [
        'request_decision',
        'current_task',
        'complete_task',
        'fail_task',
        'report_activity',
        'append_artifact',
        'request_handoff',
        'submit_proposal',
        'submit_vote',
      ],
    );
    assert.deepEqual(
      WORKSPACE_TOOLS.map((t) => t.name),
      [
        'workspace_read_file',
        'workspace_write_file',
        'workspace_list_dir',
        'workspace_delete_file',
        'workspace_stat',
        'workspace_search',
        'workspace_git_status',
        'workspace_git_diff',
        'workspace_git_commit',
      ],
    );
    for (const tool of tools.filter((t) => names.includes(t.name))) {
      assert.equal((tool.inputSchema as { additionalProperties?: boolean }).additionalProperties, false, tool.name);
      assert.ok((tool.description ?? '').length > 20, tool.name);
    }
  });

  // ------------------------------------------------------------------------------------------------ request_decision

  it('request_decision blocks until a person decides in the editor (the core API) and answers that decision', async () => {
    const api = new InProcessCoordinatorApi(host.coordinator);
    const pending = call('coder', 'request_decision', {
      reason_type: 'SECURITY_APPROVAL',
      summary: 'Delete the generated fixtures',
      context: { paths: ['fixtures/'] },
      options: ['approve', 'deny'],
      diff: '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n',
      task_id: 't-9',
      priority: 3,
      request_id: 'coder-q1',
    });
    const invocation = await pollUntil('the pending invocation', () => host.coordinator.hitl.get('coder-q1'));
    assert.equal(invocation.state, 'pending');
    assert.equal(invocation.requester, 'coder');
    assert.equal(invocation.reasonType, 'SECURITY_APPROVAL');
    assert.deepEqual(invocation.proposedActions, ['approve', 'deny']);
    assert.deepEqual(invocation.context.facts, { paths: ['fixtures/'] });
    assert.equal(invocation.context.diffs.length, 1);
    assert.equal(invocation.subject.taskId, 't-9');
    await api.decideApproval(
      'coder-q1',
      { action: 'modify', rationale: 'only tmp/', payload: { paths: ['tmp/'] } },
      'editor:alice',
    );
    const answer = await pending;
    assert.equal(answer.isError, false, answer.text);
    assert.deepEqual(
      { ...answer.data, decided_at: undefined },
      {
        invocation_id: 'coder-q1',
        state: 'decided',
        action: 'modify',
        decided_by: 'person',
        decider: 'editor:alice',
        rationale: 'only tmp/',
        modified_payload: { paths: ['tmp/'] },
        decided_at: undefined,
        reattached: false,
      },
    );
    api.dispose();
  });

  it('request_decision answers the fallback, marked decided_by "fallback", when the deadline passes (ManualClock)', async () => {
    const pending = call('coder', 'request_decision', {
      reason_type: 'TASK_ESCALATION',
      summary: 'Retry the flaky build?',
      deadline_seconds: 120,
      request_id: 'coder-q2',
    });
    const invocation = await pollUntil('the pending invocation', () => host.coordinator.hitl.get('coder-q2'));
    assert.equal(invocation.deadlineAt, clock.now() + 120_000);
    clock.advance(119_999);
    assert.equal(host.coordinator.hitl.get('coder-q2')?.state, 'pending');
    clock.advance(1);
    const answer = await pending;
    assert.equal(answer.isError, false, answer.text);
    assert.equal(answer.data.decided_by, 'fallback');
    assert.equal(answer.data.state, 'timed_out');
    assert.equal(answer.data.action, 'deny');
    assert.deepEqual(answer.data.fallback, { policy: 'DENY_BY_DEFAULT', trigger: 'deadline' });
    assert.match(answer.data.rationale as string, /deadline passed/);
  });

  it('a request_decision whose client goes away leaves the invocation pending; the same request_id re-attaches (no second invocation); another agent may not use it', async () => {
    const before = host.coordinator.hitl.list().length;
    const leaving = await connect('coder');
    const first = call(
      'coder',
      'request_decision',
      { reason_type: 'MANUAL_OVERRIDE', summary: 'Force-push the branch?', request_id: 'coder-q3' },
      leaving,
    );
    await pollUntil('the pending invocation', () => host.coordinator.hitl.get('coder-q3'));
    await leaving.close();
    await assert.rejects(first);
    await pollUntil('requester_detached in the audit', () =>
      host.coordinator.hitl.auditTrail({ invocationId: 'coder-q3' }).find((e) => e.kind === 'requester_detached'),
    );
    assert.equal(host.coordinator.hitl.get('coder-q3')?.state, 'pending', 'the person can still answer');

    assert.match(
      await refused(
        'peer',
        'request_decision',
        { reason_type: 'MANUAL_OVERRIDE', summary: 'mine now', request_id: 'coder-q3' },
        'PERMISSION_DENIED',
      ),
      /belongs to another requester/,
    );

    const again = call('coder', 'request_decision', {
      reason_type: 'MANUAL_OVERRIDE',
      summary: 'Force-push the branch?',
      request_id: 'coder-q3',
    });
    await pollUntil('re-attached', () =>
      host.coordinator.hitl.auditTrail({ invocationId: 'coder-q3' }).find((e) => e.kind === 'reattached'),
    );
    host.coordinator.hitl.decide('coder-q3', { action: 'approve', rationale: 'go ahead' }, 'editor:bob', ctx());
    const answer = await again;
    assert.equal(answer.isError, false, answer.text);
    assert.equal(answer.data.action, 'approve');
    assert.equal(answer.data.decided_by, 'person');
    assert.equal(answer.data.reattached, true);
    assert.equal(host.coordinator.hitl.list().length, before + 1, 'one invocation for the two calls');
    // A retry after it settled answers the same decision at once.
    const late = await ok('coder', 'request_decision', {
      reason_type: 'MANUAL_OVERRIDE',
      summary: 'Force-push the branch?',
      request_id: 'coder-q3',
    });
    assert.equal(late.action, 'approve');
  });

  it("request_decision refuses bad input with VALIDATION_ERROR (the schema, and the HITL area's own checks)", async () => {
    assert.match(
      await refused('coder', 'request_decision', { reason_type: 'COFFEE', summary: 'x' }, 'VALIDATION_ERROR'),
      /reason_type/,
    );
    assert.match(
      await refused(
        'coder',
        'request_decision',
        { reason_type: 'CONFLICT', summary: 'x', requester: 'peer' },
        'VALIDATION_ERROR',
      ),
      /requester/,
    );
    assert.match(
      await refused(
        'coder',
        'request_decision',
        { reason_type: 'CONFLICT', summary: 'x', request_id: 'a b' },
        'VALIDATION_ERROR',
      ),
      /request_id/,
    );
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 80; i++) deep = { deep };
    assert.match(
      await refused(
        'coder',
        'request_decision',
        { reason_type: 'CONFLICT', summary: 'x', context: deep },
        'VALIDATION_ERROR',
      ),
      /nests deeper than 64 levels/,
    );
  });

  // ------------------------------------------------------------------------------------------------ tasks and activity

  function submit(taskId: string, target: string, params: unknown): void {
    const result = host.coordinator.scheduler.submit(
      {
        taskId,
        target,
        priority: 0,
        params: Buffer.from(JSON.stringify(params)),
        contentType: 'application/json',
        scope: 'repo:app/src/**',
        submittedBy: 'operator',
      },
      ctx(),
    );
    assert.ok(result.accepted, result.accepted ? '' : result.reason);
  }

  it("current_task, report_activity and complete_task run the scheduler's task through the router; the result is the task's result", async () => {
    assert.deepEqual(await ok('coder', 'current_task'), { task: null });
    assert.match(await refused('coder', 'complete_task', {}, 'FAILED_PRECONDITION'), /you hold no task/);
    assert.match(await refused('coder', 'report_activity', { description: 'idle' }, 'FAILED_PRECONDITION'), /no task/);

    submit('task-a', 'coder', { title: 'fix the build' });
    const dispatched = await pollUntil('task-a dispatched', () => {
      const t = host.coordinator.scheduler.task('task-a');
      return t?.state === 'DISPATCHED' ? t : undefined;
    });
    assert.equal(dispatched.assignedAgentId, 'coder');
    const current = (await ok('coder', 'current_task')).task as Record<string, unknown>;
    assert.equal(current.task_id, 'task-a');
    assert.equal(current.state, 'RUNNING', 'asking for it starts it (ACK READ of its run)');
    assert.deepEqual(current.params, { title: 'fix the build' });
    assert.equal((current.scope as { repo_id: string }).repo_id, 'app');
    assert.equal(host.coordinator.registry.get('coder')?.state, 'RUNNING');

    const reported = await ok('coder', 'report_activity', { description: 'reading the failing test output' });
    assert.equal(reported.task_id, 'task-a');
    assert.equal(
      host.coordinator.activity.entries({ agentId: 'coder', taskId: 'task-a' })[0].description,
      'reading the failing test output',
    );

    // Identity: another agent cannot end coder's task; the router refuses its ACK for a message sent to coder.
    assert.match(
      await refused('peer', 'complete_task', { task_id: 'task-a', result: { stolen: true } }, 'PERMISSION_DENIED'),
      /^task 'task-a': only the recipient of .* may acknowledge it$/,
    );
    assert.equal(
      (await refused('peer', 'report_activity', { description: 'x', task_id: 'task-a' }, 'FAILED_PRECONDITION')) !== '',
      true,
    );
    assert.equal(host.coordinator.scheduler.task('task-a')?.state, 'RUNNING');
    await refused('coder', 'complete_task', { task_id: 'no-such-task' }, 'NOT_FOUND');
    await refused('coder', 'complete_task', { result: 'x'.repeat(5000) }, 'OVERSIZE_PAYLOAD');

    const done = await ok('coder', 'complete_task', { result: { fixed: true, files: ['src/main.ts'] }, note: 'fixed' });
    assert.equal(done.state, 'COMPLETED');
    assert.deepEqual(done.result, { fixed: true, files: ['src/main.ts'] });
    const record = host.coordinator.scheduler.task('task-a')!;
    assert.equal(record.state, 'COMPLETED');
    assert.deepEqual(
      JSON.parse(record.result),
      { fixed: true, files: ['src/main.ts'] },
      'what a workflow reads as the node output',
    );
    assert.equal(record.note, 'fixed');
    assert.equal(host.coordinator.activity.entries({ agentId: 'coder' }).length, 0);
    // A retry whose answer was lost changes nothing.
    const retried = await ok('coder', 'complete_task', {
      task_id: 'task-a',
      result: { fixed: true, files: ['src/main.ts'] },
    });
    assert.equal(retried.already_ended, true);
    await refused('coder', 'fail_task', { task_id: 'task-a', error: 'too late' }, 'FAILED_PRECONDITION');
    assert.deepEqual(await ok('coder', 'current_task'), { task: null });
    // The run envelope ended with the task: the messaging tools do not hand it out again.
    assert.deepEqual((await ok('coder', 'read_inbox', {})).messages, []);
  });

  it('a task read from the inbox is the current task; fail_task ends it FAILED with its error code; the agent is free for the next', async () => {
    submit('task-b', 'coder', { title: 'migrate the schema' });
    await pollUntil(
      'task-b dispatched',
      () => host.coordinator.scheduler.task('task-b')?.state === 'DISPATCHED' || undefined,
    );
    // Learning of it from the inbox (the scheduler's CONTROL `run`, read and acknowledged READ by read_inbox) starts it too.
    const { messages } = (await ok('coder', 'read_inbox', {})) as {
      messages: Array<{ message_type: string; payload: { command: string; task_id: string } }>;
    };
    assert.deepEqual(
      messages.map((m) => [m.message_type, m.payload.command, m.payload.task_id]),
      [['CONTROL', 'run', 'task-b']],
    );
    assert.equal(host.coordinator.scheduler.task('task-b')?.state, 'RUNNING');
    assert.equal(((await ok('coder', 'current_task')).task as { task_id: string }).task_id, 'task-b');
    await refused('coder', 'fail_task', {}, 'VALIDATION_ERROR');
    assert.match(
      await refused('peer', 'fail_task', { task_id: 'task-b', error: 'not mine' }, 'PERMISSION_DENIED'),
      /only the recipient/,
    );
    const failed = await ok('coder', 'fail_task', { error: 'the database is read-only', error_code: 'DB_READ_ONLY' });
    assert.equal(failed.state, 'FAILED');
    const record = host.coordinator.scheduler.task('task-b')!;
    assert.equal(record.state, 'FAILED');
    assert.equal(record.errorCode, 'DB_READ_ONLY');
    assert.equal(record.note, 'the database is read-only');
    await pollUntil(
      'coder free again',
      () => host.coordinator.registry.get('coder')?.state === 'RUNNABLE' || undefined,
    );
  });

  it('a preempt_request read from the inbox is answered with ack_message: the task goes back to the queue and the urgent one becomes current', async () => {
    submit('task-slow', 'coder', { title: 'slow refactor' });
    await pollUntil(
      'task-slow dispatched',
      () => host.coordinator.scheduler.task('task-slow')?.state === 'DISPATCHED' || undefined,
    );
    assert.equal(((await ok('coder', 'current_task')).task as { task_id: string }).task_id, 'task-slow');
    const urgent = host.coordinator.scheduler.submit(
      {
        taskId: 'task-urgent',
        target: 'coder',
        priority: -10,
        params: Buffer.from('{"title":"hotfix"}'),
        contentType: 'application/json',
        scope: 'resource:hotfix',
        submittedBy: 'operator',
      },
      ctx(),
    );
    assert.ok(urgent.accepted);
    await pollUntil(
      'task-slow preempting',
      () => host.coordinator.scheduler.task('task-slow')?.state === 'PREEMPTING' || undefined,
    );
    const { messages } = (await ok('coder', 'read_inbox', {})) as {
      messages: Array<{ message_id: string; payload: { command: string; task_id: string } }>;
    };
    const preempt = messages.find((m) => m.payload.command === 'preempt_request');
    assert.ok(preempt, JSON.stringify(messages));
    assert.equal(preempt.payload.task_id, 'task-slow');
    await ok('coder', 'ack_message', { message_id: preempt.message_id, outcome: 'fulfilled', reason: 'yielded' });
    assert.equal(host.coordinator.scheduler.task('task-slow')?.state, 'QUEUED');
    const next = await pollUntil('the urgent task', async () => {
      const t = (await ok('coder', 'current_task')).task as { task_id: string } | null;
      return t?.task_id === 'task-urgent' ? t : undefined;
    });
    assert.equal(next.task_id, 'task-urgent');
    await ok('coder', 'complete_task', { note: 'hotfixed' });
    const resumed = await pollUntil('task-slow again', async () => {
      const t = (await ok('coder', 'current_task')).task as { task_id: string } | null;
      return t?.task_id === 'task-slow' ? t : undefined;
    });
    assert.equal(resumed.task_id, 'task-slow');
    await ok('coder', 'complete_task', {});
    assert.equal(host.coordinator.scheduler.task('task-slow')?.state, 'COMPLETED');
  });

  it('a task that ends while asked to yield: complete_task ends it COMPLETED and closes the preempt_request `completed`', async () => {
    submit('task-long', 'coder', { title: 'long job' });
    await pollUntil(
      'task-long dispatched',
      () => host.coordinator.scheduler.task('task-long')?.state === 'DISPATCHED' || undefined,
    );
    await ok('coder', 'current_task');
    assert.ok(
      host.coordinator.scheduler.submit(
        {
          taskId: 'task-urgent-2',
          target: 'coder',
          priority: -10,
          params: Buffer.from('{"title":"hotfix 2"}'),
          contentType: 'application/json',
          scope: 'resource:hotfix',
          submittedBy: 'operator',
        },
        ctx(),
      ).accepted,
    );
    const preempting = await pollUntil('task-long preempting', () => {
      const t = host.coordinator.scheduler.task('task-long');
      return t?.state === 'PREEMPTING' ? t : undefined;
    });
    const preemptId = preempting.preemptMessageId;
    const done = await ok('coder', 'complete_task', { result: 'finished anyway' });
    assert.equal(done.state, 'COMPLETED');
    assert.equal(done.result, 'finished anyway');
    assert.equal(host.coordinator.router.message(preemptId)?.state, 'FULFILLED');
    const next = await pollUntil('the urgent task', async () => {
      const t = (await ok('coder', 'current_task')).task as { task_id: string } | null;
      return t?.task_id === 'task-urgent-2' ? t : undefined;
    });
    await ok('coder', 'complete_task', { task_id: next.task_id });
    // The inbox no longer offers the closed preempt_request or the finished runs.
    assert.deepEqual((await ok('coder', 'read_inbox', {})).messages, []);
  });

  it("a workflow node run by a bridged agent: complete_task's result is the node's output, mapped into the workflow data", async () => {
    const { workflows } = host.coordinator;
    const created = workflows.create(
      {
        workflowId: 'bridged-flow',
        metadata: {},
        nodes: [
          {
            nodeId: 'summarise',
            agentId: 'peer',
            dependencies: [],
            trigger: 'DEPENDENCY',
            inputMapping: { 'doc.title': 'title' },
            outputMapping: { summary: 'result.summary' },
            metadata: {},
          },
        ],
      },
      'operator',
      ctx(),
    );
    assert.ok(created.ok);
    workflows.start('bridged-flow', JSON.stringify({ doc: { title: 'Parsers' } }), 'operator', ctx());
    const task = await pollUntil(
      "the node's task",
      async () => ((await ok('peer', 'current_task')).task ?? undefined) as Record<string, unknown> | undefined,
    );
    assert.deepEqual((task.params as { inputs: unknown }).inputs, { title: 'Parsers' });
    await ok('peer', 'complete_task', { result: { summary: 'A short summary.' } });
    const detail = await pollUntil('the workflow completed', () => {
      const d = workflows.detail('bridged-flow');
      return d?.summary.state === 'COMPLETED' ? d : undefined;
    });
    assert.deepEqual(JSON.parse(detail.data), { doc: { title: 'Parsers' }, result: { summary: 'A short summary.' } });
  });

  it("append_artifact stores an artifact through the activity area; its refusals keep the area's codes", async () => {
    host.coordinator.negotiations.open(
      {
        negotiationId: 'neg-1',
        correlationId: '',
        topic: 'the build',
        participants: ['coder', 'peer'],
        intensity: '',
        debateTimeoutMs: 0,
        profileHint: '',
        preferences: {},
        schema: '',
      },
      { kind: 'operator', label: 'operator' },
      ctx(),
    );
    await host.coordinator.store.whenDurable();
    const stored = await ok('coder', 'append_artifact', {
      negotiation_id: 'neg-1',
      kind: 'note',
      content: 'the build is green',
      version: '1',
    });
    assert.deepEqual(stored, { negotiation_id: 'neg-1', kind: 'note', bytes: 18 });
    const [artifact] = host.coordinator.activity.listArtifacts('neg-1', 'note');
    assert.equal(artifact.content.toString('utf8'), 'the build is green');
    assert.equal(artifact.version, '1');
    await ok('coder', 'append_artifact', {
      negotiation_id: 'neg-1',
      kind: 'diff',
      content: Buffer.from([0, 1, 2]).toString('base64'),
      encoding: 'base64',
    });
    assert.deepEqual([...host.coordinator.activity.listArtifacts('neg-1', 'diff')[0].content], [0, 1, 2]);
    assert.match(
      await refused(
        'coder',
        'append_artifact',
        { negotiation_id: 'neg\u0000x', kind: 'note', content: 'x' },
        'VALIDATION_ERROR',
      ),
      /negotiation_id/,
    );
    await refused(
      'coder',
      'append_artifact',
      { negotiation_id: 'neg-1', kind: 'poem', content: 'x' },
      'VALIDATION_ERROR',
    );
    assert.match(
      await refused(
        'coder',
        'append_artifact',
        { negotiation_id: 'neg-1', kind: 'note', content: 'x'.repeat(1024 * 1024 + 1) },
        'VALIDATION_ERROR',
      ),
      /content/,
    );
  });

  it("append_artifact: only the negotiation's participants append (issue 30 item 6); an outsider is refused PERMISSION_DENIED, logged, an unknown negotiation alike", async () => {
    host.coordinator.negotiations.open(
      {
        negotiationId: 'neg-private',
        correlationId: '',
        topic: 'price',
        participants: ['coder', 'peer'],
        intensity: '',
        debateTimeoutMs: 0,
        profileHint: '',
        preferences: {},
        schema: '',
      },
      { kind: 'operator', label: 'operator' },
      ctx(),
    );
    await host.coordinator.store.whenDurable();
    await ok('peer', 'append_artifact', { negotiation_id: 'neg-private', kind: 'contract', content: 'the terms' });
    const before = host.coordinator.log.query({ eventType: 'activity.artifact_refused' }).length;
    for (const negotiationId of ['neg-private', 'no-such-negotiation']) {
      const message = await refused(
        'loner',
        'append_artifact',
        { negotiation_id: negotiationId, kind: 'note', content: 'planted' },
        'PERMISSION_DENIED',
      );
      assert.match(
        message,
        /agent:loner may not append artifacts to negotiation .*only its participants and the operator may/,
      );
    }
    assert.deepEqual(
      host.coordinator.activity.listArtifacts('neg-private', '').map((a) => a.content.toString('utf8')),
      ['the terms'],
      'nothing stored for loner',
    );
    assert.equal(host.coordinator.activity.listArtifacts('no-such-negotiation', '').length, 0);
    const refusals = host.coordinator.log.query({ eventType: 'activity.artifact_refused' }).slice(before);
    assert.deepEqual(
      refusals.map((e) => e.details.code),
      ['PERMISSION_DENIED', 'PERMISSION_DENIED'],
    );
  });

  // ------------------------------------------------------------------------------------------------ handoffs and rooms

  it("request_handoff hands the caller's work to another agent (from_agent = the caller); a retry changes nothing", async () => {
    const args = {
      to_agent: 'peer',
      reason: 'I am out of my depth with the SQL',
      context: { files: ['db/schema.sql'] },
      request_id: 'h-1',
    };
    const answer = await ok('coder', 'request_handoff', args);
    assert.equal(answer.request_id, 'h-1');
    assert.equal(answer.to_agent, 'peer');
    assert.equal(answer.state, 'PENDING');
    const record = host.coordinator.handoffs.get('h-1')!;
    assert.equal(record.fromAgent, 'coder');
    assert.equal(record.contextContentType, 'application/json');
    assert.deepEqual(JSON.parse(record.context.toString('utf8')), { files: ['db/schema.sql'] });
    assert.equal((await ok('coder', 'request_handoff', args)).request_id, 'h-1');
    await refused('peer', 'request_handoff', { ...args, reason: 'another request' }, 'DUPLICATE_DETECTED');
    assert.match(
      await refused('coder', 'request_handoff', { to_agent: 'coder', reason: 'to myself' }, 'VALIDATION_ERROR'),
      /itself/,
    );
    await refused(
      'coder',
      'request_handoff',
      { to_agent: 'peer', reason: 'x', from_agent: 'peer' },
      'VALIDATION_ERROR',
    );
  });

  it("submit_proposal and submit_vote act as the caller: the producer and the critic are the credential's agents", async () => {
    const proposal = await ok('coder', 'submit_proposal', {
      artifact_type: 'PLAN',
      artifact: '1. add an index\n2. migrate',
      requested_critics: ['peer'],
    });
    assert.equal(proposal.producer_id, 'coder');
    assert.equal(proposal.revision, 1);
    const artifactId = proposal.artifact_id as string;
    assert.match(
      await refused(
        'coder',
        'submit_proposal',
        { artifact_type: 'PLAN', artifact: 'x', requested_critics: ['coder'] },
        'VALIDATION_ERROR',
      ),
      /own artifact/,
    );
    await refused(
      'coder',
      'submit_proposal',
      { artifact_type: 'PLAN', artifact: 'x', requested_critics: ['ghost'] },
      'NOT_FOUND',
    );

    // Nobody votes as another critic: there is no critic_id to name, and a caller that is not a requested critic is refused.
    await refused(
      'loner',
      'submit_vote',
      { artifact_id: artifactId, critic_id: 'peer', score: 9, confidence: 1, passed: true },
      'VALIDATION_ERROR',
    );
    assert.match(
      await refused(
        'loner',
        'submit_vote',
        { artifact_id: artifactId, score: 9, confidence: 1, passed: true },
        'PERMISSION_DENIED',
      ),
      /not a requested critic/,
    );
    await refused(
      'peer',
      'submit_vote',
      { artifact_id: artifactId, score: 11, confidence: 1, passed: true },
      'VALIDATION_ERROR',
    );
    const vote = await ok('peer', 'submit_vote', {
      artifact_id: artifactId,
      score: 8,
      confidence: 0.9,
      passed: true,
      strengths: ['small steps'],
    });
    assert.deepEqual(vote, { artifact_id: artifactId, critic_id: 'peer' });
    const votes = host.coordinator.room.getVotes(artifactId, '', { kind: 'operator', label: 'operator' });
    assert.deepEqual(
      votes.map((v) => [v.criticId, v.score]),
      [['peer', 8]],
    );
  });

  // ------------------------------------------------------------------------------------------------ workspace tools

  const homeOf = (agent: string) => path.join(base, 'app.sw4rm-worktrees', agent);

  it("workspace_* tools work in the caller's own worktree, as the workspace provider does", async () => {
    assert.deepEqual(
      await ok('coder', 'workspace_write_file', {
        path: 'docs/plan.md',
        content: '# plan\nneedle\n',
        create_parents: true,
      }),
      { path: 'docs/plan.md', bytes: 14 },
    );
    assert.equal(fs.readFileSync(path.join(homeOf('coder'), 'docs/plan.md'), 'utf8'), '# plan\nneedle\n');
    assert.equal(fs.existsSync(path.join(repo, 'docs/plan.md')), false, 'never the main checkout');
    assert.equal((await ok('coder', 'workspace_read_file', { path: 'docs/plan.md' })).content, '# plan\nneedle\n');
    assert.deepEqual(
      ((await ok('coder', 'workspace_list_dir', {})).entries as Array<{ name: string }>).map((e) => e.name),
      ['README.md', 'docs', 'src'],
    );
    assert.equal((await ok('coder', 'workspace_stat', { path: 'docs' })).type, 'directory');
    assert.deepEqual((await ok('coder', 'workspace_search', { query: 'needle' })).matches, [
      { path: 'docs/plan.md', line: 2, column: 1, text: 'needle' },
    ]);
    assert.equal((await ok('coder', 'workspace_git_status', {})).branch, 'sw4rm/coder');
    await ok('coder', 'workspace_write_file', { path: 'README.md', content: 'hello\nagain\n' });
    assert.match((await ok('coder', 'workspace_git_diff', {})).diff as string, /^\+again$/m);
    const commit = await ok('coder', 'workspace_git_commit', { message: 'plan', paths: ['docs/plan.md', 'README.md'] });
    assert.equal(commit.branch, 'sw4rm/coder');
    assert.equal(git(homeOf('coder'), 'log', '-1', '--format=%s').trim(), 'plan');
    assert.deepEqual(await ok('coder', 'workspace_delete_file', { path: 'docs/plan.md' }), {
      path: 'docs/plan.md',
      deleted: true,
    });
    // Another agent's worktree is another world: peer does not see coder's files.
    await refused('peer', 'workspace_read_file', { path: 'docs/plan.md' }, 'NOT_FOUND');
    const [record] = host.coordinator.tools.recentCalls(1);
    assert.equal(record.via, 'bridge');
    assert.equal(record.callerAgentId, 'peer');
  });

  it('workspace_* tools are confined: ../, absolute paths and links out of the worktree are refused PERMISSION_DENIED', async () => {
    for (const p of ['../../etc/passwd', '../app/README.md', '/etc/passwd']) {
      assert.match(
        await refused('coder', 'workspace_read_file', { path: p }, 'PERMISSION_DENIED'),
        /permission_denied/,
      );
    }
    fs.symlinkSync('/etc', path.join(homeOf('coder'), 'etc-link'));
    fs.symlinkSync(path.join(repo, 'README.md'), path.join(homeOf('coder'), 'main-readme'));
    await refused('coder', 'workspace_read_file', { path: 'etc-link/passwd' }, 'PERMISSION_DENIED');
    await refused('coder', 'workspace_read_file', { path: 'main-readme' }, 'PERMISSION_DENIED');
    await refused('coder', 'workspace_write_file', { path: 'main-readme', content: 'pwned' }, 'PERMISSION_DENIED');
    assert.equal(fs.readFileSync(path.join(repo, 'README.md'), 'utf8'), 'hello\n');
    await refused('coder', 'workspace_write_file', { path: '../escape.txt', content: 'x' }, 'PERMISSION_DENIED');
    assert.equal(fs.existsSync(path.join(base, 'app.sw4rm-worktrees', 'escape.txt')), false);
  });

  it('every workspace_* tool refuses an unbound agent FAILED_PRECONDITION (worktree_not_bound), and bad arguments VALIDATION_ERROR', async () => {
    const args: Record<string, Record<string, unknown>> = {
      workspace_read_file: { path: 'README.md' },
      workspace_write_file: { path: 'a.txt', content: 'x' },
      workspace_list_dir: {},
      workspace_delete_file: { path: 'README.md' },
      workspace_stat: { path: 'README.md' },
      workspace_search: { query: 'hello' },
      workspace_git_status: {},
      workspace_git_diff: {},
      workspace_git_commit: { message: 'x' },
    };
    for (const tool of WORKSPACE_TOOLS) {
      assert.match(
        await refused('loner', tool.name, args[tool.name], 'FAILED_PRECONDITION'),
        /worktree_not_bound: agent 'loner' is not bound to a worktree/,
      );
      await refused('coder', tool.name, { ...args[tool.name], agent_id: 'peer' }, 'VALIDATION_ERROR');
    }
  });
});
