import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseHookInput } from '../../src/core/toolApproval/cliHooks';
import type { PathPlace, ToolRule, ToolUse } from '../../src/core/toolApproval/model';
import { placeOf } from '../../src/core/toolApproval/paths';
import { commandParts, compileRules, evaluate, parseToolRules } from '../../src/core/toolApproval/rules';
import { makeTempDir, removeTempDir } from '../support/tempDir';

function use(toolName: string, input: Record<string, unknown>): ToolUse {
  return parseHookInput('claude-code', { tool_name: toolName, tool_input: input });
}

function decide(u: ToolUse, places: PathPlace[], rules: ToolRule[] = []) {
  return evaluate(u, places, compileRules(rules));
}

describe('tool approvals: the rules (rules.ts) and where paths lie (paths.ts)', () => {
  describe('the built-in rules', () => {
    it("allows reads and searches inside the worktree, and the coordinator's own MCP tools", () => {
      assert.equal(decide(use('Read', { file_path: 'src/a.ts' }), ['inside']).action, 'allow');
      assert.equal(
        decide(use('Grep', { pattern: 'x' }), []).action,
        'allow',
        'a search without a path searches the worktree',
      );
      const mcp = decide(use('mcp__sw4rm__read_inbox', {}), []);
      assert.deepEqual([mcp.action, mcp.rule], ['allow', 'builtin:coordinator-tools']);
    });

    it('denies anything naming a path outside the worktree, reads included', () => {
      const outcome = decide(use('Read', { file_path: '/etc/shadow' }), ['outside']);
      assert.deepEqual([outcome.action, outcome.rule], ['deny', 'builtin:outside-worktree']);
      assert.match(outcome.reason, /outside the agent's worktree/);
      assert.equal(decide(use('Glob', { pattern: '*', path: '/' }), ['outside']).action, 'deny');
      assert.equal(
        decide(use('Read', { file_path: 'a' }), ['inside', 'outside']).action,
        'deny',
        'one path outside is enough',
      );
    });

    it('asks for writes, edits, web and other tools; names the glob a shell command matched, also inside a chain', () => {
      assert.equal(decide(use('Write', { file_path: 'a', content: '' }), ['inside']).action, 'ask');
      assert.equal(decide(use('WebFetch', { url: 'https://x' }), []).action, 'ask');
      assert.equal(decide(use('Task', {}), []).action, 'ask');
      assert.equal(
        decide(use('Bash', { command: 'rm -rf /tmp/x/y' }), []).rule,
        'builtin:ask-command rm *',
        '`*` crosses "/" in commands',
      );
      assert.equal(
        decide(use('Bash', { command: 'npm test && git push origin main' }), []).rule,
        'builtin:ask-command git push*',
      );
      assert.equal(decide(use('Bash', { command: 'ls' }), []).rule, 'builtin:ask');
      assert.deepEqual(commandParts('a | b; c'), ['a | b; c', 'a', 'b', 'c']);
    });

    it('without a worktree (places unknown) nothing is allowed or denied by place: asked', () => {
      assert.equal(decide(use('Read', { file_path: '/etc/hosts' }), ['unknown']).action, 'ask');
      assert.equal(
        decide(
          use('Read', { file_path: 'a' }),
          ['unknown'],
          [
            { path: 'inside', action: 'allow' },
            { path: 'outside', action: 'deny' },
          ],
        ).action,
        'ask',
      );
    });
  });

  describe("the user's rules", () => {
    it('come first, in their order; globs on the tool and the command', () => {
      const rules: ToolRule[] = [
        { kind: 'shell', command: 'npm test*', action: 'allow', name: 'tests' },
        { tool: 'mcp__github__*', action: 'deny' },
        { kind: 'shell', action: 'allow' },
      ];
      assert.equal(decide(use('Bash', { command: 'npm test -- --grep x' }), [], rules).rule, 'tests');
      assert.equal(decide(use('mcp__github__create_issue', {}), [], rules).action, 'deny');
      assert.equal(decide(use('mcp__github__create_issue', {}), [], rules).rule, 'toolRules[1]');
      assert.equal(
        decide(use('Bash', { command: 'rm -rf x' }), [], rules).action,
        'allow',
        'a user rule before the built-in ask',
      );
    });

    it('reach a path outside the worktree only when they say path: outside', () => {
      const allowWrites: ToolRule[] = [{ tool: 'Write', action: 'allow' }];
      assert.equal(decide(use('Write', { file_path: '/etc/x', content: '' }), ['outside'], allowWrites).action, 'deny');
      assert.equal(decide(use('Write', { file_path: 'x', content: '' }), ['inside'], allowWrites).action, 'allow');
      const readOutside: ToolRule[] = [{ kind: 'read', path: 'outside', action: 'allow' }];
      assert.equal(
        decide(use('Read', { file_path: '/usr/include/stdio.h' }), ['outside'], readOutside).action,
        'allow',
      );
    });

    it('parseToolRules keeps the good rules in order and names each problem', () => {
      const { rules, issues } = parseToolRules(
        [
          { kind: 'shell', command: 'make*', action: 'allow' },
          { kind: 'shel', action: 'allow' },
          { action: 'maybe' },
          { tool: '', action: 'deny' },
          { tool: 'Bash', colour: 'red', action: 'ask' },
          'nope',
          { path: 'elsewhere', action: 'deny' },
          { tool: 'Read', path: 'outside', action: 'allow', name: 'stdlib' },
        ],
        'sw4rm.approvals.toolRules',
      );
      assert.deepEqual(rules, [
        { kind: 'shell', command: 'make*', action: 'allow', name: 'sw4rm.approvals.toolRules[0]' },
        { tool: 'Read', path: 'outside', action: 'allow', name: 'stdlib' },
      ]);
      assert.deepEqual(
        issues.map((i) => i.path),
        [
          'sw4rm.approvals.toolRules[1].kind',
          'sw4rm.approvals.toolRules[2].action',
          'sw4rm.approvals.toolRules[3].tool',
          'sw4rm.approvals.toolRules[4].colour',
          'sw4rm.approvals.toolRules[5]',
          'sw4rm.approvals.toolRules[6].path',
        ],
      );
      assert.match(issues[0].message, /one of read, search/);
      assert.deepEqual(parseToolRules({ kind: 'shell' }).issues, [
        { path: 'toolRules', message: 'must be a list of rules' },
      ]);
      assert.deepEqual(parseToolRules(undefined), { rules: [], issues: [] });
    });
  });

  describe('placeOf', () => {
    let dir: string;
    let root: string;
    let outside: string;
    beforeEach(() => {
      dir = makeTempDir('sw4rm-toolrules-');
      root = path.join(dir, 'wt');
      outside = path.join(dir, 'secret');
      fs.mkdirSync(path.join(root, 'src'), { recursive: true });
      fs.mkdirSync(outside);
      fs.writeFileSync(path.join(root, 'src', 'a.ts'), 'a');
      fs.writeFileSync(path.join(outside, 'key'), 'k');
    });
    afterEach(() => removeTempDir(dir));

    it('resolves relative paths against the worktree, normalises "..", absolute paths by where they are', async () => {
      assert.equal(await placeOf(root, 'src/a.ts'), 'inside');
      assert.equal(await placeOf(root, 'src/new/deeper/file.ts'), 'inside', 'a path that does not exist yet');
      assert.equal(await placeOf(root, path.join(root, 'src', 'a.ts')), 'inside');
      assert.equal(await placeOf(root, 'src/../../secret/key'), 'outside');
      assert.equal(await placeOf(root, '..'), 'outside');
      assert.equal(await placeOf(root, path.join(outside, 'key')), 'outside');
      assert.equal(await placeOf(root, '~/.ssh/id_rsa'), os.homedir().startsWith(root) ? 'inside' : 'outside');
      assert.equal(await placeOf(root, '.'), 'inside');
    });

    it('follows symbolic links: a link inside pointing out is outside, also for a file not yet made behind it', async () => {
      fs.symlinkSync(outside, path.join(root, 'escape'));
      fs.symlinkSync(path.join(root, 'src'), path.join(root, 'alias'));
      assert.equal(await placeOf(root, 'escape/key'), 'outside');
      assert.equal(await placeOf(root, 'escape/not-yet.txt'), 'outside');
      assert.equal(await placeOf(root, 'alias/a.ts'), 'inside', 'a link that stays inside is inside');
      const linkedRoot = path.join(dir, 'wt-link');
      fs.symlinkSync(root, linkedRoot);
      assert.equal(
        await placeOf(linkedRoot, path.join(root, 'src', 'a.ts')),
        'inside',
        'the root itself through a link',
      );
    });

    it("git metadata is not the agent's; no worktree: unknown", async () => {
      assert.equal(await placeOf(root, '.git/hooks/pre-commit'), 'outside');
      assert.equal(await placeOf(root, 'src/.GIT/config'), 'outside');
      assert.equal(await placeOf(undefined, 'src/a.ts'), 'unknown');
    });
  });
});
