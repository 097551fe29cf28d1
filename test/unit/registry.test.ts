import { strict as assert } from 'node:assert';
import { isoUtc, type ManualClock } from '../../src/core/clock';
import type { CoordinatorStore } from '../../src/core/coordinatorStore';
import type { EventLog } from '../../src/core/log/eventLog';
import type { StoredEvent } from '../../src/core/log/model';
import { Registry, type RegistryChange, type RegistryOptions } from '../../src/core/registry/registry';
import { StoreFixture } from '../support/coordinatorFixture';
import { validDescriptor } from '../support/fixtures';

const DEBOUNCE_MS = 30_000;
const INIT_TIMEOUT_MS = 60_000;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('Registry (RFC §14, §8.3)', () => {
  let fixture: StoreFixture;
  let store: CoordinatorStore;
  let clock: ManualClock;
  let log: EventLog;
  let registry: Registry;
  let changes: RegistryChange[];

  const ctx = (correlationId = 'corr-1') => ({ correlationId });
  const options: Partial<RegistryOptions> = { heartbeatDebounceMs: DEBOUNCE_MS, initTimeoutMs: INIT_TIMEOUT_MS };

  function openRegistry(): Registry {
    const opened = new Registry(store, log, clock, options);
    opened.onDidChange((change) => changes.push(change));
    return opened;
  }

  function eventsOfType(eventType: string): StoredEvent[] {
    return log.query({ eventType });
  }

  beforeEach(() => {
    fixture = new StoreFixture({ prefix: 'sw4rm-registry-' });
    ({ store, clock, log } = fixture);
    changes = [];
    registry = openRegistry();
  });

  afterEach(() => {
    registry.dispose();
    fixture.dispose();
  });

  describe('register', () => {
    it('admits a valid agent as INITIALIZING and online, announces the join and logs agent.registered', () => {
      const result = registry.register(validDescriptor('alpha'), ctx('corr-register'));

      assert.deepEqual(result, { accepted: true, reason: '' });
      const agent = registry.get('alpha');
      assert.ok(agent);
      assert.equal(agent.state, 'INITIALIZING');
      assert.equal(agent.presence, 'online');
      assert.equal(agent.registeredAt, clock.now());
      assert.equal(agent.lastHeartbeatAt, null);
      assert.equal(store.agents.get('alpha')?.state, 'INITIALIZING');

      assert.equal(changes.length, 1);
      assert.equal(changes[0].kind, 'joined');

      const [event] = eventsOfType('agent.registered');
      assert.ok(event, 'agent.registered was logged');
      assert.match(event.ts, ISO_UTC);
      assert.equal(event.ts, isoUtc(clock.now()));
      assert.equal(event.correlationId, 'corr-register');
      assert.equal(event.actor, 'alpha');
      assert.equal(event.eventType, 'agent.registered');
      assert.equal(event.level, 'INFO');
      assert.equal(event.source, 'coordinator');
      assert.deepEqual(event.details, { agent_id: 'alpha', from_state: null, to_state: 'INITIALIZING' });
    });

    it('accepts a descriptor with omissions, defaulting them and saying so in the reason and the log', () => {
      const result = registry.register({ agentId: 'bare' }, ctx());

      assert.equal(result.accepted, true);
      assert.match(result.reason, /^accepted with warnings: /);
      assert.match(result.reason, /STANDARD is used/);
      const agent = registry.get('bare');
      assert.equal(agent?.descriptor.name, 'bare');
      assert.equal(agent?.descriptor.communicationClass, 'STANDARD');
      const [event] = eventsOfType('agent.registered');
      assert.ok(Array.isArray(event.details.warnings));
    });

    it('refuses an invalid descriptor with a VALIDATION_ERROR reason, stores nothing and logs the refusal', () => {
      const result = registry.register(validDescriptor('bad/id'), ctx('corr-bad'));

      assert.equal(result.accepted, false);
      assert.match(result.reason, /^VALIDATION_ERROR: /);
      assert.equal(registry.list().length, 0);
      assert.equal(store.agents.list().length, 0);
      assert.equal(changes.length, 0);
      const [event] = eventsOfType('agent.registration_rejected');
      assert.equal(event.correlationId, 'corr-bad');
      assert.equal(event.level, 'WARN');
      assert.equal(event.details.agent_id, 'bad/id');
    });

    it('updates the descriptor of a re-registering agent, keeps registeredAt and announces an update, not a join', () => {
      registry.register(validDescriptor('alpha'), ctx());
      const registeredAt = clock.now();
      clock.advance(5_000);

      const result = registry.register(
        validDescriptor('alpha', { description: 'Now also writes tests.', capabilities: ['code.write'] }),
        ctx('corr-again'),
      );

      assert.equal(result.accepted, true);
      const agent = registry.get('alpha');
      assert.equal(agent?.registeredAt, registeredAt);
      assert.equal(agent?.updatedAt, registeredAt + 5_000);
      assert.equal(agent?.descriptor.description, 'Now also writes tests.');
      assert.deepEqual(store.agents.get('alpha')?.descriptor.capabilities, ['code.write']);
      assert.deepEqual(
        changes.map((c) => c.kind),
        ['joined', 'updated'],
      );
      assert.equal(eventsOfType('agent.registered').length, 1);
      const [event] = eventsOfType('agent.reregistered');
      assert.equal(event.correlationId, 'corr-again');
      assert.deepEqual(event.details.changed_fields, ['description', 'capabilities']);
      assert.equal(registry.list().length, 1);
    });
  });

  describe('heartbeat', () => {
    it('answers false for an agent that is not registered and logs it', () => {
      assert.equal(registry.heartbeat('ghost', 'RUNNABLE', {}, ctx('corr-ghost')), false);
      assert.equal(registry.get('ghost'), undefined);
      const [event] = eventsOfType('agent.heartbeat_unknown');
      assert.equal(event.correlationId, 'corr-ghost');
      assert.equal(event.details.agent_id, 'ghost');
    });

    it('records the reported state as a state change with its own event', () => {
      registry.register(validDescriptor('alpha'), ctx());
      clock.advance(1_000);

      assert.equal(registry.heartbeat('alpha', 'RUNNABLE', { load: 'low' }, ctx('corr-hb')), true);

      const agent = registry.get('alpha');
      assert.equal(agent?.state, 'RUNNABLE');
      assert.equal(agent?.lastHeartbeatAt, clock.now());
      assert.deepEqual(agent?.health, { load: 'low' });
      assert.equal(store.agents.get('alpha')?.state, 'RUNNABLE');
      assert.equal(changes.at(-1)?.kind, 'state');
      const [event] = eventsOfType('agent.state_changed');
      assert.equal(event.correlationId, 'corr-hb');
      assert.equal(event.actor, 'alpha');
      assert.deepEqual(event.details, {
        agent_id: 'alpha',
        from: 'INITIALIZING',
        to: 'RUNNABLE',
        cause: 'heartbeat',
        reason: 'reported RUNNABLE in a heartbeat',
      });
    });

    it('keeps the state when the heartbeat carries none, and logs nothing about state', () => {
      registry.register(validDescriptor('alpha'), ctx());
      assert.equal(registry.heartbeat('alpha', 'AGENT_STATE_UNSPECIFIED', {}, ctx()), true);
      assert.equal(registry.get('alpha')?.state, 'INITIALIZING');
      assert.equal(changes.at(-1)?.kind, 'heartbeat');
      assert.equal(eventsOfType('agent.state_changed').length, 0);
      assert.equal(eventsOfType('agent.heartbeat_state_unknown').length, 0);
    });

    it('keeps the state and warns when the heartbeat carries a state it does not know', () => {
      registry.register(validDescriptor('alpha'), ctx());
      assert.equal(registry.heartbeat('alpha', 'DANCING', {}, ctx()), true);
      assert.equal(registry.get('alpha')?.state, 'INITIALIZING');
      const [event] = eventsOfType('agent.heartbeat_state_unknown');
      assert.equal(event.details.reported_state, 'DANCING');
    });
  });

  describe('presence debounce', () => {
    it('stays online until the debounce has fully passed, then turns unavailable but stays registered', () => {
      registry.register(validDescriptor('alpha'), ctx());
      registry.heartbeat('alpha', 'RUNNABLE', {}, ctx());

      clock.advance(DEBOUNCE_MS - 1);
      assert.equal(registry.get('alpha')?.presence, 'online');
      assert.equal(registry.onlineCount(), 1);

      clock.advance(1);
      const agent = registry.get('alpha');
      assert.equal(agent?.presence, 'unavailable');
      assert.equal(agent?.state, 'RUNNABLE');
      assert.equal(store.agents.get('alpha')?.presence, 'unavailable');
      assert.equal(registry.onlineCount(), 0);
      const presence = changes.filter((c) => c.kind === 'presence');
      assert.equal(presence.length, 1);
      assert.equal(presence[0].kind === 'presence' && presence[0].agent.presence, 'unavailable');
      const [event] = eventsOfType('agent.presence_changed');
      assert.equal(event.actor, 'registry');
      assert.equal(event.details.from, 'online');
      assert.equal(event.details.to, 'unavailable');
      assert.equal(event.ts, isoUtc(clock.now()));
    });

    it('moves the deadline with every heartbeat', () => {
      registry.register(validDescriptor('alpha'), ctx());
      registry.heartbeat('alpha', 'RUNNABLE', {}, ctx());
      for (let i = 0; i < 5; i++) {
        clock.advance(DEBOUNCE_MS - 1);
        registry.heartbeat('alpha', 'RUNNABLE', {}, ctx());
      }
      assert.equal(registry.get('alpha')?.presence, 'online');
      assert.equal(eventsOfType('agent.presence_changed').length, 0);
    });

    it('never deregisters an agent for missed heartbeats, however many', () => {
      registry.register(validDescriptor('alpha'), ctx());
      registry.heartbeat('alpha', 'RUNNABLE', {}, ctx());

      for (let i = 0; i < 100; i++) clock.advance(DEBOUNCE_MS);

      assert.ok(registry.get('alpha'));
      assert.ok(store.agents.get('alpha'));
      assert.equal(changes.filter((c) => c.kind === 'left').length, 0);
      assert.equal(changes.filter((c) => c.kind === 'presence').length, 1, 'unavailable is announced once');
      assert.equal(eventsOfType('agent.deregistered').length, 0);
    });

    it('turns an unavailable agent online again on its next heartbeat', () => {
      registry.register(validDescriptor('alpha'), ctx());
      registry.heartbeat('alpha', 'RUNNABLE', {}, ctx());
      clock.advance(DEBOUNCE_MS * 3);
      assert.equal(registry.get('alpha')?.presence, 'unavailable');

      assert.equal(registry.heartbeat('alpha', 'RUNNABLE', {}, ctx('corr-back')), true);

      assert.equal(registry.get('alpha')?.presence, 'online');
      assert.equal(store.agents.get('alpha')?.presence, 'online');
      assert.equal(changes.at(-1)?.kind, 'presence');
      const back = eventsOfType('agent.presence_changed').at(-1);
      assert.equal(back?.correlationId, 'corr-back');
      assert.deepEqual([back?.details.from, back?.details.to], ['unavailable', 'online']);

      clock.advance(DEBOUNCE_MS - 1);
      assert.equal(registry.get('alpha')?.presence, 'online', 'the debounce starts again from the new heartbeat');
      clock.advance(1);
      assert.equal(registry.get('alpha')?.presence, 'unavailable');
    });
  });

  describe('init timeout (RFC §8.3)', () => {
    it('fails an agent still INITIALIZING after 60 s with error_code init_timeout', () => {
      const slow = new Registry(store, log, clock, {
        heartbeatDebounceMs: 10 * INIT_TIMEOUT_MS,
        initTimeoutMs: INIT_TIMEOUT_MS,
      });
      const seen: RegistryChange[] = [];
      slow.onDidChange((change) => seen.push(change));
      try {
        slow.register(validDescriptor('late'), ctx());
        clock.advance(INIT_TIMEOUT_MS - 1);
        assert.equal(slow.get('late')?.state, 'INITIALIZING');

        clock.advance(1);

        assert.equal(slow.get('late')?.state, 'FAILED_STATE');
        assert.equal(store.agents.get('late')?.state, 'FAILED_STATE');
        assert.equal(seen.at(-1)?.kind, 'state');
        const [event] = log.query({ eventType: 'agent.state_changed' });
        assert.equal(event.details.error_code, 'init_timeout');
        assert.equal(event.details.from, 'INITIALIZING');
        assert.equal(event.details.to, 'FAILED_STATE');
        assert.equal(event.level, 'WARN');
        assert.equal(event.ts, isoUtc(clock.now()));
        assert.ok(slow.get('late'), 'a failed agent is still registered');
      } finally {
        slow.dispose();
      }
    });

    it('still fails an agent that heartbeats but keeps reporting INITIALIZING', () => {
      registry.register(validDescriptor('stuck'), ctx());
      for (let t = 10_000; t < INIT_TIMEOUT_MS; t += 10_000) {
        clock.advance(10_000);
        registry.heartbeat('stuck', 'INITIALIZING', {}, ctx());
      }
      assert.equal(registry.get('stuck')?.state, 'INITIALIZING');
      clock.advance(10_000);
      assert.equal(registry.get('stuck')?.state, 'FAILED_STATE');
      assert.equal(registry.get('stuck')?.presence, 'online', 'failing is a state, not a presence');
    });

    it('does not fail an agent that reported RUNNABLE first', () => {
      registry.register(validDescriptor('quick'), ctx());
      clock.advance(10_000);
      registry.heartbeat('quick', 'RUNNABLE', {}, ctx());

      clock.advance(INIT_TIMEOUT_MS * 2);

      assert.equal(registry.get('quick')?.state, 'RUNNABLE');
      assert.equal(
        log.query({ eventType: 'agent.state_changed' }).filter((e) => e.details.error_code === 'init_timeout').length,
        0,
      );
    });

    it('restarts the init timeout when an agent re-registers', () => {
      registry.register(validDescriptor('alpha'), ctx());
      clock.advance(INIT_TIMEOUT_MS - 10_000);
      registry.register(validDescriptor('alpha'), ctx());
      clock.advance(INIT_TIMEOUT_MS - 1);
      assert.equal(registry.get('alpha')?.state, 'INITIALIZING');
      clock.advance(1);
      assert.equal(registry.get('alpha')?.state, 'FAILED_STATE');
    });
  });

  describe('deregister', () => {
    it('removes the agent from memory and store, announces the leave and logs it', () => {
      registry.register(validDescriptor('alpha'), ctx());
      registry.register(validDescriptor('beta'), ctx());

      assert.equal(registry.deregister('alpha', 'done for today', ctx('corr-bye')), true);

      assert.equal(registry.get('alpha'), undefined);
      assert.equal(store.agents.get('alpha'), undefined);
      assert.deepEqual(
        registry.list().map((a) => a.descriptor.agentId),
        ['beta'],
      );
      const left = changes.at(-1);
      assert.deepEqual(left, { kind: 'left', agentId: 'alpha', reason: 'done for today' });
      const [event] = eventsOfType('agent.deregistered');
      assert.equal(event.correlationId, 'corr-bye');
      assert.equal(event.actor, 'alpha');
      assert.deepEqual(event.details, { agent_id: 'alpha', from_state: 'INITIALIZING', reason: 'done for today' });
    });

    it("cancels the departed agent's timers", () => {
      registry.register(validDescriptor('alpha'), ctx());
      assert.equal(clock.pendingTimers, 2, 'one presence timer and one init timer');
      registry.deregister('alpha', '', ctx());
      assert.equal(clock.pendingTimers, 0);
      clock.advance(INIT_TIMEOUT_MS * 2);
      assert.equal(eventsOfType('agent.presence_changed').length, 0);
      assert.equal(eventsOfType('agent.state_changed').length, 0);
    });

    it('answers false for an agent that is not registered', () => {
      assert.equal(registry.deregister('ghost', 'why not', ctx()), false);
      assert.equal(eventsOfType('agent.deregister_unknown').length, 1);
      assert.equal(changes.length, 0);
    });
  });

  describe('restart', () => {
    it('brings agents of an earlier run back registered, disconnected, with their descriptors intact', () => {
      const descriptor = validDescriptor('alpha', { capabilities: ['x.y'], publicKey: new Uint8Array([1, 2, 3]) });
      registry.register(descriptor, ctx());
      registry.heartbeat('alpha', 'RUNNING', { cpu: '3%' }, ctx());
      registry.register(validDescriptor('beta'), ctx());
      const before = registry.list();
      registry.dispose();
      fixture.reopen(() => clock.advance(3_600_000));
      ({ store, log } = fixture);
      registry = openRegistry();

      const after = registry.list();
      assert.deepEqual(
        after.map((a) => a.descriptor.agentId),
        ['alpha', 'beta'],
      );
      for (const [i, agent] of after.entries()) {
        assert.equal(agent.presence, 'disconnected');
        assert.deepEqual(agent.descriptor, before[i].descriptor);
        assert.equal(agent.registeredAt, before[i].registeredAt);
        assert.equal(agent.state, before[i].state);
        assert.equal(store.agents.get(agent.descriptor.agentId)?.presence, 'disconnected');
      }
      assert.equal(registry.get('alpha')?.descriptor.publicKey, Buffer.from([1, 2, 3]).toString('base64'));
      assert.deepEqual(registry.get('alpha')?.health, { cpu: '3%' });
      const restored = log
        .query({ eventType: 'agent.presence_changed' })
        .filter((e) => e.details.to === 'disconnected');
      assert.equal(restored.length, 2);
      assert.equal(restored[0].details.cause, 'coordinator restarted');
      assert.equal(registry.onlineCount(), 0);

      assert.equal(registry.heartbeat('alpha', 'RUNNING', {}, ctx()), true);
      assert.equal(registry.get('alpha')?.presence, 'online');
    });

    it('applies the init timeout to an agent that was still INITIALIZING when the earlier run stopped', () => {
      registry.register(validDescriptor('alpha'), ctx());
      registry.dispose();

      registry = openRegistry();
      clock.advance(INIT_TIMEOUT_MS);

      // RFC §8.3: INITIALIZING has a 60 s timeout. A restart must not let an agent stay INITIALIZING forever.
      assert.equal(registry.get('alpha')?.state, 'FAILED_STATE');
    });
  });

  describe('dispose', () => {
    it('cancels every timer', () => {
      registry.register(validDescriptor('alpha'), ctx());
      registry.register(validDescriptor('beta'), ctx());
      registry.heartbeat('beta', 'RUNNABLE', {}, ctx());
      assert.ok(clock.pendingTimers > 0);

      registry.dispose();

      assert.equal(clock.pendingTimers, 0);
      const count = store.events.count();
      clock.advance(INIT_TIMEOUT_MS * 10);
      assert.equal(store.events.count(), count, 'nothing fires after dispose');
    });
  });
});
