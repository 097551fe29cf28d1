// The approval panel's pure parts (webview/hitl/*.ts without the DOM): diff model, texts, message protocol.
import { strict as assert } from 'node:assert';
import {
  formatJsonValue,
  JSON_DIFF_LIMITS,
  jsonDeltaChanges,
  jsonDiffRefusal,
  propertyPath,
  textDiffLines,
  unifiedDiffLines,
} from '../../webview/hitl/diffModel';
import {
  MAX_RATIONALE_LENGTH,
  parseHostMessage,
  parseInvocationJson,
  parsePanelState,
  parseWebviewMessage,
  type InvocationJson,
} from '../../webview/hitl/protocol';
import {
  decisionHeadline,
  factRows,
  formatRemaining,
  parsePayloadText,
  rationaleMissing,
  reasonLabel,
  subjectText,
  suggestedPayloadText,
} from '../../webview/hitl/viewModel';

/** jsondiffpatch is an ES module; this CommonJS test loads it the way Node allows. */
async function jsonDelta(before: unknown, after: unknown): Promise<unknown> {
  const { create } = await import('jsondiffpatch');
  return create({ arrays: { detectMove: true, includeValueOnMove: false } }).diff(before, after);
}

const INVOCATION: InvocationJson = {
  invocation_id: 'inv-1',
  reason_type: 'SECURITY_APPROVAL',
  state: 'pending',
  requester: 'agent-a',
  correlation_id: 'c',
  subject: { repo_id: 'repo', worktree_id: '', task_id: 't1' },
  context: {
    summary: 's',
    facts: {},
    diffs: [],
    risk: { level: '', notes: [] },
    prior_attempts: [],
    inference: {},
    score: null,
  },
  proposed_actions: [],
  suggested_action: '',
  priority: 0,
  created_at: '2026-01-02T03:04:05.000Z',
  deadline_ts: '2026-01-02T03:09:05.000Z',
  extensions: 0,
  decision: null,
};

describe('approval panel: text diffs', () => {
  it('renders a line diff as hunks of context, removed and added lines with line numbers', () => {
    assert.deepEqual(textDiffLines('a\nb', 'a\nc'), [
      { kind: 'hunk', text: '@@ -1,2 +1,2 @@' },
      { kind: 'context', text: ' a', oldLine: 1, newLine: 1 },
      { kind: 'del', text: '-b', oldLine: 2 },
      { kind: 'add', text: '+c', newLine: 2 },
    ]);
  });

  it('keeps three lines of context and splits distant changes into hunks', () => {
    const before = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    const after = before.replace('line 2\n', 'line two\n').replace('line 19\n', 'line nineteen\n');
    const lines = textDiffLines(before, after);
    assert.deepEqual(
      lines.filter((l) => l.kind === 'hunk').map((l) => l.text),
      ['@@ -1,5 +1,5 @@', '@@ -16,5 +16,5 @@'],
    );
    assert.deepEqual(
      lines.filter((l) => l.kind === 'add').map((l) => [l.text, l.newLine]),
      [
        ['+line two', 2],
        ['+line nineteen', 19],
      ],
    );
  });

  it('gives up on a diff too large to show at the context limit within 50 ms, and says so (issue 30, item 1)', () => {
    // Two texts filling an approval's 256 KiB context, every other line changed: unbounded, 9.9 s of the panel's thread.
    const text = (f: (i: number) => string) => Array.from({ length: 8000 }, (_, i) => f(i)).join('\n') + '\n';
    const before = text((i) => `line ${i} alpha`);
    const after = text((i) => (i % 2 ? `line ${i} beta` : `line ${i} alpha`));
    assert.ok(
      before.length + after.length > 240_000 && before.length + after.length < 256 * 1024,
      String(before.length + after.length),
    );
    const t0 = performance.now();
    const lines = textDiffLines(before, after);
    const ms = performance.now() - t0;
    console.log(
      `      ${before.length + after.length} characters, 4,000 changed lines: ${lines.length} line${lines.length === 1 ? '' : 's'} shown in ${ms.toFixed(1)} ms`,
    );
    assert.deepEqual(lines, [
      {
        kind: 'note',
        text: `The texts differ in too many lines to show line by line here (8000 lines, ${before.length} characters before; 8000 lines, ${after.length} characters after).`,
      },
    ]);
    assert.ok(ms <= 50, `${ms.toFixed(1)} ms`);
    // A few changed lines in the same texts are still shown line by line.
    const few = textDiffLines(before, before.replace('line 4000 alpha\n', 'line 4000 gamma\n'));
    assert.deepEqual(
      few.filter((l) => l.kind === 'add').map((l) => l.text),
      ['+line 4000 gamma'],
    );
  });

  it('has nothing to show for equal texts, and treats a missing side as empty', () => {
    assert.deepEqual(textDiffLines('same\n', 'same\n'), []);
    assert.deepEqual(
      textDiffLines('', 'new').map((l) => l.kind),
      ['hunk', 'add'],
    );
  });

  it('classifies a ready-made unified diff line by line', () => {
    const unified =
      'diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n\\ No newline at end of file\n';
    assert.deepEqual(
      unifiedDiffLines(unified).map((l) => l.kind),
      ['header', 'header', 'header', 'header', 'hunk', 'context', 'del', 'add', 'note'],
    );
    assert.deepEqual(unifiedDiffLines(''), []);
  });
});

