import { strict as assert } from 'node:assert';
import { toolOptionsOf, toolSettings } from '../../src/extension/toolSettings';

describe('sw4rm.tools.* settings (the process provider)', () => {
  it('are off by default', () => {
    const s = toolSettings({});
    assert.deepEqual(s.process, { enabled: false, acceptUnenforcedNetworkPolicy: false });
    assert.deepEqual(s.warnings, []);
    assert.deepEqual(toolOptionsOf(s), { process: { enabled: false, acceptUnenforcedNetworkPolicy: false } });
  });

  it('turn on only with true', () => {
    assert.deepEqual(
      toolOptionsOf(toolSettings({ processEnabled: true, processAcceptUnenforcedNetworkPolicy: true })),
      { process: { enabled: true, acceptUnenforcedNetworkPolicy: true } },
    );
    assert.deepEqual(toolSettings({ processEnabled: true }).process, {
      enabled: true,
      acceptUnenforcedNetworkPolicy: false,
    });
  });

  it('a value that is not a boolean stays off and is named in the warnings', () => {
    const s = toolSettings({ processEnabled: 'true', processAcceptUnenforcedNetworkPolicy: 1 });
    assert.deepEqual(s.process, { enabled: false, acceptUnenforcedNetworkPolicy: false });
    assert.deepEqual(s.warnings, [
      'sw4rm.tools.process.enabled is not true or false; it stays off.',
      'sw4rm.tools.process.acceptUnenforcedNetworkPolicy is not true or false; it stays off.',
    ]);
  });
});
