import { strict as assert } from 'node:assert';
import type { ManualClock } from '../../src/core/clock';
import type { CoordinatorStore } from '../../src/core/coordinatorStore';
import { formatEvent, type EventLog } from '../../src/core/log/eventLog';
import type { StoredEvent } from '../../src/core/log/model';
import { CoordinatorFixture, StoreFixture } from '../support/coordinatorFixture';

describe('EventLog', () => {
  let fixture: StoreFixture;
  let store: CoordinatorStore;
  let clock: ManualClock;
  let log: EventLog;

  beforeEach(() => {
    fixture = new StoreFixture({ prefix: 'sw4rm-log-', now: Date.UTC(2026, 2, 4, 5, 6, 7, 89) });
    ({ store, clock, log } = fixture);
  });

  afterEach(() => fixture.dispose());

  it('records an internal error as <actor>.internal_error with the stack, and never throws when the log cannot be written', () => {
    const event = (() => {
      log.internalError('router', 'c-err', new Error('boom'), { during: 'test' });
      return log.query({ eventType: 'router.internal_error' })[0];
    })();
    assert.equal(event.level, 'ERROR');
    assert.equal(event.correlationId, 'c-err');
    assert.equal(event.details.during, 'test');
    assert.match(String(event.details.error), /^Error: boom\n\s+at /, 'with the stack');

    fixture.reopen(() => {
      // the store closed: every write now throws
      const printed: string[] = [];
      const original = console.error;
      console.error = (...args: unknown[]) => {
        printed.push(args.join(' '));
      };
      try {
        assert.doesNotThrow(() => log.internalError('registry', 'c-closed', new Error('store gone')));
      } finally {
        console.error = original;
      }
      assert.equal(printed.length, 1);
      assert.match(printed[0], /registry: Error: store gone/);
    });
  });

  it('stamps an event with the clock in ISO-8601 UTC and fills in the defaults', () => {
    const event = log.record({ correlationId: 'c1', actor: 'registry', eventType: 'agent.registered' });
    assert.deepEqual(event, {
      id: 1,
      ts: '2026-03-04T05:06:07.089Z',
      correlationId: 'c1',
      actor: 'registry',
      eventType: 'agent.registered',
      level: 'INFO',
      source: 'coordinator',
      details: {},
    });
    assert.deepEqual(store.events.query(), [event]);
  });

  it("keeps what the caller gives: level, source, details and an agent's own timestamp", () => {
    const event = log.record({
      correlationId: 'c2',
      actor: 'alpha',
      eventType: 'task.done',
      level: 'WARN',
      source: 'agent',
      details: { files: ['a.ts'], n: 3 },
      ts: '2025-12-31T23:59:59.000Z',
    });
    assert.equal(event.ts, '2025-12-31T23:59:59.000Z');
    assert.equal(event.level, 'WARN');
    assert.equal(event.source, 'agent');
    assert.deepEqual(log.query({ correlationId: 'c2' })[0].details, { files: ['a.ts'], n: 3 });
  });

  it('announces every recorded event, with its id, to listeners until they or the log are disposed', () => {
    const seen: StoredEvent[] = [];
    const subscription = log.onDidRecord((e) => seen.push(e));
    log.record({ correlationId: 'c1', actor: 'a', eventType: 'one' });
    clock.advance(1_000);
    log.record({ correlationId: 'c1', actor: 'a', eventType: 'two' });
    assert.deepEqual(
      seen.map((e) => [e.id, e.eventType, e.ts]),
      [
        [1, 'one', '2026-03-04T05:06:07.089Z'],
        [2, 'two', '2026-03-04T05:06:08.089Z'],
      ],
    );

    subscription.dispose();
    log.record({ correlationId: 'c1', actor: 'a', eventType: 'three' });
    assert.equal(seen.length, 2);

    log.onDidRecord((e) => seen.push(e));
    log.dispose();
    log.record({ correlationId: 'c1', actor: 'a', eventType: 'four' });
    assert.equal(seen.length, 2);
    assert.equal(store.events.count(), 4, 'disposing the log stops announcements, not recording');
  });

  it('records the event even when a listener throws, and still tells the other listeners', () => {
    const seen: string[] = [];
    const originalError = console.error;
    console.error = () => undefined;
    try {
      log.onDidRecord(() => {
        throw new Error('faulty view');
      });
      log.onDidRecord((e) => seen.push(e.eventType));
      log.record({ correlationId: 'c1', actor: 'a', eventType: 'survives' });
    } finally {
      console.error = originalError;
    }
    assert.deepEqual(seen, ['survives']);
    assert.equal(store.events.count(), 1);
  });

  it('formats an event as one line for a human', () => {
    const event = log.record({
      correlationId: 'c9',
      actor: 'registry',
      eventType: 'agent.left',
      level: 'WARN',
      details: { agent_id: 'x' },
    });
    assert.equal(formatEvent(event), '2026-03-04T05:06:07.089Z WARN  registry agent.left [c9] {"agent_id":"x"}');
    assert.ok(!formatEvent(event).includes('\n'));
  });

  it('keeps an event on one line even when agent-supplied text contains line breaks', () => {
    const event = log.record({
      correlationId: 'c\r\n2026-01-01T00:00:00.000Z INFO  registry forged [x] {}',
      actor: 'alpha\nbeta',
      eventType: 'x\u001b[2Jy',
      source: 'agent',
      details: { text: 'a\nb' },
    });
    const line = formatEvent(event);
    assert.ok(!/[\u0000-\u001f\u007f]/.test(line), `control characters in ${JSON.stringify(line)}`);
  });
});

