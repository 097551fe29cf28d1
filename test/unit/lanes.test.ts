import { strict as assert } from 'node:assert';
import { ManualClock } from '../../src/core/clock';
import {
  DEFAULT_LANE_OPTIONS,
  LaneQueues,
  PrivilegedRateLimiter,
  type Lane,
  type LaneOptions,
} from '../../src/core/router/lanes';
import { RouterHarness, ctx } from '../support/routerHarness';

const WEIGHTS = { PRIVILEGED: 8, STANDARD: 4, BULK: 1 } as const;

function filled(
  counts: Readonly<Record<Lane, number>>,
  weights: Readonly<Record<Lane, number>> = WEIGHTS,
): LaneQueues<string> {
  const queues = new LaneQueues<string>(weights);
  for (const lane of ['PRIVILEGED', 'STANDARD', 'BULK'] as const) {
    for (let i = 0; i < counts[lane]; i++) queues.push(lane, `${lane[0]}${i}`);
  }
  return queues;
}

function drain<T>(queues: LaneQueues<T>, n = Infinity): Array<{ item: T; lane: Lane }> {
  const out: Array<{ item: T; lane: Lane }> = [];
  while (out.length < n) {
    const next = queues.shift();
    if (!next) break;
    out.push(next);
  }
  return out;
}

function pattern(served: Array<{ lane: Lane }>): string {
  return served.map((s) => s.lane[0]).join('');
}

describe('LaneQueues (RFC §7.3 weighted fair queuing)', () => {
  it('follows the weights when every lane is backlogged: 8 PRIVILEGED, 4 STANDARD, 1 BULK per round', () => {
    const queues = filled({ PRIVILEGED: 100, STANDARD: 100, BULK: 100 });
    const served = drain(queues, 26);
    assert.equal(pattern(served), 'PPPPPPPPSSSSB'.repeat(2));
  });

  it('never starves BULK: at least one BULK per round even under a flood of PRIVILEGED', () => {
    const queues = filled({ PRIVILEGED: 1_000, STANDARD: 0, BULK: 3 });
    const served = drain(queues, 30);
    assert.equal(pattern(served), 'PPPPPPPPB'.repeat(3) + 'PPP');
    // And while the flood keeps coming.
    const live = new LaneQueues<number>(WEIGHTS);
    live.push('BULK', -1);
    let bulkAt = -1;
    for (let i = 0; i < 50 && bulkAt < 0; i++) {
      live.push('PRIVILEGED', i);
      live.push('PRIVILEGED', i);
      if (live.shift()!.lane === 'BULK') bulkAt = i;
    }
    assert.ok(bulkAt >= 0 && bulkAt <= WEIGHTS.PRIVILEGED, `BULK served after ${bulkAt} PRIVILEGED`);
  });

  it('keeps order within a lane (FIFO) and serves PRIVILEGED first in a round', () => {
    const queues = filled({ PRIVILEGED: 2, STANDARD: 2, BULK: 2 });
    assert.deepEqual(
      drain(queues).map((s) => s.item),
      ['P0', 'P1', 'S0', 'S1', 'B0', 'B1'],
    );
  });

  it('gives an idle lane no credit to hoard, and a lane of weight 0 still one turn a round', () => {
    const queues = filled({ PRIVILEGED: 0, STANDARD: 10, BULK: 10 }, { PRIVILEGED: 8, STANDARD: 2, BULK: 0 });
    assert.equal(pattern(drain(queues, 7)), 'SSBSSBS');
    queues.push('PRIVILEGED', 'late');
    assert.equal(pattern(drain(queues, 3)), 'SBP', 'a lane that was idle when the round began joins the next round');
  });

  it('puts a repeated item back at the head of its lane, removes by predicate and reports size and items', () => {
    const queues = filled({ PRIVILEGED: 1, STANDARD: 3, BULK: 1 });
    assert.equal(queues.size, 5);
    assert.deepEqual(
      queues.remove((x) => x === 'S1'),
      ['S1'],
    );
    queues.unshift('STANDARD', 'again');
    assert.deepEqual(queues.items(), ['P0', 'again', 'S0', 'S2', 'B0']);
    assert.deepEqual(
      drain(queues).map((s) => s.item),
      ['P0', 'again', 'S0', 'S2', 'B0'],
    );
    assert.equal(queues.shift(), undefined);
    assert.equal(queues.size, 0);
  });
});

