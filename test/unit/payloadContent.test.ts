import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import { MAX_JSON_DEPTH } from '../../src/core/json';
import { PayloadChecker, payloadWorkerScript } from '../../src/core/router/payloadChecker';
import { contentRefusal } from '../../src/core/router/payloadContent';

const base = 'application/json';
const utf8 = (text: string) => Buffer.from(text, 'utf8');

/** A small deterministic generator (xorshift), so that a failure names a reproducible case. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return ((x >>> 0) % 1_000_000) / 1_000_000;
  };
}

/** JSON-ish texts: valid documents, then each mutated by one insertion, deletion or replacement of a JSON character. */
function corpus(count: number): string[] {
  const next = random(42);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)];
  const value = (depth: number): string => {
    const kind = depth > 4 ? pick(['n', 's', 'l']) : pick(['n', 's', 'l', 'o', 'a']);
    if (kind === 'n') return pick(['0', '-1', '12.5e3', '1E-2', '-0.0', '42']);
    if (kind === 's') return pick(['"a"', '""', '"\\u00e9\\n"', '"é"', '"\\\\"', '"tab\\t"']);
    if (kind === 'l') return pick(['true', 'false', 'null']);
    const n = Math.floor(next() * 4);
    const items = Array.from({ length: n }, () =>
      kind === 'o' ? `${pick(['"k"', '"x y"', '""'])}:${value(depth + 1)}` : value(depth + 1),
    );
    return kind === 'o' ? `{${items.join(',')}}` : `[${items.join(', ')}]`;
  };
  const texts: string[] = [];
  const noise = ['{', '}', '[', ']', ',', ':', '"', '\\', ' ', '0', '.', '-', 'e', 't', '\u0001', '/', '*', 'x'];
  for (let i = 0; i < count; i++) {
    const text = value(0);
    texts.push(text);
    const at = Math.floor(next() * (text.length + 1));
    const op = pick(['insert', 'delete', 'replace']);
    const char = pick(noise);
    texts.push(
      op === 'insert'
        ? text.slice(0, at) + char + text.slice(at)
        : op === 'delete'
          ? text.slice(0, at) + text.slice(at + 1)
          : text.slice(0, at) + char + text.slice(at + 1),
    );
  }
  return texts;
}

describe('rule 5 off the event loop: the strict scan and the worker', () => {
  it('judges every text of a generated corpus as JSON.parse does (valid or not)', () => {
    let invalid = 0;
    for (const text of corpus(1500)) {
      const parse = contentRefusal('json', utf8(text), base, 'parse') === undefined;
      const scan = contentRefusal('json', utf8(text), base, 'scan') === undefined;
      assert.equal(
        scan,
        parse,
        `JSON.parse says ${parse ? 'valid' : 'invalid'}, the scan ${scan ? 'valid' : 'invalid'}: ${JSON.stringify(text)}`,
      );
      if (!parse) invalid++;
    }
    assert.ok(invalid > 300, `the corpus has invalid texts too (${invalid})`);
  });

  it('refuses comments, trailing commas, empty content, invalid UTF-8 and depth beyond the limit, as JSON.parse would', () => {
    for (const bad of [
      '{"a":1,}',
      '[1,]',
      '// c\n{}',
      '/* c */ 1',
      '',
      '   ',
      '{"a":1}x',
      `${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}`,
    ]) {
      assert.match(
        contentRefusal('json', utf8(bad), base, 'scan') ?? 'accepted',
        /not valid JSON|nests deeper/,
        JSON.stringify(bad),
      );
    }
    assert.match(contentRefusal('json', Buffer.from([0x7b, 0xff, 0x7d]), base, 'scan') ?? '', /not UTF-8/);
    assert.equal(
      contentRefusal('json', utf8(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`), base, 'scan'),
      undefined,
    );
  });

  it('checks text payloads for UTF-8', () => {
    assert.equal(contentRefusal('text', utf8('héllo'), 'text/plain', 'scan'), undefined);
    assert.equal(
      contentRefusal('text', Buffer.from([0x61, 0xc3]), 'text/plain', 'scan'),
      'text payloads must be UTF-8',
    );
  });

  it('checks UTF-8 on the bytes exactly as a fatal TextDecoder does (overlong forms, surrogates, beyond U+10FFFF, BOM)', () => {
    const decoder = new TextDecoder('utf-8', { fatal: true });
    const cases = [
      [0xef, 0xbb, 0xbf, 0x61],
      [0xc0, 0xaf],
      [0xe0, 0x80, 0xaf],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
      [0xf0, 0x9f, 0x98, 0x80],
      [0xe2, 0x82],
      [0x80],
      [0xff],
      [],
    ];
    for (const bytes of cases) {
      let valid = true;
      try {
        decoder.decode(Uint8Array.from(bytes));
      } catch {
        valid = false;
      }
      assert.equal(
        contentRefusal('text', Uint8Array.from(bytes), 'text/plain', 'scan') === undefined,
        valid,
        JSON.stringify(bytes),
      );
    }
  });

  describe('PayloadChecker (a real worker thread)', () => {
    // The compiled worker sits beside the compiled checker (out/src/core/router/), as dist/payloadWorker.js does beside the bundles.
    const script = payloadWorkerScript(path.resolve(__dirname, '../../src/core/router'));
    let checker: PayloadChecker;
    before(() => assert.ok(script, 'payloadWorker.js is compiled beside payloadChecker.js'));
    beforeEach(() => {
      checker = new PayloadChecker(script!);
    });
    afterEach(() => checker.dispose());

    it('answers in order, valid and invalid, while the event loop stays free', async () => {
      const text = JSON.stringify({ items: Array.from({ length: 200_000 }, (_, i) => ({ i, s: 'abcdefgh' })) });
      const big = new Uint8Array(utf8(text));
      const expectedSize = big.byteLength;
      const broken = Buffer.concat([Buffer.from(text.slice(0, -1)), utf8(',')]);
      let ticks = 0;
      const timer = setInterval(() => {
        ticks++;
      }, 1);
      const answers = await Promise.all([
        checker.check('json', base, big),
        checker.check('json', base, broken),
        checker.check('text', 'text/plain', utf8('ok')),
      ]);
      clearInterval(timer);
      assert.equal(answers[0].refusal, undefined);
      assert.match(answers[1].refusal ?? '', /not valid JSON for content_type application\/json/);
      assert.equal(answers[2].refusal, undefined);
      assert.equal(big.byteLength, 0, "the large payload's memory went to the worker (transferred, not copied)");
      assert.equal(answers[0].payload.byteLength, expectedSize, 'and came back whole');
      assert.equal(Buffer.from(answers[0].payload).subarray(0, 10).toString(), '{"items":[');
      assert.ok(ticks > 0, 'timers ran while the worker validated');
      assert.equal(checker.busy, 0);
    });

    it('fails what it had when the worker dies, and starts a new one for the next payload', async () => {
      const pending = checker.check('json', base, utf8('{}'));
      (checker as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
      await assert.rejects(pending, /the payload worker stopped/);
      assert.equal((await checker.check('json', base, utf8('[1]'))).refusal, undefined);
    });

    it('refuses new work once disposed', async () => {
      checker.dispose();
      await assert.rejects(checker.check('json', base, utf8('{}')), /stopped/);
    });
  });
});
