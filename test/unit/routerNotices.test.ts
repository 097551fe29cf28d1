import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '../../src/core/clock';
import { Coordinator } from '../../src/core/coordinator';
import { CoordinatorStore } from '../../src/core/coordinatorStore';
import { MAX_NOTICE_BYTES, noticePayloads } from '../../src/core/router/coordinatorMessages';
import { COORDINATOR_ID } from '../../src/core/router/router';
import { validDescriptor } from '../support/fixtures';
import { CollectingSink, RouterHarness, ctx, json } from '../support/routerHarness';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/** A coordinator on a real store with group commit, as the server runs it (the harness runs without). */
class GroupCommitCoordinator {
  readonly dataDir = makeTempDir('sw4rm-notices-');
  readonly store = CoordinatorStore.open(this.dataDir, { groupCommit: true });
  readonly clock = new ManualClock();
  readonly coordinator = new Coordinator({ store: this.store, clock: this.clock, router: { heartbeatIntervalMs: 0 } });
  readonly sinks = new Map<string, CollectingSink>();

  register(agentId: string, name = `Agent ${agentId}`): void {
    const result = this.coordinator.registry.register(validDescriptor(agentId, { name }), ctx(`register-${agentId}`));
    assert.equal(result.accepted, true, result.reason);
  }

  stream(agentId: string): CollectingSink {
    const sink = new CollectingSink();
    this.coordinator.router.attach(agentId, sink, ctx(`stream-${agentId}`));
    this.sinks.set(agentId, sink);
    return sink;
  }

