/* eslint-disable @typescript-eslint/no-explicit-any -- the bridge answers untyped JSON the tests read field by field */
// The real Claude Code (@zed-industries/claude-agent-acp from npm) in session mode, driven by the coordinator
// (coordinator.sessions) against a real store, real git and the MCP bridge on loopback; its model is the scripted
// Messages API of test/support/scriptedModel.ts. Nobody types: the scheduler's runs, workflow nodes and messages
// become the agents' turns.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import type { TranscriptEntry } from '../../src/core/sessions/model';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { REPO_ROOT } from '../support/paths';
import { pollUntil } from '../support/poll';
import { ScriptedModel, type MessagesRequest, type ScriptedTurn, type TurnRequest } from '../support/scriptedModel';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** The agent's program (its package's bin), run by this Node. */
const AGENT_BIN = require.resolve('@zed-industries/claude-agent-acp/dist/index.js');
/** A wait on Claude Code: a loaded 2-core machine starts it in a few seconds, and each tool call is a model request. */
const WAIT_MS = 45_000;
const ctx = { correlationId: 'sessions-claude-test' };

/** The user texts of a request's messages, each with the index of its message (system reminders left out). */
function userTexts(body: MessagesRequest): { index: number; text: string }[] {
  const out: { index: number; text: string }[] = [];
  body.messages.forEach((message, index) => {
    if (message.role !== 'user') return;
    const blocks =
      typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : (message.content as any[]);
    for (const block of blocks ?? [])
      if (block?.type === 'text' && typeof block.text === 'string' && !block.text.startsWith('<system-reminder>'))
        out.push({ index, text: block.text });
  });
  return out;
}

/**
 * Where the agent is in its conversation: who it is (the coordinator's preamble names it), the coordinator's last
 * prompt, and how many answers the model gave since that prompt (0: the turn's first request).
 */
function conversation(request: TurnRequest): { agent: string; prompt: string; step: number } {
  const texts = userTexts(request.body);
  let agent = '';
  for (const { text } of texts) agent = /You are (\S+), an agent of a SW4RM swarm/.exec(text)?.[1] ?? agent;
  const prompts = texts.filter(({ text }) => !text.startsWith('[Request interrupted'));
  const last = prompts.at(-1);
  const step = last ? request.body.messages.slice(last.index + 1).filter((m) => m.role === 'assistant').length : 0;
  return { agent, prompt: last?.text ?? '', step };
}

const tool = (name: string, input: Record<string, unknown>): ScriptedTurn => ({ toolUses: [{ name, input }] });
const sw4rm = (name: string, input: Record<string, unknown>): ScriptedTurn => tool(`mcp__sw4rm__${name}`, input);

