/* eslint-disable @typescript-eslint/no-explicit-any -- the bridge answers untyped JSON the tests read field by field */
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import type { TranscriptEntry } from '../../src/core/sessions/model';
import type { CoordinatorHost } from '../../src/server/host';
import { validDescriptor } from '../support/fixtures';
import { makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { pollUntil } from '../support/poll';
import { REPO_ROOT } from '../support/paths';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const AGENT = [process.execPath, path.join(REPO_ROOT, 'test', 'fixtures', 'acpTestAgent.mjs')];
const ctx = { correlationId: 'sessions-test' };
/** A session profile of the test agent (test/fixtures/acpTestAgent.mjs: it does what its prompt's lines say). */
const PROFILE = { id: 'test-session', name: 'Test agent (session)', cli: 'custom', mode: 'session', command: AGENT };

/**
 * Agents in session mode (src/core/sessions/) against a real coordinator (CoordinatorHost: store files, gRPC and the
 * MCP bridge on port 0, real git) and a real ACP agent process over stdio: a launch of a session profile opens the
 * session with the bridge as its MCP server; tasks, messages and a person's prompts become turns; permission requests
 * go through the tool-approval rules to an approval; a preemption cancels the turn and requeues the task; a crash
 * fails the task; a restart requeues the task of a session that was open.
 */
describe('agents in session mode (real coordinator, real ACP agent process)', function () {
  this.timeout(60_000);
  let dir: string;
  let dataDir: string;
  let repo: string;
  let host: CoordinatorHost | undefined;
  let api: InProcessCoordinatorApi | undefined;
  let peer: Client | undefined;

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-int-sessions-');
    repo = makeRepo(dir, 'app', { 'README.md': 'hello\n' });
    dataDir = path.join(dir, 'data');
    await start();
  });

  afterEach(async () => {
    await peer?.close();
    peer = undefined;
    await stop();
    removeTempDir(dir);
  });

  async function start(): Promise<void> {
    host = await startHost(dataDir, { workspaceFolders: [repo], distDir: path.join(REPO_ROOT, 'dist') });
    api = new InProcessCoordinatorApi(host.coordinator);
    assert.deepEqual(await api.setLaunchProfileSettings([PROFILE]), []);
  }

  async function stop(): Promise<void> {
    api?.dispose();
    api = undefined;
    await stopHost(host);
    host = undefined;
  }

  const c = () => host!.coordinator;

  async function launch(agentId = 'coder') {
    const plan = await api!.launchAgent(
      { profileId: 'test-session', repoId: 'app', worktree: { kind: 'new' }, agentId },
      'editor:test',
    );
    assert.equal(plan.mode, 'session');
    return plan;
  }

  function submit(taskId: string, steps: string, priority = 0): void {
    const submitted = c().scheduler.submit(
      {
        taskId,
        target: 'coder',
        priority,
        params: Buffer.from(steps),
        contentType: 'text/plain',
        scope: `resource:${taskId}`,
        submittedBy: 'operator',
      },
      ctx,
    );
    assert.ok(submitted.accepted, submitted.accepted ? '' : submitted.reason);
  }

  const taskIn = (taskId: string, ...states: string[]) =>
    pollUntil(
      `task ${taskId} ${states.join('/')}`,
      () => {
        const task = c().scheduler.task(taskId);
        return task && states.includes(task.state) ? task : undefined;
      },
      20_000,
    );

  const sessionIn = (agentId: string, state: string) =>
    pollUntil(
      `session ${agentId} ${state}`,
      () => {
        const record = c().sessions.get(agentId);
        return record?.state === state ? record : undefined;
      },
      20_000,
    );

  const entries = (agentId: string): TranscriptEntry[] =>
    c()
      .sessions.transcript(agentId)
      .entries.map((e) => e.entry);
  const said = (agentId: string) => entries(agentId).flatMap((e) => (e.kind === 'agent' ? [e.text] : []));

  it('opens the session with the bridge as its MCP server (the agent credential as a bearer header), registered, RUNNING and idle', async () => {
    const plan = await launch();
    const record = await sessionIn('coder', 'idle');
    assert.equal(record.agentName, 'sw4rm-test-agent');
    assert.equal(record.sessionId, 's1');
    assert.equal(c().launches.get('coder')!.state, 'RUNNING');
    assert.equal(c().registry.get('coder')!.state, 'RUNNABLE');
    assert.ok(fs.existsSync(path.join(plan.cwd, '.sw4rm', 'AGENT.md')), 'the instructions file is written');
    assert.ok(!fs.existsSync(path.join(plan.cwd, '.mcp.json')), 'no MCP configuration file: the session carries it');
    // A person's prompt: the agent lists the MCP servers it was given.
    await api!.promptSession('coder', 'mcp', 'editor:test');
    await sessionIn('coder', 'idle');
    assert.deepEqual(JSON.parse(said('coder').at(-1)!), [{ name: 'sw4rm', type: 'http', headers: ['Authorization'] }]);
    assert.ok(!fs.readFileSync(path.join(plan.cwd, '.sw4rm', 'AGENT.md'), 'utf8').includes(plan.env.SW4RM_TOKEN));
  });

  it('a task becomes a turn: RUNNING at its first update, COMPLETED with the result given to complete_task, or with its last message', async () => {
    await launch();
    await sessionIn('coder', 'idle');
    submit('t-1', 'say working on it\ntool complete_task {"result": {"ok": true}, "note": "did it"}');
    const done = await taskIn('t-1', 'COMPLETED', 'FAILED');
    assert.equal(done.state, 'COMPLETED', done.note);
    assert.deepEqual(JSON.parse(done.result), { ok: true });
    assert.equal(done.note, 'did it');
    assert.ok(done.startedAt !== null);
    const turn = entries('coder').find((e) => e.kind === 'turn')!;
    assert.deepEqual(turn.kind === 'turn' && turn.origin, { kind: 'task', taskId: 't-1' });
    assert.match(turn.kind === 'turn' ? turn.prompt : '', /^You are coder, an agent of a SW4RM swarm/);
    assert.match(turn.kind === 'turn' ? turn.prompt : '', /The scheduler gave you task t-1/);

    // Without complete_task: the turn's last message is the result.
    submit('t-2', 'say all done here');
    const second = await taskIn('t-2', 'COMPLETED', 'FAILED');
    assert.equal(second.state, 'COMPLETED', second.note);
    assert.equal(JSON.parse(second.result), 'all done here');
    // The second turn has no preamble.
    const turns = entries('coder').filter((e) => e.kind === 'turn');
    assert.equal(turns.length, 2);
    assert.doesNotMatch(turns[1].kind === 'turn' ? turns[1].prompt : '', /^You are coder/);
    await sessionIn('coder', 'idle');
  });

  it("a message to an idle session becomes a turn: RECEIVED at its start, FULFILLED at its end, the agent's reply reaching the sender", async () => {
    await launch();
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
      arguments: {
        to: 'coder',
        payload: 'say hello peer\ntool send_message {"to": "peer", "payload": {"text": "hi from coder"}}',
      },
    })) as CallToolResult;
    assert.notEqual(sent.isError, true, JSON.stringify(sent.content));
    const messageId = (sent.structuredContent as any).message_id as string;
    await pollUntil(
      'the message FULFILLED',
      () => (c().router.message(messageId)?.state === 'FULFILLED' ? true : undefined),
      20_000,
    );
    const history = c()
      .router.message(messageId)!
      .history.map((h) => h.event);
    assert.ok(history.includes('ack_received'), history.join(', '));
    assert.ok(history.includes('ack_fulfilled'), history.join(', '));
    const turn = entries('coder').find((e) => e.kind === 'turn');
    assert.deepEqual(turn?.kind === 'turn' && turn.origin, { kind: 'message', messageId, from: 'peer' });
    // The peer reads the reply and the acknowledgement of its message (the turn's last message as the note).
    const read = (await peer.callTool({ name: 'read_inbox', arguments: { wait_ms: 5000 } })) as CallToolResult;
    const inbox = read.structuredContent as any;
    assert.ok(
      inbox.messages.some((m: any) => m.from === 'coder' && JSON.stringify(m.payload).includes('hi from coder')),
      JSON.stringify(inbox),
    );
    const acks = (inbox.acknowledgements ?? []).filter((a: any) => a.for_message_id === messageId);
    assert.deepEqual(
      acks.map((a: any) => a.stage),
      ['RECEIVED', 'FULFILLED'],
    );
    const ack = acks[1];
    assert.equal(ack?.stage, 'FULFILLED', JSON.stringify(inbox));
    assert.match(ack.note, /send_message: /);
  });

  it('a permission request is an approval by the tool-approval rules: approved, the file is written through the confinement; denied, it is not', async () => {
    const plan = await launch();
    await sessionIn('coder', 'idle');
    await api!.promptSession('coder', 'write notes.txt approved text', 'editor:test');
    await sessionIn('coder', 'waiting_for_approval');
    const first = await pollUntil('a pending approval', async () => (await api!.approvals({ pendingOnly: true }))[0]);
    await api!.decideApproval(first.id, { action: 'approve', rationale: 'fine' }, 'test');
    await sessionIn('coder', 'idle');
    assert.equal(fs.readFileSync(path.join(plan.cwd, 'notes.txt'), 'utf8'), 'approved text');

    await api!.promptSession('coder', 'write denied.txt nope', 'editor:test');
    const second = await pollUntil('another pending approval', async () =>
      (await api!.approvals({ pendingOnly: true })).find((a) => a.id !== first.id),
    );
    await api!.decideApproval(second.id, { action: 'deny', rationale: 'not that file' }, 'test');
    await sessionIn('coder', 'idle');
    assert.ok(!fs.existsSync(path.join(plan.cwd, 'denied.txt')));
    const answers = entries('coder')
      .filter((e) => e.kind === 'permission')
      .map((e) => e.kind === 'permission' && e.answer);
    assert.deepEqual(answers, ['allow_once', 'reject_once']);
  });

  it('a preemption cancels the turn (session/cancel) and the task goes back to the queue; a more urgent one runs, then it resumes', async () => {
    await launch();
    await sessionIn('coder', 'idle');
    submit('long', 'wait');
    await taskIn('long', 'RUNNING');
    await sessionIn('coder', 'working');
    submit('urgent', 'say urgent done', -10);
    const urgent = await taskIn('urgent', 'COMPLETED', 'FAILED');
    assert.equal(urgent.state, 'COMPLETED', urgent.note);
    // The long one was yielded (back in the queue) and was sent again: it runs its turn anew.
    const again = await taskIn('long', 'RUNNING');
    assert.equal(again.dispatches, 2);
    const ends = entries('coder')
      .filter((e) => e.kind === 'end')
      .map((e) => e.kind === 'end' && e.end);
    assert.deepEqual(ends.slice(0, 2), ['cancelled', 'end_turn']);
    await api!.stopSessionTurn('coder');
    const stopped = await taskIn('long', 'FAILED', 'COMPLETED');
    assert.equal(stopped.state, 'FAILED');
    assert.equal(stopped.errorCode, 'TURN_CANCELLED');
  });

  it('an agent process that crashes fails its task with a clear error and is shown exited', async () => {
    await launch();
    await sessionIn('coder', 'idle');
    submit('doomed', 'say about to crash\ncrash');
    const failed = await taskIn('doomed', 'FAILED', 'COMPLETED');
    assert.equal(failed.state, 'FAILED');
    assert.equal(failed.errorCode, 'AGENT_UNAVAILABLE');
    assert.match(failed.note, /the agent's process ended \(exit code 3\)/);
    const record = await sessionIn('coder', 'exited');
    assert.equal(record.exitCode, 3);
    assert.equal(c().launches.get('coder')!.state, 'EXITED');
    await assert.rejects(api!.promptSession('coder', 'say hi', 'editor:test'), /no open session/);
  });

  it('after a restart mid-turn the task is back in the queue, the session exited and its transcript kept; Relaunch opens a new session that runs it', async () => {
    await launch();
    await sessionIn('coder', 'idle');
    submit('survivor', 'wait');
    await taskIn('survivor', 'RUNNING');
    await pollUntil('the turn stored', () => (entries('coder').some((e) => e.kind === 'plan') ? true : undefined));
    await stop();
    await start();
    const requeued = await taskIn('survivor', 'QUEUED');
    assert.equal(requeued.assignedAgentId, '');
    const record = await sessionIn('coder', 'exited');
    assert.match(record.error ?? '', /the coordinator restarted/);
    assert.equal(c().launches.get('coder')!.state, 'EXITED');
    assert.ok(
      entries('coder').some((e) => e.kind === 'turn'),
      'the transcript survived the restart',
    );
    await api!.relaunchAgent('coder', 'editor:test');
    await taskIn('survivor', 'RUNNING');
    await api!.stopSessionTurn('coder');
    await taskIn('survivor', 'FAILED');
  });
});