describe('event retention', () => {
  it('keeps only the newest maxEvents events, checked every minute with the injected clock', () => {
    const fixture = new CoordinatorFixture({
      prefix: 'sw4rm-retention-',
      coordinator: { maxEvents: 5, router: { heartbeatIntervalMs: 0 } },
    });
    const { clock, coordinator } = fixture;
    try {
      for (let i = 0; i < 20; i++)
        coordinator.log.record({ correlationId: `c${i}`, actor: 'test', eventType: 'test.event' });
      assert.ok(coordinator.store.events.count() > 5);
      clock.advance(59_999);
      assert.ok(coordinator.store.events.count() > 5, 'nothing is pruned before the minute is up');
      clock.advance(1);
      const kept = coordinator.log.query({ limit: 100 });
      assert.equal(kept.length, 6, 'five kept plus the events.pruned record');
      assert.equal(kept[kept.length - 1].eventType, 'events.pruned');
      assert.deepEqual(
        kept.slice(0, 5).map((e) => e.correlationId),
        ['c15', 'c16', 'c17', 'c18', 'c19'],
      );
    } finally {
      fixture.dispose();
    }
  });

  it('works off a backlog beyond maxEvents 5,000 events per run, the rest on catch-up runs 100 ms apart', () => {
    const fixture = new CoordinatorFixture({
      prefix: 'sw4rm-retention-',
      coordinator: { maxEvents: 10, router: { heartbeatIntervalMs: 0 } },
    });
    const { clock, coordinator } = fixture;
    try {
      coordinator.store.transaction(() => {
        for (let i = 0; i < 12_000; i++)
          coordinator.store.events.append({
            ts: '2026-01-01T00:00:00.000Z',
            correlationId: `b${i}`,
            actor: 'test',
            eventType: 'test.backlog',
            level: 'INFO',
            source: 'coordinator',
            details: {},
          });
      });
      const runs = () => coordinator.log.query({ eventType: 'events.pruned', limit: 100 }).map((e) => e.details.pruned);
      clock.advance(60_000);
      assert.deepEqual(runs(), [5_000], 'one bounded run');
      clock.advance(100);
      assert.deepEqual(runs(), [5_000, 5_000], 'a catch-up run 100 ms later');
      clock.advance(100);
      const last = runs();
      assert.equal(last.length, 3);
      assert.equal(coordinator.store.events.count(), 10 + 1, 'down to maxEvents, plus the record of the last run');
      clock.advance(60_000 - 200 - 1);
      assert.equal(runs().length, 3, 'caught up: nothing until the next minute');
    } finally {
      fixture.dispose();
    }
  });
});
