import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Ajv } from 'ajv';
import type { CallContext } from '../../src/core/context';
import type { Coordinator } from '../../src/core/coordinator';
import { ToolCallError, type ToolResult } from '../../src/core/tools/model';
import { WORKSPACE_LIMITS } from '../../src/core/tools/workspaceProvider';
import { boundAtHome } from '../support/boundWorktree';
import type { CoordinatorFixture } from '../support/coordinatorFixture';
import { git, makeRepo } from '../support/gitRepo';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ctx: CallContext = { correlationId: 'test' };

/**
 * The built-in `workspace` tool provider (issue 15, part 6) through the coordinator's Tools, on a real repository and
 * the real worktree a Bind creates: every tool, its output checked against its own output schema, its refusals.
 */
describe('workspace tools (RFC §18, §16)', function () {
  this.timeout(30_000);
  let dir: string;
  let repoPath: string;
  let home: string;
  let fixture: CoordinatorFixture;
  let coordinator: Coordinator;
  const ajv = new Ajv({ strict: true });

  beforeEach(async () => {
    dir = makeTempDir('sw4rm-tools-');
    repoPath = makeRepo(dir, 'app', { 'README.md': 'hello\n', 'src/main.ts': 'export const answer = 42;\n' });
    ({ fixture, home } = await boundAtHome(dir, repoPath, ctx));
    coordinator = fixture.coordinator;
  });

  afterEach(() => {
    fixture.dispose();
    removeTempDir(dir);
  });

  /** Calls `tool` of `workspace` as `agent`; answers the parsed JSON result, checked against the tool's output schema. */
  async function call(tool: string, args: unknown, agent = 'coder'): Promise<Record<string, unknown>> {
    const result = await coordinator.tools.call(
      agent,
      {
        providerId: 'workspace',
        toolName: tool,
        contentType: 'application/json',
        args: Buffer.from(JSON.stringify(args)),
      },
      ctx,
    );
    assert.equal(result.contentType, 'application/json');
    const value = JSON.parse(result.data.toString('utf8')) as Record<string, unknown>;
    const descriptor = coordinator.tools.describe('workspace').find((t) => t.name === tool)!;
    const validate = ajv.compile(descriptor.outputSchema);
    assert.ok(validate(value), `${tool}: the result matches its output schema: ${JSON.stringify(validate.errors)}`);
    return value;
  }

  async function refused(promise: Promise<unknown>, code: string, kind?: string): Promise<ToolCallError> {
    try {
      await promise;
    } catch (err) {
      assert.ok(err instanceof ToolCallError, String(err));
      assert.equal(err.code, code, err.details);
      if (kind) assert.equal(err.kind, kind, err.details);
      assert.ok(err.details.startsWith(`${code}: `));
      return err;
    }
    assert.fail(`expected ${code}`);
  }

  it('describes nine tools with schemas, side-effect classes and needs_worktree', () => {
    const tools = coordinator.tools.describe('workspace');
    assert.deepEqual(
      tools.map((t) => t.name),
      ['read_file', 'write_file', 'list_dir', 'delete_file', 'stat', 'search', 'git_status', 'git_diff', 'git_commit'],
    );
    const effects = Object.fromEntries(tools.map((t) => [t.name, t.sideEffects]));
    assert.deepEqual(effects, {
      read_file: 'none',
      write_file: 'filesystem',
      list_dir: 'none',
      delete_file: 'filesystem',
      stat: 'none',
      search: 'none',
      git_status: 'none',
      git_diff: 'none',
      git_commit: 'git',
    });
    for (const tool of tools) {
      assert.equal(tool.needsWorktree, true);
      assert.equal(
        (tool.inputSchema as { additionalProperties?: boolean }).additionalProperties,
        false,
        `${tool.name} refuses unknown arguments`,
      );
      assert.ok(tool.maxConcurrency >= 1 && tool.defaultTimeoutS >= 1);
      ajv.compile(tool.outputSchema);
    }
    assert.deepEqual(
      tools.filter((t) => !t.idempotent).map((t) => t.name),
      ['delete_file', 'git_commit'],
    );
    // The built-in process provider is always composed; off by default, it is listed unavailable.
    assert.deepEqual(coordinator.tools.providerIds(), ['workspace', 'process', 'reasoning']);
    assert.deepEqual(
      coordinator.tools.providers().map((p) => [p.providerId, p.available, p.unavailableReason]),
      [
        ['workspace', true, ''],
        ['process', false, 'disabled: sw4rm.tools.process.enabled'],
        [
          'reasoning',
          false,
          'no inference engine registered (an online agent declaring the reasoning connector sw4rm://reasoning/tools)',
        ],
      ],
    );
  });

  it("write_file, read_file, list_dir, stat, delete_file in the caller's worktree, never in the main checkout", async () => {
    assert.deepEqual(await call('write_file', { path: 'notes/plan.md', content: '# plan\n', create_parents: true }), {
      path: 'notes/plan.md',
      bytes: 7,
    });
    assert.equal(fs.readFileSync(path.join(home, 'notes/plan.md'), 'utf8'), '# plan\n');
    assert.equal(fs.existsSync(path.join(repoPath, 'notes')), false, 'the main checkout is untouched');
    assert.deepEqual(await call('read_file', { path: 'notes/plan.md' }), {
      path: 'notes/plan.md',
      encoding: 'utf8',
      content: '# plan\n',
      size: 7,
    });
    const listing = await call('list_dir', {});
    assert.deepEqual(
      (listing.entries as Array<{ name: string }>).map((e) => e.name),
      ['README.md', 'notes', 'src'],
      '.git is left out',
    );
    assert.equal(listing.truncated, false);
    const stat = await call('stat', { path: 'notes/plan.md' });
    assert.equal(stat.type, 'file');
    assert.equal(stat.size, 7);
    assert.match(stat.mtime as string, /^\d{4}-\d\d-\d\dT/);
    assert.equal((await call('stat', {})).type, 'directory');
    assert.deepEqual(await call('delete_file', { path: 'notes/plan.md' }), { path: 'notes/plan.md', deleted: true });
    assert.equal(fs.existsSync(path.join(home, 'notes/plan.md')), false);
    await refused(call('read_file', { path: 'notes/plan.md' }), 'not_found', 'not_found');
    await refused(call('delete_file', { path: 'notes' }), 'filesystem_error', 'failed_precondition');
  });

  it('reads and writes bytes as base64; a file that is not UTF-8 is answered in base64; sizes are bounded', async () => {
    const bytes = Buffer.from([0, 1, 2, 0xff, 0xfe, 10]);
    assert.deepEqual(
      await call('write_file', { path: 'blob.bin', content: bytes.toString('base64'), encoding: 'base64' }),
      { path: 'blob.bin', bytes: 6 },
    );
    assert.ok(fs.readFileSync(path.join(home, 'blob.bin')).equals(bytes));
    assert.deepEqual(await call('read_file', { path: 'blob.bin' }), {
      path: 'blob.bin',
      encoding: 'base64',
      content: bytes.toString('base64'),
      size: 6,
    });
    assert.equal(
      (await call('read_file', { path: 'README.md', encoding: 'base64' })).content,
      Buffer.from('hello\n').toString('base64'),
    );
    await refused(call('read_file', { path: 'README.md', max_bytes: 3 }), 'filesystem_error', 'resource_exhausted');
    await refused(
      call('write_file', { path: 'x.bin', content: 'not base64!', encoding: 'base64' }),
      'VALIDATION_ERROR',
      'invalid_argument',
    );
    fs.writeFileSync(path.join(home, 'big.txt'), Buffer.alloc(WORKSPACE_LIMITS.maxReadBytes + 1, 'a'));
    await refused(call('read_file', { path: 'big.txt' }), 'filesystem_error', 'resource_exhausted');
    const tooBig = Buffer.alloc(WORKSPACE_LIMITS.maxWriteBytes + 1, 'b').toString('utf8');
    await refused(call('write_file', { path: 'huge.txt', content: tooBig }), 'VALIDATION_ERROR');
    assert.equal(fs.existsSync(path.join(home, 'huge.txt')), false);
  });

  it('validates args against the input schema (ajv) and refuses what is not JSON, not UTF-8 or not application/json', async () => {
    const raw = (args: Buffer | string, contentType = 'application/json') =>
      coordinator.tools.call(
        'coder',
        { providerId: 'workspace', toolName: 'read_file', contentType, args: Buffer.from(args) },
        ctx,
      );
    const missing = await refused(call('read_file', {}), 'VALIDATION_ERROR', 'invalid_argument');
    assert.match(missing.message, /must have required property 'path'/);
    assert.match(
      (await refused(call('read_file', { path: 'README.md', mode: 'x' }), 'VALIDATION_ERROR')).message,
      /must NOT have additional properties \('mode'\)/,
    );
    await refused(call('read_file', { path: 42 }), 'VALIDATION_ERROR');
    await refused(call('search', { query: '' }), 'VALIDATION_ERROR');
    await refused(call('git_commit', { message: 'x', paths: [] }), 'VALIDATION_ERROR');
    await refused(raw('{"path": '), 'VALIDATION_ERROR');
    await refused(raw('[]'), 'VALIDATION_ERROR');
    await refused(raw(Buffer.from([0x7b, 0xff, 0x7d])), 'VALIDATION_ERROR');
    await refused(raw('{"path":"README.md"}', 'text/plain'), 'VALIDATION_ERROR');
    await refused(raw('['.repeat(100) + ']'.repeat(100)), 'VALIDATION_ERROR');
    assert.equal(
      JSON.parse((await raw('{"path":"README.md"}', '')).data.toString()).content,
      'hello\n',
      'an empty content_type means JSON',
    );
  });

  it('an unbound agent gets worktree_not_bound; an unknown tool unknown_tool; an unknown provider NOT_FOUND', async () => {
    const unbound = await refused(
      call('read_file', { path: 'README.md' }, 'stranger'),
      'worktree_not_bound',
      'failed_precondition',
    );
    assert.match(unbound.message, /agent 'stranger' is not bound to a worktree/);
    await coordinator.worktrees.unbind('coder', ctx);
    await refused(call('list_dir', {}), 'worktree_not_bound');
    await refused(
      coordinator.tools.call(
        'coder',
        { providerId: 'workspace', toolName: 'rm_rf', contentType: '', args: Buffer.alloc(0) },
        ctx,
      ),
      'unknown_tool',
      'not_found',
    );
    const external = await refused(
      coordinator.tools.call(
        'coder',
        { providerId: 'github', toolName: 'x', contentType: '', args: Buffer.alloc(0) },
        ctx,
      ),
      'NOT_FOUND',
      'not_found',
    );
    assert.match(external.message, /^no tool provider 'github' is registered/);
    assert.throws(() => coordinator.tools.describe('github'), /no tool provider 'github' is registered/);
    await refused(
      coordinator.tools.call(
        '',
        { providerId: 'workspace', toolName: 'stat', contentType: '', args: Buffer.alloc(0) },
        ctx,
      ),
      'VALIDATION_ERROR',
    );
  });

  it('a worktree removed under a binding answers worktree_not_bound', async () => {
    git(repoPath, 'worktree', 'remove', '--force', home);
    await refused(call('read_file', { path: 'README.md' }), 'worktree_not_bound', 'failed_precondition');
  });

  it('search: plain text, line and column, case-insensitive on request; skips .git, links, binary and large files; bounded', async () => {
    fs.writeFileSync(path.join(home, 'src/other.ts'), 'const NEEDLE = 1;\nconst x = "needle";\n');
    fs.mkdirSync(path.join(home, 'vendored/.git'), { recursive: true });
    fs.writeFileSync(path.join(home, 'vendored/.git/config'), 'needle in git metadata\n');
    fs.writeFileSync(path.join(home, 'binary.dat'), Buffer.concat([Buffer.from('needle'), Buffer.from([0, 1, 2])]));
    fs.writeFileSync(path.join(home, 'large.txt'), 'needle\n' + 'x'.repeat(WORKSPACE_LIMITS.maxSearchFileBytes));
    fs.writeFileSync(path.join(dir, 'outside.txt'), 'needle outside\n');
    fs.symlinkSync(path.join(dir, 'outside.txt'), path.join(home, 'link.txt'));
    fs.symlinkSync(dir, path.join(home, 'linked-folder'));

    const exact = await call('search', { query: 'needle' });
    assert.deepEqual(exact.matches, [{ path: 'src/other.ts', line: 2, column: 12, text: 'const x = "needle";' }]);
    assert.deepEqual(exact.skipped, { binary: 1, large: 1, links: 2, unreadable: 0 });
    assert.equal(exact.truncated, false);
    const folded = await call('search', { query: 'needle', case_sensitive: false, path: 'src' });
    assert.deepEqual(
      (folded.matches as Array<{ line: number }>).map((m) => m.line),
      [1, 2],
    );
    const bounded = await call('search', { query: 'const', max_results: 1 });
    assert.equal((bounded.matches as unknown[]).length, 1);
    assert.equal(bounded.truncated, true);
    await refused(call('search', { query: 'x', path: '../' }), 'permission_denied', 'permission_denied');
    await refused(call('search', { query: 'x', path: 'linked-folder' }), 'permission_denied');
  });

  it("git_status, git_diff and git_commit work in the agent's worktree on its branch; the main checkout never changes", async () => {
    const mainHead = git(repoPath, 'rev-parse', 'HEAD').trim();
    fs.writeFileSync(
      path.join(repoPath, '.git/hooks/pre-commit'),
      '#!/bin/sh\ntouch "$GIT_DIR/../hook-ran"\nexit 1\n',
      { mode: 0o755 },
    );
    await call('write_file', { path: 'README.md', content: 'hello\nworld\n' });
    await call('write_file', { path: 'added.txt', content: 'new\n' });
    const status = await call('git_status', {});
    assert.equal(status.branch, 'sw4rm/coder');
    assert.equal(status.head, mainHead);
    assert.equal(status.clean, false);
    assert.deepEqual(
      (status.entries as Array<{ path: string; kind: string }>).map((e) => [e.path, e.kind]),
      [
        ['README.md', 'changed'],
        ['added.txt', 'untracked'],
      ],
    );
    const diff = await call('git_diff', {});
    assert.match(diff.diff as string, /^diff --git a\/README.md b\/README.md/m);
    assert.match(diff.diff as string, /^\+world$/m);
    assert.equal(diff.truncated, false);
    const cut = await call('git_diff', { max_bytes: 40 });
    assert.equal(cut.truncated, true);
    assert.ok((cut.bytes as number) <= 40);
    assert.equal((await call('git_diff', { paths: ['src/main.ts'] })).diff, '');
    assert.equal((await call('git_diff', { staged: true })).diff, '');
    await refused(call('git_diff', { paths: ['../app/README.md'] }), 'permission_denied');

    const first = await call('git_commit', { message: 'Only the new file', paths: ['added.txt'] });
    assert.equal(first.branch, 'sw4rm/coder');
    assert.equal(git(repoPath, 'rev-parse', 'sw4rm/coder').trim(), first.commit);
    assert.equal(
      git(repoPath, 'show', '--name-only', '--format=%an <%ae>|%s', first.commit as string).trim(),
      'coder (sw4rm agent) <coder@agents.sw4rm.invalid>|Only the new file\n\nadded.txt',
    );
    const rest = await call('git_commit', { message: 'The rest' });
    assert.equal(
      git(repoPath, 'show', '--name-only', '--format=%s', rest.commit as string).trim(),
      'The rest\n\nREADME.md',
    );
    assert.equal((await call('git_status', {})).clean, true);
    await refused(call('git_commit', { message: 'again' }), 'nothing_to_commit', 'failed_precondition');

    assert.equal(fs.existsSync(path.join(repoPath, 'hook-ran')), false, 'no commit hook ran');
    assert.equal(git(repoPath, 'rev-parse', 'HEAD').trim(), mainHead, "the main checkout's branch did not move");
    assert.equal(git(repoPath, 'status', '--porcelain').trim(), '', 'the main checkout is clean');
    assert.equal(fs.readFileSync(path.join(repoPath, 'README.md'), 'utf8'), 'hello\n');
  });

  it("queues calls beyond a tool's max_concurrency (all answered), and Cancel says what it did", async () => {
    const max = coordinator.tools.describe('workspace').find((t) => t.name === 'search')!.maxConcurrency;
    const calls: Array<Promise<ToolResult>> = [];
    for (let i = 0; i <= max; i++) {
      calls.push(
        coordinator.tools.call(
          'coder',
          {
            callId: `s-${i}`,
            providerId: 'workspace',
            toolName: 'search',
            contentType: '',
            args: Buffer.from('{"query":"x"}'),
          },
          ctx,
        ),
      );
    }
    const settled = await Promise.allSettled(calls);
    assert.equal(
      settled.filter((s) => s.status === 'fulfilled').length,
      max + 1,
      'the one beyond max_concurrency waited its turn',
    );
    assert.equal((await call('stat', {})).type, 'directory', 'calls go on once the others finished');

    assert.equal(coordinator.tools.cancel('coder', 'workspace', 's-0').errorCode, 'ALREADY_COMPLETED');
    assert.equal(coordinator.tools.cancel('coder', '', 's-1').errorCode, 'ALREADY_COMPLETED');
    assert.equal(
      coordinator.tools.cancel('other', 'workspace', 's-0').errorCode,
      'NOT_FOUND',
      "another agent's call is not found",
    );
    assert.equal(coordinator.tools.cancel('coder', 'workspace', 'nope').errorCode, 'NOT_FOUND');
    const running = coordinator.tools.call(
      'coder',
      { callId: 'slow', providerId: 'workspace', toolName: 'git_status', contentType: '', args: Buffer.alloc(0) },
      ctx,
    );
    assert.equal(
      coordinator.tools.cancel('coder', 'workspace', 'slow').errorCode,
      'CANCELLED',
      'its signal is aborted; the caller gets the cancelled terminal frame',
    );
    const answer = await running;
    assert.deepEqual([answer.data.length, coordinator.tools.callRecord('slow')!.outcome], [0, 'cancelled']);
    assert.equal(coordinator.tools.cancel('coder', 'workspace', 'slow').errorCode, 'ALREADY_COMPLETED');
  });

  it("remembers for Cancel only accepted calls, per agent: a refused call_id is not kept, and another agent's same call_id hides nothing", async () => {
    const statCall = (agent: string, callId: string) =>
      coordinator.tools.call(
        agent,
        { callId, providerId: 'workspace', toolName: 'stat', contentType: '', args: Buffer.from('{}') },
        ctx,
      );
    await statCall('coder', 'mine');
    await statCall('other', 'mine').catch(() => undefined); // `other` is not bound: refused worktree_not_bound after it was accepted
    assert.equal(
      coordinator.tools.cancel('coder', 'workspace', 'mine').errorCode,
      'ALREADY_COMPLETED',
      "coder's call is still known",
    );
    const long = 'x'.repeat(300);
    await refused(statCall('coder', long), 'VALIDATION_ERROR', 'invalid_argument');
    assert.equal(
      coordinator.tools.cancel('coder', 'workspace', long).errorCode,
      'NOT_FOUND',
      'a call refused for its call_id is not kept',
    );
    await refused(
      coordinator.tools.call(
        '',
        { callId: 'anon', providerId: 'workspace', toolName: 'stat', contentType: '', args: Buffer.from('{}') },
        ctx,
      ),
      'VALIDATION_ERROR',
    );
    assert.equal(
      coordinator.tools.cancel('', 'workspace', 'anon').errorCode,
      'NOT_FOUND',
      'a call without a caller is not kept',
    );
  });

  it('refuses a result that would not fit one frame as JSON (OVERSIZE_PAYLOAD), instead of the transport failing', async () => {
    // 4 MiB of a control character: valid UTF-8 that JSON writes as six bytes each (24 MiB).
    fs.writeFileSync(path.join(home, 'controls.bin'), Buffer.alloc(WORKSPACE_LIMITS.maxReadBytes, 0x01));
    await refused(call('read_file', { path: 'controls.bin' }), 'OVERSIZE_PAYLOAD', 'resource_exhausted');
    fs.writeFileSync(path.join(home, 'few-controls.bin'), Buffer.alloc(1024, 0x01));
    assert.equal(
      (await call('read_file', { path: 'few-controls.bin' })).size,
      1024,
      'a smaller file of the same bytes is answered',
    );
  });

  it('records one tool.call event per call: outcome, sizes, never the content', async () => {
    await call('write_file', { path: 'secret.txt', content: 'TOP-SECRET' });
    await refused(call('read_file', { path: '../x' }), 'permission_denied');
    const events = coordinator.log.query({ eventType: 'tool.call' });
    assert.deepEqual(
      events.map((e) => [e.actor, e.details.tool_name, e.details.outcome, e.details.error_code, e.level]),
      [
        ['coder', 'write_file', 'ok', '', 'INFO'],
        ['coder', 'read_file', 'error', 'permission_denied', 'WARN'],
      ],
    );
    assert.ok(!JSON.stringify(events).includes('TOP-SECRET'));
  });
});