describe('approval panel: JSON diffs are bounded before jsondiffpatch runs (issue 32: one diff took 1,030 MB)', () => {
  const numbers = (n: number, odd = 1) => Array.from({ length: n }, (_, i) => (i % 2 ? i * odd : i));

  it('lets values within the bounds be diffed, and the diff of such arrays stays small and quick', async () => {
    const before = { items: numbers(JSON_DIFF_LIMITS.maxArrayItems), name: 'x' };
    const after = { items: numbers(JSON_DIFF_LIMITS.maxArrayItems, -1), name: 'y' };
    assert.equal(jsonDiffRefusal(before, after), undefined);
    const rss = process.memoryUsage().rss;
    const started = performance.now();
    assert.ok(jsonDeltaChanges(await jsonDelta(before, after)).length > 0);
    const ms = performance.now() - started;
    const grew = (process.memoryUsage().rss - rss) / 2 ** 20;
    assert.ok(
      ms < 1000 && grew < 64,
      `the largest diff allowed took ${ms.toFixed(0)} ms, RSS grew ${grew.toFixed(0)} MB`,
    );
  });

  it('refuses, naming the bound, what jsondiffpatch would compare in a quadratic table', () => {
    // 60,000 numbers fit in an approval's 256 KiB context; 6,000 took jsondiffpatch 2.2 s and 470 MB.
    assert.match(jsonDiffRefusal(numbers(60_000), numbers(60_000, -1)) ?? '', /an array of more than 500 items/);
    assert.match(jsonDiffRefusal([], numbers(501)) ?? '', /an array of more than 500 items/);
    // Many arrays each within the item bound: the sum of their tables counts.
    const many = Array.from({ length: 3 }, () => numbers(400));
    assert.match(jsonDiffRefusal({ a: many }, { a: many }) ?? '', /arrays of more than 500000 item pairs/);
    // Objects of many keys: the values counted.
    const wide = Object.fromEntries(Array.from({ length: 3_001 }, (_, i) => [`k${i}`, i]));
    assert.match(jsonDiffRefusal(wide, {}) ?? '', /more than 3000 values/);
    assert.match(jsonDiffRefusal({}, wide) ?? '', /more than 3000 values/);
  });

  it('walks nesting of any depth without recursion and in time linear in what it walks', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    assert.equal(jsonDiffRefusal(deep, null), undefined);
    // A value of 60,000 items and one of 3,000 keys of 400-item arrays: the walk stops at the first bound.
    const long = numbers(60_000);
    const wide = Object.fromEntries(Array.from({ length: 3_000 }, (_, i) => [`k${i}`, numbers(400)]));
    const times: number[] = [];
    for (let k = 0; k < 5; k++) {
      const started = performance.now();
      assert.notEqual(jsonDiffRefusal(long, long), undefined);
      assert.notEqual(jsonDiffRefusal(wide, wide), undefined);
      times.push(performance.now() - started);
    }
    const median = [...times].sort((a, b) => a - b)[2];
    assert.ok(median < 20, `the walk took ${times.map((t) => t.toFixed(1)).join(', ')} ms`);
  });
});

