import { strict as assert } from 'node:assert';
import { FIELD_LIMITS } from '../../src/core/fieldLimits';
import { jsonShape } from '../../src/core/json';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { MAX_STRUCTURAL_LEAVES, scoreDebate, type DebateVerdict } from '../../src/core/reasoning/debateScorer';
import { BUILT_IN_NOTE, InferenceEngine, REASONING_LIMITS } from '../../src/core/reasoning/inferenceEngine';
import { RouterHarness, ctx } from '../support/routerHarness';
import { NegotiationError } from '../../src/core/policy/speaker';
import { NegotiationHarness, testPolicy } from '../support/negotiationHarness';

/** The largest debate round (LIMITS.payload_bytes). */
const LIMIT = FIELD_LIMITS.negotiation.payload_bytes;

/** The most JSON values a round may hold (counted before JSON.parse). */
const VALUES = FIELD_LIMITS.negotiation.payload_json_values;

/** `make(i)` joined by `sep` for as many i as fit in `size` bytes with `open` and `close` (at most `count`). */
function fill(
  make: (i: number) => string,
  open: string,
  close: string,
  sep = ',',
  size = LIMIT,
  count = Infinity,
): string {
  const parts: string[] = [];
  let length = open.length + close.length;
  for (let i = 0; i < count; i++) {
    const part = make(i);
    if (length + part.length + sep.length > size) break;
    parts.push(part);
    length += part.length + sep.length;
  }
  return `${open}${parts.join(sep)}${close}`;
}

/** The main thread's CPU time so far, in ms (Node ≥ 23.9; else undefined). */
function threadCpuMs(): number | undefined {
  const usage = (process as { threadCpuUsage?: () => { user: number; system: number } }).threadCpuUsage?.();
  return usage === undefined ? undefined : (usage.user + usage.system) / 1000;
}

/**
 * How long a synchronous call held the event loop (it runs on it from start to end), the main thread's CPU time in it
 * (the same less the time other processes took the core from it, and less I/O waits), and what it answered or threw.
 */
function held<T>(work: () => T): { ms: number; cpu: number; answer?: T; error?: unknown } {
  const c0 = threadCpuMs();
  const t0 = performance.now();
  const done = () => ({
    ms: performance.now() - t0,
    cpu: c0 === undefined ? performance.now() - t0 : (threadCpuMs() ?? 0) - c0,
  });
  try {
    const answer = work();
    return { ...done(), answer };
  } catch (error) {
    return { ...done(), error };
  }
}

/** `verdict` when it is what the built-in scorer answers for `a` and `b` on this thread (the same answer off it). */
function scoreDebateSame(
  verdict: { confidence: number; notes: string },
  a: string,
  b: string,
): { confidence: number; notes: string } {
  const here: DebateVerdict = scoreDebate(a, b);
  return here.confidence === verdict.confidence && BUILT_IN_NOTE + here.notes === verdict.notes
    ? verdict
    : { confidence: here.confidence, notes: BUILT_IN_NOTE + here.notes };
}

const A = 'agent-a';
const B = 'agent-b';

/**
 * 512 KiB rounds of very many JSON values (issue 30 item 1): before, a Propose of an object of 30,000 keys held the
 * event loop 64–135 ms and a Counter 78–300 ms here (JSON.parse of the draft, the previous round and the one before,
 * JSON.stringify of two for the coarse delta); now a round of more than FIELD_LIMITS.negotiation.payload_json_values
 * is refused VALIDATION_ERROR after a linear scan, before any parse. Asserted, on the median of five calls: the main
 * thread's CPU time in the call ≤ 50 ms, and the hold (wall clock) ≤ 50 ms when the machine is quiet, i.e. when the first
 * shape, one string of 512 KiB (the round's own cost without many values: storing it, sending it to each participant),
 * takes at most 25 ms; on a machine loaded by other processes (load 6–12 on 2 cores here) the wall clock measures them.
 */
