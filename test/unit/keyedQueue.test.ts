import { strict as assert } from 'node:assert';
import { KeyedQueue } from '../../src/core/keyedQueue';

/** A promise with its resolve and reject at hand. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (err: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('KeyedQueue (one operation at a time per key)', () => {
  it('runs the operations of one key in order, one at a time, and those of other keys beside them', async () => {
    const queue = new KeyedQueue();
    const log: string[] = [];
    const first = deferred();
    const a1 = queue.run('a', async () => {
      log.push('a1 start');
      await first.promise;
      log.push('a1 end');
      return 1;
    });
    const a2 = queue.run('a', async () => {
      log.push('a2');
      return 2;
    });
    const b1 = queue.run('b', async () => {
      log.push('b1');
      return 3;
    });
    assert.equal(await b1, 3);
    assert.deepEqual(log, ['a1 start', 'b1'], 'b runs while a1 waits; a2 waits for a1');
    first.resolve();
    assert.deepEqual([await a1, await a2], [1, 2]);
    assert.deepEqual(log, ['a1 start', 'b1', 'a1 end', 'a2']);
  });

  it('a failing operation rejects its own caller and does not stop the next one', async () => {
    const queue = new KeyedQueue();
    const failed = queue.run('a', async () => {
      throw new Error('boom');
    });
    const next = queue.run('a', async () => 'ran');
    await assert.rejects(failed, /boom/);
    assert.equal(await next, 'ran');
  });

  it('forgets a key once its queue is empty', async () => {
    const queue = new KeyedQueue();
    const gate = deferred();
    const running = queue.run('a', () => gate.promise);
    assert.equal(queue.size, 1);
    gate.resolve();
    await running;
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(queue.size, 0);
  });
});
