import { strict as assert } from 'node:assert';
import { FIELD_LIMITS } from '../../src/core/fieldLimits';
import { contextRefusal } from '../../src/core/handoff/context';
import { HANDOFF_CONTEXT_CONTENT_TYPE } from '../../src/core/handoff/model';

/** About `max` bytes of a handoff context whose `make(i)`-made items fill `where`. */
function contextOf(max: number, shape: 'history' | 'numbers'): Buffer {
  const items: string[] = [];
  let size = 200;
  while (size < max - 64) {
    const item =
      shape === 'history' ? JSON.stringify({ role: 'user', content: `m${items.length}` }) : String(items.length % 10);
    items.push(item);
    size += item.length + 1;
  }
  const text =
    shape === 'history'
      ? `{"conversation_history":[${items.join(',')}],"tool_state":{},"metadata":{}}`
      : `{"conversation_history":[],"tool_state":{},"metadata":{"a":[${items.join(',')}]}}`;
  return Buffer.from(text);
}

/**
 * A handoff context at its limit (FIELD_LIMITS.handoff.context_bytes, 1 MiB) is checked — bounded JSON parse, then the
 * HandoffContext schema — in one synchronous turn well under 50 ms (issue 30, item 1): pinned here, ≈ 12–24 ms measured.
 */
describe('a handoff context at its 1 MiB limit is validated within 50 ms (issue 30, item 1)', () => {
  it('validates the largest contexts of many small entries and of many numbers', () => {
    const max = FIELD_LIMITS.handoff.context_bytes;
    contextRefusal(
      Buffer.from('{"conversation_history":[],"tool_state":{},"metadata":{}}'),
      HANDOFF_CONTEXT_CONTENT_TYPE,
    ); // the validator compiled once
    for (const shape of ['history', 'numbers'] as const) {
      const bytes = contextOf(max, shape);
      assert.ok(bytes.length <= max && bytes.length > max - 1024, String(bytes.length));
      const held: number[] = [];
      for (let k = 0; k < 3; k++) {
        const t0 = performance.now();
        assert.equal(contextRefusal(bytes, HANDOFF_CONTEXT_CONTENT_TYPE), undefined);
        held.push(performance.now() - t0);
      }
      console.log(
        `      ${bytes.length} bytes of ${shape}: validated in ${held.map((h) => h.toFixed(1)).join(', ')} ms`,
      );
      assert.ok([...held].sort((a, b) => a - b)[1] <= 50, held.join(', '));
    }
    // One byte over: refused before any parse.
    assert.match(contextRefusal(Buffer.alloc(max + 1, 0x20), HANDOFF_CONTEXT_CONTENT_TYPE)!, /at most 1048576/);
  });
});
