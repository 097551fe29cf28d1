import * as grpc from '@grpc/grpc-js';
import { strict as assert } from 'node:assert';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CoordinatorHost } from '../../src/server/host';
import { bearer, CoordinatorClients, expectStatus, serviceClient, unary, type ServiceClient } from '../support/clients';
import {
  ALL_OPS,
  ATTACK_COUNT,
  CORPUS,
  SECRET,
  plantAttackFixture,
  type Fixture,
  type Op,
} from '../support/confinementCorpus';
import { descriptorMessage } from '../support/fixtures';
import { git, makeRepo } from '../support/gitRepo';
import { startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

interface ToolFrame {
  call_id: string;
  frame_no: string;
  final: boolean;
  content_type: string;
  data: Buffer;
  summary: Buffer;
}
interface ToolDescriptorMessage {
  tool_name: string;
  input_schema: string;
  output_schema: string;
  idempotent: boolean;
  needs_worktree: boolean;
  default_timeout_s: number;
  max_concurrency: number;
  side_effects: string;
}
type Client = ServiceClient;

/**
 * The built-in `workspace` tools over real gRPC (issue 15, parts 6 and 11): a coordinator with a workspace repository,
 * agents bound through WorktreeService, every tool called through sw4rm.tool.ToolService with the canonical protos;
 * the caller is its credential's agent; and the whole confinement corpus sent as tool calls, with zero escapes.
 */
/**
 * Another process swaps the folder `race` for a symbolic link to `target` and back as fast as it can for `ms`, then
 * leaves the folder in place; answers when it has exited.
 */
function swapForLink(race: string, target: string, ms: number): Promise<void> {
  const swapper = spawn(
    process.execPath,
    [
      '-e',
      `
    const fs = require('fs');
    const race = ${JSON.stringify(race)}, moved = race + '.real', target = ${JSON.stringify(target)};
    const end = Date.now() + ${ms};
    while (Date.now() < end) {
      try { fs.renameSync(race, moved); fs.symlinkSync(target, race); } catch {}
      try { fs.unlinkSync(race); fs.renameSync(moved, race); } catch {}
    }
    try { if (fs.lstatSync(race).isSymbolicLink()) { fs.unlinkSync(race); fs.renameSync(moved, race); } } catch {}
  `,
    ],
    { stdio: 'ignore' },
  );
  return new Promise<void>((resolve) => swapper.on('exit', () => resolve()));
}

describe('workspace tools over real gRPC (ToolService, ConnectorService)', function () {
  this.timeout(180_000);
  let base: string;
  let dataDir: string;
  let repo: string;
  let host: CoordinatorHost;
  let tools: Client;
  let connector: Client;
  let worktrees: Client;
  const tokens: Record<string, string> = {};

  const metadata = (token: string, agentId?: string): grpc.Metadata =>
    bearer(token, agentId === undefined ? {} : { 'sw4rm-agent-id': agentId });

  /** ToolService.Call of `workspace` as `agent` (its own credential unless `as` says otherwise): the parsed result and the frame. */
  async function call(
    agent: string,
    tool: string,
    args: unknown,
    as: { token?: string; agentId?: string } = {},
  ): Promise<{ result: Record<string, unknown>; frame: ToolFrame }> {
    const frame = await unary<ToolFrame>(
      tools,
      'Call',
      {
        call_id: `c-${tool}-${Math.random().toString(36).slice(2)}`,
        tool_name: tool,
        provider_id: 'workspace',
        content_type: 'application/json',
        args: Buffer.from(JSON.stringify(args)),
      },
      metadata(as.token ?? tokens[agent], as.agentId),
    );
    return { result: JSON.parse(frame.data.toString('utf8')) as Record<string, unknown>, frame };
  }

  before(async () => {
    base = fs.realpathSync(makeTempDir('sw4rm-int-tools-'));
    dataDir = makeTempDir('sw4rm-int-tools-data-');
    repo = makeRepo(base, 'app', { 'README.md': 'hello\n', 'src/main.ts': 'export const answer = 42;\n' });
    host = await startHost(dataDir, { workspaceFolders: [repo] });
    const address = `127.0.0.1:${host.port}`;
    tools = serviceClient(address, 'sw4rm.tool.ToolService');
    connector = serviceClient(address, 'sw4rm.connector.ConnectorService');
    worktrees = serviceClient(address, 'sw4rm.worktree.WorktreeService');
    const registry = new CoordinatorClients(address, host.token);
    for (const agent of ['coder', 'peer', 'loner', 'attacker', 'linker']) {
      assert.equal((await registry.registerAgent(descriptorMessage(agent))).accepted, true);
      tokens[agent] = host.coordinator.credentials.mintAgent(agent, 'test', 'workspace tool tests', {
        correlationId: 'test',
      }).token;
    }
    registry.close();
    for (const agent of ['coder', 'peer', 'attacker', 'linker']) {
      assert.deepEqual(await unary(worktrees, 'Bind', { agent_id: agent, repo_id: 'app' }, metadata(tokens[agent])), {
        ok: true,
        reason: '',
      });
    }
  });

  after(async () => {
    for (const client of [tools, connector, worktrees]) client?.close();
    await stopHost(host);
    removeTempDir(dataDir);
    removeTempDir(base);
  });

  const homeOf = (agent: string) => path.join(base, 'app.sw4rm-worktrees', agent);

  it('DescribeTools lists the nine workspace tools with JSON schemas; an unknown provider is NOT_FOUND', async () => {
    const { tools: described } = await unary<{ tools: ToolDescriptorMessage[] }>(
      connector,
      'DescribeTools',
      { provider_id: 'workspace' },
      metadata(tokens.coder),
    );
    assert.deepEqual(
      described.map((t) => [t.tool_name, t.side_effects, t.idempotent]),
      [
        ['read_file', 'none', true],
        ['write_file', 'filesystem', true],
        ['list_dir', 'none', true],
        ['delete_file', 'filesystem', false],
        ['stat', 'none', true],
        ['search', 'none', true],
        ['git_status', 'none', true],
        ['git_diff', 'none', true],
        ['git_commit', 'git', false],
      ],
    );
    for (const tool of described) {
      assert.equal(tool.needs_worktree, true);
      const input = JSON.parse(tool.input_schema) as {
        type: string;
        description: string;
        additionalProperties: boolean;
      };
      assert.equal(input.type, 'object');
      assert.equal(input.additionalProperties, false);
      assert.ok(input.description.length > 10);
      assert.equal((JSON.parse(tool.output_schema) as { type: string }).type, 'object');
      assert.ok(tool.default_timeout_s > 0 && tool.max_concurrency > 0);
    }
    const other = await expectStatus(
      unary(connector, 'DescribeTools', { provider_id: 'mcp' }, metadata(tokens.coder)),
      grpc.status.NOT_FOUND,
    );
    assert.match(other.details, /^NOT_FOUND: no provider 'mcp'/);
  });

  it('a bound agent calls every tool: one final application/json frame each; the commit lands on its branch only', async () => {
    const mainHead = git(repo, 'rev-parse', 'HEAD').trim();
    const written = await call('coder', 'write_file', {
      path: 'docs/plan.md',
      content: '# plan\nneedle\n',
      create_parents: true,
    });
    assert.deepEqual(written.result, { path: 'docs/plan.md', bytes: 14 });
    assert.equal(written.frame.final, true);
    assert.equal(written.frame.content_type, 'application/json');
    assert.match(written.frame.call_id, /^c-write_file-/);
    assert.equal(fs.readFileSync(path.join(homeOf('coder'), 'docs/plan.md'), 'utf8'), '# plan\nneedle\n');
    assert.equal((await call('coder', 'read_file', { path: 'docs/plan.md' })).result.content, '# plan\nneedle\n');
    assert.deepEqual(
      ((await call('coder', 'list_dir', {})).result.entries as Array<{ name: string }>).map((e) => e.name),
      ['README.md', 'docs', 'src'],
    );
    assert.equal((await call('coder', 'stat', { path: 'docs' })).result.type, 'directory');
    assert.deepEqual((await call('coder', 'search', { query: 'needle' })).result.matches, [
      { path: 'docs/plan.md', line: 2, column: 1, text: 'needle' },
    ]);
    const status = (await call('coder', 'git_status', {})).result;
    assert.equal(status.branch, 'sw4rm/coder');
    assert.deepEqual(status.entries, [{ path: 'docs/plan.md', xy: '??', kind: 'untracked' }]);
    await call('coder', 'write_file', { path: 'README.md', content: 'hello\nagain\n' });
    assert.match((await call('coder', 'git_diff', {})).result.diff as string, /^\+again$/m);
    const committed = (await call('coder', 'git_commit', { message: 'Plan and README' })).result;
    assert.equal(committed.branch, 'sw4rm/coder');
    assert.equal(git(repo, 'rev-parse', 'sw4rm/coder').trim(), committed.commit);
    assert.equal(
      git(repo, 'log', '-1', '--format=%an|%s', 'sw4rm/coder').trim(),
      'coder (sw4rm agent)|Plan and README',
    );
    assert.deepEqual(await call('coder', 'delete_file', { path: 'docs/plan.md' }).then((r) => r.result), {
      path: 'docs/plan.md',
      deleted: true,
    });
    assert.equal(git(repo, 'rev-parse', 'HEAD').trim(), mainHead, 'the main checkout did not move');
    assert.equal(git(repo, 'status', '--porcelain'), '', 'the main checkout has no change');

    // CallStream answers the same result as one final frame; Cancel of a finished call says so.
    const frames: ToolFrame[] = await new Promise((resolve, reject) => {
      const got: ToolFrame[] = [];
      const stream = (tools.CallStream as (r: unknown, m: grpc.Metadata) => grpc.ClientReadableStream<ToolFrame>).call(
        tools,
        {
          call_id: 'streamed',
          tool_name: 'read_file',
          provider_id: 'workspace',
          args: Buffer.from('{"path":"README.md"}'),
          stream: true,
        },
        metadata(tokens.coder),
      );
      stream.on('data', (f: ToolFrame) => got.push(f));
      stream.on('error', reject);
      stream.on('end', () => resolve(got));
    });
    assert.equal(frames.length, 1);
    assert.equal(frames[0].final, true);
    assert.equal(frames[0].call_id, 'streamed');
    assert.equal((JSON.parse(frames[0].data.toString()) as { content: string }).content, 'hello\nagain\n');
    const cancel = await unary<{ call_id: string; error_code: string }>(
      tools,
      'Cancel',
      { call_id: 'streamed', provider_id: 'workspace' },
      metadata(tokens.coder),
    );
    assert.deepEqual([cancel.call_id, cancel.error_code], ['streamed', 'ALREADY_COMPLETED']);
    assert.equal(
      (await unary<{ error_code: string }>(tools, 'Cancel', { call_id: 'streamed' }, metadata(tokens.peer))).error_code,
      'NOT_FOUND',
    );
  });

  it('an unbound agent gets worktree_not_bound; bad args are VALIDATION_ERROR; the caller must be known', async () => {
    const unbound = await expectStatus(
      call('loner', 'read_file', { path: 'README.md' }),
      grpc.status.FAILED_PRECONDITION,
    );
    assert.match(unbound.details, /^worktree_not_bound: agent 'loner' is not bound to a worktree/);
    const bad = await expectStatus(call('coder', 'read_file', { file: 'README.md' }), grpc.status.INVALID_ARGUMENT);
    assert.match(bad.details, /^VALIDATION_ERROR: args do not match the input schema of read_file/);
    const notJson = await expectStatus(
      unary(
        tools,
        'Call',
        { tool_name: 'stat', provider_id: 'workspace', args: Buffer.from('{') },
        metadata(tokens.coder),
      ),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(notJson.details, /^VALIDATION_ERROR: args is not valid JSON/);
    const nobody = await expectStatus(call('coder', 'stat', {}, { token: host.token }), grpc.status.INVALID_ARGUMENT);
    assert.match(nobody.details, /^VALIDATION_ERROR: the calling agent is unknown: name it in metadata sw4rm-agent-id/);
    const escape = await expectStatus(
      call('coder', 'read_file', { path: '../peer/README.md' }),
      grpc.status.PERMISSION_DENIED,
    );
    assert.match(escape.details, /^permission_denied: /);
    const policy = await expectStatus(
      unary(
        tools,
        'Call',
        { tool_name: 'stat', provider_id: 'workspace', args: Buffer.from('{}'), policy: { privilege_level: 'root' } },
        metadata(tokens.coder),
      ),
      grpc.status.INVALID_ARGUMENT,
    );
    assert.match(
      policy.details,
      /^VALIDATION_ERROR: execution_policy\.privilege_level: must be one of MINIMAL, DEFAULT, ELEVATED, PRIVILEGED/,
    );
    const timed = await unary<{ final: boolean }>(
      tools,
      'Call',
      {
        tool_name: 'stat',
        provider_id: 'workspace',
        args: Buffer.from('{}'),
        policy: { timeout: { seconds: 30 }, network_policy: 'deny_all' },
      },
      metadata(tokens.coder),
    );
    assert.equal(timed.final, true, 'a valid policy runs the call');
  });

  it("an agent cannot act on another agent's worktree: naming another id with its credential is refused; the operator may act for one", async () => {
    fs.writeFileSync(path.join(homeOf('peer'), 'mine.txt'), "peer's work\n");
    const lie = await expectStatus(
      call('coder', 'write_file', { path: 'mine.txt', content: 'overwritten' }, { agentId: 'peer' }),
      grpc.status.PERMISSION_DENIED,
    );
    assert.match(lie.details, /this credential acts as agent 'coder'; the call acts as 'peer'/);
    await expectStatus(
      call('coder', 'read_file', { path: 'mine.txt' }, { agentId: 'peer' }),
      grpc.status.PERMISSION_DENIED,
    );
    assert.equal(fs.readFileSync(path.join(homeOf('peer'), 'mine.txt'), 'utf8'), "peer's work\n");
    // Its own credential names its own worktree only: the same path is coder's file, not peer's.
    await expectStatus(call('coder', 'read_file', { path: 'mine.txt' }), grpc.status.NOT_FOUND);
    const asPeer = await call('peer', 'read_file', { path: 'mine.txt' }, { token: host.token, agentId: 'peer' });
    assert.equal(asPeer.result.content, "peer's work\n");
  });

  describe('the confinement corpus through ToolService.Call: zero escapes', () => {
    let f: Fixture;
    let guardedBefore: Map<string, string>;

    /** Each corpus operation as the tool that performs it (resolve is what git_diff's paths go through, mkdir search's folder walk). */
    const TOOL_OF: Record<Op, (p: string) => [string, Record<string, unknown>]> = {
      resolve: (p) => ['git_diff', { paths: [p] }],
      read: (p) => ['read_file', { path: p }],
      write: (p) => ['write_file', { path: p, content: 'PWNED' }],
      writeParents: (p) => ['write_file', { path: p, content: 'PWNED', create_parents: true }],
      list: (p) => ['list_dir', { path: p }],
      stat: (p) => ['stat', { path: p }],
      delete: (p) => ['delete_file', { path: p }],
      mkdir: (p) => ['search', { query: SECRET, path: p }],
    };

    before(async () => {
      f = await plantAttackFixture(base, repo, homeOf('attacker'));
      guardedBefore = f.guarded();
    });

    after(async () => {
      await new Promise<void>((resolve) => (f?.server ? f.server.close(() => resolve()) : resolve()));
    });

    it(`the corpus has at least 60 attacks (${ATTACK_COUNT}), each sent through every tool that takes a path`, () => {
      assert.ok(ATTACK_COUNT >= 60);
      assert.deepEqual(
        new Set(Object.values(TOOL_OF).map((t) => t('x')[0])),
        new Set(['git_diff', 'read_file', 'write_file', 'list_dir', 'stat', 'delete_file', 'search']),
      );
    });

    for (const [group, attacks] of CORPUS) {
      it(`refuses ${group} (${attacks.length} attacks) with permission_denied`, async () => {
        let calls = 0;
        for (const attack of attacks) {
          const requested = typeof attack.path === 'string' ? attack.path : attack.path(f);
          for (const op of attack.ops ?? ALL_OPS) {
            const [tool, args] = TOOL_OF[op](requested);
            const label = `${attack.name}: ${tool} ${JSON.stringify(requested.slice(0, 60))}`;
            const error = await expectStatus(call('attacker', tool, args), grpc.status.PERMISSION_DENIED).catch(
              (err: Error) => assert.fail(`${label}: ${err.message}`),
            );
            assert.match(error.details, /^permission_denied: /, label);
            assert.ok(!error.details.includes(base), `${label}: the answer names no real path`);
            assert.ok(!error.details.includes(SECRET), `${label}: the answer carries no content`);
            calls++;
          }
          assert.deepEqual(
            f.guarded(),
            guardedBefore,
            `${attack.name}: nothing outside the worktree was read, written or deleted`,
          );
          assert.equal(fs.existsSync(path.join(f.outside, 'created-by-attack.txt')), false);
        }
        assert.ok(calls >= attacks.length);
      });
    }

    it('a folder swapped for a symlink to outside while calls run (a real race, another process swapping): nothing outside is read or written', async () => {
      const worktree = homeOf('attacker');
      const race = path.join(worktree, 'race');
      fs.mkdirSync(race);
      fs.writeFileSync(path.join(race, 'secret.txt'), 'inside');
      // One file to delete per round, made now: the test never writes into `race` while it is being swapped (a write
      // of its own there could follow the link out, which is the test escaping, not the coordinator).
      const DELETABLE = 3000;
      for (let i = 0; i < DELETABLE; i++) fs.writeFileSync(path.join(race, `del-${i}.txt`), 'inside');
      // Another process swaps `race` for a link to outside/dir and back as fast as it can, for 4 s.
      const exited = swapForLink(race, path.join(f.outside, 'dir'), 4000);
      const outcomes = new Map<string, number>();
      const started = Date.now();
      for (let round = 0; Date.now() - started < 3500; round++) {
        const attempts = [
          call('attacker', 'read_file', { path: 'race/secret.txt' }),
          call('attacker', 'list_dir', { path: 'race' }),
          call('attacker', 'write_file', { path: 'race/new.txt', content: 'PWNED' }),
          call('attacker', 'delete_file', { path: `race/del-${round % DELETABLE}.txt` }),
          call('attacker', 'stat', { path: 'race/secret.txt' }),
        ];
        for (const settled of await Promise.allSettled(attempts)) {
          if (settled.status === 'fulfilled') {
            assert.ok(!JSON.stringify(settled.value.result).includes(SECRET), 'no content from outside');
            outcomes.set('ok', (outcomes.get('ok') ?? 0) + 1);
          } else {
            const details = (settled.reason as grpc.ServiceError).details ?? String(settled.reason);
            assert.ok(!details.includes(SECRET));
            const code = details.split(':')[0];
            assert.ok(['permission_denied', 'not_found', 'filesystem_error'].includes(code), details);
            outcomes.set(code, (outcomes.get(code) ?? 0) + 1);
          }
        }
      }
      await exited;
      assert.ok(
        (outcomes.get('permission_denied') ?? 0) > 0,
        `some calls met the link and were refused: ${JSON.stringify([...outcomes])}`,
      );
      assert.deepEqual(f.guarded(), guardedBefore, 'nothing outside the worktree was read, written or deleted');
      assert.deepEqual(fs.readdirSync(path.join(f.outside, 'dir')), ['secret.txt']);
    });

    it('the git tools while a tracked folder is swapped for a symlink to outside (another process): git never reads through it', async () => {
      const worktree = homeOf('attacker');
      const race = path.join(worktree, 'gitrace');
      fs.mkdirSync(race);
      fs.writeFileSync(path.join(race, 'secret.txt'), 'inside\n');
      git(worktree, 'add', 'gitrace/secret.txt');
      git(worktree, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'gitrace');
      const exited = swapForLink(race, path.join(f.outside, 'dir'), 5000);
      const outcomes = new Map<string, number>();
      const started = Date.now();
      let followed = 0;
      while (Date.now() - started < 4500) {
        const attempts = [
          call('attacker', 'git_diff', { paths: ['gitrace/secret.txt'] }),
          call('attacker', 'git_diff', { paths: ['gitrace'] }),
          call('attacker', 'git_diff', {}),
          call('attacker', 'git_status', {}),
          call('attacker', 'git_commit', { message: 'race', paths: ['gitrace'] }),
        ];
        for (const settled of await Promise.allSettled(attempts)) {
          if (settled.status === 'fulfilled') {
            const text = JSON.stringify(settled.value.result);
            if (text.includes(SECRET)) followed++;
            const entries = settled.value.result.entries as Array<{ path: string; xy: string }> | undefined;
            // Followed out, git would see outside/dir/secret.txt (SECRET) as the tracked file's content: modified.
            if (entries?.some((e) => e.path === 'gitrace/secret.txt' && e.xy[1] === 'M')) followed++;
            outcomes.set('ok', (outcomes.get('ok') ?? 0) + 1);
          } else {
            const details = (settled.reason as grpc.ServiceError).details ?? String(settled.reason);
            if (details.includes(SECRET)) followed++;
            const code = details.split(':')[0];
            assert.ok(
              ['permission_denied', 'not_found', 'filesystem_error', 'nothing_to_commit', 'git_error'].includes(code),
              details,
            );
            outcomes.set(code, (outcomes.get(code) ?? 0) + 1);
          }
        }
      }
      await exited;
      const history = git(repo, 'log', '-p', '--format=%H', 'sw4rm/attacker');
      assert.equal(followed, 0, `no answer carried or revealed the outside content: ${JSON.stringify([...outcomes])}`);
      assert.ok(!history.includes(SECRET), 'no commit holds the outside content');
      assert.ok(
        !git(worktree, 'diff', '--cached', 'HEAD').includes(SECRET),
        "the worktree's index holds no outside content",
      );
      assert.ok((outcomes.get('ok') ?? 0) > 0, JSON.stringify([...outcomes]));
      // The repository itself changed (the commits); what is outside the worktree and the repository did not.
      const outsideOnly = (m: Map<string, string>) => [...m].filter(([k]) => k.startsWith('outside/'));
      assert.deepEqual(
        outsideOnly(f.guarded()),
        outsideOnly(guardedBefore),
        'nothing outside was read, written or deleted',
      );
    });
  });

  describe("hard links and mount points planted by an agent's own program: refused by every tool", () => {
    const SECRET_TEXT = `${SECRET}\n`;
    let outside: string;
    let home: string;

    before(() => {
      outside = path.join(base, 'outside-links');
      fs.mkdirSync(path.join(outside, 'dir'), { recursive: true });
      fs.writeFileSync(path.join(outside, 'secret.txt'), SECRET_TEXT);
      fs.writeFileSync(path.join(outside, 'dir', 'secret.txt'), SECRET_TEXT);
      home = homeOf('linker');
    });

    afterEach(() => {
      git(home, 'reset', '-q', '--hard');
      git(home, 'clean', '-q', '-fdx');
    });

    async function refusedAs(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
      const error = await expectStatus(promise, grpc.status.PERMISSION_DENIED);
      assert.match(error.details, pattern);
      assert.ok(!error.details.includes(SECRET) && !error.details.includes(base), error.details);
    }

    it('a new hard link to an outside file: git_commit refuses it, so no git_diff can read it back', async () => {
      fs.linkSync(path.join(outside, 'secret.txt'), path.join(home, 'leak.txt'));
      const before = git(repo, 'rev-parse', 'sw4rm/linker').trim();
      await refusedAs(
        call('linker', 'git_commit', { message: 'leak' }),
        /^permission_denied: the file has more than one hard link.*leak\.txt/,
      );
      await refusedAs(
        call('linker', 'git_commit', { message: 'leak', paths: ['leak.txt'] }),
        /^permission_denied: the file has more than one hard link/,
      );
      assert.equal(git(repo, 'rev-parse', 'sw4rm/linker').trim(), before, 'nothing was committed');
      fs.unlinkSync(path.join(home, 'leak.txt'));
      for (const args of [{}, { staged: true }])
        assert.ok(!JSON.stringify((await call('linker', 'git_diff', args)).result).includes(SECRET));
      assert.ok(!git(repo, 'log', '-p', 'sw4rm/linker').includes(SECRET));
      for (const tool of ['read_file', 'stat', 'delete_file', 'write_file']) {
        fs.linkSync(path.join(outside, 'secret.txt'), path.join(home, 'leak.txt'));
        await refusedAs(
          call('linker', tool, tool === 'write_file' ? { path: 'leak.txt', content: 'x' } : { path: 'leak.txt' }),
          /^permission_denied: the file has more than one hard link/,
        );
        fs.unlinkSync(path.join(home, 'leak.txt'));
      }
      assert.equal(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8'), SECRET_TEXT);
    });

    it('a tracked file replaced by a hard link to an outside file: git_diff, git_status and git_commit refuse it', async () => {
      fs.unlinkSync(path.join(home, 'README.md'));
      fs.linkSync(path.join(outside, 'secret.txt'), path.join(home, 'README.md'));
      await refusedAs(
        call('linker', 'git_diff', {}),
        /^permission_denied: the file has more than one hard link.*README\.md/,
      );
      await refusedAs(
        call('linker', 'git_diff', { paths: ['README.md'] }),
        /^permission_denied: the file has more than one hard link/,
      );
      await refusedAs(call('linker', 'git_status', {}), /^permission_denied: the file has more than one hard link/);
      await refusedAs(
        call('linker', 'git_commit', { message: 'leak' }),
        /^permission_denied: the file has more than one hard link/,
      );
      assert.ok(!git(repo, 'log', '-p', 'sw4rm/linker').includes(SECRET));
      assert.ok(
        !JSON.stringify((await call('linker', 'git_diff', { staged: true })).result).includes(SECRET),
        'the index vs HEAD reads no worktree file',
      );
    });

    it('bind mounts inside the worktree (a folder, and a file over a tracked one): every tool refuses, reads included', async function () {
      const mountedDir = path.join(home, 'mnt');
      const tracked = path.join(home, 'src', 'main.ts');
      fs.mkdirSync(mountedDir);
      try {
        execFileSync('mount', ['--bind', path.join(outside, 'dir'), mountedDir], { stdio: 'ignore' });
      } catch {
        fs.rmdirSync(mountedDir);
        this.skip(); // mount --bind needs root (CAP_SYS_ADMIN) and a mount namespace that allows it
      }
      try {
        execFileSync('mount', ['--bind', path.join(outside, 'secret.txt'), tracked], { stdio: 'ignore' });
        await refusedAs(
          call('linker', 'read_file', { path: 'mnt/secret.txt' }),
          /^permission_denied: the path crosses into another file system mounted inside the worktree/,
        );
        await refusedAs(call('linker', 'read_file', { path: 'src/main.ts' }), /^permission_denied: .*mounted/);
        await refusedAs(call('linker', 'stat', { path: 'mnt/secret.txt' }), /^permission_denied: /);
        await refusedAs(call('linker', 'list_dir', { path: 'mnt' }), /^permission_denied: /);
        await refusedAs(
          call('linker', 'write_file', { path: 'mnt/new.txt', content: 'PWNED' }),
          /^permission_denied: /,
        );
        await refusedAs(
          call('linker', 'git_diff', {}),
          /^permission_denied: the path crosses into another file system mounted inside the worktree/,
        );
        await refusedAs(call('linker', 'git_diff', { paths: ['src'] }), /^permission_denied: /);
        await refusedAs(call('linker', 'git_status', {}), /^permission_denied: /);
        await refusedAs(call('linker', 'git_commit', { message: 'leak' }), /^permission_denied: /);
        const search = (await call('linker', 'search', { query: SECRET })).result;
        assert.deepEqual(search.matches, [], 'search skips what it may not read');
        assert.ok(!git(repo, 'log', '-p', 'sw4rm/linker').includes(SECRET));
        assert.deepEqual(fs.readdirSync(path.join(outside, 'dir')), ['secret.txt']);
      } finally {
        try {
          execFileSync('umount', [tracked], { stdio: 'ignore' });
        } catch {
          /* was not mounted */
        }
        execFileSync('umount', [mountedDir], { stdio: 'ignore' });
      }
    });
  });
});
