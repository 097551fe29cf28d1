import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ManualClock } from '../../src/core/clock';
import { WorkerThread } from '../../src/core/workerThread';
import { pollUntil, settles } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** A worker as schemaWorker.ts / definitionWorker.ts are, whose jobs misbehave on request. */
const SCRIPT = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', (m) => {
  if (m.op === 'echo') parentPort.postMessage({ id: m.id, ok: true, value: m.value });
  else if (m.op === 'hang') { for (;;) {} }
  else if (m.op === 'silent') { /* takes the job and never answers */ }
  else if (m.op === 'exit') setTimeout(() => process.exit(m.code), 5);
  else if (m.op === 'throw') setTimeout(() => { throw new Error('boom in the job'); }, 5);
});
`;

type Request = { op: string; value?: unknown; code?: number };
type Answer = { ok: true; value: unknown } | { ok: false; why: string };

const TIMEOUT_MS = 20_000;

/**
 * WorkerThread (src/core/workerThread.ts), the worker helper of schemaThread.ts and definitionThread.ts: a job that
 * runs past its timeout (on the injected Clock: no test waits for it) or whose worker dies mid-job gets a clear
 * failed answer, never a rejection or a hang; the worker is ended (its thread gone), the jobs queued behind it are
 * answered by a new worker, and the next job works.
 */
describe('WorkerThread: timeouts and crashed workers', function () {
  this.timeout(20_000);
  let dir: string;
  let script: string;
  let clock: ManualClock;
  let thread: WorkerThread<Request, Answer>;

  beforeEach(() => {
    dir = makeTempDir('sw4rm-worker-thread-');
    script = path.join(dir, 'worker.js');
    fs.writeFileSync(script, SCRIPT);
    clock = new ManualClock();
    thread = new WorkerThread<Request, Answer>(script, (why) => ({ ok: false, why }), {
      timeoutMs: TIMEOUT_MS,
      maxOldGenerationSizeMb: 64,
      what: 'the test job',
      clock,
    });
  });

  afterEach(async () => {
    thread.dispose();
    await pollUntil('every worker thread to exit', () => (thread.threads === 0 ? true : undefined), 5_000);
    removeTempDir(dir);
  });

  /** Lets the event loop run (worker messages) without moving the Clock. */
  const turns = async (n = 20) => {
    for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  async function assertWorks(value: string): Promise<void> {
    assert.deepEqual(await settles(thread.run({ op: 'echo', value }), `the echo of ${value}`), { ok: true, value });
  }

  for (const op of ['hang', 'silent'] as const) {
    it(`a job that ${op === 'hang' ? 'holds the worker in a loop' : 'never answers'} is refused when timeoutMs has passed on the clock, not before; its worker is ended and the next job works`, async () => {
      await assertWorks('first');
      let answer: Answer | undefined;
      const job = thread.run({ op }).then((a) => {
        answer = a;
      });
      clock.advance(TIMEOUT_MS - 1);
      await turns();
      assert.equal(answer, undefined, 'still running 1 ms before the timeout');
      clock.advance(1);
      await settles(job, 'the refusal at the timeout');
      assert.deepEqual(answer, { ok: false, why: 'the test job took more than 20 s (refused)' });
      await pollUntil('the stalled worker thread to exit', () => (thread.threads === 0 ? true : undefined), 5_000);
      await assertWorks('after the timeout');
      assert.equal(thread.threads, 1, 'one new worker');
      assert.equal(clock.pendingTimers, 0, 'no timer left behind');
    });
  }

  it('a worker that exits or throws mid-job: that job gets a clear failed answer, the next job works on a new worker', async () => {
    const exited = await settles(thread.run({ op: 'exit', code: 7 }), 'the answer of a job whose worker exited');
    assert.deepEqual(exited, { ok: false, why: 'the test job stopped (exit code 7)' });
    await assertWorks('after the exit');
    const thrown = await settles(thread.run({ op: 'throw' }), 'the answer of a job whose worker threw');
    assert.equal(thrown.ok, false);
    assert.match((thrown as { why: string }).why, /^the test job failed \(.*boom in the job/);
    await assertWorks('after the exception');
    await pollUntil('the dead workers gone', () => (thread.threads === 1 ? true : undefined), 5_000);
    assert.equal(clock.pendingTimers, 0, 'no timer left behind');
  });

  it('the jobs queued behind a stalled or crashed one are answered by a new worker, each with its own timeout', async () => {
    const stalled = thread.run({ op: 'hang' });
    const behind = thread.run({ op: 'echo', value: 'queued behind the stalled one' });
    clock.advance(TIMEOUT_MS);
    assert.deepEqual(await settles(stalled, 'the stalled job'), {
      ok: false,
      why: 'the test job took more than 20 s (refused)',
    });
    assert.deepEqual(await settles(behind, 'the job queued behind it'), {
      ok: true,
      value: 'queued behind the stalled one',
    });

    const crashed = thread.run({ op: 'exit', code: 3 });
    const next = thread.run({ op: 'echo', value: 'queued behind the crash' });
    const silent = thread.run({ op: 'silent' });
    assert.deepEqual(await settles(crashed, 'the crashed job'), {
      ok: false,
      why: 'the test job stopped (exit code 3)',
    });
    assert.deepEqual(await settles(next, 'the job queued behind the crash'), {
      ok: true,
      value: 'queued behind the crash',
    });
    // The silent job's timeout runs from when the new worker took it.
    let answer: Answer | undefined;
    void silent.then((a) => {
      answer = a;
    });
    await turns();
    assert.equal(answer, undefined);
    clock.advance(TIMEOUT_MS);
    assert.deepEqual(await settles(silent, 'the silent job'), {
      ok: false,
      why: 'the test job took more than 20 s (refused)',
    });
    await assertWorks('after all of it');
  });

  it('a request that cannot be sent to the worker is answered failed; the worker goes on', async () => {
    await assertWorks('before');
    const refused = await settles(thread.run({ op: 'echo', value: () => 1 }), 'the uncloneable request');
    assert.equal(refused.ok, false);
    assert.match((refused as { why: string }).why, /^the test job failed \(/);
    await assertWorks('after');
    assert.equal(thread.threads, 1, 'the same worker');
  });

  it('dispose answers every pending job and ends the worker', async () => {
    const jobs = [thread.run({ op: 'silent' }), thread.run({ op: 'echo', value: 'x' })];
    await turns();
    thread.dispose();
    assert.deepEqual(await settles(Promise.all(jobs), 'the pending jobs'), [
      { ok: false, why: 'the coordinator is stopping' },
      { ok: false, why: 'the coordinator is stopping' },
    ]);
    await pollUntil('the worker thread to exit', () => (thread.threads === 0 ? true : undefined), 5_000);
  });
});
