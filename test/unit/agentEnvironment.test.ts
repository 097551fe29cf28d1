import { strict as assert } from 'node:assert';
import {
  SERVICE_ADDRESS_VARIABLES,
  agentEnvironment,
  formatEnvironment,
  isLoopback,
} from '../../src/server/agentEnvironment';

describe('agent environment', () => {
  it('gives every service the same address, and the token', () => {
    const env = agentEnvironment('127.0.0.1', 50123, 'tok');
    assert.equal(SERVICE_ADDRESS_VARIABLES.length, 15);
    for (const name of SERVICE_ADDRESS_VARIABLES) assert.equal(env[name], '127.0.0.1:50123');
    assert.equal(env.SW4RM_TOKEN, 'tok');
    assert.equal(Object.keys(env).length, 16);
  });

  it('leaves the token out when auth is off', () => {
    assert.equal('SW4RM_TOKEN' in agentEnvironment('127.0.0.1', 1, undefined), false);
  });

  it('reaches a wildcard bind through loopback and brackets IPv6 literals', () => {
    assert.equal(agentEnvironment('0.0.0.0', 9, undefined).SW4RM_REGISTRY_ADDR, '127.0.0.1:9');
    assert.equal(agentEnvironment('::', 9, undefined).SW4RM_REGISTRY_ADDR, '[::1]:9');
    assert.equal(agentEnvironment('::1', 9, undefined).SW4RM_REGISTRY_ADDR, '[::1]:9');
  });

  it('formats lines a POSIX shell can paste', () => {
    assert.equal(formatEnvironment({ A: '1', B: 'x:2' }), 'export A=1\nexport B=x:2\n');
  });

  it('knows loopback addresses', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]'])
      assert.equal(isLoopback(host), true, host);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', '', '127.0.0.1.example.com'])
      assert.equal(isLoopback(host), false, host);
  });
});
