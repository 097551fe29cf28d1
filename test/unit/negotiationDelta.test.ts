import { strict as assert } from 'node:assert';
import {
  DELTA_LIMITS,
  canonicalJson,
  jsonDeltaSummary,
  leafCount,
  textDeltaSummary,
  unifiedDiff,
} from '../../src/core/negotiation/delta';
import { blend, deterministicScore, tokensOf } from '../../src/core/negotiation/scoring';

describe('negotiation: DeltaSummary (jsondiffpatch / line diff) and scoring', () => {
  it('equal JSON values: magnitude 0, no paths', () => {
    const { summary } = jsonDeltaSummary({ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 });
    assert.deepEqual(summary, { magnitude: 0, changedPaths: [], pathCount: 0, method: 'json' });
  });

  it('one changed leaf of four: magnitude 0.25, its JSON Pointer', () => {
    const { summary } = jsonDeltaSummary(
      { price: 10, terms: { days: 30, late_fee: 5 }, currency: 'EUR' },
      { price: 12, terms: { days: 30, late_fee: 5 }, currency: 'EUR' },
    );
    assert.equal(summary.magnitude, 0.25);
    assert.deepEqual(summary.changedPaths, ['/price']);
  });

  it('added, removed and nested changes as JSON Pointers (escaped ~ and /), sorted', () => {
    const { summary } = jsonDeltaSummary(
      { 'a/b': 1, keep: true, gone: { x: 1, y: 2 }, list: [1, 2, 3] },
      { 'a/b': 2, keep: true, 'n~ew': 'x', list: [1, 3] },
    );
    assert.ok(summary.changedPaths.includes('/a~1b'));
    assert.ok(summary.changedPaths.includes('/gone'));
    assert.ok(summary.changedPaths.includes('/n~0ew'));
    assert.ok(summary.changedPaths.some((p) => p.startsWith('/list/')));
    assert.deepEqual([...summary.changedPaths].sort(), summary.changedPaths);
    assert.ok(summary.magnitude > 0 && summary.magnitude <= 1);
  });

  it('magnitude is bounded by 1 even when everything is replaced by something larger', () => {
    const { summary } = jsonDeltaSummary({ a: 1 }, { b: { c: [1, 2, 3, 4, 5] }, d: 'x' });
    assert.equal(summary.magnitude, 1);
  });

  it('changed_paths are bounded (pathCount keeps the whole count)', () => {
    const before: Record<string, number> = {};
    const after: Record<string, number> = {};
    for (let i = 0; i < DELTA_LIMITS.maxPaths + 200; i++) {
      before[`k${i}`] = i;
      after[`k${i}`] = i + 1;
    }
    const { summary } = jsonDeltaSummary(before, after);
    assert.equal(summary.changedPaths.length, DELTA_LIMITS.maxPaths);
    assert.equal(summary.pathCount, DELTA_LIMITS.maxPaths + 200);
    assert.equal(summary.magnitude, 1);
  });

  it('text: changed lines over the longer text, the first new line of each changed block', () => {
    const summary = textDeltaSummary('one\ntwo\nthree\nfour\n', 'one\nTWO\nthree\nfour\nfive\n');
    assert.equal(summary.method, 'text');
    assert.deepEqual(summary.changedPaths, ['/lines/2', '/lines/5']);
    assert.equal(summary.magnitude, 2 / 5, 'a modified line counts once, an added line once');
    assert.equal(textDeltaSummary('a\nb\nc\n', 'a\nB\nC\nD\n').magnitude, 3 / 4, 'a block of 2 removed, 3 added: 3');
    assert.equal(textDeltaSummary('same\n', 'same\n').magnitude, 0);
  });

  it('bounded work: 30,000-item arrays and 100,000 leaves are summarised coarsely, not diffed (no freeze, no OOM)', () => {
    const before = Array.from({ length: 30_000 }, (_, i) => i);
    const after = Array.from({ length: 30_000 }, (_, i) => 30_000 - i);
    const started = Date.now();
    const { summary, delta } = jsonDeltaSummary({ items: before }, { items: after });
    assert.deepEqual(summary, { magnitude: 1, changedPaths: ['/'], pathCount: 1, method: 'json-coarse' });
    assert.equal(delta, undefined);
    assert.equal(
      jsonDeltaSummary({ items: before }, { items: [...before] }).summary.magnitude,
      0,
      'equal large values: 0',
    );
    // Many small arrays: no array is long, but the leaves are too many.
    const wide = Object.fromEntries(
      Array.from({ length: 100 }, (_, i) => [`k${i}`, Array.from({ length: 1_000 }, (__, j) => j)]),
    );
    const wider = Object.fromEntries(
      Array.from({ length: 100 }, (_, i) => [`k${i}`, Array.from({ length: 1_000 }, (__, j) => j + 1)]),
    );
    assert.equal(jsonDeltaSummary(wide, wider).summary.method, 'json-coarse');
    // Just within the bounds: still the structural diff.
    const small = Array.from({ length: DELTA_LIMITS.maxArrayItems - 1 }, (_, i) => i);
    assert.equal(jsonDeltaSummary({ items: small }, { items: [...small, 1] }).summary.method, 'json');
    assert.ok(Date.now() - started < 5_000, `took ${Date.now() - started} ms`);
  });

  it('bounded work: a 128 KB text rewritten line by line gives up (text-coarse) and yields no unified diff', () => {
    const before = Array.from({ length: 8_000 }, (_, i) => `line ${i} alpha`).join('\n');
    const after = Array.from({ length: 8_000 }, (_, i) => `line ${i} beta`).join('\n');
    assert.ok(before.length > 100_000);
    const summary = textDeltaSummary(before, after);
    assert.deepEqual(summary, { magnitude: 1, changedPaths: ['/'], pathCount: 1, method: 'text-coarse' });
    assert.equal(unifiedDiff(before, after, 'a', 'b'), undefined);
    assert.equal(textDeltaSummary('x\ny\n', 'x\nz\n').method, 'text', 'small texts are still diffed');
  });

  it('leaves, canonical JSON, tokens, the blend', () => {
    assert.equal(leafCount({ a: [1, 2, { b: null }], c: {} }), 4);
    assert.equal(canonicalJson({ b: 1, a: [{ d: 1, c: 2 }] }), '{"a":[{"c":2,"d":1}],"b":1}');
    assert.equal(tokensOf(Buffer.alloc(9)), 3);
    assert.equal(deterministicScore([]), null);
    assert.equal(blend(0.6, null, 0.5), 0.6);
    assert.equal(blend(0.6, 1, 0.5), 0.8);
    assert.equal(blend(0.6, 1, 0), 0.6);
  });
});