describe('PrivilegedRateLimiter (RFC §7.3, §23)', () => {
  const options: LaneOptions = { ...DEFAULT_LANE_OPTIONS, privilegedBurst: 3, privilegedRatePerSecond: 2 };

  it('admits a burst of PRIVILEGED, then demotes the overflow to STANDARD, and refills over time', () => {
    const clock = new ManualClock();
    const limiter = new PrivilegedRateLimiter(options);
    const admit = () => limiter.admit('boss', 'PRIVILEGED', clock.now());
    assert.deepEqual([admit(), admit(), admit()], Array(3).fill({ lane: 'PRIVILEGED', demoted: false }));
    assert.deepEqual(admit(), { lane: 'STANDARD', demoted: true });
    clock.advance(499);
    assert.deepEqual(admit(), { lane: 'STANDARD', demoted: true }, 'not yet a whole token');
    clock.advance(1);
    assert.deepEqual(admit(), { lane: 'PRIVILEGED', demoted: false }, 'two tokens a second: one after 500 ms');
    assert.deepEqual(admit(), { lane: 'STANDARD', demoted: true });
    clock.advance(60_000);
    assert.deepEqual(
      [admit(), admit(), admit(), admit()].map((a) => a.lane),
      ['PRIVILEGED', 'PRIVILEGED', 'PRIVILEGED', 'STANDARD'],
      'refill is capped at the burst',
    );
  });

  it('keeps one bucket per producer and leaves other classes alone', () => {
    const limiter = new PrivilegedRateLimiter(options);
    for (let i = 0; i < 3; i++) limiter.admit('a', 'PRIVILEGED', 0);
    assert.deepEqual(limiter.admit('a', 'PRIVILEGED', 0), { lane: 'STANDARD', demoted: true });
    assert.deepEqual(limiter.admit('b', 'PRIVILEGED', 0), { lane: 'PRIVILEGED', demoted: false });
    assert.deepEqual(limiter.admit('a', 'STANDARD', 0), { lane: 'STANDARD', demoted: false });
    assert.deepEqual(limiter.admit('a', 'BULK', 0), { lane: 'BULK', demoted: false });
  });
});

describe('Router lanes (RFC §7.3, §19)', () => {
  let h: RouterHarness;

  beforeEach(() => {
    h = new RouterHarness({
      deliveryWindow: 1,
      capacity: 100,
      lanes: { weights: WEIGHTS, privilegedBurst: 2, privilegedRatePerSecond: 1 },
    });
    h.register('boss', { communicationClass: 'PRIVILEGED' });
    h.register('worker', { communicationClass: 'STANDARD' });
    h.register('batch', { communicationClass: 'BULK' });
    h.register('inbox');
  });

  afterEach(() => h.dispose());

  /** Confirms each delivery by AckDelivery so that the next one (window 1) is dispatched; answers the producers in order. */
  function deliverAll(sink: ReturnType<RouterHarness['stream']>['sink']): string[] {
    for (let i = 0; i < 100; i++) {
      const last = sink.items[i];
      if (!last) break;
      assert.ok(h.router.ackDelivery('inbox', last.seq, last.envelope.messageId, 'DELIVERED', ctx()));
    }
    return sink.items.map((i) => i.envelope.producerId);
  }

  it('delivers queued PRIVILEGED messages first, flags them urgent, and keeps BULK from starving', () => {
    const bulk = h.sendData('batch', 'inbox');
    const standard = [h.sendData('worker', 'inbox'), h.sendData('worker', 'inbox')];
    const urgent = [h.sendData('boss', 'inbox'), h.sendData('boss', 'inbox')];
    const sink = h.stream('inbox').sink;
    assert.deepEqual(sink.ids(), [urgent[0].messageId], 'PRIVILEGED goes first although it was sent last');
    const order = deliverAll(sink);
    assert.deepEqual(order, ['boss', 'boss', 'worker', 'worker', 'batch']);
    assert.deepEqual(
      sink.ids(),
      [...urgent, ...standard, bulk].map((m) => m.messageId),
    );

    for (const m of urgent) {
      const [delivered] = h.eventsFor('message.delivered', m.messageId);
      assert.equal(delivered.details.lane, 'PRIVILEGED');
      assert.equal(delivered.details.urgent, true, 'urgent-lane dispatches are flagged (RFC §19)');
    }
    for (const m of [...standard, bulk])
      assert.equal(h.eventsFor('message.delivered', m.messageId)[0].details.urgent, undefined);
    assert.equal(h.router.metrics().find((m) => m.agentId === 'inbox')?.urgentDispatches, 2);
    assert.match(h.router.metricsText(), /router_urgent_dispatches_total\{agent_id="inbox"\} 2/);
  });

  it('demotes PRIVILEGED overflow to STANDARD and logs lane_demoted_from', () => {
    const ms = [h.sendData('boss', 'inbox'), h.sendData('boss', 'inbox'), h.sendData('boss', 'inbox')];
    const lanes = ms.map((m) => h.router.message(m.messageId)?.lane);
    assert.deepEqual(lanes, ['PRIVILEGED', 'PRIVILEGED', 'STANDARD']);
    const accepted = ms.map((m) => h.eventsFor('message.accepted', m.messageId)[0].details);
    assert.deepEqual(
      accepted.map((d) => [d.lane, d.lane_demoted_from]),
      [
        ['PRIVILEGED', undefined],
        ['PRIVILEGED', undefined],
        ['STANDARD', 'PRIVILEGED'],
      ],
    );
    assert.equal(h.router.metrics().find((m) => m.agentId === 'inbox')?.rejects.privileged_demoted, 1);
    h.clock.advance(1_000);
    assert.equal(h.router.message(h.sendData('boss', 'inbox').messageId)?.lane, 'PRIVILEGED', 'the bucket refills');
  });

  it('puts every ACK forwarded to a producer in the PRIVILEGED lane, ahead of its queued work', () => {
    const work = h.sendData('batch', 'worker');
    const m = h.sendData('worker', 'inbox');
    h.stream('inbox');
    h.acked('inbox', m.messageId, 'RECEIVED');
    const sink = h.stream('worker').sink;
    assert.deepEqual(
      sink.items.map((i) => i.envelope.messageType),
      ['ACKNOWLEDGEMENT', 'DATA'],
      'forwarded ACKs do not count against the delivery window and go first',
    );
    assert.equal(sink.items[1].envelope.messageId, work.messageId);
  });
});
