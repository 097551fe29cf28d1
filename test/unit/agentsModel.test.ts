// The Agents view's rows as plain data (src/extension/agentsModel.ts): what survives a narrow side bar comes first.
import { strict as assert } from 'node:assert';
import type { AgentRecord, InboxStats } from '../../src/core/api';
import { agentRow } from '../../src/extension/agentsModel';

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);
const time = (ms: number | null) => (ms === null ? 'never' : new Date(ms).toISOString().slice(11, 19));

function agent(
  overrides: { name?: string; agentId?: string; state?: string; presence?: AgentRecord['presence'] } = {},
): AgentRecord {
  const agentId = overrides.agentId ?? 'e2e-agent-1';
  return {
    descriptor: {
      agentId,
      name: overrides.name ?? 'E2E Agent',
      description: '',
      capabilities: ['echo'],
      communicationClass: 'STANDARD',
      modalitiesSupported: [],
      reasoningConnectors: [],
      publicKey: '',
      registrationType: 'STANDARD_AGENT',
      maxConcurrentDelegations: 0,
    },
    state: overrides.state ?? 'RUNNABLE',
    registeredAt: T0,
    updatedAt: T0,
    lastHeartbeatAt: T0,
    health: {},
    presence: overrides.presence ?? 'online',
  } as AgentRecord;
}

const INBOX: InboxStats = {
  agentId: 'e2e-agent-1',
  queueDepth: 2,
  capacity: 10,
  inFlight: 1,
  queued: 1,
  streaming: true,
  lastDeliveryAt: T0 + 1000,
};

describe('Agents view rows', () => {
  it('puts the name and the state in the label, the id, connection and inbox in the description', () => {
    const row = agentRow(agent(), INBOX, time);
    assert.equal(row.label, 'E2E Agent · RUNNABLE');
    assert.equal(row.description, 'e2e-agent-1 · connected · 2/10 queued · 1 in flight');
  });

  it('does not repeat the id when it is the name, and leaves out the inbox while it is unknown', () => {
    const row = agentRow(
      agent({ name: 'agent-7', agentId: 'agent-7', state: 'INITIALIZING', presence: 'unavailable' }),
      undefined,
      time,
    );
    assert.equal(row.label, 'agent-7 · INITIALIZING');
    assert.equal(row.description, 'unavailable (missed heartbeats)');
  });

  it('keeps every fact in the tooltip, one a line', () => {
    assert.equal(
      agentRow(agent({ presence: 'disconnected' }), INBOX, time).tooltip,
      [
        'id: e2e-agent-1',
        'state: RUNNABLE',
        'connection: disconnected',
        'class: STANDARD',
        'capabilities: echo',
        'last heartbeat: 03:04:05',
        'unread messages: 2',
        'inbox: 2/10 queued · 1 in flight · streaming: yes · last delivery: 03:04:06',
      ].join('\n'),
    );
  });
});
