import { strict as assert } from 'node:assert';
import { FIELD_LIMITS } from '../../src/core/fieldLimits';
import { MAX_STRUCTURAL_LEAVES, scoreDebate } from '../../src/core/reasoning/debateScorer';
import { NegotiationError } from '../../src/core/policy/speaker';
import { NegotiationHarness, testPolicy } from '../support/negotiationHarness';

/** The largest debate round (LIMITS.payload_bytes). */
const LIMIT = FIELD_LIMITS.negotiation.payload_bytes;

/** `make(i)` joined by `sep` for as many i as fit in `size` bytes with `open` and `close`. */
function fill(make: (i: number) => string, open: string, close: string, sep = ',', size = LIMIT): string {
  const parts: string[] = [];
  let length = open.length + close.length;
  for (let i = 0; ; i++) {
    const part = make(i);
    if (length + part.length + sep.length > size) break;
    parts.push(part);
    length += part.length + sep.length;
  }
  return `${open}${parts.join(sep)}${close}`;
}

/** How long a synchronous call held the event loop (it runs on it from start to end), and what it answered or threw. */
function held<T>(work: () => T): { ms: number; answer?: T; error?: unknown } {
  const t0 = performance.now();
  try {
    const answer = work();
    return { ms: performance.now() - t0, answer };
  } catch (error) {
    return { ms: performance.now() - t0, error };
  }
}

const A = 'agent-a';
const B = 'agent-b';

/**
 * 512 KiB rounds of very many JSON values (issue 30 item 1): before, a Propose of an object of 30,000 keys held the
 * event loop 80–120 ms (JSON.parse, the schema-free checks, JSON.stringify of both versions for the coarse delta, and a
 * Counter parses the previous round and the one before too).
 */
describe('debate rounds of very many JSON values hold the event loop at most 50 ms (issue 30, item 1)', function () {
  this.timeout(120_000);
  let h: NegotiationHarness;
  afterEach(() => h?.dispose());

  /** Two versions of each shape, each just under 512 KiB. */
  const shapes: [string, (salt: string) => string][] = [
    ['a flat object of string values', (s) => fill((i) => `"k${i}":"${s}${i}"`, '{', '}')],
    ['a flat object of numbers', (s) => fill((i) => `"k${i}":${s === 'a' ? i : i + 1}`, '{', '}')],
    ['an array of small objects', (s) => fill((i) => `{"k":"${s}${i}"}`, '[', ']')],
    ['an object of small objects', (s) => fill((i) => `"g${i}":{"a":"${s}","b":${i}}`, '{', '}')],
    ['an array of empty objects', (s) => fill(() => '{}', s === 'a' ? '[' : '[1,', ']')],
  ];

  it('Propose, Counter, Counter (oscillating) of 512 KiB each: every call within 50 ms (accepted, or refused VALIDATION_ERROR)', () => {
    h = new NegotiationHarness(undefined, { capacity: 1000 });
    h.agent(A);
    h.agent(B);
    h.usePolicy(testPolicy({ maxRounds: 20, tokenBudgetPerRound: 131_072, totalTokenBudget: 2_097_152, oscillationLimit: 10 }));
    const debate = (id: string, a: string, b: string) => {
      h.openN(id, [A, B]);
      const calls = [held(() => h.propose(id, A, a)), held(() => h.counter(id, B, b)), held(() => h.counter(id, A, a))];
      for (const agent of [A, B]) h.received(agent); // read and confirmed: the inboxes do not fill up
      return calls;
    };
    // A first debate not counted (V8 compiling the code on its first runs: a coordinator that has run a debate has it).
    const [warmA, warmB] = [shapes[0][1]('a'), shapes[0][1]('b')];
    debate('warm-up', warmA, warmB);
    const worst: string[] = [];
    shapes.forEach(([name, make], k) => {
      const a = make('a');
      const b = make('b');
      assert.ok(Buffer.byteLength(a) <= LIMIT && Buffer.byteLength(b) <= LIMIT);
      const calls = debate(`n${k}`, a, b);
      const figures = calls.map((c, i) => {
        const what = ['Propose', 'Counter', 'Counter'][i];
        if (c.error !== undefined) {
          assert.ok(c.error instanceof NegotiationError, String(c.error));
          assert.equal(c.error.code, 'VALIDATION_ERROR', c.error.message);
          return `${what} refused in ${c.ms.toFixed(1)} ms`;
        }
        return `${what} ${c.ms.toFixed(1)} ms`;
      });
      console.log(`      ${name} (${a.length} bytes): ${figures.join(', ')}`);
      for (const c of calls) if (c.ms > 50) worst.push(`${name}: ${c.ms.toFixed(1)} ms`);
    });
    assert.deepEqual(worst, [], 'calls over 50 ms');
  });

  it('the built-in debate scorer (EvaluateDebate) on two 1 MiB proposals of up to 20,000 leaves and beyond: within 50 ms', () => {
    assert.equal(MAX_STRUCTURAL_LEAVES, 20_000);
    const MiB = 1024 * 1024;
    const cases: [string, string, string][] = [
      ['20,000 leaves in a flat object', JSON.stringify(Object.fromEntries(Array.from({ length: 19_999 }, (_, i) => [`key${i}`, `a${i}`.padEnd(30, 'x')]))), JSON.stringify(Object.fromEntries(Array.from({ length: 19_999 }, (_, i) => [`key${i}`, `b${i}`.padEnd(30, 'x')])))],
      ['a flat object of 1 MiB', fill((i) => `"k${i}":"a${i}"`, '{', '}', ',', MiB), fill((i) => `"k${i}":"b${i}"`, '{', '}', ',', MiB)],
      ['an array of 1 MiB of small objects', fill((i) => `{"k":"a${i}"}`, '[', ']', ',', MiB), fill((i) => `{"k":"b${i}"}`, '[', ']', ',', MiB)],
      ['1 MiB of words', fill((i) => `w${i}`, '', '', ' ', MiB), fill((i) => `v${i}`, '', '', ' ', MiB)],
    ];
    scoreDebate(cases[0][1], cases[0][2]);
    const worst: string[] = [];
    for (const [name, a, b] of cases) {
      const c = held(() => scoreDebate(a, b));
      assert.equal(c.error, undefined);
      console.log(`      ${name} (${a.length} bytes): ${c.ms.toFixed(1)} ms, ${c.answer?.notes.slice(0, 80)}`);
      if (c.ms > 50) worst.push(`${name}: ${c.ms.toFixed(1)} ms`);
    }
    assert.deepEqual(worst, [], 'scores over 50 ms');
  });
});
