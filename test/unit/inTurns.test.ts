import { strict as assert } from 'node:assert';
import { TURN_MS, byteOrder, sortInTurns } from '../../src/core/inTurns';
import { describeHold, heldMs, measureHold } from '../support/loopHold';
import { prng } from '../support/prng';

const bufferOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/** Sorting agent-sized lists in turns (issue 30, item 1) and git's byte order without encoding. */
describe('inTurns: sortInTurns and byteOrder', function () {
  this.timeout(60_000);

  it('byteOrder answers what comparing the UTF-8 bytes answers, beyond the BMP and around U+E000–U+FFFF too', () => {
    const random = prng(30);
    const alphabet = [
      'a',
      'b',
      '/',
      '.',
      'é',
      '\u00ff',
      '\u0800',
      '\ud7ff',
      '\ue000',
      '\uff21',
      '\uffff',
      '\u{10000}',
      '\u{1F600}',
      '\u{10FFFF}',
    ];
    const word = () =>
      Array.from({ length: 1 + Math.floor(random() * 4) }, () => alphabet[Math.floor(random() * alphabet.length)]).join(
        '',
      );
    for (let k = 0; k < 20_000; k++) {
      const a = word();
      const b = random() < 0.3 ? a + word() : word();
      assert.equal(
        Math.sign(byteOrder(a, b)),
        Math.sign(bufferOrder(a, b)),
        `${JSON.stringify(a)} vs ${JSON.stringify(b)}`,
      );
      assert.equal(Math.sign(byteOrder(b, a)), Math.sign(bufferOrder(b, a)));
    }
  });

  it('sortInTurns sorts as Array.prototype.sort does (stable), small and large', async () => {
    const random = prng(7);
    for (const n of [0, 1, 5, 2048, 2049, 10_000, 65_537]) {
      const items = Array.from({ length: n }, (_, i) => ({ key: Math.floor(random() * 500), i }));
      const expected = [...items].sort((a, b) => a.key - b.key);
      assert.deepEqual(await sortInTurns(items, (a, b) => a.key - b.key), expected, `n = ${n}`);
    }
  });

  it('sorts 200,000 paths by bytes holding the event loop at most 50 ms (one Array.prototype.sort with Buffers: ≈ 1.8 s)', async () => {
    const paths = Array.from(
      { length: 200_000 },
      (_, i) => `src/dir${i % 97}/sub${i % 13}/file-${(i * 7919) % 200_000}${i % 11 === 0 ? '\u{1F600}' : ''}.txt`,
    );
    const { value: sorted, hold } = await measureHold(() => sortInTurns(paths, byteOrder));
    console.log(
      `      200,000 paths sorted by bytes in ${hold.ms.toFixed(0)} ms, turns of ${TURN_MS} ms: ${describeHold(hold)}`,
    );
    for (let i = 1; i < sorted.length; i++) assert.ok(bufferOrder(sorted[i - 1], sorted[i]) <= 0, `at ${i}`);
    assert.ok(heldMs(hold) <= 50, describeHold(hold));
  });
});