describe('approval panel: JSON diffs (jsondiffpatch deltas, rendered as a list of changes)', () => {
  it('lists added, removed and changed properties with their paths', async () => {
    const changes = jsonDeltaChanges(
      await jsonDelta(
        { name: 'x', keep: 1, nested: { port: 80, 'odd key': true }, gone: [1] },
        { name: 'y', keep: 1, nested: { port: 8080, 'odd key': true, tls: { on: true } } },
      ),
    );
    assert.deepEqual(changes, [
      { kind: 'changed', path: '$.name', before: 'x', after: 'y' },
      { kind: 'changed', path: '$.nested.port', before: 80, after: 8080 },
      { kind: 'added', path: '$.nested.tls', after: { on: true } },
      { kind: 'removed', path: '$.gone', before: [1] },
    ]);
  });

  it('lists array insertions, removals and moves by position', async () => {
    assert.deepEqual(jsonDeltaChanges(await jsonDelta({ list: ['a', 'b', 'c'] }, { list: ['a', 'c', 'd'] })), [
      { kind: 'removed', path: '$.list[1]', before: 'b' },
      { kind: 'added', path: '$.list[2]', after: 'd' },
    ]);
    const moved = jsonDeltaChanges(await jsonDelta([{ id: 1 }, 'x', 'y', 'z'], ['x', 'y', 'z', { id: 1 }]));
    assert.ok(moved.length >= 1, JSON.stringify(moved));
    assert.ok(
      moved.every((c) => c.path.startsWith('$[')),
      JSON.stringify(moved),
    );
  });

  it('handles a changed root, a text-diff delta and no change', async () => {
    assert.deepEqual(jsonDeltaChanges(await jsonDelta(1, 'one')), [
      { kind: 'changed', path: '$', before: 1, after: 'one' },
    ]);
    assert.deepEqual(jsonDeltaChanges(await jsonDelta({ a: 1 }, { a: 1 })), []);
    assert.deepEqual(jsonDeltaChanges(['@@ -1 +1 @@', 0, 2], '$.text'), [
      { kind: 'text', path: '$.text', after: '@@ -1 +1 @@' },
    ]);
    assert.deepEqual(jsonDeltaChanges({ _t: 'a', _0: ['', 2, 3] }), [
      { kind: 'moved', path: '$[0]', to: '$[2]', before: undefined },
    ]);
  });

  it('writes paths and values as text', () => {
    assert.equal(propertyPath('name'), '.name');
    assert.equal(propertyPath('left-pad'), '["left-pad"]');
    assert.equal(propertyPath('<img src=x>'), '["<img src=x>"]');
    assert.equal(formatJsonValue('a "b"'), '"a \\"b\\""');
    assert.equal(formatJsonValue({ a: [1] }), '{\n  "a": [\n    1\n  ]\n}');
    assert.equal(formatJsonValue(undefined), 'undefined');
  });
});

