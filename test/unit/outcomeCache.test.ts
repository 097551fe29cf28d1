import { strict as assert } from 'node:assert';
import type { DedupEntry } from '../../src/core/router/model';
import { OutcomeCache } from '../../src/core/router/outcomeCache';

function entry(key: string, status: DedupEntry['status'], expiresAt = 10_000): DedupEntry {
  return {
    producerId: 'p',
    key,
    originalMessageId: `m-${key}`,
    latestMessageId: `m-${key}`,
    attempts: [`m-${key}`],
    status,
    outcomeState: status === 'done' ? 'FULFILLED' : '',
    errorCode: '',
    result: null,
    cachedAt: 0,
    expiresAt,
  };
}

describe('OutcomeCache (the in-memory side of the outcome cache)', () => {
  it('keeps every operation under way and at most `limit` settled outcomes, evicting the oldest settled first', () => {
    const cache = new OutcomeCache(2);
    for (let i = 0; i < 5; i++) cache.set(entry(`w${i}`, 'in_progress'));
    for (const key of ['a', 'b', 'c']) cache.set(entry(key, 'done'));
    assert.equal(cache.size, 7);
    for (let i = 0; i < 5; i++) assert.ok(cache.get(OutcomeCache.key('p', `w${i}`)), `w${i} is under way`);
    assert.equal(cache.get(OutcomeCache.key('p', 'a')), undefined, 'the oldest settled outcome left memory');
    assert.ok(cache.get(OutcomeCache.key('p', 'b')));
    assert.ok(cache.get(OutcomeCache.key('p', 'c')));
  });

  it('moves an entry between under way and settled as its status changes, and prunes only expired settled ones', () => {
    const cache = new OutcomeCache(10);
    cache.set(entry('x', 'in_progress', 5));
    cache.set(entry('y', 'done', 5));
    cache.prune(100);
    assert.ok(cache.get(OutcomeCache.key('p', 'x')), 'an operation under way is never pruned');
    assert.equal(cache.get(OutcomeCache.key('p', 'y')), undefined);
    cache.set(entry('x', 'done', 5));
    assert.equal(cache.size, 1);
    cache.prune(100);
    assert.equal(cache.size, 0);
  });
});
