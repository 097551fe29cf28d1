import { strict as assert } from 'node:assert';
import type { CoordinatorHost } from '../../src/server/host';
import type { CoordinatorClients } from '../support/clients';
import { descriptorMessage } from '../support/fixtures';
import { clientsFor, startHost, stopHost } from '../support/host';
import { makeTempDir, removeTempDir } from '../support/tempDir';

describe('RegistryService over gRPC', () => {
  let dataDir: string;
  let host: CoordinatorHost;
  let clients: CoordinatorClients;

  beforeEach(async () => {
    dataDir = makeTempDir('sw4rm-int-registry-');
    host = await startHost(dataDir);
    clients = clientsFor(host);
  });

  afterEach(async () => {
    clients?.close();
    await stopHost(host);
    removeTempDir(dataDir);
  });

  it('registers three agents, heartbeats them, deregisters one and keeps the other two', async () => {
    for (const id of ['alpha', 'beta', 'gamma']) {
      const response = await clients.registerAgent(descriptorMessage(id), { correlationId: `reg-${id}` });
      assert.deepEqual(response, { accepted: true, reason: '' }, id);
    }
    for (const id of ['alpha', 'beta', 'gamma']) {
      assert.deepEqual(await clients.heartbeat(id, 'RUNNABLE', { queue: '0' }), { ok: true }, id);
    }
    const registry = host.coordinator.registry;
    assert.deepEqual(
      registry.list().map((a) => [a.descriptor.agentId, a.state, a.presence]),
      [
        ['alpha', 'RUNNABLE', 'online'],
        ['beta', 'RUNNABLE', 'online'],
        ['gamma', 'RUNNABLE', 'online'],
      ],
    );
    assert.deepEqual(registry.get('beta')?.health, { queue: '0' });

    assert.deepEqual(await clients.deregisterAgent('beta', 'finished', { correlationId: 'bye-beta' }), { ok: true });

    assert.deepEqual(
      registry.list().map((a) => a.descriptor.agentId),
      ['alpha', 'gamma'],
    );
    assert.deepEqual(
      host.coordinator.store.agents.list().map((a) => a.descriptor.agentId),
      ['alpha', 'gamma'],
    );
    assert.deepEqual(await clients.heartbeat('beta'), { ok: false }, 'a deregistered agent is unknown');
    assert.deepEqual(await clients.deregisterAgent('beta', 'again'), { ok: false });
  });

  it('records events under the x-correlation-id the client sent', async () => {
    await clients.registerAgent(descriptorMessage('alpha'), { correlationId: 'corr-register-alpha' });
    await clients.heartbeat('alpha', 'RUNNABLE', {}, { correlationId: 'corr-hb-alpha' });
    await clients.deregisterAgent('alpha', 'done', { correlationId: 'corr-bye-alpha' });

    const log = host.coordinator.log;
    const registered = log.query({ correlationId: 'corr-register-alpha' });
    assert.deepEqual(
      registered.map((e) => [e.eventType, e.actor]),
      [['agent.registered', 'alpha']],
    );
    assert.match(registered[0].ts, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.deepEqual(
      log.query({ correlationId: 'corr-hb-alpha' }).map((e) => e.eventType),
      ['agent.state_changed'],
    );
    assert.deepEqual(
      log.query({ correlationId: 'corr-bye-alpha' }).map((e) => e.eventType),
      ['agent.deregistered'],
    );
  });

  it('gives each call without x-correlation-id a fresh correlation id', async () => {
    await clients.registerAgent(descriptorMessage('alpha'));
    await clients.registerAgent(descriptorMessage('beta'));
    const events = host.coordinator.log.query({ eventType: 'agent.registered' });
    assert.equal(events.length, 2);
    assert.match(events[0].correlationId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.notEqual(events[0].correlationId, events[1].correlationId);
  });

  it('answers ok=false to a heartbeat from an agent that never registered', async () => {
    assert.deepEqual(await clients.heartbeat('nobody'), { ok: false });
    assert.equal(host.coordinator.log.query({ eventType: 'agent.heartbeat_unknown' }).length, 1);
  });

  it('refuses an invalid descriptor with accepted=false and a VALIDATION_ERROR reason', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [descriptorMessage('../escape'), /agent_id/],
      [descriptorMessage('alpha', { description: Array(201).fill('w').join(' ') }), /201 words/],
      [descriptorMessage('alpha', { modalities_supported: ['json'] }), /MIME type/],
      [descriptorMessage('alpha', { capabilities: ['a', 'a'] }), /twice/],
      [descriptorMessage('alpha', { reasoning_connectors: ['no scheme here'] }), /URI/],
    ];
    for (const [agent, why] of cases) {
      const response = await clients.registerAgent(agent);
      assert.equal(response.accepted, false, JSON.stringify(agent).slice(0, 80));
      assert.ok(response.reason.startsWith('VALIDATION_ERROR: '), response.reason);
      assert.match(response.reason, why);
    }
    const empty = await clients.registerAgent(undefined as unknown as Record<string, unknown>);
    assert.equal(empty.accepted, false);
    assert.match(empty.reason, /^VALIDATION_ERROR: /);
    assert.equal(host.coordinator.registry.list().length, 0);
  });

  it("accepts a reference agent's minimal descriptor with defaults, as the wire encodes absent enums", async () => {
    const response = await clients.registerAgent({ agent_id: 'minimal' });
    assert.equal(response.accepted, true);
    assert.match(response.reason, /^accepted with warnings: /);
    const agent = host.coordinator.registry.get('minimal');
    assert.equal(agent?.descriptor.communicationClass, 'STANDARD');
    assert.equal(agent?.descriptor.registrationType, 'STANDARD_AGENT');
    assert.equal(agent?.state, 'INITIALIZING');
  });

  it('carries every descriptor field across the wire', async () => {
    await clients.registerAgent(
      descriptorMessage('full', {
        communication_class: 'PRIVILEGED',
        public_key: Buffer.from([1, 2, 3, 4]),
        registration_type: 'SWARM_GATEWAY',
        max_concurrent_delegations: 7,
      }),
    );
    const descriptor = host.coordinator.registry.get('full')?.descriptor;
    assert.deepEqual(descriptor, {
      agentId: 'full',
      name: 'Agent full',
      description: 'Writes and reviews code in one worktree.',
      capabilities: ['code.write', 'code.review'],
      communicationClass: 'PRIVILEGED',
      modalitiesSupported: ['application/json'],
      reasoningConnectors: ['http://127.0.0.1:8080/infer'],
      publicKey: Buffer.from([1, 2, 3, 4]).toString('base64'),
      registrationType: 'SWARM_GATEWAY',
      maxConcurrentDelegations: 7,
    });
  });

  it('keeps the state when a heartbeat carries none (AGENT_STATE_UNSPECIFIED on the wire)', async () => {
    await clients.registerAgent(descriptorMessage('alpha'));
    assert.deepEqual(await clients.heartbeat('alpha', 'AGENT_STATE_UNSPECIFIED'), { ok: true });
    assert.equal(host.coordinator.registry.get('alpha')?.state, 'INITIALIZING');
    assert.deepEqual(await clients.heartbeat('alpha', 'RUNNABLE'), { ok: true });
    assert.equal(host.coordinator.registry.get('alpha')?.state, 'RUNNABLE');
  });

  it('applies a reported state only along the lifecycle table; a refused one still counts for presence', async () => {
    await clients.registerAgent(descriptorMessage('alpha'));
    // RFC Appendix C: INITIALIZING may go to RUNNABLE or FAILED only.
    assert.deepEqual(await clients.heartbeat('alpha', 'RUNNING'), { ok: true });
    assert.equal(host.coordinator.registry.get('alpha')?.state, 'INITIALIZING');
    assert.equal(host.coordinator.registry.get('alpha')?.presence, 'online');
    const [refused] = host.coordinator.log.query({ eventType: 'agent.transition_refused' });
    assert.equal(refused.level, 'WARN');
    assert.deepEqual([refused.details.from, refused.details.to], ['INITIALIZING', 'RUNNING']);
  });
});
