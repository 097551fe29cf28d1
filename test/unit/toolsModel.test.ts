import { strict as assert } from 'node:assert';
import { DEFAULT_EXECUTION_POLICY } from '../../src/core/tools/model';
import type { ProviderInfo, ToolCallRecord, ToolDescriptor } from '../../src/core/api';
import {
  RECENT_CALLS_LISTED,
  bytesText,
  callContextValue,
  clockTimeText,
  callDetailText,
  callRow,
  cancelResultText,
  durationText,
  isOpenCall,
  outcomeText,
  providerContextValue,
  providerRow,
  schemaText,
  toolGroupDescription,
  toolRow,
} from '../../src/extension/toolsModel';

function tool(overrides: Partial<ToolDescriptor> = {}): ToolDescriptor {
  return {
    name: 'grep',
    description: 'Searches files',
    inputSchema: { type: 'object', properties: { pattern: { type: 'string' } }, required: ['pattern'] },
    outputSchema: {},
    idempotent: true,
    needsWorktree: false,
    defaultTimeoutS: 30,
    maxConcurrency: 4,
    sideEffects: 'none',
    ...overrides,
  };
}

function provider(overrides: Partial<ProviderInfo> = {}): ProviderInfo {
  return {
    providerId: 'search-agent',
    kind: 'agent',
    available: true,
    unavailableReason: '',
    tools: [tool()],
    registeredAt: Date.UTC(2026, 10, 23, 9, 0, 0),
    ...overrides,
  };
}

function call(overrides: Partial<ToolCallRecord> = {}): ToolCallRecord {
  return {
    callId: 'c0ffee00-1111-2222-3333-444455556666',
    callerAgentId: 'coder-1',
    providerId: 'search-agent',
    toolName: 'grep',
    via: 'grpc',
    stream: true,
    outcome: 'ok',
    errorCode: '',
    errorMessage: '',
    startedAt: 1_000,
    endedAt: 3_500,
    frames: 3,
    bytes: 2_048,
    attempts: 1,
    argsExcerpt: '{"pattern":"TODO"}',
    policy: DEFAULT_EXECUTION_POLICY,
    invocationId: '',
    messageId: '',
    ...overrides,
  };
}

