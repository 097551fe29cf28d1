import { strict as assert } from 'node:assert';
import { agentInboxSettings } from '../../src/extension/agentInboxSettings';

describe('sw4rm.agents.inboxAckTimeoutMinutes (the ACK timeout of launched agents that pull their inbox)', () => {
  it('defaults to 30 minutes', () => {
    assert.deepEqual(agentInboxSettings({}), { options: { bridgedAckTimeoutMs: 30 * 60_000 }, warnings: [] });
  });

  it('takes whole minutes from 1 to 1440', () => {
    assert.deepEqual(agentInboxSettings({ inboxAckTimeoutMinutes: 1 }).options, { bridgedAckTimeoutMs: 60_000 });
    assert.deepEqual(agentInboxSettings({ inboxAckTimeoutMinutes: 1440 }).options, {
      bridgedAckTimeoutMs: 24 * 3_600_000,
    });
  });

  it('clamps a value out of range and ignores one that is not a whole number, saying so', () => {
    const low = agentInboxSettings({ inboxAckTimeoutMinutes: 0 });
    assert.deepEqual(low.options, { bridgedAckTimeoutMs: 60_000 });
    assert.deepEqual(low.warnings, ['sw4rm.agents.inboxAckTimeoutMinutes 0 is outside 1–1440; using 1.']);
    assert.equal(agentInboxSettings({ inboxAckTimeoutMinutes: 10_000 }).options.bridgedAckTimeoutMs, 24 * 3_600_000);
    for (const bad of ['30', 2.5, null, true]) {
      const read = agentInboxSettings({ inboxAckTimeoutMinutes: bad });
      assert.equal(read.options.bridgedAckTimeoutMs, 30 * 60_000, String(bad));
      assert.deepEqual(read.warnings, ['sw4rm.agents.inboxAckTimeoutMinutes must be a whole number; using 30.']);
    }
  });
});
