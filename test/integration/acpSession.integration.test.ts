import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { RequestPermissionRequest } from '@agentclientprotocol/sdk' with { 'resolution-mode': 'import' };
import { systemClock } from '../../src/core/clock';
import { Guard } from '../../src/core/kernel/guard';
import { KeyedTimers } from '../../src/core/kernel/timers';
import { AcpSession, AcpStartError, type AcpSessionHooks } from '../../src/core/sessions/acpSession';
import { confinedFiles } from '../../src/core/sessions/files';
import type { TranscriptEntry } from '../../src/core/sessions/model';
import { permissionOutcome, toolUseOfPermission } from '../../src/core/toolApproval/acpPermissions';
import type { HookDecision, ToolUse } from '../../src/core/toolApproval/model';
import { Confinement } from '../../src/core/worktree/confinement';
import { makeRepo } from '../support/gitRepo';
import { REPO_ROOT } from '../support/paths';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/**
 * The session client (src/core/sessions/acpSession.ts) against a real ACP agent process over stdio: the test agent
 * (test/fixtures/acpTestAgent.mjs) is written with the official library's agent side and does what each prompt's
 * lines say. Files go through the worktree's Confinement; permission requests through the tool-use reading of
 * toolApproval/acpPermissions.ts, decided by the test.
 */
const AGENT = [process.execPath, path.join(REPO_ROOT, 'test', 'fixtures', 'acpTestAgent.mjs')];