describe('approval panel: texts', () => {
  it('counts down to the deadline and says when it passed', () => {
    assert.equal(formatRemaining(4 * 60_000 + 5_000), '4m 05s left');
    assert.equal(formatRemaining(42_000), '42s left');
    assert.equal(formatRemaining(3_600_000 + 2 * 60_000 + 59_000), '1h 02m left');
    assert.equal(formatRemaining(-3_000), 'overdue by 3s');
  });

  it('shows facts: scalars on a line, objects as pretty JSON blocks', () => {
    assert.deepEqual(factRows({ files: 3, owner: { team: 'infra' }, note: 'a\nb', none: null, html: '<b>x</b>' }), [
      { key: 'files', text: '3', block: false },
      { key: 'owner', text: '{\n  "team": "infra"\n}', block: true },
      { key: 'note', text: 'a\nb', block: true },
      { key: 'none', text: 'null', block: false },
      { key: 'html', text: '<b>x</b>', block: false },
    ]);
  });

  it('prefills Modify with the suggested payload, or {}', () => {
    assert.equal(suggestedPayloadText(INVOCATION), '{}');
    const withPayload = {
      ...INVOCATION,
      context: { ...INVOCATION.context, facts: { suggested_payload: { files: ['a'] } } },
    };
    assert.equal(suggestedPayloadText(withPayload), '{\n  "files": [\n    "a"\n  ]\n}');
    const asText = { ...INVOCATION, context: { ...INVOCATION.context, facts: { proposed_payload: '{"x":1}' } } };
    assert.equal(suggestedPayloadText(asText), '{\n  "x": 1\n}');
  });

  it('checks the modified payload before it is sent', () => {
    assert.deepEqual(parsePayloadText(' {"a": 1} '), { ok: true, value: { a: 1 } });
    assert.deepEqual(parsePayloadText('null'), { ok: true, value: null });
    const bad = parsePayloadText('{a: 1}');
    assert.equal(bad.ok, false);
    assert.match(!bad.ok ? bad.error : '', /^The modified payload is not valid JSON: /);
    assert.equal(parsePayloadText('  ').ok, false);
  });

  it('takes no decision without a rationale: empty or white space is missing', () => {
    for (const blank of ['', ' ', '\n\t  \n']) assert.equal(rationaleMissing(blank), true, JSON.stringify(blank));
    for (const given of ['ok', '  reviewed the diff \n'])
      assert.equal(rationaleMissing(given), false, JSON.stringify(given));
  });

  it('says who decided and how', () => {
    const base = { invocation_id: 'i', rationale: '', decision_payload: null, decided_at: '2026-01-02T03:04:05.000Z' };
    assert.equal(
      decisionHeadline({
        ...base,
        decision: 'approve',
        state: 'decided',
        decided_by: 'editor:alice',
        automatic: false,
      }),
      'Approved by editor:alice',
    );
    assert.equal(
      decisionHeadline({
        ...base,
        decision: 'deny',
        state: 'decided',
        decided_by: 'policy',
        automatic: true,
        rule: 'no-prod',
      }),
      "Denied automatically by rule 'no-prod'",
    );
    assert.equal(
      decisionHeadline({
        ...base,
        decision: 'deny',
        state: 'timed_out',
        decided_by: 'policy',
        automatic: true,
        fallback: { policy: 'DENY_BY_DEFAULT', trigger: 'hitl_unavailable' },
      }),
      'Denied automatically (fallback DENY_BY_DEFAULT: no operator available)',
    );
    assert.equal(
      decisionHeadline({ ...base, decision: 'deny', state: 'cancelled', decided_by: 'cli:bob', automatic: false }),
      'Cancelled by cli:bob (the requester was answered deny)',
    );
  });

  it('writes the subject and the reason type for people', () => {
    assert.equal(subjectText(INVOCATION.subject), 'repo repo · task t1');
    assert.equal(subjectText({ repo_id: '', worktree_id: '', task_id: '' }), '');
    assert.equal(reasonLabel('TOOL_PRIVILEGE_ESCALATION'), 'Tool privilege escalation');
  });
});

