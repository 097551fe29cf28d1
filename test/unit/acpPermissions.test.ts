import { strict as assert } from 'node:assert';
import { permissionOutcome, toolUseOfPermission } from '../../src/core/toolApproval/acpPermissions';

const OPTIONS = [
  { optionId: 'allow_always', name: 'Always Allow', kind: 'allow_always' as const },
  { optionId: 'allow', name: 'Allow', kind: 'allow_once' as const },
  { optionId: 'reject', name: 'Reject', kind: 'reject_once' as const },
];

describe('ACP permission requests read as tool uses', () => {
  it("reads Claude Code's own tool name and arguments as its hook input is read", () => {
    const use = toolUseOfPermission({
      toolCallId: 'toolu_1',
      title: 'Write notes.md',
      kind: 'edit',
      rawInput: { file_path: '/repo/wt/notes.md', content: 'hello\n' },
      locations: [{ path: '/repo/wt/notes.md' }],
      _meta: { claudeCode: { toolName: 'Write' } },
    });
    assert.equal(use.toolName, 'Write');
    assert.equal(use.kind, 'write');
    assert.deepEqual(use.paths, ['/repo/wt/notes.md']);
    assert.deepEqual(use.edits, [{ path: '/repo/wt/notes.md', content: 'hello\n' }]);
    assert.equal(use.toolUseId, 'toolu_1');
  });

  it('reads a shell command and an MCP tool by their names', () => {
    const bash = toolUseOfPermission({
      toolCallId: 't2',
      title: 'git status',
      kind: 'execute',
      rawInput: { command: 'git status' },
      _meta: { claudeCode: { toolName: 'Bash' } },
    });
    assert.equal(bash.kind, 'shell');
    assert.equal(bash.command, 'git status');
    const mcp = toolUseOfPermission({
      toolCallId: 't3',
      title: 'send_message',
      kind: 'other',
      rawInput: { to: 'b', text: 'x' },
      _meta: { claudeCode: { toolName: 'mcp__sw4rm__send_message' } },
    });
    assert.equal(mcp.kind, 'mcp');
    assert.deepEqual(mcp.paths, []);
  });

  it("falls back on ACP's own fields: kind, locations, diffs, rawInput.command", () => {
    const edit = toolUseOfPermission({
      toolCallId: 't4',
      title: 'Edit a.ts',
      kind: 'edit',
      content: [{ type: 'diff', path: '/w/a.ts', oldText: 'a', newText: 'b' }],
      locations: [{ path: '/w/a.ts' }],
    });
    assert.equal(edit.kind, 'edit');
    assert.equal(edit.toolName, 'Edit a.ts');
    assert.deepEqual(edit.paths, ['/w/a.ts']);
    assert.deepEqual(edit.edits, [{ path: '/w/a.ts', oldString: 'a', newString: 'b' }]);
    const created = toolUseOfPermission({
      toolCallId: 't5',
      kind: 'edit',
      content: [{ type: 'diff', path: '/w/new.ts', newText: 'x' }],
    });
    assert.deepEqual(created.edits, [{ path: '/w/new.ts', content: 'x' }]);
    const run = toolUseOfPermission({ toolCallId: 't6', kind: 'execute', rawInput: { command: ['rm', '-rf', '/'] } });
    assert.equal(run.kind, 'shell');
    assert.equal(run.command, 'rm -rf /');
    assert.equal(toolUseOfPermission({ toolCallId: 't7', kind: 'fetch' }).kind, 'web');
    assert.equal(toolUseOfPermission({ toolCallId: 't8', kind: 'delete', locations: [{ path: 'x' }] }).kind, 'write');
    assert.equal(toolUseOfPermission({ toolCallId: 't9' }).kind, 'other');
  });
});

describe('ACP permission answers', () => {
  it('an allow selects allow_once, never allow_always while allow_once is offered', () => {
    assert.deepEqual(permissionOutcome('allow', OPTIONS), { outcome: 'selected', optionId: 'allow' });
    assert.deepEqual(permissionOutcome('allow', [OPTIONS[0], OPTIONS[2]]), {
      outcome: 'selected',
      optionId: 'allow_always',
    });
  });

  it('deny and ask (nobody decided) select a reject, never an allow', () => {
    assert.deepEqual(permissionOutcome('deny', OPTIONS), { outcome: 'selected', optionId: 'reject' });
    assert.deepEqual(permissionOutcome('ask', OPTIONS), { outcome: 'selected', optionId: 'reject' });
    assert.deepEqual(permissionOutcome('ask', [OPTIONS[0], OPTIONS[1]]), { outcome: 'cancelled' });
    assert.deepEqual(permissionOutcome('deny', [{ optionId: 'r', name: 'No', kind: 'reject_always' }]), {
      outcome: 'selected',
      optionId: 'r',
    });
  });
});