describe('Claude Code in session mode (claude-agent-acp from npm, a scripted model, a real coordinator)', function () {
  this.timeout(180_000);
  let dir: string;
  let repo: string;
  let model: ScriptedModel;
  let host: CoordinatorHost | undefined;
  let api: InProcessCoordinatorApi | undefined;
  let peer: Client | undefined;
  /** Each launched agent's worktree. */
  const cwd = new Map<string, string>();

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-int-sessions-claude-');
    repo = makeRepo(dir, 'app', { 'README.md': 'hello\n' });
    model = await ScriptedModel.start({ sideText: 'ok' });
    const home = path.join(dir, 'home');
    const tmp = path.join(dir, 'tmp');
    fs.mkdirSync(path.join(home, '.claude'), { recursive: true });
    fs.mkdirSync(tmp);
    host = await startHost(path.join(dir, 'data'), { workspaceFolders: [repo], distDir: path.join(REPO_ROOT, 'dist') });
    api = new InProcessCoordinatorApi(host.coordinator);
    // What a person would write in sw4rm.agents.profiles: the built-in claude-session profile's program, with the
    // environment that points Claude Code at the scripted model and keeps it off the network.
    const issues = await api.setLaunchProfileSettings([
      {
        id: 'claude-test',
        name: 'Claude Code (scripted model)',
        cli: 'custom',
        mode: 'session',
        command: [process.execPath, AGENT_BIN],
        env: {
          HOME: home,
          CLAUDE_CONFIG_DIR: path.join(home, '.claude'),
          TMPDIR: tmp,
          ANTHROPIC_BASE_URL: model.url,
          ANTHROPIC_API_KEY: 'sk-ant-test-dummy',
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
          DISABLE_AUTOUPDATER: '1',
          DISABLE_TELEMETRY: '1',
          DISABLE_ERROR_REPORTING: '1',
          HTTPS_PROXY: model.url,
          HTTP_PROXY: model.url,
          NO_PROXY: '127.0.0.1,localhost',
          // This machine sets IS_SANDBOX=yes; with it (any value but empty) Claude Code 2.1 ends at once, silently,
          // before session/new is answered ("Query closed before response received").
          IS_SANDBOX: '',
        },
      },
    ]);
    assert.deepEqual(issues, []);
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed' && host)
      for (const record of host.coordinator.sessions.list())
        console.log(
          `    ${record.agentId} ${record.state} ${record.error ?? ''}\n${entries(record.agentId)
            .map((e) => `      ${JSON.stringify(e).slice(0, 300)}`)
            .join('\n')}\n    model: ${model.describe()}\n    script: ${model.failure?.message ?? 'ok'}`,
        );
    await peer?.close();
    peer = undefined;
    api?.dispose();
    api = undefined;
    await stopHost(host);
    host = undefined;
    await model.close();
    cwd.clear();
    removeTempDir(dir);
  });

  const c = () => host!.coordinator;

  async function launch(agentId: string): Promise<void> {
    const plan = await api!.launchAgent(
      { profileId: 'claude-test', repoId: 'app', worktree: { kind: 'new' }, agentId },
      'editor:test',
    );
    assert.equal(plan.mode, 'session');
    cwd.set(agentId, plan.cwd);
  }

  const sessionIn = (agentId: string, ...states: string[]) =>
    pollUntil(
      `session ${agentId} ${states.join('/')}`,
      () => {
        const record = c().sessions.get(agentId);
        return record && states.includes(record.state) ? record : undefined;
      },
      WAIT_MS,
    );

  const taskIn = (taskId: string, ...states: string[]) =>
    pollUntil(
      `task ${taskId} ${states.join('/')}`,
      () => {
        const task = c().scheduler.task(taskId);
        return task && states.includes(task.state) ? task : undefined;
      },
      WAIT_MS,
    );

  function submit(taskId: string, target: string, params: unknown, priority = 0): void {
    const submitted = c().scheduler.submit(
      {
        taskId,
        target,
        priority,
        params: Buffer.from(JSON.stringify(params)),
        contentType: 'application/json',
        scope: `resource:${taskId}`,
        submittedBy: 'operator',
      },
      ctx,
    );
    assert.ok(submitted.accepted, submitted.accepted ? '' : submitted.reason);
  }

  const entries = (agentId: string): TranscriptEntry[] =>
    c()
      .sessions.transcript(agentId)
      .entries.map((e) => e.entry);

  /** The permission requests of an agent's transcript: the tool (its title's first word), the answer, who decided. */
  const permissions = (agentId: string): string[][] =>
    entries(agentId).flatMap((e) => (e.kind === 'permission' ? [[e.title.split(' ')[0], e.answer, e.decidedBy]] : []));

  /** Approves (or denies) the pending approval of `agentId`'s permission request, as the session panel does. */
  async function decide(agentId: string, action: 'approve' | 'deny'): Promise<void> {
    const pending = await pollUntil(
      `an approval for ${agentId}`,
      async () => (await api!.approvals({ pendingOnly: true })).find((a) => JSON.stringify(a).includes(agentId)),
      WAIT_MS,
    );
    await api!.decideApproval(pending.id, { action, rationale: `${action} in the test` }, 'editor:test');
  }

  it('a four-node workflow (plan → two coders in their own worktrees → review) runs with nobody typing; each write waits for its approval', async () => {
    model.setScript((request) => {
      const { agent, prompt, step } = conversation(request);
      const node = /Node '([^']+)' of workflow/.exec(prompt)?.[1];
      if (agent === 'planner' && node === 'plan')
        return step === 0
          ? sw4rm('complete_task', {
              result: { plan: 'coder-a writes a.txt, coder-b writes b.txt' },
              note: 'planned',
            })
          : { text: 'Planned.' };
      if ((agent === 'coder-a' || agent === 'coder-b') && node?.startsWith('code-')) {
        const letter = agent.slice(-1);
        assert.match(prompt, /"plan": "coder-a writes a\.txt, coder-b writes b\.txt"/);
        if (step === 0)
          return tool('Write', {
            file_path: path.join(cwd.get(agent)!, `${letter}.txt`),
            content: `written by ${agent}\n`,
          });
        if (step === 1) return sw4rm('complete_task', { result: { file: `${letter}.txt` }, note: 'written' });
        return { text: 'Done.' };
      }
      if (agent === 'planner' && node === 'review') {
        assert.match(prompt, /"a": "a\.txt"/);
        assert.match(prompt, /"b": "b\.txt"/);
        return step === 0 ? sw4rm('complete_task', { result: { verdict: 'approved' } }) : { text: 'Reviewed.' };
      }
      throw new Error(`no script for ${agent} at ${JSON.stringify(prompt.slice(0, 200))} (step ${step})`);
    });
    await Promise.all(['planner', 'coder-a', 'coder-b'].map((id) => launch(id)));
    await Promise.all(['planner', 'coder-a', 'coder-b'].map((id) => sessionIn(id, 'idle')));
    const node = (nodeId: string, agentId: string, more: Record<string, unknown> = {}) => ({
      nodeId,
      agentId,
      dependencies: [],
      trigger: 'DEPENDENCY' as const,
      inputMapping: {},
      outputMapping: {},
      metadata: {},
      ...more,
    });
    const created = c().workflows.create(
      {
        workflowId: 'feature',
        metadata: {},
        nodes: [
          node('plan', 'planner', { outputMapping: { plan: 'plan' } }),
          node('code-a', 'coder-a', {
            dependencies: ['plan'],
            inputMapping: { plan: 'plan' },
            outputMapping: { file: 'files.a' },
          }),
          node('code-b', 'coder-b', {
            dependencies: ['plan'],
            inputMapping: { plan: 'plan' },
            outputMapping: { file: 'files.b' },
          }),
          node('review', 'planner', {
            dependencies: ['code-a', 'code-b'],
            inputMapping: { files: 'files' },
            outputMapping: { verdict: 'verdict' },
          }),
        ],
      },
      'operator',
      ctx,
    );
    assert.equal(created.ok, true, JSON.stringify(created));
    c().workflows.start('feature', '{}', 'operator', ctx);
    // Both coders ask to write; each waits for a person.
    await sessionIn('coder-a', 'waiting_for_approval');
    await sessionIn('coder-b', 'waiting_for_approval');
    await decide('coder-a', 'approve');
    await decide('coder-b', 'approve');
    const done = await pollUntil(
      'the workflow COMPLETED',
      () => {
        const state = c().workflows.detail('feature')?.summary.state;
        if (state === 'FAILED')
          throw new Error(`the workflow FAILED: ${JSON.stringify(c().workflows.detail('feature'))}`);
        return state === 'COMPLETED' ? c().workflows.detail('feature') : undefined;
      },
      WAIT_MS * 2,
    );
    assert.deepEqual(JSON.parse(done!.data), {
      plan: 'coder-a writes a.txt, coder-b writes b.txt',
      files: { a: 'a.txt', b: 'b.txt' },
      verdict: 'approved',
    });
    // Each coder wrote in its own worktree, nothing in the other's or the repository's.
    assert.equal(fs.readFileSync(path.join(cwd.get('coder-a')!, 'a.txt'), 'utf8'), 'written by coder-a\n');
    assert.equal(fs.readFileSync(path.join(cwd.get('coder-b')!, 'b.txt'), 'utf8'), 'written by coder-b\n');
    assert.notEqual(cwd.get('coder-a'), cwd.get('coder-b'));
    assert.ok(!fs.existsSync(path.join(cwd.get('coder-a')!, 'b.txt')));
    assert.ok(!fs.existsSync(path.join(repo, 'a.txt')));
    // The planner's two turns were its two nodes; the coders' permission answers are in their transcripts.
    const origins = entries('planner').flatMap((e) => (e.kind === 'turn' ? [e.origin] : []));
    assert.deepEqual(
      origins.map((o) => (o.kind === 'node' ? o.nodeId : o.kind)),
      ['plan', 'review'],
    );
    // Each coder's write was asked and approved by the person; its complete_task (the coordinator's own tool) allowed.
    for (const coder of ['coder-a', 'coder-b'])
      assert.deepEqual(permissions(coder), [
        ['Write', 'allow_once', 'person:editor:test'],
        ['mcp__sw4rm__complete_task', 'allow_once', 'rule:builtin:coordinator-tools'],
      ]);
    assert.deepEqual(
      model.refusedConnects.filter((h) => !h.startsWith('raw.githubusercontent.com')),
      [],
    );
    await Promise.all(['planner', 'coder-a', 'coder-b'].map((id) => sessionIn(id, 'idle')));
  });

  it('a preemption cancels the turn; the urgent task runs in the same session (reloaded, not one prompt behind), then the first resumes', async () => {
    let held = false;
    model.setScript((request) => {
      const { prompt, step } = conversation(request);
      if (/task long\b/.test(prompt)) {
        if (!held) {
          held = true;
          return { text: 'Working on the long one', hold: true };
        }
        return step === 0 ? sw4rm('complete_task', { result: { long: 'finished' } }) : { text: 'Long done.' };
      }
      if (/task urgent\b/.test(prompt))
        return step === 0 ? sw4rm('complete_task', { result: { urgent: 'finished' } }) : { text: 'Urgent done.' };
      throw new Error(`no script for ${JSON.stringify(prompt.slice(0, 200))} (step ${step})`);
    });
    await launch('coder');
    await sessionIn('coder', 'idle');
    submit('long', 'coder', { what: 'the long one' });
    await taskIn('long', 'RUNNING');
    await pollUntil('the held turn streaming', () =>
      entries('coder').some((e) => e.kind === 'agent' && e.text.includes('Working on the long one')) ? true : undefined,
    );
    submit('urgent', 'coder', { what: 'now' }, -10);
    const urgent = await taskIn('urgent', 'COMPLETED', 'FAILED');
    assert.equal(urgent.state, 'COMPLETED', urgent.note);
    // Without the reload the urgent turn ends at once with the cancelled turn's leftover end (claude-agent-acp #551),
    // completing the task with nothing.
    assert.notEqual(urgent.result, '', 'the urgent task completed with the result of its own turn');
    assert.deepEqual(JSON.parse(urgent.result), { urgent: 'finished' });
    const long = await taskIn('long', 'COMPLETED', 'FAILED');
    assert.equal(long.state, 'COMPLETED', long.note);
    assert.deepEqual(JSON.parse(long.result), { long: 'finished' });
    assert.equal(long.dispatches, 2);
    await sessionIn('coder', 'idle');
    const ends = entries('coder').flatMap((e) => (e.kind === 'end' ? [e.end] : []));
    assert.deepEqual(ends, ['cancelled', 'end_turn', 'end_turn']);
  });

  it('a message to an idle session becomes a turn and its reply reaches the sender; a denied write is not written', async () => {
    model.setScript((request) => {
      const { prompt, step } = conversation(request);
      if (/message from peer arrived/.test(prompt))
        return step === 0
          ? sw4rm('send_message', { to: 'peer', payload: { text: 'hi from coder' } })
          : { text: 'Replied to peer.' };
      if (/^write secret/.test(prompt))
        return step === 0
          ? tool('Write', { file_path: path.join(cwd.get('coder')!, 'secret.txt'), content: 'nope\n' })
          : { text: 'The write was refused.' };
      throw new Error(`no script for ${JSON.stringify(prompt.slice(0, 200))} (step ${step})`);
    });
    await launch('coder');
    await sessionIn('coder', 'idle');
    assert.equal(c().registry.register(validDescriptor('peer'), ctx).accepted, true);
    const token = c().credentials.mintAgent('peer', 'test', 'the peer', ctx).token;
    peer = new Client({ name: 'peer', version: '1.0.0' });
    await peer.connect(
      new StreamableHTTPClientTransport(new URL(host!.bridgeEndpoints!.mcpUrl), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    const sent = (await peer.callTool({
      name: 'send_message',
      arguments: { to: 'coder', payload: { text: 'say hi back' } },
    })) as CallToolResult;
    assert.notEqual(sent.isError, true, JSON.stringify(sent.content));
    const messageId = (sent.structuredContent as any).message_id as string;
    await pollUntil(
      'the message FULFILLED',
      () => (c().router.message(messageId)?.state === 'FULFILLED' ? true : undefined),
      WAIT_MS,
    );
    const read = (await peer.callTool({ name: 'read_inbox', arguments: { wait_ms: 5000 } })) as CallToolResult;
    const inbox = read.structuredContent as any;
    assert.ok(
      inbox.messages.some((m: any) => m.from === 'coder' && JSON.stringify(m.payload).includes('hi from coder')),
      JSON.stringify(inbox),
    );
    const ack = (inbox.acknowledgements ?? []).find(
      (a: any) => a.for_message_id === messageId && a.stage === 'FULFILLED',
    );
    assert.equal(ack?.note, 'Replied to peer.', JSON.stringify(inbox));
    await sessionIn('coder', 'idle');

    await api!.promptSession('coder', 'write secret.txt', 'editor:test');
    await sessionIn('coder', 'waiting_for_approval');
    await decide('coder', 'deny');
    await pollUntil('the turn after the refusal', () =>
      entries('coder').some((e) => e.kind === 'agent' && e.text.includes('The write was refused.')) ? true : undefined,
    );
    assert.ok(!fs.existsSync(path.join(cwd.get('coder')!, 'secret.txt')), 'a denied write is not written');
    assert.deepEqual(permissions('coder'), [
      ['mcp__sw4rm__send_message', 'allow_once', 'rule:builtin:coordinator-tools'],
      ['Write', 'reject_once', 'person:editor:test'],
    ]);
    // What the model was told of the refusal: the tool's result is an error.
    const results = model.mainRequests().flatMap((r) => r.turn?.toolResults ?? []);
    assert.ok(
      results.some((r) => r.isError),
      JSON.stringify(results),
    );
  });

  it("an agent process killed mid-turn fails its task with the agent's end named, and the session is shown exited", async () => {
    model.setScript(() => ({ text: 'Thinking hard', hold: true }));
    await launch('coder');
    await sessionIn('coder', 'idle');
    submit('doomed', 'coder', { what: 'never finishes' });
    await taskIn('doomed', 'RUNNING');
    await pollUntil('the held turn streaming', () =>
      entries('coder').some((e) => e.kind === 'agent' && e.text.includes('Thinking hard')) ? true : undefined,
    );
    const pid = childPidRunning(AGENT_BIN);
    process.kill(pid, 'SIGKILL');
    const failed = await taskIn('doomed', 'FAILED', 'COMPLETED');
    assert.equal(failed.state, 'FAILED');
    assert.equal(failed.errorCode, 'AGENT_UNAVAILABLE');
    assert.match(failed.note, /the agent's process ended \(SIGKILL\)/);
    const record = await sessionIn('coder', 'exited');
    assert.equal(record.exitCode, null);
    assert.equal(c().launches.get('coder')!.state, 'EXITED');
  });
});

/** The pid of this process's child whose command line holds `needle` (Linux: /proc). */
function childPidRunning(needle: string): number {
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== process.pid) continue;
      if (fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(needle)) return Number(name);
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no child of ${process.pid} runs ${needle}`);
}
