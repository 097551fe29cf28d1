import { strict as assert } from 'node:assert';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { CoordinatorApiError } from '../../src/core/api';
import { RemoteConnection, RemoteServer } from '../../src/core/api/remote';
import { Emitter } from '../../src/core/events';

/** What crosses the port, seen from the served side. */
function recording(port: MessagePort): unknown[] {
  const seen: unknown[] = [];
  port.on('message', (value) => seen.push(value));
  return seen;
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('the CoordinatorApi across threads (core/api/remote): one generic proxy over a MessagePort', () => {
  let channel: MessageChannel;
  let server: RemoteServer;
  let connection: RemoteConnection;
  const changed = new Emitter<{ id: string }>();
  const inbox = new Emitter<{ agentId: string }>();
  const effects: string[] = [];
  const served = {
    record(what: string) {
      effects.push(what);
      changed.fire({ id: what });
      return Promise.resolve(`recorded ${what}`);
    },
    now: (n: number) => n * 2,
    refuse() {
      throw new CoordinatorApiError('refused', 'the worktree is dirty', 'dirty');
    },
    fail: () => Promise.reject(Object.assign(new Error('the disk is full'), { name: 'StoreFailedError', errno: 28 })),
    unclonable: () => ({ run: () => 1 }),
    dispose() {
      effects.push('disposed');
    },
    onDidChange: changed.event,
    onDidChangeInbox: inbox.event,
  };
  type Served = typeof served;

  beforeEach(() => {
    effects.length = 0;
    channel = new MessageChannel();
    server = new RemoteServer(channel.port1, new Set(['onDidChangeInbox']));
    server.add('api', served);
    connection = new RemoteConnection(channel.port2);
  });
  afterEach(() => {
    connection.close();
    server.dispose();
    channel.port1.close();
    channel.port2.close();
  });

  it('calls methods by name, in order: the order of calls is the order of effects', async () => {
    const api = connection.remote<Served>('api');
    const answers = await Promise.all(['a', 'b', 'c'].map((what) => api.record(what)));
    assert.deepEqual(answers, ['recorded a', 'recorded b', 'recorded c']);
    assert.deepEqual(effects, ['a', 'b', 'c']);
    assert.equal(await api.now(21), 42, 'a plain (not async) method answers a Promise all the same');
    assert.equal((api as unknown as { then?: unknown }).then, undefined, 'the proxy is not a thenable');
  });

  it('rebuilds a CoordinatorApiError with its code and SW4RM code; other errors keep their name and fields', async () => {
    const api = connection.remote<Served>('api');
    await assert.rejects(api.refuse(), (err: unknown) => {
      assert.ok(err instanceof CoordinatorApiError);
      assert.equal(err.code, 'refused');
      assert.equal(err.sw4rmCode, 'dirty');
      assert.equal(err.message, 'the worktree is dirty');
      return true;
    });
    await assert.rejects(api.fail(), (err: Error & { errno?: number }) => {
      assert.equal(err.name, 'StoreFailedError');
      assert.equal(err.message, 'the disk is full');
      assert.equal(err.errno, 28);
      return true;
    });
  });

  it('answers an answer that cannot cross, an unknown method and `dispose` with an error, never silence', async () => {
    const api = connection.remote<Served>('api');
    await assert.rejects(api.unclonable() as unknown as Promise<unknown>, /could not be sent/);
    await assert.rejects((api as unknown as { nothing(): Promise<void> }).nothing(), /not something/);
    await assert.rejects(api.dispose() as unknown as Promise<void>, /not something/);
    assert.deepEqual(effects, [], 'the served object was not disposed from the other side');
  });

  it('subscribes while a listener listens, and delivers the events a call caused before its answer', async () => {
    const seen = recording(channel.port1);
    const api = connection.remote<Served>('api');
    const order: string[] = [];
    const subscription = api.onDidChange((event) => order.push(`event ${event.id}`));
    await api.record('x').then((answer) => order.push(answer));
    assert.deepEqual(order, ['event x', 'recorded x']);
    subscription.dispose();
    await api.record('y');
    assert.deepEqual(order, ['event x', 'recorded x'], 'no event after the last listener left');
    const kinds = seen.map((m) => (m as { t: string }).t);
    assert.deepEqual(
      kinds.filter((t) => t !== 'call'),
      ['sub', 'unsub'],
    );
  });

  it('posts a turn of events together, and coalesces repeats of the events that only say "changed"', async () => {
    const api = connection.remote<Served>('api');
    const changes: string[] = [];
    const inboxes: string[] = [];
    api.onDidChange((event) => changes.push(event.id));
    api.onDidChangeInbox((event) => inboxes.push(event.agentId));
    await api.now(1); // the subscriptions are in place once a later call was answered
    const replies = recording(channel.port2);
    for (let i = 0; i < 100; i++) {
      changed.fire({ id: String(i) });
      inbox.fire({ agentId: i % 2 ? 'a' : 'b' });
    }
    await turn();
    await turn();
    assert.equal(changes.length, 100, 'every event of an ordinary kind arrives');
    assert.deepEqual(inboxes, ['b', 'a'], 'a repeated inbox change arrives once per batch');
    assert.equal(replies.length, 1, 'one message for the whole turn');
  });

  it('passes a burst of events on in slices: the receiving thread is never held for the whole burst', async () => {
    const api = connection.remote<Served>('api');
    let received = 0;
    api.onDidChange(() => {
      received++;
      const until = performance.now() + 0.05;
      while (performance.now() < until);
    });
    await api.now(1);
    for (let i = 0; i < 2_000; i++) changed.fire({ id: String(i) });
    // The batch arrives as one message; 2,000 listeners of 0.05 ms are 100 ms of work.
    await new Promise<void>((resolve) => channel.port2.once('message', () => resolve()));
    let seenBetween: number | undefined;
    setImmediate(() => (seenBetween = received));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(received, 2_000);
    assert.ok(
      seenBetween !== undefined && seenBetween > 0 && seenBetween < 2_000,
      `other work ran while the burst was passed on (it had ${seenBetween} of 2,000)`,
    );
  });

  it('after close, pending and later calls reject `stopped` and no event fires', async () => {
    const api = connection.remote<Served>('api');
    const events: string[] = [];
    api.onDidChange((event) => events.push(event.id));
    const pending = api.record('late');
    connection.close();
    await assert.rejects(pending, (err: unknown) => err instanceof CoordinatorApiError && err.code === 'stopped');
    await assert.rejects(
      api.now(1) as unknown as Promise<number>,
      (err: unknown) => err instanceof CoordinatorApiError && err.code === 'stopped',
    );
    await turn();
    await turn();
    assert.deepEqual(events, []);
  });
});