describe('debate rounds of very many JSON values hold the event loop at most 50 ms (issue 30, item 1)', function () {
  this.timeout(120_000);
  let h: NegotiationHarness;
  afterEach(() => h?.dispose());

  /** A string of `width` characters starting with `salt` and `i`: values padded so that a version fills 512 KiB. */
  const padded = (salt: string, i: number, width: number) => `${salt}${i}`.padEnd(width, 'x');
  /**
   * Two versions of each shape, each just under 512 KiB: beyond the values limit (refused), and at it (accepted; the
   * strings padded to fill 512 KiB). jsonShape counts 1 + each `{`, `[` and `,`: a flat object of k keys is k + 1 values,
   * an array of k objects of one member 2k + 1, an object of k objects of two members 3k + 1.
   */
  const shapes: [string, (salt: string) => string][] = [
    ['for comparison: one string of 512 KiB', (s) => JSON.stringify({ text: padded(s, 0, LIMIT - 12) })],
    ['beyond: a flat object of string values', (s) => fill((i) => `"k${i}":"${s}${i}"`, '{', '}')],
    ['beyond: a flat object of numbers', (s) => fill((i) => `"k${i}":${s === 'a' ? i : i + 1}`, '{', '}')],
    ['beyond: an array of small objects', (s) => fill((i) => `{"k":"${s}${i}"}`, '[', ']')],
    ['beyond: an object of small objects', (s) => fill((i) => `"g${i}":{"a":"${s}","b":${i}}`, '{', '}')],
    ['beyond: an array of empty objects', (s) => fill(() => '{}', s === 'a' ? '[' : '[1,', ']')],
    [
      `at the limit: a flat object of ${VALUES - 1} keys`,
      (s) =>
        fill((i) => `"k${i}":"${padded(s, i, Math.floor(LIMIT / VALUES) - 12)}"`, '{', '}', ',', LIMIT, VALUES - 1),
    ],
    [
      `at the limit: a flat object of ${VALUES - 1} numbers`,
      (s) => fill((i) => `"k${i}":${s === 'a' ? i : i + 1}`, '{', '}', ',', LIMIT, VALUES - 1),
    ],
    [
      `at the limit: an array of ${((VALUES - 1) / 2) | 0} small objects`,
      (s) =>
        fill(
          (i) => `{"k":"${padded(s, i, Math.floor((2 * LIMIT) / VALUES) - 10)}"}`,
          '[',
          ']',
          ',',
          LIMIT,
          ((VALUES - 1) / 2) | 0,
        ),
    ],
    [
      `at the limit: an object of ${((VALUES - 1) / 3) | 0} small objects`,
      (s) =>
        fill(
          (i) => `"g${i}":{"a":"${padded(s, i, Math.floor((3 * LIMIT) / VALUES) - 20)}","b":${i}}`,
          '{',
          '}',
          ',',
          LIMIT,
          ((VALUES - 1) / 3) | 0,
        ),
    ],
  ];

  it('Propose, Counter, Counter (oscillating) of 512 KiB each: every call within 50 ms, the median of five (accepted, or refused VALIDATION_ERROR)', () => {
    h = new NegotiationHarness(undefined, { capacity: 1000 });
    h.agent(A);
    h.agent(B);
    h.usePolicy(
      testPolicy({ maxRounds: 20, tokenBudgetPerRound: 131_072, totalTokenBudget: 2_097_152, oscillationLimit: 10 }),
    );
    const debate = (id: string, a: string, b: string) => {
      h.openN(id, [A, B]);
      const propose = held(() => h.propose(id, A, a));
      if (propose.error !== undefined) h.propose(id, A, { small: 1 }); // refused: a small round 1, so that the Counters are checked
      const calls = [propose, held(() => h.counter(id, B, b)), held(() => h.counter(id, A, a))];
      for (const agent of [A, B]) h.received(agent); // read and confirmed: the inboxes do not fill up
      return calls;
    };
    // A first debate not counted (V8 compiling the code on its first runs: a coordinator that has run a debate has it).
    const [warmA, warmB] = [shapes[0][1]('a'), shapes[0][1]('b')];
    debate('warm-up', warmA, warmB);
    const worst: string[] = [];
    const baseline = [0, 0, 0];
    const accepted: string[] = [];
    shapes.forEach(([name, make], k) => {
      const a = make('a');
      const b = make('b');
      assert.ok(Buffer.byteLength(a) <= LIMIT && Buffer.byteLength(b) <= LIMIT);
      const atLimit = !name.startsWith('beyond');
      if (atLimit)
        for (const v of [a, b])
          assert.ok(jsonShape(v, 64, VALUES).values <= VALUES, `${name}: ${jsonShape(v, 64, VALUES).values} values`);
      // Five debates: each call's median (one run in a few is slowed by other processes on a shared machine, or a GC).
      const runs = [0, 1, 2, 3, 4].map((r) => debate(`n${k}-${r}`, a, b));
      const figures = [0, 1, 2].map((i) => {
        const what = ['Propose', 'Counter', 'Counter'][i];
        const calls = runs.map((run) => run[i]);
        for (const c of calls) {
          if (atLimit) assert.equal(c.error, undefined, `${name}: ${what} accepted`);
          else if (c.error === undefined) accepted.push(`${name}: ${what}`);
          else {
            assert.ok(c.error instanceof NegotiationError, String(c.error));
            assert.equal(c.error.code, 'VALIDATION_ERROR', c.error.message);
            assert.match(c.error.message, new RegExp(`^the payload holds more than ${VALUES} JSON values`));
          }
        }
        const ms = calls.map((c) => c.ms).sort((x, y) => x - y);
        const median = ms[2];
        const cpu = calls.map((c) => c.cpu).sort((x, y) => x - y)[2];
        if (k === 0) baseline[i] = median;
        if (cpu > 50 || (baseline[i] <= 25 && median > 50))
          worst.push(`${name}: ${what} ${median.toFixed(1)} ms (CPU ${cpu.toFixed(1)} ms)`);
        return `${what}${calls.every((c) => c.error !== undefined) ? ' refused' : ''} ${median.toFixed(1)} ms (${ms.map((x) => x.toFixed(0)).join(', ')}; CPU ${cpu.toFixed(1)})`;
      });
      console.log(`      ${name} (${a.length} bytes): median ${figures.join(', ')}`);
    });
    const quiet = baseline.every((b) => b <= 25);
    console.log(
      `      (asserted: the main thread's CPU time${quiet ? ' and the hold' : ''} ≤ 50 ms${quiet ? '' : '; not the hold: one string took more than 25 ms, other processes load this machine'})`,
    );
    assert.deepEqual(worst, [], 'calls over the bound');
    assert.deepEqual(accepted, [], 'rounds beyond the values limit are refused');
  });

  it('the built-in debate scorer (EvaluateDebate without an engine) on two 1 MiB proposals of up to 20,000 leaves and beyond: within 50 ms, the median of five', async () => {
    assert.equal(MAX_STRUCTURAL_LEAVES, 20_000);
    const router = new RouterHarness();
    const engine = new InferenceEngine({
      agents: router.registry,
      clock: router.clock,
      log: router.coordinator.log,
      abandon: () => undefined,
      call: () => Promise.reject(new Error('no engine is asked')),
    });
    const MiB = REASONING_LIMITS.maxProposalBytes;
    const wide = (salt: string) =>
      JSON.stringify(
        Object.fromEntries(Array.from({ length: 19_999 }, (_, i) => [`key${i}`, `${salt}${i}`.padEnd(30, 'x')])),
      );
    const cases: [string, string, string][] = [
      ['20,000 leaves in a flat object', wide('a'), wide('b')],
      [
        'a flat object of 1 MiB',
        fill((i) => `"k${i}":"a${i}"`, '{', '}', ',', MiB),
        fill((i) => `"k${i}":"b${i}"`, '{', '}', ',', MiB),
      ],
      [
        'an array of 1 MiB of small objects',
        fill((i) => `{"k":"a${i}"}`, '[', ']', ',', MiB),
        fill((i) => `{"k":"b${i}"}`, '[', ']', ',', MiB),
      ],
      ['1 MiB of words', fill((i) => `w${i}`, '', '', ' ', MiB), fill((i) => `v${i}`, '', '', ' ', MiB)],
    ];
    const c = ctx('debate-scorer');
    const worst: string[] = [];
    try {
      await engine.evaluateDebate(
        { negotiationId: 'warm-up', proposalA: cases[0][1], proposalB: cases[0][2], intensity: '' },
        c,
      );
      for (const [name, a, b] of cases) {
        // Five requests: the median of the event loop's longest delay while each is made and answered (1 ms resolution;
        // a shared machine's scheduler alone delays it that much now and then).
        const runs: number[] = [];
        let verdict = { confidence: 0, notes: '' };
        let total = 0;
        for (let r = 0; r < 5; r++) {
          const delay = monitorEventLoopDelay({ resolution: 1 });
          delay.enable();
          const t0 = performance.now();
          const answer = engine.evaluateDebate({ negotiationId: 'n', proposalA: a, proposalB: b, intensity: '' }, c);
          const call = performance.now() - t0; // what the call itself held, before it returned its promise
          verdict = await answer;
          total = performance.now() - t0;
          await new Promise((resolve) => setTimeout(resolve, 5)); // the monitor's timer runs once more, recording any hold
          delay.disable();
          runs.push(Math.max(call, delay.max / 1e6));
        }
        assert.deepEqual(verdict, scoreDebateSame(verdict, a, b), name);
        const ms = [...runs].sort((x, y) => x - y)[2];
        console.log(
          `      ${name} (${a.length} bytes): event loop held ${ms.toFixed(1)} ms (median; ${runs.map((x) => x.toFixed(0)).join(', ')}), answered in ${total.toFixed(0)} ms: ${verdict.notes.slice(BUILT_IN_NOTE.length, BUILT_IN_NOTE.length + 50)}`,
        );
        if (ms > 50) worst.push(`${name}: ${ms.toFixed(1)} ms`);
      }
    } finally {
      engine.dispose();
      router.dispose();
    }
    assert.deepEqual(worst, [], 'scores over 50 ms');
  });
});