  /** Until the notices of this turn reached the streams: their commit, then the commit of their deliveries. */
  async settled(): Promise<void> {
    for (let i = 0; i < 3; i++) {
      await this.store.whenDurable();
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  dispose(): void {
    try {
      this.coordinator.dispose();
    } finally {
      removeTempDir(this.dataDir);
    }
  }
}

type Change = Record<string, unknown>;

/** The join/leave changes a sink received, in order, whether alone or listed in an `agents.changed` notice. */
function changesOn(sink: CollectingSink): Change[] {
  return sink.ofType('NOTIFICATION').flatMap((item) => {
    const payload = json(item.envelope);
    return payload.event === 'agents.changed' ? (payload.changes as Change[]) : [payload];
  });
}

function cpuMs(fn: () => Promise<void> | void): Promise<number> {
  const start = process.cpuUsage();
  return Promise.resolve(fn()).then(() => {
    const used = process.cpuUsage(start);
    return (used.user + used.system) / 1000;
  });
}

describe('Router join/leave notices (RFC §14; hardening item 8)', () => {
  describe('with group commit', () => {
    let g: GroupCommitCoordinator;

    beforeEach(() => {
      g = new GroupCommitCoordinator();
    });
    afterEach(() => g.dispose());

    it('100 joins with 1,000 streaming agents: one NOTIFICATION per agent, payload bytes shared, every join once and in order', async function () {
      this.timeout(60_000);
      const agents = Array.from({ length: 1_000 }, (_, i) => `agent-${i}`);
      for (const id of agents) g.register(id);
      await g.settled();
      for (const id of agents) g.stream(id);
      await g.settled();
      const joiners = Array.from({ length: 100 }, (_, i) => `joiner-${i}`);
      const ms = await cpuMs(async () => {
        for (const id of joiners) g.register(id);
        await g.settled();
      });
      const notices = agents.flatMap((id) => g.sinks.get(id)!.ofType('NOTIFICATION'));
      const payloads = new Set(notices.map((n) => n.envelope.payload));
      console.log(
        `      100 joins, 1,000 streaming agents: ${ms.toFixed(0)} ms CPU, ${notices.length} NOTIFICATION envelopes, ${payloads.size} payload buffers`,
      );
      const expected = joiners.map((id) => ({ event: 'agent.joined', agent_id: id, name: `Agent ${id}` }));
      for (const id of agents)
        assert.deepEqual(changesOn(g.sinks.get(id)!), expected, `${id} sees every join once, in order`);
      assert.ok(notices.length <= 2 * agents.length, `a generous bound on envelopes: ${notices.length}`);
      assert.ok(payloads.size <= 4, `payload bytes are built once and shared: ${payloads.size} distinct buffers`);
      assert.ok(
        new Set(notices.map((n) => n.envelope.messageId)).size === notices.length,
        'each envelope has its own message_id',
      );
      assert.ok(
        notices.every((n) => n.envelope.producerId === COORDINATOR_ID && n.envelope.messageType === 'NOTIFICATION'),
      );
    });

    it('keeps order within a batch: a join then a leave of the same agent; never tells an agent about itself; skips agents not streaming', async () => {
      g.register('watcher');
      g.register('idle'); // registered, never streams
      g.register('leaver');
      await g.settled();
      const watcher = g.stream('watcher');
      const leaver = g.stream('leaver');
      await g.settled();
      watcher.clear();
      leaver.clear();

      g.register('blip');
      g.register('fresh');
      const fresh = g.stream('fresh'); // joins and streams in the same turn
      assert.ok(g.coordinator.registry.deregister('blip', 'done', ctx()));
      assert.ok(g.coordinator.registry.deregister('leaver', 'finished', ctx()));
      await g.settled();

      assert.deepEqual(changesOn(watcher), [
        { event: 'agent.joined', agent_id: 'blip', name: 'Agent blip' },
        { event: 'agent.joined', agent_id: 'fresh', name: 'Agent fresh' },
        { event: 'agent.left', agent_id: 'blip', reason: 'done' },
        { event: 'agent.left', agent_id: 'leaver', reason: 'finished' },
      ]);
      assert.equal(watcher.ofType('NOTIFICATION').length, 1, 'one NOTIFICATION for the batch');
      assert.deepEqual(
        changesOn(fresh),
        [
          { event: 'agent.joined', agent_id: 'blip', name: 'Agent blip' },
          { event: 'agent.left', agent_id: 'blip', reason: 'done' },
          { event: 'agent.left', agent_id: 'leaver', reason: 'finished' },
        ],
        'an agent that joins in the batch is not told about itself',
      );
      assert.deepEqual(changesOn(leaver), [], "the leaver's stream closed before the notices went out");
      assert.deepEqual(
        leaver.closes.map((c) => c.reason),
        ['deregistered'],
      );
      assert.equal(g.coordinator.router.inboxStats('idle').streaming, false);

      // The leave of an agent whose stream had closed still reaches the others, in a notice of today's shape.
      watcher.clear();
      assert.ok(g.coordinator.registry.deregister('fresh', 'bye', ctx()));
      await g.settled();
      assert.deepEqual(
        watcher.ofType('NOTIFICATION').map((n) => json(n.envelope)),
        [{ event: 'agent.left', agent_id: 'fresh', reason: 'bye' }],
        "a single change keeps today's payload",
      );
      assert.ok(strictlyIncreasing(watcher.seqs));
    });

    it('lets an agent acknowledge a batched notice', async () => {
      g.register('watcher');
      await g.settled();
      const watcher = g.stream('watcher');
      g.register('a');
      g.register('b');
      await g.settled();
      const [notice] = watcher.ofType('NOTIFICATION');
      assert.equal(json(notice.envelope).event, 'agents.changed');
      const ack = Buffer.from(JSON.stringify({ ack_for_message_id: notice.envelope.messageId, ack_stage: 'RECEIVED' }));
      const result = g.coordinator.router.send(
        {
          messageId: randomUUID(),
          idempotencyToken: '',
          producerId: 'watcher',
          correlationId: randomUUID(),
          sequenceNumber: '1',
          retryCount: 0,
          messageType: 'ACKNOWLEDGEMENT',
          contentType: 'application/json',
          contentLength: String(ack.byteLength),
          repoId: '',
          worktreeId: '',
          hlcTimestamp: '',
          ttlMs: 0,
          timestampMs: g.clock.now(),
          payload: ack,
          parentCorrelationId: '',
        },
        ctx(),
      );
      assert.ok(result.accepted, result.accepted ? '' : result.reason);
    });
  });

  describe('without group commit (each change at once, as before)', () => {
    let h: RouterHarness;

    afterEach(() => h.dispose());

    it("sends each change as today's notice, at once, to every other streaming agent", () => {
      h = new RouterHarness();
      for (const id of ['a', 'b', 'c']) h.register(id);
      const a = h.stream('a').sink;
      const b = h.stream('b').sink;
      h.register('d');
      assert.ok(h.registry.deregister('b', 'gone', ctx()));
      assert.deepEqual(changesOn(a), [
        { event: 'agent.joined', agent_id: 'd', name: 'Agent d' },
        { event: 'agent.left', agent_id: 'b', reason: 'gone' },
      ]);
      assert.deepEqual(changesOn(b), [{ event: 'agent.joined', agent_id: 'd', name: 'Agent d' }]);
      assert.ok(a.ofType('NOTIFICATION').every((n) => json(n.envelope).event !== 'agents.changed'));
    });

    it('100 joins with 1,000 streaming agents (one commit per join): every join once, in order', async function () {
      this.timeout(60_000);
      h = new RouterHarness();
      const agents = Array.from({ length: 1_000 }, (_, i) => `agent-${i}`);
      for (const id of agents) h.register(id);
      const sinks = agents.map((id) => h.stream(id).sink);
      const joiners = Array.from({ length: 100 }, (_, i) => `joiner-${i}`);
      const ms = await cpuMs(() => {
        for (const id of joiners) h.register(id);
      });
      const notices = sinks.flatMap((s) => s.ofType('NOTIFICATION'));
      console.log(
        `      without group commit: ${ms.toFixed(0)} ms CPU, ${notices.length} NOTIFICATION envelopes, ${new Set(notices.map((n) => n.envelope.payload)).size} payload buffers`,
      );
      const expected = joiners.map((id) => ({ event: 'agent.joined', agent_id: id, name: `Agent ${id}` }));
      for (const sink of sinks) assert.deepEqual(changesOn(sink), expected);
      assert.ok(
        new Set(notices.map((n) => n.envelope.payload)).size <= joiners.length,
        'one payload build per change, shared',
      );
    });
  });

  describe('payloads', () => {
    const change = (i: number, name = `n${i}`) => ({
      agentId: `a${i}`,
      json: JSON.stringify({ event: 'agent.joined', agent_id: `a${i}`, name }),
    });

    it("keeps a single change in today's shape and lists several in one agents.changed notice", () => {
      assert.deepEqual(noticePayloads([]), []);
      assert.deepEqual(
        noticePayloads([change(1)]).map((b) => JSON.parse(Buffer.from(b).toString())),
        [{ event: 'agent.joined', agent_id: 'a1', name: 'n1' }],
      );
      assert.deepEqual(
        noticePayloads([change(1), change(2)]).map((b) => JSON.parse(Buffer.from(b).toString())),
        [
          {
            event: 'agents.changed',
            changes: [
              { event: 'agent.joined', agent_id: 'a1', name: 'n1' },
              { event: 'agent.joined', agent_id: 'a2', name: 'n2' },
            ],
          },
        ],
      );
    });

    it('splits a long list so that each payload stays under MAX_NOTICE_BYTES, in order', () => {
      const changes = Array.from({ length: 300 }, (_, i) => change(i, 'é'.repeat(200)));
      const payloads = noticePayloads(changes);
      assert.ok(payloads.length > 1);
      assert.ok(payloads.every((p) => p.byteLength <= MAX_NOTICE_BYTES && p.byteLength < 32 * 1024));
      const ids = payloads.flatMap((p) => {
        const payload = JSON.parse(Buffer.from(p).toString()) as Record<string, unknown>;
        return payload.event === 'agents.changed'
          ? (payload.changes as Change[]).map((c) => c.agent_id)
          : [payload.agent_id];
      });
      assert.deepEqual(
        ids,
        changes.map((c) => c.agentId),
      );
    });
  });
});

function strictlyIncreasing(seqs: number[]): boolean {
  return seqs.every((seq, i) => i === 0 || seq > seqs[i - 1]);
}
