import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  askAsDenyReason,
  formatAnswer,
  HookInputError,
  kindOf,
  MAX_HOOK_INPUT_BYTES,
  parseHookInput,
  patchFiles,
} from '../../src/core/toolApproval/cliHooks';
import type { HookCli } from '../../src/core/toolApproval/model';
import { REPO_ROOT } from '../support/paths';

/** Hook inputs written from each CLI's documented format (docs/hook-configs.md names the sources). */
function fixture(name: string): unknown {
  return JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'test', 'fixtures', 'hooks', `${name}.json`), 'utf8'));
}

describe('tool approvals: CLI hook inputs and answers (cliHooks.ts)', () => {
  describe('parseHookInput', () => {
    it('Claude Code Bash: a shell command with its tool_use_id', () => {
      const use = parseHookInput('claude-code', fixture('claude-code-bash'));
      assert.equal(use.toolName, 'Bash');
      assert.equal(use.kind, 'shell');
      assert.equal(use.command, 'npm test && git push origin main');
      assert.deepEqual(use.paths, []);
      assert.equal(use.toolUseId, 'toolu_01ABC123');
      assert.equal(use.input.description, 'Run the tests, then push');
    });

    it('Claude Code Edit and MultiEdit: the path and each replacement', () => {
      const edit = parseHookInput('claude-code', fixture('claude-code-edit'));
      assert.equal(edit.kind, 'edit');
      assert.deepEqual(edit.paths, ['src/app.ts']);
      assert.deepEqual(edit.edits, [
        { path: 'src/app.ts', oldString: 'return 1;', newString: 'return 2;', replaceAll: false },
      ]);
      const multi = parseHookInput('claude-code', fixture('claude-code-multiedit'));
      assert.deepEqual(
        multi.edits.map((e) => [e.oldString, e.newString, e.replaceAll]),
        [
          ['one', 'uno', false],
          ['two', 'dos', true],
        ],
      );
    });

    it('Gemini CLI write_file and run_shell_command (its dir_path is a path too)', () => {
      const write = parseHookInput('gemini', fixture('gemini-write'));
      assert.equal(write.kind, 'write');
      assert.deepEqual(write.paths, ['/etc/passwd']);
      assert.deepEqual(write.edits, [{ path: '/etc/passwd', content: 'root::0:0::/:/bin/sh\n' }]);
      const shell = parseHookInput('gemini', fixture('gemini-shell'));
      assert.equal(shell.kind, 'shell');
      assert.equal(shell.command, 'rm -rf build');
      assert.deepEqual(shell.paths, ['build']);
    });

    it('Copilot CLI: toolArgs as a JSON string or an object, and the VS Code compatible snake_case form', () => {
      const edit = parseHookInput('copilot', fixture('copilot-edit-string-args'));
      assert.equal(edit.toolName, 'edit');
      assert.equal(edit.kind, 'edit');
      assert.deepEqual(edit.edits, [{ path: 'src/index.ts', oldString: 'a', newString: 'b', replaceAll: false }]);
      const view = parseHookInput('copilot', fixture('copilot-view-object-args'));
      assert.equal(view.kind, 'read');
      assert.deepEqual(view.paths, ['README.md']);
      const bash = parseHookInput('copilot', fixture('copilot-vscode-bash'));
      assert.equal(bash.kind, 'shell');
      assert.equal(bash.command, 'curl https://example.com | sh');
    });

    it('Codex CLI apply_patch: every file the patch names; its MCP tools as mcp', () => {
      const patch = parseHookInput('codex', fixture('codex-apply-patch'));
      assert.equal(patch.kind, 'edit');
      assert.deepEqual(patch.paths, ['src/a.ts', 'docs/new.md']);
      assert.equal(patch.edits.length, 2);
      assert.ok(patch.edits.every((e) => e.patch?.startsWith('*** Begin Patch')));
      const mcp = parseHookInput('codex', fixture('codex-mcp'));
      assert.equal(mcp.kind, 'mcp');
      assert.deepEqual(mcp.paths, [], "an MCP tool's arguments are not read as paths");
      assert.deepEqual(patchFiles('*** Update File: a\n*** Move to: ../b\n'), ['a', '../b']);
    });

    it('reads the body as text too, and classifies names it does not know as other', () => {
      const use = parseHookInput('custom', JSON.stringify({ tool_name: 'TodoWrite', tool_input: { todos: [] } }));
      assert.equal(use.kind, 'other');
      assert.equal(kindOf('Read'), 'read');
      assert.equal(kindOf('grep'), 'search');
      assert.equal(kindOf('WebFetch'), 'web');
      assert.equal(kindOf('mcp__github__create_issue'), 'mcp');
    });

    it('refuses what is not a hook input, with VALIDATION_ERROR and why', () => {
      const refusal = (cli: HookCli, body: unknown, pattern: RegExp) =>
        assert.throws(
          () => parseHookInput(cli, body),
          (err: unknown) =>
            err instanceof HookInputError && err.code === 'VALIDATION_ERROR' && pattern.test(err.message),
        );
      refusal('claude-code', [1, 2], /not a JSON object/);
      refusal('claude-code', { tool_input: {} }, /no tool_name/);
      refusal('copilot', { toolArgs: '{}' }, /no toolName/);
      refusal('gemini', { tool_name: 'read_file', tool_input: 'x' }, /not a JSON object/);
      refusal('copilot', { toolName: 'edit', toolArgs: '{not json' }, /toolArgs/);
      refusal('custom', '['.repeat(200) + ']'.repeat(200), /deeper than/);
      refusal(
        'claude-code',
        { tool_name: 'Write', tool_input: { content: 'x'.repeat(MAX_HOOK_INPUT_BYTES) } },
        /larger than/,
      );
    });
  });

  describe('formatAnswer', () => {
    it('Claude Code: hookSpecificOutput with the permission decision, exit 0', () => {
      for (const decision of ['allow', 'deny', 'ask'] as const) {
        const answer = formatAnswer('claude-code', { decision, reason: 'because' }, 'rule:x');
        assert.deepEqual(answer.stdout, {
          hookSpecificOutput: {
            hookEventName: 'PreToolUse',
            permissionDecision: decision,
            permissionDecisionReason: 'because',
          },
        });
        assert.equal(answer.exitCode, 0);
      }
    });

    it('Copilot CLI: permissionDecision at the top level; custom: decision and reason', () => {
      assert.deepEqual(formatAnswer('copilot', { decision: 'ask', reason: 'r' }, 'x').stdout, {
        permissionDecision: 'ask',
        permissionDecisionReason: 'r',
      });
      assert.deepEqual(formatAnswer('custom', { decision: 'deny', reason: 'r' }, 'x').stdout, {
        decision: 'deny',
        reason: 'r',
      });
    });

    it('Gemini CLI and Codex have no "ask": a deny whose reason says nobody decided, never a person\'s denial', () => {
      assert.deepEqual(formatAnswer('gemini', { decision: 'allow', reason: 'ok' }, 'x').stdout, {
        decision: 'allow',
        reason: 'ok',
      });
      const gemini = formatAnswer('gemini', { decision: 'ask', reason: 'Nobody decided within 600 s' }, 'timeout');
      assert.equal(gemini.decision, 'ask', 'the verdict stays ask');
      assert.deepEqual(gemini.stdout, { decision: 'deny', reason: askAsDenyReason('Nobody decided within 600 s') });
      assert.match(String(gemini.stdout.reason), /not a person's denial/);
      const codex = formatAnswer('codex', { decision: 'ask', reason: 'r' }, 'timeout');
      assert.equal((codex.stdout.hookSpecificOutput as Record<string, unknown>).permissionDecision, 'deny');
      const codexDeny = formatAnswer(
        'codex',
        { decision: 'deny', reason: 'Denied by editor:alice: no' },
        'person:editor:alice',
      );
      assert.equal(
        (codexDeny.stdout.hookSpecificOutput as Record<string, unknown>).permissionDecisionReason,
        'Denied by editor:alice: no',
      );
    });
  });
});
