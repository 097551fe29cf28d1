import * as fs from 'node:fs';
import * as path from 'node:path';
import { strict as assert } from 'node:assert';
import type { ManualClock } from '../../src/core/clock';
import type { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { EventLog } from '../../src/core/log/eventLog';
import { AGENT_STATES, AGENT_TRANSITIONS, DEFAULT_STATE_TIMEOUTS, allows } from '../../src/core/registry/lifecycle';
import type { TransitionCause } from '../../src/core/registry/model';
import { Registry, type RegistryChange } from '../../src/core/registry/registry';
import { StoreFixture } from '../support/coordinatorFixture';
import { validDescriptor } from '../support/fixtures';

/**
 * The expected table, written out independently of lifecycle.ts: RFC Appendix C plus COMPLETED → RUNNABLE (§8.1),
 * SCHEDULED → RUNNABLE (an assignment withdrawn) and → SHUTTING_DOWN from every other state (§8.4, §8.2).
 */
const EXPECTED: Record<string, string[]> = {
  INITIALIZING: ['RUNNABLE', 'FAILED_STATE', 'SHUTTING_DOWN'],
  RUNNABLE: ['SCHEDULED', 'SHUTTING_DOWN'],
  SCHEDULED: ['RUNNING', 'RUNNABLE', 'SHUTTING_DOWN'],
  RUNNING: ['WAITING', 'WAITING_RESOURCES', 'SUSPENDED', 'COMPLETED', 'FAILED_STATE', 'SHUTTING_DOWN'],
  WAITING: ['RUNNING', 'SHUTTING_DOWN'],
  WAITING_RESOURCES: ['RUNNING', 'FAILED_STATE', 'SHUTTING_DOWN'],
  SUSPENDED: ['RESUMED', 'FAILED_STATE', 'SHUTTING_DOWN'],
  RESUMED: ['RUNNING', 'SHUTTING_DOWN'],
  COMPLETED: ['RUNNABLE', 'SHUTTING_DOWN'],
  FAILED_STATE: ['RECOVERING', 'SHUTTING_DOWN'],
  SHUTTING_DOWN: ['FAILED_STATE'],
  RECOVERING: ['RUNNABLE', 'FAILED_STATE', 'SHUTTING_DOWN'],
};

/** A shortest path of allowed moves from INITIALIZING to `target`, along the expected table. */
function pathTo(target: string): string[] {
  const previous = new Map<string, string>([['INITIALIZING', '']]);
  const queue = ['INITIALIZING'];
  while (queue.length) {
    const state = queue.shift()!;
    for (const next of EXPECTED[state]) {
      if (previous.has(next)) continue;
      previous.set(next, state);
      queue.push(next);
    }
  }
  const path: string[] = [];
  for (let s = target; s !== 'INITIALIZING'; s = previous.get(s)!) path.unshift(s);
  return path;
}

const TIMEOUTS: Array<[string, number, string]> = [
  ['INITIALIZING', DEFAULT_STATE_TIMEOUTS.initTimeoutMs, 'init_timeout'],
  ['WAITING_RESOURCES', 300_000, 'resource_timeout'],
  ['SUSPENDED', 3_600_000, 'suspend_timeout'],
  ['RECOVERING', 120_000, 'recovery_timeout'],
  ['SHUTTING_DOWN', 30_000, 'agent_shutdown_timeout'],
];

describe('Agent lifecycle (RFC §8, Appendix C)', () => {
  let fixture: StoreFixture;
  let store: CoordinatorStore;
  let clock: ManualClock;
  let log: EventLog;
  let registry: Registry;
  let changes: RegistryChange[];
  const ctx = { correlationId: 'corr-life' };
  const byTask = (reason = 'test'): TransitionCause => ({ by: 'task', reason });

  function open(): Registry {
    // Presence never interferes: these tests are about states.
    const opened = new Registry(store, log, clock, { heartbeatDebounceMs: 1e12 });
    opened.onDidChange((change) => changes.push(change));
    return opened;
  }

  /** Registers `id` and walks it to `state` through allowed transitions. */
  function agentIn(id: string, state: string): void {
    assert.equal(registry.register(validDescriptor(id), ctx).accepted, true);
    for (const step of pathTo(state)) {
      const result = registry.transition(id, step, byTask(`walk to ${state}`), ctx);
      assert.ok(result.ok, `${id} → ${step}: ${result.ok ? '' : result.reason}`);
    }
    assert.equal(registry.get(id)?.state, state);
  }

  const stateEvents = (agentId: string) =>
    log.query({ eventType: 'agent.state_changed', limit: 100_000 }).filter((e) => e.details.agent_id === agentId);

  beforeEach(() => {
    fixture = new StoreFixture({ prefix: 'sw4rm-lifecycle-' });
    ({ store, clock, log } = fixture);
    changes = [];
    registry = open();
  });

  afterEach(() => {
    registry.dispose();
    fixture.dispose();
  });

  describe('the table', () => {
    it('has the twelve states of common.proto and exactly the expected edges (all 12×12 pairs)', () => {
      assert.deepEqual([...AGENT_STATES].sort(), Object.keys(EXPECTED).sort());
      for (const from of AGENT_STATES) {
        for (const to of AGENT_STATES) {
          assert.equal(allows(from, to), EXPECTED[from].includes(to), `${from} → ${to}`);
          assert.equal(registry.allows(from, to), EXPECTED[from].includes(to), `registry.allows(${from}, ${to})`);
        }
        assert.deepEqual([...AGENT_TRANSITIONS.get(from)!].sort(), [...EXPECTED[from]].sort(), from);
      }
    });

    it('is the table the README shows, with its three kinds of ★ edges named', () => {
      const readme = fs.readFileSync(path.resolve(__dirname, '../../../README.md'), 'utf8');
      const section = readme.slice(readme.indexOf('### Agent lifecycle'), readme.indexOf('Registering (again)'));
      const rows = new Map<string, string[]>();
      for (const line of section.split('\n')) {
        const cells = /^\| `([A-Z_]+)` \| (.*) \|$/.exec(line);
        if (!cells) continue;
        const targets = [...cells[2].matchAll(/`([A-Z_]+)`/g)]
          .map((m) => m[1])
          .filter((t) => (AGENT_STATES as readonly string[]).includes(t));
        rows.set(cells[1], targets);
      }
      for (const from of AGENT_STATES)
        assert.deepEqual([...(rows.get(from) ?? [])].sort(), [...EXPECTED[from]].sort(), `README row ${from}`);
      assert.match(section, /three kinds of edges marked ★/);
      for (const edge of ['`COMPLETED → RUNNABLE`', '`SCHEDULED → RUNNABLE`', '`→ SHUTTING_DOWN` from every state'])
        assert.ok(section.includes(edge), edge);
    });

    it('enters INITIALIZING only by registration, and reads FAILED as FAILED_STATE', () => {
      for (const from of AGENT_STATES) assert.equal(allows(from, 'INITIALIZING'), false, from);
      assert.equal(allows('RUNNING', 'FAILED'), true);
      assert.equal(allows('RUNNING', 'DANCING'), false);
    });
  });

  describe('Registry.transition', () => {
    for (const from of AGENT_STATES) {
      it(`from ${from}: applies every allowed move with one event, refuses the others and changes nothing`, () => {
        for (const to of AGENT_STATES) {
          const id = `a-${from}-${to}`.toLowerCase().replace(/_/g, '-');
          agentIn(id, from);
          const eventsBefore = stateEvents(id).length;
          const changesBefore = changes.length;
          const result = registry.transition(
            id,
            to,
            { by: 'task', reason: 'checking the table', taskId: 't-1', errorCode: 'x_code' },
            ctx,
          );
          if (EXPECTED[from].includes(to)) {
            assert.ok(result.ok, `${from} → ${to} refused: ${result.ok ? '' : result.reason}`);
            assert.equal(registry.get(id)?.state, to);
            assert.equal(store.agents.get(id)?.state, to, 'stored');
            const events = stateEvents(id);
            assert.equal(events.length, eventsBefore + 1, `${from} → ${to}: one event`);
            const event = events.at(-1)!;
            assert.equal(event.correlationId, 'corr-life');
            assert.deepEqual(
              [
                event.details.from,
                event.details.to,
                event.details.cause,
                event.details.reason,
                event.details.task_id,
                event.details.error_code,
              ],
              [from, to, 'task', 'checking the table', 't-1', 'x_code'],
            );
            assert.equal(changes.length, changesBefore + 1);
            assert.equal(changes.at(-1)?.kind, 'state');
          } else {
            assert.equal(result.ok, false, `${from} → ${to} must be refused`);
            assert.match(result.ok ? '' : result.reason, new RegExp(`${from}|INITIALIZING|not`));
            assert.equal(registry.get(id)?.state, from, 'nothing changes');
            assert.equal(store.agents.get(id)?.state, from);
            assert.equal(stateEvents(id).length, eventsBefore, 'no event');
            assert.equal(changes.length, changesBefore, 'no change fired');
          }
          registry.deregister(id, 'next pair', ctx);
        }
      });
    }

    it('refuses an agent that is not registered', () => {
      const result = registry.transition('ghost', 'RUNNABLE', byTask(), ctx);
      assert.equal(result.ok, false);
    });

    it('writes in the caller’s transaction when called inside one', () => {
      agentIn('alpha', 'RUNNABLE');
      store.transaction(() => {
        assert.ok(registry.transition('alpha', 'SCHEDULED', byTask(), ctx).ok);
        assert.equal(store.agents.get('alpha')?.state, 'SCHEDULED');
      });
      assert.equal(store.agents.get('alpha')?.state, 'SCHEDULED');
    });
  });

  describe('heartbeats', () => {
    it('FAILED → RUNNABLE reported goes through RECOVERING: two events', () => {
      agentIn('alpha', 'FAILED_STATE');
      const before = stateEvents('alpha').length;
      assert.equal(registry.heartbeat('alpha', 'RUNNABLE', {}, ctx), true);
      assert.equal(registry.get('alpha')?.state, 'RUNNABLE');
      const events = stateEvents('alpha').slice(before);
      assert.deepEqual(
        events.map((e) => [e.details.from, e.details.to, e.details.cause]),
        [
          ['FAILED_STATE', 'RECOVERING', 'heartbeat'],
          ['RECOVERING', 'RUNNABLE', 'heartbeat'],
        ],
      );
      clock.advance(DEFAULT_STATE_TIMEOUTS.recoveryTimeoutMs * 2);
      assert.equal(registry.get('alpha')?.state, 'RUNNABLE', 'the recovery timeout was disarmed');
    });

    it('refuses a state the table does not allow: WARN agent.transition_refused, presence still updated', () => {
      agentIn('alpha', 'RUNNABLE');
      clock.advance(5_000);
      assert.equal(registry.heartbeat('alpha', 'SUSPENDED', {}, ctx), true);
      assert.equal(registry.get('alpha')?.state, 'RUNNABLE');
      assert.equal(registry.get('alpha')?.lastHeartbeatAt, clock.now());
      const [refused] = log.query({ eventType: 'agent.transition_refused' });
      assert.equal(refused.level, 'WARN');
      assert.deepEqual(
        [refused.details.from, refused.details.to, refused.details.cause],
        ['RUNNABLE', 'SUSPENDED', 'heartbeat'],
      );
    });

    it('keeps the state on UNSPECIFIED or empty, and moves RUNNING ↔ WAITING / WAITING_RESOURCES', () => {
      agentIn('alpha', 'RUNNING');
      registry.heartbeat('alpha', 'AGENT_STATE_UNSPECIFIED', {}, ctx);
      registry.heartbeat('alpha', '', {}, ctx);
      assert.equal(registry.get('alpha')?.state, 'RUNNING');
      for (const state of ['WAITING', 'RUNNING', 'WAITING_RESOURCES', 'RUNNING']) {
        registry.heartbeat('alpha', state, {}, ctx);
        assert.equal(registry.get('alpha')?.state, state);
      }
      assert.equal(log.query({ eventType: 'agent.transition_refused' }).length, 0);
    });
  });

  describe('state timeouts (RFC §8.3)', () => {
    for (const [state, ms, code] of TIMEOUTS) {
      it(`${state}: FAILED ${code} after ${ms} ms, logged WARN with timeout_ms`, () => {
        agentIn('alpha', state);
        clock.advance(ms - 1);
        assert.equal(registry.get('alpha')?.state, state);
        clock.advance(1);
        const timedOut = stateEvents('alpha').find((e) => e.details.error_code === code);
        assert.ok(timedOut, 'the timeout is logged');
        assert.equal(timedOut.level, 'WARN');
        assert.deepEqual(
          [timedOut.details.from, timedOut.details.to, timedOut.details.cause, timedOut.details.timeout_ms],
          [state, 'FAILED_STATE', 'timeout', ms],
        );
        if (state === 'SHUTTING_DOWN') {
          assert.equal(registry.get('alpha'), undefined, 'deregistered after the shutdown timeout');
        } else {
          assert.equal(registry.get('alpha')?.state, 'FAILED_STATE');
        }
      });

      it(`${state}: the timeout counts from entering the state, across a restart`, () => {
        agentIn('alpha', state);
        clock.advance(ms / 2);
        registry.dispose();
        registry = open();
        assert.equal(registry.get('alpha')?.state, state);
        clock.advance(ms / 2 - 1);
        assert.notEqual(stateEvents('alpha').at(-1)?.details.error_code, code);
        clock.advance(1);
        assert.equal(stateEvents('alpha').at(-1)?.details.error_code, code);
      });
    }

    it('WAITING has no timeout', () => {
      agentIn('alpha', 'WAITING');
      clock.advance(30 * 24 * 3_600_000);
      assert.equal(registry.get('alpha')?.state, 'WAITING');
    });

    it('leaving the state disarms its timeout', () => {
      agentIn('alpha', 'SUSPENDED');
      clock.advance(1_000);
      registry.transition('alpha', 'RESUMED', byTask(), ctx);
      registry.transition('alpha', 'RUNNING', byTask(), ctx);
      clock.advance(DEFAULT_STATE_TIMEOUTS.suspendTimeoutMs);
      assert.equal(registry.get('alpha')?.state, 'RUNNING');
    });

    it('takes configured timeouts', () => {
      registry.dispose();
      registry = new Registry(store, log, clock, { heartbeatDebounceMs: 1e12, resourceTimeoutMs: 1_000 });
      agentIn('alpha', 'WAITING_RESOURCES');
      clock.advance(1_000);
      assert.equal(registry.get('alpha')?.state, 'FAILED_STATE');
    });
  });

  describe('shutdown (RFC §8.4)', () => {
    it('a ShutdownAgent grace replaces the default, FAILED agent_shutdown_timeout then deregistered; kept across a restart', () => {
      agentIn('alpha', 'RUNNING');
      const result = registry.transition(
        'alpha',
        'SHUTTING_DOWN',
        { by: 'shutdown', reason: 'operator asked', timeoutMs: 5_000 },
        ctx,
      );
      assert.ok(result.ok);
      clock.advance(2_000);
      registry.dispose();
      registry = open();
      clock.advance(2_999);
      assert.equal(registry.get('alpha')?.state, 'SHUTTING_DOWN');
      changes = [];
      clock.advance(1);
      assert.deepEqual(
        changes.map((c) => c.kind),
        ['state', 'left'],
      );
      assert.equal(registry.get('alpha'), undefined);
      assert.equal(store.agents.get('alpha'), undefined);
      const [left] = log.query({ eventType: 'agent.deregistered' });
      assert.equal(left.details.reason, 'agent_shutdown_timeout');
      assert.equal(left.details.from_state, 'FAILED_STATE');
      assert.equal(stateEvents('alpha').at(-1)?.details.timeout_ms, 5_000);
    });

    it('a shutdown that ends in time (deregistered) leaves no timer behind', () => {
      agentIn('alpha', 'RUNNABLE');
      registry.transition('alpha', 'SHUTTING_DOWN', { by: 'shutdown', reason: 'operator asked' }, ctx);
      registry.deregister('alpha', 'shut down', ctx);
      clock.advance(DEFAULT_STATE_TIMEOUTS.shutdownTimeoutMs * 2);
      assert.equal(stateEvents('alpha').filter((e) => e.details.error_code === 'agent_shutdown_timeout').length, 0);
    });
  });
});