describe('ACP session client against a real ACP agent process', function () {
  this.timeout(60_000);
  let dir: string;
  let repo: string;
  let sessions: AcpSession[];
  const timers = new KeyedTimers<string>(systemClock, new Guard((context, err) => console.error(context, err)));

  beforeEach(() => {
    dir = makeTempDir('sw4rm-acp-');
    repo = makeRepo(dir, 'wt', { 'README.md': 'hello\n' });
    sessions = [];
  });

  afterEach(async () => {
    for (const session of sessions) await session.close();
    removeTempDir(dir);
  });

  async function start(
    decide: (use: ToolUse) => HookDecision = () => 'deny',
    env: Record<string, string> = {},
  ): Promise<{ session: AcpSession; entries: TranscriptEntry[]; asked: RequestPermissionRequest[] }> {
    const confinement = await Confinement.forWorktree(repo);
    const entries: TranscriptEntry[] = [];
    const asked: RequestPermissionRequest[] = [];
    const hooks: AcpSessionHooks = {
      clock: systemClock,
      timers,
      key: `agent-${sessions.length}`,
      permission: async (request) => {
        asked.push(request);
        const decision = decide(toolUseOfPermission(request.toolCall));
        return { outcome: permissionOutcome(decision, request.options), decidedBy: `test:${decision}` };
      },
      files: confinedFiles(repo, confinement),
      onEntry: (entry) => entries.push(entry),
    };
    const session = await AcpSession.start({ command: AGENT, cwd: repo, env }, hooks, () => [
      {
        type: 'http',
        name: 'sw4rm',
        url: 'http://127.0.0.1:1/mcp',
        headers: [{ name: 'Authorization', value: 'Bearer x' }],
      },
    ]);
    sessions.push(session);
    return { session, entries, asked };
  }

  it('initializes with the capabilities it serves, opens a session with the MCP servers, and streams a turn', async () => {
    const { session, entries } = await start();
    assert.equal(session.agent.initialize.agentInfo?.name, 'sw4rm-test-agent');
    const seen = session.agent.initialize._meta?.clientCapabilities as { fs: unknown; terminal: boolean };
    assert.deepEqual(seen.fs, { readTextFile: true, writeTextFile: true });
    assert.equal(seen.terminal, false, 'no terminal capability: it would not run through the confined process path');
    const result = await session.prompt({ kind: 'person', by: 'tester' }, 'think first\nsay Hello, \nsay world\nmcp');
    assert.equal(result.end, 'end_turn');
    assert.ok(result.text.startsWith('Hello,world['), result.text);
    assert.deepEqual(JSON.parse(result.text.slice(result.text.indexOf('['))), [
      { name: 'sw4rm', type: 'http', headers: ['Authorization'] },
    ]);
    // Every change is told as it happens (each chunk changes the joined entry); the transcript keeps one entry.
    assert.deepEqual(
      entries.map((e) => e.kind),
      ['turn', 'thought', 'agent', 'agent', 'agent', 'end'],
    );
    assert.deepEqual(
      session.transcript.entries.map((e) => e.kind),
      ['turn', 'thought', 'agent', 'end'],
    );
    assert.equal(session.transcript.entries.length, 4);
    assert.equal(session.busy, false);
  });

  it('asks before a write: a deny is honoured (nothing written), an allow writes through the confinement', async () => {
    let decision: HookDecision = 'deny';
    const { session, asked } = await start(() => decision);
    const file = path.join(repo, 'notes.md');
    let result = await session.prompt({ kind: 'task', taskId: 't1' }, `write ${file} first try`);
    assert.equal(result.end, 'end_turn');
    assert.equal(fs.existsSync(file), false, 'a denied write must not happen');
    assert.equal(asked.length, 1);
    const denied = session.transcript.entries.find((e) => e.kind === 'permission');
    assert.ok(denied?.kind === 'permission' && denied.answer === 'reject_once' && denied.decidedBy === 'test:deny');
    decision = 'ask'; // nobody decided: never an allow
    await session.prompt({ kind: 'task', taskId: 't1' }, `write ${file} second try`);
    assert.equal(fs.existsSync(file), false);
    decision = 'allow';
    result = await session.prompt({ kind: 'task', taskId: 't1' }, `write ${file} third try\nread ${file}`);
    assert.equal(fs.readFileSync(file, 'utf8'), 'third try');
    assert.equal(result.text, 'read: third try');
    const tool = [...session.transcript.entries].reverse().find((e) => e.kind === 'tool');
    assert.ok(tool?.kind === 'tool' && tool.status === 'completed' && tool.diffs[0].newText === 'third try');
    const allowed = [...session.transcript.entries].reverse().find((e) => e.kind === 'permission');
    assert.ok(allowed?.kind === 'permission' && allowed.answer === 'allow_once');
  });

  it('serves files only inside the worktree: a path outside is refused to the agent', async () => {
    const outside = path.join(dir, 'secret.txt');
    fs.writeFileSync(outside, 'secret');
    const { session } = await start(() => 'allow');
    const result = await session.prompt(
      { kind: 'person', by: 'tester' },
      `read ${outside}\nwrite ${outside} overwritten`,
    );
    const said = session.transcript.entries.find((e) => e.kind === 'agent');
    assert.ok(
      said?.kind === 'agent' && /^read refused: .*outside the agent's worktree/.test(said.text),
      JSON.stringify(said),
    );
    assert.equal(result.text, '', "the turn's last message is what follows its last tool call");
    assert.equal(fs.readFileSync(outside, 'utf8'), 'secret');
    const tool = [...session.transcript.entries].reverse().find((e) => e.kind === 'tool');
    assert.ok(tool?.kind === 'tool' && tool.status === 'failed', JSON.stringify(tool));
  });

  it('cancels a running turn with session/cancel; one turn at a time', async () => {
    const { session } = await start();
    const turn = session.prompt({ kind: 'task', taskId: 't2' }, 'wait');
    await assert.rejects(session.prompt({ kind: 'person', by: 'x' }, 'say no'), /already running/);
    while (!session.transcript.entries.some((e) => e.kind === 'plan')) await new Promise((r) => setImmediate(r));
    await session.cancel();
    const result = await turn;
    assert.equal(result.end, 'cancelled');
    assert.equal((await session.prompt({ kind: 'person', by: 'x' }, 'say again')).text, 'again');
  });

  it("a process that dies mid-turn ends the turn in error with the agent's last words, and says it exited", async () => {
    const exits: Array<number | null> = [];
    const { session } = await start();
    const exited = new Promise<void>((resolve) => {
      const child = (session as unknown as { child: import('node:child_process').ChildProcess }).child;
      child.once('exit', (code) => {
        exits.push(code);
        resolve();
      });
    });
    const result = await session.prompt({ kind: 'task', taskId: 't3' }, 'say working\ncrash');
    await exited;
    assert.equal(result.end, 'error');
    assert.match(result.error ?? '', /ended|closed/i);
    assert.deepEqual(exits, [3]);
    assert.equal(session.hasExited, true);
    await assert.rejects(session.prompt({ kind: 'person', by: 'x' }, 'say x'), /ended/);
  });

  it('refuses a program that does not speak ACP, with its last words', async () => {
    const hooks: AcpSessionHooks = {
      clock: systemClock,
      timers,
      key: 'bad',
      permission: async () => ({ outcome: { outcome: 'cancelled' }, decidedBy: 'none' }),
    };
    await assert.rejects(
      AcpSession.start(
        { command: [process.execPath, '-e', 'console.error("no protocol here"); process.exit(2)'], cwd: repo, env: {} },
        hooks,
        () => [],
      ),
      (err: unknown) =>
        err instanceof AcpStartError &&
        /did not open an ACP session/.test(err.message) &&
        /no protocol here/.test(err.stderr),
    );
    await assert.rejects(
      AcpSession.start({ command: [path.join(dir, 'missing-program')], cwd: repo, env: {} }, hooks, () => []),
      (err: unknown) => err instanceof AcpStartError && /did not start/.test(err.message),
    );
  });

  it("never passes the coordinator's SW4RM_* variables to the agent, only the ones given", async () => {
    process.env.SW4RM_TOKEN = 'operator-secret';
    try {
      const hooks: AcpSessionHooks = {
        clock: systemClock,
        timers,
        key: 'env',
        permission: async () => ({ outcome: { outcome: 'cancelled' }, decidedBy: 'none' }),
      };
      const script =
        'process.stderr.write(JSON.stringify({ t: process.env.SW4RM_TOKEN, a: process.env.SW4RM_AGENT_ID })); process.exit(1)';
      const err = await AcpSession.start(
        { command: [process.execPath, '-e', script], cwd: repo, env: { SW4RM_AGENT_ID: 'coder-1' } },
        hooks,
        () => [],
      ).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof AcpStartError);
      assert.deepEqual(JSON.parse(err.stderr), { a: 'coder-1' });
    } finally {
      delete process.env.SW4RM_TOKEN;
    }
  });
});
