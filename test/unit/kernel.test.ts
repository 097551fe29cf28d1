import { strict as assert } from 'node:assert';
import type { SchemaStep } from '../../src/core/store/schema';
import { SqliteStore } from '../../src/core/store/sqliteStore';
import { ManualClock } from '../../src/core/clock';
import { Guard } from '../../src/core/kernel/guard';
import { KeyedTimers } from '../../src/core/kernel/timers';
import { CommitEmitter, TransactionEmitter, Transitions, type Transition } from '../../src/core/kernel/transitions';
import { classify, CoreError } from '../../src/core/kernel/errors';
import { makeTempDir, removeTempDir } from '../support/tempDir';

const ROWS: SchemaStep[] = [
  {
    version: 1,
    area: 'test',
    description: 'rows',
    statements: ['CREATE TABLE rows (id INTEGER PRIMARY KEY, text TEXT NOT NULL)'],
  },
];

describe('the transition kernel', () => {
  let dir: string;
  let store: SqliteStore;
  let faults: Array<[string, string]>;
  let guard: Guard;
  let kernel: Transitions;
  const rows = () =>
    (store.database.prepare('SELECT text FROM rows ORDER BY id').all() as Array<{ text: string }>).map((r) => r.text);
  const insert = (text: string) => store.database.prepare('INSERT INTO rows (text) VALUES (?)').run(text);

  beforeEach(() => {
    dir = makeTempDir();
    store = SqliteStore.open(dir, { schema: ROWS, markIntervalMs: 0 });
    faults = [];
    guard = new Guard((context, err) => faults.push([context, (err as Error).message]));
    kernel = new Transitions(store, guard);
  });
  afterEach(() => {
    store.close();
    removeTempDir(dir);
  });

  it('installs memory, arms timers, runs after-work and tells listeners only once the body returned, in that order', () => {
    const clock = new ManualClock();
    const timers = new KeyedTimers<string>(clock, guard);
    const changed = new CommitEmitter<string>();
    const seen: string[] = [];
    changed.event((v) => seen.push(`notify ${v} (timer armed: ${timers.has('t')})`));
    let memory = 'old';
    kernel.run((tx) => {
      insert('a');
      tx.notify(changed, 'a');
      tx.after(() => seen.push(`after (memory ${memory})`));
      tx.arm(timers, 't', 1000, () => seen.push('timer'));
      tx.install(() => {
        memory = 'new';
        seen.push('install');
      });
      seen.push(`body (memory ${memory}, timer armed: ${timers.has('t')})`);
    });
    assert.deepEqual(seen, [
      'body (memory old, timer armed: false)',
      'install',
      'after (memory new)',
      'notify a (timer armed: true)',
    ]);
    assert.deepEqual(rows(), ['a']);
    clock.advance(1000);
    assert.equal(seen.at(-1), 'timer');
  });

  it('on a throw, rolls the writes back and none of the effects happen', () => {
    const clock = new ManualClock();
    const timers = new KeyedTimers<string>(clock, guard);
    timers.arm('kept', 10, () => undefined);
    const changed = new CommitEmitter<string>();
    const seen: string[] = [];
    changed.event((v) => seen.push(v));
    assert.throws(
      () =>
        kernel.run((tx) => {
          insert('a');
          tx.install(() => seen.push('install'));
          tx.notify(changed, 'a');
          tx.disarm(timers, 'kept');
          tx.whenDurable(() => seen.push('durable'));
          throw new Error('refused');
        }),
      /refused/,
    );
    assert.equal(rows().length, 0);
    assert.equal(seen.length, 0);
    assert.ok(timers.has('kept'));
  });

  it('a nested run that throws undoes only its own writes and effects; the outer goes on and commits', () => {
    const seen: string[] = [];
    kernel.run((tx) => {
      insert('outer');
      tx.install(() => seen.push('outer'));
      assert.throws(() =>
        kernel.run((inner) => {
          insert('inner');
          inner.install(() => seen.push('inner'));
          throw new Error('inner refused');
        }),
      );
      kernel.run((inner) => {
        insert('second');
        inner.install(() => seen.push('second'));
      });
      assert.equal(seen.length, 0, 'nothing installed before the outer commit');
    });
    assert.deepEqual(rows(), ['outer', 'second']);
    assert.deepEqual(seen, ['outer', 'second']);
  });

  it('a fault in one effect is reported with its context and the others still run', () => {
    const seen: string[] = [];
    kernel.run((tx) => {
      tx.install(() => {
        throw new Error('broken install');
      });
      tx.install(() => seen.push('second install'));
      tx.after(() => seen.push('after'));
    }, 'request r1');
    assert.deepEqual(seen, ['second install', 'after']);
    assert.deepEqual(faults, [['request r1', 'broken install']]);
  });

  it('work for when it is durable waits for the group commit', async () => {
    store.close();
    store = SqliteStore.open(dir, { schema: ROWS, markIntervalMs: 0, groupCommit: true });
    kernel = new Transitions(store, guard);
    const seen: string[] = [];
    kernel.run((tx) => {
      insert('a');
      tx.install(() => seen.push('install'));
      tx.whenDurable(() => seen.push('durable'));
    });
    assert.deepEqual(seen, ['install']);
    await store.whenDurable();
    assert.deepEqual(seen, ['install', 'durable']);
  });

  it('in-transaction listeners write inside the transition and roll back with it', () => {
    const touched = new TransactionEmitter<string>();
    const seen: string[] = [];
    touched.event((v, tx: Transition) => {
      insert(`listener ${v}`);
      tx.install(() => seen.push(`listener ${v}`));
    });
    kernel.run((tx) => {
      insert('a');
      touched.fire('a', tx);
    });
    assert.throws(() =>
      kernel.run((tx) => {
        touched.fire('b', tx);
        throw new Error('no');
      }),
    );
    assert.deepEqual(rows(), ['a', 'listener a']);
    assert.deepEqual(seen, ['listener a']);
  });
});

describe('keyed timers', () => {
  it('replace by key, leave the map before they run, report a fault with their key, and do nothing once the guard stopped', () => {
    const clock = new ManualClock();
    const faults: string[] = [];
    const guard = new Guard((context, err) => faults.push(`${context}: ${(err as Error).message}`));
    const timers = new KeyedTimers<number>(clock, guard, (k) => `task ${k}`);
    const fired: string[] = [];
    timers.arm(1, 100, () => fired.push('first'));
    timers.arm(1, 200, () => fired.push(`second (still armed: ${timers.has(1)})`));
    timers.arm(2, 50, () => {
      throw new Error('boom');
    });
    clock.advance(150);
    assert.equal(fired.length, 0);
    assert.deepEqual(faults, ['task 2: boom']);
    clock.advance(100);
    assert.deepEqual(fired, ['second (still armed: false)']);
    timers.arm(3, 10, () => fired.push('after stop'));
    guard.stop();
    clock.advance(10);
    assert.equal(fired.length, 1);
    assert.equal(timers.size, 0);
  });
});

describe('the core error type', () => {
  it('classifies a CoreError by its kind and code, anything else as an internal fault', () => {
    assert.deepEqual(classify(new CoreError('permission', 'PERMISSION_DENIED', 'no')), {
      kind: 'permission',
      code: 'PERMISSION_DENIED',
      message: 'no',
    });
    assert.deepEqual(classify(new TypeError('x')), { kind: 'internal', code: 'INTERNAL_ERROR', message: 'x' });
  });
});