describe('approval panel protocol', () => {
  it('accepts exactly the webview messages it knows', () => {
    assert.deepEqual(parseWebviewMessage({ type: 'ready' }), { type: 'ready' });
    assert.deepEqual(
      parseWebviewMessage({ type: 'decide', requestId: 1, action: 'approve', rationale: 'ok', extra: 'dropped' }),
      { type: 'decide', requestId: 1, action: 'approve', rationale: 'ok' },
    );
    assert.deepEqual(
      parseWebviewMessage({ type: 'decide', requestId: 2, action: 'modify', rationale: '', payload: { a: 1 } }),
      { type: 'decide', requestId: 2, action: 'modify', rationale: '', payload: { a: 1 } },
    );
    assert.deepEqual(
      parseWebviewMessage({ type: 'decide', requestId: 3, action: 'modify', rationale: '', payload: null }),
      { type: 'decide', requestId: 3, action: 'modify', rationale: '', payload: null },
    );
    for (const bad of [
      null,
      'ready',
      [],
      { type: 'nope' },
      { type: 'decide', requestId: 1, action: 'APPROVE!', rationale: '' },
      { type: 'decide', requestId: -1, action: 'approve', rationale: '' },
      { type: 'decide', requestId: 1.5, action: 'approve', rationale: '' },
      { type: 'decide', requestId: 1, action: 'approve' },
      { type: 'decide', requestId: 1, action: 'approve', rationale: 'x'.repeat(MAX_RATIONALE_LENGTH + 1) },
      { type: 'decide', requestId: 1, action: 'modify', rationale: '' },
    ]) {
      assert.equal(parseWebviewMessage(bad), undefined, JSON.stringify(bad)?.slice(0, 100));
    }
  });

  it('accepts exactly the extension messages it knows', () => {
    const update = { type: 'invocation', invocationId: 'inv-1', invocation: INVOCATION, operator: 'editor:a', now: 1 };
    assert.deepEqual(parseHostMessage(update), update);
    assert.deepEqual(parseHostMessage({ ...update, invocation: null, unavailable: 'stopped' }), {
      ...update,
      invocation: null,
      unavailable: 'stopped',
    });
    assert.deepEqual(parseHostMessage({ type: 'result', requestId: 4, invocation: INVOCATION }), {
      type: 'result',
      requestId: 4,
      invocation: INVOCATION,
    });
    assert.deepEqual(parseHostMessage({ type: 'error', requestId: 4, message: 'already decided' }), {
      type: 'error',
      requestId: 4,
      message: 'already decided',
    });
    for (const bad of [
      { ...update, now: 'x' },
      { ...update, invocation: { ...INVOCATION, state: 'weird' } },
      { ...update, unavailable: 3 },
      { type: 'result', requestId: 4 },
      { type: 'error', message: 'x' },
      { type: 'other' },
    ]) {
      assert.equal(parseHostMessage(bad), undefined, JSON.stringify(bad).slice(0, 100));
    }
  });

  it("checks the invocation's shape but keeps agent data as it is", () => {
    assert.ok(parseInvocationJson(INVOCATION));
    const data = {
      ...INVOCATION,
      context: {
        ...INVOCATION.context,
        facts: { html: '<script>x</script>' },
        diffs: [{ title: 't', beforeJson: [1], afterJson: { a: 1 } }],
      },
    };
    assert.deepEqual(parseInvocationJson(data), data);
    assert.equal(
      parseInvocationJson({ ...INVOCATION, context: { ...INVOCATION.context, diffs: [{ title: 't', before: 3 }] } }),
      undefined,
    );
    assert.equal(parseInvocationJson({ ...INVOCATION, subject: null }), undefined);
    assert.equal(parseInvocationJson({ ...INVOCATION, decision: { decision: 'approve' } }), undefined);
    assert.equal(parseInvocationJson({ ...INVOCATION, proposed_actions: [1] }), undefined);
  });

  it('restores a panel from its invocation id only', () => {
    assert.deepEqual(parsePanelState({ invocationId: 'inv-1', other: 1 }), { invocationId: 'inv-1' });
    assert.equal(parsePanelState({ invocationId: '' }), undefined);
    assert.equal(parsePanelState(undefined), undefined);
  });
});
