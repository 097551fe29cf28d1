import { strict as assert } from 'node:assert';
import { TRANSCRIPT_MAX_ENTRIES, TRANSCRIPT_TEXT_MAX_CHARS } from '../../src/core/sessions/model';
import { Transcript } from '../../src/core/sessions/transcript';

describe('Agent session transcript', () => {
  it('joins chunks that follow each other, one entry per tool call with its updates, turn start and end', () => {
    const t = new Transcript();
    t.startTurn({ kind: 'task', taskId: 'task-1' }, 'Do it', 1);
    t.apply({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'hm' } }, 2);
    t.apply({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Hel' } }, 3);
    t.apply({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'lo' } }, 4);
    t.apply({ sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'Write a', kind: 'edit', status: 'pending' }, 5);
    t.apply(
      {
        sessionUpdate: 'tool_call_update',
        toolCallId: 'c1',
        status: 'completed',
        content: [{ type: 'diff', path: '/w/a', oldText: null, newText: 'x' }],
      },
      6,
    );
    t.apply({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Done' } }, 7);
    t.apply({ sessionUpdate: 'plan', entries: [{ content: 'step', status: 'pending', priority: 'high' }] }, 8);
    t.endTurn('end_turn', 9);
    assert.deepEqual(
      t.entries.map((e) => e.kind),
      ['turn', 'thought', 'agent', 'tool', 'agent', 'plan', 'end'],
    );
    const agent = t.entries[2];
    assert.ok(agent.kind === 'agent' && agent.text === 'Hello');
    const tool = t.entries[3];
    assert.ok(tool.kind === 'tool');
    assert.equal(tool.status, 'completed');
    assert.equal(tool.title, 'Write a');
    assert.deepEqual(tool.diffs, [{ path: '/w/a', oldText: null, newText: 'x' }]);
    assert.equal(t.turn, 1);
  });

  it('keeps at most TRANSCRIPT_MAX_ENTRIES entries and bounds each text', () => {
    const t = new Transcript();
    t.startTurn({ kind: 'person', by: 'me' }, 'x'.repeat(TRANSCRIPT_TEXT_MAX_CHARS + 10), 0);
    for (let i = 0; i < TRANSCRIPT_MAX_ENTRIES + 5; i++)
      t.apply({ sessionUpdate: 'tool_call', toolCallId: `c${i}`, title: 't' }, i);
    assert.equal(t.entries.length, TRANSCRIPT_MAX_ENTRIES);
    assert.equal(t.dropped, 6);
    const first = new Transcript();
    const turn = first.startTurn({ kind: 'person', by: 'me' }, 'y'.repeat(TRANSCRIPT_TEXT_MAX_CHARS + 10), 0);
    assert.ok(turn.kind === 'turn' && turn.prompt.length < TRANSCRIPT_TEXT_MAX_CHARS + 100);
    assert.ok(turn.kind === 'turn' && turn.prompt.endsWith('64 KiB of each text)'));
    // An update of a tool call that has left still finds a place.
    t.apply({ sessionUpdate: 'tool_call_update', toolCallId: 'c0', status: 'completed' }, 1);
    assert.equal(t.entries[t.entries.length - 1].kind, 'tool');
  });

  it('restores from stored entries and goes on numbering turns', () => {
    const t = new Transcript();
    t.startTurn({ kind: 'person', by: 'me' }, 'a', 0);
    t.endTurn('cancelled', 1);
    const again = new Transcript(t.entries, 3);
    assert.equal(again.turn, 1);
    assert.equal(again.dropped, 3);
    assert.equal(again.startTurn({ kind: 'message', messageId: 'm', from: 'b' }, 'b', 2).turn, 2);
  });
});