describe("the Tools view's text (no vscode)", () => {
  it('a provider row says its kind, whether it is available and how many tools; the tooltip why it is not', () => {
    const up = providerRow(provider());
    assert.equal(up.label, 'search-agent');
    assert.equal(up.description, 'agent · available · 1 tool');
    assert.match(up.tooltip, /RegisterProvider/);
    assert.match(up.tooltip, /registered 2026-11-23T09:00:00.000Z/);
    assert.match(up.tooltip, /1 tool: grep/);
    const down = providerRow(
      provider({
        available: false,
        unavailableReason: 'agent offline since 2026-11-23T09:05:00Z',
        tools: [tool(), tool({ name: 'ls' })],
      }),
    );
    assert.equal(down.description, 'agent · unavailable · 2 tools');
    assert.match(down.tooltip, /unavailable: agent offline since 2026-11-23T09:05:00Z/);
    const builtin = providerRow(provider({ providerId: 'workspace', kind: 'builtin', registeredAt: 0 }));
    assert.match(builtin.description, /^built in · /);
    assert.doesNotMatch(builtin.tooltip, /registered/);
    assert.equal(providerContextValue({ available: true }), 'toolProvider+available');
    assert.equal(providerContextValue({ available: false }), 'toolProvider+unavailable');
  });

  it('a tool row says side effects, idempotence, max concurrency and timeout; the tooltip holds the input schema as text', () => {
    const row = toolRow(tool());
    assert.equal(row.label, 'grep');
    assert.equal(row.description, 'side effects: none · idempotent · max 4 at once · timeout 30 s');
    assert.match(row.tooltip, /Searches files/);
    assert.ok(row.tooltip.includes('"required": [\n    "pattern"\n  ]'), row.tooltip);
    const writer = toolRow(
      tool({
        name: 'write',
        sideEffects: 'filesystem',
        idempotent: false,
        defaultTimeoutS: 0,
        maxConcurrency: 1,
        needsWorktree: true,
      }),
    );
    assert.equal(
      writer.description,
      'side effects: filesystem · not idempotent · max 1 at once · no timeout · needs a worktree',
    );
    const huge = schemaText({ description: 'x'.repeat(10_000) }, 100);
    assert.equal(huge.length, 100);
    assert.ok(huge.endsWith('…'));
  });

  it('a call row: provider/tool, caller, outcome, duration, frames and bytes; an open call says since when (a time of day that cannot go stale)', () => {
    const done = callRow(call());
    assert.equal(done.label, 'search-agent/grep');
    assert.equal(done.description, 'coder-1 · ok · 2.5 s · 3 frames / 2.0 KiB');
    assert.match(done.tooltip, /call c0ffee00-1111-2222-3333-444455556666/);
    assert.match(done.tooltip, /via grpc, streaming/);
    const startedAt = new Date(2026, 10, 23, 9, 5, 7, 400).getTime(); // local time
    const running = callRow(call({ outcome: 'running', startedAt, endedAt: 0, frames: 1, bytes: 10 }));
    assert.equal(running.description, 'coder-1 · running · since 09:05:07 · 1 frame / 10 B');
    assert.match(running.tooltip, /running · since 09:05:07/);
    assert.deepEqual(
      callRow(call({ outcome: 'running', startedAt, endedAt: 0, frames: 1, bytes: 10 })),
      running,
      'the same however late it is drawn',
    );
    const uncounted = callRow(call({ outcome: 'queued', startedAt, endedAt: 0, frames: 0, bytes: 0 }));
    assert.equal(
      uncounted.description,
      'coder-1 · queued · since 09:05:07',
      'no "0 frames" before the engine counts them',
    );
    assert.match(uncounted.tooltip, /counted when the call ends/);
    assert.equal(clockTimeText(new Date(2026, 0, 1, 23, 0, 59).getTime()), '23:00:59');
    const failed = callRow(
      call({ outcome: 'error', errorCode: 'WALL_TIMEOUT', errorMessage: 'budget_wall_ms 2000 exceeded' }),
    );
    assert.match(failed.description, /· error WALL_TIMEOUT ·/);
    assert.match(failed.tooltip, /error: budget_wall_ms 2000 exceeded/);
    assert.equal(outcomeText({ outcome: 'awaiting_approval', errorCode: '' }), 'awaiting approval');
  });

  it('marks queued, running and awaiting-approval calls open (Cancel is offered on them), the others not', () => {
    for (const outcome of ['running', 'queued', 'awaiting_approval'] as const) {
      assert.equal(isOpenCall({ outcome }), true, outcome);
      assert.equal(callContextValue({ outcome }), `toolCall+${outcome}`);
    }
    for (const outcome of ['ok', 'cancelled', 'error'] as const) assert.equal(isOpenCall({ outcome }), false, outcome);
  });

  it('group descriptions count providers (unavailable ones), calls (running ones) and say when only the newest are listed', () => {
    assert.equal(
      toolGroupDescription('providers', [provider(), provider({ available: false })], []),
      '2 (1 unavailable)',
    );
    assert.equal(toolGroupDescription('providers', [provider()], []), '1');
    assert.equal(toolGroupDescription('calls', [], [call(), call({ outcome: 'running' })]), '2 · 1 running');
    assert.equal(
      toolGroupDescription(
        'calls',
        [],
        Array.from({ length: RECENT_CALLS_LISTED }, () => call()),
      ),
      `newest ${RECENT_CALLS_LISTED}`,
    );
  });

  it('durations and sizes in words', () => {
    assert.equal(durationText(0), '0 ms');
    assert.equal(durationText(999), '999 ms');
    assert.equal(durationText(12_400), '12.4 s');
    assert.equal(durationText(185_000), '3 min 5 s');
    assert.equal(bytesText(512), '512 B');
    assert.equal(bytesText(1536), '1.5 KiB');
    assert.equal(bytesText(3 * 1024 * 1024), '3.0 MiB');
  });

  it('the details document: record, policy, args (indented when they parse, as they are when cut), frames, error — as plain text', () => {
    const text = callDetailText(
      {
        record: call({
          outcome: 'error',
          errorCode: 'VALIDATION_ERROR',
          errorMessage: 'result does not match the output schema: /n must be number',
          policy: { ...DEFAULT_EXECUTION_POLICY, budgetWallMs: 2_000, privilegeLevel: 'ELEVATED' },
          invocationId: 'inv-1',
        }),
        frames: [
          { frameNo: 0, final: false, contentType: 'application/json', text: '{"line":"a"}' },
          { frameNo: 1, final: true, contentType: '', text: '<b>not markup</b>' },
        ],
      },
      10_000,
    );
    assert.match(text, /^Tool call c0ffee00-1111-2222-3333-444455556666\n/);
    assert.match(text, /tool {12}search-agent\/grep/);
    assert.match(text, /outcome {9}error VALIDATION_ERROR/);
    assert.match(text, /approval {8}inv-1/);
    assert.match(text, /budget_wall_ms {5}2000/);
    assert.match(text, /privilege_level {4}ELEVATED/);
    assert.match(text, /network_policy {5}DENY_ALL/);
    assert.ok(text.includes('{\n  "pattern": "TODO"\n}'));
    assert.match(text, /Error:\nVALIDATION_ERROR: result does not match the output schema: \/n must be number/);
    assert.match(
      text,
      /Frames kept \(the newest 2 of 3; none after a restart\):\n#0 application\/json\n\{"line":"a"\}\n#1 final application\/json\n<b>not markup<\/b>/,
    );
    const cut = callDetailText({ record: call({ argsExcerpt: '{"pattern":"TO' }), frames: [] }, 10_000);
    assert.ok(cut.includes('\n{"pattern":"TO\n'));
    assert.doesNotMatch(cut, /Error:/);
  });

  it("Cancel Tool Call's answers in words", () => {
    assert.deepEqual(cancelResultText('c1', { errorCode: 'CANCELLED', message: '' }), {
      ok: true,
      text: 'Tool call c1 was cancelled: its caller got a terminal frame.',
    });
    assert.equal(cancelResultText('c1', { errorCode: 'ALREADY_COMPLETED', message: 'done' }).ok, false);
    assert.match(
      cancelResultText('c1', { errorCode: 'NOT_FOUND', message: 'no such call' }).text,
      /not known: no such call/,
    );
  });
});
